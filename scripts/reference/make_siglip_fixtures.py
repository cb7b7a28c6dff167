#!/usr/bin/env python3
"""Reference outputs for SigLIP image–text models in the `transformers` layout (issue 52).

Everything here comes from transformers 5.24.0 (`SiglipModel`, `SiglipImageProcessorPil`, `SiglipTokenizer`), never
from Lookout. Two small models of SigLIP's architecture with random weights of a realistic spread, saved as
`save_pretrained` saves them: a folder with `config.json`, `model.safetensors` (fp32), `preprocessor_config.json`
and the tokenizer (`spiece.model`: the unigram model built by make_sentencepiece_fixtures.py, with its
`tokenizer_config.json` and `special_tokens_map.json`). The reference is loaded back from the folder
(`SiglipModel.from_pretrained`, `SiglipImageProcessorPil.from_pretrained`, `SiglipTokenizer.from_pretrained`):

- `bicubic-96/`: the vision tower 96 px, patch 16 (36 patches, no class token), 2 layers, 2 heads, the
  attention-pooling head; text 2 layers, 64 positions; resized bicubic (PIL's, `resample` 3), as SigLIP's own
  checkpoints; MLPs 2.5 wide (as so400m's are not 4 wide).
- `bilinear-64/`: 64 px, patch 8, bilinear (`resample` 2, as SigLIP 2's fixed-resolution checkpoints), a text tower
  narrower than the vision tower with its head projecting to the vision width (`projection_size`), 3 heads, and
  SigLIP 2's kind of tokenizer: the Gemma-style byte-fallback BPE of make_bpe_fixtures.py (`tokenizer.json`, padded
  on the left as GemmaTokenizer pads).

For every photo of Tests/Fixtures/clip-image and examples/photos: the 8-bit image the processor resizes to (PIL,
after `convert_to_rgb`: transparency composited onto white), the processor's `pixel_values`, the normalised image embedding
(`vision_model(...).pooler_output`); for a list of texts the tokenizer's `input_ids` (padded to 64 with `</s>`)
and the normalised text embedding (`text_model(...).pooler_output`); the model's `logits_per_text`
(`exp(logit_scale)·cos + logit_bias`); and the reference's own float32 error (the same model in float64).
Output: Tests/Fixtures/siglip/<variant>/{config.json, model.safetensors, preprocessor_config.json, spiece.model,
…, expected.safetensors}.

    V=$(scripts/reference-venv scripts/reference/requirements-siglip.txt)
    $V scripts/reference/make_siglip_fixtures.py
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers.image_transforms import convert_to_rgb
from transformers import GemmaTokenizer, SiglipConfig, SiglipModel, SiglipTokenizer
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "siglip")
SPIECE = os.path.join(ROOT, "Tests", "Fixtures", "sentencepiece", "unigram.model")
GEMMA = os.path.join(ROOT, "Tests", "Fixtures", "bpe", "gemma-style")

TEXTS = ["a photo of a dog", "red car", "blauer Kreis", "", "a very long caption " * 20, "蓝色圆形 🙂 ünïcödé",
         "два красных круга"]

VARIANTS = {
    "bicubic-96": dict(
        vision=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=2,
                    image_size=96, patch_size=16),
        text=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=2,
                  max_position_embeddings=64),
        resample=3, seed=5300),
    "bilinear-64": dict(
        vision=dict(hidden_size=96, intermediate_size=384, num_hidden_layers=2, num_attention_heads=3,
                    image_size=64, patch_size=8),
        text=dict(hidden_size=48, intermediate_size=192, num_hidden_layers=3, num_attention_heads=3,
                  max_position_embeddings=64, projection_size=96),
        resample=2, seed=5301, tokenizer="gemma"),
}


def photos() -> list[str]:
    folders = [os.path.join(ROOT, "Tests", "Fixtures", "clip-image"), os.path.join(ROOT, "examples", "photos")]
    found = []
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if name.lower().endswith((".jpg", ".jpeg", ".png")):
                found.append(os.path.join(folder, name))
    return found


def realistic(model: torch.nn.Module, seed: int) -> None:
    """Random values of a realistic spread: LayerNorms away from 1 and 0 and biases away from 0, so that a port
    must apply them; the logit scale and bias at SigLIP's initial values (log 10, −10)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name == "logit_scale":
                parameter.copy_(torch.tensor([np.log(10.0)]))
            elif name == "logit_bias":
                parameter.copy_(torch.tensor([-10.0]))
            elif "norm" in name and name.endswith("weight"):
                parameter.copy_(1 + 0.1 * noise)
            elif name.endswith("bias") or "norm" in name:
                parameter.copy_(0.05 * noise)
            elif parameter.dim() >= 2 or "embedding" in name:
                fan_in = parameter.shape[-1] if parameter.dim() >= 2 else parameter.numel()
                if parameter.dim() == 4:  # the patch embedding: channels × patch × patch inputs
                    fan_in = parameter[0].numel()
                parameter.copy_(noise / np.sqrt(max(1, fan_in)) * (2.0 if "embedding" in name else 1.0))
            else:
                parameter.copy_(0.1 * noise)


