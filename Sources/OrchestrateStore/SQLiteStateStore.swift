import Foundation
import GRDB
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
/// Several processes may share the directory: writes take the database's write lock
/// (`BEGIN IMMEDIATE`) and wait for it up to `busyTimeout`. They are on one machine, so the
/// store's clock is this machine's clock, and they are one node: a lease is never the only
/// sign of life (an owner's pid is), so a commit is fenced by ownership alone.
public final class SQLiteStateStore: StateStore, @unchecked Sendable {
    public enum Synchronous: String, Sendable { case normal = "NORMAL", full = "FULL" }

    public let path: String
    private let queue: DatabaseQueue

    /// Opens (creating if needed) the store in `directory`. The directory is created 0700 and
    /// the database 0600: state may hold inputs and outputs that are nobody else's business.
    public init(directory: String, synchronous: Synchronous = .normal, busyTimeout: TimeInterval = 30) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        path = (directory as NSString).appendingPathComponent("state.sqlite")
        // Create the file ourselves so it is 0600 from its first byte; SQLite gives the -wal
        // and -shm files the database file's permissions.
        let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StoreError.cannotOpen(path: path, reason: String(cString: strerror(errno)))
        }
        close(fd)

        var config = Configuration()
        config.busyMode = .timeout(busyTimeout)
        config.journalMode = .wal
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous.rawValue)")
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
            queue = try DatabaseQueue(path: path, configuration: config)
            try SQLiteSchema.migrator().migrate(queue)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.cannotOpen(path: path, reason: "\(error)")
        }
    }

    /// Runs `body` in an immediate write transaction.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try queue.writeWithoutTransaction { db in
            var result: T?
            try db.inTransaction(.immediate) {
                result = try body(db)
                return .commit
            }
            return result!
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try queue.read(body)
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
                                  max_rate_timetable)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [run.id, run.workflowName, run.workflowFile, run.workflowSource,
                                 run.inputs.jsonText, run.status.rawValue, run.createdAt, run.runDir,
                                 run.priority, Self.labelsJSON(run.labels), run.queueOrder, run.maxRate, run.queue,
                                 run.maxRateTimetable])
            try Self.insertEvents(events, db)
    }

    public func run(_ id: String) throws -> RunRecord? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM runs WHERE id = ?", arguments: [id]).map(Self.runRecord)
        }
    }

    public func listRuns(_ filter: RunFilter) throws -> [RunRecord] {
        var sql = "SELECT * FROM runs WHERE 1"
        var arguments: StatementArguments = []
        if let statuses = filter.statuses, !statuses.isEmpty {
            sql += " AND status IN (\(statuses.map { _ in "?" }.joined(separator: ",")))"
            for s in statuses.sorted(by: { $0.rawValue < $1.rawValue }) { arguments += [s.rawValue] }
        }
        if filter.runNowOnly { sql += " AND run_now = 1" }
        if let queues = filter.queues, !queues.isEmpty {
            sql += " AND queue IN (\(queues.map { _ in "?" }.joined(separator: ",")))"
            for q in queues.sorted() { arguments += [q] }
        }
        sql += " ORDER BY created_at, id"
        let rows = try read { db in try Row.fetchAll(db, sql: sql, arguments: arguments).map(Self.runRecord) }
        let matching = rows.filter { run in filter.labels.allSatisfy { run.labels[$0.key] == $0.value } }
        if let limit = filter.limit { return Array(matching.suffix(limit)) }
        return matching
    }

    public func claimRun(_ id: String, owner: OwnerIdentity, lease: Double) throws -> Bool {
        try write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM runs WHERE id = ?", arguments: [id]) else {
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
        try write { db in
            if let (runID, owner) = batch.fence { try Self.checkFence(runID, owner, db) }
            for run in batch.runUpdates { try Self.updateRun(run, db) }
            if !batch.stepUpserts.isEmpty {
                let statement = try db.cachedStatement(sql: """
                    INSERT OR REPLACE INTO steps (run_id, id, step, kind, item_index, item_json, status, attempt, failures,
                        next_attempt_at, idempotency_key, outputs_json, error_kind, error_code, error_message,
                        started_at, finished_at, completion_seq, node)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                for s in batch.stepUpserts {
                    try statement.execute(arguments: [
                        s.runID, s.id, s.step, s.kind.rawValue, s.itemIndex, s.item?.jsonText, s.status.rawValue,
                        s.attempt, s.failures, s.nextAttemptAt, s.idempotencyKey, s.outputs?.jsonText, s.errorKind,
                        s.errorCode, s.errorMessage, s.startedAt, s.finishedAt, s.completionSeq, s.node,
                    ])
                }
            }
            for (runID, id) in batch.deletedSteps {
                try db.execute(sql: "DELETE FROM steps WHERE run_id = ? AND id = ?", arguments: [runID, id])
                try db.execute(sql: "DELETE FROM checkpoints WHERE run_id = ? AND step_id = ?", arguments: [runID, id])
            }
            try Self.insertEvents(batch.events, db)
            if !batch.releasedLeases.isEmpty {
                let statement = try db.cachedStatement(sql: "DELETE FROM leases WHERE holder = ?")
                for holder in batch.releasedLeases { try statement.execute(arguments: [holder]) }
            }
            if batch.releasesRun, let (runID, owner) = batch.fence { try Self.release(runID, owner, db) }
        }
    }

    public func steps(ofRun runID: String) throws -> [StepRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM steps WHERE run_id = ?", arguments: [runID]).map(Self.stepRecord)
        }
    }

    // MARK: Checkpoints

    public func saveCheckpoint(runID: String, stepID: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try write { db in
            if let fence { try Self.checkFence(runID, fence, db) }
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

    public func events(runID: String?, afterSeq: Int64, limit: Int) throws -> [EventRecord] {
        try read { db in
            let rows: [Row]
            if let runID {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                                        arguments: [runID, afterSeq, limit])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                                        arguments: [afterSeq, limit])
            }
            return rows.map(Self.eventRecord)
        }
    }

    public func latestProgress(runID: String) throws -> [EventRecord] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT * FROM events WHERE seq IN (
                    SELECT MAX(seq) FROM events WHERE run_id = ? AND type = ? GROUP BY step)
                ORDER BY seq
                """, arguments: [runID, EventType.stepProgress.rawValue]).map(Self.eventRecord)
        }
    }

    // MARK: Items

    public func addItem(runID: String, stepID: String, id: String, json: String, event: EventRecord?) throws {
        try write { db in try Self.insertItem(runID: runID, stepID: stepID, id: id, json: json, event: event, db) }
    }

    static func insertItem(runID: String, stepID: String, id: String, json: String, event: EventRecord?,
                           _ db: Database) throws
    {
        if let event { try insertEvents([event], db) }
        let seq = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(seq), 0) + 1 FROM items WHERE run_id = ? AND step_id = ?",
                                     arguments: [runID, stepID]) ?? 1
        try db.execute(sql: """
            INSERT INTO items (run_id, step_id, id, seq, json, status, added_at) VALUES (?, ?, ?, ?, ?, 'queued', ?)
            """, arguments: [runID, stepID, id, seq, json, Date().timeIntervalSince1970])
    }

    public func items(runID: String, stepID: String) throws -> [ItemRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM items WHERE run_id = ? AND step_id = ? ORDER BY seq",
                             arguments: [runID, stepID]).map(Self.itemRecord)
        }
    }

    public func nextQueuedItem(runID: String, stepID: String, after seq: Int64) throws -> ItemRecord? {
        try read { db in
            try Row.fetchOne(db, sql: """
                SELECT * FROM items WHERE run_id = ? AND step_id = ? AND seq > ? AND status = 'queued' ORDER BY seq LIMIT 1
                """, arguments: [runID, stepID, seq]).map(Self.itemRecord)
        }
    }

    private static func itemRecord(_ row: Row) -> ItemRecord {
        ItemRecord(runID: row["run_id"], stepID: row["step_id"], id: row["id"], seq: row["seq"], json: row["json"],
                   status: ItemRecord.Status(rawValue: row["status"]) ?? .queued, error: row["error"],
                   checkpoint: (row["checkpoint"] as Data?).map { [UInt8]($0) })
    }

    public func finishItem(runID: String, stepID: String, id: String, error: String?, event: EventRecord?,
                           fence: OwnerIdentity?) throws
    {
        try write { db in
            if let fence { try Self.checkFence(runID, fence, db) }
            try db.execute(sql: """
                UPDATE items SET status = ?, error = ?, finished_at = ? WHERE run_id = ? AND step_id = ? AND id = ?
                """, arguments: [error == nil ? "done" : "failed", error, Date().timeIntervalSince1970, runID, stepID, id])
            if let event { try Self.insertEvents([event], db) }
        }
    }

    public func saveItemCheckpoint(runID: String, stepID: String, id: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try write { db in
            if let fence { try Self.checkFence(runID, fence, db) }
            try db.execute(sql: "UPDATE items SET checkpoint = ? WHERE run_id = ? AND step_id = ? AND id = ?",
                           arguments: [Data(data), runID, stepID, id])
        }
    }

    /// Throws `ownershipLost` unless `owner` owns the run (one machine: ownership alone).
    private static func checkFence(_ runID: String, _ owner: OwnerIdentity, _ db: Database) throws {
        let row = try Row.fetchOne(db, sql: "SELECT owner_host, owner_pid, owner_start FROM runs WHERE id = ?", arguments: [runID])
        guard let row, row["owner_host"] as String? == owner.node, row["owner_pid"] as Int32? == owner.pid,
              row["owner_start"] as Int64? == owner.startTime
        else { throw StoreError.ownershipLost(runID: runID) }
    }

    // MARK: Row mapping

    static func eventRecord(_ row: Row) -> EventRecord {
        EventRecord(seq: row["seq"], runID: row["run_id"], time: row["time"], type: EventType(rawValue: row["type"]),
                    step: row["step"], data: (try? JSONValue(parsing: row["data_json"] as String)) ?? [:])
    }

    static func insertEvents(_ events: [EventRecord], _ db: Database) throws {
        guard !events.isEmpty else { return }
        let statement = try db.cachedStatement(sql: "INSERT INTO events (run_id, time, type, step, data_json) VALUES (?, ?, ?, ?, ?)")
        for e in events {
            try statement.execute(arguments: [e.runID, e.time, e.type.rawValue, e.step, e.data.jsonText])
        }
    }

    private static func updateRun(_ run: RunRecord, _ db: Database) throws {
        try db.execute(sql: """
            UPDATE runs SET status = ?, ending = ?, started_at = ?, finished_at = ?, error = ?, outputs_json = ?,
                            priority = ?, labels_json = ?, max_rate = ?, max_rate_timetable = ?
            WHERE id = ?
            """, arguments: [run.status.rawValue, run.ending?.rawValue, run.startedAt, run.finishedAt, run.error,
                             run.outputs?.jsonText, run.priority, labelsJSON(run.labels), run.maxRate,
                             run.maxRateTimetable, run.id])
    }

    private static func labelsJSON(_ labels: [String: String]) -> String {
        JSONValue.object(labels.mapValues { .string($0) }).jsonText
    }

    static func runRecord(_ row: Row) -> RunRecord {
        var run = RunRecord(
            id: row["id"], workflowName: row["workflow_name"], workflowFile: row["workflow_file"],
            workflowSource: row["workflow_source"],
            inputs: (try? JSONValue(parsing: row["inputs_json"] as String)) ?? [:],
            status: RunStatus(rawValue: row["status"]) ?? .failed, createdAt: row["created_at"], runDir: row["run_dir"],
            priority: row["priority"],
            labels: ((try? JSONValue(parsing: row["labels_json"] as String))?.objectValue ?? [:])
                .compactMapValues(\.stringValue))
        run.ending = (row["ending"] as String?).flatMap(RunStatus.init(rawValue:))
        run.startedAt = row["started_at"]
        run.finishedAt = row["finished_at"]
        run.error = row["error"]
        run.outputs = (row["outputs_json"] as String?).flatMap { try? JSONValue(parsing: $0) }
        run.requestedControl = (row["requested_control"] as String?).flatMap(RunControl.init(rawValue:))
        run.queue = row["queue"] ?? "default"
        run.queueOrder = row["queue_order"] ?? run.createdAt
        run.runNow = (row["run_now"] as Int?) == 1
        run.maxRate = row["max_rate"]
        run.maxRateTimetable = row["max_rate_timetable"]
        run.leaseUntil = row["lease_until"]
        if let node = row["owner_host"] as String? {
            run.owner = OwnerIdentity(node: node, pid: row["owner_pid"], startTime: row["owner_start"])
        }
        run.ownerIsLive = ownerIsLive(run.owner, leaseUntil: run.leaseUntil)
        return run
    }

    private static func stepRecord(_ row: Row) -> StepRecord {
        var s = StepRecord(runID: row["run_id"], id: row["id"], step: row["step"],
                           kind: StepKind(rawValue: row["kind"]) ?? .step,
                           status: StepStatus(rawValue: row["status"]) ?? .pending)
        s.itemIndex = row["item_index"]
        s.item = (row["item_json"] as String?).flatMap { try? JSONValue(parsing: $0) }
        s.attempt = row["attempt"]
        s.failures = row["failures"]
        s.nextAttemptAt = row["next_attempt_at"]
        s.idempotencyKey = row["idempotency_key"]
        s.outputs = (row["outputs_json"] as String?).flatMap { try? JSONValue(parsing: $0) }
        s.errorKind = row["error_kind"]
        s.errorCode = row["error_code"]
        s.errorMessage = row["error_message"]
        s.startedAt = row["started_at"]
        s.finishedAt = row["finished_at"]
        s.completionSeq = row["completion_seq"]
        s.node = row["node"]
        return s
    }
}
