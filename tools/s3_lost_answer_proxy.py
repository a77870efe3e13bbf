#!/usr/bin/env python3
"""A reverse proxy for the s3 plugin's tests that loses one answer on purpose.

Every request is forwarded to the target S3 server as it came (signature untouched: the Host
header is kept). The first request whose method and path match --lose (a regex over
"METHOD PATH?QUERY") is forwarded too, so the server acts on it, but its answer is never
delivered: the client's connection is closed instead. That is what a crash, a cut cable or a
kill just after the server acted looks like to the client.

    python3 tools/s3_lost_answer_proxy.py --target 127.0.0.1:9000 --lose '^POST .*uploadId=' [--then-no-such-upload]

With --wrong-checksum, the first matching request's answer is delivered with a wrong
x-amz-checksum-sha256 header (added when the server sent none) instead of being lost: the bytes
arrived whole, the checksum the client is told does not match them.

With --etag VALUE, the first matching request's answer is delivered with its body's
<ETag>...</ETag> element holding VALUE instead (an empty VALUE removes the element): a
CompleteMultipartUpload answer that lies about the object, or says nothing of it.

With --corrupt, the first matching request's body is forwarded with one byte changed (its
headers, signed checksums included, as the client sent them): bytes damaged on the way.

With --answer-header "NAME: VALUE", every answer to a request matching --lose carries that header
(in place of the server's, if it sent one) and nothing is lost: a checksum header the server does
not keep (S3's x-amz-checksum-crc64nvme), right or wrong.

With --headers FILE, each request's method, path and header names (lower-cased, sorted) are
appended to FILE, one request a line: what the client sent, for a test to read.

With --then-no-such-upload, later requests matching --lose are answered 404 NoSuchUpload without
being forwarded, as AWS answers a complete repeated once the upload is gone (moto completes
it again instead).

prints "listening on 127.0.0.1:PORT" once it listens. Loopback only; standard library only.
"""

import argparse
import http.client
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--lose", required=True)
    parser.add_argument("--then-no-such-upload", action="store_true")
    parser.add_argument("--wrong-checksum", action="store_true")
    parser.add_argument("--etag", default=None)
    parser.add_argument("--corrupt", action="store_true")
    parser.add_argument("--headers", default=None)
    parser.add_argument("--answer-header", default=None)
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    pattern = re.compile(args.lose)
    lost = threading.Event()
    added = None
    if args.answer_header:
        name, _, value = args.answer_header.partition(":")
        added = (name.strip().lower(), value.strip())
    logged = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if args.headers:
                names = " ".join(sorted(name.lower() for name in self.headers.keys()))
                with logged, open(args.headers, "a") as log:
                    log.write(f"{self.command} {self.path} {names}\n")
            if args.corrupt and body and not lost.is_set() and pattern.search(f"{self.command} {self.path}"):
                lost.set()
                body = bytes([body[0] ^ 0xFF]) + body[1:]
                sys.stderr.write(f"changed a byte of {self.command} {self.path}\n")
            if args.then_no_such_upload and lost.is_set() and pattern.search(f"{self.command} {self.path}"):
                error = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code>'
                         b'<Message>The specified upload does not exist.</Message></Error>')
                self.send_response(404)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            upstream = http.client.HTTPConnection(host, int(port), timeout=60)
            headers = {name: value for name, value in self.headers.items() if name.lower() not in ("connection", "keep-alive")}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            wrong = None
            extra = added if added and pattern.search(f"{self.command} {self.path}") else None
            if args.etag is not None and not lost.is_set() and pattern.search(f"{self.command} {self.path}"):
                lost.set()
                element = f"<ETag>{args.etag}</ETag>".encode() if args.etag else b""
                payload = re.sub(rb"<ETag>[^<]*</ETag>", lambda _: element, payload, count=1)
            elif args.wrong_checksum and not lost.is_set() and pattern.search(f"{self.command} {self.path}"):
                lost.set()
                wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="  # SHA-256 of nothing sent
            elif not args.corrupt and added is None and not lost.is_set() and pattern.search(f"{self.command} {self.path}"):
                lost.set()
                sys.stderr.write(f"lost the answer to {self.command} {self.path}\n")
                self.close_connection = True
                self.connection.close()
                return
            self.send_response(response.status)
            for name, value in response.getheaders():
                if extra and name.lower() == extra[0]:
                    continue
                if name.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length", "x-amz-checksum-sha256"):
                    self.send_header(name, value)
                elif name.lower() == "x-amz-checksum-sha256" and wrong is None:
                    self.send_header(name, value)
            if wrong is not None:
                self.send_header("x-amz-checksum-sha256", wrong)
            if extra:
                self.send_header(*extra)
            # A HEAD's Content-Length is the object's size: passed through.
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
