// Resolving `--input K=V` / `--inputs FILE.json` against declared inputs.
import OrchestrateJSON
import OrchestrateModel
import Testing

private let workflow: Workflow = {
    let source = """
    name: inputs
    inputs:
      source: { type: path, required: true }
      api: { type: string, default: "https://api.vimeo.com" }
      count: { type: integer, default: 2 }
      ratio: number
      dry_run: { type: boolean, default: false }
      tags: { type: array }
      meta: { type: object, default: { a: 1 } }
      cache: { type: path, default: cache/dir }
    steps:
      a: { uses: exec, with: { command: [echo] } }
    """
    return try! WorkflowLoader.parse(source: source, file: "inputs.yaml", catalog: nil)
}()

private func resolve(_ strings: [String: String] = [:], json: [String: JSONValue] = [:]) throws(InputErrors) -> JSONValue {
    try workflow.resolveInputs(strings: strings, json: json, currentDirectory: "/home/u/work")
}

@Suite("Input resolution")
struct InputResolutionTests {
    @Test("declarations keep file order, types and defaults")
    func declarations() {
        #expect(workflow.inputs.map(\.name) == ["source", "api", "count", "ratio", "dry_run", "tags", "meta", "cache"])
        #expect(workflow.inputs.map(\.type) == [.path, .string, .integer, .number, .boolean, .array, .object, .path])
        #expect(workflow.inputs[0].required)
        #expect(!workflow.inputs[1].required)
        #expect(workflow.inputs[2].defaultValue == .int(2))
        #expect(workflow.inputs[6].defaultValue == ["a": 1])
        #expect(workflow.inputs[0].location.line == 3 && workflow.inputs[0].location.column == 3)
    }

    @Test("defaults applied, strings converted, paths made absolute")
    func conversions() throws {
        let v = try resolve(["source": "videos/../videos/./a.mov", "count": "12", "ratio": "0.5", "dry_run": "true",
                             "tags": #"["x","y"]"#])
        #expect(v == [
            "source": "/home/u/work/videos/a.mov", "api": "https://api.vimeo.com", "count": 12, "ratio": 0.5,
            "dry_run": true, "tags": ["x", "y"], "meta": ["a": 1], "cache": "/home/u/work/cache/dir",
        ])
        #expect(try resolve(["source": "/abs/b.mov"])["source"] == "/abs/b.mov")
        #expect(try resolve(["source": "s", "ratio": "3"])["ratio"] == .int(3))
    }

    @Test("optional inputs without a default are left out")
    func optionalAbsent() throws {
        let v = try resolve(["source": "a"])
        #expect(v["ratio"] == nil)
        #expect(v["tags"] == nil)
    }

    @Test("JSON inputs are type-checked; strings win over JSON")
    func jsonInputs() throws {
        let v = try resolve(["count": "5"], json: ["source": "rel/x", "count": 9, "ratio": 2.0, "meta": ["b": [1]]])
        #expect(v["source"] == "/home/u/work/rel/x")
        #expect(v["count"] == .int(5))
        #expect(v["ratio"] == .double(2))
        #expect(v["meta"] == ["b": [1]])
        #expect(try resolve(json: ["source": "a", "count": 3.0])["count"] == .int(3))
    }

    @Test("every problem is reported at once")
    func problems() {
        do {
            _ = try resolve(["count": "twelve", "dry_run": "yes", "sorce": "x"], json: ["tags": "x", "ratio": "1"])
            Issue.record("expected input errors")
        } catch {
            let m = error.messages
            #expect(m.count == 6, "\(m)")
            #expect(m.contains { $0.contains("unknown input 'sorce'") && $0.contains("did you mean 'source'?") })
            #expect(m.contains { $0.contains("missing required input 'source'") })
            #expect(m.contains { $0.contains("input 'count' must be an integer, got 'twelve'") })
            #expect(m.contains { $0.contains("input 'dry_run' must be true or false") })
            #expect(m.contains { $0.contains("input 'tags' must be an array, got a string") })
            #expect(m.contains { $0.contains("input 'ratio' must be a number, got a string") })
        }
    }

    @Test("an input spelt out or abbreviated gets a did-you-mean, both ways")
    func abbreviations() throws {
        let wf = try WorkflowLoader.parse(source: """
            name: abbreviations
            inputs:
              dest: { type: path, required: true }
              max_rate_limit: string
            steps:
              a: { uses: exec, with: { command: [echo] } }
            """, file: "abbreviations.yaml", catalog: nil)
        do {
            _ = try wf.resolveInputs(strings: ["destination": "/tmp/x", "max_rate": "10M"], json: [:], currentDirectory: "/")
            Issue.record("expected input errors")
        } catch {
            let m = error.messages
            #expect(m.contains { $0.hasPrefix("unknown input 'destination'; did you mean 'dest'?") }, "\(m)")
            #expect(m.contains { $0.hasPrefix("unknown input 'max_rate'; did you mean 'max_rate_limit'?") }, "\(m)")
        }
    }

    @Test("integers must be integral; objects must parse")
    func strictness() {
        #expect(throws: InputErrors.self) { try resolve(["source": "a"], json: ["count": 2.5]) }
        #expect(throws: InputErrors.self) { try resolve(["source": "a", "meta": "{not json"]) }
        #expect(throws: InputErrors.self) { try resolve(["source": "a", "ratio": "nan"]) }
        #expect(throws: InputErrors.self) { try resolve(["source": ""]) }
    }
}
