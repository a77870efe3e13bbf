#!/usr/bin/env python3
"""badserver: a scripted HTTP/1.1 server for the tests, playing servers that misbehave or lie,
and a plain echo endpoint. Standard library only.

    python3 tools/badserver.py [--port 0]

prints `badserver listening on http://127.0.0.1:PORT`, then serves:

  GET|POST|PUT|PATCH /echo      reads the body and answers JSON: method, content_type, length,
                                sha256, body (as text, up to 4 KiB), headers (lower-case)
  ANY /redirect?to=URL&status=N reads the body, answers N (default 302) with Location: URL
                                (any URL: file:///…, ftp://…, another port's /echo) and a body
  ANY /upload-ticket?link=URL   200 {"upload": {"upload_link": URL}}: an API handing out a link
  GET /endless                  200 without a length, then bytes until the client goes away
  GET /range/wrong              200 with the whole file when asked without Range, but the
                                connection drops halfway; a Range request gets a 206 whose
                                Content-Range starts 1000 bytes later than asked (and those bytes)
  GET /range/file               the same file served correctly (Range honoured): its reference
  GET /silent                   reads the request, then answers nothing for 120 s (a stalled peer)
  GET /endless-header           a status line, then header lines without end
  GET /endless-header-line      a status line, then one header line without end
  GET /huge-json?mib=N          200 application/json of N MiB (default 1024), streamed
  HEAD|PATCH /tus/backwards     tus: every PATCH answers an Upload-Offset 1000 bytes lower
                                than the one it was sent at (the server "loses" bytes)
  HEAD|PATCH /tus/past-size     tus: the PATCH answers an offset past the upload's length
  HEAD /tus/head-past-size      tus: HEAD claims more bytes than the upload's length
  HEAD|PATCH /tus/store/NAME    a real (in-memory) tus upload that, with ?forget=1, loses its last
                                chunk once after the second PATCH (a server restored from an older
                                state): the next PATCH gets 409 with the server's Upload-Offset
  GET /tus/store/NAME           that upload: {"offset", "length", "sha256", "conflicts", "headers"}
                                (headers: the names of every header its PATCHes carried)
  GET /_stats                   bytes sent per path, and the connections that ended, as JSON

The tus endpoints take the upload length from `?length=N` (default 1048576).
"""

import argparse
import hashlib
import json
import random
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

FILE_SIZE = 1 << 20
FILE = random.Random(7).randbytes(FILE_SIZE)
ETAG = '"badserver-file-1"'

stats_lock = threading.RLock()  # re-entered: answer() counts bytes while a handler holds it
sent = {}
uploads = {}  # /tus/store/NAME -> {"data": bytearray, "patches": int, "forgot": bool, "conflicts": int}


