#!/usr/bin/env python3
"""Engine overhead benchmark (issue 2).

Runs, side by side in one go on this machine:
  * orchestrate executing 10,000 no-op steps (a C plugin step that returns at once) with the
    durable SQLite store: one long chain, and one wide fan-out (for_each);
  * raw SQLite: write transactions per second in WAL mode with the store's settings;
  * `orchestrate validate` start-up time and peak RSS, and the peak RSS of the runs.

Reports, for each of `--repeat` rounds (each round: chain, fan-out, raw SQLite, back to back),
steps/s and the ratio steps/s ÷ that round's raw commits/s; then the median and the spread
(lowest–highest) of each over the rounds, and the best (as before). What makes the ratio
move between machines is measured beside it, per step of each run: CPU (user + system) over
wall time, voluntary and involuntary context switches (the hand-overs between the scheduling
loop and the attempt threads that did sleep; the times the CPU was taken away), and the costs of
the machine itself: a thread hand-over round trip (`handoff.c`: two threads passing a token
through a mutex and condition variable, what the engine's hand-over costs when it sleeps), and
an fsync of a 4 KiB write on the state's file system (which `synchronous=NORMAL` in WAL mode
does not pay per commit, only at checkpoints). Usage (from the package root):

    swift build -c release && python3 bench/engine/bench.py [--steps 10000] [--repeat 5] [--cpus 0]

`--cpus LIST` pins every measured process to those CPUs (taskset), e.g. `--cpus 0` for one core.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, build_test_plugin  # noqa: E402


def sh(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def peak_rss_mib(args):
    """Peak RSS of one command, measured by a fresh python so earlier children don't count."""
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = sh([sys.executable, "-c", code] + args).stdout.strip()
    return int(out) / 1024.0


def spread(values, digits=0):
    """Median and lowest–highest of several rounds."""
    r = (lambda v: round(v, digits)) if digits else round
    return {"median": r(statistics.median(values)), "low": r(min(values)), "high": r(max(values))}


def child_usage(before, elapsed, steps):
    """What the children that ended since `before` (one run) used, per step: CPU over wall time,
    context switches."""
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (now.ru_utime - before.ru_utime) + (now.ru_stime - before.ru_stime)
    return {"cpu_over_wall": cpu / elapsed, "cpu_us": cpu / steps * 1e6,
            "voluntary_switches": (now.ru_nvcsw - before.ru_nvcsw) / steps,
            "involuntary_switches": (now.ru_nivcsw - before.ru_nivcsw) / steps}


def median_usage(samples):
    return {k: round(statistics.median(s[k] for s in samples), 2) for k in samples[0]}


def fsync_latency_us(directory, n=200):
    """Median time of a 4 KiB write + fsync on the file system of `directory`."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for i in range(n):
            start = time.perf_counter()
            os.pwrite(fd, b"x" * 4096, (i % 16) * 4096)
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    return round(statistics.median(times) * 1e6, 1)


def chain_workflow(n):
    lines = ["version: 1", "name: bench-chain", "steps:", "  s0: { uses: test.noop }"]
    lines += [f"  s{i}: {{ uses: test.noop, needs: [s{i-1}] }}" for i in range(1, n)]
    return "\n".join(lines) + "\n"


def fanout_workflow():
    return """version: 1
name: bench-fanout
inputs:
  items: { type: array, required: true }
