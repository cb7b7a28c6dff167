"""A generated video seen by a moving camera, for BoT-SORT's global motion compensation: the same shapes and
paths as make_tracking_video.py, drawn on a textured world larger than the picture, and a camera that pans,
turns a little and zooms in over the video (a similarity transform per frame, as estimateAffinePartial2D
models it).

Every frame is a pure function of the frame number. Writes an H.264 MP4 made by ffmpeg from the frames, and the
truth: each object's visible box per frame with its identity, and the camera's world-to-picture transform.

Usage: python scripts/demo/make_camera_video.py OUT.mp4 TRUTH.json
"""

from __future__ import annotations

import json
import math
import os
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import make_tracking_video as plain  # noqa: E402
import scenes  # noqa: E402

WIDTH, HEIGHT, FRAMES, RATE = plain.WIDTH, plain.HEIGHT, 60, plain.RATE
MARGIN = 90  # the world extends this far beyond the first frame on each side


def world_texture() -> np.ndarray:
    """Grey blocks, discs and bars of many tones: corners for goodFeaturesToTrack to find everywhere."""
    rng = np.random.default_rng(31)
    height, width = HEIGHT + 2 * MARGIN, WIDTH + 2 * MARGIN
    world = np.full((height, width, 3), 190, np.float32)
    world += np.linspace(-25, 25, width, dtype=np.float32)[None, :, None]
    for _ in range(260):
        tone = float(rng.uniform(110, 240))
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        if rng.random() < 0.6:
            w, h = int(rng.integers(6, 40)), int(rng.integers(6, 40))
            cv2.rectangle(world, (x, y), (x + w, y + h), (tone, tone, tone), -1)
        else:
            cv2.circle(world, (x, y), int(rng.integers(4, 18)), (tone, tone * 0.97, tone * 1.02), -1)
    return cv2.GaussianBlur(world, (3, 3), 0.8)


def camera(index: int) -> np.ndarray:
    """The world-to-picture similarity transform of a frame (2×3)."""
    t = index / (FRAMES - 1)
    angle = 0.05 * math.sin(2 * math.pi * t)
    scale = 1.0 + 0.08 * t
    pan = np.array([MARGIN + 60 * t, MARGIN + 35 * math.sin(math.pi * t)])  # the world point at the picture's corner
    c, s = scale * math.cos(angle), scale * math.sin(angle)
    rotation = np.array([[c, -s], [s, c]])
    centre = np.array([WIDTH / 2, HEIGHT / 2])
    # The picture's centre looks at the world point pan + centre; rotation and zoom turn about it.
    offset = centre - rotation @ (pan + centre)
    return np.hstack([rotation, offset[:, None]])


def frame(index: int, world: np.ndarray) -> tuple[np.ndarray, list[dict], np.ndarray]:
    rng = np.random.default_rng([4343, index])
    t = index / (FRAMES - 1)
    shape = world.shape[:2]
    base = world.copy()
    owner = np.full(shape, -1, np.int32)
    masks = []
    for k, (colour, kind, size, path, turn) in enumerate(plain.OBJECTS):
        shape_rng = np.random.default_rng([777, k])
        centre = np.array(path(t), np.float64) + MARGIN
        mask = scenes._mask(kind, centre, size, turn * index, 1.0, shape, shape_rng)
        fill = np.array(scenes.COLOURS[colour], np.float32)
        alpha = mask[..., None]
        base = base * (1 - alpha) + fill[None, None, :] * alpha
        owner[mask > 0.5] = k
        masks.append(mask)
    m = camera(index)
    picture = cv2.warpAffine(base, m, (WIDTH, HEIGHT), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    seen_owner = cv2.warpAffine(owner.astype(np.float32), m, (WIDTH, HEIGHT), flags=cv2.INTER_NEAREST,
                                borderValue=-1).astype(np.int32)  # fmt: skip
    objects = []
    for k, mask in enumerate(masks):
        full = cv2.warpAffine(mask, m, (WIDTH, HEIGHT), flags=cv2.INTER_LINEAR) > 0.5
        visible = seen_owner == k
        if full.sum() < 16 or visible.sum() < 0.35 * full.sum():
            continue
        ys, xs = np.nonzero(visible)
        colour, kind = plain.OBJECTS[k][0], plain.OBJECTS[k][1]
        objects.append({
            "object": k, "label": f"{colour} {kind}",
            "box": [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)],
        })  # fmt: skip
    picture += rng.normal(0, 1.5, picture.shape)
    return np.clip(picture, 0, 255).astype(np.uint8), objects, m


def main() -> None:
    video, truth_path = sys.argv[1], sys.argv[2]
    world = world_texture()
    truth = {"width": WIDTH, "height": HEIGHT, "frame_rate": RATE, "frames": []}
    images = []
    for index in range(FRAMES):
        image, objects, m = frame(index, world)
        images.append(image)
        truth["frames"].append({"frame": index, "objects": objects, "camera": np.round(m, 6).tolist()})
    plain.encode(video, images, crf=24)
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
