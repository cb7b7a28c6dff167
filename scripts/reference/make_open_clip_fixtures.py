#!/usr/bin/env python3
"""Reference outputs for open_clip image–text models read from their own files (issue 52).

Everything here comes from open_clip 3.3.0, never from Lookout. Four small models of open_clip's ViT
architecture (its `CLIP` class: `VisionTransformer` and the text transformer, as `create_model` builds them
from a model config) with random weights of a realistic spread, saved as open_clip's Hugging Face layout does
it: a folder with `open_clip_config.json` (`model_cfg` and `preprocess_cfg`) and the weights rounded to fp16 (as
released checkpoints often are; the reference computes with them widened) in `open_clip_pytorch_model.bin`
(`torch.save` of the state dict: gelu-224) or `open_clip_model.safetensors` (quickgelu-squash):

- `gelu-224/`: ViT-B-32's recipe (exact GELU, open_clip's default), 224 px, patch 32, resize of the short side,
  OpenAI's mean and std, bicubic.
- `quickgelu-squash/`: `quick_gelu`, 96 px, patch 16, head width 32, the photo squashed to a square (no crop),
  mean and std 0.5.
- `l14-quickgelu/`: ViT-L-14's shape (patch 14, 224 px: 16×16 patches, head width 32) with OpenAI's `quick_gelu`,
  narrow (width 64, 2 layers).
- `b32-256/`: ViT-B-32-256's shape (256 px, patch 32), exact GELU, narrow.

The reference is loaded back with `open_clip.create_model_and_transforms("local-dir:" + folder)`, so the
folder's format is the one open_clip reads. For every photo of Tests/Fixtures/clip-image and examples/photos:
the normalised `encode_image(preprocess(photo))`, and the 8-bit image before `ToTensor`; for a list of texts
the normalised `encode_text(tokenizer(texts))`; and the reference's own float32 error (the same model in
float64). Output: Tests/Fixtures/open-clip/<variant>/{open_clip_config.json, open_clip_model.safetensors,
expected.safetensors}.

Run in the text reference environment with open-clip-torch==3.3.0:

    python scripts/reference/make_open_clip_fixtures.py [VARIANT...]
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import open_clip  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "open-clip")

TEXTS = ["a photo of a dog", "red car", "blauer Kreis", "", "a very long caption " * 20, "🙂 emoji and ünïcödé"]

VARIANTS = {
    "gelu-224": (
        {"embed_dim": 32,
         "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 2}},
        {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
         "interpolation": "bicubic", "resize_mode": "shortest"},
    ),
    "quickgelu-squash": (
        {"embed_dim": 48, "quick_gelu": True,
         "vision_cfg": {"image_size": 96, "layers": 2, "width": 128, "patch_size": 16, "head_width": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 3}},
        {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bicubic", "resize_mode": "squash"},
    ),
    # ViT-L-14's shape (patch 14: 16×16 patches at 224, head width 32) with OpenAI's quick_gelu, narrow.
    "l14-quickgelu": (
        {"embed_dim": 32, "quick_gelu": True,
         "vision_cfg": {"image_size": 224, "layers": 2, "width": 64, "patch_size": 14, "head_width": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2}},
        {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
         "interpolation": "bicubic", "resize_mode": "shortest"},
    ),
    # ViT-B-32-256's shape (256 px, patch 32: 8×8 patches; exact GELU, as the DataComp model rclip ships), narrow.
    "b32-256": (
        {"embed_dim": 32,
         "vision_cfg": {"image_size": 256, "layers": 2, "width": 64, "patch_size": 32},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 2}},
        {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
         "interpolation": "bicubic", "resize_mode": "shortest"},
    ),
}


# The two files open_clip's Hugging Face folders hold their weights in (one variant each).
WEIGHTS = {"gelu-224": "open_clip_pytorch_model.bin", "quickgelu-squash": "open_clip_model.safetensors",
           "l14-quickgelu": "open_clip_model.safetensors", "b32-256": "open_clip_model.safetensors"}


def photos() -> list[str]:
    folders = [os.path.join(ROOT, "Tests", "Fixtures", "clip-image"), os.path.join(ROOT, "examples", "photos")]
    found = []
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if name.lower().endswith((".jpg", ".jpeg", ".png")):
                found.append(os.path.join(folder, name))
    return found


def realistic(model: torch.nn.Module, seed: int) -> None:
    """Random values of a realistic spread (LayerNorms away from 1 and 0, so that a port must apply them)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "ln" in name and name.endswith("weight"):
                parameter.copy_(1 + 0.1 * noise)
            elif name.endswith("bias") or "ln" in name:
                parameter.copy_(0.05 * noise)
            elif name == "logit_scale":
                parameter.copy_(torch.tensor(np.log(100.0)))
            elif parameter.dim() >= 2 or "embedding" in name:
                fan_in = parameter.shape[-1] if parameter.dim() >= 2 else parameter.numel()
                parameter.copy_(noise / np.sqrt(max(1, fan_in)) * (2.0 if "embedding" in name else 1.0))
            else:
                parameter.copy_(0.1 * noise)
            parameter.copy_(parameter.half().float())  # what the fp16 file holds


