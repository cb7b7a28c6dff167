#!/usr/bin/env python3
"""CLIP text-encoder benchmark, Lookout and PyTorch side by side on the same weights (for BENCHMARKS.md).

    swift build -c release && ~/lookout-ref/bin/python scripts/bench/text_encoder.py [/tmp/lookout-full-clip]

Uses the full-size random ViT-B/32 that `scripts/check-full-clip` (or make_text_encoder_fixtures.py --full)
writes. PyTorch runs the reference path: clip.load on CPU (fp32 with fp16-rounded weights), 2 threads,
ids padded to 77 as clip.tokenize gives them.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402

import clip  # noqa: E402
import torch  # noqa: E402



def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lookout-full-clip"
    model_path = os.path.join(directory, "ViT-B-32-random.pt")
    subprocess.run([os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "text", "--model", model_path, "--root", ROOT], check=True)

    torch.set_num_threads(2)
    model, _ = clip.load(model_path, device="cpu", jit=False)
    model.eval()
    coco = [json.loads(line)["text"] for line in open(os.path.join(
        ROOT, "Tests", "LookoutTokenizerTests", "Fixtures", "clip_tokenizer_golden.jsonl")) if json.loads(line)["category"] == "coco"]
    one = clip.tokenize(["red car"], truncate=True)
    many = clip.tokenize(coco, truncate=True)
    with torch.no_grad():
        print(f"PyTorch {torch.__version__} (2 threads) encode_text \"red car\" (77 positions): "
              f"median {median_ms(lambda: model.encode_text(one), 10):.1f} ms")
        print(f"PyTorch encode_text {len(coco)} COCO names (77 positions each): "
              f"median {median_ms(lambda: model.encode_text(many), 3):.1f} ms")


if __name__ == "__main__":
    main()
