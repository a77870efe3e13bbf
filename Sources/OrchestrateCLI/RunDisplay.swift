import Foundation
import OrchestrateEngine
import OrchestrateJSON
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

    static func seconds(_ s: Double) -> String {
        let t = Int(s.rounded())
        if t < 60 { return "\(t)s" }
        if t < 3600 { return "\(t / 60)m\(String(format: "%02d", t % 60))s" }
        return "\(t / 3600)h\(String(format: "%02d", t % 3600 / 60))m"
    }

    static func time(_ t: Double?) -> String {
        guard let t else { return "-" }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: t))
    }
}
