#!/usr/bin/env python3
"""Image sequences of 100,000 files over SFTP (issue 30 §3): orchestrate against `rclone copy` and
OpenSSH's `sftp -r`, side by side in one run, to one OpenSSH sshd on loopback started here.

Trees (frames of shots, 10,000 frames a folder, as an image sequence is laid out):
  * small: --small-files (100,000) of --small-kib (4) KiB, random bytes;
  * big:   --big-files of --big-mib (1) MiB each, hard links of 16 random files (the source costs
           no disk; each copy on the server and each download does: 20,000 x 1 MiB is 20 GiB).

Cases (--cases, comma-separated):
  upload     sftp.upload of each tree  vs  `rclone copy` (its default --transfers, an on-the-fly
             `:sftp:` remote given by flags, an empty --config: nothing in $HOME; with
             --sftp-disable-hashcheck unless --rclone-hashcheck: by default it runs `md5sum` on the
             server after each file, a shell per file)  vs  `sftp -b` `put -r`
  download   sftp.download of what the upload left  vs  `rclone copy` back  vs  `sftp -b` `get -r`;
             each peer also as `PEER && sync -f DEST` (the sync in its wall time): the durable
             reference, as in bench/s3 and bench/sftp, since orchestrate fsyncs each file before
             its rename and the peers leave dirty pages behind
  resume     the small tree's upload and download killed (-9) once --kill-at (0.6) of the files are
             done, then `orchestrate resume`: files re-sent (inode changed on the receiving side),
             time from `resume` to the first new file, and the whole resume
  session    workflows/sftp-persistent.yaml fed every small file with `add-path --from`, timed from
             `add-path` until the last file is in place; `status` and its size meanwhile and with
             every file done; the time a file took in each tenth of them (a cost growing with
             the files already in the run shows as a rising series)
  watch      `serve --http --watch` of a folder that receives every small file (hard links), with
             `feed:` into the same session step; the API's run detail timed and sized meanwhile;
             at the end the dashboard's run page: its detail (a page of 100 files) and its event
             stream replayed from the start to the newest event; the time a file took by tenths;
             `serve`'s RSS before the first file, by halves of the files and at the end; then a
             restart of `serve` on the same state and folder (20 s: its peak RSS, nothing handed
             over again)
  scaling    the small upload by orchestrate alone at a tenth of --small-files and at all of them:
             time, peak RSS and journal per file at both sizes (flat memory, linear journal)

Figures for each orchestrate entry: wall time, peak RSS (orchestrate with its children: ssh for
the openssh transport; a plugin runs in the process otherwise), the state directory's size after
the run (SQLite database and WAL), the events journaled, and the tree step's checkpoint size.

    swift build -c release
    python3 bench/scale/trees.py --bin .build/release [--small-files 100000 --small-kib 4]
        [--big-files 5000 --big-mib 1] [--cases upload,download,resume,session,watch,scaling]
        [--transport libssh2] [--work DIR] [--with 'connections: 8' ...]
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, free_port  # noqa: E402


def sftp_bench():
    """bench/sftp/bench.py (its sshd set-up), loaded by path."""
    spec = importlib.util.spec_from_file_location("sftp_bench", os.path.join(ROOT, "bench/sftp/bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FRAMES_PER_SHOT = 10_000


def make_tree(root, files, size, distinct=None):
    """`files` frames of `size` bytes under root/shotNN/; with `distinct`, hard links of that many
    random files (no disk for the copies)."""
    originals = []
    if distinct:
        os.makedirs(f"{root}.originals", exist_ok=True)
        for i in range(distinct):
            path = f"{root}.originals/{i}"
            with open(path, "wb") as f:
                f.write(os.urandom(size))
            originals.append(path)
    for i in range(files):
        shot = f"{root}/shot{i // FRAMES_PER_SHOT:02d}"
        if i % FRAMES_PER_SHOT == 0:
            os.makedirs(shot, exist_ok=True)
        path = f"{shot}/frame_{i:07d}.dpx"
        if originals:
            os.link(originals[i % len(originals)], path)
        else:
            with open(path, "wb") as f:
                f.write(os.urandom(size))


def tree_files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def inodes(root):
    """{relative path: inode} of the complete files under root (partials left out)."""
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith(".partial"):
                p = os.path.join(d, f)
                out[os.path.relpath(p, root)] = os.lstat(p).st_ino
    return out


def count_files(root):
    return sum(1 for _, _, fs in os.walk(root) for f in fs if not f.endswith(".partial"))


def dir_size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def state_db(state):
    for name in os.listdir(state):
        if name.endswith(".db") or name.endswith(".sqlite"):
            return os.path.join(state, name)
    raise SystemExit(f"no database in {state}: {os.listdir(state)}")


def query(state, sql, args=()):
    """One read of the state store (SQLite, WAL: readers do not block the writer)."""
    db = sqlite3.connect(f"file:{state_db(state)}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def checkpoint_done(state):
    """Files the tree step's checkpoint says are done (its prefix and those listed beyond), and
    the checkpoint's size; (0, 0) before the first."""
    try:
        rows = query(state, "SELECT data FROM checkpoints")
    except (sqlite3.Error, SystemExit):  # no database yet, or busy
        return 0, 0
    best = (0, 0)
    for (data,) in rows:
        try:
            c = json.loads(bytes(data))
        except ValueError:
            continue
        if isinstance(c, dict) and "order" in c:
            best = max(best, (int(c.get("done", 0)) + len(c.get("also", [])), len(data)))
    return best


