#!/usr/bin/env python3
"""Bytes sent again after kill -9 (issue 28): one multipart `s3.upload` of 1 GiB killed at several
random moments in a row, `orchestrate resume` after each, then checked.

    orchestrate --> tools/faultproxy.py (no faults: it counts the bytes sent) --> moto_server

The kills land at random points of progress (a random count of parts the server has confirmed,
plus a random 0-1 s). Counted at the server (moto's request log: each `PUT ?partNumber=N`
answered 200) and at the proxy (bytes the client sent, headers included). Reported per kill:
the parts the server confirmed before it, the bytes sent since the kill before that, and the
bytes wasted (sent but not part of a part the server kept: the parts in flight, cut by the kill,
plus the requests' headers); the goal is at most `concurrency` parts' worth per kill. Checked
at the end: no part received twice, the object byte-identical (aws s3api get-object, cmp),
no multipart upload left open.

    swift build -c release
    python3 bench/s3/kill.py [--bin .build/release] [--mib 1024] [--kills 5] [--seed N]
                             [--part-mib 8] [--concurrency 4]
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import BUCKET, client_env, start_server, venv_bin  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT  # noqa: E402

PART_LINE = re.compile(r'"PUT /[^ ]*\?[^ ]*partNumber=(\d+)[^ ]* HTTP/[\d.]+" 200 ')


def parts_received(log):
    """Part number → how many times the server answered its PUT with 200."""
    counts = {}
    with open(log) as f:
        for line in f:
            m = PART_LINE.search(line)
            if m:
                counts[int(m[1])] = counts.get(int(m[1]), 0) + 1
    return counts


def start_proxy(target):
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools/faultproxy.py"), "--target", target],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    words = proc.stdout.readline().split()
    return proc, f"http://{words[3]}", words[5]


def proxy_bytes_up(control):
    with urllib.request.urlopen(f"{control}/stats") as r:
        return json.loads(r.read())["bytes_up"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--part-mib", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--work", default=None)
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    bindir = venv_bin()
    orch = os.path.join(os.path.abspath(a.bin), "orchestrate")
    work = a.work or tempfile.mkdtemp(prefix="orchestrate-s3-kill-")
    os.makedirs(work, exist_ok=True)
    server, endpoint = start_server("moto", bindir, work)
    proxy, proxied, control = start_proxy(endpoint.removeprefix("http://"))
    env = client_env(endpoint)
    log = f"{work}/server.log"
    size = a.mib << 20
    part = a.part_mib << 20
    count = (size + part - 1) // part
    state = f"{work}/state"
    src = f"{work}/big.bin"
    try:
        subprocess.run(f"head -c {size} /dev/urandom > {src}", shell=True, check=True)
        wf = f"{work}/wf.yaml"
        with open(wf, "w") as f:
            f.write(f"""version: 1
name: s3-kill
steps:
  up:
    uses: s3.upload
    with: {{ endpoint: "{proxied}", bucket: {BUCKET}, key: big.bin, source: "{src}",
            part_size: {part}, concurrency: {a.concurrency} }}
""")
        targets = sorted(rng.sample(range(1, count), min(a.kills, count - 1)))
        rows = []
        child = subprocess.Popen([orch, "run", wf, "--state", state], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run_id = None
        before_bytes, before_parts = 0, {}
        for target in targets:
            while sum(parts_received(log).values()) < target and child.poll() is None:
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 1.0))
            if child.poll() is not None:
                print(f"the upload finished before the kill at part {target}", file=sys.stderr)
                break
            child.send_signal(signal.SIGKILL)
            child.wait()
            time.sleep(0.3)  # what was on the wire reaches the proxy's counter
            sent = proxy_bytes_up(control)
            received = parts_received(log)
            new_parts = sum(received.values()) - sum(before_parts.values())
            kept_bytes = sum(min(part, size - (n - 1) * part) * (c - before_parts.get(n, 0)) for n, c in received.items())
            rows.append((len(received), sent - before_bytes, sent - before_bytes - kept_bytes, new_parts))
            before_bytes, before_parts = sent, received
            if run_id is None:
                listed = subprocess.run([orch, "list", "--json", "--state", state], capture_output=True, text=True, env=env).stdout
                run_id = json.loads(listed.splitlines()[-1])["id"]
            child = subprocess.Popen([orch, "resume", run_id, "--state", state], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        status = child.wait()
        if status != 0:
            raise SystemExit(f"the last resume failed ({status})")
        sent = proxy_bytes_up(control)
        received = parts_received(log)
        kept_bytes = sum(min(part, size - (n - 1) * part) * (c - before_parts.get(n, 0)) for n, c in received.items())
        rows.append((len(received), sent - before_bytes, sent - before_bytes - kept_bytes, None))
        twice = {n: c for n, c in received.items() if c > 1}
        back = f"{work}/back.bin"
        got = subprocess.run([f"{bindir}/aws", "--endpoint-url", endpoint, "s3api", "get-object", "--bucket", BUCKET,
                              "--key", "big.bin", back], env=env, capture_output=True)
        identical = got.returncode == 0 and subprocess.run(["cmp", "-s", src, back]).returncode == 0
        uploads = json.loads(subprocess.run([f"{bindir}/aws", "--endpoint-url", endpoint, "s3api", "list-multipart-uploads",
                                             "--bucket", BUCKET, "--output", "json"], env=env, capture_output=True,
                                            text=True).stdout or "{}").get("Uploads", [])
    finally:
        proxy.kill()
        server.terminate()
        server.wait()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    mib = 1 << 20
    print(f"\nkill -9 of a {a.mib} MiB s3.upload ({count} parts of {a.part_mib} MiB, {a.concurrency} in flight), "
          f"{len(rows) - 1} kills, seed {seed}, moto_server behind a counting proxy\n")
    print("| segment | parts on the server at its end | bytes sent | wasted (sent, not in a kept part) | wasted / part size |")
    print("|---|---|---|---|---|")
    for i, (parts, sent_, wasted, _) in enumerate(rows):
        name = f"until kill {i + 1}" if i < len(rows) - 1 else "last resume, to the end"
        print(f"| {name} | {parts} | {sent_ / mib:,.1f} MiB | {wasted / mib:,.2f} MiB | {wasted / part:.2f} |")
    total_wasted = sum(r[2] for r in rows)
    worst = max(r[2] for r in rows[:-1]) if len(rows) > 1 else 0
    print(f"\nparts received twice: {len(twice)} {twice or ''}; total sent {sum(r[1] for r in rows) / mib:,.1f} MiB for "
          f"{a.mib} MiB (wasted {total_wasted / mib:,.2f} MiB; worst segment {worst / part:.2f} parts, goal ≤ {a.concurrency}); "
          f"object byte-identical: {identical}; multipart uploads left open: {len(uploads)}")
    if twice or not identical or uploads or worst > a.concurrency * part:
        sys.exit(1)


if __name__ == "__main__":
    main()
