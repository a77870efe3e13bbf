import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore
import OrchestrateTokenBucket

/// `orchestrate serve`: executes the durable queue of a state store (the named queues it
/// serves), up to `maxRuns` runs at once, until `shutdown()`.
///
/// Each round it applies the control verbs left for its runs, honours a passive queue (the
/// store-wide switch, or one named queue of its own), pre-empts for `run-now`, and claims the next runs (the store's claim is atomic, so several
/// workers on one store, on one node or many, never run the same run). Runs left unfinished by
/// a dead process, or by a node whose lease ran out, are claimed first, so a worker finishes
/// them. A paused run keeps its slot while the worker holds it. A round starts when the store
/// says there is work (PostgreSQL's NOTIFY), when a run ends, or every `pollInterval`.
///
/// A store that fails (a database restarting) does not stop the worker: it logs, waits and
/// tries again; runs whose executor stopped on the failure are given up in the store and
/// claimed again, resuming from their journal.
///
/// ```swift
/// let worker = QueueWorker(store: store, registry: registry, options: .init(maxRuns: 4))
/// worker.run()          // blocks; call worker.shutdown() from a signal handler
/// ```
public final class QueueWorker: @unchecked Sendable {
    public struct Options: Sendable {
        /// Runs executing at once (the `--max-parallel` of `serve`); a held paused run counts.
        public var maxRuns: Int
        /// The named queues this worker takes runs from.
        public var queues: [String] = ["default"]
        /// Between rounds when nothing wakes the worker: short for a store that cannot wake it
        /// (SQLite), a safety net for one that can.
        public var pollInterval: Double = 0.2
        public var wokenPollInterval: Double = 2
        public var engine = EngineOptions()
        /// Told about store failures the worker rides out (the CLI prints them).
        public var warn: @Sendable (String) -> Void = { _ in }

        public init(maxRuns: Int) {
            self.maxRuns = maxRuns
        }
    }

    private let store: any StateStore
    private let registry: PluginRegistry
    private let options: Options
    private let observer: (any RunObserver)?
    private let owner = OwnerIdentity.current

    private let signal = MonotonicCondition()
    /// The threads executors run on, kept for the next run rather than made for each (creating
    /// a thread costs a busy worker more than the run's own bookkeeping).
    private let runThreads = AttemptThreads(name: "runs", stackSize: 8 << 20, spins: false)
    /// The threads every run's attempts run on (`EngineOptions.sharedAttemptThreads`).
    private let attemptThreads: AttemptThreads
    private var shuttingDown = false
    private var finished: [String] = []
    private var strandedByStore: [String] = []
    private var woken = false
    private var fullRoundAsked = false

    // Owned by the loop.
    private var executing: [String: (executor: RunExecutor, started: Double, queue: String)] = [:]
    private var held: Set<String> = []
    private var interruptedForPassive: Set<String> = []
    /// The queues served that are not passive, as the last full round read them (`queue stop`
    /// wakes the worker): runs are claimed from these only.
    private var activeQueues: [String]
    private var lastHeldRenewal = 0.0
    /// Runs whose executor stopped on a store failure, to be given up once the store answers.
    private var toRelease: Set<String> = []
    private var storeFailing = false
    /// Workflows parsed for recent runs, by file and text: a queue of runs of one workflow
    /// parses and validates it once, not once per run. Loop thread only.
    private var parsedWorkflows: [String: Workflow] = [:]
    /// The store's `queue rate` last applied to `options.engine.bandwidth` (nil: none, the
    /// serve's own `--max-rate` holds).
    private var appliedQueueRate: String?
    /// The serve's own `--max-rate`, which the store's `queue rate` overrides while it is set.
    private let ownRate: RateTimetable?

