#!/usr/bin/env python3
"""`lookout index` photos/s with each whole-photo tower (issue 52), the demo detector (n) finding the regions.

    swift build -c release --product lookout
    python3 scripts/bench/index_towers.py [--rounds 2] [--towers WORK]

Indexes examples/scenes (24 photos, 240–1120 px) into a fresh SQLite file per run, on all cores (lanes), with:
no tower (`--no-image-model`, regions only), the demo's CLIP tower (the default), the demo's multilingual SigLIP
(`--image-model multilingual`), and, when scripts/bench/towers.py has made them in WORK (default .build/towers),
full-size open_clip ViT-B-32 and SigLIP base B-16 with random weights. Prints what `lookout index` reports
(photos/s computed) per run; the tower's own share is the difference from the regions-only rate.
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--towers", default=os.path.join(ROOT, ".build", "towers"))
    args = parser.parse_args()
    runs = [("regions only", ["--no-image-model"]), ("demo CLIP tower", []),
            ("demo multilingual SigLIP", ["--image-model", "multilingual"])]
    for name, folder in (("open_clip ViT-B-32 (full size)", "openclip-b32"), ("SigLIP B-16 (full size)", "siglip-b16")):
        if os.path.isdir(os.path.join(args.towers, folder)):
            runs.append((name, ["--image-model", os.path.join(args.towers, folder)]))
    photos = os.path.join(ROOT, "examples", "scenes")
    for round_ in range(args.rounds):
        for name, extra in runs:
            work = tempfile.mkdtemp(prefix="lookout-index-bench-")
            done = subprocess.run([LOOKOUT, "index", photos, "--db", os.path.join(work, "index.sqlite"), "--plain",
                                   *extra], capture_output=True, text=True)
            shutil.rmtree(work)
            if done.returncode != 0:
                print(f"{name}: failed: {done.stderr.strip()}")
                continue
            rate = re.search(r"([0-9.]+) photos/s computed", done.stdout + done.stderr)
            print(f"round {round_ + 1}  {name:34s} {rate.group(1) if rate else '?':>6s} photos/s", flush=True)


if __name__ == "__main__":
    main()
