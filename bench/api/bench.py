#!/usr/bin/env python3
"""HTTP API load benchmark (issue 13): does watching and steering `serve` over HTTP slow the
runs it executes?

One `serve --max-parallel 32 --http 127.0.0.1:PORT` (release build, SQLite store) executes 32
runs at once, twice per round, on a fresh state directory each time:
- quiet: nobody calls the API;
- loaded: 50 Server-Sent-Event clients follow `/api/events` (every event of every run) and
  200 API requests per second are made (run list, run detail, queues, nodes, metrics: what a
  dashboard and Prometheus ask), from before the runs are submitted until they all finish.
Two workloads, two questions (the goal, no run slowed by more than 10 %, is read in both):
- `--workload cpu` (the default): each run is two 64 MiB metered transfers (the test plugin's
  `test.metered`, uncapped) around a chain of 200 no-op steps, so the runs are bound by CPU:
  on a 2-core machine they keep the cores busy, and every CPU-second the API and the load
  generator (same machine) take comes out of them. The slowdown then measures CPU
  competition; the bench prints the floor that the load's CPU alone sets: taking r of C
  saturated cores leaves the runs C - r, so they take C / (C - r) as long.
- `--workload transfers`: each run is two metered transfers held to a per-run bandwidth cap
  (`submit --max-rate`, default 8M: 16 MiB each, so 4 s per run) around 20 no-op steps, as
  the product's real runs are bound by the network, not by the CPU. The cores have room to
  spare, so the slowdown measures interference: store contention, locks, latency the API
  adds to the runs' steps and commits.
Reported: the makespan (first start to last finish) and the per-run duration p50 / max in
each phase, their ratios (loaded / quiet), serve's peak RSS (VmHWM; the goal is ≤ 200 MiB),
the request rate achieved with its latency p50 / p99, and events received per SSE client.
Because the machine may be shared, also the CPU seconds `serve` used in each phase for the
same 32 runs (steadier than wall-clock time under other load), what the load cost it per API
request, the load generator's own CPU (it runs on the same cores), the share of the machine's
cores that were busy and the load average. `--mix KIND` sends one kind of load alone (only
the SSE clients, or 200/s of run details, lists, metrics, or queues and nodes), to tell what
each costs.

The requests go over a few kept-alive connections (HTTP/1.1, as a browser or Prometheus
makes them); `--connection-per-request` opens a new connection for each instead.

    swift build -c release --scratch-path .build-release
    python3 bench/api/bench.py --bin .build-release/release [--rounds 2] [--workload cpu|transfers] [--mix KIND]
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, build_test_plugin, free_port, parse_rate, process_cpu_seconds  # noqa: E402

RUNS = 32
SSE_CLIENTS = 50
REQUESTS_PER_SECOND = 200
# The requests of the default mix, by kind (`--mix KIND` sends only one kind, for its CPU cost);
# run details (`/api/runs/ID` of the runs the last list showed) are every other request.
REQUEST_KINDS = {
    "list": ["/api/runs?limit=50", "/api/runs?status=running"],
    "small": ["/api/queues", "/api/nodes"],
    "metrics": ["/metrics"],
}
LIST_PATH = REQUEST_KINDS["list"][0]
MIX = "all"  # set by --mix before the load processes start
GENERATOR = "c"  # set by --generator: loadgen.c, or the Python processes below
LOADGEN = None  # the compiled loadgen.c
MAX_IN_FLIGHT = 256  # requests not answered yet; past it a request is counted as an error, not sent
CONNECTIONS = 32  # kept-alive connections the requests share (a few dashboards and scrapers)


# What each workload's runs are: no-op steps between the two transfers, bytes per transfer,
# and the per-run bandwidth cap (`submit --max-rate`; None: uncapped).
WORKLOADS = {
    "cpu": {"steps": 200, "bytes": 64 << 20, "max_rate": None},
    "transfers": {"steps": 20, "bytes": 16 << 20, "max_rate": "8M"},
}


def workflow(steps, transfer_bytes):
    lines = ["version: 1", "name: bench-api", "steps:",
             f"  m0: {{ uses: test.metered, with: {{ bytes: {transfer_bytes}, chunk: 65536 }} }}"]
    previous = "m0"
    for i in range(steps):
        lines.append(f"  s{i}: {{ uses: test.noop, needs: [{previous}] }}")
        previous = f"s{i}"
    lines.append(f"  m1: {{ uses: test.metered, with: {{ bytes: {transfer_bytes}, chunk: 65536 }}, needs: [{previous}] }}")
    return "\n".join(lines) + "\n"


def machine_cpu():
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


class Window:
    """From the submit to the last run's end: wall time, the machine's busy jiffies, and the CPU
    seconds of serve and of the load generator's processes in that window alone (their totals
    also hold the second before the submit and the shutdown)."""

    def __init__(self, serve_pid, load):
        self.pids = [serve_pid] + ([p.pid for p in load.processes] if load else [])
        self.start = self.sample()

    def sample(self):
        return (time.monotonic(), machine_cpu(), [process_cpu_seconds(pid) for pid in self.pids])

    def close(self):
        (t0, (busy0, total0), cpu0), (t1, (busy1, total1), cpu1) = self.start, self.sample()
        return {"window": t1 - t0, "machine_busy": (busy1 - busy0) / max(total1 - total0, 1),
                "window_serve_cpu": cpu1[0] - cpu0[0], "window_load_cpu": sum(cpu1[1:]) - sum(cpu0[1:]),
                "loadavg": os.getloadavg()[0]}


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
    """One request on a connection of its own (`--connection-per-request`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                 "Connection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    status, _, body = data.partition(b"\r\n\r\n")
    return int(status[9:12]), body


class KeptAliveConnections:
    """Up to CONNECTIONS HTTP/1.1 connections, each carrying one request at a time; a request
    waits for a free one. A connection the server closed is replaced."""

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.idle, self.opened = [], 0
        self.freed = asyncio.Condition()

    async def get(self, path):
        async with self.freed:
            while not self.idle and self.opened >= CONNECTIONS:
                await self.freed.wait()
            if self.idle:
                connection = self.idle.pop()
            else:
                self.opened += 1
                connection = None
        keep = False
        try:
            if connection is None:
                connection = await asyncio.open_connection("127.0.0.1", self.port)
            status, body, keep = await self.exchange(connection, path)
        finally:
            async with self.freed:
                if keep:
                    self.idle.append(connection)
                else:  # failed, or the server said it closes the connection
                    if connection is not None:
                        connection[1].close()
                    self.opened -= 1
                self.freed.notify()
        return status, body

    async def exchange(self, connection, path):
        reader, writer = connection
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {self.token}\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        headers = head.lower()
        at = headers.find(b"\r\ncontent-length:")
        if at >= 0:
            body = await reader.readexactly(int(headers[at + 17:headers.index(b"\r\n", at + 2)]))
        elif b"\r\ntransfer-encoding: chunked" in headers:
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunks.append((await reader.readexactly(size + 2))[:-2])
                if size == 0:
                    break
            body = b"".join(chunks)
        else:
            raise ValueError("an answer with neither Content-Length nor chunks")
        return status, body, b"\r\nconnection: close" not in headers


def cpu_seconds():
    """This process's user + system CPU seconds."""
    times = os.times()
    return times.user + times.system


def followers(port, token, stop, results):
    """SSE_CLIENTS followers of /api/events; puts the events each received. Reads in large
    chunks and counts `id:` lines without parsing, to keep the load generator's own CPU low."""
    clients = SSE_CLIENTS if MIX in ("all", "sse") else 0
    counts = [0] * clients

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
            tail = data[-4:]  # shorter than "\nid: ", so an id at the very end is not counted twice
        writer.close()

    async def main():
        tasks = [asyncio.create_task(follow(i)) for i in range(clients)]
        while not stop.is_set():
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    results.put(("events", counts, cpu_seconds()))


def caller(port, token, stop, results, connection_per_request):
    """REQUESTS_PER_SECOND requests, paced: run lists, run details, queues, nodes, metrics.
    Puts the latencies (from when a request was due to its answer, waiting for a free
    connection included), errors, count sent, duration and CPU seconds."""
    latencies, errors, detail, skipped, busy = [], [0], [], [0], [0]
    connections = None
    if MIX == "all":
        paths = [LIST_PATH, "/api/queues", "/api/nodes", "/metrics", "/api/runs?status=running"]
    else:
        paths = REQUEST_KINDS.get(MIX, [])

    def next_path(n):
        if MIX == "all":
            return f"/api/runs/{detail[n % len(detail)]}" if detail and n % 2 else paths[n % len(paths)]
        if MIX == "detail":  # a list now and then, for the ids
            return f"/api/runs/{detail[n % len(detail)]}" if detail and n % 50 else LIST_PATH
        return paths[n % len(paths)]

    async def one(path):
        start = time.monotonic()
        try:
            status, body = await (http_get(port, token, path) if connection_per_request else connections.get(path))
            if status == 503:  # shed by the server's admission bound
                busy[0] += 1
            elif status != 200:
                errors[0] += 1
            elif path == LIST_PATH:
                detail[:] = [r["id"] for r in json.loads(body)["runs"]]
        except (OSError, ValueError, KeyError, IndexError, asyncio.IncompleteReadError) as e:
            if os.environ.get("BENCH_DEBUG"):
                print("error", path, repr(e), file=sys.stderr)
            errors[0] += 1
        latencies.append(time.monotonic() - start)

    async def main():
        nonlocal connections
        connections = KeptAliveConnections(port, token)
        interval, n, tasks = 1 / REQUESTS_PER_SECOND, 0, set()
        begin = time.monotonic()
        while not stop.is_set() and MIX == "sse":  # no requests, only the followers
            await asyncio.sleep(0.1)
        while not stop.is_set():
            path = next_path(n)
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
    results.put(("calls", latencies, errors[0], skipped[0], sent - skipped[0], duration, busy[0], cpu_seconds()))


class Load:
    """The followers and the caller, each in a process of its own (a Python process is one core
    at most; the machine has two)."""

    def __init__(self, port, token, connection_per_request):
        self.stop, self.results = multiprocessing.Event(), multiprocessing.Queue()
        self.processes = [multiprocessing.Process(target=followers, args=(port, token, self.stop, self.results)),
                          multiprocessing.Process(target=caller, args=(port, token, self.stop, self.results,
                                                                       connection_per_request))]
        self.cpu = 0.0

    def __enter__(self):
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for _ in self.processes:
            result = self.results.get()
            if result[0] == "events":
                _, self.events, cpu = result
            else:
                _, self.latencies, self.errors, self.skipped, self.sent, self.duration, self.busy, cpu = result
            self.cpu += cpu
        for process in self.processes:
            process.join()


class CLoad:
    """The same load made by loadgen.c (the default): the followers and the paced requests in
    one C process on epoll. The Python generator above took 0.12-0.19 of the two cores the runs
    use, most of it reading the followers' 2 MB of events fifty times over; this one takes a
    tenth of that, so the slowdown measures `serve`, not the tool measuring it."""

    def __init__(self, port, token, connection_per_request):
        self.command = [LOADGEN, str(port), token, MIX, str(SSE_CLIENTS if MIX in ("all", "sse") else 0),
                        str(REQUESTS_PER_SECOND), str(CONNECTIONS), "1" if connection_per_request else "0"]

    def __enter__(self):
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE)
        self.processes = [self.process]
        return self

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate()
        result = json.loads(out)
        self.events, self.latencies = result["events"], result["latencies"]
        self.errors, self.skipped, self.busy = result["errors"], result["skipped"], result["busy"]
        self.sent, self.duration, self.cpu = result["sent"], result["duration"], result["cpu"]