    public init(store: any StateStore, registry: PluginRegistry, options: Options, observer: (any RunObserver)? = nil) {
        self.store = store
        self.registry = registry
        var options = options
        options.engine.heartbeatAppliesControls = false
        // Many runs share the cores: a thread spinning for one run's hand-over takes CPU from
        // the others, and a run's next attempt waits for a group commit, far longer than a spin.
        if options.maxRuns > 1 { options.engine.briefSpin = false }
        attemptThreads = AttemptThreads(name: "attempts", spins: options.engine.briefSpin)
        options.engine.sharedAttemptThreads = attemptThreads
        self.options = options
        self.observer = observer
        activeQueues = options.queues
        ownRate = options.engine.bandwidth?.schedule
    }

    /// Stops taking work, interrupts the runs in flight (they stay queued, resumable, in their
    /// place) and makes `run()` return once they have. Thread-safe.
    public func shutdown() {
        signal.withLock {
            shuttingDown = true
            signal.signal()
        }
    }

    /// Runs the queue until `shutdown()`. Throws only if the store cannot be watched at start.
    public func run() throws {
        let watch = try store.watchForWork { [self] in
            signal.withLock {
                woken = true
                signal.signal()
            }
        }
        defer {
            watch?.cancel()
            runThreads.stop()
            attemptThreads.stop()
        }
        let pollInterval = watch == nil ? options.pollInterval : options.wokenPollInterval
        // Who the worker is (node, pid, start time), so `StateStore.nodes()` can pair a start with
        // its stop and tell a crashed worker from a live one.
        emitQueueEvent(.workerStarted, ["pid": .int(Int64(owner.pid)), "node": .string(owner.node), "start_time": .int(owner.startTime),
                                        "queues": .array(options.queues.map { .string($0) }),
                                        "max_parallel": .int(Int64(options.maxRuns))])
        // Whether the next round looks at everything (controls, queue rate and passivity, paused
        // runs) or only fills the slots runs just freed. A round that only follows finished runs
        // (many a second under load) costs one claim, not six statements (three of them write
        // transactions). With a store that wakes the worker, everything else changes with a
        // wake-up; with one that cannot (SQLite), it is seen at the next full round, at most
        // `pollInterval` later, as for an idle worker. A busy worker still makes a full round
        // every `pollInterval` (held paused runs' leases need renewing).
        var fullRound = true
        var lastFullRound = -Double.infinity
        while true {
            let (stopping, done, stranded) = signal.withLock { () -> (Bool, [String], [String]) in
                defer {
                    finished.removeAll()
                    strandedByStore.removeAll()
                }
                return (shuttingDown, finished, strandedByStore)
            }
            for id in done { executing.removeValue(forKey: id) }
            toRelease.formUnion(stranded)
            if stopping {
                for (_, entry) in executing { entry.executor.interrupt(leaving: .queued) }
                if executing.isEmpty {
                    for id in held.union(toRelease) { try? store.releaseRun(id, owner: owner) }
                    emitQueueEvent(.workerStopped, ["pid": .int(Int64(owner.pid)), "node": .string(owner.node)])
                    return
                }
            } else {
                do {
                    try releaseAfterFailures()
                    let now = MonotonicClock.nowSeconds()
                    if fullRound || storeFailing || now - lastFullRound >= pollInterval {
                        lastFullRound = now
                        try applyQueueRate()
                        try applyControls()
                        try fillSlots()
                        try renewHeld()
                    } else {
                        try claimIntoFreeSlots()
                    }
                    if storeFailing { options.warn("the state store answers again") }
                    storeFailing = false
                } catch {
                    if !storeFailing { options.warn("the state store failed (\(error)); retrying") }
                    storeFailing = true
                }
            }
            fullRound = signal.withLock {
                var timedOut = false
                if finished.isEmpty && !shuttingDown && !woken {
                    timedOut = !signal.wait(seconds: storeFailing ? 1 : pollInterval)
                }
                defer {
                    woken = false
                    fullRoundAsked = false
                }
                return woken || timedOut || fullRoundAsked
            }
        }
    }

