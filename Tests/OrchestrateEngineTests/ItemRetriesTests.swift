@testable import OrchestrateEngine
import OrchestrateModel
import OrchestratePluginHost
import Testing

/// What a failed item of a persistent session leads to (`ItemRetries`), on its own: retried per
/// the step's policy, held while its host does not answer, or finished. The end-to-end behaviour
/// (a real sshd stopped and started) is OrchestrateSFTPPluginTests' PersistentSessionTests and
/// WatchFolderFeedTests.
@Suite struct ItemRetriesTests {
    let policy = RetryPolicy(maxAttempts: 3, initialInterval: .seconds(1), backoff: 2, jitter: .none)
    let refused = StepFailure(kind: .retryable, code: "unreachable", message: "cannot connect: Connection refused")
    let reset = StepFailure(kind: .retryable, code: "ECONNRESET", message: "connection reset")
    let missing = StepFailure(kind: .permanent, code: "ENOENT", message: "/in/a.bin: No such file or directory")

    @Test func aRetryableFailureIsTriedAgainPerThePolicyThenFinished() {
        var items = ItemRetries(policy: policy, canHold: true, holdTimeout: 3600)
        items.handedOut(id: "a", json: "{}", checkpoint: nil)
        #expect(items.failed(id: "a", reset, now: 0, unitRandom: 0) == .retry(delay: 1))
        let early = items.takeDue(now: 0.9)
        #expect(early == nil)
        let first = items.takeDue(now: 1)
        #expect(first?.id == "a")
        #expect(items.failed(id: "a", reset, now: 5, unitRandom: 0) == .retry(delay: 2))
        let second = items.takeDue(now: 7)
        #expect(second?.failures == 2)
        guard case .finish(let why) = items.failed(id: "a", reset, now: 8, unitRandom: 0) else {
            Issue.record("the third failure of three attempts finishes it")
            return
        }
        #expect(why?.contains("max_attempts") == true)
        let none = items.takeDue(now: 1000)
        #expect(items.waitingCount == 0 && none == nil)
    }

    @Test func aPermanentFailureIsFinishedAtOnce() {
        var items = ItemRetries(policy: policy, canHold: true, holdTimeout: 3600)
        items.handedOut(id: "a", json: "{}", checkpoint: nil)
        #expect(items.failed(id: "a", missing, now: 0, unitRandom: 0) == .finish(why: nil))
        var listed = policy
        listed.nonRetryable = ["ECONNRESET"]
        var strict = ItemRetries(policy: listed, canHold: true, holdTimeout: 3600)
        strict.handedOut(id: "b", json: "{}", checkpoint: nil)
        #expect(strict.failed(id: "b", reset, now: 0, unitRandom: 0) == .finish(why: nil), "non_retryable is honoured")
    }

    @Test func anUnreachableHostHoldsTheItemWithoutSpendingAttemptsUntilReleasedOrTimedOut() {
        var items = ItemRetries(policy: RetryPolicy(maxAttempts: 1), canHold: true, holdTimeout: 60)
        items.handedOut(id: "a", json: #"{"source":"/x"}"#, checkpoint: nil)
        items.handedOut(id: "b", json: "{}", checkpoint: nil)
        for round in 0..<5 {  // held again and again: max_attempts 1 is never used up
            #expect(items.failed(id: "a", refused, now: Double(round), unitRandom: 0) == .hold(givesUpAt: Double(round) + 60))
            let early = items.takeDue(now: 1000)
            #expect(early == nil, "held: not handed out before its host answers")
            #expect(items.release(now: Double(round)) == ["a"])
            let again = items.takeDue(now: Double(round))
            #expect(again?.json == #"{"source":"/x"}"# && again?.failures == 0)
        }
        #expect(items.failed(id: "b", refused, now: 100, unitRandom: 0) == .hold(givesUpAt: 160))
        #expect(items.expired(now: 159).isEmpty)
        let gone = items.expired(now: 160)
        #expect(gone.map(\.id) == ["b"] && gone.first?.reason == refused.message)
        #expect(items.heldCount == 0 && items.release(now: 161).isEmpty)
    }

    @Test func withoutAHostToProbeUnreachableIsRetriedLikeAnyRetryableError() {
        var items = ItemRetries(policy: policy, canHold: false, holdTimeout: 60)
        items.handedOut(id: "a", json: "{}", checkpoint: nil)
        #expect(items.failed(id: "a", refused, now: 0, unitRandom: 0) == .retry(delay: 1))
    }
}
