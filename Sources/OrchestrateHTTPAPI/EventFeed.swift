import Foundation
import NIOCore
import OrchestrateStore

/// One reader of the journal for every event stream of this server: fifty dashboards following
/// `/api/events` cost one store read per `minInterval` and one JSON encoding per event, not
/// fifty of each (bench/api). It keeps the newest `capacity` events, encoded as SSE text.
///
/// A stream asks for what follows its last seq (`entries`); when that point is older than what
/// the feed holds (a client resuming from far back, or a run's events from before the feed
/// started) the stream reads the store itself until it catches up (`caughtUp`). The feed reads
/// after the last seq it saw, and the store makes events visible in seq order, so nothing is
/// skipped; a stream takes only seqs above its own last one, so nothing is repeated.
final class EventFeed: @unchecked Sendable {
    struct Entry {
        let seq: Int64
        let runID: String?
        let text: String
    }

    let capacity: Int
    let minInterval: Double
    private let lock = NSLock()
    // All guarded by lock.
    private var entries: [Entry] = []
    /// Every event with a seq in (coveredFrom, lastSeq] is in `entries`; nil before the first read.
    private var coveredFrom: Int64?
    private var lastSeq: Int64 = 0
    private var refreshing = false
    private var lastRefresh = -Double.infinity
    /// The latest answer of `entries`: after each refresh the streams that follow everything
    /// are at the same seq and ask for the same text, which is built once and its buffer shared
    /// (NIO writes it to each connection without copying it).
    private var lastAnswer: (after: Int64, runID: String?, lastSeq: Int64, text: ByteBuffer)?

    init(capacity: Int = 20_000, minInterval: Double = 0.1) {
        self.capacity = capacity
        self.minInterval = minInterval
    }

    static func text(_ event: EventRecord) -> String { "id: \(event.seq)\ndata: \(event.json.jsonText)\n\n" }

    /// Reads what is new in the store, at most once per `minInterval` and by one caller at a
    /// time (the others go on with what the feed has). The first read starts after `after`.
    func refresh(_ services: APIServices, startingAfter after: Int64) async throws {
        let now = ProcessInfo.processInfo.systemUptime
        let from: Int64? = lock.withLock {
            guard !refreshing, now - lastRefresh >= minInterval else { return nil }
            refreshing = true
            return coveredFrom == nil ? after : lastSeq
        }
        guard let from else { return }
        var fresh: [Entry] = []
        do {
            var cursor = from
            while fresh.count < capacity {
                let page = try await services.blocking { [cursor] in try services.store.events(runID: nil, afterSeq: cursor, limit: 500) }
                fresh += page.map { Entry(seq: $0.seq, runID: $0.runID, text: Self.text($0)) }
                guard page.count == 500, let last = page.last?.seq else { break }
                cursor = last
            }
        } catch {
            lock.withLock { refreshing = false }
            throw error
        }
        lock.withLock {
            refreshing = false
            lastRefresh = ProcessInfo.processInfo.systemUptime
            if coveredFrom == nil {
                // The feed starts at the first point that proved real (events follow it): a
                // client's `after` beyond the journal's end must not make it wait past the end.
                guard !fresh.isEmpty else { return }
                coveredFrom = from
                lastSeq = from
            }
            entries += fresh
            lastSeq = max(lastSeq, fresh.last?.seq ?? lastSeq)
            if entries.count > capacity {
                let dropped = entries.count - capacity
                coveredFrom = entries[dropped - 1].seq
                entries.removeFirst(dropped)
            }
        }
    }

    /// The SSE text of the events after `after` (of run `runID`, when given) and the seq the
    /// stream is at afterwards; nil when the feed does not reach back to `after`.
    func entries(after: Int64, runID: String?) -> (text: ByteBuffer, last: Int64)? {
        lock.withLock {
            guard let coveredFrom, after >= coveredFrom else { return nil }
            if let answer = lastAnswer, answer.after == after, answer.runID == runID, answer.lastSeq == lastSeq {
                return (answer.text, max(after, lastSeq))
            }
            // The first entry above `after` (entries are in seq order).
            var low = 0, high = entries.count
            while low < high {
                let middle = (low + high) / 2
                if entries[middle].seq <= after { low = middle + 1 } else { high = middle }
            }
            var text = ""
            for entry in entries[low...] where runID == nil || entry.runID == runID { text += entry.text }
            let buffer = ByteBuffer(string: text)
            lastAnswer = (after, runID, lastSeq, buffer)
            return (buffer, max(after, lastSeq))
        }
    }

    /// The seq a stream that read the store itself may move to: `seen` (taken with `mark()`
    /// before that read) when the read returned everything up to then and the feed covers it.
    func mark() -> Int64? { lock.withLock { coveredFrom == nil ? nil : lastSeq } }
}
