// Workflows built to exhaust the validator: nested YAML aliases ("billion laughs") and
// expressions whose operator chains are tens of thousands of operands long. Each is refused
// quickly with a FILE:LINE:COL error; `orchestrate validate` runs as a child process (under
// `timeout`), so a crash or a runaway fails the test instead of taking the runner down.
import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateTestSupport
import Testing

@Suite("Resource bombs in workflows")
struct ResourceBombTests {
    let dir = TemporaryDirectory("bombs")

    /// `orchestrate validate FILE`, killed after 30 s; with the seconds it took.
    func validate(_ name: String, _ text: String) throws -> (result: ProcessResult, seconds: Double, path: String) {
        let path = dir.write(name, text).path
        let start = Date()
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/timeout"),
                                          ["-s", "KILL", "30", TestPaths.orchestrate.path, "validate", path])
        return (result, Date().timeIntervalSince(start), path)
    }

    /// The billion laughs under a step's `with`: `levels` lists of nine, each of the previous.
    static func aliasBomb(levels: Int) -> String {
        let names = (0..<levels).map { String(UnicodeScalar(UInt8(ascii: "a") + UInt8($0))) }
        var lines = ["version: 1", "name: bomb", "steps:", "  s:", "    uses: exec", "    with:", "      command: [echo]"]
        lines.append("      a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]")
        for (previous, name) in zip(names, names.dropFirst()) {
            lines.append("      \(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ", ") + "]")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test func aYAMLAliasBombIsRefusedAtTheAliasWithinASecond() throws {
        for levels in [9, 10] {
            let text = Self.aliasBomb(levels: levels)
            let (result, seconds, path) = try validate("bomb\(levels).yaml", text)
            #expect(result.status == 2 && !result.signalled, "\(levels) levels: \(result.status) \(result.stderr.prefix(500))")
            // Expanded sizes: a 37, b 334, c 3007, d 27064, e 243577: the third *e of line f
            // takes the aliases past a million.
            let lineF = text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("      f:") }! + 1
            let column = 14 + 2 * 4  // "      f: &f [*e, *e, *e"
            #expect(result.stderr.contains("\(path):\(lineF):\(column): error: the aliases of this file expand it by more than 1 million"),
                    "\(result.stderr.prefix(500))")
            #expect(seconds < 1.0, "\(levels) levels took \(seconds) s")
        }
    }

    @Test func aliasesOfARealSizeStillWork() throws {
        // 400 steps sharing one anchored `with` of 20 entries: 8,000 nodes through aliases.
        var text = "version: 1\nname: shared\nsteps:\n  s0:\n    uses: exec\n    with: &common\n      command: [echo]\n"
        text += (0..<19).map { "      k\($0): \"value \($0) ${{ run.id }}\"\n" }.joined()
        text += (1..<400).map { "  s\($0): { uses: exec, with: *common }\n" }.joined()
        let workflow = try WorkflowLoader.parse(source: text, file: "shared.yaml", catalog: nil)
        #expect(workflow.steps.count == 400)
        #expect(workflow.steps.last?.with.expressions.count == 19)
    }

    /// `${{ 1 + 1 + … + 1 }}` of `operands` operands as a step input.
    static func chain(_ operands: Int, _ op: String = "+") -> String {
        "version: 1\nname: chain\nsteps:\n  s:\n    uses: exec\n    with:\n      command: [echo]\n      env: { N: \"${{ "
            + Array(repeating: "1", count: operands).joined(separator: " \(op) ") + " }}\" }\n"
    }

    @Test func aVeryLongOperatorChainIsAnErrorNotACrash() throws {
        // 20 KB and 2 MB of `1 + 1 + …`; `&&` and `.` chains are trees of the same shape. The
        // first operand is at column 22 of line 8. 20 KB: refused at the operator that makes the
        // tree one level too tall (after 128 operands); 2 MB: at its 10,001st token.
        for (name, operands, op, column, what) in [("chain20k", 5_000, "+", 22 + 127 * 4 + 2, "more than 128 operations"),
                                                   ("and20k", 5_000, "&&", 22 + 127 * 5 + 2, "more than 128 operations"),
                                                   ("chain2m", 500_000, "+", 22 + 5_000 * 4, "more than 10000 tokens")] {
            let (result, seconds, path) = try validate("\(name).yaml", Self.chain(operands, op))
            #expect(!result.signalled, "\(name): validate crashed (signal \(result.status))")
            #expect(result.status == 2, "\(name): \(result.stderr.prefix(500))")
            #expect(result.stderr.contains("\(path):8:\(column): error: invalid expression: expression too long: \(what)"),
                    "\(name): \(result.stderr.prefix(500))")
            #expect(seconds < 5, "\(name) took \(seconds) s")
        }
        let members = "version: 1\nname: m\ninputs: { a: { type: string } }\nsteps:\n  s: { uses: exec, with: { command: [echo, \"${{ inputs"
            + String(repeating: ".a", count: 1_000) + " }}\"] } }\n"
        let (result, _, _) = try validate("members.yaml", members)
        #expect(!result.signalled && result.status == 2 && result.stderr.contains("expression too long"), "\(result.stderr.prefix(500))")
    }

    @Test func theLongestChainAllowedEvaluates() throws {
        let longest = Array(repeating: "1", count: 128).joined(separator: " + ")
        #expect(try Expression(parsing: longest).evaluate(in: EvaluationContext()) == .int(128))
        #expect(throws: Diagnostic.self) { try Expression(parsing: longest + " + 1") }
    }
}
