import Foundation
import GRDB
import Synchronization
import OrchestrateJSON

/// The default state store: one SQLite database in WAL mode, `DIR/state.sqlite`.
///
/// ```swift
/// let store = try SQLiteStateStore(directory: "/var/lib/orchestrate")
/// try store.createRun(run, events: [])
/// ```
///
/// Durability: every write is one transaction. With the default `synchronous = NORMAL`, a
/// committed transaction survives the process being killed (`kill -9`); after a power cut the
/// last few transactions may be rolled back, never corrupted — steps run at least once and
/// uploads verify their offset with the server, so that is safe. `synchronous: .full` fsyncs
/// every commit (`ORCHESTRATE_SYNC=full`).
///
/// Group commit: the journal commits of one process's run threads that arrive together share
/// one transaction (`CommitGroup`), each batch under its own savepoint; each caller still
/// returns only once its own batch is committed, and gets its own error.
///
/// Several processes may share the directory: writes take the database's write lock
/// (`BEGIN IMMEDIATE`) and wait for it up to `busyTimeout`. They are on one machine, so the
/// store's clock is this machine's clock, and they are one node: a lease is never the only
/// sign of life (an owner's pid is), so a commit is fenced by ownership alone.
///
/// Reads go through a pool of reader connections, each on a snapshot of the last commit
/// (WAL): a reader never waits for the writer nor holds it up, so the HTTP API's lists and
/// details do not delay the engine's journal commits (bench/api).
public final class SQLiteStateStore: StateStore, @unchecked Sendable {
    /// The commit level, as SQLite's `PRAGMA synchronous` spells it.
    public enum Synchronous: String, Sendable, CaseIterable {
        case normal = "NORMAL", full = "FULL"

        /// The value of `ORCHESTRATE_SYNC` (`normal` or `full`, in any case); nil for anything else.
        public init?(setting: String) {
            self.init(rawValue: setting.uppercased())
        }
    }

    public let path: String
    private let pool: DatabasePool
    /// `syncJournal` calls that fsynced the WAL, for tests.
    private let walSyncs = Atomic<Int>(0)
    var journalSyncs: Int { walSyncs.load(ordering: .relaxed) }
    /// The writer connection's prepared statements; only touched inside the pool's writer
    /// access (`write`), which serializes it.
    private var journal: SQLiteJournalStatements?
    /// Gathers the journal commits of this process's run threads into shared transactions.
    private var commitGroup: CommitGroup<JournalBatch>!
    /// `storeIdentity()`, once read.
    let identity = StoreIdentityCache()

