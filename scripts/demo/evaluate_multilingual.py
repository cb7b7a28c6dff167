#!/usr/bin/env python3
"""Measures the demo's multilingual scene tower in each language, through Lookout itself, beside the CLIP tower.

    python scripts/demo/evaluate_multilingual.py [--tower Models/demo/scene-tower] [--scenes 400]

The held-out scenes of evaluate_image.py (seed 515000, evaluation split: every colour–shape pair, the 10 never
drawn in training included), written as JPEG and embedded by `lookout embed --image --image-model TOWER`; the 110
scene captions in English, German, French, Spanish and Chinese (multilingual.py) by `lookout embed --text-model
TOWER`. For each language: captions → scenes recall@1 and recall@5 (a scene the caption is true of among the k
best) and mean AP, per caption group. The demo's CLIP tower (Models/demo/image-encoder.safetensors with the demo
text encoder) is measured on the same scenes with the English captions, and an edited copy of each scene is used
as a query among the originals for both towers. Then `lookout search` itself (unless --no-search): the scenes
indexed with the demo model and each tower, every caption searched with --scenes and with both kinds of evidence
(the default), in each language for the multilingual tower and in English for the CLIP tower (and --objects in
English), mean AP per caption group. Lookout must be built in release (`swift build -c release`).
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
import multilingual  # noqa: E402
import scenes  # noqa: E402
from evaluate_image import (  # noqa: E402
    EDITS, LOOKOUT, average_precision, caption_groups, edit, embed_photos, embed_texts, fit_scene_score, scene_set,
    search_aps)
from train_image import caption_list, true_captions  # noqa: E402


def embed_tower_texts(tower: str, texts: list[str]) -> np.ndarray:
    out = subprocess.run([LOOKOUT, "embed", "--text-model", tower, *texts], capture_output=True, text=True,
                         check=True).stdout
    return np.array([json.loads(line) for line in out.splitlines()], np.float64)


def retrieval(similarity: np.ndarray, truth: np.ndarray, captions: list[str]) -> dict[str, tuple]:
    groups = caption_groups(captions)
    held = {scenes.caption(c, s) for c, s in scenes.HELD_OUT}
    groups["pairs never trained"] = [c for c in captions[30:] if c in held]
    groups["all"] = captions
    out = {}
    for name, members in groups.items():
        rows = [captions.index(c) for c in members if truth[:, captions.index(c)].any()]
        r1 = np.mean([truth[np.argsort(-similarity[r], kind="stable")[:1], r].any() for r in rows])
        r5 = np.mean([truth[np.argsort(-similarity[r], kind="stable")[:5], r].any() for r in rows])
        ap = np.mean([average_precision(similarity[r], truth[:, r]) for r in rows])
        out[name] = (r1, r5, ap, len(rows))
    return out


def calibrate(tower: str, duplicate_threshold: float | None) -> None:
    """Fits the tower's scene score, sigmoid((cosine − centre) · slope), by logistic regression on every (scene,
    caption) pair of 400 scenes that are not the evaluation's (seed 525000), the captions in all five languages,
    and records it in the folder's config.json (`lookout_scene_center`, `lookout_scene_slope`), with the
    duplicates threshold when given. SigLIP's own logit scale and bias, from a short training, rank well but read
    as overconfident probabilities: a wrong scene at 0.96 outranks a right region in search's max of the two."""
    captions = caption_list()
    table = multilingual.translations()
    files, truth = scene_set(525000, 400, tempfile.mkdtemp(prefix="lookout-calibration-"), captions)
    images = embed_photos(tower, files)
    cosines = np.concatenate([
        (images @ embed_tower_texts(tower, [table[c][language] for c in captions]).T).ravel()
        for language in multilingual.LANGUAGES])
    centre, slope = fit_scene_score(cosines, np.tile(truth.ravel(), len(multilingual.LANGUAGES)))
    path = os.path.join(tower, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["lookout_scene_center"] = round(centre, 6)
    config["lookout_scene_slope"] = round(slope, 4)
    if duplicate_threshold is not None:
        config["lookout_duplicate_threshold"] = duplicate_threshold
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"wrote the calibration into {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tower", default=os.path.join(ROOT, "Models", "demo", "scene-tower"))
    parser.add_argument("--clip-tower", default=os.path.join(ROOT, "Models", "demo", "image-encoder.safetensors"))
    parser.add_argument("--scenes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=515000)
    parser.add_argument("--no-search", action="store_true", help="skip the lookout search table")
    parser.add_argument("--calibrate", action="store_true", help="fit the tower's scene score on other scenes "
                        "(seed 525000) and record it, with --duplicate-threshold, in its config.json")
    parser.add_argument("--duplicate-threshold", type=float)
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.tower, args.duplicate_threshold)
        return
    captions = caption_list()
    table = multilingual.translations()
    work = tempfile.mkdtemp(prefix="lookout-multilingual-eval-")
    files, edited, truth = [], [], np.zeros((args.scenes, len(captions)), bool)
    for i in range(args.scenes):
        image, objects, background = scenes.scene(args.seed, i, "eval")
        files.append(os.path.join(work, f"scene-{i:04d}.jpg"))
        cv2.imwrite(files[-1], image, [cv2.IMWRITE_JPEG_QUALITY, 95])
        edited.append(os.path.join(work, f"edit-{i:04d}.jpg"))
        cv2.imwrite(edited[-1], edit(image, i % len(EDITS)), [cv2.IMWRITE_JPEG_QUALITY, 95])
        for caption in true_captions(objects, background):
            truth[i, captions.index(caption)] = True

    results = {}
    images = embed_photos(args.tower, files)
    for language in multilingual.LANGUAGES:
        texts = embed_tower_texts(args.tower, [table[c][language] for c in captions])
        results[f"{os.path.basename(args.tower)} {language}"] = retrieval(texts @ images.T, truth, captions)
    clip_images = embed_photos(args.clip_tower, files)
    results["CLIP tower en"] = retrieval(embed_texts(captions) @ clip_images.T, truth, captions)

    print(f"{args.scenes} held-out scenes (seed {args.seed}); captions → scenes recall@5 (recall@1, mean AP)\n")
    names = list(next(iter(results.values())))
    print(f"{'tower, language':24s} " + " ".join(f"{n[:18]:>20s}" for n in names))
    for key, row in results.items():
        print(f"{key:24s} " + " ".join(f"{row[n][1]:6.3f} ({row[n][0]:.2f}, {row[n][2]:.2f})" for n in names))
    print("captions per group: " + ", ".join(f"{n} {next(iter(results.values()))[n][3]}" for n in names))

    print("\nscenes → scenes (an edited copy finds its original among all)")
    for name, originals, copies in (("scene tower", images, embed_photos(args.tower, edited)),
                                    ("CLIP tower", clip_images, embed_photos(args.clip_tower, edited))):
        cross = copies @ originals.T
        ranks = np.array([(cross[i] > cross[i, i]).sum() for i in range(args.scenes)])
        same = np.array([cross[i, i] for i in range(args.scenes)])
        distinct = (originals @ originals.T)[np.triu_indices(args.scenes, 1)]
        print(f"  {name}: recall@1 {np.mean(ranks < 1):.3f}, recall@5 {np.mean(ranks < 5):.3f}; cosine of a scene "
              f"and its edit: 5th percentile {np.percentile(same, 5):.4f}; of distinct scenes: max {distinct.max():.4f}")
        for threshold in (0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
            per_edit = ", ".join(f"{edit_name} {(same[k :: len(EDITS)] >= threshold).mean():.2f}"
                                 for k, edit_name in enumerate(EDITS))
            print(f"    duplicates at {threshold:.2f}: copies found {(same >= threshold).mean():.3f} ({per_edit}), "
                  f"distinct pairs linked {int((distinct >= threshold).sum())} of {len(distinct)}")
    if args.no_search:
        return

    groups = caption_groups(captions) | {"all": captions}
    rows = {}
    clip = search_aps(work, files, truth, captions, args.clip_tower)
    rows["CLIP tower, en, --objects"] = clip["--objects"]
    rows["CLIP tower, en, --scenes"] = clip["--scenes"]
    rows["CLIP tower, en, both"] = clip[None]
    for language in multilingual.LANGUAGES:
        found = search_aps(work, files, truth, captions, args.tower, [table[c][language] for c in captions],
                           modes=("--scenes", None))
        rows[f"multilingual, {language}, --scenes"] = found["--scenes"]
        rows[f"multilingual, {language}, both"] = found[None]
    print(f"\nlookout search ({args.scenes} scenes indexed with the demo model and each tower): mean AP per caption group")
    print(f"{'tower, language, evidence':32s} " + " ".join(f"{n[:18]:>18s}" for n in groups))
    for key, aps in rows.items():
        print(f"{key:32s} " + " ".join(f"{np.mean([aps[c] for c in m if c in aps]):18.3f}" for m in groups.values()))


if __name__ == "__main__":
    main()
