import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// The queue's control verbs, with the seed transfer queue's semantics, as one operation each
/// on the store. A run some live process executes gets a request it acts on within its poll
/// interval; a run nobody executes is changed in place.
///
/// | verb | running | queued, interrupted | paused |
/// |---|---|---|---|
/// | cancel | interrupt, compensate, end `cancelled` | `cancelled` (or compensate first if anything ran) | same as queued |
/// | stop | interrupt, back to the end of the queue | to the end of the queue | to the end of the queue |
/// | pause | interrupt, keep place and slot | queued: keep place, don't start | — |
/// | unpause | — | — | continue where it was |
/// | run-now | — | start now, pre-empting the newest running run | same |
///
/// (The CLI's `cancel` runs the compensations of an interrupted run itself, `CancelCommand`.)
///
/// `retry` re-queues a failed or cancelled run, resetting only what did not succeed (and what a
/// compensation undid); `close` ends a run's persistent sessions once their queued paths are
/// transferred; `delete` removes a finished run.
public struct QueueControl: Sendable {
    public enum Verb: String, CaseIterable, Sendable {
        case cancel, stop, pause, unpause, runNow = "run-now", retry, close, delete
    }

    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    let store: any StateStore
    /// This node's state directory, where `delete` removes the run's directory (other nodes'
    /// copies stay: they are on other disks).
    let stateDirectory: String

    public init(store: any StateStore, stateDirectory: String) {
        self.store = store
        self.stateDirectory = stateDirectory
    }

    /// Applies `verb` to run `id` and returns what happened, for people.
    public func apply(_ verb: Verb, to id: String) throws -> String {
        // An id that breaks the rule names no run, or one from a store written before ids
        // were checked: nothing is done to it (deleting `..` removed the state directory).
        guard RunID.isValid(id) else { throw Refusal(description: RunID.Invalid(id: id, stored: try store.run(id) != nil).description) }
        guard let run = try store.run(id) else { throw Refusal(description: "no run \(id)") }
        let live = run.ownerIsLive
        let now = Date().timeIntervalSince1970
        func event(_ type: EventType, _ data: JSONValue = [:]) throws {
            try store.appendEvents([EventRecord(runID: id, time: now, type: type,
                                                data: ["verb": .string(verb.rawValue), "data": data])])
        }
        switch verb {
        case .cancel:
            guard !run.status.isFinished else { throw Refusal(description: "run \(id) already finished (\(run.status.rawValue))") }
            if live || run.status == .paused {
                try store.requestControl(id, control: .cancel)
                try event(.queueChanged)
                return live ? "cancel requested for \(id)" : "cancel requested for \(id); it takes effect when a worker picks it up"
            }
            if try store.steps(ofRun: id).contains(where: { $0.status == .succeeded }) {
                // Something ran: its compensations must run, which takes an executor.
                try store.requestControl(id, control: .cancel)
                try store.updateQueueFields(id, status: .queued, queueOrder: nil, runNow: true)
                try event(.queueChanged)
                return "cancel requested for \(id); its compensations run when a worker or `resume` picks it up"
            }
            var cancelled = run
            cancelled.status = .cancelled
            cancelled.finishedAt = now
            cancelled.error = "cancelled before it started"
            var batch = JournalBatch()
            batch.runUpdates = [cancelled]
            batch.events = [EventRecord(runID: id, time: now, type: EventType.runFinished, data: ["status": "cancelled"])]
            try store.commit(batch)
            // Nothing resumes a cancelled run: the partial files of its interrupted steps go.
            for step in try store.steps(ofRun: id) where step.kind == .step {
                PartialFiles.remove(runID: id, stepID: step.id, store: store)
            }
            return "cancelled \(id)"
        case .stop:
            guard !run.status.isFinished else { throw Refusal(description: "run \(id) already finished (\(run.status.rawValue))") }
            try store.updateQueueFields(id, status: live && run.status != .paused ? nil : .queued, queueOrder: now, runNow: false)
            if live { try store.requestControl(id, control: run.status == .paused ? .unhold : .stop) }
            try event(.queueChanged)
            return "stopped \(id): back in the queue, behind the others"
        case .pause:
            guard run.status == .running || run.status == .queued else {
                throw Refusal(description: "run \(id) is \(run.status.rawValue); only a queued or running run can be paused")
            }
            if live { try store.requestControl(id, control: .pause) } else {
                try store.updateQueueFields(id, status: .paused, queueOrder: nil, runNow: nil)
            }
            try event(.queueChanged)
            return "paused \(id)"
        case .unpause:
            guard run.status == .paused else { throw Refusal(description: "run \(id) is not paused (\(run.status.rawValue))") }
            if live { try store.requestControl(id, control: .unpause) } else {
                try store.updateQueueFields(id, status: .queued, queueOrder: nil, runNow: nil)
            }
            try event(.queueChanged)
            return "unpaused \(id)"
        case .runNow:
            if run.status == .running || run.status == .compensating {
                throw Refusal(description: "run \(id) is already \(run.status.rawValue)")
            }
            if run.status == .failed || run.status == .cancelled { try resetForRetry(run) }
            if live { try store.requestControl(id, control: .unhold) }
            try store.updateQueueFields(id, status: .queued, queueOrder: -now, runNow: true)
            try event(.queueChanged)
            return "\(id) starts now"
        case .retry:
            guard run.status == .failed || run.status == .cancelled else {
                let status = RunDocument.effectiveStatus(run)
                let hint = status == "interrupted" ? "; continue it with `orchestrate resume \(id)`" : ""
                throw Refusal(description: "only a failed or cancelled run can be retried; \(id) is \(status)\(hint)")
            }
            try resetForRetry(run)
            try event(.queueChanged)
            return "\(id) queued again; only what did not succeed runs"
        case .close:
            guard !run.status.isFinished else { throw Refusal(description: "run \(id) already finished (\(run.status.rawValue))") }
            try store.requestControl(id, control: .close)
            return "close requested for \(id)"
        case .delete:
            guard run.status.isFinished else {
                throw Refusal(description: "run \(id) is \(run.status.rawValue); cancel it first, then delete it")
            }
            try store.deleteRun(id)
            if let directory = try? run.localRunDirectory(stateDirectory: stateDirectory) {
                try? FileManager.default.removeItem(atPath: directory)
            }
            return "deleted \(id)"
        }
    }

    /// Steps that failed, were cancelled or did not run, and steps whose effect a compensation undid, go back
    /// to pending; the run is queued again.
    private func resetForRetry(_ run: RunRecord) throws {
        let steps = try store.steps(ofRun: run.id)
        let undone = Set(steps.filter { $0.kind == .compensation && $0.status == .succeeded }
            .map { String($0.id.dropFirst("compensate:".count)) })
        var batch = JournalBatch()
        for var step in steps {
            if step.kind == .compensation {
                batch.deletedSteps.append((run.id, step.id))
                continue
            }
            let redo = [.failed, .cancelled, .notRun].contains(step.status) || undone.contains(step.id)
            guard redo else { continue }
            step.status = step.kind == .fanOut ? .running : .pending
            step.failures = 0
            step.errorKind = nil
            step.errorCode = nil
            step.errorMessage = nil
            step.nextAttemptAt = nil
            step.finishedAt = nil
            step.completionSeq = nil
            step.outputs = nil
            batch.stepUpserts.append(step)
        }
        var queued = run
        queued.status = .queued
        queued.ending = nil
        queued.finishedAt = nil
        queued.error = nil
        queued.outputs = nil
        batch.runUpdates = [queued]
        try store.commit(batch)
        try store.requestControl(run.id, control: nil)
    }
}
