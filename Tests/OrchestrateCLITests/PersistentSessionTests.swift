import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Long-lived steps that take items while they run: `add-path`, `close`, and items surviving a
/// kill -9 (the engine side of `sftp.accept-paths`, driven through the C fixture `test.items`).
@Suite(.serialized) struct PersistentSessionTests {
    let h = Harness()

    func sessionWorkflow() -> String {
        h.workflow("""
            version: 1
            name: session
            steps:
              accept: { uses: test.items, with: { file: "\(h.path("received"))" } }
            outputs:
              count: "${{ steps.accept.outputs.count }}"
            """)
    }

    func receivedSources() -> [String] {
        h.lines("received").compactMap { try? JSONValue(parsing: $0)["source"]?.stringValue }
    }

    @Test func pathsAddedWhileItRunsAreTransferredAndCloseEndsIt() throws {
        let process = try h.start(["run", sessionWorkflow()])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        let one = try h.orchestrate(["add-path", runID, "/data/a.mov", "in/a.mov"])
        #expect(one.status == 0, "\(one.stderr)")
        let lines = #"{"source": "/data/b.mov", "destination": "in/b.mov"}"# + "\n" + #"{"source": "c.mov", "destination": "in/c.mov"}"#
        let many = try ChildProcess.run(TestPaths.orchestrate, ["add-path", runID, "--from", "-"] + h.baseArguments, stdin: lines)
        #expect(many.status == 0, "\(many.stderr)")
        #expect(h.waitFor { receivedSources().count == 3 })
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(receivedSources() == ["/data/a.mov", "/data/b.mov", FileManager.default.currentDirectoryPath + "/c.mov"])
        let status = try h.status(runID)
        #expect(status["outputs"]?["count"] == .int(3))
        #expect(status["items"]?.arrayValue?.allSatisfy { $0["status"]?.stringValue == "done" } == true)
        let events = Harness.events(try h.orchestrate(["events", runID]))
        #expect(events.ofType("item.finished").count == 3)
        #expect(events.ofType("item.added").count == 3)
    }

    /// `add-path --from` reads its lines one at a time, all checked before any is added: a file
    /// of 300,000 paths (27 MB) whose last line is bad adds nothing, and the command's peak RSS
    /// stays near that of a one-line file (50 MiB here; reading the whole file and its pairs
    /// first peaked at 145 MiB).
    @Test func addPathFromReadsALineAtATimeAndAddsNothingWhenALineIsBad() throws {
        let process = try h.start(["run", sessionWorkflow()])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        let big = h.path("paths.jsonl")
        _ = FileManager.default.createFile(atPath: big, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: big))
        let count = 300_000
        var chunk = ""
        for i in 0..<count {
            chunk += #"{"source": "/media/shot01/frame_\#(i).dpx", "destination": "incoming/shot01/frame_\#(i).dpx"}"# + "\n"
            if i % 10_000 == 9_999 {
                try handle.write(contentsOf: Data(chunk.utf8))
                chunk = ""
            }
        }
        try handle.write(contentsOf: Data("not json\n".utf8))
        try handle.close()
        let small = h.path("one.jsonl")
        try Data("not json\n".utf8).write(to: URL(fileURLWithPath: small))

