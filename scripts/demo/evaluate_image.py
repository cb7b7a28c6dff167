#!/usr/bin/env python3
"""Measures an image tower for the demo model on held-out generated scenes, through Lookout itself.

    python scripts/demo/evaluate_image.py [--tower Models/demo/image-encoder.safetensors] [--scenes 400]

Held-out scenes (seed 515000, evaluation split: all 80 colour–shape pairs, the 10 never trained on included)
are written as JPEG to a temporary folder and embedded by `lookout embed --image`; the 110 scene captions
by `lookout embed --model Models/demo`. Reported:

- captions → scenes: for each caption true of at least one scene, whether a scene it is true of is among
  the k best by cosine (recall@1, @5), and its average precision, per caption group;
- scenes → scenes: each scene edited (JPEG quality 35, half size, a 6 % border cropped away, brighter by
  20, or mirrored) and used as the query among all originals: recall@1, @5 of the original;
- duplicates: cosines of (scene, its edit) pairs against those of distinct scenes, and precision and
  recall of `lookout duplicates --threshold T` at several T;
- photos as queries: one object crop per colour–shape pair (cut from other held-out scenes) used as
  `detect --query-image`, against the same pairs as text: AP@0.5 on the scenes, and the F1-best threshold.

Lookout must be built in release (`swift build -c release`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import scenes  # noqa: E402
from train_image import caption_list, true_captions  # noqa: E402

LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")


def embed_photos(tower: str, files: list[str]) -> np.ndarray:
    out = subprocess.run([LOOKOUT, "embed", "--image", "--image-model", tower, *files], capture_output=True,
                         text=True, check=True).stdout
    return np.array([json.loads(line) for line in out.splitlines()], np.float64)


def embed_texts(texts: list[str]) -> np.ndarray:
    out = subprocess.run([LOOKOUT, "embed", "--model", os.path.join(ROOT, "Models", "demo"), *texts],
                         capture_output=True, text=True, check=True).stdout
    return np.array([json.loads(line) for line in out.splitlines()], np.float64)


def average_precision(scores: np.ndarray, relevant: np.ndarray) -> float:
    order = np.argsort(-scores, kind="stable")
    hits = relevant[order]
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / max(1, hits.sum()))


def edit(image: np.ndarray, kind: int) -> np.ndarray:
    if kind == 0:
        ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 35])
        return cv2.imdecode(data, cv2.IMREAD_COLOR)
    if kind == 1:
        return cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2), interpolation=cv2.INTER_AREA)
    if kind == 2:
        h, w = image.shape[:2]
        dy, dx = int(h * 0.06), int(w * 0.06)
        return image[dy : h - dy, dx : w - dx]
    if kind == 3:
        return np.clip(image.astype(np.int16) + 20, 0, 255).astype(np.uint8)
    return image[:, ::-1].copy()


EDITS = ["JPEG q35", "half size", "6% cropped", "brighter", "mirrored"]


def iou(a, b) -> float:
    x1, y1, x2, y2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def detection_ap(detections: list[tuple[float, int, list[float]]], truth: list[list[list[float]]]) -> float:
    """AP@0.5 of one class: detections (score, image, box); truth[image] = boxes."""
    total = sum(len(t) for t in truth)
    if total == 0:
        return float("nan")
    used = [[False] * len(t) for t in truth]
    hits = []
    for score, image, box in sorted(detections, key=lambda d: -d[0]):
        best, which = 0.5, -1
        for k, t in enumerate(truth[image]):
            overlap = iou(box, t)
            if overlap >= best and not used[image][k]:
                best, which = overlap, k
        if which >= 0:
            used[image][which] = True
        hits.append(which >= 0)
    hits = np.array(hits, bool)
    if not len(hits):
        return 0.0
    recall = np.cumsum(hits) / total
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    for k in range(len(precision) - 2, -1, -1):
        precision[k] = max(precision[k], precision[k + 1])
    return float(np.sum(np.diff(np.concatenate([[0], recall])) * precision))


def best_f1_threshold(detections, truth) -> tuple[float, float]:
    total = sum(len(t) for t in truth)
    ordered = sorted(detections, key=lambda d: -d[0])
    used = [[False] * len(t) for t in truth]
    hits = []
    for score, image, box in ordered:
        which = -1
        for k, t in enumerate(truth[image]):
            if not used[image][k] and iou(box, t) >= 0.5:
                which = k
                break
        if which >= 0:
            used[image][which] = True
        hits.append(which >= 0)
    best = (0.0, 1.0)
    tp = 0
    for k, (score, _, _) in enumerate(ordered):
        tp += hits[k]
        f1 = 2 * tp / (k + 1 + total)
        if f1 > best[0]:
            best = (f1, score)
    return best


def scene_set(seed: int, count: int, folder: str, captions: list[str]):
    files, truth = [], np.zeros((count, len(captions)), bool)
    for i in range(count):
        image, objects, background = scenes.scene(seed, i, "eval")
        path = os.path.join(folder, f"calibration-{i:04d}.jpg")
        cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, 95])
        files.append(path)
        for caption in true_captions(objects, background):
            truth[i, captions.index(caption)] = True
    return files, truth


def caption_groups(captions: list[str]) -> dict[str, list[str]]:
    """The 110 scene captions (train_image.caption_list's order) by kind."""
    return {"counts": captions[:8], "backgrounds": captions[8:12], "colours": captions[12:22],
            "shapes": captions[22:30], "colour–shape pairs": captions[30:]}


def calibrate(tower: str, out: str, duplicate_threshold: float, captions: list[str]) -> None:
    """Scene score = sigmoid((cosine − centre) · slope), fitted by logistic regression (Newton's method) on every
    (scene, caption) pair of 400 scenes that are not the evaluation's, so that it reads as a probability like the
    detector's scores, with which search compares it."""
    from safetensors.numpy import load_file, save_file

    files, truth = scene_set(525000, 400, tempfile.mkdtemp(prefix="lookout-calibration-"), captions)
    cosines = (embed_photos(tower, files) @ embed_texts(captions).T).ravel()
    centre, slope = fit_scene_score(cosines, truth.ravel())
    tensors = load_file(tower)
    metadata = {"source": "scripts/demo/train_image.py; calibrated by scripts/demo/evaluate_image.py --calibrate",
                "lookout.scene_center": f"{centre:.6f}", "lookout.scene_slope": f"{slope:.4f}",
                "lookout.duplicate_threshold": f"{duplicate_threshold}"}
    save_file(tensors, out, metadata=metadata)
    print(f"wrote {out}")


def fit_scene_score(cosines: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """sigmoid((cosine − centre) · slope) fitted to (cosine, true or not) pairs by logistic regression (Newton's
    method): the centre and slope."""
    labels = truth.astype(np.float64)
    a, b = 10.0, 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(a * cosines + b)))
        w = p * (1 - p) + 1e-9
        gradient = np.array([np.sum((p - labels) * cosines), np.sum(p - labels)])
        hessian = np.array([[np.sum(w * cosines**2), np.sum(w * cosines)], [np.sum(w * cosines), np.sum(w)]])
        a, b = np.array([a, b]) - np.linalg.solve(hessian, gradient)
    centre, slope = -b / a, a
    p = 1 / (1 + np.exp(-(a * cosines + b)))
    print(f"scene score: centre {centre:.5f}, slope {slope:.3f} (log loss {-np.mean(labels * np.log(p + 1e-12) + (1 - labels) * np.log(1 - p + 1e-12)):.4f}"
          f" on {len(labels)} pairs; {labels.mean():.3f} of them true)")
    return float(centre), float(slope)


