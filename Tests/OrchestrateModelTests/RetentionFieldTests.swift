import OrchestrateModel
import Testing

/// A workflow's own `retention:`: a duration, or `off`; absent, the queue's or the store's.
@Suite struct RetentionFieldTests {
    func retention(_ line: String) throws -> Double? {
        try WorkflowLoader.parse(source: "name: x\n\(line)\nsteps:\n  a: { uses: exec, with: { command: [echo] } }\n",
                                 file: "test.yaml", catalog: TestCatalog()).retention
    }

    @Test func aDurationOffOrNothing() throws {
        #expect(try retention("retention: 90d") == 90 * 86_400)
        #expect(try retention("retention: 12h30m") == 12 * 3_600 + 1_800)
        #expect(try retention("retention: off") == .infinity)
        #expect(try retention("") == nil)
    }
}
