/// What a store throws besides the database's own errors.
public enum StoreError: Error, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    /// A fenced commit found the run held by another process, or its own lease run out (see
    /// `JournalBatch.fence`).
    case ownershipLost(runID: String)
    /// The database could not be reached or failed a statement; `location` never holds a
    /// password.
    case unavailable(location: String, reason: String)
    /// `createRun` of an id that exists.
    case duplicateRun(String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason): return "cannot open the state store \(path): \(reason)"
        case .ownershipLost(let runID):
            return "another process took run \(runID) over (this one's lease had expired); this process stopped without writing"
        case .unavailable(let location, let reason): return "the state store \(location) is unavailable: \(reason)"
        case .duplicateRun(let id): return "a run named \(id) already exists"
        }
    }
}
