#!/usr/bin/env python3
"""The long crash campaign: tools/crash_campaign.py with 500 SIGKILLs (by default) shared out over
the Vimeo streaming flow, the tus flow, an SFTP tree upload, a persistent SFTP session and a chain
of exec steps, then its figures as a Markdown table (bench/RESULTS.md shows one run).

    bench/crash/bench.py [--kills 500] [--seed N] [--sftp-big-mib 72] [--bin-dir DIR] [crash_campaign.py options]

Fails (exit 1) if the campaign found any violation; the seed repeats it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT  # noqa: E402


def mib(n):
    return f"{n / (1 << 20):,.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=500)
    parser.add_argument("--sftp-big-mib", type=int, default=72,
                        help="one file this big in each SFTP tree (parallel ranges, re-sent chunks)")
    parser.add_argument("--bin-dir", default=os.environ.get("ORCHESTRATE_BIN_DIR") or os.path.join(ROOT, ".build/release"))
    args, extra = parser.parse_known_args()
    report_path = tempfile.mktemp(prefix="crash-report-", suffix=".json")
    command = [sys.executable, os.path.join(ROOT, "tools/crash_campaign.py"), "--bin-dir", args.bin_dir,
               "--seed", str(args.seed), "--kills", str(args.kills), "--sftp-big-mib", str(args.sftp_big_mib),
               "--report", report_path] + extra
    status = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
    if not os.path.exists(report_path):
        sys.exit(f"the campaign did not finish (status {status})")
    report = json.load(open(report_path))
    os.unlink(report_path)
    print(f"crash campaign, seed {report['seed']}, {report['total']['kills']} kills "
          f"({os.path.basename(args.bin_dir.rstrip('/'))} build)\n")
    print("| flow | kills survived | runs | resumes | files verified | payload MiB | re-sent MiB | re-sent per resume | duplicate creates absorbed | paths added while dead | time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, f in report["scenarios"].items():
        print(f"| {name} | {f['kills']} | {f['runs']} | {f['resumes']} | {f['files_verified']} | {mib(f['payload_bytes'])} "
              f"| {mib(f['resent_bytes'])} | {f['resent_bytes_per_resume']:,} B | {f['duplicate_creates_absorbed']} "
              f"| {f['items_added_while_dead']} | {f['seconds']:.0f} s |")
    t = report["total"]
    print(f"| **total** | {t['kills']} | {t['runs']} | {t['resumes']} | {t['files_verified']} | {mib(t['payload_bytes'])} "
          f"| {mib(t['resent_bytes'])} | {t['resent_bytes_per_resume']:,} B | | | |")
    print(f"\nviolations: {len(report['violations'])}")
    for v in report["violations"]:
        print("  " + v)
    sys.exit(1 if report["violations"] or status != 0 else 0)


if __name__ == "__main__":
    main()
