// `on:`: what starts runs of a workflow without anyone typing `submit` (docs/design.md, "Schedules,
// watch folders, bandwidth timetables"). `serve` acts on them: schedules once the workflow is
// registered (`orchestrate schedule add`), watch folders given with `serve --watch FILE`.
import Foundation
import OrchestrateJSON

/// The workflow's `on:` block. Each kind of trigger is a field of its own.
public struct WorkflowTriggers: Sendable {
    /// `on.schedule`, in file order.
    public var schedules: [ScheduleTrigger] = []
    /// `on.watch`: a hot folder whose settled files become work (WatchTrigger.swift).
    public var watch: WatchTrigger?

    public init() {}

    public var isEmpty: Bool { schedules.isEmpty && watch == nil }
}

/// One entry of `on.schedule`:
///
/// ```yaml
/// on:
///   schedule:
///     - cron: "0 2 * * *"
///       timezone: Europe/Berlin
///       inputs: { source: /media/nightly }
///       overlap: skip        # or queue
///       catchup: 6h          # start times missed up to 6 hours ago when serve comes back
/// ```
public struct ScheduleTrigger: Sendable {
    public let cron: CronExpression
    /// The IANA zone written in `timezone:`; nil means the zone of whoever registers the
    /// workflow (`TZ`, else the local zone), fixed at registration so every node agrees.
    public let timeZone: TimeZone?
    /// Input values of the runs it starts, already checked against the workflow's inputs.
    public let inputs: [String: JSONValue]
    public let overlap: ScheduleOverlap
    /// How far back times missed while no `serve` ran are still started; nil: none are.
    public let catchup: Duration?
    /// The entry in the file.
    public let location: SourceLocation
}

/// What a due time does while the schedule's previous run is still going.
public enum ScheduleOverlap: String, Sendable, CaseIterable {
    /// No run for that time (journaled as `schedule.skipped`). The default: two copies of one
    /// transfer racing for the same bandwidth and the same destination help nobody.
    case skip
    /// The run for that time starts as soon as the previous one has ended: every time gets its
    /// run, one after the other.
    case queue
}
