// The YAML reader composes libyaml's events itself (YAMLReader.swift): what Yams' composer did
// for us (aliases, one document, libyaml's errors with their positions) must still hold, and
// duplicate keys that Yams could not let through are now reported like any other.
import OrchestrateJSON
import OrchestrateModel
import Testing

private func errors(_ source: String) -> [String] {
    do {
        _ = try WorkflowLoader.parse(source: source, file: "r.yaml", catalog: TestCatalog())
        return []
    } catch {
        return error.diagnostics.map { "\($0.location.line):\($0.location.column) \($0.message)" }
    }
}

@Suite("YAML reader")
struct YAMLReaderTests {
    @Test("an alias stands for its anchored node, wherever it is used")
    func aliases() throws {
        let wf = try WorkflowLoader.parse(source: """
            name: a
            steps:
              a: { uses: exec, with: &common { command: [x, "${{ inputs.n }}"], cwd: /tmp } }
              b: { uses: exec, with: *common, needs: [a] }
            inputs:
              n: { type: string, default: &n "1" }
              m: { type: string, default: *n }
            """, file: "r.yaml", catalog: TestCatalog())
        #expect(wf.step("b")?.with.expressions.count == 1)
        #expect(wf.input("m")?.defaultValue == .string("1"))
    }

    @Test("an undefined alias is a YAML error at the alias")
    func undefinedAlias() {
        #expect(errors("name: a\nsteps:\n  a: { uses: exec, with: *nothing }\n")
            == ["3:26 invalid YAML: found undefined alias"])
    }

    @Test("a second document is refused where it begins")
    func secondDocument() {
        #expect(errors("name: a\nsteps:\n  a: { uses: exec, with: { command: [x] } }\n---\nname: b\n")
            == ["4:1 invalid YAML: but found another document (expected a single document in the stream at 1:1)"])
    }

    @Test("libyaml's syntax errors keep their position and context")
    func syntaxErrors() {
        #expect(errors("name: a\nsteps: [\n")
            == ["3:1 invalid YAML: did not find expected node content (while parsing a flow node at 3:1)"])
        #expect(errors("name: a\nsteps:\n  a: { uses: exec }\n\tb: { uses: exec }\n")
            == ["4:1 tab character in indentation; YAML indents with spaces only"])
    }

    @Test("a control character is refused at its line and column")
    func controlCharacter() {
        #expect(errors("name: a\nsteps:\n  a: { uses: ex\u{1}ec }\n")
            == ["3:16 invalid text: control characters are not allowed"])
    }

    @Test("positions count lines the way libyaml does: CRLF, CR and Unicode line separators")
    func lineBreaks() {
        let lf = "name: a\nsteps:\n  a: { uses: exec, with: { command: [x] }, timeout: soon }\n"
        let expected = ["3:53 invalid duration 'soon' for 'timeout': write a number and a unit, "
                        + "as in 500ms, 30s, 10m, 6h or 1h30m"]
        #expect(errors(lf) == expected)
        #expect(errors(lf.replacingOccurrences(of: "\n", with: "\r\n")) == expected)
        #expect(errors(lf.replacingOccurrences(of: "\n", with: "\r")) == expected)
        // An expression's error is placed inside its string, on the right line.
        let expression = "name: a\r\nsteps:\r\n  a: { uses: exec, with: { command: [\"${{ inputs.nope }}\"] } }\r\n"
        #expect(errors(expression) == ["3:50 unknown input 'nope'"])
    }

    @Test("duplicate keys that span lines or are not text are reported like any other, and reading goes on")
    func unusualDuplicateKeys() {
        // Yams refused these outright: one "duplicate key" error, the rest of the file unread.
        let d = errors("""
            name: a
            steps:
              a:
                uses: exec
                with:
                  command: [x]
                  ? "long
                    key"
                  : 1
                  "long key": 2
                  ? [k]
                  : 3
                  ? [k]
                  : 4
              b: { uses: exec, timeout: soon }
            """)
        #expect(d.contains("10:7 duplicate key 'long key' (first defined at 7:9)"), "\(d)")
        #expect(d.contains("11:9 a mapping key must be a plain string, not a list"), "\(d)")
        #expect(d.contains("13:9 a mapping key must be a plain string, not a list"), "\(d)")
        #expect(d.contains { $0.hasPrefix("15:29 invalid duration 'soon'") }, "\(d)")
    }

    @Test("a plain scalar is a string unless it reads as null, a boolean or a number")
    func plainScalars() throws {
        let wf = try WorkflowLoader.parse(source: """
            name: a
            inputs:
              w: { type: string, default: true_to_size }
              x: { type: string, default: no-op }
              y: { type: number, default: -.5e3 }
              z: { type: number, default: .inf }
              t: { type: boolean, default: TRUE }
              h: { type: integer, default: 0x1F }
              p: { type: string, default: ~/path }
            steps:
              a: { uses: exec, with: { command: [x] } }
            """, file: "r.yaml", catalog: TestCatalog())
        #expect(wf.input("w")?.defaultValue == .string("true_to_size"))
        #expect(wf.input("x")?.defaultValue == .string("no-op"))
        #expect(wf.input("y")?.defaultValue == .double(-500))
        #expect(wf.input("z")?.defaultValue == .double(.infinity))
        #expect(wf.input("t")?.defaultValue == .bool(true))
        #expect(wf.input("h")?.defaultValue == .int(31))
        #expect(wf.input("p")?.defaultValue == .string("~/path"))
    }
}
