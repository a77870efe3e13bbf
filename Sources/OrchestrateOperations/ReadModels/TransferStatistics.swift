import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateStore

/// A run's transfer figures, from the latest progress each of its steps journaled: what
/// `status` and `list` show and what a watcher uses for its ETA.
public struct TransferStatistics: Sendable, Equatable {
    public var bytesDone: Int64
    /// The sum of the totals steps announced; nil when none did.
    public var bytesTotal: Int64?
    public var elapsed: Double
    /// Bytes per second moved while its steps were moving them (not counting bytes a resumed
    /// attempt found on disk, nor the time the run was not running).
    public var averageRate: Double
    /// Seconds left at the average rate; nil when unknown or when the run is not running.
    public var remaining: Double?

    public init(bytesDone: Int64, bytesTotal: Int64?, elapsed: Double, averageRate: Double, remaining: Double?) {
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.elapsed = elapsed
        self.averageRate = averageRate
        self.remaining = remaining
    }

    public static func of(_ run: RunRecord, store: any StateStore, now: Double = Date().timeIntervalSince1970) throws -> TransferStatistics {
        of(run, progress: try store.latestProgress(runID: run.id), now: now)
    }

    /// From the run's `latestProgress`, already read. The rate is of the bytes moved (each
    /// event's `bytes_moved`, not what a resumed attempt found on disk) over the time spent
    /// moving them (the union of the attempts' spans, `since` to their latest report): a run
    /// resumed after a night down shows the rate of its transfer, not of its night. The ETA is
    /// given only while the run is running.
    public static func of(_ run: RunRecord, progress: [EventRecord], now: Double = Date().timeIntervalSince1970) -> TransferStatistics {
        var done: Int64 = 0
        var moved: Int64 = 0
        var total: Int64 = 0
        var anyTotal = false
        var spans: [(start: Double, end: Double)] = []
        for event in progress {
            let eventDone = max(event.data["bytes_done"]?.intValue ?? 0, 0)
            done += eventDone
            moved += max(event.data["bytes_moved"]?.intValue ?? eventDone, 0)
            if let start = event.data["since"]?.doubleValue ?? run.startedAt { spans.append((start, max(event.time, start))) }
            if let t = event.data["bytes_total"]?.intValue, t > 0 {
                total += t
                anyTotal = true
            }
        }
        let end = run.status.isFinished ? (run.finishedAt ?? now) : now
        let elapsed = run.startedAt.map { max(end - $0, 0) } ?? 0
        let moving = coveredSeconds(spans)
        let rate = moving > 0 ? Double(moved) / moving : 0
        var remaining: Double?
        if anyTotal && rate > 0 && RunDocument.effectiveStatus(run) == RunStatus.running.rawValue {
            remaining = Double(max(total - done, 0)) / rate
        }
        return TransferStatistics(bytesDone: done, bytesTotal: anyTotal ? total : nil, elapsed: elapsed,
                                  averageRate: rate, remaining: remaining)
    }

    /// The seconds covered by the spans together (overlaps counted once).
    public static func coveredSeconds(_ spans: [(start: Double, end: Double)]) -> Double {
        var covered = 0.0
        var reach = -Double.infinity
        for span in spans.sorted(by: { $0.start < $1.start }) {
            let start = max(span.start, reach)
            if span.end > start { covered += span.end - start }
            reach = max(reach, span.end)
        }
        return covered
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["bytes_done": .int(bytesDone), "elapsed_s": .double((elapsed * 10).rounded() / 10),
                                      "average_rate": .double(averageRate.rounded())]
        if let bytesTotal { o["bytes_total"] = .int(bytesTotal) }
        if let remaining { o["remaining_s"] = .double(remaining.rounded()) }
        return .object(o)
    }
}
