import Foundation
import OrchestrateJSON
import OrchestrateLock

/// The state store several machines share: one PostgreSQL database, through libpq.
///
/// ```swift
/// let store = try PostgresStateStore(connection: "postgresql://orc@db.internal/orchestrate")
/// let runs = try store.claimNextRuns(owner: .current, queues: ["uploads"], limit: 4, lease: 15)
/// ```
///
/// How it keeps the `StateStore` promises across machines:
/// - **Clock**: every lease time is computed and compared by the server
///   (`clock_timestamp()`), so the nodes' clocks may disagree.
/// - **Claims**: `SELECT … FOR UPDATE SKIP LOCKED` in the claiming transaction; two workers
///   never block on, nor take, the same run.
/// - **Fencing**: a fenced commit locks the run's row and checks owner and lease first; an
///   owner whose lease ran out cannot renew it either, it must stop (`fencesByLease`).
/// - **Event order**: the transaction-level advisory lock `LockKey.eventOrder` is taken just
///   before a transaction's events are inserted (always its last statement), so events become
///   visible in `seq` order. It serializes the commits that carry events, which is the price of
///   a follower that never skips one.
/// - **Group commit**: the journal commits of one process's run threads that arrive together
///   share one transaction (`CommitGroup`); each caller still waits for its own to be durable.
/// - **Wake-ups**: writes that make work (`createRun`, controls, queue changes, items) send
///   `NOTIFY orchestrate_work` on commit; `watchForWork` listens on its own connection.
///
/// Why libpq rather than PostgresNIO: the `StateStore` protocol is synchronous, called from the
/// engine's plain threads; libpq is synchronous, is what `psql` uses (so `sslmode`, password
/// files and `PG*` variables behave exactly as users know them), and adds no event loop.
public final class PostgresStateStore: StateStore, @unchecked Sendable {
    let pool: PGPool
    /// `storeIdentity()`, once read.
    let identity = StoreIdentityCache()
    private let connection: String
    /// Gathers the journal commits of this process's run threads into shared transactions.
    private var commitGroup: CommitGroup<GroupedWrite>!
    /// When `claimNextRuns` last looked for runs whose owner died on this node (monotonic
    /// seconds; guarded by `orphanScanLock`): at most once a second, not at every claim.
    private var lastOrphanScan = -Double.infinity
    private let orphanScanLock = Lock()
    static let orphanScanInterval = 1.0

    /// True at most once per `orphanScanInterval` (the first call always).
    func orphanScanDue() -> Bool {
        orphanScanLock.withLock {
            let now = ProcessInfo.processInfo.systemUptime
            guard now - lastOrphanScan >= Self.orphanScanInterval else { return false }
            lastOrphanScan = now
            return true
        }
    }

    /// What run threads commit through the `CommitGroup`: a round of a run's journal, or the
    /// release of a run once it stops.
    enum GroupedWrite {
        case journal(JournalBatch)
        case release(runID: String, owner: OwnerIdentity)
    }

    /// Connects (so a bad URL or unreachable server fails here, with the location minus its
    /// password) and creates or migrates the schema.
    public init(connection: String) throws {
        self.connection = connection
        pool = PGPool(connection: connection, displayName: ConnectionText.redacted(connection))
        try pool.check()
        try PostgresSchema.migrate(pool)
        commitGroup = CommitGroup { [unowned self] batches in writeGroup(batches) }
    }

    /// The database server's clock, as SQL (seconds since 1970).
    static let serverNow = "extract(epoch from clock_timestamp())::double precision"

    public func now() throws -> Double {
        try pool.withConnection { conn in
            try conn.execute("SELECT \(Self.serverNow) AS now")[0].double("now") ?? 0
        }
    }

    // MARK: Runs

    public func createRuns(_ runs: [(run: RunRecord, events: [EventRecord])]) throws {
        guard !runs.isEmpty else { return }
        try pool.transaction { conn in
            for (run, _) in runs { try Self.insertRun(run, conn) }
            try Self.notifyWork(conn)
            try Self.insertEvents(runs.flatMap(\.events), conn)
        }
    }

    static func insertRun(_ run: RunRecord, _ conn: PGConnection) throws {
            let inserted = try conn.execute("""
                INSERT INTO runs (id, workflow_name, workflow_file, workflow_source, inputs_json, status, created_at,
                                  run_dir, priority, labels_json, queue_order, max_rate, queue, max_rate_timetable,
                                  retention)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
                ON CONFLICT (id) DO NOTHING
                """, [run.id, run.workflowName, run.workflowFile, run.workflowSource, run.inputs.jsonText,
                      run.status.rawValue, PGText.of(run.createdAt), run.runDir, PGText.of(run.priority),
                      labelsJSON(run.labels), PGText.of(run.queueOrder), PGText.of(run.maxRate), run.queue,
                      run.maxRateTimetable, PGText.of(run.retention.map { PruneRule.finite($0) })])
            guard inserted.affected == 1 else { throw StoreError.duplicateRun(run.id) }
    }

    public func run(_ id: String) throws -> RunRecord? {
        try pool.withConnection { conn in try Self.run(id, conn) }
    }

    private static func run(_ id: String, _ conn: PGConnection) throws -> RunRecord? {
        let rows = try conn.execute(runByID, [id])
        return rows.count == 0 ? nil : runRecord(rows[0])
    }