    /// Gives up the runs whose executor stopped on a store failure, so that they are claimed
    /// (by this worker or another) and resume from their journal.
    private func releaseAfterFailures() throws {
        for id in toRelease {
            try store.releaseRun(id, owner: owner)
            toRelease.remove(id)
        }
    }

    // MARK: One round

    private func applyControls() throws {
        for (id, control) in try store.takeControls(owner: owner) {
            if let entry = executing[id] {
                entry.executor.apply(control: control)
            } else if held.contains(id) {
                switch control {
                case .unpause:
                    held.remove(id)
                    try store.updateQueueFields(id, status: .running, queueOrder: nil, runNow: nil)
                    if let run = try store.run(id) { start(run) }
                case .cancel:
                    // A paused run being cancelled: its compensations need an executor.
                    held.remove(id)
                    if let run = try store.run(id) { start(run, cancelAtOnce: true) }
                case .unhold:
                    held.remove(id)
                    try store.releaseRun(id, owner: owner)
                default:
                    break
                }
            }
        }
    }

    /// `orchestrate queue rate`: a new cap in the store replaces the serve's own (or the last
    /// one) on the shared bucket, so the transfers running now slow down or speed up at their
    /// next chunk.
    private func applyQueueRate() throws {
        guard let bucket = options.engine.bandwidth else { return }
        let stored = try store.queueRate()
        guard stored != appliedQueueRate else { return }
        appliedQueueRate = stored
        let timetable: RateTimetable
        if let stored {
            do {
                timetable = try RateTimetable.parse(stored)
            } catch {
                options.warn("ignoring the store's queue rate '\(stored)': \(error)")
                return
            }
        } else {
            timetable = ownRate ?? .unlimited
        }
        bucket.follow(timetable)
        emitQueueEvent(.queueRateChanged, ["max_rate": .string(timetable.text),
                                           "set_by": .string(stored == nil ? "serve --max-rate" : "queue rate")])
    }

    private func fillSlots() throws {
        let passive = try store.isQueuePassive() ? Set(options.queues) : try store.passiveQueues()
        activeQueues = options.queues.filter { !passive.contains($0) }
        // A passive queue: interrupt what runs of it (it keeps its place) and start nothing of it.
        interruptedForPassive = interruptedForPassive.filter { executing[$0] != nil }
        for (id, entry) in executing where passive.contains(entry.queue) && !interruptedForPassive.contains(id) {
            interruptedForPassive.insert(id)
            entry.executor.interrupt(leaving: .queued)
        }
        guard !activeQueues.isEmpty else { return }
        held.formUnion(try store.claimPausedRuns(owner: owner, queues: activeQueues, lease: options.engine.leaseDuration).map(\.id))
        if options.maxRuns - executing.count - held.count <= 0 {
            try preemptForRunNow()
            return
        }
        try claimIntoFreeSlots()
    }

    /// Claims as many runs as there are free slots and starts them.
    private func claimIntoFreeSlots() throws {
        let free = options.maxRuns - executing.count - held.count
        guard free > 0, !activeQueues.isEmpty else { return }
        for run in try store.claimNextRuns(owner: owner, queues: activeQueues, limit: free, lease: options.engine.leaseDuration) {
            start(run, cancelAtOnce: run.requestedControl == .cancel)
        }
    }

    /// At the limit with a `run-now` waiting: interrupt the newest running run; it goes back to
    /// the queue just behind the one that pre-empted it, so it resumes right after.
    private func preemptForRunNow() throws {
        var filter = RunFilter(statuses: [.queued], queues: Set(activeQueues))
        filter.runNowOnly = true
        let waiting = try store.listRuns(filter)
        guard let first = waiting.min(by: { $0.queueOrder < $1.queueOrder }) else { return }
        let alreadyYielding = executing.values.contains { $0.executor.isInterrupting }
        guard !alreadyYielding, let newest = executing.max(by: { $0.value.started < $1.value.started }) else { return }
        try store.updateQueueFields(newest.key, status: nil, queueOrder: first.queueOrder + 0.001, runNow: nil)
        newest.value.executor.interrupt(leaving: .queued)
        emitQueueEvent(.queuePreempted, ["run": .string(newest.key), "for": .string(first.id)])
    }

