#!/usr/bin/env python3
"""Trains the demo's multilingual scene tower: a small SigLIP (image and text towers together), on generated scenes.

Architecture: transformers' SiglipModel, written here in plain PyTorch with its parameter names (the GPU machine has
no transformers; package_siglip.py loads the result into SiglipModel, checks that both compute the same, and saves
the folder as save_pretrained does). Vision: 224 px, patch 32 (49 patches, no class token), width 256, 4 layers,
4 heads, tanh GELU, the attention-pooling head. Text: width 256, 2 layers, 4 heads, 64 positions, the
multilingual sentencepiece vocabulary of make_multilingual_tokenizer.py, pooled at the last position as SigLIP pools.

Objective: SigLIP's sigmoid loss between each photo and the 110 scene captions (train_image.caption_list) in five
languages (multilingual.py: English, German, French, Spanish, Chinese); a caption is true of a photo in every
language at once. Photos: generated scenes (seed 2, training split: the 10 held-out colour–shape pairs never
drawn) and a crop of one object from each (other objects reaching into the crop leave their captions out of the
loss), resized as SiglipImageProcessor resizes (PIL bicubic, squashed to 224×224), cached as 8-bit RGB; random
mirroring. AdamW, cosine over the wall-clock budget, bf16 autocast.

    python scripts/demo/train_siglip.py OUT --cache 150000 --cache-seconds 270 --minutes 4.5 --batch 512 --workers 16
writes OUT/model.safetensors (F16, transformers' names) and OUT/train-log.txt. Token ids come from
scripts/demo/multilingual_captions.json, so the GPU machine needs no tokenizer.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_image import build_cache, cached_batches, caption_list  # noqa: E402

SIZE = 224
LANGUAGES = ["en", "de", "fr", "es", "zh"]
EPS = 1e-6

VISION = dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4, image_size=SIZE,
              patch_size=32)
TEXT = dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=64)


class Attention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(width, width), nn.Linear(width, width)
        self.v_proj, self.out_proj = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        b, n, w = x.shape
        q, k, v = (p(x).view(b, n, self.heads, w // self.heads).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, w))


class MLP(nn.Module):
    def __init__(self, width: int, inner: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, inner), nn.Linear(inner, width)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Layer(nn.Module):
    def __init__(self, width: int, heads: int, inner: int):
        super().__init__()
        self.self_attn = Attention(width, heads)
        self.layer_norm1, self.layer_norm2 = nn.LayerNorm(width, eps=EPS), nn.LayerNorm(width, eps=EPS)
        self.mlp = MLP(width, inner)

    def forward(self, x):
        x = x + self.self_attn(self.layer_norm1(x))
        return x + self.mlp(self.layer_norm2(x))


class Encoder(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.layers = nn.ModuleList([Layer(c["hidden_size"], c["num_attention_heads"], c["intermediate_size"])
                                     for _ in range(c["num_hidden_layers"])])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class VisionEmbeddings(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, c["hidden_size"], c["patch_size"], stride=c["patch_size"])
        self.position_embedding = nn.Embedding((c["image_size"] // c["patch_size"]) ** 2, c["hidden_size"])

    def forward(self, pixels):
        return self.patch_embedding(pixels).flatten(2).transpose(1, 2) + self.position_embedding.weight


class PoolingHead(nn.Module):
    """SiglipMultiheadAttentionPoolingHead: one learned probe attends over the patches, then a residual MLP."""

    def __init__(self, c: dict):
        super().__init__()
        width = c["hidden_size"]
        self.probe = nn.Parameter(torch.randn(1, 1, width))
        self.attention = nn.MultiheadAttention(width, c["num_attention_heads"], batch_first=True)
        self.layernorm = nn.LayerNorm(width, eps=EPS)
        self.mlp = MLP(width, c["intermediate_size"])

    def forward(self, x):
        y = self.attention(self.probe.expand(x.shape[0], -1, -1), x, x, need_weights=False)[0]
        return (y + self.mlp(self.layernorm(y)))[:, 0]


class VisionModel(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.embeddings, self.encoder = VisionEmbeddings(c), Encoder(c)
        self.post_layernorm = nn.LayerNorm(c["hidden_size"], eps=EPS)
        self.head = PoolingHead(c)

    def forward(self, pixels):
        return self.head(self.post_layernorm(self.encoder(self.embeddings(pixels))))


class TextEmbeddings(nn.Module):
    def __init__(self, c: dict, vocabulary: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocabulary, c["hidden_size"])
        self.position_embedding = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])

    def forward(self, ids):
        return self.token_embedding(ids) + self.position_embedding.weight[: ids.shape[1]]


class TextModel(nn.Module):
    def __init__(self, c: dict, vocabulary: int, projection: int):
        super().__init__()
        self.embeddings, self.encoder = TextEmbeddings(c, vocabulary), Encoder(c)
        self.final_layer_norm = nn.LayerNorm(c["hidden_size"], eps=EPS)
        self.head = nn.Linear(c["hidden_size"], projection)

    def forward(self, ids):  # SigLIP passes no attention mask: every position, padding included, attends to all
        return self.head(self.final_layer_norm(self.encoder(self.embeddings(ids)))[:, -1])


class SigLIP(nn.Module):
    def __init__(self, vocabulary: int):
        super().__init__()
        self.vision_model = VisionModel(VISION)
        self.text_model = TextModel(TEXT, vocabulary, VISION["hidden_size"])
        self.logit_scale = nn.Parameter(torch.tensor([math.log(10.0)]))
        self.logit_bias = nn.Parameter(torch.tensor([-10.0]))

    def initialise(self):
        """Small normal weights (as SiglipPreTrainedModel's init: variance scaling by fan-in), zero biases."""
        for name, p in self.named_parameters():
            if name in ("logit_scale", "logit_bias"):
                continue
            if "norm" in name:
                nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                fan_in = p[0].numel() if p.dim() == 4 else p.shape[-1]
                nn.init.normal_(p, std=(1.0 / fan_in) ** 0.5)
            else:
                nn.init.normal_(p, std=0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, default=4.5)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--cache", type=int, default=150000)
    parser.add_argument("--cache-seconds", type=float, default=270)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = args.device
    from safetensors.torch import save_file

    captions = caption_list()
    table = json.load(open(os.path.join(HERE, "multilingual_captions.json"), encoding="utf-8"))
    ids = torch.tensor([table["captions"][c][lang] for c in captions for lang in LANGUAGES], device=device)
    model = SigLIP(table["vocabulary"])
    model.initialise()
    model = model.to(device)
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or "embedding" in n]
    decay = [p for n, p in model.named_parameters() if not (p.dim() < 2 or "embedding" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0}],
                                  lr=args.lr)
    log = open(os.path.join(args.out, "train-log.txt"), "w")

    def say(line: str) -> None:
        print(line, flush=True)
        log.write(line + "\n")

    start = time.time()
    # SiglipImageProcessor's resize: squashed to 224×224 by PIL's bicubic
    pixels, cached_targets, cached_weights = build_cache(args.seed, args.cache, captions, args.workers,
                                                         args.cache_seconds, squash=True)
    pixels, cached_targets, cached_weights = pixels.to(device), cached_targets.to(device), cached_weights.to(device)
    count = pixels.shape[0]
    say(f"cached {count} images (scenes and object crops) in {time.time() - start:.0f} s; "
        f"{len(ids)} captions ({len(captions)} in {len(LANGUAGES)} languages)")

    def batches():
        # SigLIP's normalisation (mean and std 0.5); a caption is true in every language: the 110 columns repeat
        # for each of the five
        for x, t, w in cached_batches(pixels, cached_targets, cached_weights, args.batch, 0.5, 0.5):
            yield x, t.repeat_interleave(len(LANGUAGES), dim=1), w.repeat_interleave(len(LANGUAGES), dim=1)

    budget = args.minutes * 60
    train_start = time.time()
    step = 0
    for images, targets, weights in batches():
        elapsed = time.time() - train_start
        if elapsed > budget:
            break
        progress = elapsed / budget
        lr = args.lr * min(1.0, step / 200) * 0.5 * (1 + math.cos(math.pi * progress))
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(device, dtype=torch.bfloat16):
            photos = model.vision_model(images)
            texts = model.text_model(ids)
        photos = F.normalize(photos.float(), dim=-1)
        texts = F.normalize(texts.float(), dim=-1)
        logits = model.logit_scale.exp() * photos @ texts.T + model.logit_bias
        loss = F.binary_cross_entropy_with_logits(logits, targets, weight=weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 200 == 0:
            with torch.no_grad():
                per_language = []
                for k, lang in enumerate(LANGUAGES):
                    columns = logits[:, k :: len(LANGUAGES)]
                    top = columns.topk(5, dim=1).indices
                    per_language.append(f"{lang} {targets[:, k :: len(LANGUAGES)].gather(1, top).mean().item():.3f}")
            say(f"step {step} {elapsed:.0f}s loss {loss.item():.4f} lr {lr:.2e} scale "
                f"{model.logit_scale.exp().item():.1f} bias {model.logit_bias.item():.2f} precision@5 "
                + ", ".join(per_language))
        step += 1
    say(f"done: {step} steps of {args.batch} (seed {args.seed}, {count} cached images), {time.time() - start:.0f} s")
    log.close()
    # F16, as the demo ships it (the device tool brings back files up to 16 MiB; F32 is 26 MB)
    state = {k: v.detach().half().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(args.out, "model.safetensors"),
              metadata={"source": "scripts/demo/train_siglip.py", "steps": str(step)})
    print(f"wrote {args.out}/model.safetensors after {step} steps")


if __name__ == "__main__":
    main()
