/// Events about one file of a session: a session of 100,000 files journals several of each
/// (`item.added`, `item.started`, `item.finished`, and `watch.handed_over`, `watch.finished` when
/// a watch folder feeds it), against a few dozen about its steps. A run page leaves out those
/// already journaled (its detail pages the files), and the store leaves them out in the read
/// (`EventStore.storedEvents(runID:afterSeq:withoutFileEventsThrough:limit:)`).
extension EventType {
    /// `item.*` or `watch.*`.
    public var isAboutOneFile: Bool { rawValue.hasPrefix("item.") || rawValue.hasPrefix("watch.") }

    /// `isAboutOneFile` of the `type` column, in SQL that both stores read alike.
    static let aboutOneFileSQL = "(substr(type, 1, 5) = 'item.' OR substr(type, 1, 6) = 'watch.')"
}

extension StoredEvent {
    /// Whether it is an event about one file (`EventType.isAboutOneFile`).
    public var isFileEvent: Bool { type.isAboutOneFile }
}
