import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// An SFTP server that lies (tools/sftp_size_liar.py as sshd's sftp subsystem, in front of the
/// real sftp-server) about sizes or in its packets' own length fields: downloads end with a clear
/// error and no destination file, never with a torn or padded one, and never wait or allocate
/// what a length field claims.
@Suite(.serialized) struct LyingServerTests {
    let h = Harness()

    func liar(delta: Int) throws -> SSHDPeer { try liar("\(delta)") }

    func liar(_ lie: String) throws -> SSHDPeer {
        let tool = TestPaths.packageRoot.appendingPathComponent("tools/sftp_size_liar.py").path
        return try SSHDPeer(sftpSubsystem: "/usr/bin/python3 \(tool) \(lie) /usr/lib/openssh/sftp-server")
    }

    func download(_ peer: SSHDPeer, file: String, sha256: String? = nil, transport: SSHTransportKind,
                  with extra: String = "") throws -> ProcessResult {
        let wf = h.workflow("""
            version: 1
            name: liar
            steps:
              down:
                uses: sftp.download
                retry: { max_attempts: 2, initial_interval: 100ms }
                with:
                  source: \(file)
                  destination: \(h.path("got/\(file)"))
                  remote_root: \(peer.remoteRoot)
                  \(sha256.map { "sha256: \"\($0)\"" } ?? "")
                  \(extra)
                  \(peer.connection(knownHosts: try peer.knownHosts(), transport: transport))
            """, name: "liar-\(UUID().uuidString.prefix(6)).yaml")
        return try h.orchestrate(["run", wf, "--json"])
    }

    @Test(arguments: SSHTransportKind.allCases) func aSizeLargerThanTheDataIsAClearErrorAndNoFile(transport: SSHTransportKind) throws {
        let peer = try liar(delta: 1 << 20)
        Harness.randomFile("\(peer.remoteRoot)/claims-more.bin", size: 300_000, seed: 21)
        let result = try download(peer, file: "claims-more.bin", transport: transport)
        #expect(result.status == 1)
        #expect(result.stdout.contains("shrank while it was being downloaded"), "\(result.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/claims-more.bin")), "no destination file")
    }

    /// Lies in the SFTP framing itself, which the plugin parses (it is its own SFTP client).
    @Test(arguments: [("huge-packet", "SFTP packet of 2147483647 bytes"), ("overlong-data", "malformed SFTP packet")], SSHTransportKind.allCases)
    func aLyingPacketIsAClearErrorAndNoFile(lie: (String, String), transport: SSHTransportKind) throws {
        let (lie, message) = lie
        let peer = try liar(lie)
        Harness.randomFile("\(peer.remoteRoot)/framed.bin", size: 300_000, seed: 23)
        let started = Date()
        let result = try download(peer, file: "framed.bin", transport: transport)
        #expect(result.status == 1)
        #expect(result.stdout.contains(message), "\(result.stdout.suffix(2000))")
        #expect(Date().timeIntervalSince(started) < 30, "no wait for bytes a length field promised")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/framed.bin")), "no destination file")
    }