    // The reads of a run's detail (`runDetail` sends them together).
    private static let runByID = "SELECT *, \(leaseValid) FROM runs WHERE id = $1"
    private static let stepsOfRun = "SELECT * FROM steps WHERE run_id = $1"
    private static let itemsOfRun = "SELECT * FROM items WHERE run_id = $1 ORDER BY step_id, seq"
    private static let itemCountsOfRun = "SELECT step_id, status, COUNT(*) AS count FROM items WHERE run_id = $1 GROUP BY step_id, status ORDER BY step_id"
    /// Each step's newest `step.progress` of the runs in $1 (a text array), in seq order.
    private static let latestProgressOfRuns = """
        SELECT * FROM (SELECT DISTINCT ON (run_id, step) * FROM events WHERE run_id = ANY($1::text[]) AND type = $2
                       ORDER BY run_id, step, seq DESC) latest
        ORDER BY seq
        """

    /// The four reads in one round trip (a pipeline), in a REPEATABLE READ transaction so they
    /// see one snapshot, as SQLite's single read transaction does.
    public func runDetail(_ id: String, items window: ItemWindow) throws -> RunDetailRecord? {
        // A window of the items, one more than asked for to tell whether others follow.
        var itemsSQL = "SELECT * FROM items WHERE run_id = $1"
        var itemParameters: [String?] = [id]
        if let after = window.after, !window.last {
            itemsSQL += " AND (step_id, seq) > ($2, $3)"
            itemParameters += [after.stepID, PGText.of(after.seq)]
        }
        itemsSQL += (window.last ? " ORDER BY step_id DESC, seq DESC" : " ORDER BY step_id, seq") + " LIMIT $\(itemParameters.count + 1)"
        itemParameters.append(PGText.of(Int64(window.limit + 1)))
        let results = try pool.withConnection { conn in
            try conn.executePipeline([
                PGStatement("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
                PGStatement(Self.runByID, [id]),
                PGStatement(Self.stepsOfRun, [id]),
                PGStatement(itemsSQL, itemParameters),
                PGStatement(Self.latestProgressOfRuns, [PGText.array([id]), EventType.stepProgress.rawValue]),
                PGStatement(Self.itemCountsOfRun, [id]),
                PGStatement("COMMIT"),
            ])
        }
        guard results.count == 7, results[1].count == 1 else { return nil }
        var items = results[3].all.map(Self.itemRecord)
        let next = ItemPage.cut(&items, window)
        let counts = results[5].all.map { row in
            ItemCount(stepID: row.string("step_id") ?? "", status: row.string("status").flatMap(ItemRecord.Status.init(rawValue:)) ?? .queued,
                      count: row.int("count") ?? 0)
        }
        return RunDetailRecord(run: Self.runRecord(results[1][0]),
                               steps: UnstartedItems.adding(to: results[2].all.map(Self.stepRecord)),
                               items: items, progress: results[4].all.map(Self.eventRecord), itemCounts: counts, itemsNext: next)
    }

    /// Every filter is in the query, newest first through an index by creation (of all runs,
    /// of a status, of a workflow), so a `limit` reads about that many rows (migration 10).
    public func listRuns(_ filter: RunFilter) throws -> [RunRecord] {
        var sql = "SELECT *, \(Self.leaseValid) FROM runs WHERE true"
        var parameters: [String?] = []
        func parameter(_ value: String?) -> String {
            parameters.append(value)
            return "$\(parameters.count)"
        }
        if let statuses = filter.statuses, !statuses.isEmpty {
            sql += " AND status = ANY(\(parameter(PGText.array(statuses.map(\.rawValue).sorted())))::text[])"
        }
        if let queues = filter.queues, !queues.isEmpty {
            sql += " AND queue = ANY(\(parameter(PGText.array(queues.sorted())))::text[])"
        }
        if filter.runNowOnly { sql += " AND run_now" }
        if let workflow = filter.workflow { sql += " AND workflow_name = \(parameter(workflow))" }
        if !filter.idPrefixes.isEmpty {
            sql += " AND (" + filter.idPrefixes.map { "starts_with(id, \(parameter($0)))" }.joined(separator: " OR ") + ")"
        }
        for (key, value) in filter.labels.sorted(by: { $0.key < $1.key }) {
            sql += " AND labels_json::jsonb ->> \(parameter(key)) = \(parameter(value))"
        }
        if let text = filter.text {
            let t = parameter(text)
            sql += """
                 AND (strpos(lower(id), \(t)) > 0 OR strpos(lower(workflow_name), \(t)) > 0 OR strpos(lower(workflow_file), \(t)) > 0
                      OR EXISTS (SELECT 1 FROM jsonb_each_text(labels_json::jsonb) AS l
                                 WHERE strpos(lower(l.key), \(t)) > 0 OR strpos(lower(l.value), \(t)) > 0))
                """
        }
        if let limit = filter.limit {
            sql += " ORDER BY created_at DESC, id DESC LIMIT \(parameter(PGText.of(max(limit, 0))))"
        } else {
            sql += " ORDER BY created_at, id"
        }
        let runs = try pool.withConnection { conn in try conn.execute(sql, parameters).all.map(Self.runRecord) }
        return filter.limit == nil ? runs : runs.reversed()
    }

    public func claimRun(_ id: String, owner: OwnerIdentity, lease: Double) throws -> Bool {
        try pool.transaction { conn in
            let rows = try conn.execute("SELECT *, \(Self.leaseValid) FROM runs WHERE id = $1 FOR UPDATE", [id])
            guard rows.count == 1 else { return false }
            let run = Self.runRecord(rows[0])
            if let current = run.owner, current != owner, run.ownerIsLive { return false }
            try conn.execute("""
                UPDATE runs SET owner_node = $2, owner_pid = $3, owner_start = $4, lease_until = \(Self.serverNow) + $5
                WHERE id = $1
                """, [id] + Self.ownerParameters(owner) + [PGText.of(lease)])
            return true
        }
    }

    public func renewLease(_ id: String, owner: OwnerIdentity, lease: Double) throws -> (owned: Bool, control: RunControl?) {
        try pool.withConnection { conn in
            // An expired lease is not renewed: another node may already have taken the run.
            let rows = try conn.execute("""
                UPDATE runs SET lease_until = \(Self.serverNow) + $5
                WHERE id = $1 AND owner_node = $2 AND owner_pid = $3 AND owner_start = $4 AND lease_until > \(Self.serverNow)
                RETURNING requested_control
                """, [id] + Self.ownerParameters(owner) + [PGText.of(lease)])
            guard rows.count == 1 else { return (false, nil) }
            return (true, rows[0].string("requested_control").flatMap(RunControl.init(rawValue:)))
        }
    }

    public func releaseRun(_ id: String, owner: OwnerIdentity) throws {
        try commitGroup.commit(.release(runID: id, owner: owner))
    }

    /// Frees the runs' rows (each only if `owner` still holds it) and ends their concurrency
    /// leases, in one statement; wakes the other workers only if one of the runs is not finished
    /// (a serve shutting down hands its runs over): a finished run is no one's work.
    static func release(_ runs: [(runID: String, owner: OwnerIdentity)]) -> PGStatement? {
        guard !runs.isEmpty else { return nil }
        return PGStatement("""
            WITH given AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[]) AS g(id, node, pid, start)),
            released AS (
                UPDATE runs SET owner_node = NULL, owner_pid = NULL, owner_start = NULL, lease_until = NULL
                FROM given
                WHERE runs.id = given.id AND owner_node = given.node AND owner_pid = given.pid AND owner_start = given.start
                  AND runs.id = ANY($1::text[])
                RETURNING runs.status),
            ended AS (
                DELETE FROM leases USING given
                WHERE leases.owner_node = given.node AND leases.owner_pid = given.pid AND leases.owner_start = given.start
                  AND starts_with(leases.holder, given.id || '/'))
            SELECT pg_notify($5, '') FROM (SELECT 1 FROM released WHERE status NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 1) unfinished
            """, columns(of: runs, [\.runID, \.owner.node, { PGText.of($0.owner.pid) }, { PGText.of($0.owner.startTime) }])
                + [PostgresSchema.workChannel])
    }

    public func requestControl(_ id: String, control: RunControl?) throws {
        try pool.transaction { conn in
            try conn.execute("UPDATE runs SET requested_control = $2 WHERE id = $1", [id, control?.rawValue])
            try Self.notifyWork(conn)
        }
    }

    // MARK: Journal

    public func commit(_ batch: JournalBatch) throws {
        guard !batch.isEmpty else { return }
        try commitGroup.commit(.journal(batch))
    }

    /// Nothing to do: a commit is on the server's disk when it returns, by its
    /// `synchronous_commit` (on unless the operator turned it off, a choice made there).
    public func syncJournal() throws {}

    /// Writes what `CommitGroup` gathered in one transaction. A batch whose fence fails is left
    /// out (`ownershipLost`) and the others commit; any other failure of the shared transaction
    /// is sorted out by committing each piece alone, so one bad batch never fails its
    /// neighbours. A lost connection fails them all: their fate is unknown.
    ///
    /// First the common case, every fence holding: all statements in one round trip
    /// (`executePipeline`), the fence first (`orchestrate_fence` fails the whole transaction,
    /// so nothing is written, unless every fenced run is held). Only when that fails are the
    /// fences read one by one to find whose failed.
    func writeGroup(_ writes: [GroupedWrite]) -> [Result<Void, any Error>] {
        func eachAlone() -> [Result<Void, any Error>] {
            writes.map { one in Result { try pool.transaction { conn in try Self.write([one], conn) }[0].get() } }
        }
        // Deleting steps is rare (`retry`) and must follow its own upserts: such a batch goes alone.
        let deletes = writes.contains { if case .journal(let batch) = $0 { !batch.deletedSteps.isEmpty } else { false } }
        if deletes { return eachAlone() }
        do {
            let batches = writes.compactMap { if case .journal(let batch) = $0 { batch } else { nil } }
            let fence = Self.fence(batches.compactMap(\.fence))
            try pool.withConnection { conn in
                try conn.executePipeline([fence].compactMap { $0 } + Self.statements(batches, releasing: Self.releases(writes) { _ in true }))
            }
            return writes.map { _ in .success(()) }
        } catch let error as StoreError {
            return writes.map { _ in .failure(error) }
        } catch {
            // A fence failed, or a statement did: nothing was written; find out whose, below.
        }
        if writes.count == 1 { return eachAlone() }
        do {
            return try pool.transaction { conn in try Self.write(writes, conn) }
        } catch let error as StoreError {
            return writes.map { _ in .failure(error) }
        } catch {
            return eachAlone()
        }
    }

    /// The statements of `writeGroup`'s slow path, in the caller's transaction: one fence read
    /// for every fenced run, then the accepted batches' writes.
    private static func write(_ writes: [GroupedWrite], _ conn: PGConnection) throws -> [Result<Void, any Error>] {
        let batches = writes.compactMap { if case .journal(let batch) = $0 { batch } else { nil } }
        let held = try heldRuns(batches.compactMap(\.fence), conn)
        var outcomes: [Result<Void, any Error>] = []
        var accepted: [JournalBatch] = []
        for write in writes {
            guard case .journal(let batch) = write else {
                outcomes.append(.success(()))
                continue
            }
            if let (runID, owner) = batch.fence, held[runID] != owner {
                outcomes.append(.failure(StoreError.ownershipLost(runID: runID)))
            } else {
                outcomes.append(.success(()))
                accepted.append(batch)
            }
        }
        for (runID, id) in accepted.flatMap(\.deletedSteps) {
            try conn.execute("DELETE FROM steps WHERE run_id = $1 AND id = $2", [runID, id])
            try conn.execute("DELETE FROM checkpoints WHERE run_id = $1 AND step_id = $2", [runID, id])
        }
        for statement in statements(accepted, releasing: releases(writes) { held[$0.runID] == $0.owner }) {
            try conn.execute(statement.sql, statement.parameters)
        }
        return outcomes
    }

    /// The runs `writes` release: those asked for alone, and those whose last journal batch
    /// releases them when `isHeld` says the batch's writer still holds the run.
    private static func releases(_ writes: [GroupedWrite], isHeld: ((runID: String, owner: OwnerIdentity)) -> Bool)
        -> [(runID: String, owner: OwnerIdentity)]
    {
        writes.compactMap { write in
            switch write {
            case .release(let runID, let owner): (runID, owner)
            case .journal(let batch): batch.releasesRun ? batch.fence.flatMap { isHeld($0) ? $0 : nil } : nil
            }
        }
    }

    /// The writes of accepted batches, in the order "Event order" needs: the journaled rows,
    /// the events as late as may be (the event-order lock is held from them to the commit),
    /// and the releases after everything the owners wrote (each row is written while its writer
    /// holds the run; folding a run's release into its final update, one row version fewer,
    /// freed the row before its last steps and events were written, which the takeover test's
    /// write audit, judging each row as it is written, rightly counted as unheld writes). Steps a
    /// batch deletes are the caller's, before these.
    private static func statements(_ batches: [JournalBatch], releasing: [(runID: String, owner: OwnerIdentity)])
        -> [PGStatement]
    {
        let endedLeases = batches.flatMap(\.releasedLeases)
        return [
            updateRuns(batches.flatMap(\.runUpdates)),
            upsertSteps(batches.flatMap(\.stepUpserts)),
            endedLeases.isEmpty ? nil : PGStatement("DELETE FROM leases WHERE holder = ANY($1::text[])", [PGText.array(endedLeases)]),
            insertEvents(batches.flatMap(\.events)),
            release(releasing),
        ].compactMap { $0 }
    }

    public func steps(ofRun runID: String) throws -> [StepRecord] {
        try pool.withConnection { conn in try Self.steps(ofRun: runID, conn) }
    }

    /// The run's step rows, and its fan-outs' items that have no row yet (`UnstartedItems`).
    private static func steps(ofRun runID: String, _ conn: PGConnection) throws -> [StepRecord] {
        UnstartedItems.adding(to: try conn.execute(stepsOfRun, [runID]).all.map(stepRecord))
    }

    // MARK: Checkpoints

    public func saveCheckpoint(runID: String, stepID: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try pool.transaction { conn in
            if let fence { try Self.checkFence(runID, fence, conn) }
            try conn.execute("""
                INSERT INTO checkpoints (run_id, step_id, data, updated_at) VALUES ($1, $2, $3::bytea, \(Self.serverNow))
                ON CONFLICT (run_id, step_id) DO UPDATE SET data = EXCLUDED.data, updated_at = EXCLUDED.updated_at
                """, [runID, stepID, PGText.bytea(data)])
        }
    }

    public func checkpoint(runID: String, stepID: String) throws -> [UInt8]? {
        try pool.withConnection { conn in
            let rows = try conn.execute("SELECT data FROM checkpoints WHERE run_id = $1 AND step_id = $2", [runID, stepID])
            return rows.count == 0 ? nil : rows[0].bytes("data")
        }
    }

    // MARK: Concurrency leases

    public func tryAcquireLeases(_ keys: [(key: String, limit: Int)], holder: String, owner: OwnerIdentity,
                                 lease: Double) throws -> Bool
    {
        try pool.transaction { conn in
            for (key, limit) in keys {
                // Serializes acquirers of one key (the rows alone cannot: a new slot is an insert).
                try conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [key])
                let rows = try conn.execute("""
                    SELECT holder, owner_node, owner_pid, owner_start, expires_at > \(Self.serverNow) AS valid
                    FROM leases WHERE key = $1 AND holder <> $2
                    """, [key, holder])
                var live = 0
                for row in rows.all {
                    let leaseOwner = OwnerIdentity(node: row.string("owner_node") ?? "", pid: Int32(row.int("owner_pid") ?? 0),
                                                   startTime: row.int64("owner_start") ?? 0)
                    if leaseOwner.isLive(leaseValid: row.bool("valid") ?? false) {
                        live += 1
                    } else {
                        try conn.execute("DELETE FROM leases WHERE key = $1 AND holder = $2", [key, row.string("holder")])
                    }
                }
                if live >= limit { return false }
            }
            for (key, _) in keys {
                try conn.execute("""
                    INSERT INTO leases (key, holder, owner_node, owner_pid, owner_start, expires_at)
                    VALUES ($1, $2, $3, $4, $5, \(Self.serverNow) + $6)
                    ON CONFLICT (key, holder) DO UPDATE SET owner_node = EXCLUDED.owner_node, owner_pid = EXCLUDED.owner_pid,
                        owner_start = EXCLUDED.owner_start, expires_at = EXCLUDED.expires_at
                    """, [key, holder] + Self.ownerParameters(owner) + [PGText.of(lease)])
            }
            return true
        }
    }

