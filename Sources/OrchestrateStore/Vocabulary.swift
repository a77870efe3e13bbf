// The words every layer shares with the store: event types and control verbs. Typed, so a
// misspelt verb or event type is a compile error instead of a string nobody acts on.
import Foundation

/// The type of a journaled event (what `--json`, `events` and the API print as `type`).
/// Stable: scripts read them. A struct rather than an enum so that a store written by a newer
/// version (with types this one does not know) still reads.
public struct EventType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    // A run's life.
    public static let runAdded = EventType(rawValue: "run.added")
    public static let runStarted = EventType(rawValue: "run.started")
    public static let runResumed = EventType(rawValue: "run.resumed")
    public static let runFinished = EventType(rawValue: "run.finished")
    public static let runCompensating = EventType(rawValue: "run.compensating")
    public static let runInterrupted = EventType(rawValue: "run.interrupted")
    /// A run moved to this node from another one (its owner died or was fenced).
    public static let runTakenOver = EventType(rawValue: "run.taken_over")
    /// A run and everything journaled about it was deleted (`orchestrate delete`): data `run`.
    /// Not the run's own event (`run_id` is null: its events are gone). The one SQLite
    /// migration v10 may write, to keep the highest seq of runs deleted before it, has data `{}`:
    /// which run it was is no longer known.
    public static let runDeleted = EventType(rawValue: "run.deleted")
    /// Finished runs past their retention were removed with everything journaled about them
    /// (`orchestrate prune`, or `serve`'s pruner): data `runs` (their ids) and `through` (the
    /// highest seq removed). Not a run's own event (`run_id` is null); journaled above the events
    /// it removed, so a follower that resumes before them reads it and learns what is gone.
    public static let runsPruned = EventType(rawValue: "runs.pruned")
    // Steps.
    public static let stepStarted = EventType(rawValue: "step.started")
    public static let stepRetrying = EventType(rawValue: "step.retrying")
    public static let stepSucceeded = EventType(rawValue: "step.succeeded")
    public static let stepFailed = EventType(rawValue: "step.failed")
    public static let stepSkipped = EventType(rawValue: "step.skipped")
    public static let stepCancelled = EventType(rawValue: "step.cancelled")
    public static let stepInterrupted = EventType(rawValue: "step.interrupted")
    public static let stepWaiting = EventType(rawValue: "step.waiting")
    public static let stepHeld = EventType(rawValue: "step.held")
    public static let stepReleased = EventType(rawValue: "step.released")
    /// A held step still waits for its host (every `ORCHESTRATE_HOLD_REPORT_SECONDS`, default a
    /// minute): data `host`, `reason`, `next_probe_at`, `held_since`, `gives_up_at`.
    public static let stepStillHeld = EventType(rawValue: "step.still_held")
    public static let stepProgress = EventType(rawValue: "step.progress")
    public static let stepLog = EventType(rawValue: "step.log")
    /// A succeeded step whose results lived on another node's disk runs again here.
    public static let stepRedone = EventType(rawValue: "step.redone")
    // Sessions, hooks and items of long-lived steps.
    public static let sessionReopening = EventType(rawValue: "session.reopening")
    public static let sessionClosed = EventType(rawValue: "session.closed")
    public static let hookSucceeded = EventType(rawValue: "hook.succeeded")
    public static let hookFailed = EventType(rawValue: "hook.failed")
    public static let itemAdded = EventType(rawValue: "item.added")
    public static let itemStarted = EventType(rawValue: "item.started")
    public static let itemProgress = EventType(rawValue: "item.progress")
    public static let itemFinished = EventType(rawValue: "item.finished")
    /// An item failed retryably and is handed out again after `delay_ms` (the step's `retry:`).
    public static let itemRetrying = EventType(rawValue: "item.retrying")
    /// An item failed because its host does not answer: held (no attempt spent) until it does,
    /// at most the step's `hold_timeout`.
    public static let itemHeld = EventType(rawValue: "item.held")
    public static let itemReleased = EventType(rawValue: "item.released")
    // Watch folders (`on.watch`), journaled with the run they concern.
    /// A settled file became work (a run, or an item of a persistent session).
    public static let watchHandedOver = EventType(rawValue: "watch.handed_over")
    /// A handed-over file's work ended: `after:` was applied (succeeded), or it was left (failed).
    public static let watchFinished = EventType(rawValue: "watch.finished")
    // The queue and its workers (run id nil, except `queue.changed`).
    public static let queueChanged = EventType(rawValue: "queue.changed")
    public static let queuePreempted = EventType(rawValue: "queue.preempted")
    public static let workerStarted = EventType(rawValue: "worker.started")
    public static let workerStopped = EventType(rawValue: "worker.stopped")
    // Schedules (run id nil): a due time with no run, and why. A started one is the run's
    // `run.added`, whose data names the schedule and the due time.
    /// `overlap: skip` and the previous run still going.
    public static let scheduleSkipped = EventType(rawValue: "schedule.skipped")
    /// Older than the entry's `catchup` when a `serve` got to it (data: first and last, count).
    public static let scheduleMissed = EventType(rawValue: "schedule.missed")
    /// A `serve` applied a new bandwidth cap to what it runs (`queue rate`, or its own
    /// `--max-rate` again once `queue rate reset` removed the store's).
    public static let queueRateChanged = EventType(rawValue: "queue.rate_changed")
}

/// What another process asks the owner of a run to do (`orchestrate cancel|stop|pause|close`),
/// left in the store and picked up by the owner's heartbeat or worker.
public enum RunControl: String, Sendable, CaseIterable {
    /// Interrupt, compensate, end `cancelled`.
    case cancel
    /// Interrupt and put back in the queue.
    case stop
    /// Interrupt, keep the place and the slot.
    case pause
    /// Continue a paused run the worker holds.
    case unpause
    /// Let go of a held paused run (it was stopped or is to run now elsewhere).
    case unhold
    /// Persistent sessions finish what was added, then end.
    case close
}

/// Names of queues (`submit --queue`, `serve --queue`): letters, digits, `.`, `_`, `-`, at most
/// 64, so they read well in `list`, URLs and metrics labels. Not dots alone: `.` and `..` are
/// path segments a URL client folds away (`/api/queues/../stop` is sent as `/api/stop`).
public enum QueueName {
    public static let rule = "a queue name is 1 to 64 letters, digits, '.', '_' or '-', not dots alone"

    public static func isValid(_ name: String) -> Bool {
        PathSafeName.isValid(name, maximumLength: 64)
    }

    /// A named queue made passive on its own is a `queue_state` row keyed by this and its name
    /// (the store-wide switch is the row `passive`).
    static let passiveKeyPrefix = "passive:"
}
