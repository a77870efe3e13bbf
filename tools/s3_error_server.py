#!/usr/bin/env python3
"""An S3 endpoint that answers every request with one error, for the s3 plugin's error tests.

    python3 tools/s3_error_server.py --status 503 --code SlowDown [--retry-after 1] [--skew 930]

The body is S3's XML error document with that Code (and, with --skew N, a RequestTime N seconds
after the ServerTime, as RequestTimeTooSkewed carries). Prints "listening on 127.0.0.1:PORT".
Loopback only; standard library only.
"""

import argparse
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, required=True)
    parser.add_argument("--code", required=True)
    parser.add_argument("--retry-after")
    parser.add_argument("--skew", type=int)
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            while length > 0:
                length -= len(self.rfile.read(min(length, 1 << 20)))
            extra = ""
            if args.skew is not None:
                now = time.time()
                fmt = "%Y-%m-%dT%H:%M:%SZ"
                extra = (f"<RequestTime>{time.strftime(fmt, time.gmtime(now + args.skew))}</RequestTime>"
                         f"<ServerTime>{time.strftime(fmt, time.gmtime(now))}</ServerTime>")
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{args.code}</Code>'
                    f"<Message>scripted {args.code}</Message>{extra}<RequestId>1</RequestId></Error>").encode()
            self.send_response(args.status)
            self.send_header("Content-Type", "application/xml")
            if args.retry_after:
                self.send_header("Retry-After", args.retry_after)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
