#!/usr/bin/env python3
"""YOLOE-26's text tower (issue 31): random-weight MobileCLIP2-B text encoders in the TorchScript form ultralytics
loads as `mobileclip2_b.ts`, and ultralytics' own embeddings and YOLOE-26 predictions through them.

ultralytics 8.4.190 reads YOLOE-26 queries through `MobileCLIPTS(weight="mobileclip2_b.ts")`: OpenAI CLIP's
tokenizer, then the TorchScript module, which normalises itself. How that file was made is not published. What is
known: MobileCLIP2-B is open_clip's `MobileCLIP2-B` (a `CustomTextCLIP`: open_clip's `TextTransformer`, 12 layers,
width 512, 8 heads, causal mask, exact GELU; `dfndr2b` weights), and the file is 253,794,476 bytes — the text
tower's 63.4 M float32 parameters and nothing of the image tower. So this script follows ultralytics' recipe for
`mobileclip_blt.ts` (pull request 20354: `forward` replaced by `encode_text(text, normalize=True)`,
`torch.jit.trace` on one tokenised prompt, `save`) on open_clip's model with its image tower removed. Lookout
finds the text tower's tensors under whatever prefix the file gives them (`text.` here), so another wrapper
around the same module reads the same.

    python scripts/reference/make_mobileclip2_fixtures.py
        -> Tests/Fixtures/weights/mobileclip2-tiny-random.ts: open_clip's MobileCLIP2-B text tower at width 128,
           2 layers, 2 heads, projection to 512 (the full vocabulary and context);
           Tests/Fixtures/text/mobileclip2-tiny-expected.safetensors: MobileCLIPTS.encode_text of the 240 prompts
           of the CLIP text fixtures, and the reference's own float32 error (float64 run of the same model);
           Tests/Fixtures/yoloe/26-mobileclip2-chelsea-352.safetensors: YOLOE.predict of the random YOLOE-26n-seg
           fixture with classes set from typed names through this tower, boxes and retina masks.
    python scripts/reference/make_mobileclip2_fixtures.py --full DIR
        -> DIR/mobileclip2_b-random.ts (full-size text tower, the official file's size) and
           DIR/expected-mobileclip2.json.

Environment: scripts/reference/requirements-mobileclip.txt (open_clip_torch 3.3.0 from PyPI is all this script
needs beyond the reference environment).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import torch  # noqa: E402
from make_mobileclip_fixtures import randomise_text_, write_full, write_tiny, yoloe_through_tower  # noqa: E402

FULL_TEXT = {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8, "layers": 12,
             "no_causal_mask": False}


def build(text_cfg: dict) -> torch.nn.Module:
    """open_clip's MobileCLIP2-B (random weights) with `text_cfg`, its image tower removed."""
    import open_clip

    model = open_clip.create_model("MobileCLIP2-B", pretrained=None, text_cfg=text_cfg).eval()
    assert type(model).__name__ == "CustomTextCLIP", type(model)
    del model.visual
    return model


def randomise_(model: torch.nn.Module, grid: float | None) -> None:
    """open_clip's text tower (`text`) drawn as the MobileCLIP fixture's (``randomise_text_``)."""
    norms = randomise_text_(model.text, grid, projection="text_projection", token="token_embedding.weight",
                            position="positional_embedding")
    assert norms == 2 * (2 * len(model.text.transformer.resblocks) + 1)


def float64_error(model: torch.nn.Module, texts: list[str], embeddings: torch.Tensor) -> float:
    """The reference's own float32 error: the largest difference from the same model in float64."""
    import copy

    from clip.clip import tokenize

    exact = copy.deepcopy(model).double()
    with torch.no_grad():
        features = exact.encode_text(tokenize(texts, truncate=True), normalize=True)
    return float((embeddings.double() - features).abs().max())


def tiny() -> None:
    torch.manual_seed(26)
    model = build({**FULL_TEXT, "width": 128, "heads": 2, "layers": 2})
    randomise_(model, grid=2.0 ** -10)
    path = write_tiny(model, "mobileclip2-tiny", float64_error)
    yoloe_through_tower(path, family="26", label="mobileclip2")


def full(directory: str) -> None:
    def make() -> torch.nn.Module:
        torch.manual_seed(27)
        model = build(FULL_TEXT)
        randomise_(model, grid=None)
        return model

    write_full(directory, "mobileclip2_b-random.ts", "expected-mobileclip2.json", make, float64_error)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", metavar="DIR")
    args = parser.parse_args()
    full(args.full) if args.full else tiny()
