#!/usr/bin/env python3
"""HTTP fault campaign (issue 6), the long version of Tests/OrchestrateHTTPPluginTests/FaultCampaignTests.

Rounds of three transfers, each through tools/faultproxy.py with its own seed (round N uses
seed BASE+N): `http.download` from nginx, and `http.upload` to the sandbox with the Vimeo
streaming and the tus protocols. The proxy cuts (FIN or RST) and stalls connections at random
offsets in the direction of the data (a one-minute stall can only be ended by the low-speed
abort). Every transfer must end byte-identical (sha256 against the source) or fail with a clear
error after its attempts, within its timeout; a failed download must leave no destination file.

    python3 bench/faults/bench.py [--bin .build/release] [--rounds 10] [--mib 256] [--seed 1000]

Prints a table: transfers, verified, failed (and their errors), faults injected by kind,
retries, bytes the server received again after cuts, wall time.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, free_port  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "bench/http"))
from bench import start_nginx, start_sandbox, api  # noqa: E402


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class Proxy:
    def __init__(self, target, config):
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools/faultproxy.py"), "--target", target,
                                      "--config", json.dumps(config)], stdout=subprocess.PIPE, text=True)
        words = self.proc.stdout.readline().split()
        self.address, self.control = words[3], words[5]

    def stats(self):
        with urllib.request.urlopen(self.control + "/stats") as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def run(orch, state, workflow_path, step):
    """Runs a one-step workflow; returns (ok, error, retries, events)."""
    with open(workflow_path, "w") as f:
        f.write("version: 1\nname: faults\nsteps:\n  t:\n" + step)
    out = subprocess.run([orch, "run", workflow_path, "--state", state, "--json"], capture_output=True, text=True)
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    retries = sum(1 for e in events if e.get("type") == "step.retrying")
    failed = [e for e in events if e.get("type") == "step.failed"]
    error = failed[-1]["data"].get("code", "") + ": " + failed[-1]["data"].get("error", "") if failed else ""
    return out.returncode == 0, error, retries


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--max-faults", type=int, default=8, help="faults per transfer at most")
    p.add_argument("--attempts", type=int, default=12)
    a = p.parse_args()
    orch = os.path.join(os.path.abspath(a.bin), "orchestrate")
    work = tempfile.mkdtemp(prefix="orchestrate-faults-")
    size = a.mib << 20
    nginx, nbase = start_nginx(work)
    sandbox, sbase = start_sandbox(os.path.abspath(a.bin), work)
    totals = {"transfers": 0, "verified": 0, "failed": 0, "faults": 0, "drops": 0, "resets": 0, "stalls": 0,
              "retries": 0, "resent": 0}
    failures = []
    started = time.monotonic()
    try:
        src = f"{work}/nginx/www/big.bin"
        subprocess.run(f"head -c {size} /dev/urandom > {src}", shell=True, check=True)
        expected = sha256(src)
        options = "min_speed: 100000, min_speed_time: 2"
        def head(uses):
            return (f"    uses: {uses}\n    timeout: 10m\n"
                    f"    retry: {{ max_attempts: {a.attempts}, initial_interval: 10ms, backoff: 1.0 }}\n")
        for round_ in range(a.rounds):
            seed = a.seed + round_
            faults = {"drop": 0.3, "reset": 0.3, "stall": 0.2, "stall_ms": 60000, "after": [0, size // 2], "repeat": True}
            for kind in ("download", "vimeo-streaming", "tus"):
                state = f"{work}/state-{round_}-{kind}"
                if kind == "download":
                    proxy = Proxy(nbase.split("//")[1], {"seed": seed, "max_faults": a.max_faults, "down": faults})
                    dest = f"{work}/dl-{round_}.bin"
                    ok, error, retries = run(orch, state, f"{work}/wf.yaml", head("http.download") +
                                             f"    with: {{ url: \"http://{proxy.address}/files/big.bin\", destination: \"{dest}\", {options} }}\n")
                    verified = ok and sha256(dest) == expected
                    if not ok and os.path.exists(dest):
                        raise SystemExit(f"round {round_}: a failed download left {dest}")
                    resent = 0
                else:
                    approach = "tus" if kind == "tus" else "streaming"
                    proxy = Proxy(sbase.split("//")[1], {"seed": seed, "max_faults": a.max_faults, "up": faults})
                    video = api(f"{sbase}/me/videos", "POST", {"upload": {"approach": approach, "size": size}})
                    link = video["upload"]["upload_link"].replace(sbase, f"http://{proxy.address}")
                    chunk = f", chunk_size: {size // 8}" if kind == "tus" else ""
                    ok, error, retries = run(orch, state, f"{work}/wf.yaml", head("http.upload") +
                                             f"    with: {{ url: \"{link}\", file: \"{src}\", protocol: {kind}, {options}{chunk} }}\n")
                    vid = video["uri"].split("/")[-1]
                    verified = ok and sha256(f"{work}/sandbox/videos/{vid}.bin") == expected
                    state_json = api(f"{sbase}/_sandbox/state")
                    mine = next(v for v in state_json["videos"] if v["uri"] == video["uri"])
                    resent = max(0, mine["bytes_received_total"] - size)
                stats = proxy.stats()
                proxy.stop()
                totals["transfers"] += 1
                totals["verified"] += 1 if verified else 0
                totals["failed"] += 0 if ok else 1
                if ok and not verified:
                    raise SystemExit(f"round {round_} {kind}: succeeded but the bytes differ (seed {seed})")
                if not ok:
                    failures.append(f"seed {seed} {kind}: {error}")
                for key in ("faults", "drops", "resets", "stalls"):
                    totals[key] += stats[key]
                totals["retries"] += retries
                totals["resent"] += resent
                print(f"round {round_} seed {seed} {kind}: {'verified' if verified else 'FAILED ' + error} "
                      f"({stats['faults']} faults: {stats['drops']} drops, {stats['resets']} resets, {stats['stalls']} stalls; "
                      f"{retries} retries; {resent / 2**20:.1f} MiB re-sent)", file=sys.stderr)
    finally:
        nginx.terminate()
        sandbox.kill()
        shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    print(f"\n{a.rounds} rounds x 3 transfers of {a.mib} MiB through tools/faultproxy.py (seeds {a.seed}..{a.seed + a.rounds - 1}), "
          f"{elapsed:.0f} s\n")
    print("| transfers | verified (sha256) | failed clearly | faults injected | drops / resets / stalls | retries | MiB received again (uploads) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {totals['transfers']} | {totals['verified']} | {totals['failed']} | {totals['faults']} | "
          f"{totals['drops']} / {totals['resets']} / {totals['stalls']} | {totals['retries']} | {totals['resent'] / 2**20:.1f} |")
    for failure in failures:
        print(f"- {failure}")


if __name__ == "__main__":
    main()
