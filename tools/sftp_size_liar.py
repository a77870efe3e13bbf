#!/usr/bin/env python3
"""An SFTP server that lies, for the malicious-server tests (issues 4 and 6).

Used as sshd's sftp subsystem in front of the real OpenSSH sftp-server:

    Subsystem sftp /usr/bin/python3 tools/sftp_size_liar.py LIE /usr/lib/openssh/sftp-server

It relays the client's requests unchanged and the server's replies too, except for the lie:
  * an integer DELTA: every SSH_FXP_ATTRS reply (stat, lstat, fstat) that carries a size reports
    size + DELTA bytes (DELTA may be negative; never below 0). The data itself is the real
    file's: a client that trusts the size reads past the end (DELTA > 0) or stops short (< 0);
  * `huge-packet`: the first SSH_FXP_DATA reply claims to be 2 GiB long (a client that believes
    length fields allocates that much, or waits for bytes that never come);
  * `overlong-data`: every SSH_FXP_DATA reply carries 1,000 bytes more than were asked for;
  * `overlong-first-late`: only the first SSH_FXP_DATA reply is overlong, and it is sent after
    the next reply (servers may answer out of order): the later pieces of a file land, the first
    does not (the file must need a second READ, or the first reply is never sent);
  * `short-reads` (no lie, a stingy server): every SSH_FXP_DATA reply carries at most 10,007
    bytes, fewer than asked for, as the protocol allows;
  * `slow-goodbye` (no lie, a slow server): honest, but it ends 3 s after the client closed the
    session, so sshd closes the channel that much later (a polite close waits for that).
  * `refuse-write` / `refuse-fsync`: the server did the WRITE (or the fsync@openssh.com) but
    its OK reply is replaced by a failure (SSH_FX_FAILURE): the client must fail that file;
  * `rename-listed:FROM=TO`: a directory listing (SSH_FXP_NAME reply to READDIR) names the
    entry FROM as TO (e.g. `../outside.bin`): a client that uses listed names as local paths
    without checking them writes where the server chose;
  * `trace:PATH` (no lie, a slow server): every reply to a WRITE leaves 0.1 s late, and PATH gets
    a line per request as it arrives (`req TYPE ID`, the extended ones by name) and per reply as
    it leaves (`rep ID`): what a client sent before it had a write's answer.
"""
import os
import struct
import subprocess
import sys
import threading
import time

SSH_FXP_WRITE = 6
SSH_FXP_STATUS = 101
SSH_FXP_NAME = 104
SSH_FXP_DATA = 103
SSH_FXP_ATTRS = 105
SSH_FXP_EXTENDED = 200
SSH_FX_FAILURE = 4
SSH_FILEXFER_ATTR_SIZE = 0x00000001


def read_exactly(stream, n):
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def rename_listed(body, old, new):
    """A NAME reply with the entry `old` renamed `new`: type(1) id(4) count(4), then per entry
    string filename, string longname, attrs."""
    (count,) = struct.unpack(">I", body[5:9])
    out, at = body[:9], 9

    def string(at):
        (n,) = struct.unpack(">I", body[at:at + 4])
        return body[at + 4:at + 4 + n], at + 4 + n

    for _ in range(count):
        name, at = string(at)
        longname, at = string(at)
        start = at
        (flags,) = struct.unpack(">I", body[at:at + 4])
        at += 4
        if flags & 0x1:
            at += 8  # size
        if flags & 0x2:
            at += 8  # uid, gid
        if flags & 0x4:
            at += 4  # permissions
        if flags & 0x8:
            at += 8  # atime, mtime
        if flags & 0x80000000:
            (pairs,) = struct.unpack(">I", body[at:at + 4])
            at += 4
            for _ in range(2 * pairs):
                _, at = string(at)
        if name == old:
            name = new
        out += struct.pack(">I", len(name)) + name + struct.pack(">I", len(longname)) + longname + body[start:at]
    return out + body[at:]


