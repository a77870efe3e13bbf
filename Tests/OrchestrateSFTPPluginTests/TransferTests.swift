import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// sftp.upload / sftp.download against a real sshd: trees through the example workflows,
/// byte-identical results through a killed connection and through kill -9 + resume, remote_root
/// confinement.
@Suite(.serialized) struct TransferTests {
    let peer: SSHDPeer
    let h = Harness()
    let known: String

    init() throws {
        peer = try SSHDPeer()
        known = try peer.knownHosts(hashed: true)
    }

    var big: Int { Harness.bigMiB << 20 }

    func workflowInputs(_ source: String, _ destination: String, _ transport: SSHTransportKind = .libssh2) -> [String] {
        ["--input", "transport=\(transport.rawValue)", "--input", "host=127.0.0.1", "--input", "port=\(peer.port)", "--input", "user=\(peer.user)",
         "--input", "key_file=\(peer.userKey)", "--input", "known_hosts=\(known)",
         "--input", "source=\(source)", "--input", "destination=\(destination)", "--input", "remote_root=\(peer.remoteRoot)"]
    }

    @Test(arguments: SSHTransportKind.allCases) func treeUploadAndDownloadThroughTheExampleWorkflows(transport: SSHTransportKind) throws {
        let tree = h.path("tree")
        for i in 0 ..< 20 { Harness.randomFile("\(tree)/d\(i % 3)/sub/f\(i).bin", size: i * 977, seed: UInt64(i + 1)) }
        Harness.randomFile("\(tree)/big.bin", size: 3 << 20, seed: 99)
        let workflows = TestPaths.packageRoot.appendingPathComponent("workflows").path
        let up = try h.orchestrate(["run", "\(workflows)/sftp-upload.yaml"] + workflowInputs(tree, "in/tree", transport))
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        for i in 0 ..< 20 {
            #expect(Harness.sameBytes("\(tree)/d\(i % 3)/sub/f\(i).bin", "\(peer.remoteRoot)/in/tree/d\(i % 3)/sub/f\(i).bin"))
        }
        #expect(Harness.sameBytes("\(tree)/big.bin", "\(peer.remoteRoot)/in/tree/big.bin"))
        let down = try h.orchestrate(["run", "\(workflows)/sftp-download.yaml"] + workflowInputs("in/tree", h.path("back"), transport))
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        let diff = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/diff"), ["-r", tree, h.path("back")])
        #expect(diff.status == 0, "\(diff.stdout)")
        let leftovers = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/find"), [peer.remoteRoot, h.path("back"), "-name", "*.partial"])
        #expect(leftovers.stdout.isEmpty)
    }

    /// Empty directories, nested ones and one inside a directory that also holds a file, go up
    /// and come back (as with `sftp put -r` / `get -r`), and a relative local destination is
    /// created under the current directory.
    @Test func emptyDirectoriesRoundTripAndARelativeDestinationWorks() throws {
        let tree = h.path("tree")
        Harness.randomFile("\(tree)/a/file.bin", size: 1000)
        Harness.randomFile("\(tree)/x/file.bin", size: 10, seed: 2)
        for empty in ["c", "nested/deeper/deepest", "x/y", "a/also-empty"] {
            try FileManager.default.createDirectory(atPath: "\(tree)/\(empty)", withIntermediateDirectories: true)
        }
        let workflows = TestPaths.packageRoot.appendingPathComponent("workflows").path
        let up = try h.orchestrate(["run", "\(workflows)/sftp-upload.yaml"] + workflowInputs(tree, "in/tree"))
        #expect(up.status == 0, "\(up.stdout)\n\(up.stderr)")
        let remoteDiff = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/diff"), ["-r", tree, "\(peer.remoteRoot)/in/tree"])
        #expect(remoteDiff.status == 0, "upload: \(remoteDiff.stdout)")

        // A tree with nothing but its root directory still creates that directory.
        let bare = h.path("bare")
        try FileManager.default.createDirectory(atPath: bare, withIntermediateDirectories: true)
        let upBare = try h.orchestrate(["run", "\(workflows)/sftp-upload.yaml"] + workflowInputs(bare, "in/bare"))
        #expect(upBare.status == 0, "\(upBare.stdout)\n\(upBare.stderr)")
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/bare", isDirectory: &isDirectory) && isDirectory.boolValue)

        // Back, to a destination relative to orchestrate's current directory (`path` inputs are
        // made absolute, so the step's input is written literally here).
        let back = h.workflow("""
            version: 1
            name: back
            steps:
              down:
                uses: sftp.download
                with:
                  source: in/tree
                  destination: back/here/tree
                  remote_root: \(peer.remoteRoot)
                  \(peer.connection(knownHosts: known))
            """, name: "back.yaml")
        let down = try ChildProcess.orchestrate(["run", back, "--state", h.state], currentDirectory: h.dir.url)
        #expect(down.status == 0, "\(down.stdout)\n\(down.stderr)")
        let localDiff = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/diff"), ["-r", tree, h.path("back/here/tree")])
        #expect(localDiff.status == 0, "download: \(localDiff.stdout)")
    }

