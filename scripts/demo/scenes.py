"""Seeded generator of synthetic scenes for Lookout's embedded demo model.

Every scene is a pure function of (seed, index): the same numbers give the same image and ground truth on any
machine with the same numpy, OpenCV and scikit-image data. A scene holds 1 to 8 coloured shapes (8 shapes ×
10 colours) with random size, rotation, overlap and occlusion, on a plain, textured, cluttered or photographic
background (scikit-image's bundled public-domain photos), at a random size and aspect ratio.

Ground truth per object: colour, shape and the box of its visible pixels. Objects hidden below 35% are dropped
from the truth and stay in the picture as clutter-like partial shapes only when still more than 35% visible.

Usage (writes JPEGs and a truth file):
    python scripts/demo/scenes.py OUT_DIR --count 20 --seed 900000 [--split eval]
"""

from __future__ import annotations

import argparse
import json
import math
import os

import cv2
import numpy as np

SHAPES = ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]
COLOURS = {  # BGR centres; a scene jitters each channel by up to ±18
    "red": (40, 35, 215),
    "orange": (20, 135, 250),
    "yellow": (30, 225, 240),
    "green": (60, 170, 40),
    "blue": (210, 90, 25),
    "purple": (150, 40, 130),
    "pink": (190, 140, 250),
    "brown": (35, 75, 125),
    "black": (22, 22, 22),
    "white": (245, 245, 245),
}
COLOUR_NAMES = list(COLOURS)

# Combinations never drawn in training scenes: the demo model's compositional generalisation is measured on them.
HELD_OUT = [
    ("green", "heart"),
    ("blue", "star"),
    ("red", "hexagon"),
    ("yellow", "cross"),
    ("purple", "circle"),
    ("orange", "ring"),
    ("pink", "triangle"),
    ("brown", "square"),
    ("black", "heart"),
    ("white", "star"),
]

PHOTOS = [
    "astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "moon", "page", "text",
    "hubble_deep_field", "immunohistochemistry", "brick", "grass", "gravel", "cell", "clock",
]  # fmt: skip

_photo_cache: dict[str, np.ndarray] = {}


def photo(name: str) -> np.ndarray:
    if name not in _photo_cache:
        import skimage.data

        image = np.asarray(getattr(skimage.data, name)())
        if image.ndim == 2:
            image = np.stack([image] * 3, axis=-1)
        image = image[..., :3].astype(np.uint8)
        _photo_cache[name] = np.ascontiguousarray(image[..., ::-1])  # RGB → BGR
    return _photo_cache[name]


def caption(colour: str, shape: str) -> str:
    return f"{colour} {shape}"


def seen_combinations() -> list[tuple[str, str]]:
    held = set(HELD_OUT)
    return [(c, s) for s in SHAPES for c in COLOUR_NAMES if (c, s) not in held]


# ---------------------------------------------------------------------------------------------- shape outlines


def _regular(n: int, radius: float, phase: float = 0.0) -> np.ndarray:
    angles = phase + np.arange(n) * 2 * math.pi / n
    return np.stack([np.cos(angles), np.sin(angles)], axis=1) * radius


