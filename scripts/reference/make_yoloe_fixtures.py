#!/usr/bin/env python3
"""Random-weight YOLOE checkpoints and ultralytics' own outputs for them (issue 31).

For each family (YOLOE-v8, YOLOE-11, YOLOE-26) at scale n, segmentation head:
- the real architecture is built by ultralytics from its yaml (`YOLOE("yoloe-11n-seg.yaml")`, no download),
  BatchNorm statistics calibrated on real photos (cumulative averages in train mode) so that outputs depend
  on the image, the contrastive head's bias and logit scale set so that scores cross the usual thresholds
  (bias −3.5, scale 1: a random head at −10 / e^−1 scores nothing), and the text head `reprta`'s last
  Linear perturbed (ultralytics zero-initialises it, which would make it the identity and hide a wrong
  SwiGLU). Saved by `YOLOE.save` (fp16, as released) into Tests/Fixtures/yoloe/yoloe-<family>n-seg-random.pt.
- For two photos with a custom query set (random unit vectors standing for the text tower's output, given to
  `set_classes` through `get_tpe` as ultralytics does with the tower's output), the reference records
  Tests/Fixtures/yoloe/<family>-<photo>-<size>.safetensors:
  `input` (letterboxed, as the predictor makes it), `text` (1×K×512, the tower's output), `tpe` (after
  `get_tpe`), the backbone outputs and neck outputs (`layerN`), `output` (1 × (4 + K + 32) × anchors: boxes as
  centre and size in input pixels, sigmoid scores, mask coefficients), `protos` (1×32×H/4×W/4), and what
  `YOLOE.predict` returns (YOLOE's defaults: class-agnostic NMS, conf, iou 0.7): `detections` (N×6: x1 y1 x2 y2
  in photo pixels, score, class), `masks` (N×H×W at the input size, `retina_masks=False`) and
  `retina_detections` / `retina_masks` (`retina_masks=True`: masks at the photo's size); masks are stored one bit
  per pixel (numpy.packbits) with their shape in the metadata (`masks_shape`, `retina_masks_shape`).
  The same case is run in float64 and the reference's own float32 error recorded in the metadata.
- YOLOE-26 (`end2end: True`, `reg_max: 1` in its yaml) has a one-to-one twin of every head branch
  (`one2one_cv2/3/4/5`) beside the one-to-many one, and a Proto26 mask branch (with a training-only `semseg`).
  ultralytics 8.4.190 predicts with the one-to-many branch and NMS by default (`nms=None`); with `nms=False`
  it runs the one-to-one branch and keeps the top 300 (at least `max_det`) instead of NMS. The one-to-one
  branch's weights are perturbed (ultralytics starts them as copies) and its contrastive bias set apart, so
  that a port that reads the wrong branch fails; its predictions are recorded too:
  `e2e_detections`, `e2e_masks` (`predict(nms=False)`), `e2e_retina_detections`, `e2e_retina_masks`
  (`retina_masks=True`).

    python scripts/reference/make_yoloe_fixtures.py [v8] [11] [26]     (all three by default)
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from make_weight_fixtures import calibrate_batchnorm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "yoloe")
PHOTOS = os.path.join(ROOT, "examples", "photos")
# Backbone outputs (P3, P4, P5) and neck outputs (the head's inputs) per family.
LAYERS = {"v8": (4, 6, 9, 15, 18, 21), "11": (4, 6, 10, 16, 19, 22), "26": (4, 6, 10, 16, 19, 22)}
CASES = [("chelsea", "chelsea.jpg", 352, 3), ("rocket", "rocket.jpg", 416, 5)]


def useful_conf(predict) -> float:
    """The predictor's default threshold 0.25 where it keeps at least three detections, else the highest of 0.2,
    0.15, ... that does (an empty reference proves nothing); `predict(conf)` gives ultralytics' `Results`."""
    return next(c for c in (0.25, 0.2, 0.15, 0.1, 0.08, 0.06, 0.05, 0.04, 0.03) if len(predict(c).boxes) >= 3)


