import Foundation
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore
import OrchestrateTokenBucket
import Synchronization

/// Settings of one executor.
public struct EngineOptions: Sendable {
    /// Steps running at once in this process (the `--max-parallel` flag).
    public var maxParallel: Int = ProcessInfo.processInfo.activeProcessorCount * 4
    /// How long the run's ownership lasts without a heartbeat. Another host may take the run
    /// over after that; on this host a dead owner is seen at once (its pid is gone).
    public var leaseDuration: Double = 15
    public var heartbeatInterval: Double = 2
    /// Whether the heartbeat picks up control verbs from the store (a foreground `run`); a
    /// `serve` worker reads them itself for all its runs.
    public var heartbeatAppliesControls = true
    /// After a timeout cancels a step, how long it has to return before it is abandoned.
    public var timeoutGrace: Double = 30
    /// The environment `env.*` and secrets are read from.
    public var environment: [String: String] = ProcessInfo.processInfo.environment
    /// Where plugins run when a step does not say (`isolation:`), and the runner for `process`.
    public var defaultIsolation: StepIsolation = .inProcess
    public var runnerPath: String = Bundle.main.executableURL.map {
        $0.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("orchestrate-plugin-runner").path
    } ?? "orchestrate-plugin-runner"
    /// Address-space limit of a plugin runner process, in bytes (a leaking plugin fails its step).
    public var runnerMemoryLimit: Int64?
    /// Uniform random numbers in [0, 1) for retry jitter (tests pass a fixed one).
    public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }
    /// A bandwidth cap shared by every run this process executes (`serve --max-rate`, changed
    /// live by `queue rate`), on top of each run's own cap (`RunRecord.rateCap`).
    public var bandwidth: TokenBucket?
    /// This node's state directory: run directories are `runs/ID` under it (each node has its
    /// own disk, so a run taken over from another node gets a new, empty one here).
    public var stateDirectory: String = FileManager.default.currentDirectoryPath
    /// Whether the loop and the attempt threads look for a hand-over briefly before sleeping
    /// (`BriefSpin`): right for one run and its quick steps, wasted CPU when many runs share
    /// the cores (`serve` turns it off unless it runs one run at a time).
    public var briefSpin = true
    /// How often a step held on a host that does not answer says it still waits (`step.still_held`;
    /// `ORCHESTRATE_HOLD_REPORT_SECONDS`, mainly for tests).
    public var holdReportInterval: Double = 60
    /// Whether a run's lone attempt in flight (a chain's step, a one-step run) runs on the
    /// loop's own thread, lent to it while it is quick (`InlineAttemptSlot`): no hand-over to
    /// an attempt thread and back.
    public var inlineAttempts = true
    /// Attempt threads shared by every run this process executes (a `serve` worker's): a run
    /// of one quick step would otherwise make a thread and see it exit, which cost a busy
    /// worker more than the run's journal. Nil: each run has its own, stopped when it ends.
    package var sharedAttemptThreads: AttemptThreads?

    public init() {}
}

public enum ExecutionError: Error, CustomStringConvertible {
    case alreadyFinished(String, RunStatus)
    case ownedElsewhere(String, OwnerIdentity)

    public var description: String {
        switch self {
        case .alreadyFinished(let id, let status): return "run \(id) already finished (\(status.rawValue))"
        case .ownedElsewhere(let id, let owner):
            return "run \(id) is being executed by process \(owner.pid) on node \(owner.node); cancel it there, or wait"
        }
    }
}