    public func renewLeases(owner: OwnerIdentity, lease: Double) throws {
        try pool.withConnection { conn in
            try conn.execute("""
                UPDATE leases SET expires_at = \(Self.serverNow) + $4 WHERE owner_node = $1 AND owner_pid = $2 AND owner_start = $3
                """, Self.ownerParameters(owner) + [PGText.of(lease)])
        }
    }

    // MARK: Events

    public func appendEvents(_ events: [EventRecord]) throws {
        guard !events.isEmpty else { return }
        try pool.transaction { conn in try Self.insertEvents(events, conn) }
    }

    public func storedEvents(runID: String?, afterSeq: Int64, limit: Int) throws -> [StoredEvent] {
        try pool.withConnection { conn in
            let rows: PGRows
            if let runID {
                rows = try conn.execute("SELECT * FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                                        [runID, PGText.of(afterSeq), PGText.of(limit)])
            } else {
                rows = try conn.execute("SELECT * FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
                                        [PGText.of(afterSeq), PGText.of(limit)])
            }
            return rows.all.map(Self.storedEvent)
        }
    }

    public func storedEvents(runID: String, afterSeq: Int64, withoutFileEventsThrough filesThrough: Int64,
                             limit: Int) throws -> [StoredEvent] {
        try pool.withConnection { conn in
            try conn.execute(Self.runEventsWithoutFiles, [runID, PGText.of(afterSeq), PGText.of(filesThrough), PGText.of(limit)])
                .all.map(Self.storedEvent)
        }
    }

    /// `run_id = ANY` and the order (run_id, seq), which only events_run gives: with
    /// `run_id = $1 ... ORDER BY seq` the planner walks the primary key in seq order and
    /// filters, expecting most of the run's events to match (it cannot know that a session's
    /// few events not about files are rare): 2.6 M rows of every run, against the session's
    /// 600,000 along events_run (bench/RESULTS.md, "SFTP trees of 100,000 files").
    static let runEventsWithoutFiles = """
        SELECT * FROM events WHERE run_id = ANY(ARRAY[$1::text]) AND seq > $2
        AND (seq > $3 OR NOT \(EventType.aboutOneFileSQL)) ORDER BY run_id, seq LIMIT $4
        """

    public func latestProgress(runID: String) throws -> [EventRecord] {
        try pool.withConnection { conn in try Self.latestProgress(runIDs: [runID], conn) }
    }

    public func latestProgress(runIDs: [String]) throws -> [String: [EventRecord]] {
        guard !runIDs.isEmpty else { return [:] }
        let events = try pool.withConnection { conn in try Self.latestProgress(runIDs: runIDs, conn) }
        return Dictionary(grouping: events) { $0.runID ?? "" }
    }

    private static func latestProgress(runIDs: [String], _ conn: PGConnection) throws -> [EventRecord] {
        try conn.execute(latestProgressOfRuns, [PGText.array(runIDs), EventType.stepProgress.rawValue]).all.map(eventRecord)
    }

    // MARK: Items

    public func addItems(runID: String, stepID: String, _ items: [NewItem]) throws {
        guard !items.isEmpty else { return }
        try pool.transaction { conn in
            try Self.insertItems(runID: runID, stepID: stepID, ids: items.map(\.id), jsons: items.map(\.json), conn)
            try Self.notifyWork(conn)
            try Self.insertEvents(items.compactMap(\.event), conn)
        }
    }

    /// Inserts a queued item (its event is the caller's, last: see `insertEvents`).
    static func insertItem(runID: String, stepID: String, id: String, json: String, _ conn: PGConnection) throws {
        try insertItems(runID: runID, stepID: stepID, ids: [id], jsons: [json], conn)
    }

    /// Inserts queued items in one statement, numbered in order after the step's last (their
    /// events are the caller's, last: see `insertEvents`).
    static func insertItems(runID: String, stepID: String, ids: [String], jsons: [String], _ conn: PGConnection) throws {
        // The run's row lock orders concurrent adds, so sequence numbers are never shared.
        try conn.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", [runID])
        try conn.execute("""
            INSERT INTO items (run_id, step_id, id, seq, json, status, added_at)
            SELECT $1, $2, i.id, last.seq + i.n, i.json, 'queued', \(Self.serverNow)
            FROM (SELECT COALESCE(MAX(seq), 0) AS seq FROM items WHERE run_id = $1 AND step_id = $2) AS last,
                unnest($3::text[], $4::text[]) WITH ORDINALITY AS i(id, json, n)
            ORDER BY i.n
            """, [runID, stepID, PGText.array(ids), PGText.array(jsons)])
    }

    public func items(runID: String, stepID: String) throws -> [ItemRecord] {
        try pool.withConnection { conn in
            try conn.execute("SELECT * FROM items WHERE run_id = $1 AND step_id = $2 ORDER BY seq", [runID, stepID])
                .all.map(Self.itemRecord)
        }
    }

    public func items(runID: String) throws -> [ItemRecord] {
        try pool.withConnection { conn in try Self.items(runID: runID, conn) }
    }

    private static func items(runID: String, _ conn: PGConnection) throws -> [ItemRecord] {
        try conn.execute(itemsOfRun, [runID]).all.map(itemRecord)
    }

    public func nextQueuedItem(runID: String, stepID: String, after seq: Int64) throws -> ItemRecord? {
        try pool.withConnection { conn in
            let rows = try conn.execute("""
                SELECT * FROM items WHERE run_id = $1 AND step_id = $2 AND seq > $3 AND status = 'queued' ORDER BY seq LIMIT 1
                """, [runID, stepID, PGText.of(seq)])
            return rows.count == 0 ? nil : Self.itemRecord(rows[0])
        }
    }

    public func finishItem(runID: String, stepID: String, id: String, error: String?, event: EventRecord?,
                           fence: OwnerIdentity?) throws
    {
        try pool.transaction { conn in
            if let fence { try Self.checkFence(runID, fence, conn) }
            try conn.execute("""
                UPDATE items SET status = $4, error = $5, finished_at = \(Self.serverNow) WHERE run_id = $1 AND step_id = $2 AND id = $3
                """, [runID, stepID, id, error == nil ? ItemRecord.Status.done.rawValue : ItemRecord.Status.failed.rawValue, error])
            if let event { try Self.insertEvents([event], conn) }
        }
    }

    public func saveItemCheckpoint(runID: String, stepID: String, id: String, data: [UInt8], fence: OwnerIdentity?) throws {
        try pool.transaction { conn in
            if let fence { try Self.checkFence(runID, fence, conn) }
            try conn.execute("UPDATE items SET checkpoint = $4::bytea WHERE run_id = $1 AND step_id = $2 AND id = $3",
                             [runID, stepID, id, PGText.bytea(data)])
        }
    }
}

// MARK: Statements and row mapping shared by the store's files

extension PostgresStateStore {
    /// `lease_valid`: whether the row's lease runs past now, by the server's clock.
    static let leaseValid = "COALESCE(lease_until > \(serverNow), false) AS lease_valid"

