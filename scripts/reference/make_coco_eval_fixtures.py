#!/usr/bin/env python3
"""Golden outputs of pycocotools' COCOeval (bbox, and segm for the `segm` set) for `lookout eval`'s evaluator.

    python3 -m venv .build/coco-venv && .build/coco-venv/bin/pip install pycocotools==2.0.10 numpy
    .build/coco-venv/bin/python scripts/reference/make_coco_eval_fixtures.py [OUT]  (default Tests/Fixtures/coco)

Writes, for each of several generated data sets, `truth.json` (COCO ground truth), `detections.json` (COCO
results) and `expected.json`: the 12 numbers of `COCOeval.summarize()` (`stats`) and, per category in id
order, AP over IoU 0.50:0.95 and AP at 0.5 (all areas, 100 detections) from `eval['precision']`, -1 where
nothing counts. The data sets cover what the evaluator must get right:

  basic    small, medium and large boxes, near misses, false positives, `area` fields that are not w*h
  crowd    crowd regions (matched by intersection over the detection's area, any number of times)
  sparse   images without annotations (with and without detections), categories without detections,
           detections of categories without ground truth, an unknown category id, ground-truth id 0
  ties     equal scores across images and within one, more than 100 detections per image and category,
           image and category ids out of order in the file
  segm     masks (`COCOeval(..., "segm")`): ground truth as polygons (several parts, vertices outside the
           image), uncompressed RLE (crowd regions) and compressed RLE; results as compressed RLE with their
           bbox, as ultralytics and Lookout write them; odd image sizes. Also `rasterised.json`: pycocotools'
           RLE counts of polygons (`frPyObjects`), edge cases included, for the rasteriser alone.
"""
import json
import os
import random
import sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def jitter(rng, box, amount):
    x, y, w, h = box
    return [x + rng.uniform(-amount, amount) * w, y + rng.uniform(-amount, amount) * h,
            w * (1 + rng.uniform(-amount, amount)), h * (1 + rng.uniform(-amount, amount))]


def random_box(rng, size_kind):
    side = {"small": rng.uniform(4, 30), "medium": rng.uniform(33, 94), "large": rng.uniform(100, 300)}[size_kind]
    aspect = rng.uniform(0.5, 2)
    w, h = side * aspect ** 0.5, side / aspect ** 0.5
    return [rng.uniform(0, 600), rng.uniform(0, 400), w, h]


def dataset(name, seed):
    rng = random.Random(seed)
    images, annotations, detections = [], [], []
    categories = [{"id": c, "name": n} for c, n in [(1, "person"), (3, "car"), (7, "dog"), (12, "red star"),
                                                     (40, "sofa")]]
    if name == "ties":
        categories = list(reversed(categories))
    image_ids = list(range(1, 21))
    if name == "ties":
        rng.shuffle(image_ids)
    ann_id = 1 if name != "sparse" else 0
    for image_id in image_ids:
        images.append({"id": image_id, "file_name": f"img-{image_id:03d}.jpg", "width": 900, "height": 700})
        if name == "sparse" and image_id % 4 == 0:
            # no annotations; half of these have detections anyway
            if image_id % 8 == 0:
                for _ in range(rng.randint(1, 4)):
                    detections.append({"image_id": image_id, "category_id": rng.choice([1, 3]),
                                       "bbox": random_box(rng, rng.choice(["small", "medium", "large"])),
                                       "score": round(rng.uniform(0.05, 0.95), 3)})
            continue
        for _ in range(rng.randint(1, 6)):
            category = rng.choice(categories)["id"]
            if name == "sparse" and category == 40:
                continue  # no ground truth for sofa
            kind = rng.choice(["small", "medium", "large"])
            box = random_box(rng, kind)
            area = box[2] * box[3]
            if name == "basic" and rng.random() < 0.4:
                area *= rng.uniform(0.5, 0.95)  # as a segmentation's area would be
            crowd = 1 if name == "crowd" and rng.random() < 0.3 else 0
            annotations.append({"id": ann_id, "image_id": image_id, "category_id": category, "bbox": box,
                                "area": area, "iscrowd": crowd})
            ann_id += 1
            copies = rng.randint(2, 5) if crowd else (0 if rng.random() < 0.2 else 1)
            for _ in range(copies):
                target = jitter(rng, box, 0.15) if not crowd else [
                    box[0] + rng.uniform(0, 0.6) * box[2], box[1] + rng.uniform(0, 0.6) * box[3],
                    box[2] * rng.uniform(0.2, 0.4), box[3] * rng.uniform(0.2, 0.4)]
                score = rng.uniform(0.3, 1.0)
                if name == "ties":
                    score = round(score, 1)
                if name == "sparse" and category == 7:
                    continue  # no detections for dog
                detections.append({"image_id": image_id, "category_id": category, "bbox": target,
                                   "score": score})
        for _ in range(rng.randint(0, 5)):  # false positives
            score = rng.uniform(0.01, 0.7)
            if name == "ties":
                score = round(score, 1)
            category = rng.choice(categories)["id"]
            if name == "sparse" and category == 7:
                category = 40  # detections of a category without ground truth
            detections.append({"image_id": image_id, "category_id": category,
                               "bbox": random_box(rng, rng.choice(["small", "medium", "large"])), "score": score})
    if name == "ties":
        # one image and category with 130 detections: cut at 100 (and at 1, 10 for AR), ties everywhere
        target = image_ids[0]
        for i in range(130):
            detections.append({"image_id": target, "category_id": 3, "bbox": random_box(rng, "medium"),
                               "score": 0.5 if i % 3 else 0.25})
    if name == "sparse":
        detections.append({"image_id": 1, "category_id": 99, "bbox": [1, 1, 20, 20], "score": 0.9})
    truth = {"info": {"description": f"lookout eval fixture {name}"}, "licenses": [], "images": images,
             "annotations": annotations, "categories": categories}
    return truth, detections