    @Test func destinationEscapingRemoteRootIsRefused() throws {
        let file = Harness.randomFile(h.path("small.bin"), size: 1000)
        for destination in ["../escape.bin", "a/../../escape.bin", "/../escape.bin"] {
            let wf = h.workflow("""
                version: 1
                name: escape
                steps:
                  up:
                    uses: sftp.upload
                    with:
                      source: \(file)
                      destination: "\(destination)"
                      remote_root: \(peer.remoteRoot)
                      \(peer.connection(knownHosts: known))
                """, name: "escape-\(UUID().uuidString.prefix(6)).yaml")
            let result = try h.orchestrate(["run", wf, "--json"])
            #expect(result.status == 1)
            #expect(result.stdout.contains("escapes remote_root"), "\(result.stdout)")
        }
        #expect(!FileManager.default.fileExists(atPath: peer.dir.file("escape.bin").path))
        #expect(!FileManager.default.fileExists(atPath: peer.dir.file("remote.partial").path))
    }

    /// One step with a bandwidth cap so the test can interrupt it mid-transfer.
    func transferWorkflow(_ uses: String, source: String, destination: String, connections: Int, name: String,
                          transport: SSHTransportKind) -> String {
        h.workflow("""
            version: 1
            name: \(name)
            steps:
              move:
                uses: \(uses)
                retry: { max_attempts: 6, initial_interval: 200ms, backoff: 1.0 }
                with:
                  source: \(source)
                  destination: \(destination)
                  remote_root: \(peer.remoteRoot)
                  connections: \(connections)
                  parallel_threshold_mib: 1
                  chunk_kib: 1024
                  max_rate: \(max(8192, Harness.bigMiB * 1024 / 4) * 1024)
                  \(peer.connection(knownHosts: known, transport: transport))
            outputs:
              resumed: "${{ steps.move.outputs.resumed_bytes }}"
            """, name: "\(name).yaml")
    }

    func resumed(_ runID: String) throws -> Int64 {
        let status = try h.status(runID)
        return status["outputs"]?["resumed"]?.intValue ?? -1
    }

    @Test(arguments: [1, 4], SSHTransportKind.allCases)
    func uploadSurvivesAKilledConnection(connections: Int, transport: SSHTransportKind) throws {
        let source = Harness.randomFile(h.path("big-\(connections).bin"), size: big, seed: 7)
        let remote = "\(peer.remoteRoot)/up-\(connections).bin"
        let wf = transferWorkflow("sftp.upload", source: source, destination: "up-\(connections).bin", connections: connections, name: "up-kill-\(connections)", transport: transport)
        let process = try h.start(["run", wf, "--json"])
        #expect(h.waitFor { Harness.size(remote + ".partial") > Int64(big / 3) })
        #expect(peer.killChildren() >= 1)
        let atKill = Harness.size(remote + ".partial")
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(Harness.sameBytes(source, remote))
        let runID = try #require(try h.runIDs().last)
        let resumedBytes = try resumed(runID)
        if connections == 1 {
            // Resumed from the partial's size: nothing the server had was sent again.
            #expect(resumedBytes >= atKill, "resumed at \(resumedBytes), partial had \(atKill)")
        } else {
            #expect(resumedBytes > 0)
        }
    }

