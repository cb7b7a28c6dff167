#!/usr/bin/env python3
"""Trains the demo model's CLIP image tower against the demo text encoder (frozen), on generated scenes.

Architecture: OpenAI CLIP's VisionTransformer (clip/model.py), names included, small: input 224, patch 32
(a 7×7 grid, as ViT-B/32), width 192, 4 layers, 3 heads, 512-d projection. Preprocessing: OpenAI's
`clip._transform(224)` (PIL bicubic resize, centre crop, normalisation), so that Lookout's tower reads
photos exactly as it was trained.

Objective: each scene is described by the captions it makes true, among 110 — its object count ("three
shapes"), its background ("textured background"), and the colours, shapes and colour–shape pairs present
("red shape", "star", "red star", as the detector's text encoder learned them); a sigmoid (multi-label)
contrastive loss aligns the photo's embedding with the text encoder's embeddings of those captions and away
from the others. The text encoder (Models/demo/text-encoder.safetensors) is not changed.

    python scripts/demo/train_image.py OUT --minutes 5 --cache 24000 --batch 512 --workers 16   # on a GPU
writes OUT/image-encoder.safetensors (F16, OpenAI `visual.*` names) and OUT/image-train-log.txt.
Caption token ids come from scripts/demo/scene_captions.json (make_scene_captions.py, with OpenAI's tokenizer).

Status: trials, not shipped. On one H100 (scene generation, ~170 scenes/s on 16 cores, bounds the data):
- 24,000 cached scenes, 21,526 steps of 512 in 5 minutes: training-batch precision@5 1.000, but on 160
  held-out scenes (seed 515000, evaluation split; Lookout's own embeddings of the tower) mean AP colours
  0.82, backgrounds 0.57, shapes 0.51, counts 0.29, colour–shape pairs 0.17 — it memorised its scenes;
- 64,000 cached scenes (384 s to make), 10,773 steps in 2.8 minutes: held-out backgrounds 0.993, colours
  0.900, shapes 0.610, counts 0.351, pairs 0.338; scene→captions precision@5 0.808.
More distinct scenes help most; counts and colour–shape pairs need more than this.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import reference_env  # noqa: E402,F401  (a CPU torch beside PyPI's CUDA torchvision, for a local trial run)
import scenes  # noqa: E402
from train import TextEncoder, Transformer  # noqa: E402

MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
COUNTS = ["one shape", "two shapes", "three shapes", "four shapes", "five shapes", "six shapes", "seven shapes",
          "eight shapes"]
BACKGROUNDS = {"plain": "plain background", "textured": "textured background", "cluttered": "cluttered background",
               "photo": "photo background"}


def caption_list() -> list[str]:
    return (COUNTS + list(BACKGROUNDS.values()) + [f"{c} shape" for c in scenes.COLOUR_NAMES] + list(scenes.SHAPES)
            + [scenes.caption(c, s) for s in scenes.SHAPES for c in scenes.COLOUR_NAMES])


def true_captions(objects: list[dict], background: str) -> set[str]:
    out = {COUNTS[min(len(objects), 8) - 1]} if objects else set()
    out.add(BACKGROUNDS[background])
    for o in objects:
        out.update({f"{o['colour']} shape", o["shape"], scenes.caption(o["colour"], o["shape"])})
    return out


class VisionTransformer(nn.Module):
    """OpenAI CLIP's VisionTransformer (clip/model.py), with its parameter names."""

    def __init__(self, resolution=224, patch=32, width=192, layers=4, output=512):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
        scale = width**-0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((resolution // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, width // 64)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output))

    def forward(self, x):
        x = self.conv1(x).flatten(2).permute(0, 2, 1)
        x = torch.cat([self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1), x], dim=1)
        x = self.ln_pre(x + self.positional_embedding.to(x.dtype))
        x = self.transformer(x.permute(1, 0, 2), None).permute(1, 0, 2)
        x = self.ln_post(x[:, 0, :]) @ self.proj
        return x / x.norm(dim=-1, keepdim=True)


class SceneSet(torch.utils.data.Dataset):
    def __init__(self, seed: int, captions: list[str], length: int = 10**9):
        from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Normalize, Resize, ToTensor

        self.seed, self.length = seed, length
        self.index = {c: i for i, c in enumerate(captions)}
        self.transform = Compose([Resize(224, interpolation=InterpolationMode.BICUBIC), CenterCrop(224), ToTensor(),
                                  Normalize(MEAN, STD)])

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        from PIL import Image

        image, objects, background = scenes.scene(self.seed, index, "train")
        target = torch.zeros(len(self.index))
        for caption in true_captions(objects, background):
            target[self.index[caption]] = 1
        return self.transform(Image.fromarray(image[:, :, ::-1].copy())), target


def _worker_start():
    import cv2

    cv2.setNumThreads(1)  # one OpenCV thread per worker: the pool is the parallelism (3x faster than oversubscribed)


def _crop_of_one_object(image, objects, background, rng):
    """A crop around one visible object, as a person would cut one out for `--query-image`, with its captions.

    Returns (BGR crop, {caption: known truth}); captions of other objects that reach into the crop are unknown
    (left out of the loss), as is the count unless the object stands alone in the crop.
    """
    if not objects:
        return None
    height, width = image.shape[:2]
    chosen = objects[int(rng.integers(0, len(objects)))]
    x1, y1, x2, y2 = chosen["box"]
    grow_x, grow_y = rng.uniform(1.05, 1.6), rng.uniform(1.05, 1.6)
    cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * grow_x, (y2 - y1) * grow_y
    box = [max(0, int(cx - w / 2)), max(0, int(cy - h / 2)), min(width, int(cx + w / 2) + 1),
           min(height, int(cy + h / 2) + 1)]
    if box[2] - box[0] < 8 or box[3] - box[1] < 8:
        return None
    known = {BACKGROUNDS[background]: True}
    for caption in (f"{chosen['colour']} shape", chosen["shape"], scenes.caption(chosen["colour"], chosen["shape"])):
        known[caption] = True
    alone = True
    for other in objects:
        if other is chosen:
            continue
        ox1, oy1, ox2, oy2 = other["box"]
        if min(ox2, box[2]) > max(ox1, box[0]) and min(oy2, box[3]) > max(oy1, box[1]):
            alone = False
            for caption in (f"{other['colour']} shape", other["shape"], scenes.caption(other["colour"], other["shape"])):
                known.setdefault(caption, None)  # present or not: unknown
    for k, caption in enumerate(COUNTS):
        known[caption] = (k == 0) if alone else None
    return image[box[1] : box[3], box[0] : box[2]], known


def _cached_item(arguments):
    """One training scene and one object crop from it, as the cache keeps them: 8-bit RGB after
    Resize(224, BICUBIC) + CenterCrop(224) (CLIP's), or squashed to 224×224 by PIL's bicubic when `squash`
    (SiglipImageProcessor's resize), with per-caption truth (True, False or None for unknown)."""
    seed, index, captions, squash = arguments
    from PIL import Image

    image, objects, background = scenes.scene(seed, index, "train")
    if squash:
        def steps(rgb):
            return rgb.convert("RGB").resize((224, 224), 3)
    else:
        from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Resize

        steps = Compose([Resize(224, interpolation=InterpolationMode.BICUBIC), CenterCrop(224)])

    def pixels(bgr):
        return np.asarray(steps(Image.fromarray(bgr[:, :, ::-1].copy())).convert("RGB"))

    truth = true_captions(objects, background)
    items = [(pixels(image), {c: (c in truth) for c in captions})]
    crop = _crop_of_one_object(image, objects, background, np.random.default_rng([seed, index, 7]))
    if crop is not None:
        crop_image, known = crop
        items.append((pixels(crop_image), {c: known.get(c, False) for c in captions}))
    return [(p, [captions.index(c) for c, v in t.items() if v], [captions.index(c) for c, v in t.items() if v is None])
            for p, t in items]


def build_cache(seed: int, count: int, captions: list[str], workers: int, seconds: float, squash: bool = False):
    """Up to `count` scenes (and a crop from each), preprocessed once (`_cached_item`), or as many as `seconds`
    allow (scene generation, not the GPU, bounds training otherwise)."""
    import multiprocessing

    capacity = 2 * count
    pixels = np.zeros((capacity, 224, 224, 3), np.uint8)
    targets = np.zeros((capacity, len(captions)), np.float32)
    weights = np.ones((capacity, len(captions)), np.float32)
    start, filled = time.time(), 0
    with multiprocessing.Pool(workers, initializer=_worker_start) as pool:
        for items in pool.imap(_cached_item, [(seed, i, captions, squash) for i in range(count)],
                               chunksize=16):
            for image, positives, unknown in items:
                pixels[filled] = image
                targets[filled, positives] = 1
                weights[filled, unknown] = 0
                filled += 1
            if time.time() - start > seconds:
                pool.terminate()
                break
    return (torch.from_numpy(pixels[:filled]), torch.from_numpy(targets[:filled]),
            torch.from_numpy(weights[:filled]))


def cached_batches(pixels, targets, weights, batch: int, mean, std):
    """Endless batches from a cache on the training device (build_cache's, moved there): each pass in a new random
    order, the last incomplete batch left out, each photo mirrored with probability one half, then normalised by
    `mean` and `std`. Yields (photos, targets, weights)."""
    count, device = pixels.shape[0], pixels.device
    while True:
        order = torch.randperm(count, device=device)
        for k in range(0, count - batch + 1, batch):
            chosen = order[k : k + batch]
            x = pixels[chosen].permute(0, 3, 1, 2).float() / 255
            flip = torch.rand(x.shape[0], device=device) < 0.5
            x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
            yield (x - mean) / std, targets[chosen], weights[chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, default=6)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--cache", type=int, default=0, help="train for many epochs on this many cached scenes")
    parser.add_argument("--cache-seconds", type=float, default=1e9, help="stop making the cache after this long")
    parser.add_argument("--width", type=int, default=192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--text", default=os.path.join(HERE, "..", "..", "Models", "demo", "text-encoder.safetensors"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = args.device
    from safetensors.torch import load_file, save_file

    captions = caption_list()
    table = json.load(open(os.path.join(HERE, "scene_captions.json")))
    ids = torch.tensor([table[c] for c in captions], device=device)
    text = TextEncoder().to(device)
    state = {k: v.float() for k, v in load_file(args.text).items()}
    missing = text.load_state_dict(state, strict=False)
    assert not missing.missing_keys, missing
    text.eval().requires_grad_(False)
    with torch.no_grad():
        text_embeddings = text(ids).float()  # (C, 512), normalised

    model = VisionTransformer(width=args.width, layers=args.layers).to(device)
    logit_scale = nn.Parameter(torch.tensor(math.log(10.0), device=device))
    logit_bias = nn.Parameter(torch.tensor(-5.0, device=device))
    parameters = list(model.parameters()) + [logit_scale, logit_bias]
    optimizer = torch.optim.AdamW(parameters, lr=args.lr, weight_decay=0.05)
    log = open(os.path.join(args.out, "image-train-log.txt"), "w")
    start = time.time()
    if args.cache:
        pixels, cached_targets, cached_weights = build_cache(args.seed, args.cache, captions, args.workers,
                                                             args.cache_seconds)
        pixels, cached_targets, cached_weights = pixels.to(device), cached_targets.to(device), cached_weights.to(device)
        count = pixels.shape[0]
        line = f"cached {count} images (scenes and object crops) in {time.time() - start:.0f} s"
        print(line, flush=True)
        log.write(line + "\n")
        mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        source = cached_batches(pixels, cached_targets, cached_weights, args.batch, mean, std)
    else:
        source = ((x, t, torch.ones_like(t)) for x, t in torch.utils.data.DataLoader(
            SceneSet(args.seed, captions), batch_size=args.batch, num_workers=args.workers, shuffle=False,
            persistent_workers=args.workers > 0, prefetch_factor=4 if args.workers > 0 else None))
    budget = args.minutes * 60
    train_start = time.time()
    step = 0
    for images, targets, weights in source:
        elapsed = time.time() - train_start
        if elapsed > budget:
            break
        progress = elapsed / budget
        lr = args.lr * min(1.0, step / 100) * 0.5 * (1 + math.cos(math.pi * progress))
        for group in optimizer.param_groups:
            group["lr"] = lr
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        weights = weights.to(device, non_blocking=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            embeddings = model(images)
        logits = logit_scale.exp() * embeddings.float() @ text_embeddings.T + logit_bias
        loss = nn.functional.binary_cross_entropy_with_logits(logits, targets, weight=weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 200 == 0:
            with torch.no_grad():
                top = logits.topk(5, dim=1).indices
                hit = targets.gather(1, top).mean().item()
            line = (f"step {step} {elapsed:.0f}s loss {loss.item():.4f} lr {lr:.2e} scale {logit_scale.exp().item():.1f}"
                    f" bias {logit_bias.item():.2f} precision@5 {hit:.3f}")
            print(line, flush=True)
            log.write(line + "\n")
        step += 1
    log.write(f"done: {step} steps of {args.batch} (seed {args.seed}, cache {args.cache}), {time.time() - start:.0f} s\n")
    log.close()
    state = {"visual." + k: v.detach().half().contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(args.out, "image-encoder.safetensors"),
              metadata={"source": "scripts/demo/train_image.py", "steps": str(step),
                        "logit_scale": f"{logit_scale.exp().item():.4f}", "logit_bias": f"{logit_bias.item():.4f}"})
    print(f"wrote {args.out}/image-encoder.safetensors after {step} steps")


if __name__ == "__main__":
    main()
