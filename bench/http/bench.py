#!/usr/bin/env python3
"""HTTP transfer benchmark (issue 3): orchestrate's http plugin against curl(1), side by side.

In one run, over loopback, with the same file (default 1 GiB of random bytes):
  * download:  `http.download` from nginx            vs  `curl -o`, `curl -o && sync FILE`
               (orchestrate fsyncs the file before its atomic rename; curl does not) and
               `dd conv=fdatasync` (the same bytes from the page cache into a durable file)
  * PUT:       `http.upload protocol: put` to nginx's WebDAV  vs  `curl -T`
  * tus:       `http.upload protocol: tus` to the sandbox    vs  the same PATCHes sent by curl
               (one curl per chunk, the chunks cut beforehand, outside the timing)

Each pair runs --repeat times, alternating; the median wall time and the peak RSS are reported,
with orchestrate/curl ratios (goal: within 5 % of curl, RSS under 64 MiB). orchestrate's time is
the whole `orchestrate run` (start-up, validation, journal included).

    swift build -c release --scratch-path .build-http   # or plain `swift build -c release`
    python3 bench/http/bench.py --bin .build-http/release [--mib 1024] [--repeat 3]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import json
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, timed, timed_usage, free_port  # noqa: E402






def start_nginx(work):
    port = free_port()
    for d in ("www", "dav", "tmp", "logs"):
        os.makedirs(f"{work}/nginx/{d}", exist_ok=True)
    conf = f"""{'user root;' if os.getuid() == 0 else ''}
worker_processes 1;
error_log {work}/nginx/logs/error.log;
pid {work}/nginx/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log off;
  sendfile on;
  client_body_temp_path {work}/nginx/tmp/body; proxy_temp_path {work}/nginx/tmp/proxy;
  fastcgi_temp_path {work}/nginx/tmp/fcgi; uwsgi_temp_path {work}/nginx/tmp/uwsgi; scgi_temp_path {work}/nginx/tmp/scgi;
  server {{
    listen 127.0.0.1:{port};
    location /files/ {{ alias {work}/nginx/www/; }}
    location /dav/ {{ alias {work}/nginx/dav/; dav_methods PUT; create_full_put_path on; client_max_body_size 0; }}
  }}
}}
"""
    with open(f"{work}/nginx/nginx.conf", "w") as f:
        f.write(conf)
    proc = subprocess.Popen(["nginx", "-p", f"{work}/nginx", "-c", f"{work}/nginx/nginx.conf", "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, f"http://127.0.0.1:{port}"


def start_sandbox(bin_dir, work):
    proc = subprocess.Popen([f"{bin_dir}/orchestrate-sandbox", "--port", "0", "--data-dir", f"{work}/sandbox"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    return proc, line.strip().split(" on ")[-1]


def api(url, method="GET", body=None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "bearer sandbox-token", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


def workflow(path, step):
    with open(path, "w") as f:
        f.write("version: 1\nname: bench\nsteps:\n  t:\n" + step)
    return path


def strace_calls(trace):
    """(call, file, seconds) of each call in an `strace -f -y -T` log: `123 fsync(7</a/b>) = 0 <0.12>`,
    or split in two when another thread's call came between (`<unfinished ...>`, `<... fsync resumed>`)."""
    import re
    whole = re.compile(r"^(\d+)\s+(\w+)\(\d+<([^>]*)>.*<([\d.]+)>$")
    started = re.compile(r"^(\d+)\s+(\w+)\(\d+<([^>]*)>.*<unfinished \.\.\.>$")
    resumed = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>.*<([\d.]+)>$")
    calls, pending = [], {}
    for line in open(trace):
        line = line.rstrip()
        if m := whole.match(line):
            calls.append((m[2], m[3], float(m[4])))
        elif m := started.match(line):
            pending[m[1]] = (m[2], m[3])
        elif (m := resumed.match(line)) and m[1] in pending:
            call, path = pending.pop(m[1])
            calls.append((call, path, float(m[3])))
    return calls


