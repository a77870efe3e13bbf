#!/usr/bin/env python3
"""Queue benchmark (issues 5 and 12): the durable queue on SQLite (one `serve`) and on
PostgreSQL (1, 2 and 3 `serve` workers on one throwaway cluster, fsync and synchronous_commit
on), side by side in one run, beside the raw claim rate of the same PostgreSQL.

For each store and worker count, on a fresh database:
- the workers start and go idle; then ONE run is submitted while they are idle, `--idle`
  times: submit-to-start measured from the submitting side's clock (just before `submit` is
  spawned) to the run's `run.started` event, and from `run.added` to `run.started` (the
  queue's own part, without the `submit` process starting);
- then N runs of a `--steps`-step workflow (no-op C plugin steps; 3 by default) are queued at once with
  `submit --batch` while the workers run: runs/s from the first `run.started` to the last
  `run.finished`, end-to-end runs/s from the first `run.added`, and submit-to-start
  (`run.added` → `run.started`) p50/p99, which under a burst is mostly time waiting behind
  the runs ahead;
- the peak RSS (VmHWM) of each worker; on PostgreSQL, commits per run (pg_stat_database),
  WAL records and bytes per run (pg_stat_wal: the row work, counted, so it holds still on a
  busy machine) and the statements that took the most server time (pg_stat_statements).
The raw claim rate is pgbench running a `FOR UPDATE SKIP LOCKED` claim + update transaction,
then a finishing update, per "run", with 1-3 clients: what a minimal queue on the same
server could do; for SQLite, the same claim and finish commits from one client in WAL mode
(`raw_sqlite_claims`). Each case reports `ratio_to_raw_claims`: its runs/s over the raw rate
with as many clients as it has workers, measured in the same run.

    swift build -c release && python3 bench/queue/bench.py            # 1,000 runs
    python3 bench/queue/bench.py --runs 1000 10000                   # and 10,000 (minutes)
    python3 bench/queue/bench.py --steps 1 --workers 3 --idle 5      # one-step runs: the claim path
"""
import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, PostgresCluster, build_test_plugin, process_cpu_seconds  # noqa: E402

def workflow(steps):
    """A chain of `steps` no-op C plugin steps (3 in the earlier figures; 1 for the claim path)."""
    lines = ["version: 1", "name: bench-queue", "steps:", "  s0: { uses: test.noop }"]
    lines += [f"  s{i}: {{ uses: test.noop, needs: [s{i - 1}] }}" for i in range(1, steps)]
    return "\n".join(lines) + "\n"

FINISHED = "('succeeded','failed','cancelled')"

# One "run" of a minimal queue: claim the oldest queued job without waiting on the other
# clients' locks, mark it running (one commit), then mark it done (a second commit).
CLAIM_SCRIPT = """BEGIN;
UPDATE jobs SET status = 'running', owner = :client_id, claimed_at = now()
 WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id \\gset
COMMIT;
UPDATE jobs SET status = 'done' WHERE id = :id;
"""


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))
    return values[k]


def peak_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class SQLiteDB:
    """Queries on the SQLite store of a state directory."""

    def __init__(self, state):
        self.path = os.path.join(state, "state.sqlite")
        self.conn = None

    def query(self, sql):
        if self.conn is None:
            if not os.path.exists(self.path):
                return []
            self.conn = sqlite3.connect(self.path, timeout=30)
        try:
            return [list(map(str, row)) for row in self.conn.execute(sql).fetchall()]
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):  # serve has not created the schema yet
                return []
            raise


class PostgresDB:
    def __init__(self, cluster, name):
        self.cluster, self.name = cluster, name

    def query(self, sql):
        try:
            return self.cluster.sql(sql, self.name)
        except SystemExit as error:
            if "does not exist" in str(error):  # serve has not created the schema yet
                return []
            raise


