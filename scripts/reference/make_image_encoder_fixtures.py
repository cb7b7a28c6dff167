#!/usr/bin/env python3
"""Reference outputs for Lookout's CLIP image tower and its preprocessing.

Everything here comes from the reference code, never from Lookout:
- **Photos** (Tests/Fixtures/clip-image/): the example photos, plus images made here with PIL in every mode
  CLIP's preprocessing treats apart — RGB, grayscale (L), RGBA and LA (resized premultiplied), palette (P) and
  bilevel (1) (resized nearest-neighbour) — and sizes that upscale (20×14), very wide and tall ones, one
  already 224 on its short side, and crops whose centre falls on a half pixel. None has an EXIF orientation.
- **Preprocessing** (`preprocessed.safetensors`): for n_px 224 and 32, the 8-bit RGB image that
  `clip._transform(n_px)` hands to `ToTensor` — torchvision's Resize(n_px, BICUBIC) on the PIL image,
  CenterCrop(n_px), `convert("RGB")` — as uint8 [n_px, n_px, 3].
- **Tiny tower** (`tiny-expected.safetensors`): `clip.load(Tests/Fixtures/weights/clip-tiny-openai.pt,
  device="cpu", jit=False)`, then `encode_image(preprocess(image))`, normalised, for every photo; and the
  reference's own float32 error (the same model in float64).
- **Demo tower** (`demo-expected.safetensors`): OpenAI's `clip.model.VisionTransformer` built at the demo
  tower's size (read from its tensors) with `Models/demo/image-encoder.safetensors` loaded by the safetensors
  library (F16 values widened), `clip._transform(224)`, normalised: every photo and four example scenes.
- `--full DIR`: the same embeddings from the full-size random ViT-B/32 that scripts/check-full-clip makes
  (DIR/ViT-B-32-random.pt) → DIR/expected-images.json.

Run in the text reference environment (scripts/reference-venv):

    python scripts/reference/make_image_encoder_fixtures.py [--full DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import clip  # noqa: E402
import numpy as np  # noqa: E402
import PIL  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "clip-image")


def smooth(rng: np.random.Generator, width: int, height: int, channels: int) -> np.ndarray:
    """Smooth random colours with some sharp edges: what a resize filter must get right."""
    small = rng.integers(0, 256, size=(max(2, height // 12), max(2, width // 12), channels)).astype(np.uint8)
    base = np.asarray(Image.fromarray(small.squeeze()).resize((width, height), Image.Resampling.BILINEAR))
    base = base.reshape(height, width, channels).astype(np.int32)
    base[height // 3: height // 2, :] = 255 - base[height // 3: height // 2, :]
    base[:, width // 4: width // 4 + max(1, width // 20)] = 0
    return np.clip(base, 0, 255).astype(np.uint8)


def make_photos() -> list[str]:
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261123)
    made = {
        "tiny-rgb.png": Image.fromarray(smooth(rng, 20, 14, 3)),
        "wide.jpg": Image.fromarray(smooth(rng, 900, 60, 3)),
        "tall.jpg": Image.fromarray(smooth(rng, 48, 700, 3)),
        "gray.jpg": Image.fromarray(smooth(rng, 300, 201, 1).squeeze(), "L"),
        "exact-224.png": Image.fromarray(smooth(rng, 224, 330, 3)),
        "half-pixel-crop.png": Image.fromarray(smooth(rng, 225, 301, 3)),
        "rgba.png": Image.fromarray(
            np.dstack([smooth(rng, 257, 190, 3), np.tile(np.linspace(0, 255, 257).astype(np.uint8), (190, 1))]),
            "RGBA"),
        "la.png": Image.fromarray(
            np.dstack([smooth(rng, 150, 99, 1).squeeze(), np.tile(np.linspace(255, 0, 99).astype(np.uint8)[:, None], (1, 150))]),
            "LA"),
        "palette.png": Image.fromarray(smooth(rng, 180, 241, 3)).quantize(colors=37),
        "bilevel.png": Image.fromarray(smooth(rng, 64, 47, 1).squeeze(), "L").point(lambda v: 255 if v > 127 else 0).convert("1"),
    }
    for name, image in made.items():
        image.save(os.path.join(OUT, name), quality=90) if name.endswith(".jpg") else image.save(os.path.join(OUT, name))
    photos = sorted(made)
    for name in sorted(os.listdir(os.path.join(ROOT, "examples", "photos"))):
        if name.endswith(".jpg"):
            photos.append("../../../examples/photos/" + name)
    return photos


def preprocessed(photos: list[str]) -> dict[str, torch.Tensor]:
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Resize

    out = {}
    for n_px in (224, 32):
        steps = Compose([Resize(n_px, interpolation=InterpolationMode.BICUBIC), CenterCrop(n_px),
                         lambda image: image.convert("RGB")])
        for name in photos:
            with Image.open(os.path.join(OUT, name)) as image:
                out[f"{os.path.basename(name)}@{n_px}"] = torch.from_numpy(np.asarray(steps(image)).copy())
    return out


def embeddings(path: str, photos: list[str]) -> tuple[list[list[float]], float, dict[str, str]]:
    import copy

    model, preprocess = clip.load(path, device="cpu", jit=False)
    model.eval()
    # The same model in float64 (clip.model.LayerNorm computes in float32 whatever its input; here in float64).
    model64 = copy.deepcopy(model).double()
    for module in model64.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.forward = lambda x, m=module: torch.nn.LayerNorm.forward(m, x)
    result, error, modes = [], 0.0, {}
    for name in photos:
        with Image.open(os.path.join(OUT, name)) as image:
            modes[os.path.basename(name)] = image.mode
            x = preprocess(image).unsqueeze(0)
        with torch.no_grad():
            e = model.encode_image(x)[0]
            e64 = model64.encode_image(x.double())[0]
        e = e / e.norm()
        e64 = e64 / e64.norm()
        error = max(error, float((e.double() - e64).abs().max()))
        result.append([float(v) for v in e])
    return result, error, modes


def demo_embeddings(photos: list[str]) -> tuple[dict[str, torch.Tensor], float]:
    import copy

    from clip.model import VisionTransformer
    from safetensors.torch import load_file

    state = {k[len("visual."):]: v.float() for k, v in
             load_file(os.path.join(ROOT, "Models", "demo", "image-encoder.safetensors")).items()}
    width = state["conv1.weight"].shape[0]
    patch = state["conv1.weight"].shape[-1]
    grid = round((state["positional_embedding"].shape[0] - 1) ** 0.5)
    layers = len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")})
    model = VisionTransformer(input_resolution=grid * patch, patch_size=patch, width=width, layers=layers,
                              heads=width // 64, output_dim=state["proj"].shape[1])
    model.load_state_dict(state)
    model.eval()
    model64 = copy.deepcopy(model).double()
    for module in model64.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.forward = lambda x, m=module: torch.nn.LayerNorm.forward(m, x)
    preprocess = clip.clip._transform(grid * patch)
    out, error = {}, 0.0
    scenes = [f"../../../examples/scenes/scene-{i:04d}.jpg" for i in (0, 3, 7, 9)]
    for name in photos + scenes:
        with Image.open(os.path.join(OUT, name)) as image:
            x = preprocess(image).unsqueeze(0)
        with torch.no_grad():
            e, e64 = model(x)[0], model64(x.double())[0]
        e, e64 = e / e.norm(), e64 / e64.norm()
        error = max(error, float((e.double() - e64).abs().max()))
        out[os.path.basename(name)] = e.contiguous()
    return out, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", metavar="DIR")
    args = parser.parse_args()
    photos = make_photos()
    if args.full:
        path = os.path.join(args.full, "ViT-B-32-random.pt")
        vectors, error, modes = embeddings(path, photos)
        with open(os.path.join(args.full, "expected-images.json"), "w", encoding="utf-8") as handle:
            json.dump({"photos": [os.path.basename(p) for p in photos], "embeddings": vectors,
                       "reference_error": error, "torch": torch.__version__, "pillow": PIL.__version__}, handle)
        print(f"wrote {len(vectors)} image embeddings of the full-size model; float32 error {error:.3g}")
        return
    from safetensors.torch import save_file

    save_file(preprocessed(photos), os.path.join(OUT, "preprocessed.safetensors"),
              metadata={"source": "clip._transform(n_px) up to ToTensor: Resize(BICUBIC), CenterCrop, convert RGB",
                        "pillow": PIL.__version__})
    vectors, error, modes = embeddings(os.path.join(ROOT, "Tests", "Fixtures", "weights", "clip-tiny-openai.pt"), photos)
    save_file({os.path.basename(p): torch.tensor(v) for p, v in zip(photos, vectors)},
              os.path.join(OUT, "tiny-expected.safetensors"),
              metadata={"source": "clip.load(clip-tiny-openai.pt, device='cpu', jit=False): encode_image(preprocess(image)), normalised",
                        "reference_error": f"{error:.3g}", "torch": torch.__version__, "pillow": PIL.__version__,
                        "photos": json.dumps([os.path.basename(p) for p in photos]), "modes": json.dumps(modes)})
    print(f"{len(photos)} photos ({', '.join(f'{k}: {v}' for k, v in modes.items())}); float32 error {error:.3g}")
    demo, demo_error = demo_embeddings(photos)
    save_file(demo, os.path.join(OUT, "demo-expected.safetensors"),
              metadata={"source": "clip.model.VisionTransformer with Models/demo/image-encoder.safetensors: "
                        "model(_transform(224)(image)), normalised", "reference_error": f"{demo_error:.3g}",
                        "torch": torch.__version__, "pillow": PIL.__version__, "photos": json.dumps(sorted(demo))})
    print(f"demo tower: {len(demo)} photos; float32 error {demo_error:.3g}")


if __name__ == "__main__":
    main()
