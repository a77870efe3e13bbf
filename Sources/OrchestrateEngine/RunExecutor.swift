import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Settings of one executor.
public struct EngineOptions: Sendable {
    /// Steps running at once in this process (the `--max-parallel` flag).
    public var maxParallel: Int = ProcessInfo.processInfo.activeProcessorCount * 4
    /// How long the run's ownership lasts without a heartbeat; a crashed owner's run can be
    /// taken over after that (sooner on the same host, where a dead pid is seen at once).
    public var leaseDuration: Double = 15
    public var heartbeatInterval: Double = 2
    /// After a timeout cancels a step, how long it has to return before it is abandoned.
    public var timeoutGrace: Double = 30
    /// The environment `env.*` and secrets are read from.
    public var environment: [String: String] = ProcessInfo.processInfo.environment
    /// Uniform random numbers in [0, 1) for retry jitter (tests pass a fixed one).
    public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    public init() {}
}

public enum ExecutionError: Error, CustomStringConvertible {
    case notFound(String)
    case alreadyFinished(String, RunStatus)
    case ownedElsewhere(String, OwnerIdentity)

    public var description: String {
        switch self {
        case .notFound(let id): return "no run \(id) in this state store"
        case .alreadyFinished(let id, let status): return "run \(id) already finished (\(status.rawValue))"
        case .ownedElsewhere(let id, let owner):
            return "run \(id) is being executed by process \(owner.pid) on \(owner.host); cancel it there, or wait"
        }
    }
}

/// Executes one run of a workflow to its end: schedules ready steps, retries, enforces limits,
/// journals every transition before acting on it, and runs compensations when the run fails or
/// is cancelled. Also resumes a run that was interrupted (its journal says where it was).
///
/// ```swift
/// let executor = try RunExecutor(store: store, registry: registry, workflow: wf, run: run)
/// let final = executor.execute()   // blocks; call `cancel()` from a signal handler
/// ```
///
/// Threading: `execute()` runs the scheduling loop on the calling thread; each attempt runs
/// on a thread of its own (plugins block); `cancel()` may be called from any thread.
public final class RunExecutor: AttemptEventSink, @unchecked Sendable {
    let store: any StateStore
    let registry: PluginRegistry
    let workflow: Workflow
    let options: EngineOptions
    let observer: (any RunObserver)?
    let owner = OwnerIdentity.current
    var run: RunRecord

    // Shared with attempt threads and `cancel()`: guarded by `signal`.
    private let signal = NSCondition()
    private var completions: [Completion] = []
    private var threadEvents: [EventRecord] = []
    private var cancelRequested = false
    private var closeRequested = false
    private var cancelledInstances: Set<String> = []

    // Owned by the scheduling loop.
    var instances: [String: Instance] = [:]
    var attempts: [String: Attempt] = [:]
    var batch = JournalBatch()
    var completionCounter = 0
    var ending: RunStatus?          // set once the run is failing or cancelled
    var failureMessages: [String] = []
    var secretValues: Set<String> = []
    private var compensationEntered = false
    private var nextToken = 0
    private var pendingStarts: [(Instance, Attempt)] = []

    /// Prepares to execute `run` (new, or interrupted and being resumed). Claims the run for
    /// this process; throws if another live process owns it.
    public init(store: any StateStore, registry: PluginRegistry, workflow: Workflow, run: RunRecord,
                options: EngineOptions = EngineOptions(), observer: (any RunObserver)? = nil) throws
    {
        self.store = store
        self.registry = registry
        self.workflow = workflow
        self.options = options
        self.observer = observer
        self.run = run
        guard !run.status.isFinished else { throw ExecutionError.alreadyFinished(run.id, run.status) }
        let leaseUntil = Date().timeIntervalSince1970 + options.leaseDuration
        guard try store.claimRun(run.id, owner: owner, leaseUntil: leaseUntil) else {
            let current = try store.run(run.id)?.owner ?? owner
            throw ExecutionError.ownedElsewhere(run.id, current)
        }
    }

    /// Asks the run to stop: running steps are cancelled, compensations run, the run ends
    /// `cancelled`. Thread-safe; returns at once.
    public func cancel() {
        signal.withLock {
            cancelRequested = true
            signal.signal()
        }
    }

