import Foundation
import OrchestrateEngine
import OrchestrateStore

/// What `serve` prints: one line per run started, interrupted or finished and per queue
/// change; with `--json`, every journaled event of its runs as JSON lines.
final class ServePrinter: RunObserver, @unchecked Sendable {
    private let json: Bool

    init(json: Bool) {
        self.json = json
    }

    func runEvent(_ event: EventRecord) {
        if json {
            Terminal.line(event.json.jsonText)
            return
        }
        let time = RunDisplay.time(event.time)
        let run = event.runID ?? ""
        let d = event.data
        switch event.type {
        case EventType.runStarted, EventType.runResumed:
            // A run another process left unfinished (a foreground `run` killed, a serve that
            // died) is adopted here: say whose it was, so nobody wonders why it moved.
            let adopted = d["taken_from"].map { from in
                ": adopted from pid \(from["pid"]?.intValue ?? 0) on \(from["node"]?.stringValue ?? "?"), which no longer runs it"
            } ?? ""
            Terminal.logLine("\(time) \(run) \(event.type == EventType.runStarted ? "started" : "resumed") (\(d["workflow"]?.stringValue ?? ""))"
                + adopted)
        case EventType.runInterrupted:
            Terminal.logLine("\(time) \(run) interrupted, now \(d["status"]?.stringValue ?? "")")
        case EventType.runFinished:
            Terminal.logLine("\(time) \(run) \(d["status"]?.stringValue ?? "finished")" + (d["error"]?.stringValue.map { ": \($0)" } ?? ""))
        case EventType.stepRetrying:
            Terminal.logLine("\(time) \(run) \(event.step ?? "") retrying in \(d["delay_ms"]?.intValue ?? 0)ms: \(d["reason"]?.stringValue ?? "")")
        case EventType.watchHandedOver:
            let what = d["item"]?.stringValue.map { "item \($0) of \(run)" } ?? "run \(run)"
            Terminal.logLine("\(time) \(d["path"]?.stringValue ?? "") settled: handed over as \(what)")
        case EventType.watchFinished:
            let after = d["after"]?.stringValue ?? ""
            Terminal.logLine("\(time) \(d["path"]?.stringValue ?? "") " + (d["succeeded"]?.boolValue == true
                ? "done (\(after)\(d["to"]?.stringValue.map { " \($0)" } ?? ""))"
                : "left in place: \(d["reason"]?.stringValue ?? "its work failed")"))
        case EventType.queuePreempted:
            Terminal.logLine("\(time) pre-empted \(d["run"]?.stringValue ?? "") for \(d["for"]?.stringValue ?? "")")
        case EventType.workerStarted:
            let queues = d["queues"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? "default"
            Terminal.logLine("\(time) serving queue \(queues) as node \(d["node"]?.stringValue ?? "?") (pid \(d["pid"]?.intValue ?? 0), up to \(d["max_parallel"]?.intValue ?? 0) runs at once)")
        case EventType.runAdded where d["schedule"] != nil:
            Terminal.logLine("\(time) \(run) queued by schedule \(d["schedule"]?.stringValue ?? "")#\(d["entry"]?.intValue ?? 0) for \(d["due"]?.stringValue ?? "")")
        case EventType.scheduleSkipped:
            Terminal.logLine("\(time) schedule \(d["schedule"]?.stringValue ?? "") skipped \(d["due"]?.stringValue ?? ""): \(d["running"]?.stringValue ?? "") is still running")
        case EventType.scheduleMissed:
            Terminal.logLine("\(time) schedule \(d["schedule"]?.stringValue ?? "") missed \(d["count"]?.intValue ?? 0) time(s) from \(d["due"]?.stringValue ?? "") to \(d["last"]?.stringValue ?? "") (older than its catchup)")
        case EventType.queueRateChanged:
            Terminal.logLine("\(time) bandwidth cap now \(d["max_rate"]?.stringValue ?? "?") (\(d["set_by"]?.stringValue ?? "?"))")
        case EventType.workerStopped:
            Terminal.logLine("\(time) stopped")
        default:
            break
        }
    }
}
