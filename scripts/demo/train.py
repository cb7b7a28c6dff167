"""Trains Lookout's embedded demo model: YOLO-World v2 n jointly with a small CLIP-architecture text encoder.

Detector: ultralytics' `yolov8n-worldv2.yaml`, trained from scratch with ultralytics' own detection loss
(v8DetectionLoss: task-aligned assignment, BCE on region–text similarities, CIoU + DFL), the text embeddings
acting as the class weights. Text encoder: OpenAI CLIP's text transformer (width 64, 1 head, 3 layers, 77
positions, the real 49,408-token vocabulary, 512-d projection), with OpenAI's parameter names, trained jointly.

Every image gets its own caption set of K = 80 texts, drawn per image from one of these modes, so that each
object matches at most one caption (ultralytics' loss is single-label):
  fine    all seen colour–shape captions ("red star") plus distractors
  subset  a few colour–shape captions, present or not; objects not named are background
  shape   shape names ("star") plus distractors
  colour  colour captions ("red shape") plus distractors
  any     "shape" plus distractors
Held-out combinations never appear in training scenes (scenes.HELD_OUT).

Runs on a GPU for a wall-clock budget; the learning rate follows a cosine over that budget. Writes
  OUT/demo-detector.pt          ultralytics checkpoint (fp16, YOLOWorld.save), EMA weights
  OUT/demo-text.safetensors     text encoder, F16, OpenAI CLIP names
  OUT/train-log.txt

Usage: python scripts/demo/train.py OUT --minutes 8 [--batch 64] [--imgsz 640] [--workers 14]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from types import SimpleNamespace

import cv2
import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

K = 80
CONTEXT = 77
VOCAB = 49408


# ---------------------------------------------------------------------------------------------- text encoder


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualBlock(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, width * 4))
        self.mlp.add_module("gelu", QuickGELU())
        self.mlp.add_module("c_proj", nn.Linear(width * 4, width))
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x, mask):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualBlock(width, heads) for _ in range(layers)])

    def forward(self, x, mask):
        for block in self.resblocks:
            x = block(x, mask)
        return x


class TextEncoder(nn.Module):
    """OpenAI CLIP's text tower (clip/model.py), names included, at a small width."""

    def __init__(self, width=64, layers=3, embed=512):
        super().__init__()
        heads = width // 64
        self.token_embedding = nn.Embedding(VOCAB, width)
        self.positional_embedding = nn.Parameter(torch.empty(CONTEXT, width))
        self.transformer = Transformer(width, layers, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.empty(width, embed))
        self.register_buffer("mask", torch.full((CONTEXT, CONTEXT), float("-inf")).triu_(1), persistent=False)
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (width**-0.5) * ((2 * layers) ** -0.5)
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=width**-0.5)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=(2 * width) ** -0.5)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=width**-0.5)

    def forward(self, tokens):
        x = self.token_embedding(tokens) + self.positional_embedding
        x = self.transformer(x.permute(1, 0, 2), self.mask).permute(1, 0, 2)
        x = self.ln_final(x)
        x = x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)] @ self.text_projection
        return x / x.norm(dim=-1, keepdim=True)


# ---------------------------------------------------------------------------------------------- data


def letterbox(image: np.ndarray, size: int) -> tuple[np.ndarray, float, float, float]:
    h, w = image.shape[:2]
    r = min(size / h, size / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    resized = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR)
    out = np.full((size, size, 3), 114, np.uint8)
    top, left = (size - nh) // 2, (size - nw) // 2
    out[top : top + nh, left : left + nw] = resized
    return out, r, left, top


