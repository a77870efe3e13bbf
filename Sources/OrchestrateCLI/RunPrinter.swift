import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateStore

/// Prints a run as it executes: one line per step transition (and per retry, with the reason
/// and the delay), step logs, progress, and a summary. With `--json`, every journaled event as
/// one JSON line on stdout instead. On a TTY, progress is one line redrawn in place.
///
/// Events arrive on the engine's loop thread; they are queued there and formatted and written
/// in batches by a `BatchedWriter` (at most 50 ms after they were journaled). The summary and
/// `flush()` write out whatever is still queued first.
final class RunPrinter: RunObserver, @unchecked Sendable {
    private let json: Bool
    private let runID: String
    private let started = Date()
    /// Serialises the terminal: the writer's batches, the progress board, the summary.
    private let lock = Lock()
    private let board = ProgressBoard()
    private var lastDraw = 0.0
    private var lastPlainProgress: [String: Double] = [:]
    private var output: BatchedWriter<Pending>!
    /// The step failures printed as they happened (step id, error): the summary points at them
    /// instead of printing their error a second time. Used under `lock`.
    private var shownFailures: [(step: String, error: String)] = []

    /// What waits for the writer thread: an event with the time it was seen (for the
    /// `[  1.2s]` prefix), or a line already formatted (plain-output progress).
    private enum Pending: Sendable {
        case event(EventRecord, at: Date)
        case line(String)
    }

    init(json: Bool, runID: String) {
        self.json = json
        self.runID = runID
        output = BatchedWriter { [weak self] batch in self?.write(batch) }
    }

    func runEvent(_ event: EventRecord) {
        output.append(.event(event, at: Date()))
    }

    /// Writes out every queued line now, waiting at most `timeout` for a blocked stdout (before
    /// exiting on a second Ctrl-C).
    func flush(timeout: TimeInterval) { output.drain(timeout: timeout) }

    /// One batch: its lines in one write, the progress board erased before and drawn after.
    private func write(_ batch: [Pending]) {
        var text = ""
        if json {
            for case .event(let event, _) in batch { text += event.json.jsonText + "\n" }
            Terminal.write(text)
            return
        }
        lock.withLock {
            var boardChanged = false
            for pending in batch {
                switch pending {
                case .line(let line):
                    text += line + "\n"
                case .event(let event, let at):
                    if event.type == EventType.itemFinished, let step = event.step, let item = event.data["item"]?.stringValue {
                        board.remove(step: "\(step):\(item)")
                    }
                    let line = describe(event, at: at)
                    if RunPrinter.endsStep(event.type), let step = event.step {
                        board.remove(step: step)
                        boardChanged = true
                    }
                    if let line { text += line + "\n" }
                }
            }
            guard !text.isEmpty || boardChanged else { return }
            board.erase()
            if !text.isEmpty { Terminal.write(text) }
            if Terminal.stdoutIsTTY { board.draw() }
        }
    }

    private static func endsStep(_ type: EventType) -> Bool {
        switch type {
        case EventType.stepSucceeded, EventType.stepFailed, EventType.stepCancelled, EventType.stepInterrupted,
             EventType.stepRetrying:
            return true
        default:
            return false
        }
    }

    func runProgress(step: String, progress: ProgressSnapshot) {
        guard !json else { return }
        if Terminal.stdoutIsTTY {
            lock.withLock {
                board.update(step, progress)
                let now = Date().timeIntervalSince1970
                if now - lastDraw >= 0.1 {
                    lastDraw = now
                    board.draw()
                }
            }
            return
        }
        // Plain output: a progress line every 5 s per step, and the last one; queued behind the
        // step's earlier lines.
        let now = Date().timeIntervalSince1970
        let done = progress.bytesTotal > 0 && progress.bytesDone >= progress.bytesTotal
        let due = lock.withLock {
            guard now - (lastPlainProgress[step] ?? 0) >= 5 || done else { return false }
            lastPlainProgress[step] = now
            return true
        }
        if due { output.append(.line(elapsed() + " \(pad(step)) \(ProgressFormat.describe(progress))")) }
    }

