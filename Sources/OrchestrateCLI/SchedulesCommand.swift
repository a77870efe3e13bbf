import ArgumentParser
import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateModel
import OrchestrateOperations
import OrchestrateStore

struct SchedulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedules",
        abstract: "List the registered schedules with their next times.",
        discussion: """
            One line per `on: schedule:` entry: name, entry number, cron, time zone, overlap, \
            catchup, whether it is paused, the next time (in the entry's zone) and the last run it started.

            Examples:
              orchestrate schedules
              orchestrate schedules --json
            """)

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        let now = try ScheduleClock(store: store).now()
        for record in try store.schedules() {
            Terminal.line(global.json ? ScheduleListing.json(record, now: now).jsonText : ScheduleListing.line(record, now: now))
        }
    }
}

/// How a schedule entry is shown by `schedules` and `schedule add`.
enum ScheduleListing {
    static func next(_ record: ScheduleRecord, now: Double) -> Int64? { ScheduleDocument.next(record, now: now) }

    /// `2026-11-24 02:00 +01:00`: the wall time in the entry's zone, with that zone's offset
    /// then (abbreviations such as CET are not available everywhere).
    static func local(_ time: Int64, zone: String) -> String {
        guard let tz = TimeZone(identifier: zone) else { return ScheduleFirer.iso(time) }
        let offset = tz.secondsFromGMT(for: Date(timeIntervalSince1970: Double(time)))
        let minutes = abs(offset) / 60
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(tz.wallTime(at: time)) \(offset < 0 ? "-" : "+")\(two(minutes / 60)):\(two(minutes % 60))"
    }

    static func line(_ r: ScheduleRecord, now: Double) -> String {
        let next = r.paused ? "paused" : next(r, now: now).map { local($0, zone: r.timeZone) } ?? "never"
        let catchup = r.catchup.map { "catchup \(durationText($0))" } ?? "no catchup"
        return "\(r.name)#\(r.entry)  \(r.cron.padding(16)) \(r.timeZone.padding(16)) overlap \(r.overlap.padding(6)) "
            + "\(catchup.padding(16)) next \(next)  last run \(r.lastRunID ?? "-")"
    }

    /// A number of seconds as a workflow writes it: 14400 → `4h`, 5400 → `1h30m`, 90061 →
    /// `1d1h1m1s`, 0.5 → `500ms`.
    static func durationText(_ seconds: Double) -> String {
        let milliseconds = Int64((seconds * 1000).rounded())
        guard milliseconds > 0 else { return "0s" }
        var rest = milliseconds
        var text = ""
        for (unit, size) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] where rest >= size {
            text += "\(rest / size)\(unit)"
            rest %= size
        }
        return text
    }

    static func json(_ r: ScheduleRecord, now: Double) -> JSONValue { ScheduleDocument.json(r, now: now) }
}
