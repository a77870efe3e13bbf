import Foundation
import OrchestrateJSON
import OrchestrateStore

/// A run's transfer figures, from the latest progress each of its steps journaled: what
/// `status` and `list` show and what a watcher uses for its ETA.
public struct TransferStatistics: Sendable, Equatable {
    public var bytesDone: Int64
    /// The sum of the totals steps announced; nil when none did.
    public var bytesTotal: Int64?
    public var elapsed: Double
    /// Bytes per second over the run's elapsed time.
    public var averageRate: Double
    /// Seconds left at the average rate; nil when unknown.
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

    /// From the run's `latestProgress`, already read.
    public static func of(_ run: RunRecord, progress: [EventRecord], now: Double = Date().timeIntervalSince1970) -> TransferStatistics {
        var done: Int64 = 0
        var total: Int64 = 0
        var anyTotal = false
        for event in progress {
            done += max(event.data["bytes_done"]?.intValue ?? 0, 0)
            if let t = event.data["bytes_total"]?.intValue, t > 0 {
                total += t
                anyTotal = true
            }
        }
        let end = run.status.isFinished ? (run.finishedAt ?? now) : now
        let elapsed = run.startedAt.map { max(end - $0, 0) } ?? 0
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        var remaining: Double?
        if anyTotal && rate > 0 && !run.status.isFinished { remaining = Double(max(total - done, 0)) / rate }
        return TransferStatistics(bytesDone: done, bytesTotal: anyTotal ? total : nil, elapsed: elapsed,
                                  averageRate: rate, remaining: remaining)
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["bytes_done": .int(bytesDone), "elapsed_s": .double((elapsed * 10).rounded() / 10),
                                      "average_rate": .double(averageRate.rounded())]
        if let bytesTotal { o["bytes_total"] = .int(bytesTotal) }
        if let remaining { o["remaining_s"] = .double(remaining.rounded()) }
        return .object(o)
    }
}
