import Foundation
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// What one running attempt's plugin callbacks do: logs and progress go to the run's event
/// stream (redacted), checkpoints and items go to the store before the call returns.
///
/// Called on plugin threads; everything here is either immutable or behind `lock`.
final class AttemptDelegate: StepHostDelegate, @unchecked Sendable {
    private let runID: String
    private let instanceID: String
    /// The declared step id: items added with `add-path --step ID` are keyed by it.
    private let declaredStep: String
    private let store: any StateStore
    /// The run's owner: checkpoints and items are written only while it holds the run.
    private let owner: OwnerIdentity
    private let redactor: Redactor
    private unowned let sink: any AttemptEventSink

    private let lock = Lock()
    /// The step's threads' checkpoint saves, written one at a time, the newest of those waiting.
    private let checkpointSaves = CheckpointSaves()
    private var lastProgressShown = 0.0
    private var lastProgressJournaled = 0.0
    /// The bytes this attempt moved and its rate (not the bytes found on disk at a resume).
    private var rate: AttemptRate
    /// The items of a session (`accept-paths`) being moved, and what the finished ones moved:
    /// the step's own progress when it reports none itself.
    private var sessionItems: SessionItemsProgress
    private var reportsOwnProgress = false
    /// Items are handed out in the order they were added, each once per attempt: every queued
    /// item up to this sequence number has been handed out.
    private var handedOutThrough: Int64 = 0
    private var itemProgressJournaled: [String: Double] = [:]
    /// Items that failed and will be handed out again (retried, or held on their host).
    private var retries: ItemRetries
    /// The step's host, probed while items are held on it.
    private let endpoint: Endpoint?
    private let holdTimeout: Duration
    private let random: @Sendable () -> Double
    /// The probing of the host while items are held: when next, the backoff, whether under way,
    /// and why the host did not answer last.
    private var probeNext = 0.0
    private var probeDelay = UnreachableHosts.firstDelay
    private var probing = false