def polygon(rng, cx, cy, radius, points):
    values = []
    for i in range(points):
        angle = 2 * np.pi * i / points + rng.uniform(-0.2, 0.2)
        r = radius * rng.uniform(0.5, 1.0)
        values += [cx + r * np.cos(angle), cy + r * np.sin(angle)]
    return [float(v) for v in values]


def segm_dataset(seed):
    from pycocotools import mask as mask_utils

    rng = random.Random(seed)
    categories = [{"id": c, "name": n} for c, n in [(1, "person"), (3, "car"), (12, "red star")]]
    images, annotations, detections = [], [], []
    ann_id = 1
    for image_id in range(1, 13):
        w, h = rng.choice([(160, 120), (97, 131), (200, 150), (64, 48)])
        images.append({"id": image_id, "file_name": f"img-{image_id:03d}.jpg", "width": w, "height": h})
        for _ in range(rng.randint(1, 5)):
            category = rng.choice(categories)["id"]
            radius = rng.choice([rng.uniform(2, 6), rng.uniform(8, 20), rng.uniform(25, 60)])
            # centres may sit near or past the border: polygons leave the image
            cx, cy = rng.uniform(-0.1, 1.1) * w, rng.uniform(-0.1, 1.1) * h
            parts = [polygon(rng, cx, cy, radius, rng.randint(3, 12))]
            if rng.random() < 0.25:
                parts.append(polygon(rng, cx + radius, cy - radius / 2, radius / 2, rng.randint(3, 7)))
            rle = mask_utils.merge(mask_utils.frPyObjects(parts, h, w))
            area = float(mask_utils.area(rle))
            if area == 0:
                continue
            kind = rng.random()
            crowd = 1 if kind < 0.15 else 0
            if crowd:  # crowd regions as uncompressed RLE, as COCO stores them
                binary = mask_utils.decode(rle)
                flat = binary.flatten(order="F")
                counts, current, run = [], 0, 0
                for value in flat:
                    if value != current:
                        counts.append(run)
                        run, current = 0, value
                    run += 1
                counts.append(run)
                segmentation = {"counts": counts, "size": [h, w]}
            elif kind < 0.3:
                segmentation = {"counts": rle["counts"].decode("ascii"), "size": [h, w]}
            else:
                segmentation = parts
            if rng.random() < 0.2:
                area *= rng.uniform(0.7, 1.3)  # an area field that is not the mask's
            annotations.append({"id": ann_id, "image_id": image_id, "category_id": category, "iscrowd": crowd,
                                "segmentation": segmentation, "area": area,
                                "bbox": [float(v) for v in mask_utils.toBbox(rle)]})
            ann_id += 1
            for _ in range(rng.randint(2, 4) if crowd else (0 if rng.random() < 0.15 else 1)):
                moved = [[v + rng.uniform(-0.15, 0.15) * radius for v in part] for part in parts]
                found = mask_utils.merge(mask_utils.frPyObjects(moved, h, w))
                detections.append({"image_id": image_id, "category_id": category,
                                    "segmentation": {"size": [h, w], "counts": found["counts"].decode("ascii")},
                                    "bbox": [float(v) for v in mask_utils.toBbox(found)],
                                    "score": round(rng.uniform(0.3, 1.0), 4)})
        for _ in range(rng.randint(0, 3)):  # false positives, an empty mask among them
            parts = [polygon(rng, rng.uniform(0, w), rng.uniform(0, h), rng.uniform(3, 30), 6)]
            if rng.random() < 0.1:
                parts = [[-50.0, -50.0, -40.0, -50.0, -45.0, -40.0]]
            found = mask_utils.merge(mask_utils.frPyObjects(parts, h, w))
            detections.append({"image_id": image_id, "category_id": rng.choice(categories)["id"],
                               "segmentation": {"size": [h, w], "counts": found["counts"].decode("ascii")},
                               "bbox": [float(v) for v in mask_utils.toBbox(found)],
                               "score": round(rng.uniform(0.01, 0.7), 4)})
    truth = {"info": {"description": "lookout eval fixture segm"}, "licenses": [], "images": images,
             "annotations": annotations, "categories": categories}
    return truth, detections


