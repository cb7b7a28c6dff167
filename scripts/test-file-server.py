#!/usr/bin/env python3
"""A small HTTPS file server for tests of `lookout models fetch` (standard library only).

    test-file-server.py ROOT [--cert CERT.pem --key KEY.pem] [--truncate FILE:BYTES ...] [--log LOG]
                        [--redirect NAME=URL ...] [--endless NAME ...]

Without --cert it serves plain HTTP (the tests' HLS streams).

Serves ROOT's files on a loopback port (printed as https://127.0.0.1:PORT/ on the first line of standard
output), with HTTP range requests (`Range: bytes=N-`, answered 206). `--truncate FILE:BYTES` cuts the first
transfer of FILE after BYTES bytes (the connection closed while the Content-Length promised more), as a
dropped network would. `--redirect NAME=URL` answers NAME with 302 to URL; `--endless NAME` answers NAME with
a body that never ends (no Content-Length), as a hostile server would. Each request is logged as
`PATH RANGE STATUS` to LOG.
"""
import argparse
import http.server
import os
import ssl
import sys
import threading


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--truncate", action="append", default=[])
    parser.add_argument("--log")
    parser.add_argument("--redirect", action="append", default=[])
    parser.add_argument("--endless", action="append", default=[])
    options = parser.parse_args()
    cuts = {name: int(count) for name, count in (item.rsplit(":", 1) for item in options.truncate)}
    redirects = dict(item.split("=", 1) for item in options.redirect)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

        def record(self, status: int) -> None:
            if options.log:
                with lock, open(options.log, "a") as log:
                    log.write(f"{self.path} {self.headers.get('Range', '-')} {status}\n")

        def do_GET(self) -> None:
            name = self.path.lstrip("/").split("?")[0]
            path = os.path.join(options.root, name)
            if name in redirects:
                self.record(302)
                self.send_response(302)
                self.send_header("Location", redirects[name])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if name in options.endless:
                self.record(200)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                chunk = bytes(1 << 16)
                try:
                    for _ in range(1 << 16):  # 4 GiB at most, then stop (the test's client stops far earlier)
                        self.wfile.write(chunk)
                except OSError:
                    pass
                return
            if "/" in name or not os.path.isfile(path):
                self.record(404)
                body = b"not found\n"
                self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            data = open(path, "rb").read()
            start = 0
            wanted = self.headers.get("Range")
            if wanted and wanted.startswith("bytes=") and wanted.endswith("-"):
                start = int(wanted[6:-1])
                if start >= len(data):
                    self.record(416)
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.record(206)
            else:
                self.send_response(200)
                self.record(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            with lock:
                cut = cuts.pop(name, None)
            if cut is not None:
                self.wfile.write(data[start:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(data[start:])

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if options.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(options.cert, options.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    scheme = "https" if options.cert else "http"
    print(f"{scheme}://127.0.0.1:{server.server_address[1]}/", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
