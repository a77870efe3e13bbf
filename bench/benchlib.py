"""Helpers shared by the benchmark scripts in bench/*/: timing with peak RSS, free loopback
ports, and building the C test plugin the engine benchmarks run."""
import os
import socket
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(args, env=None):
    """Wall time (s) and peak RSS (MiB) of one command; fails loudly if it fails."""
    return timed_usage(args, env)[:2]


def timed_usage(args, env=None):
    """Wall time (s), peak RSS (MiB) and CPU time (user + system, s; reaped children included)
    of one command; fails loudly if it fails."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(args)}\n{proc.stderr.read().decode()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def build_test_plugin(directory):
    """Builds Tests/Fixtures/plugins/teststeps.c (test.noop and friends) into DIRECTORY with cc,
    as a third party would; returns the directory."""
    os.makedirs(directory, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-std=c99", "-D_POSIX_C_SOURCE=200809L",
                    "-I", os.path.join(ROOT, "Sources/COrchestratePlugin/include"),
                    "-o", os.path.join(directory, "teststeps.so"),
                    os.path.join(ROOT, "Tests/Fixtures/plugins/teststeps.c")], check=True)
    return directory
