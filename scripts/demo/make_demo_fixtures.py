#!/usr/bin/env python3
"""Reference outputs of the embedded demo model (Models/demo) for Lookout's parity tests.

Reads the committed safetensors with the safetensors library (not with Lookout): the detector into
ultralytics' WorldModel built from `yolov8n-worldv2.yaml` (then `.float()`, `fuse()`, eval, as AutoBackend
loads a checkpoint), the text encoder into the PyTorch module the model was trained with (scripts/demo/train.py).
Queries are tokenized with OpenAI's `clip.tokenize`. Each case runs the predictor's steps: LetterBox (auto,
stride 32, pad 114), BGR→RGB, /255, `predict(x, txt_feats)`, `non_max_suppression` (conf, IoU 0.7, max 300,
class-aware), `scale_boxes`.

Cases: scenes from examples/scenes, one saved as grayscale JPEG and one as RGBA PNG (alpha dropped on read,
as cv2.imread does), query sets with fine, coarse and absent captions, one ending with the " " padding
query, and confidences 0.25 and 0.05. Each case also runs in float64; the float32 error of the reference
itself is recorded and must stay under a tenth of the test tolerances.

Writes Tests/Fixtures/demo/expected.json and the converted images.
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

OUT = os.path.join(ROOT, "Tests", "Fixtures", "demo")


def load_models():
    from safetensors.torch import load_file
    from ultralytics.nn.tasks import WorldModel

    from train import TextEncoder

    state = load_file(os.path.join(ROOT, "Models", "demo", "detector.safetensors"))
    model = WorldModel("yolov8n-worldv2.yaml", nc=80, verbose=False)
    model.load_state_dict({k: v for k, v in state.items() if not k.startswith("attribute.")}, strict=True)
    model = model.float().fuse().eval()
    model64 = WorldModel("yolov8n-worldv2.yaml", nc=80, verbose=False)
    model64.load_state_dict({k: v for k, v in state.items() if not k.startswith("attribute.")}, strict=True)
    model64 = model64.double().fuse().eval()
    text = TextEncoder()
    text.load_state_dict({k: v.float() for k, v in load_file(os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors")).items()})
    return model, model64, text.eval()


def preprocess(image: np.ndarray, size: int) -> torch.Tensor:
    from ultralytics.data.augment import LetterBox

    boxed = LetterBox((size, size), auto=True, stride=32)(image=image)
    return torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1))).float().unsqueeze(0) / 255


def main() -> None:
    import clip

    reference_env.forget_torchvision()  # after clip, which imports torchvision; NMS then uses TorchNMS
    import ultralytics
    from ultralytics.utils import ops
    from ultralytics.utils.nms import non_max_suppression

    os.makedirs(OUT, exist_ok=True)
    scenes = os.path.join(ROOT, "examples", "scenes")
    gray = cv2.cvtColor(cv2.imread(os.path.join(scenes, "scene-0003.jpg")), cv2.COLOR_BGR2GRAY)
    cv2.imwrite(os.path.join(OUT, "scene-0003-gray.jpg"), gray, [cv2.IMWRITE_JPEG_QUALITY, 90])
    colour = cv2.imread(os.path.join(scenes, "scene-0007.jpg"))
    colour = cv2.resize(colour, (colour.shape[1] * 3 // 5, colour.shape[0] * 3 // 5), interpolation=cv2.INTER_AREA)
    alpha = np.full(colour.shape[:2], 200, np.uint8)
    cv2.imwrite(os.path.join(OUT, "scene-0007-rgba.png"), np.dstack([colour, alpha]))

    model, model64, text = load_models()
    fine = [f"{c} {s}" for s in ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]
            for c in ["red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white"]]
    query_sets = {
        "fine": fine,
        "mixed": ["star", "green shape", "red square", "ring", "dog", "blue circle"],
        "padded": ["circle", "white hexagon", "black shape", " "],
    }
    cases = [
        ("examples/scenes/scene-0001.jpg", "fine", 640),
        ("examples/scenes/scene-0005.jpg", "mixed", 640),
        ("examples/scenes/scene-0002.jpg", "padded", 480),
        ("Tests/Fixtures/demo/scene-0003-gray.jpg", "mixed", 640),
        ("Tests/Fixtures/demo/scene-0007-rgba.png", "fine", 512),
    ]
    embeddings = {}
    for name, queries in query_sets.items():
        with torch.no_grad():
            embeddings[name] = text(clip.tokenize(queries, truncate=True))
    out = {
        "ultralytics": ultralytics.__version__,
        "torch": torch.__version__,
        "query_sets": query_sets,
        "embeddings": {k: [[round(float(x), 9) for x in row] for row in v] for k, v in embeddings.items()},
        "cases": [],
    }
    for path, set_name, size in cases:
        image = cv2.imread(os.path.join(ROOT, path))  # IMREAD_COLOR: gray replicated, alpha dropped
        x = preprocess(image, size)
        feats = embeddings[set_name][None]
        for m in (model, model64):
            m.model[-1].nc = feats.shape[1]
        with torch.no_grad():
            y = model.predict(x, txt_feats=feats)
            y = y[0] if isinstance(y, tuple) else y
            y64 = model64.predict(x.double(), txt_feats=feats.double())
            y64 = y64[0] if isinstance(y64, tuple) else y64
        box_error = float((y[0, :4].double() - y64[0, :4]).abs().max())
        score_error = float((y[0, 4:].double() - y64[0, 4:]).abs().max())
        assert box_error < 0.001 and score_error < 1e-5, f"{path}: reference float32 error {box_error}, {score_error}"
        case = {"image": path, "queries": set_name, "imgsz": size, "input_shape": list(x.shape[2:]),
                "reference_error_boxes": box_error, "reference_error_scores": score_error, "detections": {}}
        for conf in (0.25, 0.05):
            kept = non_max_suppression(y.clone(), conf, 0.7, max_det=300)[0]
            kept[:, :4] = ops.scale_boxes(x.shape[2:], kept[:, :4].clone(), image.shape[:2])
            case["detections"][f"{conf}"] = [
                {"box": [float(v) for v in row[:4]], "score": float(row[4]), "query_index": int(row[5])}
                for row in kept
            ]
        out["cases"].append(case)
        print(f"{path} [{set_name}] {tuple(x.shape[2:])}: {len(case['detections']['0.25'])} detections at 0.25, "
              f"{len(case['detections']['0.05'])} at 0.05; reference error boxes {box_error:.2g}, scores {score_error:.2g}")
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
