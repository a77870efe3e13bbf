import Foundation
import NIOCore
import OrchestrateLock
import OrchestratePluginHost
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
    /// One event of the feed: where its SSE text lies in the buffer of the page it was read in.
    /// A page's events are encoded once, into one buffer that every stream's slice shares:
    /// fifty followers polling at their own moments ask for fifty different ranges, and copying
    /// each range out event by event cost serve more than the runs' own journal (bench/api).
    struct Entry {
        let seq: Int64
        let runID: String?
        /// An event about one file (`StoredEvent.isFileEvent`: left out of a run's stream with
        /// `items=live`).
        let isFile: Bool
        /// The page's buffer (shared storage: one per refresh, not per event).
        let page: ByteBuffer
        /// Which refresh read it: entries of one page are contiguous in `page`.
        let pageNumber: Int
        let start: Int
        let end: Int
    }

    let capacity: Int
    let minInterval: Double
    private let lock = Lock()
    // All guarded by lock.
    private var entries: [Entry] = []
    /// Every event with a seq in (coveredFrom, lastSeq] is in `entries`; nil before the first read.
    private var coveredFrom: Int64?
    private var lastSeq: Int64 = 0
    private var refreshing = false
    private var lastRefresh = -Double.infinity
    private var pages = 0
    private var readCount = 0
    /// The latest answer of `entries`: streams that follow everything and polled at the same
    /// point get the same slices.
    private var lastAnswer: (after: Int64, runID: String?, lastSeq: Int64, text: [ByteBuffer])?

    init(capacity: Int = 20_000, minInterval: Double = 0.1) {
        self.capacity = capacity
        self.minInterval = minInterval
    }

    /// Appends an event's SSE text (`id: SEQ`, `data: {JSON}`, a blank line) to `buffer`; the
    /// event's data is copied as journaled, not parsed and written again.
    static func write(_ event: StoredEvent, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("id: ")
        buffer.writeString(String(event.seq))
        buffer.writeStaticString("\ndata: ")
        buffer.writeBytes(event.jsonBytes)
        buffer.writeStaticString("\n\n")
    }

    /// Reads what is new in the store, at most once per `minInterval` and by one caller at a
    /// time (the others go on with what the feed has). The first read starts after `after`.
    func refresh(_ services: APIServices, startingAfter after: Int64) async throws {
        let now = MonotonicClock.nowSeconds()
        let from: Int64? = lock.withLock {
            guard !refreshing, now - lastRefresh >= minInterval else { return nil }
            refreshing = true
            return coveredFrom == nil ? after : lastSeq
        }
        guard let from else { return }
        var fresh: [StoredEvent] = []
        do {
            var cursor = from
            while fresh.count < capacity {
                let page = try await services.blocking { [cursor] in try services.store.storedEvents(runID: nil, afterSeq: cursor, limit: 500) }
                fresh += page
                guard page.count == 500, let last = page.last?.seq else { break }
                cursor = last
            }
        } catch {
            lock.withLock { refreshing = false }
            throw error
        }
        // Encoded outside the lock, into one buffer for the whole page.
        var buffer = ByteBufferAllocator().buffer(capacity: fresh.count * 192)
        var bounds: [(start: Int, end: Int)] = []
        bounds.reserveCapacity(fresh.count)
        for event in fresh {
            let start = buffer.writerIndex
            Self.write(event, to: &buffer)
            bounds.append((start, buffer.writerIndex))
        }
        lock.withLock {
            refreshing = false
            lastRefresh = MonotonicClock.nowSeconds()
            readCount += fresh.count
            if coveredFrom == nil {
                // The feed starts at the first point that proved real (events follow it): a
                // client's `after` beyond the journal's end must not make it wait past the end.
                guard !fresh.isEmpty else { return }
                coveredFrom = from
                lastSeq = from
            }
            pages += 1
            for (event, bound) in zip(fresh, bounds) {
                entries.append(Entry(seq: event.seq, runID: event.runID, isFile: event.isFileEvent, page: buffer, pageNumber: pages,
                                     start: bound.start, end: bound.end))
            }
            lastSeq = max(lastSeq, fresh.last?.seq ?? lastSeq)
            if entries.count > capacity {
                let dropped = entries.count - capacity
                coveredFrom = entries[dropped - 1].seq
                entries.removeFirst(dropped)
            }
        }
    }

    /// The SSE text of the events after `after` (of run `runID`, when given, without its events
    /// about one file up to `itemsThrough`), as slices of the pages' buffers to write in order, and the
    /// seq the stream is at afterwards; nil when the feed does not reach back to `after`.
    func entries(after: Int64, runID: String?, itemsThrough: Int64 = 0) -> (text: [ByteBuffer], last: Int64)? {
        lock.withLock {
            guard let coveredFrom, after >= coveredFrom else { return nil }
            if itemsThrough == 0, let answer = lastAnswer, answer.after == after, answer.runID == runID, answer.lastSeq == lastSeq {
                return (answer.text, max(after, lastSeq))
            }
            // The first entry above `after` (entries are in seq order).
            var low = 0, high = entries.count
            while low < high {
                let middle = (low + high) / 2
                if entries[middle].seq <= after { low = middle + 1 } else { high = middle }
            }
            var slices: [ByteBuffer] = []
            if runID == nil {
                // Every event: one slice per page, from the first wanted event to the page's end.
                var index = low
                while index < entries.count {
                    let first = entries[index]
                    var last = index
                    while last + 1 < entries.count && entries[last + 1].pageNumber == first.pageNumber { last += 1 }
                    slices.append(first.page.getSlice(at: first.start, length: entries[last].end - first.start)!)
                    index = last + 1
                }
            } else {
                var text = ByteBuffer()
                for entry in entries[low...] where entry.runID == runID && !(entry.isFile && entry.seq <= itemsThrough) {
                    var piece = entry.page.getSlice(at: entry.start, length: entry.end - entry.start)!
                    text.writeBuffer(&piece)
                }
                if text.readableBytes > 0 { slices.append(text) }
            }
            if itemsThrough == 0 { lastAnswer = (after, runID, lastSeq, slices) }
            return (slices, max(after, lastSeq))
        }
    }

    /// The events the feed has read from the store.
    var eventsRead: Int { lock.withLock { readCount } }

    /// The seq a stream that read the store itself may move to: `seen` (taken with `mark()`
    /// before that read) when the read returned everything up to then and the feed covers it.
    func mark() -> Int64? { lock.withLock { coveredFrom == nil ? nil : lastSeq } }
}