    /// Asks long-lived steps to finish their queued items and end (`orchestrate close`).
    public func closeSessions() {
        signal.withLock {
            closeRequested = true
            signal.signal()
        }
    }

    // MARK: The loop

    /// Runs until the run finishes. Returns the final run record.
    public func execute() -> RunRecord {
        let heartbeat = Heartbeat(executor: self)
        heartbeat.start()
        defer {
            heartbeat.stop()
            try? store.releaseRun(run.id, owner: owner)
        }
        do {
            try loadState()
            try loop()
        } catch {
            // The store failed under us (disk full, database gone): leave the run resumable.
            observer?.runEvent(EventRecord(runID: run.id, time: now(), type: "run.error",
                                           data: ["error": .string("\(error)")]))
            run.error = "state store error: \(error)"
        }
        return run
    }

    private func loop() throws {
        while true {
            let (newCompletions, newEvents, cancelNow) = takeSignals()
            batch.events.append(contentsOf: newEvents)
            for completion in newCompletions { handle(completion) }
            if cancelNow && ending == nil { beginEnding(.cancelled, reason: "cancelled") }
            checkTimeouts()

            if ending == nil {
                scheduleReadySteps()
                if attempts.isEmpty && pendingStarts.isEmpty && allStepsFinished() {
                    finishSucceeded()
                    try flush()
                    return
                }
            } else if attempts.isEmpty && pendingStarts.isEmpty {
                if !compensationEntered {
                    enterCompensation()
                    compensationEntered = true
                }
                if scheduleNextCompensation() == false {
                    finishEnding()
                    try flush()
                    return
                }
            }
            try flush()
            wait()
        }
    }

    /// Commits the round's journal, then tells the observer, then starts the attempts it
    /// journaled: nothing is acted on before it is durable.
    private func flush() throws {
        if !batch.isEmpty {
            let committed = batch
            batch = JournalBatch()
            try store.commit(committed)
            if let observer { for event in committed.events { observer.runEvent(event) } }
        }
        for (instance, attempt) in pendingStarts { launch(instance, attempt) }
        pendingStarts.removeAll()
    }

    private func takeSignals() -> ([Completion], [EventRecord], Bool) {
        signal.withLock {
            defer {
                completions.removeAll()
                threadEvents.removeAll()
            }
            return (completions, threadEvents, cancelRequested)
        }
    }

    /// Sleeps until something happens: a completion, a cancel, an event from a step, or the
    /// next due time (retry, timeout, concurrency-slot poll).
    private func wait() {
        var until = now() + 1
        for instance in instances.values where instance.record.status == .waitingRetry {
            until = min(until, instance.record.nextAttemptAt ?? until)
        }
        if instances.values.contains(where: { $0.blockedOnKeys }) { until = min(until, now() + 0.05) }
        let monotonicNow = Monotonic.now()
        for attempt in attempts.values {
            if let deadline = attempt.deadline { until = min(until, now() + max(deadline - monotonicNow, 0)) }
        }
        signal.withLock {
            if completions.isEmpty && threadEvents.isEmpty && !(cancelRequested && ending == nil) {
                _ = signal.wait(until: Date(timeIntervalSince1970: max(until, now() + 0.001)))
            }
        }
    }

    // MARK: Loading state

    private func loadState() throws {
        let existing = try store.steps(ofRun: run.id)
        let resumed = !existing.isEmpty || run.startedAt != nil
        for record in existing {
            guard let spec = spec(for: record) else { continue }
            var record = record
            // An attempt that was running when the process died starts again (with its
            // checkpoint); it did not fail, so it does not use up a retry.
            if record.status == .running && record.kind != .fanOut { record.status = .pending }
            instances[record.id] = Instance(record: record, spec: spec)
            completionCounter = max(completionCounter, record.completionSeq ?? 0)
        }
        for step in workflow.steps where instances[step.id] == nil {
            instances[step.id] = Instance(record: StepRecord(runID: run.id, id: step.id, step: step.id, kind: .step),
                                          spec: Runnable(step: step, workflow: workflow))
        }
        if run.status == .compensating { ending = run.ending ?? .failed }
        if run.status == .queued || run.startedAt == nil {
            run.status = .running
            run.startedAt = now()
        }
        if let error = run.error { failureMessages = [error] }
        batch.runUpdates.append(run)
        emit(resumed ? EventType.runResumed : EventType.runStarted, step: nil,
             data: ["workflow": .string(workflow.name), "pid": .int(Int64(owner.pid))])
    }

