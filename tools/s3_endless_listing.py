#!/usr/bin/env python3
"""An S3 endpoint whose ListObjectsV2 never ends, for the s3 plugin's listing bounds.

    python3 tools/s3_endless_listing.py --mode same-token|new-tokens|empty-pages

same-token: every page is truncated and hands back the token it was sent ("A" first);
new-tokens: every page is truncated, with 1,000 new keys and a new token; empty-pages: every
page is truncated, with no key and a new token. Every request is counted; GET /count answers
how many listing requests came. Prints "listening on 127.0.0.1:PORT". Loopback only; standard
library only.
"""

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["same-token", "new-tokens", "empty-pages"], required=True)
    args = parser.parse_args()
    lock = threading.Lock()
    state = {"pages": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def send(self, status, body):
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urlsplit(self.path)
            if url.path == "/count":
                self.send(200, str(state["pages"]).encode())
                return
            query = parse_qs(url.query)
            with lock:
                state["pages"] += 1
                page = state["pages"]
            sent = query.get("continuation-token", [None])[0]
            if args.mode == "same-token":
                token, keys = sent or "A", [f"p/same{page}"]
            elif args.mode == "new-tokens":
                token, keys = f"T{page}", [f"p/{page:09d}-{i:04d}" for i in range(1000)]
            else:
                token, keys = f"T{page}", []
            contents = "".join(f"<Contents><Key>{k}</Key><Size>1</Size><ETag>\"e\"</ETag></Contents>" for k in keys)
            body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>orc-bucket</Name>'
                    f"<KeyCount>{len(keys)}</KeyCount><IsTruncated>true</IsTruncated>{contents}"
                    f"<NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>").encode()
            self.send(200, body)

        def do_POST(self):  # DeleteObjects: every key deleted (quiet mode lists none)
            length = int(self.headers.get("Content-Length") or 0)
            while length > 0:
                length -= len(self.rfile.read(min(length, 1 << 20)))
            self.send(200, b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult></DeleteResult>')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
