import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The OpenAPI document matches the server: schemathesis (PyPI) generates requests from
/// `/api/openapi.json` of a real `serve` with every check it has (`--checks all`) in every phase
/// (examples, coverage, fuzzing, and stateful sequences that follow the document's links:
/// submit a run, then read, steer and delete it) and fails on any answer the document does not
/// describe: status code, content type, headers, body schema (each Server-Sent Event of the
/// streams included), a method the path does not take that is not 405 with `Allow`, data the
/// document calls invalid that is accepted or valid that is refused, no 5xx. Its configuration
/// is Tests/python/schemathesis.toml. Bounded: at most 240 s.
@Suite(.serialized) struct OpenAPIConformanceTests {
    static let documentFile = TestPaths.packageRoot.appendingPathComponent("Sources/OrchestrateHTTPAPI/openapi.json")

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
        let config = TestPaths.packageRoot.appendingPathComponent("Tests/python/schemathesis.toml").path
        let result = try ChildProcess.run(schemathesis, [
            "--config-file", config, "run", "http://127.0.0.1:\(serve.port)/api/openapi.json",
            "--header", "Authorization: Bearer \(serve.token)",
            "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
            "--max-examples", "10", "--max-time", "240", "--seed", "13",
            "--report-dir", report,
        ], environment: ProcessInfo.processInfo.environment.merging(["NO_COLOR": "1"]) { $1 })
        #expect(result.status == 0, "schemathesis found disagreements:\n\(result.stdout.suffix(12000))\n\(result.stderr.suffix(4000))")
        #expect(result.stdout.contains("passed"), "\(result.stdout.suffix(4000))")
    }

    /// The document served is the file in the repository, byte for byte (compiled into the
    /// binary, nothing added at run time).
    @Test func theServedDocumentIsTheFile() throws {
        let serve = try APIServe()
        let served = try serve.get("/api/openapi.json")
        #expect(served.status == 200 && served.headers["content-type"] == "application/json")
        #expect(served.body == (try String(contentsOf: Self.documentFile, encoding: .utf8)))
    }

    /// What the document must say that schemathesis cannot find by itself: every operation may
    /// answer 503 when the server is busy (`RequestAdmission`), and the event types it lists are
    /// exactly the ones the store journals (Sources/OrchestrateStore/Vocabulary.swift).
    @Test func theDocumentCoversBusyAnswersAndEveryEventType() throws {
        let document = try JSONValue(parsing: try String(contentsOf: Self.documentFile, encoding: .utf8))
        let paths = try #require(document["paths"]?.objectValue)
        var operations = 0
        for (path, item) in paths {
            for (method, operation) in item.objectValue ?? [:] where ["get", "post", "put", "delete"].contains(method) {
                operations += 1
                #expect(operation["responses"]?["503"] == ["$ref": "#/components/responses/Busy"], "\(method) \(path)")
            }
        }
        #expect(operations == 20)

        let vocabulary = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("Sources/OrchestrateStore/Vocabulary.swift"),
                                    encoding: .utf8)
        let journaled = Set(vocabulary.matches(of: /EventType\(rawValue: "([a-z_.]+)"\)/).map { String($0.output.1) })
        let documented = Set(document["components"]?["schemas"]?["EventType"]?["enum"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        #expect(journaled.count > 40)
        #expect(documented == journaled, "missing: \(journaled.subtracting(documented).sorted()); unknown: \(documented.subtracting(journaled).sorted())")
    }
}
