#!/usr/bin/env python3
"""`lookout index` on the GPU machine (issue 51): yolov8s-worldv2 and OpenAI's ViT-B/32 image tower (random weights
in the released shapes, made here with PyTorch as scripts/bench/gpu.py and gpu_towers.py make them) over a folder
of 12-megapixel JPEG files, photos/s as the command reports them, on the GPU and on the host's cores.

    scripts/device/bundle                                   # here: the bundle with lookout and lookout-gpu-check
    python3 scripts/bench/gpu_index.py OUT [--photos 1024] [--size 4000x3000] [--batches-only] [--sync block]

- The photos: `lookout-gpu-check --make-photos` writes COUNT distinct JPEGs of 4000×3000 (or `--size`; quality 92,
  the example photos resized with noise added) to /tmp; they are then in the page cache, so the runs read them
  from memory.
- `--sync MODES`: the runs of each photo alone again with each `LOOKOUT_CUDA_SYNC` mode (how a thread waits for
  the GPU: the driver's default spins on its core, which may take the cores the lanes decode on).
- The text tower is the demo's (its embeddings are 512 wide, as CLIP ViT-B/32's): it embeds the index's classes
  (`--classes coco`, the 80 names) once, and does not run on the photos, so its size does not change what is timed.
- Each run indexes the whole folder into a new SQLite file: the whole command, decode to stored rows, with
  `--timings` (each stage's seconds summed over the lanes).
  `--device cuda` in fp16 with `--fast-decode` (JPEGs decoded at 1/4, the smallest DCT scale that keeps 640
  pixels on the long side) on 16 lanes with each photo alone (`--batch 1`) and on 16, 32 and 48 lanes with the
  GPU's batches (the photos the lanes have decoded computed together, `--batch 32`); the regions of the two 16-lane
  runs compared photo by photo; the detector alone; whole decodes with and without batches; fp32; and
  `--device cpu` (16 lanes of one thread) on the first photos alone, for the host's own rate.

Writes OUT/index.txt (and prints it).
"""
import argparse
import os
import re
import shutil
import sqlite3
import struct
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
    parser.add_argument("--size", default="4000x3000", help="the photos' width and height (WxH)")
    parser.add_argument("--sync", default="",
                        help="also each photo alone on 16 and 32 lanes with these LOOKOUT_CUDA_SYNC modes "
                             "(comma-separated: spin, yield, block), after the default runs")
    parser.add_argument("--batches-only", action="store_true",
                        help="only each photo alone and in batches, on 16 and 32 lanes, whole decodes (for photos "
                             "small enough that decoding does not bound the lanes)")
    args = parser.parse_args()
    width, height = (int(side) for side in args.size.split("x"))
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
        made = subprocess.run([os.path.join(BUNDLE, "lookout-gpu-check"), "--make-photos", folder, str(count),
                               str(width), str(height)],
                              cwd=ROOT, env=environment, capture_output=True, text=True)
        say(f"{(made.stdout + made.stderr).strip()} ({time.time() - started:.1f} s)")

    def index(label, folder, *extra, database="/tmp/lookout-index-bench.sqlite", sync=None):
        """`sync`: LOOKOUT_CUDA_SYNC for this run (how its threads wait for the GPU; None: the driver's choice)."""
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(database + suffix):
                os.remove(database + suffix)
        command = [os.path.join(BUNDLE, "lookout"), "index", folder, "--db", database, "--plain",
                   "--detector", detector, "--text-model", "Models/demo/text-encoder.safetensors", "--classes", "coco",
                   "--timings", *extra]
        started = time.time()
        run_environment = dict(environment, **({"LOOKOUT_CUDA_SYNC": sync} if sync else {}))
        if sync:
            label += f", LOOKOUT_CUDA_SYNC={sync}"
        result = subprocess.run(command, cwd=ROOT, env=run_environment, capture_output=True, text=True)
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
            batches = re.search(r"the GPU detected .*", output)
            if batches:
                say("    " + batches.group(0))

    def regions(database):
        """Each photo's regions: (box, score) of each, by content hash."""
        found = {}
        with sqlite3.connect(database) as connection:
            for digest, blob in connection.execute("SELECT hash, regions FROM images"):
                count = struct.unpack_from("<I", blob, 0)[0] & 0x7FFFFFFF
                size = (len(blob) - 4) // max(count, 1)
                found[digest] = [(struct.unpack_from("<4f", blob, 4 + i * size),
                                  struct.unpack_from("<f", blob, 4 + i * size + 16)[0]) for i in range(count)]
        return found

    def compare(label, alone, together):
        """Each photo's regions computed in the GPU's batches against those computed alone."""
        try:
            a, b = regions(alone), regions(together)
        except sqlite3.Error as error:  # a run that failed made no index
            say(f"{label}: not compared ({error})")
            return
        shared = sorted(set(a) & set(b))
        box, score, same = [], [], 0
        for digest in shared:
            same += len(a[digest]) == len(b[digest])
            # Random weights score many anchors nearly alike, so two regions may trade places: each of the first 8
            # is matched with the nearest region the other run kept.
            for box_a, score_a in a[digest][:8]:
                if not b[digest]:
                    continue
                distance, score_b = min((max(abs(x - y) for x, y in zip(box_a, box_b)), score_b)
                                        for box_b, score_b in b[digest])
                box.append(distance)
                score.append(abs(score_a - score_b))
        box.sort()
        score.sort()
        if not box:
            say(f"{label}: no photos in both indexes")
            return
        say(f"{label}: {len(shared)} photos in both, {same} with as many regions; the first 8 regions' boxes (each against "
            f"the nearest the other run kept) within "
            f"{box[-1]:.4f} px (median {box[len(box) // 2]:.2e}, 99th percentile {box[int(0.99 * (len(box) - 1))]:.4f}), "
            f"their scores within {score[-1]:.2e}")

    gpu, _ = folders["gpu"]
    cpu, _ = folders["cpu"]
    alone, together = "/tmp/lookout-index-alone.sqlite", "/tmp/lookout-index-together.sqlite"
    if args.batches_only:
        for lanes in (16, 32):
            for batch in ("1", "32"):
                index(f"GPU fp16, {lanes} lanes, detector and tower, whole decode, --batch {batch}", gpu,
                      "--image-model", tower, "--device", "cuda", "--precision", "fp16", "--lanes", str(lanes),
                      "--batch", batch, **({"database": alone if batch == "1" else together} if lanes == 16 else {}))
        compare("fp16 regions in batches against each photo alone (16 lanes)", alone, together)
        for sync in filter(None, args.sync.split(",")):
            for lanes in (16, 32):
                index(f"GPU fp16, {lanes} lanes, detector and tower, whole decode, --batch 1", gpu, "--image-model",
                      tower, "--device", "cuda", "--precision", "fp16", "--lanes", str(lanes), "--batch", "1",
                      sync=sync)
        with open(os.path.join(args.out, "index.txt"), "w") as file:
            file.write("\n".join(lines) + "\n")
        return
    index("GPU fp16, 16 lanes, detector and tower, --fast-decode, each photo alone (--batch 1)", gpu, "--image-model",
          tower, "--device", "cuda", "--precision", "fp16", "--lanes", "16", "--fast-decode", "--batch", "1",
          database=alone)
    for lanes in (16, 32, 48):
        index(f"GPU fp16, {lanes} lanes, detector and tower, --fast-decode, batches (--batch 32)", gpu,
              "--image-model", tower, "--device", "cuda", "--precision", "fp16", "--lanes", str(lanes),
              "--fast-decode", "--batch", "32", **({"database": together} if lanes == 16 else {}))
    compare("fp16 regions in batches against each photo alone (--fast-decode, 16 lanes)", alone, together)
    index("GPU fp16, 32 lanes, detector only, --fast-decode, batches", gpu, "--no-image-model", "--device", "cuda",
          "--precision", "fp16", "--lanes", "32", "--fast-decode", "--batch", "32")
    for batch in ("1", "32"):
        index(f"GPU fp16, 32 lanes, detector and tower, whole decode, --batch {batch}", gpu, "--image-model", tower,
              "--device", "cuda", "--precision", "fp16", "--lanes", "32", "--batch", batch)
    index("GPU fp32, 32 lanes, detector and tower, --fast-decode, batches", gpu, "--image-model", tower, "--device",
          "cuda", "--precision", "fp32", "--lanes", "32", "--fast-decode", "--batch", "32")
    for sync in filter(None, args.sync.split(",")):
        index("GPU fp16, 16 lanes, detector and tower, --fast-decode, each photo alone (--batch 1)", gpu,
              "--image-model", tower, "--device", "cuda", "--precision", "fp16", "--lanes", "16", "--fast-decode",
              "--batch", "1", sync=sync)
    index("CPU fp32, 16 lanes, detector and tower", cpu, "--image-model", tower, "--device", "cpu", "--lanes", "16")
    with open(os.path.join(args.out, "index.txt"), "w") as file:
        file.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
