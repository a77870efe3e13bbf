import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Run ids over the API: `"id"` in `POST /api/runs` follows the run id rule (400 otherwise),
/// path parameters are percent-decoded once and checked, and `DELETE /api/runs/..` (sent by a
/// client that does not fold dots) or `/api/runs/%2E%2E` no longer deletes the state directory.
@Suite struct RunIDPathTests {
    static let rule = "a run id is 1 to 64 letters, digits, '.', '_' or '-', not dots alone"
    static let yaml = "version: 1\nname: parked\nsteps:\n  a: { uses: test.noop }\n"

    @Test func hostileIDsAreRefusedOnSubmit() throws {
        let serve = try APIServe()
        let hostile: [String] = [".", "..", "a/b", String(repeating: "a", count: 300), "a\u{0}b", "50%", "what?", "back\\slash",
                                 "café", "a b", ""]
        for id in hostile {
            let reply = try serve.post("/api/runs", ["workflow_yaml": .string(Self.yaml), "queue": "parked", "id": .string(id)])
            #expect(reply.status == 400, "\(id.debugDescription): \(reply.body)")
            #expect(reply.json["detail"]?.stringValue?.contains(Self.rule) == true, "\(id.debugDescription): \(reply.body)")
        }
        #expect(try serve.get("/api/runs").json["runs"]?.arrayValue?.isEmpty == true)
    }

    @Test func pathIDsAreDecodedOnceAndChecked() throws {
        let serve = try APIServe()
        #expect(try serve.post("/api/runs", ["workflow_yaml": .string(Self.yaml), "queue": "parked", "id": "ab-1"]).status == 201)
        // An id a client chose to encode is found; encoded twice, it is the text `%2D`.
        #expect(try serve.get("/api/runs/ab%2D1").json["id"]?.stringValue == "ab-1")
        #expect(try serve.post("/api/runs/ab%2D1/pause").status == 200)
        let twice = try serve.get("/api/runs/ab%252D1")
        #expect(twice.status == 400 && twice.json["detail"]?.stringValue?.contains(Self.rule) == true, "\(twice.body)")
        let broken = try serve.get("/api/runs/ab%2")
        #expect(broken.status == 400, "\(broken.body)")
        for path in ["/api/runs/%2E%2E", "/api/runs/a%2Fb", "/api/runs/caf%C3%A9", "/api/runs/a%00b"] {
            let reply = try serve.get(path)
            #expect(reply.status == 400 && reply.json["detail"]?.stringValue?.contains(Self.rule) == true, "\(path): \(reply.body)")
        }
    }

    /// The store holds the finished run `..` (made with sqlite3, as a version without the rule
    /// would have): deleting it through the API is refused, and the state directory, its
    /// database and WAL stay (the delete used to remove `STATE/runs/..`).
    @Test func deletingDotDotLeavesTheStateIntact() throws {
        let serve = try APIServe()
        #expect(try serve.post("/api/runs", ["workflow_yaml": .string(Self.yaml), "queue": "parked", "id": "legacy"]).status == 201)
        let sql = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), [
            "-cmd", ".timeout 5000", serve.state + "/state.sqlite",
            "UPDATE runs SET id = '..', run_dir = 'runs/..', status = 'succeeded' WHERE id = 'legacy'",
        ])
        #expect(sql.status == 0, "\(sql.stderr)")
        for path in ["/api/runs/..", "/api/runs/%2E%2E", "/api/runs/.%2E"] {
            let reply = try serve.http.request("DELETE", path, token: serve.token)
            #expect(reply.status == 400, "\(path): \(reply.body)")
            #expect(reply.json["detail"]?.stringValue?.contains(Self.rule) == true, "\(path): \(reply.body)")
        }
        let cancel = try serve.post("/api/runs/%2E%2E/cancel")
        #expect(cancel.status == 400, "\(cancel.body)")
        for file in ["state.sqlite", "state.sqlite-wal", "http-token"] {
            #expect(FileManager.default.fileExists(atPath: serve.state + "/" + file), "\(file) is gone")
        }
        #expect(try serve.get("/api/runs").json["runs"]?.arrayValue?.map { $0["id"]?.stringValue } == [".."])
    }
}