    /// A server's listing names become local paths in a tree download: a listed "../x" (a hostile
    /// or compromised server) is skipped with a warning, never written beside the destination.
    @Test(arguments: SSHTransportKind.allCases)
    func aListedNameThatClimbsIsSkipped(transport: SSHTransportKind) throws {
        let peer = try liar("rename-listed:evil.bin=../outside.bin")
        Harness.randomFile("\(peer.remoteRoot)/tree/a.bin", size: 1000, seed: 31)
        Harness.randomFile("\(peer.remoteRoot)/tree/evil.bin", size: 1000, seed: 32)
        Harness.randomFile("\(peer.remoteRoot)/outside.bin", size: 1000, seed: 33)  // where the lie points
        let result = try download(peer, file: "tree", transport: transport)
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(result.stdout.contains("skipping the entry \\\"../outside.bin\\\""), "\(result.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/outside.bin")), "written beside the destination")
        #expect(Harness.sameBytes("\(peer.remoteRoot)/tree/a.bin", h.path("got/tree/a.bin")))
    }

    /// The first piece of a file is refused (an overlong reply) after the second landed: the
    /// attempt fails without counting the second piece as done, so the retry asks for the first
    /// again (and fails again) instead of resuming from the end of the file and renaming a hole
    /// into place. (A READ stream that dropped the refused piece from those in flight did that.)
    @Test(arguments: SSHTransportKind.allCases)
    func aRefusedPieceIsNeverCountedAsDoneBehindOneThatLanded(transport: SSHTransportKind) throws {
        let peer = try liar("overlong-first-late")
        Harness.randomFile("\(peer.remoteRoot)/late.bin", size: 300_000, seed: 27)  // two READs
        let result = try download(peer, file: "late.bin", transport: transport)
        #expect(result.status == 1, "\(result.stdout.suffix(2000))")
        #expect(result.stdout.contains("malformed SFTP packet"), "\(result.stdout.suffix(2000))")
        #expect(result.stdout.contains("step.retrying"), "the retry must not find the file done: \(result.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/late.bin")), "no destination file")
    }

    /// Not a lie: a server slow to say goodbye (each polite close waits up to a second for it,
    /// then ends the connection). A ranged download closes its eight connections side by side,
    /// so that costs it about one second more than against a prompt server, not eight.
    @Test(arguments: SSHTransportKind.allCases)
    func theConnectionsOfARangedDownloadCloseSideBySide(transport: SSHTransportKind) throws {
        let ranged = "connections: 8\n      parallel_threshold_mib: 1"
        let prompt = try liar(delta: 0)  // the same relay, honest and prompt
        Harness.randomFile("\(prompt.remoteRoot)/ranged.bin", size: 8 << 20, seed: 28)
        var started = Date()
        let promptResult = try download(prompt, file: "ranged.bin", transport: transport, with: ranged)
        let promptTime = Date().timeIntervalSince(started)
        let slow = try liar("slow-goodbye")
        Harness.randomFile("\(slow.remoteRoot)/ranged.bin", size: 8 << 20, seed: 28)
        try FileManager.default.removeItem(atPath: h.path("got/ranged.bin"))
        started = Date()
        let slowResult = try download(slow, file: "ranged.bin", transport: transport, with: ranged)
        let slowTime = Date().timeIntervalSince(started)
        #expect(promptResult.status == 0 && slowResult.status == 0, "\(slowResult.stdout.suffix(2000))")
        #expect(slowTime - promptTime < 4, "closed one after the other: \(promptTime) s, then \(slowTime) s with a slow goodbye")
    }

    /// Not a lie: a server may answer a READ with fewer bytes than asked. The channel writes each
    /// reply's data straight into the partial file at its request's offset; the rest is asked for
    /// again, and the file arrives byte-identical over several ranges and in-flight windows (a
    /// chunk of 64 KiB keeps one request in flight per range, 4 MiB several).
    @Test(arguments: [64, 4096], SSHTransportKind.allCases)
    func shortReadsArriveByteIdenticalOverSeveralRanges(chunkKiB: Int, transport: SSHTransportKind) throws {
        let peer = try liar("short-reads")
        let remote = Harness.randomFile("\(peer.remoteRoot)/stingy.bin", size: 3_000_017, seed: 24)
        let digest = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [remote]).stdout.prefix(64)
        let result = try download(peer, file: "stingy.bin", sha256: String(digest), transport: transport,
                                  with: "connections: 4\n      parallel_threshold_mib: 1\n      chunk_kib: \(chunkKiB)")
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(Harness.sameBytes(remote, h.path("got/stingy.bin")))
    }

    /// One connection, every reply short, several READs in flight (a 1 MiB window of 255 KiB
    /// pieces): at most moments the partial holds pieces beyond a hole (each short reply is asked
    /// again after the pieces in flight). Attempts cut by their timeout must not resume from the
    /// partial's size, which would commit the hole as zeros (no `sha256:` here to catch it): a
    /// file alone resumes from its checkpoint, a file in a tree (moved beside others, without a
    /// checkpoint of its own) from below its partial's size by the most a hole may lie below it
    /// (`FileTransfer.holeMargin`).
    @Test(arguments: SSHTransportKind.allCases, [false, true])
    func anInterruptedStingyDownloadResumesWithoutAHole(transport: SSHTransportKind, inATree: Bool) throws {
        let peer = try liar("short-reads")
        try FileManager.default.createDirectory(atPath: "\(peer.remoteRoot)/dir", withIntermediateDirectories: true)
        let remote = Harness.randomFile("\(peer.remoteRoot)/dir/stingy.bin", size: 6_000_017, seed: 25)
        Harness.randomFile("\(peer.remoteRoot)/dir/small.bin", size: 1_000, seed: 26)
        let wf = h.workflow("""
            version: 1
            name: liar-resume
            steps:
              down:
                uses: sftp.download
                timeout: 1s
                retry: { max_attempts: 30, initial_interval: 100ms, backoff: 1.0 }
                with:
                  source: \(inATree ? "dir" : "dir/stingy.bin")
                  destination: \(h.path(inATree ? "got" : "got/stingy.bin"))
                  remote_root: \(peer.remoteRoot)
                  connections: 1
                  chunk_kib: 2048
                  max_rate: 4M
                  \(peer.connection(knownHosts: try peer.knownHosts(), transport: transport))
            """, name: "liar-resume-\(UUID().uuidString.prefix(6)).yaml")
        let result = try h.orchestrate(["run", wf, "--json"])
        #expect(result.status == 0, "\(result.stdout.suffix(3000))")
        #expect(result.stdout.contains("step.retrying"), "an attempt was cut: \(result.stdout.suffix(3000))")
        #expect(Harness.sameBytes(remote, h.path("got/stingy.bin")))
    }

    @Test(arguments: SSHTransportKind.allCases) func aSizeSmallerThanTheDataIsCaughtByTheChecksum(transport: SSHTransportKind) throws {
        // Reading only the size the server states is all a client can do without reading past
        // it; `sha256:` is what proves the bytes. Without it the file would end where the server said.
        let peer = try liar(delta: -1000)
        let remote = Harness.randomFile("\(peer.remoteRoot)/claims-less.bin", size: 300_000, seed: 22)
        let digest = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [remote]).stdout.prefix(64)
        let result = try download(peer, file: "claims-less.bin", sha256: String(digest), transport: transport)
        #expect(result.status == 1)
        #expect(result.stdout.contains("sha256_mismatch"), "\(result.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/claims-less.bin")), "no destination file")
        #expect(!FileManager.default.fileExists(atPath: h.path("got/claims-less.bin.partial")), "the refused bytes are gone too")
    }

    /// A listing past its bounds ends the tree download with a clear error before anything is
    /// fetched: a tree deeper than 200 folders (`tree_too_deep`: a server may list a folder in
    /// every folder), a folder holding more entries than `max_files` (`listing_too_large`: a
    /// server may answer READDIR without end).
    @Test(arguments: SSHTransportKind.allCases) func aListingPastItsBoundsIsRefused(transport: SSHTransportKind) throws {
        let peer = try SSHDPeer()
        let deep = peer.remoteRoot + "/deep/" + Array(repeating: "d", count: 201).joined(separator: "/")
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        Harness.randomFile(deep + "/bottom.bin", size: 10, seed: 3)
        for i in 0..<30 { Harness.randomFile(peer.remoteRoot + "/wide/f\(i)", size: 10, seed: UInt64(i)) }
        for (source, extra, code) in [("deep", "", "tree_too_deep"), ("wide", "max_files: 20", "listing_too_large")] {
            let result = try download(peer, file: source, transport: transport, with: extra)
            #expect(result.status == 1)
            let failed = Harness.events(result).ofType("step.failed", step: "down").last?["data"]
            #expect(failed?["code"]?.stringValue == code && failed?["kind"]?.stringValue == "permanent", "\(result.stdout.suffix(2000))")
            #expect(!FileManager.default.fileExists(atPath: h.path("got/\(source)")), "nothing fetched")
        }
        #expect(try download(peer, file: "wide", transport: transport, with: "max_files: 30").status == 0)
    }
}
