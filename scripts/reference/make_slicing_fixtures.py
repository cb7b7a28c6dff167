"""Sliced inference as the `sahi` library computes it: Tests/Fixtures/slicing/sahi.json.

1. Tiles: `sahi.slicing.get_slice_bboxes` for fixed tile sizes and overlaps (a photo smaller than a tile, exact fits,
   odd overlaps) and for `auto_slice_resolution` at every resolution class and orientation.
2. Merges: seeded scenes of objects seen by several overlapping tiles (jittered, clipped boxes in each tile's own
   pixels, as a tile detector reports them) plus the whole photo's boxes. sahi turns them into photo boxes exactly
   as `get_sliced_prediction` does with its ultralytics wrapper (clip at 0 and at the photo's size, drop empty
   boxes, `get_shifted_object_prediction`) and merges them with `GreedyNMMPostprocess`, `NMMPostprocess` and
   `NMSPostprocess`, IOS and IOU, per class and class-agnostic, at several thresholds. Lookout must give the same
   list, in the same order.

Box coordinates are multiples of 1/16 pixel and scores float32 values, so that sahi's float64 and numpy float32
arithmetic and Lookout's float32 see the same numbers.

    pip install -r scripts/reference/requirements-sahi.txt
    python scripts/reference/make_slicing_fixtures.py
"""

import json
import os

import numpy as np
import sahi
from sahi.postprocess.combine import GreedyNMMPostprocess, NMMPostprocess, NMSPostprocess
from sahi.prediction import ObjectPrediction
from sahi.slicing import get_slice_bboxes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "slicing")


def tile_cases() -> list[dict]:
    cases = []
    fixed = [
        (1920, 1080, 640, 640, 0.2, 0.2),
        (1920, 1080, 512, 512, 0.25, 0.25),
        (4000, 3000, 640, 480, 0.1, 0.3),
        (640, 640, 640, 640, 0.2, 0.2),
        (600, 400, 640, 640, 0.2, 0.2),  # smaller than a tile
        (700, 300, 640, 640, 0.2, 0.2),  # wider than a tile, lower
        (1280, 1280, 640, 640, 0.0, 0.0),  # exact fit, no overlap
        (1000, 997, 333, 333, 0.33, 0.5),
        (3000, 200, 256, 128, 0.9, 0.0),
        (2049, 2047, 1024, 1024, 0.5, 0.5),
        (257, 4099, 96, 320, 0.15, 0.45),
        (5472, 3648, 640, 640, 0.2, 0.2),  # a drone photo
    ]
    for width, height, sw, sh, ow, oh in fixed:
        tiles = get_slice_bboxes(
            image_height=height,
            image_width=width,
            slice_height=sh,
            slice_width=sw,
            overlap_height_ratio=oh,
            overlap_width_ratio=ow,
        )
        cases.append(
            dict(width=width, height=height, slice_width=sw, slice_height=sh, overlap_width=ow, overlap_height=oh, tiles=tiles)
        )
    for width, height in [(300, 300), (640, 480), (1024, 1024), (1336, 960), (960, 1336), (2048, 1536), (1536, 2048),
                          (2048, 2048), (4096, 2048), (6380, 6380), (4096, 8192), (5472, 3648), (513, 511)]:
        tiles = get_slice_bboxes(image_height=height, image_width=width, auto_slice_resolution=True)
        cases.append(dict(width=width, height=height, auto=True, tiles=tiles))
    return cases


def sixteenth(value: float) -> float:
    return float(np.round(value * 16) / 16)


