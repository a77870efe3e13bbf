import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateOperations
import OrchestrateStore

/// How `status` and `list` describe a run for people; the JSON forms are `RunDocument`'s.
enum RunDisplay {
    static func effectiveStatus(_ run: RunRecord) -> String { RunDocument.effectiveStatus(run) }

    /// "1.2 GiB of 4.0 GiB (30%), 1m12s elapsed, 17.1 MiB/s, about 2m48s left"
    static func describe(_ stats: TransferStatistics) -> String {
        var text = ProgressFormat.bytes(stats.bytesDone)
        if let total = stats.bytesTotal, total > 0 {
            text += " of \(ProgressFormat.bytes(total)) (\(Int(Double(stats.bytesDone) * 100 / Double(total)))%)"
        }
        text += ", \(seconds(stats.elapsed)) elapsed, \(ProgressFormat.bytes(Int64(stats.averageRate)))/s"
        if let remaining = stats.remaining { text += ", about \(seconds(remaining)) left" }
        return text
    }

    /// The `transfer` member of a run document (`TransferStatistics.json`).
    static func transferStatistics(_ json: JSONValue) -> TransferStatistics {
        TransferStatistics(bytesDone: json["bytes_done"]?.intValue ?? 0, bytesTotal: json["bytes_total"]?.intValue,
                           elapsed: json["elapsed_s"]?.doubleValue ?? 0, averageRate: json["average_rate"]?.doubleValue ?? 0,
                           remaining: json["remaining_s"]?.doubleValue)
    }

    static func seconds(_ s: Double) -> String {
        let t = Int(s.rounded())
        if t < 60 { return "\(t)s" }
        if t < 3600 { return "\(t / 60)m\(String(format: "%02d", t % 60))s" }
        return "\(t / 3600)h\(String(format: "%02d", t % 3600 / 60))m"
    }

    /// Local time as `yyyy-MM-dd HH:mm:ss`. Formatted by hand from `localtime_r`: `serve`
    /// prints a line per event, and a `DateFormatter` (ICU) per line cost a fifth of a busy
    /// worker's CPU.
    static func time(_ t: Double?) -> String {
        guard let t else { return "-" }
        var seconds = time_t(t.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "-" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}
