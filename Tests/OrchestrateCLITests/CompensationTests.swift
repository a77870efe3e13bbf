import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// Sagas: when a run fails or is cancelled, the compensations of the steps that succeeded run in
/// reverse order of completion.
@Suite struct CompensationTests {
    let h = Harness()

    /// The shared saga, with `${{ steps.sN.outputs.line }}` in each undo line and s5 after s4.
    func chain(failingStep4: Bool, sleepInStep4: Bool = false) -> String {
        let s4 = sleepInStep4
            ? "  s4: { uses: test.sleep, needs: [s3], with: { ms: 30000 } }"
            : "  s4: { uses: test.fail, needs: [s3], with: { kind: permanent, message: \"step 4 broke\" } }"
        return h.sagaWorkflow(step4: s4, undoSuffix: { " ${{ steps.s\($0).outputs.line }}" },
                              after: "  s5: { uses: test.append, needs: [s4], with: { file: \"\(h.path("out"))\", line: s5 } }")
    }

    @Test func aFailureInStep4CompensatesSteps3Then2Then1() throws {
        let result = try h.orchestrate(["run", chain(failingStep4: true), "--json"])
        #expect(result.status == 1)
        #expect(h.lines("out") == ["s1", "s2", "s3"])
        #expect(h.lines("undo") == ["undo s3 s3", "undo s2 s2", "undo s1 s1"])
        let finished = Harness.events(result).ofType("run.finished").first
        #expect(finished?["data"]?["status"]?.stringValue == "failed")
        #expect(finished?["data"]?["error"]?.stringValue?.contains("step 4 broke") == true)
    }

    @Test func cancelFromAnotherProcessReachesTheRun() throws {
        let process = try h.start(["run", chain(failingStep4: false, sleepInStep4: true)])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        #expect(h.waitFor { h.lines("out").count == 3 })
        let runID = try #require(try h.runIDs().first)
        #expect(try h.orchestrate(["cancel", runID]).status == 0)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(h.lines("undo").count == 3)
        #expect(try h.status(runID)["status"]?.stringValue == "cancelled")
    }

    @Test func compensationsAreRetriedAndSurviveAKillDuringCompensation() throws {
        let undo = h.path("undo"), counter = h.path("counter")
        let file = h.workflow("""
            version: 1
            name: durable-saga
            steps:
              first:
                uses: test.noop
                compensate:
                  uses: test.flaky
                  with: { counter_file: "\(counter)", fail_times: 1 }
                  retry: { max_attempts: 3, initial_interval: 10ms }
              second:
                needs: [first]
                uses: test.noop
                compensate:
                  uses: test.checkpoint
                  with: { file: "\(undo)", count: 20, delay_ms: 80 }
              third:
                needs: [second]
                uses: test.fail
                with: { kind: permanent, message: "third broke" }
            """)
        let process = try h.start(["run", file])
        // Kill it while the second step's compensation is half done.
        #expect(h.waitFor { h.lines("undo").count >= 5 })
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let runID = try #require(try h.runIDs().first)
        #expect(try h.status(runID)["status"]?.stringValue == "interrupted")

        let resumed = try h.orchestrate(["resume", runID, "--json"])
        #expect(resumed.status == 1, "the run still ends failed")
        let ticks = h.lines("undo").compactMap { Int($0) }
        #expect(Set(ticks) == Set(0..<20), "the compensation finished from its checkpoint")
        #expect(ticks.count <= 21)
        // The first step's compensation failed once and was retried.
        #expect(h.read("counter").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        let events = Harness.events(resumed)
        #expect(events.ofType("step.retrying").contains { $0["step"]?.stringValue == "compensate:first" })
        let status = try h.status(runID)
        #expect(status["status"]?.stringValue == "failed")
        #expect(status["error"]?.stringValue?.contains("third broke") == true)
    }
}
