#!/usr/bin/env python3
"""Whole-photo towers side by side (issue 52): Lookout against open_clip and transformers on PyTorch CPU, in one
run, on the same random full-size weights.

    swift build -c release --product lookout-benchmarks
    V=$(scripts/reference-venv scripts/reference/requirements-towers.txt .build-ref/towers-venv)
    $V scripts/bench/towers.py [WORK]

WORK (default .build/towers) receives two folders in the formats users download:
- `openclip-b32/`: open_clip's `ViT-B-32` (exact GELU, 224, patch 32; `create_model("ViT-B-32")` with random
  weights), `open_clip_config.json` + `open_clip_model.safetensors`;
- `siglip-b16/`: transformers' SigLIP base (`SiglipConfig()`: 224, patch 16, 12 + 12 layers of 768, the
  attention-pooling head), `save_pretrained` + the unigram `spiece.model` of Tests/Fixtures/sentencepiece.

For each: Lookout (`lookout-benchmarks image`, fp32) and the reference (open_clip's `encode_image` /
transformers' `vision_model`, float32, 2 threads): the tower on one preprocessed photo and per photo in a batch of
8; the text tower on one query and on the 80 COCO names. Also a check that both give the same embedding of the
photo (max |difference|), so that the timed work is the same work.
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401
from common import median_ms  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

PHOTO = os.path.join(ROOT, "examples", "photos", "astronaut.jpg")


def coco_names() -> list[str]:
    names = []
    path = os.path.join(ROOT, "Tests", "LookoutTokenizerTests", "Fixtures", "clip_tokenizer_golden.jsonl")
    for line in open(path, encoding="utf-8"):
        record = json.loads(line)
        if record.get("category") == "coco":
            names.append(record["text"])
    return names


def randomise(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if ("ln" in name or "norm" in name) and name.endswith("weight"):
                parameter.copy_(1 + 0.1 * noise)
            elif name.endswith("bias") or "ln" in name or "norm" in name:
                parameter.copy_(0.02 * noise)
            elif parameter.dim() >= 2:
                parameter.copy_(noise / np.sqrt(parameter[0].numel()))


def lookout(folder: str) -> str:
    result = subprocess.run(
        [os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "image", "--model", folder, "--photo", PHOTO],
        check=True, cwd=ROOT, capture_output=True, text=True)
    print(result.stdout, end="", flush=True)
    return result.stdout


def lookout_embedding(folder: str) -> np.ndarray:
    out = subprocess.run([os.path.join(ROOT, ".build", "release", "lookout"), "embed", "--image", "--image-model",
                          folder, PHOTO], check=True, cwd=ROOT, capture_output=True, text=True).stdout
    return np.array(json.loads(out.strip()), dtype=np.float64)


def openclip(work: str) -> None:
    import open_clip

    folder = os.path.join(work, "openclip-b32")
    if not os.path.exists(os.path.join(folder, "open_clip_model.safetensors")):
        os.makedirs(folder, exist_ok=True)
        model = open_clip.create_model("ViT-B-32")
        randomise(model, 5400)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                  os.path.join(folder, "open_clip_model.safetensors"))
        config = open_clip.get_model_config("ViT-B-32")
        with open(os.path.join(folder, "open_clip_config.json"), "w") as f:
            json.dump({"model_cfg": config, "preprocess_cfg": {}}, f, indent=2)
    print("== open_clip ViT-B-32 (exact GELU, 224, patch 32), random weights", flush=True)
    lookout(folder)
    model, _, preprocess = open_clip.create_model_and_transforms("local-dir:" + folder)
    model.eval()
    tokenizer = open_clip.get_tokenizer("local-dir:" + folder)
    image = Image.open(PHOTO)
    x = preprocess(image).unsqueeze(0)
    batch = x.repeat(8, 1, 1, 1)
    names = tokenizer(coco_names())
    one = tokenizer(["red car"])
    with torch.no_grad():
        reference = torch.nn.functional.normalize(model.encode_image(x), dim=-1)[0].double().numpy()
        print(f"open_clip {open_clip.__version__}, PyTorch {torch.__version__} (2 threads):")
        print(f"  preprocess: median {median_ms(lambda: preprocess(image), 20):.1f} ms")
        print(f"  encode_image, one photo: median {median_ms(lambda: model.encode_image(x), 20):.1f} ms")
        print(f"  encode_image, 8 photos: median {median_ms(lambda: model.encode_image(batch), 5) / 8:.1f} ms per photo")
        print(f"  encode_text \"red car\": median {median_ms(lambda: model.encode_text(one), 30):.1f} ms")
        print(f"  encode_text, {len(names)} COCO names: median {median_ms(lambda: model.encode_text(names), 5):.1f} ms")
    difference = np.abs(lookout_embedding(folder) - reference).max()
    print(f"  Lookout's embedding against open_clip's: max |difference| {difference:.2e}", flush=True)


def siglip(work: str) -> None:
    import transformers
    from transformers import SiglipConfig, SiglipModel, SiglipTokenizer
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

    folder = os.path.join(work, "siglip-b16")
    spiece = os.path.join(ROOT, "Tests", "Fixtures", "sentencepiece", "unigram.model")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        os.makedirs(folder, exist_ok=True)
        model = SiglipModel(SiglipConfig())  # SigLIP base: 224, patch 16, 768 wide, 12 + 12 layers
        randomise(model, 5401)
        model.save_pretrained(folder)
        SiglipImageProcessorPil(size={"height": 224, "width": 224}).save_pretrained(folder)
        shutil.copy(spiece, os.path.join(folder, "spiece.model"))
    print("== SigLIP base patch16-224 (transformers' SiglipConfig defaults), random weights", flush=True)
    lookout(folder)
    model = SiglipModel.from_pretrained(folder).eval()
    processor = SiglipImageProcessorPil.from_pretrained(folder)
    tokenizer = SiglipTokenizer(vocab_file=spiece)
    image = Image.open(PHOTO)
    x = processor(images=image, return_tensors="pt")["pixel_values"]
    batch = x.repeat(8, 1, 1, 1)

    def ids(texts):
        return tokenizer(texts, padding="max_length", max_length=64, truncation=True, return_tensors="pt")["input_ids"]

    one, names = ids(["red car"]), ids(coco_names())
    with torch.no_grad():
        reference = torch.nn.functional.normalize(
            model.vision_model(pixel_values=x).pooler_output, dim=-1)[0].double().numpy()
        print(f"transformers {transformers.__version__}, PyTorch {torch.__version__} (2 threads):")
        print(f"  preprocess: median {median_ms(lambda: processor(images=image, return_tensors='pt'), 20):.1f} ms")
        print(f"  vision_model, one photo: median {median_ms(lambda: model.vision_model(pixel_values=x), 20):.1f} ms")
        print(f"  vision_model, 8 photos: median "
              f"{median_ms(lambda: model.vision_model(pixel_values=batch), 5) / 8:.1f} ms per photo")
        print(f"  text_model \"red car\": median {median_ms(lambda: model.text_model(input_ids=one), 30):.1f} ms")
        print(f"  text_model, {len(coco_names())} COCO names: median "
              f"{median_ms(lambda: model.text_model(input_ids=names), 5):.1f} ms")
    difference = np.abs(lookout_embedding(folder) - reference).max()
    print(f"  Lookout's embedding against transformers': max |difference| {difference:.2e}", flush=True)


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "towers")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(2)
    print(f"CPU: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    openclip(work)
    siglip(work)


if __name__ == "__main__":
    main()
