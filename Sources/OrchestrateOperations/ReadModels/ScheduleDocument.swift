import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// A schedule entry as JSON, as `schedules --json` and `GET /api/schedules` show it.
public enum ScheduleDocument {
    /// The next time the entry fires after both its last due time and `now`.
    public static func next(_ record: ScheduleRecord, now: Double) -> Int64? {
        var later = record
        later.lastDue = max(record.lastDue, Int64(now.rounded(.down)))
        return ScheduleRegistration.nextDue(later)
    }

    /// `next` (ISO 8601, UTC) is absent while paused or when the cron never fires again.
    public static func json(_ r: ScheduleRecord, now: Double) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(r.name), "entry": .int(Int64(r.entry)), "cron": .string(r.cron), "timezone": .string(r.timeZone),
            "overlap": .string(r.overlap), "paused": .bool(r.paused), "workflow": .string(r.workflowName),
            "file": .string(r.workflowFile), "queue": .string(r.queue), "inputs": r.inputs,
        ]
        if let c = r.catchup { o["catchup_seconds"] = .double(c) }
        if let run = r.lastRunID { o["last_run"] = .string(run) }
        if !r.paused, let n = next(r, now: now) { o["next"] = .string(ScheduleFirer.iso(n)) }
        return .object(o)
    }
}
