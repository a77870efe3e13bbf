import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The HTTP API of `serve --http`, over real HTTP against a real `serve` executing real runs.
@Suite(.serialized) struct APITests {
    /// Tokens, bounds and error documents: every refusal is a problem document with the right status.
    @Test func refusals() throws {
        let serve = try APIServe()
        let http = serve.http
        // No token, a wrong token: 401, as a problem document.
        let anonymous = try http.request("GET", "/api/runs", token: nil)
        #expect(anonymous.status == 401)
        #expect(anonymous.headers["content-type"] == "application/problem+json")
        #expect(anonymous.json["status"]?.intValue == 401 && anonymous.json["title"] != nil && anonymous.json["type"] != nil)
        #expect(try http.request("GET", "/api/runs", token: "x" + serve.token.dropFirst()).status == 401)
        #expect(try http.request("GET", "/api/events?token=wrong", token: nil).status == 401)

        // A read-only token reads, but changes nothing.
        #expect(try http.request("GET", "/api/runs", token: serve.readerToken).status == 200)
        let submitted = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n",
                                                      "queue": "parked"])
        #expect(submitted.status == 201)
        let id = try #require(submitted.json["id"]?.stringValue)
        let forbidden = try http.request("POST", "/api/runs/\(id)/cancel", token: serve.readerToken)
        #expect(forbidden.status == 403)
        #expect(forbidden.json["detail"]?.stringValue?.contains("read-only") == true)
        #expect(try http.request("DELETE", "/api/runs/\(id)", token: serve.readerToken).status == 403)
        #expect(try serve.status(id) == "queued")

        // Malformed JSON, an unknown member: 400. Unknown run, verb or path: 404.
        #expect(try http.request("POST", "/api/runs", token: serve.token, body: "{\"workflow_yaml\": ").status == 400)
        #expect(try serve.post("/api/runs", ["workflow_yaml": "x", "colour": "red"]).status == 400)
        #expect(try serve.get("/api/runs/no-such-run").status == 404)
        #expect(try serve.post("/api/runs/no-such-run/cancel").status == 404)
        #expect(try serve.post("/api/runs/\(id)/explode").status == 404)
        #expect(try serve.get("/api/no-such-thing").status == 404)
        #expect(try serve.get("/api/runs?status=sleepy").status == 400)

        // A workflow with errors: 422, each error with its FILE:LINE:COL.
        let invalid = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: bad\nsteps:\n  a:\n    uses: test.noop\n    retires: 3\n",
                                                    "file_name": "bad.yaml"])
        #expect(invalid.status == 422)
        #expect(invalid.headers["content-type"] == "application/problem+json")
        let error = try #require(invalid.json["errors"]?[0])
        #expect(error["file"]?.stringValue == "bad.yaml")
        #expect(error["line"]?.intValue == 6)
        #expect(error["column"]?.intValue == 5)
        #expect(error["text"]?.stringValue?.hasPrefix("bad.yaml:6:5: error:") == true)
        // Inputs that do not match the workflow: 422 as well.
        let inputs = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: needs\ninputs:\n  n: { type: integer }\nsteps:\n  a: { uses: test.noop }\n",
                                                   "inputs": ["n": "many"]])
        #expect(inputs.status == 422)

        // A body over 1 MiB: 413.
        let big = "{\"workflow_yaml\": \"" + String(repeating: "#", count: 1 << 21) + "\"}"
        #expect(try http.request("POST", "/api/runs", token: serve.token, body: big).status == 413)

        // A verb the run's state refuses: 409.
        #expect(try serve.post("/api/runs/\(id)/unpause").status == 409)
    }

    /// Every endpoint doing its job: submit (YAML and path), list with filters, detail, every verb,
    /// delete, add-path and close on a session, queues, plugins, and the OpenAPI document.
    @Test func endpoints() throws {
        let serve = try APIServe()
        // A label is hostile input: quotes, backslashes, control characters and non-ASCII
        // must come back escaped in the JSON text and read back as themselves.
        let hostile = "quote\" backslash\\ nl\n ctl\u{1}\u{1F} é 日本 🚀 </script>"
        // Submitted to a queue no serve takes, a run stays where the verbs put it.
        let parked = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n",
                                                  "queue": "parked", "labels": ["batch": "7", "title": .string(hostile)],
                                                  "priority": 3, "id": "parked-1"])
        #expect(parked.status == 201)
        #expect(parked.headers["location"] == "/api/runs/parked-1")
        #expect(parked.json["labels"]?["batch"]?.stringValue == "7" && parked.json["priority"]?.intValue == 3)
        for path in ["/api/runs/parked-1", "/api/runs?queue=parked"] {
            let reply = try serve.get(path)
            #expect(reply.body.contains(#""title":"quote\" backslash\\ nl\n ctl\u0001\u001f é 日本 🚀 </script>""#), "\(reply.body)")
            let run = path.hasSuffix("parked-1") ? reply.json : reply.json["runs"]?[0] ?? .null
            #expect(run["labels"]?["title"]?.stringValue == hostile)
        }
        #expect(try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n",
                                             "id": "parked-1"]).status == 409)
        for (verb, expected) in [("pause", "paused"), ("unpause", "queued"), ("stop", "queued"), ("run-now", "queued"),
                                 ("cancel", "cancelled"), ("retry", "queued"), ("cancel", "cancelled")]
        {
            let reply = try serve.post("/api/runs/parked-1/\(verb)")
            #expect(reply.status == 200, "\(verb): \(reply.body)")
            #expect(reply.json["verb"]?.stringValue == verb)
            #expect(try serve.status("parked-1") == expected, "after \(verb)")
        }

        // A workflow file on the server, executed by this serve.
        let file = serve.dir.write("sleepy.yaml", "version: 1\nname: sleepy\ninputs:\n  ms: { type: integer }\nsteps:\n  nap: { uses: test.sleep, with: { ms: \"${{ inputs.ms }}\" } }\n").path
        let run = try serve.post("/api/runs", ["workflow_path": .string(file), "inputs": ["ms": 50], "labels": ["kind": "nap"]])
        #expect(run.status == 201, "\(run.body)")
        let id = try #require(run.json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(id) == "succeeded" })
        let detail = try serve.get("/api/runs/\(id)").json
        #expect(detail["steps"]?[0]?["id"]?.stringValue == "nap")
        #expect(detail["steps"]?[0]?["attempt"]?.intValue == 1)
        #expect(detail["steps"]?[0]?["outputs"]?["slept_ms"] != nil)
        #expect(detail["transfer"]?["bytes_done"] != nil)
        // The API's detail is exactly what `status --json` says.
        let cli = try JSONValue(parsing: try serve.orchestrate(["status", id, "--json"]).stdout)
        #expect(cli["steps"] == detail["steps"] && cli["status"] == detail["status"])

        func listed(_ query: String) throws -> [String] {
            try serve.get("/api/runs\(query)").json["runs"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        #expect(try listed("") == ["parked-1", id])
        #expect(try listed("?status=succeeded") == [id])
        #expect(try listed("?label=batch%3D7") == ["parked-1"])
        // "=" then an emoji modifier is one Character, and still KEY=VALUE: no such label, not a 400.
        #expect(try serve.get("/api/runs?label=batch%3D%F0%9F%8F%BB").status == 200)
        #expect(try listed("?queue=parked") == ["parked-1"])
        #expect(try listed("?workflow=sleepy") == [id])
        #expect(try listed("?text=NAP") == [id])
        #expect(try listed("?limit=1") == [id])

        // Delete: refused while unfinished, done when finished.
        #expect(try serve.post("/api/runs/parked-1/retry").status == 200)
        #expect(try serve.http.request("DELETE", "/api/runs/parked-1", token: serve.token).status == 409)
        #expect(try serve.post("/api/runs/parked-1/cancel").status == 200)
        #expect(try serve.http.request("DELETE", "/api/runs/parked-1", token: serve.token).status == 200)
        #expect(try serve.get("/api/runs/parked-1").status == 404)

        // A persistent session: paths added over HTTP are transferred; close ends it.
        let received = serve.dir.file("received").path
        let session = try serve.post("/api/runs", ["workflow_yaml": .string("version: 1\nname: session\nsteps:\n  accept: { uses: test.items, with: { file: \"\(received)\" } }\noutputs:\n  count: \"${{ steps.accept.outputs.count }}\"\n")])
        let sessionID = try #require(session.json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(sessionID) == "running" })
        #expect(try serve.post("/api/runs/\(sessionID)/paths", ["source": "relative/a", "destination": "a"]).status == 422)
        // What the OpenAPI document does not describe is refused, not ignored: one path or a list, not both; no other member.
        #expect(try serve.post("/api/runs/\(sessionID)/paths", ["source": "/data/a", "destination": "a", "paths": [["source": "/data/b", "destination": "b"]]]).status == 400)
        #expect(try serve.post("/api/runs/\(sessionID)/paths", ["source": "/data/a", "destination": "a", "stepp": "accept"]).status == 400)
        #expect(try serve.post("/api/runs/\(sessionID)/paths", ["paths": [["source": "/data/a", "destination": "a", "mode": 1]]]).status == 400)
        let added = try serve.post("/api/runs/\(sessionID)/paths", ["paths": [["source": "/data/a", "destination": "in/a"],
                                                                              ["source": "/data/b", "destination": "in/b"]]])
        #expect(added.status == 201, "\(added.body)")
        #expect(added.json["items"]?.arrayValue?.count == 2)
        #expect(try serve.post("/api/runs/\(sessionID)/close").status == 200)
        #expect(try serve.waitFor { try serve.status(sessionID) == "succeeded" })
        let closed = try serve.get("/api/runs/\(sessionID)").json
        #expect(closed["outputs"]?["count"]?.intValue == 2)
        #expect(closed["items"]?.arrayValue?.compactMap { $0["item"]?["source"]?.stringValue } == ["/data/a", "/data/b"])
        #expect(try serve.post("/api/runs/\(id)/paths", ["source": "/x", "destination": "x"]).status == 409)

        // Queues: counts per queue and status, and the passive switch.
        let queues = try serve.get("/api/queues").json
        #expect(queues["passive"] == .bool(false))
        #expect(queues["queues"]?.arrayValue?.first { $0["name"]?.stringValue == "default" }?["runs"]?["succeeded"]?.intValue == 2)
        #expect(try serve.post("/api/queues/stop").json["passive"] == .bool(true))
        #expect(try serve.get("/api/queues").json["passive"] == .bool(true))
        #expect(try serve.post("/api/queues/start").status == 200)
        // One named queue: stopped on its own (listed even with no runs), then started again.
        let named = try serve.post("/api/queues/nightly/stop")
        #expect(named.status == 200 && named.json["queue"]?.stringValue == "nightly" && named.json["passive"] == .bool(true))
        let listed = try serve.get("/api/queues").json
        #expect(listed["passive"] == .bool(false))
        #expect(listed["queues"]?.arrayValue?.first { $0["name"]?.stringValue == "nightly" }?["passive"] == .bool(true))
        #expect(listed["queues"]?.arrayValue?.first { $0["name"]?.stringValue == "default" }?["passive"] == .bool(false))
        #expect(try serve.orchestrate(["queue", "start", "--queue", "nightly"]).status == 0, "the CLI undoes what the API did")
        Thread.sleep(forTimeInterval: 0.3)  // a change made outside the API shows once the read cache's 0.25 s are over
        #expect(try serve.get("/api/queues").json["queues"]?.arrayValue?.contains { $0["name"]?.stringValue == "nightly" } == false)
        #expect(try serve.post("/api/queues/no%20spaces/stop").status == 400)
        #expect(try serve.post("/api/queues/nightly/explode").status == 404)
        // `queue rate` over the API: validated as --max-rate is, shown by GET, removed by null.
        #expect(queues["max_rate"] == .null)
        let rate = try serve.put("/api/queues/rate", ["max_rate": "Mon-Fri 08:00,10M 19:00,off"])
        #expect(rate.status == 200 && rate.json["max_rate"]?.stringValue == "Mon-Fri 08:00,10M 19:00,off")
        #expect(try serve.get("/api/queues").json["max_rate"]?.stringValue == "Mon-Fri 08:00,10M 19:00,off")
        let bad = try serve.put("/api/queues/rate", ["max_rate": "08:00,10X"])
        #expect(bad.status == 400 && bad.body.contains("'08:00,10X': '10X' is not a rate"), "\(bad.body)")
        // Well written (the document's pattern matches it), refused for what it means: 422.
        let clash = try serve.put("/api/queues/rate", ["max_rate": "Mon-Fri 08:00,1M Mon-08:00,2M"])
        #expect(clash.status == 422 && clash.body.contains("both set the rate on Mon 08:00"), "\(clash.body)")
        #expect(try serve.put("/api/queues/rate", ["max_rate": .null]).status == 200)
        #expect(try serve.get("/api/queues").json["max_rate"] == .null)

        // Plugins, with schemas.
        let plugins = try serve.get("/api/plugins").json
        #expect(plugins["step_types"]?.arrayValue?.contains { $0["id"]?.stringValue == "test.sleep" } == true)
        let sleep = try serve.get("/api/plugins/test.sleep").json["step_types"]?[0]
        #expect(sleep?["input_schema"]?["required"] == ["ms"])
        #expect(try serve.get("/api/plugins/test").json["step_types"]?.arrayValue?.count == 10)
        #expect(try serve.get("/api/plugins/nope").status == 404)

        // The OpenAPI document: 3.1, and every path it lists is served: answered by its route, not
        // by the router's "no such resource". A change (POST, PUT, DELETE) goes with the full
        // token and values its route refuses (an unknown run, an unknown action, no body), so
        // nothing changes; a read-only token gets 403 for it, route or not.
        let openapi = try serve.get("/api/openapi.json").json
        #expect(openapi["openapi"]?.stringValue?.hasPrefix("3.1") == true)
        let paths = try #require(openapi["paths"]?.objectValue)
        #expect(paths.count == 18)
        for (path, item) in paths {
            for method in (item.objectValue ?? [:]).keys where method != "parameters" {
                if method == "get" && path.hasSuffix("events") { continue }  // streams; tested below
                let concrete = path.replacingOccurrences(of: "{id}", with: method == "get" ? id : "no-such-run")
                    .replacingOccurrences(of: "{verb}", with: "pause").replacingOccurrences(of: "{action}", with: "no-such-action")
                    .replacingOccurrences(of: "{name}", with: "default")
                #expect(!path.contains("{") || concrete != path, "\(path): a parameter this test does not fill")
                let reply = try serve.http.request(method.uppercased(), concrete, token: method == "get" ? serve.readerToken : serve.token)
                let unrouted = reply.status == 404 && reply.body.contains("no such resource")
                #expect(!unrouted && reply.status < 500 && (method == "get" || reply.status >= 400), "\(method) \(path): \(reply.status) \(reply.body)")
                if method != "get" {
                    #expect(try serve.http.request(method.uppercased(), concrete, token: serve.readerToken).status == 403, "\(method) \(path)")
                }
            }
        }
    }

    /// `/api/nodes`: the serve's own node, live, with its worker (this serve's pid), and the
    /// run it holds while the run executes.
    @Test func nodes() throws {
        let serve = try APIServe()
        func thisNode() throws -> JSONValue? {
            let reply = try serve.get("/api/nodes").json
            return reply["nodes"]?.arrayValue?.first { $0["name"] == reply["this_node"] }
        }
        #expect(try serve.waitFor { try thisNode()?["workers"]?[0]?["pid"]?.intValue == Int64(serve.process.processIdentifier) })
        let idle = try #require(try thisNode())
        #expect(idle["live"] == .bool(true) && idle["runs_held"]?.intValue == 0 && idle["lease_until"] == nil)
        #expect(idle["workers"]?[0]?["live"] == .bool(true) && idle["workers"]?[0]?["queues"] == ["default"])

        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: nap\nsteps:\n  a: { uses: test.sleep, with: { ms: 3000 } }\n"]).json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(id) == "running" })
        let busy = try #require(try thisNode())
        #expect(busy["runs_held"]?.intValue == 1)
        #expect((busy["lease_until"]?.doubleValue ?? 0) > Date().timeIntervalSince1970)
        #expect(try serve.http.request("GET", "/api/nodes", token: nil).status == 401)
    }

    /// A client that hangs up in the middle of a busy run and comes back with Last-Event-ID
    /// gets every event exactly once, in order.
    @Test func eventStreamResumes() throws {
        let serve = try APIServe()
        let steps = (0..<40).map { i in "  s\(i): { uses: test.sleep, with: { ms: 15 }\(i > 0 ? ", needs: [s\(i - 1)]" : "") }" }
        let yaml = "version: 1\nname: busy\nsteps:\n" + steps.joined(separator: "\n") + "\n"
        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": .string(yaml)]).json["id"]?.stringValue)
        let reader = SSEReader(port: serve.port)
        var seen: [Int64] = []
        var types: [String] = []
        // First connection: the token in the query (as EventSource must), hang up after 10 events.
        let first = try reader.read("/api/runs/\(id)/events?token=\(serve.token)", token: nil) { seq, data in
            seen.append(seq)
            types.append(data["type"]?.stringValue ?? "")
            return seen.count < 10
        }
        #expect(first.status == 200)
        #expect(first.headers.lowercased().contains("content-type: text/event-stream"))
        #expect(try serve.status(id) == "running", "the run should still be busy when the client hangs up")
        // Back with Last-Event-ID, until the run finishes.
        try reader.read("/api/runs/\(id)/events", token: serve.token, headers: ["Last-Event-ID": "\(seen.last!)"]) { seq, data in
            seen.append(seq)
            types.append(data["type"]?.stringValue ?? "")
            return data["type"]?.stringValue != "run.finished"
        }
        let journal = try serve.orchestrate(["events", id, "--json"]).stdout.split(separator: "\n")
            .compactMap { try? JSONValue(parsing: String($0))["seq"]?.intValue }
        #expect(seen == journal, "the stream must hold every journaled event once, in order")
        #expect(Set(seen).count == seen.count)
        #expect(types.filter { $0 == "step.succeeded" || $0 == "step.finished" }.count >= 40 || types.count > 80)

        // The stream of everything resumes from ?after= too.
        var all: [Int64] = []
        try reader.read("/api/events?after=\(seen[4])", token: serve.token) { seq, _ in
            all.append(seq)
            return all.count < 3
        }
        #expect(all.first.map { $0 > seen[4] } == true)
        #expect(try reader.read("/api/runs/nope/events", token: serve.token) { _, _ in false }.status == 404)
        // Last-Event-ID decides where a stream resumes, and ?after is checked all the same.
        for (query, header) in [("?after=-1", "0"), ("?after=1.5", "3"), ("", "x"), ("?after=2", "")] {
            let status = try reader.read("/api/events\(query)", token: serve.token, headers: ["Last-Event-ID": header]) { _, _ in false }.status
            #expect(status == 400, "after '\(query)', Last-Event-ID '\(header)': \(status)")
        }
    }

    /// Streams share one reader of the journal (EventFeed): several followers of every event,
    /// started at different points during a busy run (from the start, from later on, and one
    /// for the run), each get exactly the journal's events after their starting point, in order.
    @Test func concurrentStreamsEachGetTheWholeJournal() throws {
        let serve = try APIServe()
        let steps = (0..<30).map { i in "  s\(i): { uses: test.sleep, with: { ms: 10 }\(i > 0 ? ", needs: [s\(i - 1)]" : "") }" }
        let yaml = "version: 1\nname: busy\nsteps:\n" + steps.joined(separator: "\n") + "\n"
        let id = try #require(try serve.post("/api/runs", ["workflow_yaml": .string(yaml)]).json["id"]?.stringValue)
        let seen = Locked<[Int: [Int64]]>([:])
        // The first starts the shared feed after seq 5: the later ones from 0 read the store until
        // they reach the feed, then join it.
        let starts: [(path: String, after: Int64)] = [("/api/events?after=5", 5), ("/api/events", 0), ("/api/events", 0),
                                                       ("/api/runs/\(id)/events", 0), ("/api/events?after=2", 2)]
        DispatchQueue.concurrentPerform(iterations: starts.count) { index in
            Thread.sleep(forTimeInterval: Double(index) * 0.15)  // joining while the run goes on
            var mine: [Int64] = []
            _ = try? SSEReader(port: serve.port).read(starts[index].path, token: serve.token) { seq, data in
                mine.append(seq)
                return !(data["type"]?.stringValue == "run.finished" && data["run"]?.stringValue == id)
            }
            seen.update { $0[index] = mine }
        }
        let all = try serve.orchestrate(["events", "--json"]).stdout.split(separator: "\n")
            .compactMap { try? JSONValue(parsing: String($0)) }
        let finished = try #require(all.firstIndex { $0["type"]?.stringValue == "run.finished" && $0["run"]?.stringValue == id })
        let upToFinish = all[...finished]
        for (index, start) in starts.enumerated() {
            let expected = upToFinish.filter { ($0["seq"]?.intValue ?? 0) > start.after && (!start.path.contains("/runs/") || $0["run"]?.stringValue == id) }
                .compactMap { $0["seq"]?.intValue }
            #expect(seen.value[index] == expected, "stream \(index) (\(start.path))")
        }
    }

    /// An address other machines can reach needs TLS or an explicit --http-plaintext.
    @Test func nonLoopbackNeedsTLSOrPlaintext() throws {
        let dir = TemporaryDirectory("api-addr")
        let refused = try ChildProcess.orchestrate(["serve", "--http", "0.0.0.0:\(Ports.free())", "--state", dir.file("s").path])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--tls-cert"))
        let malformed = try ChildProcess.orchestrate(["serve", "--http", "localhost", "--state", dir.file("s").path])
        #expect(malformed.status == 2)
        #expect(malformed.stderr.contains("HOST:PORT"))
    }
}
