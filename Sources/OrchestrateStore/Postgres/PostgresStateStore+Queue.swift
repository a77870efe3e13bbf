import CLibPQ
import Foundation
import OrchestrateLock

/// The queue's side of the PostgreSQL store: claims that never block on each other, and the
/// wake-ups that spare idle workers from polling.
extension PostgresStateStore {
    public var fencesByLease: Bool { true }

    public func claimNextRuns(owner: OwnerIdentity, queues: [String], limit: Int, lease: Double) throws -> [RunRecord] {
        guard limit > 0, !queues.isEmpty else { return [] }
        // Runs whose owner died on this node are free at once (their pid is gone); the database
        // cannot see pids, so they are found here and released first, in the claim's
        // transaction (once a second: a worker claims many times a second under load). Without
        // that, the claim is one statement and so its own transaction: no BEGIN and COMMIT
        // round trips.
        //
        // The runs of dead or cut-off owners elsewhere are looked for at that same pace: their
        // indexes hold an entry for every run that ran lately, dead or alive, which a claim would
        // otherwise read through every time (10,000 queued runs: 4 ms a claim by the end of the
        // burst). A lease is many seconds; a takeover a second later changes nothing.
        if orphanScanDue() {
            return try pool.transaction { conn in
                try Self.freeOrphans(owner: owner, queues: queues, conn)
                return try Self.claim(owner: owner, queues: queues, limit: limit, lease: lease, takeOver: true, conn)
            }
        }
        return try pool.withConnection { conn in
            try Self.claim(owner: owner, queues: queues, limit: limit, lease: lease, takeOver: false, conn)
        }
    }

    /// Gives up the runs this node's dead processes held (see `claimNextRuns`).
    private static func freeOrphans(owner: OwnerIdentity, queues: [String], _ conn: PGConnection) throws {
        let orphans = try conn.execute("""
            SELECT id, owner_node, owner_pid, owner_start FROM runs
            WHERE owner_node = $1 AND NOT (owner_pid = $2 AND owner_start = $3)
              AND status IN ('running', 'compensating', 'queued') AND queue = ANY($4::text[])
            FOR UPDATE SKIP LOCKED
            """, Self.ownerParameters(owner) + [PGText.array(queues)])
        for row in orphans.all {
            let previous = OwnerIdentity(node: row.string("owner_node") ?? "", pid: Int32(row.int("owner_pid") ?? 0),
                                         startTime: row.int64("owner_start") ?? 0)
            if !previous.isLive(leaseValid: true) {
                try conn.execute("UPDATE runs SET lease_until = 0 WHERE id = $1", [row.string("id")])
            }
        }
    }