def main():
    lie = sys.argv[1]
    delta = int(lie) if lie.lstrip("-").isdigit() else 0
    lied_once = False
    held = None  # `overlong-first-late`: the bad reply, sent after the next one
    server = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    client_in, client_out = sys.stdin.buffer, sys.stdout.buffer
    trace = open(lie[len("trace:"):], "a") if lie.startswith("trace:") else None
    trace_lock = threading.Lock()
    kinds = {}  # request id -> its type (or the extended request's name), for the replies

    def note(line):
        with trace_lock:
            trace.write(line + "\n")
            trace.flush()

    def requests():
        # Client to server, unchanged; each request's type is noted by id.
        pending = b""
        while True:
            data = os.read(client_in.fileno(), 65536)
            if not data:
                break
            pending += data
            while len(pending) >= 9:
                (length,) = struct.unpack(">I", pending[:4])
                if len(pending) < 4 + length:
                    break
                kind, (rid,) = pending[4], struct.unpack(">I", pending[5:9])
                if kind == SSH_FXP_EXTENDED and length >= 12:
                    (n,) = struct.unpack(">I", pending[9:13])
                    kind = pending[13:13 + n].decode("ascii", "replace")
                kinds[rid] = kind
                if trace:
                    note(f"req {kind} {rid}")
                pending = pending[4 + length:]
            server.stdin.write(data)
            server.stdin.flush()
        server.stdin.close()

    threading.Thread(target=requests, daemon=True).start()
    while True:
        header = read_exactly(server.stdout, 4)
        if header is None:
            break
        (length,) = struct.unpack(">I", header)
        body = read_exactly(server.stdout, length)
        if body is None:
            break
        # ATTRS: type(1) id(4) flags(4) [size(8)] ...
        if body[0] == SSH_FXP_ATTRS and len(body) >= 17:
            (flags,) = struct.unpack(">I", body[5:9])
            if flags & SSH_FILEXFER_ATTR_SIZE:
                (size,) = struct.unpack(">Q", body[9:17])
                body = body[:9] + struct.pack(">Q", max(0, size + delta)) + body[17:]
        if body[0] == SSH_FXP_NAME and lie.startswith("rename-listed:"):
            old, new = lie[len("rename-listed:"):].split("=", 1)
            body = rename_listed(body, old.encode(), new.encode())
            header = struct.pack(">I", len(body))
        if body[0] == SSH_FXP_DATA and lie == "overlong-data":
            # DATA: type(1) id(4) string data
            (count,) = struct.unpack(">I", body[5:9])
            body = body[:5] + struct.pack(">I", count + 1000) + body[9:] + b"\x00" * 1000
            header = struct.pack(">I", len(body))
        if body[0] == SSH_FXP_DATA and lie == "short-reads":
            # Honest but stingy: at most 10,007 of the bytes asked for (the protocol allows a
            # short read); the client must ask again for the rest, at the right offset.
            (count,) = struct.unpack(">I", body[5:9])
            if count > 10007:
                body = body[:5] + struct.pack(">I", 10007) + body[9:9 + 10007]
                header = struct.pack(">I", len(body))
        if body[0] == SSH_FXP_DATA and lie == "huge-packet" and not lied_once:
            lied_once = True
            header = struct.pack(">I", 0x7FFFFFFF)
        if body[0] == SSH_FXP_DATA and lie == "overlong-first-late" and not lied_once:
            lied_once = True
            (count,) = struct.unpack(">I", body[5:9])
            body = body[:5] + struct.pack(">I", count + 1000) + body[9:] + b"\x00" * 1000
            held = struct.pack(">I", len(body)) + body
            continue
        if body[0] == SSH_FXP_STATUS and len(body) >= 9:
            (rid,) = struct.unpack(">I", body[1:5])
            kind = kinds.pop(rid, None)
            refused = {"refuse-write": SSH_FXP_WRITE, "refuse-fsync": "fsync@openssh.com"}.get(lie)
            if refused is not None and kind == refused:
                message = b"refused by the test server"
                body = (body[:5] + struct.pack(">I", SSH_FX_FAILURE) + struct.pack(">I", len(message)) + message
                        + struct.pack(">I", 0))
                header = struct.pack(">I", len(body))
            if trace and kind == SSH_FXP_WRITE:
                time.sleep(0.1)
        if trace and len(body) >= 5:
            note(f"rep {struct.unpack('>I', body[1:5])[0]}")
        client_out.write(header + body)
        if held is not None:
            client_out.write(held)
            held = None
        client_out.flush()
    server.wait()
    if lie == "slow-goodbye":
        time.sleep(3)


if __name__ == "__main__":
    main()
