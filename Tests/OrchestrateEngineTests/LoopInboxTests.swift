@testable import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore
import Testing

/// `LoopInbox`: messages are handed to the loop once, requests stay, and a request the loop has
/// acted on no longer wakes it.
@Suite struct LoopInboxTests {
    @Test func messagesAreTakenOnceAndRequestsStay() {
        var inbox = LoopInbox()
        inbox.completions.append(Completion(instanceID: "a", token: 1, result: .success([:])))
        inbox.events.append(EventRecord(runID: "r", time: 0, type: .stepLog, step: "a", data: [:]))
        inbox.probeAnswers.append((Endpoint(inputs: ["host": "h", "port": 22])!, nil))
        inbox.cancelRequested = true
        inbox.interruptRequested = .paused
        let first = inbox.takeRound()
        let second = inbox.takeRound()
        #expect(first.completions.count == 1 && first.events.count == 1 && first.probeAnswers.count == 1)
        #expect(second.completions.isEmpty && second.events.isEmpty && second.probeAnswers.isEmpty)
        #expect(second.cancel && second.interruptTo == .paused, "a request is a state, not a message")
    }

    @Test func aRequestWakesTheLoopUntilItIsActedOn() {
        var inbox = LoopInbox()
        #expect(!inbox.wakesLoop(ending: false, interrupting: false))
        inbox.cancelRequested = true
        #expect(inbox.wakesLoop(ending: false, interrupting: false))
        #expect(!inbox.wakesLoop(ending: true, interrupting: false), "once ending, the cancel is done: sleep")
        inbox.interruptRequested = .queued
        #expect(inbox.wakesLoop(ending: true, interrupting: false))
        #expect(!inbox.wakesLoop(ending: true, interrupting: true))
        inbox.completions.append(Completion(instanceID: "a", token: 1, result: .success([:])))
        #expect(inbox.hasAttemptNews && inbox.wakesLoop(ending: true, interrupting: true))
    }
}