    /// `resumed`: the attempt continues from a checkpoint, so what its first report says is done
    /// was on disk already (not moved by it).
    init(runID: String, instanceID: String, declaredStep: String, store: any StateStore, owner: OwnerIdentity,
         redactor: Redactor, sink: any AttemptEventSink, itemRetry: RetryPolicy = .default,
         endpoint: Endpoint? = nil, holdTimeout: Duration = Step.defaultHoldTimeout,
         random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }, resumed: Bool = false)
    {
        let now = MonotonicClock.nowSeconds(), wallNow = Date().timeIntervalSince1970
        self.rate = AttemptRate(resumed: resumed, now: now, wallNow: wallNow)
        self.sessionItems = SessionItemsProgress(startedAt: wallNow)
        self.retries = ItemRetries(policy: itemRetry, canHold: endpoint != nil, holdTimeout: holdTimeout.inSeconds)
        self.endpoint = endpoint
        self.holdTimeout = holdTimeout
        self.random = random
        self.owner = owner
        self.runID = runID
        self.instanceID = instanceID
        self.declaredStep = declaredStep
        self.store = store
        self.redactor = redactor
        self.sink = sink
    }

    func log(_ level: LogLevel, _ message: String) {
        let levelName = ["debug", "info", "warn", "error"][Int(level.rawValue)]
        for line in redactor.redact(message).split(separator: "\n", omittingEmptySubsequences: false) {
            sink.attemptEvent(type: EventType.stepLog, step: instanceID,
                              data: ["level": .string(levelName), "message": .string(String(line.prefix(8192)))])
        }
    }

    func progress(_ progress: StepProgress) {
        let now = MonotonicClock.nowSeconds()
        var show = false
        var journal = false
        let finished = progress.bytesTotal > 0 && progress.bytesDone >= progress.bytesTotal
        let (moved, bytesPerSecond, since) = lock.withLock { () -> (Int64, Double, Double) in
            reportsOwnProgress = true
            if now - lastProgressShown >= 0.1 || finished { lastProgressShown = now; show = true }
            if now - lastProgressJournaled >= 1.0 || finished { lastProgressJournaled = now; journal = true }
            let moved = rate.moved(progress.bytesDone, now: now, wallNow: Self.wallClock())
            return (moved, rate.rate(moved: moved, now: now), rate.sinceWall)
        }
        let snapshot = ProgressSnapshot(bytesDone: progress.bytesDone, bytesTotal: progress.bytesTotal,
                                        filesDone: progress.filesDone, filesTotal: progress.filesTotal, rate: bytesPerSecond)
        if show { sink.attemptProgress(step: instanceID, progress: snapshot) }
        if journal {
            var data = snapshot.json.objectValue ?? [:]
            data["bytes_moved"] = .int(moved)
            data["since"] = .double(since)
            sink.attemptEvent(type: EventType.stepProgress, step: instanceID, data: .object(data))
        }
    }

    func saveCheckpoint(_ data: [UInt8]) -> Bool {
        guard data.count <= 1 << 20 else { return false }
        return checkpointSaves.save(data) { newest in
            do {
                try store.saveCheckpoint(runID: runID, stepID: instanceID, data: newest, fence: owner)
            } catch {
                log(.warn, "checkpoint not saved: \(error)")
                throw error
            }
        }
    }

    // MARK: Items of long-lived steps

    func nextItem(timeout: Duration) -> NextItem {
        let deadline = MonotonicClock.nowSeconds() + timeout.inSeconds
        while true {
            if sink.attemptIsCancelled(instanceID) { return .timeout }
            settleHeldItems()
            if let item = takeRetriedItem() ?? takeQueuedItem() {
                journalSessionProgress()
                return item
            }
            journalSessionProgress()
            // Closing waits for the items that will be tried again (a hold ends by its timeout).
            if sink.attemptSessionClosing(instanceID) && lock.withLock({ retries.waitingCount == 0 }) { return .closed }
            let remaining = deadline - MonotonicClock.nowSeconds()
            if remaining <= 0 { return .timeout }
            Thread.sleep(forTimeInterval: min(remaining, 0.1))
        }
    }

    private func takeQueuedItem() -> NextItem? {
        lock.withLock { () -> NextItem? in
            guard let item = try? store.nextQueuedItem(runID: runID, stepID: declaredStep, after: handedOutThrough) else { return nil }
            handedOutThrough = item.seq
            retries.handedOut(id: item.id, json: item.json, checkpoint: item.checkpoint)
            sessionItems.started(item.id, resumed: item.checkpoint != nil, now: MonotonicClock.nowSeconds(), wallNow: Self.wallClock())
            sink.attemptEvent(type: EventType.itemStarted, step: instanceID,
                              data: ["item": .string(item.id), "value": (try? JSONValue(parsing: item.json)) ?? .null])
            return .item(id: item.id, json: item.json, checkpoint: item.checkpoint)
        }
    }

    /// An item that failed earlier and whose delay has passed (or whose host answers again).
    private func takeRetriedItem() -> NextItem? {
        lock.withLock { () -> NextItem? in
            guard retries.waitingCount > 0, let item = retries.takeDue(now: Self.wallClock()) else { return nil }
            sessionItems.started(item.id, resumed: item.checkpoint != nil, now: MonotonicClock.nowSeconds(), wallNow: Self.wallClock())
            sink.attemptEvent(type: EventType.itemStarted, step: instanceID,
                              data: ["item": .string(item.id), "value": (try? JSONValue(parsing: item.json)) ?? .null,
                                     "attempt": .int(Int64(item.failures + 1))])
            return .item(id: item.id, json: item.json, checkpoint: item.checkpoint)
        }
    }

    func itemDone(id: String, error: String?) {
        lock.withLock {
            retries.finished(id: id)
            sessionItems.ended(id, ok: error == nil)
            itemProgressJournaled[id] = nil  // an item that never reported 100 % (failed, size unknown)
        }
        finishItem(id: id, error: error)
        journalSessionProgress()
    }

    /// Journals the item's end with its `item.finished` event in one transaction; the live
    /// display hears of it after.
    private func finishItem(id: String, error: String?) {
        let message = error.map(redactor.redact)
        var data: [String: JSONValue] = ["item": .string(id), "ok": .bool(message == nil)]
        if let message { data["error"] = .string(message) }
        let event = EventRecord(runID: runID, time: Date().timeIntervalSince1970, type: EventType.itemFinished,
                                step: instanceID, data: .object(data))
        if (try? store.finishItem(runID: runID, stepID: declaredStep, id: id, error: message, event: event, fence: owner)) != nil {
            sink.attemptJournaledEvent(event)
        }
    }

    /// An item failed with a kind (`orchestrate.item-failure.v1`): tried again per the step's
    /// `retry:`, held while its host does not answer, or finished failed for a person to see.
    /// A retry costs an event in the run's next commit, nothing else.
    func itemFailed(id: String, failure: StepFailure) {
        var failure = failure
        failure.message = redactor.redact(failure.message)
        lock.withLock {
            sessionItems.ended(id, ok: false)
            itemProgressJournaled[id] = nil
        }
        defer { journalSessionProgress() }
        if failure.kind == .cancelled {
            // Not finished: handed out again on the next attempt, as an unreported item is.
            lock.withLock { retries.finished(id: id) }
            return
        }
        let now = Self.wallClock()
        let decision = lock.withLock {
            let decision = retries.failed(id: id, failure, now: now, unitRandom: random())
            if case .hold = decision, !probing, retries.heldCount == 1 {
                probeDelay = UnreachableHosts.firstDelay
                probeNext = now + probeDelay
            }
            return decision
        }
        var data: [String: JSONValue] = ["item": .string(id), "kind": .string(failure.kind.rawValue),
                                         "code": failure.code.map(JSONValue.string) ?? .null, "reason": .string(failure.message)]
        switch decision {
        case .finish(let why):
            finishItem(id: id, error: why.map { "\(failure.message) (\($0))" } ?? failure.message)
        case .retry(let delay):
            data["delay_ms"] = .int(Int64((delay * 1000).rounded()))
            sink.attemptEvent(type: EventType.itemRetrying, step: instanceID, data: .object(data))
        case .hold(let givesUpAt):
            data["host"] = endpoint.map { .string($0.description) } ?? .null
            data["gives_up_at"] = .double(givesUpAt)
            sink.attemptEvent(type: EventType.itemHeld, step: instanceID, data: .object(data))
        }
    }

    /// While items are held on the host: those past their `hold_timeout` finish failed, and the
    /// host is probed when due (by the worker that asks for an item then; the others go on). An
    /// answer releases every held item.
    private func settleHeldItems() {
        guard let endpoint else { return }
        let now = Self.wallClock()
        let (expired, probe) = lock.withLock { () -> ([ItemRetries.Item], Bool) in
            guard retries.heldCount > 0 else { return ([], false) }
            let expired = retries.expired(now: now)
            let probe = !probing && retries.heldCount > 0 && probeNext <= now
            if probe { probing = true }
            return (expired, probe)
        }
        for item in expired {
            finishItem(id: item.id, error: "\(endpoint) did not answer for "
                + "\(holdTimeout.workflowText) (hold_timeout); gave up: \(item.reason)")
        }
        guard probe else { return }
        let failure = HostProbe.failure(endpoint)
        let released = lock.withLock { () -> [String] in
            probing = false
            guard failure == nil else {
                probeDelay = min(probeDelay * 2, UnreachableHosts.maxDelay)
                probeNext = Self.wallClock() + probeDelay
                return []
            }
            return retries.release(now: Self.wallClock())
        }
        for id in released {
            sink.attemptEvent(type: EventType.itemReleased, step: instanceID,
                              data: ["item": .string(id), "host": .string(endpoint.description)])
        }
    }

    private static func wallClock() -> Double { Date().timeIntervalSince1970 }

    func saveItemCheckpoint(id: String, data: [UInt8]) -> Bool {
        guard data.count <= 1 << 20 else { return false }
        guard (try? store.saveItemCheckpoint(runID: runID, stepID: declaredStep, id: id, data: data, fence: owner)) != nil
        else { return false }
        lock.withLock { retries.checkpointSaved(id: id, data) }
        return true
    }

    /// Per-file progress: shown live, and journaled as `item.progress` once a second per item
    /// from its first report, and at its end: an item done within a second journals one event.
    func itemProgress(id: String, bytesDone: Int64, bytesTotal: Int64) {
        let now = MonotonicClock.nowSeconds()
        let rate = lock.withLock { sessionItems.report(id, bytesDone: bytesDone, bytesTotal: bytesTotal, now: now, wallNow: Self.wallClock()) }
        let snapshot = ProgressSnapshot(bytesDone: bytesDone, bytesTotal: bytesTotal, filesDone: -1, filesTotal: -1, rate: rate)
        sink.attemptProgress(step: "\(instanceID):\(id)", progress: snapshot)
        defer { journalSessionProgress() }
        let done = bytesTotal >= 0 && bytesDone >= bytesTotal
        let journal = lock.withLock {
            // The first report starts the item's second: it is journaled with the next one, a
            // second later, not at once.
            let last = itemProgressJournaled[id] ?? now
            guard done || now - last >= 1 else {
                itemProgressJournaled[id] = last
                return false
            }
            // A finished item is forgotten: a session adding paths for weeks keeps no entry
            // for each file it moved.
            itemProgressJournaled[id] = done ? nil : now
            return true
        }
        if journal {
            sink.attemptEvent(type: EventType.itemProgress, step: instanceID,
                              data: ["item": .string(id), "bytes_done": .int(bytesDone), "bytes_total": .int(bytesTotal)])
        }
    }
}

