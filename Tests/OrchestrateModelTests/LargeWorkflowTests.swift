import OrchestrateModel
import Testing

/// Workflows far larger than people write by hand: the validator must neither recurse once
/// per step (a long chain would exhaust the stack) nor build per-step ancestor sets.
@Suite struct LargeWorkflowTests {
    func chain(_ n: Int, lastReads: Int, closeCycle: Bool = false) -> String {
        var lines = ["version: 1", "name: long", "steps:", "  s0:", "    uses: t.noop"]
        if closeCycle { lines.append("    needs: [s\(n - 1)]") }
        for i in 1..<n { lines.append("  s\(i): { uses: t.noop, needs: [s\(i - 1)] }") }
        lines.append("  last: { uses: t.noop, needs: [s\(n - 1)], with: { v: \"${{ steps.s\(lastReads).outputs }}\" } }")
        return lines.joined(separator: "\n") + "\n"
    }

    @Test func aTwentyThousandStepChainValidatesAndSeesFarAncestors() throws {
        let workflow = try WorkflowLoader.parse(source: chain(20_000, lastReads: 0), file: "long.yaml", catalog: nil)
        #expect(workflow.steps.count == 20_001)
    }

    @Test func aCycleThroughTwentyThousandStepsIsReported() {
        #expect(throws: WorkflowErrors.self) {
            try WorkflowLoader.parse(source: chain(20_000, lastReads: 0, closeCycle: true), file: "long.yaml", catalog: nil)
        }
        do {
            _ = try WorkflowLoader.parse(source: chain(20_000, lastReads: 0, closeCycle: true), file: "long.yaml", catalog: nil)
        } catch {
            #expect(error.diagnostics.count == 1)
            #expect(error.diagnostics.first?.message.hasPrefix("dependency cycle: s0 -> s19999 -> s19998") == true)
        }
    }
}
