#!/usr/bin/env python3
"""SFTP benchmark (issue 4): orchestrate's sftp plugin against OpenSSH, side by side.

In one run, over loopback, to one OpenSSH sshd started here (own host key, user key, config):
  * upload:   `sftp.upload` of one big file (default 1 GiB)  vs  `sftp -b` with `put`
  * download: `sftp.download` of it                        vs  `sftp -b` with `get`
  * tree:     `sftp.upload` of 1,000 small files           vs  `sftp -b` (`put -r`) and `scp -r`
  * session:  workflows/sftp-persistent.yaml taking the same 1,000 files as added paths
              (`orchestrate add-path --from`), 8 at a time over its one connection, timed from
              add-path until the last file is in place, vs `sftp -b` with one `put` per file

Every upload anchor runs twice: `put` as is, and `put -f`, which asks the server to fsync each
file when it is written (`fsync@openssh.com`), as the plugin does before its atomic rename: a
file it reports done is on the server's disk. `put -f` is the durable reference, as
`curl -o && sync` is for the HTTP download; `sftp get && sync FILE` is the download's (the plugin
fsyncs the file before its rename).

orchestrate runs once per --transports entry (libssh2: the plugin's own SSH; openssh: the system's
`ssh -s sftp` under the plugin's SFTP client, as `sftp` itself runs it), side by side in one run.
--cases picks a subset (upload,download,tree,session). --baseline-bin DIR runs a second build's
orchestrate too, labelled "baseline", in the same run (a before/after comparison side by side).

Each pair runs --repeat times, alternating; the median wall time, the client's CPU time (user +
system), the server's (the sshd started here and its sessions: sshd, the shell that starts the
subsystem, sftp-server) and peak RSS are reported with orchestrate/OpenSSH ratios (goal: <= 1.0,
RSS under 64 MiB). orchestrate's time is the whole
`orchestrate run` (start-up, validation, journal, connect, host-key check included). "others" is
the CPU time the rest of the machine used meanwhile (all busy time less this bench's processes
and the server's): on a shared machine, entries with others near 0 are the undisturbed ones
(kernel threads writing back the entry's files count there too: a few hundredths to tenths).

    swift build -c release    # orchestrate and liborchestrate-plugin-sftp.so in one directory
    python3 bench/sftp/bench.py --bin .build/release [--mib 1024] [--files 1000] [--repeat 3]
        [--transports libssh2,openssh] [--cases upload,download,tree,session] [--baseline-bin DIR]
"""
import argparse
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, free_port, timed_usage as timed  # noqa: E402


def start_sshd(work):
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{work}/{name}"], check=True)
    shutil.copy(f"{work}/user_key.pub", f"{work}/authorized_keys")
    os.makedirs("/run/sshd", exist_ok=True)
    port = free_port()
    sftp_server = "/usr/lib/openssh/sftp-server" if os.path.exists("/usr/lib/openssh/sftp-server") else "internal-sftp"
    with open(f"{work}/sshd_config", "w") as f:
        f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {work}/host_key
AuthorizedKeysFile {work}/authorized_keys
PidFile {work}/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
MaxStartups 100
Subsystem sftp {sftp_server}
""")
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", f"{work}/sshd_config"],
                            stdout=subprocess.DEVNULL, stderr=open(f"{work}/sshd.log", "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    pub = open(f"{work}/host_key.pub").read().split()
    with open(f"{work}/known_hosts", "w") as f:
        f.write(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
    return proc, port


def reaped_cpu(pid):
    """CPU time (s) of the children that process `pid` has reaped so far (the sshd: its sessions)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def own_cpu():
    """CPU time (s) of this bench and every child it has reaped (the entries, their helpers)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def machine_busy():
    """CPU time (s) the whole machine has spent busy (not idle, not waiting for I/O)."""
    ticks = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def random_file(path, size):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with orchestrate and liborchestrate-plugin-sftp.so")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--transports", default="libssh2,openssh", help="the sftp steps' transport values to run")
    ap.add_argument("--cases", default="upload,download,tree,session")
    ap.add_argument("--baseline-bin", help="a second build's directory, run beside --bin's (labelled baseline)")
    args = ap.parse_args()
    builds = [("orchestrate", os.path.abspath(os.path.join(args.bin, "orchestrate")))]
    if args.baseline_bin:
        builds.append(("baseline", os.path.abspath(os.path.join(args.baseline_bin, "orchestrate"))))
    work = tempfile.mkdtemp(prefix="bench-sftp-")
    sshd, port = start_sshd(work)
    try:
        remote = f"{work}/remote"
        os.makedirs(remote)
        big = f"{work}/big.bin"
        random_file(big, args.mib << 20)
        tree = f"{work}/tree"
        for i in range(args.files):
            d = f"{tree}/d{i % 10}"
            os.makedirs(d, exist_ok=True)
            with open(f"{d}/f{i}.bin", "wb") as f:
                f.write(os.urandom(1024 + (i * 37) % 8192))
        user = os.environ.get("USER") or "root"
        ssh_opts = ["-P", str(port), "-i", f"{work}/user_key", "-o", f"UserKnownHostsFile={work}/known_hosts",
                    "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]
        transports = [t for t in args.transports.split(",") if t]
        wanted = set(args.cases.split(","))
        conn = f"""host: 127.0.0.1
      port: {port}
      user: {user}
      key_file: {work}/user_key
      known_hosts: {work}/known_hosts
      remote_root: {remote}
      connections: {args.connections}"""

        def workflow(name, uses, source, destination, transport):
            path = f"{work}/{name}-{transport}.yaml"
            with open(path, "w") as f:
                f.write(f"""version: 1
