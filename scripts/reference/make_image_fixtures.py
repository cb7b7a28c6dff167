#!/usr/bin/env python3
"""Reference letterboxing: ultralytics `LetterBox` (cv2.resize INTER_LINEAR + copyMakeBorder 114) on
random BGR images of awkward sizes, auto=True and auto=False, and bare cv2.resize up and down.

Writes Tests/Fixtures/image/letterbox.safetensors (U8 tensors) with metadata listing each case.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    from safetensors.torch import save_file
    from ultralytics.data.augment import LetterBox

    rng = np.random.default_rng(8)
    tensors: dict[str, torch.Tensor] = {}
    cases = []
    sizes = [(72, 128), (108, 192), (48, 64), (75, 100), (67, 103), (85, 128), (20, 7), (160, 160), (33, 517 // 4), (1, 9)]
    for index, (h, w) in enumerate(sizes):
        # Smooth content plus noise, so that interpolation weights matter.
        yy, xx = np.mgrid[0:h, 0:w]
        base = (np.stack([xx * 255 / max(w - 1, 1), yy * 255 / max(h - 1, 1), (xx + yy) % 256], -1)).astype(np.float64)
        image = np.clip(base + rng.normal(0, 40, (h, w, 3)), 0, 255).astype(np.uint8)
        tensors[f"image{index}"] = torch.from_numpy(image)
        for size, auto in [(128, True), (128, False), (96, True)]:
            boxed = LetterBox((size, size), auto=auto, stride=32)(image=image.copy())
            name = f"image{index}_letterbox{size}_{'auto' if auto else 'square'}"
            tensors[name] = torch.from_numpy(np.ascontiguousarray(boxed))
            cases.append({"image": f"image{index}", "size": size, "auto": auto, "output": name})
    for index, (h, w, th, tw) in enumerate([(50, 70, 131, 97), (120, 160, 41, 33), (64, 64, 32, 32), (7, 641, 13, 639)]):
        image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        tensors[f"resize{index}"] = torch.from_numpy(image)
        tensors[f"resize{index}_out"] = torch.from_numpy(cv2.resize(image, (tw, th), interpolation=cv2.INTER_LINEAR))
        cases.append({"image": f"resize{index}", "width": tw, "height": th, "output": f"resize{index}_out"})
    out = os.path.join(ROOT, "Tests", "Fixtures", "image")
    os.makedirs(out, exist_ok=True)
    save_file(tensors, os.path.join(out, "letterbox.safetensors"),
              metadata={"cases": json.dumps(cases), "opencv": cv2.__version__})
    print(f"{len(cases)} cases, opencv {cv2.__version__}")


if __name__ == "__main__":
    main()