    /// Opens (creating if needed) the store in `directory`. The directory is created 0700 and
    /// the database 0600: state may hold inputs and outputs that are nobody else's business.
    /// A directory or store file another user owns or can write is refused (`OwnedState`).
    public init(directory: String, synchronous: Synchronous = .normal, busyTimeout: TimeInterval = 30) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try OwnedState.check(directory, as: .stateDirectory)
        path = (directory as NSString).appendingPathComponent("state.sqlite")
        // Create the file ourselves so it is 0600 from its first byte; SQLite gives the -wal
        // and -shm files the database file's permissions.
        let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError.cannotOpen(path: path, reason: String(cString: strerror(errno)))
        }
        // Closed before SQLite opens the file: closing a descriptor of it later would drop
        // SQLite's POSIX locks on it (they belong to the process, not the descriptor).
        let databasePath = path
        let owned = Result { () throws(OwnedState.Refusal) in try OwnedState.check(descriptor: fd, path: databasePath, as: .storeFile) }
        close(fd)
        try owned.get()
        for companion in ["state.sqlite-wal", "state.sqlite-shm", "state.lock"] {
            try OwnedState.check((directory as NSString).appendingPathComponent(companion), as: .storeFile)
        }

        var config = Configuration()
        config.busyMode = .timeout(busyTimeout)
        config.journalMode = .wal
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        do {
            // Two processes opening a new store at once would both switch it to WAL and create
            // the tables (the migrator's "what is applied" check is not under SQLite's write
            // lock). A file lock makes opening and migrating one process at a time.
            let lockPath = (directory as NSString).appendingPathComponent("state.lock")
            let lock = open(lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            guard lock >= 0 else { throw StoreError.cannotOpen(path: lockPath, reason: String(cString: strerror(errno))) }
            defer { close(lock) }
            flock(lock, LOCK_EX)
            defer { flock(lock, LOCK_UN) }
            try SQLiteSchema.enableIncrementalVacuumIfNew(path: path)
            pool = try DatabasePool(path: path, configuration: config)
            // After the pool is made, not in `prepareDatabase`: the pool turns WAL on after that
            // and sets `synchronous = NORMAL` as it does, which would undo a FULL set there. Only
            // the writer connection commits, so it is the one that matters.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)")
            }
            try SQLiteSchema.migrator().migrate(pool)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.cannotOpen(path: path, reason: "\(error)")
        }
        commitGroup = CommitGroup { [unowned self] batches in writeGroup(batches) }
    }

    /// Runs `body` in an immediate write transaction. BEGIN and COMMIT are prepared once
    /// (`SQLiteJournalStatements`): the engine commits a transaction per scheduling round, and
    /// parsing them each time cost as much as the round's inserts.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            let statements = try journalStatements(db)
            try statements.begin.execute()
            do {
                let result = try body(db)
                try statements.commit.execute()
                return result
            } catch {
                try? db.rollback()
                throw error
            }
        }
    }

    /// Runs `body` on the writer connection outside any transaction (PRAGMAs that cannot run
    /// in one: incremental vacuum, VACUUM).
    func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction(body)
    }

    /// The writer connection's prepared statements; call only inside the writer access.
    private func journalStatements(_ db: Database) throws -> SQLiteJournalStatements {
        if let journal, journal.isPrepared(on: db) { return journal }
        let prepared = try SQLiteJournalStatements(db)
        journal = prepared
        return prepared
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.read(body)
    }

    /// Runs `PRAGMA integrity_check` and returns its verdict ("ok" when healthy).
    public func integrityCheck() throws -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "no answer" }
    }

    public func now() throws -> Double { Date().timeIntervalSince1970 }

    /// One machine: an owner's pid, not its lease, says whether it lives.
    public var fencesByLease: Bool { false }

    /// Whether the owner in `row` still holds what it owns.
    static func ownerIsLive(_ owner: OwnerIdentity?, leaseUntil: Double?) -> Bool {
        guard let owner else { return false }
        return owner.isLive(leaseValid: (leaseUntil ?? 0) > Date().timeIntervalSince1970)
    }

    // MARK: Runs

    public func createRuns(_ runs: [(run: RunRecord, events: [EventRecord])]) throws {
        try write { db in
            for (run, events) in runs { try Self.insertRun(run, events: events, db) }
        }
    }

    static func insertRun(_ run: RunRecord, events: [EventRecord], _ db: Database) throws {
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM runs WHERE id = ?", arguments: [run.id]) == true {
                throw StoreError.duplicateRun(run.id)
            }
            try db.execute(sql: """
                INSERT INTO runs (id, workflow_name, workflow_file, workflow_source, inputs_json, status,
                                  created_at, run_dir, priority, labels_json, queue_order, max_rate, queue,
                                  max_rate_timetable, retention)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [run.id, run.workflowName, run.workflowFile, run.workflowSource,
                                 run.inputs.jsonText, run.status.rawValue, run.createdAt, run.runDir,
                                 run.priority, Self.labelsJSON(run.labels), run.queueOrder, run.maxRate, run.queue,
                                 run.maxRateTimetable, run.retention.map { PruneRule.finite($0) }])
            try Self.insertEvents(events, db)
    }

    public func run(_ id: String) throws -> RunRecord? {
        try read { db in try Self.run(id, db) }
    }

    private static func run(_ id: String, _ db: Database) throws -> RunRecord? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.runColumns) FROM runs WHERE id = ?"), arguments: [id]).map(runRecord)
    }

    /// One read transaction (one WAL snapshot) for the four parts.
    public func runDetail(_ id: String, items window: ItemWindow) throws -> RunDetailRecord? {
        try read { db in
            guard let run = try Self.run(id, db) else { return nil }
            let (items, next) = try Self.items(runID: id, window: window, db)
            return RunDetailRecord(run: run, steps: try Self.steps(ofRun: id, db), items: items,
                                   progress: try Self.latestProgress(runIDs: [id], db),
                                   itemCounts: try Self.itemCounts(runID: id, db), itemsNext: next)
        }
    }

    /// A window of a run's items (one more is read to tell whether others follow) and where
    /// the next page starts.
    private static func items(runID: String, window: ItemWindow, _ db: Database) throws -> ([ItemRecord], ItemCursor?) {
        var sql = "SELECT \(Self.itemColumns) FROM items WHERE run_id = ?"
        var arguments: StatementArguments = [runID]
        if let after = window.after, !window.last {
            sql += " AND (step_id > ? OR (step_id = ? AND seq > ?))"
            arguments += [after.stepID, after.stepID, after.seq]
        }
        sql += window.last ? " ORDER BY step_id DESC, seq DESC LIMIT ?" : " ORDER BY step_id, seq LIMIT ?"
        arguments += [window.limit + 1]
        var items = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map(itemRecord)
        let next = ItemPage.cut(&items, window)
        return (items, next)
    }

    private static func itemCounts(runID: String, _ db: Database) throws -> [ItemCount] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT step_id, status, COUNT(*) FROM items WHERE run_id = ? GROUP BY step_id, status ORDER BY step_id"),
                         arguments: [runID])
            .map { ItemCount(stepID: $0[0], status: ItemRecord.Status(rawValue: $0[1]) ?? .queued, count: $0[2]) }
    }

    /// Every filter is in the query, newest first through an index by creation (of all runs,
    /// of a status, of a workflow), so a `limit` reads about that many rows (schema v12).
    public func listRuns(_ filter: RunFilter) throws -> [RunRecord] {
        // The index to read by: SQLite would rather walk `runs_created` in the order asked for
        // (reading every run to find a few running ones) than sort the few it finds by status.
        // `run-now` runs waiting (a worker at its limit asks every round): the queue's own index,
        // which leads with run_now.
        let index = filter.runNowOnly && filter.statuses == [.queued] ? " INDEXED BY runs_queued_order"
            : filter.statuses?.isEmpty == false ? " INDEXED BY runs_status_created"
            : filter.workflow != nil ? " INDEXED BY runs_workflow" : ""
        var sql = "SELECT \(Self.runColumns) FROM runs\(index) WHERE 1"
        var arguments: StatementArguments = []
        // Statements whose shape depends on the names given are not cached (any number of any
        // names: one statement each would grow the cache without bound).
        var cached = true
        if filter.runNowOnly && filter.statuses == [.queued] {
            sql += " AND status = 'queued'"  // a literal: what lets SQLite use the partial index
        } else if let statuses = filter.statuses, !statuses.isEmpty {
            sql += " AND status IN (\(statuses.map { _ in "?" }.joined(separator: ",")))"
            for s in statuses.sorted(by: { $0.rawValue < $1.rawValue }) { arguments += [s.rawValue] }
        }
        if filter.runNowOnly { sql += " AND run_now = 1" }
        if let queues = filter.queues, !queues.isEmpty {
            sql += " AND queue IN (\(queues.map { _ in "?" }.joined(separator: ",")))"
            for q in queues.sorted() { arguments += [q] }
            cached = false
        }
        if let workflow = filter.workflow {
            sql += " AND workflow_name = ?"
            arguments += [workflow]
        }
        if !filter.idPrefixes.isEmpty {
            sql += " AND (" + filter.idPrefixes.map { _ in "substr(id, 1, length(?)) = ?" }.joined(separator: " OR ") + ")"
            for prefix in filter.idPrefixes { arguments += [prefix, prefix] }
            cached = false
        }
        for (key, value) in filter.labels.sorted(by: { $0.key < $1.key }) {
            sql += " AND EXISTS (SELECT 1 FROM json_each(labels_json) WHERE key = ? AND value = ?)"
            arguments += [key, value]
            cached = false
        }
        if let text = filter.text {
            // SQLite's lower() folds ASCII letters only.
            sql += """
                 AND (instr(lower(id), ?) > 0 OR instr(lower(workflow_name), ?) > 0 OR instr(lower(workflow_file), ?) > 0
                      OR EXISTS (SELECT 1 FROM json_each(labels_json) WHERE instr(lower(key), ?) > 0 OR instr(lower(value), ?) > 0))
                """
            arguments += StatementArguments(Array(repeating: text, count: 5))
        }
        if let limit = filter.limit {
            sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
            arguments += [max(limit, 0)]
        } else {
            sql += " ORDER BY created_at, id"
        }
        let rows = try read { db in
            try Row.fetchAll(cached ? db.cachedStatement(sql: sql) : db.makeStatement(sql: sql), arguments: arguments)
                .map(Self.runRecord)
        }
        return filter.limit == nil ? rows : rows.reversed()
    }

    public func claimRun(_ id: String, owner: OwnerIdentity, lease: Double) throws -> Bool {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT \(Self.runColumns) FROM runs WHERE id = ?", arguments: [id]) else {
                return false
            }
            let run = Self.runRecord(row)
            if let current = run.owner, current != owner, run.ownerIsLive { return false }
            try db.execute(sql: """
                UPDATE runs SET owner_host = ?, owner_pid = ?, owner_start = ?, lease_until = ? WHERE id = ?
                """, arguments: [owner.node, owner.pid, owner.startTime, try now() + lease, id])
            return true
        }
    }

    public func renewLease(_ id: String, owner: OwnerIdentity, lease: Double) throws -> (owned: Bool, control: RunControl?) {
        try write { db in
            try db.execute(sql: """
                UPDATE runs SET lease_until = ? WHERE id = ? AND owner_host = ? AND owner_pid = ? AND owner_start = ?
                """, arguments: [try now() + lease, id, owner.node, owner.pid, owner.startTime])
            let owned = db.changesCount > 0
            let control = try String.fetchOne(db, sql: "SELECT requested_control FROM runs WHERE id = ?", arguments: [id])
            return (owned, control.flatMap(RunControl.init(rawValue:)))
        }
    }

    public func releaseRun(_ id: String, owner: OwnerIdentity) throws {
        try write { db in try Self.release(id, owner, db) }
    }

    private static func release(_ id: String, _ owner: OwnerIdentity, _ db: Database) throws {
        try db.execute(sql: """
            UPDATE runs SET owner_host = NULL, owner_pid = NULL, owner_start = NULL, lease_until = NULL
            WHERE id = ? AND owner_host = ? AND owner_pid = ? AND owner_start = ?
            """, arguments: [id, owner.node, owner.pid, owner.startTime])
        try db.execute(sql: "DELETE FROM leases WHERE owner_host = ? AND owner_pid = ? AND owner_start = ? AND holder LIKE ?",
                       arguments: [owner.node, owner.pid, owner.startTime, id + "/%"])
    }

    public func requestControl(_ id: String, control: RunControl?) throws {
        try write { db in
            try db.execute(sql: "UPDATE runs SET requested_control = ? WHERE id = ?", arguments: [control?.rawValue, id])
        }
    }

    // MARK: Journal

    public func commit(_ batch: JournalBatch) throws {
        guard !batch.isEmpty else { return }
        try commitGroup.commit(batch)
    }

    /// Fsyncs the WAL, which holds every commit not yet checkpointed into the database (a
    /// checkpoint syncs the WAL before it and the database after): those of every process
    /// sharing the store, made before the call. Also at FULL: another process sharing the store
    /// may commit at NORMAL, and an fsync of a WAL with nothing new costs next to nothing.
    public func syncJournal() throws {
        let wal = path + "-wal"
        let fd = open(wal, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }  // no WAL: everything is in the database file
            throw StoreError.unavailable(location: wal, reason: String(cString: strerror(errno)))
        }
        defer { close(fd) }
        guard fdatasync(fd) == 0 else {
            throw StoreError.unavailable(location: wal, reason: "fdatasync: " + String(cString: strerror(errno)))
        }
        walSyncs.add(1, ordering: .relaxed)
    }

    /// Writes what `CommitGroup` gathered in one transaction. With several batches, each is
    /// written under its own savepoint: one that fails (its fence, a constraint) is rolled back
    /// alone and the others commit. An error that ends the transaction itself (SQLite rolls it
    /// back on a full disk or an I/O error), or a failed COMMIT, fails them all: nothing of
    /// theirs was written.
    func writeGroup(_ batches: [JournalBatch]) -> [Result<Void, any Error>] {
        do {
            return try write { db in
                let statements = try journalStatements(db)
                guard batches.count > 1 else {
                    try writeJournal(batches[0], statements, db)
                    return [.success(())]
                }
                var outcomes: [Result<Void, any Error>] = []
                for batch in batches {
                    try statements.savepoint.execute()
                    do {
                        try writeJournal(batch, statements, db)
                        try statements.releaseSavepoint.execute()
                        outcomes.append(.success(()))
                    } catch {
                        guard db.isInsideTransaction else { throw error }
                        try statements.rollbackToSavepoint.execute()
                        try statements.releaseSavepoint.execute()
                        outcomes.append(.failure(error))
                    }
                }
                return outcomes
            }
        } catch {
            return batches.map { _ in .failure(error) }
        }
    }

    /// One batch's writes, inside the caller's transaction.
    private func writeJournal(_ batch: JournalBatch, _ statements: SQLiteJournalStatements, _ db: Database) throws {
        if let (runID, owner) = batch.fence { try checkFence(runID, owner, db) }
        for run in batch.runUpdates { try Self.updateRun(run, statements.updateRun) }
        try statements.upsertSteps.write(batch.stepUpserts) { row, s in
            row.add(s.runID); row.add(s.id); row.add(s.step); row.add(s.kind.rawValue); row.add(s.itemIndex)
            row.add(json: s.item); row.add(s.status.rawValue); row.add(s.attempt); row.add(s.failures)
            row.add(s.nextAttemptAt); row.add(s.idempotencyKey); row.add(json: s.outputs)
            row.add(s.errorKind); row.add(s.errorCode); row.add(s.errorMessage); row.add(s.startedAt)
            row.add(s.finishedAt); row.add(s.completionSeq); row.add(s.node)
        }
        for (runID, id) in batch.deletedSteps {
            try db.execute(sql: "DELETE FROM steps WHERE run_id = ? AND id = ?", arguments: [runID, id])
            try db.execute(sql: "DELETE FROM checkpoints WHERE run_id = ? AND step_id = ?", arguments: [runID, id])
        }
        try statements.insertEvents.write(batch.events, bind: Self.bindEvent)
        for holder in batch.releasedLeases { try statements.deleteLease.run { $0.add(holder) } }
        if batch.releasesRun, let (runID, owner) = batch.fence { try Self.release(runID, owner, db) }
    }

    public func steps(ofRun runID: String) throws -> [StepRecord] {
        try read { db in try Self.steps(ofRun: runID, db) }
    }

    /// The run's step rows, and its fan-outs' items that have no row yet (`UnstartedItems`).
    private static func steps(ofRun runID: String, _ db: Database) throws -> [StepRecord] {
        var steps: [StepRecord] = []
        try db.cachedStatement(sql: "SELECT \(stepColumns) FROM steps WHERE run_id = ?")
            .forEachRow({ $0.add(runID) }) { steps.append(stepRecord($0)) }
        return UnstartedItems.adding(to: steps)
    }

    // MARK: Checkpoints

    public func saveCheckpoint(runID: String, stepID: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try write { db in
            if let fence { try checkFence(runID, fence, db) }
            try db.execute(sql: "INSERT OR REPLACE INTO checkpoints (run_id, step_id, data, updated_at) VALUES (?, ?, ?, ?)",
                           arguments: [runID, stepID, Data(data), Date().timeIntervalSince1970])
        }
    }

    public func checkpoint(runID: String, stepID: String) throws -> [UInt8]? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT data FROM checkpoints WHERE run_id = ? AND step_id = ?",
                              arguments: [runID, stepID]).map { [UInt8]($0) }
        }
    }

    // MARK: Concurrency leases

    public func tryAcquireLeases(_ keys: [(key: String, limit: Int)], holder: String, owner: OwnerIdentity,
                                 lease: Double) throws -> Bool
    {
        try write { db in
            let now = try self.now()
            let expiresAt = now + lease
            for (key, limit) in keys {
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM leases WHERE key = ? AND holder != ?",
                                            arguments: [key, holder])
                var live = 0
                for row in rows {
                    let leaseOwner = OwnerIdentity(node: row["owner_host"], pid: row["owner_pid"], startTime: row["owner_start"])
                    let expires: Double = row["expires_at"]
                    if leaseOwner.isLive(leaseValid: expires > now) {
                        live += 1
                    } else {
                        // A dead owner's slot: free it for everyone.
                        try db.execute(sql: "DELETE FROM leases WHERE key = ? AND holder = ?",
                                       arguments: [key, row["holder"] as String])
                    }
                }
                if live >= limit { return false }
            }
            let statement = try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO leases (key, holder, owner_host, owner_pid, owner_start, expires_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
            for (key, _) in keys {
                try statement.execute(arguments: [key, holder, owner.node, owner.pid, owner.startTime, expiresAt])
            }
            return true
        }
    }

    public func renewLeases(owner: OwnerIdentity, lease: Double) throws {
        try write { db in
            try db.execute(sql: "UPDATE leases SET expires_at = ? WHERE owner_host = ? AND owner_pid = ? AND owner_start = ?",
                           arguments: [try now() + lease, owner.node, owner.pid, owner.startTime])
        }
    }

    // MARK: Events

    public func appendEvents(_ events: [EventRecord]) throws {
        guard !events.isEmpty else { return }
        try write { db in try Self.insertEvents(events, db) }
    }

    public func storedEvents(runID: String?, afterSeq: Int64, limit: Int) throws -> [StoredEvent] {
        try read { db in
            let rows: [Row]
            if let runID {
                rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT \(Self.eventColumns) FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"),
                                        arguments: [runID, afterSeq, limit])
            } else {
                rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT \(Self.eventColumns) FROM events WHERE seq > ? ORDER BY seq LIMIT ?"),
                                        arguments: [afterSeq, limit])
            }
            return rows.map(Self.storedEvent)
        }
    }

    public func storedEvents(runID: String, afterSeq: Int64, withoutFileEventsThrough filesThrough: Int64,
                             limit: Int) throws -> [StoredEvent] {
        try read { db in
            try Row.fetchAll(db.cachedStatement(sql: Self.runEventsWithoutFiles), arguments: [runID, afterSeq, filesThrough, limit])
                .map(Self.storedEvent)
        }
    }

    /// Searched along events_run (run_id=? AND seq>?): a run page's first read walks its run's
    /// events once, whatever the other runs hold.
    static let runEventsWithoutFiles = """
        SELECT \(eventColumns) FROM events WHERE run_id = ? AND seq > ?
        AND (seq > ? OR NOT \(EventType.aboutOneFileSQL)) ORDER BY seq LIMIT ?
        """

    public func latestProgress(runID: String) throws -> [EventRecord] {
        try read { db in try Self.latestProgress(runIDs: [runID], db) }
    }

    public func latestProgress(runIDs: [String]) throws -> [String: [EventRecord]] {
        Dictionary(grouping: try read { db in try Self.latestProgress(runIDs: runIDs, db) }) { $0.runID ?? "" }
    }

    /// Each step's newest `step.progress` of the runs, in seq order within each run. The ids
    /// are bound as one JSON array, so that one statement, prepared once per connection, serves
    /// any number of them (a `list` of every run names more than SQLite takes variables).
    private static func latestProgress(runIDs: [String], _ db: Database) throws -> [EventRecord] {
        guard !runIDs.isEmpty else { return [] }
        let statement = try db.cachedStatement(sql: """
            SELECT \(Self.eventColumns) FROM events WHERE seq IN (
                SELECT MAX(seq) FROM events WHERE run_id IN (SELECT value FROM json_each(?))
                AND type = 'step.progress' GROUP BY run_id, step)
            ORDER BY seq
            """)
        return try Row.fetchAll(statement, arguments: [JSONValue.array(runIDs.map { .string($0) }).jsonText]).map(eventRecord)
    }

    // MARK: Items

    public func addItems(runID: String, stepID: String, _ items: [NewItem]) throws {
        guard !items.isEmpty else { return }
        try write { db in try Self.insertItems(runID: runID, stepID: stepID, items, db) }
    }

    static func insertItem(runID: String, stepID: String, id: String, json: String, event: EventRecord?,
                           _ db: Database) throws
    {
        try insertItems(runID: runID, stepID: stepID, [NewItem(id: id, json: json, event: event)], db)
    }

    /// Inserts queued items numbered after the step's last, with their events; `added_at` is
    /// the transaction's time, one for all of them.
    static func insertItems(runID: String, stepID: String, _ items: [NewItem], _ db: Database) throws {
        try insertEvents(items.compactMap(\.event), db)
        var seq = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) FROM items WHERE run_id = ? AND step_id = ?",
                                     arguments: [runID, stepID]) ?? 0
        let now = Date().timeIntervalSince1970
        let insert = try db.cachedStatement(sql: """
            INSERT INTO items (run_id, step_id, id, seq, json, status, added_at) VALUES (?, ?, ?, ?, ?, 'queued', ?)
            """)
        for item in items {
            seq += 1
            try insert.run { row in
                row.add(runID); row.add(stepID); row.add(item.id); row.add(seq); row.add(item.json); row.add(now)
            }
        }
    }

    public func items(runID: String, stepID: String) throws -> [ItemRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.itemColumns) FROM items WHERE run_id = ? AND step_id = ? ORDER BY seq",
                             arguments: [runID, stepID]).map(Self.itemRecord)
        }
    }

    public func items(runID: String) throws -> [ItemRecord] {
        try read { db in try Self.items(runID: runID, db) }
    }

    private static func items(runID: String, _ db: Database) throws -> [ItemRecord] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT \(Self.itemColumns) FROM items WHERE run_id = ? ORDER BY step_id, seq"), arguments: [runID])
            .map(itemRecord)
    }

    public func nextQueuedItem(runID: String, stepID: String, after seq: Int64) throws -> ItemRecord? {
        try read { db in
            try Row.fetchOne(db, sql: """
                SELECT \(Self.itemColumns) FROM items WHERE run_id = ? AND step_id = ? AND seq > ? AND status = 'queued' ORDER BY seq LIMIT 1
                """, arguments: [runID, stepID, seq]).map(Self.itemRecord)
        }
    }

    /// The items table's columns in the order `itemRecord` reads them (by position, as `runColumns`).
    private static let itemColumns = "run_id, step_id, id, seq, json, status, error, checkpoint"

    /// A row of `SELECT \(itemColumns)`.
    private static func itemRecord(_ row: Row) -> ItemRecord {
        ItemRecord(runID: row[0], stepID: row[1], id: row[2], seq: row[3], json: row[4],
                   status: ItemRecord.Status(rawValue: row[5]) ?? .queued, error: row[6],
                   checkpoint: (row[7] as Data?).map { [UInt8]($0) })
    }

    public func finishItem(runID: String, stepID: String, id: String, error: String?, event: EventRecord?,
                           fence: OwnerIdentity?) throws
    {
        try write { db in
            if let fence { try checkFence(runID, fence, db) }
            try db.execute(sql: """
                UPDATE items SET status = ?, error = ?, finished_at = ? WHERE run_id = ? AND step_id = ? AND id = ?
                """, arguments: [error == nil ? "done" : "failed", error, Date().timeIntervalSince1970, runID, stepID, id])
            if let event { try Self.insertEvents([event], db) }
        }
    }

    public func saveItemCheckpoint(runID: String, stepID: String, id: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try write { db in
            if let fence { try checkFence(runID, fence, db) }
            try db.execute(sql: "UPDATE items SET checkpoint = ? WHERE run_id = ? AND step_id = ? AND id = ?",
                           arguments: [Data(data), runID, stepID, id])
        }
    }

    /// Throws `ownershipLost` unless `owner` owns the run (one machine: ownership alone).
    /// Only inside `write`.
    private func checkFence(_ runID: String, _ owner: OwnerIdentity, _ db: Database) throws {
        let owned = try journalStatements(db).runOwner.firstRow({ $0.add(runID) }) { row in
            row.string(0) == owner.node && row.int64(1) == Int64(owner.pid) && row.int64(2) == owner.startTime
        }
        guard owned == true else { throw StoreError.ownershipLost(runID: runID) }
    }

    // MARK: Row mapping

    /// The events table's columns in the order `storedEvent` reads them (by position, as
    /// `runColumns`).
    static let eventColumns = "seq, run_id, time, type, step, data_json"

    /// A row of `SELECT \(eventColumns)`.
    static func storedEvent(_ row: Row) -> StoredEvent {
        StoredEvent(seq: row[0], runID: row[1], time: row[2], type: EventType(rawValue: row[3]), step: row[4], dataText: row[5])
    }

    static func eventRecord(_ row: Row) -> EventRecord { storedEvent(row).record }

    static func insertEvents(_ events: [EventRecord], _ db: Database) throws {
        guard !events.isEmpty else { return }
        let statement = try db.cachedStatement(sql: "INSERT INTO events (run_id, time, type, step, data_json) VALUES (?, ?, ?, ?, ?)")
        for e in events { try statement.run { bindEvent(&$0, e) } }
    }

    /// An event's values, in the order `insertEvents` and `SQLiteJournalStatements` name its columns.
    static func bindEvent(_ row: inout SQLiteBindings, _ e: EventRecord) {
        row.add(e.runID); row.add(e.time); row.add(e.type.rawValue); row.add(e.step); row.add(json: e.data)
    }

    private static func updateRun(_ run: RunRecord, _ statement: Statement) throws {
        try statement.run { row in
                row.add(run.status.rawValue); row.add(run.ending?.rawValue); row.add(run.startedAt); row.add(run.finishedAt)
                row.add(run.error); row.add(json: run.outputs); row.add(run.priority); row.add(labelsJSON(run.labels))
                row.add(run.maxRate); row.add(run.maxRateTimetable); row.add(run.id)
            }
    }

    private static func labelsJSON(_ labels: [String: String]) -> String {
        JSONValue.object(labels.mapValues { .string($0) }).jsonText
    }

    /// The runs table's columns in the order `runRecord` reads them: every read of runs selects
    /// these and `runRecord` takes them by position: GRDB's look-up by name lowercases the name
    /// at every access, a cost a serve answering run lists would feel.
    static let runColumns = """
        id, workflow_name, workflow_file, workflow_source, inputs_json, status, created_at, run_dir, priority, labels_json,
        ending, started_at, finished_at, error, outputs_json, requested_control, queue, queue_order, run_now, max_rate,
        max_rate_timetable, lease_until, owner_host, owner_pid, owner_start
        """

    /// A row of `SELECT \(runColumns)`.
    static func runRecord(_ row: Row) -> RunRecord {
        var run = RunRecord(
            id: row[0], workflowName: row[1], workflowFile: row[2], workflowSource: row[3],
            inputs: (try? JSONValue(parsing: row[4] as String)) ?? [:],
            status: RunStatus(rawValue: row[5]) ?? .failed, createdAt: row[6], runDir: row[7],
            priority: row[8],
            labels: ((try? JSONValue(parsing: row[9] as String))?.objectValue ?? [:])
                .compactMapValues(\.stringValue))
        run.ending = (row[10] as String?).flatMap(RunStatus.init(rawValue:))
        run.startedAt = row[11]
        run.finishedAt = row[12]
        run.error = row[13]
        run.outputs = (row[14] as String?).flatMap { try? JSONValue(parsing: $0) }
        run.requestedControl = (row[15] as String?).flatMap(RunControl.init(rawValue:))
        run.queue = row[16] ?? "default"
        run.queueOrder = row[17] ?? run.createdAt
        run.runNow = (row[18] as Int?) == 1
        run.maxRate = row[19]
        run.maxRateTimetable = row[20]
        run.leaseUntil = row[21]
        if let node = row[22] as String? {
            run.owner = OwnerIdentity(node: node, pid: row[23], startTime: row[24])
        }
        run.ownerIsLive = ownerIsLive(run.owner, leaseUntil: run.leaseUntil)
        return run
    }

    /// The columns `stepRecord` reads, in the order it reads them: by position, because looking
    /// a column up by name (case-insensitively) cost more than decoding it, for every column of
    /// every step of a 10,000-step run being resumed.
    private static let stepColumns = """
        run_id, id, step, kind, item_index, item_json, status, attempt, failures, next_attempt_at, idempotency_key,
        outputs_json, error_kind, error_code, error_message, started_at, finished_at, completion_seq, node
        """

    private static func stepRecord(_ row: SQLiteColumns) -> StepRecord {
        var s = StepRecord(runID: row.string(0) ?? "", id: row.string(1) ?? "", step: row.string(2) ?? "",
                           kind: row.string(3).flatMap(StepKind.init(rawValue:)) ?? .step,
                           status: row.string(6).flatMap(StepStatus.init(rawValue:)) ?? .pending)
        s.itemIndex = row.int(4)
        s.item = row.string(5).flatMap { try? JSONValue(parsing: $0) }
        s.attempt = row.int(7) ?? 0
        s.failures = row.int(8) ?? 0
        s.nextAttemptAt = row.double(9)
        s.idempotencyKey = row.string(10)
        s.outputs = row.string(11).flatMap { try? JSONValue(parsing: $0) }
        s.errorKind = row.string(12)
        s.errorCode = row.string(13)
        s.errorMessage = row.string(14)
        s.startedAt = row.double(15)
        s.finishedAt = row.double(16)
        s.completionSeq = row.int(17)
        s.node = row.string(18)
        return s
    }
}
