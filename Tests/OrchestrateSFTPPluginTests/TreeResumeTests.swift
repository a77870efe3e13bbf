import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// An image sequence (3,000 small files) killed with -9 at about 60 %, then resumed: the files
/// that were in place are not sent again (counted at the receiving side: a file sent again is a
/// new partial renamed into place, so a new inode or change time), the rest arrive, and the
/// resume starts moving files at once. The figures at 100,000 files are bench/scale/trees.py's.
@Suite(.serialized) struct TreeResumeTests {
    let peer: SSHDPeer
    let h = Harness()
    let known: String
    static let files = 3000
    /// Files in flight at once (the step's `parallel`): at most these can have been renamed into
    /// place after the last checkpoint that a kill -9 let through.
    static let parallel = 8

    init() throws {
        peer = try SSHDPeer()
        known = try peer.knownHosts()
    }

    /// 3,000 frames of 1–2 KiB in three shots.
    func sequence() -> String {
        let tree = h.path("frames")
        for shot in 0 ..< 3 { try? FileManager.default.createDirectory(atPath: "\(tree)/shot\(shot)", withIntermediateDirectories: true) }
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for i in 0 ..< Self.files {
            var bytes = [UInt8](repeating: 0, count: 1024 + (i * 37) % 1024)
            for j in bytes.indices { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; bytes[j] = UInt8(truncatingIfNeeded: seed) }
            _ = FileManager.default.createFile(atPath: "\(tree)/shot\(i % 3)/frame_\(String(format: "%05d", i)).dpx", contents: Data(bytes))
        }
        return tree
    }

    /// The complete files under `root` (partials left out) with what tells a rewrite apart: the
    /// inode and the change time.
    static func identities(_ root: String) -> [String: [Int]] {
        var out: [String: [Int]] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return out }
        for case let relative as String in walker where !relative.hasSuffix(".partial") {
            var info = stat()
            guard lstat("\(root)/\(relative)", &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            out[relative] = [Int(info.st_ino), info.st_ctim.tv_sec, info.st_ctim.tv_nsec]
        }
        return out
    }

    /// Waits until the files under `root` stop changing (the server applies what was in flight
    /// when the client died), then returns them.
    static func settled(_ root: String) -> [String: [Int]] {
        var last = identities(root)
        while true {
            Thread.sleep(forTimeInterval: 0.5)
            let now = identities(root)
            if now == last { return now }
            last = now
        }
    }

    func flow(_ uses: String, source: String, destination: String) -> String {
        h.workflow("""
            version: 1
            name: frames
            steps:
              move:
                uses: \(uses)
                with:
                  source: \(source)
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  parallel: \(Self.parallel)
                  \(peer.connection(knownHosts: known))
            """, name: "\(uses).yaml")
    }

    /// Runs `workflow`, kills it with -9 once `receiving` holds 1,800 files, resumes it; checks
    /// that no file in place at the kill was sent again beyond those in flight, and returns what
    /// the resume logged.
    func killAndResume(_ workflow: String, receiving: String, source: String) throws {
        let process = try h.start(["run", workflow, "--json"])
        #expect(h.waitFor(120) { Self.identities(receiving).count >= Self.files * 6 / 10 || !process.isRunning })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let atKill = Self.settled(receiving)
        #expect(atKill.count >= Self.files * 6 / 10 && atKill.count < Self.files, "killed with \(atKill.count) files in place")
        let runID = try #require(try h.runIDs().last)
        let started = Date()
        let resume = try h.orchestrate(["resume", runID, "--json"])
        #expect(resume.status == 0, "\(resume.stdout.suffix(2000))\n\(resume.stderr)")
        let after = Self.identities(receiving)
        #expect(after.count == Self.files)
        let resent = atKill.filter { after[$0.key] != $0.value }.map(\.key)
        #expect(resent.count <= Self.parallel, "\(resent.count) of the \(atKill.count) files in place were sent again: \(resent.prefix(10))")
        // The checkpoint knew the rest: the resume says how many it skips.
        let skipped = Harness.events(resume).compactMap { $0["data"]?["message"]?.stringValue }
            .compactMap { $0.hasSuffix("files already transferred") ? Int($0.split(separator: " ")[0]) : nil }.first ?? 0
        #expect(skipped >= atKill.count - Self.parallel, "the resume skipped \(skipped) of \(atKill.count)")
        print("tree of \(Self.files): kill -9 with \(atKill.count) in place, \(resent.count) sent again, resume \(Date().timeIntervalSince(started)) s")
        for (relative, _) in after.prefix(50) {
            #expect(Harness.sameBytes("\(source)/\(relative)", "\(receiving)/\(relative)"), "\(relative)")
        }
    }

