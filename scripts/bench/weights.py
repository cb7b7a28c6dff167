#!/usr/bin/env python3
"""Weight-file opening benchmark, Lookout and PyTorch/safetensors side by side (numbers for BENCHMARKS.md).

    swift build -c release && ~/lookout-ref/bin/python scripts/bench/weights.py

Makes a random-weight yolov8s-worldv2.pt with ultralytics (the released architecture and format) under
/tmp/lookout-bench, converts it with `lookout models convert`, then times opening both files.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402

import torch  # noqa: E402

WORK = "/tmp/lookout-bench"
LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")



def peak_kb(command):
    result = subprocess.run(["/usr/bin/time", "-f", "%M"] + command, capture_output=True, text=True, check=True)
    return int(result.stderr.strip().splitlines()[-1])


def main():
    os.makedirs(WORK, exist_ok=True)
    pt = os.path.join(WORK, "yolov8s-worldv2.pt")
    st = os.path.join(WORK, "yolov8s-worldv2.safetensors")
    if not os.path.exists(pt):
        from ultralytics import YOLOWorld
        torch.manual_seed(0)
        YOLOWorld("yolov8s-worldv2.yaml").save(pt)
    subprocess.run([LOOKOUT, "models", "convert", pt, "-o", st], check=True, stdout=subprocess.DEVNULL)
    print(f"files: {os.path.getsize(pt):,} B (.pt, fp16), {os.path.getsize(st):,} B (canonical safetensors, F32)")
    subprocess.run([os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "weights", st, pt], check=True)
    print(f"peak RSS, lookout models inspect .pt: {peak_kb([LOOKOUT, 'models', 'inspect', pt]) / 1024:.1f} MB; "
          f"safetensors: {peak_kb([LOOKOUT, 'models', 'inspect', st]) / 1024:.1f} MB")

    from safetensors import safe_open
    print(f"torch.load(.pt, weights_only=False): median {median_ms(lambda: torch.load(pt, map_location='cpu', weights_only=False), 5):.1f} ms")

    def read_safetensors():
        with safe_open(st, "pt") as handle:
            for key in handle.keys():
                handle.get_tensor(key)
    print(f"safetensors safe_open + every tensor: median {median_ms(read_safetensors, 5):.1f} ms")
    print(f"safetensors safe_open (keys only): median {median_ms(lambda: list(safe_open(st, 'pt').keys()), 10):.2f} ms")


if __name__ == "__main__":
    main()