steps:
  wide:
    uses: test.noop
    for_each: "${{ inputs.items }}"
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpus", help="pin the measured processes to these CPUs (taskset -c LIST)")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    orchestrate = os.path.join(args.bin, "orchestrate")
    if not os.path.exists(orchestrate):
        sys.exit(f"build first: swift build -c release (no {orchestrate})")
    work = tempfile.mkdtemp(prefix="orchestrate-bench-")
    try:
        plugins = os.path.join(work, "plugins")
        os.makedirs(plugins)
        build_test_plugin(plugins)
        baseline_bin = os.path.join(work, "sqlite_commits")
        sh(["cc", "-O2", "-o", baseline_bin, os.path.join(ROOT, "bench/engine/sqlite_commits.c"), "-lsqlite3"])

        chain = os.path.join(work, "chain.yaml")
        with open(chain, "w") as f:
            f.write(chain_workflow(args.steps))
        fanout = os.path.join(work, "fanout.yaml")
        with open(fanout, "w") as f:
            f.write(fanout_workflow())
        inputs = os.path.join(work, "inputs.json")
        with open(inputs, "w") as f:
            json.dump({"items": list(range(args.steps))}, f)

        handoff_bin = os.path.join(work, "handoff")
        sh(["cc", "-O2", "-pthread", "-o", handoff_bin, os.path.join(ROOT, "bench/engine/handoff.c")])
        pin = ["taskset", "-c", args.cpus] if args.cpus else []

        results = {"chain": [], "fanout": [], "sqlite": []}
        usage = {"chain": [], "fanout": []}
        rss = {}
        for r in range(args.repeat):
            for name, extra in (("chain", [chain]), ("fanout", [fanout, "--inputs", inputs])):
                state = os.path.join(work, f"state-{name}-{r}")
                cmd = [orchestrate, "run"] + extra + ["--state", state, "--plugin-path", plugins]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                proc = subprocess.Popen(pin + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                out, err = proc.communicate()
                elapsed = time.monotonic() - start
                if proc.returncode != 0:
                    sys.exit(f"{name} run failed:\n{out[-2000:]}\n{err[-2000:]}")
                results[name].append(args.steps / elapsed)
                usage[name].append(child_usage(before, elapsed, args.steps))
                if r == 0:
                    rss[name] = peak_rss_mib(cmd[:-4] + ["--state", state + "-rss", "--plugin-path", plugins])
            base_dir = os.path.join(work, f"baseline-{r}")
            os.makedirs(base_dir)
            results["sqlite"].append(float(sh(pin + [baseline_bin, base_dir, str(args.steps)]).stdout.strip()))
            print(f"round {r + 1}: chain {results['chain'][-1]:,.0f} ({results['chain'][-1] / results['sqlite'][-1]:.3f} x), "
                  f"fan-out {results['fanout'][-1]:,.0f} ({results['fanout'][-1] / results['sqlite'][-1]:.3f} x), "
                  f"raw SQLite {results['sqlite'][-1]:,.0f} commits/s; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        handoffs = [float(sh(pin + [handoff_bin, "20000"]).stdout.strip()) for _ in range(3)]
        fsync_us = fsync_latency_us(work)

        # validate: start-up time (best of 10) and peak RSS, on a real example workflow.
        example = os.path.join(ROOT, "workflows/local-upload.yaml")
        validate = [orchestrate, "validate", example, "--plugin-path", plugins]
        times = []
        for _ in range(10):
            start = time.monotonic()
            subprocess.run(validate, capture_output=True)
            times.append(time.monotonic() - start)
        validate_rss = peak_rss_mib(validate)

        best = {k: max(v) for k, v in results.items()}
        ratios = {k: [a / b for a, b in zip(results[k], results["sqlite"])] for k in ("chain", "fanout")}
        report = {
            "steps": args.steps,
            "rounds": args.repeat,
            "cpus": args.cpus or "all",
            "load_before_after": [load_before, os.getloadavg()[0]],
            "chain_steps_per_s": spread(results["chain"]),
            "fanout_steps_per_s": spread(results["fanout"]),
            "sqlite_wal_commits_per_s": spread(results["sqlite"]),
            "chain_ratio_to_sqlite": spread(ratios["chain"], 3),
            "fanout_ratio_to_sqlite": spread(ratios["fanout"], 3),
            "best_chain_steps_per_s": round(best["chain"]),
            "best_fanout_steps_per_s": round(best["fanout"]),
            "best_sqlite_wal_commits_per_s": round(best["sqlite"]),
            "per_step_chain": median_usage(usage["chain"]),
            "per_step_fanout": median_usage(usage["fanout"]),
            "thread_handoff_round_trip_us": round(1e6 / statistics.median(handoffs), 1),
            "fsync_4k_us": fsync_us,
            "chain_peak_rss_mib": round(rss["chain"], 1),
            "fanout_peak_rss_mib": round(rss["fanout"], 1),
            "validate_startup_ms": round(min(times) * 1000, 1),
            "validate_peak_rss_mib": round(validate_rss, 1),
            "sync": os.environ.get("ORCHESTRATE_SYNC", "normal"),
        }
        print(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
