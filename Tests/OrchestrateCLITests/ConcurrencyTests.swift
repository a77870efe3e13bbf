import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Keyed concurrency limits hold across every run sharing a state store.
@Suite struct ConcurrencyTests {
    let h = Harness()

    @Test func aKeyedLimitHoldsAcrossTwoRunsStartedTogether() throws {
        let gauge = h.path("gauge")
        let file = h.workflow("""
            version: 1
            name: limited
            concurrency:
              - { key: "api:${{ inputs.api }}", limit: 2 }
            inputs:
              api: { type: string, default: "https://api.example" }
            steps:
              work:
                uses: test.sleep
                for_each: [1, 2, 3, 4]
                max_parallel: 4
                with: { ms: 250, gauge_file: "\(gauge)" }
            """)
        // Two processes, one store, started at the same moment: 8 steps could run at once.
        let a = try h.start(["run", file])
        let b = try h.start(["run", file])
        a.waitUntilExit()
        b.waitUntilExit()
        #expect(a.terminationStatus == 0 && b.terminationStatus == 0)
        let numbers = h.read("gauge").split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(numbers.count == 2)
        #expect(numbers.first == 0, "every slot was given back")
        #expect(numbers.last == 2, "at most 2 at once, and the limit was reached: max \(numbers.last ?? -1)")
    }

    @Test func maxParallelBoundsAFanOut() throws {
        let gauge = h.path("gauge")
        let file = h.workflow("""
            version: 1
            name: fanout
            steps:
              work:
                uses: test.sleep
                for_each: [1, 2, 3, 4, 5, 6]
                max_parallel: 3
                with: { ms: 200, gauge_file: "\(gauge)" }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(h.read("gauge").split(separator: " ").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } == 3)
    }

    @Test func theMaxParallelFlagBoundsTheWholeProcess() throws {
        let gauge = h.path("gauge")
        let steps = (1...4).map { "  s\($0): { uses: test.sleep, with: { ms: 200, gauge_file: \"\(gauge)\" } }" }.joined(separator: "\n")
        let file = h.workflow("version: 1\nname: wide\nsteps:\n" + steps)
        let result = try h.orchestrate(["run", file, "--max-parallel", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(h.read("gauge").split(separator: " ").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } == 1)
    }
}
