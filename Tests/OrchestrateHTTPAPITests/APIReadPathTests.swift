import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What keeps the API cheap under load (bench/api): the bound on requests at work (503 with
/// Retry-After beyond it), the read cache that a write through the API empties, and the
/// journal's JSON pages.
@Suite(.serialized) struct APIReadPathTests {
    @Test func overloadIsAnswered503WithRetryAfter() throws {
        // One request at work and none waiting: requests that arrive together are shed.
        let serve = try APIServe(extra: ["--http-max-requests", "1", "--http-max-waiting", "0"])
        let replies = Replies()
        let group = DispatchGroup()
        for i in 0..<64 {  // threads of their own: all 64 at once, not one per core
            group.enter()
            Thread {
                defer { group.leave() }
                if let reply = try? serve.http.request("GET", "/api/runs?limit=\(i + 1)", token: serve.token) { replies.add(reply) }
            }.start()
        }
        group.wait()
        let busy = replies.all.filter { $0.status == 503 }
        #expect(replies.all.count == 64)
        #expect(!busy.isEmpty && replies.all.contains { $0.status == 200 }, "\(replies.all.map(\.status))")
        for reply in busy {
            #expect(reply.headers["retry-after"] == "1")
            #expect(reply.headers["content-type"] == "application/problem+json")
            #expect(reply.json["status"]?.intValue == 503 && reply.json["detail"]?.stringValue?.contains("busy") == true)
        }
        // Event streams are not counted (an EventSource gives up for good on a 503).
        #expect(try SSEReader(port: serve.port).read("/api/events", token: serve.token) { _, _ in false }.status == 200)
        let bad = try ChildProcess.orchestrate(["serve", "--http", "127.0.0.1:0", "--http-max-requests", "0", "--state", serve.dir.file("x").path])
        #expect(bad.status == 64 || bad.status == 2, "\(bad.stderr)")
        #expect(bad.stderr.contains("--http-max-requests must be at least 1"), "\(bad.stderr)")
    }

    @Test func aWriteThroughTheAPIIsReadBackAtOnce() throws {
        let serve = try APIServe()
        let yaml = JSONValue.string("version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n")
        #expect(try serve.post("/api/runs", ["workflow_yaml": yaml, "queue": "parked", "id": "p1"]).status == 201)
        // Read (and so cached), changed through the API, read again at once: the change shows.
        #expect(try serve.status("p1") == "queued")
        #expect(try serve.post("/api/runs/p1/pause").status == 200)
        #expect(try serve.status("p1") == "paused")
        let before = try serve.get("/api/runs").json["runs"]?.arrayValue?.count
        #expect(try serve.post("/api/runs", ["workflow_yaml": yaml, "queue": "parked", "id": "p2"]).status == 201)
        #expect(try serve.get("/api/runs").json["runs"]?.arrayValue?.count == (before ?? 0) + 1)
    }

    @Test func theJournalPagesAsJSON() throws {
        let serve = try APIServe()
        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: two\nsteps:\n  a: { uses: test.noop }\n  b: { uses: test.noop, needs: [a] }\n"]).json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(id) == "succeeded" })
        let all = try #require(serve.get("/api/journal?run=\(id)").json["events"]?.arrayValue)
        #expect(all.first?["type"]?.stringValue == "run.added" && all.last?["type"]?.stringValue == "run.finished")
        #expect(all.allSatisfy { $0["run"]?.stringValue == id })
        // Paged: two at a time, after the last seq seen, gives the same events once each.
        var paged: [JSONValue] = []
        var after: Int64 = 0
        while let page = try serve.get("/api/journal?run=\(id)&after=\(after)&limit=2").json["events"]?.arrayValue, !page.isEmpty {
            paged += page
            after = page.last?["seq"]?.intValue ?? after
        }
        #expect(paged == all)
        // The same as `events RUN` prints.
        let cli = try serve.orchestrate(["events", id]).stdout.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
        #expect(cli == all)
        #expect(try serve.get("/api/journal?run=no-such-run").json["events"] == [])
        #expect(try serve.get("/api/journal?after=-1").status == 400)
        #expect(try serve.get("/api/journal?limit=1001").status == 400)
    }
}

/// Replies collected from several threads.
final class Replies: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [RawHTTP.Reply] = []
    func add(_ reply: RawHTTP.Reply) { lock.withLock { list.append(reply) } }
    var all: [RawHTTP.Reply] { lock.withLock { list } }
}