    @Test(arguments: [1, 4], SSHTransportKind.allCases)
    func uploadSurvivesKill9AndResume(connections: Int, transport: SSHTransportKind) throws {
        let source = Harness.randomFile(h.path("k9-\(connections).bin"), size: big, seed: 8)
        let remote = "\(peer.remoteRoot)/k9-\(connections).bin"
        let wf = transferWorkflow("sftp.upload", source: source, destination: "k9-\(connections).bin", connections: connections, name: "up-k9-\(connections)", transport: transport)
        let process = try h.start(["run", wf, "--json"])
        #expect(h.waitFor { FileManager.default.fileExists(atPath: remote + ".partial") })
        if connections == 1 {
            #expect(h.waitFor { Harness.size(remote + ".partial") > Int64(big / 3) })
        } else {
            // A ranged partial is sparse (its size says nothing): wait until the ranges hold ~40%
            // (by time, this depended on how fast each range's connection came up).
            #expect(h.waitFor { TransferTests.heldPerRange(remote + ".partial", size: big, ranges: connections).reduce(0, +) > Int64(big) * 4 / 10 })
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // The ssh children read end of file on their stdin and go (no orphans).
        #expect(h.waitFor(10) { peer.sshClients().isEmpty }, "ssh clients left: \(peer.sshClients())")
        // The server applies what was in flight when the client died; wait until it is done.
        var held = TransferTests.heldPerRange(remote + ".partial", size: big, ranges: connections)
        while true {
            Thread.sleep(forTimeInterval: 0.3)
            let now = TransferTests.heldPerRange(remote + ".partial", size: big, ranges: connections)
            if now == held { break }
            held = now
        }
        let atKill = Harness.size(remote + ".partial")
        let runID = try #require(try h.runIDs().last)
        let resume = try h.orchestrate(["resume", runID])
        #expect(resume.status == 0, "\(resume.stdout)\n\(resume.stderr)")
        #expect(Harness.sameBytes(source, remote))
        let resumedBytes = try resumed(runID)
        if connections == 1 {
            #expect(resumedBytes >= atKill, "resumed at \(resumedBytes), partial had \(atKill)")
        } else {
            // Every range restarts from its last checkpoint: what the server held beyond it is
            // sent again, less than one chunk (1 MiB) per range.
            #expect(resumedBytes > Int64(big / 4), "resumed at \(resumedBytes)")
            let resent = held.reduce(0, +) - resumedBytes
            print("4 ranges, kill -9 at \(held.reduce(0, +)) of \(big) bytes: \(resent) bytes sent again")
            #expect(resent >= -Int64(connections * 4096) && resent < Int64(connections) << 20,
                    "held \(held), resumed from \(resumedBytes): \(resent) bytes sent again")
        }
    }

