import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// Prints a run as it executes: one line per step transition (and per retry, with the reason
/// and the delay), step logs, progress, and a summary. With `--json`, every journaled event as
/// one JSON line on stdout instead. On a TTY, progress is one line redrawn in place.
final class RunPrinter: RunObserver, @unchecked Sendable {
    private let json: Bool
    private let runID: String
    private let started = Date()
    private let lock = NSLock()
    private let board = ProgressBoard()
    private var lastDraw = 0.0
    private var lastPlainProgress: [String: Double] = [:]

    init(json: Bool, runID: String) {
        self.json = json
        self.runID = runID
    }

    func runEvent(_ event: EventRecord) {
        if json {
            Terminal.line(event.json.jsonText)
            return
        }
        let text = describe(event)
        lock.withLock {
            let finishedStep = [EventType.stepSucceeded, EventType.stepFailed, EventType.stepCancelled,
                                EventType.stepInterrupted, EventType.stepRetrying].contains(event.type)
            if event.type == EventType.itemFinished, let step = event.step, let item = event.data["item"]?.stringValue {
                board.remove(step: "\(step):\(item)")
            }
            guard text != nil || finishedStep else { return }
            board.erase()
            if finishedStep, let step = event.step { board.remove(step: step) }
            if let text { Terminal.line(text) }
            if Terminal.stdoutIsTTY { board.draw() }
        }
    }

    func runProgress(step: String, progress: ProgressSnapshot) {
        guard !json else { return }
        let text = "\(pad(step)) \(ProgressFormat.describe(progress))"
        lock.withLock {
            if Terminal.stdoutIsTTY {
                board.update(step, progress)
                let now = Date().timeIntervalSince1970
                if now - lastDraw >= 0.1 {
                    lastDraw = now
                    board.draw()
                }
            } else {
                // Plain output: a progress line every 5 s per step, and the last one.
                let now = Date().timeIntervalSince1970
                let done = progress.bytesTotal > 0 && progress.bytesDone >= progress.bytesTotal
                if now - (lastPlainProgress[step] ?? 0) >= 5 || done {
                    lastPlainProgress[step] = now
                    Terminal.line(elapsed() + " " + text)
                }
            }
        }
    }

