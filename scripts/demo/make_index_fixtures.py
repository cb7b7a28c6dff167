#!/usr/bin/env python3
"""An independent reference for Lookout's photo index (`lookout index`, `lookout search`, `--exact`).

Computed here from ultralytics' own outputs and numpy, never by Lookout, on the demo model's ultralytics
checkpoint (Tests/Fixtures/demo/demo-detector.pt, see make_demo_fixtures.py) and a small folder of scenes:

- **Stored regions**, as Lookout's index defines them (region rule "q8-v2"): the photo letterboxed at 640
  (auto, stride 32) and run with the neck conditioned on the index vocabulary — the checkpoint's built-in
  text features followed by the generic prompt "object" (`predict(x, txt_feats)`); each anchor's score is
  its best over that vocabulary; every anchor, best first (ties by anchor index), passes a greedy
  class-agnostic suppression of near-duplicates (IoU > 0.95 with a kept box drops it) until 64 are kept.
  A region is its box (`scale_boxes` to the photo), its output level, its score and its region embedding:
  the contrastive head's batch-normalised image feature at that anchor (the output of `cv4[level].norm`),
  quantised to 8 bits with one scale per region (scale = max|e| / 127, values rounded half to even).
- **Search scores**: a query t scores a region as `BNContrastiveHead` would,
  `sigmoid(<e, t/|t|> * exp(logit_scale[level]) + bias[level])`, in float64 on the dequantised embedding; a photo's
  score is its best region's; photos with a region above `conf` are ranked by score (ties by path), and
  each lists its regions above `conf`, best first.
- The reference's own float32 error of the region embeddings (against the same model in float64) is
  recorded as `reference_error_embeddings`: a stored 8-bit value may differ from the reference's rounding
  by one step where ten times that error reaches a rounding boundary.
- **`--exact`**: the candidates are the photos with a region above min(conf, 0.01), at most max(3·top, 30) of
  them; each is run through ultralytics with the query's own text features (`predict`, NMS at conf, IoU
  0.7, `scale_boxes`), ranked by its best detection.

The query embeddings come from OpenAI's `clip.model` text tower loaded with the demo text encoder (as in
make_demo_fixtures.py) and are stored, so that the Swift tests can score the index with exactly these.

    python scripts/demo/make_index_fixtures.py  -> Tests/Fixtures/index/{expected.json,regions.safetensors}
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
sys.path.insert(0, HERE)
import reference_env  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

OUT = os.path.join(ROOT, "Tests", "Fixtures", "index")
PHOTOS = [f"scene-{i:04d}.jpg" for i in range(0, 11)]
QUERIES = ["star", "ring", "white heart", "green circle", "blue shape", "dog"]
IMGSZ = 640
MAX_REGIONS = 64
MIN_SCORE = 0.0
SUPPRESSION_IOU = 0.95
GENERIC_PROMPTS = ["object"]
CONF = 0.1
TOP = 20


def iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def main() -> None:
    import clip

    reference_env.forget_torchvision()
    from make_demo_fixtures import load_models, preprocess
    from safetensors.torch import save_file
    from ultralytics.utils import ops
    from ultralytics.utils.nms import non_max_suppression

    model, model64, text, _ = load_models()
    head = model.model[-1]
    levels = len(head.cv4)
    parameters = [(float(head.cv4[i].logit_scale.detach()), float(head.cv4[i].bias.detach())) for i in range(levels)]
    with torch.no_grad():
        generic = text.encode_text(clip.tokenize(GENERIC_PROMPTS, truncate=True)).float()
    generic = generic / generic.norm(dim=-1, keepdim=True)
    builtin = model.txt_feats.float().reshape(-1, model.txt_feats.shape[-1])
    vocabulary = torch.cat([builtin, generic]).reshape(1, -1, builtin.shape[-1])
    tensors: dict[str, torch.Tensor] = {"vocabulary.generic": generic.contiguous()}
    scenes = os.path.join(ROOT, "examples", "scenes")

    regions: dict[str, dict] = {}
    embedding_error = 0.0
    for name in PHOTOS:
        image = cv2.imread(os.path.join(scenes, name))
        x = preprocess(image, IMGSZ)
        captured: dict[int, torch.Tensor] = {}
        hooks = [head.cv4[i].norm.register_forward_hook(
            lambda module, inputs, output, i=i: captured.__setitem__(i, output)) for i in range(levels)]
        model.model[-1].nc = vocabulary.shape[1]
        with torch.no_grad():
            y = model.predict(x, txt_feats=vocabulary)
        for hook in hooks:
            hook.remove()
        # The same photo in float64: the reference's own float32 error of the region embeddings.
        captured64: dict[int, torch.Tensor] = {}
        head64 = model64.model[-1]
        hooks = [head64.cv4[i].norm.register_forward_hook(
            lambda module, inputs, output, i=i: captured64.__setitem__(i, output)) for i in range(levels)]
        head64.nc = vocabulary.shape[1]
        with torch.no_grad():
            model64.predict(x.double(), txt_feats=vocabulary.double())
        for hook in hooks:
            hook.remove()
        embedding_error = max(embedding_error, max(
            float((captured[i].double() - captured64[i]).abs().max()) for i in range(levels)))
        output = (y[0] if isinstance(y, tuple) else y)[0].numpy()  # (4 + K, anchors)
        embeddings = np.concatenate([captured[i][0].flatten(1).T.numpy() for i in range(levels)])  # (anchors, 512)
        level_of = np.concatenate([np.full(captured[i].shape[2] * captured[i].shape[3], i) for i in range(levels)])
        assert embeddings.shape[0] == output.shape[1]
        best = output[4:].max(axis=0)
        order = sorted(np.nonzero(best >= MIN_SCORE)[0].tolist(), key=lambda a: (-best[a], a))
        kept: list[tuple[int, np.ndarray]] = []
        for anchor in order:
            cx, cy, w, h = output[:4, anchor]
            box = np.array([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], np.float32)
            if any(iou(k[1], box) > SUPPRESSION_IOU for k in kept):
                continue
            kept.append((anchor, box))
            if len(kept) == MAX_REGIONS:
                break
        # Score gaps among the kept anchors and their rivals: a near tie could let float error pick another.
        boxes = torch.from_numpy(np.stack([k[1] for k in kept]))
        scaled = ops.scale_boxes(x.shape[2:], boxes.clone(), image.shape[:2]).numpy()
        anchors = [k[0] for k in kept]
        regions[name] = {
            "anchors": anchors,
            "levels": [int(level_of[a]) for a in anchors],
            "scores": [float(best[a]) for a in anchors],
            "boxes": scaled.tolist(),
        }
        chosen = embeddings[anchors].astype(np.float32)
        scales = (np.abs(chosen).max(axis=1) / np.float32(127)).astype(np.float32)
        quantised = np.clip(np.round(chosen / scales[:, None]), -127, 127).astype(np.int8)
        tensors[f"{name}.embeddings"] = torch.from_numpy(chosen)
        tensors[f"{name}.quantised"] = torch.from_numpy(quantised)
        tensors[f"{name}.scales"] = torch.from_numpy(scales)
        print(f"{name}: {len(order)} anchors above {MIN_SCORE}, {len(kept)} regions kept, best {best.max():.3f}")

    def region_scores(name: str, t: np.ndarray) -> list[tuple[float, list[float]]]:
        e = tensors[f"{name}.quantised"].numpy().astype(np.float64) * tensors[f"{name}.scales"].numpy()[:, None]
        similarity = e @ t
        out = []
        for k, s in enumerate(similarity):
            scale, bias = parameters[regions[name]["levels"][k]]
            out.append((float(1 / (1 + np.exp(-(s * np.exp(scale) + bias)))), regions[name]["boxes"][k]))
        return out

    searches = []
    for query in QUERIES:
        with torch.no_grad():
            t = text.encode_text(clip.tokenize([query], truncate=True))[0]
        t = (t / t.norm()).double().numpy()

        def ranked(conf: float, top: int) -> list[dict]:
            hits = []
            for name in PHOTOS:
                scored = sorted([r for r in region_scores(name, t) if r[0] > conf], key=lambda r: -r[0])
                if scored:
                    hits.append({"image": name, "score": scored[0][0],
                                 "detections": [{"score": s, "box": b} for s, b in scored]})
            hits.sort(key=lambda h: (-h["score"], h["image"]))
            return hits[:top]

        plain = ranked(CONF, TOP)
        candidates = ranked(min(CONF, 0.01), max(3 * TOP, 30))
        exact = []
        for hit in candidates:
            image = cv2.imread(os.path.join(scenes, hit["image"]))
            x = preprocess(image, IMGSZ)
            model.model[-1].nc = 1
            with torch.no_grad():
                y = model.predict(x, txt_feats=torch.from_numpy(t).float().reshape(1, 1, -1))
            y = y[0] if isinstance(y, tuple) else y
            kept = non_max_suppression(y.clone(), CONF, 0.7, max_det=300)[0]
            kept[:, :4] = ops.scale_boxes(x.shape[2:], kept[:, :4].clone(), image.shape[:2])
            if len(kept):
                exact.append({"image": hit["image"], "score": float(kept[0, 4]),
                              "detections": [{"score": float(r[4]), "box": [float(v) for v in r[:4]]} for r in kept]})
        exact.sort(key=lambda h: -h["score"])
        searches.append({"query": query, "embedding": [float(v) for v in t], "results": plain, "exact": exact[:TOP],
                         "candidates": len(candidates)})
        print(f"{query!r}: {len(plain)} photos above {CONF} ({', '.join(h['image'][6:10] for h in plain)}); "
              f"--exact: {len(exact)} of {len(candidates)} candidates")

    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "regions.safetensors"))
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"photos": PHOTOS, "imgsz": IMGSZ, "max_regions": MAX_REGIONS, "min_score": MIN_SCORE,
                   "suppression_iou": SUPPRESSION_IOU, "generic_prompts": GENERIC_PROMPTS,
                   "conf": CONF, "top": TOP,
                   "score_parameters": parameters, "reference_error_embeddings": embedding_error,
                   "regions": regions, "searches": searches}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
