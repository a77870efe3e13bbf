/// Opens the store a `StoreLocation` names: the one factory every command uses.
///
/// ```swift
/// let store = try StoreOpening.open(try StoreLocation.parse(url))
/// ```
public enum StoreOpening {
    /// How durable a SQLite commit is (`ORCHESTRATE_SYNC=full` fsyncs each one). PostgreSQL's
    /// durability is the server's `synchronous_commit`.
    public enum Synchronous: String, Sendable, CaseIterable {
        case normal, full

        /// The value of `ORCHESTRATE_SYNC` (`normal` or `full`, in any case); nil for anything else.
        public init?(setting: String) {
            self.init(rawValue: setting.lowercased())
        }
    }

    public static func open(_ location: StoreLocation, synchronous: Synchronous = .normal) throws -> any StateStore {
        switch location {
        case .sqlite(let directory):
            return try SQLiteStateStore(directory: directory, synchronous: synchronous == .full ? .full : .normal)
        case .postgres(let connection):
            return try PostgresStateStore(connection: connection)
        }
    }
}
