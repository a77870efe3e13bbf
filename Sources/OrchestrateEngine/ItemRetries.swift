import OrchestrateModel
import OrchestratePluginHost

/// The items of one long-lived step attempt (a persistent session) that failed and will be
/// handed out again: what each failure means, and when each is due.
///
/// An item that failed retryably (`retryable`, `timeout`; not listed in `non_retryable`) waits
/// the step's `retry:` delay and is handed out again, until it has used the policy's
/// `max_attempts`. One whose host does not answer (code `unreachable`, when the step names a host)
/// is held instead, spending no attempt: it is handed out again once the host answers (`release`),
/// at most `holdTimeout` after it was held (`expired`). Every other failure is final.
///
/// Pure bookkeeping, no clock and no I/O (the caller passes `now`, probes the host, journals):
/// what a retry needs stays in memory, so a session moving thousands of files writes nothing
/// more for items that succeed. After a crash an unfinished item is handed out again anyway, with
/// its count of tries started afresh.
struct ItemRetries {
    /// An item handed out and not finished: what to hand out again, and its failures so far.
    struct Item {
        let id: String
        let json: String
        var checkpoint: [UInt8]?
        /// Failed attempts that counted (a hold counts none).
        var failures = 0
        /// When it may be handed out again; nil while held on its host.
        var due: Double?
        /// While held: when it gives up.
        var givesUpAt: Double?
        /// The last failure's message.
        var reason = ""
    }

    /// What a failure leads to.
    enum Decision: Equatable {
        /// Handed out again after `delay` seconds.
        case retry(delay: Double)
        /// Held until the host answers, at most until `givesUpAt`.
        case hold(givesUpAt: Double)
        /// Finished failed; `why` says why it was not tried again when its error was worth trying
        /// again (nil: a final kind of error).
        case finish(why: String?)
    }

    let policy: RetryPolicy
    /// Whether the step names a host that can be probed (`Endpoint`): without one, an
    /// `unreachable` failure is retried like any retryable one.
    let canHold: Bool
    let holdTimeout: Double

    private var handedOut: [String: Item] = [:]
    /// Failed items to hand out again, in the order they failed.
    private var waiting: [String] = []

    init(policy: RetryPolicy, canHold: Bool, holdTimeout: Double) {
        self.policy = policy
        self.canHold = canHold
        self.holdTimeout = holdTimeout
    }

    /// Items waiting to be handed out again (held or not).
    var waitingCount: Int { waiting.count }
    var heldCount: Int { waiting.count(where: { handedOut[$0]?.due == nil }) }

    /// Item `id` was handed out (first time or again).
    mutating func handedOut(id: String, json: String, checkpoint: [UInt8]?) {
        if handedOut[id] == nil { handedOut[id] = Item(id: id, json: json, checkpoint: checkpoint) }
    }

    mutating func checkpointSaved(id: String, _ data: [UInt8]) {
        handedOut[id]?.checkpoint = data
    }

    /// The item finished (succeeded, or failed for good): forgotten.
    mutating func finished(id: String) {
        handedOut.removeValue(forKey: id)
        waiting.removeAll { $0 == id }
    }

    /// The item failed: what happens next. A `finish` forgets it; `retry` and `hold` keep it
    /// waiting. `unitRandom` is for the policy's jitter.
    mutating func failed(id: String, _ failure: StepFailure, now: Double, unitRandom: Double) -> Decision {
        guard var item = handedOut[id] else { return .finish(why: nil) }
        item.reason = failure.message
        let notRetried = policy.whyNotRetried(kind: failure.kind.rawValue, code: failure.code)
        if notRetried == nil, failure.code == "unreachable", canHold {
            item.due = nil
            item.givesUpAt = now + holdTimeout
            park(item)
            return .hold(givesUpAt: now + holdTimeout)
        }
        item.failures += 1
        guard notRetried == nil else {
            finished(id: id)
            return .finish(why: nil)
        }
        guard item.failures < policy.maxAttempts else {
            finished(id: id)
            return .finish(why: "tried \(item.failures) time\(item.failures == 1 ? "" : "s"), the step's retry: max_attempts")
        }
        let delay = failure.retryAfter?.inSeconds
            ?? policy.delay(afterAttempt: item.failures, unitRandom: unitRandom).inSeconds
        item.due = now + delay
        item.givesUpAt = nil
        park(item)
        return .retry(delay: delay)
    }

    private mutating func park(_ item: Item) {
        handedOut[item.id] = item
        if !waiting.contains(item.id) { waiting.append(item.id) }
    }

    /// The host answered: every held item is due now. Returns their ids.
    mutating func release(now: Double) -> [String] {
        let held = waiting.filter { handedOut[$0]?.due == nil }
        for id in held {
            handedOut[id]?.due = now
            handedOut[id]?.givesUpAt = nil
        }
        return held
    }

    /// Held items whose `hold_timeout` ran out, forgotten: the caller finishes them failed.
    mutating func expired(now: Double) -> [Item] {
        let gone = waiting.compactMap { id -> Item? in
            guard let item = handedOut[id], item.due == nil, let end = item.givesUpAt, end <= now else { return nil }
            return item
        }
        for item in gone { finished(id: item.id) }
        return gone
    }

    /// The first waiting item due at `now`, taken off the waiting list (still handed out).
    mutating func takeDue(now: Double) -> Item? {
        guard let index = waiting.firstIndex(where: { (handedOut[$0]?.due).map { $0 <= now } ?? false }) else { return nil }
        return handedOut[waiting.remove(at: index)]
    }
}
