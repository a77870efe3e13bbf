import Foundation
import OrchestrateJSON
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// Named queues and nodes, on one machine: a worker takes only its queues, `list`/`status` say
/// which queue and node, and `add-path` for a run held on another node takes that node's paths.
@Suite(.serialized) struct NodeAndQueueTests {
    let h = Harness()

    func workflow() -> String {
        h.workflow("""
            version: 1
            name: job
            steps:
              only: { uses: test.append, with: { file: "\(h.path("log"))", line: "${{ run.id }}" } }
            """)
    }

    func submit(_ extra: [String]) throws -> String {
        let result = try h.orchestrate(["submit", workflow()] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aWorkerTakesOnlyTheQueuesItServesAndSaysWhichNodeRanWhat() throws {
        let uploads = try submit(["--queue", "uploads"])
        let exports = try submit(["--queue", "exports"])
        let plain = try submit([])
        let serve = try h.start(["serve", "--queue", "uploads", "--queue", "default", "--node", "bay-7"])
        defer {
            kill(serve.processIdentifier, SIGTERM)
            serve.waitUntilExit()
        }
        #expect(h.waitFor { (try? h.status(uploads)["status"]?.stringValue) == "succeeded" })
        #expect(h.waitFor { (try? h.status(plain)["status"]?.stringValue) == "succeeded" })
        Thread.sleep(forTimeInterval: 0.5)
        let waiting = try h.status(exports)
        #expect(waiting["status"]?.stringValue == "queued")
        #expect(waiting["queue"]?.stringValue == "exports")
        let done = try h.status(uploads)
        #expect(done["queue"]?.stringValue == "uploads")
        #expect(done["steps"]?[0]?["node"]?.stringValue == "bay-7")
        #expect(h.lines("log").sorted() == [uploads, plain].sorted())
        let listed = Harness.events(try h.orchestrate(["list", "--queue", "exports", "--json"])).compactMap { $0["id"]?.stringValue }
        #expect(listed == [exports])
    }

    /// `list --workflow NAME --limit N`: the newest N runs of that workflow that match the
    /// other filters, listed oldest first; a limit below 1 is a usage error.
    @Test func listKeepsTheNewestRunsOfAWorkflow() throws {
        let runs = try (0..<3).map { _ in try submit([]) }
        let other = h.workflow("version: 1\nname: other\nsteps:\n  only: { uses: test.noop }\n")
        #expect(try h.orchestrate(["submit", other]).status == 0)
        func listed(_ arguments: [String]) throws -> [String] {
            let result = try h.orchestrate(["list", "--json"] + arguments)
            #expect(result.status == 0, "\(result.stderr)")
            return Harness.events(result).compactMap { $0["id"]?.stringValue }
        }
        #expect(try listed(["--workflow", "job"]) == runs)
        #expect(try listed(["--workflow", "job", "--limit", "2"]) == Array(runs.suffix(2)))
        #expect(try listed(["--workflow", "job", "--status", "queued", "--limit", "1"]) == [runs[2]])
        #expect(try listed(["--workflow", "job", "--status", "failed"]).isEmpty)
        #expect(try listed(["--limit", "10"]).count == 4)
        #expect(try listed(["--id", runs[0], "--limit", "5"]) == [runs[0]])
        #expect(try h.orchestrate(["list", "--limit", "0"]).status == 2)
    }

    @Test func aQueueNameIsChecked() throws {
        let bad = try h.orchestrate(["submit", workflow(), "--queue", "no spaces/here"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("queue name"), "\(bad.stderr)")
    }

    @Test func addPathForARunHeldOnAnotherNodeTakesThatNodesAbsolutePaths() throws {
        let session = h.workflow("""
            version: 1
            name: session
            steps:
              accept: { uses: test.items, with: { file: "\(h.path("received"))" } }
            """, name: "session.yaml")
        let id = try #require(try h.orchestrate(["submit", session]).stdout.split(separator: "\n").first.map(String.init))
        // Another node holds the run (its lease is valid): simulate it in the store.
        let store = try h.openStore()
        #expect(try store.claimRun(id, owner: OwnerIdentity(node: "farm-2", pid: 1, startTime: 1), lease: 60))
        let relative = try h.orchestrate(["add-path", id, "renders/a.mov", "in/a.mov"])
        #expect(relative.status == 2)
        #expect(relative.stderr.contains("farm-2") && relative.stderr.contains("absolute"), "\(relative.stderr)")
        let absolute = try h.orchestrate(["add-path", id, "/media/renders/a.mov", "in/a.mov"])
        #expect(absolute.status == 0, "\(absolute.stderr)")
        // A relative SOURCE anywhere in --from refuses the whole file, before any line is added.
        let mixed = h.dir.write("mixed.jsonl", """
            {"source": "/media/renders/b.mov", "destination": "in/b.mov"}
            {"source": "renders/c.mov", "destination": "in/c.mov"}
            """).path
        let refused = try h.orchestrate(["add-path", id, "--from", mixed])
        #expect(refused.status == 2 && refused.stderr.contains("farm-2"), "\(refused.stderr)")
        let items = try store.items(runID: id, stepID: "accept")
        try #require(items.count == 1)
        #expect(try JSONValue(parsing: items[0].json)["source"]?.stringValue == "/media/renders/a.mov")
        // The item and its event were journaled together.
        #expect(try store.events(runID: id, afterSeq: 0, limit: 10).map(\.type).contains(.itemAdded))
    }
}