/// Executes one run of a workflow to its end: schedules ready steps, retries, enforces limits,
/// journals every transition before acting on it, and runs compensations when the run fails or
/// is cancelled. Resumes an interrupted run from its journal the same way.
///
/// ```swift
/// let executor = try RunExecutor(store: store, registry: registry, workflow: wf, run: run)
/// let final = executor.execute()   // blocks; `cancel()` may come from a signal handler
/// ```
///
/// Threading: one thread at a time runs the scheduling loop and owns all scheduling state.
/// Attempts run on threads of their own (plugins block) and hand their results back through
/// `signal`, except a lone attempt, which the loop's thread runs itself while it is quick (see
/// `InlineAttemptSlot`): one that runs longer keeps that thread, and the loop goes on on
/// another. `cancel()` and `closeSessions()` may be called from any thread.
///
/// Each loop round gathers every transition (finished attempts, new starts, events) into one
/// `JournalBatch`, commits it, and only then starts the attempts it journaled. Scheduling work
/// per round is proportional to what changed, not to the size of the workflow.
public final class RunExecutor: AttemptEventSink, @unchecked Sendable {
    let store: any StateStore
    let registry: PluginRegistry
    let workflow: Workflow
    let options: EngineOptions
    let observer: (any RunObserver)?
    let owner = OwnerIdentity.current
    var run: RunRecord
    /// The run's directory on this node (`${{ run.dir }}`).
    let runDirectory: String
    /// What the run's network bytes count against: its own cap and the process's, or nil.
    let bandwidth: BandwidthCaps?

    /// Guards `inbox`, and wakes the loop when something arrives.
    private let signal = MonotonicCondition()
    /// What attempt threads, probes, the heartbeat and `cancel()` & co. hand the loop.
    private var inbox = LoopInbox()
    /// `inbox.hasAttemptNews`, written under `signal`'s lock, read without it by the loop's
    /// brief spin: a spin that took the lock at every look fought the attempt threads for it.
    private let attemptNews = Atomic<Bool>(false)
    /// `inbox.completions.count`, written under `signal`'s lock, read without it by the loop
    /// while it gathers a burst of completions (`wait`).
    private let completionsWaiting = Atomic<Int>(0)

    private let threads: AttemptThreads
    /// Set by `execute`; read by the loop to stop at once when the lease may be gone.
    private var heartbeat: Heartbeat?
    /// Set once the run's last commit gave it up (`commitFinish`).
    private var released = false
    /// Set when the loop returned: everything it decided is committed (not so after a store
    /// failure or a lost lease, when it throws).
    private var loopCommittedAll = false
    /// Called once, by the thread that ends the run, with the final record (`execute(then:)`).
    private var whenEnded: (@Sendable (RunRecord) -> Void)?
    /// Whether the loop's thread runs a lone attempt itself, and whether it is lent now.
    private let inlineSlot = InlineAttemptSlot()
    /// Set once the slot is watched (`InlineAttemptWatch`), until the run ends.
    private var watchingInline = false
    /// The lone attempt the round's commit journaled, to run on the loop's thread.
    private var inlineNext: (Instance, Attempt)?

    // Owned by the scheduling loop. Each group of fields that changes together is a value with
    // its own rules (and unit tests): `inFlight`, `ending`, `dependencies`, `fanOuts`,
    // `unreachable`, `secretsSeen`. The queues below stay plain collections: `schedule()` is
    // where their logic lives.
    /// Every step instance of the run (declared steps, fan-out items, compensations), by id.
    var instances: [String: Instance] = [:]
    var inFlight = AttemptsInFlight()
    /// The round's transitions, committed together by `flush()`.
    var batch = JournalBatch()
    /// The last `completionSeq` handed out: compensations run in reverse completion order.
    var completionCounter = 0
    /// Set once the run is failing or cancelled: nothing new starts, compensations follow.
    var ending = RunEnding()
    /// Set while an `interrupt` is under way: the status the run is left with.
    var interrupting: RunStatus?

    // Incremental scheduling state (see RunExecutor+Scheduling.swift).
    var dependencies: StepDependencies
    /// Declared steps whose needs just finished: their `if:` and `for_each` are evaluated next.
    var toMaterialize: [String] = []
    /// Instances that only wait for a slot, in the order they became ready.
    var readyToStart = StartQueue<Instance>()
    /// Instances waiting for their `nextAttemptAt` (a retry's backoff, or a released hold).
    var waitingRetry: Set<String> = []
    /// Instances waiting for a concurrency key (`concurrency:`): tried every round, and the loop
    /// wakes at least every 50 ms while any waits.
    var blockedOnKeys: [Instance] = []
    var fanOuts = ActiveFanOuts()
    /// `steps.*` for expressions: each finished declared step's outputs and status.
    var stepsContext: [String: JSONValue] = [:]
    /// Sessions opened by this process and not yet closed: session step id → (type, outputs).
    var openSessions: [String: (StepType, JSONValue)] = [:]
    /// Network awareness: the steps held per unreachable host, and the probing of each.
    var unreachable: UnreachableHosts