    /// Renews the lease of each paused run this worker holds, and lets go of those it no longer
    /// owns: after an outage longer than the lease another node may have claimed one, and a
    /// run kept here would hold one of this worker's slots for ever.
    private func renewHeld() throws {
        let now = MonotonicClock.nowSeconds()
        guard !held.isEmpty, now - lastHeldRenewal >= options.engine.heartbeatInterval else { return }
        lastHeldRenewal = now
        for id in held where try !store.renewLease(id, owner: owner, lease: options.engine.leaseDuration).owned {
            held.remove(id)
        }
    }

    // MARK: Executing a run

    private func start(_ run: RunRecord, cancelAtOnce: Bool = false) {
        do {
            try RunID.check(run.id, stored: true)
        } catch {
            fail(run, error.description)  // from a store written before ids were checked
            return
        }
        let workflow: Workflow
        do {
            workflow = try parsedWorkflow(run)
        } catch {
            fail(run, "the workflow no longer validates: \(error.description)")
            return
        }
        let executor: RunExecutor
        do {
            executor = try RunExecutor(store: store, registry: registry, workflow: workflow, run: run,
                                       options: options.engine, observer: observer)
        } catch {
            return  // taken by someone else in the meantime
        }
        if cancelAtOnce {
            try? store.requestControl(run.id, control: nil)
            executor.cancel()
        }
        executing[run.id] = (executor, Date().timeIntervalSince1970, run.queue)
        // The run thread runs the run's lone attempts itself (`EngineOptions.inlineAttempts`);
        // one that outlasts its loan keeps the thread, and the run ends on another, which
        // reports it.
        runThreads.run { [self] in
            executor.execute { [self] final in
                // Stopped by a store failure (not finished, not taken over): its ownership
                // could not be given up; the loop does that once the store answers.
                let stranded = !final.status.isFinished && final.error?.hasPrefix("state store error") == true
                    && !executor.lostOwnership
                signal.withLock {
                    if stranded { strandedByStore.append(run.id) }
                    // A run that stopped unfinished (paused, stopped, pre-empted) changes more
                    // than a slot: the next round looks at everything (a paused run keeps its
                    // slot).
                    if !final.status.isFinished { fullRoundAsked = true }
                    finished.append(run.id)
                    signal.signal()
                }
            }
        }
    }

    private func parsedWorkflow(_ run: RunRecord) throws(WorkflowErrors) -> Workflow {
        let key = run.workflowFile + "\u{0}" + run.workflowSource
        if let workflow = parsedWorkflows[key] { return workflow }
        let workflow = try WorkflowLoader.parse(source: run.workflowSource, file: run.workflowFile,
                                                catalog: RegistryStepCatalog(registry: registry), remotes: RemotesFile())
        if parsedWorkflows.count >= 64 { parsedWorkflows.removeAll() }
        parsedWorkflows[key] = workflow
        return workflow
    }

    private func fail(_ run: RunRecord, _ message: String) {
        var failed = run
        failed.status = .failed
        failed.error = message
        failed.finishedAt = Date().timeIntervalSince1970
        var batch = JournalBatch()
        batch.runUpdates = [failed]
        batch.events = [EventRecord(runID: run.id, time: failed.finishedAt!, type: EventType.runFinished,
                                    data: ["status": "failed", "error": .string(message)])]
        try? store.commit(batch)
        try? store.releaseRun(run.id, owner: owner)
        if let observer { for event in batch.events { observer.runEvent(event) } }
    }

    private func emitQueueEvent(_ type: EventType, _ data: JSONValue) {
        let event = EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: type, data: data)
        try? store.appendEvents([event])
        observer?.runEvent(event)
    }
}
