#!/usr/bin/env python3
"""Bandwidth cap benchmark (issue 5, `--max-rate`): how close a capped orchestrate download comes
to its cap, side by side with `curl --limit-rate` at the same cap, over loopback from nginx.

For each cap R, a file of --seconds × R bytes is downloaded with `orchestrate run --max-rate R`
(the http.download step, capped by the engine through the bandwidth extension) and with
`curl --limit-rate R`. Reported: the achieved rate of each as a fraction of R (1.00 = exactly the
cap; below 1 = slower than allowed; above 1 = the cap was overshot). orchestrate's time is the
whole `orchestrate run` (start-up and journal included), so short runs read slightly low.

    swift build -c release
    python3 bench/ratecap/bench.py --bin .build/release [--rates 4M,16M,64M] [--seconds 4]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, http_bench_module, parse_rate, timed  # noqa: E402

http_bench = http_bench_module()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--rates", default="4M,16M,64M")
    p.add_argument("--seconds", type=float, default=4)
    a = p.parse_args()
    orch = os.path.join(os.path.abspath(a.bin), "orchestrate")
    work = tempfile.mkdtemp(prefix="orchestrate-ratecap-bench-")
    nginx, base = http_bench.start_nginx(work)
    try:
        print(f"{'cap':>8} {'size':>9} {'orchestrate':>12} {'curl':>8}   (achieved rate / cap)")
        for text in a.rates.split(","):
            rate = parse_rate(text)
            size = int(rate * a.seconds)
            name = f"cap-{text}.bin"
            subprocess.run(f"head -c {size} /dev/urandom > {work}/nginx/www/{name}", shell=True, check=True)
            dest = f"{work}/{name}"
            state = f"{work}/state"
            shutil.rmtree(state, ignore_errors=True)
            o_time, _ = timed([orch, "run", os.path.join(ROOT, "workflows/http-download.yaml"), "--state", state,
                               "--input", f"url={base}/files/{name}", "--input", f"destination={dest}",
                               "--max-rate", text])
            os.remove(dest)
            c_time, _ = timed(["curl", "-sS", "--fail", "--limit-rate", str(rate), "-o", dest, f"{base}/files/{name}"])
            os.remove(dest)
            print(f"{text:>8} {size >> 20:>6} MiB {size / o_time / rate:>12.2f} {size / c_time / rate:>8.2f}")
    finally:
        nginx.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
