import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What a failed run says about its steps: the one that failed, those it stopped on their way
/// (`cancelled`), and those that never started (`not_run`), which `retry` runs again.
@Suite struct RunSummaryTests {
    let h = Harness()

    /// `broken` fails at once (a permanent error) while `slow` is running; `after` needs `broken`
    /// and `last` needs `after`, so neither ever starts. `broken` fails only while `fail_times`
    /// says so, so a retried run succeeds.
    func failingRun() -> String {
        h.workflow("""
            version: 1
            name: summary
            steps:
              slow:
                uses: test.sleep
                with: { ms: 3000 }
              broken:
                uses: test.flaky
                with: { counter_file: "\(h.path("counter"))", fail_times: 1, kind: permanent }
              after:
                needs: [broken]
                uses: test.noop
              last:
                needs: [after]
                uses: test.noop
            """)
    }

    @Test func stepsThatNeverStartedAreNotRunAndTheStoppedOneIsCancelled() throws {
        let result = try h.orchestrate(["run", failingRun()])
        #expect(result.status == 1)
        #expect(result.stdout.contains("(1 cancelled, 1 failed, 2 not run)"), "the summary: \(result.stdout)")
        let runID = try #require(try h.runIDs().first)
        let steps = try h.status(runID)["steps"]?.arrayValue ?? []
        let statuses = Dictionary(uniqueKeysWithValues: steps.compactMap { step in
            step["id"]?.stringValue.map { ($0, step["status"]?.stringValue ?? "") }
        })
        #expect(statuses == ["slow": "cancelled", "broken": "failed", "after": "not_run", "last": "not_run"])
    }

    @Test func aStepsFailureIsPrintedOnceTheSummaryPointsAtIt() throws {
        let file = h.workflow("""
            version: 1
            name: once
            steps:
              broken:
                uses: test.fail
                with: { kind: permanent, message: the server said 403 to upload-7 }
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 1)
        let output = result.stdout + result.stderr
        #expect(output.components(separatedBy: "the server said 403 to upload-7").count == 2, "printed once: \(output)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("broken") && $0.contains("failed") && $0.hasSuffix(": the server said 403 to upload-7") },
                "\(output)")
        let summary = lines.last ?? ""
        #expect(summary.hasPrefix("  step 'broken' failed after 1 attempt") && summary.hasSuffix(" (error above)"), "\(output)")
    }

    /// The summary counts declared steps: a fan-out is one step, whatever its items did.
    @Test func aFanOutCountsAsOneStep() throws {
        let file = h.workflow("""
            version: 1
            name: summary-fan-out
            steps:
              each:
                uses: test.noop
                for_each: [1, 2, 3]
              after:
                needs: [each]
                uses: test.noop
              broken:
                uses: test.fail
                with: { kind: permanent, message: boom }
                continue_on_error: true
            """)
        let result = try h.orchestrate(["run", file])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("(1 failed, 2 succeeded)"), "the summary: \(result.stdout)")
    }

    @Test func retryRunsTheStepsThatDidNotRun() throws {
        _ = try h.orchestrate(["run", failingRun()])
        let runID = try #require(try h.runIDs().first)
        let again = try h.orchestrate(["retry", runID, "--json"])
        #expect(again.status == 0, "\(again.stdout)\n\(again.stderr)")
        let succeeded = Set(Harness.events(again).ofType("step.succeeded").compactMap { $0["step"]?.stringValue })
        #expect(succeeded.isSuperset(of: ["broken", "after", "last"]))
    }
}
