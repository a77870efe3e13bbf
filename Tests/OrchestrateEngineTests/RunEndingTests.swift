@testable import OrchestrateEngine
import OrchestrateStore
import Testing

/// `RunEnding`: a run's ending is decided once, and compensation is entered once, by an ending run.
@Suite struct RunEndingTests {
    @Test func theFirstEndingStandsAndALaterOneAddsNoReason() {
        var ending = RunEnding()
        #expect(!ending.isEnding && ending.error == nil)
        let failing = ending.begin(.failed, reason: "step 'a' failed")
        let cancelledToo = ending.begin(.cancelled, reason: "cancelled")
        #expect(failing && !cancelledToo, "a cancel while failing does not make the run cancelled")
        #expect(ending.status == .failed)
        #expect(ending.error == "step 'a' failed")
        ending.addReason("compensate:a failed: boom")
        #expect(ending.error == "step 'a' failed; compensate:a failed: boom")
    }

    @Test func compensationIsEnteredOnceAndOnlyByAnEndingRun() {
        var ending = RunEnding()
        let whileRunning = ending.enterCompensation()
        ending.addReason("output 'x': no such step")  // fails the run without ending it
        let afterAFailedOutput = ending.enterCompensation()
        #expect(!whileRunning && !afterAFailedOutput && !ending.isEnding, "a run that is not ending has nothing to compensate")
        _ = ending.begin(.cancelled, reason: "cancelled")
        let first = ending.enterCompensation()
        let second = ending.enterCompensation()
        #expect(first && !second)
        #expect(ending.compensationEntered)
    }

    @Test func aResumedRunContinuesTheEndingItWasLeftIn() {
        var run = RunRecord(id: "r", workflowName: "w", workflowFile: "w.yaml", workflowSource: "", inputs: [:],
                            status: .compensating, createdAt: 0, runDir: "runs/r")
        run.ending = .cancelled
        run.error = "cancelled"
        var resumed = RunEnding(resuming: run)
        #expect(resumed.status == .cancelled && resumed.error == "cancelled")
        let reentered = resumed.enterCompensation()
        #expect(reentered, "its journaled compensations are picked up again")

        run.status = .running
        run.error = nil
        #expect(!RunEnding(resuming: run).isEnding)
    }
}
