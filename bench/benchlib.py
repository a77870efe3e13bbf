"""Helpers shared by the benchmark scripts in bench/*/: timing with peak RSS, free loopback
ports, building the C test plugin the engine benchmarks run, and a throwaway PostgreSQL cluster."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_rate(text):
    """A byte rate as --max-rate takes it: 512K, 10M, 1G (powers of 1024) or bytes per second."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def http_bench_module():
    """bench/http/bench.py (its nginx set-up), loaded by path: the folder name `http` shadows the
    standard library's package."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("http_bench", os.path.join(ROOT, "bench/http/bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def process_cpu_seconds(pid, with_reaped_children=False):
    """User + system CPU seconds of a process (and of its reaped children, if asked); 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if with_reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


class PostgresCluster:
    """A throwaway PostgreSQL cluster for a benchmark: Debian's server binaries, `initdb` in a
    temporary directory, `pg_ctl` on a free port of 127.0.0.1 (and a Unix socket in the same
    directory). Durable as in production unless told otherwise (fsync and synchronous_commit
    on). As root the server runs as the `postgres` user (`runuser`): PostgreSQL refuses root.

        with PostgresCluster(settings={"shared_preload_libraries": "pg_stat_statements"}) as pg:
            url = pg.create_database("bench")
            pg.sql("SELECT 1", "bench")
    """

    def __init__(self, settings=None):
        root = "/usr/lib/postgresql"
        versions = sorted(int(v) for v in os.listdir(root) if v.isdigit()) if os.path.isdir(root) else []
        if not versions:
            raise SystemExit("no PostgreSQL server in /usr/lib/postgresql (scripts/install-deps.sh installs it)")
        self.bin = f"{root}/{versions[-1]}/bin"
        self.directory = tempfile.mkdtemp(prefix="orchestrate-bench-pg-")
        os.chmod(self.directory, 0o700)
        self.port = free_port()
        self.settings = {"fsync": "on", "synchronous_commit": "on", "max_connections": "300",
                         "listen_addresses": "127.0.0.1", "unix_socket_directories": self.directory}
        self.settings.update(settings or {})

    def _as_server_user(self, args, **kwargs):
        if os.getuid() == 0:
            args = ["runuser", "-u", "postgres", "--"] + args
        return subprocess.run(args, check=True, **kwargs)

    def __enter__(self):
        if os.getuid() == 0:
            subprocess.run(["chown", "postgres:postgres", self.directory], check=True)
        data = os.path.join(self.directory, "data")
        self._as_server_user([f"{self.bin}/initdb", "-D", data, "-A", "trust", "-U", "postgres"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        options = f"-p {self.port} " + " ".join(f"-c {k}={v}" for k, v in self.settings.items())
        self._as_server_user([f"{self.bin}/pg_ctl", "-D", data, "-w", "-l", os.path.join(self.directory, "log"),
                              "-o", options, "start"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc):
        self._as_server_user([f"{self.bin}/pg_ctl", "-D", os.path.join(self.directory, "data"), "-m", "fast",
                              "-w", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.directory, ignore_errors=True)

    def cpu_seconds(self):
        """CPU time (user + system) the server has used so far: the postmaster, its live
        children (backends, WAL writer, checkpointer) and the children it has reaped."""
        with open(os.path.join(self.directory, "data", "postmaster.pid")) as f:
            postmaster = int(f.readline())
        total = process_cpu_seconds(postmaster, with_reaped_children=True)
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        parent = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if parent == postmaster:
                    total += process_cpu_seconds(int(pid))
        return total

    def url(self, database="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name):
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)

    def sql(self, statement, database="postgres"):
        """Runs SQL with psql; returns the rows, each a list of column texts."""
        done = subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", self.url(database),
                               "-c", statement], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"psql failed on {statement.strip()[:200]!r}: {done.stderr.strip()}")
        out = done.stdout
        return [line.split("\t") for line in out.splitlines() if line]
