#!/usr/bin/env python3
"""Crash campaign: runs example workflows with the real `orchestrate` binary, SIGKILLs it at
random moments (seeded, reproducible), runs `orchestrate resume RUN`, kills again, and so on
until the run finishes; then checks that nothing was lost, duplicated or left stuck.

    tools/crash_campaign.py --bin-dir .build/debug --seed 7 --kills 20 [--scenarios vimeo,tus,...]

Scenarios (each against a real peer started here):
  vimeo            workflows/vimeo-upload.yaml against orchestrate-sandbox (streaming PUTs)
  tus              workflows/vimeo-upload-tus.yaml against orchestrate-sandbox
  sftp-tree        workflows/sftp-upload.yaml, a directory tree, against a loopback OpenSSH sshd
  sftp-persistent  workflows/sftp-persistent.yaml, paths added with `orchestrate add-path` over
                   time (while it runs and while it is dead), then `orchestrate close`
  exec-chain       a chain of exec steps `sh -c 'sleep; echo sN >> log'` (the sleep is a grandchild)

The kills are shared out between the scenarios. Each scenario starts a run, kills it after a
random delay (uniform in [0, --window]) and resumes it, until its share of kills is spent; a run
that finishes before that is verified and the next one starts; the last run is then let finish.

After every run: the run's status is `succeeded` (a run still going after --stuck-timeout
seconds without a kill is stuck), the server holds byte-identical files (sha256, no `.partial`
left), every `idempotency_key` step had its effect once (the sandbox holds exactly one video
per run, found by its key), every persistent-session item finished exactly once; at the end
`PRAGMA integrity_check` of the state database answers ok (with --store, a PostgreSQL store
shared by every scenario: every run of the campaign succeeded and none is left owned). For exec-chain, after every kill: no
process of the running steps' process groups (journaled in their checkpoints) is alive one second
after the kill, no line is appended while no orchestrate runs (an orphaned command would), and at
the end each step's line is there exactly once, plus once for each attempt whose line was written
before a kill that came before the step was journaled as succeeded (at least once, by design).

Figures: kills survived, resumes, files verified, payload bytes, bytes the server received, and
the bytes re-sent (received beyond the payload: from the sandbox's `bytes_received_total`, and
from sshd's sftp log of bytes written per file handle), in total and per resume.

Exit status 0 when every check passed, 1 on any violation (each printed with the seed), 2 on a
setup error. Standard library only.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ["vimeo", "tus", "sftp-tree", "sftp-persistent", "exec-chain"]
TOKEN = "sandbox-token"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


class SetupError(Exception):
    pass


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_random(path, size, rng):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 1 << 20)
            f.write(rng.randbytes(n))
            left -= n


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Orchestrate:
    """The real binary with one state directory (and `--store URL` when the store is not its
    SQLite file). Children never inherit our stdout/stderr (a test runner reading them through a
    pipe would wait for an orphan)."""

    def __init__(self, bin_dir, state, logs, env, store=None):
        self.binary = os.path.join(bin_dir, "orchestrate")
        self.state = state
        self.store = store
        self.logs = logs
        self.env = env
        self.started = 0

    @property
    def common(self):
        return ["--state", self.state] + (["--store", self.store] if self.store else [])

    def run(self, args, stdin=None, timeout=60):
        result = subprocess.run([self.binary] + args + self.common, input=stdin,
                                capture_output=True, text=True, env=self.env, timeout=timeout)
        return result

    def start(self, args):
        self.started += 1
        log = os.path.join(self.logs, f"orchestrate-{self.started:05d}.log")
        with open(log, "wb") as out:
            process = subprocess.Popen([self.binary] + args + self.common,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=self.env)
        process.log = log
        return process

    def run_ids(self, label):
        result = self.run(["list", "--label", label, "--json"])
        ids = []
        for line in result.stdout.splitlines():
            try:
                ids.append(json.loads(line)["id"])
            except (ValueError, KeyError):
                pass
        return ids

    def status(self, run_id):
        result = self.run(["status", run_id, "--json"])
        if result.returncode != 0:
            raise SetupError(f"orchestrate status {run_id}: {result.stderr.strip()}")
        return json.loads(result.stdout)

    def events(self, run_id):
        result = self.run(["events", run_id, "--json"])
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


class Sandbox:
    """orchestrate-sandbox --port 0, its URL read from its first line."""

    def __init__(self, bin_dir, work):
        self.data = os.path.join(work, "sandbox-data")
        self.log = open(os.path.join(work, "sandbox.log"), "wb")
        self.process = subprocess.Popen([os.path.join(bin_dir, "orchestrate-sandbox"), "--port", "0",
                                         "--data-dir", self.data, "--token", TOKEN],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log)
        line = self.process.stdout.readline().decode()
        match = re.search(r"http://\S+", line)
        if not match:
            raise SetupError(f"orchestrate-sandbox did not start: {line!r}")
        self.url = match.group(0)

    def state(self):
        import urllib.request
        with urllib.request.urlopen(self.url + "/_sandbox/state", timeout=10) as response:
            return json.loads(response.read())

    def video_file(self, uri):
        return os.path.join(self.data, "videos", uri.rsplit("/", 1)[1] + ".bin")

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.log.close()


class SSHD:
    """A real OpenSSH sshd on 127.0.0.1 (as Tests/OrchestrateSFTPPluginTests/SSHDPeer.swift starts it),
    its sftp subsystem logging every file handle's bytes written (`-l INFO`) to sftp-server.log."""

    def __init__(self, work):
        self.dir = os.path.join(work, "sshd")
        os.makedirs(self.dir, mode=0o700)
        for name in ["host_key", "user_key"]:
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.dir, name)],
                           check=True, stdout=subprocess.DEVNULL)
        shutil.copy(os.path.join(self.dir, "user_key.pub"), os.path.join(self.dir, "authorized_keys"))
        self.remote = os.path.join(self.dir, "remote")
        os.makedirs(self.remote)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.port = free_port()
        self.user = os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name
        self.user_key = os.path.join(self.dir, "user_key")
        with open(os.path.join(self.dir, "sshd_config"), "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.dir}/host_key
AuthorizedKeysFile {self.dir}/authorized_keys
PidFile {self.dir}/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
MaxStartups 200
MaxSessions 200
LogLevel INFO
Subsystem sftp {self.dir}/sftp-server-logging
""")
        # The real sftp-server, its log (INFO: every handle's bytes on close) appended to a file.
        self.sftp_log = os.path.join(self.dir, "sftp-server.log")
        wrapper = os.path.join(self.dir, "sftp-server-logging")
        with open(wrapper, "w") as f:
            # HUP and PIPE ignored: a server whose client was killed then still logs its handles'
            # bytes as it exits on end-of-file (`forced close`), instead of dying silently.
            f.write(f"#!/bin/sh\ntrap '' HUP PIPE\nexec {SFTP_SERVER} -e -l INFO 2>>{self.sftp_log}\n")
        os.chmod(wrapper, 0o755)
        pub = open(os.path.join(self.dir, "host_key.pub")).read().split()
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        with open(self.known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        self.log_path = os.path.join(self.dir, "sshd.log")
        self.log = open(self.log_path, "wb")
        self.process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", os.path.join(self.dir, "sshd_config")],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 10
        while not accepts(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SetupError("sshd did not start: " + open(self.log_path).read()[-2000:])
            time.sleep(0.05)

    def inputs(self):
        return {"host": "127.0.0.1", "port": str(self.port), "user": self.user, "key_file": self.user_key,
                "known_hosts": self.known_hosts, "remote_root": self.remote}

    def bytes_written(self):
        """Bytes the sftp server wrote through file handles so far, summed over every close
        (including the `forced close` of a handle whose client was killed)."""
        total = 0
        if not os.path.exists(self.sftp_log):
            return 0
        with open(self.sftp_log, errors="replace") as f:
            for line in f:
                match = re.search(r'close "[^"]*" bytes read \d+ written (\d+)', line)
                if match:
                    total += int(match.group(1))
        return total

    def settle(self, timeout=5):
        """Waits until no connection's sshd child is left (their handles are closed and logged)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            children = subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True).stdout.split()
            if not children:
                return
            time.sleep(0.05)

    def stop(self):
        for pid in subprocess.run(["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.terminate()
        self.process.wait()
        self.log.close()


class Figures:
    def __init__(self, name):
        self.name = name
        self.runs = 0
        self.kills = 0
        self.resumes = 0
        self.files_verified = 0
        self.payload_bytes = 0
        self.server_bytes = 0
        self.max_resent_one_run = 0
        self.duplicate_creates_absorbed = 0
        self.items_added_while_dead = 0
        self.groups_checked = 0
        self.effects_repeated = 0
        self.seconds = 0.0

    @property
    def resent_bytes(self):
        return self.server_bytes - self.payload_bytes

    def json(self):
        return {"runs": self.runs, "kills": self.kills, "resumes": self.resumes,
                "files_verified": self.files_verified, "payload_bytes": self.payload_bytes,
                "server_bytes": self.server_bytes, "resent_bytes": self.resent_bytes,
                "resent_bytes_per_resume": round(self.resent_bytes / self.resumes) if self.resumes else 0,
                "max_resent_bytes_one_run": self.max_resent_one_run,
                "duplicate_creates_absorbed": self.duplicate_creates_absorbed,
                "items_added_while_dead": self.items_added_while_dead,
                "groups_checked": self.groups_checked, "effects_repeated": self.effects_repeated,
                "seconds": round(self.seconds, 1)}


def live_group_members(pgid, leader_start):
    """Live (not zombie) processes in process group `pgid` started no earlier than its journaled
    leader (a later group that reused the id would not be the killed run's)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if fields[0] not in "ZX" and int(fields[2]) == pgid and int(fields[19]) >= leader_start:
            members.append(int(name))
    return members


class ExecChainWatch:
    """The exec-chain checks around each kill (see the module's docstring)."""

    def __init__(self, campaign, figures, orc, log, steps, sleep):
        self.campaign = campaign
        self.figures = figures
        self.store = orc.store
        self.database = os.path.join(orc.state, "state.sqlite")
        self.log = log
        self.steps = steps
        self.sleep = sleep
        # Lines of each step written by attempts that were killed before they were journaled.
        self.unjournaled = {}

    def journal(self, run_id):
        """The run's step statuses and its checkpoints, from whichever store the campaign uses."""
        if self.store:
            quoted = "'" + run_id.replace("'", "''") + "'"
            def rows(sql):
                out = subprocess.run(["psql", "-X", "-At", "-F", "\t", "-d", self.store, "-c", sql],
                                     capture_output=True, text=True, check=True).stdout
                return [tuple(line.split("\t", 1)) for line in out.splitlines() if line]
            steps = dict(rows(f"SELECT id, status FROM steps WHERE run_id = {quoted}"))
            checkpoints = rows(f"SELECT step_id, convert_from(data, 'UTF8') FROM checkpoints WHERE run_id = {quoted}")
            return steps, checkpoints
        db = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)
        try:
            steps = dict(db.execute("SELECT id, status FROM steps WHERE run_id = ?", (run_id,)).fetchall())
            checkpoints = db.execute("SELECT step_id, data FROM checkpoints WHERE run_id = ?", (run_id,)).fetchall()
        finally:
            db.close()
        return steps, checkpoints

    def lines(self):
        try:
            with open(self.log) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def snapshot(self):
        return self.lines()

    def check(self, run_id, killed_at, lines_at_kill):
        name = "exec-chain"
        steps, checkpoints = self.journal(run_id)
        groups = []
        for step, data in checkpoints:
            record = json.loads(data).get("exec_process_group") if data else None
            if record and steps.get(step) != "succeeded":
                groups.append((step, record["pgid"], record["leader_start"]))
        self.figures.groups_checked += len(groups)
        for step, pgid, start in groups:
            while live_group_members(pgid, start) and time.monotonic() - killed_at < 1.0:
                time.sleep(0.01)
            left = live_group_members(pgid, start)
            if left:
                self.campaign.violation(name, f"run {run_id}: step {step}'s process group {pgid} still has live "
                                              f"processes {left} one second after the kill")
        for step in self.steps:
            if steps.get(step) != "succeeded":
                self.unjournaled[step] = lines_at_kill.count(step)
        # Longer than a step's sleep: an orphaned command would have appended its line by now.
        time.sleep(max(0.0, killed_at + self.sleep + 0.5 - time.monotonic()))
        after = self.lines()
        if after != lines_at_kill:
            self.campaign.violation(name, f"run {run_id}: {after[len(lines_at_kill):]} appended to {self.log} "
                                          f"while no orchestrate ran (an orphan of the killed process)")

    def verify(self, run_id):
        lines = self.lines()
        wrong = {}
        for step in self.steps:
            expected = 1 + self.unjournaled.get(step, 0)
            self.figures.effects_repeated += self.unjournaled.get(step, 0)
            if lines.count(step) != expected:
                wrong[step] = f"{lines.count(step)} lines, expected {expected}"
        if wrong:
            self.campaign.violation("exec-chain", f"run {run_id}: {wrong} in {self.log}: {lines}")
            return False
        return True


class Campaign:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.violations = []
        self.work = tempfile.mkdtemp(prefix="crash-campaign-")
        self.bin_dir = os.path.abspath(args.bin_dir)
        env = dict(os.environ)
        env["VIMEO_TOKEN"] = TOKEN
        env["NO_COLOR"] = "1"
        env.pop("ORCHESTRATE_STATE", None)
        env.pop("ORCHESTRATE_STORE", None)
        self.env = env

    def violation(self, scenario, message):
        text = f"[{scenario}] {message} (seed {self.args.seed})"
        self.violations.append(text)
        print("VIOLATION " + text, file=sys.stderr, flush=True)

    def log(self, message):
        if self.args.verbose:
            print(message, file=sys.stderr, flush=True)

    # One run, killed and resumed until it finishes.

    def drive(self, scenario, orc, workflow, inputs, label, kills, figures, between=None, on_kill=None):
        """Starts a run, kills it after random delays while `kills` remain, resumes it, until it
        finishes. `between(run_id, process)` is called while each process runs (after a short
        random pause) and `between(run_id, None)` while none runs. `on_kill.snapshot()` is called
        the moment a killed process is reaped, then `on_kill.check(run_id, killed_at, snapshot)`.
        `workflow` is a file in workflows/ or an absolute path. Returns (run_id, kills used) or
        (None, kills) on a violation."""
        run_id = None
        used = 0
        while True:
            if run_id is None:
                args = ["run", os.path.join(ROOT, "workflows", workflow), "--json", "--label", f"campaign={label}"]
                for key, value in inputs.items():
                    args += ["--input", f"{key}={value}"]
            else:
                args = ["resume", run_id, "--json"]
            process = orc.start(args)
            started = time.monotonic()
            kill_now = used < kills
            delay = self.rng.uniform(0, self.window) if kill_now else None
            # While a process runs: once before a kill; repeatedly when it is let finish (a
            # persistent session only ends once every path was added and it was closed).
            more = between is not None
            while more:
                time.sleep(self.rng.uniform(0, delay if delay is not None else 0.3))
                if run_id is None:
                    ids = orc.run_ids(f"campaign={label}")
                    run_id = ids[0] if ids else None
                more = False
                if run_id is not None and process.poll() is None:
                    more = between(run_id, process) and delay is None
                elif run_id is None and delay is None and process.poll() is None:
                    more = True
            try:
                remaining = None if delay is None else max(0.0, delay - (time.monotonic() - started))
                process.wait(timeout=remaining if kill_now else self.args.stuck_timeout)
                exited = True
            except subprocess.TimeoutExpired:
                exited = False
            if not exited:
                if not kill_now:
                    process.kill()
                    process.wait()
                    self.violation(scenario, f"run {run_id or label} is stuck: still going after "
                                             f"{self.args.stuck_timeout} s without a kill (log {process.log})")
                    return None, used
                process.send_signal(signal.SIGKILL)
                process.wait()
                killed_at = time.monotonic()
                snapshot = on_kill.snapshot() if on_kill else None
                used += 1
                figures.kills += 1
                self.log(f"[{scenario}] killed {run_id or label} after {delay:.2f} s")
            if run_id is None:
                ids = orc.run_ids(f"campaign={label}")
                if len(ids) > 1:
                    self.violation(scenario, f"label {label} names {len(ids)} runs")
                run_id = ids[0] if ids else None
            if not exited and on_kill and run_id is not None:
                on_kill.check(run_id, killed_at, snapshot)
            if exited:
                if run_id is None:
                    self.violation(scenario, f"orchestrate run exited {process.returncode} without a run: "
                                             + open(process.log, errors="replace").read()[-1500:])
                    return None, used
                status = orc.status(run_id)
                if status.get("status") == "succeeded":
                    if not args[0] == "resume":
                        # A whole run fits in less than the window: narrow it to about that run's
                        # length, so later kills land inside runs instead of after them.
                        self.window = min(self.window, max(0.2, 1.2 * (time.monotonic() - started)))
                    return run_id, used
                failed = [f"{s.get('id')}: {s.get('status')} {json.dumps(s.get('error'))}"
                          for s in status.get("steps", []) if s.get("status") not in ("succeeded", "skipped")]
                self.violation(scenario, f"run {run_id} exited {process.returncode} with status "
                                         f"{status.get('status')}: {'; '.join(failed)[:1500]} (log {process.log})")
                return None, used
            if run_id is not None:
                figures.resumes += 1
            if between is not None and run_id is not None:
                between(run_id, None)

    def check_integrity(self, scenario, orc):
        if orc.store:
            self.check_store_ownership(scenario, orc)
            return
        path = os.path.join(orc.state, "state.sqlite")
        db = sqlite3.connect(path)
        try:
            verdict = db.execute("PRAGMA integrity_check").fetchall()
        finally:
            db.close()
        if verdict != [("ok",)]:
            self.violation(scenario, f"PRAGMA integrity_check of {path}: {verdict[:5]}")

    def check_store_ownership(self, scenario, orc):
        """A shared (PostgreSQL) store has no file to check: every run of the scenario must have
        succeeded and be released (no live owner once its last process exited)."""
        result = orc.run(["list", "--json"])
        for line in result.stdout.splitlines():
            try:
                run = json.loads(line)
            except ValueError:
                continue
            if not str(run.get("labels", {}).get("campaign", "")).startswith(scenario + "-"):
                continue
            if run.get("status") != "succeeded" or run.get("node") or run.get("owner"):
                self.violation(scenario, f"run {run['id']} is {run.get('status')}, owned by {run.get('owner')!r}, "
                                         "after its last process exited")

    def scenario_dir(self, name):
        work = os.path.join(self.work, name)
        os.makedirs(os.path.join(work, "logs"))
        return work, Orchestrate(self.bin_dir, os.path.join(work, "state"), os.path.join(work, "logs"), self.env,
                                 store=self.args.store)

    # Scenarios: each runs runs until its kills are spent, verifying every run.

    def sandbox_flow(self, name, workflow, kills, figures):
        work, orc = self.scenario_dir(name)
        sandbox = Sandbox(self.bin_dir, work)
        try:
            size = self.args.mib << 20
            runs = []
            used = 0
            while used < kills or not runs:
                index = len(runs)
                source = os.path.join(work, f"video-{index}.bin")
                write_random(source, size - self.rng.randrange(0, 1 << 16), self.rng)
                title = f"campaign {self.args.seed} {name} {index}"
                inputs = {"source": source, "api": sandbox.url, "title": title, "max_rate": str(self.args.rate_kib << 10)}
                if name == "tus":
                    inputs["chunk_size"] = str(self.args.chunk_kib << 10)
                run_id, n = self.drive(name, orc, workflow, inputs, f"{name}-{index}", kills - used, figures)
                used += n
                if run_id is None:
                    return
                runs.append((run_id, source, title))
            videos = sandbox.state()["videos"]
            keyed = {}
            for video in videos:
                keyed.setdefault(video.get("idempotency_key"), []).append(video)
            if len(videos) != len(runs):
                self.violation(name, f"{len(runs)} runs created {len(videos)} videos: "
                                     f"{[(v['uri'], v.get('idempotency_key')) for v in videos]}")
            for run_id, source, title in runs:
                figures.runs += 1
                mine = keyed.get(f"{run_id}/create", [])
                if len(mine) != 1:
                    self.violation(name, f"run {run_id}: {len(mine)} videos carry its idempotency key")
                    continue
                video = mine[0]
                figures.duplicate_creates_absorbed += video["create_requests"] - 1
                if video["status"] != "available" or video["deleted"] or video["name"] != title:
                    self.violation(name, f"run {run_id}: video {video['uri']} is {video['status']}, "
                                         f"deleted {video['deleted']}, name {video['name']!r}")
                if sha256_file(sandbox.video_file(video["uri"])) != sha256_file(source):
                    self.violation(name, f"run {run_id}: the server's bytes of {video['uri']} differ from {source}")
                else:
                    figures.files_verified += 1
                size = os.path.getsize(source)
                figures.payload_bytes += size
                figures.server_bytes += video["bytes_received_total"]
                figures.max_resent_one_run = max(figures.max_resent_one_run, video["bytes_received_total"] - size)
                outputs = orc.status(run_id).get("outputs", {})
                if outputs.get("video") != video["uri"]:
                    self.violation(name, f"run {run_id}: output video {outputs.get('video')} is not {video['uri']}")
            self.check_integrity(name, orc)
        finally:
            sandbox.stop()

    def sftp_tree(self, kills, figures):
        name = "sftp-tree"
        work, orc = self.scenario_dir(name)
        sshd = SSHD(work)
        try:
            runs = []
            used = 0
            while used < kills or not runs:
                index = len(runs)
                tree = os.path.join(work, f"tree-{index}")
                files = {}
                for i in range(self.args.files):
                    rel = os.path.join(f"d{i % 3}", f"s{i % 2}", f"f{i:03d}.bin") if i % 4 else f"f{i:03d}.bin"
                    size = 0 if i == 1 else self.rng.randrange(1, 2 * (self.args.sftp_mib << 20) // self.args.files)
                    write_random(os.path.join(tree, rel), size, self.rng)
                    files[rel] = size
                if self.args.sftp_big_mib:
                    # Big enough for the plugin's parallel ranges (each checkpointed per chunk).
                    size = (self.args.sftp_big_mib << 20) + self.rng.randrange(0, 1 << 20)
                    write_random(os.path.join(tree, "big", "big.bin"), size, self.rng)
                    files[os.path.join("big", "big.bin")] = size
                inputs = dict(sshd.inputs(), source=tree, destination=f"upload-{index}")
                before = sshd.bytes_written()
                run_id, n = self.drive(name, orc, "sftp-upload.yaml", inputs, f"{name}-{index}", kills - used, figures)
                used += n
                if run_id is None:
                    return
                sshd.settle()
                runs.append(run_id)
                figures.runs += 1
                written = sshd.bytes_written() - before
                payload = sum(files.values())
                figures.payload_bytes += payload
                figures.server_bytes += written
                figures.max_resent_one_run = max(figures.max_resent_one_run, written - payload)
                for rel in files:
                    remote = os.path.join(sshd.remote, f"upload-{index}", rel)
                    if not os.path.exists(remote) or sha256_file(remote) != sha256_file(os.path.join(tree, rel)):
                        self.violation(name, f"run {run_id}: {remote} is missing or differs from its source")
                    else:
                        figures.files_verified += 1
                self.check_partials(name, sshd.remote)
            self.check_integrity(name, orc)
        finally:
            sshd.stop()

    def check_partials(self, name, root):
        for directory, _, names in os.walk(root):
            for n in names:
                if n.endswith(".partial"):
                    self.violation(name, f"a partial file was left behind: {os.path.join(directory, n)}")

    def sftp_persistent(self, kills, figures):
        name = "sftp-persistent"
        work, orc = self.scenario_dir(name)
        sshd = SSHD(work)
        try:
            runs = []
            used = 0
            while used < kills or not runs:
                index = len(runs)
                pending = []
                # Paths keep arriving for the whole campaign: 1-4 are added per kill, so a long
                # campaign gets about two per kill it will spend on this session.
                count = max(self.args.files, 2 * (kills - used))
                for i in range(count):
                    size = self.rng.randrange(1, 2 * (self.args.sftp_mib << 20) // count)
                    source = os.path.join(work, f"paths-{index}", f"p{i:03d}.bin")
                    write_random(source, size, self.rng)
                    pending.append((source, f"session-{index}/p{i:03d}.bin", size))
                added = []
                closed = [False]

                def between(run_id, process):
                    # A few paths at a time, while the run executes or while it is dead; close
                    # once every path was added.
                    if pending:
                        batch = [pending.pop(0) for _ in range(min(len(pending), self.rng.randint(1, 4)))]
                        lines = "\n".join(json.dumps({"source": s, "destination": d}) for s, d, _ in batch)
                        result = orc.run(["add-path", run_id, "--from", "-"], stdin=lines)
                        if result.returncode != 0:
                            self.violation(name, f"add-path {run_id}: {result.returncode} {result.stderr.strip()}")
                        added.extend(batch)
                        if process is None:
                            figures.items_added_while_dead += len(batch)
                    if not pending and not closed[0]:
                        result = orc.run(["close", run_id])
                        if result.returncode != 0:
                            self.violation(name, f"close {run_id}: {result.returncode} {result.stderr.strip()}")
                        closed[0] = True
                    return not closed[0]

                inputs = dict(sshd.inputs(), parallel="4")
                before = sshd.bytes_written()
                run_id, n = self.drive(name, orc, "sftp-persistent.yaml", inputs, f"{name}-{index}", kills - used,
                                       figures, between=between)
                used += n
                if run_id is None:
                    return
                sshd.settle()
                runs.append(run_id)
                figures.runs += 1
                written = sshd.bytes_written() - before
                payload = sum(size for _, _, size in added)
                figures.payload_bytes += payload
                figures.server_bytes += written
                figures.max_resent_one_run = max(figures.max_resent_one_run, written - payload)
                if pending or len(added) != count:
                    self.violation(name, f"run {run_id} finished with {len(pending)} paths never added")
                for source, destination, _ in added:
                    remote = os.path.join(sshd.remote, destination)
                    if not os.path.exists(remote) or sha256_file(remote) != sha256_file(source):
                        self.violation(name, f"run {run_id}: {remote} is missing or differs from its source")
                    else:
                        figures.files_verified += 1
                status = orc.status(run_id)
                items = status.get("items", [])
                not_done = [i for i in items if i.get("status") != "done"]
                if len(items) != len(added) or not_done:
                    self.violation(name, f"run {run_id}: {len(items)} items for {len(added)} paths, not done: {not_done[:3]}")
                finished = {}
                for event in orc.events(run_id):
                    if event.get("type") == "item.finished":
                        item = (event.get("data") or {}).get("item")
                        finished[item] = finished.get(item, 0) + 1
                twice = {k: v for k, v in finished.items() if v != 1}
                if twice or len(finished) != len(added):
                    self.violation(name, f"run {run_id}: item.finished per item {twice or finished} "
                                         f"({len(finished)} items finished of {len(added)})")
                self.check_partials(name, sshd.remote)
            self.check_integrity(name, orc)
        finally:
            sshd.stop()

    def exec_chain(self, kills, figures):
        name = "exec-chain"
        work, orc = self.scenario_dir(name)
        steps, sleep = [f"s{n}" for n in range(1, 7)], 0.3
        lines = ["version: 1", "name: exec-chain", "inputs:", "  log: { type: string }", "steps:"]
        for n, step in enumerate(steps):
            needs = f"needs: [{steps[n - 1]}], " if n else ""
            lines.append(f'  {step}: {{ uses: exec, {needs}with: {{ command: [sh, -c, "sleep {sleep}; echo {step} >> \\"$LOG\\""], '
                         f'env: {{ LOG: "${{{{ inputs.log }}}}" }} }} }}')
        workflow = os.path.join(work, "exec-chain.yaml")
        with open(workflow, "w") as f:
            f.write("\n".join(lines) + "\n")
        used = 0
        runs = 0
        while used < kills or not runs:
            log = os.path.join(work, f"effects-{runs}.log")
            watch = ExecChainWatch(self, figures, orc, log, steps, sleep)
            run_id, n = self.drive(name, orc, workflow, {"log": log}, f"{name}-{runs}", kills - used, figures,
                                   on_kill=watch)
            used += n
            if run_id is None:
                return
            runs += 1
            figures.runs += 1
            if watch.verify(run_id):
                figures.files_verified += 1
        self.check_integrity(name, orc)

    def run(self):
        names = self.args.scenarios
        shares = [self.args.kills // len(names) + (1 if i < self.args.kills % len(names) else 0) for i in range(len(names))]
        report = {"seed": self.args.seed, "kills_asked": self.args.kills,
                  "store": "postgresql" if self.args.store else "sqlite", "scenarios": {}}
        for name, kills in zip(names, shares):
            # One generator per scenario, so a scenario run alone (--scenarios NAME) with the
            # same seed repeats the same kills.
            self.rng = random.Random(f"{self.args.seed}/{name}")
            self.window = self.args.window
            figures = Figures(name)
            started = time.monotonic()
            if name == "vimeo":
                self.sandbox_flow(name, "vimeo-upload.yaml", kills, figures)
            elif name == "tus":
                self.sandbox_flow(name, "vimeo-upload-tus.yaml", kills, figures)
            elif name == "sftp-tree":
                self.sftp_tree(kills, figures)
            elif name == "sftp-persistent":
                self.sftp_persistent(kills, figures)
            elif name == "exec-chain":
                self.exec_chain(kills, figures)
            figures.seconds = time.monotonic() - started
            report["scenarios"][name] = dict(figures.json(), kill_window_s=round(self.window, 2))
            print(f"{name}: {json.dumps(report['scenarios'][name])}", file=sys.stderr, flush=True)
        total = Figures("total")
        for values in report["scenarios"].values():
            for key in ("runs", "kills", "resumes", "files_verified", "payload_bytes", "server_bytes"):
                setattr(total, key, getattr(total, key) + values[key])
        report["total"] = {k: v for k, v in total.json().items()
                           if k not in ("max_resent_bytes_one_run", "duplicate_creates_absorbed", "items_added_while_dead",
                                        "groups_checked", "effects_repeated", "seconds")}
        report["violations"] = self.violations
        report["work_dir"] = self.work
        return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", default=os.environ.get("ORCHESTRATE_BIN_DIR") or os.path.join(ROOT, ".build/debug"),
                        help="where orchestrate, orchestrate-sandbox and the plugins are built")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: chosen and printed)")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs in total, shared out between the scenarios")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    parser.add_argument("--window", type=float, default=1.2, help="kill after a delay uniform in [0, WINDOW] s (narrowed to 1.2 × a whole run's time when a run finishes sooner)")
    parser.add_argument("--mib", type=int, default=4, help="the video's size per Vimeo/tus run (MiB)")
    parser.add_argument("--sftp-mib", type=int, default=24, help="an SFTP tree's or session's total per run (MiB)")
    parser.add_argument("--sftp-big-mib", type=int, default=0,
                        help="add one file this big (MiB) to each SFTP tree; from 64 the plugin sends it over parallel ranges")
    parser.add_argument("--files", type=int, default=12, help="files per SFTP tree / persistent session (a session gets at least 2 per kill it takes)")
    parser.add_argument("--rate-kib", type=int, default=2048, help="upload cap for the Vimeo/tus flows (KiB/s), so kills land mid-upload")
    parser.add_argument("--chunk-kib", type=int, default=512, help="tus chunk size (KiB)")
    parser.add_argument("--stuck-timeout", type=float, default=120, help="a run not finished this long after its last kill is stuck")
    parser.add_argument("--store", help="a PostgreSQL URL for every orchestrate command (--store), shared by the "
                                        "scenarios; default: each scenario's state directory (SQLite)")
    parser.add_argument("--report", help="also write the JSON report to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--verbose", action="store_true", help="print every kill")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown or not args.scenarios:
        parser.error(f"unknown scenarios {unknown}; choose from {SCENARIOS}")
    print(f"crash campaign: seed {args.seed}, {args.kills} kills over {', '.join(args.scenarios)}", file=sys.stderr, flush=True)
    campaign = Campaign(args)
    try:
        report = campaign.run()
    except SetupError as error:
        print(f"crash campaign: setup failed: {error} (seed {args.seed})", file=sys.stderr)
        return 2
    finally:
        if not args.keep and not campaign.violations:
            shutil.rmtree(campaign.work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    if report["violations"]:
        print(f"crash campaign: {len(report['violations'])} violations (seed {args.seed}; work dir kept: {campaign.work})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
