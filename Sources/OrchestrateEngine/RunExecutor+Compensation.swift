import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// The saga half of a run: when it fails or is cancelled, the `compensate` steps of the step
/// instances that succeeded run one at a time, in reverse order of completion, each with its
/// own retries. Journaled like any step, so a resumed run continues its compensations.
extension RunExecutor {
    /// Marks the run compensating (once) and makes sure every compensation instance exists.
    func enterCompensation() {
        if run.status != .compensating {
            run.status = .compensating
            run.ending = ending.status
            run.error = ending.reasons.joined(separator: "; ")
            batch.runUpdates.append(run)
        }
        let order = compensationOrder()
        for id in order where instances[id] == nil {
            let original = instances[String(id.dropFirst("compensate:".count))]!
            guard let step = workflow.step(original.record.step), let compensation = step.compensate else { continue }
            var record = StepRecord(runID: run.id, id: id, step: step.id, kind: .compensation)
            record.item = original.record.kind == .item ? original.record.item : nil
            record.itemIndex = original.record.itemIndex
            let compensating = Instance(record: record, spec: Runnable(compensation: compensation, of: step, workflow: workflow))
            compensating.element = original.element
            instances[id] = compensating
            batch.stepUpserts.append(record)
        }
        if !order.isEmpty && !order.allSatisfy({ instances[$0]?.record.status.isFinished ?? false }) {
            emit(EventType.runCompensating, step: nil, data: ["steps": .array(order.map { .string($0) })])
        }
    }

    /// Compensation instance ids, the most recently completed step's first.
    func compensationOrder() -> [String] {
        instances.values
            .filter { ($0.record.kind == .step || $0.record.kind == .item) && $0.record.status == .succeeded
                && workflow.step($0.record.step)?.compensate != nil }
            .sorted { ($0.record.completionSeq ?? 0) > ($1.record.completionSeq ?? 0) }
            .map { "compensate:" + $0.record.id }
    }

    /// Starts the next compensation if none is running. Returns false once all are finished.
    func scheduleNextCompensation() -> Bool {
        blockedOnKeys.removeAll()
        for id in compensationOrder() {
            guard let instance = instances[id] else { continue }
            switch instance.record.status {
            case .succeeded, .failed, .skipped, .cancelled, .notRun:
                continue
            case .running, .held:  // (a compensation is never held: holds need a run that is not ending)
                return true
            case .waitingRetry:
                if (instance.record.nextAttemptAt ?? 0) <= now() { start(instance) }
                return true
            case .pending:
                start(instance)
                return true
            }
        }
        return false
    }

    /// Ends a failed or cancelled run once its compensations are done. Steps still pending never
    /// started (`not_run`); any other unfinished one was stopped on its way (`cancelled`).
    func finishEnding() {
        for instance in instances.values where !instance.record.status.isFinished {
            instance.record.status = instance.record.status == .pending ? .notRun : .cancelled
            instance.record.finishedAt = now()
            batch.stepUpserts.append(instance.record)
        }
        let failedCompensations = instances.values.filter { $0.record.kind == .compensation && $0.record.status == .failed }
        for instance in failedCompensations.sorted(by: { $0.record.id < $1.record.id }) {
            ending.addReason("\(instance.record.id) failed: \(instance.record.errorMessage ?? "unknown error")")
        }
        finish(ending.status ?? .failed)
    }
}
