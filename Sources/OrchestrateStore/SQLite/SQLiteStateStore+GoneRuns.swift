import Foundation
import GRDB
import OrchestrateJSON

/// The store's identity and the runs it removed, for the run directory sweep of each node
/// (`StateStore.storeIdentity`, `StateStore.goneRuns`).
extension SQLiteStateStore {
    public func storeIdentity() throws -> String {
        try identity.get {
            try write { db in
                try db.execute(sql: "INSERT OR IGNORE INTO queue_state (key, value) VALUES (?, ?)",
                               arguments: [StoreIdentityCache.key, UUID().uuidString.lowercased()])
                return try String.fetchOne(db, sql: "SELECT value FROM queue_state WHERE key = ?",
                                           arguments: [StoreIdentityCache.key]) ?? ""
            }
        }
    }

    public func goneRuns(afterSeq: Int64, limit: Int) throws -> GoneRuns {
        try read { db in
            // Up to the newest seq at the start of the read: with nothing to find, the next read
            // starts there instead of scanning the same events again.
            let newest = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM events") ?? afterSeq
            let rows = try Row.fetchAll(db, sql: """
                SELECT seq, data_json FROM events
                WHERE seq > ? AND seq <= ? AND run_id IS NULL AND type IN (\(GoneRuns.removalTypes))
                ORDER BY seq LIMIT ?
                """, arguments: [afterSeq, newest, limit])
            let through = rows.count == limit ? rows[rows.count - 1][0] as Int64 : max(afterSeq, newest)
            let named = rows.flatMap { GoneRuns.named(by: $0[1] as String) }
            guard !named.isEmpty else { return GoneRuns(ids: [], through: through) }
            let held = Set(try String.fetchAll(db, sql: "SELECT id FROM runs WHERE id IN (SELECT value FROM json_each(?))",
                                               arguments: [JSONValue.array(named.map { .string($0) }).jsonText]))
            return GoneRuns(ids: named.filter { !held.contains($0) }, through: through)
        }
    }
}
