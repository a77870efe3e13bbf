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
            guard inserted.affected == 1 else { return false }
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
