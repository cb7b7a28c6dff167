#!/usr/bin/env python3
"""Load on `lookout serve`: detect and re-query at several concurrencies, as a client on this machine sees it.

    python3 scripts/bench/serve_load.py LOOKOUT [--seconds 60] [--concurrency 1,4,16] [--endpoints detect,requery]
                                        [--feature-memory 64]

Starts `LOOKOUT serve --port 0` (the demo model unless --model DIR is given after `--`), then for each
endpoint and concurrency runs that many client threads for the given seconds, each on its own keep-alive
connection, as fast as answers come:

  detect    POST /api/v1/detect with an example scene; every request's bytes differ (a counter appended
            after the JPEG's end, which decoders ignore), so every request decodes and runs the backbone and
            keeps new features: the feature store fills and evicts, which is what its bound is for.
  requery   POST /api/v1/images/{id}/detect on one photo sent once, the queries changing every request.
  search    GET /api/v1/search on the index given after `--` (--db …), the query changing every request.

Prints requests/s, latency percentiles, status counts and the server's resident memory (VmRSS) before and
after each run, as a Markdown table. With --pg URL, also the most connections the server had from Lookout
during each run (pg_stat_activity, sampled through psql every 50 ms). Standard library only.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEARCHES = ["red circle", "green star", "blue square", "yellow triangle", "ring", "heart", "cross", "shape"]
QUERY_SETS = [
    ["red star", "ring", "blue shape"],
    ["star", "circle"],
    ["green square", "yellow shape", "heart"],
    ["black cross", "white circle", "triangle", "orange shape"],
]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[rank]


class Client:
    def __init__(self, port: int):
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def post(self, path: str, body: bytes | None, content_type: str, method: str = "POST") -> tuple[int, bytes]:
        for attempt in range(2):
            try:
                headers = {"Content-Type": content_type} if body is not None else {}
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise RuntimeError("unreachable")


class ConnectionSampler:
    """Counts Lookout's connections to a PostgreSQL server (pg_stat_activity) every 50 ms on a thread."""

    def __init__(self, url: str, psql: str):
        self.url, self.psql, self.most, self.done = url, psql, 0, False
        self.thread = threading.Thread(target=self.sample)
        self.thread.start()

    def sample(self) -> None:
        while not self.done:
            out = subprocess.run(
                [self.psql, self.url, "-qAtX", "-c",
                 "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lookout'"],
                capture_output=True, text=True).stdout.strip()
            if out.isdigit():
                self.most = max(self.most, int(out))
            time.sleep(0.05)

    def stop(self) -> int:
        self.done = True
        self.thread.join()
        return self.most


