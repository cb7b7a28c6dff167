#!/usr/bin/env python3
"""Tokenizer benchmark, Lookout and the reference side by side in one run (numbers for BENCHMARKS.md).

    swift build -c release && ~/lookout-ref/bin/python scripts/bench/tokenizer.py

Measures (median of repeated runs, wall clock):
  - process start to the ids of one query printed: `lookout tokenize` (binary vocabulary cache warm,
    and --no-cache) and `python -c "import clip; clip.tokenize(...)"`;
  - tokenizing LVIS's 1,203 class names inside a running process (Lookout's own benchmark target,
    and `clip.tokenize` in this interpreter).
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")
QUERY = "a photo of a red car"


def wall(command, runs):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main():
    subprocess.run([LOOKOUT, "tokenize", QUERY], check=True, stdout=subprocess.DEVNULL)  # fill the cache
    print(f"process start → ids printed, lookout (cache warm):  {wall([LOOKOUT, 'tokenize', QUERY], 30):7.1f} ms")
    print(f"process start → ids printed, lookout --no-cache:     {wall([LOOKOUT, 'tokenize', '--no-cache', QUERY], 30):7.1f} ms")
    python = [sys.executable, "-c", f"import sys; sys.path.insert(0, {os.path.join(ROOT, 'scripts', 'reference')!r}); "
              f"import reference_env, clip; print(clip.tokenize([{QUERY!r}], truncate=True)[0].tolist())"]
    print(f"process start → ids printed, python clip.tokenize:   {wall(python, 5):7.1f} ms")

    import clip
    lvis = [json.loads(line)["text"] for line in open(os.path.join(ROOT, "Tests", "LookoutTokenizerTests", "Fixtures",
                                                                      "clip_tokenizer_golden.jsonl"))
            if json.loads(line)["category"] == "lvis"]
    samples = []
    for _ in range(10):
        clip.clip._tokenizer.cache = {k: v for k, v in clip.clip._tokenizer.cache.items() if k.startswith("<|")}
        start = time.perf_counter()
        clip.tokenize(lvis, truncate=True)
        samples.append(time.perf_counter() - start)
    print(f"LVIS {len(lvis)} names, python clip.tokenize (BPE cache cleared each run): "
          f"{statistics.median(samples) * 1000:7.1f} ms")
    subprocess.run([os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "tokenizer", "--root", ROOT], check=True)


if __name__ == "__main__":
    main()
