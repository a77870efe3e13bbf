import Foundation
import GRDB

/// Watch-folder hand-offs (see `StateStore.handOver`): the hand-off row's primary key is the
/// file version, so a second hand-off of it inserts nothing and the transaction writes nothing.
extension SQLiteStateStore {
    public func handOver(_ file: WatchedFile, as work: WatchWork, events: [EventRecord]) throws -> Bool {
        try write { db in
            var stepID: String?
            var itemID: String?
            if case .item(_, let step, let id, _, _) = work { (stepID, itemID) = (step, id) }
            try db.execute(sql: """
                INSERT OR IGNORE INTO watch_handoffs (watch, path, size, mtime_ns, run_id, step_id, item_id, handed_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [file.watch, file.path, file.size, file.mtimeNanoseconds, work.runID, stepID, itemID,
                                 Date().timeIntervalSince1970])
            guard db.changesCount == 1 else {
                try db.execute(sql: """
                    UPDATE watch_handoffs SET outcome = 'done'
                    WHERE watch = ? AND path = ? AND size = ? AND mtime_ns = ? AND outcome = 'removed'
                    """, arguments: [file.watch, file.path, file.size, file.mtimeNanoseconds])
                return false
            }
            switch work {
            case .run(let run, let runEvents):
                try Self.insertRun(run, events: runEvents, db)
            case .item(let runID, let stepID, let id, let json, let event):
                try Self.insertItem(runID: runID, stepID: stepID, id: id, json: json, event: event, db)
            }
            try Self.insertEvents(events, db)
            return true
        }
    }

    public func watchHandOffs(watch: String, pendingOnly: Bool) throws -> [WatchHandOff] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT * FROM watch_handoffs WHERE watch = ? AND (? = 0 OR outcome = 'pending') ORDER BY handed_at, path
                """, arguments: [watch, pendingOnly ? 1 : 0]).map(Self.handOffRecord)
        }
    }

    public func watchHandOffs(watch: String, after: WatchedFile?, limit: Int) throws -> [WatchHandOff] {
        // Two statements, not one with `? = 0 OR …`: under the OR, SQLite would search the key by
        // `watch` alone and walk every earlier version again at each page.
        try read { db in
            guard let after else {
                return try Row.fetchAll(db.cachedStatement(sql: """
                    SELECT * FROM watch_handoffs WHERE watch = ? ORDER BY path, size, mtime_ns LIMIT ?
                    """), arguments: [watch, limit]).map(Self.handOffRecord)
            }
            return try Row.fetchAll(db.cachedStatement(sql: """
                SELECT * FROM watch_handoffs WHERE watch = ? AND (path, size, mtime_ns) > (?, ?, ?)
                ORDER BY path, size, mtime_ns LIMIT ?
                """), arguments: [watch, after.path, after.size, after.mtimeNanoseconds, limit]).map(Self.handOffRecord)
        }
    }

    public func pendingHandOffCount(watch: String) throws -> Int {
        try read { db in
            try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM watch_handoffs WHERE watch = ? AND outcome = 'pending'"),
                             arguments: [watch]) ?? 0
        }
    }

    public func endedHandOffs(watch: String, after: WatchHandOff?, limit: Int) throws -> [EndedHandOff] {
        let finished = RunStatus.allCases.filter(\.isFinished).map { "'\($0.rawValue)'" }.joined(separator: ",")
        return try read { db in
            try Row.fetchAll(db.cachedStatement(sql: """
                SELECT h.*, r.status AS run_status, i.status AS item_status FROM watch_handoffs h
                LEFT JOIN runs r ON r.id = h.run_id
                LEFT JOIN items i ON h.item_id IS NOT NULL AND i.run_id = h.run_id AND i.step_id = h.step_id AND i.id = h.item_id
                WHERE h.watch = ? AND h.outcome = 'pending'
                  AND (r.id IS NULL OR r.status IN (\(finished)) OR i.status IN ('done', 'failed'))
                  AND (? = 0 OR (h.handed_at, h.path, h.size, h.mtime_ns) > (?, ?, ?, ?))
                ORDER BY h.handed_at, h.path, h.size, h.mtime_ns LIMIT ?
                """), arguments: [watch, after == nil ? 0 : 1, after?.handedAt ?? 0, after?.file.path ?? "", after?.file.size ?? 0,
                                  after?.file.mtimeNanoseconds ?? 0, limit])
                .map { row in
                    EndedHandOff(handOff: Self.handOffRecord(row),
                                 runStatus: (row["run_status"] as String?).flatMap(RunStatus.init(rawValue:)),
                                 itemStatus: (row["item_status"] as String?).flatMap(ItemRecord.Status.init(rawValue:)))
                }
        }
    }

    public func finishHandOff(_ file: WatchedFile, outcome: WatchHandOff.Outcome, events: [EventRecord]) throws -> Bool {
        try write { db in
            try db.execute(sql: """
                UPDATE watch_handoffs SET outcome = ?
                WHERE watch = ? AND path = ? AND size = ? AND mtime_ns = ? AND outcome = 'pending'
                """, arguments: [outcome.rawValue, file.watch, file.path, file.size, file.mtimeNanoseconds])
            guard db.changesCount == 1 else { return false }
            try Self.insertEvents(events, db)
            return true
        }
    }

    private static func handOffRecord(_ row: Row) -> WatchHandOff {
        WatchHandOff(file: WatchedFile(watch: row["watch"], path: row["path"], size: row["size"], mtimeNanoseconds: row["mtime_ns"]),
                     runID: row["run_id"], stepID: row["step_id"], itemID: row["item_id"], handedAt: row["handed_at"],
                     outcome: WatchHandOff.Outcome(rawValue: row["outcome"]) ?? .pending)
    }
}
