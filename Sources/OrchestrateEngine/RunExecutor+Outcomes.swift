import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// What happens when an attempt returns: success, a retry per the step's policy, or a final
/// failure that ends the run (unless `continue_on_error`); plus timeouts and the run's end.
extension RunExecutor {
    func handle(_ completion: Completion) {
        // A result whose token is not current comes from an abandoned attempt: ignore it.
        guard let instance = instances[completion.instanceID], let attempt = inFlight.complete(completion) else { return }
        if let holder = attempt.leaseHolder { batch.releasedLeases.append(holder) }
        if instance.record.kind == .item { fanOuts[instance.record.step]?.running -= 1 }
        switch completion.result {
        case .success(let outputs):
            succeed(instance, outputs: redactor.redact(.object(outputs)))
        case .failure(var failure):
            failure.message = redactor.redact(failure.message)
            if attempt.timedOut && failure.kind != .invalidInput && failure.kind != .permanent {
                failure.kind = .timeout
                failure.message = "timed out after \(instance.spec.timeout.map(\.workflowText) ?? "its timeout"): \(failure.message)"
            }
            handleFailure(instance, failure)
        }
    }

    private func succeed(_ instance: Instance, outputs: JSONValue) {
        completionCounter += 1
        instance.record.status = .succeeded
        instance.record.outputs = outputs
        instance.record.finishedAt = now()
        instance.record.completionSeq = completionCounter
        instance.record.errorKind = nil
        instance.record.errorCode = nil
        instance.record.errorMessage = nil
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepSucceeded, step: instance.id,
             data: ["attempt": .int(Int64(instance.record.attempt)), "duration_ms": .int(durationMs(instance.record))])
        finished(instance)
    }

    private func handleFailure(_ instance: Instance, _ failure: StepFailure) {
        // Interrupted (stop, pause, shutdown): not a failure; the step starts again on resume.
        if interrupting != nil {
            instance.record.status = .pending
            batch.stepUpserts.append(instance.record)
            emit(EventType.stepInterrupted, step: instance.id, data: ["attempt": .int(Int64(instance.record.attempt))])
            return
        }
        if failure.kind == .retryable, failure.code == "unreachable", !ending.isEnding, let endpoint = instance.endpoint {
            return hold(instance, on: endpoint, failure)
        }
        instance.record.failures += 1
        let isCompensation = instance.record.kind == .compensation
        // A step we cancelled because the run is ending is cancelled, not failed.
        if ending.isEnding && !isCompensation && (failure.kind == .cancelled || wasCancelled(instance.id)) {
            clearCancelled(instance.id)
            instance.record.status = .cancelled
            instance.record.finishedAt = now()
            instance.record.errorKind = failure.kind.rawValue
            instance.record.errorMessage = failure.message
            batch.stepUpserts.append(instance.record)
            emit(EventType.stepCancelled, step: instance.id, data: ["attempt": .int(Int64(instance.record.attempt))])
            return
        }
        let policy = instance.spec.retry
        let notRetried = policy.whyNotRetried(kind: failure.kind.rawValue, code: failure.code)
        let attemptsLeft = instance.record.failures < policy.maxAttempts
        guard notRetried == nil, attemptsLeft, !ending.isEnding || isCompensation else {
            // With attempts left, the summary says why this error ended the step anyway.
            return fail(instance, failure, notRetried: attemptsLeft ? notRetried : nil)
        }
        // The server's hint (Retry-After) wins over the computed delay.
        let delay = failure.retryAfter?.inSeconds
            ?? policy.delay(afterAttempt: instance.record.failures, unitRandom: options.random()).inSeconds
        instance.record.status = .waitingRetry
        instance.record.nextAttemptAt = now() + delay
        instance.record.errorKind = failure.kind.rawValue
        instance.record.errorCode = failure.code
        instance.record.errorMessage = failure.message
        batch.stepUpserts.append(instance.record)
        waitingRetry.insert(instance.id)
        emit(EventType.stepRetrying, step: instance.id,
             data: ["attempt": .int(Int64(instance.record.attempt)), "kind": .string(failure.kind.rawValue),
                    "code": failure.code.map(JSONValue.string) ?? .null, "reason": .string(failure.message),
                    "delay_ms": .int(Int64((delay * 1000).rounded())), "retry_after": .bool(failure.retryAfter != nil)])
    }

    /// Records a final failure; unless the step may fail (`continue_on_error`), the run fails.
    /// `notRetried` says why a step with attempts left was not tried again.
    func fail(_ instance: Instance, _ failure: StepFailure, notRetried: String? = nil) {
        // An expression's error may quote what it read (an item's element with a secret's value).
        var failure = failure
        failure.message = redactor.redact(failure.message)
        instance.record.status = .failed
        instance.record.finishedAt = now()
        instance.record.errorKind = failure.kind.rawValue
        instance.record.errorCode = failure.code
        instance.record.errorMessage = failure.message
        batch.stepUpserts.append(instance.record)
        removePartial(of: instance)
        let attempts = instance.record.attempt
        emit(EventType.stepFailed, step: instance.id,
             data: ["attempt": .int(Int64(attempts)), "kind": .string(failure.kind.rawValue),
                    "code": failure.code.map(JSONValue.string) ?? .null, "error": .string(failure.message),
                    "continue_on_error": .bool(instance.spec.continueOnError),
                    "not_retried": notRetried.map(JSONValue.string) ?? .null])
        if !instance.spec.continueOnError && instance.record.kind != .compensation {
            let tries = attempts == 1 ? "1 attempt" : "\(attempts) attempts"
            let why = notRetried.map { " (not retried: \($0))" } ?? ""
            beginEnding(.failed, reason: "step '\(instance.id)' failed after \(tries)\(why): \(failure.message)")
        }
        finished(instance)
    }

    func skip(_ instance: Instance, reason: String) {
        instance.record.status = .skipped
        instance.record.finishedAt = now()
        batch.stepUpserts.append(instance.record)
        emit(EventType.stepSkipped, step: instance.id, data: ["reason": .string(reason)])
        finished(instance)
    }

    /// Bookkeeping once an instance reached a final status.
    private func finished(_ instance: Instance) {
        switch instance.record.kind {
        case .step, .fanOut:
            declaredStepFinished(instance)
        case .item:
            guard let fan = fanOuts[instance.record.step] else { return }
            fan.finished += 1
            if fan.finished == fan.children.count { finishFanOut(fan) }
        case .compensation:
            break
        }
    }

    func finishFanOut(_ fan: FanOut) {
        let parent = fan.parent
        let failed = fan.children.filter { $0.record.status == .failed || $0.record.status == .cancelled }
        parent.record.outputs = .array(fan.children.map { $0.record.outputs ?? .null })
        parent.record.finishedAt = now()
        if failed.isEmpty {
            completionCounter += 1
            parent.record.status = .succeeded
            parent.record.completionSeq = completionCounter
            emit(EventType.stepSucceeded, step: parent.id, data: ["items": .int(Int64(fan.children.count))])
        } else {
            parent.record.status = .failed
            parent.record.errorMessage = "\(failed.count) of \(fan.children.count) items failed"
            emit(EventType.stepFailed, step: parent.id,
                 data: ["error": .string(parent.record.errorMessage!), "continue_on_error": .bool(parent.spec.continueOnError)])
        }
        batch.stepUpserts.append(parent.record)
        fanOuts.remove(parent.record.step)
        declaredStepFinished(parent)
    }

    /// The run will end `status`: nothing new starts and what runs is cancelled; compensations
    /// follow once every attempt has returned.
    func beginEnding(_ status: RunStatus, reason: String) {
        guard ending.begin(status, reason: reason) else { return }
        for (instanceID, attempt) in inFlight.byInstance {
            markCancelled(instanceID)
            attempt.invocation.cancel(.cancelled)
        }
        // Retries that were waiting will not happen.
        for id in waitingRetry {
            guard let instance = instances[id] else { continue }
            instance.record.status = .cancelled
            instance.record.finishedAt = now()
            batch.stepUpserts.append(instance.record)
        }
        waitingRetry.removeAll()
        for id in unreachable.releaseAll() {
            guard let instance = instances[id] else { continue }
            instance.record.status = .cancelled
            instance.record.finishedAt = now()
            batch.stepUpserts.append(instance.record)
        }
        blockedOnKeys.removeAll()
        readyToStart.removeAll()
    }

    // MARK: Network awareness

    /// The step's host does not answer: hold it (no attempt spent) and probe the host, for at
    /// most its `hold_timeout`.
    private func hold(_ instance: Instance, on endpoint: Endpoint, _ failure: StepFailure) {
        let current = now()
        let holdTimeout = instance.spec.holdTimeout.inSeconds
        instance.record.status = .held
        instance.record.errorKind = failure.kind.rawValue
        instance.record.errorCode = failure.code
        instance.record.errorMessage = failure.message
        instance.record.nextAttemptAt = nil
        batch.stepUpserts.append(instance.record)
        unreachable.hold(instance.id, on: endpoint, reason: failure.message, holdTimeout: holdTimeout, now: current)
        emit(EventType.stepHeld, step: instance.id,
             data: ["host": .string(endpoint.description), "reason": .string(failure.message),
                    "gives_up_at": .double(current + holdTimeout)])
    }

    func startDueProbes() {
        for endpoint in unreachable.startDueProbes(now: now()) { probeInBackground(endpoint) }
    }

    /// A probe's answer (`failure` nil: the host answered): release the endpoint's held steps,
    /// or probe again later (backoff up to 30 s).
    func probed(_ endpoint: Endpoint, failure: String?) {
        for id in unreachable.probed(endpoint, failure: failure, now: now()) {
            guard let instance = instances[id], instance.record.status == .held else { continue }
            instance.record.status = .waitingRetry
            instance.record.nextAttemptAt = now()
            batch.stepUpserts.append(instance.record)
            waitingRetry.insert(id)
            emit(EventType.stepReleased, step: id, data: ["host": .string(endpoint.description)])
        }
    }

    /// Held steps whose `hold_timeout` ran out fail (code `unreachable`, kind `timeout`: the
    /// engine's time limit ended them, not an attempt; they are not retried); those due say that
    /// they still wait: a `step.still_held` event, and the line as the step's error, which
    /// `status` and the run's detail show.
    func checkHeldSteps() {
        guard unreachable.heldCount > 0 else { return }
        let current = now()
        for gone in unreachable.expired(now: current) {
            guard let instance = instances[gone.instanceID], instance.record.status == .held else { continue }
            let message = "\(gone.endpoint) did not answer for \(instance.spec.holdTimeout.workflowText) "
                + "(hold_timeout); gave up: \(gone.reason)"
            fail(instance, StepFailure(kind: .timeout, code: "unreachable", message: message, retryAfter: nil))
        }
        for waiting in unreachable.dueReports(now: current) {
            guard let instance = instances[waiting.instanceID], instance.record.status == .held else { continue }
            instance.record.errorMessage = Self.stillHeldLine(waiting, now: current)
            batch.stepUpserts.append(instance.record)
            emit(EventType.stepStillHeld, step: waiting.instanceID,
                 data: ["host": .string(waiting.endpoint.description), "reason": .string(waiting.reason),
                        "next_probe_at": .double(max(waiting.nextProbe, current)), "held_since": .double(waiting.since),
                        "gives_up_at": .double(waiting.givesUpAt), "message": .string(instance.record.errorMessage!)])
        }
    }

    /// "still waiting for files.example:22: connection refused; next probe in 30 s; gives up at
    /// 2026-11-27T03:00:00Z".
    static func stillHeldLine(_ waiting: UnreachableHosts.Waiting, now: Double) -> String {
        let nextProbe = Int(max(waiting.nextProbe - now, 0).rounded(.up))
        return "still waiting for \(waiting.endpoint): \(waiting.reason); next probe in \(nextProbe) s; "
            + "gives up at \(utcTime(waiting.givesUpAt))"
    }

    /// `2026-11-27T03:00:00Z`: the hold's end as an operator reads it in a log or `status`.
    static func utcTime(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds.rounded()).ISO8601Format()
    }

    func beginInterrupt(leaving status: RunStatus) {
        interrupting = status
        for (_, attempt) in inFlight.byInstance { attempt.invocation.cancel(.shutdown) }
    }

    /// Every interrupted attempt has returned: journal where the run was left.
    func finishInterrupt() {
        if !ending.isEnding { run.status = interrupting ?? .queued }
        batch.runUpdates.append(run)
        emit(EventType.runInterrupted, step: nil, data: ["status": .string(run.status.rawValue)])
    }

    /// The engine's side of step timeouts. The invocation enforces `request.timeout` itself
    /// (StepInvocation's deadline timer; in the runner for isolated steps), so the cancel here
    /// is a backstop that costs nothing (cancel is idempotent); what only the engine can do is
    /// stop waiting for a plugin that ignores the cancellation, after `timeoutGrace`.
    func checkTimeouts() {
        let monotonicNow = MonotonicClock.nowSeconds()
        for (instanceID, attempt) in inFlight.byInstance {
            guard let deadline = attempt.deadline, monotonicNow >= deadline else { continue }
            if !attempt.timedOut {
                attempt.timedOut = true
                attempt.invocation.cancel(.timeout)
            } else if monotonicNow >= deadline + options.timeoutGrace {
                // The plugin ignores cancellation: stop waiting for it. (`isolation: process`
                // is the cure for such plugins.)
                attempt.deadline = nil
                abandon(instanceID, attempt, StepFailure(
                    kind: .timeout, code: "abandoned",
                    message: "the step did not stop within \(Int(options.timeoutGrace))s of being cancelled; abandoned",
                    retryAfter: nil))
            }
        }
    }

    // MARK: The end of the run

    func finishSucceeded() {
        var outputs: [String: JSONValue] = [:]
        let context = evaluationContext(item: nil, attempt: 1)
        for output in workflow.outputs {
            do {
                outputs[output.name] = try output.value.evaluate(in: context)
            } catch {
                ending.addReason("output '\(output.name)': \(error)")
            }
        }
        run.outputs = redactor.redact(.object(outputs))
        finish(ending.reasons.isEmpty ? .succeeded : .failed)
    }

    func finish(_ status: RunStatus) {
        closeAllSessions()
        if status != .succeeded {
            // Nothing resumes the steps of a cancelled or failed run: their partials go.
            for instance in instances.values where instance.record.status != .succeeded { removePartial(of: instance) }
        }
        run.status = status
        run.ending = nil
        run.finishedAt = now()
        run.error = ending.error
        batch.runUpdates.append(run)
        var data: [String: JSONValue] = [
            "status": .string(status.rawValue),
            "duration_ms": .int(Int64(((run.finishedAt! - (run.startedAt ?? run.createdAt)) * 1000).rounded())),
        ]
        if let error = run.error { data["error"] = .string(error) }
        if let outputs = run.outputs { data["outputs"] = outputs }
        emit(EventType.runFinished, step: nil, data: .object(data))
    }

    /// Removes the partial file the step's checkpoint names (see `PartialFiles`), saying so.
    private func removePartial(of instance: Instance) {
        guard instance.record.kind == .step,
              let path = PartialFiles.remove(runID: run.id, stepID: instance.id, store: store) else { return }
        emit(EventType.stepLog, step: instance.id,
             data: ["level": "info", "message": .string("removed the partial file \(path): nothing can resume it")])
    }

    private func durationMs(_ record: StepRecord) -> Int64 {
        Int64((((record.finishedAt ?? now()) - (record.startedAt ?? now())) * 1000).rounded())
    }
}