    /// Bytes the server holds at the start of each range of a ranged (sparse) partial. A range
    /// is written in order and the data is random, so its bytes end at its first all-zero 4 KiB
    /// block (to within one block). The ranges are FileTransfer.plan's: MiB-aligned quarters.
    static func heldPerRange(_ path: String, size: Int, ranges: Int) -> [Int64] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        let step = max(((size / ranges) >> 20) << 20, 1 << 20)
        return (0 ..< ranges).map { index in
            let start = index * step, end = index == ranges - 1 ? size : start + step
            var position = start
            while position < end {
                try? handle.seek(toOffset: UInt64(position))
                let block = handle.readData(ofLength: min(4096, end - position))
                if block.isEmpty || block.allSatisfy({ $0 == 0 }) { break }
                position += block.count
            }
            return Int64(position - start)
        }
    }

    @Test(arguments: [1, 4], SSHTransportKind.allCases)
    func downloadSurvivesAKilledConnectionAndKill9(connections: Int, transport: SSHTransportKind) throws {
        let remote = Harness.randomFile("\(peer.remoteRoot)/down-\(connections).bin", size: big, seed: 9)
        let local = h.path("down-\(connections).bin")
        let wf = transferWorkflow("sftp.download", source: "down-\(connections).bin", destination: local, connections: connections, name: "down-\(connections)", transport: transport)
        let process = try h.start(["run", wf, "--json"])
        #expect(h.waitFor { Harness.size(local + ".partial") > Int64(big / 4) })
        #expect(peer.killChildren() >= 1)
        // Then, in the next attempt, kill -9 orchestrate itself.
        #expect(h.waitFor { (try? String(contentsOfFile: h.path("run.log"), encoding: .utf8))?.contains("resuming") == true })
        Thread.sleep(forTimeInterval: 0.5)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let atKill = Harness.size(local + ".partial")
        let runID = try #require(try h.runIDs().last)
        let resume = try h.orchestrate(["resume", runID])
        #expect(resume.status == 0, "\(resume.stdout)\n\(resume.stderr)")
        #expect(Harness.sameBytes(remote, local))
        let resumedBytes = try resumed(runID)
        if connections == 1 {
            // From the checkpointed in-order end (replies land as they arrive, so the partial's
            // size may lie above a hole): at most a chunk (1 MiB: half in flight, half not yet
            // checkpointed) and the one reply that crossed the half below the partial (a full
            // run measured 1 MiB + 4 KiB once).
            #expect(resumedBytes <= atKill && resumedBytes > atKill - (1 << 20) - (255 << 10),
                    "resumed at \(resumedBytes), partial had \(atKill)")
        } else {
            // The ranges restarted from their checkpoints, not from zero. (How far they had got
            // depends on the machine's speed between the resume and the kill: at 1 GiB, 138 MiB.)
            #expect(resumedBytes > 0, "resumed at \(resumedBytes)")
        }
    }

    /// `run --max-rate` holds across the parallel ranges of one file (4 connections): the
    /// engine's cap reaches the sftp loops through the bandwidth extension. 3 MiB under 1 MiB/s,
    /// with a quarter second of burst, cannot take less than 2.75 s; checked from below only.
    @Test(arguments: SSHTransportKind.allCases) func theRunsMaxRateCapsParallelRanges(transport: SSHTransportKind) throws {
        let source = Harness.randomFile(h.path("capped.bin"), size: 3 << 20, seed: 7)
        let wf = h.workflow("""
            version: 1
            name: capped
            steps:
              move:
                uses: sftp.upload
                with:
                  source: \(source)
                  destination: in/capped.bin
                  remote_root: \(peer.remoteRoot)
                  connections: 4
                  parallel_threshold_mib: 1
                  chunk_kib: 256
                  \(peer.connection(knownHosts: known, transport: transport))
            """, name: "capped.yaml")
        let started = Date()
        let result = try h.orchestrate(["run", wf, "--max-rate", "1M", "--json"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(elapsed >= 2.6, "3 MiB under a 1 MiB/s cap took only \(elapsed) s")
        #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/in/capped.bin"))
    }

    /// Replacing a remote file: the old one stays whole until the new one is verified and in
    /// place (a failed verification leaves it untouched), and nothing is left beside it, not
    /// even the aside file a crash in the replacement window would leave.
    @Test func anOverwriteReplacesTheOldFileOnlyOnceTheNewOneIsInPlace() throws {
        let remote = "\(peer.remoteRoot)/in/over.bin"
        let old = Harness.randomFile(remote, size: 50_000, seed: 11)
        let oldCopy = h.path("old-copy.bin")
        try FileManager.default.copyItem(atPath: old, toPath: oldCopy)
        try Data("stale".utf8).write(to: URL(fileURLWithPath: remote + ".orchestrate-replaced"))
        let source = Harness.randomFile(h.path("new.bin"), size: 70_000, seed: 12)
        func upload(sha256: String?) throws -> ProcessResult {
            let wf = h.workflow("""
                version: 1
                name: overwrite
                steps:
                  up:
                    uses: sftp.upload
                    retry: { max_attempts: 1 }
                    with:
                      source: \(source)
                      destination: in/over.bin
                      remote_root: \(peer.remoteRoot)
                      \(sha256.map { "sha256: \"\($0)\"" } ?? "")
                      \(peer.connection(knownHosts: known))
                """, name: "overwrite-\(UUID().uuidString.prefix(6)).yaml")
            return try h.orchestrate(["run", wf, "--json"])
        }
        let refused = try upload(sha256: String(repeating: "0", count: 64))
        #expect(refused.status == 1)
        #expect(Harness.sameBytes(remote, oldCopy), "a failed replacement leaves the old file as it was")

        let replaced = try upload(sha256: nil)
        #expect(replaced.status == 0, "\(replaced.stdout)\n\(replaced.stderr)")
        #expect(Harness.sameBytes(remote, source))
        let left = try FileManager.default.contentsOfDirectory(atPath: "\(peer.remoteRoot)/in").filter { $0.hasPrefix("over.bin") }
        #expect(left == ["over.bin"], "nothing beside the file: \(left)")
    }

    /// A tree killed while its big file is half sent, then changed before the resume so that its
    /// processing order changes (a small file grows into a ranged one, sorting after the big
    /// one): the old checkpoint's positions now name other files, so it must be ignored, never
    /// used to skip the unfinished big file or to lend its ranges to the grown one.
    @Test func aTreeThatChangedBeforeItsResumeIsNotSkippedByTheOldCheckpoint() throws {
        let tree = h.path("changing")
        for i in 1 ... 5 { Harness.randomFile("\(tree)/s\(i).bin", size: 10_000, seed: UInt64(40 + i)) }
        Harness.randomFile("\(tree)/m.bin", size: 2 << 20, seed: 46)
        let wf = h.workflow("""
            version: 1
            name: changing-tree
            steps:
              up:
                uses: sftp.upload
                with:
                  source: \(tree)
                  destination: changing
                  remote_root: \(peer.remoteRoot)
                  connections: 2
                  parallel_threshold_mib: 1
                  chunk_kib: 128
                  max_rate: 256K
                  \(peer.connection(knownHosts: known))
            """, name: "changing-tree.yaml")
        let process = try h.start(["run", wf, "--json"])
        let remote = "\(peer.remoteRoot)/changing"
        #expect(h.waitFor { (1 ... 5).allSatisfy { FileManager.default.fileExists(atPath: "\(remote)/s\($0).bin") }
                            && Harness.size("\(remote)/m.bin.partial") > 0 })
        Thread.sleep(forTimeInterval: 1)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(!FileManager.default.fileExists(atPath: "\(remote)/m.bin"), "killed before the big file was done")
        // s1 grows past the threshold, as big as m: the order was s1…s5, m; it is now s2…s5, m, s1.
        Harness.randomFile("\(tree)/s1.bin", size: 2 << 20, seed: 47)
        let runID = try #require(try h.runIDs().last)
        let resume = try h.orchestrate(["resume", runID])
        #expect(resume.status == 0, "\(resume.stdout.suffix(2000))\n\(resume.stderr)")
        for name in ["s1", "s2", "s3", "s4", "s5", "m"] {
            #expect(Harness.sameBytes("\(tree)/\(name).bin", "\(remote)/\(name).bin"), "\(name).bin")
        }
    }

    @Test(arguments: SSHTransportKind.allCases) func cancelStopsABlockedTransferWithinASecond(transport: SSHTransportKind) throws {
        let source = Harness.randomFile(h.path("cancel.bin"), size: 16 << 20, seed: 5)
        let remote = "\(peer.remoteRoot)/cancel.bin"
        let wf = h.workflow("""
            version: 1
            name: cancel
            steps:
              move:
                uses: sftp.upload
                with:
                  source: \(source)
                  destination: cancel.bin
                  remote_root: \(peer.remoteRoot)
                  connections: 1
                  chunk_kib: 256
                  max_rate: 256K
                  \(peer.connection(knownHosts: known, transport: transport))
            """, name: "cancel.yaml")
        let process = try h.start(["run", wf, "--json"])
        #expect(h.waitFor { Harness.size(remote + ".partial") > 0 })
        Thread.sleep(forTimeInterval: 0.5)
        let asked = Date()
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let took = Date().timeIntervalSince(asked)
        #expect(process.terminationStatus == 130)
        #expect(took < 1.5, "cancel took \(took) s")
        #expect(!FileManager.default.fileExists(atPath: remote))
        #expect(peer.sshClients().isEmpty, "ssh clients left after the cancel: \(peer.sshClients())")
    }

    /// One name and unit for a step's cap: `max_rate` with a suffix holds (1 MiB at 512 KiB/s,
    /// at least (1 MiB - 128 KiB burst) / 512 KiB = 1.75 s), the deprecated `limit_kibps` still
    /// caps the same (512 KiB/s) and says once in the step's log to use `max_rate: 512K`, and
    /// giving both is refused before any byte moves.
    @Test func maxRateAndItsDeprecatedAliasCapAStep() throws {
        let source = Harness.randomFile(h.path("capped.bin"), size: 1 << 20, seed: 9)
        func upload(_ cap: String, name: String) -> String {
            h.workflow("""
                version: 1
                name: \(name)
                steps:
                  move:
                    uses: sftp.upload
                    with:
                      source: \(source)
                      destination: \(name).bin
                      remote_root: \(peer.remoteRoot)
                      connections: 1
                      chunk_kib: 128
                      \(cap)
                      \(peer.connection(knownHosts: known))
                """, name: "\(name).yaml")
        }
        for (cap, name) in [("max_rate: 512K", "suffixed"), ("limit_kibps: 512", "aliased")] {
            let started = Date()
            let result = try h.orchestrate(["run", upload(cap, name: name), "--json"])
            let took = Date().timeIntervalSince(started)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(took >= 1.7, "\(cap): 1 MiB took only \(took) s")
            #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/\(name).bin"))
            let warnings = result.stdout.components(separatedBy: "'limit_kibps' is deprecated: use max_rate: 512K").count - 1
            #expect(warnings == (name == "aliased" ? 1 : 0), "\(cap): \(warnings) deprecation warnings")
        }
        let both = try h.orchestrate(["run", upload("max_rate: 1M\n      limit_kibps: 512", name: "both"), "--json"])
        #expect(both.status == 1)
        #expect(both.stdout.contains("give max_rate or its deprecated alias limit_kibps, not both"), "\(both.stdout.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/both.bin"))
    }
}
