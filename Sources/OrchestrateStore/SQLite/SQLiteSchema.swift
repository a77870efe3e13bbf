import GRDB
import Foundation

/// The SQLite schema, as numbered migrations. Append new migrations; never edit a shipped one.
enum SQLiteSchema {
    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE runs (
                    id TEXT PRIMARY KEY,
                    workflow_name TEXT NOT NULL,
                    workflow_file TEXT NOT NULL,
                    workflow_source TEXT NOT NULL,
                    inputs_json TEXT NOT NULL,
                    status TEXT NOT NULL,
                    ending TEXT,
                    created_at REAL NOT NULL,
                    started_at REAL,
                    finished_at REAL,
                    run_dir TEXT NOT NULL,
                    priority INTEGER NOT NULL DEFAULT 0,
                    labels_json TEXT NOT NULL DEFAULT '{}',
                    owner_host TEXT,
                    owner_pid INTEGER,
                    owner_start INTEGER,
                    lease_until REAL,
                    error TEXT,
                    outputs_json TEXT,
                    requested_control TEXT
                );
                CREATE INDEX runs_status ON runs(status, priority, created_at);

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
                    next_attempt_at REAL,
                    idempotency_key TEXT,
                    outputs_json TEXT,
                    error_kind TEXT,
                    error_code TEXT,
                    error_message TEXT,
                    started_at REAL,
                    finished_at REAL,
                    completion_seq INTEGER,
                    PRIMARY KEY (run_id, id)
                ) WITHOUT ROWID;

                CREATE TABLE checkpoints (
                    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                    step_id TEXT NOT NULL,
                    data BLOB NOT NULL,
                    updated_at REAL NOT NULL,
                    PRIMARY KEY (run_id, step_id)
                ) WITHOUT ROWID;

                CREATE TABLE events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    run_id TEXT,
                    time REAL NOT NULL,
                    type TEXT NOT NULL,
                    step TEXT,
                    data_json TEXT NOT NULL DEFAULT '{}'
                );
                CREATE INDEX events_run ON events(run_id, seq);

                CREATE TABLE leases (
                    key TEXT NOT NULL,
                    holder TEXT NOT NULL,
                    owner_host TEXT NOT NULL,
                    owner_pid INTEGER NOT NULL,
                    owner_start INTEGER NOT NULL,
                    expires_at REAL NOT NULL,
                    PRIMARY KEY (key, holder)
                ) WITHOUT ROWID;
                CREATE INDEX leases_holder ON leases(holder);

                CREATE TABLE items (
                    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
                    step_id TEXT NOT NULL,
                    id TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    json TEXT NOT NULL,
                    status TEXT NOT NULL,
                    error TEXT,
                    checkpoint BLOB,
                    added_at REAL NOT NULL,
                    finished_at REAL,
                    PRIMARY KEY (run_id, step_id, id)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2 queue") { db in
            try db.execute(sql: """
                -- Position in the queue: submission time, pushed back by `stop`, forward by `run-now`.
                ALTER TABLE runs ADD COLUMN queue_order REAL;
                UPDATE runs SET queue_order = created_at;
                -- Set by `run-now`: start at once, pre-empting the newest running run if need be.
                ALTER TABLE runs ADD COLUMN run_now INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE queue_state (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3 bandwidth") { db in
            // The run's bandwidth cap in bytes per second (`--max-rate`), NULL for none.
            try db.execute(sql: "ALTER TABLE runs ADD COLUMN max_rate INTEGER")
        }
        migrator.registerMigration("v4 item order") { db in
            // Items in the order they were added: the next queued one, and the next sequence
            // number, without reading every item of the step (a session may hold thousands).
            try db.execute(sql: "CREATE INDEX items_order ON items(run_id, step_id, seq)")
        }
        migrator.registerMigration("v5 nodes and queues") { db in
            try db.execute(sql: """
                -- The named queue a run belongs to (`submit --queue`); only its workers take it.
                ALTER TABLE runs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
                CREATE INDEX runs_queue ON runs(queue, status);
                -- The node that ran a step's latest attempt (owner_host columns hold node names).
                ALTER TABLE steps ADD COLUMN node TEXT;
                """)
        }
        migrator.registerMigration("v6 schedules") { db in
            // One row per `on.schedule` entry of a registered workflow (ScheduleRecord.swift).
            try db.execute(sql: """
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
                    catchup REAL,
                    queue TEXT NOT NULL,
                    priority INTEGER NOT NULL DEFAULT 0,
                    paused INTEGER NOT NULL DEFAULT 0,
                    -- Whole seconds since 1970: compared for equality by the exactly-once claim.
                    last_due INTEGER NOT NULL,
                    last_run_id TEXT,
                    created_at REAL NOT NULL,
                    PRIMARY KEY (name, entry)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v7 watch folders") { db in
            try db.execute(sql: """
                -- Files of watched folders (`on.watch`) handed over as work: one row per version of a
                -- file (path, size, mtime), written in the transaction that creates the run or adds
                -- the item, so a file becomes work exactly once. No foreign key: deleting a run
                -- must not make its file new again.
                CREATE TABLE watch_handoffs (
                    watch TEXT NOT NULL,
                    path TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    mtime_ns INTEGER NOT NULL,
                    run_id TEXT NOT NULL,
                    step_id TEXT,
                    item_id TEXT,
                    handed_at REAL NOT NULL,
                    outcome TEXT NOT NULL DEFAULT 'pending',
                    PRIMARY KEY (watch, path, size, mtime_ns)
                ) WITHOUT ROWID;
                CREATE INDEX watch_handoffs_pending ON watch_handoffs(watch, outcome);
                """)
        }
        migrator.registerMigration("v8 bandwidth timetables") { db in
            // The run's `--max-rate` when it is a timetable, as written (`max_rate` is NULL then).
            try db.execute(sql: "ALTER TABLE runs ADD COLUMN max_rate_timetable TEXT")
        }
        migrator.registerMigration("v9 latest progress") { db in
            // `latestProgress` (a run's transfer figures, read for every run an API list shows)
            // reads a few rows per step instead of every event of the run.
            try db.execute(sql: "CREATE INDEX events_progress ON events(run_id, step, seq) WHERE type = 'step.progress'")
        }
        migrator.registerMigration("v10 events without AUTOINCREMENT") { db in
            // AUTOINCREMENT rewrote the events' row of sqlite_sequence at every statement that
            // inserted events: one more page in each commit's WAL (a chain step's commit wrote
            // 5.2 pages, 4.2 without; bench/engine). Without it a new event takes the highest
            // seq + 1, so the event holding the highest seq must never go: `deleteRun` journals a
            // `run.deleted` event above the ones it deletes, and here a highest seq whose event
            // is already gone (its run deleted) is kept by such an event in its place.
            // Followers resume by seq (`events --follow`, Last-Event-ID): a seq is never reused.
            try db.execute(sql: """
                CREATE TABLE events_v10 (
                    seq INTEGER PRIMARY KEY,
                    run_id TEXT,
                    time REAL NOT NULL,
                    type TEXT NOT NULL,
                    step TEXT,
                    data_json TEXT NOT NULL DEFAULT '{}'
                );
                INSERT INTO events_v10 (seq, run_id, time, type, step, data_json)
                    SELECT seq, run_id, time, type, step, data_json FROM events ORDER BY seq;
                INSERT INTO events_v10 (seq, run_id, time, type, data_json)
                    SELECT seq, NULL, (julianday('now') - 2440587.5) * 86400.0, 'run.deleted', '{}'
                    FROM sqlite_sequence
                    WHERE name = 'events' AND seq > (SELECT coalesce(max(seq), 0) FROM events);
                DROP TABLE events;
                ALTER TABLE events_v10 RENAME TO events;
                CREATE INDEX events_run ON events(run_id, seq);
                CREATE INDEX events_progress ON events(run_id, step, seq) WHERE type = 'step.progress';
                """)
        }
        migrator.registerMigration("v11 retention") { db in
            try db.execute(sql: """
                -- The workflow's own `retention:` in seconds (NULL: the queue's or the store's).
                ALTER TABLE runs ADD COLUMN retention REAL;
                -- Finished runs by when they ended: the pruner reads the oldest first.
                CREATE INDEX runs_finished ON runs(coalesce(finished_at, created_at))
                    WHERE status IN ('cancelled', 'failed', 'succeeded');
                -- A run whose watch hand-off is still pending is not pruned (its `after:` action waits).
                CREATE INDEX watch_handoffs_run ON watch_handoffs(run_id) WHERE outcome = 'pending';
                """)
        }
        migrator.registerMigration("v12 a million runs") { db in
            // What lists, `/metrics` and claims read stays the same size however many runs the
            // store holds (bench/scale/million.py): each reads through an index in the order it
            // returns, up to its limit, and counts come from `run_counts`, not from the runs.
            try db.execute(sql: """
                -- Lists, newest first: all runs, of some statuses, of one workflow.
                CREATE INDEX runs_created ON runs(created_at, id);
                DROP INDEX runs_status;
                CREATE INDEX runs_status_created ON runs(status, created_at, id);
                CREATE INDEX runs_workflow ON runs(workflow_name, created_at, id);
                -- The queue in claim order (`claimNextRuns` reads the runs it takes, no more), and
                -- each queue's oldest queued run (`/metrics`).
                CREATE INDEX runs_queued_order ON runs(run_now DESC, priority DESC, queue_order, created_at)
                    WHERE status = 'queued';
                CREATE INDEX runs_queued_age ON runs(queue, created_at) WHERE status = 'queued';
                -- Held steps (`/metrics`): few, counted through an index of those alone.
                CREATE INDEX steps_held ON steps(run_id) WHERE status = 'held';

                -- Runs per queue and status, kept by triggers on every write of `runs` (creation,
                -- journal commits, queue verbs, retry, deletion, pruning), so a count never reads
                -- the runs. A row at 0 stays (it is read as no runs).
                CREATE TABLE run_counts (
                    queue TEXT NOT NULL,
                    status TEXT NOT NULL,
                    n INTEGER NOT NULL,
                    PRIMARY KEY (queue, status)
                ) WITHOUT ROWID;
                INSERT INTO run_counts (queue, status, n) SELECT queue, status, COUNT(*) FROM runs GROUP BY queue, status;
                CREATE TRIGGER run_counts_insert AFTER INSERT ON runs BEGIN
                    INSERT INTO run_counts (queue, status, n) VALUES (new.queue, new.status, 1)
                        ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
                END;
                CREATE TRIGGER run_counts_update AFTER UPDATE OF status, queue ON runs
                    WHEN old.status IS NOT new.status OR old.queue IS NOT new.queue
                BEGIN
                    UPDATE run_counts SET n = n - 1 WHERE queue = old.queue AND status = old.status;
                    INSERT INTO run_counts (queue, status, n) VALUES (new.queue, new.status, 1)
                        ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
                END;
                CREATE TRIGGER run_counts_delete AFTER DELETE ON runs BEGIN
                    UPDATE run_counts SET n = n - 1 WHERE queue = old.queue AND status = old.status;
                END;
                """)
        }
        migrator.registerMigration("v13 removed hand-offs") { db in
            // A hand-off whose file the watch deleted or moved away goes with its run: found
            // through this index when the run is pruned or deleted.
            try db.execute(sql: "CREATE INDEX watch_handoffs_removed ON watch_handoffs(run_id) WHERE outcome = 'removed'")
        }
        return migrator
    }

    /// A new (empty) database file gets `auto_vacuum = INCREMENTAL`, so that pages freed by
    /// pruning can be given back to the file system a few at a time (`reclaimSpace`). The mode
    /// is written in the file's first page, before WAL mode is (which fixes the header), so on
    /// a connection of its own in the default journal mode. A database made before it needs one
    /// full VACUUM (`orchestrate prune --vacuum`), which migrations cannot run: they are
    /// transactions, and a VACUUM of a large store holds every writer up for its whole length.
    static func enableIncrementalVacuumIfNew(path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0, info.st_size == 0 else { return }
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL; VACUUM") }
        try queue.close()
    }
}
