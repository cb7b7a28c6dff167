"""Trains Lookout's embedded YOLOE demo model: ultralytics' `yoloe-11n-seg.yaml` on the generated scenes, with
masks, text prompts and visual prompts, against the demo model's own CLIP text encoder (frozen).

Masks are free here: the scene generator knows which shape each pixel shows (scenes.scene(owners=True)), so every
object's visible mask is exact. The text tower is Models/demo/text-encoder.safetensors (the YOLO-World demo's,
trained jointly with it): its embeddings of the captions are computed once and frozen; the YOLOE head's auxiliary
text network (reprta, as ultralytics' get_tpe applies it) is trained with the rest.

Two phases, as ultralytics trains YOLOE:
  1. text prompts: the whole network with ultralytics' own segmentation loss (v8SegmentationLoss: task-aligned
     assignment, BCE on the region–text similarities, CIoU + DFL, and the per-instance mask loss over the
     prototypes, overlap-coded masks at a quarter of the input). Each image gets its own K = 80 captions, drawn
     as the YOLO-World demo's train.py draws them (train.CaptionSampler), so that each object matches at most one.
  2. visual prompts: everything frozen but the head's SAVPE, which learns to embed an object from its box as
     ultralytics' YOLOEVPTrainer does (LoadVisualPrompt: one box mask per distinct label at an eighth of the
     input, TVPSegmentLoss: the classification term over those prompts).
Held-out colour–shape combinations never appear in training scenes (scenes.HELD_OUT).

Writes
  OUT/demo-yoloe.pt       ultralytics checkpoint (fp16, YOLOE.save), EMA weights, the 80 colour–shape captions
                          set as its classes
  OUT/train-yoloe-log.txt

Usage: python scripts/demo/train_yoloe.py OUT --minutes 8 --vp-minutes 2 [--batch 64] [--imgsz 640] [--workers 15]
       (--device cpu --minutes 0.5 --vp-minutes 0.2 --batch 2 --workers 1: a smoke test)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from types import SimpleNamespace

import cv2
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import scenes  # noqa: E402
import train  # noqa: E402
from train import CaptionSampler, TextEncoder, letterbox  # noqa: E402

MASK_RATIO = 4  # ultralytics' mask_ratio: training masks at a quarter of the input
PROMPT_RATIO = 8  # LoadVisualPrompt's scale_factor 1/8


class Scenes(train.Scenes):
    """train.Scenes with each object's owner (7th label column) and the owner map at the masks' resolution."""

    def __getitem__(self, index):
        image, objects, _, owner = scenes.scene(self.seed, index, "train", owners=True)
        boxed, r, left, top = letterbox(image, self.size)
        # The owner map letterboxed the same way (nearest), then at the masks' resolution.
        h, w = image.shape[:2]
        nw, nh = int(round(w * r)), int(round(h * r))
        placed = np.full((self.size, self.size), -1, np.int32)
        placed[top : top + nh, left : left + nw] = cv2.resize(owner, (nw, nh), interpolation=cv2.INTER_NEAREST)
        small = placed[MASK_RATIO // 2 :: MASK_RATIO, MASK_RATIO // 2 :: MASK_RATIO]
        flip = self.flips(index)
        labels = self.labels(objects, r, left, top, flip)
        labels = np.column_stack([labels, np.array([o["owner"] for o in objects], np.float32)])
        if flip:
            boxed = boxed[:, ::-1]
            small = small[:, ::-1]
        tensor = torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1)))  # BGR → RGB, CHW
        return tensor, torch.from_numpy(labels.astype(np.float32)), torch.from_numpy(np.ascontiguousarray(small))


def collate(items):
    return torch.stack([i for i, _, _ in items]), [l for _, l, _ in items], torch.stack([m for _, _, m in items])


def overlap_masks(owners: torch.Tensor, kept: list[list[int]]) -> torch.Tensor:
    """ultralytics' overlap coding: pixel value i + 1 where the image's i-th target shows, 0 elsewhere (objects
    left unnamed, and so background, included)."""
    out = torch.zeros(owners.shape, dtype=torch.float32)
    for b, owner_ids in enumerate(kept):
        for i, owner in enumerate(owner_ids):
            out[b][owners[b] == owner] = i + 1
    return out


def box_prompts(boxes: list[list[float]], size: int) -> torch.Tensor:
    """LoadVisualPrompt.make_mask for one prompt: the union of its boxes (normalised xywh) at 1/8 of the input."""
    side = size // PROMPT_RATIO
    out = torch.zeros(side, side)
    r = torch.arange(side)
    for cx, cy, w, h in boxes:
        x1, y1, x2, y2 = [(v * size) / PROMPT_RATIO for v in (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)]
        cols = (r >= x1) & (r < x2)
        rows = (r >= y1) & (r < y2)
        out = torch.maximum(out, (rows[:, None] & cols[None, :]).float())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, default=8.0, help="text-prompt phase")
    parser.add_argument("--vp-minutes", type=float, default=2.0, help="visual-prompt phase (SAVPE only)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--vp-lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--text", default=os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors"))
    parser.add_argument("--device", default="cuda", help="cpu for a smoke test")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = train.logger(os.path.join(args.out, "train-yoloe-log.txt"))
    log(" ".join(sys.argv))
    device = train.seeded(args.seed, args.device)

    from safetensors.torch import load_file
    from ultralytics import YOLOE
    from ultralytics.utils.loss import v8SegmentationLoss
    from ultralytics.utils.torch_utils import ModelEMA

    # The frozen text tower: every caption's embedding, once.
    captions, universe_index, tokens = train.caption_tokens()
    text = TextEncoder()
    text.load_state_dict({k: v.float() for k, v in load_file(args.text).items()})
    text.eval()
    with torch.no_grad():
        table = text(tokens).to(device)  # (captions, 512), L2-normalised
    sampler = CaptionSampler(captions, random.Random(args.seed))

    wrapper = YOLOE("yoloe-11n-seg.yaml")
    detector = wrapper.model.to(device)
    head = detector.model[-1]
    detector.args = SimpleNamespace(box=7.5, cls=0.5, dfl=1.5, overlap_mask=True)
    criterion = v8SegmentationLoss(detector)
    ema = ModelEMA(detector, decay=0.9998, tau=1500)  # phase 1's weights; phase 2 trains SAVPE on them directly

    loader = torch.utils.data.DataLoader(
        Scenes(args.seed, args.imgsz), batch_size=args.batch, shuffle=False, num_workers=args.workers,
        collate_fn=collate, pin_memory=device.type == "cuda", persistent_workers=True, prefetch_factor=4,
        worker_init_fn=lambda _: cv2.setNumThreads(1),
    )  # fmt: skip
    batches = iter(loader)

    def run_phase(phase: str, parameters, budget: float, lr0: float, step_fn, ema=None) -> None:
        decay, no_decay = [], []
        for name, p in parameters:
            (no_decay if p.ndim <= 1 else decay).append(p)
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.025}, {"params": no_decay, "weight_decay": 0.0}], lr=lr0
        )
        warmup = 300 if phase == "text" else 50
        start, step, smoothed = time.time(), 0, None
        while (elapsed := time.time() - start) < budget:
            images, labels, owners = next(batches)
            progress = elapsed / budget
            lr = lr0 * min(1.0, (step + 1) / warmup) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))
            for group in optimizer.param_groups:
                group["lr"] = lr
            images = images.to(device, non_blocking=True).float() / 255
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss, items = step_fn(images, labels, owners)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for _, p in parameters], 10.0)
            optimizer.step()
            if ema is not None:
                ema.update(detector)
            step += 1
            values = (torch.stack(list(items.values())) if isinstance(items, dict) else items).float().cpu().numpy()
            smoothed = values if smoothed is None else 0.98 * smoothed + 0.02 * values
            if step % 100 == 0 or step == 1:
                parts = " ".join(f"{n}={v:.3f}" for n, v in zip(("box", "seg", "cls", "dfl"), smoothed))
                log(f"{phase} step {step} t={elapsed:.0f}s lr={lr:.5f} {parts} img/s={step * args.batch / max(elapsed, 1e-6):.0f}")
        log(f"{phase}: {step} steps, {step * args.batch} images, {time.time() - start:.0f} s")

    def targets(labels, owners, classes_of):
        """The loss's batch: rows of the objects that `classes_of` names (class index ≥ 0), their masks."""
        batch_idx, cls, boxes, kept = [], [], [], []
        for b, image_labels in enumerate(labels):
            classes = classes_of(b, image_labels)
            kept.append([])
            for k, c in enumerate(classes):
                if c >= 0:
                    batch_idx.append(b)
                    cls.append(c)
                    boxes.append(image_labels[k, 2:6].tolist())
                    kept[-1].append(int(image_labels[k, 6]))
        return {
            "batch_idx": torch.tensor(batch_idx, dtype=torch.float32, device=device),
            "cls": torch.tensor(cls, dtype=torch.float32, device=device).view(-1, 1),
            "bboxes": torch.tensor(boxes, dtype=torch.float32, device=device).view(-1, 4),
            "masks": overlap_masks(owners, kept).to(device, non_blocking=True),
        }

    # Phase 1: text prompts, the whole network but SAVPE (which text prompts never reach).
    def text_step(images, labels, owners):
        sets = []

        def classes_of(b, image_labels):
            chosen, classes = sampler(image_labels[:, :6])
            sets.append([universe_index[c] for c in chosen])
            return classes

        batch = targets(labels, owners, classes_of)
        embeddings = table[torch.tensor(sets, device=device)]  # (B, K, 512)
        preds = detector.predict(images, tpe=embeddings)
        loss, items = criterion(preds, batch)
        return loss.sum(), items

    text_parameters = [(n, p) for n, p in detector.named_parameters() if ".savpe." not in n]
    detector.train()
    run_phase("text", text_parameters, args.minutes * 60, args.lr, text_step, ema)
    detector.load_state_dict(ema.ema.state_dict())  # phase 2 learns on the weights that ship

    # Phase 2: visual prompts, SAVPE alone (as YOLOEVPTrainer freezes the rest), the classification term over
    # one prompt per distinct colour–shape label in the image, from that label's boxes.
    for name, p in detector.named_parameters():
        p.requires_grad_(".savpe." in name)
    vp_parameters = [(n, p) for n, p in detector.named_parameters() if p.requires_grad]
    detector.eval()  # BatchNorm statistics stay those of phase 1
    head.savpe.train()

    def visual_step(images, labels, owners):
        prompts = []

        def classes_of(b, image_labels):
            names = [scenes.caption(scenes.COLOUR_NAMES[int(c)], scenes.SHAPES[int(s)]) for c, s in image_labels[:, :2].tolist()]
            distinct = sorted(set(names))
            prompts.append([box_prompts([image_labels[k, 2:6].tolist() for k, n in enumerate(names) if n == d], args.imgsz) for d in distinct])
            return [distinct.index(n) for n in names]

        batch = targets(labels, owners, classes_of)
        count = max(1, max(len(p) for p in prompts))
        side = args.imgsz // PROMPT_RATIO
        visuals = torch.zeros(len(prompts), count, side, side)
        for b, p in enumerate(prompts):
            for i, mask in enumerate(p):
                visuals[b, i] = mask
        vpe = head.get_vpe(detector_features(images), visuals.to(device))
        preds = run_head(vpe)
        criterion.nc = count
        criterion.no = count + criterion.reg_max * 4
        criterion.assigner.num_classes = count
        loss, items = criterion(preds, batch)
        return loss[2], items

    saved: dict = {}

    def detector_features(images):
        """The head's inputs (the neck's P3–P5), kept for run_head; run as YOLOEModel.predict does."""
        y, x = [], images
        for m in detector.model[:-1]:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in detector.save else None)
        saved["features"] = [y[j] for j in head.f]
        return saved["features"]

    def run_head(vpe):
        features = saved.pop("features")
        cls_pe = detector.get_cls_pe(None, vpe).type_as(features[0])
        head.train()  # training outputs; BatchNorm outside SAVPE keeps its statistics
        for name, module in head.named_modules():
            if isinstance(module, torch.nn.BatchNorm2d) and not name.startswith("savpe."):
                module.eval()
        return head([*features, cls_pe])

    run_phase("visual", vp_parameters, args.vp_minutes * 60, args.vp_lr, visual_step)
    for p in detector.parameters():
        p.requires_grad_(False)

    final = detector.float().cpu().eval()
    fine = captions["fine"]
    with torch.no_grad():
        fine_embeddings = table[[universe_index[c] for c in fine]].float().cpu()[None]
        final.set_classes(fine, final.model[-1].get_tpe(fine_embeddings))
    final.args = {"box": 7.5, "cls": 0.5, "dfl": 1.5, "imgsz": args.imgsz, "overlap_mask": True}
    wrapper.model = final
    wrapper.save(os.path.join(args.out, "demo-yoloe.pt"))
    log("saved")


if __name__ == "__main__":
    main()