    private func spec(for record: StepRecord) -> Runnable? {
        guard let step = workflow.step(record.step) else { return nil }
        switch record.kind {
        case .compensation:
            guard let compensation = step.compensate else { return nil }
            return Runnable(compensation: compensation, of: step, workflow: workflow)
        default:
            return Runnable(step: step, workflow: workflow)
        }
    }

    // MARK: Scheduling

    private func scheduleReadySteps() {
        for step in workflow.steps {
            guard let instance = instances[step.id] else { continue }
            if instance.record.kind == .fanOut {
                scheduleItems(of: step, parent: instance)
                continue
            }
            switch instance.record.status {
            case .pending where instance.materialized:
                tryStart(instance)
            case .pending:
                materialize(step, instance)
            case .waitingRetry:
                if (instance.record.nextAttemptAt ?? 0) <= now() { tryStart(instance) }
            default:
                break
            }
        }
    }

    /// Decides what a step whose dependencies may be done becomes: skipped, a fan-out, or
    /// ready to start.
    private func materialize(_ step: Step, _ instance: Instance) {
        let dependencies = step.needs.compactMap { declaredStatus($0) }
        guard dependencies.count == step.needs.count, dependencies.allSatisfy(\.isFinished) else { return }
        let context = evaluationContext(item: nil, attempt: 1)
        if let condition = step.condition {
            do {
                guard try condition.evaluate(in: context).isTruthy else { return skip(instance, reason: "if: \(condition.source) is false") }
            } catch {
                return fail(instance, StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
            }
        } else if dependencies.contains(.skipped) {
            return skip(instance, reason: "a step it needs was skipped")
        }
        if let forEach = step.forEach {
            let items: [JSONValue]
            do {
                guard let list = try forEach.evaluate(in: context).arrayValue else {
                    return fail(instance, StepFailure(kind: .invalidInput, code: "for_each",
                                                      message: "for_each must evaluate to an array", retryAfter: nil))
                }
                items = list
            } catch {
                return fail(instance, StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
            }
            instance.record.kind = .fanOut
            instance.record.item = redactor().redact(.array(items))
            instance.record.status = .running
            instance.record.startedAt = now()
            batch.stepUpserts.append(instance.record)
            for (index, item) in items.enumerated() {
                var child = StepRecord(runID: run.id, id: "\(step.id)[\(index)]", step: step.id, kind: .item)
                child.itemIndex = index
                child.item = item
                let childInstance = Instance(record: child, spec: instance.spec)
                childInstance.materialized = true
                instances[child.id] = childInstance
                batch.stepUpserts.append(child)
            }
            scheduleItems(of: step, parent: instance)
            return
        }
        instance.materialized = true
        tryStart(instance)
    }

    private func scheduleItems(of step: Step, parent: Instance) {
        guard parent.record.status == .running else { return }
        let children = items(of: parent)
        var running = children.filter { $0.record.status == .running }.count
        for child in children {
            if let limit = step.maxParallel, running >= limit { break }
            let due = child.record.status == .pending
                || (child.record.status == .waitingRetry && (child.record.nextAttemptAt ?? 0) <= now())
            if due, tryStart(child) { running += 1 }
        }
        if children.allSatisfy({ $0.record.status.isFinished }) { finishFanOut(parent, children) }
    }

    func items(of parent: Instance) -> [Instance] {
        let count = parent.record.item?.arrayValue?.count ?? 0
        return (0..<count).compactMap { instances["\(parent.record.id)[\($0)]"] }
    }

    /// The status of a declared step, whatever its shape.
    private func declaredStatus(_ stepID: String) -> StepStatus? {
        instances[stepID]?.record.status
    }

    private func allStepsFinished() -> Bool {
        workflow.steps.allSatisfy { instances[$0.id]?.record.status.isFinished ?? false }
    }

    /// Starts an attempt if a slot is free. Returns whether it started (or failed at once).
    @discardableResult
    func tryStart(_ instance: Instance) -> Bool {
        guard attempts.count + pendingStarts.count < options.maxParallel else { return false }
        let attemptNumber = instance.record.attempt + 1
        secretValues.formUnion(resolveSecrets().values.values)
        let boundItem = instance.record.kind == .item || instance.record.kind == .compensation ? instance.record.item : nil
        let context = evaluationContext(item: boundItem,
                                        attempt: attemptNumber, resolveSecrets: true)
        let inputs: JSONValue
        var concurrencyKeys: [(key: String, limit: Int)] = []
        do {
            inputs = try instance.spec.with.evaluate(in: context)
            if instance.record.idempotencyKey == nil, let template = instance.spec.idempotencyKey {
                instance.record.idempotencyKey = redactor().redact(try template.evaluate(in: context).interpolated)
            }
            for limit in instance.spec.concurrency {
                concurrencyKeys.append((try limit.key.evaluate(in: context).interpolated, limit.limit))
            }
        } catch {
            fail(instance, StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
            return true
        }
        guard let stepType = registry.stepType(instance.spec.uses) else {
            fail(instance, StepFailure(kind: .permanent, code: "unknown_step_type",
                                       message: "no loaded plugin provides step type '\(instance.spec.uses)'", retryAfter: nil))
            return true
        }
        let holder = "\(run.id)/\(instance.record.id)"
        if !concurrencyKeys.isEmpty {
            let acquired = (try? store.tryAcquireLeases(concurrencyKeys, holder: holder, owner: owner,
                                                        expiresAt: now() + options.leaseDuration)) ?? false
            guard acquired else {
                if !instance.blockedOnKeys {
                    instance.blockedOnKeys = true
                    emit(EventType.stepWaiting, step: instance.record.id,
                         data: ["reason": .string("concurrency limit"),
                                "keys": .array(concurrencyKeys.map { .string($0.key) })])
                }
                return false
            }
        }
        instance.blockedOnKeys = false
        let checkpoint = try? store.checkpoint(runID: run.id, stepID: instance.record.id)
        instance.record.status = .running
        instance.record.attempt = attemptNumber
        instance.record.nextAttemptAt = nil
        instance.record.startedAt = now()
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepStarted, step: instance.record.id, data: ["attempt": .int(Int64(attemptNumber)),
                                                                     "uses": .string(instance.spec.uses)])
        nextToken += 1
        let request = StepRequest(runID: run.id, stepID: instance.record.id, inputs: inputs,
                                  idempotencyKey: instance.record.idempotencyKey, runDir: run.runDir,
                                  attempt: attemptNumber, timeout: instance.spec.timeout, checkpoint: checkpoint)
        let delegate = AttemptDelegate(runID: run.id, instanceID: instance.record.id, declaredStep: instance.record.step,
                                       store: store, redactor: redactor(), sink: self)
        let attempt = Attempt(token: nextToken, invocation: StepInvocation(stepType: stepType, request: request, delegate: delegate),
                              delegate: delegate, leaseHolder: concurrencyKeys.isEmpty ? nil : holder,
                              deadline: instance.spec.timeout.map { Monotonic.now() + $0.seconds })
        attempts[instance.record.id] = attempt
        pendingStarts.append((instance, attempt))
        return true
    }

    private func launch(_ instance: Instance, _ attempt: Attempt) {
        let instanceID = instance.record.id
        let thread = Thread { [self] in
            let result = attempt.invocation.run()
            signal.withLock {
                completions.append(Completion(instanceID: instanceID, token: attempt.token, result: result))
                signal.signal()
            }
        }
        thread.name = "step \(instanceID)"
        thread.stackSize = 1 << 20
        thread.start()
    }

    // MARK: Completions

    private func handle(_ completion: Completion) {
        guard let attempt = attempts[completion.instanceID], attempt.token == completion.token,
              let instance = instances[completion.instanceID]
        else { return }  // an abandoned attempt that finally returned
        attempts.removeValue(forKey: completion.instanceID)
        if let holder = attempt.leaseHolder { batch.releasedLeases.append(holder) }
        switch completion.result {
        case .success(let outputs):
            succeed(instance, outputs: redactor().redact(.object(outputs)))
        case .failure(var failure):
            failure.message = redactor().redact(failure.message)
            if attempt.timedOut && failure.kind != .invalidInput && failure.kind != .permanent {
                failure.kind = .timeout
                failure.message = "timed out after \(instance.spec.timeout.map(formatDuration) ?? "?"): \(failure.message)"
            }
            handleFailure(instance, failure)
        }
    }

    func succeed(_ instance: Instance, outputs: JSONValue) {
        completionCounter += 1
        instance.record.status = .succeeded
        instance.record.outputs = outputs
        instance.record.finishedAt = now()
        instance.record.completionSeq = completionCounter
        instance.record.errorKind = nil
        instance.record.errorCode = nil
        instance.record.errorMessage = nil
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepSucceeded, step: instance.record.id,
             data: ["attempt": .int(Int64(instance.record.attempt)), "duration_ms": .int(durationMs(instance))])
    }

    private func handleFailure(_ instance: Instance, _ failure: StepFailure) {
        instance.record.failures += 1
        instance.record.errorKind = failure.kind.rawValue
        instance.record.errorCode = failure.code
        instance.record.errorMessage = failure.message
        let stopping = ending != nil || signal.withLock({ cancelRequested })
        let isCompensation = instance.record.kind == .compensation
        if stopping && !isCompensation && (failure.kind == .cancelled || isCancelled(instance.record.id)) {
            instance.record.status = .cancelled
            instance.record.finishedAt = now()
            batch.stepUpserts.append(instance.record)
            emit(EventType.stepCancelled, step: instance.record.id, data: ["attempt": .int(Int64(instance.record.attempt))])
            clearCancelled(instance.record.id)
            return
        }
        let policy = instance.spec.retry
        let retryable = (failure.kind == .retryable || failure.kind == .timeout)
            && !policy.nonRetryable.contains(failure.kind.rawValue)
            && !(failure.code.map(policy.nonRetryable.contains) ?? false)
        if retryable && instance.record.failures < policy.maxAttempts && (ending == nil || isCompensation) {
            let delay = failure.retryAfter?.seconds
                ?? policy.delay(afterAttempt: instance.record.failures, unitRandom: options.random()).seconds
            instance.record.status = .waitingRetry
            instance.record.nextAttemptAt = now() + delay
            batch.stepUpserts.append(instance.record)
            emit(EventType.stepRetrying, step: instance.record.id,
                 data: ["attempt": .int(Int64(instance.record.attempt)), "kind": .string(failure.kind.rawValue),
                        "code": failure.code.map(JSONValue.string) ?? .null, "reason": .string(failure.message),
                        "delay_ms": .int(Int64((delay * 1000).rounded())),
                        "retry_after": .bool(failure.retryAfter != nil)])
            return
        }
        fail(instance, failure)
    }

    /// Records a final failure; unless the step may fail (`continue_on_error`), the run fails.
    func fail(_ instance: Instance, _ failure: StepFailure) {
        instance.record.status = .failed
        instance.record.finishedAt = now()
        instance.record.errorKind = failure.kind.rawValue
        instance.record.errorCode = failure.code
        instance.record.errorMessage = failure.message
        batch.stepUpserts.append(instance.record)
        let attempts = instance.record.attempt
        emit(EventType.stepFailed, step: instance.record.id,
             data: ["attempt": .int(Int64(attempts)), "kind": .string(failure.kind.rawValue),
                    "code": failure.code.map(JSONValue.string) ?? .null, "error": .string(failure.message),
                    "continue_on_error": .bool(instance.spec.continueOnError)])
        if !instance.spec.continueOnError && instance.record.kind != .compensation {
            let plural = attempts == 1 ? "attempt" : "attempts"
            beginEnding(.failed, reason: "step '\(instance.record.id)' failed after \(attempts) \(plural): \(failure.message)")
        }
    }

    private func skip(_ instance: Instance, reason: String) {
        instance.record.status = .skipped
        instance.record.finishedAt = now()
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepSkipped, step: instance.record.id, data: ["reason": .string(reason)])
    }