def main() -> None:
    only = sys.argv[1:]  # variant names to make (default: all)
    for index, (variant, (model_cfg, preprocess_cfg)) in enumerate(VARIANTS.items()):
        if only and variant not in only:
            continue
        torch.manual_seed(5100 + index)
        folder = os.path.join(OUT, variant)
        os.makedirs(folder, exist_ok=True)
        model = open_clip.CLIP(**model_cfg)
        realistic(model, 5200 + index)
        state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()}
        for old in ("open_clip_model.safetensors", "open_clip_pytorch_model.bin"):
            if os.path.exists(os.path.join(folder, old)):
                os.remove(os.path.join(folder, old))
        if WEIGHTS[variant].endswith(".bin"):
            torch.save(state, os.path.join(folder, WEIGHTS[variant]))  # open_clip's older format, a pickled state dict
        else:
            save_file(state, os.path.join(folder, WEIGHTS[variant]))
        with open(os.path.join(folder, "open_clip_config.json"), "w") as f:
            json.dump({"model_cfg": model_cfg, "preprocess_cfg": preprocess_cfg}, f, indent=2)

        # Read back through open_clip's own loader and transforms.
        reference, _, preprocess = open_clip.create_model_and_transforms("local-dir:" + folder)
        reference.eval()
        tokenizer = open_clip.get_tokenizer("local-dir:" + folder)
        steps = preprocess.transforms[:-2]  # Resize, CenterCrop (for "shortest"), convert: the 8-bit image
        print(variant, preprocess)

        tensors = {}
        names = []
        inputs = []
        for path in photos():
            name = os.path.relpath(path, ROOT)
            image = Image.open(path)
            eight = image
            for step in steps:
                eight = step(eight)
            tensors["pixels:" + name] = torch.from_numpy(np.asarray(eight, dtype=np.uint8).copy())
            inputs.append(preprocess(image))
            names.append(name)
        batch = torch.stack(inputs)
        tokens = tokenizer(TEXTS)
        with torch.no_grad():
            images32 = torch.nn.functional.normalize(reference.encode_image(batch), dim=-1)
            texts32 = torch.nn.functional.normalize(reference.encode_text(tokens), dim=-1)
            reference64 = reference.double()
            images64 = torch.nn.functional.normalize(reference64.encode_image(batch.double()), dim=-1)
            texts64 = torch.nn.functional.normalize(reference64.encode_text(tokens), dim=-1)
        error = max((images32.double() - images64).abs().max().item(), (texts32.double() - texts64).abs().max().item())
        for name, embedding in zip(names, images32):
            tensors["image:" + name] = embedding.contiguous()
        for number, embedding in enumerate(texts32):
            tensors[f"text:{number}"] = embedding.contiguous()
        tensors["tokens"] = tokens.float().contiguous()
        metadata = {"photos": json.dumps(names), "texts": json.dumps(TEXTS, ensure_ascii=False),
                    "reference_error": repr(error), "open_clip": open_clip.__version__}
        save_file(tensors, os.path.join(folder, "expected.safetensors"), metadata=metadata)
        print(f"{variant}: {len(names)} photos, {len(TEXTS)} texts, reference float32 error {error:.3g}")


if __name__ == "__main__":
    main()
