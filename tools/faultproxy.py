#!/usr/bin/env python3
"""faultproxy: a seeded, reproducible fault-injecting TCP proxy for the tests and benchmarks.

It sits between orchestrate and a real peer (nginx, sshd, the sandbox) and, per connection and
per direction, drops the connection, resets it (RST), stalls it, or slows it down, at a random
byte offset. Standard library only; one thread runs every connection on a selector, so faults
land on exact byte offsets.

    python3 tools/faultproxy.py --target 127.0.0.1:8080 [--port 0] [--seed 1] [--config JSON]

prints one line on stdout once it listens:

    faultproxy listening on 127.0.0.1:PORT control http://127.0.0.1:CPORT

Configuration (JSON; `--config`, or POST /config on the control port, merged into the current
one and applied to connections accepted afterwards):

    {"seed": 1,                 # the plan of connection N depends only on (seed, N)
     "max_faults": -1,          # inject no more drops/resets/stalls after this many (-1: no limit)
     "pass_connections": 0,     # the first N connections are left alone
     "up":   {...},             # client -> target
     "down": {...}}             # target -> client; each direction:
        "drop": 0.0             #   probability per connection of a clean close (FIN both ways)
        "reset": 0.0            #   ... of a reset (RST both ways)
        "stall": 0.0            #   ... of a pause of stall_ms (-1: until the client gives up)
        "stall_ms": 2000
        "after": [0, 1048576]   #   the fault happens after a uniform random count of bytes in range
        "repeat": false         #   true: after a stall or a draw of no fault, draw again for the
                                #   next `after` bytes (faults keep coming on kept-alive connections)
        "rate": 0               #   throttle to this many bytes/s (0: full speed) ...
        "slow": 1.0             #   ... on this fraction of connections (counted as "slowed")

At most one of drop/reset/stall is drawn per direction and connection (in that order of the
probability line), so drop + reset + stall should stay <= 1.

Control: GET /stats answers the counters as JSON: connections, open, bytes_up, bytes_down,
faults (= drops + resets + stalls), drops, resets, stalls, slowed (throttled directions), and
the last 1000 events as {"connection", "direction", "kind", "offset"}. POST /reset_stats zeroes
them; GET /config shows the configuration.

Note for low-speed tests: libcurl averages speed over the last few seconds, so a stall shorter
than ~5 s after fast bytes may not trip `min_speed`; a stall of stall_ms < 0 lasts until the
proxy exits or the other side gives up.
"""

import argparse
import errno
import json
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 256 * 1024
DIRECTIONS = ("up", "down")
DEFAULT_DIRECTION = {"drop": 0.0, "reset": 0.0, "stall": 0.0, "stall_ms": 2000, "after": [0, 1 << 20],
                     "rate": 0, "slow": 1.0, "repeat": False}


def merged(config, update):
    """The configuration with `update` applied (direction objects merged key by key)."""
    out = json.loads(json.dumps(config))
    for key, value in update.items():
        if key in DIRECTIONS:
            out[key] = {**out.get(key, DEFAULT_DIRECTION), **value}
        else:
            out[key] = value
    return out


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.values = {"connections": 0, "bytes_up": 0, "bytes_down": 0, "faults": 0,
                       "drops": 0, "resets": 0, "stalls": 0, "slowed": 0, "open": 0}
        self.events = []

    def add(self, key, amount=1):
        with self.lock:
            self.values[key] += amount

    def fault(self, connection, direction, kind, offset):
        with self.lock:
            if kind != "slow":
                self.values["faults"] += 1
            self.values[{"drop": "drops", "reset": "resets", "stall": "stalls", "slow": "slowed"}[kind]] += 1
            self.events.append({"connection": connection, "direction": direction, "kind": kind, "offset": offset})
            del self.events[:-1000]

    def snapshot(self):
        with self.lock:
            return {**self.values, "events": list(self.events)}


