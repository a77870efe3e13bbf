#!/usr/bin/env python3
"""FTP tree benchmark: `ftp.upload` and `ftp.download` of one tree with `concurrency` 1 and more,
over loopback FTPS, against pyftpdlib (tools/ftps_server.py: one process, TLS in Python) and,
when run as root, Debian's vsftpd (a process per login, TLS in OpenSSL).

Each worker of a tree transfer has a control connection of its own; files are small enough that
the per-file round trips (SIZE, EPSV, a TLS handshake on each data connection, STOR, SIZE,
RNFR/RNTO) dominate, which is where parallel logins pay. Each case runs --repeat times; the median
wall time of `orchestrate run` (start-up, journal and logins included) is printed with the
speed-up over concurrency 1. Every run's tree is checked byte for byte.

    swift build                    # or -c release
    python3 bench/ftp/bench.py --bin .build/debug [--files 200] [--kib 256] [--repeat 3]
        [--concurrency 1,4,8] [--servers pyftpdlib,vsftpd]
"""
import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import ROOT, free_port  # noqa: E402


def certificate(work):
    cert, key = f"{work}/cert.pem", f"{work}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def start_pyftpdlib(work, cert, key):
    python = subprocess.run([f"{ROOT}/scripts/python-venv.sh"], check=True, capture_output=True, text=True).stdout.strip()
    root = f"{work}/py-root"
    os.makedirs(f"{root}/pub")
    proc = subprocess.Popen([python, f"{ROOT}/tools/ftps_server.py", "--root", root, "--user", "bench", "--password", "bench-pw",
                             "--cert", cert, "--key", key], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    port = int(line.split()[-1])
    return proc, {"port": port, "user": "bench", "password": "bench-pw", "pub": f"{root}/pub", "remote_root": "pub"}


def start_vsftpd(work, cert, key):
    os.makedirs(f"{work}/vs/anon/pub", mode=0o755)
    os.makedirs(f"{work}/vs/empty", mode=0o755)
    os.chmod(f"{work}/vs", 0o755)
    shutil.chown(f"{work}/vs/anon/pub", "ftp", "ftp")
    port = free_port()
    conf = f"""listen=YES
listen_ipv6=NO
background=NO
listen_address=127.0.0.1
listen_port={port}
anonymous_enable=YES
local_enable=NO
write_enable=YES
anon_root={work}/vs/anon
anon_upload_enable=YES
anon_mkdir_write_enable=YES
anon_other_write_enable=YES
anon_umask=022
no_anon_password=YES
ssl_enable=YES
allow_anon_ssl=YES
force_anon_logins_ssl=YES
force_anon_data_ssl=YES
rsa_cert_file={cert}
rsa_private_key_file={key}
pasv_enable=YES
pasv_address=127.0.0.1
secure_chroot_dir={work}/vs/empty
seccomp_sandbox=NO
max_per_ip=0
max_clients=0
"""
    with open(f"{work}/vs/vsftpd.conf", "w") as f:
        f.write(conf)
    proc = subprocess.Popen(["/usr/sbin/vsftpd", f"{work}/vs/vsftpd.conf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, {"port": port, "user": "anonymous", "password": None, "pub": f"{work}/vs/anon/pub", "remote_root": "/pub"}


def make_tree(root, files, size):
    for i in range(files):
        folder = f"{root}/d{i % 10}"
        os.makedirs(folder, exist_ok=True)
        with open(f"{folder}/f{i:05d}.bin", "wb") as f:
            f.write(os.urandom(size))


def same_tree(a, b):
    def walk(root):
        return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names)
    names = walk(a)
    return names == walk(b) and all(filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False) for n in names)


def run(binary, work, server, cert, uses, source, destination, concurrency, label):
    state = f"{work}/state-{label}"
    shutil.rmtree(state, ignore_errors=True)
    login = f"user: {server['user']}, password: \"${{{{ secrets.password }}}}\", " if server["password"] else ""
    secrets = "secrets: { password: { env: FTP_BENCH_PASSWORD } }\n" if server["password"] else ""
    wf = f"{work}/{label}.yaml"
    with open(wf, "w") as f:
        f.write(f"""version: 1
name: ftp-bench
{secrets}steps:
  move:
    uses: {uses}
    with: {{ host: 127.0.0.1, port: {server['port']}, {login}ca_file: "{cert}", remote_root: "{server['remote_root']}",
            source: "{source}", destination: "{destination}", concurrency: {concurrency} }}
""")
    env = dict(os.environ, FTP_BENCH_PASSWORD=server["password"] or "")
    start = time.monotonic()
    result = subprocess.run([f"{binary}/orchestrate", "run", wf, "--state", state], env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"{label} failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=f"{ROOT}/.build/debug")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--kib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--servers", default="pyftpdlib,vsftpd")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    levels = [int(c) for c in args.concurrency.split(",")]
    work = tempfile.mkdtemp(prefix="ftp-bench-")
    os.chmod(work, 0o755)
    cert, key = certificate(work)
    tree = f"{work}/tree"
    make_tree(tree, args.files, args.kib * 1024)
    print(f"tree: {args.files} files of {args.kib} KiB; {args.repeat} runs each, median wall time of `orchestrate run`")
    servers = []
    for name in args.servers.split(","):
        if name == "vsftpd" and os.getuid() != 0:
            print("vsftpd: skipped (needs root)")
            continue
        servers.append((name, *(start_pyftpdlib if name == "pyftpdlib" else start_vsftpd)(work, cert, key)))
    try:
        for name, proc, server in servers:
            for uses in ("ftp.upload", "ftp.download"):
                base = None
                for level in levels:
                    times = []
                    for i in range(args.repeat):
                        label = f"{name}-{uses}-{level}-{i}"
                        if uses == "ftp.upload":
                            target = f"up-{label}"
                            times.append(run(binary, work, server, cert, uses, tree, target, level, label))
                            if not same_tree(tree, f"{server['pub']}/{target}"):
                                raise SystemExit(f"{label}: the uploaded tree differs")
                        else:
                            remote = f"{server['pub']}/down-src"
                            if not os.path.exists(remote):
                                shutil.copytree(tree, remote)
                                if name == "vsftpd":
                                    subprocess.run(["chown", "-R", "ftp:ftp", remote], check=True)
                            local = f"{work}/back-{label}"
                            times.append(run(binary, work, server, cert, uses, "down-src", local, level, label))
                            if not same_tree(tree, local):
                                raise SystemExit(f"{label}: the downloaded tree differs")
                            shutil.rmtree(local)
                    median = statistics.median(times)
                    base = base or median
                    print(f"{name:9} {uses:12} concurrency {level:2}: {median:6.2f} s  "
                          f"({args.files / median:6.1f} files/s, x{base / median:4.2f})  runs: {', '.join(f'{t:.2f}' for t in times)}",
                          flush=True)
    finally:
        for _, proc, _ in servers:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
