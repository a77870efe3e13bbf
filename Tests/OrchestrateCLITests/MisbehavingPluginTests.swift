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

    /// A plugin thread still at work when the run ends must not take the process down on its
    /// way out: `exit` would run every library's exit handler (OpenSSL's frees what a live
    /// thread of a download's hash uses: SIGSEGV or SIGABRT after a run that succeeded, seen in
    /// CI). probe.linger's exit handler aborts when its thread is still working.
    @Test func aThreadAPluginLeftWorkingDoesNotCrashTheExit() throws {
        let probe = try CCompiler.buildFixture("hostprobe", into: h.dir.url)
        let file = h.workflow("""
            version: 1
            name: linger
            steps:
              linger: { uses: probe.linger }
              after: { uses: test.noop, needs: [linger] }
            """)
        let result = try h.orchestrate(["run", file, "--plugin-path", probe.path])
        #expect(result.status == 0, "exit status \(result.status)\(result.signalled ? " (a signal)" : ""): \(result.stderr)")
        #expect(result.stdout.contains("succeeded"), "\(result.stdout)")
    }
}