    private func describe(_ event: EventRecord, at time: Date) -> String? {
        let step = event.step.map { pad(Terminal.escapingControls($0)) } ?? ""
        let d = Terminal.shown(event.data)
        let prefix = linePrefix(at: time)
        switch event.type {
        case EventType.runStarted, EventType.runResumed:
            let verb = event.type == EventType.runStarted ? "started" : "resumed"
            return Terminal.styled("run \(runID) \(verb) (\(d["workflow"]?.stringValue ?? ""))", .bold)
        case EventType.stepStarted:
            let attempt = d["attempt"]?.intValue ?? 1
            return prefix + "\(step) " + Terminal.styled("started", .blue) + (attempt > 1 ? " (attempt \(attempt))" : "")
        case EventType.stepSucceeded:
            if let items = d["items"]?.intValue { return prefix + "\(step) " + Terminal.styled("succeeded", .green) + " (\(counted(Int(items), "item")))" }
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
            if let step = event.step, let error = event.data["error"]?.stringValue, !error.isEmpty { shownFailures.append((step, error)) }
            return prefix + "\(step) " + Terminal.styled("failed", .red) + "\(note): \(d["error"]?.stringValue ?? "")"
        case EventType.stepSkipped:
            return prefix + "\(step) " + Terminal.styled("skipped", .dim) + ": \(d["reason"]?.stringValue ?? "")"
        case EventType.stepCancelled:
            return prefix + "\(step) " + Terminal.styled("cancelled", .yellow)
        case EventType.stepHeld:
            return prefix + "\(step) " + Terminal.styled("held", .yellow)
                + ": \(d["host"]?.stringValue ?? "its host") does not answer (\(d["reason"]?.stringValue ?? "")); waiting for it"
                + (d["gives_up_at"]?.doubleValue.map { " until \(Self.utcTime($0)) (hold_timeout)" } ?? "")
        case EventType.stepStillHeld:
            return prefix + "\(step) " + Terminal.styled("held", .yellow) + ": \(d["message"]?.stringValue ?? "still waiting")"
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

    /// The run's last lines: its status and duration, its declared steps counted by status
    /// (`steps` may hold items and compensations too: they are not counted), its error and outputs.
    func summary(_ run: RunRecord, steps: @autoclosure () -> [StepRecord]) {
        output.drain()
        guard !json else { return }
        lock.withLock { board.erase() }
        var byStatus: [StepStatus: Int] = [:]
        for step in steps() where step.kind != .item && step.kind != .compensation {
            byStatus[step.status, default: 0] += 1
        }
        let counts = byStatus.map { (name: $0.key.rawValue.replacingOccurrences(of: "_", with: " "), count: $0.value) }  // "not run"
        let countText = counts.sorted { $0.name < $1.name }.map { "\($0.count) \($0.name)" }.joined(separator: ", ")
        let duration = String(format: "%.1fs", Date().timeIntervalSince(started))
        let style: Terminal.Style = run.status == .succeeded ? .green : .red
        Terminal.line(Terminal.styled("run \(run.id) \(run.status.rawValue)", style) + " in \(duration) (\(countText))")
        if let error = run.error { Terminal.line("  " + Terminal.escapingControls(lock.withLock { Self.pointingAbove(error, shownFailures) })) }
        if let outputs = run.outputs.map(Terminal.shown)?.objectValue, !outputs.isEmpty {
            for key in outputs.keys.sorted() { Terminal.line("  \(key): \(outputs[key]!.interpolated)") }
        }
    }

    /// The run's error with the message of each step failure already printed replaced by
    /// "(error above)": `step 'a' failed after 3 attempts: HTTP 503…` → `step 'a' failed after
    /// 3 attempts (error above)`. Other reasons (a compensation, an output) stay whole.
    static func pointingAbove(_ error: String, _ shown: [(step: String, error: String)]) -> String {
        var text = error
        for failure in shown {
            guard let start = text.range(of: "step '\(failure.step)' failed"),
                  let message = text.range(of: ": " + failure.error, range: start.upperBound..<text.endIndex)
            else { continue }
            text.replaceSubrange(message, with: " (error above)")
        }
        return text
    }

    /// The last `[  1.2s] ` prefix made, by tenth of a second: the lines of a batch mostly
    /// share it. Used under `lock`.
    private var lastPrefix: (tenths: Int, text: String) = (-1, "")

    private func linePrefix(at time: Date) -> String {
        let tenths = Int((max(time.timeIntervalSince(started), 0) * 10).rounded())
        if tenths != lastPrefix.tenths { lastPrefix = (tenths, elapsed(at: time) + " ") }
        return lastPrefix.text
    }

    private func elapsed(at time: Date = Date()) -> String {
        Terminal.styled(RunPrinter.bracketedSeconds(time.timeIntervalSince(started)), .dim)
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

    /// At most 6 characters: `42s`, `3m05s`, `2h10m`, `>99h`.
    static func eta(_ seconds: Double) -> String {
        seconds >= 100 * 3600 ? ">99h" : RunDisplay.seconds(seconds)
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
            if p.bytesTotal > p.bytesDone { parts.append("ETA " + eta(Double(p.bytesTotal - p.bytesDone) / p.rate)) }
        }
        return parts.joined(separator: "  ")
    }
}

extension RunPrinter {
    /// `2026-11-27T03:00:00Z`, as the engine writes a hold's end.
    static func utcTime(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds.rounded()).ISO8601Format()
    }
}