    /// The tree step's checkpoint, as stored (sqlite3 on the state file: cheap to poll).
    func checkpoint() -> String {
        let result = try? ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"),
                                           ["-cmd", ".timeout 5000", h.state + "/state.sqlite", "SELECT data FROM checkpoints"])
        return result?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// How many files the checkpoint says are done beyond its in-order count, read from either
    /// form (ranges, or a list).
    static func doneBeyond(_ checkpoint: String) -> Int {
        guard let value = try? JSONValue(parsing: checkpoint) else { return 0 }
        let ranges = value["ranges"]?.arrayValue?.compactMap { r in r[1]?.intValue.flatMap { b in r[0]?.intValue.map { Int(b - $0 + 1) } } }
        return (ranges ?? []).reduce(0, +) + (value["also"]?.arrayValue?.count ?? 0)
    }

    /// One big file first in the order (just below the size that splits it into ranges) holds
    /// the count of files done in order back while the other workers finish small ones by the
    /// hundred: the checkpoint, rewritten at every file, stays a few ranges, not a list of every
    /// file done beyond it (each save costing more than the one before: quadratic over a tree);
    /// killed then, the resume still skips what was in place.
    @Test func aSlowFileAheadOfHundredsKeepsTheCheckpointSmall() throws {
        let tree = h.path("slow-first")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: "\(tree)/a-slow.bin", contents: nil)
        #expect(truncate("\(tree)/a-slow.bin", 60 << 20) == 0)  // sparse: read at once, sent in full
        for i in 0 ..< 2000 {
            _ = FileManager.default.createFile(atPath: "\(tree)/f\(String(format: "%04d", i)).dpx", contents: Data(repeating: UInt8(i % 251), count: 64))
        }
        let wf = h.workflow("""
            version: 1
            name: slow-first
            steps:
              move:
                uses: sftp.upload
                with:
                  source: \(tree)
                  destination: slow-first
                  remote_root: \(peer.remoteRoot)
                  parallel: \(Self.parallel)
                  \(peer.connection(knownHosts: known))
            """, name: "slow-first.yaml")
        let remote = "\(peer.remoteRoot)/slow-first"
        let process = try h.start(["run", wf, "--json"])
        var largest = 0, beyond = 0
        #expect(h.waitFor(120) {
            let saved = checkpoint()
            largest = max(largest, saved.utf8.count)
            beyond = max(beyond, Self.doneBeyond(saved))
            return beyond >= 60 || FileManager.default.fileExists(atPath: "\(remote)/a-slow.bin") || !process.isRunning
        })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(beyond >= 60, "the big file was done before 60 small ones were (\(beyond))")
        #expect(largest > 0 && largest < 250, "the checkpoint grew to \(largest) bytes with \(beyond) files done beyond its count")
        let atKill = Self.settled(remote)
        let runID = try #require(try h.runIDs().last)
        let resume = try h.orchestrate(["resume", runID])
        #expect(resume.status == 0, "\(resume.stdout.suffix(2000))\n\(resume.stderr)")
        let after = Self.identities(remote)
        #expect(after.count == 2001)
        let resent = atKill.filter { after[$0.key] != $0.value }.map(\.key)
        #expect(resent.count <= Self.parallel, "\(resent.count) of the \(atKill.count) files in place were sent again")
        #expect(Harness.size("\(remote)/a-slow.bin") == 60 << 20)
    }

    @Test func anUploadKilledAt60PercentSendsNoFinishedFileAgain() throws {
        let tree = sequence()
        try killAndResume(flow("sftp.upload", source: tree, destination: "frames"), receiving: "\(peer.remoteRoot)/frames", source: tree)
    }

    @Test func aDownloadKilledAt60PercentFetchesNoFinishedFileAgain() throws {
        let tree = sequence()
        let remote = "\(peer.remoteRoot)/frames-down"
        try FileManager.default.copyItem(atPath: tree, toPath: remote)
        let local = h.path("received")
        try killAndResume(flow("sftp.download", source: "frames-down", destination: local), receiving: local, source: tree)
    }
}