name: {name}
steps:
  move:
    uses: {uses}
    with:
      source: {source}
      destination: {destination}
      transport: {transport}
      {conn}
""")
            return path

        def orch(path, binary):
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            return [binary, "run", path, "--state", state]

        def batch(text):
            path = f"{work}/batch-{time.monotonic_ns()}"
            with open(path, "w") as f:
                f.write(text)
            return path

        def clean():
            shutil.rmtree(remote)
            os.makedirs(remote)
            for p in (f"{work}/down.bin", f"{work}/down-ssh.bin"):
                if os.path.exists(p):
                    os.remove(p)
            # The removals' journal commits and the last run's writeback land before the next
            # run starts, not in its fsyncs.
            os.sync()

        def warm(path):
            """Reads the case's sources into the page cache before each entry: this kernel pages
            out idle file pages (DAMON), and the first entry of a round read them from disk."""
            for p in [path] if path else tree_files:
                with open(p, "rb") as f:
                    while f.read(8 << 20):
                        pass

        def each_transport(name, uses, source, destination):
            return [(f"{label} {t}", (lambda path, binary: lambda: orch(path, binary))(workflow(name, uses, source, destination, t), binary))
                    for label, binary in builds for t in transports]
        tree_files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)

        def session(transport, orchestrate):
            """The persistent session: run, and once it accepts paths, add every tree file as a
            path. Timed from `add-path` until the last file is in place (the session itself lives
            on until `close`); RSS and CPU are the whole run's."""
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            paths = batch("".join(json.dumps({"source": f, "destination": "session/" + os.path.relpath(f, tree)}) + "\n"
                                  for f in tree_files))
            log = open(f"{state}/run.log", "w")
            proc = subprocess.Popen([orchestrate, "run", f"{ROOT}/workflows/sftp-persistent.yaml", "--state", state,
                                     "--input", "host=127.0.0.1", "--input", f"port={port}", "--input", f"user={user}",
                                     "--input", f"key_file={work}/user_key", "--input", f"known_hosts={work}/known_hosts",
                                     "--input", f"remote_root={remote}", "--input", f"transport={transport}"],
                                    stdout=log, stderr=subprocess.STDOUT)
            run_id = None
            while run_id is None or "accepting paths" not in open(f"{state}/run.log").read():
                time.sleep(0.01)
                if run_id is None:
                    listed = subprocess.run([orchestrate, "list", "--json", "--state", state], capture_output=True, text=True).stdout
                    run_id = next((json.loads(l)["id"] for l in listed.splitlines() if l.strip()), None)
            start = time.monotonic()
            subprocess.run([orchestrate, "add-path", run_id, "--from", paths, "--state", state], check=True, stdout=subprocess.DEVNULL)
            while arrived(f"{remote}/session") < len(tree_files):
                if proc.poll() is not None:
                    raise SystemExit(f"persistent session ended early: {open(f'{state}/run.log').read()[-2000:]}")
                time.sleep(0.005)
            elapsed = time.monotonic() - start
            subprocess.run([orchestrate, "close", run_id, "--state", state], check=True, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            if status != 0:
                raise SystemExit(f"persistent session failed: {open(f'{state}/run.log').read()[-2000:]}")
            return elapsed, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime

        def arrived(directory):
            return sum(1 for _, _, fs in os.walk(directory) for f in fs if not f.endswith(".partial"))

        def session_puts(flags):
            return "".join(f"put {flags}{f} {remote}/session-ssh/{os.path.relpath(f, tree)}\n" for f in tree_files)
        session_dirs = "".join(f"-mkdir {remote}/session-ssh/d{i}\n" for i in range(min(10, args.files)))
        sftp = ["sftp", "-q"] + ssh_opts
        cases = [
            ("upload", "upload 1 file", each_transport("up", "sftp.upload", big, "big.bin"),
             [("sftp put", lambda: sftp + ["-b", batch(f"put {big} {remote}/big.bin\n"), f"{user}@127.0.0.1"]),
              ("sftp put -f", lambda: sftp + ["-b", batch(f"put -f {big} {remote}/big.bin\n"), f"{user}@127.0.0.1"])]),
            ("download", "download 1 file", each_transport("down", "sftp.download", "src.bin", f"{work}/down.bin"),
             [("sftp get", lambda: sftp + ["-b", batch(f"get {remote}/src.bin {work}/down-ssh.bin\n"), f"{user}@127.0.0.1"]),
              ("sftp get && sync", lambda: ["sh", "-c", " ".join(shlex.quote(a) for a in sftp + [
                  "-b", batch(f"get {remote}/src.bin {work}/down-ssh.bin\n"), f"{user}@127.0.0.1"])
                  + f" && sync {shlex.quote(work + '/down-ssh.bin')}"])]),
            ("tree", f"{args.files} small files", each_transport("tree", "sftp.upload", tree, "tree"),
             [("sftp -b put -r", lambda: sftp + ["-b", batch(f"put -r {tree} {remote}/tree\n"), f"{user}@127.0.0.1"]),
              ("sftp -b put -rf", lambda: sftp + ["-b", batch(f"put -r -f {tree} {remote}/tree\n"), f"{user}@127.0.0.1"]),
              ("scp -r", lambda: ["scp", "-q", "-r"] + ssh_opts + [tree, f"{user}@127.0.0.1:{remote}/tree"])]),
            ("session", f"persistent session, {args.files} paths",
             [(f"{label} {t}", (lambda t, binary: lambda: session(t, binary))(t, binary)) for label, binary in builds for t in transports],
             [("sftp -b put each", lambda: sftp + ["-b", batch(f"-mkdir {remote}/session-ssh\n" + session_dirs + session_puts("")),
                                                   f"{user}@127.0.0.1"]),
              ("sftp -b put -f each", lambda: sftp + ["-b", batch(f"-mkdir {remote}/session-ssh\n" + session_dirs
                                                                  + session_puts("-f ")), f"{user}@127.0.0.1"])]),
        ]
        print(f"sftp bench: {args.mib} MiB file, {args.files} small files, {args.repeat} runs each, "
              f"loopback to OpenSSH sshd, orchestrate connections={args.connections}")
        for key, name, ours, theirs in cases:
            if key not in wanted:
                continue
            results = {label: [] for label, _ in ours + theirs}
            for _ in range(args.repeat):
                for label, make in ours + theirs:
                    clean()
                    if key == "download":
                        os.link(big, f"{remote}/src.bin")
                    warm(big if key in ("upload", "download") else None)
                    server, busy, own = reaped_cpu(sshd.pid), machine_busy(), own_cpu()
                    made = make()  # a command to time, or the persistent session's own measurement
                    elapsed, rss, cpu = made if isinstance(made, tuple) else timed(made)
                    busy, own = machine_busy() - busy, own_cpu() - own
                    time.sleep(0.05)  # sshd reaps the session's processes
                    server = reaped_cpu(sshd.pid) - server
                    results[label].append((elapsed, rss, cpu, server, busy - own - server))
            print(f"\n{name}:")
            medians = {label: statistics.median(run[0] for run in runs) for label, runs in results.items()}
            for label, runs in results.items():
                r = max(run[1] for run in runs)
                cpu, server, others = (statistics.median(run[i] for run in runs) for i in (2, 3, 4))
                print(f"  {label:<22} {medians[label]:8.2f} s   CPU {cpu:6.2f} s   server {server:5.2f} s   "
                      f"peak RSS {r:6.1f} MiB   others {others:5.2f} s")
            for label, _ in ours:
                ratios = "   ".join(f"/{other} = {medians[label] / medians[other]:.2f}" for other, _ in theirs)
                print(f"  {label:<22} {ratios}")
    finally:
        sshd.terminate()
        sshd.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
