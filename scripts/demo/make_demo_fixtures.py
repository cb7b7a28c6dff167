#!/usr/bin/env python3
"""Reference outputs of the embedded demo model (Models/demo) for Lookout's parity tests.

The detector reference runs from an ultralytics checkpoint, `Tests/Fixtures/demo/demo-detector.pt`, loaded
as AutoBackend loads one (`torch.load`, `ema or model`, `.float()`, `fuse()`, eval), never from the
converted file Lookout ships. The training run's own checkpoint was not kept, so `--checkpoint` re-makes it
with ultralytics itself: `YOLOWorld("yolov8n-worldv2.yaml")`, the shipped tensors read by the safetensors
library (not by Lookout) into it, then `YOLOWorld.save` (fp16, as released). Lookout's converter test then
requires `lookout models convert demo-detector.pt --keep-half` to reproduce the shipped file tensor for
tensor, and the per-tensor CRC-32s of the checkpoint as torch reads it (`checkpoint` in expected.json).

The text reference is OpenAI's own `clip.model.CLIP` (text tower width 64, 3 layers, 1 head, the real
vocabulary; a minimal vision tower that is not used), with the shipped text-encoder tensors loaded into it,
queries tokenized by `clip.tokenize`, `encode_text`, then L2 normalisation as ultralytics does.

Each case runs the predictor's steps: LetterBox (auto, stride 32, pad 114), BGR→RGB, /255,
`predict(x, txt_feats)`, `non_max_suppression` (conf, IoU 0.7, max 300, class-aware), `scale_boxes`.
Cases: scenes from examples/scenes, one saved as grayscale JPEG and one as RGBA PNG (alpha dropped on read,
as cv2.imread does), query sets with fine, coarse and absent captions, one ending with the " " padding
query, and confidences 0.25 and 0.05. Each case also runs in float64; the float32 error of the reference
itself is recorded (boxes, scores, text embeddings) and the tests' tolerances are ten times it.

    python scripts/demo/make_demo_fixtures.py [--checkpoint]
        -> Tests/Fixtures/demo/expected.json, the converted images (and demo-detector.pt with --checkpoint)
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


CHECKPOINT = os.path.join(OUT, "demo-detector.pt")


def make_checkpoint() -> None:
    """The demo detector as an ultralytics checkpoint, written by ultralytics from the shipped tensors."""
    from safetensors import safe_open
    from safetensors.torch import load_file
    from ultralytics import YOLOWorld

    path = os.path.join(ROOT, "Models", "demo", "detector.safetensors")
    state = load_file(path)
    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    torch.manual_seed(0)
    model = YOLOWorld("yolov8n-worldv2.yaml")
    net = model.model
    net.load_state_dict({k: v.float() for k, v in state.items() if not k.startswith("attribute.")}, strict=True)
    net.txt_feats = state["attribute.txt_feats"].float()
    net.names = dict(enumerate(json.loads(metadata["names"])))
    head = net.model[-1]
    head.anchors = state["attribute.model.22.anchors"].float()
    head.strides = state["attribute.model.22.strides"].float()
    eps = json.loads(metadata["lookout.batchnorm_eps"])
    for name, module in net.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            assert abs(module.eps - eps[name]) < 1e-12, f"{name}: eps {module.eps} vs {eps[name]}"
    model.save(CHECKPOINT)


def load_models():
    from clip.model import CLIP
    from safetensors.torch import load_file

    def detector(dtype):
        checkpoint = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)
        return (checkpoint.get("ema") or checkpoint["model"]).to(dtype).fuse().eval()

    def text(dtype):
        state = {k: v.float() for k, v in load_file(os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors")).items()}
        width = state["ln_final.weight"].shape[0]
        layers = len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")})
        model = CLIP(embed_dim=state["text_projection"].shape[1], image_resolution=32, vision_layers=1, vision_width=64,
                     vision_patch_size=32, context_length=state["positional_embedding"].shape[0],
                     vocab_size=state["token_embedding.weight"].shape[0], transformer_width=width,
                     transformer_heads=width // 64, transformer_layers=layers)
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected, unexpected
        assert all(k.startswith("visual.") or k == "logit_scale" for k in missing), missing
        if dtype == torch.float64:  # clip.model.LayerNorm computes in float32 whatever its input; not here
            for module in model.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.forward = lambda x, m=module: torch.nn.LayerNorm.forward(m, x)
        return model.to(dtype).eval()

    return detector(torch.float32), detector(torch.float64), text(torch.float32), text(torch.float64)


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

    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", action="store_true", help="re-make demo-detector.pt first")
    if parser.parse_args().checkpoint or not os.path.exists(CHECKPOINT):
        make_checkpoint()
    model, model64, text, text64 = load_models()
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
    text_error = 0.0
    for name, queries in query_sets.items():
        with torch.no_grad():
            tokens = clip.tokenize(queries, truncate=True)
            e = text.encode_text(tokens)
            embeddings[name] = e / e.norm(dim=-1, keepdim=True)
            e64 = text64.encode_text(tokens)
            text_error = max(text_error, float((embeddings[name].double() - e64 / e64.norm(dim=-1, keepdim=True)).abs().max()))

    from make_weight_fixtures import describe

    checkpoint = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)
    saved = checkpoint.get("ema") or checkpoint["model"]
    out = {
        "ultralytics": ultralytics.__version__,
        "torch": torch.__version__,
        "query_sets": query_sets,
        "embeddings": {k: [[round(float(x), 9) for x in row] for row in v] for k, v in embeddings.items()},
        "text_reference_error": text_error,
        "checkpoint": {"tensors": describe(saved.state_dict()), "txt_feats": describe({"t": saved.txt_feats})["t"],
                       "names": [saved.names[k] for k in sorted(saved.names)]},
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
        def detections(conf: float, iou: float = 0.7, agnostic: bool = False, max_det: int = 300) -> list[dict]:
            kept = non_max_suppression(y.clone(), conf, iou, agnostic=agnostic, max_det=max_det)[0]
            kept[:, :4] = ops.scale_boxes(x.shape[2:], kept[:, :4].clone(), image.shape[:2])
            return [{"box": [float(v) for v in row[:4]], "score": float(row[4]), "query_index": int(row[5])}
                    for row in kept]

        for conf in (0.25, 0.05):
            case["detections"][f"{conf}"] = detections(conf)
        if not out["cases"]:
            # The predictor's other options, for the command-line tests (--agnostic, --iou, --max-det), at a
            # low threshold where each changes the result.
            case["options"] = {
                "agnostic": detections(0.01, agnostic=True),
                "iou 0.1": detections(0.01, iou=0.1),
                "max-det 3": detections(0.01, max_det=3),
                "conf 0.01": detections(0.01),
            }
            counts = {k: len(v) for k, v in case["options"].items()}
            assert len({counts["agnostic"], counts["iou 0.1"], counts["conf 0.01"]}) == 3 and counts["max-det 3"] == 3, counts
            print(f"options at conf 0.01: {counts}")
        out["cases"].append(case)
        print(f"{path} [{set_name}] {tuple(x.shape[2:])}: {len(case['detections']['0.25'])} detections at 0.25, "
              f"{len(case['detections']['0.05'])} at 0.05; reference error boxes {box_error:.2g}, scores {score_error:.2g}")
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
