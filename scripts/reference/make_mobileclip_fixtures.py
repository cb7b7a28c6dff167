#!/usr/bin/env python3
"""YOLOE's text tower (issue 31): random-weight MobileCLIP text encoders in ultralytics' TorchScript format,
and ultralytics' own embeddings and YOLOE predictions through them.

ultralytics reads YOLOE-v8/11 queries through `mobileclip_blt.ts` (`ultralytics.nn.text_model.MobileCLIPTS`:
OpenAI CLIP's tokenizer, then the TorchScript module, which normalises itself). Its pull request 20354 says how
the file was made: Apple's MobileCLIP-B built by the `mobileclip` package (github.com/ultralytics/mobileclip,
with its pull request 8), `forward` replaced by `encode_text(text, normalize=True)`, `torch.jit.trace` on one
tokenised prompt, `save`. This script does exactly that with random weights, so the files have the official
one's structure (module tree, tensor names, the image tower beside the text tower).

    python scripts/reference/make_mobileclip_fixtures.py
        -> Tests/Fixtures/weights/mobileclip-tiny-random.ts: the `mobileclip_b` text tower at width 128, 2 layers,
           2 heads, projection to 512 (the full vocabulary and context), image tower replaced by a stand-in
           (its tensors are in the file, as in the official one, and must be left alone);
           Tests/Fixtures/text/mobileclip-tiny-expected.safetensors: MobileCLIPTS.encode_text of the 240 prompts
           of the CLIP text fixtures, and the reference's own float32 error (float64 run of the same model);
           Tests/Fixtures/yoloe/11-mobileclip-chelsea-352.safetensors: YOLOE.predict of the random YOLOE-11n-seg
           fixture with classes set from typed names through this tower (`get_text_pe`, as `set_classes(names)`
           does), boxes and retina masks.
    python scripts/reference/make_mobileclip_fixtures.py --full DIR
        -> DIR/mobileclip_blt-random.ts: full-size `mobileclip_b` (ViT-B/16 image tower, 12-layer 512-wide text
           tower, 8 heads), the size of the official 572 MB file, and DIR/expected-mobileclip.json.

Environment: scripts/reference/requirements-mobileclip.txt (the `mobileclip` package installed from a clone).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import torch  # noqa: E402
from make_text_encoder_fixtures import prompts  # noqa: E402
from make_yoloe_fixtures import retina_record, useful_conf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(text_cfg: dict, image: str | None) -> torch.nn.Module:
    """mobileclip.clip.CLIP with the `mobileclip_b` configuration's text settings overridden by `text_cfg`."""
    from mobileclip.clip import CLIP

    root = os.path.dirname(__import__("mobileclip").__file__)
    with open(os.path.join(root, "configs", "mobileclip_b.json")) as handle:
        cfg = json.load(handle)
    cfg["text_cfg"].update(text_cfg)
    if image is None:
        # A small image tower keeps the fixture small; its tensors still sit under image_encoder.* beside the
        # text tower's, as in the official file.
        cfg["image_cfg"]["model_name"] = "mci0"
    model = CLIP(cfg).eval()
    if image is None:
        model.image_encoder = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten())
    return model


def randomise_(model: torch.nn.Module, grid: float | None) -> None:
    """MobileCLIP's text tower (`text_encoder`) drawn by ``randomise_text_``."""
    norms = randomise_text_(model.text_encoder, grid, projection="projection_layer",
                            token="embedding_layer.weight", position="positional_embedding.pos_embed.pos_embed")
    assert norms == 2 * (2 * len(model.text_encoder.transformer) + 1)


