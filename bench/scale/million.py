#!/usr/bin/env python3
"""A million runs (issue 30, part 2): do lists, the dashboard's reads, `status`, `/metrics` and
the claim of the next queued run cost the same with 1,000,000 finished runs in the store as with
none?

For SQLite and for PostgreSQL (a throwaway cluster), on a fresh store made by `orchestrate`
itself (so in its own schema, migrations applied):
- "empty": 20 finished runs and 20 queued ones;
- "1M": then 1,000,000 finished runs (90 % succeeded, 8 % failed, 2 % cancelled; 10 workflows;
  one step and three events each: run.added, step.progress, run.finished) and 10,000 queued,
  written with bulk inserts in the store's schema (SQLite: executemany in one transaction;
  PostgreSQL: INSERT … SELECT FROM generate_series), never by running them.
At each size, each read is timed `--rounds` times and its p50 / p99 printed:
- CLI (a process each, so its start is included): `list --status failed --limit 50`,
  `list --workflow wf-3 --limit 50`, `list --limit 50`, `status RUN`;
- HTTP against one `serve --http` (its queue stopped, so it runs nothing): `/api/runs?status=failed&limit=50`,
  the overview's three reads (`/api/queues`, `/api/runs?limit=1000`,
  `/api/runs?status=failed&limit=10`), `/api/runs/ID`, `/metrics` (each request made unique,
  so the API's read cache answers none);
- the claim of the next queued run: the store's claim statement (copied from
  SQLiteStateStore+Queue.swift and PostgresStateStore+Queue.swift) in a transaction rolled back.
  SQLite: timed in Python; PostgreSQL: the server's own "Execution Time" of EXPLAIN ANALYZE.
And the query plans of the list, count and claim statements at 1M (EXPLAIN QUERY PLAN /
EXPLAIN), and, for comparison, the time of the statements the store ran before schema v12 /
migration 10 (a count over all runs, a list of every run of a status) on the same data.

    swift build -c release && python3 bench/scale/million.py
    python3 bench/scale/million.py --runs 100000 --stores sqlite --rounds 20
"""
import argparse
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, PostgresCluster, free_port  # noqa: E402

WORKFLOWS = [f"wf-{i}" for i in range(10)]
SMALL = 20


BINARY = []


