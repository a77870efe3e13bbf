import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore
import OrchestrateTokenBucket

/// Submitting runs to the queue: the one use case behind `orchestrate submit`,
/// `POST /api/runs`. The front end loads the workflow and
/// resolves each run's inputs (a bad one is its error, before anything is queued); this queues
/// them, all in one transaction, and settles what an id that exists already means.
///
/// ```swift
/// var submission = RunSubmission(store: store)
/// submission.queue = "uploads"
/// let queued = try submission.submit(workflow, inputs: [inputs])
/// let outcome = try submission.submit(workflow, inputs: inputs, id: "nightly-42", existing: .refuse)
/// ```
public struct RunSubmission: Sendable {
    public let store: any StateStore
    public var labels: [String: String] = [:]
    public var priority = 0
    public var queue = "default"
    public var maxRate: RateTimetable?

    public init(store: any StateStore) {
        self.store = store
    }

    /// What a request naming an id that exists wants.
    public enum ExistingRun: Sendable {
        /// The id must be new (the HTTP API: a 409 otherwise).
        case refuse
        /// Continue the job the id names (`submit --id`: `RunIdentity`); `rerun` replaces a
        /// finished run of that id, whose run directory is under `stateDirectory`.
        case continueJob(rerun: Bool, stateDirectory: String)
    }

    public enum Outcome: Sendable {
        /// Queued as a new run; `replaced` is the status of the finished run of that id it replaced.
        case queued(RunRecord, replaced: RunStatus?)
        /// The unfinished run of that id, which no process executes, is queued to continue
        /// (`requeued` false: it was queued already, and is not queued twice).
        case continuing(RunRecord, requeued: Bool)
        /// A live process executes the run of that id: nothing is queued.
        case executing(RunRecord, owner: OwnerIdentity)
        /// The job of that id is done or waits for a person (succeeded, failed, cancelled, paused).
        case settled(RunRecord)
        /// The id names another job (`continueJob`), or exists at all (`refuse`).
        case taken(RunRecord)
    }

    /// Queues one run per element of `inputs` (already resolved), under generated ids, in one
    /// transaction: a thousand runs cost one commit, and a failure queues none.
    public func submit(_ workflow: Workflow, inputs: [JSONValue]) throws -> [RunRecord] {
        try RunLauncher(store: store).createAll(workflow, inputs: inputs, labels: labels, priority: priority,
                                                maxRate: maxRate, queue: queue)
    }

    /// Queues run `id` of `workflow` with `inputs`, or says what became of the run of that id.
    public func submit(_ workflow: Workflow, inputs: JSONValue, id: String, existing: ExistingRun) throws -> Outcome {
        var replaced: RunStatus?
        switch existing {
        case .refuse:
            if let run = try store.run(id) { return .taken(run) }
        case .continueJob(let rerun, let stateDirectory):
            switch try RunIdentity.decide(id: id, workflow: workflow, inputs: inputs, rerun: rerun, store: store,
                                          stateDirectory: stateDirectory) {
            case .create(let status): replaced = status
            case .resume(let run):
                // Back in the queue if nobody will take it as it is; a worker continues it.
                let requeue = run.status == .interrupted || run.status == .running
                if requeue { try store.updateQueueFields(id, status: .queued, queueOrder: nil, runNow: nil) }
                return .continuing(run, requeued: requeue)
            case .executing(let run, let owner): return .executing(run, owner: owner)
            case .settled(let run): return .settled(run)
            case .otherJob(let run): return .taken(run)
            }
        }
        let run = try RunLauncher(store: store).create(workflow, inputs: inputs, status: .queued, id: id, labels: labels,
                                                       priority: priority, maxRate: maxRate, queue: queue)
        return .queued(run, replaced: replaced)
    }
}
