#!/usr/bin/env python3
"""The CLIP image tower on the GPU (issue 51), run on the GPU machine with its PyTorch: OpenAI's ViT-B/32 image
tower with the same random weights in Lookout (the CUDA backend) and in PyTorch, at batch 256, in one run on one
card.

    scripts/device/bundle                                   # here: the bundle with lookout-gpu-check
    python3 scripts/bench/gpu_towers.py OUT [--batch 256] [--skip-compile]   # there, from the repository's root
    python3 scripts/bench/gpu_towers.py --check             # here: the PyTorch tower against OpenAI's clip package

- The tower (`VisionTower`) is OpenAI's `VisionTransformer` written in plain PyTorch (attention through
  `scaled_dot_product_attention`, flash attention in fp16) with OpenAI's parameter names, so that its
  `state_dict()` saved as safetensors is a checkpoint Lookout reads. `--check` holds it to the `clip` package's
  own `VisionTransformer` on the CPU (the reference venv has it).
- PyTorch: eager fp32 (TF32 off), eager fp16 and `torch.compile` (inductor, mode="reduce-overhead") fp16, from
  preprocessed photos already on the GPU to embeddings (not normalised), median of 20 batches; and eager fp16
  from 8-bit photos in pinned host memory (copied, normalised on the GPU), the work Lookout's rows include.
- Lookout: `lookout-gpu-check --tower FILE BATCH`: the example scenes against its CPU (fp32 within 1e-5; fp16 and
  bf16 cosines), then BATCH photos from the host to L2-normalised embeddings in fp32, fp16 and bf16: as their 8-bit
  pixels (resized and cropped; what the index hands over, normalised on the GPU) and as preprocessed floats.
  Run twice: with the 16-bit sublayers fused (the default) and unfused (`LOOKOUT_CUDA_SUBLAYERS=0`).
- The floor: the tower's multiply-adds against the card's nominal dense rate.

Writes OUT/towers.txt (and prints it).
"""
import argparse
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RATES = {"H100": {"fp32": 67.0, "fp16": 989.0}, "H200": {"fp32": 67.0, "fp16": 989.0}}


class Attention(nn.Module):
    """nn.MultiheadAttention's parameters (in_proj_weight, in_proj_bias, out_proj), batch first."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)

    def forward(self, x):
        n, length, width = x.shape
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        split = lambda t: t.view(n, length, self.heads, width // self.heads).transpose(1, 2)  # noqa: E731
        y = F.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.out_proj(y.transpose(1, 2).reshape(n, length, width))


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, 4 * width))
        self.mlp.add_module("gelu", QuickGELU())
        self.mlp.add_module("c_proj", nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Blocks(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])


class VisionTower(nn.Module):
    """OpenAI's VisionTransformer: conv1 (patches, no bias), class token, positions, ln_pre, blocks, ln_post on the
    class token, proj."""

    def __init__(self, resolution=224, patch=32, width=768, layers=12, heads=12, output=512):
        super().__init__()
        scale = width ** -0.5
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((resolution // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Blocks(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output))
        # OpenAI's CLIP.initialize_parameters for a transformer's blocks.
        attention, projection, fc = width ** -0.5, width ** -0.5 * (2 * layers) ** -0.5, (2 * width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attention)
            nn.init.normal_(block.attn.out_proj.weight, std=projection)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc)
            nn.init.normal_(block.mlp.c_proj.weight, std=projection)

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.transformer.resblocks(self.ln_pre(x))
        return self.ln_post(x[:, 0, :]) @ self.proj


def multiply_adds(tower, batch=1):
    c = tower.conv1
    tokens, width = tower.positional_embedding.shape
    patches = tokens - 1
    total = patches * width * 3 * c.kernel_size[0] * c.kernel_size[1]
    for _ in tower.transformer.resblocks:
        total += tokens * width * 3 * width + 2 * tokens * tokens * width + tokens * width * width
        total += 2 * tokens * width * 4 * width
    total += width * tower.proj.shape[1]
    return total * batch


def time_tower(tower, batch, dtype, runs=20):
    from gpu import cuda_median_ms

    x = torch.rand(batch, 3, 224, 224, device="cuda", dtype=dtype)
    return cuda_median_ms(lambda: tower(x), runs, warmup=3)


def time_tower_from_pixels(tower, batch, runs=20):
    """The tower in fp16 from 8-bit RGB photos in pinned host memory, as Lookout receives them: each batch copied
    over, normalised (OpenAI's mean and deviation) and rounded to fp16 on the GPU."""
    from gpu import cuda_median_ms

    pixels = torch.randint(0, 256, (batch, 224, 224, 3), dtype=torch.uint8).pin_memory()
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711], device="cuda").view(1, 3, 1, 1)

    def step():
        x = pixels.to("cuda", non_blocking=True).permute(0, 3, 1, 2).float().div_(255).sub_(mean).div_(std)
        return tower(x.half())

    return cuda_median_ms(step, runs, warmup=3)