extension AttemptDelegate {
    /// A session step's progress from its items' (`SessionItemsProgress`), unless the step
    /// reports its own: shown at most every 0.1 s, journaled as `step.progress` at most once a
    /// second when it changed (so the last change is journaled by the next wait for an item).
    private func journalSessionProgress() {
        let now = MonotonicClock.nowSeconds()
        let (snapshot, data) = lock.withLock { () -> (ProgressSnapshot?, JSONValue?) in
            guard !reportsOwnProgress, sessionItems.hasItems else { return (nil, nil) }
            var snapshot: ProgressSnapshot?
            var data: JSONValue?
            if sessionItems.changed && now - lastProgressShown >= 0.1 {
                lastProgressShown = now
                snapshot = sessionItems.snapshot(now: now)
            }
            if sessionItems.changed && now - lastProgressJournaled >= 1 {
                lastProgressJournaled = now
                data = sessionItems.journal(now: now)
            }
            return (snapshot, data)
        }
        if let snapshot { sink.attemptProgress(step: instanceID, progress: snapshot) }
        if let data { sink.attemptEvent(type: EventType.stepProgress, step: instanceID, data: data) }
    }
}

/// The executor's side of `AttemptDelegate`.
protocol AttemptEventSink: AnyObject, Sendable {
    func attemptEvent(type: EventType, step: String, data: JSONValue)
    /// An event the attempt already journaled itself: only to be shown.
    func attemptJournaledEvent(_ event: EventRecord)
    func attemptProgress(step: String, progress: ProgressSnapshot)
    func attemptIsCancelled(_ instanceID: String) -> Bool
    func attemptSessionClosing(_ instanceID: String) -> Bool
}
