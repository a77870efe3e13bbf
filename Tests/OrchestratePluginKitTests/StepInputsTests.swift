// The typed input declarations: the schema they generate and the values they read.
import OrchestrateJSON
import OrchestratePluginKit
import Testing

private enum Mode: String, CaseIterable, InputEnum { case fast, safe = "very-safe" }

/// Inputs two steps share, with a default each step may choose.
private struct Shared: StepInputs {
    @Input var retries: Int
    @Input(help: "extra headers") var headers: [String: String] = [:]

    init() { self.init(retries: 2) }
    init(retries: Int) { _retries = Input(wrappedValue: retries, help: "tries", minimum: 0) }
}

private struct Sample: StepInputs {
    @Input(help: "where from", minLength: 1) var sourcePath: String
    @Input(help: "bytes per chunk", minimum: 1, maximum: 1024) var chunkSize: Int64 = 64
    @Input(help: "expected digest") var sha256: String?
    @Input(name: "protocol", help: "how") var mode = Mode.fast
    @Input(help: "old name", deprecated: true) var limitKibps: Int64?
    @Input(help: "anything") var payload: JSONValue?
    var shared = Shared(retries: 5)
    var rate = RateCapInputs()

    static var schemaRules: [String: JSONValue] { ["if": ["required": ["sha256"]], "then": ["required": ["protocol"]]] }
}

@Suite struct StepInputsTests {
    @Test func theSchemaIsGeneratedFromTheDeclarations() throws {
        let expected = try JSONValue(parsing: #"""
            {"type":"object","additionalProperties":false,"required":["source_path"],
             "if":{"required":["sha256"]},"then":{"required":["protocol"]},
             "properties":{
               "source_path":{"type":"string","minLength":1,"description":"where from"},
               "chunk_size":{"type":"integer","minimum":1,"maximum":1024,"default":64,"description":"bytes per chunk"},
               "sha256":{"type":"string","description":"expected digest"},
               "protocol":{"type":"string","enum":["fast","very-safe"],"default":"fast","description":"how"},
               "limit_kibps":{"type":"integer","deprecated":true,"description":"old name"},
               "payload":{"description":"anything"},
               "retries":{"type":"integer","minimum":0,"default":5,"description":"tries"},
               "headers":{"type":"object","additionalProperties":{"type":"string"},"default":{},"description":"extra headers"},
               "max_rate":{"type":["integer","string"],"minimum":0,"description":"this step's bandwidth cap, all its transfers together: bytes per second, or with a K, M or G suffix (512K, 10M); 0 or off: none"}}}
            """#)
        #expect(Sample.schema == expected)
        #expect(try JSONValue(parsing: Sample.schemaText) == expected)
        // A group on its own has its own default.
        #expect(Shared.schema["properties"]?["retries"]?["default"] == 2)
    }

    @Test func readingAppliesTheDeclaredDefaultsAndTypes() throws {
        let inputs = try Sample.read(from: ["source_path": "/a", "max_rate": "10M", "payload": [1, "x"]])
        #expect(inputs.sourcePath == "/a")
        #expect(inputs.chunkSize == 64 && !inputs.$chunkSize.given)
        #expect(inputs.sha256 == nil && inputs.limitKibps == nil)
        #expect(inputs.mode == .fast)
        #expect(inputs.shared.retries == 5 && inputs.shared.headers == [:])
        #expect(inputs.rate.maxRate?.bytesPerSecond == 10 << 20 && inputs.rate.$maxRate.given)
        #expect(inputs.payload == [1, "x"])
        #expect(inputs.$sourcePath.name == "source_path" && inputs.$mode.name == "protocol")

        let given = try Sample.read(from: ["source_path": "/b", "chunk_size": 7, "protocol": "very-safe", "sha256": "ab",
                                           "headers": ["X-A": "1"], "retries": 0, "max_rate": 0, "limit_kibps": 3])
        #expect(given.chunkSize == 7 && given.$chunkSize.given)
        #expect(given.mode == .safe && given.sha256 == "ab" && given.limitKibps == 3)
        #expect(given.shared.headers == ["X-A": "1"] && given.shared.retries == 0)
        #expect(given.rate.maxRate != nil && given.rate.maxRate?.bytesPerSecond == nil, "0 is given, and means no cap")
    }

    @Test func nullCountsAsAbsent() throws {
        let inputs = try Sample.read(from: ["source_path": "/a", "chunk_size": nil, "sha256": nil])
        #expect(inputs.chunkSize == 64 && !inputs.$chunkSize.given)
        #expect(inputs.sha256 == nil && !inputs.$sha256.given)
    }

    @Test func missingAndMistypedInputsAreInvalidInputNamingTheInput() {
        #expect(throws: StepError.invalidInput("input 'source_path' is required", code: "missing_input")) {
            try Sample.read(from: ["chunk_size": 1])
        }
        #expect(throws: StepError.invalidInput("input 'chunk_size' must be an integer, not \"abc\"", code: "invalid_input")) {
            try Sample.read(from: ["source_path": "/a", "chunk_size": "abc"])
        }
        #expect(throws: StepError.invalidInput("input 'protocol' must be one of fast, very-safe, not \"slow\"", code: "invalid_input")) {
            try Sample.read(from: ["source_path": "/a", "protocol": "slow"])
        }
        #expect(throws: StepError.invalidInput("input 'headers' must be an object of strings, not {\"X\":1}", code: "invalid_input")) {
            try Sample.read(from: ["source_path": "/a", "headers": ["X": 1]])
        }
        #expect(throws: StepError.invalidInput(
            "input 'max_rate' must be bytes per second, or with a K, M or G suffix (512K, 10M), or off, not \"fast\"", code: "invalid_input"))
        {
            try Sample.read(from: ["source_path": "/a", "max_rate": "fast"])
        }
    }

    @Test func aReadValueIsItsOwn() throws {
        // Each read builds fresh slots: an earlier value never shows through a later one.
        let first = try Sample.read(from: ["source_path": "/first", "chunk_size": 9])
        let second = try Sample.read(from: ["source_path": "/second"])
        #expect(first.sourcePath == "/first" && first.chunkSize == 9)
        #expect(second.sourcePath == "/second" && second.chunkSize == 64)
    }
}
