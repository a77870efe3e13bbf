// The rows of the durable journal, as plain values. The store reads and writes these; the
// engine decides what they mean.
import OrchestrateJSON

/// Where a run is in its life.
public enum RunStatus: String, Sendable, CaseIterable {
    /// Submitted, waiting for a worker (`orchestrate submit`).
    case queued
    /// A process owns it and is executing steps.
    case running
    /// Interrupted by `pause`: keeps its place and its slot in the queue until `unpause`.
    case paused
    /// A step failed or the run was cancelled; compensations are running. `RunRecord.ending`
    /// says whether it will end `failed` or `cancelled`.
    case compensating
    /// Stopped by the first Ctrl-C or a SIGTERM of the process that executed it: its steps were
    /// stopped and journaled to start again, nothing was undone. Continues with `resume`, is
    /// undone by `cancel`; no worker takes it by itself. (A `running` run whose owner died is
    /// shown as interrupted too, `RunDocument.effectiveStatus`.)
    case interrupted
    case succeeded
    case failed
    case cancelled

    public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
}

/// Where one step instance is in its life.
public enum StepStatus: String, Sendable, CaseIterable {
    case pending
    /// An attempt was started (journaled before the plugin was called).
    case running
    /// The last attempt failed; the next one is due at `nextAttemptAt`.
    case waitingRetry = "waiting_retry"
    /// Its host stopped answering (error code `unreachable`): held without spending attempts
    /// until a probe finds the host again.
    case held
    case succeeded
    case failed
    case skipped
    case cancelled
    /// Never started: the run failed or was cancelled before its turn came.
    case notRun = "not_run"

    public var isFinished: Bool {
        self == .succeeded || self == .failed || self == .skipped || self == .cancelled || self == .notRun
    }
}

/// What a step row stands for.
public enum StepKind: String, Sendable {
    /// A declared step (without `for_each`).
    case step
    /// A `for_each` step: its row holds the evaluated item list; its items are `item` rows.
    case fanOut = "fanout"
    /// One element of a `for_each` step, with id `step[index]`.
    case item
    /// The compensation of a finished step instance, with id `compensate:<instance>`.
    case compensation
}

/// The process that owns a run or a concurrency lease. A run whose owner is dead (same node,
/// no such process) or whose lease expired (any node) can be taken over; `isLive(leaseValid:)`
/// in NodeIdentity.swift is the one place that rule is written.
public struct OwnerIdentity: Sendable, Hashable {
    /// The node (`--node`, default the host name) the process runs on.
    public var node: String
    public var pid: Int32
    /// The process start time (clock ticks since boot, from /proc), so a recycled pid is not
    /// mistaken for the owner.
    public var startTime: Int64

    public init(node: String, pid: Int32, startTime: Int64) {
        self.node = node
        self.pid = pid
        self.startTime = startTime
    }
}

public struct RunRecord: Sendable {
    public var id: String
    public var workflowName: String
    public var workflowFile: String
    /// The workflow's YAML text, so `resume` does not depend on the file still being there.
    public var workflowSource: String
    /// The resolved inputs (never secrets: those are resolved from the environment each attempt).
    public var inputs: JSONValue
    public var status: RunStatus
    /// For `compensating` runs: the status the run ends with once compensations are done.
    public var ending: RunStatus?
    public var createdAt: Double
    public var startedAt: Double?
    public var finishedAt: Double?
    /// Where the run's files live: relative to the executing node's state directory
    /// (`runs/ID`), since every node has its own disk. Runs journaled before nodes existed hold
    /// an absolute path. See `localRunDirectory(stateDirectory:)`.
    public var runDir: String
    /// The named queue (`submit --queue`, default `default`): only a worker serving it runs it.
    public var queue: String = "default"
    public var priority: Int
    public var labels: [String: String]
    public var owner: OwnerIdentity?
    /// When the owner's lease ends, by the store's clock.
    public var leaseUntil: Double?
    /// Whether `owner` still holds the run, judged by the store when it read the record (see
    /// `OwnerIdentity.isLive`). False when there is no owner.
    public var ownerIsLive = false
    /// Set by `claimNextRuns` when it took the run from another owner (one that died or lost
    /// its lease): who that was.
    public var takenFrom: OwnerIdentity?
    public var error: String?
    public var outputs: JSONValue?
    /// Set by another process (`orchestrate cancel`) for the owner to act on.
    public var requestedControl: RunControl?
    /// Position in the queue (lower runs first, after priority).
    public var queueOrder: Double = 0
    /// `run-now` asked for it to start at once.
    public var runNow = false
    /// The run's bandwidth cap in bytes per second (`--max-rate`), across all its transfers.
    public var maxRate: Int64?
    /// The run's bandwidth timetable (`--max-rate "08:00,512K 23:00,off"`) as written, instead
    /// of `maxRate` when the cap changes with the time of day.
    public var maxRateTimetable: String?
    /// The workflow's own `retention:` in seconds (or `RetentionSettings.forever`), journaled
    /// when the run is created: it wins over the queue's and the store's period. Written only:
    /// the pruner's query reads the column, reads of the run do not.
    public var retention: Double?