def randomise_text_(tower: torch.nn.Module, grid: float | None, projection: str, token: str, position: str) -> int:
    """Realistic random values for a text tower's parameters (named `projection`, `token`, `position`; the rest
    Linear weights, biases and LayerNorms). LayerNorm affine away from (1, 0) and biases non-zero so that a port
    that skips them fails; the projection drawn like CLIP's. With `grid`, every value is rounded to a multiple
    of it (the fixture then compresses in git; the arithmetic is unchanged). Returns the LayerNorm tensors' count."""
    norms = {f"{module_name}.{kind}" for module_name, module in tower.named_modules()
             if isinstance(module, torch.nn.LayerNorm) for kind in ("weight", "bias")}
    with torch.no_grad():
        for name, parameter in tower.named_parameters():
            if name in norms:
                value = 1 + 0.1 * torch.randn_like(parameter) if name.endswith("weight") else 0.1 * torch.randn_like(parameter)
            elif name.endswith("bias"):
                value = 0.02 * torch.randn_like(parameter)
            elif name == projection:
                value = torch.randn_like(parameter) * parameter.shape[0] ** -0.5
            elif name == token:
                value = 0.02 * torch.randn_like(parameter)
            elif name == position:
                value = 0.01 * torch.randn_like(parameter)
            else:  # Linear weights, outputs × inputs
                value = torch.randn_like(parameter) * parameter.shape[-1] ** -0.5
            if grid:
                value = torch.round(value / grid) * grid
            parameter.copy_(value)
    return len(norms)


def trace(model: torch.nn.Module, path: str) -> None:
    """ultralytics PR 20354's recipe."""
    from clip.clip import tokenize

    def forward(self, text):
        return self.encode_text(text, normalize=True)

    model.forward = forward.__get__(model, type(model))
    traced = torch.jit.trace(model, tokenize(["a photo of a cat"]))
    traced.save(path)


def reference(path: str, texts: list[str]) -> torch.Tensor:
    """What ultralytics computes for `texts` from the file: MobileCLIPTS.tokenize, then encode_text."""
    from ultralytics.nn.text_model import MobileCLIPTS

    tower = MobileCLIPTS(torch.device("cpu"), weight=path)
    with torch.no_grad():
        return tower.encode_text(tower.tokenize(texts))


def float64_error(model: torch.nn.Module, texts: list[str], embeddings: torch.Tensor) -> float:
    """The reference's own float32 error: the largest difference from the same model in float64 (LayerNormFP32
    casts to float32 whatever its input; here it computes in float64)."""
    import copy

    from clip.clip import tokenize
    from mobileclip.modules.common.transformer import LayerNormFP32

    exact = copy.deepcopy(model).double()
    for module in exact.modules():
        if isinstance(module, LayerNormFP32):
            module.forward = lambda x, m=module: torch.nn.LayerNorm.forward(m, x)
    with torch.no_grad():
        features = exact.encode_text(tokenize(texts, truncate=True), normalize=True)
    return float((embeddings.double() - features).abs().max())


def tiny() -> None:
    torch.manual_seed(31)
    model = build({"dim": 128, "n_transformer_layers": 2, "n_heads_per_layer": 2}, image=None)
    randomise_(model, grid=2.0 ** -10)
    path = write_tiny(model, "mobileclip-tiny", float64_error)
    yoloe_through_tower(path)


def write_tiny(model: torch.nn.Module, stem: str, error_of) -> str:
    """Traces `model` into Tests/Fixtures/weights/<stem>-random.ts and writes Tests/Fixtures/text/<stem>-expected.safetensors:
    `MobileCLIPTS.encode_text` of the CLIP text fixtures' prompts from that file, and `error_of(model, texts,
    embeddings)`, the reference's own float32 error. Returns the file's path."""
    from safetensors.torch import save_file

    path = os.path.join(ROOT, "Tests", "Fixtures", "weights", f"{stem}-random.ts")
    trace(model, path)
    texts = prompts()
    embeddings = reference(path, texts)
    error = error_of(model, texts, embeddings)
    out = os.path.join(ROOT, "Tests", "Fixtures", "text")
    save_file({f"{stem}-random.ts": embeddings.float().contiguous()},
              os.path.join(out, f"{stem}-expected.safetensors"),
              metadata={"source": "ultralytics MobileCLIPTS(weight=file).encode_text(tokenize(prompts))",
                        "prompts": "clip-tiny-prompts.json", "torch": torch.__version__,
                        "reference_error": f"{error:.3g}"})
    print(f"wrote {path} ({os.path.getsize(path):,} bytes) and {len(texts)} embeddings "
          f"of size {embeddings.shape[1]}; float32 error of the reference {error:.3g}")
    return path


