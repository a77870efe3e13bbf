#!/usr/bin/env python3
"""Engine overhead benchmark (issue 2).

Runs, side by side in one go on this machine:
  * orchestrate executing 10,000 no-op steps (a C plugin step that returns at once) with the
    durable SQLite store: one long chain, and one wide fan-out (for_each);
  * raw SQLite: write transactions per second in WAL mode with the store's settings;
  * `orchestrate validate` start-up time and peak RSS, and the peak RSS of the runs.

Reports steps/s and the ratio steps/s ÷ raw commits/s. Usage (from the package root):

    swift build -c release && python3 bench/engine/bench.py [--steps 10000] [--repeat 3]
"""
import argparse
import json
import os
import resource
import shutil
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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()

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

        results = {"chain": [], "fanout": [], "sqlite": []}
        rss = {}
        for r in range(args.repeat):
            for name, extra in (("chain", [chain]), ("fanout", [fanout, "--inputs", inputs])):
                state = os.path.join(work, f"state-{name}-{r}")
                cmd = [orchestrate, "run"] + extra + ["--state", state, "--plugin-path", plugins]
                start = time.monotonic()
                proc = subprocess.run(cmd, capture_output=True, text=True)
                elapsed = time.monotonic() - start
                if proc.returncode != 0:
                    sys.exit(f"{name} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
                results[name].append(args.steps / elapsed)
                if r == 0:
                    rss[name] = peak_rss_mib(cmd[:-4] + ["--state", state + "-rss", "--plugin-path", plugins])
            base_dir = os.path.join(work, f"baseline-{r}")
            os.makedirs(base_dir)
            results["sqlite"].append(float(sh([baseline_bin, base_dir, str(args.steps)]).stdout.strip()))

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
        report = {
            "steps": args.steps,
            "chain_steps_per_s": round(best["chain"]),
            "fanout_steps_per_s": round(best["fanout"]),
            "sqlite_wal_commits_per_s": round(best["sqlite"]),
            "chain_ratio_to_sqlite": round(best["chain"] / best["sqlite"], 3),
            "fanout_ratio_to_sqlite": round(best["fanout"] / best["sqlite"], 3),
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
