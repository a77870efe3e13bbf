import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// Run ids are path segments (`STATE/runs/ID`) and URL segments: one rule (`RunID`) wherever
/// they enter. Hostile ids are refused at `submit --id`; a store holding one from before the
/// rule (put there with sqlite3) gets a clear refusal from every command and from `serve`, and
/// the state directory survives `delete ..`; a run whose directory cannot be made fails once.
@Suite(.serialized) struct RunIDRuleTests {
    let h = Harness()

    func workflow() -> String {
        h.workflow("version: 1\nname: tiny\nsteps:\n  a: { uses: test.noop }\n")
    }

    static let hostileIDs = [".", "..", "a/b", "../x", String(repeating: "a", count: 300), String(repeating: "b", count: 65),
                             "50%", "what?", "back\\slash", "café", "a b", "x\u{7F}", "\u{1B}[31m"]

    @Test func hostileIDsAreRefusedBySubmit() throws {
        let file = workflow()
        for id in Self.hostileIDs {
            let result = try h.orchestrate(["submit", file, "--id", id])
            #expect(result.status == 2, "\(id): \(result.stderr)")
            #expect(result.stderr.contains(RunID.rule), "\(id): \(result.stderr)")
        }
        #expect(try h.runIDs() == [])
        // The longest id allowed, and every allowed character, still work.
        let longest = String(repeating: "z", count: 64)
        for id in [longest, "A.b_c-9", "..a"] {
            let result = try h.orchestrate(["submit", file, "--id", id])
            #expect(result.status == 0, "\(id): \(result.stderr)")
        }
        #expect(Set(try h.runIDs()) == [longest, "A.b_c-9", "..a"])
    }

    /// Ids the engine makes (`submit`, `--batch`, schedules) follow the rule it checks.
    @Test func generatedIDsFollowTheRule() throws {
        let file = workflow()
        let batch = h.dir.write("runs.jsonl", "{}\n{}\n{}\n").path
        #expect(try h.orchestrate(["submit", file, "--batch", batch]).status == 0)
        #expect(try h.orchestrate(["submit", file]).status == 0)
        let ids = try h.runIDs()
        #expect(ids.count == 4 && ids.allSatisfy(RunID.isValid), "\(ids)")
    }

