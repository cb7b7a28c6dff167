#!/usr/bin/env python3
"""Reference outputs of the YOLO-World v2 network, as ultralytics' predictor runs it.

For Tests/Fixtures/weights/yolov8n-worldv2-random.pt: the model is loaded like `AutoBackend` loads it
(`ema or model`, `.float()`, `fuse()`, eval), fed letterboxed photos from examples/photos (LetterBox with auto=True, stride 32,
pad 114, BGR→RGB, /255 — the predictor's preprocessing), and run with the checkpoint's text features and
with a custom query set. Writes Tests/Fixtures/detector/<name>.safetensors holding the input tensor, the
text features, the backbone outputs (layers 4, 6, 9), the neck outputs (15, 18, 21) and the raw output
(1, 4 + K, anchors): boxes (cx, cy, w, h) in input pixels, then sigmoid scores.

Conditioning: a random network can amplify float32 rounding far beyond what trained weights do. For each
case the same model is also run in float64, and the reference's own float32 error is recorded in the
metadata (`reference_error_boxes`, `reference_error_scores`). Cases meant for the full comparison (raw
scores within 1e-4, boxes within 0.01 px) must have a reference error under a tenth of those tolerances;
the script fails otherwise. The case with the checkpoint's 80 built-in text features is kept for the
backbone comparison only: its scores saturate and its float32 error is about the tolerance itself.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "detector")
LAYERS = (4, 6, 9, 15, 18, 21)  # backbone outputs P3, P4, P5; neck outputs fed to the head
MAX_DET = 5


def preprocess(path: str, size: int) -> torch.Tensor:
    from ultralytics.data.augment import LetterBox

    image = cv2.imread(path)
    boxed = LetterBox((size, size), auto=True, stride=32)(image=image)
    return torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1))).float().unsqueeze(0) / 255


def main() -> None:
    import argparse

    import ultralytics
    from safetensors.torch import save_file

    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default=os.path.join(ROOT, "Tests", "Fixtures", "weights", "yolov8n-worldv2-random.pt"))
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--prefix", default="n", help="fixture names start with it (the scale)")
    args = parser.parse_args()
    out = args.out
    reference_env.forget_torchvision()
    checkpoint = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    model = (checkpoint.get("ema") or checkpoint["model"]).float()
    model = model.fuse().eval()
    exact = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    exact = (exact.get("ema") or exact["model"]).double().fuse().eval()
    assets = os.path.join(ROOT, "examples", "photos")
    torch.manual_seed(7)
    queries = torch.nn.functional.normalize(torch.randn(1, 3, 512), dim=-1)
    five = torch.nn.functional.normalize(torch.randn(1, 5, 512), dim=-1)
    os.makedirs(out, exist_ok=True)
    for name, image, size, text, full in [
        (f"{args.prefix}-astronaut-320", "astronaut.jpg", 320, None, False),
        (f"{args.prefix}-rocket-416-queries", "rocket.jpg", 416, five, True),
        (f"{args.prefix}-chelsea-352-queries", "chelsea.jpg", 352, queries, True),
    ]:
        x = preprocess(os.path.join(assets, image), size)
        captured: dict[int, torch.Tensor] = {}
        captured64: dict[int, torch.Tensor] = {}
        hooks = [model.model[i].register_forward_hook(
            lambda module, inputs, output, i=i: captured.__setitem__(i, output)) for i in LAYERS]
        hooks += [exact.model[i].register_forward_hook(
            lambda module, inputs, output, i=i: captured64.__setitem__(i, output)) for i in LAYERS]
        for m in (model, exact):
            m.model[-1].nc = 80 if text is None else text.shape[1]  # what set_classes does for a new query set
        with torch.no_grad():
            y = model.predict(x, txt_feats=text)
            y64 = exact.predict(x.double(), txt_feats=None if text is None else text.double())[0]
        for hook in hooks:
            hook.remove()
        output = y[0] if isinstance(y, tuple) else y
        box_error = float((output[0, :4].double() - y64[0, :4]).abs().max())
        score_error = float((output[0, 4:].double() - y64[0, 4:]).abs().max())
        if full:
            assert box_error < 0.001 and score_error < 1e-5, f"{name} is ill-conditioned: {box_error}, {score_error}"
        tensors = {"input": x, "text": (model.txt_feats if text is None else text).float().contiguous(), "output": output}
        # Post-processing as the predictor runs it: NMS (conf, iou 0.7, max_det 300, class-aware), then boxes
        # scaled back to the original image.
        from ultralytics.utils import ops
        from ultralytics.utils.nms import non_max_suppression

        original = cv2.imread(os.path.join(assets, image)).shape[:2]

        def detections(conf: float, agnostic: bool = False, max_det: int = 300) -> torch.Tensor:
            kept = non_max_suppression(output.clone(), conf, 0.7, agnostic=agnostic, max_det=max_det)[0]
            kept[:, :4] = ops.scale_boxes(x.shape[2:], kept[:, :4].clone(), original)
            return kept.contiguous()

        # Two thresholds, each with at least one detection (an empty reference proves nothing): 0.25, the
        # predictor's default, where it keeps something, else the highest of 0.2, 0.15, 0.1, 0.09, ... that does;
        # and 0.05.
        high = next(c for c in (0.25, 0.2, 0.15, 0.1, 0.09, 0.08, 0.07, 0.06) if len(detections(c)) > 0)
        confidences = [high, 0.05]
        for conf in confidences:
            tensors[f"detections_conf{round(conf * 100):03d}"] = detections(conf)
        # Class-agnostic NMS and a cap on the count, as the predictor's `agnostic_nms` and `max_det` run them.
        tensors["detections_agnostic"] = detections(0.05, agnostic=True)
        tensors["detections_maxdet"] = detections(0.05, max_det=MAX_DET)
        if full:
            assert len(tensors["detections_agnostic"]) < len(tensors["detections_conf005"]), "agnostic NMS changes nothing"
            assert len(tensors["detections_conf005"]) > MAX_DET, "the cap changes nothing"
        tensors["original_shape"] = torch.tensor(list(original), dtype=torch.int64)
        layer_errors = {}
        for i, value in captured.items():
            tensors[f"layer{i}"] = value.contiguous()
            layer_errors[f"reference_error_layer{i}"] = f"{float((value.double() - captured64[i]).abs().max()):.3g}"
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, name + ".safetensors"),
                  metadata={"ultralytics": ultralytics.__version__, "torch": torch.__version__, "image": image,
                            "full_comparison": str(full), "reference_error_boxes": f"{box_error:.3g}",
                            "reference_error_scores": f"{score_error:.3g}",
                            "confidences": ",".join(f"{c:g}" for c in confidences),
                            "agnostic_conf": "0.05", "max_det": str(MAX_DET), **layer_errors})
        scores = output[0, 4:]
        print(f"{name}: input {tuple(x.shape)}, output {tuple(output.shape)}, scores > 0.25: "
              f"{int((scores > 0.25).sum())}, max score {float(scores.max()):.3f}, float32 error of the reference: "
              f"boxes {box_error:.2g} px, scores {score_error:.2g}; layers {layer_errors}; detections at "
              f"{confidences}: {[len(tensors[f'detections_conf{round(c * 100):03d}']) for c in confidences]}")


if __name__ == "__main__":
    main()
