import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The OpenAPI document matches the server: schemathesis (PyPI) generates requests from
/// `/api/openapi.json` of a real `serve` (valid and invalid ones, and sequences that follow the
/// document's links: submit a run, then read, steer and delete it) and checks that every answer
/// is documented: status code, content type, headers and body schema; no 5xx; invalid input
/// refused. Bounded: 10 examples per operation, at most 150 s. The event streams never end, so
/// they are left to APITests.eventStreamResumes.
@Suite(.serialized) struct OpenAPIConformanceTests {
    @Test func serverMatchesItsOpenAPIDocument() throws {
        let serve = try APIServe()
        // One finished run, so that the run operations have something real to answer about.
        let run = try serve.post("/api/runs", ["workflow_yaml": "version: 1\nname: seen\nsteps:\n  a: { uses: test.noop }\n"])
        let id = try #require(run.json["id"]?.stringValue)
        #expect(try serve.waitFor { try serve.status(id) == "succeeded" })
        // And a registered schedule, so that /api/schedules lists one.
        try serve.registerSchedule("nightly", entries: [#"{ cron: "0 3 * * *" }"#])

        let schemathesis = try PythonVenv.python().deletingLastPathComponent().appendingPathComponent("schemathesis")
        let report = serve.dir.file("schemathesis").path
        let result = try ChildProcess.run(schemathesis, [
            "run", "http://127.0.0.1:\(serve.port)/api/openapi.json",
            "--header", "Authorization: Bearer \(serve.token)",
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
                + "response_schema_conformance,negative_data_rejection",
            "--exclude-path-regex", "events$",
            "--max-examples", "10", "--max-time", "150", "--seed", "13", "--request-timeout", "10",
            "--report-dir", report,
        ], environment: ProcessInfo.processInfo.environment.merging(["NO_COLOR": "1"]) { $1 })
        #expect(result.status == 0, "schemathesis found disagreements:\n\(result.stdout.suffix(12000))\n\(result.stderr.suffix(4000))")
        #expect(result.stdout.contains("passed"), "\(result.stdout.suffix(4000))")
    }
}
