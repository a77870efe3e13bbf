import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

// The scheduling loop's in-memory records: a step instance (`Instance`, `FanOut`), an attempt
// in flight and its completion (`Attempt`, `Completion`), and what an instance runs (`Runnable`).

/// One step instance as the scheduling loop sees it: the journaled record plus what it runs.
final class Instance {
    var record: StepRecord
    let spec: Runnable
    /// Its `if:` and `for_each` were evaluated (or it is an item or a compensation): it only
    /// waits for a slot.
    var materialized: Bool
    var blockedOnKeys = false
    /// Where its last attempt talked to (from its inputs), for holding it when that host is gone.
    var endpoint: Endpoint?
    /// An item's element (or its compensation's) when it holds a secret's value: the journal keeps
    /// it masked in `record.item`, `${{ item }}` binds this. Nil when the two are the same, and
    /// after a resume until `boundItem` evaluates the fan-out's list again.
    var element: JSONValue?

    init(record: StepRecord, spec: Runnable) {
        self.record = record
        self.spec = spec
        materialized = record.status != .pending || record.kind == .item || record.kind == .compensation
            || record.attempt > 0
    }

    var id: String { record.id }
}

/// The scheduling state of a `for_each` step: its items in order, those still to start, how many
/// run, how many are finished.
final class FanOut {
    let parent: Instance
    let children: [Instance]
    let maxParallel: Int?
    var queued: StartQueue<Instance>
    var running = 0
    var finished = 0

    init(parent: Instance, children: [Instance], maxParallel: Int?) {
        self.parent = parent
        self.children = children
        self.maxParallel = maxParallel
        queued = StartQueue(children.filter { $0.record.status == .pending })
        finished = children.filter { $0.record.status.isFinished }.count
    }

    var hasRoom: Bool { maxParallel.map { running < $0 } ?? true }
}

/// One attempt in flight.
final class Attempt: @unchecked Sendable {
    let token: Int
    /// The plugin call (it holds the attempt's `AttemptDelegate`).
    let invocation: any StepRunning
    let leaseHolder: String?
    var deadline: Double?
    var timedOut = false

    init(token: Int, invocation: any StepRunning, leaseHolder: String?, deadline: Double?) {
        self.token = token
        self.invocation = invocation
        self.leaseHolder = leaseHolder
        self.deadline = deadline
    }
}

/// An attempt's result, handed from its thread to the loop.
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
    /// nil: the engine's default.
    let isolation: StepIsolation?
    /// How long it may be held on a host that does not answer (`hold_timeout:`).
    let holdTimeout: Duration

    init(step: Step, workflow: Workflow) {
        isolation = step.isolation
        uses = step.uses
        with = step.with
        retry = step.retry
        timeout = step.timeout
        concurrency = workflow.concurrency + step.concurrency
        idempotencyKey = step.idempotencyKey
        continueOnError = step.continueOnError
        holdTimeout = step.holdTimeout
    }

    init(compensation: Compensation, of step: Step, workflow: Workflow) {
        uses = compensation.uses
        with = compensation.with
        retry = compensation.retry
        timeout = compensation.timeout
        concurrency = workflow.concurrency
        idempotencyKey = nil
        continueOnError = false
        isolation = step.isolation
        holdTimeout = compensation.holdTimeout
    }
}