class Timeline:
    """Files done over time, sampled by the caller: the time each tenth of them took, to show
    whether the cost of a file grows with the number already in the run."""

    def __init__(self, files):
        self.files, self.points = files, [(time.monotonic(), 0)]

    def sample(self, done):
        self.points.append((time.monotonic(), done))

    def tenths(self):
        """ms a file in each tenth of the files (n/a for a tenth the samples did not split)."""
        out = []
        for k in range(10):
            lo, hi = self.files * k // 10, self.files * (k + 1) // 10
            start = next((t for t, d in self.points if d >= lo), None)
            end = next((t for t, d in self.points if d >= hi), None)
            out.append(f"{(end - start) / max(1, hi - lo) * 1000:.2f}" if start is not None and end is not None else "n/a")
        return "/".join(out)


def run_page(http_port, token, run_id, last_seq):
    """What the dashboard's run page loads: its detail (a page of 100 files) and its event
    stream from the start (`items=live`, as the page opens it: the item events already journaled
    left out), read until the stream reaches `last_seq` (the run's newest event not about one
    file).
    Returns (detail ms, detail bytes, stream s, stream bytes, stream events)."""
    headers = {"Authorization": f"Bearer {token}"}
    t0 = time.monotonic()
    body = urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{http_port}/api/runs/{run_id}?items_limit=100", headers=headers), timeout=120).read()
    detail = (time.monotonic() - t0, len(body))
    t0 = time.monotonic()
    stream = urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{http_port}/api/runs/{run_id}/events?items=live", headers=headers), timeout=120)
    size = events = 0
    seq = 0
    while seq < last_seq:
        line = stream.readline()
        if not line:
            break
        size += len(line)
        if line.startswith(b"id:"):
            seq = int(line[3:].strip())
            events += 1
    stream.close()
    return detail[0] * 1000, detail[1], time.monotonic() - t0, size, events


