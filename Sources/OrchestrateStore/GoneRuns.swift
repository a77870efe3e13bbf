import Foundation
import OrchestrateJSON
import OrchestrateLock

/// Runs the store removed (`runs.pruned` and `run.deleted` events) that it no longer holds:
/// what a node's run directory sweep may remove from its own disk (`RunDirectorySweeper`).
public struct GoneRuns: Sendable, Equatable {
    /// Run ids, in the order the store removed them; none the store holds now (an id used
    /// again by a new run is left out).
    public var ids: [String]
    /// The journal was read up to this seq: the next read starts after it.
    public var through: Int64

    public init(ids: [String], through: Int64) {
        self.ids = ids
        self.through = through
    }

    /// The event types that remove runs, as SQL string literals (fixed words).
    static let removalTypes = "'\(EventType.runsPruned.rawValue)', '\(EventType.runDeleted.rawValue)'"

    /// The run ids an event of `removalTypes` names: `data.runs` (pruned) or `data.run` (deleted).
    static func named(by dataText: String) -> [String] {
        guard let data = try? JSONValue(parsing: dataText) else { return [] }
        if let runs = data["runs"]?.arrayValue { return runs.compactMap(\.stringValue) }
        return data["run"]?.stringValue.map { [$0] } ?? []
    }
}

/// The store's identity (`StateStore.storeIdentity`), asked for once per process and kept: it
/// never changes once made.
final class StoreIdentityCache: @unchecked Sendable {
    private let lock = Lock()
    private var value: String?  // guarded by lock

    func get(_ make: () throws -> String) throws -> String {
        try lock.withLock {
            if let value { return value }
            let made = try make()
            value = made
            return made
        }
    }

    /// The `queue_state` key holding it.
    static let key = "store_id"
}