    private func finishFanOut(_ parent: Instance, _ children: [Instance]) {
        let failed = children.filter { $0.record.status == .failed || $0.record.status == .cancelled }
        parent.record.outputs = .array(children.map { $0.record.outputs ?? .null })
        parent.record.finishedAt = now()
        if failed.isEmpty {
            completionCounter += 1
            parent.record.status = .succeeded
            parent.record.completionSeq = completionCounter
            emit(EventType.stepSucceeded, step: parent.record.id, data: ["items": .int(Int64(children.count))])
        } else {
            parent.record.status = .failed
            parent.record.errorMessage = "\(failed.count) of \(children.count) items failed"
            emit(EventType.stepFailed, step: parent.record.id,
                 data: ["error": .string(parent.record.errorMessage!), "continue_on_error": .bool(parent.spec.continueOnError)])
        }
        batch.stepUpserts.append(parent.record)
    }

    /// The run will end `status`: stop scheduling and cancel what runs; compensations follow
    /// once every attempt has returned.
    func beginEnding(_ status: RunStatus, reason: String) {
        guard ending == nil else { return }
        ending = status
        failureMessages.append(reason)
        for (instanceID, attempt) in attempts {
            markCancelled(instanceID)
            attempt.invocation.cancel(.cancelled)
        }
        // Retries that were waiting will not happen.
        for instance in instances.values where instance.record.status == .waitingRetry || instance.record.status == .pending {
            if instance.record.kind == .compensation { continue }
            instance.record.status = .cancelled
            instance.record.finishedAt = now()
            batch.stepUpserts.append(instance.record)
        }
    }

