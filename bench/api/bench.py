#!/usr/bin/env python3
"""HTTP API load benchmark (issue 13): does watching and steering `serve` over HTTP slow the
runs it executes?

One `serve --max-parallel 32 --http 127.0.0.1:PORT` (release build, SQLite store) executes 32
runs at once, twice per round, on a fresh state directory each time:
- quiet: nobody calls the API;
- loaded: 50 Server-Sent-Event clients follow `/api/events` (every event of every run) and
  200 API requests per second are made (run list, run detail, queues, nodes, metrics: what a
  dashboard and Prometheus ask), from before the runs are submitted until they all finish.
Each run is a chain of no-op steps and two metered transfers (progress events), so it is
bound by the engine and the store, not by sleeping. Reported: the makespan (first start to
last finish) and the per-run duration p50 / max in each phase, their ratios (loaded / quiet;
the goal is ≤ 1.10), serve's peak RSS (VmHWM; the goal is ≤ 200 MiB), the request rate
achieved with its latency p50 / p99, and events received per SSE client.

    swift build -c release && python3 bench/api/bench.py [--rounds 2] [--steps 200]
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, build_test_plugin, free_port  # noqa: E402

RUNS = 32
SSE_CLIENTS = 50
REQUESTS_PER_SECOND = 200
MAX_IN_FLIGHT = 256  # requests not answered yet; past it a request is counted as an error, not sent


def workflow(steps):
    lines = ["version: 1", "name: bench-api", "steps:",
             "  m0: { uses: test.metered, with: { bytes: 67108864, chunk: 65536 } }"]
    previous = "m0"
    for i in range(steps):
        lines.append(f"  s{i}: {{ uses: test.noop, needs: [{previous}] }}")
        previous = f"s{i}"
    lines.append(f"  m1: {{ uses: test.metered, with: {{ bytes: 67108864, chunk: 65536 }}, needs: [{previous}] }}")
    return "\n".join(lines) + "\n"


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))]


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def http_get(port, token, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                 "Connection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def followers(port, token, stop, results):
    """SSE_CLIENTS followers of /api/events; puts the events each received. Reads in large
    chunks and counts `id:` lines without parsing, to keep the load generator's own CPU low."""
    counts = [0] * SSE_CLIENTS

    async def follow(index):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        await writer.drain()
        tail = b""
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            data = tail + chunk
            counts[index] += data.count(b"\nid: ")
            tail = data[-5:]
        writer.close()

    async def main():
        tasks = [asyncio.create_task(follow(i)) for i in range(SSE_CLIENTS)]
        while not stop.is_set():
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    results.put(("events", counts))


def caller(port, token, stop, results):
    """REQUESTS_PER_SECOND requests, paced (one new connection each): run lists, run details,
    queues, nodes, metrics. Puts the latencies, errors, count sent and duration."""
    latencies, errors, detail, skipped, busy = [], [0], [], [0], [0]
    paths = ["/api/runs?limit=50", "/api/queues", "/api/nodes", "/metrics", "/api/runs?status=running"]

    async def one(path):
        start = time.monotonic()
        try:
            reply = await http_get(port, token, path)
            if reply.startswith(b"HTTP/1.1 503"):  # shed by the server's admission bound
                busy[0] += 1
            elif not reply.startswith(b"HTTP/1.1 200"):
                errors[0] += 1
            elif path == "/api/runs?limit=50":
                detail[:] = [r["id"] for r in json.loads(reply.split(b"\r\n\r\n", 1)[1])["runs"]]
        except (OSError, ValueError, KeyError, IndexError):
            errors[0] += 1
        latencies.append(time.monotonic() - start)

    async def main():
        interval, n, tasks = 1 / REQUESTS_PER_SECOND, 0, set()
        begin = time.monotonic()
        while not stop.is_set():
            path = f"/api/runs/{detail[n % len(detail)]}" if detail and n % 2 else paths[n % len(paths)]
            n += 1
            if len(tasks) >= MAX_IN_FLIGHT:  # the server is not keeping up: count it, do not pile up
                skipped[0] += 1
            else:
                task = asyncio.create_task(one(path))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            # Always yield (even when behind schedule), or the calls never run.
            await asyncio.sleep(max(0.0, begin + n * interval - time.monotonic()))
        duration = time.monotonic() - begin
        await asyncio.gather(*tasks, return_exceptions=True)
        return n, duration

    sent, duration = asyncio.run(main())
    results.put(("calls", latencies, errors[0] + skipped[0], sent - skipped[0], duration, busy[0]))


class Load:
    """The followers and the caller, each in a process of its own (a Python process is one core
    at most; the machine has two)."""

    def __init__(self, port, token):
        self.stop, self.results = multiprocessing.Event(), multiprocessing.Queue()
        self.processes = [multiprocessing.Process(target=f, args=(port, token, self.stop, self.results))
                          for f in (followers, caller)]

    def __enter__(self):
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for _ in self.processes:
            result = self.results.get()
            if result[0] == "events":
                self.events = result[1]
            else:
                _, self.latencies, self.errors, self.sent, self.duration, self.busy = result
        for process in self.processes:
            process.join()


