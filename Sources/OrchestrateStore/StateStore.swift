import OrchestrateJSON

/// A set of journal writes committed in one transaction: the engine gathers every transition of
/// a scheduling round (steps finished, steps started, events) and commits them together before
/// acting on any of them. One fsync-able commit per round is what makes the engine fast.
public struct JournalBatch: Sendable {
    public var runUpdates: [RunRecord] = []
    public var stepUpserts: [StepRecord] = []
    public var events: [EventRecord] = []
    public var releasedLeases: [String] = []  // holders whose concurrency leases end
    public var deletedSteps: [(runID: String, id: String)] = []  // e.g. compensations undone by `retry`
    /// When set, the batch commits only if this process still owns the run; otherwise commit
    /// throws `StoreError.ownershipLost` and writes nothing. An executor whose lease expired and
    /// whose run another process took over can then never write over the new owner's journal.
    public var fence: (runID: String, owner: OwnerIdentity)?

    public init() {}

    public var isEmpty: Bool {
        runUpdates.isEmpty && stepUpserts.isEmpty && events.isEmpty && releasedLeases.isEmpty && deletedSteps.isEmpty
    }
}

/// Filters for `listRuns`.
public struct RunFilter: Sendable {
    public var statuses: Set<RunStatus>?
    public var labels: [String: String]
    public var limit: Int?

    public init(statuses: Set<RunStatus>? = nil, labels: [String: String] = [:], limit: Int? = nil) {
        self.statuses = statuses
        self.labels = labels
        self.limit = limit
    }
}

/// The durable journal behind every run. The SQLite implementation (`SQLiteStateStore`) is the
/// default; the interface is small so that a PostgreSQL store can let several machines share
/// one queue.
///
/// Every method is synchronous, thread-safe, and durable when it returns (to the store's
/// configured synchronous level).
public protocol StateStore: AnyObject, Sendable {
    // MARK: Runs
    func createRun(_ run: RunRecord, events: [EventRecord]) throws
    func run(_ id: String) throws -> RunRecord?
    func listRuns(_ filter: RunFilter) throws -> [RunRecord]

    /// Makes `owner` the owner of run `id` with a lease until `leaseUntil`, if the run has no
    /// live owner (none, dead on this host, or lease expired). Returns false if someone else
    /// holds it.
    func claimRun(_ id: String, owner: OwnerIdentity, leaseUntil: Double) throws -> Bool
    /// Extends the lease; returns false if the run is no longer owned by `owner`. Also returns
    /// the control verb another process asked for, if any (cancel, stop, pause).
    func renewLease(_ id: String, owner: OwnerIdentity, leaseUntil: Double) throws -> (owned: Bool, control: String?)
    func releaseRun(_ id: String, owner: OwnerIdentity) throws
    /// Asks the owner of a run to act (`cancel`); it sees it at its next lease renewal.
    func requestControl(_ id: String, control: String?) throws

    // MARK: Journal
    func commit(_ batch: JournalBatch) throws
    func steps(ofRun runID: String) throws -> [StepRecord]

    // MARK: Checkpoints (never secrets: the engine does not redact them)
    func saveCheckpoint(runID: String, stepID: String, data: [UInt8]) throws
    func checkpoint(runID: String, stepID: String) throws -> [UInt8]?

    // MARK: Keyed concurrency limits, shared by every process using this store
    /// Atomically takes one slot of each `(key, limit)` for `holder`, or none if any key is
    /// full. Leases of dead owners do not count. Returns whether it took them.
    func tryAcquireLeases(_ keys: [(key: String, limit: Int)], holder: String, owner: OwnerIdentity,
                          expiresAt: Double) throws -> Bool
    /// Extends every lease held by `owner` (called with the run's heartbeat).
    func renewLeases(owner: OwnerIdentity, expiresAt: Double) throws

    // MARK: Events
    func appendEvents(_ events: [EventRecord]) throws
    func events(runID: String?, afterSeq: Int64, limit: Int) throws -> [EventRecord]
    /// The latest `step.progress` event of each step of a run (for transfer statistics).
    func latestProgress(runID: String) throws -> [EventRecord]

    // MARK: The queue (`submit`, `serve`, control verbs)
    /// Atomically takes up to `limit` runs for `owner`, first those left unfinished by a dead
    /// owner (running, compensating), then queued runs by `run-now`, priority (higher first) and
    /// queue position. Paused runs are never taken here.
    func claimNextRuns(owner: OwnerIdentity, limit: Int, leaseUntil: Double) throws -> [RunRecord]
    /// Paused runs without a live owner, which a worker holds (they keep their slot).
    func claimPausedRuns(owner: OwnerIdentity, leaseUntil: Double) throws -> [RunRecord]
    /// Changes a run's place in the queue; nil leaves a field as it is.
    func updateQueueFields(_ id: String, status: RunStatus?, queueOrder: Double?, runNow: Bool?) throws
    /// Runs owned by `owner` with a pending control verb, and clears them.
    func takeControls(owner: OwnerIdentity) throws -> [(runID: String, control: String)]
    func setQueuePassive(_ passive: Bool) throws
    func isQueuePassive() throws -> Bool
    /// Removes a run and everything journaled about it.
    func deleteRun(_ id: String) throws

    // MARK: Items of long-lived steps
    func addItem(runID: String, stepID: String, id: String, json: String) throws
    func items(runID: String, stepID: String) throws -> [ItemRecord]
    /// The first item still queued whose sequence number is above `seq` (items are numbered in
    /// the order they were added), or nil.
    func nextQueuedItem(runID: String, stepID: String, after seq: Int64) throws -> ItemRecord?
    /// Marks an item finished and journals `event` (its `item.finished`) in the same transaction,
    /// so a crash cannot keep one without the other.
    func finishItem(runID: String, stepID: String, id: String, error: String?, event: EventRecord?) throws
    func saveItemCheckpoint(runID: String, stepID: String, id: String, data: [UInt8]) throws
}
