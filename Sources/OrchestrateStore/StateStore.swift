import OrchestrateJSON

/// A set of journal writes committed in one transaction: the engine gathers every transition of
/// a scheduling round (steps finished, steps started, events) and commits them together before
/// acting on any of them. One commit per round is what makes the engine fast.
public struct JournalBatch: Sendable {
    public var runUpdates: [RunRecord] = []
    public var stepUpserts: [StepRecord] = []
    public var events: [EventRecord] = []
    public var releasedLeases: [String] = []  // holders whose concurrency leases end
    public var deletedSteps: [(runID: String, id: String)] = []  // e.g. compensations undone by `retry`
    /// When set, the batch commits only if this process still holds the run (see
    /// `StateStore.commit`); otherwise commit throws `StoreError.ownershipLost` and writes
    /// nothing. An executor whose lease expired and whose run another process took over can
    /// then never write over the new owner's journal.
    public var fence: (runID: String, owner: OwnerIdentity)?
    /// When set (with `fence`), the fence's owner gives the run up once the batch is written, in
    /// the same transaction, as `releaseRun` would: a finished run's last commit and its release
    /// cost one transaction, not two. The executor's own last batch sets it.
    public var releasesRun = false

    public init() {}

    public var isEmpty: Bool {
        runUpdates.isEmpty && stepUpserts.isEmpty && events.isEmpty && releasedLeases.isEmpty && deletedSteps.isEmpty
            && !releasesRun
    }
}

/// Filters for `listRuns`; every field given must match.
public struct RunFilter: Sendable {
    public var statuses: Set<RunStatus>?
    public var labels: [String: String]
    public var queues: Set<String>?
    /// Only runs `run-now` asked to start at once (a worker at its limit looks for them every
    /// round: this keeps that look from reading the whole queue).
    public var runNowOnly = false
    /// Only runs of the workflow of this name.
    public var workflow: String?
    /// Only runs whose id starts with one of these.
    public var idPrefixes: [String] = []
    /// Only runs where this text (lower case) is part of the id, the workflow's name or file, or
    /// a label's key or value, compared in lower case.
    public var text: String?
    /// At most this many runs: the newest ones, still returned oldest first. The store reads
    /// only those (newest first, through an index by creation), however many runs it holds.
    public var limit: Int?

    public init(statuses: Set<RunStatus>? = nil, labels: [String: String] = [:], queues: Set<String>? = nil,
                workflow: String? = nil, limit: Int? = nil)
    {
        self.statuses = statuses
        self.labels = labels
        self.queues = queues
        self.workflow = workflow
        self.limit = limit
    }
}

/// The durable journal behind every run: one interface, two implementations. It is made of
/// role protocols (`RunStore`, `JournalStore`, `QueueStore`, ... below), each one job of the
/// store; a caller that needs one role may ask for that role alone.
/// `SQLiteStateStore` (one machine, the default) and `PostgresStateStore` (several machines
/// sharing one queue). `StoreLocation` opens either from `--store URL`.
///
/// ```swift
/// let store = try StoreLocation.parse("postgresql://orc@db/orchestrate").open()
/// try store.createRun(run, events: [EventRecord(runID: run.id, time: try store.now(), type: .runAdded)])
/// let mine = try store.claimNextRuns(owner: .current, queues: ["default"], limit: 4, lease: 15)
/// ```
///
/// What every implementation guarantees, and every caller may rely on:
///
/// - **Synchronous and thread-safe.** Every method may be called from any thread and is durable
///   when it returns (to the store's configured level: SQLite `synchronous`, PostgreSQL
///   `synchronous_commit`). A method that throws wrote nothing.
/// - **One clock.** Leases, heartbeats and liveness are judged by the store's clock (the
///   database server's, for PostgreSQL), never by the caller's: callers pass durations
///   (`lease:` in seconds from now), and `now()` reads that clock. Event and record times the
///   caller fills in (`EventRecord.time`, `startedAt`…) are for people, not for decisions.
/// - **Nodes.** An `OwnerIdentity` names a node and a process on it. An owner on the calling
///   process's node is judged by its pid; an owner on another node by its lease
///   (`OwnerIdentity.isLive`). `RunRecord.ownerIsLive` is that verdict, made by the store.
/// - **Event order.** Events get increasing `seq` numbers, and become visible in `seq` order:
///   once a reader has seen event N it will never later see a new event with a seq below N. So
///   `events(afterSeq:)` with the last seq seen misses nothing (SQLite: its single writer;
///   PostgreSQL: event appends are serialized until commit). A seq is never handed out twice,
///   not even after the run holding the newest events is deleted (`deleteRun` journals an event).
/// - **Vocabulary.** Statuses, event types and control verbs are the typed values of
///   Records.swift and Vocabulary.swift, stored as their raw strings.
public protocol StateStore:
    RunStore,
    JournalStore,
    CheckpointStore,
    ConcurrencyLimitStore,
    EventStore,
    QueueStore,
    RetentionStore,
    ItemStore,
    ScheduleStore,
    WatchStore {}

