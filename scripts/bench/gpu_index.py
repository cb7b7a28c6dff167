#!/usr/bin/env python3
"""`lookout index` on the GPU machine (issue 51): yolov8s-worldv2 and OpenAI's ViT-B/32 image tower (random weights
in the released shapes, made here with PyTorch as scripts/bench/gpu.py and gpu_towers.py make them) over a folder
of 12-megapixel JPEG files, photos/s as the command reports them, on the GPU and on the host's cores.

    scripts/device/bundle                                   # here: the bundle with lookout and lookout-gpu-check
    python3 scripts/bench/gpu_index.py OUT [--photos 1024]  # there, from the repository's root

- The photos: `lookout-gpu-check --make-photos` writes COUNT distinct 4000×3000 JPEGs (quality 92, the example
  photos resized with noise added) to /tmp; they are then in the page cache, so the runs read them from memory.
- The text tower is the demo's (its embeddings are 512 wide, as CLIP ViT-B/32's): it embeds the index's classes
  (`--classes coco`, the 80 names) once, and does not run on the photos, so its size does not change what is timed.
- Each run indexes the whole folder into a new SQLite file: the whole command, decode to stored rows, with
  `--timings` (each stage's seconds summed over the lanes).
  `--device cuda` with fp16 and fp32 and with 16 and 32 lanes (photos computed side by side, each on one host
  thread, sharing the GPU); fp16 with `--fast-decode` (JPEGs decoded at 1/4, the smallest DCT scale that keeps
  640 pixels on the long side); fp16 without the image tower; and `--device cpu` (16 lanes of one thread) on the
  first photos alone, for the host's own rate.

Writes OUT/index.txt (and prints it).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu import random_network, report, save_safetensors  # noqa: E402
from gpu_towers import VisionTower  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLE = os.path.join(ROOT, ".build-device", "bundle")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--photos", type=int, default=1024)
    parser.add_argument("--cpu-photos", type=int, default=64)
    args = parser.parse_args()
    say, lines, card = report(args.out)
    environment = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUNDLE, "lib"))

    detector = "/tmp/yolov8s-worldv2-random.safetensors"
    save_safetensors(random_network("s").state_dict(), detector)
    torch.manual_seed(0)
    tower = "/tmp/clip-vit-b-32-random.safetensors"
    save_safetensors({"visual." + k: v for k, v in VisionTower().eval().state_dict().items()}, tower)

    folders = {"gpu": ("/tmp/photos-12mp", args.photos), "cpu": ("/tmp/photos-12mp-cpu", args.cpu_photos)}
    for folder, count in folders.values():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.time()
        made = subprocess.run([os.path.join(BUNDLE, "lookout-gpu-check"), "--make-photos", folder, str(count)],
                              cwd=ROOT, env=environment, capture_output=True, text=True)
        say(f"{(made.stdout + made.stderr).strip()} ({time.time() - started:.1f} s)")

    def index(label, folder, *extra):
        database = "/tmp/lookout-index-bench.sqlite"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(database + suffix):
                os.remove(database + suffix)
        command = [os.path.join(BUNDLE, "lookout"), "index", folder, "--db", database, "--plain",
                   "--detector", detector, "--text-model", "Models/demo/text-encoder.safetensors", "--classes", "coco",
                   "--timings", *extra]
        started = time.time()
        result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
        wall = time.time() - started
        output = result.stdout + result.stderr
        rate = re.search(r"([0-9.]+) photos/s computed", output)
        indexed = re.search(r"(\d+) photos indexed", output)
        say(f"{label}: exit {result.returncode}, {indexed.group(1) if indexed else '?'} photos, "
            f"{rate.group(1) if rate else '?'} photos/s computed, {wall:.1f} s the whole command "
            f"(`{' '.join(command[1:])}`)")
        if result.returncode != 0 or not rate:
            for line in output.splitlines()[-15:]:
                say("    " + line)
        else:  # `--timings`: each stage's time summed over the lanes
            stages = output[output.find("time by stage"):].splitlines()
            for line in stages[:12]:
                if line.startswith("    ") or line.startswith("time by stage"):
                    say("    " + line.strip())

    gpu, _ = folders["gpu"]
    cpu, _ = folders["cpu"]
    for precision in ("fp16", "fp32"):
        for lanes in (16, 32):
            index(f"GPU {precision}, {lanes} lanes, detector and tower", gpu, "--image-model", tower,
                  "--device", "cuda", "--precision", precision, "--lanes", str(lanes))
    for lanes in (16, 32):
        index(f"GPU fp16, {lanes} lanes, detector and tower, --fast-decode", gpu, "--image-model", tower,
              "--device", "cuda", "--precision", "fp16", "--lanes", str(lanes), "--fast-decode")
    index("GPU fp16, 32 lanes, detector only", gpu, "--no-image-model", "--device", "cuda", "--precision", "fp16",
          "--lanes", "32")
    index("GPU fp16, 32 lanes, detector only, --fast-decode", gpu, "--no-image-model", "--device", "cuda",
          "--precision", "fp16", "--lanes", "32", "--fast-decode")
    index("CPU fp32, 16 lanes, detector and tower", cpu, "--image-model", tower, "--device", "cpu", "--lanes", "16")
    with open(os.path.join(args.out, "index.txt"), "w") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
