#!/usr/bin/env python3
"""A delivery of many folders into a recursive watch folder: what `serve --watch` spends
finding the files, build against build, side by side in one run.

Usage:
  bench/scale/watch_delivery.py --bin DIR [--also NAME=DIR ...] [--folders 200] [--files 50]
                                [--existing 20000] [--gap 0.1] [--repeat 3]

Each round starts `serve --watch` of a folder (one run per file, `after: keep`), then
moves FOLDERS folders of FILES small files each into it (made beforehand in a staging folder
on the same file system, one `rename` each, GAP seconds apart), as a vendor's delivery or a render
farm's output lands, into a folder already holding EXISTING files handed over before (a
watch folder with `after: keep` fills up over the weeks). The runs' one step sleeps and `--max-parallel 1` runs one at a time, so
what `serve` spends is the watch's own work (scans, settling, the hand-overs' transactions),
not the runs'. Reported per build: the time from the first folder to the last hand-off, and
`serve`'s CPU (user + system, /proc/PID/stat) over that time; medians of the rounds.

What it compares: every folder inotify reports new used to start a scan of the whole watched
tree (a delivery of N folders cost N scans of a growing tree); now each new folder is scanned
alone. There is no outside peer for this: the builds are the comparison.
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def handed_over(state):
    path = os.path.join(state, "state.sqlite")
    if not os.path.exists(path):
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM watch_handoffs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def workflow(path, watched):
    with open(path, "w") as f:
        f.write(f"""version: 1
name: delivery
inputs:
  source: {{ type: string, required: true }}
on:
  watch:
    path: {watched}
    recursive: true
    settle: 500ms
    inputs: {{ source: "${{{{ file.path }}}}" }}
steps:
  hold:
    uses: exec
    with:
      command: ["sleep", "3600"]
""")


def round_once(binary, work, folders, files, existing, gap):
    root = tempfile.mkdtemp(dir=work)
    watched, staging, state = (os.path.join(root, d) for d in ("in", "staging", "state"))
    os.makedirs(watched)
    for n in range(existing):
        if n % 1000 == 0:
            os.makedirs(os.path.join(watched, f"archive/{n // 1000:03d}"))
        with open(os.path.join(watched, f"archive/{n // 1000:03d}/old_{n:06d}.dpx"), "wb") as f:
            f.write(b"o")
    for n in range(folders):
        folder = os.path.join(staging, f"shot{n:04d}")
        os.makedirs(folder)
        for i in range(files):
            with open(os.path.join(folder, f"frame_{i:05d}.dpx"), "wb") as f:
                f.write(b"x" * 512)
    flow = os.path.join(root, "delivery.yaml")
    workflow(flow, watched)
    serve = subprocess.Popen([os.path.join(binary, "orchestrate"), "serve", "--watch", flow, "--state", state,
                              "--max-parallel", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)  # the first scan
        deadline = time.monotonic() + 600
        while handed_over(state) < existing and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        cpu0, t0 = cpu_seconds(serve.pid), time.monotonic()
        for n in range(folders):
            os.rename(os.path.join(staging, f"shot{n:04d}"), os.path.join(watched, f"shot{n:04d}"))
            time.sleep(gap)
        total = existing + folders * files
        deadline = t0 + 600
        while handed_over(state) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(serve.pid) - cpu0
        done = handed_over(state)
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
        shutil.rmtree(root, ignore_errors=True)
    if done < total:
        sys.exit(f"{binary}: only {done} of {total} files handed over in 600 s")
    return elapsed, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder holding orchestrate (release build)")
    ap.add_argument("--also", action="append", default=[], help="NAME=DIR: another build, in the same rotation")
    ap.add_argument("--folders", type=int, default=200)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--existing", type=int, default=20000)
    ap.add_argument("--gap", type=float, default=0.1, help="seconds between two folders moved in")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="where the trees go (default: a temporary folder)")
    args = ap.parse_args()
    builds = [("this", args.bin)] + [tuple(a.split("=", 1)) for a in args.also]
    work = args.work or tempfile.mkdtemp(prefix="watch-delivery-")
    os.makedirs(work, exist_ok=True)
    results = {name: [] for name, _ in builds}
    print(f"{args.folders} folders x {args.files} files into {args.existing} handed over before, one every {args.gap} s, {args.repeat} rounds, load {os.getloadavg()[0]:.1f}")
    for r in range(args.repeat):
        for name, binary in builds:
            elapsed, cpu = round_once(binary, work, args.folders, args.files, args.existing, args.gap)
            results[name].append((elapsed, cpu))
            print(f"  round {r + 1} {name}: {elapsed:.2f} s to the last hand-off, serve CPU {cpu:.2f} s", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    print("| build | to the last hand-off | serve CPU |")
    print("|---|---|---|")
    for name, _ in builds:
        times = [e for e, _ in results[name]]
        cpus = [c for _, c in results[name]]
        print(f"| {name} | {statistics.median(times):.2f} s ({min(times):.2f}–{max(times):.2f}) | "
              f"{statistics.median(cpus):.2f} s ({min(cpus):.2f}–{max(cpus):.2f}) |")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