    /// A store made before ids were checked, holding the finished run `..` (made here with
    /// sqlite3): `status`, `delete`, `resume` and the control verbs refuse it with exit status
    /// 2 and say why; `delete ..` no longer removes the state directory (`runs/..`).
    @Test func aStoredHostileIDIsRefusedAndTheStateSurvives() throws {
        guard h.storeURL == nil else { return }  // the state directory's SQLite file
        #expect(try h.orchestrate(["submit", workflow(), "--id", "legacy", "--queue", "parked"]).status == 0)
        _ = try h.storeSQL("UPDATE runs SET id = '..', run_dir = 'runs/..', status = 'succeeded' WHERE id = 'legacy'")
        #expect(try h.storeSQL("SELECT id FROM runs") == "..")
        for command in [["status", ".."], ["delete", ".."], ["resume", ".."], ["cancel", ".."], ["events", ".."]] {
            let result = try h.orchestrate(command)
            #expect(result.status == 2, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("the store holds a run with the id '..' (2 bytes), which is not a valid run id"),
                    "\(command): \(result.stderr)")
            #expect(result.stderr.contains("refuses to act on it"), "\(command): \(result.stderr)")
        }
        #expect(FileManager.default.fileExists(atPath: h.state + "/state.sqlite"))
        #expect(try h.storeSQL("SELECT id FROM runs") == "..")
        // An id that breaks the rule and names no run: the rule alone.
        let unknown = try h.orchestrate(["status", "a%2Fb"])
        #expect(unknown.status == 2 && unknown.stderr.contains("the run id 'a%2Fb' (5 bytes) is not valid: " + RunID.rule), "\(unknown.stderr)")
    }

    /// A queued run with a stored hostile id is failed by `serve` once, with the reason, instead
    /// of being claimed again and again; its "directory" (the state directory) is not touched.
    @Test func serveFailsAQueuedHostileIDOnce() throws {
        guard h.storeURL == nil else { return }
        #expect(try h.orchestrate(["submit", workflow(), "--id", "legacy"]).status == 0)
        _ = try h.storeSQL("UPDATE runs SET id = '..', run_dir = 'runs/..' WHERE id = 'legacy'")
        let serve = try h.start(["serve"])
        defer { kill(serve.processIdentifier, SIGTERM); serve.waitUntilExit() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, try h.storeSQL("SELECT status FROM runs WHERE id = '..'") != "failed" {
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(try h.storeSQL("SELECT status FROM runs WHERE id = '..'") == "failed")
        #expect(try h.storeSQL("SELECT error FROM runs WHERE id = '..'").contains("refuses to act on it"))
        Thread.sleep(forTimeInterval: 1)
        #expect(try h.storeSQL("SELECT count(*) FROM events WHERE run_id = '..' AND type = 'run.finished'") == "1")
        #expect(FileManager.default.fileExists(atPath: h.state + "/state.sqlite"))
    }

    /// `runs` is a file, so no run directory can be made: the run fails at once with the
    /// reason, one `run.finished`, and is not claimed again (it was handed back like a store
    /// failure and claimed again in a loop).
    @Test func aRunWhoseDirectoryCannotBeMadeFailsOnce() throws {
        #expect(try h.orchestrate(["submit", workflow(), "--id", "nodir"]).status == 0)
        try? FileManager.default.removeItem(atPath: h.state + "/runs")
        // On a PostgreSQL store nothing has made the state directory yet.
        try FileManager.default.createDirectory(atPath: h.state, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(FileManager.default.createFile(atPath: h.state + "/runs", contents: Data("not a directory".utf8)))
        let serve = try h.start(["serve"])
        defer { kill(serve.processIdentifier, SIGTERM); serve.waitUntilExit() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, (try? h.status("nodir")["status"]?.stringValue) != "failed" {
            Thread.sleep(forTimeInterval: 0.1)
        }
        let status = try h.status("nodir")
        #expect(status["status"]?.stringValue == "failed")
        #expect(status["error"]?.stringValue == "cannot make the run directory \(h.state)/runs/nodir: Not a directory", "\(status)")
        Thread.sleep(forTimeInterval: 1)
        let events = Harness.events(try h.orchestrate(["events", "nodir"]))
        #expect(events.filter { $0["type"]?.stringValue == "run.finished" }.count == 1, "\(events)")
        #expect(events.filter { $0["type"]?.stringValue == "run.started" }.count == 0, "\(events)")
        #expect(serve.isRunning)
    }

    /// Files whose names are `..`-ish or hold odd bytes become runs with generated, valid ids
    /// (the name is an input, never the id).
    @Test func oddWatchedFileNamesBecomeValidIDs() throws {
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        // (Names starting with a dot are hidden and never picked up.)
        let names = ["odd..", "-x..y", "a%2F..%3F?\\é \u{1}"]
        for name in names { #expect(FileManager.default.createFile(atPath: outbox + "/" + name, contents: Data("x".utf8)), "\(name)") }
        let file = h.workflow("""
            version: 1
            name: odd-names
            inputs:
              source: { type: string, required: true }
            on:
              watch:
                path: outbox
                settle: 1s
                inputs: { source: "${{ file.path }}" }
            steps:
              a: { uses: test.noop }
            """, name: "odd.yaml")
        let serve = try h.start(["serve", "--watch", file, "--watch-poll"])
        defer { kill(serve.processIdentifier, SIGTERM); serve.waitUntilExit() }
        let deadline = Date().addingTimeInterval(30)
        var runs: [JSONValue] = []
        while Date() < deadline {
            runs = Harness.events(try h.orchestrate(["list", "--json"]))
            if runs.count == names.count && runs.allSatisfy({ $0["status"]?.stringValue == "succeeded" }) { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let ids = runs.compactMap { $0["id"]?.stringValue }
        #expect(ids.count == names.count && ids.allSatisfy(RunID.isValid), "\(runs)")
        let sources = try ids.map { try h.status($0)["inputs"]?["source"]?.stringValue ?? "" }
        #expect(Set(sources) == Set(names.map { outbox + "/" + $0 }), "\(sources)")
    }
}
