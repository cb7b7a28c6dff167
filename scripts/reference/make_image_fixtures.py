#!/usr/bin/env python3
"""Reference image handling.

1. Letterboxing: ultralytics `LetterBox` (cv2.resize INTER_LINEAR + copyMakeBorder 114) on random BGR images
   of awkward sizes, auto=True and auto=False, and bare cv2.resize up and down
   → Tests/Fixtures/image/letterbox.safetensors (U8 tensors; metadata lists each case).
2. Decoding: image files in every layout Lookout must read (JPEG colour/progressive/gray/CMYK, EXIF
   orientations 1–8, PNG colour/gray/RGBA/16-bit/palette), cut from examples/photos/astronaut.jpg, plus
   truncated and non-image files → Tests/Fixtures/image/files/, and what `cv2.imread(path, IMREAD_COLOR)`
   gives for each → Tests/Fixtures/image/decoded.safetensors.
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


def decode_files() -> None:
    from PIL import Image as PILImage
    from safetensors.numpy import save_file

    out = os.path.join(ROOT, "Tests", "Fixtures", "image", "files")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(9)
    base = cv2.imread(os.path.join(ROOT, "examples", "photos", "astronaut.jpg"))[60:156, 180:308]  # 96×128 BGR
    rgb = np.ascontiguousarray(base[:, :, ::-1])
    cv2.imwrite(f"{out}/color.jpg", base, [cv2.IMWRITE_JPEG_QUALITY, 90])
    cv2.imwrite(f"{out}/progressive.jpg", base, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    cv2.imwrite(f"{out}/gray.jpg", cv2.cvtColor(base, cv2.COLOR_BGR2GRAY))
    PILImage.fromarray(rgb).convert("CMYK").save(f"{out}/cmyk.jpg", quality=90)
    cv2.imwrite(f"{out}/color.png", base)
    cv2.imwrite(f"{out}/gray.png", cv2.cvtColor(base, cv2.COLOR_BGR2GRAY))
    rgba = np.dstack([rgb, rng.integers(0, 256, base.shape[:2], dtype=np.uint8)])
    PILImage.fromarray(rgba, "RGBA").save(f"{out}/rgba.png")
    sixteen = base.astype(np.uint16) * 257 + rng.integers(0, 256, base.shape, dtype=np.uint16)
    cv2.imwrite(f"{out}/sixteen.png", sixteen.astype(np.uint16))
    PILImage.fromarray(rgb).convert("P", palette=PILImage.ADAPTIVE, colors=16).save(f"{out}/palette.png")
    for orientation in range(1, 9):
        image = PILImage.fromarray(np.ascontiguousarray(rgb[:48, :80]))
        exif = image.getexif()
        exif[0x0112] = orientation
        image.save(f"{out}/orient{orientation}.jpg", quality=92, exif=exif.tobytes())
    data = open(f"{out}/color.jpg", "rb").read()
    open(f"{out}/truncated.jpg", "wb").write(data[: len(data) // 2])
    data = open(f"{out}/color.png", "rb").read()
    open(f"{out}/truncated.png", "wb").write(data[: len(data) // 2])
    open(f"{out}/not-an-image.jpg", "wb").write(b"hello, this is text")
    expected = {}
    for name in sorted(os.listdir(out)):
        if name.startswith("truncated"):
            continue  # OpenCV decodes a cut JPEG with a warning; Lookout refuses it
        decoded = cv2.imread(f"{out}/{name}", cv2.IMREAD_COLOR)
        if decoded is not None:
            expected[name] = np.ascontiguousarray(decoded)
    save_file(expected, os.path.join(ROOT, "Tests", "Fixtures", "image", "decoded.safetensors"),
              metadata={"opencv": cv2.__version__, "source": "cv2.imread(path, IMREAD_COLOR)"})
    print(f"decoded {len(expected)} files")


if __name__ == "__main__":
    main()
    decode_files()