    static func ownerParameters(_ owner: OwnerIdentity) -> [String?] {
        [owner.node, PGText.of(owner.pid), PGText.of(owner.startTime)]
    }

    /// `prefix%` for LIKE, with LIKE's own wildcards in `prefix` escaped.
    static func likePrefix(_ prefix: String) -> String {
        prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
    }

    /// Throws `ownershipLost` unless `owner` holds the run with a lease that has not run out by
    /// the server's clock; locks the run's row until the transaction ends, so no claim slips in
    /// between the check and the write.
    static func checkFence(_ runID: String, _ owner: OwnerIdentity, _ conn: PGConnection) throws {
        let held = try conn.execute("""
            SELECT 1 FROM runs WHERE id = $1 AND owner_node = $2 AND owner_pid = $3 AND owner_start = $4
                               AND lease_until > \(serverNow)
            FOR UPDATE
            """, [runID] + ownerParameters(owner))
        guard held.count == 1 else { throw StoreError.ownershipLost(runID: runID) }
    }

    /// The owners of those `fences` runs whose lease has not run out by the server's clock;
    /// locks their rows until the transaction ends (in id order, so two groups never wait on
    /// each other in a cycle), so no claim slips in between the check and the writes.
    static func heldRuns(_ fences: [(runID: String, owner: OwnerIdentity)], _ conn: PGConnection) throws
        -> [String: OwnerIdentity]
    {
        guard !fences.isEmpty else { return [:] }
        let rows = try conn.execute("""
            SELECT id, owner_node, owner_pid, owner_start FROM runs
            WHERE id = ANY($1::text[]) AND owner_node IS NOT NULL AND lease_until > \(serverNow)
            ORDER BY id FOR UPDATE
            """, [PGText.array(Set(fences.map(\.runID)).sorted())])
        var owners: [String: OwnerIdentity] = [:]
        for row in rows.all {
            owners[row.string("id") ?? ""] = OwnerIdentity(node: row.string("owner_node") ?? "", pid: Int32(row.int("owner_pid") ?? 0),
                                                           startTime: row.int64("owner_start") ?? 0)
        }
        return owners
    }