    private func checkTimeouts() {
        let monotonicNow = Monotonic.now()
        for (instanceID, attempt) in attempts {
            guard let deadline = attempt.deadline, monotonicNow >= deadline else { continue }
            if !attempt.timedOut {
                attempt.timedOut = true
                attempt.invocation.cancel(.timeout)
            } else if monotonicNow >= deadline + options.timeoutGrace {
                // The plugin ignores cancellation. Stop waiting for it: its late result will be
                // ignored (tokens differ). Process isolation is the cure for such plugins.
                signal.withLock {
                    completions.append(Completion(instanceID: instanceID, token: attempt.token,
                                                  result: .failure(StepFailure(kind: .timeout, code: "abandoned",
                                                                               message: "the step did not stop within \(Int(options.timeoutGrace))s of being cancelled; abandoned",
                                                                               retryAfter: nil))))
                }
                attempt.deadline = nil
            }
        }
    }

    // MARK: Finishing

    private func finishSucceeded() {
        var outputs: [String: JSONValue] = [:]
        let context = evaluationContext(item: nil, attempt: 1)
        for output in workflow.outputs {
            do {
                outputs[output.name] = try output.value.evaluate(in: context)
            } catch {
                failureMessages.append("output '\(output.name)': \(error)")
            }
        }
        run.outputs = redactor().redact(.object(outputs))
        finish(failureMessages.isEmpty ? .succeeded : .failed)
    }