def build_loadgen(directory):
    """Compiles loadgen.c into DIRECTORY; returns the executable's path."""
    path = os.path.join(directory, "loadgen")
    subprocess.run(["cc", "-O2", "-o", path, os.path.join(os.path.dirname(os.path.abspath(__file__)), "loadgen.c")],
                   check=True)
    return path


def phase(orchestrate, plugins, work, yaml, loaded, connection_per_request=False, max_rate=None):
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
    generator = CLoad if GENERATOR == "c" else Load
    load = generator(port, token, connection_per_request) if loaded else None
    try:
        if load:
            load.__enter__()
            time.sleep(1)  # the followers are connected and the requests flowing
        window = Window(serve.pid, load)
        rate = ["--max-rate", max_rate] if max_rate else []
        subprocess.run([orchestrate, "submit", wf, "--batch", batch] + rate + base, check=True, capture_output=True)
        db = sqlite3.connect(os.path.join(state, "state.sqlite"), timeout=30)
        deadline = time.monotonic() + 1800
        while db.execute("SELECT COUNT(*) FROM runs WHERE status IN ('succeeded','failed','cancelled')").fetchone()[0] < RUNS:
            if time.monotonic() > deadline:
                sys.exit("timed out")
            time.sleep(0.2)
        window = window.close()
    finally:
        if load:
            load.__exit__(None, None, None)
        rss = peak_rss_mib(serve.pid)
        serve_cpu = process_cpu_seconds(serve.pid)
        serve.send_signal(signal.SIGTERM)
        serve.wait()
    failed = db.execute("SELECT COUNT(*) FROM runs WHERE status != 'succeeded'").fetchone()[0]
    rows = db.execute("""SELECT s.time, f.time FROM events s JOIN events f ON s.run_id = f.run_id
                         WHERE s.type = 'run.started' AND f.type = 'run.finished'""").fetchall()
    durations = [f - s for s, f in rows]
    result = {"makespan": max(f for _, f in rows) - min(s for s, _ in rows), "p50": percentile(durations, 50),
              "max": max(durations), "rss": rss, "failed": failed, "serve_cpu": serve_cpu,
              "journal_events": db.execute("SELECT COUNT(*) FROM events").fetchone()[0], **window}
    if load:
        result.update(requests=len(load.latencies), rate=load.sent / load.duration, errors=load.errors,
                      skipped=load.skipped, busy=load.busy,
                      lat50=percentile(load.latencies, 50) * 1000, lat99=percentile(load.latencies, 99) * 1000,
                      events_min=min(load.events, default=0), events_max=max(load.events, default=0), load_cpu=load.cpu)
    shutil.rmtree(state, ignore_errors=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"),
                        help="where the release orchestrate is (.build-release/release with --scratch-path .build-release)")
    parser.add_argument("--rounds", type=int, default=2, help="quiet/loaded pairs (alternated)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="cpu",
                        help="cpu: uncapped transfers and 200 no-op steps (CPU-bound runs); transfers: transfers "
                             "held to a per-run --max-rate and 20 no-op steps (rate-bound runs)")
    parser.add_argument("--steps", type=int, help="no-op steps per run, between the transfers (cpu 200, transfers 20)")
    parser.add_argument("--transfer-mib", type=int, help="MiB per transfer (cpu 64, transfers 16)")
    parser.add_argument("--max-rate", help="each run's bandwidth cap, as submit --max-rate takes it "
                                           "(transfers: 8M; cpu: none; 0 for none)")
    parser.add_argument("--mix", choices=["all", "sse", "detail", "list", "metrics", "small"], default="all",
                        help="all: the SSE clients and the request mix; sse: only the SSE clients; detail, list, "
                             "metrics, small (queues, nodes): only that kind of request, 200/s, no SSE (its CPU cost)")
    parser.add_argument("--connection-per-request", action="store_true",
                        help="a new connection for each API request instead of kept-alive ones")
    parser.add_argument("--generator", choices=["c", "python"], default="c",
                        help="c: loadgen.c, one process on epoll (cheap: the load generator shares the runs' cores); "
                             "python: the asyncio processes of earlier sessions, for comparison")
    args = parser.parse_args()
    global MIX, GENERATOR, LOADGEN
    MIX = args.mix  # before the load processes fork
    GENERATOR = args.generator
    shape = dict(WORKLOADS[args.workload])
    if args.steps is not None:
        shape["steps"] = args.steps
    if args.transfer_mib is not None:
        shape["bytes"] = args.transfer_mib << 20
    if args.max_rate is not None:
        shape["max_rate"] = None if args.max_rate in ("0", "off") else args.max_rate
    orchestrate = os.path.join(args.bin, "orchestrate")
    work = tempfile.mkdtemp(prefix="orchestrate-bench-api-")
    plugins = build_test_plugin(os.path.join(work, "plugins"))
    LOADGEN = build_loadgen(work)
    yaml = workflow(shape["steps"], shape["bytes"])
    quiet, loaded = [], []
    for round_ in range(args.rounds):
        quiet.append(phase(orchestrate, plugins, work, yaml, loaded=False, max_rate=shape["max_rate"]))
        print(f"round {round_ + 1} quiet:  {json.dumps(quiet[-1])}", flush=True)
        loaded.append(phase(orchestrate, plugins, work, yaml, loaded=True,
                            connection_per_request=args.connection_per_request, max_rate=shape["max_rate"]))
        print(f"round {round_ + 1} loaded: {json.dumps(loaded[-1])}", flush=True)
    shutil.rmtree(work, ignore_errors=True)

    def mean(rows, key):
        return sum(r[key] for r in rows) / len(rows)

    cap = f", each run capped at {shape['max_rate']}/s" if shape["max_rate"] else ", uncapped"
    print(f"\nworkload {args.workload}: {RUNS} runs of 2 x {shape['bytes'] >> 20} MiB metered transfers{cap} + "
          f"{shape['steps']} no-op steps, serve --max-parallel {RUNS}, "
          f"{args.rounds} round(s); load = "
          + {"all": f"{SSE_CLIENTS} SSE clients + {REQUESTS_PER_SECOND} requests/s", "sse": f"{SSE_CLIENTS} SSE clients only"}
          .get(args.mix, f"{REQUESTS_PER_SECOND} {args.mix} requests/s only"))
    print("| phase | makespan | run p50 | run max | serve peak RSS | failed runs | machine busy | load average |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in (("quiet", quiet), ("loaded", loaded)):
        print(f"| {name} | {mean(rows, 'makespan'):.2f} s | {mean(rows, 'p50'):.2f} s | {mean(rows, 'max'):.2f} s | "
              f"{max(r['rss'] for r in rows):.0f} MiB | {sum(r['failed'] for r in rows)} | "
              f"{mean(rows, 'machine_busy') * 100:.0f} % | {min(r['loadavg'] for r in rows):.1f}-{max(r['loadavg'] for r in rows):.1f} |")
    print(f"slowdown (loaded / quiet): makespan {mean(loaded, 'makespan') / mean(quiet, 'makespan'):.3f}, "
          f"run p50 {mean(loaded, 'p50') / mean(quiet, 'p50'):.3f}, run max {mean(loaded, 'max') / mean(quiet, 'max'):.3f}")
    pairs = sorted(l["makespan"] / q["makespan"] for q, l in zip(quiet, loaded))
    # Each loaded phase runs right after its quiet one, so a pair shares the machine's state;
    # the median pair is steadier than the ratio of means when a neighbour's burst hits one phase.
    print(f"makespan ratio per round (sorted): {', '.join(f'{r:.3f}' for r in pairs)}; "
          f"median {statistics.median(pairs):.3f}")
    if shape["max_rate"]:
        capped = 2 * shape["bytes"] / parse_rate(shape["max_rate"])
        print(f"the caps alone make a run take {capped:.2f} s (less up to a quarter second of burst per transfer); "
              f"run p50 above that: quiet {mean(quiet, 'p50') - capped:.2f} s, loaded {mean(loaded, 'p50') - capped:.2f} s")
    print(f"API under load: {mean(loaded, 'rate'):.0f} requests/s sent and answered, latency p50 {mean(loaded, 'lat50'):.1f} ms / "
          f"p99 {mean(loaded, 'lat99'):.1f} ms, {sum(r['busy'] for r in loaded)} answered 503 (busy), "
          f"{sum(r['errors'] for r in loaded)} errors, {sum(r['skipped'] for r in loaded)} not sent "
          f"({MAX_IN_FLIGHT} unanswered already); events per SSE client "
          f"{min(r['events_min'] for r in loaded)}-{max(r['events_max'] for r in loaded)} "
          f"(the journal had {max(r['journal_events'] for r in loaded)})")
    quiet_cpu, loaded_cpu = mean(quiet, "serve_cpu"), mean(loaded, "serve_cpu")
    generator_cpu = mean(loaded, "load_cpu")
    print(f"serve CPU: quiet {quiet_cpu:.2f} s, loaded {loaded_cpu:.2f} s (ratio {loaded_cpu / quiet_cpu:.2f}); "
          + (f"the load cost it {(loaded_cpu - quiet_cpu) / mean(loaded, 'requests') * 1000:.2f} ms of CPU per API request "
             f"({'SSE included' if args.mix == 'all' else 'no SSE'}; " if args.mix != "sse" else "the SSE clients alone cost it (")
          + f"per second of the loaded makespan: "
          f"{(loaded_cpu - quiet_cpu) / mean(loaded, 'makespan'):.2f} s); the load generator used {generator_cpu:.2f} s; "
          f"{'a connection per request' if args.connection_per_request else f'{CONNECTIONS} kept-alive connections'}, "
          f"{'loadgen.c' if args.generator == 'c' else 'the Python generator'}")
    # The CPU floor. Were the cores saturated by the runs, the load's CPU (serve's extra and the
    # generator's, on the same cores) would come out of them: taking r of C cores leaves the runs
    # C - r, so they take C / (C - r) as long. r is measured from the submit to the last run's end.
    cores = os.cpu_count()
    window_added = max(mean(loaded, "window_serve_cpu") - mean(quiet, "window_serve_cpu"), 0)
    window_load = mean(loaded, "window_load_cpu")
    taken = (window_added + window_load) / mean(loaded, "window")
    print(f"CPU floor: while the runs ran, the load took {taken:.2f} of {cores} cores ({window_added:.2f} s serve CPU "
          f"above quiet + {window_load:.2f} s generator in {mean(loaded, 'window'):.2f} s); on saturated cores that "
          f"alone means a slowdown of {cores / max(cores - taken, 0.01):.3f}; the cores were "
          f"{mean(quiet, 'machine_busy') * 100:.0f} % busy quiet and {mean(loaded, 'machine_busy') * 100:.0f} % loaded "
          f"(the whole machine, other processes included)")


if __name__ == "__main__":
    main()
