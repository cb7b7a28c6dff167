#!/usr/bin/env bash
# Detect speed of two lookout binaries, alternating in one run (issue 50's before/after check): the median
# total_ms of one-lane detections of astronaut.jpg at 640 with 3 queries, the demo model (n) and the random s.
#   scripts/bench/before-after.sh BEFORE_BINARY AFTER_BINARY [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
before=${1:?usage: scripts/bench/before-after.sh BEFORE AFTER [ROUNDS]} after=${2:?usage} rounds=${3:-5}
median() { python3 -c 'import sys,json; t=sorted(json.loads(l)["timings"]["total_ms"] for l in sys.stdin if l.strip())[1:]; print(t[len(t)//2])'; }
photos() { for _ in $(seq "$1"); do echo examples/photos/astronaut.jpg; done; }
demo() { "$1" detect $(photos 12) -q "person, flag, helmet" --json --lanes 1 2>/dev/null | median; }
s() {
    "$1" detect --detector Tests/Fixtures/s-scale/yolov8s-worldv2-random.pt --text-model Models/demo/text-encoder.safetensors \
        $(photos 8) -q "person, flag, helmet" --json --lanes 1 2>/dev/null | median
}
for round in $(seq "$rounds"); do
    echo "round $round: demo before $(demo "$before") ms, after $(demo "$after") ms; s before $(s "$before") ms, after $(s "$after") ms"
done