    /// Claims up to `limit` runs in one statement (see `claimNextRuns`); with `takeOver`, also
    /// the runs whose owner's lease ran out.
    private static func claim(owner: OwnerIdentity, queues: [String], limit: Int, lease: Double, takeOver: Bool,
                              _ conn: PGConnection) throws -> [RunRecord]
    {
        // Runs a dead or cut-off owner left unfinished come first (few: at most the running
        // runs); then the queue in its order. Free queued runs are read through the
        // `runs_queued_free` index in that order, so a claim reads the rows it takes, not the
        // whole queue; queued runs a dead or cut-off owner had claimed but not started (few:
        // at most the slots of the workers that died) are read apart and merged in. Without
        // `takeOver` ($7), the two reads of other owners' runs are skipped (a one-time filter).
        let rows = try conn.execute("""
            WITH unfinished AS (
                SELECT id, run_now AS asked_now, owner_node AS was_node, owner_pid AS was_pid, owner_start AS was_start
                FROM runs
                WHERE $7::boolean AND queue = ANY($1::text[]) AND status IN ('running', 'compensating')
                  AND (owner_node IS NULL OR lease_until IS NULL OR lease_until <= \(Self.serverNow))
                ORDER BY run_now DESC, priority DESC, queue_order, created_at
                LIMIT $2
                FOR UPDATE SKIP LOCKED),
            free AS (
                SELECT id, run_now AS asked_now, owner_node AS was_node, owner_pid AS was_pid, owner_start AS was_start,
                       priority, queue_order, created_at
                FROM runs
                WHERE status = 'queued' AND owner_node IS NULL AND queue = ANY($1::text[])
                ORDER BY run_now DESC, priority DESC, queue_order, created_at
                LIMIT $2
                FOR UPDATE SKIP LOCKED),
            abandoned AS (
                SELECT id, run_now AS asked_now, owner_node AS was_node, owner_pid AS was_pid, owner_start AS was_start,
                       priority, queue_order, created_at
                FROM runs
                WHERE $7::boolean AND status = 'queued' AND owner_node IS NOT NULL AND queue = ANY($1::text[])
                  AND (lease_until IS NULL OR lease_until <= \(Self.serverNow))
                ORDER BY run_now DESC, priority DESC, queue_order, created_at
                LIMIT $2
                FOR UPDATE SKIP LOCKED),
            queued AS (
                SELECT id, asked_now, was_node, was_pid, was_start
                FROM (SELECT * FROM free UNION ALL SELECT * FROM abandoned) q
                ORDER BY asked_now DESC, priority DESC, queue_order, created_at
                LIMIT $2 - (SELECT count(*) FROM unfinished)),
            candidates AS (SELECT * FROM unfinished UNION ALL SELECT * FROM queued),
            -- By primary key (`= ANY`): a join with the candidates would be planned for the
            -- planner's guess of their number and read the whole table.
            claimed AS (
                UPDATE runs SET owner_node = $3, owner_pid = $4, owner_start = $5,
                                lease_until = \(Self.serverNow) + $6, run_now = false
                WHERE id = ANY(ARRAY(SELECT id FROM candidates))
                RETURNING runs.*)
            SELECT claimed.*, true AS lease_valid, candidates.asked_now, candidates.was_node, candidates.was_pid,
                   candidates.was_start
            FROM claimed JOIN candidates ON claimed.id = candidates.id
            """, [PGText.array(queues), PGText.of(limit)] + Self.ownerParameters(owner) + [PGText.of(lease), PGText.of(takeOver)])
        // RETURNING has no order: sort into the claim's, for the caller to start them in.
        return rows.all.map { row in
            var run = Self.runRecord(row)
            if let node = row.string("was_node") {
                run.takenFrom = OwnerIdentity(node: node, pid: Int32(row.int("was_pid") ?? 0), startTime: row.int64("was_start") ?? 0)
            }
            return (run: run, askedNow: row.bool("asked_now") ?? false)
        }.sorted { a, b in
            let ka = (a.run.status == .queued ? 1 : 0, a.askedNow ? 0 : 1, -a.run.priority)
            let kb = (b.run.status == .queued ? 1 : 0, b.askedNow ? 0 : 1, -b.run.priority)
            if ka != kb { return ka < kb }
            return (a.run.queueOrder, a.run.createdAt) < (b.run.queueOrder, b.run.createdAt)
        }.map(\.run)
    }

    public func claimPausedRuns(owner: OwnerIdentity, queues: [String], lease: Double) throws -> [RunRecord] {
        guard !queues.isEmpty else { return [] }
        return try pool.transaction { conn in
            let candidates = try conn.execute("""
                SELECT *, \(Self.leaseValid) FROM runs WHERE status = 'paused' AND queue = ANY($1::text[])
                  AND NOT (owner_node IS NOT DISTINCT FROM $2 AND owner_pid IS NOT DISTINCT FROM $3::integer
                           AND owner_start IS NOT DISTINCT FROM $4::bigint)
                ORDER BY queue_order
                FOR UPDATE SKIP LOCKED
                """, [PGText.array(queues)] + Self.ownerParameters(owner))
            var claimed: [RunRecord] = []
            for run in candidates.all.map(Self.runRecord) where !run.ownerIsLive {
                try conn.execute("""
                    UPDATE runs SET owner_node = $2, owner_pid = $3, owner_start = $4, lease_until = \(Self.serverNow) + $5
                    WHERE id = $1
                    """, [run.id] + Self.ownerParameters(owner) + [PGText.of(lease)])
                claimed.append(run)
            }
            return claimed
        }
    }

    public func updateQueueFields(_ id: String, status: RunStatus?, queueOrder: Double?, runNow: Bool?) throws {
        try pool.transaction { conn in
            try conn.execute("""
                UPDATE runs SET status = COALESCE($2, status), queue_order = COALESCE($3::double precision, queue_order),
                                run_now = COALESCE($4::boolean, run_now)
                WHERE id = $1
                """, [id, status?.rawValue, PGText.of(queueOrder), runNow.map(PGText.of)])
            try Self.notifyWork(conn)
        }
    }

