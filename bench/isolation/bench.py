#!/usr/bin/env python3
"""Plugin isolation overhead (issue 6): the same work in-process and with `isolation: process`
(one orchestrate-plugin-runner child per attempt), side by side:

  * no-op steps per second: a fan-out of N no-op C plugin steps;
  * a 1 GiB fs.copy (the Swift fs plugin), wall time.

    swift build -c release && python3 bench/isolation/bench.py [--steps 2000] [--mib 1024]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, build_test_plugin  # noqa: E402


def timed(cmd, env):
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    args = parser.parse_args()
    orchestrate = os.path.join(args.bin, "orchestrate")
    work = tempfile.mkdtemp(prefix="orchestrate-isolation-bench-")
    try:
        plugins = os.path.join(work, "plugins")
        os.makedirs(plugins)
        build_test_plugin(plugins)
        fan = os.path.join(work, "fan.yaml")
        with open(fan, "w") as f:
            f.write('version: 1\nname: fan\ninputs:\n  items: { type: array, required: true }\n'
                    'steps:\n  wide: { uses: test.noop, for_each: "${{ inputs.items }}" }\n')
        items = os.path.join(work, "items.json")
        with open(items, "w") as f:
            json.dump({"items": list(range(args.steps))}, f)
        source = os.path.join(work, "big.bin")
        with open(source, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(args.mib):
                f.write(block)
        copy = os.path.join(work, "copy.yaml")
        with open(copy, "w") as f:
            f.write("version: 1\nname: copy\ninputs:\n  dest: { type: string, required: true }\n"
                    f"steps:\n  copy: {{ uses: fs.copy, with: {{ source: \"{source}\", destination: \"${{{{ inputs.dest }}}}\", overwrite: true }} }}\n")
        results = {}
        for mode in ("in-process", "process"):
            env = dict(os.environ, ORCHESTRATE_ISOLATION=mode)
            base = ["--plugin-path", plugins]
            t = timed([orchestrate, "run", fan, "--inputs", items, "--state", os.path.join(work, f"s-fan-{mode}")] + base, env)
            results[f"noop_steps_per_s_{mode}"] = round(args.steps / t)
            dest = os.path.join(work, f"copy-{mode}.bin")
            t = timed([orchestrate, "run", copy, "--input", f"dest={dest}", "--state", os.path.join(work, f"s-copy-{mode}")] + base, env)
            results[f"copy_{args.mib}MiB_s_{mode}"] = round(t, 2)
            os.remove(dest)
        results["noop_overhead_ratio"] = round(results["noop_steps_per_s_in-process"] / results["noop_steps_per_s_process"], 1)
        results["copy_time_ratio"] = round(results[f"copy_{args.mib}MiB_s_process"] / results[f"copy_{args.mib}MiB_s_in-process"], 3)
        print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
