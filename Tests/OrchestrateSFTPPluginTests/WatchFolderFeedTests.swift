import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A hot folder feeding one persistent SFTP session (`on.watch` with `feed:`), against a real
/// sshd, through a real `serve --watch` that is stopped and started again: 200 files dropped
/// while it runs (five written slowly over seconds, one renamed in, one written under a hidden
/// name and renamed, one deleted before it settled), 50 more while it is stopped. Every settled
/// file is handed over exactly once and only complete (its size at hand-over is its final
/// size), arrives byte-identical, and `after: move-to` moves exactly the ones that succeeded.
@Suite(.serialized) struct WatchFolderFeedTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    var outbox: String { h.path("outbox") }
    var sent: String { h.path("sent") }

    func workflow() throws -> String {
        let known = try peer.knownHosts()
        return h.workflow("""
            version: 1
            name: outbox-feed
            inputs:
              host:        { type: string, required: true }
              port:        { type: integer, required: true }
              user:        { type: string, required: true }
              key_file:    { type: path, required: true }
              known_hosts: { type: path, required: true }
              remote_root: { type: string, required: true }
            on:
              watch:
                path: outbox
                recursive: true
                settle: 1s
                feed: accept
                destination: "in/${{ file.relative }}"
                after: move-to \(sent)
                inputs:
                  host: 127.0.0.1
                  port: \(peer.port)
                  user: \(peer.user)
                  key_file: \(peer.userKey)
                  known_hosts: \(known)
                  remote_root: \(peer.remoteRoot)
            steps:
              connect:
                uses: sftp.connect
                with:
                  host: "${{ inputs.host }}"
                  port: "${{ inputs.port }}"
                  user: "${{ inputs.user }}"
                  key_file: "${{ inputs.key_file }}"
                  known_hosts: "${{ inputs.known_hosts }}"
              accept:
                needs: [connect]
                uses: sftp.accept-paths
                with:
                  session: "${{ steps.connect.outputs.session }}"
                  remote_root: "${{ inputs.remote_root }}"
                  parallel: 4
                  host: "${{ inputs.host }}"
                  port: "${{ inputs.port }}"
                  user: "${{ inputs.user }}"
                  key_file: "${{ inputs.key_file }}"
                  known_hosts: "${{ inputs.known_hosts }}"
            """, name: "outbox-feed.yaml")
    }

    func serve(_ workflow: String, log: String) throws -> Process {
        let process = Process()
        process.executableURL = TestPaths.orchestrate
        process.arguments = ["serve", "--watch", workflow, "--json", "--state", h.state]
        #expect(FileManager.default.createFile(atPath: h.path(log), contents: nil))
        #expect(FileManager.default.createFile(atPath: h.path(log + ".err"), contents: nil))
        process.standardOutput = FileHandle(forWritingAtPath: h.path(log))
        process.standardError = FileHandle(forWritingAtPath: h.path(log + ".err"))
        try process.run()
        return process
    }

    func stop(_ process: Process) {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    /// Every journaled event (all runs), as `orchestrate events --json` prints them.
    func allEvents() throws -> [JSONValue] { Harness.events(try h.orchestrate(["events", "--json"])) }

    /// How many events of `type` the store holds (sqlite3 on the state file: cheap to poll).
    func count(_ type: String) -> Int {
        let result = try? ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"),
                                           ["-cmd", ".timeout 5000", h.state + "/state.sqlite",
                                            "SELECT count(*) FROM events WHERE type = '\(type)'"])
        return Int(result?.stdout.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
    }

    /// A file of `size` deterministic bytes at `relative` under the outbox, written at once.
    @discardableResult
    func drop(_ relative: String, size: Int, seed: Int) -> String {
        Harness.randomFile(outbox + "/" + relative, size: size, seed: UInt64(seed))
    }

    @Test func twoHundredFilesWhileServing50WhileStoppedEachOnceCompleteAndMovedOnlyWhenSent() throws {
        try FileManager.default.createDirectory(atPath: outbox + "/sub/deeper", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: h.path("staging"), withIntermediateDirectories: true)
        // Three files fail on the server: a non-empty folder stands where each would go.
        for k in 0..<3 {
            try FileManager.default.createDirectory(atPath: "\(peer.remoteRoot)/in/fail-\(k).bin/keep", withIntermediateDirectories: true)
        }
        let wf = try workflow()
        let first = try serve(wf, log: "serve1.log")
        defer { if first.isRunning { stop(first) } }
        #expect(h.waitFor(15) { ((try? String(contentsOfFile: h.path("serve1.log.err"), encoding: .utf8)) ?? "").contains("watching") },
                "\((try? String(contentsOfFile: h.path("serve1.log.err"), encoding: .utf8)) ?? "")")

        var expected: [String: Int] = [:]  // relative path -> final size
        // Five written slowly: a chunk every 250 ms for 4 s (each pause shorter than settle).
        let slowWriters = Collected<(String, Date)>()
        let group = DispatchGroup()
        for k in 0..<5 {
            let relative = k % 2 == 0 ? "slow-\(k).bin" : "sub/slow-\(k).bin"
            expected[relative] = 16 * 4096
            DispatchQueue.global().async(group: group) {
                let path = outbox + "/" + relative
                let created = FileManager.default.createFile(atPath: path, contents: nil)
                precondition(created, "could not create \(path)")
                let handle = FileHandle(forWritingAtPath: path)!
                for chunk in 0..<16 {
                    handle.write(Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7 + chunk + k) }))
                    Thread.sleep(forTimeInterval: 0.25)
                }
                try? handle.close()
                slowWriters.add((relative, Date()))
            }
        }
        // One deleted before it settled; one renamed in from outside; one written under a hidden
        // name (ignored) and renamed when complete, as rsync does.
        drop("doomed.bin", size: 5000, seed: 999)
        Harness.randomFile(h.path("staging/renamed.bin"), size: 70_000, seed: 1001)
        Harness.randomFile(outbox + "/.hidden-part.bin.tmp", size: 30_000, seed: 1002)
        Thread.sleep(forTimeInterval: 0.4)
        try FileManager.default.removeItem(atPath: outbox + "/doomed.bin")
        try FileManager.default.moveItem(atPath: h.path("staging/renamed.bin"), toPath: outbox + "/renamed.bin")
        try FileManager.default.moveItem(atPath: outbox + "/.hidden-part.bin.tmp", toPath: outbox + "/sub/after-rsync.bin")
        expected["renamed.bin"] = 70_000
        expected["sub/after-rsync.bin"] = 30_000
        for k in 0..<3 {
            drop("fail-\(k).bin", size: 1000 + k, seed: 500 + k)
            expected["fail-\(k).bin"] = 1000 + k
        }
        // The rest, in bursts, at all depths.
        for i in 0..<190 {
            let relative = ["", "sub/", "sub/deeper/"][i % 3] + "f\(i).bin"
            let size = (i * 7919) % 60_000 + 1
            drop(relative, size: size, seed: i)
            expected[relative] = size
            if i % 40 == 39 { Thread.sleep(forTimeInterval: 0.3) }
        }
        #expect(expected.count == 200)
        group.wait()

        // Stop once every one of them was handed over (some still being sent).
        #expect(h.waitFor(60) { count("watch.handed_over") >= 200 }, "\(count("watch.handed_over")) handed over")
        stop(first)

        // 50 more while nothing watches.
        for i in 200..<250 {
            let relative = (i % 2 == 0 ? "" : "sub/") + "late-\(i).bin"
            let size = (i * 104_729) % 50_000 + 1
            drop(relative, size: size, seed: i)
            expected[relative] = size
        }
        let second = try serve(wf, log: "serve2.log")
        defer { if second.isRunning { stop(second) } }
        #expect(h.waitFor(90) { count("watch.finished") >= 250 },
                "\(count("watch.finished")) finished; serve: \((try? String(contentsOfFile: h.path("serve2.log.err"), encoding: .utf8)) ?? "")")
        // Nothing more is handed over once it has all settled.
        Thread.sleep(forTimeInterval: 2)
        let runs = try h.runIDs()
        #expect(runs.count == 1, "one long run for the whole folder: \(runs)")
        let runID = try #require(runs.first)
        #expect(try h.orchestrate(["close", runID]).status == 0)
        #expect(h.waitFor(30) { (try? h.status(runID))?["status"]?.stringValue == "succeeded" },
                "\((try? h.status(runID))?.jsonText ?? "")")
        stop(second)

        let events = try allEvents()
        let handed = events.ofType("watch.handed_over")
        let handedPaths = handed.compactMap { $0["data"]?["path"]?.stringValue }
        // Exactly once each, and nothing else: not the deleted one, not the hidden name.
        #expect(handedPaths.count == 250, "\(handedPaths.count) hand-offs")
        #expect(Set(handedPaths) == Set(expected.keys),
                "missing \(Set(expected.keys).subtracting(handedPaths).sorted()); extra \(Set(handedPaths).subtracting(expected.keys).sorted())")
        // None early: each was handed over at its final size, the slow ones after their writer finished.
        for event in handed {
            let path = event["data"]?["path"]?.stringValue ?? ""
            #expect(event["data"]?["size"]?.intValue == Int64(expected[path] ?? -1), "\(path) handed over at \(event.jsonText)")
        }
        for (relative, finished) in slowWriters.all {
            let event = handed.first { $0["data"]?["path"]?.stringValue == relative }
            #expect((event?["time"]?.doubleValue ?? 0) >= finished.timeIntervalSince1970, "\(relative) handed over before its writer finished")
        }
        // Sent byte-identical; moved to sent/ only once sent; the three refused stay in the outbox.
        let failed = Set((0..<3).map { "fail-\($0).bin" })
        for relative in expected.keys.sorted() where !failed.contains(relative) {
            #expect(Harness.sameBytes(sent + "/" + relative, "\(peer.remoteRoot)/in/\(relative)"), "\(relative)")
            #expect(!FileManager.default.fileExists(atPath: outbox + "/" + relative), "\(relative) still in the outbox")
        }
        let left = try FileManager.default.subpathsOfDirectory(atPath: outbox).filter {
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: outbox + "/" + $0, isDirectory: &isFolder) && !isFolder.boolValue
        }
        #expect(Set(left) == failed, "left in the outbox: \(left.sorted())")
        let finished = events.ofType("watch.finished")
        #expect(finished.filter { $0["data"]?["succeeded"]?.boolValue == true }.count == 247)
        #expect(Set(finished.filter { $0["data"]?["succeeded"]?.boolValue == false }.compactMap { $0["data"]?["path"]?.stringValue }) == failed)
        let items = try h.status(runID)["items"]?.arrayValue ?? []
        #expect(items.count == 250)
        #expect(items.filter { $0["status"]?.stringValue == "done" }.count == 247)
    }

    /// A night with an outage, on the real binary: sshd is stopped for 20 s while files keep
    /// arriving, then started again. Every file arrives byte-identical and is moved to sent/,
    /// without anyone touching anything: the items that failed while the server refused
    /// connections were held, not left in place.
    @Test func filesDroppedWhileTheServerIsDownArriveOnceItIsBackWithoutAnyoneTouchingThem() throws {
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let wf = try workflow()
        let process = try serve(wf, log: "night.log")
        defer { if process.isRunning { stop(process) } }
        #expect(h.waitFor(15) { ((try? String(contentsOfFile: h.path("night.log.err"), encoding: .utf8)) ?? "").contains("watching") })
        var expected: [String] = []
        for i in 0..<5 {
            drop("evening-\(i).bin", size: 40_000 + i, seed: 700 + i)
            expected.append("evening-\(i).bin")
        }
        #expect(h.waitFor(60) { count("watch.finished") >= 5 }, "\(count("watch.finished")) sent before the outage")

        peer.stop()
        let outage = Date()
        var i = 0
        while Date().timeIntervalSince(outage) < 20 {
            drop("night-\(i).bin", size: 20_000 + 977 * i, seed: 800 + i)
            expected.append("night-\(i).bin")
            i += 1
            Thread.sleep(forTimeInterval: 2)
        }
        #expect(count("item.held") >= 1, "the outage was met: items were held")
        #expect(count("watch.finished") == 5, "nothing given up while the server is down")
        try peer.start()

        #expect(h.waitFor(120) { count("watch.finished") >= expected.count },
                "\(count("watch.finished")) of \(expected.count) finished; serve: \((try? String(contentsOfFile: h.path("night.log.err"), encoding: .utf8))?.suffix(3000) ?? "")")
        for relative in expected {
            #expect(Harness.sameBytes(sent + "/" + relative, "\(peer.remoteRoot)/in/\(relative)"), "\(relative)")
        }
        let events = try allEvents()
        let finished = events.ofType("watch.finished")
        #expect(finished.count == expected.count)
        #expect(finished.allSatisfy { $0["data"]?["succeeded"]?.boolValue == true }, "\(finished.map(\.jsonText))")
        #expect(events.ofType("item.finished").allSatisfy { $0["data"]?["ok"]?.boolValue == true })
        #expect(events.ofType("item.released").count >= 1)
        let runID = try #require(try h.runIDs().first)
        #expect(try h.orchestrate(["close", runID]).status == 0)
        #expect(h.waitFor(30) { (try? h.status(runID))?["status"]?.stringValue == "succeeded" }, "\((try? h.status(runID))?.jsonText ?? "")")
    }
}

final class Collected<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [T] = []
    func add(_ value: T) { lock.withLock { list.append(value) } }
    var all: [T] { lock.withLock { list } }
}
