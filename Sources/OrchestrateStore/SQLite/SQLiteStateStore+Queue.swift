import Foundation
import GRDB

/// The queue's side of the SQLite store. Claims happen in one immediate transaction, so two
/// workers on one store never take the same run.
extension SQLiteStateStore {
    public func claimNextRuns(owner: OwnerIdentity, queues: [String], limit: Int, lease: Double) throws -> [RunRecord] {
        guard limit > 0, !queues.isEmpty else { return [] }
        let inQueues = "queue IN (\(queues.map { _ in "?" }.joined(separator: ",")))"
        return try write { db in
            let leaseUntil = try now() + lease
            var claimed: [RunRecord] = []
            let update = try db.cachedStatement(sql: """
                UPDATE runs SET owner_host = ?, owner_pid = ?, owner_start = ?, lease_until = ?, run_now = 0 WHERE id = ?
                """)
            func take(_ row: Row) throws {
                let run = Self.runRecord(row)
                try update.execute(arguments: [owner.node, owner.pid, owner.startTime, leaseUntil, run.id])
                var taken = run
                taken.takenFrom = run.owner
                taken.owner = owner
                taken.leaseUntil = leaseUntil
                taken.runNow = false
                taken.ownerIsLive = true
                claimed.append(taken)
            }
            // Runs a dead owner left unfinished first: at most the runs in progress. Ours and
            // live processes' are told from the owner columns, without decoding the run.
            func orphans() throws -> [Row] {
                let unfinished = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT \(Self.runColumns) FROM runs WHERE status IN ('running', 'compensating') AND \(inQueues)
                    ORDER BY run_now DESC, priority DESC, queue_order, created_at
                    """), arguments: StatementArguments(queues))
                var found: [Row] = []
                while found.count < limit, let row = try unfinished.next() {
                    if Self.isTakeable(row, by: owner) { found.append(row.copy()) }
                }
                return found
            }
            for row in try orphans() { try take(row) }
            // Then the queue in its order, read through `runs_queued_order` one row at a time:
            // a claim reads the runs it takes and those claimed by live workers but not yet
            // started (at most their free slots), not the whole queue.
            func free(_ wanted: Int) throws -> [Row] {
                let queued = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT \(Self.runColumns) FROM runs INDEXED BY runs_queued_order WHERE status = 'queued' AND \(inQueues)
                    ORDER BY run_now DESC, priority DESC, queue_order, created_at
                    """), arguments: StatementArguments(queues))
                var found: [Row] = []
                while found.count < wanted, let row = try queued.next() {
                    if Self.isTakeable(row, by: owner) { found.append(row.copy()) }
                }
                return found
            }
            if claimed.count < limit {
                for row in try free(limit - claimed.count) { try take(row) }
            }
            return claimed
        }
    }

    /// Whether the run in `row` (of `SELECT runColumns`) may be taken by `owner`: neither its
    /// own already nor a live process's (as `runRecord` judges `ownerIsLive`). Read from the
    /// owner columns alone: decoding a run (its inputs and labels are JSON) for each run a claim
    /// passes over cost a busy worker more than the claim.
    static func isTakeable(_ row: Row, by owner: OwnerIdentity) -> Bool {
        guard let node = row[22] as String? else { return true }
        let current = OwnerIdentity(node: node, pid: row[23], startTime: row[24])
        return current != owner && !ownerIsLive(current, leaseUntil: row[21])
    }

    public func claimPausedRuns(owner: OwnerIdentity, queues: [String], lease: Double) throws -> [RunRecord] {
        guard !queues.isEmpty else { return [] }
        return try write { db in
            let leaseUntil = try now() + lease
            var claimed: [RunRecord] = []
            for row in try Row.fetchAll(db, sql: """
                SELECT \(Self.runColumns) FROM runs WHERE status = ? AND queue IN (\(queues.map { _ in "?" }.joined(separator: ","))) ORDER BY queue_order
                """, arguments: StatementArguments([RunStatus.paused.rawValue] + queues))
            {
                let run = Self.runRecord(row)
                if run.owner == owner || run.ownerIsLive { continue }
                try db.execute(sql: "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_start = ?, lease_until = ? WHERE id = ?",
                               arguments: [owner.node, owner.pid, owner.startTime, leaseUntil, run.id])
                claimed.append(run)
            }
            return claimed
        }
    }

    public func updateQueueFields(_ id: String, status: RunStatus?, queueOrder: Double?, runNow: Bool?) throws {
        try write { db in
            if let status { try db.execute(sql: "UPDATE runs SET status = ? WHERE id = ?", arguments: [status.rawValue, id]) }
            if let queueOrder { try db.execute(sql: "UPDATE runs SET queue_order = ? WHERE id = ?", arguments: [queueOrder, id]) }
            if let runNow { try db.execute(sql: "UPDATE runs SET run_now = ? WHERE id = ?", arguments: [runNow ? 1 : 0, id]) }
        }
    }

    public func takeControls(owner: OwnerIdentity) throws -> [(runID: String, control: RunControl)] {
        try write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, requested_control FROM runs
                WHERE requested_control IS NOT NULL AND owner_host = ? AND owner_pid = ? AND owner_start = ?
                """, arguments: [owner.node, owner.pid, owner.startTime])
            guard !rows.isEmpty else { return [] }
            try db.execute(sql: """
                UPDATE runs SET requested_control = NULL
                WHERE requested_control IS NOT NULL AND owner_host = ? AND owner_pid = ? AND owner_start = ?
                """, arguments: [owner.node, owner.pid, owner.startTime])
            return rows.compactMap { row in
                (row["requested_control"] as String?).flatMap(RunControl.init(rawValue:)).map { (runID: row["id"], control: $0) }
            }
        }
    }

    public func setQueuePassive(_ passive: Bool) throws {
        try write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO queue_state (key, value) VALUES ('passive', ?)",
                           arguments: [passive ? "1" : "0"])
        }
    }

    public func isQueuePassive() throws -> Bool {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM queue_state WHERE key = 'passive'") == "1" }
    }

    public func setQueuePassive(_ passive: Bool, queue: String) throws {
        try write { db in
            if passive {
                try db.execute(sql: "INSERT OR REPLACE INTO queue_state (key, value) VALUES (?, '1')",
                               arguments: [QueueName.passiveKeyPrefix + queue])
            } else {
                try db.execute(sql: "DELETE FROM queue_state WHERE key = ?", arguments: [QueueName.passiveKeyPrefix + queue])
            }
        }
    }

    public func passiveQueues() throws -> Set<String> {
        try read { db in
            Set(try String.fetchAll(db, sql: "SELECT key FROM queue_state WHERE substr(key, 1, ?) = ?",
                                    arguments: [QueueName.passiveKeyPrefix.count, QueueName.passiveKeyPrefix])
                .map { String($0.dropFirst(QueueName.passiveKeyPrefix.count)) })
        }
    }

    public func setQueueRate(_ rate: String?) throws {
        try write { db in
            if let rate {
                try db.execute(sql: "INSERT OR REPLACE INTO queue_state (key, value) VALUES ('max_rate', ?)", arguments: [rate])
            } else {
                try db.execute(sql: "DELETE FROM queue_state WHERE key = 'max_rate'")
            }
        }
    }

    public func queueRate() throws -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM queue_state WHERE key = 'max_rate'") }
    }

    public func nodes() throws -> [NodeRecord] {
        try read { db in
            let owners = try Row.fetchAll(db, sql: """
                SELECT owner_host, owner_pid, owner_start, lease_until FROM runs WHERE owner_host IS NOT NULL
                """).map { row -> (owner: OwnerIdentity, leaseUntil: Double?, live: Bool) in
                let owner = OwnerIdentity(node: row["owner_host"], pid: row["owner_pid"] ?? 0, startTime: row["owner_start"] ?? 0)
                let leaseUntil: Double? = row["lease_until"]
                return (owner, leaseUntil, Self.ownerIsLive(owner, leaseUntil: leaseUntil))
            }
            let workerEvents = try Row.fetchAll(db, sql: "SELECT \(Self.eventColumns) FROM events WHERE run_id IS NULL AND type IN (?, ?) ORDER BY seq",
                                                arguments: [EventType.workerStarted.rawValue, EventType.workerStopped.rawValue])
            return NodeRecord.summarize(owners: owners, workerEvents: workerEvents.map(Self.eventRecord))
        }
    }

    /// Counts from `run_counts` (kept by triggers, schema v12), not from the runs.
    public func queueFigures() throws -> QueueFigures {
        try read { db in
            var counts: [QueueFigures.Count] = []
            var oldest: [String: Double] = [:]
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT queue, status, n FROM run_counts WHERE n > 0")) {
                guard let status = RunStatus(rawValue: row["status"]) else { continue }
                let queue: String = row["queue"]
                counts.append(QueueFigures.Count(queue: queue, status: status, runs: row["n"]))
                if status == .queued,
                   let time = try Double.fetchOne(db.cachedStatement(sql: QueueFigures.oldestQueuedSQL + "?"), arguments: [queue])
                {
                    oldest[queue] = time
                }
            }
            let held = try Int.fetchOne(db.cachedStatement(sql: QueueFigures.heldSQL)) ?? 0
            return QueueFigures(runs: counts, oldestQueued: oldest, heldSteps: held)
        }
    }

    /// The deletion journals a `run.deleted` event first, so it takes a seq above every event it
    /// deletes: a new event takes the highest seq + 1 (migration v10), so the highest seq must
    /// stay taken.
    public func deleteRun(_ id: String) throws {
        try write { db in
            try Self.insertEvents([EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: .runDeleted,
                                               data: ["run": .string(id)])], db)
            try db.execute(sql: "DELETE FROM events WHERE run_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM leases WHERE holder LIKE ?", arguments: [id + "/%"])
            try db.execute(sql: "DELETE FROM runs WHERE id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM watch_handoffs WHERE run_id = ? AND outcome = 'removed'", arguments: [id])
        }
    }

    /// SQLite cannot tell another process's writes as they happen: workers poll.
    public func watchForWork(_ wake: @escaping @Sendable () -> Void) throws -> (any WorkWatch)? { nil }
}
