// The typed output declarations: the schema they generate and the JSON they write.
import OrchestrateJSON
import OrchestratePluginKit
import Testing

/// Outputs two steps share.
private struct Counts: StepOutputs {
    @Output(help: "files moved", minimum: 0) var files: Int64
    @Output(help: "bytes kept from before") var resumedBytes: Int64?
}

private struct Sample: StepOutputs {
    @Output(help: "the destination") var path: String
    @Output(help: "SHA-256 (hex)", pattern: "^[0-9a-f]{64}$") var sha256: String?
    @Output(name: "location_url", help: "where it went, or null", nullable: true) var locationURL: String?
    @Output(help: "the body parsed, or null", nullable: true) var json: JSONValue?
    @Output(help: "response headers") var headers: [String: String]
    @Output(help: "stdout parsed", schema: ["type": ["object", "array"]]) var parsed: JSONValue?
    var counts = Counts()
}

@Suite struct StepOutputsTests {
    @Test func theSchemaIsGeneratedFromTheDeclarations() throws {
        let expected = try JSONValue(parsing: #"""
            {"type":"object","required":["path","location_url","json","headers","files"],
             "properties":{
               "path":{"type":"string","description":"the destination"},
               "sha256":{"type":"string","pattern":"^[0-9a-f]{64}$","description":"SHA-256 (hex)"},
               "location_url":{"type":["string","null"],"description":"where it went, or null"},
               "json":{"description":"the body parsed, or null"},
               "headers":{"type":"object","additionalProperties":{"type":"string"},"description":"response headers"},
               "parsed":{"type":["object","array"],"description":"stdout parsed"},
               "files":{"type":"integer","minimum":0,"description":"files moved"},
               "resumed_bytes":{"type":"integer","description":"bytes kept from before"}}}
            """#)
        #expect(Sample.schema == expected)
        #expect(try JSONValue(parsing: Sample.schemaText) == expected)
        // No additionalProperties: `validate` checks steps.X.outputs.NAME against these names.
        #expect(Sample.schema["additionalProperties"] == nil)
    }

    @Test func whatIsWrittenFollowsTheDeclarations() throws {
        var outputs = Sample()
        outputs.path = "/d/a.mov"
        outputs.locationURL = nil
        outputs.headers = ["etag": "\"1\""]
        outputs.headers["x-more"] = "2"
        outputs.counts.files = 3
        // Optionals left nil are absent, nullable ones are null, the rest as set.
        let first: [String: JSONValue] = ["path": "/d/a.mov", "location_url": .null, "json": .null,
                                          "headers": ["etag": "\"1\"", "x-more": "2"], "files": 3]
        #expect(try outputs.jsonObject() == first)
        outputs.sha256 = String(repeating: "a", count: 64)
        outputs.json = ["ok": true]
        outputs.parsed = [1, 2]
        outputs.counts.resumedBytes = 0
        outputs.locationURL = "https://e.example/x"
        let written = try outputs.jsonObject()
        #expect(written["sha256"] == .string(String(repeating: "a", count: 64)))
        #expect(written["json"] == ["ok": true] && written["parsed"] == [1, 2] && written["resumed_bytes"] == 0)
        #expect(written["location_url"] == "https://e.example/x")
        #expect(outputs.path == "/d/a.mov" && outputs.counts.files == 3 && outputs.sha256?.count == 64)
    }

    @Test func anOutputThatIsAlwaysWrittenMustBeSet() {
        var outputs = Sample()
        outputs.path = "/d/a.mov"
        outputs.headers = [:]
        #expect(throws: StepError.permanent("the step did not set its output 'files' (a bug in the step type)", code: "missing_output")) {
            try outputs.jsonObject()
        }
    }
}
