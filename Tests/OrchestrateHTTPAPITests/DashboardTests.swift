import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The dashboard's side of the server, over raw HTTP: its files (served without a token, with
/// a strict Content-Security-Policy), the URL `serve` prints, the token never taken from a
/// cookie or from the URL of a verb (CSRF), the step graph, and event streams from the end.
@Suite(.serialized) struct DashboardTests {
    static let files = ["/", "/ui/dashboard.css", "/ui/favicon.svg"] +
        ["app", "api", "dom", "overview", "runs", "run", "queues", "nodes", "plugins"].map { "/ui/\($0).js" }

    @Test func filesAreServedWithoutATokenUnderAStrictPolicy() throws {
        let serve = try APIServe()
        for path in Self.files {
            let reply = try serve.http.request("GET", path, token: nil)
            #expect(reply.status == 200, "\(path)")
            let policy = reply.headers["content-security-policy"] ?? ""
            for directive in ["default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"] {
                #expect(policy.contains(directive), "\(path): \(policy)")
            }
            #expect(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"))
            #expect(reply.headers["x-content-type-options"] == "nosniff")
            #expect(reply.headers["referrer-policy"] == "no-referrer")
            #expect(!reply.body.isEmpty)
        }
        #expect(try serve.http.request("GET", "/", token: nil).headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(try serve.http.request("GET", "/ui/app.js", token: nil).headers["content-type"]?.hasPrefix("text/javascript") == true)
        // The page has no inline script or style for the policy to forbid.
        let page = try serve.http.request("GET", "/", token: nil).body
        #expect(!page.contains("<script>") && !page.contains("style=") && !page.contains("<style"))
        // Only those files: anything else still needs the token.
        #expect(try serve.http.request("GET", "/ui/other.js", token: nil).status == 401)
        #expect(try serve.http.request("POST", "/", token: nil).status == 401)
        #expect(try serve.http.request("GET", "/api/runs", token: nil).status == 401)

        // serve prints the dashboard's URL with the token, as Jupyter does.
        let printed = try String(contentsOfFile: serve.dir.file("serve.err").path, encoding: .utf8)
        #expect(printed.contains("Dashboard: http://127.0.0.1:\(serve.port)/?token=\(serve.token)\n"), "\(printed)")
    }

    /// A cross-site form or link can make a browser send cookies and query strings, never an
    /// Authorization header: the server takes the token from nothing else, except `?token=` on
    /// an event stream (GET, read-only by nature).
    @Test func theTokenComesOnlyFromTheHeader() throws {
        let serve = try APIServe()
        let http = serve.http
        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n",
                                                            "queue": "parked"]).json["id"]?.stringValue)
        let cookie = ["Cookie": "token=\(serve.token); orchestrate-token=\(serve.token); Authorization=Bearer \(serve.token)"]
        #expect(try http.request("POST", "/api/runs/\(id)/cancel", token: nil, headers: cookie).status == 401)
        #expect(try http.request("POST", "/api/runs/\(id)/cancel?token=\(serve.token)", token: nil).status == 401)
        #expect(try http.request("DELETE", "/api/runs/\(id)?token=\(serve.token)", token: nil).status == 401)
        #expect(try http.request("POST", "/api/queues/stop?token=\(serve.token)", token: nil).status == 401)
        #expect(try http.request("POST", "/api/runs?token=\(serve.token)", token: nil,
                                 body: "{\"workflow_yaml\": \"version: 1\\nname: x\\nsteps:\\n  a: { uses: test.noop }\\n\"}").status == 401)
        #expect(try http.request("GET", "/api/runs", token: nil, headers: cookie).status == 401)
        #expect(try http.request("GET", "/api/runs?token=\(serve.token)", token: nil).status == 401)
        #expect(try serve.status(id) == "queued", "nothing above may have changed the run")
        #expect(try serve.get("/api/queues").json["passive"] == .bool(false))
        // No CORS: another origin's script cannot read answers or send the header.
        let preflight = try http.request("OPTIONS", "/api/runs/\(id)/cancel", token: nil,
                                         headers: ["Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
                                                   "Access-Control-Request-Headers": "authorization"])
        #expect(preflight.headers["access-control-allow-origin"] == nil)
        // The header works; an event stream takes ?token= (EventSource cannot set headers).
        #expect(try http.request("POST", "/api/runs/\(id)/cancel", token: serve.token).status == 200)
        #expect(try SSEReader(port: serve.port).read("/api/events?token=\(serve.token)", token: nil) { _, _ in false }.status == 200)
    }

    /// The run detail carries the declared step graph, read from the workflow stored with the run.
    @Test func runDetailHasTheStepGraph() throws {
        let serve = try APIServe()
        let yaml = "version: 1\nname: diamond\nsteps:\n  a: { uses: test.noop }\n  b: { uses: test.noop, needs: [a] }\n"
            + "  c: { uses: test.noop, needs: [a] }\n  d: { uses: test.noop, needs: [b, c] }\n"
        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": .string(yaml), "queue": "parked"]).json["id"]?.stringValue)
        let graph = try #require(try serve.get("/api/runs/\(id)").json["graph"]?.arrayValue)
        #expect(graph.compactMap { $0["id"]?.stringValue } == ["a", "b", "c", "d"])
        #expect(graph[3]["needs"] == ["b", "c"])
        #expect(graph[0]["uses"]?.stringValue == "test.noop" && graph[0]["for_each"] == .bool(false))
    }

    /// `?after=end` on the stream of everything: only what happens from then on, however long
    /// the journal (the dashboard listens for changes; it does not replay history).
    @Test func theEventStreamCanStartAtTheEnd() throws {
        let serve = try APIServe()
        var ids: [String] = []
        for _ in 0..<5 {
            ids.append(try #require(try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: old\nsteps:\n  a: { uses: test.noop }\n"])
                .json["id"]?.stringValue))
        }
        #expect(try serve.waitFor { try ids.allSatisfy { try serve.status($0) == "succeeded" } })
        let journal = try serve.orchestrate(["events", "--json"]).stdout.split(separator: "\n")
            .compactMap { try? JSONValue(parsing: String($0))["seq"]?.intValue }
        let newest = try #require(journal.max())
        let reader = SSEReader(port: serve.port)
        var first: (seq: Int64, type: String)?
        let submitter = Thread {
            Thread.sleep(forTimeInterval: 0.5)
            _ = try? serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: new\nsteps:\n  a: { uses: test.noop }\n", "id": "new-1"])
        }
        submitter.start()
        try reader.read("/api/events?after=end", token: serve.token) { seq, data in
            first = (seq, data["type"]?.stringValue ?? "")
            return false
        }
        #expect(first.map { $0.seq > newest } == true, "the first event after=end sent was \(String(describing: first)); the newest before was \(newest)")
        #expect(first?.type == "run.added")
        #expect(try serve.http.request("GET", "/api/runs/new-1/events?after=end", token: serve.token).status == 400)
    }
}
