import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Deciding what starts: loading the journal, tracking which steps' needs are met, evaluating
/// `if:` and `for_each` when a step becomes ready, and starting attempts within the limits.
///
/// The bookkeeping is incremental: `dependencies` counts, per declared step, the needs not
/// yet finished; when a step finishes its dependents' counts drop, and a step reaching zero
/// joins `toMaterialize`. So a round costs what changed, even in a 10,000-step workflow.
extension RunExecutor {
    // MARK: Loading

    func loadState() throws {
        // A run never started has no steps journaled (its first commit records the start with
        // them): a fresh run from the queue skips the read.
        let existing = run.startedAt == nil ? [] : try store.steps(ofRun: run.id)
        let resumed = !existing.isEmpty || run.startedAt != nil
        for var record in existing {
            guard let spec = spec(for: record) else { continue }
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
        noteTakeover()
        if resumed {
            reopenSessionsOnResume()
            redoStepsFromOtherNodes()
        }
        for step in workflow.steps {
            let instance = instances[step.id]!
            if instance.record.status.isFinished {
                stepsContext[step.id] = contextEntry(instance.record)
                continue
            }
            let unfinishedNeeds = step.needs.filter { !(instances[$0]?.record.status.isFinished ?? true) }.count
            dependencies.track(step.id, unfinishedNeeds: unfinishedNeeds)
            // A step whose needs are not all finished (possible on resume: a session step
            // that runs again) waits; `declaredStepFinished` queues it when they are.
            if instance.record.kind == .fanOut {
                registerFanOut(instance, step: step)
            } else if instance.record.status == .waitingRetry || instance.record.status == .held {
                // Held by a process that died: try again at once (a new hold starts if need be).
                if instance.record.status == .held { instance.record.nextAttemptAt = now() }
                waitingRetry.insert(instance.id)
            } else if unfinishedNeeds == 0 {
                if instance.materialized { readyToStart.append(instance) } else { toMaterialize.append(step.id) }
            }
        }
        ending = RunEnding(resuming: run)
        if run.startedAt == nil { run.startedAt = now() }
        if run.status == .queued || run.status == .interrupted { run.status = .running }
        batch.runUpdates.append(run)
        // The queue and the time spent in it, for the queue-wait metric (`/metrics`); and the
        // process that left the run unfinished when it is taken over from one (a foreground
        // `run` that was killed, a serve that died), so the taker can say so.
        var data: [String: JSONValue] = [
            "workflow": .string(workflow.name), "pid": .int(Int64(owner.pid)), "queue": .string(run.queue),
            "waited_ms": .int(Int64(max(0, (run.startedAt! - run.createdAt) * 1000).rounded())),
        ]
        if resumed, let previous = run.takenFrom, previous != owner {
            data["taken_from"] = ["node": .string(previous.node), "pid": .int(Int64(previous.pid))]
        }
        emit(resumed ? EventType.runResumed : EventType.runStarted, step: nil, data: .object(data))
    }

    private func spec(for record: StepRecord) -> Runnable? {
        guard let step = workflow.step(record.step) else { return nil }
        if record.kind == .compensation {
            guard let compensation = step.compensate else { return nil }
            return Runnable(compensation: compensation, of: step, workflow: workflow)
        }
        return Runnable(step: step, workflow: workflow)
    }

    private func registerFanOut(_ parent: Instance, step: Step) {
        let count = parent.record.item?.arrayValue?.count ?? 0
        let children = (0..<count).compactMap { instances[UnstartedItems.id(step: step.id, index: $0)] }
        for child in children where child.record.status == .waitingRetry || child.record.status == .held {
            waitingRetry.insert(child.id)
        }
        fanOuts.add(FanOut(parent: parent, children: children, maxParallel: step.maxParallel), for: step.id)
    }

    func contextEntry(_ record: StepRecord) -> JSONValue {
        ["outputs": record.outputs ?? [:], "status": .string(record.status.rawValue)]
    }

    /// Whether everything the instance's declared step needs has finished (compensations run
    /// after the fact and need nothing).
    func needsMet(_ instance: Instance) -> Bool {
        instance.record.kind == .compensation || dependencies.needsMet(instance.record.step)
    }

    /// A declared step reached a final status: its outputs become visible and its dependents
    /// may become ready.
    func declaredStepFinished(_ instance: Instance) {
        stepsContext[instance.record.step] = contextEntry(instance.record)
        if instance.record.status == .succeeded { sessionOpened(instance) }
        releaseSessions(neededBy: instance.record.step)
        dependencies.finished(instance.record.step, ready: &toMaterialize)
    }

    // MARK: A scheduling round

    func schedule() {
        var index = 0
        while index < toMaterialize.count {
            let id = toMaterialize[index]
            index += 1
            if let step = workflow.step(id), let instance = instances[id], instance.record.status == .pending {
                materialize(step, instance)
            }
        }
        toMaterialize.removeAll()

        let due = waitingRetry.filter { (instances[$0]?.record.nextAttemptAt ?? 0) <= now() }
        for id in due.sorted() {
            guard let instance = instances[id], needsMet(instance) else { continue }
            if instance.record.kind == .item, let fan = fanOuts[instance.record.step], !fan.hasRoom { continue }
            if start(instance) == .noSlot { return }
        }

        let blocked = blockedOnKeys
        blockedOnKeys.removeAll()
        for (offset, instance) in blocked.enumerated() {
            if instance.record.kind == .item, let fan = fanOuts[instance.record.step], !fan.hasRoom {
                blockedOnKeys.append(instance)
                continue
            }
            guard start(instance) == .noSlot else { continue }
            blockedOnKeys.append(contentsOf: blocked[offset...].filter { $0.record.status == .pending })
            return
        }

        while let next = readyToStart.first {
            if start(next) == .noSlot { return }
            readyToStart.removeFirst()
        }

        for id in fanOuts.stepIDs where dependencies.needsMet(id) {
            guard let fan = fanOuts[id] else { continue }
            while fan.hasRoom, let next = fan.queued.first {
                if start(next) == .noSlot { return }
                fan.queued.removeFirst()
            }
        }
    }

    /// Decides what a step whose needs are all finished becomes: skipped, a fan-out, or ready.
    private func materialize(_ step: Step, _ instance: Instance) {
        let needs = step.needs.compactMap { instances[$0]?.record.status }
        let context = evaluationContext(item: nil, attempt: 1)
        if let condition = step.condition {
            do {
                guard try condition.evaluate(in: context).isTruthy else {
                    return skip(instance, reason: "if: \(condition.source) is false")
                }
            } catch {
                return fail(instance, StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
            }
        } else if needs.contains(.skipped) {
            return skip(instance, reason: "a step it needs was skipped")
        }
        instance.materialized = true
        guard let forEach = step.forEach else {
            readyToStart.append(instance)
            return
        }
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
        // The redactor knows the secrets resolved so far; a fan-out may come before any attempt.
        if !workflow.secrets.isEmpty { _ = resolveSecrets() }
        instance.record.item = redactor.redact(.array(items))
        instance.record.status = .running
        instance.record.startedAt = now()
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepStarted, step: instance.id, data: ["items": .int(Int64(items.count)), "uses": .string(step.uses)])
        // The fan-out's row holds the list: an item's own row is written when it starts
        // (`UnstartedItems`). A secret's value in an element is masked there, as everywhere in
        // the journal; the element itself stays in memory (`Instance.element`), and a resume
        // evaluates the list again (`boundItem`).
        let masked = redactor.isEmpty ? nil : instance.record.item?.arrayValue
        for (index, item) in items.enumerated() {
            var child = StepRecord(runID: run.id, id: UnstartedItems.id(step: step.id, index: index), step: step.id,
                                   kind: .item)
            child.itemIndex = index
            child.item = masked?[index] ?? item
            let itemInstance = Instance(record: child, spec: instance.spec)
            if child.item != item { itemInstance.element = item }
            instances[child.id] = itemInstance
        }
        registerFanOut(instance, step: step)
        if items.isEmpty { finishFanOut(fanOuts[step.id]!) }
    }

    // MARK: Starting an attempt

    /// What `${{ item }}` is for `instance`: nil unless it is an item or an item's compensation.
    ///
    /// The journal holds an element with a secret's value masked. In the process that expanded
    /// the fan-out the element is in memory (`Instance.element`); after a resume (or a takeover)
    /// the fan-out's `for_each` is evaluated again, as at its expansion, with the secrets and
    /// environment of now, and used if it masks to the journaled list (a rotated secret read
    /// the same way is used, as every attempt uses a secret's current value). Secrets are resolved
    /// before this is called, so the redactor knows them; a secret that no longer resolves masks
    /// nothing, and the list then does not match.
    func boundItem(_ instance: Instance) throws -> JSONValue? {
        guard instance.record.kind == .item || instance.record.kind == .compensation else { return nil }
        if let element = instance.element { return element }
        guard let journaled = instance.record.item, !workflow.secrets.isEmpty, journaled.holdsMask,
              let index = instance.record.itemIndex, let step = workflow.step(instance.record.step),
              let forEach = step.forEach
        else { return instance.record.item }
        if listsEvaluatedAgain[step.id] == nil {
            // Evaluated once per fan-out, matched or not: every item and compensation of a list
            // that no longer matches fails without evaluating it again.
            let list = try? forEach.evaluate(in: evaluationContext(item: nil, attempt: 1)).arrayValue
            let matches = list.map { redactor.redact(.array($0)) == instances[step.id]?.record.item } ?? false
            listsEvaluatedAgain[step.id] = matches ? list : []
        }
        guard let list = listsEvaluatedAgain[step.id], index < list.count else { throw ItemNotRecoverable(step: step.id) }
        instance.element = list[index]
        return list[index]
    }

    enum StartOutcome { case started, noSlot, blocked, failed }

    /// Starts an attempt of `instance` if a slot is free: evaluates its inputs, takes its
    /// concurrency slots, and journals it as running (the thread starts after the commit).
    @discardableResult
    func start(_ instance: Instance) -> StartOutcome {
        guard inFlight.count < options.maxParallel else { return .noSlot }
        let attemptNumber = instance.record.attempt + 1
        let secrets = resolveSecrets()
        let bound: JSONValue?
        do {
            bound = try boundItem(instance)
        } catch {
            waitingRetry.remove(instance.id)
            fail(instance, StepFailure(kind: .permanent, code: "for_each", message: "\(error)", retryAfter: nil))
            return .failed
        }
        let context = evaluationContext(item: bound, attempt: attemptNumber, secrets: secrets)
        let inputs: JSONValue
        var keys: [(key: String, limit: Int)] = []
        do {
            inputs = try instance.spec.with.evaluate(in: context)
            if instance.record.idempotencyKey == nil, let template = instance.spec.idempotencyKey {
                instance.record.idempotencyKey = redactor.redact(try template.evaluate(in: context).interpolated)
            }
            // Keys are journaled (leases, events): masked like everything else, which can only
            // make two keys one, a stricter limit.
            for limit in instance.spec.concurrency {
                keys.append((redactor.redact(try limit.key.evaluate(in: context).interpolated), limit.limit))
            }
        } catch {
            waitingRetry.remove(instance.id)
            fail(instance, StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
            return .failed
        }
        guard let stepType = registry.stepType(instance.spec.uses) else {
            waitingRetry.remove(instance.id)
            fail(instance, StepFailure(kind: .permanent, code: "unknown_step_type",
                                       message: "no loaded plugin provides step type '\(instance.spec.uses)'", retryAfter: nil))
            return .failed
        }
        let holder = keys.isEmpty ? nil : "\(run.id)/\(instance.id)"
        if let holder {
            let acquired = (try? store.tryAcquireLeases(keys, holder: holder, owner: owner,
                                                        lease: options.leaseDuration)) ?? false
            guard acquired else {
                if !instance.blockedOnKeys {
                    instance.blockedOnKeys = true
                    emit(EventType.stepWaiting, step: instance.id,
                         data: ["reason": .string("concurrency limit"), "keys": .array(keys.map { .string($0.key) })])
                }
                if instance.record.status == .pending { blockedOnKeys.append(instance) }
                return .blocked
            }
        }
        instance.blockedOnKeys = false
        instance.endpoint = Endpoint(inputs: inputs)
        waitingRetry.remove(instance.id)
        // Only an attempt that follows another can have a checkpoint to continue from.
        let checkpoint = instance.record.attempt > 0 ? try? store.checkpoint(runID: run.id, stepID: instance.id) : nil
        instance.record.status = .running
        instance.record.attempt = attemptNumber
        instance.record.node = owner.node
        instance.record.nextAttemptAt = nil
        instance.record.startedAt = now()
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepStarted, step: instance.id,
             data: ["attempt": .int(Int64(attemptNumber)), "uses": .string(instance.spec.uses)])
        if instance.record.kind == .item { fanOuts[instance.record.step]?.running += 1 }

        var request = StepRequest(runID: run.id, stepID: instance.id, inputs: inputs,
                                  idempotencyKey: instance.record.idempotencyKey, runDir: runDirectory,
                                  attempt: attemptNumber, timeout: instance.spec.timeout, checkpoint: checkpoint,
                                  bandwidth: bandwidth)
        // As handleFailure counts: one more failure and the attempts are used up.
        request.isLastAttempt = instance.record.failures + 1 >= instance.spec.retry.maxAttempts
        let delegate = AttemptDelegate(runID: run.id, instanceID: instance.id, declaredStep: instance.record.step,
                                       store: store, owner: owner, redactor: redactor, sink: self,
                                       itemRetry: instance.spec.retry, endpoint: instance.endpoint,
                                       holdTimeout: instance.spec.holdTimeout, random: options.random,
                                       resumed: checkpoint != nil)
        let invocation: any StepRunning
        if (instance.spec.isolation ?? options.defaultIsolation) == .process {
            invocation = IsolatedStepInvocation(stepType: stepType, request: request, delegate: delegate,
                                                runnerPath: options.runnerPath,
                                                memoryLimit: options.runnerMemoryLimit)
        } else {
            invocation = StepInvocation(stepType: stepType, request: request, delegate: delegate)
        }
        let attempt = Attempt(token: inFlight.newToken(), invocation: invocation, leaseHolder: holder,
                              deadline: instance.spec.timeout.map { Monotonic.now() + $0.seconds })
        inFlight.add(attempt, of: instance)
        return .started
    }
}

/// A resumed item whose element held a secret's value (journaled masked) and whose fan-out's
/// list no longer evaluates to one that masks to the list journaled (it changed since, or a
/// secret no longer resolves).
struct ItemNotRecoverable: Error, CustomStringConvertible {
    let step: String
    var description: String {
        "an element of \(step)'s for_each held a secret's value, which is never journaled, and the list no longer "
            + "evaluates to the one the run started with (has a secret or the environment changed?): the item cannot be resumed"
    }
}

private extension JSONValue {
    /// Whether a string in it holds `Redactor.mask`.
    var holdsMask: Bool {
        switch self {
        case .string(let text): return text.contains(Redactor.mask)
        case .array(let values): return values.contains { $0.holdsMask }
        case .object(let members): return members.values.contains { $0.holdsMask }
        default: return false
        }
    }
}
