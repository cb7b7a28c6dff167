#!/usr/bin/env python3
"""Reference outputs of the embedded YOLOE demo model (Models/demo-yoloe) for Lookout's parity tests.

The detector is rebuilt by ultralytics itself: `YOLOE("yoloe-11n-seg.yaml")`, the shipped tensors read by the
safetensors library (not by Lookout) into it, strictly. The text reference is the demo text encoder
(Models/demo/text-encoder.safetensors) in train.TextEncoder, OpenAI CLIP's text tower in PyTorch with OpenAI's
names (its parity with `clip.model.CLIP` is what make_demo_fixtures.py records), the queries' token ids those
of OpenAI's tokenizer recorded in scripts/demo/captions.json. Its embeddings go through the head's `get_tpe` into `set_classes`, as ultralytics does
with a text tower's output; then `YOLOE.predict` with YOLOE's defaults (class-agnostic NMS, IoU 0.7) and
`retina_masks=True`. The visual-prompt case runs `YOLOEVPSegPredictor` with boxes on a reference scene
(`refer_image`), as `lookout detect --prompt-image REF --prompt-box …` asks.

Writes Tests/Fixtures/demo-yoloe/<case>.safetensors: `text` (1×K×512, the tower's output; none for the
visual case), `retina_detections` (N×6: x1 y1 x2 y2 in photo pixels, score, class), `retina_masks`
(numpy.packbits over N×H×W), metadata `queries` (JSON), `conf`, `retina_masks_shape`, and for the visual case
`bboxes` and `labels`.

    python scripts/demo/make_demo_yoloe_fixtures.py
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

import numpy as np  # noqa: E402
import torch  # noqa: E402
from make_yoloe_fixtures import retina_record  # noqa: E402

OUT = os.path.join(ROOT, "Tests", "Fixtures", "demo-yoloe")
SCENES = os.path.join(ROOT, "examples", "scenes")
TEXT_CASES = [
    # (name, scene, queries, conf): fine captions with one absent, then shape names.
    ("text-scene-0001", "scene-0001.jpg",
     ["black circle", "blue circle", "green circle", "green hexagon", "green star", "orange cross", "yellow square",
      "purple heart"], 0.25),
    ("text-scene-0003", "scene-0003.jpg", ["circle", "star", "hexagon", "square", "triangle"], 0.25),
]  # fmt: skip
# Boxes drawn on scene-0001 (its truth: green circle, green star, blue circle), looked for in scene-0003.
VISUAL = ("visual-scene-0003", "scene-0003.jpg", "scene-0001.jpg",
          [[309, 263, 388, 343], [19, 108, 132, 237], [147, 54, 217, 123]], ["green circle", "green star", "blue circle"])  # fmt: skip


def load_detector():
    from safetensors import safe_open
    from ultralytics import YOLOE

    path = os.path.join(ROOT, "Models", "demo-yoloe", "detector.safetensors")
    with safe_open(path, "pt") as f:
        state = {k: f.get_tensor(k).float() for k in f.keys() if not k.startswith("attribute.")}
        metadata = f.metadata()
    model = YOLOE("yoloe-11n-seg.yaml")
    own = model.model.state_dict()
    state = {k: v.to(own[k].dtype) for k, v in state.items()}
    model.model.load_state_dict(state, strict=True)
    model.model.names = dict(enumerate(json.loads(metadata["names"])))
    model.model.eval()
    return model


def text_embeddings(queries: list[str]) -> torch.Tensor:
    from safetensors.torch import load_file
    from train import CONTEXT, TextEncoder

    with open(os.path.join(HERE, "captions.json")) as f:
        known = json.load(f)["tokens"]  # OpenAI CLIP's token ids of every caption (make_captions.py)
    tokens = torch.zeros(len(queries), CONTEXT, dtype=torch.long)
    for i, q in enumerate(queries):
        tokens[i, : len(known[q])] = torch.tensor(known[q])
    encoder = TextEncoder()
    encoder.load_state_dict({k: v.float() for k, v in load_file(
        os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors")).items()})
    encoder.eval()
    with torch.no_grad():
        return encoder(tokens)[None]  # (1, K, 512), L2-normalised as the tower gives it


def main() -> None:
    import ultralytics
    from safetensors.torch import save_file
    from ultralytics.models.yolo.yoloe import YOLOEVPSegPredictor

    reference_env.ultralytics_nms_without_torchvision()
    os.makedirs(OUT, exist_ok=True)
    common = {"ultralytics": ultralytics.__version__, "torch": torch.__version__}
    for name, scene, queries, conf in TEXT_CASES:
        model = load_detector()
        text = text_embeddings(queries)
        with torch.no_grad():
            model.set_classes(queries, model.model.model[-1].get_tpe(text))
        photo = os.path.join(SCENES, scene)
        result = model.predict(photo, conf=conf, retina_masks=True, save=False, verbose=False)[0]
        tensors, shapes = retina_record(result, photo)
        tensors["text"] = text.float()
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"),
                  metadata={**common, "image": scene, "queries": json.dumps(queries), "conf": f"{conf:g}", **shapes})
        print(f"{name}: {[(queries[int(c)], round(float(s), 3)) for c, s in zip(result.boxes.cls, result.boxes.conf)]}")

    name, scene, refer, boxes, labels = VISUAL
    distinct = sorted(set(labels), key=labels.index)
    prompts = dict(bboxes=np.array(boxes, dtype=np.float32), cls=np.array([distinct.index(l) for l in labels]))
    model = load_detector()
    photo = os.path.join(SCENES, scene)
    conf = 0.25
    result = model.predict(photo, conf=conf, visual_prompts=prompts, predictor=YOLOEVPSegPredictor,
                           refer_image=os.path.join(SCENES, refer), retina_masks=True, save=False, verbose=False)[0]
    tensors, shapes = retina_record(result, photo)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"),
              metadata={**common, "image": scene, "refer_image": refer, "conf": f"{conf:g}",
                        "bboxes": json.dumps(boxes), "labels": json.dumps(labels), **shapes})
    print(f"{name}: {[(distinct[int(c)], round(float(s), 3)) for c, s in zip(result.boxes.cls, result.boxes.conf)]}")


if __name__ == "__main__":
    main()
