#!/usr/bin/env python3
"""Packs train_siglip.py's weights as a SigLIP folder in transformers' layout, checked by transformers itself.

The weights are loaded into transformers' own SiglipModel (strict: every name and shape must match), which must
compute the same embeddings as train_siglip.py's network on a few generated scenes and on the captions (within
1e-4). The folder is then written as `save_pretrained` writes it (F16 weights, as the demo's other files), with
SiglipImageProcessor's settings (PIL bicubic, squashed to 224, mean and std 0.5) and the tokenizer that
make_multilingual_tokenizer.py put there.

    V=$(scripts/reference-venv scripts/reference/requirements-siglip.txt)   # plus opencv-python-headless, scikit-image
    $V scripts/demo/package_siglip.py TRAINED/model.safetensors Models/demo/scene-tower [DUPLICATE_THRESHOLD]

DUPLICATE_THRESHOLD (the cosine `lookout duplicates` uses, chosen from evaluate_multilingual.py's table of edited
copies against distinct scenes) goes into config.json as `lookout_duplicate_threshold`.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file
from transformers import SiglipConfig, SiglipModel, SiglipTokenizer
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402
import train_siglip  # noqa: E402


def main() -> None:
    weights, folder = sys.argv[1], sys.argv[2]
    extra = {"lookout_duplicate_threshold": float(sys.argv[3])} if len(sys.argv) > 3 else {}
    state = load_file(weights)
    tokenizer = SiglipTokenizer.from_pretrained(folder)
    config = SiglipConfig(
        text_config=dict(train_siglip.TEXT, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                         projection_size=train_siglip.VISION["hidden_size"], hidden_act="gelu_pytorch_tanh",
                         layer_norm_eps=train_siglip.EPS),
        vision_config=dict(train_siglip.VISION, hidden_act="gelu_pytorch_tanh", layer_norm_eps=train_siglip.EPS),
        **extra)
    reference = SiglipModel(config).eval()
    missing, unexpected = reference.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("position_ids")]
    assert not missing and not unexpected, (missing, unexpected)
    ours = train_siglip.SigLIP(len(tokenizer)).eval()
    ours.load_state_dict(state, strict=True)

    processor = SiglipImageProcessorPil(do_resize=True, size={"height": 224, "width": 224}, resample=3,
                                        do_convert_rgb=True, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    photos = [Image.fromarray(scenes.scene(900000, i, "eval")[0][:, :, ::-1].copy()) for i in range(4)]
    pixels = processor(images=photos, return_tensors="pt")["pixel_values"]
    table = json.load(open(os.path.join(HERE, "multilingual_captions.json"), encoding="utf-8"))
    texts = [t for versions in list(table["texts"].values())[:20] for t in versions.values()]
    ids = tokenizer(texts, padding="max_length", max_length=64, truncation=True, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        differences = [
            (reference.vision_model(pixel_values=pixels).pooler_output - ours.vision_model(pixels)).abs().max(),
            (reference.text_model(input_ids=ids).pooler_output - ours.text_model(ids)).abs().max()]
    print(f"transformers against train_siglip: image {differences[0]:.2e}, text {differences[1]:.2e}")
    assert max(differences) < 1e-4
    reference.half().save_pretrained(folder)
    processor.save_pretrained(folder)
    print(f"wrote {folder}: {sorted(os.listdir(folder))}; logit scale {np.exp(state['logit_scale'].item()):.2f}, "
          f"bias {state['logit_bias'].item():.3f}")


if __name__ == "__main__":
    main()
