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

Prints requests/s, latency percentiles, status counts and the server's resident memory (VmRSS) before and
after each run, as a Markdown table. Standard library only.
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

    def post(self, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
        for attempt in range(2):
            try:
                self.connection.request("POST", path, body=body, headers={"Content-Type": content_type})
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                if attempt:
                    raise
        raise RuntimeError("unreachable")


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
            if endpoint == "detect":
                body = photo + n.to_bytes(8, "little")  # after the JPEG's end: another image id, same pixels
                path = "/api/v1/detect?q=red%20star,ring,blue%20shape"
                kind = "image/jpeg"
            else:
                body = json.dumps({"queries": QUERY_SETS[n % len(QUERY_SETS)], "conf": 0.25}).encode()
                path = f"/api/v1/images/{image_id}/detect"
                kind = "application/json"
            start = time.monotonic()
            status, _ = client.post(path, body, kind)
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
    parser.add_argument("serve_arguments", nargs="*", help="more arguments for lookout serve (after --)")
    options = parser.parse_args()
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
        started_mib = rss_mib(server.pid)
        print(f"server pid {server.pid}, port {port}; resident after start and warm-up: {started_mib:.0f} MiB; "
              f"feature store bound {options.feature_memory} MiB; {options.seconds:.0f} s per run", flush=True)
        rows = []
        for endpoint in options.endpoints.split(","):
            for concurrency in levels:
                before = rss_mib(server.pid)
                latencies, statuses, wall = run(port, endpoint, concurrency, options.seconds, photo, image_id)
                after = rss_mib(server.pid)
                ms = [1000 * v for v in latencies]
                errors = sum(n for s, n in statuses.items() if s >= 500)
                row = (endpoint, concurrency, len(latencies), len(latencies) / wall, percentile(ms, 50),
                       percentile(ms, 95), percentile(ms, 99), statistics.mean(ms) if ms else float("nan"),
                       ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())), errors, before, after)
                rows.append(row)
                print(f"{endpoint} c={concurrency}: {row[2]} requests, {row[3]:.1f}/s, p50 {row[4]:.1f} ms, "
                      f"p95 {row[5]:.1f}, p99 {row[6]:.1f}; {row[8]}; RSS {before:.0f} -> {after:.0f} MiB", flush=True)
            if endpoint == "detect":  # the re-query photo may have been evicted: send it once more
                status, body = warm.post("/api/v1/detect?q=star", photo, "image/jpeg")
                image_id = json.loads(body)["image_id"]
        print()
        print("| endpoint | concurrency | requests | requests/s | p50 ms | p95 ms | p99 ms | statuses | 5xx "
              "| RSS before → after (MiB) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.1f} | {r[8]} "
                  f"| {r[9]} | {r[10]:.0f} → {r[11]:.0f} |")
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
