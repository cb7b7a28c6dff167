"""A generated video for tracking: the demo model's shapes moving on crossing paths, one passing over another,
one leaving the picture and coming back, two of the same kind crossing, one standing still.

Every frame is a pure function of the frame number (the shapes' paths are fixed below, the background and the
noise seeded), drawn with the scene generator's own shapes (scenes._mask). Writes the frames' PNGs, an H.264
MP4 made by ffmpeg from them, and the truth: each object's visible box per frame with its identity.

Usage: python scripts/demo/make_tracking_video.py OUT.mp4 TRUTH.json
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import scenes  # noqa: E402

WIDTH, HEIGHT, FRAMES, RATE = 416, 320, 72, 12

# (colour, shape, size, path(t) -> centre, turn per frame): t runs over 0…1 through the video.
OBJECTS = [
    ("red", "circle", 64, lambda t: (-30 + 470 * t, 120 + 40 * t), 0.0),
    ("blue", "square", 60, lambda t: (440 - 470 * t, 210 - 90 * t), 0.02),  # crosses the red circle, drawn over it
    ("yellow", "triangle", 56, lambda t: (330 + 260 * math.sin(math.pi * t * 1.4), 60), 0.03),  # leaves right, returns
    ("green", "star", 58, lambda t: (70, 20 + 300 * t), 0.05),
    ("green", "star", 58, lambda t: (70 + 250 * t, 280 - 200 * t), -0.04),  # crosses the other green star
    ("purple", "heart", 60, lambda t: (250, 270), 0.0),  # stands still
]


def background(rng: np.random.Generator) -> np.ndarray:
    base = np.full((HEIGHT, WIDTH, 3), 205, np.float32)
    base += np.linspace(-20, 20, WIDTH, dtype=np.float32)[None, :, None]
    return base


def frame(index: int, still: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    rng = np.random.default_rng([4242, index])
    t = index / (FRAMES - 1)
    base = still.copy()
    owner = np.full((HEIGHT, WIDTH), -1, np.int32)
    masks = []
    for k, (colour, shape, size, path, turn) in enumerate(OBJECTS):
        shape_rng = np.random.default_rng([777, k])  # a star's inner radius stays the same from frame to frame
        centre = np.array(path(t), np.float64)
        mask = scenes._mask(shape, centre, size, turn * index, 1.0, (HEIGHT, WIDTH), shape_rng)
        fill = np.array(scenes.COLOURS[colour], np.float32)
        alpha = mask[..., None]
        base = base * (1 - alpha) + fill[None, None, :] * alpha
        owner[mask > 0.5] = k
        masks.append(mask)
    objects = []
    for k, mask in enumerate(masks):
        full = mask > 0.5
        visible = owner == k
        if full.sum() < 16 or visible.sum() < 0.35 * full.sum():
            continue
        ys, xs = np.nonzero(visible)
        colour, shape = OBJECTS[k][0], OBJECTS[k][1]
        objects.append({
            "object": k, "label": f"{colour} {shape}",
            "box": [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)],
        })  # fmt: skip
    base += rng.normal(0, 2, base.shape)
    return np.clip(base, 0, 255).astype(np.uint8), objects


def encode(video: str, images: list[np.ndarray], crf: int) -> None:
    """The frames (BGR) as an H.264 MP4 at RATE, through lossless PNGs and ffmpeg."""
    with tempfile.TemporaryDirectory() as work:
        for index, image in enumerate(images):
            cv2.imwrite(os.path.join(work, f"{index:04d}.png"), image)
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-framerate", str(RATE), "-i", os.path.join(work, "%04d.png"),
             "-c:v", "libx264", "-preset", "veryslow", "-crf", str(crf), "-pix_fmt", "yuv420p", "-g", "24", video],
            check=True,
        )  # fmt: skip


def main() -> None:
    video, truth_path = sys.argv[1], sys.argv[2]
    still = background(np.random.default_rng(1))
    truth = {"width": WIDTH, "height": HEIGHT, "frame_rate": RATE, "frames": []}
    images = []
    for index in range(FRAMES):
        image, objects = frame(index, still)
        images.append(image)
        truth["frames"].append({"frame": index, "objects": objects})
    encode(video, images, crf=26)
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
