import NIOCore
import OrchestrateStore

/// Where one event stream is in the journal, and the reads that move it on: from the shared
/// `EventFeed` once the feed reaches back to it, else from the store itself, a page at a time,
/// until it joins the feed.
///
/// A run's stream reads its catch-up along the run's index, with the events about one file it
/// leaves out (`items=live`) left out by the store, and it never starts the feed before the
/// journal's end at its opening: the feed reads every run's events, and a run page opened on a
/// session of 100,000 files must not make the server read the 600,000 events about them.
struct StreamCursor {
    /// The run whose events the stream sends; nil: every run's and the queue's.
    let runID: String?
    /// The run's events about one file up to this seq are left out (`items=live`); 0: none.
    let filesThrough: Int64
    /// A seq up to which every event was visible before the stream opened (the journal's end
    /// then, for a run's stream; 0 when unknown): a catch-up read that returned less than a
    /// page has seen everything up to it, and the feed is not started below it.
    let visibleAtOpen: Int64
    /// The seq of the last event sent or passed over.
    private(set) var last: Int64
    /// Events read from the store by this stream itself (not through the feed).
    private(set) var eventsRead = 0

    static let pageSize = 500

    init(runID: String?, after: Int64, filesThrough: Int64 = 0, visibleAtOpen: Int64 = 0) {
        self.runID = runID
        self.last = after
        self.filesThrough = filesThrough
        self.visibleAtOpen = visibleAtOpen
    }

    /// The SSE text of what follows `last` (possibly nothing yet), as pieces to write in order,
    /// and whether more is waiting (a full page read from the store: read again at once).
    mutating func next(_ services: APIServices) async throws -> (text: [ByteBuffer], more: Bool) {
        let feed = services.eventFeed
        try await feed.refresh(services, startingAfter: max(last, visibleAtOpen))
        if let shared = feed.entries(after: last, runID: runID, itemsThrough: filesThrough) {
            last = shared.last
            return (shared.text, false)
        }
        // Older than the feed reaches: read the store until caught up.
        let mark = feed.mark()
        let store = services.store
        let events = try await services.blocking { [runID, last, filesThrough] in
            if let runID {
                return try store.storedEvents(runID: runID, afterSeq: last, withoutFileEventsThrough: filesThrough, limit: Self.pageSize)
            }
            return try store.storedEvents(runID: nil, afterSeq: last, limit: Self.pageSize)
        }
        eventsRead += events.count
        var page = ByteBuffer()
        for event in events { EventFeed.write(event, to: &page) }
        last = events.last?.seq ?? last
        let more = events.count == Self.pageSize
        // Everything up to the feed's mark, and up to the journal's end at the opening, was
        // visible before this read: a stream that got all of it (not a full page) moves there,
        // and joins the feed once the feed covers that point.
        if !more { last = max(last, mark ?? 0, visibleAtOpen) }
        return ([page], more)
    }
}
