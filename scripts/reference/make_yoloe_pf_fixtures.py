#!/usr/bin/env python3
"""A random-weight prompt-free YOLOE (`-pf`) checkpoint made as ultralytics makes its `-pf` files, and
ultralytics' own predictions with it (issue 31).

A released `yoloe-11s-seg-pf.pt` is a YOLOE model fine-tuned without text (`YOLOEPEFreeTrainer`: one class,
"object", fused into the classification branch's last convolution, which thereby becomes a 1-channel proposal
filter), re-parameterised by `YOLOE.set_vocab(vocab, names)` with a vocabulary that `get_vocab(names)` made from
the text-prompt model (the embeddings of several thousand names fused into that same convolution). Each level's
head then holds an `LRPCHead`: `pf` (proposal filter), `vocab` (a Linear on levels 0 and 1, a 1×1 convolution on
level 2, where the filter is off) and `loc` (the box branch's last convolution).

This script does the same with the random YOLOE-11n-seg fixture (and YOLOE-26n-seg: `yoloe-26n-seg-pf-random.pt`,
`26pf-*`; with `set_vocab`'s defaults the one-to-many branch gets the `lrpc` and the one-to-one twin is fused away;
and `26e2e`: the same with the head's `end2end` set first, as it was by default when ultralytics made its YOLOE-26
`-pf` files (before 8.4.142): then `lrpc` is built on the one-to-one twin and the one-to-many branches are fused away,
so that `predict` keeps the top-k boxes instead of running NMS — `yoloe-26n-seg-pf-e2e-random.pt`, `26pfe2e-*`) (Tests/Fixtures/yoloe/yoloe-11n-seg-random.pt,
from make_yoloe_fixtures.py) standing for both models: 40 names with random unit vectors for their text-tower
embeddings make the vocabulary; "object" with another random vector makes the filter, whose bias is then set so
that the filter keeps part of the anchors (its threshold is the head's 0.001). Saved by `YOLOE.save` into
Tests/Fixtures/yoloe/yoloe-11n-seg-pf-random.pt, and for two photos `YOLOE.predict` without any prompt
(conf as in make_yoloe_fixtures.py, retina masks) into Tests/Fixtures/yoloe/11pf-<photo>-<size>.safetensors:
`detections` (N×6), `retina_masks` (bit-packed), `index` (the anchors the filter kept, as 0/1 per anchor) and
`output` (the head's inference output over the kept anchors).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402
from make_yoloe_fixtures import OUT, PHOTOS, preprocess, retina_record, useful_conf  # noqa: E402

NAMES = [f"thing{k:02d}" for k in range(40)]
CASES = [("rocket", "rocket.jpg", 416), ("chelsea", "chelsea.jpg", 352)]


def with_embeddings(model, embeddings: torch.Tensor) -> None:
    """get_text_pe without a text tower: the given (1, K, 512) tower outputs through the head's get_tpe."""
    head = model.model.model[-1]
    model.model.get_text_pe = lambda names, *args, **kwargs: head.get_tpe(embeddings[:, : len(names)])


def make_checkpoint(family: str) -> str:
    from ultralytics import YOLOE

    end2end = family.endswith("e2e")
    family = family.removesuffix("e2e")
    source = os.path.join(OUT, f"yoloe-{family}n-seg-random.pt")
    torch.manual_seed(41)
    vocabulary_text = torch.nn.functional.normalize(torch.randn(1, len(NAMES), 512), dim=-1)
    object_text = torch.nn.functional.normalize(torch.randn(1, 1, 512), dim=-1)

    text_model = YOLOE(source)
    text_model.model.eval()
    if end2end:
        text_model.model.end2end = True
    with_embeddings(text_model, vocabulary_text)
    with torch.no_grad():
        vocab = text_model.get_vocab(NAMES)

    model = YOLOE(source)
    net = model.model
    net.eval()
    if end2end:
        net.end2end = True
    with_embeddings(model, object_text)
    with torch.no_grad():
        net.get_vocab(["object"])  # the PE-free fine-tune's one class, fused: cv3[i][2] becomes 1 channel
        head = net.model[-1]
        # The filter keeps part of the anchors at the head's 0.001, not all, not none: its bias is moved so that
        # the median logit on a photo sits at logit(0.001).
        logits = []
        cv3 = head.one2one_cv3 if end2end else head.cv3
        hooks = [branch[2].register_forward_hook(lambda m, i, o: logits.append(o.flatten())) for branch in cv3]
        net.predict(preprocess(os.path.join(PHOTOS, "rocket.jpg"), 416))
        for hook in hooks:
            hook.remove()
        shift = float(np.log(0.001 / 0.999)) - float(torch.cat(logits[:2]).median())
        for branch in cv3:
            branch[2].bias.add_(shift)
        del head.savpe  # as YOLOEPEFreeTrainer.get_model does
        model.set_vocab(vocab, NAMES)
    del net.get_text_pe  # the stand-in tower is not part of the model
    path = os.path.join(OUT, f"yoloe-{family}n-seg-pf{'-e2e' if end2end else ''}-random.pt")
    model.save(path)
    return path


def make_references(family: str, path: str) -> None:
    import ultralytics
    from safetensors.torch import save_file
    from ultralytics import YOLOE

    for case, image, size in CASES:
        model = YOLOE(path)
        net = model.model
        captured = {}
        head = net.model[-1]
        hook = head.register_forward_hook(lambda module, inputs, output: captured.setdefault("y", output))
        x = preprocess(os.path.join(PHOTOS, image), size)
        with torch.no_grad():
            net.eval()
            net.predict(x)
        hook.remove()
        (raw, _protos), preds = captured["y"][0], captured["y"][1]
        index = preds["index"]
        conf = useful_conf(lambda c: model.predict(
            os.path.join(PHOTOS, image), imgsz=size, conf=c, save=False, verbose=False)[0])
        result = model.predict(os.path.join(PHOTOS, image), imgsz=size, conf=conf, retina_masks=True, save=False,
                               verbose=False)[0]
        tensors, shapes = retina_record(result, os.path.join(PHOTOS, image))
        tensors.update({"input": x, "index": index.to(torch.uint8)})
        if not family.endswith("e2e"):  # the one-to-one head's output is already its top-k, not per anchor
            tensors["output"] = raw.float()
        name = f"{family.removesuffix('e2e')}pf{'e2e' if family.endswith('e2e') else ''}-{case}-{size}"
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"),
                  metadata={"ultralytics": ultralytics.__version__, "torch": torch.__version__, "image": image,
                            "conf": f"{conf:g}", "iou": "0.7", "names": ",".join(NAMES),
                            **shapes})
        print(f"{name}: kept {int(index.sum())} of {index.numel()} anchors, output {tuple(raw.shape)}, "
              f"{len(result.boxes)} detections at conf {conf}: {[NAMES[int(c)] for c in result.boxes.cls]}")


def main() -> None:
    reference_env.ultralytics_nms_without_torchvision()
    for family in sys.argv[1:] or ("11", "26"):
        make_references(family, make_checkpoint(family))


if __name__ == "__main__":
    main()
