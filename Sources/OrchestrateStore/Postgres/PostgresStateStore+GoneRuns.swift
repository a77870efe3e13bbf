import Foundation

/// The store's identity and the runs it removed, for the run directory sweep of each node
/// (`StateStore.storeIdentity`, `StateStore.goneRuns`).
extension PostgresStateStore {
    public func storeIdentity() throws -> String {
        try identity.get {
            try pool.transaction { conn in
                try conn.execute("INSERT INTO queue_state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                                 [StoreIdentityCache.key, UUID().uuidString.lowercased()])
                return try conn.execute("SELECT value FROM queue_state WHERE key = $1", [StoreIdentityCache.key])[0]
                    .string("value") ?? ""
            }
        }
    }

    public func goneRuns(afterSeq: Int64, limit: Int) throws -> GoneRuns {
        try pool.withConnection { conn in
            // Up to the newest seq visible now (events become visible in seq order): with nothing
            // to find, the next read starts there instead of scanning the same events again.
            let newest = try conn.execute("SELECT max(seq) AS newest FROM events")[0].int64("newest") ?? afterSeq
            let rows = try conn.execute("""
                SELECT seq, data_json FROM events
                WHERE seq > $1 AND seq <= $2 AND run_id IS NULL AND type IN (\(GoneRuns.removalTypes))
                ORDER BY seq LIMIT $3
                """, [PGText.of(afterSeq), PGText.of(newest), PGText.of(limit)]).all
            let through = rows.count == limit ? rows[rows.count - 1].int64("seq") ?? afterSeq : max(afterSeq, newest)
            let named = rows.flatMap { GoneRuns.named(by: $0.string("data_json") ?? "{}") }
            guard !named.isEmpty else { return GoneRuns(ids: [], through: through) }
            let held = Set(try conn.execute("SELECT id FROM runs WHERE id = ANY($1::text[])", [PGText.array(named)])
                .all.compactMap { $0.string("id") })
            return GoneRuns(ids: named.filter { !held.contains($0) }, through: through)
        }
    }
}