def _outline(shape: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Polygons in a unit frame (about [-1, 1]); the first is filled, later ones are holes."""
    if shape == "circle":
        return [_regular(64, 1.0)]
    if shape == "square":
        return [np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64) * 0.85]
    if shape == "triangle":
        return [_regular(3, 1.0, -math.pi / 2) + [0, 0.2]]
    if shape == "star":
        inner = rng.uniform(0.38, 0.5)
        points = [
            (math.cos(a) * r, math.sin(a) * r)
            for k in range(10)
            for a, r in [(-math.pi / 2 + k * math.pi / 5, 1.0 if k % 2 == 0 else inner)]
        ]
        return [np.array(points)]
    if shape == "hexagon":
        return [_regular(6, 1.0)]
    if shape == "heart":
        t = np.linspace(0, 2 * math.pi, 80, endpoint=False)
        x = 16 * np.sin(t) ** 3
        y = -(13 * np.cos(t) - 5 * np.cos(2 * t) - 2 * np.cos(3 * t) - np.cos(4 * t))
        return [np.stack([x, y + 2], axis=1) / 17.0]
    if shape == "cross":
        a = rng.uniform(0.28, 0.38)
        p = [(-a, -1), (a, -1), (a, -a), (1, -a), (1, a), (a, a), (a, 1), (-a, 1), (-a, a), (-1, a), (-1, -a), (-a, -a)]
        return [np.array(p, dtype=np.float64)]
    if shape == "ring":
        return [_regular(64, 1.0), _regular(64, rng.uniform(0.5, 0.68))]
    raise ValueError(shape)


def _mask(shape: str, centre, size: float, angle: float, stretch: float, canvas, rng) -> np.ndarray:
    """An anti-aliased coverage mask (float32 0…1) of one shape."""
    polygons = _outline(shape, rng)
    c, s = math.cos(angle), math.sin(angle)
    rotation = np.array([[c, -s], [s, c]])
    scale = np.array([stretch, 1.0 / stretch]) if shape not in ("circle", "ring", "square") else np.array([1.0, 1.0])
    mask = np.zeros(canvas, dtype=np.uint8)
    for k, polygon in enumerate(polygons):
        points = (polygon * scale) @ rotation.T * (size / 2) + centre
        fixed = np.round(points * 16).astype(np.int32)  # 4 fractional bits
        cv2.fillPoly(mask, [fixed], 0 if k else 255, lineType=cv2.LINE_AA, shift=4)
    return mask.astype(np.float32) / 255.0


# ---------------------------------------------------------------------------------------------- backgrounds


def _background(rng: np.random.Generator, height: int, width: int) -> tuple[np.ndarray, str]:
    kind = rng.choice(["plain", "textured", "cluttered", "photo"], p=[0.2, 0.25, 0.2, 0.35])
    if kind == "plain":
        colour = rng.integers(60, 200, size=3)
        image = np.empty((height, width, 3), np.uint8)
        image[:] = colour
    elif kind == "textured":
        style = rng.integers(0, 4)
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        a, b = rng.integers(40, 220, size=3), rng.integers(40, 220, size=3)
        if style == 0:  # gradient
            t = (x * rng.uniform(-1, 1) + y * rng.uniform(-1, 1)) / max(height, width)
            t = (t - t.min()) / max(t.max() - t.min(), 1e-6)
        elif style == 1:  # stripes
            period = rng.uniform(6, 40)
            angle = rng.uniform(0, math.pi)
            t = (np.sin((x * math.cos(angle) + y * math.sin(angle)) * 2 * math.pi / period) > 0).astype(np.float32)
            t = t * 0.35 + 0.3
        elif style == 2:  # checkerboard
            cell = int(rng.integers(8, 48))
            t = (((x // cell) + (y // cell)) % 2).astype(np.float32) * 0.4 + 0.3
        else:  # smooth noise
            small = rng.random((max(2, height // 32), max(2, width // 32))).astype(np.float32)
            t = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
        t = np.clip(t, 0, 1)[..., None]
        image = (a * (1 - t) + b * t).astype(np.float32)
        image += rng.normal(0, rng.uniform(2, 14), image.shape)
        image = np.clip(image, 0, 255).astype(np.uint8)
    elif kind == "cluttered":
        image = np.empty((height, width, 3), np.uint8)
        image[:] = rng.integers(70, 190, size=3)
        for _ in range(int(rng.integers(20, 80))):  # thin lines, dots and small text: clutter, never our shapes
            colour = tuple(int(v) for v in rng.integers(0, 256, size=3))
            choice = rng.integers(0, 3)
            p = (int(rng.integers(0, width)), int(rng.integers(0, height)))
            if choice == 0:
                q = (int(p[0] + rng.integers(-120, 120)), int(p[1] + rng.integers(-120, 120)))
                cv2.line(image, p, q, colour, int(rng.integers(1, 3)), cv2.LINE_AA)
            elif choice == 1:
                cv2.circle(image, p, int(rng.integers(1, 4)), colour, -1, cv2.LINE_AA)
            else:
                word = "".join(chr(int(v)) for v in rng.integers(97, 123, size=int(rng.integers(2, 7))))
                cv2.putText(image, word, p, cv2.FONT_HERSHEY_SIMPLEX, rng.uniform(0.3, 0.9), colour, 1, cv2.LINE_AA)
    else:
        source = photo(PHOTOS[int(rng.integers(0, len(PHOTOS)))])
        sh, sw = source.shape[:2]
        crop_h = int(sh * rng.uniform(0.5, 1.0))
        crop_w = int(sw * rng.uniform(0.5, 1.0))
        y0 = int(rng.integers(0, sh - crop_h + 1))
        x0 = int(rng.integers(0, sw - crop_w + 1))
        image = cv2.resize(source[y0 : y0 + crop_h, x0 : x0 + crop_w], (width, height), interpolation=cv2.INTER_LINEAR)
        if rng.random() < 0.5:
            image = image[:, ::-1].copy()
    return image, str(kind)


# ---------------------------------------------------------------------------------------------- scenes


def scene(seed: int, index: int, split: str = "train", owners: bool = False, small: bool = False):
    """One scene: BGR uint8 image, objects [{colour, shape, box: [x1, y1, x2, y2], owner}], background kind.

    `split` "train" never draws a held-out combination; "eval" draws all 80. With `owners`, a fourth value: the
    int32 map of which drawn shape each pixel shows (−1: background), so that an object's visible mask is
    `map == object["owner"]` (the pixels its box was measured on). The image and truth are the same either way.
    With `small`, a large photo (short side 1200-1800 px) holding 6-24 shapes of 8-32 px: what sliced inference is
    for (the scenes without it are unchanged).
    """
    rng = np.random.default_rng([seed, index])
    short = int(rng.integers(1200, 1800)) if small else int(rng.integers(240, 560))
    aspect = float(np.exp(rng.uniform(math.log(0.5), math.log(2.0))))
    height, width = (short, int(short * aspect)) if aspect >= 1 else (int(short / aspect), short)
    image, kind = _background(rng, height, width)
    held = set(HELD_OUT)
    count = int(rng.integers(6, 25)) if small else int(rng.integers(1, 9))
    owner = np.full((height, width), -1, dtype=np.int32)
    drawn: list[tuple[str, str, np.ndarray]] = []
    base = image.astype(np.float32)
    for k in range(count):
        while True:
            colour = COLOUR_NAMES[int(rng.integers(0, len(COLOUR_NAMES)))]
            shape = SHAPES[int(rng.integers(0, len(SHAPES)))]
            if split != "train" or (colour, shape) not in held:
                break
        size = float(rng.uniform(8, 32)) if small else float(rng.uniform(0.08, 0.42)) * min(height, width)
        centre = np.array([rng.uniform(0.05, 0.95) * width, rng.uniform(0.05, 0.95) * height])
        mask = _mask(shape, centre, size, rng.uniform(0, 2 * math.pi), rng.uniform(0.8, 1.25), (height, width), rng)
        bgr = np.clip(np.array(COLOURS[colour], np.float32) + rng.uniform(-18, 18, size=3), 0, 255)
        shade = 1.0 + rng.uniform(-0.12, 0.12) * np.linspace(-1, 1, width, dtype=np.float32)[None, :, None]
        fill = np.clip(bgr[None, None, :] * shade, 0, 255)
        region = mask > 0
        # Contrast check: a shape that nearly vanishes into the background under it is redrawn darker or lighter.
        under = base[region].mean(axis=0) if region.any() else np.zeros(3, np.float32)
        if np.abs(under - bgr).mean() < 40:
            fill = np.clip(fill + (60 if under.mean() < 128 else -60), 0, 255)
        alpha = mask[..., None]
        base = base * (1 - alpha) + fill * alpha
        if rng.random() < 0.5:  # an outline, as drawings often have
            edge = cv2.morphologyEx((mask > 0.5).astype(np.uint8), cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8))
            base[edge > 0] *= rng.uniform(0.3, 0.7)
        owner[mask > 0.5] = k
        drawn.append((colour, shape, mask))
    objects = []
    for k, (colour, shape, mask) in enumerate(drawn):
        full = mask > 0.5
        visible = owner == k
        area = int(full.sum())
        if area < 16 or visible.sum() < 0.35 * area:
            continue
        ys, xs = np.nonzero(visible)
        box = [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]
        objects.append({"colour": colour, "shape": shape, "box": box, "owner": k})
    if rng.random() < 0.3:
        base += rng.normal(0, rng.uniform(2, 8), base.shape)
    image = np.clip(base, 0, 255).astype(np.uint8)
    if rng.random() < 0.2:
        image = cv2.GaussianBlur(image, (3, 3), 0)
    return (image, objects, kind, owner) if owners else (image, objects, kind)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=900000, help="training uses seed 1; keep evaluation seeds apart")
    parser.add_argument("--split", choices=["train", "eval"], default="eval")
    parser.add_argument("--quality", type=int, default=92)
    parser.add_argument("--small", action="store_true", help="large photos with shapes of 8-32 px (sliced inference)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    truth = {"seed": args.seed, "split": args.split, "small": args.small, "held_out": [caption(c, s) for c, s in HELD_OUT], "images": []}
    for index in range(args.count):
        image, objects, kind = scene(args.seed, index, args.split, small=args.small)
        name = f"scene-{index:04d}.jpg"
        cv2.imwrite(os.path.join(args.out, name), image, [cv2.IMWRITE_JPEG_QUALITY, args.quality])
        truth["images"].append(
            {
                "file": name,
                "width": image.shape[1],
                "height": image.shape[0],
                "background": kind,
                "objects": [
                    {"label": caption(o["colour"], o["shape"]), "box": [round(v, 2) for v in o["box"]]}
                    for o in objects
                ],
            }
        )
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