def run(port: int, endpoint: str, concurrency: int, seconds: float, photo: bytes, image_id: str):
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    counter = [0]
    deadline = time.monotonic() + seconds

    def worker() -> None:
        client = Client(port)
        while time.monotonic() < deadline:
            with lock:
                counter[0] += 1
                n = counter[0]
            method = "POST"
            if endpoint == "search":
                words = SEARCHES[n % len(SEARCHES)].replace(" ", "%20")
                body, path, kind, method = None, f"/api/v1/search?q={words}&top=10", "", "GET"
            elif endpoint == "detect":
                body = photo + n.to_bytes(8, "little")  # after the JPEG's end: another image id, same pixels
                path = "/api/v1/detect?q=red%20star,ring,blue%20shape"
                kind = "image/jpeg"
            else:
                body = json.dumps({"queries": QUERY_SETS[n % len(QUERY_SETS)], "conf": 0.25}).encode()
                path = f"/api/v1/images/{image_id}/detect"
                kind = "application/json"
            start = time.monotonic()
            status, _ = client.post(path, body, kind, method)
            elapsed = time.monotonic() - start
            with lock:
                latencies.append(elapsed)
                statuses[status] = statuses.get(status, 0) + 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    return latencies, statuses, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lookout")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--endpoints", default="detect,requery")
    parser.add_argument("--feature-memory", type=int, default=64, help="the server's --feature-memory, MiB")
    parser.add_argument("--photo", default=os.path.join(ROOT, "examples", "scenes", "scene-0003.jpg"))
    parser.add_argument("--pg", help="a PostgreSQL URL whose Lookout connections are counted during each run")
    parser.add_argument("--psql", default="psql")
    arguments, serve_arguments = sys.argv[1:], []
    if "--" in arguments:  # what follows goes to lookout serve
        cut = arguments.index("--")
        arguments, serve_arguments = arguments[:cut], arguments[cut + 1:]
    options = parser.parse_args(arguments)
    options.serve_arguments = serve_arguments
    levels = [int(c) for c in options.concurrency.split(",")]
    photo = open(options.photo, "rb").read()

    server = subprocess.Popen(
        [options.lookout, "serve", "--port", "0", "--feature-memory", str(options.feature_memory),
         "--queue", str(max(levels) + 4), *options.serve_arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if "listening on " not in line:
            sys.exit(f"lookout serve did not start: {line!r} {server.stderr.read()}")
        port = int(line.strip().rstrip("/").rsplit(":", 1)[1])
        warm = Client(port)
        status, body = warm.post("/api/v1/detect?q=star", photo, "image/jpeg")
        if status != 200:
            sys.exit(f"the first detect answered {status}: {body[:200]!r}")
        image_id = json.loads(body)["image_id"]
        for queries in QUERY_SETS:
            warm.post(f"/api/v1/images/{image_id}/detect", json.dumps({"queries": queries}).encode(),
                      "application/json")
        if "search" in options.endpoints:
            for words in SEARCHES:
                status, body = warm.post(f"/api/v1/search?q={words.replace(' ', '%20')}&top=10", None, "", "GET")
                if status != 200:
                    sys.exit(f"the first search answered {status}: {body[:200]!r}")
        started_mib = rss_mib(server.pid)
        print(f"server pid {server.pid}, port {port}; resident after start and warm-up: {started_mib:.0f} MiB; "
              f"feature store bound {options.feature_memory} MiB; {options.seconds:.0f} s per run", flush=True)
        rows = []
        for endpoint in options.endpoints.split(","):
            for concurrency in levels:
                before = rss_mib(server.pid)
                sampler = ConnectionSampler(options.pg, options.psql) if options.pg else None
                latencies, statuses, wall = run(port, endpoint, concurrency, options.seconds, photo, image_id)
                connections = sampler.stop() if sampler else None
                after = rss_mib(server.pid)
                ms = [1000 * v for v in latencies]
                errors = sum(n for s, n in statuses.items() if s >= 500)
                row = (endpoint, concurrency, len(latencies), len(latencies) / wall, percentile(ms, 50),
                       percentile(ms, 95), percentile(ms, 99), statistics.mean(ms) if ms else float("nan"),
                       ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())), errors, before, after,
                       "—" if connections is None else str(connections))
                rows.append(row)
                print(f"{endpoint} c={concurrency}: {row[2]} requests, {row[3]:.1f}/s, p50 {row[4]:.1f} ms, "
                      f"p95 {row[5]:.1f}, p99 {row[6]:.1f}; {row[8]}; RSS {before:.0f} -> {after:.0f} MiB; "
                      f"most PostgreSQL connections {row[12]}", flush=True)
            if endpoint == "detect":  # the re-query photo may have been evicted: send it once more
                status, body = warm.post("/api/v1/detect?q=star", photo, "image/jpeg")
                image_id = json.loads(body)["image_id"]
        print()
        print("| endpoint | concurrency | requests | requests/s | p50 ms | p95 ms | p99 ms | statuses | 5xx "
              "| RSS before → after (MiB) | most PostgreSQL connections |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.1f} | {r[8]} "
                  f"| {r[9]} | {r[10]:.0f} → {r[11]:.0f} | {r[12]} |")
        final = rss_mib(server.pid)
        print(f"\nresident at the end: {final:.0f} MiB (after warm-up {started_mib:.0f} MiB; growth "
              f"{final - started_mib:.0f} MiB against a feature store bound of {options.feature_memory} MiB)")
        if any(r[9] for r in rows):
            sys.exit("some requests got a 5xx answer")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