class Scenes(torch.utils.data.Dataset):
    def __init__(self, seed: int, size: int, length: int = 10**9):
        self.seed, self.size, self.length = seed, size, length
        self.colour_index = {c: i for i, c in enumerate(scenes.COLOUR_NAMES)}
        self.shape_index = {s: i for i, s in enumerate(scenes.SHAPES)}

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        image, objects, _ = scenes.scene(self.seed, index, "train")
        boxed, r, left, top = letterbox(image, self.size)
        flip = self.flips(index)
        labels = self.labels(objects, r, left, top, flip)
        if flip:
            boxed = boxed[:, ::-1]
        tensor = torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1)))  # BGR → RGB, CHW
        return tensor, torch.from_numpy(labels)

    @staticmethod
    def flips(index: int) -> bool:
        """Whether scene `index` is mirrored (half of them, by a hash of the index)."""
        return bool((index * 2654435761 >> 7) & 1)

    def labels(self, objects: list[dict], r: float, left: int, top: int, flip: bool) -> np.ndarray:
        """colour, shape, cx, cy, w, h (normalised to the letterboxed input) of each object."""
        labels = np.zeros((len(objects), 6), np.float32)
        for k, o in enumerate(objects):
            x1, y1, x2, y2 = o["box"]
            x1, x2 = x1 * r + left, x2 * r + left
            y1, y2 = y1 * r + top, y2 * r + top
            if flip:
                x1, x2 = self.size - x2, self.size - x1
            labels[k] = [
                self.colour_index[o["colour"]], self.shape_index[o["shape"]],
                (x1 + x2) / 2 / self.size, (y1 + y2) / 2 / self.size, (x2 - x1) / self.size, (y2 - y1) / self.size,
            ]  # fmt: skip
        return labels


def collate(items):
    images = torch.stack([i for i, _ in items])
    return images, [l for _, l in items]


class CaptionSampler:
    """Builds each image's K captions and the class index of each object (−1: not named, background)."""

    def __init__(self, captions: dict, rng: random.Random):
        self.rng = rng
        held = {scenes.caption(c, s) for c, s in scenes.HELD_OUT}
        self.seen = [c for c in captions["fine"] if c not in held]
        self.shape = captions["shape"]
        self.colour = captions["colour"]
        self.distractors = captions["distractors"]

    def __call__(self, labels: torch.Tensor) -> tuple[list[str], list[int]]:
        rng = self.rng
        mode = rng.choices(["fine", "subset", "shape", "colour", "any"], weights=[35, 30, 14, 14, 7])[0]
        names = [
            (scenes.COLOUR_NAMES[int(c)], scenes.SHAPES[int(s)]) for c, s in labels[:, :2].tolist()
        ]
        if mode == "fine":
            chosen = list(self.seen)
            keys = [scenes.caption(c, s) for c, s in names]
        elif mode == "subset":
            present = sorted({scenes.caption(c, s) for c, s in names})
            chosen = [p for p in present if rng.random() < 0.7]
            chosen += rng.sample(self.seen, rng.randint(0, 12))
            chosen = list(dict.fromkeys(chosen))
            keys = [scenes.caption(c, s) for c, s in names]
        elif mode == "shape":
            chosen = rng.sample(self.shape, rng.randint(1, len(self.shape)))
            keys = [s for _, s in names]
        elif mode == "colour":
            chosen = rng.sample(self.colour, rng.randint(1, len(self.colour)))
            keys = [f"{c} shape" for c, _ in names]
        else:
            chosen = ["shape"]
            keys = ["shape"] * len(names)
        chosen += rng.sample(self.distractors, K - len(chosen))
        rng.shuffle(chosen)
        index = {c: i for i, c in enumerate(chosen)}
        return chosen, [index.get(k, -1) for k in keys]


# ---------------------------------------------------------------------------------------------- training


def caption_tokens():
    """captions.json, each caption's row in the token table, and the table (captions × 77 OpenAI CLIP ids)."""
    with open(os.path.join(HERE, "captions.json")) as f:
        captions = json.load(f)
    universe_index = {c: i for i, c in enumerate(captions["tokens"])}
    tokens = torch.zeros(len(universe_index), CONTEXT, dtype=torch.long)
    for c, i in universe_index.items():
        ids = captions["tokens"][c]
        tokens[i, : len(ids)] = torch.tensor(ids)
    return captions, universe_index, tokens