/// Runs: creating, reading, owning and deleting them. A role of `StateStore`.
public protocol RunStore: AnyObject, Sendable {
    /// The store's clock, in seconds since 1970.
    func now() throws -> Double

    /// True when another node may take a run over once its owner's lease runs out (a store
    /// shared between machines). An owner that could not renew its lease in time must then
    /// stop acting on the run by itself: another node may be executing it already.
    var fencesByLease: Bool { get }

    /// Journals new runs (`RunRecord.owner` is ignored: a new run has none) with their first
    /// events, all in one transaction (`submit --batch` queues a thousand runs with one commit).
    /// Throws, creating none, if a run with one of the ids exists. Wakes idle workers.
    func createRuns(_ runs: [(run: RunRecord, events: [EventRecord])]) throws
    /// The run, or nil. `ownerIsLive` is judged now.
    func run(_ id: String) throws -> RunRecord?
    /// The runs matching `filter`, oldest first.
    func listRuns(_ filter: RunFilter) throws -> [RunRecord]
    /// The run with its steps, the window of its items, how many items each step holds in
    /// each state, and the latest progress of each step, or nil: what `run`, `steps(ofRun:)`,
    /// a page of `items(runID:)` and `latestProgress` return, read together from one snapshot
    /// (so the parts agree) and in one trip to the store. A run's detail is the HTTP API's most
    /// frequent read (a dashboard polls it), and four trips cost four hand-overs to a reader
    /// connection (bench/api). A window, not every item: a session may hold 100,000.
    func runDetail(_ id: String, items: ItemWindow) throws -> RunDetailRecord?

    /// Makes `owner` the owner of run `id` for `lease` seconds, unless another live owner holds
    /// it. Returns false if one does (or there is no such run).
    func claimRun(_ id: String, owner: OwnerIdentity, lease: Double) throws -> Bool
    /// Extends `owner`'s lease by `lease` seconds from now and returns the control verb another
    /// process asked for, if any. `owned` is false when the run is no longer `owner`'s, or,
    /// on a store shared between nodes, when its lease had already run out: the caller must
    /// stop acting on the run (it is fenced).
    func renewLease(_ id: String, owner: OwnerIdentity, lease: Double) throws -> (owned: Bool, control: RunControl?)
    /// Gives the run up (no owner), with the concurrency leases `owner` held for it. Does
    /// nothing if `owner` does not own it.
    func releaseRun(_ id: String, owner: OwnerIdentity) throws
    /// Leaves `control` for the run's owner (nil clears it). Wakes idle workers.
    func requestControl(_ id: String, control: RunControl?) throws
}