def search_aps(work: str, files: list[str], truth: np.ndarray, captions: list[str], tower: str,
               queries: list[str] | None = None, modes=("--objects", "--scenes", None)) -> dict:
    """Indexes `files` (all in `work`) with the demo model and `tower`, searches every caption true of some scene
    (as `queries`, its translation, when given) with each of `modes` (None: both, the default) and returns
    {mode: {caption: average precision}}, a scene scored by its search score (absent: below every other)."""
    database = os.path.join(work, f"index-{abs(hash(tower))}.sqlite")
    subprocess.run([LOOKOUT, "index", work, "--db", database, "--image-model", tower, "--plain"],
                   capture_output=True, check=True)
    position = {os.path.realpath(f): i for i, f in enumerate(files)}
    results = {}
    for mode in modes:
        aps = {}
        for c, caption in enumerate(captions):
            if not truth[:, c].any():
                continue
            command = [LOOKOUT, "search", (queries or captions)[c], "--db", database, "--json", "--top",
                       str(3 * len(files)), "--conf", "0.001"] + ([mode] if mode else [])
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            scores = np.full(len(files), -1.0)
            for line in out.splitlines():
                hit = json.loads(line)
                if hit["image"] in position:
                    scores[position[hit["image"]]] = hit["score"]
            aps[caption] = average_precision(scores, truth[:, c])
        results[mode] = aps
    return results