def scene(rng: np.random.Generator, width: int, height: int, tile: int, overlap: float, classes: int) -> dict:
    tiles = get_slice_bboxes(height, width, tile, tile, False, overlap, overlap)
    objects = []
    for _ in range(int(rng.integers(4, 14))):
        w, h = rng.uniform(12, tile * 0.9), rng.uniform(12, tile * 0.9)
        x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
        objects.append((x, y, x + w, y + h, int(rng.integers(0, classes))))
    per_tile = []
    for x1, y1, x2, y2 in tiles:
        found = []
        for ox1, oy1, ox2, oy2, category in objects:
            ix1, iy1, ix2, iy2 = max(ox1, x1), max(oy1, y1), min(ox2, x2), min(oy2, y2)
            if ix2 - ix1 < 3 or iy2 - iy1 < 3 or rng.random() < 0.15:
                continue
            jitter = rng.normal(0, 2.0, 4)
            box = [ix1 - x1 + jitter[0], iy1 - y1 + jitter[1], ix2 - x1 + jitter[2], iy2 - y1 + jitter[3]]
            # A tile detector's boxes lie in the tile (ultralytics clips them); a few touch or leave it.
            box = [sixteenth(min(max(v, -2.0), (x2 - x1 if i % 2 == 0 else y2 - y1) + 2.0)) for i, v in enumerate(box)]
            label = category if rng.random() > 0.1 else int(rng.integers(0, classes))
            found.append(dict(box=box, score=float(np.float32(rng.uniform(0.25, 0.99))), category=label))
        for _ in range(int(rng.integers(0, 3))):  # clutter
            bx, by = rng.uniform(0, x2 - x1 - 8), rng.uniform(0, y2 - y1 - 8)
            box = [sixteenth(bx), sixteenth(by), sixteenth(bx + rng.uniform(2, 60)), sixteenth(by + rng.uniform(2, 60))]
            found.append(dict(box=box, score=float(np.float32(rng.uniform(0.25, 0.6))), category=int(rng.integers(0, classes))))
        if rng.random() < 0.3:  # an empty box, which sahi drops
            found.append(dict(box=[5.0, 7.0, 5.0, 20.0], score=0.5, category=0))
        per_tile.append(found)
    whole = []
    for ox1, oy1, ox2, oy2, category in objects:
        if rng.random() < 0.6:
            box = [sixteenth(v + rng.normal(0, 4.0)) for v in (ox1, oy1, ox2, oy2)]
            whole.append(dict(box=box, score=float(np.float32(rng.uniform(0.25, 0.9))), category=category))
    return dict(width=width, height=height, tiles=tiles, per_tile=per_tile, whole=whole)


def predictions(case: dict) -> list[ObjectPrediction]:
    """As get_sliced_prediction builds them with UltralyticsDetectionModel's conversion."""
    full_shape = [case["height"], case["width"]]
    out = []
    parts = [(d, [t[0], t[1]]) for t, ds in zip(case["tiles"], case["per_tile"]) for d in ds]
    parts += [(d, [0, 0]) for d in case["whole"]]
    for d, shift in parts:
        bbox = [max(0, c) for c in d["box"]]
        bbox[0] = min(full_shape[1], bbox[0])
        bbox[1] = min(full_shape[0], bbox[1])
        bbox[2] = min(full_shape[1], bbox[2])
        bbox[3] = min(full_shape[0], bbox[3])
        if not (bbox[0] < bbox[2]) or not (bbox[1] < bbox[3]):
            continue
        prediction = ObjectPrediction(
            bbox=bbox, category_id=d["category"], score=d["score"], category_name=str(d["category"]),
            shift_amount=shift, full_shape=full_shape,
        )
        out.append(prediction.get_shifted_object_prediction())
    return out


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(53)
    merges = []
    sizes = [(1920, 1080, 640, 0.2), (2400, 1600, 512, 0.25), (1300, 900, 400, 0.3), (3000, 2000, 640, 0.2)]
    for index in range(12):
        width, height, tile, overlap = sizes[index % len(sizes)]
        case = scene(rng, width, height, tile, overlap, classes=3 if index % 3 else 1)
        results = []
        for method, constructor in [("greedynmm", GreedyNMMPostprocess), ("nmm", NMMPostprocess), ("nms", NMSPostprocess)]:
            for metric in ["IOS", "IOU"]:
                for agnostic in [False, True]:
                    for threshold in [0.5, 0.2, 0.0] if index < 2 else [0.5, 0.3]:
                        merged = constructor(match_threshold=threshold, match_metric=metric, class_agnostic=agnostic)(
                            predictions(case)
                        )
                        results.append(
                            dict(
                                method=method, metric=metric.lower(), class_agnostic=agnostic, threshold=threshold,
                                merged=[
                                    [*[float(v) for v in p.bbox.to_xyxy()], float(p.score.value), int(p.category.id)]
                                    for p in merged
                                ],
                            )
                        )
        case["candidates"] = len(predictions(case))
        case["results"] = results
        merges.append(case)
    with open(os.path.join(OUT, "sahi.json"), "w") as f:
        json.dump(dict(sahi=sahi.__version__, tiles=tile_cases(), merges=merges), f, separators=(",", ":"))
    print(f"wrote {OUT}/sahi.json: {len(merges)} scenes, sahi {sahi.__version__}")


if __name__ == "__main__":
    main()
