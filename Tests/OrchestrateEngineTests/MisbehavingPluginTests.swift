import Foundation
import OrchestrateTestSupport
import Testing

/// A plugin that breaks the ABI is named, not silently tolerated: the host still ignores the
/// call (it cannot be served), but the user learns which step type to report.
@Suite struct MisbehavingPluginTests {
    let h = Harness()

    @Test func aPluginCallingTheHostAfterItsRunReturnedGetsOneWarningNamingItsStepType() throws {
        // probe.late's thread makes seven host calls 300 ms after run returned; test.sleep keeps
        // the process alive past them.
        let probe = try CCompiler.buildFixture("hostprobe", into: h.dir.url)
        let file = h.workflow("""
            version: 1
            name: late
            steps:
              late: { uses: probe.late }
              wait: { uses: test.sleep, with: { ms: 1200 }, needs: [late] }
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", probe.path])
        #expect(result.status == 0, "\(result.stderr)")
        let warnings = result.stderr.split(separator: "\n").filter { $0.contains("called the host") }
        #expect(warnings.count == 1, "\(result.stderr)")
        #expect(warnings.first?.hasPrefix("warning: step type 'probe.late' called the host (log) after its run returned") == true,
                "\(result.stderr)")
    }
}
