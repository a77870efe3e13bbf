import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `serve --api-workflows DIR`: the API starts the workflows of DIR by name, with inputs, and
/// nothing else: YAML text, a path, a name that leaves DIR (`..`, `/`, a symbolic link out of
/// it) are refused with a problem that says why.
@Suite(.serialized) struct APIWorkflowsTests {
    @Test func onlyTheDirectorysWorkflowsStart() throws {
        let outside = TemporaryDirectory("api-workflows-outside")
        let evil = outside.write("evil.yaml", "version: 1\nname: evil\nsteps:\n  a: { uses: exec, with: { command: [\"true\"] } }\n").path
        let dir = TemporaryDirectory("api-workflows")
        _ = dir.write("flows/hello.yaml", "version: 1\nname: hello\ninputs:\n  n: { type: integer }\nsteps:\n  a: { uses: test.noop }\n")
        let flows = dir.file("flows").path
        try FileManager.default.createSymbolicLink(atPath: flows + "/escape.yaml", withDestinationPath: evil)
        try FileManager.default.createSymbolicLink(atPath: flows + "/alias.yaml", withDestinationPath: flows + "/hello.yaml")
        let serve = try APIServe(extra: ["--api-workflows", flows])

        // By name, with inputs: runs.
        let started = try serve.post("/api/runs", ["workflow": "hello", "inputs": ["n": 3]])
        #expect(started.status == 201, "\(started.body)")
        let id = try #require(started.json["id"]?.stringValue)
        #expect(try serve.waitFor(30) { try serve.status(id) == "succeeded" })
        #expect(try serve.post("/api/runs", ["workflow": "hello.yaml", "inputs": ["n": 1]]).status == 201)
        // A link that stays inside the directory is one of its workflows.
        #expect(try serve.post("/api/runs", ["workflow": "alias", "inputs": ["n": 1]]).status == 201)
        // Inputs are still checked.
        #expect(try serve.post("/api/runs", ["workflow": "hello", "inputs": ["n": "many"]]).status == 422)

        func refused(_ body: JSONValue, _ status: Int, _ says: String) throws {
            let reply = try serve.post("/api/runs", body)
            #expect(reply.status == status && reply.headers["content-type"] == "application/problem+json"
                    && reply.json["detail"]?.stringValue?.contains(says) == true, "\(body.jsonText): \(reply.status) \(reply.body)")
        }
        try refused(["workflow_yaml": "version: 1\nname: x\nsteps:\n  a: { uses: test.noop }\n"], 403, "--api-workflows")
        try refused(["workflow_path": .string(flows + "/hello.yaml")], 403, "--api-workflows")
        try refused(["workflow": "hello", "workflow_path": .string(evil)], 403, "--api-workflows")
        for name in ["..", "../api-workflows-outside/evil", "../flows/hello", "/etc/passwd", "sub/hello", ".hidden", ""] {
            try refused(["workflow": .string(name)], 400, "not a workflow name")
        }
        try refused(["workflow": "escape"], 403, "outside")
        try refused(["workflow": "missing"], 422, "no workflow 'missing'")
        try refused([:], 400, "workflow")
        // Nothing of the refused ones ran.
        let runs = try serve.get("/api/runs").json["runs"]?.arrayValue ?? []
        #expect(runs.count == 3 && runs.allSatisfy { $0["workflow"]?.stringValue == "hello" }, "\(runs)")
    }

    @Test func withoutTheFlagANameIsRefused() throws {
        let serve = try APIServe()
        // 403, as workflow_path is on a server with the flag: the document describes the request,
        // this server's configuration refuses it. A null member is not given.
        let reply = try serve.post("/api/runs", ["workflow": "hello"])
        #expect(reply.status == 403 && reply.json["detail"]?.stringValue?.contains("--api-workflows") == true, "\(reply.body)")
        let yaml = "version: 1\nname: x\nsteps:\n  a: { uses: test.noop }\n"
        let nullName = try serve.post("/api/runs", ["workflow": nil, "workflow_path": nil, "workflow_yaml": .string(yaml)])
        #expect(nullName.status == 201, "\(nullName.body)")
        let usage = try ChildProcess.orchestrate(["serve", "--http", "127.0.0.1:0", "--api-workflows", "/no/such/dir", "--state", serve.dir.file("x").path])
        #expect(usage.status == 2 && usage.stderr.contains("not a directory"), "\(usage.stderr)")
    }
}
