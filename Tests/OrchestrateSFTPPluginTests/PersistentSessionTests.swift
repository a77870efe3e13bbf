import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// workflows/sftp-persistent.yaml against a real sshd: 200 paths added while it runs, 8 in
/// parallel over one connection, one unreadable, killed halfway and resumed: every readable file exactly once,
/// byte-identical; the unreadable one fails alone with its own event.
@Suite(.serialized) struct PersistentSessionTests {
    let peer: SSHDPeer
    let h = Harness()

    init() throws { peer = try SSHDPeer() }

    /// Runs workflows/sftp-persistent.yaml until it accepts paths.
    func startSession(_ transport: SSHTransportKind, extra: [String] = []) throws -> (process: Process, runID: String) {
        let known = try peer.knownHosts()
        let workflow = TestPaths.packageRoot.appendingPathComponent("workflows/sftp-persistent.yaml").path
        let process = try h.start(["run", workflow, "--json", "--input", "transport=\(transport.rawValue)",
                                   "--input", "host=127.0.0.1", "--input", "port=\(peer.port)", "--input", "user=\(peer.user)",
                                   "--input", "key_file=\(peer.userKey)", "--input", "known_hosts=\(known)",
                                   "--input", "remote_root=\(peer.remoteRoot)", "--input", "parallel=8"] + extra)
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 },
                "\((try? String(contentsOfFile: h.path("run.log"), encoding: .utf8)) ?? "") exited: \(!process.isRunning)")
        let runID = try #require(try h.runIDs().first)
        #expect(h.waitFor { (try? String(contentsOfFile: h.path("run.log"), encoding: .utf8))?.contains("accepting paths") == true })
        return (process, runID)
    }

    @Test(arguments: SSHTransportKind.allCases)
    func twoHundredPathsEightInParallelKilledHalfwayAndResumed(transport: SSHTransportKind) throws {
        let (process, runID) = try startSession(transport)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // 200 paths: file 77 does not exist (unreadable); sizes vary up to ~1.5 MiB.
        var sources: [Int: String] = [:]
        for i in 0 ..< 200 where i != 77 {
            sources[i] = Harness.randomFile(h.path("src/f\(i).bin"), size: (i * 7919) % (3 << 19) + 1, seed: UInt64(i + 10))
        }
        func line(_ i: Int) -> String {
            #"{"source": ""# + h.path("src/f\(i).bin") + #"", "destination": "in/f\#(i).bin"}"#
        }
        // First half while it runs, one command per batch of 20.
        for batch in 0 ..< 5 {
            let text = (batch * 20 ..< batch * 20 + 20).map(line).joined(separator: "\n")
            let added = try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-", "--state", h.state], stdin: text)
            #expect(added.status == 0, "\(added.stderr)")
        }
        // Kill -9 once about half of those arrived.
        #expect(h.waitFor { arrived().count >= 50 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // The second half is added while nothing runs, then close: resume transfers the rest.
        let rest = (100 ..< 200).map(line).joined(separator: "\n")
        #expect(try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-", "--state", h.state], stdin: rest).status == 0)
        #expect(try h.orchestrate(["close", runID]).status == 0)
        let resumed = try h.orchestrate(["resume", runID, "--json"])
        #expect(resumed.status == 0, "\(resumed.stdout.suffix(2000))\n\(resumed.stderr)")

        for (i, source) in sources { #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/in/f\(i).bin"), "f\(i)") }
        #expect(!FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/f77.bin"))
        let partials = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/find"), [peer.remoteRoot, "-name", "*.partial"])
        #expect(partials.stdout.isEmpty)

        let events = Harness.events(try h.orchestrate(["events", runID, "--json"]))
        let finished = events.ofType("item.finished")
        // Exactly once: one item.finished per path, all ok but the unreadable one.
        let itemIDs = Set((try h.status(runID))["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
        let finishedIDs = finished.compactMap { $0["data"]?["item"]?.stringValue ?? $0["data"]?["id"]?.stringValue }
        // Exactly once, with its own event: item.finished is journaled with the item's status.
        #expect(finished.count == 200, "\(finished.count) item.finished events; missing \(itemIDs.subtracting(finishedIDs).sorted()); sample \(finished.first?.jsonText ?? "")")
        // The unreadable path failed on its own, with the error in its event and in the store.
        let failedEvents = finished.filter { $0["data"]?["ok"]?.boolValue == false }
        #expect(failedEvents.count <= 1)
        if let event = failedEvents.first { #expect(event["data"]?["error"]?.stringValue?.contains("f77.bin") == true, "\(event.jsonText)") }
        let status = try h.status(runID)
        #expect(status["outputs"]?["files_failed"]?.intValue ?? 0 <= 1)
        let items = status["items"]?.arrayValue ?? []
        #expect(items.count == 200)
        #expect(items.filter { $0["status"]?.stringValue == "done" }.count == 199, "\(items.prefix(3))")
        let failedItems = items.filter { $0["status"]?.stringValue == "failed" }
        #expect(failedItems.count == 1 && failedItems[0].jsonText.contains("f77.bin"), "\(failedItems.map(\.jsonText))")
        // At least 8 were in flight at once at some point (item.started before item.finished).
        var inFlight = 0, peak = 0
        for event in events {
            if event["type"]?.stringValue == "item.started" { inFlight += 1; peak = max(peak, inFlight) }
            if event["type"]?.stringValue == "item.finished" { inFlight -= 1 }
        }
        #expect(peak >= 8, "peak parallelism \(peak)")
        // ...over the one connection: one login per process (the run, then its resume), not one
        // per worker.
        let log = (try? String(contentsOfFile: peer.dir.file("sshd.log").path, encoding: .utf8)) ?? ""
        let logins = log.components(separatedBy: "Accepted publickey").count - 1
        #expect(logins == 2, "\(logins) logins:\n\(log)")
    }

    /// The session checks each remote folder once, not per file; a folder removed on the server
    /// while the session runs is made again for the next file that goes there.
    @Test(arguments: SSHTransportKind.allCases)
    func aFolderRemovedOnTheServerDuringTheSessionIsMadeAgain(transport: SSHTransportKind) throws {
        let (process, runID) = try startSession(transport)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func add(_ name: String, seed: UInt64) throws -> String {
            let source = Harness.randomFile(h.path("src/\(name)"), size: 70_000, seed: seed)
            let line = #"{"source": ""# + source + #"", "destination": "in/sub/\#(name)"}"#
            #expect(try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-", "--state", h.state], stdin: line).status == 0)
            return source
        }
        let first = try add("first.bin", seed: 31)
        #expect(h.waitFor { FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/sub/first.bin") })
        try FileManager.default.removeItem(atPath: "\(peer.remoteRoot)/in")
        let second = try add("second.bin", seed: 32)
        #expect(h.waitFor { FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/sub/second.bin") },
                "\((try? String(contentsOfFile: h.path("run.log"), encoding: .utf8))?.suffix(2000) ?? "")")
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(Harness.sameBytes(second, "\(peer.remoteRoot)/in/sub/second.bin"))
        #expect(!FileManager.default.fileExists(atPath: "\(peer.remoteRoot)/in/sub/first.bin"), "\(first) went with its folder")
        let status = try h.status(runID)
        #expect(status["outputs"]?["files_done"]?.intValue == 2, "\(status.jsonText)")
    }

    /// Paths added while the server is down fail retryably (connection refused) and are held,
    /// then sent once it is back, without anyone adding them again; a path that fails for good
    /// (its file does not exist) is finished failed at once and never handed out again.
    @Test func pathsAddedDuringAnOutageAreSentWhenTheServerIsBackAndAPermanentFailureIsLeftAlone() throws {
        let (process, runID) = try startSession(.libssh2)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        func add(_ name: String, seed: UInt64?) throws -> String {
            let source = seed.map { Harness.randomFile(h.path("src/\(name)"), size: 90_000, seed: $0) } ?? h.path("src/\(name)")
            let line = #"{"source": ""# + source + #"", "destination": "in/\#(name)"}"#
            #expect(try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-", "--state", h.state], stdin: line).status == 0)
            return source
        }
        func events() throws -> [JSONValue] { Harness.events(try h.orchestrate(["events", runID, "--json"])) }
        func itemID(_ name: String) throws -> String? {
            try events().ofType("item.added").first { $0["data"]?["value"]?["source"]?.stringValue?.hasSuffix("/\(name)") == true }?["data"]?["item"]?.stringValue
        }
        let before = try add("before.bin", seed: 41)
        _ = try add("missing.bin", seed: nil)
        #expect(h.waitFor { arrived().contains("before.bin") })
        let missing = try #require(try itemID("missing.bin"))
        #expect(h.waitFor { ((try? events()) ?? []).ofType("item.finished").contains { $0["data"]?["item"]?.stringValue == missing } })

        peer.stop()
        let during = [try add("during-0.bin", seed: 42), try add("during-1.bin", seed: 43)]
        #expect(h.waitFor(30) { ((try? events()) ?? []).ofType("item.held").count >= 1 },
                "\((try? String(contentsOfFile: h.path("run.log"), encoding: .utf8))?.suffix(3000) ?? "")")
        Thread.sleep(forTimeInterval: 3)
        #expect(!arrived().contains("during-0.bin") && process.isRunning)
        try peer.start()
        #expect(h.waitFor(60) { arrived().contains("during-0.bin") && arrived().contains("during-1.bin") },
                "\((try? String(contentsOfFile: h.path("run.log"), encoding: .utf8))?.suffix(3000) ?? "")")
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        #expect(Harness.sameBytes(before, "\(peer.remoteRoot)/in/before.bin"))
        for (k, source) in during.enumerated() { #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/in/during-\(k).bin")) }
        let all = try events()
        let finished = all.ofType("item.finished")
        #expect(finished.count == 4, "each item finished once: \(finished.map(\.jsonText))")
        #expect(finished.filter { $0["data"]?["ok"]?.boolValue == false }.compactMap { $0["data"]?["item"]?.stringValue } == [missing])
        #expect(all.ofType("item.started").filter { $0["data"]?["item"]?.stringValue == missing }.count == 1,
                "the permanent failure was not tried again")
        #expect(all.ofType("item.released").count >= 1)
        let items = try h.status(runID)["items"]?.arrayValue ?? []
        #expect(items.filter { $0["status"]?.stringValue == "done" }.count == 3, "\(items.map(\.jsonText))")
    }

    /// A file a session is sending is first-class while it moves: `status --json` shows it
    /// `running` with its size, bytes and rate (the store keeps it `queued` until it ends), the
    /// run's `transfer.bytes_done` counts the session's bytes, and `status` prints the file's
    /// figures. 24 MiB under `--max-rate 8M`: about 3 s of transfer to look at.
    @Test func aFileBeingSentIsRunningWithItsSizeBytesAndRateAndCountsInTheTransfer() throws {
        let (process, runID) = try startSession(.openssh, extra: ["--max-rate", "8M"])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let size = 24 << 20
        let source = Harness.randomFile(h.path("src/big.bin"), size: size, seed: 41)
        let line = #"{"source": ""# + source + #"", "destination": "in/big.bin"}"#
        #expect(try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-", "--state", h.state], stdin: line).status == 0)

        var seen: JSONValue = .null
        #expect(h.waitFor(20) {
            guard let status = try? h.status(runID), let item = status["items"]?.arrayValue?.first else { return false }
            seen = status
            return item["status"]?.stringValue == "running" && (item["bytes_done"]?.intValue ?? 0) > 0 && (item["rate"]?.doubleValue ?? 0) > 0
        }, "never running with bytes and a rate: \(seen.jsonText)")
        let item = try #require(seen["items"]?.arrayValue?.first)
        #expect(item["bytes_total"]?.intValue == Int64(size), "its size: \(item.jsonText)")
        let rate = (item["rate"]?.doubleValue ?? 0) / 1_048_576
        #expect(rate > 4 && rate < 11, "\(rate) MiB/s behind an 8 MiB/s cap")
        #expect((seen["transfer"]?["bytes_done"]?.intValue ?? 0) > 0, "the session's bytes in the run's transfer: \(seen.jsonText)")
        let text = try h.orchestrate(["status", runID]).stdout
        #expect(text.contains("1 running") && text.contains("MiB / 24.0 MiB"), "\(text)")

        #expect(h.waitFor(30) { (try? h.status(runID))?["transfer"]?["bytes_done"]?.intValue == Int64(size) },
                "\((try? h.status(runID))?.jsonText ?? "")")
        let done = try h.status(runID)
        #expect(done["items"]?.arrayValue?.first?["status"]?.stringValue == "done")
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
        #expect(Harness.sameBytes(source, "\(peer.remoteRoot)/in/big.bin"))
    }

    func arrived() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "\(peer.remoteRoot)/in")) ?? []).filter { !$0.hasSuffix(".partial") }
    }
}