    private func describe(_ event: EventRecord) -> String? {
        let step = event.step.map(pad) ?? ""
        let d = event.data
        let prefix = elapsed() + " "
        switch event.type {
        case EventType.runStarted, EventType.runResumed:
            let verb = event.type == EventType.runStarted ? "started" : "resumed"
            return Terminal.styled("run \(runID) \(verb) (\(d["workflow"]?.stringValue ?? ""))", .bold)
        case EventType.stepStarted:
            let attempt = d["attempt"]?.intValue ?? 1
            return prefix + "\(step) " + Terminal.styled("started", .blue) + (attempt > 1 ? " (attempt \(attempt))" : "")
        case EventType.stepSucceeded:
            if let items = d["items"]?.intValue { return prefix + "\(step) " + Terminal.styled("succeeded", .green) + " (\(items) items)" }
            return prefix + "\(step) " + Terminal.styled("succeeded", .green) + " in \(ms(d["duration_ms"]))"
        case EventType.stepRetrying:
            let why = [d["kind"]?.stringValue, d["code"]?.stringValue].compactMap { $0 }.joined(separator: " ")
            let hint = d["retry_after"]?.boolValue == true ? " (server's Retry-After)" : ""
            return prefix + "\(step) " + Terminal.styled("retrying", .yellow)
                + " in \(ms(d["delay_ms"]))\(hint): attempt \(d["attempt"]?.intValue ?? 0) failed (\(why)): \(d["reason"]?.stringValue ?? "")"
        case EventType.stepFailed:
            let notes = [d["not_retried"]?.stringValue.map { "not retried: \($0)" },
                         d["continue_on_error"]?.boolValue == true ? "continue_on_error" : nil].compactMap { $0 }
            let note = notes.isEmpty ? "" : " (\(notes.joined(separator: "; ")))"
            return prefix + "\(step) " + Terminal.styled("failed", .red) + "\(note): \(d["error"]?.stringValue ?? "")"
        case EventType.stepSkipped:
            return prefix + "\(step) " + Terminal.styled("skipped", .dim) + ": \(d["reason"]?.stringValue ?? "")"
        case EventType.stepCancelled:
            return prefix + "\(step) " + Terminal.styled("cancelled", .yellow)
        case EventType.stepHeld:
            return prefix + "\(step) " + Terminal.styled("held", .yellow)
                + ": \(d["host"]?.stringValue ?? "its host") does not answer (\(d["reason"]?.stringValue ?? "")); waiting for it"
        case EventType.stepReleased:
            return prefix + "\(step) \(d["host"]?.stringValue ?? "its host") answers again; resuming"
        case EventType.stepWaiting:
            return prefix + "\(step) waiting: \(d["reason"]?.stringValue ?? "") \(d["keys"]?.jsonText ?? "")"
        case EventType.stepLog:
            let level = d["level"]?.stringValue ?? "info"
            let marker = level == "error" || level == "warn" ? Terminal.styled("! ", .yellow) : "| "
            return prefix + "\(step) " + Terminal.styled(marker, .dim) + (d["message"]?.stringValue ?? "")
        case EventType.runCompensating:
            return prefix + Terminal.styled("compensating: ", .yellow)
                + (d["steps"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? "")
        case EventType.itemFinished:
            let ok = d["ok"]?.boolValue ?? false
            return prefix + "\(step) item \(d["item"]?.stringValue ?? "") "
                + (ok ? Terminal.styled("done", .green) : Terminal.styled("failed", .red) + ": \(d["error"]?.stringValue ?? "")")
        default:
            return nil  // progress (shown live), item.started, run.finished (the summary says it)
        }
    }

    /// The final lines: outcome, counts, duration, outputs.
    func summary(_ run: RunRecord, store: any StateStore) {
        guard !json else { return }
        lock.withLock { board.erase() }
        let steps = (try? store.steps(ofRun: run.id)) ?? []
        var counts: [String: Int] = [:]
        for step in steps where step.kind != .item && step.kind != .compensation {
            counts[step.status.rawValue.replacingOccurrences(of: "_", with: " "), default: 0] += 1  // "not run"
        }
        let countText = counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        let duration = String(format: "%.1fs", Date().timeIntervalSince(started))
        let style: Terminal.Style = run.status == .succeeded ? .green : .red
        Terminal.line(Terminal.styled("run \(run.id) \(run.status.rawValue)", style) + " in \(duration) (\(countText))")
        if let error = run.error { Terminal.line("  \(error)") }
        if let outputs = run.outputs?.objectValue, !outputs.isEmpty {
            for key in outputs.keys.sorted() { Terminal.line("  \(key): \(outputs[key]!.interpolated)") }
        }
        if run.status != .succeeded && !run.status.isFinished {
            Terminal.line("  resume with: orchestrate resume \(run.id)")
        }
    }

    private func elapsed() -> String {
        Terminal.styled(RunPrinter.bracketedSeconds(Date().timeIntervalSince(started)), .dim)
    }

    /// `String(format: "[%6.1fs]", seconds)` without Foundation's formatter, which cost more
    /// than everything else in printing a step's line (two lines per step of a long chain).
    static func bracketedSeconds(_ seconds: Double) -> String {
        let tenths = Int((max(seconds, 0) * 10).rounded())
        let text = "\(tenths / 10).\(tenths % 10)"
        return "[" + String(repeating: " ", count: max(0, 6 - text.count)) + text + "s]"
    }

    private func pad(_ step: String) -> String {
        step.count >= 14 ? step : step + String(repeating: " ", count: 14 - step.count)
    }

    private func ms(_ value: JSONValue?) -> String {
        let ms = Double(value?.intValue ?? 0)
        return ms < 1000 ? "\(Int(ms))ms" : String(format: "%.1fs", ms / 1000)
    }
}

/// Human figures for bytes and rates.
enum ProgressFormat {
    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func describe(_ p: ProgressSnapshot) -> String {
        var parts: [String] = []
        if p.bytesDone >= 0 {
            if p.bytesTotal > 0 {
                let pct = Double(p.bytesDone) * 100 / Double(p.bytesTotal)
                parts.append("\(bytes(p.bytesDone)) / \(bytes(p.bytesTotal)) (\(String(format: "%.0f", pct))%)")
            } else {
                parts.append(bytes(p.bytesDone))
            }
        }
        if p.filesTotal > 0 { parts.append("\(p.filesDone)/\(p.filesTotal) files") }
        if p.rate > 0 {
            parts.append("\(bytes(Int64(p.rate)))/s")
            if p.bytesTotal > p.bytesDone {
                let eta = Double(p.bytesTotal - p.bytesDone) / p.rate
                parts.append(String(format: "ETA %.0fs", eta))
            }
        }
        return parts.joined(separator: "  ")
    }
}