def check():
    """The tower against the clip package's VisionTransformer with the same weights (CPU, fp32)."""
    sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
    import reference_env  # noqa: F401  (clip imports torchvision, whose compiled ops a CPU torch cannot load)
    from clip.model import VisionTransformer

    torch.manual_seed(0)
    tower = VisionTower().eval()
    reference = VisionTransformer(input_resolution=224, patch_size=32, width=768, layers=12, heads=12,
                                  output_dim=512).eval()
    missing = reference.load_state_dict(tower.state_dict(), strict=True)
    x = torch.rand(3, 3, 224, 224)
    with torch.no_grad():
        want, got = reference(x), tower(x)
    difference = (want - got).abs().max().item()
    print(f"VisionTower against clip.model.VisionTransformer: largest difference {difference:.3g} "
          f"(of values up to {want.abs().max().item():.3g}); {missing}")
    return difference <= 1e-4 * want.abs().max().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        sys.exit(0 if check() else 1)
    from gpu import report, save_safetensors

    say, lines, card = report(args.out)
    torch.manual_seed(0)
    tower = VisionTower().eval()
    weights = "/tmp/clip-vit-b-32-random.safetensors"
    save_safetensors({"visual." + k: v for k, v in tower.state_dict().items()}, weights)
    macs = multiply_adds(tower)
    say(f"ViT-B/32 image tower at 224: {macs / 1e9:.2f} G multiply-adds a photo ({2 * macs / 1e9:.1f} GFLOP)")

    bundle = os.path.join(ROOT, ".build-device", "bundle")
    lookout = {}
    # Fused 16-bit sublayers (the default), then each sublayer's operations one after another, in the same run.
    for label, extra in [("", {}), (", sublayers unfused", {"LOOKOUT_CUDA_SUBLAYERS": "0"})]:
        environment = dict(os.environ, LD_LIBRARY_PATH=os.path.join(bundle, "lib"), **extra)
        result = subprocess.run([os.path.join(bundle, "lookout-gpu-check"), "--tower", weights, str(args.batch)],
                                cwd=ROOT, env=environment, capture_output=True, text=True)
        say(f"lookout-gpu-check --tower{label}:")
        for line in (result.stdout + result.stderr).splitlines():
            say("  " + line)
            parts = line.split()
            if len(parts) >= 7 and parts[0] == "tower" and parts[2] == "batch":
                if not label or parts[1] != "fp32":
                    lookout[parts[1] + label] = (float(parts[4]), float(parts[-2]))
        say(f"  lookout-gpu-check exit status {result.returncode}")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peers = {}
    cuda = tower.cuda()
    peers["eager fp32"] = time_tower(cuda, args.batch, torch.float32)
    half = VisionTower().eval()
    half.load_state_dict(tower.state_dict())
    half = half.cuda().half()
    peers["eager fp16"] = time_tower(half, args.batch, torch.float16)
    peers["eager fp16 from 8-bit pixels"] = time_tower_from_pixels(half, args.batch)
    if not args.skip_compile:
        start = time.perf_counter()
        peers["torch.compile fp16"] = time_tower(torch.compile(half, mode="reduce-overhead"), args.batch,
                                                 torch.float16)
        say(f"torch.compile fp16 batch {args.batch}: compiled and timed in {time.perf_counter() - start:.0f} s")

    rate = next((v for k, v in RATES.items() if k in card), None)
    say("")
    say(f"| {card}, ViT-B/32 batch {args.batch} | ms a batch | images/s | share of the nominal dense rate |")
    say("|---|---|---|---|")

    def row(name, ms, kind):
        share = ""
        if rate:
            share = f"{2 * macs * args.batch / (ms / 1000) / 1e12 / rate[kind] * 100:.1f} % of {rate[kind]:.0f} TFLOP/s"
        say(f"| {name} | {ms:.2f} | {args.batch / ms * 1000:.0f} | {share} |")

    for name, ms in peers.items():
        where = "8-bit photos on the host (pinned)" if "pixels" in name else "photos on the GPU"
        row(f"PyTorch {name.replace(' from 8-bit pixels', '')}, {where} to embeddings", ms,
            "fp32" if "fp32" in name else "fp16")
    for arithmetic, (pixels, floats) in lookout.items():
        kind = "fp32" if arithmetic.startswith("fp32") else "fp16"
        row(f"Lookout {arithmetic}, 8-bit photos on the host to normalised embeddings", pixels, kind)
        row(f"Lookout {arithmetic}, preprocessed floats on the host to normalised embeddings", floats, kind)
    with open(os.path.join(args.out, "towers.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