def retina_record(result, photo: str) -> tuple[dict, dict]:
    """What `predict(retina_masks=True)` returned for `photo`, as the fixtures store it: `retina_detections`
    (N×6: x1 y1 x2 y2, score, class), `retina_masks` (one bit per pixel, numpy.packbits over N×H×W) and
    `original_shape`; and the masks' shape for the metadata."""
    boxes = result.boxes
    masks = result.masks.data.to(torch.uint8)
    tensors = {
        "retina_detections": torch.cat([boxes.xyxy, boxes.conf[:, None], boxes.cls[:, None]], dim=1).float(),
        "retina_masks": torch.from_numpy(np.packbits(masks.numpy().astype(bool))),
        "original_shape": torch.tensor(list(cv2.imread(photo).shape[:2]), dtype=torch.int64),
    }
    return tensors, {"retina_masks_shape": ",".join(str(d) for d in masks.shape)}


def make_checkpoint(family: str) -> str:
    from ultralytics import YOLOE

    torch.manual_seed(31)
    model = YOLOE(f"yoloe-{family}n-seg.yaml")
    net = model.model
    head = net.model[-1]
    with torch.no_grad():  # the one-to-one twins start as copies: make each differ from its one-to-many branch
        for name in ("one2one_cv2", "one2one_cv3", "one2one_cv5"):
            for parameter in (getattr(head, name, None) or torch.nn.ModuleList()).parameters():
                parameter.mul_(1 + 0.3 * torch.randn_like(parameter))
    calibrate_batchnorm(net)
    with torch.no_grad():
        for contrastive in head.cv4:
            contrastive.bias.fill_(-3.5)
            contrastive.logit_scale.fill_(0.0)
        for contrastive in getattr(head, "one2one_cv4", None) or []:
            contrastive.bias.fill_(-4.0)
            contrastive.logit_scale.fill_(0.1)
        head.reprta.m.w3.weight.normal_(0, 0.02)
        head.reprta.m.w3.bias.normal_(0, 0.02)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"yoloe-{family}n-seg-random.pt")
    model.save(path)
    return path


def preprocess(path: str, size: int) -> torch.Tensor:
    from ultralytics.data.augment import LetterBox

    image = cv2.imread(path)
    boxed = LetterBox((size, size), auto=True, stride=32)(image=image)
    return torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1))).float().unsqueeze(0) / 255


def load_fused(path: str, dtype: torch.dtype):
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    return (checkpoint.get("ema") or checkpoint["model"]).to(dtype).fuse().eval()


