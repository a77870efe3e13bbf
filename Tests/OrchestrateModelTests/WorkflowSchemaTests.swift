// schemas/workflow.schema.json (kept current by ReferencePagesTests): every decoder field typed, and checked
// with a JSON Schema validator editors agree with (check-jsonschema, from PyPI): the shipped
// workflows pass, and the bad corpus fails exactly where a schema can tell.
import Foundation
import OrchestrateModel
import OrchestrateTestSupport
import Testing

enum WorkflowSchemaFile {
    static let path = TestPaths.packageRoot.appendingPathComponent("schemas/workflow.schema.json").path

    /// `python -m check_jsonschema` over `files`; its status (0: all valid).
    static func check(_ files: [String]) throws -> ProcessResult {
        try ChildProcess.run(try PythonVenv.python(),
                             ["-m", "check_jsonschema", "--schemafile", path] + files)
    }
}

/// Bad corpus files a schema rejects: unknown fields, wrong types and values, missing required
/// fields, `with:` against the built-in step types' inputs, and YAML that does not parse
/// (duplicate keys included). The others are wrong in ways only `orchestrate validate` sees:
/// references, cycles, expressions, an input's default against its type, and step types or
/// enums of the corpus's own test catalog (with-enum-violation: the real `http.request` takes any
/// method; unknown-step-type: `uses` stays open to third-party plugins).
let schemaRejectedBadWorkflows: Set<String> = [
    "bad-duration-bare-number.yaml",
    "bad-duration.yaml",
    "bad-retry-fields.yaml",
    "compensate-missing-uses.yaml",
    "compensate-with-violation.yaml",
    "concurrency-limit-zero.yaml",
    "duplicate-key-in-with.yaml",
    "duplicate-keys.yaml",
    "duplicate-step-id.yaml",
    "empty-file.yaml",
    "empty-steps.yaml",
    "for-each-not-a-list.yaml",
    "input-unknown-type.yaml",
    "invalid-step-id.yaml",
    "jitter-value.yaml",
    "many-errors.yaml",
    "missing-name.yaml",
    "missing-steps.yaml",
    "needs-wrong-type.yaml",
    "not-a-mapping.yaml",
    "retention-not-a-duration.yaml",
    "retention-typo.yaml",
    "retry-unknown-field.yaml",
    "secret-without-env.yaml",
    "step-missing-uses.yaml",
    "unknown-step-field.yaml",
    "unknown-top-level-field.yaml",
    "version-2.yaml",
    "version-not-integer.yaml",
    "watch-feed.yaml",
    "watch-fields.yaml",
    "with-absent-but-required.yaml",
    "with-input-needing-another.yaml",
    "with-minimum-and-min-length.yaml",
    "with-missing-required.yaml",
    "with-pattern-mismatch.yaml",
    "with-unknown-property.yaml",
    "with-wrong-nested-type.yaml",
    "with-wrong-type.yaml",
    "yaml-syntax-unclosed-flow.yaml",
    "yaml-tab-indentation.yaml",
]

@Suite("Workflow JSON Schema")
struct WorkflowSchemaTests {
    @Test("every field the decoder accepts has a type in the schema")
    func everyFieldIsTyped() {
        #expect(WorkflowSchema.untypedFields.isEmpty,
                "give these fields a schema in Sources/OrchestrateModel/WorkflowSchema.swift: \(WorkflowSchema.untypedFields)")
    }

    @Test("the shipped workflows are valid against the schema")
    func shippedWorkflowsPass() throws {
        let folder = TestPaths.packageRoot.appendingPathComponent("workflows")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasSuffix(".yaml") }.sorted().map { folder.appendingPathComponent($0).path }
        #expect(files.count >= 5)
        // And the test suite's own complete example (WorkflowParsingTests).
        let dir = TemporaryDirectory("schema")
        let example = dir.write("vimeo.yaml", vimeoWorkflow).path
        let result = try WorkflowSchemaFile.check(files + [example])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    }

    @Test("a with: value may be a ${{ }} expression where the input is not a string")
    func expressionsInWith() throws {
        let dir = TemporaryDirectory("schema")
        func workflow(_ timeout: String) -> String {
            """
            name: t
            inputs:
              t: { type: integer, default: 5 }
            steps:
              get:
                uses: http.request
                with:
                  url: https://example.com
                  connect_timeout: \(timeout)
                  follow_redirects: "${{ inputs.t > 3 }}"
            """
        }
        let good = try WorkflowSchemaFile.check([dir.write("good.yaml", workflow("${{ inputs.t }}")).path])
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        let bad = try WorkflowSchemaFile.check([dir.write("bad.yaml", workflow("soon")).path])
        #expect(bad.status == 1 && bad.stdout.contains("connect_timeout"), "\(bad.stdout)\(bad.stderr)")
    }

    @Test("the schema rejects exactly the bad workflows it can tell")
    func badCorpus() throws {
        let paths = BadWorkflowCorpus.files.map { BadWorkflowCorpus.directory.appendingPathComponent($0).path }
        let result = try WorkflowSchemaFile.check(["--output-format", "JSON"] + paths)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                                  "\(result.stdout)\(result.stderr)")
        // Files that broke the schema, and files that are not YAML it can read.
        let failures = ((report["errors"] as? [[String: Any]]) ?? []) + ((report["parse_errors"] as? [[String: Any]]) ?? [])
        let rejected = Set(failures.compactMap { ($0["filename"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } })
        #expect(BadWorkflowCorpus.files.count >= 60)
        #expect(rejected.subtracting(schemaRejectedBadWorkflows).sorted() == [], "rejected but expected to pass")
        #expect(schemaRejectedBadWorkflows.subtracting(rejected).sorted() == [], "expected to be rejected but passed")
    }
}