class Pipe:
    """One direction of one connection: bytes read from `src`, buffered, written to `dst`."""

    def __init__(self, connection, name, src, dst, plan, stats):
        self.connection, self.name, self.src, self.dst, self.stats = connection, name, src, dst, stats
        self.config, self.rng, self.rate, self.clean = plan
        self.stall_ms = self.config["stall_ms"]
        self.kind, self.offset = None, 0  # the next decision point: a fault kind or "none"
        self.buffer = b""
        self.read = 0            # bytes read from src so far (the fault offset counts these)
        self.eof = False         # src said EOF (True), then dst got shutdown(SHUT_WR) ("done")
        self.paused_until = 0.0  # a stall or the throttle; float("inf") for a stall without end
        self.started = time.monotonic()

    def draw(self):
        """The next decision point, from this pipe's own random sequence."""
        if self.clean:
            return
        d = self.config
        roll, offset_roll = self.rng.random(), self.rng.random()
        low, high = d["after"]
        self.offset = self.read + low + int(offset_roll * (high - low + 1))
        self.kind = "none"
        if roll < d["drop"]:
            self.kind = "drop"
        elif roll < d["drop"] + d["reset"]:
            self.kind = "reset"
        elif roll < d["drop"] + d["reset"] + d["stall"]:
            self.kind = "stall"
        if self.kind == "none" and not d["repeat"]:
            self.kind = None

    def wants_read(self, now):
        return self.eof is False and not self.buffer and now >= self.paused_until

    def read_size(self, now):
        size = CHUNK
        if self.kind is not None and self.read < self.offset:
            size = min(size, self.offset - self.read)
        if self.rate:
            quantum = max(1024, self.rate // 20)
            allowed = int(self.rate * (now - self.started)) - self.read
            if allowed > quantum:  # idle or stalled: no saved-up burst beyond one quantum
                self.started = now - (self.read + quantum) / self.rate
                allowed = quantum
            if allowed < min(quantum, size):
                self.paused_until = now + (min(quantum, size) - allowed) / self.rate
                return 0
            size = min(size, allowed)
        return size


class Connection:
    def __init__(self, proxy, index, client, upstream, plans):
        self.proxy, self.index, self.client, self.upstream = proxy, index, client, upstream
        self.pipes = {"up": Pipe(index, "up", client, upstream, plans["up"], proxy.stats),
                      "down": Pipe(index, "down", upstream, client, plans["down"], proxy.stats)}
        for pipe in self.pipes.values():
            pipe.draw()
        self.closed = False

    def close(self, reset=False):
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            try:
                self.proxy.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            try:
                if reset:  # SO_LINGER 0: close() sends RST instead of FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            except OSError:
                pass
        self.proxy.stats.add("open", -1)
        self.proxy.connections.discard(self)

    def trigger(self, pipe, now):
        """`pipe` has read exactly its fault offset: inject the fault."""
        kind = pipe.kind
        pipe.kind = None
        with self.proxy.config_lock:
            limit = self.proxy.config.get("max_faults", -1)
        if kind != "none" and (limit < 0 or self.proxy.injected < limit):
            self.proxy.injected += 1
            self.proxy.stats.fault(self.index, pipe.name, kind, pipe.read)
            if kind == "drop":
                return self.close()
            if kind == "reset":
                return self.close(reset=True)
            pipe.paused_until = float("inf") if pipe.stall_ms < 0 else now + pipe.stall_ms / 1000
        if pipe.config["repeat"]:
            pipe.draw()

    def step(self, now):
        """Moves what can move without blocking; updates the selector registrations."""
        for pipe in self.pipes.values():
            if self.closed:
                return
            if pipe.kind is not None and pipe.read >= pipe.offset and not pipe.buffer:
                self.trigger(pipe, now)
                continue
            if pipe.wants_read(now):
                size = pipe.read_size(now)
                if size > 0:
                    try:
                        data = pipe.src.recv(size)
                    except BlockingIOError:
                        data = None
                    except OSError:
                        self.close(reset=True)  # the peer reset: pass it on
                        return
                    if data == b"":
                        pipe.eof = True
                    elif data:
                        pipe.buffer = data
                        pipe.read += len(data)
                        self.proxy.stats.add("bytes_" + pipe.name, len(data))
            if pipe.buffer:
                try:
                    sent = pipe.dst.send(pipe.buffer)
                    pipe.buffer = pipe.buffer[sent:]
                except BlockingIOError:
                    pass
                except OSError:
                    self.close(reset=True)
                    return
            if pipe.eof is True and not pipe.buffer:
                try:
                    pipe.dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                pipe.eof = "done"
        pipes = self.pipes.values()
        # Both sides finished, or one finished while the other is stalled for good: nothing more
        # can happen on this connection.
        if all(p.eof == "done" for p in pipes) or (
                any(p.eof == "done" for p in pipes) and any(p.paused_until == float("inf") for p in pipes)):
            self.close()
            return
        self.register(now)

    def register(self, now):
        for sock in (self.client, self.upstream):
            events = 0
            for pipe in self.pipes.values():
                if pipe.src is sock and pipe.eof is False and not pipe.buffer and now >= pipe.paused_until:
                    events |= selectors.EVENT_READ
                if pipe.dst is sock and pipe.buffer:
                    events |= selectors.EVENT_WRITE
            try:
                if events:
                    try:
                        self.proxy.selector.modify(sock, events, self)
                    except KeyError:
                        self.proxy.selector.register(sock, events, self)
                else:
                    self.proxy.selector.unregister(sock)
            except (KeyError, ValueError):
                pass

    def next_wakeup(self):
        times = [p.paused_until for p in self.pipes.values() if p.paused_until != float("inf") and p.eof is False]
        return min(times) if times else None


class Proxy:
    def __init__(self, target, port, config):
        self.target = target
        self.config = config
        self.config_lock = threading.Lock()
        self.stats = Stats()
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.connections = set()
        self.accepted = 0
        self.injected = 0

    def plan(self, index):
        """The faults of connection `index`: a function of (seed, index) and the configuration."""
        with self.config_lock:
            config = self.config
        plans = {}
        for name in DIRECTIONS:
            d = {**DEFAULT_DIRECTION, **config.get(name, {})}
            rng = random.Random(f"{config.get('seed', 1)}:{index}:{name}")
            clean = index < config.get("pass_connections", 0)
            rate = d["rate"] if d["rate"] and rng.random() < d["slow"] and not clean else 0
            if rate:
                self.stats.fault(index, name, "slow", 0)
            plans[name] = (d, rng, rate, clean)
        return plans

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except BlockingIOError:
                return
            index = self.accepted
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                continue
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.stats.add("connections")
            self.stats.add("open")
            connection = Connection(self, index, client, upstream, self.plan(index))
            self.connections.add(connection)
            connection.step(time.monotonic())

    def serve(self):
        while True:
            now = time.monotonic()
            wakeups = [w for w in (c.next_wakeup() for c in self.connections) if w is not None]
            timeout = max(0.0, min(wakeups) - now) if wakeups else 1.0
            ready = self.selector.select(min(timeout, 1.0))
            now = time.monotonic()
            touched = set()
            for key, _ in ready:
                if key.data is None:
                    self.accept()
                else:
                    touched.add(key.data)
            # Connections whose stall or throttle pause has ended move again too.
            for connection in list(self.connections):
                if connection in touched or any(p.paused_until and p.paused_until <= now and p.paused_until != 0.0
                                                for p in connection.pipes.values()):
                    for pipe in connection.pipes.values():
                        if pipe.paused_until <= now:
                            pipe.paused_until = 0.0
                    connection.step(now)


def control_server(proxy):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, value):
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/config":
                with proxy.config_lock:
                    return self.answer(proxy.config)
            self.answer(proxy.stats.snapshot())

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b"{}"
            if self.path == "/reset_stats":
                with proxy.stats.lock:
                    proxy.stats.reset()
                return self.answer(proxy.stats.snapshot())
            with proxy.config_lock:
                proxy.config = merged(proxy.config, json.loads(body or b"{}"))
                config = proxy.config
            self.answer(config)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def main():
    # A parent that blocks signals (a test runner's thread) must not make SIGTERM ineffective.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signal.valid_signals())
    parser = argparse.ArgumentParser(description="seeded fault-injecting TCP proxy")
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free port)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--config", default="{}", help="fault configuration as JSON (see the header)")
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    config = merged({"seed": 1, "max_faults": -1, "pass_connections": 0}, json.loads(args.config))
    if args.seed is not None:
        config["seed"] = args.seed
    proxy = Proxy((host, int(port)), args.port, config)
    control = control_server(proxy)
    print(f"faultproxy listening on 127.0.0.1:{proxy.listener.getsockname()[1]} control http://127.0.0.1:{control}",
          flush=True)
    try:
        proxy.serve()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
