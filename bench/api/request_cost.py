#!/usr/bin/env python3
"""What one API request costs `serve` in CPU, by kind, without the runs competing for the cores:
the steadier companion of bench.py on a shared machine.

One state directory is made once: 32 finished runs of bench.py's CPU-bound workload (200 no-op
steps and two transfers each, about 13,000 journaled events). For each `--bin` given (e.g. a
build of main and one of a branch, side by side in one run, alternated over `--repeat`
passes), a `serve --http` is started on a copy of that state and asked, one request at a time
over one kept-alive connection:
- each kind of read, made unique by a query parameter so that none is answered from the 0.25 s
  read cache (what the request really costs when a run changed since the last answer);
- the same read repeated (answered from the read cache: the fixed cost of a request);
- the whole journal as Server-Sent Events (`/api/events`), by several clients in turn.
Reported: `serve`'s CPU (user + system, from /proc) per request and per event delivered, median
of the passes.

    python3 bench/api/request_cost.py --bin /path/to/before/release --bin .build/release
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import build_test_plugin, free_port, process_cpu_seconds  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import RUNS, WORKLOADS, workflow  # noqa: E402

REQUESTS = 1000
SSE_READS = 10


def make_state(orchestrate, plugins, work):
    """32 finished runs of the CPU-bound workload, made by a serve without the HTTP API."""
    state = os.path.join(work, "state")
    shape = WORKLOADS["cpu"]
    wf = os.path.join(work, "bench.yaml")
    with open(wf, "w") as f:
        f.write(workflow(shape["steps"], shape["bytes"]))
    batch = os.path.join(work, "batch.jsonl")
    with open(batch, "w") as f:
        f.write("{}\n" * RUNS)
    base = ["--state", state, "--plugin-path", plugins]
    serve = subprocess.Popen([orchestrate, "serve", "--max-parallel", str(RUNS)] + base,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        subprocess.run([orchestrate, "submit", wf, "--batch", batch] + base, check=True, capture_output=True)
        db = sqlite3.connect(os.path.join(state, "state.sqlite"), timeout=30)
        while db.execute("SELECT COUNT(*) FROM runs WHERE status = 'succeeded'").fetchone()[0] < RUNS:
            time.sleep(0.2)
        run_id = db.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchone()[0]
        events = db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        db.close()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait()
    return state, run_id, events


class Connection:
    def __init__(self, port, token):
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.token = token

    def get(self, path):
        self.socket.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.token}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.socket.recv(1 << 16)
        head, body = data.split(b"\r\n\r\n", 1)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        while len(body) < length:
            body += self.socket.recv(1 << 16)
        if not head.startswith(b"HTTP/1.1 200"):
            sys.exit(f"{path}: {head.splitlines()[0].decode()}")


def sse_read(port, token, events):
    """Reads /api/events from the start until every journaled event came."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    data, seen = b"", 0
    while seen < events:
        chunk = s.recv(1 << 20)
        if not chunk:
            sys.exit("the event stream ended early")
        data = data[-4:] + chunk
        seen += data.count(b"\nid: ")
    s.close()


def measure(orchestrate, plugins, template, run_id, events):
    state = tempfile.mkdtemp(prefix="state-", dir=os.path.dirname(template))
    shutil.rmtree(state)
    shutil.copytree(template, state)
    port = free_port()
    serve = subprocess.Popen([orchestrate, "serve", "--http", f"127.0.0.1:{port}", "--state", state, "--plugin-path", plugins],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    token_file = os.path.join(state, "http-token")
    while not os.path.exists(token_file):
        time.sleep(0.05)
    time.sleep(0.3)
    token = open(token_file).read().strip()
    connection = Connection(port, token)
    kinds = {"run detail": f"/api/runs/{run_id}?n={{n}}", "run list": "/api/runs?limit=50&n={n}",
             "metrics": "/metrics?n={n}", "queues": "/api/queues?n={n}", "nodes": "/api/nodes?n={n}",
             "cached answer": "/api/queues"}
    costs = {}
    try:
        for kind, path in kinds.items():
            for n in range(50):  # warm up
                connection.get(path.format(n=f"w{n}"))
            before = process_cpu_seconds(serve.pid)
            for n in range(REQUESTS):
                connection.get(path.format(n=n))
            costs[kind] = (process_cpu_seconds(serve.pid) - before) / REQUESTS * 1e6
        before = process_cpu_seconds(serve.pid)
        for _ in range(SSE_READS):
            sse_read(port, token, events)
        costs["SSE, per event"] = (process_cpu_seconds(serve.pid) - before) / (SSE_READS * events) * 1e6
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait()
        shutil.rmtree(state, ignore_errors=True)
    return costs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", action="append", required=True, help="a directory holding orchestrate (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the builds, alternated")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="orchestrate-bench-request-cost-")
    try:
        plugins = build_test_plugin(os.path.join(work, "plugins"))
        template, run_id, events = make_state(os.path.join(args.bin[-1], "orchestrate"), plugins, work)
        results = {b: [] for b in args.bin}
        for _ in range(args.repeat):
            for b in args.bin:
                results[b].append(measure(os.path.join(b, "orchestrate"), plugins, template, run_id, events))
                print(f"{b}: {json.dumps({k: round(v, 2) for k, v in results[b][-1].items()})}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kinds = list(results[args.bin[0]][0])
    print(f"\nserve CPU per request (µs; median of {args.repeat}; {RUNS} finished runs of 200 steps, "
          f"{events} events; load average {os.getloadavg()[0]:.1f})")
    print("| build | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for b in args.bin:
        print(f"| {b} | " + " | ".join(f"{statistics.median(r[k] for r in results[b]):.{2 if 'SSE' in k else 0}f}"
                                       for k in kinds) + " |")


if __name__ == "__main__":
    main()
