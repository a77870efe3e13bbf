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