def binary():
    if BINARY:
        return BINARY[0]
    for config in ("release", "debug"):
        path = os.path.join(ROOT, ".build", config, "orchestrate")
        if os.path.exists(path):
            return path
    raise SystemExit("build orchestrate first (swift build -c release)")


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run_row(i, status, created):
    """The columns every run gets (the same in both stores' schemas)."""
    wf = WORKFLOWS[i % len(WORKFLOWS)]
    finished = created + 2.0 if status != "queued" else None
    error = "step put failed: 503" if status == "failed" else None
    return dict(id=f"run{i:08d}", workflow_name=wf, workflow_file=f"/srv/{wf}.yaml",
                workflow_source=f"version: 1\nname: {wf}\nsteps:\n  a: {{ uses: test.noop }}\n",
                inputs_json='{"source":"/media/a.mxf"}', status=status, created_at=created,
                started_at=created + 1.0 if status != "queued" else None, finished_at=finished,
                run_dir=f"runs/run{i:08d}", priority=0, labels_json=json.dumps({"batch": str(i // 1000)}),
                error=error, queue_order=created, queue="default")


def statuses(n, offset):
    for i in range(offset, offset + n):
        r = i % 50
        yield i, "failed" if r < 4 else "cancelled" if r == 4 else "succeeded"


class Store:
    def __init__(self, work, kind, pg=None):
        self.kind, self.pg = kind, pg
        self.state = os.path.join(work, kind, "state")
        self.url = pg.create_database("million") if pg else None
        os.makedirs(self.state, exist_ok=True)
        self.next_id = 0
        self.clock = 1.7e9

    def args(self):
        return ["--state", self.state] + (["--store", self.url] if self.url else [])

    def orchestrate(self, *command):
        done = subprocess.run([binary(), *command, *self.args()], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"orchestrate {' '.join(command)} failed: {done.stderr[-2000:]}")
        return done.stdout

    # -- bulk inserts in the store's schema ------------------------------------------------------

    def add(self, finished, queued):
        start = time.monotonic()
        first = self.next_id
        if self.kind == "sqlite":
            self._add_sqlite(finished, queued)
        else:
            self._add_postgres(finished, queued)
        self.next_id += finished + queued
        self.clock += (finished + queued) * 0.01
        print(f"{self.kind}: inserted {finished:,} finished and {queued:,} queued runs "
              f"(ids from run{first:08d}) in {time.monotonic() - start:.0f} s", flush=True)

    def _add_sqlite(self, finished, queued):
        db = sqlite3.connect(os.path.join(self.state, "state.sqlite"), timeout=60)
        columns = list(run_row(0, "queued", 0).keys())
        insert_run = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        with db:
            def rows():
                for i, status in statuses(finished, self.next_id):
                    yield tuple(run_row(i, status, self.clock + (i - self.next_id) * 0.01).values())
                for i in range(self.next_id + finished, self.next_id + finished + queued):
                    yield tuple(run_row(i, "queued", self.clock + (i - self.next_id) * 0.01).values())
            db.executemany(insert_run, rows())
            db.execute("""
                INSERT INTO steps (run_id, id, step, kind, status, attempt, started_at, finished_at)
                SELECT id, 'a', 'a', 'step', CASE status WHEN 'failed' THEN 'failed' ELSE 'succeeded' END, 1, started_at, finished_at
                FROM runs WHERE id >= ? AND status != 'queued'""", (f"run{self.next_id:08d}",))
            for type_, time_col, extra in (("run.added", "created_at", "NULL"), ("step.progress", "started_at", "'a'"),
                                           ("run.finished", "finished_at", "NULL")):
                data = '{"bytes_done":1048576,"bytes_total":1048576}' if type_ == "step.progress" else "{}"
                db.execute(f"""INSERT INTO events (run_id, time, type, step, data_json)
                               SELECT id, {time_col}, ?, {extra}, ? FROM runs
                               WHERE id >= ? AND {time_col} IS NOT NULL ORDER BY id""",
                           (type_, data, f"run{self.next_id:08d}"))
        db.execute("ANALYZE")
        db.close()

    def _add_postgres(self, finished, queued):
        a, b = self.next_id, self.next_id + finished + queued - 1
        q0 = self.next_id + finished
        self.pg.sql(f"""
            INSERT INTO runs (id, workflow_name, workflow_file, workflow_source, inputs_json, status, created_at,
                              started_at, finished_at, run_dir, priority, labels_json, error, queue_order, queue)
            SELECT 'run' || lpad(i::text, 8, '0'), 'wf-' || (i % 10), '/srv/wf-' || (i % 10) || '.yaml',
                   'version: 1' || chr(10) || 'name: wf-' || (i % 10) || chr(10), '{{"source":"/media/a.mxf"}}', s.status,
                   {self.clock} + (i - {a}) * 0.01,
                   CASE WHEN s.status = 'queued' THEN NULL ELSE {self.clock} + (i - {a}) * 0.01 + 1 END,
                   CASE WHEN s.status = 'queued' THEN NULL ELSE {self.clock} + (i - {a}) * 0.01 + 2 END,
                   'runs/run' || lpad(i::text, 8, '0'), 0, '{{"batch":"' || (i / 1000) || '"}}',
                   CASE WHEN s.status = 'failed' THEN 'step put failed: 503' END,
                   {self.clock} + (i - {a}) * 0.01, 'default'
            FROM generate_series({a}, {b}) AS i,
                 LATERAL (SELECT CASE WHEN i >= {q0} THEN 'queued' WHEN i % 50 < 4 THEN 'failed'
                                      WHEN i % 50 = 4 THEN 'cancelled' ELSE 'succeeded' END AS status) s""", "million")
        lo = f"run{a:08d}"
        self.pg.sql(f"""
            INSERT INTO steps (run_id, id, step, kind, status, attempt, started_at, finished_at)
            SELECT id, 'a', 'a', 'step', CASE status WHEN 'failed' THEN 'failed' ELSE 'succeeded' END, 1, started_at, finished_at
            FROM runs WHERE id >= '{lo}' AND status <> 'queued'""", "million")
        self.pg.sql(f"""
            INSERT INTO events (run_id, time, type, step, data_json)
            SELECT id, t, type, step, data FROM (
                SELECT id, created_at AS t, 'run.added' AS type, NULL AS step, '{{}}' AS data, 0 AS k FROM runs WHERE id >= '{lo}'
                UNION ALL SELECT id, started_at, 'step.progress', 'a', '{{"bytes_done":1048576,"bytes_total":1048576}}', 1
                    FROM runs WHERE id >= '{lo}' AND started_at IS NOT NULL
                UNION ALL SELECT id, finished_at, 'run.finished', NULL, '{{}}', 2 FROM runs WHERE id >= '{lo}' AND finished_at IS NOT NULL
            ) e ORDER BY id, k""", "million")
        self.pg.sql("VACUUM ANALYZE", "million")

    # -- the claim, as the stores run it ----------------------------------------------------------

    def claim_ms(self):
        if self.kind == "sqlite":
            db = sqlite3.connect(os.path.join(self.state, "state.sqlite"), timeout=60, isolation_level=None)
            start = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("""SELECT * FROM runs WHERE status IN ('running', 'compensating') AND queue IN ('default')
                          ORDER BY run_now DESC, priority DESC, queue_order, created_at""").fetchall()
            row = db.execute("""SELECT * FROM runs INDEXED BY runs_queued_order WHERE status = 'queued' AND queue IN ('default')
                                ORDER BY run_now DESC, priority DESC, queue_order, created_at""").fetchone()
            db.execute("UPDATE runs SET owner_host = 'bench', owner_pid = 1, owner_start = 1, lease_until = 1e10, run_now = 0 "
                       "WHERE id = ?", (row[0],))
            took = (time.perf_counter() - start) * 1000
            db.execute("ROLLBACK")
            db.close()
            return took
        out = self.pg.sql("BEGIN; EXPLAIN (ANALYZE, FORMAT JSON) " + PG_CLAIM + "; ROLLBACK", "million")
        return json.loads("\n".join(row[0] for row in out))[0]["Execution Time"]

    def plans(self):
        if self.kind == "sqlite":
            db = sqlite3.connect(os.path.join(self.state, "state.sqlite"))
            for name, sql in SQLITE_PLANS:
                plan = "; ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql))
                print(f"  plan {name}: {plan}")
            for name, sql in OLD_STATEMENTS:
                start = time.perf_counter()
                db.execute(sql).fetchall()
                print(f"  before: {name}: {(time.perf_counter() - start) * 1000:.1f} ms")
            db.close()
            return
        for name, sql in PG_PLANS:
            plan = " | ".join(r[0].strip() for r in self.pg.sql("EXPLAIN " + sql, "million")[:4])
            print(f"  plan {name}: {plan}")
        for name, sql in OLD_STATEMENTS:
            out = self.pg.sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, "million")
            print(f"  before: {name}: {json.loads(chr(10).join(row[0] for row in out))[0]['Execution Time']:.1f} ms")


PG_CLAIM = """
WITH free AS (
    SELECT id FROM runs WHERE status = 'queued' AND owner_node IS NULL AND queue = ANY('{default}'::text[])
    ORDER BY run_now DESC, priority DESC, queue_order, created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE runs SET owner_node = 'bench', owner_pid = 1, owner_start = 1,
                lease_until = extract(epoch from clock_timestamp()) + 15, run_now = false
WHERE id = ANY(ARRAY(SELECT id FROM free)) RETURNING runs.*"""

SQLITE_PLANS = [
    ("list --status failed --limit 50",
     "SELECT * FROM runs WHERE status IN ('failed') ORDER BY created_at DESC, id DESC LIMIT 50"),
    ("list --workflow wf-3 --limit 50",
     "SELECT * FROM runs WHERE workflow_name = 'wf-3' ORDER BY created_at DESC, id DESC LIMIT 50"),
    ("list --limit 1000", "SELECT * FROM runs ORDER BY created_at DESC, id DESC LIMIT 1000"),
    ("counts", "SELECT queue, status, n FROM run_counts WHERE n > 0"),
    ("oldest queued", "SELECT MIN(created_at) FROM runs WHERE status = 'queued' AND queue = 'default'"),
    ("held steps", "SELECT COUNT(*) FROM steps WHERE status = 'held'"),
    ("claim", "SELECT * FROM runs INDEXED BY runs_queued_order WHERE status = 'queued' AND queue IN ('default') "
              "ORDER BY run_now DESC, priority DESC, queue_order, created_at"),
]
PG_PLANS = [
    ("list --status failed --limit 50",
     "SELECT * FROM runs WHERE status = ANY('{failed}'::text[]) ORDER BY created_at DESC, id DESC LIMIT 50"),
    ("list --workflow wf-3 --limit 50",
     "SELECT * FROM runs WHERE workflow_name = 'wf-3' ORDER BY created_at DESC, id DESC LIMIT 50"),
    ("list --limit 1000", "SELECT * FROM runs ORDER BY created_at DESC, id DESC LIMIT 1000"),
    ("counts", "SELECT queue, status, sum(n) FROM run_count_deltas GROUP BY queue, status HAVING sum(n) > 0"),
    ("oldest queued", "SELECT MIN(created_at) FROM runs WHERE status = 'queued' AND queue = 'default'"),
    ("held steps", "SELECT COUNT(*) FROM steps WHERE status = 'held'"),
    ("claim", PG_CLAIM),
]
OLD_STATEMENTS = [
    ("count per queue and status over all runs",
     "SELECT queue, status, COUNT(*), MIN(CASE WHEN status = 'queued' THEN created_at END) FROM runs GROUP BY queue, status"),
    ("every failed run, oldest first (the list's limit was applied after)",
     "SELECT * FROM runs WHERE status IN ('failed') ORDER BY created_at, id"),
]


class Serve:
    """One `serve --http` on the store, its queue stopped first (it executes nothing)."""

    def __init__(self, store):
        store.orchestrate("queue", "stop")
        self.port = free_port()
        self.process = subprocess.Popen([binary(), "serve", "--no-prune", "--http", f"127.0.0.1:{self.port}", *store.args()],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        token = os.path.join(store.state, "http-token")
        deadline = time.monotonic() + 60
        while True:
            try:
                with open(token) as f:
                    self.token = f.read().strip()
                self.get("/api/queues")
                break
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    raise SystemExit("serve --http did not answer")
                time.sleep(0.2)
        self.n = 0

    def get(self, path):
        """The time of one request on a new connection, in ms (the body read to its end)."""
        self.n = getattr(self, "n", 0) + 1
        sep = "&" if "?" in path else "?"
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(f"GET {path}{sep}bench={self.n} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.token}\r\n"
                      f"Connection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(1 << 16):
                data += chunk
        took = (time.perf_counter() - start) * 1000
        status = data.split(b" ", 2)[1]
        if status != b"200":
            raise SystemExit(f"GET {path}: {data[:300]!r}")
        return took

    def stop(self):
        self.process.terminate()
        self.process.wait()


def measure(store, label, rounds, results):
    some_run = f"run{store.next_id // 2:08d}"
    cases = [
        ("cli: list --status failed --limit 50", lambda: store.orchestrate("list", "--status", "failed", "--limit", "50")),
        ("cli: list --workflow wf-3 --limit 50", lambda: store.orchestrate("list", "--workflow", "wf-3", "--limit", "50")),
        ("cli: list --limit 50", lambda: store.orchestrate("list", "--limit", "50")),
        ("cli: status RUN", lambda: store.orchestrate("status", some_run)),
    ]
    timings = {}
    for name, call in cases:
        values = []
        for _ in range(rounds):
            start = time.perf_counter()
            call()
            values.append((time.perf_counter() - start) * 1000)
        timings[name] = values
    serve = Serve(store)
    try:
        serve.get("/metrics")  # folds the counts the bulk insert left (PostgreSQL), once
        for path in ["/api/runs?status=failed&limit=50", "/api/queues", "/api/runs?limit=1000",
                     "/api/runs?status=failed&limit=10", f"/api/runs/{some_run}", "/metrics"]:
            timings["http: " + path] = [serve.get(path) for _ in range(rounds)]
    finally:
        serve.stop()
    timings["claim of the next queued run (SQL)"] = [store.claim_ms() for _ in range(rounds)]
    for name, values in timings.items():
        results.setdefault((store.kind, name), {})[label] = (statistics.median(values), percentile(values, 99))
        print(f"{store.kind} {label}: {name}: p50 {statistics.median(values):.2f} ms, p99 {percentile(values, 99):.2f} ms",
              flush=True)


def report(results):
    print("\n| store | read | empty p50 / p99 (ms) | 1M p50 / p99 (ms) | p50 ratio |")
    print("|---|---|---|---|---|")
    for (kind, name), by in results.items():
        e, m = by.get("empty"), by.get("1M")
        if e and m:
            print(f"| {kind} | {name} | {e[0]:.2f} / {e[1]:.2f} | {m[0]:.2f} / {m[1]:.2f} | {m[0] / e[0]:.2f} |")


def bench(kind, work, options, results, pg=None):
    store = Store(work, kind, pg)
    store.orchestrate("list")  # creates the store and its schema
    store.add(SMALL, SMALL)
    measure(store, "empty", options.rounds, results)
    store.add(options.runs, options.queued)
    measure(store, "1M", options.rounds, results)
    store.plans()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--bin", help="the orchestrate binary (default: .build/release, else .build/debug)")
    options = parser.parse_args()
    if options.bin:
        BINARY.append(options.bin)
    print(f"binary: {binary()}", flush=True)
    random.seed(1)
    print(f"load: {open('/proc/loadavg').read().strip()}", flush=True)
    work = tempfile.mkdtemp(prefix="orchestrate-bench-million-")
    results = {}
    try:
        if "sqlite" in options.stores:
            bench("sqlite", work, options, results)
        if "postgres" in options.stores:
            with PostgresCluster() as pg:
                pg.sql("SELECT 1")
                bench("postgres", work, options, results, pg)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(results)
    print(f"load: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