def download_tail(a, o, nbase, src, work):
    """The download and what bounds it, in one rotation per repeat: `curl -o`, `curl -o && sync
    FILE` (durable like orchestrate's), `dd conv=fdatasync` (the same bytes from the page cache
    into a new durable file: what the disk costs without a network), `http.download`, and an
    `http.download` of an empty file (the fixed cost of a run).
    Every output is deleted and the page cache written back (`sync`) before each command, outside
    the timing, so no command pays for the one before. Then one more `http.download` under
    `strace -T` for the time it spends in fsync/fdatasync (the write-back and the final fsync)."""
    url = f"{nbase}/files/big.bin"
    out = f"{work}/dl.bin"

    def fresh():
        for path in (out, f"{work}/.dl.bin.part"):
            if os.path.exists(path):
                os.remove(path)
        os.sync()

    commands = {
        "curl -o": lambda: timed_usage(["curl", "-sS", "-o", out, url]),
        "curl -o && sync FILE": lambda: timed_usage(["sh", "-c", f"curl -sS -o {out} {url} && sync {out}"]),
        "dd conv=fdatasync (the bytes, durable)": lambda: timed_usage(["dd", f"if={src}", f"of={out}", "bs=1M", "conv=fdatasync", "status=none"]),
        "http.download": lambda: o(f"    uses: http.download\n    with: {{ url: \"{url}\", destination: \"{out}\" }}\n", usage=True),
        # What a run costs besides the bytes: start-up, validation, the journal, fsync + rename.
        "http.download of an empty file": lambda: o(f"    uses: http.download\n    with: {{ url: \"{nbase}/files/empty.bin\", "
                                                    f"destination: \"{out}\" }}\n", usage=True),
    }
    open(f"{os.path.dirname(src)}/empty.bin", "w").close()
    runs = {name: [] for name in commands}
    for _ in range(a.repeat):
        for name, run in commands.items():
            fresh()
            runs[name].append(run())
            if name == "http.download" and subprocess.run(["cmp", src, out]).returncode != 0:
                raise SystemExit("the download differs from the source")
    fresh()
    trace = f"{work}/fsync.trace"
    o(f"    uses: http.download\n    with: {{ url: \"{url}\", destination: \"{out}\" }}\n",
      wrap=["strace", "-f", "-qq", "-y", "--seccomp-bpf", "-T", "-e", "trace=fsync,fdatasync,sync_file_range", "-o", trace])
    syncs = strace_calls(trace)
    fresh()
    median = {name: tuple(statistics.median(r[i] for r in rs) for i in range(3)) for name, rs in runs.items()}
    orch = median["http.download"][0]
    print(f"\ndownload of {a.mib} MiB from nginx, median of {a.repeat} rotations ({os.cpu_count()} CPUs)\n")
    print("| command | wall | CPU (user+sys) | http.download / this |")
    print("|---|---|---|---|")
    for name, (wall, _, cpu) in median.items():
        print(f"| {name} | {wall:.2f} s | {cpu:.2f} s | {orch / wall:.3f} |")
    part = [(call, t) for call, path, t in syncs if path.endswith(".dl.bin.part")]
    background = [t for call, t in part if call != "fsync"]
    final = sum(t for call, t in part if call == "fsync")
    directory = sum(t for call, path, t in syncs if path == work)
    journal = sum(t for call, path, t in syncs if not path.endswith(".dl.bin.part") and path != work)
    print(f"\nhttp.download under strace: {len(background)} background write-backs of the partial file {sum(background):.2f} s "
          f"(off the transfer thread); after the last byte: fsync of the file {final:.2f} s, of the directory {directory:.3f} s; "
          f"the journal's fsyncs {journal:.2f} s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--chunk-mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work", default=None)
    p.add_argument("--only", default=None, help="run only the cases whose name contains this")
    a = p.parse_args()
    bin_dir = os.path.abspath(a.bin)
    orch = f"{bin_dir}/orchestrate"
    work = a.work or tempfile.mkdtemp(prefix="orchestrate-http-bench-")
    size = a.mib << 20
    chunk = a.chunk_mib << 20
    nginx, nbase = start_nginx(work)
    sandbox, sbase = start_sandbox(bin_dir, work)
    results = {}
    try:
        src = f"{work}/nginx/www/big.bin"
        subprocess.run(f"head -c {size} /dev/urandom > {src}", shell=True, check=True)
        os.makedirs(f"{work}/chunks", exist_ok=True)
        subprocess.run(["split", "-b", str(chunk), "-d", "-a", "4", src, f"{work}/chunks/c"], check=True)
        chunks = sorted(os.listdir(f"{work}/chunks"))
        state = f"{work}/state"
        env = dict(os.environ)

        def o(cmd_yaml, usage=False, wrap=()):
            shutil.rmtree(state, ignore_errors=True)
            run = timed_usage if usage else timed
            return run([*wrap, orch, "run", workflow(f"{work}/wf.yaml", cmd_yaml), "--state", state], env)

        cases = {}
        if not a.only or a.only in "download":
            download_tail(a, o, nbase, src, work)

        # PUT
        def put_curl():
            return timed(["curl", "-sS", "-f", "-T", src, f"{nbase}/dav/curl.bin"])

        def put_orch():
            return o(f"    uses: http.upload\n    with: {{ url: \"{nbase}/dav/orch.bin\", file: \"{src}\", protocol: put }}\n")
        cases["PUT (nginx WebDAV)"] = (put_orch, put_curl)

        # tus
        def new_upload():
            v = api(f"{sbase}/me/videos", "POST", {"upload": {"approach": "tus", "size": size}})
            return v["upload"]["upload_link"]

        def tus_curl():
            link = new_upload()
            start = time.monotonic()
            peak = 0.0
            offset = 0
            for c in chunks:
                path = f"{work}/chunks/{c}"
                _, rss = timed(["curl", "-sS", "-f", "-X", "PATCH", "-H", "Tus-Resumable: 1.0.0", "-H", "Expect:",
                                "-H", "Content-Type: application/offset+octet-stream", "-H", f"Upload-Offset: {offset}",
                                "--data-binary", f"@{path}", link])
                peak = max(peak, rss)
                offset += os.path.getsize(path)
            return time.monotonic() - start, peak

        def tus_orch():
            link = new_upload()
            return o(f"    uses: http.upload\n    with: {{ url: \"{link}\", file: \"{src}\", protocol: tus, chunk_size: {chunk} }}\n")
        cases["tus (sandbox)"] = (tus_orch, tus_curl)

        for name, (fo, fc) in cases.items():
            if a.only and a.only not in name:
                continue
            ot, ct, orss, crss = [], [], [], []
            for _ in range(a.repeat):
                t, r = fc(); ct.append(t); crss.append(r)
                t, r = fo(); ot.append(t); orss.append(r)
            results[name] = (statistics.median(ot), statistics.median(ct), max(orss), max(crss))
            print(f"{name}: orchestrate {results[name][0]:.2f}s  curl {results[name][1]:.2f}s", file=sys.stderr)

        for name, path in (("PUT upload", f"{work}/nginx/dav/orch.bin"),):
            if os.path.exists(path) and subprocess.run(["cmp", src, path]).returncode != 0:
                raise SystemExit(f"{name} differs from the source")
    finally:
        nginx.terminate()
        sandbox.terminate()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\n{a.mib} MiB over loopback, median of {a.repeat}, {os.cpu_count()} CPUs\n")
    print("| transfer | orchestrate | curl | time ratio | orchestrate peak RSS | curl peak RSS |")
    print("|---|---|---|---|---|---|")
    for name, (ot, ct, orss, crss) in results.items():
        print(f"| {name} | {ot:.2f} s | {ct:.2f} s | {ot / ct:.3f} | {orss:.1f} MiB | {crss:.1f} MiB |")


if __name__ == "__main__":
    main()
