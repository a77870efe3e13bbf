#!/usr/bin/env python3
"""Queue benchmark (issue 5).

N runs of a 3-step workflow (no-op C plugin steps) are submitted at once (`submit --batch`),
then one `orchestrate serve --max-parallel 32` executes them. Reports runs per second,
p50/p99 submit-to-start latency (run.added → run.started in the journal), the peak RSS of
serve (VmHWM), and the time `submit` took. Run for 1,000 and 10,000 queued runs:

    swift build -c release && python3 bench/queue/bench.py [--runs 1000 10000] [--parallel 32]
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
from benchlib import ROOT, build_test_plugin  # noqa: E402

WORKFLOW = """version: 1
name: bench-queue
steps:
  a: { uses: test.noop }
  b: { uses: test.noop, needs: [a] }
  c: { uses: test.noop, needs: [b] }
"""


def percentile(values, p):
    values = sorted(values)
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


def one(orchestrate, plugins, work, runs, parallel):
    state = os.path.join(work, f"state-{runs}")
    wf = os.path.join(work, "queue.yaml")
    with open(wf, "w") as f:
        f.write(WORKFLOW)
    batch = os.path.join(work, f"batch-{runs}.jsonl")
    with open(batch, "w") as f:
        f.write("{}\n" * runs)
    base = ["--state", state, "--plugin-path", plugins]
    start = time.monotonic()
    subprocess.run([orchestrate, "submit", wf, "--batch", batch] + base, check=True, capture_output=True)
    submit_s = time.monotonic() - start

    db = os.path.join(state, "state.sqlite")
    serve = subprocess.Popen([orchestrate, "serve", "--max-parallel", str(parallel)] + base,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serve_start = time.monotonic()
    rss = 0.0
    conn = sqlite3.connect(db, timeout=30)
    while True:
        time.sleep(0.2)
        rss = max(rss, peak_rss_mib(serve.pid))
        done = conn.execute("SELECT COUNT(*) FROM runs WHERE status IN ('succeeded','failed','cancelled')").fetchone()[0]
        if done >= runs:
            break
        if time.monotonic() - serve_start > 1800:
            sys.exit("timed out")
    elapsed = time.monotonic() - serve_start
    rss = max(rss, peak_rss_mib(serve.pid))
    serve.send_signal(signal.SIGTERM)
    serve.wait()
    failed = conn.execute("SELECT COUNT(*) FROM runs WHERE status != 'succeeded'").fetchone()[0]
    rows = conn.execute("""
        SELECT a.time, s.time FROM events a JOIN events s ON a.run_id = s.run_id
        WHERE a.type = 'run.added' AND s.type = 'run.started'""").fetchall()
    latencies = [started - added for added, started in rows]
    first_start = conn.execute("SELECT MIN(time) FROM events WHERE type = 'run.started'").fetchone()[0]
    last_finish = conn.execute("SELECT MAX(time) FROM events WHERE type = 'run.finished'").fetchone()[0]
    conn.close()
    return {
        "runs": runs,
        "max_parallel": parallel,
        "failed": failed,
        "submit_s": round(submit_s, 2),
        "runs_per_s": round(runs / (last_finish - first_start), 1),
        "wall_s_serve": round(elapsed, 2),
        "submit_to_start_p50_s": round(percentile(latencies, 50), 3),
        "submit_to_start_p99_s": round(percentile(latencies, 99), 3),
        "serve_peak_rss_mib": round(rss, 1),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--parallel", type=int, default=32)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()
    orchestrate = os.path.join(args.bin, "orchestrate")
    if not os.path.exists(orchestrate):
        sys.exit(f"build first: swift build -c release (no {orchestrate})")
    work = tempfile.mkdtemp(prefix="orchestrate-queue-bench-")
    try:
        plugins = os.path.join(work, "plugins")
        os.makedirs(plugins)
        build_test_plugin(plugins)
        print(json.dumps([one(orchestrate, plugins, work, n, args.parallel) for n in args.runs], indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
