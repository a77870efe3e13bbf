import Foundation
import OrchestrateJSON
import OrchestrateModel
import Testing

/// Seeded fuzzing of the workflow loader and the expression language: mutated workflows and
/// random expressions must never crash, and every rejection must be a located diagnostic
/// (`FILE:LINE:COL: error: …` with a real line and column). Reproducible: the seed is fixed;
/// `ORCHESTRATE_FUZZ_ITERATIONS` and `ORCHESTRATE_FUZZ_SEED` run it longer or elsewhere
/// (`bench/fuzz/run.sh`).
@Suite struct FuzzTests {
    static let iterations = Int(ProcessInfo.processInfo.environment["ORCHESTRATE_FUZZ_ITERATIONS"] ?? "") ?? 1500
    static let seed = UInt64(ProcessInfo.processInfo.environment["ORCHESTRATE_FUZZ_SEED"] ?? "") ?? 0x5EED_2026

    static let seedWorkflow = """
        version: 1
        name: fuzz
        inputs:
          source: { type: path, required: true }
          size: { type: integer, default: 3 }
        secrets:
          token: { env: TOKEN }
        defaults:
          timeout: 10m
          retry: { max_attempts: 3, initial_interval: 1s, backoff: 2.0, jitter: full }
        concurrency:
          - { key: "api:${{ inputs.size }}", limit: 2 }
        steps:
          create:
            uses: http.request
            with: { method: POST, url: "https://x/${{ inputs.size * 2 }}", headers: { A: "b ${{ secrets.token }}" } }
            idempotency_key: "${{ run.id }}/create"
            compensate: { uses: http.request, with: { method: DELETE, url: "https://x${{ steps.create.outputs.json.uri }}" } }
          export:
            needs: [create]
            uses: exec
            if: inputs.size > 1 && !(inputs.size == 7)
            with: { command: [cp, "${{ inputs.source }}", "${{ run.dir }}/x"] }
          fan:
            needs: [export]
            uses: exec
            for_each: "${{ fromJSON('[1,2,3]') }}"
            max_parallel: 2
            with: { command: [echo, "${{ format('{0}-{1}', item, basename(inputs.source)) }}"] }
        outputs:
          uri: "${{ steps.create.outputs.json.uri }}"
        """

    /// A small, fast, seedable generator (SplitMix64).
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    }

    static let fragments = ["${{", "}}", ":", "- ", "{", "}", "[", "]", "\"", "'", "\n", "  ", "\t", "#", "&a", "*a", "!!str",
                            "needs: [", "uses: ", "steps.", "inputs.", "secrets.", "item", "((", "))", "&&", "||", "!", "==",
                            "1e999", "-", "9223372036854775808", "\u{0}", "é", "\u{FEFF}", "|", ">", "---", "...", "%YAML 1.2"]

    func mutate(_ text: String, _ random: inout Random) -> String {
        var bytes = Array(text.utf8)
        for _ in 0..<(1 + random.below(4)) {
            guard !bytes.isEmpty else { break }
            let at = random.below(bytes.count)
            switch random.below(4) {
            case 0: bytes.remove(at: at)
            case 1: bytes[at] = UInt8(truncatingIfNeeded: random.next())
            case 2: bytes.insert(contentsOf: Array(Self.fragments[random.below(Self.fragments.count)].utf8), at: at)
            default:
                let end = min(bytes.count, at + random.below(40))
                let chunk = Array(bytes[at..<end])
                bytes.insert(contentsOf: chunk, at: random.below(bytes.count))
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func checkLocated(_ errors: WorkflowErrors, _ input: String) {
        #expect(!errors.diagnostics.isEmpty, "a rejection without diagnostics for:\n\(input)")
        let lineCount = input.split(separator: "\n", omittingEmptySubsequences: false).count
        for d in errors.diagnostics {
            #expect(d.location.line >= 1 && d.location.line <= lineCount + 1, "line \(d.location.line) of \(lineCount): \(d)")
            #expect(d.location.column >= 1, "\(d)")
            #expect(d.description.hasPrefix("fuzz.yaml:\(d.location.line):\(d.location.column): error: "))
        }
    }

    @Test func mutatedWorkflowsAreAcceptedOrRejectedWithLocatedErrors() {
        var random = Random(state: Self.seed)
        var rejected = 0
        for _ in 0..<Self.iterations {
            let input = mutate(Self.seedWorkflow, &random)
            do {
                _ = try WorkflowLoader.parse(source: input, file: "fuzz.yaml", catalog: FuzzCatalog())
            } catch {
                rejected += 1
                checkLocated(error, input)
            }
        }
        #expect(rejected > Self.iterations / 4, "the mutations should break most inputs: \(rejected) rejected")
    }

    @Test func randomExpressionsParseOrFailWithAColumnAndEvaluateWithoutCrashing() {
        var random = Random(state: Self.seed ^ 0xE)
        let atoms = ["inputs.size", "inputs.name", "steps.a.outputs.x", "item", "run.id", "1", "2.5", "'s'", "\"t\"", "true",
                     "null", "[", "]", "(", ")", ".", "+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "!", ",",
                     "format(", "length(", "json(", "fromJSON(", "contains(", "join(", "default(", "x[0]", "9999999999999999999"]
        var context = EvaluationContext()
        context.inputs = ["size": 3, "name": "a.mov"]
        context.steps = ["a": ["outputs": ["x": [1, 2]], "status": "succeeded"]]
        context.item = "i"
        for _ in 0..<(Self.iterations * 2) {
            let text = (0..<(1 + random.below(8))).map { _ in atoms[random.below(atoms.count)] }.joined(separator: " ")
            do {
                let expression = try Expression(parsing: text, file: "e")
                _ = try? expression.evaluate(in: context)
            } catch {
                #expect(error.location.column >= 1 && error.location.column <= text.count + 1, "\(error) for \(text)")
            }
        }
    }
}

/// The step types the fuzz workflow uses, with permissive schemas.
struct FuzzCatalog: StepCatalog {
    func stepInfo(for id: String) -> StepInfo? {
        guard ["http.request", "exec"].contains(id) else { return nil }
        return StepInfo(id: id, inputSchema: ["type": "object"], outputSchema: nil, acceptsItems: false)
    }
}
