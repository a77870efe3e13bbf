import Foundation
import OrchestrateEngine

/// Live progress bars on a TTY, one per step (and per file of a session) that reports
/// progress, redrawn in place below the lines that scroll:
///
///     upload         [######------------------------]  21%     1.0 GiB / 4.8 GiB     19.9 MiB/s    ETA 3m15s
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

    /// One row, never wider than `width - 1`: its figures sit in fixed-width slots (the rate
    /// and ETA slots stay, blank, until measured), so the bar keeps its width while the figures
    /// change, and a narrow terminal drops the file count, then the total, then the percentage,
    /// but keeps the rate and the ETA.
    static func line(_ rawKey: String, _ p: ProgressSnapshot, width: Int) -> String {
        let key = Terminal.escapingControls(rawKey)
        let label = key.count > 14 ? String(key.prefix(13)) + "…" : key.padding(14)
        let fraction = p.bytesTotal > 0 ? min(max(Double(p.bytesDone) / Double(p.bytesTotal), 0), 1) : nil
        let rate = p.rate > 0 ? ProgressFormat.bytes(Int64(p.rate)) + "/s" : ""
        let eta = p.rate > 0 && p.bytesTotal > p.bytesDone ? "ETA " + ProgressFormat.eta(Double(p.bytesTotal - p.bytesDone) / p.rate) : ""
        var fields = Fields(percent: fraction != nil, total: fraction != nil, files: p.filesTotal > 0)
        func figures() -> String {
            var text = ""
            if fields.percent, let fraction { text += String(format: "%3.0f%%  ", fraction * 100) }
            text += p.bytesDone >= 0 ? ProgressFormat.bytes(p.bytesDone).leftPadded(10) : String(repeating: " ", count: 10)
            if fields.total { text += " / " + ProgressFormat.bytes(p.bytesTotal).padding(10) }
            if fields.files { text += "  " + "\(p.filesDone)/\(p.filesTotal) files".padding(15) }
            return text + "  " + rate.padding(12) + "  " + eta.padding(10)
        }
        // Dropped in this order until a bar of `minimumBar` fits.
        let minimumBar = 8
        var text = figures()
        for drop in [\Fields.files, \Fields.total, \Fields.percent] where label.count + text.count + 4 + minimumBar > width - 1 {
            fields[keyPath: drop] = false
            text = figures()
        }
        let barWidth = max(minimumBar, min(30, width - 1 - label.count - text.count - 4))
        let filled = Int((fraction ?? 0) * Double(barWidth))
        let bar = fraction == nil ? String(repeating: "·", count: barWidth)
            : String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled)
        var line = "\(label) [\(bar)] \(text)"
        while line.last == " " { line.removeLast() }
        return line.count > width - 1 ? String(line.prefix(width - 1)) : line
    }

    private struct Fields {
        var percent: Bool
        var total: Bool
        var files: Bool
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

extension String {
    /// Right-aligned in `width` columns.
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