/// The journal of a run: batches of records and events, committed whole. A role of `StateStore`.
public protocol JournalStore: AnyObject, Sendable {
    /// Commits `batch` in one transaction. With a `fence`, the batch commits only if
    /// `fence.owner` owns the run and, on a store shared between nodes, its lease has not run
    /// out by the store's clock; otherwise it throws `StoreError.ownershipLost` and writes
    /// nothing. With `releasesRun`, the run is then released in the same transaction.
    func commit(_ batch: JournalBatch) throws
    /// Makes every commit so far survive a power cut, whatever the store's sync level: the
    /// barrier before an action that cannot be undone and must not outlive the record of why it
    /// was done (a watch's `after:` deleting or moving the file of a run that succeeded: were
    /// the run's end rolled back, its steps would run again on a file no longer there). SQLite
    /// fsyncs its WAL, once for every commit made before the call (at FULL too: another process
    /// sharing the store may commit at NORMAL); PostgreSQL's commits are on the server's disk
    /// when they return (`synchronous_commit`).
    func syncJournal() throws
    /// The run's steps, in no particular order; a fan-out's items that have not started (no row
    /// of their own yet) are listed as pending (`UnstartedItems`), here and in `runDetail`.
    func steps(ofRun runID: String) throws -> [StepRecord]
}

/// Checkpoints of steps (never secrets: the engine does not redact them). A role of `StateStore`.
public protocol CheckpointStore: AnyObject, Sendable {
    /// Saves a step's checkpoint. With `fence`, only while that owner holds the run, as for
    /// `commit` (an attempt still running on a fenced node must not overwrite the new owner's
    /// checkpoint); otherwise throws `StoreError.ownershipLost`.
    func saveCheckpoint(runID: String, stepID: String, data: [UInt8], fence: OwnerIdentity?) throws
    func checkpoint(runID: String, stepID: String) throws -> [UInt8]?
}

/// Keyed concurrency limits, shared by every process using the store. A role of `StateStore`.
public protocol ConcurrencyLimitStore: AnyObject, Sendable {
    /// Atomically takes one slot of each `(key, limit)` for `holder` for `lease` seconds, or
    /// none if any key is full. Slots of owners that are not live do not count (and are freed).
    /// Returns whether it took them.
    func tryAcquireLeases(_ keys: [(key: String, limit: Int)], holder: String, owner: OwnerIdentity,
                          lease: Double) throws -> Bool
    /// Extends every slot held by `owner` to `lease` seconds from now (with the run's heartbeat).
    func renewLeases(owner: OwnerIdentity, lease: Double) throws
}

/// Events: appended, read in seq order, and the latest progress of steps. A role of `StateStore`.
public protocol EventStore: AnyObject, Sendable {
    func appendEvents(_ events: [EventRecord]) throws
    /// Up to `limit` events with a seq above `afterSeq`, in seq order; of one run, or of all
    /// runs and the queue when `runID` is nil, with their data as the JSON text journaled (for
    /// sending on unparsed; `events` parses it). See "Event order" above.
    func storedEvents(runID: String?, afterSeq: Int64, limit: Int) throws -> [StoredEvent]
    /// `storedEvents` of run `runID` without its events about one file (`StoredEvent.isFileEvent`)
    /// whose seq is at most `filesThrough` (0: none left out). Left out in the store, read
    /// along the run's (run_id, seq) index: a run page opened on a session of 100,000 files
    /// gets its few hundred other events, not the 600,000 about files.
    func storedEvents(runID: String, afterSeq: Int64, withoutFileEventsThrough filesThrough: Int64,
                      limit: Int) throws -> [StoredEvent]
    /// The latest `step.progress` event of each step of a run (for transfer statistics).
    func latestProgress(runID: String) throws -> [EventRecord]
    /// `latestProgress(runID:)` of each of these runs, in one read (a run list's transfer
    /// figures: one read per listed run cost more than the list); a run without progress events
    /// (or unknown) is absent.
    func latestProgress(runIDs: [String]) throws -> [String: [EventRecord]]
}