    /// Locks the fenced runs' rows and fails the transaction (SQLSTATE
    /// `PostgresSchema.fenceFailedState`, see migration 6) unless each is held by its owner
    /// with a lease valid by the server's clock: the fence of `writeGroup`'s one-round-trip path.
    static func fence(_ fences: [(runID: String, owner: OwnerIdentity)]) -> PGStatement? {
        var seen = Set<String>()
        let distinct = fences.filter { seen.insert("\($0.runID)\u{0}\($0.owner.node)\u{0}\($0.owner.pid)\u{0}\($0.owner.startTime)").inserted }
        guard !distinct.isEmpty else { return nil }
        return PGStatement("SELECT orchestrate_fence($1::text[], $2::text[], $3::integer[], $4::bigint[])",
                           columns(of: distinct, [\.runID, \.owner.node, { PGText.of($0.owner.pid) }, { PGText.of($0.owner.startTime) }]))
    }

    /// Writes the journaled fields of runs in one statement whatever their number (the rows
    /// travel as arrays, so the statement's text, prepared once, never changes); of several
    /// versions of one run, the last wins. `runs.id = ANY(…)` beside the join keeps the rows
    /// found by primary key whatever the planner guesses of the arrays' size (the claim's join,
    /// sized at a guess, read the whole table; here EXPLAIN showed an index plan already, so
    /// this is a guard, not a measured gain).
    static func updateRuns(_ runs: [RunRecord]) -> PGStatement? {
        guard !runs.isEmpty else { return nil }
        let unique = lastOfEach(runs, key: \.id)
        return PGStatement("""
            UPDATE runs SET status = v.status, ending = v.ending, started_at = v.started_at,
                            finished_at = v.finished_at, error = v.error, outputs_json = v.outputs_json,
                            priority = v.priority, labels_json = v.labels_json, max_rate = v.max_rate,
                            max_rate_timetable = v.max_rate_timetable
            FROM unnest($1::text[], $2::text[], $3::text[], $4::double precision[], $5::double precision[], $6::text[],
                        $7::text[], $8::integer[], $9::text[], $10::bigint[], $11::text[])
                AS v(id, status, ending, started_at, finished_at, error, outputs_json, priority, labels_json, max_rate,
                     max_rate_timetable)
            WHERE runs.id = v.id AND runs.id = ANY($1::text[])
            """, columns(of: unique, [
                \.id, { $0.status.rawValue }, { $0.ending?.rawValue }, { PGText.of($0.startedAt) },
                { PGText.of($0.finishedAt) }, \.error, { $0.outputs?.jsonText }, { PGText.of($0.priority) },
                { labelsJSON($0.labels) }, { PGText.of($0.maxRate) }, \.maxRateTimetable,
            ]))
    }

