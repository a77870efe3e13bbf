import Foundation
import GRDB
import OrchestrateJSON

/// Retention: finished runs past their period are removed in small transactions (see
/// `StateStore.pruneRuns`), and the pages they held go back to the file system a few at a
/// time (`auto_vacuum = INCREMENTAL`).
extension SQLiteStateStore {
    public func setRetention(_ seconds: Double?, queue: String?) throws {
        try write { db in
            let key = RetentionSettings.key(queue: queue)
            if let seconds {
                try db.execute(sql: "INSERT OR REPLACE INTO queue_state (key, value) VALUES (?, ?)",
                               arguments: [key, RetentionSettings.text(seconds)])
            } else {
                try db.execute(sql: "DELETE FROM queue_state WHERE key = ?", arguments: [key])
            }
        }
    }

    public func retentionSettings() throws -> RetentionSettings {
        try read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM queue_state WHERE key = ? OR key LIKE ?",
                                        arguments: [RetentionSettings.storeWideKey, RetentionSettings.queueKeyPrefix + "%"])
            return RetentionSettings.from(rows.map { (key: $0[0] as String, value: $0[1] as String) })
        }
    }

    public func prunableRuns(_ rule: PruneRule, limit: Int) throws -> [PrunableRun] {
        guard !rule.statuses.isEmpty else { return [] }
        let ended = "coalesce(finished_at, created_at)"
        var sql = """
            SELECT id, status, queue, \(ended), run_dir FROM runs
            WHERE status IN ('cancelled', 'failed', 'succeeded') AND status IN (\(rule.statusList))
            """
        var arguments: StatementArguments
        let now = try self.now()
        if let olderThan = rule.olderThan {
            sql += " AND \(ended) < ?"
            arguments = [now - olderThan]
        } else {
            sql += """
                 AND \(ended) < ? - coalesce(retention, (SELECT value FROM json_each(?) WHERE key = runs.queue), ?)
                """
            arguments = [now, rule.queuePeriodsJSON, PruneRule.finite(rule.settings.period)]
        }
        sql += """
             AND NOT EXISTS (SELECT 1 FROM watch_handoffs WHERE run_id = runs.id AND outcome = 'pending')
            ORDER BY \(ended) LIMIT ?
            """
        arguments += [limit]
        return try read { db in try Row.fetchAll(db, sql: sql, arguments: arguments).map(Self.prunableRun) }
    }

    public func pruneRuns(_ ids: [String]) throws -> [PrunableRun] {
        guard !ids.isEmpty else { return [] }
        return try write { db in
            let asked = JSONValue.array(ids.map { .string($0) }).jsonText
            let runs = try Row.fetchAll(db, sql: """
                SELECT id, status, queue, coalesce(finished_at, created_at), run_dir FROM runs
                WHERE id IN (SELECT value FROM json_each(?)) AND status IN ('cancelled', 'failed', 'succeeded')
                AND NOT EXISTS (SELECT 1 FROM watch_handoffs WHERE run_id = runs.id AND outcome = 'pending')
                """, arguments: [asked]).map(Self.prunableRun)
            guard !runs.isEmpty else { return [] }
            let pruned = JSONValue.array(runs.map { .string($0.id) }).jsonText
            let through = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM events WHERE run_id IN (SELECT value FROM json_each(?))",
                                             arguments: [pruned])
            // Journaled before the deletion: a new event takes the highest seq + 1, and the
            // highest may be among those removed (see migration v10).
            var data: [String: JSONValue] = ["runs": .array(runs.map { .string($0.id) })]
            if let through { data["through"] = .int(through) }
            try Self.insertEvents([EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: .runsPruned,
                                               data: .object(data))], db)
            try db.execute(sql: "DELETE FROM events WHERE run_id IN (SELECT value FROM json_each(?))", arguments: [pruned])
            for run in runs {
                try db.execute(sql: "DELETE FROM leases WHERE holder LIKE ?", arguments: [run.id + "/%"])
            }
            // Steps, checkpoints and items go with their run (ON DELETE CASCADE); hand-offs only
            // when their file is no longer in the folder (`WatchHandOff.Outcome.removed`).
            try db.execute(sql: "DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", arguments: [pruned])
            try db.execute(sql: "DELETE FROM watch_handoffs WHERE run_id IN (SELECT value FROM json_each(?)) AND outcome = 'removed'",
                           arguments: [pruned])
            if let through {
                try db.execute(sql: """
                    INSERT INTO queue_state (key, value) VALUES ('pruned_through', ?)
                    ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))
                    """, arguments: [String(through)])
            }
            return runs
        }
    }

    public func prunedThrough() throws -> Int64 {
        try read { db in
            try String.fetchOne(db, sql: "SELECT value FROM queue_state WHERE key = 'pruned_through'").flatMap { Int64($0) } ?? 0
        }
    }

    public func reclaimSpace(maxPages: Int) throws -> Bool {
        try writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2 else { return false }
            try db.execute(sql: "PRAGMA incremental_vacuum(\(max(1, maxPages)))")
            return (try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0) > 0
        }
    }

    /// Whether the database gives freed pages back (`auto_vacuum = INCREMENTAL`).
    public func vacuumsIncrementally() throws -> Bool {
        try read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2 }
    }

    /// Switches a database made before incremental vacuum to it, with one full VACUUM: the
    /// file is rewritten (it needs as much free space again) and every writer waits until it
    /// is done. Returns false when it already was.
    public func enableIncrementalVacuum() throws -> Bool {
        try writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 else { return false }
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute(sql: "VACUUM")
            return true
        }
    }

    /// The file's size in bytes as SQLite counts it (pages times page size), WAL excluded.
    public func databaseBytes() throws -> Int64 {
        try read { db in
            (try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0) * (try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0)
        }
    }

    static func prunableRun(_ row: Row) -> PrunableRun {
        PrunableRun(id: row[0], status: RunStatus(rawValue: row[1]) ?? .failed, queue: row[2], finishedAt: row[3], runDir: row[4])
    }
}