class Case:
    """One store with W workers: starts them, submits, waits, measures, stops them."""

    def __init__(self, orchestrate, plugins, work, label, store_args, db, workers, parallel, env=None, cluster=None):
        self.orchestrate, self.plugins, self.work, self.label = orchestrate, plugins, work, label
        self.cluster = cluster  # PostgreSQL: its server's CPU time is measured too
        self.store_args, self.db, self.workers, self.parallel = store_args, db, workers, parallel
        self.env = dict(os.environ, **(env or {}))
        self.wf = os.path.join(work, "queue.yaml")
        self.submitter_state = os.path.join(work, label, "submitter")
        self.procs = []

    def args(self, state):
        return ["--state", state, "--plugin-path", self.plugins] + self.store_args

    def count(self, sql):
        rows = self.db.query(sql)
        return int(rows[0][0]) if rows else 0

    def start_workers(self):
        for i in range(self.workers):
            state = self.submitter_state if not self.store_args else os.path.join(self.work, self.label, f"w{i + 1}")
            node = ["--node", f"w{i + 1}"] if self.store_args else []
            self.procs.append(subprocess.Popen(
                [self.orchestrate, "serve", "--max-parallel", str(self.parallel)] + self.args(state) + node,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env))
        deadline = time.monotonic() + 30
        while self.count("SELECT COUNT(*) FROM events WHERE type = 'worker.started'") < self.workers:
            if time.monotonic() > deadline:
                sys.exit(f"{self.label}: the workers did not start")
            time.sleep(0.05)

    def stop_workers(self):
        rss = [round(peak_rss_mib(p.pid), 1) for p in self.procs]
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait()
        return rss

    def submit(self, extra):
        done = subprocess.run([self.orchestrate, "submit", self.wf] + extra + self.args(self.submitter_state),
                              capture_output=True, text=True, env=self.env)
        if done.returncode != 0:
            raise SystemExit(f"submit {' '.join(extra)} failed ({done.returncode}): {done.stderr.strip()}")

    def wait_finished(self, total, timeout):
        deadline = time.monotonic() + timeout
        while self.count(f"SELECT COUNT(*) FROM runs WHERE status IN {FINISHED}") < total:
            if time.monotonic() > deadline:
                sys.exit(f"{self.label}: timed out")
            # Not faster: each look starts a psql and a database backend, CPU taken from the
            # workers being measured (runs/s comes from the events' times, not from this loop).
            time.sleep(0.5)

    def idle_latency(self, repeats):
        """One run at a time on idle workers: (submit side → run.started, run.added → run.started)."""
        from_submitter, in_queue = [], []
        for i in range(repeats):
            run_id = f"idle{i}"
            time.sleep(0.05)
            t0 = time.time()
            self.submit(["--id", run_id])
            while True:
                rows = self.db.query(f"SELECT type, time FROM events WHERE run_id = '{run_id}' "
                                     "AND type IN ('run.added', 'run.started')")
                times = {t: float(v) for t, v in rows}
                if "run.started" in times:
                    break
                time.sleep(0.005)
            from_submitter.append(times["run.started"] - t0)
            in_queue.append(times["run.started"] - times["run.added"])
        self.wait_finished(repeats, 60)
        return from_submitter, in_queue

    def measure(self, runs, idle_repeats):
        os.makedirs(self.submitter_state, exist_ok=True)
        batch = os.path.join(self.work, f"batch-{runs}.jsonl")
        with open(batch, "w") as f:
            f.write("{}\n" * runs)
        self.start_workers()
        try:
            from_submitter, in_queue = self.idle_latency(idle_repeats)
            commits_before = self.commits()
            statements_before = self.statements()
            wal_before = self.wal()
            cpu_before = self.cpu_seconds()
            start = time.monotonic()
            self.submit(["--batch", batch])
            submit_s = time.monotonic() - start
            self.wait_finished(runs + idle_repeats, 3600)
            commits = None if commits_before is None else self.commits() - commits_before
            statements = None if statements_before is None else self.statements() - statements_before
            wal = None if wal_before is None else [after - before for before, after in zip(wal_before, self.wal())]
            cpu = [after - before for before, after in zip(cpu_before, self.cpu_seconds())]
        finally:
            rss = self.stop_workers()
        failed = self.count("SELECT COUNT(*) FROM runs WHERE status != 'succeeded'")
        rows = self.db.query("""
            SELECT a.time, s.time FROM events a JOIN events s ON a.run_id = s.run_id
            WHERE a.type = 'run.added' AND s.type = 'run.started' AND a.run_id NOT LIKE 'idle%'""")
        latencies = [float(s) - float(a) for a, s in rows]
        (first_added, first_start, last_finish), = self.db.query("""
            SELECT MIN(time) FILTER (WHERE type = 'run.added'), MIN(time) FILTER (WHERE type = 'run.started'),
                   MAX(time) FILTER (WHERE type = 'run.finished')
            FROM events WHERE run_id NOT LIKE 'idle%'""")
        result = {
            "case": self.label, "workers": self.workers, "runs": runs, "failed": failed,
            "runs_per_s": round(runs / (float(last_finish) - float(first_start)), 1),
            "runs_per_s_from_first_submit": round(runs / (float(last_finish) - float(first_added)), 1),
            "submit_s": round(submit_s, 2),
            "burst_submit_to_start_p50_s": round(percentile(latencies, 50), 3),
            "burst_submit_to_start_p99_s": round(percentile(latencies, 99), 3),
            "idle_submitter_to_start_p50_ms": round(1000 * percentile(from_submitter, 50), 1),
            "idle_submitter_to_start_p99_ms": round(1000 * percentile(from_submitter, 99), 1),
            "idle_added_to_start_p50_ms": round(1000 * percentile(in_queue, 50), 1),
            "idle_added_to_start_p99_ms": round(1000 * percentile(in_queue, 99), 1),
            "worker_peak_rss_mib": rss,
            # CPU per run of the burst: all workers together, and the database server.
            "workers_cpu_ms_per_run": round(1000 * cpu[0] / runs, 2),
        }
        if self.cluster is not None:
            result["postgres_cpu_ms_per_run"] = round(1000 * cpu[1] / runs, 2)
        if commits is not None:
            result["commits_per_run"] = round(commits / runs, 1)
        if statements is not None:
            result["statements_per_run"] = round(statements / runs, 1)
        if wal is not None:
            # The database's row work, counted rather than timed (steady on a busy machine):
            # every row version, index entry and commit is a WAL record.
            result["wal_records_per_run"] = round(wal[0] / runs, 1)
            result["wal_kib_per_run"] = round(wal[1] / runs / 1024, 2)
        return result

    def cpu_seconds(self):
        """(CPU seconds of all workers, of the PostgreSQL server or 0) so far."""
        workers = sum(process_cpu_seconds(p.pid) for p in self.procs)
        return workers, (self.cluster.cpu_seconds() if self.cluster is not None else 0.0)

    def statements(self):
        """Statements the database executed so far (pg_stat_statements, BEGIN and COMMIT included)."""
        if not isinstance(self.db, PostgresDB):
            return None
        rows = self.db.query(f"""SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
                                WHERE d.datname = '{self.db.name}'""")
        return int(rows[0][0])

    def wal(self):
        """(WAL records, WAL bytes) the cluster wrote so far (pg_stat_wal; only this case writes)."""
        if not isinstance(self.db, PostgresDB):
            return None
        (records, size), = self.db.query("SELECT wal_records, wal_bytes FROM pg_stat_wal")
        return int(records), int(size)

    def commits(self):
        if not isinstance(self.db, PostgresDB):
            return None
        rows = self.db.query(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{self.db.name}'")
        return int(rows[0][0])


def top_statements(cluster, database, n=8, by="total_exec_time"):
    """The statements that took the most server time (or BY: calls) in DATABASE (pg_stat_statements)."""
    rows = cluster.sql(f"""
        SELECT calls, round(total_exec_time)::bigint, round(mean_exec_time::numeric, 3), left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
        FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
        WHERE d.datname = '{database}' ORDER BY {by} DESC LIMIT {n}""", database)
    return [{"calls": int(c), "total_ms": int(t), "mean_ms": float(m), "query": q} for c, t, m, q in rows]


def raw_claims(cluster, work, clients, seconds):
    """pgbench: claim + finish pairs per second with each number of clients, durable
    (synchronous_commit on, as orchestrate runs) and, to show what the disk's fsyncs cost,
    with synchronous_commit off. Each measurement on a fresh table of 300,000 queued jobs."""
    script = os.path.join(work, "claim.sql")
    with open(script, "w") as f:
        f.write(CLAIM_SCRIPT)
    os.chmod(work, 0o755)
    os.chmod(script, 0o644)
    results = []
    for sync in ["on", "off"]:
        for n in clients:
            db = f"claims_{sync}_{n}"
            cluster.create_database(db)
            cluster.sql("""
                CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL, owner int, claimed_at timestamptz);
                INSERT INTO jobs (status) SELECT 'queued' FROM generate_series(1, 300000);
                CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';""", db)
            cluster.sql("VACUUM ANALYZE jobs", db)
            out = subprocess.run(["pgbench", "-n", "-c", str(n), "-j", str(min(n, 4)), "-T", str(seconds), "-f", script,
                                  "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres", db],
                                 check=True, capture_output=True, text=True,
                                 env=dict(os.environ, PGOPTIONS=f"-c synchronous_commit={sync}")).stdout
            tps = next(float(line.split("=")[1].split()[0]) for line in out.splitlines() if line.startswith("tps"))
            results.append({"synchronous_commit": sync, "clients": n, "claims_and_finishes_per_s": round(tps, 1)})
    return results


def raw_sqlite_claims(work, seconds, sync):
    """The same minimal queue on SQLite, one client (SQLite has one writer), in WAL mode with
    the store's synchronous setting: a claim transaction (BEGIN IMMEDIATE, the oldest queued job
    marked running, COMMIT), then a finishing commit, per "run"; through Python's sqlite3 (a few
    microseconds per statement of its own)."""
    path = os.path.join(work, f"raw-claims-{sync}.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={sync.upper()}")
    db.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY, status TEXT NOT NULL, owner INTEGER)")
    db.execute("CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued'")
    db.execute("BEGIN")
    db.executemany("INSERT INTO jobs (status) VALUES ('queued')", [()] * 300_000)
    db.execute("COMMIT")
    done = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        db.execute("BEGIN IMMEDIATE")
        (job,) = db.execute("SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1").fetchone()
        db.execute("UPDATE jobs SET status = 'running', owner = 1 WHERE id = ?", (job,))
        db.execute("COMMIT")
        db.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (job,))
        done += 1
    rate = done / (time.monotonic() - start)
    db.close()
    return {"synchronous": sync, "claims_and_finishes_per_s": round(rate, 1)}


