import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Which requests the API takes: `?token=` only on the two event-stream routes; HEAD on every
/// GET route (an event stream's HEAD opens no stream); a known path with another method is 405
/// with `Allow`, an unknown one 404.
@Suite(.serialized) struct MethodAndTokenTests {
    @Test func tokenInTheQueryOnlyOnEventStreams() throws {
        let serve = try APIServe()
        let http = serve.http
        for path in ["/api/runs", "/api/queues", "/api/queues/events", "/api/runs/x/y/events", "/api/runs/events", "/api/journal"] {
            let reply = try http.request("GET", path + "?token=\(serve.token)", token: nil)
            #expect(reply.status == 401, "GET \(path)?token=: \(reply.status) \(reply.body)")
        }
        // The streams themselves take it.
        let stream = try ConnectionLimitTests.open(serve.port, sending: RawHTTP.head("GET", "/api/events?after=end&token=\(serve.token)", token: nil,
                                                                                  headers: [:], bodyLength: nil), wait: 5)
        defer { close(stream) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(stream, &buffer, buffer.count)
        #expect(n > 0 && String(decoding: buffer[0..<max(n, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
    }

    @Test func headAndMethodNotAllowed() throws {
        let serve = try APIServe(extra: ["--http-max-streams", "1"])
        let http = serve.http
        // HEAD: the GET's status and headers, no body.
        let get = try serve.get("/api/queues")
        let head = try http.request("HEAD", "/api/queues", token: serve.token)
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-type"] == "application/json", "\(head)")
        #expect(head.headers["content-length"] == String(get.body.utf8.count), "\(head.headers) / \(get.body.utf8.count)")
        #expect(try http.request("HEAD", "/api/runs/no-such-run", token: serve.token).status == 404)
        #expect(try http.request("HEAD", "/api/runs", token: nil).status == 401)
        #expect(try http.request("HEAD", "/", token: nil).status == 200)
        // An event stream's HEAD takes none of the (one) stream slots.
        for _ in 0..<2 {
            let streamHead = try http.request("HEAD", "/api/events", token: serve.token)
            #expect(streamHead.status == 200 && streamHead.headers["content-type"] == "text/event-stream", "\(streamHead)")
        }
        _ = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n", "queue": "parked"])
        let status = try SSEReader(port: serve.port).read("/api/events", token: serve.token) { _, _ in false }.status
        #expect(status == 200, "a stream after HEADs: \(status)")

        // A known path, another method: 405 with Allow. Unknown paths stay 404. A literal segment
        // wins over a parameter, as the router resolves it: /api/runs/x/events is the stream's
        // path, not a verb's, and /api/queues/rate is not /api/queues/{action}.
        let cases: [(String, String, String)] = [("PUT", "/api/runs", "GET, HEAD, POST"), ("DELETE", "/api/queues", "GET, HEAD"),
                                                 ("GET", "/api/runs/x/cancel", "POST"), ("PUT", "/api/runs/x/events", "GET, HEAD"),
                                                 ("POST", "/api/runs/x/events", "GET, HEAD"), ("POST", "/api/queues/rate", "PUT"),
                                                 ("GET", "/api/runs/x/paths", "POST"), ("PATCH", "/api/runs/x", "DELETE, GET, HEAD")]
        for (method, path, allow) in cases {
            let reply = try http.request(method, path, token: serve.token, body: method == "GET" ? nil : "{}")
            #expect(reply.status == 405 && reply.headers["allow"] == allow && reply.headers["content-type"] == "application/problem+json",
                    "\(method) \(path): \(reply.status) allow \(reply.headers["allow"] ?? "-")")
        }
        #expect(try http.request("PUT", "/api/runs", token: nil, body: "{}").status == 401)
        #expect(try http.request("DELETE", "/api/no-such-thing", token: serve.token).status == 404)
    }
}