class Sampler:
    """Peak RSS (MiB) of a process and its descendants, summed, sampled every 0.2 s; every
    sample is kept, (monotonic time, MiB), for what it was at a given moment (`between`)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0.0, False
        self.samples = []
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def tree(self):
        pids, todo = [], [self.pid]
        children = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open(f"/proc/{p}/stat") as f:
                        parent = int(f.read().rsplit(")", 1)[1].split()[1])
                    children.setdefault(parent, []).append(int(p))
                except (OSError, ValueError):
                    pass
        while todo:
            p = todo.pop()
            pids.append(p)
            todo += children.get(p, [])
        return pids

    def loop(self):
        while not self.stop:
            total = 0
            for p in self.tree():
                try:
                    with open(f"/proc/{p}/status") as f:
                        for line in f:
                            if line.startswith("VmRSS:"):
                                total += int(line.split()[1])
                except OSError:
                    pass
            self.peak = max(self.peak, total / 1024.0)
            self.samples.append((time.monotonic(), total / 1024.0))
            time.sleep(0.2)

    def between(self, t0, t1):
        """(lowest, highest) MiB sampled from t0 to t1, or None without a sample there."""
        values = [mib for t, mib in self.samples if t0 <= t <= t1]
        return (min(values), max(values)) if values else None

    def done(self):
        self.stop = True
        self.thread.join()
        return self.peak


def run_timed(args, env=None, log=None):
    """Wall time, peak RSS (MiB, the process tree summed) of a command; fails loudly."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT if log else subprocess.PIPE, env=env)
    sampler = Sampler(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    peak = max(sampler.done(), usage.ru_maxrss / 1024.0)
    if status != 0:
        err = proc.stderr.read().decode()[-3000:] if proc.stderr else open(log.name).read()[-3000:]
        raise SystemExit(f"failed ({status}): {' '.join(args)}\n{err}")
    return elapsed, peak


def then_sync(timed, dest):
    """`timed`'s (wall time, peak RSS) with a `sync -f DEST` after it counted in the wall time: the
    peer's time until what it wrote is on the disk."""
    elapsed, rss = timed()
    synced, _ = run_timed(["sync", "-f", dest])
    return elapsed + synced, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--small-files", type=int, default=100_000)
    ap.add_argument("--small-kib", type=int, default=4)
    ap.add_argument("--big-files", type=int, default=5_000)
    ap.add_argument("--big-mib", type=int, default=1)
    ap.add_argument("--cases", default="upload,download,resume,session,watch,scaling")
    ap.add_argument("--trees", default="small,big")
    ap.add_argument("--tools", default="orchestrate,rclone,sftp")
    ap.add_argument("--transport", default="libssh2")
    ap.add_argument("--kill-at", type=float, default=0.6)
    ap.add_argument("--rclone-hashcheck", action="store_true",
                    help="let rclone run md5sum on the server for every file (its default)")
    ap.add_argument("--work", help="a directory for the trees (default: a new one in /tmp)")
    ap.add_argument("--with", dest="extra", action="append", default=[],
                    help="an extra input of orchestrate's tree steps, 'KEY: VALUE' (repeatable): 'connections: 8'")
    args = ap.parse_args()
    orchestrate = os.path.abspath(os.path.join(args.bin, "orchestrate"))
    work = tempfile.mkdtemp(prefix="bench-trees-", dir=args.work)
    sshd, port = sftp_bench().start_sshd(work)
    cases = set(args.cases.split(","))
    tools = args.tools.split(",")
    user = os.environ.get("USER") or "root"
    results = []

    def report(case, label, **figures):
        line = f"{case:<34} {label:<24} " + "  ".join(f"{k} {v}" for k, v in figures.items())
        print(line, flush=True)
        results.append({"case": case, "tool": label, **figures})

    try:
        with open("/proc/loadavg") as f:
            print(f"trees bench: {args.small_files} x {args.small_kib} KiB, {args.big_files} x {args.big_mib} MiB, "
                  f"transport {args.transport}, loopback sshd, with {args.extra}; load {f.read().split()[:3]}", flush=True)
        trees = {}
        if "small" in args.trees:
            trees["small"] = (f"{work}/small", args.small_files, args.small_kib << 10)
            make_tree(f"{work}/small", args.small_files, args.small_kib << 10)
        if "big" in args.trees and args.big_files > 0:
            trees["big"] = (f"{work}/big", args.big_files, args.big_mib << 20)
            make_tree(f"{work}/big", args.big_files, args.big_mib << 20, distinct=16)
        remote = f"{work}/remote"
        os.makedirs(remote)
        ssh_opts = ["-P", str(port), "-i", f"{work}/user_key", "-o", f"UserKnownHostsFile={work}/known_hosts",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]
        open(f"{work}/rclone.conf", "w").close()
        rclone = ["rclone", "--config", f"{work}/rclone.conf", "copy",
                  "--sftp-host", "127.0.0.1", "--sftp-port", str(port), "--sftp-user", user,
                  "--sftp-key-file", f"{work}/user_key", "--sftp-known-hosts-file", f"{work}/known_hosts"]
        if not args.rclone_hashcheck:
            # By default rclone checks each file it sent by running `md5sum` on the server, a
            # shell per file (7 files/s here); orchestrate checks sizes, as this does.
            rclone.append("--sftp-disable-hashcheck")

        def workflow(name, uses, source, destination):
            path = f"{work}/{name}.yaml"
            with open(path, "w") as f:
                f.write(f"""version: 1
name: {name}
steps:
  move:
    uses: {uses}
    with:
      source: {source}
      destination: {destination}
      transport: {args.transport}
      host: 127.0.0.1
      port: {port}
      user: {user}
      key_file: {work}/user_key
      known_hosts: {work}/known_hosts
      remote_root: {remote}
""" + "".join(f"      {item}\n" for item in args.extra))
            return path

        def journal(state):
            (events,) = query(state, "SELECT COUNT(*) FROM events")[0]
            return {"state_mib": f"{dir_size(state) / 2**20:.1f}", "events": events}

        def fresh(path):
            shutil.rmtree(path, ignore_errors=True)
            os.sync()

        def orch_run(name, uses, source, destination):
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            elapsed, rss = run_timed([orchestrate, "run", workflow(name, uses, source, destination), "--state", state])
            return elapsed, rss, state

        # Upload and download, each tool side by side, small tree then big.
        for key, (source, files, size) in trees.items():
            up = f"{remote}/{key}"
            if "upload" in cases or "download" in cases:
                for tool in tools:
                    dest = f"{up}-{tool}"
                    fresh(dest)
                    if tool == "orchestrate":
                        elapsed, rss, state = orch_run(f"up-{key}", "sftp.upload", source, f"{key}-{tool}")
                        report(f"upload {files} x {size >> 10} KiB", tool, time=f"{elapsed:.1f}s", rss=f"{rss:.0f}MiB",
                               per_file=f"{elapsed / files * 1000:.2f}ms", **journal(state))
                    elif tool == "rclone":
                        elapsed, rss = run_timed(rclone + [source, f":sftp:{dest}"])
                        report(f"upload {files} x {size >> 10} KiB", tool, time=f"{elapsed:.1f}s", rss=f"{rss:.0f}MiB",
                               per_file=f"{elapsed / files * 1000:.2f}ms")
                    else:
                        batch = f"{work}/put-{key}"
                        with open(batch, "w") as f:
                            f.write(f"put -r {source} {dest}\n")
                        elapsed, rss = run_timed(["sftp", "-q"] + ssh_opts + ["-b", batch, f"{user}@127.0.0.1"])
                        report(f"upload {files} x {size >> 10} KiB", "sftp -r", time=f"{elapsed:.1f}s", rss=f"{rss:.0f}MiB",
                               per_file=f"{elapsed / files * 1000:.2f}ms")
                    if count_files(dest) != files:
                        raise SystemExit(f"{tool} left {count_files(dest)} of {files} files in {dest}")
            if "download" in cases:
                for tool in tools:
                    src = f"{up}-{tool}"
                    dest = f"{work}/down-{key}-{tool}"
                    if tool == "orchestrate":
                        fresh(dest)
                        elapsed, rss, state = orch_run(f"down-{key}", "sftp.download", f"{key}-{tool}", dest)
                        report(f"download {files} x {size >> 10} KiB", tool, time=f"{elapsed:.1f}s", rss=f"{rss:.0f}MiB",
                               per_file=f"{elapsed / files * 1000:.2f}ms", **journal(state))
                        if count_files(dest) != files:
                            raise SystemExit(f"{tool} left {count_files(dest)} of {files} files in {dest}")
                        runs = []
                    elif tool == "rclone":
                        runs = [("rclone", lambda: run_timed(rclone + [f":sftp:{src}", dest]))]
                    else:
                        batch = f"{work}/get-{key}"
                        with open(batch, "w") as f:
                            f.write(f"get -r {src} {dest}\n")
                        runs = [("sftp -r", lambda: run_timed(["sftp", "-q"] + ssh_opts + ["-b", batch, f"{user}@127.0.0.1"]))]
                    if runs:  # each peer plain, then as `PEER && sync -f DEST`
                        runs.append((f"{runs[0][0]} && sync", lambda timed=runs[0][1]: then_sync(timed, dest)))
                    for label, timed in runs:
                        fresh(dest)
                        elapsed, rss = timed()
                        report(f"download {files} x {size >> 10} KiB", label, time=f"{elapsed:.1f}s", rss=f"{rss:.0f}MiB",
                               per_file=f"{elapsed / files * 1000:.2f}ms")
                        if count_files(dest) != files:
                            raise SystemExit(f"{label} left {count_files(dest)} of {files} files in {dest}")
                    shutil.rmtree(dest, ignore_errors=True)
            if key == "big":  # the big copies cost real disk
                for tool in tools:
                    shutil.rmtree(f"{up}-{tool}", ignore_errors=True)

        if "resume" in cases and "small" in trees:
            source, files, size = trees["small"]
            for direction in ("upload", "download"):
                if direction == "upload":
                    receiving = f"{remote}/resume"
                    fresh(receiving)
                    flow = workflow("resume-up", "sftp.upload", source, "resume")
                else:
                    receiving = f"{work}/resume-down"
                    fresh(receiving)
                    if count_files(f"{remote}/resume") != files:
                        raise SystemExit("the download's resume needs the upload's tree")
                    flow = workflow("resume-down", "sftp.download", "resume", receiving)
                state = tempfile.mkdtemp(prefix="state-", dir=work)
                target = int(files * args.kill_at)
                start = time.monotonic()
                proc = subprocess.Popen([orchestrate, "run", flow, "--state", state], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
                sampler = Sampler(proc.pid)
                size_at = []
                while True:
                    done, checkpoint_bytes = checkpoint_done(state)
                    if done and (not size_at or done >= size_at[-1][0] + files // 10):
                        size_at.append((done, checkpoint_bytes))
                    if done >= target:
                        break
                    if proc.poll() is not None:
                        raise SystemExit(f"the {direction} ended before the kill")
                    time.sleep(0.05)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                first_part = time.monotonic() - start
                rss_first = sampler.done()
                done_at_kill, checkpoint_bytes = checkpoint_done(state)
                before = inodes(receiving)
                run_id = query(state, "SELECT id FROM runs")[0][0]
                start = time.monotonic()
                proc = subprocess.Popen([orchestrate, "resume", run_id, "--state", state], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                sampler = Sampler(proc.pid)
                first_new = None
                while proc.poll() is None:
                    if first_new is None and checkpoint_done(state)[0] > done_at_kill:
                        first_new = time.monotonic() - start
                    time.sleep(0.02)
                resume_time = time.monotonic() - start
                rss_resume = sampler.done()
                if proc.returncode != 0:
                    raise SystemExit(f"resume of the {direction} failed ({proc.returncode})")
                after = inodes(receiving)
                if len(after) != files:
                    raise SystemExit(f"the resumed {direction} left {len(after)} of {files} files")
                resent = sum(1 for path, ino in before.items() if after.get(path) != ino)
                report(f"kill -9 at {done_at_kill} of {files}, resume", f"orchestrate {direction}",
                       before_kill=f"{first_part:.1f}s", resume=f"{resume_time:.1f}s",
                       first_new_file=f"{first_new:.2f}s" if first_new is not None else "n/a",
                       complete_at_kill=len(before), resent=resent, rss=f"{max(rss_first, rss_resume):.0f}MiB",
                       checkpoint_bytes="/".join(str(b) for _, b in size_at[:1] + size_at[-1:]) + f"/{checkpoint_bytes}",
                       **journal(state))

        def session_inputs():
            inputs = ["--input", "host=127.0.0.1", "--input", f"port={port}", "--input", f"user={user}",
                      "--input", f"key_file={work}/user_key", "--input", f"known_hosts={work}/known_hosts",
                      "--input", f"remote_root={remote}", "--input", f"transport={args.transport}"]
            return inputs

        def items_done(state):
            try:
                return query(state, "SELECT COUNT(*) FROM items WHERE status = 'done'")[0][0]
            except (sqlite3.Error, SystemExit):
                return 0

        if "session" in cases and "small" in trees:
            source, files, size = trees["small"]
            fresh(f"{remote}/session")
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            log = open(f"{state}/run.log", "w")
            proc = subprocess.Popen([orchestrate, "run", f"{ROOT}/workflows/sftp-persistent.yaml", "--state", state]
                                    + session_inputs(), stdout=log, stderr=subprocess.STDOUT)
            sampler = Sampler(proc.pid)
            while "accepting paths" not in open(f"{state}/run.log").read():
                if proc.poll() is not None:
                    raise SystemExit("the session ended early: " + open(f"{state}/run.log").read()[-2000:])
                time.sleep(0.05)
            run_id = query(state, "SELECT id FROM runs")[0][0]
            paths = f"{work}/paths.jsonl"
            with open(paths, "w") as f:
                for p in tree_files(source):
                    f.write(json.dumps({"source": p, "destination": "session/" + os.path.relpath(p, source)}) + "\n")
            start = time.monotonic()
            added, add_rss = run_timed([orchestrate, "add-path", run_id, "--from", paths, "--state", state])
            statuses = []
            timeline = Timeline(files)
            while (done := items_done(state)) < files:
                timeline.sample(done)
                if proc.poll() is not None:
                    raise SystemExit("the session ended early: " + open(f"{state}/run.log").read()[-2000:])
                if len(statuses) < 3 and time.monotonic() - start > 5 * (len(statuses) + 1):
                    t0 = time.monotonic()
                    out = subprocess.run([orchestrate, "status", run_id, "--state", state], capture_output=True, check=True).stdout
                    statuses.append((time.monotonic() - t0, len(out)))
                time.sleep(0.2)
            timeline.sample(files)
            elapsed = time.monotonic() - start
            # With every file done: the largest the run gets.
            t0 = time.monotonic()
            out = subprocess.run([orchestrate, "status", run_id, "--state", state], capture_output=True, check=True).stdout
            statuses.append((time.monotonic() - t0, len(out)))
            subprocess.run([orchestrate, "close", run_id, "--state", state], check=True, stdout=subprocess.DEVNULL)
            proc.wait()
            rss = sampler.done()
            status_figures = ", ".join(f"{t * 1000:.0f}ms/{n}B" for t, n in statuses)
            report(f"session, {files} added paths", "orchestrate", time=f"{elapsed:.1f}s", add_path=f"{added:.1f}s",
                   rss=f"{rss:.0f}MiB", add_path_rss=f"{add_rss:.0f}MiB", status=status_figures,
                   ms_per_file_by_tenth=timeline.tenths(), **journal(state))

        if "watch" in cases and "small" in trees:
            source, files, size = trees["small"]
            fresh(f"{remote}/watched")
            outbox = f"{work}/outbox"
            fresh(outbox)
            os.makedirs(outbox)
            flow = f"{work}/outbox.yaml"
            with open(f"{ROOT}/workflows/sftp-persistent.yaml") as f:
                text = f.read()
            with open(flow, "w") as f:
                f.write(text + f"""on:
  watch:
    path: {outbox}
    recursive: true
    settle: 1s
    feed: accept
    destination: "watched/${{{{ file.relative }}}}"
    inputs: {{ host: 127.0.0.1, port: {port}, user: {user}, key_file: {work}/user_key, known_hosts: {work}/known_hosts,
              remote_root: {remote}, transport: {args.transport} }}
""")
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            http_port = free_port()
            log = open(f"{state}/serve.log", "w")
            proc = subprocess.Popen([orchestrate, "serve", "--watch", flow, "--state", state, "--http", f"127.0.0.1:{http_port}"],
                                    stdout=log, stderr=subprocess.STDOUT)
            sampler = Sampler(proc.pid)
            token_file = os.path.join(state, "http-token")
            while not os.path.exists(token_file):
                if proc.poll() is not None:
                    raise SystemExit("serve ended: " + open(f"{state}/serve.log").read()[-2000:])
                time.sleep(0.05)
            time.sleep(0.5)
            token = open(token_file).read().strip()
            start = time.monotonic()
            for p in tree_files(source):
                dest = os.path.join(outbox, os.path.relpath(p, source))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.link(p, dest)
            dropped = time.monotonic() - start
            details = []
            run_id = None
            timeline = Timeline(files)
            while True:
                if proc.poll() is not None:
                    raise SystemExit("serve ended: " + open(f"{state}/serve.log").read()[-2000:])
                done = items_done(state)
                timeline.sample(done)
                if done >= files:
                    break
                if run_id is None:
                    rows = query(state, "SELECT id FROM runs")
                    run_id = rows[0][0] if rows else None
                elif len(details) < 3 and time.monotonic() - start > 10 * (len(details) + 1):
                    t0 = time.monotonic()
                    request = urllib.request.Request(f"http://127.0.0.1:{http_port}/api/runs/{run_id}",
                                                     headers={"Authorization": f"Bearer {token}"})
                    body = urllib.request.urlopen(request, timeout=60).read()
                    details.append((time.monotonic() - t0, len(body)))
                time.sleep(0.5)
            finished = time.monotonic()
            elapsed = finished - start
            (last_seq,) = query(state, "SELECT max(seq) FROM events WHERE run_id = ? AND type NOT LIKE 'item.%' AND type NOT LIKE 'watch.%'", (run_id,))[0]
            page = run_page(http_port, token, run_id, last_seq)
            time.sleep(1)  # a sample after the run page's read
            ended = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            rss = sampler.done()
            # A restart on the same state and folder: every file there was handed over (the store
            # says so), and the watch's first scan meets each again.
            log = open(f"{state}/serve-restart.log", "w")
            proc = subprocess.Popen([orchestrate, "serve", "--watch", flow, "--state", state, "--http", f"127.0.0.1:{http_port}"],
                                    stdout=log, stderr=subprocess.STDOUT)
            restart_sampler = Sampler(proc.pid)
            time.sleep(20)
            if proc.poll() is not None:
                raise SystemExit("serve ended: " + open(f"{state}/serve-restart.log").read()[-2000:])
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            restart_rss = restart_sampler.done()
            if items_done(state) != files or query(state, "SELECT COUNT(*) FROM watch_handoffs")[0][0] != files:
                raise SystemExit("the restart handed a file over again")
            # RSS before the first file, while the files went (by halves), and at the end
            # (all in place, the run page read).
            middle = start + elapsed / 2

            def mib(window):
                return f"{window[0]:.0f}-{window[1]:.0f}MiB" if window else "n/a"
            report(f"watch folder, {files} files", "orchestrate serve", time=f"{elapsed:.1f}s", drop=f"{dropped:.1f}s",
                   rss=f"{rss:.0f}MiB", rss_start=f"{(sampler.between(0, start) or (0, 0))[1]:.0f}MiB",
                   rss_first_half=mib(sampler.between(start, middle)), rss_second_half=mib(sampler.between(middle, finished)),
                   rss_end=mib(sampler.between(finished, ended)), restart_rss=f"{restart_rss:.0f}MiB", api_detail=", ".join(f"{t * 1000:.0f}ms/{n}B" for t, n in details),
                   run_page_detail=f"{page[0]:.0f}ms/{page[1]}B", run_page_stream=f"{page[2]:.1f}s/{page[3]}B/{page[4]}events",
                   ms_per_file_by_tenth=timeline.tenths(), **journal(state))

        if "scaling" in cases and "small" in trees:
            source, files, size = trees["small"]
            tenth = f"{work}/tenth"
            for p in tree_files(source)[:files // 10]:
                dest = os.path.join(tenth, os.path.relpath(p, source))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.link(p, dest)
            for label, tree, n in (("a tenth", tenth, files // 10), ("all", source, files)):
                fresh(f"{remote}/scaling")
                elapsed, rss, state = orch_run("scaling", "sftp.upload", tree, "scaling")
                j = journal(state)
                report(f"scaling: upload {n} x {size >> 10} KiB", f"orchestrate ({label})", time=f"{elapsed:.1f}s",
                       per_file=f"{elapsed / n * 1000:.2f}ms", rss=f"{rss:.0f}MiB",
                       state_kib_per_file=f"{float(j['state_mib']) * 1024 / n:.2f}", events=j["events"])
        with open("/proc/loadavg") as f:
            print(f"load at the end: {f.read().split()[:3]}")
        print(json.dumps(results))
    finally:
        sshd.terminate()
        sshd.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