/// The queue: claims, places, control verbs, passive queues, the shared rate, nodes, figures. A
/// role of `StateStore`.
public protocol QueueStore: AnyObject, Sendable {
    /// Atomically takes up to `limit` runs of `queues` for `owner` for `lease` seconds: first
    /// those left unfinished by an owner that is not live (running, compensating), then queued
    /// runs by `run-now`, priority (higher first) and queue position. Paused runs and runs
    /// `owner` already holds are never taken here. Two callers never get the same run. A store
    /// shared between nodes may look for runs of owners that are not live (unfinished or
    /// queued) only once a second, not at every claim (PostgreSQL does: those reads cost the
    /// most under a burst, and a lease is many seconds anyway).
    func claimNextRuns(owner: OwnerIdentity, queues: [String], limit: Int, lease: Double) throws -> [RunRecord]
    /// Paused runs of `queues` without a live owner, which a worker holds (they keep their slot).
    func claimPausedRuns(owner: OwnerIdentity, queues: [String], lease: Double) throws -> [RunRecord]
    /// Changes a run's place in the queue; nil leaves a field as it is. Wakes idle workers.
    func updateQueueFields(_ id: String, status: RunStatus?, queueOrder: Double?, runNow: Bool?) throws
    /// Runs owned by `owner` with a pending control verb, and clears them.
    func takeControls(owner: OwnerIdentity) throws -> [(runID: String, control: RunControl)]
    /// A passive queue starts nothing and interrupts what runs (`orchestrate queue stop`).
    func setQueuePassive(_ passive: Bool) throws
    func isQueuePassive() throws -> Bool
    /// One named queue made passive on its own (`orchestrate queue stop --queue NAME`): workers
    /// start none of its runs and interrupt those they run (they keep their place), while its
    /// other queues go on. A name with no runs yet may be made passive. Wakes idle workers.
    func setQueuePassive(_ passive: Bool, queue: String) throws
    /// The named queues made passive on their own (the store-wide switch is `isQueuePassive`).
    func passiveQueues() throws -> Set<String>
    /// The bandwidth cap every `serve` on the store applies instead of its own `--max-rate`
    /// (`orchestrate queue rate`), as the text the user gave (a rate or a timetable, which the
    /// caller has validated); nil removes it, so each `serve` returns to its own. Wakes idle
    /// workers, who apply it to the transfers they are running.
    func setQueueRate(_ rate: String?) throws
    func queueRate() throws -> String?
    /// The nodes known to the store, sorted by name: every node whose processes hold runs or
    /// journaled `worker.started`, with the runs it holds, its latest lease end and its workers
    /// (see `NodeRecord` for what "live" can mean for another node).
    func nodes() throws -> [NodeRecord]
    /// Run counts per queue and status, the oldest queued run of each queue and the held steps,
    /// counted by the database (what `/metrics` reads at each scrape).
    func queueFigures() throws -> QueueFigures
    /// Removes a run and everything journaled about it (with its watch hand-offs whose file was
    /// deleted or moved away, as `pruneRuns` does), and journals a `run.deleted` event (no run
    /// id; data `run`) in the same transaction.
    func deleteRun(_ id: String) throws
    /// Calls `wake` (on a thread of the store's) soon after another process submits a run,
    /// asks for a control verb or changes the queue, until the returned watch is cancelled.
    /// Returns nil when the store cannot tell (SQLite): the caller then polls.
    func watchForWork(_ wake: @escaping @Sendable () -> Void) throws -> (any WorkWatch)?
}

