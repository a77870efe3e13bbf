import Foundation
import OrchestrateEngine

/// Live progress bars on a TTY, one per step (and per file of a session) that reports
/// progress, redrawn in place below the lines that scroll:
///
///     upload         [##########----------]  48%  512.0 MiB / 1.0 GiB  210.3 MiB/s  ETA 2s
///
/// Not thread-safe: the owner serialises calls (RunPrinter holds a lock).
final class ProgressBoard {
    private var order: [String] = []
    private var rows: [String: ProgressSnapshot] = [:]
    private var drawnLines = 0

    var isEmpty: Bool { order.isEmpty }

    func update(_ key: String, _ snapshot: ProgressSnapshot) {
        if rows[key] == nil { order.append(key) }
        rows[key] = snapshot
    }

    /// Drops the rows of a step and of its files (`step:file`).
    func remove(step: String) {
        order.removeAll { $0 == step || $0.hasPrefix(step + ":") }
        rows = rows.filter { order.contains($0.key) }
    }

    /// Erases what was drawn, leaving the cursor where the board began.
    func erase() {
        guard drawnLines > 0 else { return }
        Terminal.write("\r\u{1B}[\(drawnLines)A\u{1B}[J")
        drawnLines = 0
    }

    func draw() {
        erase()
        let width = Terminal.width
        let lines = order.suffix(Terminal.height / 2).map { ProgressBoard.line($0, rows[$0]!, width: width) }
        guard !lines.isEmpty else { return }
        Terminal.write(lines.map { Terminal.styled($0, .cyan) + "\n" }.joined())
        drawnLines = lines.count
    }

    static func line(_ key: String, _ p: ProgressSnapshot, width: Int) -> String {
        let label = key.count > 14 ? String(key.prefix(13)) + "…" : key.padding(14)
        var figures = ""
        var fraction: Double?
        if p.bytesTotal > 0 {
            fraction = min(max(Double(p.bytesDone) / Double(p.bytesTotal), 0), 1)
            figures = "\(String(format: "%3.0f", fraction! * 100))%  \(ProgressFormat.bytes(p.bytesDone)) / \(ProgressFormat.bytes(p.bytesTotal))"
        } else if p.bytesDone >= 0 {
            figures = ProgressFormat.bytes(p.bytesDone)
        }
        if p.filesTotal > 0 { figures += "  \(p.filesDone)/\(p.filesTotal) files" }
        if p.rate > 0 {
            figures += "  \(ProgressFormat.bytes(Int64(p.rate)))/s"
            if p.bytesTotal > p.bytesDone { figures += "  ETA \(RunDisplay.seconds(Double(p.bytesTotal - p.bytesDone) / p.rate))" }
        }
        let barWidth = max(10, min(30, width - label.count - figures.count - 6))
        let filled = Int((fraction ?? 0) * Double(barWidth))
        let bar = fraction == nil ? String(repeating: "·", count: barWidth)
            : String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled)
        let text = "\(label) [\(bar)] \(figures)"
        return text.count > width - 1 ? String(text.prefix(width - 1)) : text
    }
}

extension Terminal {
    /// The terminal's size, or 80×24 when it cannot be asked.
    static var width: Int { size().columns }
    static var height: Int { size().rows }

    private static func size() -> (columns: Int, rows: Int) {
        var w = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &w) == 0, w.ws_col > 0 else { return (80, 24) }
        return (Int(w.ws_col), Int(w.ws_row))
    }
}