    public init(id: String, workflowName: String, workflowFile: String, workflowSource: String, inputs: JSONValue,
                status: RunStatus, createdAt: Double, runDir: String, priority: Int = 0, labels: [String: String] = [:])
    {
        self.id = id
        self.workflowName = workflowName
        self.workflowFile = workflowFile
        self.workflowSource = workflowSource
        self.inputs = inputs
        self.status = status
        self.createdAt = createdAt
        self.runDir = runDir
        self.priority = priority
        self.labels = labels
        self.queueOrder = createdAt
    }

    /// The run directory on this node: `runs/ID` under `stateDirectory`, or `runDir` itself
    /// when it is an absolute `…/runs/ID`, as in runs journaled before nodes existed. Throws
    /// `RunID.Invalid` for an id that breaks the rule (a store written before ids were
    /// checked): no path made from an id leaves `runs/`.
    public func localRunDirectory(stateDirectory: String) throws(RunID.Invalid) -> String {
        try RunID.check(id, stored: true)
        let relative = Self.runDirectory(for: id)
        if runDir.hasPrefix("/"), runDir.hasSuffix("/" + relative), !runDir.split(separator: "/").contains("..") { return runDir }
        return stateDirectory + "/" + relative
    }

    /// The relative run directory of a new run, `runs/ID` (the id checked by whoever made it:
    /// `RunLauncher`, the scheduler).
    public static func runDirectory(for id: String) -> String { "runs/" + id }
}

public struct StepRecord: Sendable {
    public var runID: String
    /// The instance id: `upload`, `upload[3]` or `compensate:upload[3]`.
    public var id: String
    /// The declared step id in the workflow (`upload`).
    public var step: String
    public var kind: StepKind
    public var itemIndex: Int?
    /// For `item` rows the element; for `fanOut` rows the whole evaluated list.
    public var item: JSONValue?
    public var status: StepStatus
    /// Attempts started so far (the one running included).
    public var attempt: Int
    /// Attempts that ended in failure; the retry policy's `max_attempts` is checked against it,
    /// so an attempt cut short by a crash does not use up the budget.
    public var failures: Int
    public var nextAttemptAt: Double?
    public var idempotencyKey: String?
    public var outputs: JSONValue?
    public var errorKind: String?
    public var errorCode: String?
    public var errorMessage: String?
    public var startedAt: Double?
    public var finishedAt: Double?
    /// Position in the run's order of successful completions (for compensations in reverse).
    public var completionSeq: Int?
    /// The node that ran the latest attempt: a succeeded step whose results live in the run
    /// directory is run again when another node takes the run over.
    public var node: String?

    public init(runID: String, id: String, step: String, kind: StepKind, status: StepStatus = .pending) {
        self.runID = runID
        self.id = id
        self.step = step
        self.kind = kind
        self.status = status
        self.attempt = 0
        self.failures = 0
    }
}

/// One entry of a run's durable event stream (what `orchestrate events` prints).
public struct EventRecord: Sendable {
    public var seq: Int64
    public var runID: String?
    public var time: Double
    public var type: EventType
    public var step: String?
    public var data: JSONValue

    public init(seq: Int64 = 0, runID: String?, time: Double, type: EventType, step: String? = nil, data: JSONValue = [:]) {
        self.seq = seq
        self.runID = runID
        self.time = time
        self.type = type
        self.step = step
        self.data = data
    }

    /// The event as one JSON object, the format of `--json` output.
    public var json: JSONValue {
        var object: [String: JSONValue] = ["seq": .int(seq), "time": .double(time), "type": .string(type.rawValue)]
        if let runID { object["run"] = .string(runID) }
        if let step { object["step"] = .string(step) }
        if case .object(let extra) = data, !extra.isEmpty { object["data"] = data }
        return .object(object)
    }
}

/// An event as the store holds it, its data still the JSON text it was journaled as (the
/// stores write `data_json` only from `EventRecord.data.jsonText`: compact, keys sorted). An
/// event stream sends it on with `jsonBytes` without parsing the data only to write it again;
/// `record` parses it.
public struct StoredEvent: Sendable {
    public var seq: Int64
    public var runID: String?
    public var time: Double
    public var type: EventType
    public var step: String?
    public var dataText: String

    public init(seq: Int64, runID: String?, time: Double, type: EventType, step: String?, dataText: String) {
        self.seq = seq
        self.runID = runID
        self.time = time
        self.type = type
        self.step = step
        self.dataText = dataText
    }

