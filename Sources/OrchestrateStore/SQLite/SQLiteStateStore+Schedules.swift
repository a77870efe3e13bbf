import Foundation
import GRDB
import OrchestrateJSON

/// Schedules in the SQLite store. The claim of a due time is a compare-and-set of `last_due`
/// inside the immediate transaction that also creates the run: SQLite's single writer makes
/// the check and the write one step.
extension SQLiteStateStore {
    public func saveSchedule(_ entries: [ScheduleRecord]) throws {
        guard let name = entries.first?.name else { return }
        try write { db in
            try db.execute(sql: "DELETE FROM schedules WHERE name = ? AND entry > ?", arguments: [name, entries.count])
            for e in entries {
                try db.execute(sql: """
                    INSERT INTO schedules (name, entry, workflow_name, workflow_file, workflow_source, cron, timezone, inputs_json,
                                           overlap, catchup, queue, priority, paused, last_due, last_run_id, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (name, entry) DO UPDATE SET
                        workflow_name = excluded.workflow_name, workflow_file = excluded.workflow_file,
                        workflow_source = excluded.workflow_source, cron = excluded.cron, timezone = excluded.timezone,
                        inputs_json = excluded.inputs_json, overlap = excluded.overlap, catchup = excluded.catchup,
                        queue = excluded.queue, priority = excluded.priority
                    """, arguments: [e.name, e.entry, e.workflowName, e.workflowFile, e.workflowSource, e.cron, e.timeZone,
                                     e.inputs.jsonText, e.overlap, e.catchup, e.queue, e.priority, e.paused ? 1 : 0,
                                     e.lastDue, e.lastRunID, e.createdAt])
            }
        }
    }

    public func schedules() throws -> [ScheduleRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM schedules ORDER BY name, entry").map(Self.scheduleRecord)
        }
    }

    public func setSchedulePaused(_ name: String, paused: Bool, at time: Int64) throws -> Bool {
        try write { db in
            try db.execute(sql: """
                UPDATE schedules SET paused = ?, last_due = CASE WHEN ? THEN last_due ELSE MAX(last_due, ?) END WHERE name = ?
                """, arguments: [paused ? 1 : 0, paused ? 1 : 0, time, name])
            return db.changesCount > 0
        }
    }

    public func removeSchedule(_ name: String) throws -> Bool {
        try write { db in
            try db.execute(sql: "DELETE FROM schedules WHERE name = ?", arguments: [name])
            return db.changesCount > 0
        }
    }

    public func advanceSchedule(name: String, entry: Int, from expected: Int64, to due: Int64,
                                run: (run: RunRecord, events: [EventRecord])?, events: [EventRecord]) throws -> Bool
    {
        try write { db in
            try db.execute(sql: """
                UPDATE schedules SET last_due = ?, last_run_id = COALESCE(?, last_run_id)
                WHERE name = ? AND entry = ? AND last_due = ? AND paused = 0
                """, arguments: [due, run?.run.id, name, entry, expected])
            guard db.changesCount == 1 else { return false }
            if let run { try Self.insertRun(run.run, events: run.events, db) }
            try Self.insertEvents(events, db)
            return true
        }
    }

    static func scheduleRecord(_ row: Row) -> ScheduleRecord {
        var s = ScheduleRecord(
            name: row["name"], entry: row["entry"], workflowName: row["workflow_name"], workflowFile: row["workflow_file"],
            workflowSource: row["workflow_source"], cron: row["cron"], timeZone: row["timezone"],
            inputs: (try? JSONValue(parsing: row["inputs_json"] as String)) ?? [:], overlap: row["overlap"],
            catchup: row["catchup"], lastDue: row["last_due"], createdAt: row["created_at"])
        s.queue = row["queue"]
        s.priority = row["priority"]
        s.paused = (row["paused"] as Int) != 0
        s.lastRunID = row["last_run_id"]
        return s
    }
}