def disable_event_order_lock(cluster, database):
    """An experiment, unsafe outside a benchmark: shadows pg_advisory_xact_lock(bigint) in
    DATABASE with a function that does nothing (public comes before pg_catalog on its search
    path), so commits carrying events no longer wait for each other, and event followers may
    skip events. Measures what the store's event-order lock costs without rebuilding."""
    cluster.sql(f"ALTER DATABASE {database} SET search_path = public, pg_catalog", database)
    cluster.sql("CREATE FUNCTION public.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE sql AS 'SELECT NULL'",
                database)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, nargs="+", default=[1000], help="queued runs per case (add 10000: minutes)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3], help="PostgreSQL worker counts")
    parser.add_argument("--parallel", type=int, default=32, help="--max-parallel of each serve")
    parser.add_argument("--idle", type=int, default=50, help="single runs submitted to idle workers, per case")
    parser.add_argument("--claim-seconds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="no-op steps per run (1: the claim path alone)")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--without-event-lock", action="store_true",
                        help="also run the largest PostgreSQL case with the event-order lock disabled (an experiment: unsafe)")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()
    orchestrate = os.path.join(args.bin, "orchestrate")
    if not os.path.exists(orchestrate):
        sys.exit(f"build first: swift build -c release (no {orchestrate})")
    work = tempfile.mkdtemp(prefix="orchestrate-queue-bench-")
    results = {"cases": []}
    try:
        plugins = build_test_plugin(os.path.join(work, "plugins"))
        with open(os.path.join(work, "queue.yaml"), "w") as f:
            f.write(workflow(args.steps))
        results["steps_per_run"] = args.steps
        results["load_before"] = os.getloadavg()[0]
        for runs in args.runs:
            if not args.no_sqlite:
                for sync in ["normal", "full"]:
                    raw = raw_sqlite_claims(work, args.claim_seconds, sync)
                    results.setdefault("sqlite_raw_claims", []).append(raw)
                    print(json.dumps(raw), file=sys.stderr)
                    label = f"sqlite-{sync}-{runs}"
                    case = Case(orchestrate, plugins, work, label, [], SQLiteDB(os.path.join(work, label, "submitter")),
                                1, args.parallel, env={"ORCHESTRATE_SYNC": sync})
                    result = dict(case.measure(runs, args.idle), store=f"sqlite (synchronous={sync})")
                    result["ratio_to_raw_claims"] = round(result["runs_per_s"] / raw["claims_and_finishes_per_s"], 3)
                    results["cases"].append(result)
                    print(json.dumps(results["cases"][-1]), file=sys.stderr)
        if not args.no_postgres:
            with PostgresCluster(settings={"shared_preload_libraries": "pg_stat_statements"}) as cluster:
                results["postgres_raw_claims"] = raw_claims(cluster, work, sorted({1, 2, 3, 32, *args.workers}), args.claim_seconds)
                print(json.dumps(results["postgres_raw_claims"]), file=sys.stderr)
                for runs in args.runs:
                    for workers in args.workers:
                        name = f"q{runs}w{workers}"
                        cluster.create_database(name)
                        cluster.sql("CREATE EXTENSION pg_stat_statements", name)
                        cluster.sql("SELECT pg_stat_statements_reset()", name)
                        case = Case(orchestrate, plugins, work, name, ["--store", cluster.url(name)],
                                    PostgresDB(cluster, name), workers, args.parallel, cluster=cluster)
                        result = dict(case.measure(runs, args.idle), store="postgresql")
                        raw = next(r["claims_and_finishes_per_s"] for r in results["postgres_raw_claims"]
                                   if r["clients"] == workers and r["synchronous_commit"] == "on")
                        result["ratio_to_raw_claims"] = round(result["runs_per_s"] / raw, 3)
                        result["top_statements"] = top_statements(cluster, name)
                        result["most_called_statements"] = top_statements(cluster, name, n=16, by="calls")
                        results["cases"].append(result)
                        print(json.dumps({k: v for k, v in result.items() if not k.endswith("_statements")}), file=sys.stderr)
                if args.without_event_lock:
                    runs, workers = args.runs[0], max(args.workers)
                    name = f"nolock{runs}w{workers}"
                    cluster.create_database(name)
                    # The schema first: its migration's advisory lock must still work.
                    subprocess.run([orchestrate, "list", "--store", cluster.url(name), "--state", work], check=True,
                                   capture_output=True)
                    disable_event_order_lock(cluster, name)
                    case = Case(orchestrate, plugins, work, name, ["--store", cluster.url(name)],
                                PostgresDB(cluster, name), workers, args.parallel)
                    result = dict(case.measure(runs, args.idle), store="postgresql WITHOUT the event-order lock (unsafe)")
                    results["cases"].append(result)
                    print(json.dumps(result), file=sys.stderr)
        results["load_after"] = os.getloadavg()[0]
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