def phase(orchestrate, plugins, work, yaml, loaded):
    state = tempfile.mkdtemp(prefix="state-", dir=work)
    port = free_port()
    base = ["--state", state, "--plugin-path", plugins]
    serve = subprocess.Popen([orchestrate, "serve", "--max-parallel", str(RUNS), "--http", f"127.0.0.1:{port}"] + base,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    token_file = os.path.join(state, "http-token")
    deadline = time.monotonic() + 30
    while not os.path.exists(token_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    token = open(token_file).read().strip()
    wf = os.path.join(work, "bench.yaml")
    with open(wf, "w") as f:
        f.write(yaml)
    batch = os.path.join(work, "batch.jsonl")
    with open(batch, "w") as f:
        f.write("{}\n" * RUNS)
    load = Load(port, token) if loaded else None
    try:
        if load:
            load.__enter__()
            time.sleep(1)  # the followers are connected and the requests flowing
        subprocess.run([orchestrate, "submit", wf, "--batch", batch] + base, check=True, capture_output=True)
        db = sqlite3.connect(os.path.join(state, "state.sqlite"), timeout=30)
        deadline = time.monotonic() + 1800
        while db.execute("SELECT COUNT(*) FROM runs WHERE status IN ('succeeded','failed','cancelled')").fetchone()[0] < RUNS:
            if time.monotonic() > deadline:
                sys.exit("timed out")
            time.sleep(0.2)
    finally:
        if load:
            load.__exit__(None, None, None)
        rss = peak_rss_mib(serve.pid)
        serve.send_signal(signal.SIGTERM)
        serve.wait()
    failed = db.execute("SELECT COUNT(*) FROM runs WHERE status != 'succeeded'").fetchone()[0]
    rows = db.execute("""SELECT s.time, f.time FROM events s JOIN events f ON s.run_id = f.run_id
                         WHERE s.type = 'run.started' AND f.type = 'run.finished'""").fetchall()
    durations = [f - s for s, f in rows]
    result = {"makespan": max(f for _, f in rows) - min(s for s, _ in rows), "p50": percentile(durations, 50),
              "max": max(durations), "rss": rss, "failed": failed,
              "journal_events": db.execute("SELECT COUNT(*) FROM events").fetchone()[0]}
    if load:
        result.update(requests=len(load.latencies), rate=load.sent / load.duration, errors=load.errors, busy=load.busy,
                      lat50=percentile(load.latencies, 50) * 1000, lat99=percentile(load.latencies, 99) * 1000,
                      events_min=min(load.events), events_max=max(load.events))
    shutil.rmtree(state, ignore_errors=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"),
                        help="where the release orchestrate is (.build-release/release with --scratch-path .build-release)")
    parser.add_argument("--rounds", type=int, default=2, help="quiet/loaded pairs (alternated)")
    parser.add_argument("--steps", type=int, default=200, help="no-op steps per run, between the transfers")
    args = parser.parse_args()
    orchestrate = os.path.join(args.bin, "orchestrate")
    work = tempfile.mkdtemp(prefix="orchestrate-bench-api-")
    plugins = build_test_plugin(os.path.join(work, "plugins"))
    yaml = workflow(args.steps)
    quiet, loaded = [], []
    for round_ in range(args.rounds):
        quiet.append(phase(orchestrate, plugins, work, yaml, loaded=False))
        print(f"round {round_ + 1} quiet:  {json.dumps(quiet[-1])}", flush=True)
        loaded.append(phase(orchestrate, plugins, work, yaml, loaded=True))
        print(f"round {round_ + 1} loaded: {json.dumps(loaded[-1])}", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    def mean(rows, key):
        return sum(r[key] for r in rows) / len(rows)

    print(f"\n{RUNS} runs of 2 x 64 MiB metered transfers + {args.steps} no-op steps, serve --max-parallel {RUNS}, "
          f"{args.rounds} round(s); load = {SSE_CLIENTS} SSE clients + {REQUESTS_PER_SECOND} requests/s")
    print("| phase | makespan | run p50 | run max | serve peak RSS | failed runs |")
    print("|---|---|---|---|---|---|")
    for name, rows in (("quiet", quiet), ("loaded", loaded)):
        print(f"| {name} | {mean(rows, 'makespan'):.2f} s | {mean(rows, 'p50'):.2f} s | {mean(rows, 'max'):.2f} s | "
              f"{max(r['rss'] for r in rows):.0f} MiB | {sum(r['failed'] for r in rows)} |")
    print(f"slowdown (loaded / quiet): makespan {mean(loaded, 'makespan') / mean(quiet, 'makespan'):.3f}, "
          f"run p50 {mean(loaded, 'p50') / mean(quiet, 'p50'):.3f}, run max {mean(loaded, 'max') / mean(quiet, 'max'):.3f}")
    print(f"API under load: {mean(loaded, 'rate'):.0f} requests/s sent and answered, latency p50 {mean(loaded, 'lat50'):.1f} ms / "
          f"p99 {mean(loaded, 'lat99'):.1f} ms, {sum(r['busy'] for r in loaded)} answered 503 (busy), "
          f"{sum(r['errors'] for r in loaded)} errors; events per SSE client "
          f"{min(r['events_min'] for r in loaded)}-{max(r['events_max'] for r in loaded)} "
          f"(the journal had {max(r['journal_events'] for r in loaded)})")


if __name__ == "__main__":
    main()