def main() -> None:
    for variant, spec in VARIANTS.items():
        folder = os.path.join(OUT, variant)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        gemma = spec.get("tokenizer") == "gemma"
        if gemma:  # SigLIP 2's: the Gemma-style byte-fallback BPE (make_bpe_fixtures.py)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(GEMMA, name), os.path.join(folder, name))
            words = GemmaTokenizer.from_pretrained(folder)
        else:
            words = SiglipTokenizer(vocab_file=SPIECE)
        config = SiglipConfig(
            text_config=dict(spec["text"], vocab_size=len(words), pad_token_id=words.pad_token_id,
                             bos_token_id=words.eos_token_id, eos_token_id=words.eos_token_id),
            vision_config=spec["vision"])
        torch.manual_seed(spec["seed"])
        model = SiglipModel(config).eval()
        realistic(model, spec["seed"])
        model.save_pretrained(folder)
        size = spec["vision"]["image_size"]
        SiglipImageProcessorPil(
            do_resize=True, size={"height": size, "width": size}, resample=spec["resample"], do_convert_rgb=True,
            image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]).save_pretrained(folder)
        if not gemma:
            SiglipTokenizer(vocab_file=SPIECE, model_max_length=64).save_pretrained(folder)

        # Everything read back from the folder, as a user loads a checkpoint.
        reference = SiglipModel.from_pretrained(folder).eval()
        processor = SiglipImageProcessorPil.from_pretrained(folder)
        tokenizer = GemmaTokenizer.from_pretrained(folder) if gemma else SiglipTokenizer.from_pretrained(folder)

        tensors = {}
        names = []
        inputs = []
        for path in photos():
            name = os.path.relpath(path, ROOT)
            image = Image.open(path)
            eight = convert_to_rgb(image, return_numpy=False).resize((size, size), resample=spec["resample"])
            tensors["pixels:" + name] = torch.from_numpy(np.asarray(eight, dtype=np.uint8).copy())
            pixel_values = processor(images=image, return_tensors="pt")["pixel_values"][0]
            tensors["input:" + name] = pixel_values.contiguous()
            inputs.append(pixel_values)
            names.append(name)
        batch = torch.stack(inputs)
        tokens = tokenizer(TEXTS, padding="max_length", max_length=64, truncation=True,
                           return_tensors="pt")["input_ids"]
        with torch.no_grad():
            images32 = torch.nn.functional.normalize(reference.vision_model(pixel_values=batch).pooler_output, dim=-1)
            texts32 = torch.nn.functional.normalize(reference.text_model(input_ids=tokens).pooler_output, dim=-1)
            logits = reference(input_ids=tokens, pixel_values=batch).logits_per_text
            reference64 = SiglipModel.from_pretrained(folder).eval().double()
            images64 = torch.nn.functional.normalize(
                reference64.vision_model(pixel_values=batch.double()).pooler_output, dim=-1)
            texts64 = torch.nn.functional.normalize(reference64.text_model(input_ids=tokens).pooler_output, dim=-1)
        error = max((images32.double() - images64).abs().max().item(), (texts32.double() - texts64).abs().max().item())
        for name, embedding in zip(names, images32):
            tensors["image:" + name] = embedding.contiguous()
        for number, embedding in enumerate(texts32):
            tensors[f"text:{number}"] = embedding.contiguous()
        tensors["tokens"] = tokens.float().contiguous()
        tensors["logits_per_text"] = logits.contiguous()
        import transformers

        metadata = {"photos": json.dumps(names), "texts": json.dumps(TEXTS, ensure_ascii=False),
                    "reference_error": repr(error), "transformers": transformers.__version__}
        save_file(tensors, os.path.join(folder, "expected.safetensors"), metadata=metadata)
        print(f"{variant}: {len(names)} photos, {len(TEXTS)} texts, reference float32 error {error:.3g}, "
              f"files {sorted(os.listdir(folder))}")


if __name__ == "__main__":
    main()