FIXED = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def f1_at(detections, truth, threshold: float) -> float:
    kept = [d for d in detections if d[0] > threshold]
    total = sum(len(t) for t in truth)
    used = [[False] * len(t) for t in truth]
    tp = 0
    for score, image, box in sorted(kept, key=lambda d: -d[0]):
        for k, t in enumerate(truth[image]):
            if not used[image][k] and iou(box, t) >= 0.5:
                used[image][k] = True
                tp += 1
                break
    return 2 * tp / max(1, len(kept) + total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default=os.path.join(ROOT, "Models", "demo", "image-encoder.safetensors"))
    parser.add_argument("--scenes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=515000)
    parser.add_argument("--detect-scenes", type=int, default=120)
    parser.add_argument("--calibrate", metavar="OUT", help="fit the scene score on other scenes (seed 525000) and "
                        "write the tower with it (and --duplicate-threshold) in its metadata to OUT")
    parser.add_argument("--duplicate-threshold", type=float, default=0.9)
    args = parser.parse_args()
    captions = caption_list()
    if args.calibrate:
        calibrate(args.tower, args.calibrate, args.duplicate_threshold, captions)
        return
    work = tempfile.mkdtemp(prefix="lookout-image-eval-")
    files, edited, truth, objects_of = [], [], np.zeros((args.scenes, len(captions)), bool), []
    for i in range(args.scenes):
        image, objects, background = scenes.scene(args.seed, i, "eval")
        path = os.path.join(work, f"scene-{i:04d}.jpg")
        cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, 95])
        copy = os.path.join(work, f"edit-{i:04d}.jpg")
        cv2.imwrite(copy, edit(image, i % len(EDITS)), [cv2.IMWRITE_JPEG_QUALITY, 95])
        files.append(path)
        edited.append(copy)
        for caption in true_captions(objects, background):
            truth[i, captions.index(caption)] = True
        objects_of.append(objects)
    images = embed_photos(args.tower, files)
    copies = embed_photos(args.tower, edited)
    texts = embed_texts(captions)
    similarity = texts @ images.T  # (captions, scenes)

    print(f"tower {args.tower}, {args.scenes} held-out scenes (seed {args.seed})\n")
    print("captions → scenes            recall@1  recall@5  mean AP  captions")
    groups = caption_groups(captions)
    everything = []
    for name, members in groups.items():
        rows = [captions.index(c) for c in members if truth[:, captions.index(c)].any()]
        r1 = np.mean([truth[np.argsort(-similarity[r])[:1], r].any() for r in rows])
        r5 = np.mean([truth[np.argsort(-similarity[r])[:5], r].any() for r in rows])
        ap = np.mean([average_precision(similarity[r], truth[:, r]) for r in rows])
        everything += rows
        print(f"  {name:26s} {r1:8.3f}  {r5:8.3f}  {ap:7.3f}  {len(rows)}")
    r1 = np.mean([truth[np.argsort(-similarity[r])[:1], r].any() for r in everything])
    r5 = np.mean([truth[np.argsort(-similarity[r])[:5], r].any() for r in everything])
    ap = np.mean([average_precision(similarity[r], truth[:, r]) for r in everything])
    print(f"  {'all':26s} {r1:8.3f}  {r5:8.3f}  {ap:7.3f}  {len(everything)}")

    cross = copies @ images.T  # (edited queries, originals)
    ranks = np.array([(cross[i] > cross[i, i]).sum() for i in range(args.scenes)])
    print("\nscenes → scenes (an edited copy finds its original)")
    print(f"  all edits: recall@1 {np.mean(ranks < 1):.3f}, recall@5 {np.mean(ranks < 5):.3f}")
    for k, name in enumerate(EDITS):
        chosen = ranks[k :: len(EDITS)]
        print(f"  {name:12s} recall@1 {np.mean(chosen < 1):.3f}, recall@5 {np.mean(chosen < 5):.3f}")

    same = np.array([cross[i, i] for i in range(args.scenes)])
    gram = images @ images.T
    distinct = gram[np.triu_indices(args.scenes, 1)]
    print("\nduplicates: cosine of a scene and its edit vs of two distinct scenes")
    print(f"  edits: min {same.min():.4f}, 5th percentile {np.percentile(same, 5):.4f}, median {np.median(same):.4f}")
    print(f"  distinct: max {distinct.max():.4f}, 99.9th percentile {np.percentile(distinct, 99.9):.4f}, "
          f"median {np.median(distinct):.4f}")
    for threshold in (0.7, 0.8, 0.85, 0.9, 0.95, 0.98):
        found = (same >= threshold).mean()
        false_pairs = int((distinct >= threshold).sum())
        per_edit = ", ".join(f"{name} {(same[k :: len(EDITS)] >= threshold).mean():.2f}" for k, name in enumerate(EDITS))
        print(f"  threshold {threshold:.2f}: edits found {found:.3f} ({per_edit}), distinct pairs linked "
              f"{false_pairs} of {len(distinct)}")

    # Photos as queries: a crop of each pair from scenes beyond the detection set, then detect on that set.
    n = args.detect_scenes
    crops, labels = [], []
    for index in range(n, args.scenes):
        image = cv2.imread(files[index])
        for o in objects_of[index]:
            label = scenes.caption(o["colour"], o["shape"])
            if label in labels:
                continue
            x1, y1, x2, y2 = (int(round(v)) for v in o["box"])
            if min(x2 - x1, y2 - y1) < 24:
                continue
            w, h = x2 - x1, y2 - y1
            crop = image[max(0, y1 - h // 8) : y2 + h // 8, max(0, x1 - w // 8) : x2 + w // 8]
            path = os.path.join(work, "crop-" + label.replace(" ", "-") + ".jpg")
            cv2.imwrite(path, crop, [cv2.IMWRITE_JPEG_QUALITY, 95])
            crops.append(path)
            labels.append(label)
    held = {scenes.caption(c, s) for c, s in scenes.HELD_OUT}

    def run_detect(extra: list[str]) -> list[dict]:
        done = subprocess.run([LOOKOUT, "detect", *files[:n], *extra, "--image-model", args.tower, "--conf", "0.001",
                               "--image-query-conf", "0.001", "--json"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"lookout detect failed: {done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines()]

    by_image = run_detect([x for c in crops for x in ("--query-image", c)])
    by_text = run_detect(["-q", ", ".join(labels)])
    rows = []
    for label, crop in zip(labels, crops):
        name = os.path.basename(crop)
        truth_boxes = [[o["box"] for o in objects_of[i] if scenes.caption(o["colour"], o["shape"]) == label]
                       for i in range(n)]
        if not any(truth_boxes):
            continue
        image_dets = [(d["score"], i, d["box"]) for i, r in enumerate(by_image) for d in r["detections"]
                      if d["label"] == name]
        text_dets = [(d["score"], i, d["box"]) for i, r in enumerate(by_text) for d in r["detections"]
                     if d["label"] == label]
        f1, threshold = best_f1_threshold(image_dets, truth_boxes)
        fixed = [f1_at(image_dets, truth_boxes, t) for t in FIXED]
        rows.append((label, detection_ap(image_dets, truth_boxes), detection_ap(text_dets, truth_boxes), f1,
                     threshold, label in held, fixed))
    print(f"\nphotos as queries: {len(rows)} colour–shape pairs, a crop of each as the query, on {n} scenes")
    for subset, name in ((lambda r: True, "all"), (lambda r: not r[5], "trained pairs"), (lambda r: r[5], "held-out pairs")):
        chosen = [r for r in rows if subset(r)]
        if chosen:
            print(f"  {name:15s} AP@0.5 photo {np.mean([r[1] for r in chosen]):.3f}, text "
                  f"{np.mean([r[2] for r in chosen]):.3f}; F1-best threshold median "
                  f"{np.median([r[4] for r in chosen]):.3f} (F1 {np.mean([r[3] for r in chosen]):.3f})")
            print("    mean F1 at one threshold for all: " + ", ".join(
                f"{t} {np.mean([r[6][k] for r in chosen]):.3f}" for k, t in enumerate(FIXED)))
    # Search: objects, scenes and both (Lookout's fusion), every caption, on the indexed scenes.
    results = search_aps(work, files, truth, captions, args.tower)
    print(f"\nsearch ({args.scenes} scenes indexed with the demo model and this tower): mean AP per caption group")
    print(f"  {'':26s} {'objects':>8s} {'scenes':>8s} {'both':>8s}")
    for name, members in list(groups.items()) + [("all", captions)]:
        row = [np.mean([results[m][c] for c in members if c in results[m]]) for m in ("--objects", "--scenes", None)]
        print(f"  {name:26s} {row[0]:8.3f} {row[1]:8.3f} {row[2]:8.3f}")
    print(f"\n(files in {work})")


if __name__ == "__main__":
    main()