def seeded(seed: int, device: str) -> torch.device:
    """Seeds torch, random and numpy; cuDNN autotuning and TF32 on. Returns the device."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return torch.device(device)


def logger(path: str):
    """A function that prints a line and appends it to `path` (flushed: a run cut short keeps its log)."""
    log_file = open(path, "w")

    def log(text: str) -> None:
        print(text, flush=True)
        log_file.write(text + "\n")
        log_file.flush()

    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--workers", type=int, default=14)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="cuda", help="cpu for a smoke test")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = logger(os.path.join(args.out, "train-log.txt"))

    device = seeded(args.seed, args.device)

    from ultralytics import YOLOWorld
    from ultralytics.utils.loss import v8DetectionLoss
    from ultralytics.utils.torch_utils import ModelEMA

    wrapper = YOLOWorld("yolov8n-worldv2.yaml")
    detector = wrapper.model.to(device)
    detector.args = SimpleNamespace(box=7.5, cls=0.5, dfl=1.5)
    text = TextEncoder().to(device)
    both = nn.ModuleDict({"detector": detector, "text": text})
    criterion = v8DetectionLoss(detector)
    ema = ModelEMA(both, decay=0.9998, tau=1500)

    captions, universe_index, tokens = caption_tokens()
    tokens = tokens.to(device)
    sampler = CaptionSampler(captions, random.Random(args.seed))

    decay, no_decay = [], []
    for name, p in both.named_parameters():
        (no_decay if p.ndim <= 1 or "embedding" in name or "logit_scale" in name else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.025}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999),
    )  # fmt: skip

    loader = torch.utils.data.DataLoader(
        Scenes(args.seed, args.imgsz), batch_size=args.batch, shuffle=False, num_workers=args.workers,
        collate_fn=collate, pin_memory=device.type == "cuda", persistent_workers=True, prefetch_factor=4,
        worker_init_fn=lambda _: cv2.setNumThreads(1),
    )  # fmt: skip
    budget = args.minutes * 60
    warmup = 300
    start = time.time()
    step = 0
    both.train()
    smoothed = None
    for images, labels in loader:
        elapsed = time.time() - start
        if elapsed > budget:
            break
        progress = elapsed / budget
        lr = args.lr * (min(1.0, (step + 1) / warmup)) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in optimizer.param_groups:
            group["lr"] = lr

        sets, batch_idx, cls, boxes = [], [], [], []
        for b, image_labels in enumerate(labels):
            chosen, classes = sampler(image_labels)
            sets.append([universe_index[c] for c in chosen])
            for k, c in enumerate(classes):
                if c >= 0:
                    batch_idx.append(b)
                    cls.append(c)
                    boxes.append(image_labels[k, 2:].tolist())
        sets = torch.tensor(sets, device=device)
        batch = {
            "batch_idx": torch.tensor(batch_idx, dtype=torch.float32, device=device),
            "cls": torch.tensor(cls, dtype=torch.float32, device=device).view(-1, 1),
            "bboxes": torch.tensor(boxes, dtype=torch.float32, device=device).view(-1, 4),
        }
        images = images.to(device, non_blocking=True).float() / 255
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            used, inverse = sets.unique(return_inverse=True)
            embeddings = text(tokens[used]).float()[inverse]  # (B, K, 512)
            preds = detector.predict(images, txt_feats=embeddings)
        loss, items = criterion(preds, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.sum().backward()
        torch.nn.utils.clip_grad_norm_(both.parameters(), 10.0)
        optimizer.step()
        ema.update(both)
        step += 1
        values = torch.stack(list(items.values())).float().cpu().numpy() if isinstance(items, dict) else items
        smoothed = values if smoothed is None else 0.98 * smoothed + 0.02 * values
        if step % 100 == 0 or step == 1:
            log(
                f"step {step} t={elapsed:.0f}s lr={lr:.5f} box={smoothed[0]:.3f} cls={smoothed[1]:.3f} "
                f"dfl={smoothed[2]:.3f} img/s={step * args.batch / max(elapsed, 1e-6):.0f}"
            )
    log(f"trained {step} steps, {step * args.batch} images, {time.time() - start:.0f} s")

    final = ema.ema
    final.eval()
    text_final = final["text"].float().cpu()
    detector_final = final["detector"].float().cpu()
    with torch.no_grad():
        fine = captions["fine"]
        fine_tokens = tokens[[universe_index[c] for c in fine]].cpu()
        detector_final.txt_feats = text_final(fine_tokens)[None]
    detector_final.names = dict(enumerate(fine))
    detector_final.model[-1].nc = len(fine)
    detector_final.args = {"box": 7.5, "cls": 0.5, "dfl": 1.5, "imgsz": args.imgsz}
    wrapper.model = detector_final
    wrapper.save(os.path.join(args.out, "demo-detector.pt"))

    from safetensors.torch import save_file

    state = {k: v.detach().half().contiguous() for k, v in text_final.state_dict().items()}
    save_file(state, os.path.join(args.out, "demo-text.safetensors"), metadata={"format": "pt"})
    log("saved")


if __name__ == "__main__":
    main()
