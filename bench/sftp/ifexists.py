#!/usr/bin/env python3
"""A second upload of an unchanged tree (issue 27, 4): `sftp.upload` with `if_exists:
if-different` beside `rclone copy` (which skips files of the same size and modification time),
both over loopback to one OpenSSH sshd started here (bench.py's), each twice: the first upload
sends the tree, the second should send nothing. Also `if_exists: overwrite`'s second upload, the
blind resend the option replaces.

    swift build            # or -c release; --bin names the directory
    python3 bench/sftp/ifexists.py --bin .build/debug [--mib 200] [--files 200]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import start_sshd, random_file  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ifexists-bench-")
    proc, port = start_sshd(work)
    try:
        tree = f"{work}/tree"
        per = (args.mib << 20) // args.files
        for i in range(args.files):
            os.makedirs(f"{tree}/d{i % 10}", exist_ok=True)
            random_file(f"{tree}/d{i % 10}/f{i}.bin", per)
        user = os.environ.get("USER", "root")

        def orchestrate(if_exists, remote):
            os.makedirs(remote, exist_ok=True)
            wf = f"{work}/up-{if_exists}.yaml"
            with open(wf, "w") as f:
                f.write(f"""version: 1
name: up
steps:
  move:
    uses: sftp.upload
    with:
      source: {tree}
      destination: tree
      if_exists: {if_exists}
      host: 127.0.0.1
      port: {port}
      user: {user}
      key_file: {work}/user_key
      known_hosts: {work}/known_hosts
      remote_root: {remote}
""")
            state = tempfile.mkdtemp(prefix="state-", dir=work)
            return [os.path.join(args.bin, "orchestrate"), "run", wf, "--state", state]

        def rclone(remote):
            os.makedirs(remote, exist_ok=True)
            target = (f":sftp,host=127.0.0.1,port={port},user={user},key_file={work}/user_key,"
                      f"known_hosts_file={work}/known_hosts:{remote}/tree")
            return ["rclone", "copy", "--config", "/dev/null", tree, target]

        def timed(cmd):
            start = time.monotonic()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.monotonic() - start

        rows = []
        for name, make in (("orchestrate if-different", lambda r: orchestrate("if-different", r)),
                           ("orchestrate overwrite", lambda r: orchestrate("overwrite", r)),
                           ("rclone copy", rclone)):
            remote = f"{work}/remote-{name.replace(' ', '-')}"
            first = timed(make(remote))
            # Same state directory for orchestrate would resume the finished run: a new one each time.
            second = timed(make(remote))
            rows.append((name, first, second))
        print(f"{args.files} files, {args.mib} MiB, loopback sshd")
        print(f"{'':28} {'first':>8} {'second':>8}")
        for name, first, second in rows:
            print(f"{name:28} {first:8.2f} {second:8.2f}")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