def rasterised(seed):
    """pycocotools' RLE of polygons: random ones, degenerate ones (a point, a line, collinear), ones reaching
    past every border, and vertices on pixel centres and edges."""
    from pycocotools import mask as mask_utils

    rng = random.Random(seed)
    cases = []
    for index in range(60):
        w, h = rng.choice([(31, 17), (64, 64), (97, 131), (5, 3)])
        points = rng.randint(3, 14)
        scale = rng.choice([0.3, 1.0, 1.6])
        poly = [rng.uniform(-0.2, 1.2) * (w if i % 2 == 0 else h) * scale for i in range(2 * points)]
        if index % 10 == 0:
            poly = [round(v * 2) / 2 for v in poly]  # half-pixel vertices
        cases.append((poly, h, w))
    cases += [([3.0, 3.0, 3.0, 3.0, 3.0, 3.0], 10, 10), ([1.0, 1.0, 8.0, 8.0, 1.0, 1.0], 10, 10),
              ([0.0, 0.0, 5.0, 5.0, 9.0, 9.0], 10, 10), ([-5.0, -5.0, 20.0, -5.0, 20.0, 20.0, -5.0, 20.0], 10, 10),
              ([0.5, 0.5, 4.5, 0.5, 4.5, 4.5, 0.5, 4.5], 6, 6), ([0.0, 0.0, 6.0, 0.0, 6.0, 6.0, 0.0, 6.0], 6, 6)]
    out = []
    for poly, h, w in cases:
        rle = mask_utils.frPyObjects([poly], h, w)[0]
        counts = mask_utils.decode(rle).flatten(order="F")
        runs, current, run = [], 0, 0
        for value in counts:
            if value != current:
                runs.append(run)
                run, current = 0, value
            run += 1
        runs.append(run)
        out.append({"polygon": poly, "height": h, "width": w, "counts": runs,
                    "compressed": rle["counts"].decode("ascii")})
    return out


def evaluate(truth_path, detections_path, iou_type="bbox"):
    gt = COCO(truth_path)
    dt = gt.loadRes(detections_path)
    ev = COCOeval(gt, dt, iou_type)
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    precision = ev.eval["precision"]  # [T, R, K, A, M]
    categories = []
    for k, category_id in enumerate(ev.params.catIds):
        p = precision[:, :, k, 0, -1]
        p50 = precision[0, :, k, 0, -1]
        categories.append({"id": int(category_id),
                           "ap": float(np.mean(p[p > -1])) if (p > -1).any() else -1.0,
                           "ap50": float(np.mean(p50[p50 > -1])) if (p50 > -1).any() else -1.0})
    return {"stats": [float(s) for s in ev.stats], "categories": categories}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "Tests", "Fixtures", "coco")
    for seed, name in enumerate(["basic", "crowd", "sparse", "ties"]):
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        truth, detections = dataset(name, 900 + seed)
        truth_path = os.path.join(folder, "truth.json")
        detections_path = os.path.join(folder, "detections.json")
        with open(truth_path, "w") as f:
            json.dump(truth, f)
        with open(detections_path, "w") as f:
            json.dump(detections, f)
        expected = evaluate(truth_path, detections_path)
        with open(os.path.join(folder, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1)
        print(name, len(truth["annotations"]), "annotations", len(detections), "detections", expected["stats"])
    folder = os.path.join(out, "segm")
    os.makedirs(folder, exist_ok=True)
    truth, detections = segm_dataset(960)
    truth_path = os.path.join(folder, "truth.json")
    detections_path = os.path.join(folder, "detections.json")
    with open(truth_path, "w") as f:
        json.dump(truth, f)
    with open(detections_path, "w") as f:
        json.dump(detections, f)
    expected = evaluate(truth_path, detections_path, "segm")
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    with open(os.path.join(folder, "rasterised.json"), "w") as f:
        json.dump(rasterised(961), f)
    print("segm", len(truth["annotations"]), "annotations", len(detections), "detections", expected["stats"])


if __name__ == "__main__":
    main()