        /// add-path's exit status, stderr and peak RSS (KiB), measured by a Python parent.
        func addPath(_ file: String) throws -> (status: Int, stderr: String, rss: Int) {
            let script = """
                import json, resource, subprocess, sys
                p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
                print(json.dumps({"status": p.returncode, "stderr": p.stderr,
                                  "rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
                """
            let result = try ChildProcess.run(try PythonVenv.python(), ["-c", script, TestPaths.orchestrate.path, "add-path", runID,
                                                                        "--from", file] + h.baseArguments)
            let answer = try JSONValue(parsing: result.stdout)
            return (Int(answer["status"]?.intValue ?? -1), answer["stderr"]?.stringValue ?? "", Int(answer["rss"]?.intValue ?? 0))
        }
        let one = try addPath(small)
        let many = try addPath(big)
        #expect(one.status == 2 && many.status == 2, "\(many.stderr)")
        #expect(many.stderr.contains("paths.jsonl:\(count + 1): expected"), "\(many.stderr)")
        #expect(try h.status(runID)["items"]?.arrayValue?.isEmpty ?? true, "nothing added")
        #expect(many.rss < one.rss + 40 * 1024, "peak RSS \(many.rss) KiB for 300,000 lines, \(one.rss) KiB for one")
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
    }

    /// `add-path --from` journals its paths a batch to a transaction (`SessionPaths.batchSize`,
    /// 1,000), not one each: 2,001 paths make 3 transactions. Counted from the store: on
    /// PostgreSQL the transactions that wrote the item rows (`xmin`), on SQLite the items'
    /// `added_at` (one per transaction). Every path is numbered in order, journaled with its
    /// `item.added` and printed (one JSON line each, in order).
    @Test func addPathFromJournalsItsPathsInBatches() throws {
        let id = try #require(try h.orchestrate(["submit", sessionWorkflow()]).stdout.split(separator: "\n").first.map(String.init))
        let count = 2_001
        let file = h.dir.write("paths.jsonl", (0..<count).map {
            #"{"source": "/media/frame_\#($0).dpx", "destination": "in/frame_\#($0).dpx"}"#
        }.joined(separator: "\n") + "\n \t\r\n\u{00A0}\n").path  // blank lines (ASCII or not) are skipped
        let added = try h.orchestrate(["add-path", id, "--from", file, "--json"])
        #expect(added.status == 0, "\(added.stderr)")
        let printed = Harness.events(added).map { $0["item"]?["source"]?.stringValue ?? "" }
        #expect(printed == (0..<count).map { "/media/frame_\($0).dpx" })
        let transactions = try h.storeSQL(h.storeURL == nil
            ? "SELECT count(DISTINCT added_at) FROM items WHERE run_id = '\(id)'"
            : "SELECT count(DISTINCT xmin::text) FROM items WHERE run_id = '\(id)'")
        #expect(transactions == "3", "\(count) paths in \(transactions) transactions")
        let numbered = try h.storeSQL("SELECT json FROM items WHERE run_id = '\(id)' ORDER BY seq")
            .split(separator: "\n").map { try JSONValue(parsing: String($0))["source"]?.stringValue ?? "" }
        #expect(numbered == printed)
        #expect(try h.storeSQL("SELECT min(seq) || ' ' || max(seq) FROM items WHERE run_id = '\(id)'") == "1 \(count)")
        let events = Harness.events(try h.orchestrate(["events", id, "--json"]))
        #expect(events.ofType("item.added").count == count)
    }

    /// An item's progress is shown live but journaled once a second from its first report and at
    /// its end: an item that takes half a second (ten reports) journals one `item.progress`, its
    /// last (the first report used to be journaled at once).
    @Test func itemProgressIsJournaledOnceASecondAndAtTheEnd() throws {
        let process = try h.start(["run", h.workflow("""
            version: 1
            name: session
            steps:
              accept: { uses: test.items, with: { file: "\(h.path("received"))", item_ms: 500 } }
            """)])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        #expect(try h.orchestrate(["add-path", runID, "/data/a.mov", "in/a.mov"]).status == 0)
        #expect(h.waitFor { receivedSources().count == 1 })
        #expect(try h.orchestrate(["close", runID]).status == 0)
        process.waitUntilExit()
        let progress = Harness.events(try h.orchestrate(["events", runID, "--json"])).ofType("item.progress")
        #expect(progress.count == 1, "\(progress)")
        #expect(progress.last?["data"]?["bytes_done"] == progress.last?["data"]?["bytes_total"])
    }

    @Test func pathsAddedBeforeACrashAreTransferredOnResumeExactlyOnce() throws {
        let process = try h.start(["run", sessionWorkflow()])
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        #expect(try h.orchestrate(["add-path", runID, "/data/1", "1"]).status == 0)
        // Kill once the item is journaled as done (killed between its effect and item_done, an
        // item is handed out again: at least once, by design).
        #expect(h.waitFor { (try? h.status(runID)["items"]?[0]?["status"]?.stringValue) == "done" })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // Added while nothing runs: stored, transferred on resume.
        for n in 2...4 { #expect(try h.orchestrate(["add-path", runID, "/data/\(n)", "\(n)"]).status == 0) }
        #expect(try h.orchestrate(["close", runID]).status == 0)
        let resumed = try h.orchestrate(["resume", runID])
        #expect(resumed.status == 0, "\(resumed.stdout)\n\(resumed.stderr)")
        #expect(receivedSources() == ["/data/1", "/data/2", "/data/3", "/data/4"])
    }

    @Test func addPathNeedsASessionStep() throws {
        let file = h.workflow("""
            version: 1
            name: plain
            steps:
              wait: { uses: test.sleep, with: { ms: 3000 } }
            """)
        let process = try h.start(["run", file])
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        #expect(h.waitFor { ((try? h.runIDs()) ?? []).count == 1 })
        let runID = try #require(try h.runIDs().first)
        let result = try h.orchestrate(["add-path", runID, "/a", "b"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("has no step that accepts paths"))
    }
}
