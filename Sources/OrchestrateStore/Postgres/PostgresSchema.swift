/// The PostgreSQL schema, as numbered migrations applied in order, each in the transaction that
/// records it. Append new migrations; never edit a shipped one.
///
/// Two nodes starting at once against a new database both try to migrate: a transaction-level
/// advisory lock makes one wait for the other, which then finds nothing left to do.
enum PostgresSchema {
    /// Keys of the advisory locks this store takes (arbitrary, fixed, project-specific).
    enum LockKey {
        static let migration: Int64 = 0x6f72_6368_0001
        /// Held from the first event insert of a transaction to its commit, so events become
        /// visible in `seq` order (see StateStore, "Event order").
        static let eventOrder: Int64 = 0x6f72_6368_0002
    }

    /// The SQLSTATE `orchestrate_fence` fails with: a fenced run is no longer its writer's.
    static let fenceFailedState = "OR001"

    /// The channel `LISTEN`/`NOTIFY` wakes idle workers on.
    static let workChannel = "orchestrate_work"

    static let migrations: [(version: Int, sql: String)] = [
        (1, """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                workflow_name TEXT NOT NULL,
                workflow_file TEXT NOT NULL,
                workflow_source TEXT NOT NULL,
                inputs_json TEXT NOT NULL,
                status TEXT NOT NULL,
                ending TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                started_at DOUBLE PRECISION,
                finished_at DOUBLE PRECISION,
                run_dir TEXT NOT NULL,
                queue TEXT NOT NULL DEFAULT 'default',
                priority INTEGER NOT NULL DEFAULT 0,
                labels_json TEXT NOT NULL DEFAULT '{}',
                owner_node TEXT,
                owner_pid INTEGER,
                owner_start BIGINT,
                -- Seconds since 1970 by the database server's clock: leases are judged by it.
                lease_until DOUBLE PRECISION,
                error TEXT,
                outputs_json TEXT,
                requested_control TEXT,
                queue_order DOUBLE PRECISION NOT NULL,
                run_now BOOLEAN NOT NULL DEFAULT false,
                max_rate BIGINT
            );
            CREATE INDEX runs_claim ON runs (queue, status);
            CREATE INDEX runs_created ON runs (created_at, id);
            CREATE INDEX runs_owner ON runs (owner_node) WHERE owner_node IS NOT NULL;

            CREATE TABLE steps (
                run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                id TEXT NOT NULL,
                step TEXT NOT NULL,
                kind TEXT NOT NULL,
                item_index INTEGER,
                item_json TEXT,
                status TEXT NOT NULL,
                attempt INTEGER NOT NULL DEFAULT 0,
                failures INTEGER NOT NULL DEFAULT 0,
                next_attempt_at DOUBLE PRECISION,
                idempotency_key TEXT,
                outputs_json TEXT,
                error_kind TEXT,
                error_code TEXT,
                error_message TEXT,
                started_at DOUBLE PRECISION,
                finished_at DOUBLE PRECISION,
                completion_seq INTEGER,
                node TEXT,
                PRIMARY KEY (run_id, id)
            );

            CREATE TABLE checkpoints (
                run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                step_id TEXT NOT NULL,
                data BYTEA NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (run_id, step_id)
            );

            -- No foreign key: queue and worker events have no run.
            CREATE TABLE events (
                seq BIGSERIAL PRIMARY KEY,
                run_id TEXT,
                time DOUBLE PRECISION NOT NULL,
                type TEXT NOT NULL,
                step TEXT,
                data_json TEXT NOT NULL DEFAULT '{}'
            );
            CREATE INDEX events_run ON events (run_id, seq);
            CREATE INDEX events_progress ON events (run_id, step, seq) WHERE type = 'step.progress';

            CREATE TABLE leases (
                key TEXT NOT NULL,
                holder TEXT NOT NULL,
                owner_node TEXT NOT NULL,
                owner_pid INTEGER NOT NULL,
                owner_start BIGINT NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (key, holder)
            );
            CREATE INDEX leases_holder ON leases (holder);
            CREATE INDEX leases_owner ON leases (owner_node, owner_pid, owner_start);

            CREATE TABLE items (
                run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                step_id TEXT NOT NULL,
                id TEXT NOT NULL,
                seq BIGINT NOT NULL,
                json TEXT NOT NULL,
                status TEXT NOT NULL,
                error TEXT,
                checkpoint BYTEA,
                added_at DOUBLE PRECISION NOT NULL,
                finished_at DOUBLE PRECISION,
                PRIMARY KEY (run_id, step_id, id)
            );
            CREATE INDEX items_order ON items (run_id, step_id, seq);

            CREATE TABLE queue_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            """),
        (2, """
            -- One row per `on.schedule` entry of a registered workflow (ScheduleRecord.swift).
            CREATE TABLE schedules (
                name TEXT NOT NULL,
                entry INTEGER NOT NULL,
                workflow_name TEXT NOT NULL,
                workflow_file TEXT NOT NULL,
                workflow_source TEXT NOT NULL,
                cron TEXT NOT NULL,
                timezone TEXT NOT NULL,
                inputs_json TEXT NOT NULL,
                overlap TEXT NOT NULL,
                catchup DOUBLE PRECISION,
                queue TEXT NOT NULL,
                priority INTEGER NOT NULL DEFAULT 0,
                paused BOOLEAN NOT NULL DEFAULT false,
                -- Whole seconds since 1970: compared for equality by the exactly-once claim.
                last_due BIGINT NOT NULL,
                last_run_id TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (name, entry)
            );
            """),
        (3, """
            -- Files of watched folders (`on.watch`) handed over as work: one row per version of a
            -- file (path, size, mtime), inserted in the transaction that creates the run or adds the
            -- item; a second serve inserting the same version waits on the first and inserts
            -- nothing. No foreign key: deleting a run must not make its file new again.
            CREATE TABLE watch_handoffs (
                watch TEXT NOT NULL,
                path TEXT NOT NULL,
                size BIGINT NOT NULL,
                mtime_ns BIGINT NOT NULL,
                run_id TEXT NOT NULL,
                step_id TEXT,
                item_id TEXT,
                handed_at DOUBLE PRECISION NOT NULL,
                outcome TEXT NOT NULL DEFAULT 'pending',
                PRIMARY KEY (watch, path, size, mtime_ns)
            );
            CREATE INDEX watch_handoffs_pending ON watch_handoffs (watch, outcome);
            """),
        // The run's `--max-rate` when it is a timetable, as written (`max_rate` is NULL then).
        (4, "ALTER TABLE runs ADD COLUMN max_rate_timetable TEXT"),
        // The queue in claim order (`claimNextRuns`): a claim reads the rows it takes.
        (5, "CREATE INDEX runs_queued ON runs (run_now DESC, priority DESC, queue_order, created_at) WHERE status = 'queued'"),
        (6, """
            -- The fence of a journal commit sent in one round trip (PostgresStateStore.writeGroup):
            -- locks the given runs' rows in id order (two commits never wait on each other in a
            -- cycle) and fails the transaction unless every run is held by the given owner with a
            -- lease valid by this server's clock. Pairs must be distinct.
            CREATE FUNCTION orchestrate_fence(ids text[], nodes text[], pids integer[], starts bigint[]) RETURNS void
            LANGUAGE plpgsql AS $fence$
            DECLARE
                held integer;
            BEGIN
                SELECT count(*) INTO held FROM (
                    SELECT 1 FROM runs JOIN unnest(ids, nodes, pids, starts) AS f(id, node, pid, start)
                        ON runs.id = f.id AND runs.owner_node = f.node AND runs.owner_pid = f.pid AND runs.owner_start = f.start
                    WHERE runs.id = ANY(ids) AND runs.lease_until > extract(epoch from clock_timestamp())::double precision
                    ORDER BY runs.id
                    FOR UPDATE OF runs) AS locked;
                IF held < cardinality(ids) THEN
                    RAISE EXCEPTION 'a fenced run is no longer held by its writer' USING ERRCODE = 'OR001';
                END IF;
            END
            $fence$
            """),
        // Runs by queue and status only where a claim looks for them: the unfinished runs a
        // dead or cut-off owner left and the paused ones, so a status change of any other run
        // adds no index entry (a finished run's last row version included); the queued ones
        // have `runs_queued`.
        (7, """
            DROP INDEX runs_claim;
            CREATE INDEX runs_unfinished ON runs (queue, status) WHERE status IN ('running', 'compensating', 'paused');
            """),
        // The queue's free runs only. A claim leaves a run queued (it starts once its worker
        // journals it) but gives it an owner: with `runs_queued`, that new row version went into
        // the index again, at the very front the next claims read, so under a burst its first
        // page changed at every claim and the entries of claimed runs were never marked dead
        // (10,000 queued runs: 4 ms a claim by the end, reading past every run claimed so far).
        (8, """
            DROP INDEX runs_queued;
            CREATE INDEX runs_queued_free ON runs (run_now DESC, priority DESC, queue_order, created_at)
                WHERE status = 'queued' AND owner_node IS NULL;
            """),
        (9, """
            -- The workflow's own `retention:` in seconds (NULL: the queue's or the store's).
            ALTER TABLE runs ADD COLUMN retention DOUBLE PRECISION;
            -- Finished runs by when they ended: the pruner reads the oldest first.
            CREATE INDEX runs_finished ON runs ((coalesce(finished_at, created_at)))
                WHERE status IN ('cancelled', 'failed', 'succeeded');
            -- A run whose watch hand-off is still pending is not pruned (its `after:` action waits).
            CREATE INDEX watch_handoffs_run ON watch_handoffs (run_id) WHERE outcome = 'pending';
            """),
        // What lists, `/metrics` and claims read stays the same size however many runs the store
        // holds (bench/scale/million.py): each reads through an index in the order it returns, up
        // to its limit, and counts come from `run_count_deltas`, not from the runs.
        (10, """
            -- Lists, newest first, of some statuses or of one workflow (all runs: runs_created).
            CREATE INDEX runs_status_created ON runs (status, created_at, id);
            CREATE INDEX runs_workflow ON runs (workflow_name, created_at, id);
            -- Each queue's oldest queued run (`/metrics`).
            CREATE INDEX runs_queued_age ON runs (queue, created_at) WHERE status = 'queued';
            -- Held steps (`/metrics`): few, counted through an index of those alone.
            CREATE INDEX steps_held ON steps (run_id) WHERE status = 'held';

            -- Runs per queue and status as signed changes, appended by a trigger on every write of
            -- `runs` and summed by `queueFigures`, which folds them into one row per queue and
            -- status as it reads. Appends, not a counter row per status: the workers of a busy
            -- queue would all wait on the same counter row until their commits end.
            CREATE TABLE run_count_deltas (
                queue TEXT NOT NULL,
                status TEXT NOT NULL,
                n BIGINT NOT NULL
            );
            INSERT INTO run_count_deltas (queue, status, n) SELECT queue, status, count(*) FROM runs GROUP BY queue, status;
            CREATE FUNCTION orchestrate_count_runs() RETURNS trigger
            LANGUAGE plpgsql AS $count$
            BEGIN
                IF TG_OP <> 'INSERT' THEN
                    INSERT INTO run_count_deltas (queue, status, n) VALUES (OLD.queue, OLD.status, -1);
                END IF;
                IF TG_OP <> 'DELETE' THEN
                    INSERT INTO run_count_deltas (queue, status, n) VALUES (NEW.queue, NEW.status, 1);
                END IF;
                RETURN NULL;
            END
            $count$;
            CREATE TRIGGER runs_count AFTER INSERT OR DELETE ON runs
                FOR EACH ROW EXECUTE FUNCTION orchestrate_count_runs();
            CREATE TRIGGER runs_count_change AFTER UPDATE OF status, queue ON runs
                FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.queue IS DISTINCT FROM NEW.queue)
                EXECUTE FUNCTION orchestrate_count_runs();
            """),
        // A hand-off whose file the watch deleted or moved away goes with its run: found through
        // this index when the run is pruned or deleted.
        (11, "CREATE INDEX watch_handoffs_removed ON watch_handoffs (run_id) WHERE outcome = 'removed'"),
    ]

    /// Applies what is missing, one migration per transaction, under the migration lock.
    static func migrate(_ pool: PGPool) throws {
        try pool.transaction { conn in
            try conn.execute("SELECT pg_advisory_xact_lock($1)", ["\(LockKey.migration)"])
            try conn.execute("""
                CREATE TABLE IF NOT EXISTS orchestrate_schema (
                    version INTEGER PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """)
            let applied = Set(try conn.execute("SELECT version FROM orchestrate_schema").all.compactMap { $0.int("version") })
            for (version, sql) in migrations where !applied.contains(version) {
                try conn.executeScript(sql)
                try conn.execute("INSERT INTO orchestrate_schema (version) VALUES ($1)", ["\(version)"])
            }
        }
    }
}