def yoloe_through_tower(tower: str, family: str = "11", label: str = "mobileclip") -> None:
    """YOLOE.predict with classes set from typed names: YOLOEModel.get_text_pe through this tower (tokenize,
    encode_text, get_tpe), then set_classes and predict with retina masks, as a user's script does; written to
    Tests/Fixtures/yoloe/<family>-<label>-chelsea-352.safetensors."""
    import ultralytics
    from safetensors.torch import save_file
    from ultralytics import YOLOE
    from ultralytics.nn.text_model import MobileCLIPTS

    reference_env.ultralytics_nms_without_torchvision()

    photos = os.path.join(ROOT, "examples", "photos")
    out = os.path.join(ROOT, "Tests", "Fixtures", "yoloe")
    names = ["cat", "a tabby cat on a sofa", "red car", "sky"]
    image, size = "chelsea.jpg", 352
    model = YOLOE(os.path.join(out, f"yoloe-{family}n-seg-random.pt"))
    model.model.clip_model = MobileCLIPTS(torch.device("cpu"), weight=tower)
    with torch.no_grad():
        text = model.model.get_text_pe(names, cache_clip_model=True, without_reprta=True)
        model.set_classes(names, model.model.get_text_pe(names, cache_clip_model=True))
    conf = useful_conf(lambda c: model.predict(
        os.path.join(photos, image), imgsz=size, conf=c, save=False, verbose=False)[0])
    result = model.predict(os.path.join(photos, image), imgsz=size, conf=conf, retina_masks=True, save=False,
                           verbose=False)[0]
    tensors, shapes = retina_record(result, os.path.join(photos, image))
    tensors["text"] = text.float()
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(out, f"{family}-{label}-chelsea-{size}.safetensors"),
              metadata={"ultralytics": ultralytics.__version__, "torch": torch.__version__, "image": image,
                        "imgsz": str(size), "conf": f"{conf:g}", "iou": "0.7", "agnostic_nms": "True",
                        "names": json.dumps(names), "tower": os.path.basename(tower),
                        **shapes})
    print(f"YOLOE-{family}n through the tower: {len(result.boxes)} detections at conf {conf} for {names}")


def full(directory: str) -> None:
    def make() -> torch.nn.Module:
        torch.manual_seed(32)
        model = build({}, image="vit_b16")
        randomise_(model, grid=None)
        return model

    write_full(directory, "mobileclip_blt-random.ts", "expected-mobileclip.json", make, float64_error)


def write_full(directory: str, name: str, expected: str, make, error_of) -> None:
    """DIR/<name>: `make()`'s model traced (unless the file is there), and DIR/<expected>: `MobileCLIPTS.encode_text`
    of the prompts from it, with the reference's own float32 error when the model was made now."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    model = None
    if not os.path.exists(path):
        model = make()
        trace(model, path)
    texts = prompts()
    embeddings = reference(path, texts)
    record = {"prompts": texts, name: embeddings.tolist(), "torch": torch.__version__}
    if model is not None:
        record["reference_error"] = error_of(model, texts, embeddings)
    with open(os.path.join(directory, expected), "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    print(f"wrote {path} ({os.path.getsize(path):,} bytes) and {len(texts)} reference embeddings")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", metavar="DIR")
    args = parser.parse_args()
    full(args.full) if args.full else tiny()
