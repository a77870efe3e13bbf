import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A persistent session holding more items than one answer should carry: the run's detail (API
/// and `status`) counts them all and pages through them, never one answer with every item.
@Suite(.serialized) struct ItemPagingTests {
    static let count = 250

    /// A finished session of `count` items added over HTTP, in the order `/data/f0000`….
    func session(_ serve: APIServe) throws -> String {
        let received = serve.dir.file("received").path
        let submitted = try serve.post("/api/runs", ["workflow_yaml": .string(
            "version: 1\nname: session\nsteps:\n  accept: { uses: test.items, with: { file: \"\(received)\" } }\n")])
        let id = try #require(submitted.json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(id) == "running" })
        let paths: [JSONValue] = (0 ..< Self.count).map { ["source": .string(Self.source($0)), "destination": .string("in/\($0)")] }
        #expect(try serve.post("/api/runs/\(id)/paths", ["paths": .array(paths)]).status == 201)
        #expect(try serve.post("/api/runs/\(id)/close").status == 200)
        #expect(try serve.waitFor(60) { try serve.status(id) == "succeeded" })
        return id
    }

    static func source(_ n: Int) -> String { "/data/f" + String(format: "%04d", n) }

    static func sources(_ detail: JSONValue) -> [String] {
        detail["items"]?.arrayValue?.compactMap { $0["item"]?["source"]?.stringValue } ?? []
    }

    /// The run page's stream (`items=live`) leaves out the item events journaled before it
    /// opened: a session of 100,000 files replayed 600,000 of them (162 MB) before it was live.
    /// The steps' events still come from the start, and item events after it opened come.
    @Test func aRunStreamWithLiveItemsLeavesOutTheItemEventsAlreadyJournaled() throws {
        let serve = try APIServe()
        let id = try session(serve)
        let whole = try serve.streamText("/api/runs/\(id)/events") { $0.contains("run.finished") }
        #expect(whole.components(separatedBy: "\"item.added\"").count - 1 == Self.count, "\(whole.suffix(500))")
        let live = try serve.streamText("/api/runs/\(id)/events?items=live") { $0.contains("run.finished") }
        #expect(live.contains("step.started") && live.contains("run.finished"), "\(live.suffix(500))")
        #expect(!live.contains("\"item."), "\(live.suffix(500))")
        #expect(live.utf8.count * 10 < whole.utf8.count, "\(live.utf8.count) bytes against \(whole.utf8.count)")
        #expect(try serve.get("/api/runs/\(id)/events?items=all").status == 400)
    }

    @Test func theRunDetailCarriesAPageOfItemsWithCountsAndACursor() throws {
        let serve = try APIServe()
        let id = try session(serve)

        // Without parameters: the first 100, every item counted, and where the next page starts.
        let first = try serve.get("/api/runs/\(id)").json
        #expect(Self.sources(first) == (0 ..< 100).map(Self.source))
        #expect(first["items_total"]?.intValue == Int64(Self.count))
        #expect(first["item_counts"]?["accept"]?["done"]?.intValue == Int64(Self.count))
        #expect(first["item_counts"]?["accept"]?["queued"]?.intValue == 0)
        #expect(first["items_next"]?.stringValue != nil)

        // Page by page: every item once, in the order added; the last page has no cursor.
        var seen: [String] = [], cursor: String? = nil, pages = 0
        repeat {
            let query = "?items_limit=60" + (cursor.map { "&items_after=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) } ?? "")
            let page = try serve.get("/api/runs/\(id)" + query)
            #expect(page.status == 200, "\(page.body)")
            #expect((page.json["items"]?.arrayValue?.count ?? 0) <= 60)
            seen += Self.sources(page.json)
            cursor = page.json["items_next"]?.stringValue
            pages += 1
        } while cursor != nil && pages < 10
        #expect(seen == (0 ..< Self.count).map(Self.source))
        #expect(pages == 5)

        // The last ones.
        let last = try serve.get("/api/runs/\(id)?items_last=true&items_limit=10").json
        #expect(Self.sources(last) == (Self.count - 10 ..< Self.count).map(Self.source))
        #expect(last["items_next"] == nil)
        // items_last wins over a cursor beside it (the document cannot forbid the pair).
        let lastWithCursor = try serve.get("/api/runs/\(id)?items_last=true&items_limit=10&items_after=1:accept").json
        #expect(Self.sources(lastWithCursor) == Self.sources(last))

        for bad in ["items_limit=0", "items_limit=1001", "items_limit=x", "items_after=nope", "items_last=yes"] {
            let reply = try serve.get("/api/runs/\(id)?\(bad)")
            #expect(reply.status == 400, "\(bad): \(reply.status) \(reply.body)")
        }
    }

    @Test func statusCountsEveryItemAndListsAPage() throws {
        let serve = try APIServe()
        let id = try session(serve)

        // The counts of all, then the last 20 files, and how to page.
        let plain = try serve.orchestrate(["status", id])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout.contains("files of accept: 0 queued, 0 running, \(Self.count) done, 0 failed"), "\(plain.stdout)")
        let listed = Self.count - 20 ..< Self.count
        #expect(plain.stdout.components(separatedBy: "/data/f").count - 1 == 20, "\(plain.stdout)")
        #expect(plain.stdout.contains(Self.source(listed.lowerBound)) && plain.stdout.contains(Self.source(Self.count - 1)))
        #expect(!plain.stdout.contains(Self.source(listed.lowerBound - 1)))
        #expect(plain.stdout.contains("the last 20 of \(Self.count) files"), "\(plain.stdout)")

        // A page after a cursor, with the line that gives the next one.
        let page = try serve.orchestrate(["status", id, "--items", "5", "--items-after", "0:accept"])
        #expect(page.status == 0, "\(page.stderr)")
        #expect(page.stdout.components(separatedBy: "/data/f").count - 1 == 5, "\(page.stdout)")
        #expect(page.stdout.contains(Self.source(0)) && page.stdout.contains(Self.source(4)) && !page.stdout.contains(Self.source(5)))
        #expect(page.stdout.contains("--items 5 --items-after 5:accept"), "\(page.stdout)")

        // --json is the same page, with the counts.
        let json = try JSONValue(parsing: try serve.orchestrate(["status", id, "--json", "--items", "3"]).stdout)
        #expect(Self.sources(json) == (Self.count - 3 ..< Self.count).map(Self.source))
        #expect(json["items_total"]?.intValue == Int64(Self.count))

        // The same through a remote serve.
        let remote = try ChildProcess.orchestrate(["status", id, "--server", "http://127.0.0.1:\(serve.port)",
                                                   "--token-file", serve.state + "/http-token"])
        #expect(remote.stdout.contains("\(Self.count) done") && remote.stdout.contains("the last 20 of \(Self.count) files"),
                "\(remote.stdout)\n\(remote.stderr)")
        #expect(try serve.orchestrate(["status", id, "--items-after", "bad"]).status == 2)
    }
}