    func finish(_ status: RunStatus) {
        run.status = status
        run.ending = nil
        run.finishedAt = now()
        run.error = failureMessages.isEmpty ? nil : failureMessages.joined(separator: "; ")
        batch.runUpdates.append(run)
        var data: [String: JSONValue] = ["status": .string(status.rawValue),
                                         "duration_ms": .int(Int64(((run.finishedAt! - (run.startedAt ?? run.createdAt)) * 1000).rounded()))]
        if let error = run.error { data["error"] = .string(error) }
        if let outputs = run.outputs { data["outputs"] = outputs }
        emit(EventType.runFinished, step: nil, data: .object(data))
    }

    // MARK: Contexts

    func resolveSecrets() -> SecretResolver.Resolution {
        SecretResolver.resolve(workflow.secrets, environment: options.environment)
    }

    func redactor() -> Redactor { Redactor(secrets: secretValues) }

    func evaluationContext(item: JSONValue?, attempt: Int, resolveSecrets: Bool = false) -> EvaluationContext {
        var steps: [String: JSONValue] = [:]
        for step in workflow.steps {
            guard let record = instances[step.id]?.record, record.status.isFinished else { continue }
            steps[step.id] = ["outputs": record.outputs ?? [:], "status": .string(record.status.rawValue)]
        }
        var context = EvaluationContext()
        context.inputs = run.inputs
        context.secrets = resolveSecrets ? self.resolveSecrets().values : [:]
        context.steps = steps
        context.run = ["id": .string(run.id), "dir": .string(run.runDir), "attempt": .int(Int64(attempt))]
        context.item = item
        context.env = options.environment
        return context
    }