def make_references(family: str, path: str) -> None:
    import ultralytics
    from safetensors.torch import save_file
    from ultralytics import YOLOE

    for case, image, size, count in CASES:
        torch.manual_seed(size + count)
        text = torch.nn.functional.normalize(torch.randn(1, count, 512), dim=-1)
        names = [f"query{k}" for k in range(count)]
        x = preprocess(os.path.join(PHOTOS, image), size)
        outputs = {}
        for dtype in (torch.float32, torch.float64):
            net = load_fused(path, dtype)
            head = net.model[-1]
            with torch.no_grad():
                tpe = head.get_tpe(text.to(dtype))
                net.set_classes(names, tpe)
                captured: dict[int, torch.Tensor] = {}
                hooks = [net.model[i].register_forward_hook(
                    lambda module, inputs, output, i=i: captured.__setitem__(i, output)) for i in LAYERS[family]]
                y = net.predict(x.to(dtype))
                for hook in hooks:
                    hook.remove()
            outputs[dtype] = (tpe, captured, y)
        tpe, captured, y = outputs[torch.float32]
        _, captured64, y64 = outputs[torch.float64]
        # YOLOESegment in eval: ((output, protos), raw per-level predictions).
        (raw, protos), (raw64, protos64) = y[0], y64[0]
        errors = {
            "reference_error_boxes": float((raw[0, :4].double() - raw64[0, :4]).abs().max()),
            "reference_error_scores": float((raw[0, 4 : 4 + count].double() - raw64[0, 4 : 4 + count]).abs().max()),
            "reference_error_coefficients": float((raw[0, 4 + count :].double() - raw64[0, 4 + count :]).abs().max()),
            "reference_error_protos": float((protos.double() - protos64).abs().max()),
        }
        tensors = {"input": x, "text": text, "tpe": tpe.float(), "output": raw, "protos": protos}
        for i, value in captured.items():
            tensors[f"layer{i}"] = value
            errors[f"reference_error_layer{i}"] = float((value.double() - captured64[i]).abs().max())

        # What YOLOE.predict returns, end to end from the photo file.
        model = YOLOE(path)
        with torch.no_grad():
            model.set_classes(names, model.model.model[-1].get_tpe(text))
        conf = useful_conf(lambda c: model.predict(
            os.path.join(PHOTOS, image), imgsz=size, conf=c, save=False, verbose=False)[0])
        shapes = {}
        for retina, prefix in ((False, ""), (True, "retina_")):
            result = model.predict(os.path.join(PHOTOS, image), imgsz=size, conf=conf, retina_masks=retina,
                                   save=False, verbose=False)[0]
            boxes = result.boxes
            tensors[prefix + "detections"] = torch.cat(
                [boxes.xyxy, boxes.conf[:, None], boxes.cls[:, None]], dim=1).float()
            masks = (result.masks.data if result.masks is not None else torch.zeros(0, *(x.shape[2:]))).to(torch.uint8)
            # One bit per pixel (numpy.packbits: row-major over N×H×W, most significant bit first).
            tensors[prefix + "masks"] = torch.from_numpy(np.packbits(masks.numpy().astype(bool)))
            shapes[prefix + "masks_shape"] = ",".join(str(d) for d in masks.shape)
        if family == "26":  # the one-to-one branch, top-k instead of NMS
            e2e_conf = useful_conf(lambda c: model.predict(
                os.path.join(PHOTOS, image), imgsz=size, conf=c, nms=False, save=False, verbose=False)[0])
            result = model.predict(os.path.join(PHOTOS, image), imgsz=size, conf=e2e_conf, nms=False, save=False,
                                   verbose=False)[0]
            shapes["e2e_conf"] = f"{e2e_conf:g}"
            boxes = result.boxes
            tensors["e2e_detections"] = torch.cat([boxes.xyxy, boxes.conf[:, None], boxes.cls[:, None]], dim=1).float()
            masks = (result.masks.data if result.masks is not None else torch.zeros(0, *(x.shape[2:]))).to(torch.uint8)
            tensors["e2e_masks"] = torch.from_numpy(np.packbits(masks.numpy().astype(bool)))
            shapes["e2e_masks_shape"] = ",".join(str(d) for d in masks.shape)
            result = model.predict(os.path.join(PHOTOS, image), imgsz=size, conf=e2e_conf, nms=False, retina_masks=True,
                                   save=False, verbose=False)[0]
            retina, retina_shape = retina_record(result, os.path.join(PHOTOS, image))
            tensors["e2e_retina_detections"] = retina["retina_detections"]
            tensors["e2e_retina_masks"] = retina["retina_masks"]
            shapes["e2e_retina_masks_shape"] = retina_shape["retina_masks_shape"]
        original = cv2.imread(os.path.join(PHOTOS, image)).shape[:2]
        tensors["original_shape"] = torch.tensor(list(original), dtype=torch.int64)
        name = f"{family}-{case}-{size}"
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"),
                  metadata={"ultralytics": ultralytics.__version__, "torch": torch.__version__, "image": image,
                            "conf": f"{conf:g}", "iou": "0.7", "agnostic_nms": "True", "names": ",".join(names), **shapes,
                            **{k: f"{v:.3g}" for k, v in errors.items()}})
        scores = raw[0, 4 : 4 + count]
        print(f"{name}: output {tuple(raw.shape)}, protos {tuple(protos.shape)}, scores > {conf}: "
              f"{int((scores > conf).sum())}, detections {len(tensors['detections'])} "
              f"(retina {len(tensors['retina_detections'])}), errors {errors}")


def main() -> None:
    reference_env.ultralytics_nms_without_torchvision()
    for family in sys.argv[1:] or ("v8", "11", "26"):
        path = make_checkpoint(family)
        make_references(family, path)


if __name__ == "__main__":
    main()
