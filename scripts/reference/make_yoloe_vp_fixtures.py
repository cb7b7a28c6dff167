#!/usr/bin/env python3
"""YOLOE with visual prompts (SAVPE): ultralytics' own predictions on the random YOLOE-11n-seg and YOLOE-26n-seg
fixtures (issue 31).

Boxes drawn on a photo, with a class index each (several boxes of one class make one prompt), are turned by
`YOLOEVPSegPredictor` into one mask per class at an eighth of the letterboxed input (`LoadVisualPrompt`), which
the head's SAVPE module turns, with the neck's maps, into one L2-normalised embedding per class; the contrastive
head then scores those as it scores `get_tpe`'s text embeddings.

Two cases, each `YOLOE.predict(..., visual_prompts=dict(bboxes, cls), retina_masks=True)` with
`predictor=YOLOEVPSegPredictor` as ultralytics' docs call it:
- `11vp-rocket-416`: the prompts drawn on the photo searched (rocket.jpg);
- `11vp-refer-chelsea-416`: the prompts drawn on rocket.jpg (`refer_image`), searched for in chelsea.jpg;
- `26vp-rocket-416`: the first case with YOLOE-26 (its default one-to-many head and NMS).
Each Tests/Fixtures/yoloe/<case>.safetensors holds `prompt_input` (the prompt photo letterboxed as the predictor
made it: as predict's for the photo searched, square for a `refer_image`), `visuals` (the prompt masks, Q×H/8×W/8, 0/1), `vpe` (Q×512:
SAVPE's output), `retina_detections` (N×6), `retina_masks` (bit-packed), `original_shape`; the metadata the boxes
(`bboxes`, photo pixels of the prompt image, JSON) and classes (`cls`), `imgsz` and `conf`.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402
from make_yoloe_fixtures import OUT, PHOTOS, retina_record, useful_conf  # noqa: E402

BOXES = [[200.5, 190.0, 420.0, 427.0], [0.0, 290.25, 240.0, 427.0], [25.0, 85.0, 131.75, 300.0]]
CLASSES = [0, 1, 0]
CASES = [("11vp-rocket-416", "rocket.jpg", None, 416), ("11vp-refer-chelsea-416", "chelsea.jpg", "rocket.jpg", 416),
         ("26vp-rocket-416", "rocket.jpg", None, 416)]


def main() -> None:
    import ultralytics
    from safetensors.torch import save_file
    from ultralytics import YOLOE
    from ultralytics.models.yolo.yoloe import YOLOEVPSegPredictor

    reference_env.ultralytics_nms_without_torchvision()
    prompts = dict(bboxes=np.array(BOXES, dtype=np.float32), cls=np.array(CLASSES))
    for name, image, refer, size in CASES:
        if sys.argv[1:] and name not in sys.argv[1:]:
            continue
        family = name.split("vp")[0]
        captured: dict[str, torch.Tensor] = {}

        def predict(conf: float, retina: bool = False):
            model = YOLOE(os.path.join(OUT, f"yoloe-{family}n-seg-random.pt"))
            savpe = model.model.model[-1].savpe

            def first(module, inputs):
                captured["latest_input"] = inputs[0].detach().clone()

            def hook(module, inputs, output):
                captured["visuals"], captured["vpe"] = inputs[1].detach().clone(), output.detach().clone()
                captured["prompt_input"] = captured["latest_input"]

            model.model.model[0].register_forward_pre_hook(first)
            savpe.register_forward_hook(hook)
            return model.predict(os.path.join(PHOTOS, image), imgsz=size, conf=conf, visual_prompts=prompts.copy(),
                                 predictor=YOLOEVPSegPredictor, retina_masks=retina, save=False, verbose=False,
                                 refer_image=os.path.join(PHOTOS, refer) if refer else None)[0]

        conf = useful_conf(predict)
        result = predict(conf, retina=True)
        tensors, shapes = retina_record(result, os.path.join(PHOTOS, image))
        tensors.update({
            "visuals": captured["visuals"][0].to(torch.uint8),
            "vpe": captured["vpe"][0].float(),
            "prompt_input": captured["prompt_input"].float(),
        })
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"),
                  metadata={"ultralytics": ultralytics.__version__, "torch": torch.__version__, "image": image,
                            "refer_image": refer or "", "imgsz": str(size), "conf": f"{conf:g}",
                            "bboxes": json.dumps(BOXES), "cls": json.dumps(CLASSES),
                            **shapes})
        print(f"{name}: visuals {tuple(tensors['visuals'].shape)} ({int(tensors['visuals'].sum())} px), "
              f"{len(result.boxes)} detections at conf {conf}, classes {result.boxes.cls.tolist()}")


if __name__ == "__main__":
    main()