    // MARK: Events

    func emit(_ type: String, step: String?, data: JSONValue) {
        batch.events.append(EventRecord(runID: run.id, time: now(), type: type, step: step, data: data))
    }

    func attemptEvent(type: String, step: String, data: JSONValue) {
        signal.withLock {
            threadEvents.append(EventRecord(runID: run.id, time: now(), type: type, step: step, data: data))
            if threadEvents.count == 1 { signal.signal() }
        }
    }

    func attemptProgress(step: String, progress: ProgressSnapshot) {
        observer?.runProgress(step: step, progress: progress)
    }

    func attemptIsCancelled(_ instanceID: String) -> Bool {
        signal.withLock { cancelledInstances.contains(instanceID) }
    }

    func attemptSessionClosing(_ instanceID: String) -> Bool {
        signal.withLock { closeRequested }
    }

    private func markCancelled(_ id: String) { _ = signal.withLock { cancelledInstances.insert(id) } }
    private func clearCancelled(_ id: String) { _ = signal.withLock { cancelledInstances.remove(id) } }
    private func isCancelled(_ id: String) -> Bool { signal.withLock { cancelledInstances.contains(id) } }

    func now() -> Double { Date().timeIntervalSince1970 }

    private func durationMs(_ instance: Instance) -> Int64 {
        Int64((((instance.record.finishedAt ?? now()) - (instance.record.startedAt ?? now())) * 1000).rounded())
    }
}

/// One step instance as the loop sees it: the journaled record plus what it runs.
final class Instance {
    var record: StepRecord
    let spec: Runnable
    /// Its `if:`/`for_each` were evaluated (or it is an item): it only waits for a slot.
    var materialized: Bool
    var blockedOnKeys = false

    init(record: StepRecord, spec: Runnable) {
        self.record = record
        self.spec = spec
        // Anything journaled past `pending` was materialized before; so were items.
        self.materialized = record.status != .pending || record.kind == .item || record.kind == .compensation
            || record.attempt > 0
    }
}

/// One attempt in flight.
final class Attempt: @unchecked Sendable {
    let token: Int
    let invocation: StepInvocation
    let delegate: AttemptDelegate
    let leaseHolder: String?
    var deadline: Double?
    var timedOut = false

    init(token: Int, invocation: StepInvocation, delegate: AttemptDelegate, leaseHolder: String?, deadline: Double?) {
        self.token = token
        self.invocation = invocation
        self.delegate = delegate
        self.leaseHolder = leaseHolder
        self.deadline = deadline
    }
}

struct Completion {
    let instanceID: String
    let token: Int
    let result: Result<[String: JSONValue], StepFailure>
}

/// What an instance runs: a step's or a compensation's `uses`, `with`, and policies.
struct Runnable {
    let uses: String
    let with: Template
    let retry: RetryPolicy
    let timeout: Duration?
    let concurrency: [ConcurrencyLimit]
    let idempotencyKey: Template?
    let continueOnError: Bool

    init(step: Step, workflow: Workflow) {
        uses = step.uses
        with = step.with
        retry = step.retry
        timeout = step.timeout
        concurrency = workflow.concurrency + step.concurrency
        idempotencyKey = step.idempotencyKey
        continueOnError = step.continueOnError
    }

    init(compensation: Compensation, of step: Step, workflow: Workflow) {
        uses = compensation.uses
        with = compensation.with
        retry = compensation.retry
        timeout = compensation.timeout
        concurrency = workflow.concurrency
        idempotencyKey = nil
        continueOnError = false
    }
}

func formatDuration(_ duration: Duration) -> String {
    let s = duration.seconds
    if s < 1 { return "\(Int((s * 1000).rounded()))ms" }
    if s < 60 { return s == s.rounded() ? "\(Int(s))s" : String(format: "%.1fs", s) }
    if s < 3600 { return "\(Int(s / 60))m\(Int(s) % 60 > 0 ? "\(Int(s) % 60)s" : "")" }
    return "\(Int(s / 3600))h\(Int(s) % 3600 / 60 > 0 ? "\(Int(s) % 3600 / 60)m" : "")"
}
