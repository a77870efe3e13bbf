#!/usr/bin/env python3
"""Bandwidth timetable benchmark (issue 14, `--max-rate` in rclone's `--bwlimit` form): one
`orchestrate run` downloads from nginx over loopback under a timetable whose cap switches at a
wall-clock minute boundary while the transfer runs, and the achieved rate on each side of the
boundary is compared with each cap.

The timetable is `HH:MM,BEFORE HH:MM,AFTER` with the first entry at the current minute and the
second at the next minute boundary at least --lead seconds away, so the switch happens on the
running transfer, as it would at 08:00 in `"08:00,512K 23:00,off"`. The download's progress is
read from outside, as the size of the files in its destination folder every 50 ms. The achieved
rate is measured over [start + 2 s, boundary - 1 s] and [boundary + 2 s, boundary + --after - 1 s]
(the margins leave out the start-up and the few hundred milliseconds around the switch in which
the bucket settles the old rate's burst). No reference tool here switches caps mid-transfer over
HTTP (rclone would; it is not installed), so the reference is the cap itself: 1.00 = exactly it.

    swift build -c release
    python3 bench/timetable/bench.py --bin .build/release [--before 2M] [--after-rate 8M] [--lead 15] [--after 10]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, http_bench_module, parse_rate  # noqa: E402

http_bench = http_bench_module()


def folder_size(path):
    total = 0
    for name in os.listdir(path):
        try:
            total += os.stat(os.path.join(path, name)).st_size
        except FileNotFoundError:
            pass  # renamed into place between listdir and stat
    return total


def rate_between(samples, start, end):
    """Bytes per second between two instants, from (time, bytes) samples (nearest samples)."""
    first = min(samples, key=lambda s: abs(s[0] - start))
    last = min(samples, key=lambda s: abs(s[0] - end))
    return (last[1] - first[1]) / (last[0] - first[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--before", default="2M", help="the cap until the boundary")
    p.add_argument("--after-rate", default="8M", help="the cap from the boundary")
    p.add_argument("--lead", type=float, default=15, help="at least this many seconds before the boundary")
    p.add_argument("--after", type=float, default=10, help="seconds of transfer after the boundary")
    a = p.parse_args()
    orch = os.path.join(os.path.abspath(a.bin), "orchestrate")
    before, after = parse_rate(a.before), parse_rate(a.after_rate)
    work = tempfile.mkdtemp(prefix="orchestrate-timetable-bench-")
    nginx, base = http_bench.start_nginx(work)
    try:
        # Enough bytes for the longest window (a sparse file: made at once, and the bytes do not
        # matter to a rate); the run is stopped once the window is measured.
        size = int((a.lead + 65) * before + (a.after + 5) * after)
        with open(f"{work}/nginx/www/big.bin", "wb") as f:
            f.truncate(size)
        now = time.time()
        boundary = (int(now + a.lead) // 60 + 1) * 60
        start_minute = time.strftime("%H:%M", time.localtime(now))
        boundary_minute = time.strftime("%H:%M", time.localtime(boundary))
        dest_dir = f"{work}/dest"
        os.makedirs(dest_dir)
        timetable = f"{start_minute},{a.before} {boundary_minute},{a.after_rate}"
        print(f"timetable \"{timetable}\": boundary in {boundary - time.time():.1f} s, {size >> 20} MiB")
        started = time.time()
        proc = subprocess.Popen([orch, "run", os.path.join(ROOT, "workflows/http-download.yaml"), "--state", f"{work}/state",
                                 "--input", f"url={base}/files/big.bin", "--input", f"destination={dest_dir}/big.bin",
                                 "--max-rate", timetable], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples = []
        while time.time() < boundary + a.after and proc.poll() is None:
            samples.append((time.time(), folder_size(dest_dir)))
            time.sleep(0.05)
        finished_early = proc.poll() is not None
        proc.terminate()
        proc.wait()
        if finished_early:
            sys.exit(f"the download ended before the window did: {proc.stderr.read().decode()}")
        got_before = rate_between(samples, started + 2, boundary - 1)
        got_after = rate_between(samples, boundary + 2, boundary + a.after - 1)
        print(f"{'window':>16} {'cap':>8} {'achieved':>12} {'ratio':>6}")
        print(f"{'before boundary':>16} {a.before:>8} {got_before / (1 << 20):>8.2f} MiB/s {got_before / before:>6.3f}")
        print(f"{'after boundary':>16} {a.after_rate:>8} {got_after / (1 << 20):>8.2f} MiB/s {got_after / after:>6.3f}")
        ok = abs(got_before / before - 1) < 0.1 and abs(got_after / after - 1) < 0.1
        print("both within 10 % of their cap" if ok else "NOT within 10 % of the caps")
        sys.exit(0 if ok else 1)
    finally:
        nginx.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
