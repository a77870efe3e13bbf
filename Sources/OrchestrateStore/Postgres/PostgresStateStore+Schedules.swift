import Foundation
import OrchestrateJSON

/// Schedules in the PostgreSQL store. The claim of a due time is one conditional UPDATE of
/// `last_due` (the row lock makes a racing node wait, then find the condition false) in the
/// transaction that also creates the run.
extension PostgresStateStore {
    public func saveSchedule(_ entries: [ScheduleRecord]) throws {
        guard let name = entries.first?.name else { return }
        try pool.transaction { conn in
            try conn.execute("DELETE FROM schedules WHERE name = $1 AND entry > $2", [name, PGText.of(entries.count)])
            for e in entries {
                try conn.execute("""
                    INSERT INTO schedules (name, entry, workflow_name, workflow_file, workflow_source, cron, timezone, inputs_json,
                                           overlap, catchup, queue, priority, paused, last_due, last_run_id, created_at)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                    ON CONFLICT (name, entry) DO UPDATE SET
                        workflow_name = EXCLUDED.workflow_name, workflow_file = EXCLUDED.workflow_file,
                        workflow_source = EXCLUDED.workflow_source, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
                        inputs_json = EXCLUDED.inputs_json, overlap = EXCLUDED.overlap, catchup = EXCLUDED.catchup,
                        queue = EXCLUDED.queue, priority = EXCLUDED.priority
                    """, [e.name, PGText.of(e.entry), e.workflowName, e.workflowFile, e.workflowSource, e.cron, e.timeZone,
                          e.inputs.jsonText, e.overlap, PGText.of(e.catchup), e.queue, PGText.of(e.priority),
                          PGText.of(e.paused), PGText.of(e.lastDue), e.lastRunID, PGText.of(e.createdAt)])
            }
        }
    }

    public func schedules() throws -> [ScheduleRecord] {
        try pool.withConnection { conn in
            try conn.execute("SELECT * FROM schedules ORDER BY name, entry").all.map(Self.scheduleRecord)
        }
    }

    public func setSchedulePaused(_ name: String, paused: Bool, at time: Int64) throws -> Bool {
        try pool.withConnection { conn in
            try conn.execute("""
                UPDATE schedules SET paused = $2, last_due = CASE WHEN $2 THEN last_due ELSE GREATEST(last_due, $3) END
                WHERE name = $1
                """, [name, PGText.of(paused), PGText.of(time)]).affected > 0
        }
    }

    public func removeSchedule(_ name: String) throws -> Bool {
        try pool.withConnection { conn in
            try conn.execute("DELETE FROM schedules WHERE name = $1", [name]).affected > 0
        }
    }

    public func advanceSchedule(name: String, entry: Int, from expected: Int64, to due: Int64,
                                run: (run: RunRecord, events: [EventRecord])?, events: [EventRecord]) throws -> Bool
    {
        try pool.transaction { conn in
            let moved = try conn.execute("""
                UPDATE schedules SET last_due = $4, last_run_id = COALESCE($5, last_run_id)
                WHERE name = $1 AND entry = $2 AND last_due = $3 AND NOT paused
                """, [name, PGText.of(entry), PGText.of(expected), PGText.of(due), run?.run.id])
            guard moved.affected == 1 else { return false }
            if let run {
                try Self.insertRun(run.run, conn)
                try Self.notifyWork(conn)
            }
            try Self.insertEvents((run?.events ?? []) + events, conn)  // last: see "Event order"
            return true
        }
    }

    static func scheduleRecord(_ row: PGRow) -> ScheduleRecord {
        var s = ScheduleRecord(
            name: row.string("name") ?? "", entry: row.int("entry") ?? 0, workflowName: row.string("workflow_name") ?? "",
            workflowFile: row.string("workflow_file") ?? "", workflowSource: row.string("workflow_source") ?? "",
            cron: row.string("cron") ?? "", timeZone: row.string("timezone") ?? "UTC",
            inputs: json(row.string("inputs_json")) ?? [:], overlap: row.string("overlap") ?? "skip",
            catchup: row.double("catchup"), lastDue: row.int64("last_due") ?? 0, createdAt: row.double("created_at") ?? 0)
        s.queue = row.string("queue") ?? "default"
        s.priority = row.int("priority") ?? 0
        s.paused = row.bool("paused") ?? false
        s.lastRunID = row.string("last_run_id")
        return s
    }
}
