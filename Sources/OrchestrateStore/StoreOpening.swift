/// Opens the store a `StoreLocation` names: the one factory every command uses.
///
/// ```swift
/// let store = try StoreOpening.open(try StoreLocation.parse(url))
/// ```
public enum StoreOpening {
    /// How durable a SQLite commit is (`ORCHESTRATE_SYNC=full` fsyncs each one). PostgreSQL's
    /// durability is the server's `synchronous_commit`.
    public typealias Synchronous = SQLiteStateStore.Synchronous

    public static func open(_ location: StoreLocation, synchronous: Synchronous = .normal) throws -> any StateStore {
        switch location {
        case .sqlite(let directory):
            return try SQLiteStateStore(directory: directory, synchronous: synchronous)
        case .postgres(let connection):
            return try PostgresStateStore(connection: connection)
        }
    }
}