def count(path, n):
    with stats_lock:
        sent[path] = sent.get(path, 0) + n


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # -- helpers ---------------------------------------------------------------------------

    def write(self, data):
        """Sends raw bytes, counted against the path; False once the client has gone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return False
        count(urlparse(self.path).path, len(data))
        return True

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.write(body)

    def read_body(self, sink):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            sink(chunk)
            length -= len(chunk)

    def query(self, name, default):
        return int(parse_qs(urlparse(self.path).query).get(name, [default])[0])

    # -- endpoints -------------------------------------------------------------------------

    def text_query(self, name, default=""):
        return parse_qs(urlparse(self.path).query).get(name, [default])[0]

    def common(self):
        """The endpoints every method answers; True when it answered."""
        path = urlparse(self.path).path
        if path == "/redirect":
            self.read_body(lambda chunk: None)
            body = b"<html><title>moved</title></html>"
            self.answer(self.query("status", 302), body, [("Location", self.text_query("to"))])
            return True
        if path == "/upload-ticket":
            self.read_body(lambda chunk: None)
            body = json.dumps({"upload": {"upload_link": self.text_query("link")}}).encode()
            self.answer(200, body, [("Content-Type", "application/json")])
            return True
        return False

    def do_GET(self):
        path = urlparse(self.path).path
        if self.common():
            return
        if path == "/echo":
            return self.echo()
        if path == "/endless":
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            block = b"e" * 65536
            while self.write(block):
                pass
            return
        if path == "/_stats":
            with stats_lock:
                body = json.dumps(sent).encode()
            return self.answer(200, body, [("Content-Type", "application/json")])
        if path.startswith("/tus/store/"):
            with stats_lock:
                upload = uploads.get(path, {"data": b"", "conflicts": 0})
                body = json.dumps({"offset": len(upload["data"]), "length": self.query("length", 1 << 20),
                                   "sha256": hashlib.sha256(upload["data"]).hexdigest(),
                                   "conflicts": upload["conflicts"], "headers": upload.get("headers", [])}).encode()
            return self.answer(200, body, [("Content-Type", "application/json")])
        if path == "/range/file":
            return self.serve_file(honest=True)
        if path == "/range/wrong":
            return self.serve_file(honest=False)
        if path == "/silent":
            self.close_connection = True
            time.sleep(120)
            return
        if path == "/endless-header":
            self.close_connection = True
            if not self.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"):
                return
            n = 0
            while self.write(b"X-Filler-%d: %s\r\n" % (n, b"a" * 1000)) and n < 1_000_000:
                n += 1
            return
        if path == "/endless-header-line":
            self.close_connection = True
            if not self.write(b"HTTP/1.1 200 OK\r\nX-Endless: "):
                return
            block = b"b" * 65536
            for _ in range(16384):  # 1 GiB at most
                if not self.write(block):
                    return
            return
        if path == "/huge-json":
            total = self.query("mib", 1024) << 20
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(total))
            self.end_headers()
            self.close_connection = True
            element = b'{"id":12345678,"name":"x"},'
            block = b"[" + element * ((65536 - 1) // len(element))
            block += b" " * (65536 - len(block))
            done = 0
            while done < total:
                piece = block if done == 0 else block.replace(b"[", b" ", 1)
                piece = piece[: total - done]
                if not self.write(piece):
                    return
                done += len(piece)
            return
        self.answer(404, b'{"error":"no such path"}', [("Content-Type", "application/json")])

    def serve_file(self, honest):
        asked = self.headers.get("Range")
        if not asked:
            self.send_response(200)
            self.send_header("ETag", ETAG)
            self.send_header("Content-Length", str(FILE_SIZE))
            self.end_headers()
            if honest:
                self.write(FILE)
            else:
                self.write(FILE[: FILE_SIZE // 2])
                self.close_connection = True  # cut halfway: the client has to resume
            return
        start = int(asked.split("=")[1].split("-")[0])
        if not honest:
            start = min(FILE_SIZE - 1, start + 1000)
        self.send_response(206)
        self.send_header("ETag", ETAG)
        self.send_header("Content-Range", f"bytes {start}-{FILE_SIZE - 1}/{FILE_SIZE}")
        self.send_header("Content-Length", str(FILE_SIZE - start))
        self.end_headers()
        self.write(FILE[start:])

    def do_HEAD(self):
        path = urlparse(self.path).path
        if self.common():
            return
        length = self.query("length", 1 << 20)
        offsets = {"/tus/backwards": 0, "/tus/past-size": 0, "/tus/head-past-size": length + 4096}
        if path.startswith("/tus/store/"):
            with stats_lock:
                offsets[path] = len(uploads.get(path, {"data": b""})["data"])
        if path not in offsets:
            return self.answer(404)
        offset = getattr(self.server, "tus_offset", {}).get(path, offsets[path])
        self.answer(200, headers=[("Tus-Resumable", "1.0.0"), ("Upload-Offset", str(offset)),
                                  ("Upload-Length", str(length)), ("Cache-Control", "no-store")])

    def do_PATCH(self):
        path = urlparse(self.path).path
        if self.common():
            return
        if path == "/echo":
            return self.echo()
        length = self.query("length", 1 << 20)
        offset = int(self.headers.get("Upload-Offset") or 0)
        if path.startswith("/tus/store/"):
            return self.tus_store(path, offset, length)
        received = [0]
        self.read_body(lambda chunk: received.__setitem__(0, received[0] + len(chunk)))
        if path == "/tus/backwards":
            # The first chunk is taken; from then on the offset falls back below where it was.
            answer = offset - 1000 if offset > 0 else received[0]
        elif path == "/tus/past-size":
            answer = length + 12345
        else:
            return self.answer(404)
        offsets = self.server.__dict__.setdefault("tus_offset", {})
        offsets[path] = answer
        self.answer(204, headers=[("Tus-Resumable", "1.0.0"), ("Upload-Offset", str(answer))])

    def tus_store(self, path, offset, length):
        chunk = bytearray()
        self.read_body(chunk.extend)  # read first: a client still sending would miss the answer
        with stats_lock:
            upload = uploads.setdefault(path, {"data": bytearray(), "patches": 0, "forgot": False, "conflicts": 0})
            if offset != len(upload["data"]):
                upload["conflicts"] += 1
                return self.answer(409, b"offset mismatch", [("Tus-Resumable", "1.0.0"),
                                                             ("Upload-Offset", str(len(upload["data"])))])
            upload["data"].extend(chunk[: length - offset])
            upload["patches"] += 1
            upload["headers"] = sorted(set(upload.get("headers", [])) | {k.lower() for k in self.headers.keys()})
            answer = len(upload["data"])
            if self.query("forget", 0) and upload["patches"] == 2 and not upload["forgot"]:
                upload["forgot"] = True
                del upload["data"][offset:]  # answered below as received, then lost
        self.answer(204, headers=[("Tus-Resumable", "1.0.0"), ("Upload-Offset", str(answer))])

    def do_POST(self):
        if self.common():
            return
        if urlparse(self.path).path == "/echo":
            return self.echo()
        self.answer(404)

    do_PUT = do_POST
    do_DELETE = do_POST

    def echo(self):
        digest = hashlib.sha256()
        head = bytearray()
        total = [0]

        def sink(chunk):
            digest.update(chunk)
            total[0] += len(chunk)
            if len(head) < 65536:
                head.extend(chunk[: 65536 - len(head)])

        self.read_body(sink)
        body = json.dumps({
            "method": self.command, "content_type": self.headers.get("Content-Type"), "length": total[0],
            "sha256": digest.hexdigest(), "body": head.decode("utf-8", "replace") if total[0] <= 4096 else None,
            "headers": {k.lower(): v for k, v in self.headers.items()},
        }).encode()
        self.answer(200, body, [("Content-Type", "application/json")])


def main():
    # A parent that blocks signals (a test runner's thread) must not make SIGTERM ineffective.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signal.valid_signals())
    parser = argparse.ArgumentParser(description="scripted misbehaving HTTP server for tests")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"badserver listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
