import Foundation
import OrchestrateJSON

/// Retention: finished runs past their period are removed in small transactions (see
/// `StateStore.pruneRuns`). The rows they leave dead are autovacuum's: deletes a batch at a
/// time are what it keeps up with, and the space is used again by new rows (bench/scale).
extension PostgresStateStore {
    public func setRetention(_ seconds: Double?, queue: String?) throws {
        try pool.transaction { conn in
            let key = RetentionSettings.key(queue: queue)
            if let seconds {
                try conn.execute("""
                    INSERT INTO queue_state (key, value) VALUES ($1, $2)
                    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                    """, [key, RetentionSettings.text(seconds)])
            } else {
                try conn.execute("DELETE FROM queue_state WHERE key = $1", [key])
            }
        }
    }

    public func retentionSettings() throws -> RetentionSettings {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT key, value FROM queue_state WHERE key = $1 OR starts_with(key, $2)",
                                        [RetentionSettings.storeWideKey, RetentionSettings.queueKeyPrefix])
            return RetentionSettings.from(rows.all.map { (key: $0.string("key") ?? "", value: $0.string("value") ?? "") })
        }
    }

    public func prunableRuns(_ rule: PruneRule, limit: Int) throws -> [PrunableRun] {
        guard !rule.statuses.isEmpty else { return [] }
        var sql = """
            SELECT id, status, queue, coalesce(finished_at, created_at) AS ended, run_dir FROM runs
            WHERE status IN ('cancelled', 'failed', 'succeeded') AND status IN (\(rule.statusList))
            """
        var parameters: [String?] = [PGText.of(limit)]
        if let olderThan = rule.olderThan {
            sql += " AND coalesce(finished_at, created_at) < \(Self.serverNow) - $2"
            parameters.append(PGText.of(olderThan))
        } else {
            sql += """
                 AND coalesce(finished_at, created_at) < \(Self.serverNow)
                    - coalesce(retention, ($2::jsonb ->> queue)::double precision, $3)
                """
            parameters += [rule.queuePeriodsJSON, PGText.of(PruneRule.finite(rule.settings.period))]
        }
        sql += """
             AND NOT EXISTS (SELECT 1 FROM watch_handoffs WHERE run_id = runs.id AND outcome = 'pending')
            ORDER BY coalesce(finished_at, created_at) LIMIT $1
            """
        return try pool.withConnection { conn in try conn.execute(sql, parameters).all.map(Self.prunableRun) }
    }

    public func pruneRuns(_ ids: [String]) throws -> [PrunableRun] {
        guard !ids.isEmpty else { return [] }
        return try pool.transaction { conn in
            // Locked, so a `retry` cannot queue one of them again while it goes.
            let runs = try conn.execute("""
                SELECT id, status, queue, coalesce(finished_at, created_at) AS ended, run_dir FROM runs
                WHERE id = ANY($1::text[]) AND status IN ('cancelled', 'failed', 'succeeded')
                AND NOT EXISTS (SELECT 1 FROM watch_handoffs WHERE run_id = runs.id AND outcome = 'pending')
                ORDER BY id FOR UPDATE
                """, [PGText.array(ids)]).all.map(Self.prunableRun)
            guard !runs.isEmpty else { return [] }
            let pruned = PGText.array(runs.map(\.id))
            let through = try conn.execute("SELECT max(seq) AS through FROM events WHERE run_id = ANY($1::text[])", [pruned])[0]
                .int64("through")
            try conn.execute("DELETE FROM events WHERE run_id = ANY($1::text[])", [pruned])
            try conn.execute("DELETE FROM leases WHERE holder LIKE ANY($1::text[])",
                             [PGText.array(runs.map { Self.likePrefix($0.id + "/") })])
            // Steps, checkpoints and items go with their run (ON DELETE CASCADE); hand-offs only
            // when their file is no longer in the folder (`WatchHandOff.Outcome.removed`).
            try conn.execute("DELETE FROM runs WHERE id = ANY($1::text[])", [pruned])
            try conn.execute("DELETE FROM watch_handoffs WHERE run_id = ANY($1::text[]) AND outcome = 'removed'", [pruned])
            var data: [String: JSONValue] = ["runs": .array(runs.map { .string($0.id) })]
            if let through {
                data["through"] = .int(through)
                try conn.execute("""
                    INSERT INTO queue_state (key, value) VALUES ('pruned_through', $1)
                    ON CONFLICT (key) DO UPDATE SET value = greatest(queue_state.value::bigint, EXCLUDED.value::bigint)::text
                    """, [String(through)])
            }
            try Self.insertEvents([EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: .runsPruned,
                                               data: .object(data))], conn)
            return runs
        }
    }

    public func prunedThrough() throws -> Int64 {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT value FROM queue_state WHERE key = 'pruned_through'")
            return rows.count == 1 ? rows[0].string("value").flatMap { Int64($0) } ?? 0 : 0
        }
    }

    /// Autovacuum's job here.
    public func reclaimSpace(maxPages: Int) throws -> Bool { false }

    static func prunableRun(_ row: PGRow) -> PrunableRun {
        PrunableRun(id: row.string("id") ?? "", status: row.string("status").flatMap(RunStatus.init(rawValue:)) ?? .failed,
                    queue: row.string("queue") ?? "default", finishedAt: row.double("ended") ?? 0,
                    runDir: row.string("run_dir") ?? "")
    }
}
