import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore

/// Turns a workflow's `on.schedule` into the store's records (`orchestrate schedule add`), and
/// computes when entries fire next (`orchestrate schedules`).
public enum ScheduleRegistration {
    public struct Problem: Error, CustomStringConvertible { public let description: String }

    /// The records of `workflow`'s schedule entries under `name`, first due after `now`.
    /// Inputs get the workflow's defaults and relative paths are made absolute against the
    /// workflow file's folder; entries without `timezone:` take `defaultZone`.
    public static func records(_ workflow: Workflow, name: String, queue: String, priority: Int, defaultZone: TimeZone,
                               now: Double) throws(Problem) -> [ScheduleRecord]
    {
        guard !workflow.triggers.schedules.isEmpty else {
            throw Problem(description: "\(workflow.file) has no 'on: schedule:' entries to register")
        }
        let folder = (workflow.file as NSString).deletingLastPathComponent
        return try workflow.triggers.schedules.enumerated().map { (index, trigger) throws(Problem) -> ScheduleRecord in
            let inputs: JSONValue
            do {
                inputs = try workflow.resolveInputs(strings: [:], json: trigger.inputs, currentDirectory: folder.isEmpty ? "/" : folder)
            } catch {
                throw Problem(description: "\(trigger.location): \(error)")
            }
            var record = ScheduleRecord(
                name: name, entry: index + 1, workflowName: workflow.name, workflowFile: workflow.file,
                workflowSource: workflow.source, cron: trigger.cron.text,
                timeZone: (trigger.timeZone ?? defaultZone).identifier, inputs: inputs, overlap: trigger.overlap.rawValue,
                catchup: trigger.catchup.map(\.inSeconds),
                lastDue: Int64(now.rounded(.down)), createdAt: now)
            record.queue = queue
            record.priority = priority
            return record
        }
    }

    /// The zone schedules without `timezone:` use: `TZ` when it names one, else the local zone.
    public static func defaultZone(environment: [String: String] = ProcessInfo.processInfo.environment) -> TimeZone {
        if let tz = environment["TZ"], let zone = TimeZone(identifier: tz.hasPrefix(":") ? String(tz.dropFirst()) : tz) {
            return zone
        }
        return TimeZone.current
    }

    /// When `record` fires next after its last due time, or nil if it never does (or its cron
    /// or zone no longer parse).
    public static func nextDue(_ record: ScheduleRecord) -> Int64? {
        guard let cron = try? CronExpression.parse(record.cron), let zone = TimeZone(identifier: record.timeZone) else { return nil }
        return cron.nextTime(after: record.lastDue, in: zone)
    }
}