/// Retention: `orchestrate prune`, `queue retention`, serve's pruner. A role of `StateStore`.
public protocol RetentionStore: AnyObject, Sendable {
    /// Sets how long finished runs are kept (seconds, or `RetentionSettings.forever`), for the
    /// whole store or one named queue; nil removes the setting (the default, or the store-wide
    /// period for a queue).
    func setRetention(_ seconds: Double?, queue: String?) throws
    func retentionSettings() throws -> RetentionSettings
    /// Up to `limit` finished runs past `rule`'s period by the store's clock, oldest first.
    /// Never a run with a watch hand-off still pending (its `after:` action is not applied yet).
    func prunableRuns(_ rule: PruneRule, limit: Int) throws -> [PrunableRun]
    /// Removes, in one transaction, those of `ids` that are still finished (a `retry` may have
    /// queued one again since it was selected) with their steps, attempts, events, items and
    /// checkpoints, and journals one `runs.pruned` event above the events removed. Schedules and
    /// watch hand-offs stay: a pruned run's schedule time never fires again, its file is never
    /// handed over again while it is in the folder. Only hand-offs whose file the watch deleted
    /// or moved away (`removed`) go with their run. Returns the runs removed.
    func pruneRuns(_ ids: [String]) throws -> [PrunableRun]
    /// The highest seq ever removed by `pruneRuns` (0 when none): a follower resuming from
    /// below it may have missed events of pruned runs, which the `runs.pruned` events name.
    func prunedThrough() throws -> Int64
    /// Gives back to the file system up to `maxPages` pages freed by deletions, in a short
    /// write; returns whether more remain. SQLite with `auto_vacuum = INCREMENTAL` does;
    /// PostgreSQL leaves it to autovacuum (returns false).
    func reclaimSpace(maxPages: Int) throws -> Bool
    /// This store's identity: a random id made the first time any process asks, the same for
    /// every node after. A node writes it beside its run directories, so it never removes a
    /// directory that another store's run made (`RunDirectorySweeper`).
    func storeIdentity() throws -> String
    /// The runs removed by events after `afterSeq` (`runs.pruned`, `run.deleted`; at most
    /// `limit` events read) that the store does not hold now.
    func goneRuns(afterSeq: Int64, limit: Int) throws -> GoneRuns
}

/// Items of long-lived steps (fan-outs and persistent sessions). A role of `StateStore`.
public protocol ItemStore: AnyObject, Sendable {
    /// Adds items to a step's durable queue, each with its `item.added` event, in one
    /// transaction: numbered in the order given, after the step's items so far, and visible
    /// together at its commit. Wakes idle workers.
    func addItems(runID: String, stepID: String, _ items: [NewItem]) throws
    func items(runID: String, stepID: String) throws -> [ItemRecord]
    /// Every item of a run, by step then in the order they were added: one read for a run's
    /// detail (`status`, `GET /api/runs/{id}`) instead of one per step.
    func items(runID: String) throws -> [ItemRecord]
    /// The first item still queued whose sequence number is above `seq`, or nil.
    func nextQueuedItem(runID: String, stepID: String, after seq: Int64) throws -> ItemRecord?
    /// Marks an item finished and journals `event` (its `item.finished`) in the same transaction,
    /// so a crash cannot keep one without the other. Fenced as `saveCheckpoint`.
    func finishItem(runID: String, stepID: String, id: String, error: String?, event: EventRecord?,
                    fence: OwnerIdentity?) throws
    func saveItemCheckpoint(runID: String, stepID: String, id: String, data: [UInt8], fence: OwnerIdentity?) throws
}

extension ItemStore {
    /// Adds one item (see `addItems`).
    public func addItem(runID: String, stepID: String, id: String, json: String, event: EventRecord?) throws {
        try addItems(runID: runID, stepID: stepID, [NewItem(id: id, json: json, event: event)])
    }
}

/// Schedules: `orchestrate schedule add`, fired by `serve`. A role of `StateStore`.
public protocol ScheduleStore: AnyObject, Sendable {
    /// Registers the entries of one schedule name (all sharing `name`), replacing the entries
    /// that name had. An entry that already existed keeps its `lastDue`, `lastRunID` and
    /// `paused` (registering again neither fires a time twice nor catches up); entries beyond
    /// the new count are removed.
    func saveSchedule(_ entries: [ScheduleRecord]) throws
    /// Every registered entry, by name then entry.
    func schedules() throws -> [ScheduleRecord]
    /// Pauses or resumes every entry of `name`. Resuming moves `lastDue` up to `time`, so the
    /// times that passed while paused are not caught up. Returns false if there is no such name.
    func setSchedulePaused(_ name: String, paused: Bool, at time: Int64) throws -> Bool
    /// Removes every entry of `name` (runs it started stay). Returns false if there was none.
    func removeSchedule(_ name: String) throws -> Bool
    /// The exactly-once claim of a due time. In one transaction: moves the entry's `lastDue`
    /// from `expected` to `due`, only if it still is `expected` and the entry is not paused;
    /// then creates `run` (with its events; it becomes the entry's `lastRunID`) and appends
    /// `events`. Returns false, writing nothing, when the entry moved on (another `serve` took
    /// that time), was paused or removed. So however many processes and nodes race for a due
    /// time, one run is created, and a crash can neither keep the claim without the run nor the
    /// run without the claim.
    func advanceSchedule(name: String, entry: Int, from expected: Int64, to due: Int64,
                         run: (run: RunRecord, events: [EventRecord])?, events: [EventRecord]) throws -> Bool
}