    /// The event with its data parsed (an unreadable data text reads as no data).
    public var record: EventRecord {
        EventRecord(seq: seq, runID: runID, time: time, type: type, step: step,
                    data: (try? JSONValue(parsing: dataText)) ?? [:])
    }

    /// `record.json.jsonText` as UTF-8 bytes, with the data text copied in as it is.
    public var jsonBytes: [UInt8] {
        var object = JSONObjectText()  // keys in sorted order, as jsonText writes them
        if dataText.utf8.first == UInt8(ascii: "{") && dataText != "{}" { object.add("data", jsonText: dataText) }
        if let runID { object.add("run", .string(runID)) }
        object.add("seq", .int(seq))
        if let step { object.add("step", .string(step)) }
        object.add("time", .double(time))
        object.add("type", .string(type.rawValue))
        return object.finish()
    }
}

/// One item added to a long-lived step (e.g. a path for `sftp.accept-paths`).
public struct ItemRecord: Sendable {
    public enum Status: String, Sendable, CaseIterable { case queued, done, failed }
    public var runID: String
    public var stepID: String
    public var id: String
    public var seq: Int64
    public var json: String
    public var status: Status
    public var error: String?
    public var checkpoint: [UInt8]?
}

/// An item to add to a step's queue (`ItemStore.addItems`): its id, its value as JSON, and its
/// `item.added` event, journaled in the same transaction.
public struct NewItem: Sendable {
    public var id: String
    public var json: String
    public var event: EventRecord?

    public init(id: String, json: String, event: EventRecord?) {
        self.id = id
        self.json = json
        self.event = event
    }
}

/// Everything a run's detail shows (`status`, `GET /api/runs/{id}`), read by
/// `StateStore.runDetail` from one snapshot of the store.
public struct RunDetailRecord: Sendable {
    public var run: RunRecord
    public var steps: [StepRecord]
    /// The run's items in the window asked for (`ItemWindow`), by step then in the order they
    /// were added: a session may hold 100,000 of them, so a detail carries a page.
    public var items: [ItemRecord]
    /// The latest `step.progress` event of each step, in seq order (`latestProgress`).
    public var progress: [EventRecord]
    /// How many items each step holds in each state, all of them (not only the window's).
    public var itemCounts: [ItemCount]
    /// Where the next page starts, when items follow the window (a window from the start or a
    /// cursor); nil at the end, and for a window of the last items.
    public var itemsNext: ItemCursor?

    public init(run: RunRecord, steps: [StepRecord], items: [ItemRecord], progress: [EventRecord],
                itemCounts: [ItemCount] = [], itemsNext: ItemCursor? = nil)
    {
        self.run = run
        self.steps = steps
        self.items = items
        self.progress = progress
        self.itemCounts = itemCounts
        self.itemsNext = itemsNext
    }
}

/// Which of a run's items a detail carries, in their order (by step, then as added): up to
/// `limit` after `after` (from the start without it), or, with `last`, the last `limit`.
public struct ItemWindow: Sendable, Equatable {
    public var limit: Int
    public var after: ItemCursor?
    public var last: Bool

    /// The detail's page when none is asked for, and the most one may ask for.
    public static let defaultLimit = 100
    public static let maxLimit = 1000
    /// The first `defaultLimit` items.
    public static let first = ItemWindow(limit: defaultLimit)

    public init(limit: Int, after: ItemCursor? = nil, last: Bool = false) {
        self.limit = max(0, limit)
        self.after = after
        self.last = last
    }
}

/// A position in a run's items (step, then the order added): a page starts after it. Its
/// text, `SEQ:STEP`, is what the API and `status` hand out and take back.
public struct ItemCursor: Sendable, Hashable {
    public var stepID: String
    public var seq: Int64

    public init(stepID: String, seq: Int64) {
        self.stepID = stepID
        self.seq = seq
    }

    public init?(text: String) {
        // Split on the first ':' byte, not the first ':' Character: a combining mark or an emoji
        // modifier after the colon makes one Character of both, and the cursor would not parse.
        let bytes = text.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              let seqText = String(bytes[..<colon]), let seq = Int64(seqText), seq >= 0,
              let step = String(bytes[bytes.index(after: colon)...]), !step.isEmpty else { return nil }
        self.init(stepID: step, seq: seq)
    }

    public var text: String { "\(seq):\(stepID)" }
}

/// How many items of a step are in one state.
public struct ItemCount: Sendable, Equatable {
    public var stepID: String
    public var status: ItemRecord.Status
    public var count: Int

    public init(stepID: String, status: ItemRecord.Status, count: Int) {
        self.stepID = stepID
        self.status = status
        self.count = count
    }
}