    public func takeControls(owner: OwnerIdentity) throws -> [(runID: String, control: RunControl)] {
        try pool.withConnection { conn in
            let rows = try conn.execute("""
                UPDATE runs SET requested_control = NULL
                FROM (SELECT id, requested_control FROM runs
                      WHERE requested_control IS NOT NULL AND owner_node = $1 AND owner_pid = $2 AND owner_start = $3
                      FOR UPDATE) taken
                WHERE runs.id = taken.id
                RETURNING taken.id, taken.requested_control
                """, Self.ownerParameters(owner))
            return rows.all.compactMap { row in
                row.string("requested_control").flatMap(RunControl.init(rawValue:)).map { (runID: row.string("id") ?? "", control: $0) }
            }
        }
    }

    public func setQueuePassive(_ passive: Bool) throws {
        try pool.transaction { conn in
            try conn.execute("""
                INSERT INTO queue_state (key, value) VALUES ('passive', $1)
                ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                """, [passive ? "1" : "0"])
            try Self.notifyWork(conn)
        }
    }

    public func isQueuePassive() throws -> Bool {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT value FROM queue_state WHERE key = 'passive'")
            return rows.count == 1 && rows[0].string("value") == "1"
        }
    }

    public func setQueuePassive(_ passive: Bool, queue: String) throws {
        try pool.transaction { conn in
            if passive {
                try conn.execute("""
                    INSERT INTO queue_state (key, value) VALUES ($1, '1')
                    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                    """, [QueueName.passiveKeyPrefix + queue])
            } else {
                try conn.execute("DELETE FROM queue_state WHERE key = $1", [QueueName.passiveKeyPrefix + queue])
            }
            try Self.notifyWork(conn)
        }
    }

    public func passiveQueues() throws -> Set<String> {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT key FROM queue_state WHERE starts_with(key, $1)", [QueueName.passiveKeyPrefix])
            return Set(rows.all.compactMap { $0.string("key").map { String($0.dropFirst(QueueName.passiveKeyPrefix.count)) } })
        }
    }

    public func setQueueRate(_ rate: String?) throws {
        try pool.transaction { conn in
            if let rate {
                try conn.execute("""
                    INSERT INTO queue_state (key, value) VALUES ('max_rate', $1)
                    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                    """, [rate])
            } else {
                try conn.execute("DELETE FROM queue_state WHERE key = 'max_rate'")
            }
            try Self.notifyWork(conn)
        }
    }

    public func queueRate() throws -> String? {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT value FROM queue_state WHERE key = 'max_rate'")
            return rows.count == 1 ? rows[0].string("value") : nil
        }
    }

    public func nodes() throws -> [NodeRecord] {
        try pool.withConnection { conn in
            let owners = try conn.execute("""
                SELECT owner_node, owner_pid, owner_start, lease_until, \(Self.leaseValid) FROM runs WHERE owner_node IS NOT NULL
                """).all.map { row -> (owner: OwnerIdentity, leaseUntil: Double?, live: Bool) in
                let owner = OwnerIdentity(node: row.string("owner_node") ?? "", pid: Int32(row.int("owner_pid") ?? 0),
                                          startTime: row.int64("owner_start") ?? 0)
                return (owner, row.double("lease_until"), owner.isLive(leaseValid: row.bool("lease_valid") ?? false))
            }
            let workerEvents = try conn.execute("SELECT * FROM events WHERE run_id IS NULL AND type IN ($1, $2) ORDER BY seq",
                                                [EventType.workerStarted.rawValue, EventType.workerStopped.rawValue])
            return NodeRecord.summarize(owners: owners, workerEvents: workerEvents.all.map(Self.eventRecord))
        }
    }

    /// Counts from `run_count_deltas` (appended by a trigger, migration 10), not from the runs:
    /// the changes since the last read are folded into one row per queue and status first (one
    /// statement, so atomic on its own), so a read sums about as many rows as there are queues
    /// and statuses plus the changes since the last one. Two folds at once never count a change
    /// twice: each deletes the rows it sums, and a row another fold deleted first is skipped.
    /// A fold of many changes (a read after a long time without one) leaves as many dead rows,
    /// which every read would step over until autovacuum came: those are vacuumed at once.
    public func queueFigures() throws -> QueueFigures {
        try pool.withConnection { conn in
            let folded = try conn.execute("""
                WITH folded AS (DELETE FROM run_count_deltas RETURNING queue, status, n),
                kept AS (INSERT INTO run_count_deltas (queue, status, n)
                         SELECT queue, status, sum(n) FROM folded GROUP BY queue, status HAVING sum(n) <> 0)
                SELECT count(*) AS n FROM folded
                """).all.first?.int("n") ?? 0
            if folded > Self.foldVacuumThreshold { try conn.execute("VACUUM run_count_deltas") }
            var counts: [QueueFigures.Count] = []
            var oldest: [String: Double] = [:]
            for row in try conn.execute("SELECT queue, status, sum(n) AS n FROM run_count_deltas GROUP BY queue, status HAVING sum(n) > 0").all {
                guard let queue = row.string("queue"), let status = row.string("status").flatMap(RunStatus.init(rawValue:)) else { continue }
                counts.append(QueueFigures.Count(queue: queue, status: status, runs: row.int("n") ?? 0))
                if status == .queued, let time = try conn.execute(QueueFigures.oldestQueuedSQL + "$1", [queue]).all.first?.double("oldest") {
                    oldest[queue] = time
                }
            }
            let held = try conn.execute(QueueFigures.heldSQL).all.first?.int("n") ?? 0
            return QueueFigures(runs: counts, oldestQueued: oldest, heldSteps: held)
        }
    }

    /// Folded changes above which `queueFigures` vacuums the table of changes.
    static let foldVacuumThreshold = 10_000

    /// The deletion leaves a `run.deleted` event, as the SQLite store's does (there it keeps the
    /// highest seq taken; here the sequence never goes back anyway).
    public func deleteRun(_ id: String) throws {
        try pool.transaction { conn in
            try conn.execute("DELETE FROM events WHERE run_id = $1", [id])
            try conn.execute("DELETE FROM leases WHERE holder LIKE $1", [Self.likePrefix(id + "/")])
            try conn.execute("DELETE FROM runs WHERE id = $1", [id])
            try conn.execute("DELETE FROM watch_handoffs WHERE run_id = $1 AND outcome = 'removed'", [id])
            try Self.insertEvents([EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: .runDeleted,
                                               data: ["run": .string(id)])], conn)
        }
    }

    public func watchForWork(_ wake: @escaping @Sendable () -> Void) throws -> (any WorkWatch)? {
        let watch = NotificationWatch(pool: pool, channel: PostgresSchema.workChannel, wake: wake)
        try watch.start()
        return watch
    }
}

