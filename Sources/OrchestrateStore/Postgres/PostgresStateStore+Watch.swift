/// Watch-folder hand-offs (see `StateStore.handOver`). The hand-off row's primary key is the
/// file version: `ON CONFLICT DO NOTHING` makes a second serve (on any node) wait for the
/// first's transaction and then insert nothing, so it creates no run and adds no item.
extension PostgresStateStore {
    public func handOver(_ file: WatchedFile, as work: WatchWork, events: [EventRecord]) throws -> Bool {
        try pool.transaction { conn in
            var stepID: String?
            var itemID: String?
            if case .item(_, let step, let id, _, _) = work { (stepID, itemID) = (step, id) }
            let inserted = try conn.execute("""
                INSERT INTO watch_handoffs (watch, path, size, mtime_ns, run_id, step_id, item_id, handed_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, \(Self.serverNow))
                ON CONFLICT DO NOTHING
                """, [file.watch, file.path, PGText.of(file.size), PGText.of(file.mtimeNanoseconds), work.runID, stepID, itemID])
            guard inserted.affected == 1 else {
                try conn.execute("""
                    UPDATE watch_handoffs SET outcome = 'done'
                    WHERE watch = $1 AND path = $2 AND size = $3 AND mtime_ns = $4 AND outcome = 'removed'
                    """, [file.watch, file.path, PGText.of(file.size), PGText.of(file.mtimeNanoseconds)])
                return false
            }
            var allEvents: [EventRecord] = []
            switch work {
            case .run(let run, let runEvents):
                try Self.insertRun(run, conn)
                allEvents = runEvents
            case .item(let runID, let stepID, let id, let json, let event):
                try Self.insertItem(runID: runID, stepID: stepID, id: id, json: json, conn)
                allEvents = event.map { [$0] } ?? []
            }
            try Self.notifyWork(conn)
            try Self.insertEvents(allEvents + events, conn)
            return true
        }
    }

    public func watchHandOffs(watch: String, pendingOnly: Bool) throws -> [WatchHandOff] {
        try pool.withConnection { conn in
            try conn.execute("""
                SELECT * FROM watch_handoffs WHERE watch = $1 AND ($2 = 'false' OR outcome = 'pending')
                ORDER BY handed_at, path
                """, [watch, PGText.of(pendingOnly)]).all.map(Self.handOffRecord)
        }
    }

    public func watchHandOffs(watch: String, after: WatchedFile?, limit: Int) throws -> [WatchHandOff] {
        // Two statements, not one with `$2 = 'false' OR …`: the range on the primary key is what
        // starts each page where the last ended.
        try pool.withConnection { conn in
            guard let after else {
                return try conn.execute("""
                    SELECT * FROM watch_handoffs WHERE watch = $1 ORDER BY path, size, mtime_ns LIMIT $2::bigint
                    """, [watch, PGText.of(limit)]).all.map(Self.handOffRecord)
            }
            return try conn.execute("""
                SELECT * FROM watch_handoffs WHERE watch = $1 AND (path, size, mtime_ns) > ($2, $3::bigint, $4::bigint)
                ORDER BY path, size, mtime_ns LIMIT $5::bigint
                """, [watch, after.path, PGText.of(after.size), PGText.of(after.mtimeNanoseconds), PGText.of(limit)])
                .all.map(Self.handOffRecord)
        }
    }

    public func pendingHandOffCount(watch: String) throws -> Int {
        try pool.withConnection { conn in
            try conn.execute("SELECT count(*) AS n FROM watch_handoffs WHERE watch = $1 AND outcome = 'pending'", [watch])
                .all.first?.int("n") ?? 0
        }
    }

    public func endedHandOffs(watch: String, after: WatchHandOff?, limit: Int) throws -> [EndedHandOff] {
        let finished = RunStatus.allCases.filter(\.isFinished).map { "'\($0.rawValue)'" }.joined(separator: ",")
        return try pool.withConnection { conn in
            try conn.execute("""
                SELECT h.*, r.status AS run_status, i.status AS item_status FROM watch_handoffs h
                LEFT JOIN runs r ON r.id = h.run_id
                LEFT JOIN items i ON h.item_id IS NOT NULL AND i.run_id = h.run_id AND i.step_id = h.step_id AND i.id = h.item_id
                WHERE h.watch = $1 AND h.outcome = 'pending'
                  AND (r.id IS NULL OR r.status IN (\(finished)) OR i.status IN ('done', 'failed'))
                  AND ($2 = 'false' OR (h.handed_at, h.path, h.size, h.mtime_ns) > ($3::double precision, $4, $5::bigint, $6::bigint))
                ORDER BY h.handed_at, h.path, h.size, h.mtime_ns LIMIT $7::bigint
                """, [watch, PGText.of(after != nil), PGText.of(after?.handedAt ?? 0), after?.file.path ?? "",
                      PGText.of(after?.file.size ?? 0), PGText.of(after?.file.mtimeNanoseconds ?? 0), PGText.of(limit)])
                .all.map { row in
                    EndedHandOff(handOff: Self.handOffRecord(row),
                                 runStatus: row.string("run_status").flatMap(RunStatus.init(rawValue:)),
                                 itemStatus: row.string("item_status").flatMap(ItemRecord.Status.init(rawValue:)))
                }
        }
    }

    public func finishHandOff(_ file: WatchedFile, outcome: WatchHandOff.Outcome, events: [EventRecord]) throws -> Bool {
        try pool.transaction { conn in
            let updated = try conn.execute("""
                UPDATE watch_handoffs SET outcome = $5
                WHERE watch = $1 AND path = $2 AND size = $3 AND mtime_ns = $4 AND outcome = 'pending'
                """, [file.watch, file.path, PGText.of(file.size), PGText.of(file.mtimeNanoseconds), outcome.rawValue])
            guard updated.affected == 1 else { return false }
            try Self.insertEvents(events, conn)
            return true
        }
    }

    static func handOffRecord(_ row: PGRow) -> WatchHandOff {
        WatchHandOff(file: WatchedFile(watch: row.string("watch") ?? "", path: row.string("path") ?? "",
                                       size: row.int64("size") ?? 0, mtimeNanoseconds: row.int64("mtime_ns") ?? 0),
                     runID: row.string("run_id") ?? "", stepID: row.string("step_id"), itemID: row.string("item_id"),
                     handedAt: row.double("handed_at") ?? 0,
                     outcome: row.string("outcome").flatMap(WatchHandOff.Outcome.init(rawValue:)) ?? .pending)
    }
}