    /// Of several elements with one key, the last (in the order given), at the place of its last.
    static func lastOfEach<T>(_ elements: [T], key: (T) -> String) -> [T] {
        var latest: [String: Int] = [:]
        for (i, element) in elements.enumerated() { latest[key(element)] = i }
        return latest.values.sorted().map { elements[$0] }
    }

    /// One array parameter per column: the rows of a multi-row statement, for `unnest`.
    static func columns<T>(of rows: [T], _ columns: [(T) -> String?]) -> [String?] {
        columns.map { column in PGText.array(rows.map(column)) }
    }

    static func notifyWork(_ conn: PGConnection) throws {
        try conn.execute("SELECT pg_notify($1, '')", [PostgresSchema.workChannel])
    }

    /// Inserts events under the event-order lock, in one statement: the transaction's last
    /// write but the release of runs (so the lock is held for as short as may be). The lock is
    /// taken (by the materialized CTE) before any row draws its `seq`.
    static func insertEvents(_ events: [EventRecord], _ conn: PGConnection) throws {
        if let statement = insertEvents(events) { try conn.execute(statement.sql, statement.parameters) }
    }

    static func insertEvents(_ events: [EventRecord]) -> PGStatement? {
        guard !events.isEmpty else { return nil }
        return PGStatement("""
            WITH ordered AS MATERIALIZED (SELECT pg_advisory_xact_lock($1))
            INSERT INTO events (run_id, time, type, step, data_json)
            SELECT e.run_id, e.time, e.type, e.step, e.data_json
            FROM ordered, unnest($2::text[], $3::double precision[], $4::text[], $5::text[], $6::text[])
                WITH ORDINALITY AS e(run_id, time, type, step, data_json, n)
            ORDER BY e.n
            """, ["\(PostgresSchema.LockKey.eventOrder)"] + columns(of: events, [
                \.runID, { PGText.of($0.time) }, { $0.type.rawValue }, \.step, { $0.data.jsonText },
            ]))
    }