    /// Secrets resolved so far (their values never leave memory) and the redactor built from them.
    private var secretsSeen = SecretsSeen()
    /// Fan-out lists evaluated again on resume because their journaled elements were masked
    /// (`boundItem`), by step id.
    var listsEvaluatedAgain: [String: [JSONValue]] = [:]
    /// `${{ run }}` by attempt number (`runContext`); the run's id and directory never change.
    private var runContexts: [Int: JSONValue] = [:]

    /// Prepares to execute `run` (new, or interrupted and being resumed) and claims it for this
    /// process; throws if another live process owns it.
    public init(store: any StateStore, registry: PluginRegistry, workflow: Workflow, run: RunRecord,
                options: EngineOptions = EngineOptions(), observer: (any RunObserver)? = nil) throws
    {
        self.store = store
        self.registry = registry
        self.workflow = workflow
        self.options = options
        self.observer = observer
        self.run = run
        self.dependencies = StepDependencies(workflow: workflow)
        self.unreachable = UnreachableHosts(reportInterval: options.holdReportInterval)
        self.runDirectory = try run.localRunDirectory(stateDirectory: options.stateDirectory)
        self.bandwidth = BandwidthCaps([run.rateCap.map { TokenBucket(timetable: $0) }, options.bandwidth])
        self.threads = options.sharedAttemptThreads ?? AttemptThreads(name: "steps of \(run.id)", spins: options.briefSpin)
        guard !run.status.isFinished else { throw ExecutionError.alreadyFinished(run.id, run.status) }
        // A run this process has just claimed from the queue (`claimNextRuns`) is held already:
        // claiming it again would cost a transaction per run for nothing.
        let claimedHere = run.owner == owner && run.ownerIsLive
        guard try claimedHere || store.claimRun(run.id, owner: owner, lease: options.leaseDuration)
        else {
            throw ExecutionError.ownedElsewhere(run.id, try store.run(run.id)?.owner ?? owner)
        }
    }