/// `LISTEN` on a connection of its own, on a thread of its own: calls `wake` for each
/// notification, and once after each reconnection (notifications sent while it was cut off are
/// lost, so the worker looks for itself).
final class NotificationWatch: WorkWatch, @unchecked Sendable {
    private let pool: PGPool
    private let channel: String
    private let wake: @Sendable () -> Void
    private let state = MonotonicCondition()
    private var cancelled = false
    private var running = false

    init(pool: PGPool, channel: String, wake: @escaping @Sendable () -> Void) {
        self.pool = pool
        self.channel = channel
        self.wake = wake
    }

    /// Listens before returning, so a run submitted right after cannot be missed.
    func start() throws {
        let conn = try listen()
        running = true
        let thread = Thread { [self] in loop(conn) }
        thread.name = "store notifications"
        thread.start()
    }

    func cancel() {
        state.withLock {
            cancelled = true
            while running { _ = state.wait(seconds: 0.1) }
        }
    }

    private var isCancelled: Bool { state.withLock { cancelled } }

    private func listen() throws -> PGConnection {
        let conn = try pool.connect()
        try conn.execute("LISTEN \(channel)")
        return conn
    }

    private func loop(_ first: PGConnection) {
        defer { state.withLock { running = false; state.broadcast() } }
        var conn: PGConnection? = first
        while !isCancelled {
            guard let current = conn else {
                Thread.sleep(forTimeInterval: 0.5)
                conn = try? listen()
                if conn != nil { wake() }
                continue
            }
            var fds = [pollfd(fd: current.socket, events: Int16(POLLIN), revents: 0)]
            _ = poll(&fds, 1, 200)
            do {
                if try !current.takeNotifications().isEmpty { wake() }
                if !current.isHealthy { conn = nil }
            } catch {
                conn = nil
            }
        }
    }
}