    /// Writes step rows in one statement; when a batch holds several versions of one step, the
    /// last wins (as SQLite's INSERT OR REPLACE in order would).
    static func upsertSteps(_ steps: [StepRecord]) -> PGStatement? {
        guard !steps.isEmpty else { return nil }
        let unique = lastOfEach(steps) { $0.runID + "\u{0}" + $0.id }
        return PGStatement("""
            INSERT INTO steps (run_id, id, step, kind, item_index, item_json, status, attempt, failures, next_attempt_at,
                idempotency_key, outputs_json, error_kind, error_code, error_message, started_at, finished_at,
                completion_seq, node)
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::text[], $7::text[],
                                 $8::integer[], $9::integer[], $10::double precision[], $11::text[], $12::text[], $13::text[],
                                 $14::text[], $15::text[], $16::double precision[], $17::double precision[], $18::integer[],
                                 $19::text[])
            ON CONFLICT (run_id, id) DO UPDATE SET step = EXCLUDED.step, kind = EXCLUDED.kind,
                item_index = EXCLUDED.item_index, item_json = EXCLUDED.item_json, status = EXCLUDED.status,
                attempt = EXCLUDED.attempt, failures = EXCLUDED.failures, next_attempt_at = EXCLUDED.next_attempt_at,
                idempotency_key = EXCLUDED.idempotency_key, outputs_json = EXCLUDED.outputs_json,
                error_kind = EXCLUDED.error_kind, error_code = EXCLUDED.error_code,
                error_message = EXCLUDED.error_message, started_at = EXCLUDED.started_at,
                finished_at = EXCLUDED.finished_at, completion_seq = EXCLUDED.completion_seq, node = EXCLUDED.node
            """, columns(of: unique, [
                \.runID, \.id, \.step, { $0.kind.rawValue }, { PGText.of($0.itemIndex) }, { $0.item?.jsonText },
                { $0.status.rawValue }, { PGText.of($0.attempt) }, { PGText.of($0.failures) }, { PGText.of($0.nextAttemptAt) },
                \.idempotencyKey, { $0.outputs?.jsonText }, \.errorKind, \.errorCode, \.errorMessage,
                { PGText.of($0.startedAt) }, { PGText.of($0.finishedAt) }, { PGText.of($0.completionSeq) }, \.node,
            ]))
    }

