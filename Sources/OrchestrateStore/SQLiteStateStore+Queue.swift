import Foundation
import GRDB

/// The queue's side of the SQLite store. Claims happen in one immediate transaction, so two
/// workers on one store never take the same run.
extension SQLiteStateStore {
    public func claimNextRuns(owner: OwnerIdentity, limit: Int, leaseUntil: Double) throws -> [RunRecord] {
        guard limit > 0 else { return [] }
        return try write { db in
            let now = Date().timeIntervalSince1970
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM runs WHERE status IN ('queued', 'running', 'compensating')
                ORDER BY CASE WHEN status = 'queued' THEN 1 ELSE 0 END, run_now DESC, priority DESC, queue_order, created_at
                """)
            var claimed: [RunRecord] = []
            for row in rows {
                guard claimed.count < limit else { break }
                let run = Self.runRecord(row)
                if let current = run.owner {
                    // Ours already (executing), or a live process's: not to be taken.
                    if current == owner { continue }
                    let sameHost = current.host == owner.host
                    let alive = sameHost ? current.isAliveLocally : (run.leaseUntil ?? 0) > now
                    if alive { continue }
                }
                try db.execute(sql: """
                    UPDATE runs SET owner_host = ?, owner_pid = ?, owner_start = ?, lease_until = ?, run_now = 0 WHERE id = ?
                    """, arguments: [owner.host, owner.pid, owner.startTime, leaseUntil, run.id])
                var taken = run
                taken.owner = owner
                taken.leaseUntil = leaseUntil
                claimed.append(taken)
            }
            return claimed
        }
    }

    public func claimPausedRuns(owner: OwnerIdentity, leaseUntil: Double) throws -> [RunRecord] {
        try write { db in
            let now = Date().timeIntervalSince1970
            var claimed: [RunRecord] = []
            for row in try Row.fetchAll(db, sql: "SELECT * FROM runs WHERE status = 'paused' ORDER BY queue_order") {
                let run = Self.runRecord(row)
                if let current = run.owner {
                    if current == owner { continue }
                    let alive = current.host == owner.host ? current.isAliveLocally : (run.leaseUntil ?? 0) > now
                    if alive { continue }
                }
                try db.execute(sql: "UPDATE runs SET owner_host = ?, owner_pid = ?, owner_start = ?, lease_until = ? WHERE id = ?",
                               arguments: [owner.host, owner.pid, owner.startTime, leaseUntil, run.id])
                claimed.append(run)
            }
            return claimed
        }
    }

    public func updateQueueFields(_ id: String, status: RunStatus?, queueOrder: Double?, runNow: Bool?) throws {
        try write { db in
            if let status { try db.execute(sql: "UPDATE runs SET status = ? WHERE id = ?", arguments: [status.rawValue, id]) }
            if let queueOrder { try db.execute(sql: "UPDATE runs SET queue_order = ? WHERE id = ?", arguments: [queueOrder, id]) }
            if let runNow { try db.execute(sql: "UPDATE runs SET run_now = ? WHERE id = ?", arguments: [runNow ? 1 : 0, id]) }
        }
    }

    public func takeControls(owner: OwnerIdentity) throws -> [(runID: String, control: String)] {
        try write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, requested_control FROM runs
                WHERE requested_control IS NOT NULL AND owner_host = ? AND owner_pid = ? AND owner_start = ?
                """, arguments: [owner.host, owner.pid, owner.startTime])
            guard !rows.isEmpty else { return [] }
            try db.execute(sql: """
                UPDATE runs SET requested_control = NULL
                WHERE requested_control IS NOT NULL AND owner_host = ? AND owner_pid = ? AND owner_start = ?
                """, arguments: [owner.host, owner.pid, owner.startTime])
            return rows.map { (runID: $0["id"], control: $0["requested_control"]) }
        }
    }

    public func setQueuePassive(_ passive: Bool) throws {
        try write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO queue_state (key, value) VALUES ('passive', ?)",
                           arguments: [passive ? "1" : "0"])
        }
    }

    public func isQueuePassive() throws -> Bool {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM queue_state WHERE key = 'passive'") == "1" }
    }

    public func deleteRun(_ id: String) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM events WHERE run_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM leases WHERE holder LIKE ?", arguments: [id + "/%"])
            try db.execute(sql: "DELETE FROM runs WHERE id = ?", arguments: [id])
        }
    }
}