/// Watch folders (`on.watch`): exactly-once hand-offs. A role of `StateStore`.
public protocol WatchStore: AnyObject, Sendable {
    /// Hands `file` over as `work`, exactly once: journals the hand-off, creates the run or adds
    /// the item, and appends `events`, all in one transaction. Returns false, creating nothing,
    /// when that version of the file was already handed over (by this process, an earlier one or
    /// another one sharing the store): a restart or a second `serve` never hands a file over
    /// twice. A version met again after its `after:` removed it (a sender's `rsync -t` putting
    /// back what it finds missing) is marked `done` then: it is in the folder again, so its
    /// hand-off no longer goes with its run. Throws `duplicateRun` as `createRuns` does. Wakes
    /// idle workers.
    func handOver(_ file: WatchedFile, as work: WatchWork, events: [EventRecord]) throws -> Bool
    /// The hand-offs of `watch`, oldest first; with `pendingOnly`, only those whose outcome is
    /// still `pending`.
    func watchHandOffs(watch: String, pendingOnly: Bool) throws -> [WatchHandOff]
    /// A page of the hand-offs of `watch` in the order of their file versions (path in the
    /// database's collation, size, mtime), at most `limit`, after the version `after`: a watcher reads which files it handed
    /// over a page at a time when it starts, whatever their number (with `after: keep`, up to
    /// one per file its folder ever received).
    func watchHandOffs(watch: String, after: WatchedFile?, limit: Int) throws -> [WatchHandOff]
    /// How many hand-offs of `watch` are pending (their work not ended, or its `after:` not
    /// applied yet): what a watch that makes a run per file holds back at.
    func pendingHandOffCount(watch: String) throws -> Int
    /// A page of the pending hand-offs of `watch` whose work ended (its item done or failed, its
    /// run finished or deleted), oldest first, at most `limit`, after the hand-off `after`: the
    /// watcher applies `after:` a page at a time, so what it holds does not grow with the
    /// hand-offs pending (a feed run's items, up to one per file of the folder).
    func endedHandOffs(watch: String, after: WatchHandOff?, limit: Int) throws -> [EndedHandOff]
    /// Records how a hand-off ended (its work's outcome, once the `after:` action was applied),
    /// with `events`. Returns false, writing nothing, when it was no longer pending (another
    /// process recorded it first): only one process applies a file's `after:` action.
    func finishHandOff(_ file: WatchedFile, outcome: WatchHandOff.Outcome, events: [EventRecord]) throws -> Bool
}

extension EventStore {
    /// `storedEvents` with each event's data parsed.
    public func events(runID: String?, afterSeq: Int64, limit: Int) throws -> [EventRecord] {
        try storedEvents(runID: runID, afterSeq: afterSeq, limit: limit).map(\.record)
    }
}

extension RunStore {
    /// `runDetail(id, items:)` with the first page of items (`ItemWindow.first`).
    public func runDetail(_ id: String) throws -> RunDetailRecord? { try runDetail(id, items: .first) }

    /// Journals one new run with its first events (see `createRuns`).
    public func createRun(_ run: RunRecord, events: [EventRecord]) throws {
        try createRuns([(run, events)])
    }
}

/// A subscription made by `QueueStore.watchForWork`.
public protocol WorkWatch: Sendable {
    /// Stops the calls; returns once none is in progress.
    func cancel()
}