    /// `mkdir` with mode 0700, making the parents only when they are missing: one system call
    /// for each run (FileManager's version looks at every component first, which a busy worker
    /// notices).
    static func makeRunDirectory(_ path: String) throws(RunDirectoryError) {
        if mkdir(path, 0o700) == 0 || errno == EEXIST { return }
        guard errno == ENOENT else { throw RunDirectoryError(path: path, reason: String(cString: strerror(errno))) }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw RunDirectoryError(path: path, reason: (error as NSError).localizedDescription)
        }
    }

    /// The run's directory could not be made on this node.
    struct RunDirectoryError: Error, CustomStringConvertible {
        let path: String
        let reason: String
        var description: String { "cannot make the run directory \(path): \(reason)" }
    }

    /// Asks the run to stop: running steps are cancelled, compensations run, the run ends
    /// `cancelled`. Thread-safe; returns at once.
    public func cancel() {
        signal.withLock {
            inbox.cancelRequested = true
            signal.signal()
        }
    }

    /// Stops the run without ending it: running attempts are cancelled and will start again
    /// (with their checkpoints) when the run is resumed; no compensation runs. The run is left
    /// with `status` (`.queued` to run again later, `.paused` to keep its place,
    /// `.interrupted` for `resume` by hand) — unless it was already compensating, which it
    /// stays. Used by `stop`, `pause`, pre-emption, a graceful `serve` shutdown and the first
    /// Ctrl-C of a foreground run. Thread-safe; returns at once.
    public func interrupt(leaving status: RunStatus) {
        signal.withLock {
            inbox.interruptRequested = status
            signal.signal()
        }
    }

    /// Acts on a control verb another process left in the store (`orchestrate cancel|stop|
    /// pause|close RUN`). `unpause` and `unhold` are for a worker holding a paused run, which
    /// has no executor: nothing to do here.
    public func apply(control: RunControl) {
        switch control {
        case .cancel: cancel()
        case .close: closeSessions()
        case .stop: interrupt(leaving: .queued)
        case .pause: interrupt(leaving: .paused)
        case .unpause, .unhold: break
        }
    }

    /// True once an interrupt was asked for (the run is on its way back to the queue).
    public var isInterrupting: Bool { signal.withLock { inbox.interruptRequested != nil } }

    /// Another process owns the run now (our lease expired and it was taken over): stop at
    /// once, writing nothing more. Called by the heartbeat; fenced commits catch it too.
    func loseOwnership() {
        signal.withLock {
            inbox.ownershipLost = true
            signal.signal()
        }
    }

    /// True when the run stopped because another process took it over; the run is that
    /// process's now, not resumable from here.
    public var lostOwnership: Bool { signal.withLock { inbox.ownershipLost } }

    /// Asks long-lived steps to finish their queued items and end (`orchestrate close`).
    public func closeSessions() {
        signal.withLock {
            inbox.closeRequested = true
            signal.signal()
        }
    }

    /// Runs until the run finishes; returns the final run record. If the store fails under it
    /// (disk full, database gone), returns early with the run still resumable and `error` set.
    ///
    /// With `inlineAttempts`, the loop runs on a thread of its own (`LoopThreads`) and this one
    /// waits for its end: a plugin that never returns may keep the thread the loop lent it, and
    /// that must not be the caller's.
    public func execute() -> RunRecord {
        guard options.inlineAttempts else {
            let ended = EndedRun()
            execute { ended.set($0) }  // calls it before returning: nothing runs inline
            return ended.wait()
        }
        let ended = EndedRun()
        LoopThreads.shared.run { [self] in execute { ended.set($0) } }
        return ended.wait()
    }

    /// Runs the run on the calling thread, then calls `whenEnded` with the final record (as
    /// `execute()` returns it). The thread that calls `whenEnded` is this one, unless an
    /// attempt this thread ran inline outlasted its loan: then the loop ended on another
    /// thread, which calls it, and this call returns once that attempt has returned (which may
    /// be never, for a plugin that ignores its cancellation: give this call a thread that may
    /// be kept).
    public func execute(then whenEnded: @escaping @Sendable (RunRecord) -> Void) {
        self.whenEnded = whenEnded
        let heartbeat = Heartbeat(executor: self)
        self.heartbeat = heartbeat
        heartbeat.start()
        drive(starting: true)
    }

    /// Runs the loop on this thread, from its start (`starting`) or from the round after an
    /// inline attempt that outlasted its loan; ends the run unless the loop went on elsewhere.
    private func drive(starting: Bool) {
        do {
            if starting {
                // A run submitted elsewhere, or taken over from another node, has no directory
                // here yet. Made here, on the run's own thread, not in `init`: a queue worker
                // starts its runs one after another on one thread, which must not wait for file
                // system calls. A failure (permissions, a full disk, a file where a directory
                // should be) fails the run at once, with the reason: handed back, it would be
                // claimed and refused again, in a loop.
                // The store is named in the runs folder before its first directory there:
                // another store's sweep then leaves the folder alone (RunsFolderOwners).
                let storeID = try store.storeIdentity()
                do {
                    let registered = Result { try RunsFolderOwners.register(storeID, stateDirectory: options.stateDirectory) }
                    // A runs folder that cannot be made is said best by the run directory's error.
                    try Self.makeRunDirectory(runDirectory)
                    try registered.get()
                } catch {
                    try failBeforeStarting("\(error)")
                    loopCommittedAll = true
                    end()
                    return
                }
                try loadState()
            }
            guard try loop() else { return }  // the loop goes on on another thread
            loopCommittedAll = true
        } catch StoreError.ownershipLost(let runID) {
            signal.withLock { inbox.ownershipLost = true }
            for (_, attempt) in inFlight.byInstance { attempt.invocation.cancel(.shutdown) }
            run.error = StoreError.ownershipLost(runID: runID).description
        } catch {
            for (_, attempt) in inFlight.byInstance { attempt.invocation.cancel(.shutdown) }
            run.error = "state store error: \(error)"
        }
        end()
    }

    /// What follows the loop, whatever ended it; then the final record goes to `whenEnded`.
    private func end() {
        closeAllSessions()  // normally done by `finish`; this covers a store failure
        if options.sharedAttemptThreads == nil { threads.stop() }
        heartbeat?.stop()
        if !released { try? store.releaseRun(run.id, owner: owner) }
        if watchingInline { InlineAttemptWatch.shared.unwatch(inlineSlot) }
        whenEnded?(run)
    }

    /// The declared steps' records (neither fan-out items nor compensations) as the run's last
    /// commit left them, once `execute` has returned from a loop that committed everything; nil
    /// before, or after a store failure or a lost lease (ask the store then). The summary counts
    /// these rather than read every step of the run back from the store (a fan-out's 10,000
    /// items included, a read as costly as a good part of the run). Call it on the thread that
    /// called `execute`.
    public var declaredStepRecords: [StepRecord]? {
        loopCommittedAll ? workflow.steps.compactMap { instances[$0.id]?.record } : nil
    }

    /// Returns true when the run's loop is over, false when it goes on on another thread (an
    /// attempt run inline outlasted its loan).
    private func loop() throws -> Bool {
        while true {
            if store.fencesByLease, heartbeat?.isOverdue == true { loseOwnership() }
            if signal.withLock({ inbox.ownershipLost }) { throw StoreError.ownershipLost(runID: run.id) }
            let (newCompletions, newEvents, cancelNow, interruptTo, probes) = takeSignals()
            batch.events.append(contentsOf: newEvents)
            for completion in newCompletions { handle(completion) }
            for (endpoint, failure) in probes { probed(endpoint, failure: failure) }
            if let interruptTo, interrupting == nil { beginInterrupt(leaving: interruptTo) }
            if interrupting != nil {
                if inFlight.isEmpty {
                    finishInterrupt()
                    try flush()
                    return true
                }
                try flush()
                wait()
                continue
            }
            if cancelNow && !ending.isEnding { beginEnding(.cancelled, reason: "cancelled") }
            checkTimeouts()
            startDueProbes()
            checkHeldSteps()

            if !ending.isEnding {
                schedule()
                if inFlight.isEmpty && dependencies.allFinished {
                    finishSucceeded()
                    try commitFinish()
                    return true
                }
            } else if inFlight.isEmpty {
                if ending.enterCompensation() { enterCompensation() }
                if !scheduleNextCompensation() {
                    finishEnding()
                    try commitFinish()
                    return true
                }
            }
            try flush(inlineAllowed: true)
            if let (instance, attempt) = inlineNext {
                inlineNext = nil
                guard runInline(instance, attempt) else { return false }
                continue  // its completion is in the inbox
            }
            wait()
        }
    }

    /// Ends a run that could not start on this node `failed`, with `reason`, in one commit that
    /// also gives it up.
    private func failBeforeStarting(_ reason: String) throws {
        _ = ending.begin(.failed, reason: reason)
        finish(.failed)
        heartbeat?.stop()
        batch.releasesRun = true
        try flush()
        released = true
    }

    /// The run's last commits: its final status; once that is durable, the `on_finish` hooks
    /// (if any), then their events and logs. The last commit gives the run up in the same
    /// transaction (`releasesRun`), after the heartbeat has stopped renewing it.
    private func commitFinish() throws {
        if workflow.onFinish.contains(where: { $0.when.contains(run.status.rawValue) }) {
            try flush()
            runFinishHooks()
        }
        batch.events.append(contentsOf: takeSignals().1)
        heartbeat?.stop()
        batch.releasesRun = true
        try flush()
        released = true
    }

    /// Commits the round's journal, tells the observer, then starts the attempts it journaled:
    /// nothing is acted on before it is durable. The observer hears of the round before its
    /// attempts start, so an attempt's own events (an item finished) never come before its
    /// `step.started`; the printer only queues them here, its lines are written while the
    /// attempts run.
    ///
    /// `inlineAllowed`: a lone attempt (nothing else in flight) is left in `inlineNext` for the
    /// loop's thread to run.
    private func flush(inlineAllowed: Bool = false) throws {
        var committed: JournalBatch?
        if !batch.isEmpty {
            var round = batch
            round.fence = (run.id, owner)
            batch = JournalBatch()
            let started = MonotonicClock.nowSeconds()
            try store.commit(round)
            observer?.storeCommitted(seconds: MonotonicClock.nowSeconds() - started)
            committed = round
        }
        if let observer, let committed {
            for event in committed.events { observer.runEvent(event) }
        }
        var toLaunch = inFlight.takeToLaunch()
        if inlineAllowed && options.inlineAttempts && toLaunch.count == 1 && inFlight.count == 1 {
            inlineNext = toLaunch.removeLast()
        }
        launch(toLaunch)
    }

    private func takeSignals() -> ([Completion], [EventRecord], Bool, RunStatus?, [(Endpoint, String?)]) {
        signal.withLock {
            attemptNews.store(false, ordering: .releasing)
            completionsWaiting.store(0, ordering: .releasing)
            return inbox.takeRound()
        }
    }

    /// Hands the loop a message from another thread (under `signal`'s lock): `deliver` adds it
    /// to the inbox; the loop is woken if it sleeps.
    private func handToLoop(_ deliver: (inout LoopInbox) -> Void) {
        signal.withLock {
            deliver(&inbox)
            if inbox.hasAttemptNews { attemptNews.store(true, ordering: .releasing) }
            completionsWaiting.store(inbox.completions.count, ordering: .releasing)
            signal.signal()
        }
    }

    /// Sleeps until something happens: a completion, a cancel, an event from a step, or the
    /// next due time (retry, timeout, concurrency-slot poll).
    private func wait() {
        let wallNow = now()
        var until = wallNow + 1
        for id in waitingRetry { until = min(until, instances[id]?.record.nextAttemptAt ?? until) }
        if !blockedOnKeys.isEmpty { until = min(until, wallNow + 0.05) }
        if let holdDue = unreachable.nextDue { until = min(until, holdDue) }
        let monotonicNow = MonotonicClock.nowSeconds()
        for attempt in inFlight.byInstance.values {
            if let deadline = attempt.deadline { until = min(until, wallNow + max(deadline - monotonicNow, 0)) }
        }
        // An attempt in flight may be a quick one: look for its completion briefly before
        // sleeping (see `BriefSpin`). Quick ones report one by one, a few microseconds apart:
        // once the first is in, those that keep coming join the same round (one commit).
        if inFlight.count > 0 && options.briefSpin,
           BriefSpin.wait(seconds: BriefSpin.loopSeconds, until: { attemptNews.load(ordering: .acquiring) })
        {
            BriefSpin.gather(expected: inFlight.count, gap: BriefSpin.gatherGapSeconds, limit: BriefSpin.gatherSeconds) {
                completionsWaiting.load(ordering: .acquiring)
            }
        }
        signal.withLock {
            if !inbox.wakesLoop(ending: ending.isEnding, interrupting: interrupting != nil) {
                _ = signal.wait(seconds: max(until - wallNow, 0.001))
            }
        }
    }

    // MARK: Attempt threads

    /// Starts the journaled attempts on attempt threads, all in one hand-over.
    func launch(_ attempts: [(Instance, Attempt)]) {
        threads.run(contentsOf: attempts.map { instance, attempt in
            let instanceID = instance.id
            return { [self] in
                let result = attempt.invocation.run()
                handToLoop { $0.completions.append(Completion(instanceID: instanceID, token: attempt.token, result: result)) }
            }
        })
    }

    /// Runs `attempt` on the loop's thread, lent to it (see `InlineAttemptSlot`); hands its result
    /// to the loop like an attempt thread. Returns true when this thread still holds the loop,
    /// false when the loop went on on another thread meanwhile: then this one must leave the
    /// loop's state alone.
    private func runInline(_ instance: Instance, _ attempt: Attempt) -> Bool {
        if !watchingInline {
            watchingInline = true
            InlineAttemptWatch.shared.watch(inlineSlot) { [weak self] in
                guard let self else { return }
                LoopThreads.shared.run { self.drive(starting: false) }
            }
        }
        let instanceID = instance.id
        let generation = inlineSlot.begin()
        let result = attempt.invocation.run()
        let holdsLoop = inlineSlot.end(generation)
        handToLoop { $0.completions.append(Completion(instanceID: instanceID, token: attempt.token, result: result)) }
        return holdsLoop
    }

    /// Probes an unreachable endpoint on an attempt thread (a connect may take a while).
    func probeInBackground(_ endpoint: Endpoint) {
        threads.run { [self] in
            let failure = HostProbe.failure(endpoint)
            handToLoop { $0.probeAnswers.append((endpoint, failure)) }
        }
    }

    /// Gives up on an attempt whose plugin ignores cancellation: a synthetic completion whose
    /// token is current, so the plugin's late result (if any) is ignored.
    func abandon(_ instanceID: String, _ attempt: Attempt, _ failure: StepFailure) {
        handToLoop {
            $0.completions.append(Completion(instanceID: instanceID, token: attempt.token, result: .failure(failure)))
        }
    }

    func markCancelled(_ id: String) { _ = signal.withLock { inbox.cancelledInstances.insert(id) } }
    func clearCancelled(_ id: String) { _ = signal.withLock { inbox.cancelledInstances.remove(id) } }
    func wasCancelled(_ id: String) -> Bool { signal.withLock { inbox.cancelledInstances.contains(id) } }

    // MARK: Contexts

    func resolveSecrets() -> [String: String] {
        let values = SecretResolver.resolve(workflow.secrets, environment: options.environment).values
        secretsSeen.learn(values.values)
        return values
    }

    var redactor: Redactor { secretsSeen.redactor }

    func evaluationContext(item: JSONValue?, attempt: Int, secrets: [String: String] = [:]) -> EvaluationContext {
        var context = EvaluationContext()
        context.inputs = run.inputs
        context.secrets = secrets
        context.steps = stepsContext
        context.run = runContext(attempt: attempt)
        context.item = item
        context.env = options.environment
        return context
    }

    /// `${{ run }}` at attempt `attempt`, made once per attempt number and shared by every start
    /// with that number (a fan-out starts thousands).
    private func runContext(attempt: Int) -> JSONValue {
        if let made = runContexts[attempt] { return made }
        let made: JSONValue = ["id": .string(run.id), "dir": .string(runDirectory), "attempt": .int(Int64(attempt))]
        runContexts[attempt] = made
        return made
    }

    // MARK: Events

    func emit(_ type: EventType, step: String?, data: JSONValue) {
        batch.events.append(EventRecord(runID: run.id, time: now(), type: type, step: step, data: data))
    }

    func attemptEvent(type: EventType, step: String, data: JSONValue) {
        let event = EventRecord(runID: run.id, time: now(), type: type, step: step, data: data)
        handToLoop { $0.events.append(event) }
    }

    func attemptJournaledEvent(_ event: EventRecord) {
        observer?.runEvent(event)
    }

    func attemptProgress(step: String, progress: ProgressSnapshot) {
        observer?.runProgress(step: step, progress: progress)
    }

    func attemptIsCancelled(_ instanceID: String) -> Bool { wasCancelled(instanceID) }

    func attemptSessionClosing(_ instanceID: String) -> Bool { signal.withLock { inbox.closeRequested } }

    func now() -> Double { Date().timeIntervalSince1970 }
}