    static func labelsJSON(_ labels: [String: String]) -> String {
        JSONValue.object(labels.mapValues { .string($0) }).jsonText
    }

    static func json(_ text: String?) -> JSONValue? { text.flatMap { try? JSONValue(parsing: $0) } }

    /// A run row read with `leaseValid` among its columns.
    static func runRecord(_ row: PGRow) -> RunRecord {
        var run = RunRecord(
            id: row.string("id") ?? "", workflowName: row.string("workflow_name") ?? "",
            workflowFile: row.string("workflow_file") ?? "", workflowSource: row.string("workflow_source") ?? "",
            inputs: json(row.string("inputs_json")) ?? [:],
            status: row.string("status").flatMap(RunStatus.init(rawValue:)) ?? .failed,
            createdAt: row.double("created_at") ?? 0, runDir: row.string("run_dir") ?? "",
            priority: row.int("priority") ?? 0,
            labels: (json(row.string("labels_json"))?.objectValue ?? [:]).compactMapValues(\.stringValue))
        run.queue = row.string("queue") ?? "default"
        run.ending = row.string("ending").flatMap(RunStatus.init(rawValue:))
        run.startedAt = row.double("started_at")
        run.finishedAt = row.double("finished_at")
        run.error = row.string("error")
        run.outputs = json(row.string("outputs_json"))
        run.requestedControl = row.string("requested_control").flatMap(RunControl.init(rawValue:))
        run.queueOrder = row.double("queue_order") ?? run.createdAt
        run.runNow = row.bool("run_now") ?? false
        run.maxRate = row.int64("max_rate")
        run.maxRateTimetable = row.string("max_rate_timetable")
        run.leaseUntil = row.double("lease_until")
        if let node = row.string("owner_node") {
            run.owner = OwnerIdentity(node: node, pid: Int32(row.int("owner_pid") ?? 0), startTime: row.int64("owner_start") ?? 0)
            run.ownerIsLive = run.owner!.isLive(leaseValid: row.bool("lease_valid") ?? false)
        }
        return run
    }

    static func stepRecord(_ row: PGRow) -> StepRecord {
        var s = StepRecord(runID: row.string("run_id") ?? "", id: row.string("id") ?? "", step: row.string("step") ?? "",
                           kind: row.string("kind").flatMap(StepKind.init(rawValue:)) ?? .step,
                           status: row.string("status").flatMap(StepStatus.init(rawValue:)) ?? .pending)
        s.itemIndex = row.int("item_index")
        s.item = json(row.string("item_json"))
        s.attempt = row.int("attempt") ?? 0
        s.failures = row.int("failures") ?? 0
        s.nextAttemptAt = row.double("next_attempt_at")
        s.idempotencyKey = row.string("idempotency_key")
        s.outputs = json(row.string("outputs_json"))
        s.errorKind = row.string("error_kind")
        s.errorCode = row.string("error_code")
        s.errorMessage = row.string("error_message")
        s.startedAt = row.double("started_at")
        s.finishedAt = row.double("finished_at")
        s.completionSeq = row.int("completion_seq")
        s.node = row.string("node")
        return s
    }

    static func storedEvent(_ row: PGRow) -> StoredEvent {
        StoredEvent(seq: row.int64("seq") ?? 0, runID: row.string("run_id"), time: row.double("time") ?? 0,
                    type: EventType(rawValue: row.string("type") ?? ""), step: row.string("step"),
                    dataText: row.string("data_json") ?? "{}")
    }

    static func eventRecord(_ row: PGRow) -> EventRecord { storedEvent(row).record }

    static func itemRecord(_ row: PGRow) -> ItemRecord {
        ItemRecord(runID: row.string("run_id") ?? "", stepID: row.string("step_id") ?? "", id: row.string("id") ?? "",
                   seq: row.int64("seq") ?? 0, json: row.string("json") ?? "",
                   status: row.string("status").flatMap(ItemRecord.Status.init(rawValue:)) ?? .queued,
                   error: row.string("error"), checkpoint: row.bytes("checkpoint"))
    }
}
