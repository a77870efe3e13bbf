// A registered schedule entry as the store keeps it (`orchestrate schedule add`): the workflow
// it starts, when, and how far it has got. The engine's scheduler decides what it means.
import OrchestrateJSON

/// One entry of a registered workflow's `on.schedule`. A workflow with three entries is
/// registered as three records sharing a `name`.
public struct ScheduleRecord: Sendable, Equatable {
    /// The registration's name (`schedule add --name`, default the workflow's name).
    public var name: String
    /// The entry's position in `on.schedule`, from 1.
    public var entry: Int
    public var workflowName: String
    public var workflowFile: String
    /// The workflow's text at registration: runs are created from it, not from the file.
    public var workflowSource: String
    public var cron: String
    /// An IANA zone name, fixed at registration (the workflow's `timezone:`, else the
    /// registering process's zone), so every node computes the same times.
    public var timeZone: String
    /// The runs' inputs, resolved and checked at registration.
    public var inputs: JSONValue
    /// `skip` or `queue` (the model's `ScheduleOverlap`).
    public var overlap: String
    /// `catchup:` in seconds; nil: times missed while no `serve` ran are not started.
    public var catchup: Double?
    /// The queue its runs go to, and their priority.
    public var queue: String = "default"
    public var priority: Int = 0
    public var paused = false
    /// The latest due time dealt with (a run started, or skipped or missed and journaled), in
    /// seconds since 1970; the registration time for a new entry. The next due time is the
    /// cron's first after it. `advanceSchedule` moves it, exactly once per due time.
    public var lastDue: Int64
    /// The run its latest start created (for `overlap`).
    public var lastRunID: String?
    public var createdAt: Double

    public init(name: String, entry: Int, workflowName: String, workflowFile: String, workflowSource: String, cron: String,
                timeZone: String, inputs: JSONValue, overlap: String, catchup: Double?, lastDue: Int64, createdAt: Double)
    {
        self.name = name
        self.entry = entry
        self.workflowName = workflowName
        self.workflowFile = workflowFile
        self.workflowSource = workflowSource
        self.cron = cron
        self.timeZone = timeZone
        self.inputs = inputs
        self.overlap = overlap
        self.catchup = catchup
        self.lastDue = lastDue
        self.createdAt = createdAt
    }
}
