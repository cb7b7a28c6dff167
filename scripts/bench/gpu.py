#!/usr/bin/env python3
"""The GPU benchmark (issue 51), run on the GPU machine with its PyTorch: YOLO-World v2 s with the same random
weights in Lookout (the CUDA backend, fp32) and in PyTorch (scripts/bench/world_torch.py, the network checked
against ultralytics by check_world_torch.py), at 640 with 3 queries, in one run on one card.

    scripts/device/bundle                       # here: the bundle with lookout-gpu-check
    python3 scripts/bench/gpu.py OUT [--scale s] [--skip-compile]   # there, from the repository's root

- PyTorch eager fp32 (TF32 off, the arithmetic Lookout's fp32 keeps), eager fp16, and `torch.compile`
  (inductor, mode="reduce-overhead": CUDA graphs) fp16: the network only (letterboxed pixels on the GPU in,
  (B, 4 + K, anchors) out), BatchNorm folded, batch 1 (latency, median of 50) and batch 32 (throughput).
- Lookout: `lookout-gpu-check --bench` on examples/photos/astronaut.jpg: the full detection from decoded pixels
  (letterbox, network, NMS, boxes in the photo's pixels) in fp32, fp16 and bf16, a re-query of kept features,
  32 photos one after another, 64 on 4 and 8 threads sharing the GPU, and batches of 8, 32 and 64 photos
  (whole detections, each photo's raw output against the one made alone); its GPU detections against its CPU's.
- The physical floor: the network's multiply-adds counted by hooks, against the card's nominal dense rates.

Writes OUT/gpu-bench.txt (and prints it): the lines and a Markdown table for BENCHMARKS.md.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from world_torch import WorldNetwork, randomize_batchnorm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Nominal dense rates (TFLOP/s) of the cards the project is lent, from NVIDIA's data sheets (SXM).
RATES = {"H100": {"fp32": 67.0, "fp16": 989.0}, "H200": {"fp32": 67.0, "fp16": 989.0}}


def save_safetensors(tensors, path):
    """The safetensors format (an 8-byte header length, a JSON header, the raw little-endian data)."""
    kinds = {torch.float32: "F32", torch.int64: "I64", torch.float16: "F16"}
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().cpu().contiguous().numpy().tobytes()
        header[name] = {"dtype": kinds[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def photo():
    """The benchmark's photo (512×512) resized to 640×640 as a 1×3×640×640 tensor in [0, 1] (random pixels where
    Pillow is missing)."""
    try:
        from PIL import Image

        image = Image.open(os.path.join(ROOT, "examples", "photos", "astronaut.jpg")).convert("RGB").resize((640, 640))
        return torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8).view(640, 640, 3).permute(2, 0, 1)[
            None].float() / 255
    except ImportError:
        return torch.rand(1, 3, 640, 640)


def random_network(scale):
    torch.manual_seed(0)
    net = randomize_batchnorm(WorldNetwork(scale).eval())
    # The contrastive heads' bias set so that random queries score about 100 of the 3 × 8400 (anchor, query) pairs
    # above 0.25 on the benchmark's photo, as a trained model scores a few: NMS then takes what it takes in use.
    logits = []
    hooks = [head.register_forward_hook(lambda m, i, o: logits.append(o.flatten())) for head in net.model[22].cv4]
    for head in net.model[22].cv4:
        head.bias.data.fill_(0.0)
        head.logit_scale.data.fill_(2.3)
    with torch.no_grad():
        net(photo(), torch.nn.functional.normalize(torch.randn(1, 3, 512), dim=-1))
    for hook in hooks:
        hook.remove()
    values = torch.cat(logits).sort(descending=True).values
    for head in net.model[22].cv4:
        head.bias.data.fill_(-1.0986 - values[100].item())
    return net


def multiply_adds(net, x, text):
    total = 0

    def conv(module, inputs, output):
        nonlocal total
        total += output.numel() * module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]

    def linear(module, inputs, output):
        nonlocal total
        total += output.numel() * module.in_features

    hooks = [m.register_forward_hook(conv) for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    hooks += [m.register_forward_hook(linear) for m in net.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        net(x, text)
    for hook in hooks:
        hook.remove()
    return total


def time_network(net, batch, dtype, runs):
    x = torch.rand(batch, 3, 640, 640, device="cuda", dtype=dtype)
    text = torch.nn.functional.normalize(torch.randn(batch, 3, 512, device="cuda"), dim=-1).to(dtype)
    return cuda_median_ms(lambda: net(x, text), runs)


def cuda_median_ms(body, runs, warmup=5):
    """Median milliseconds of `body()` on the GPU, each run waited for, after `warmup` runs (no gradients)."""
    with torch.no_grad():
        for _ in range(warmup):
            body()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            body()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def report(out):
    """OUT made, and `say` (printed and kept in `lines`) with the run's first line said: the date, the card."""
    os.makedirs(out, exist_ok=True)
    lines = []

    def say(line):
        print(line, flush=True)
        lines.append(line)

    card = torch.cuda.get_device_name(0)
    say(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} on {card}, PyTorch {torch.__version__}, "
        f"{os.cpu_count()} CPUs")
    return say, lines, card


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--scale", default="s")
    parser.add_argument("--skip-compile", action="store_true")
    args = parser.parse_args()
    say, lines, card = report(args.out)
    net = random_network(args.scale)
    weights = f"/tmp/yolov8{args.scale}-worldv2-random.safetensors"
    save_safetensors(net.state_dict(), weights)
    macs = multiply_adds(net, torch.rand(1, 3, 640, 640), torch.nn.functional.normalize(torch.randn(1, 3, 512), dim=-1))
    say(f"yolov8{args.scale}-worldv2 at 640, 3 queries: {macs / 1e9:.2f} G multiply-adds ({2 * macs / 1e9:.1f} GFLOP)")

    # Lookout first (its own process), then PyTorch.
    bundle = os.path.join(ROOT, ".build-device", "bundle")
    environment = dict(os.environ, LD_LIBRARY_PATH=os.path.join(bundle, "lib"))
    # Each of the GPU's arithmetics: fp32, then fp16 and bf16 products on the tensor cores.
    lookout = {}
    for arithmetic in ("fp32", "fp16", "bf16"):
        result = subprocess.run([os.path.join(bundle, "lookout-gpu-check"), "--bench", weights,
                                 "examples/photos/astronaut.jpg", arithmetic], cwd=ROOT, env=environment,
                                capture_output=True, text=True)
        figures = lookout.setdefault(arithmetic, {})
        for line in (result.stdout + result.stderr).splitlines():
            say("  " + line)
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "bench":
                try:
                    figures[parts[1]] = float(parts[2])
                except ValueError:
                    pass

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    fused = net.fuse().cuda()
    peers = {}
    peers["eager fp32"] = {b: time_network(fused, b, torch.float32, 50 if b == 1 else 10) for b in (1, 32)}
    half = random_network(args.scale).fuse().cuda().half()
    peers["eager fp16"] = {b: time_network(half, b, torch.float16, 50 if b == 1 else 10) for b in (1, 32)}
    if not args.skip_compile:
        compiled = {}
        for b in (1, 32):
            start = time.perf_counter()
            model = torch.compile(half, mode="reduce-overhead")
            ms = time_network(model, b, torch.float16, 50 if b == 1 else 10)
            compiled[b] = ms
            say(f"torch.compile fp16 batch {b}: compiled and timed in {time.perf_counter() - start:.0f} s")
        peers["torch.compile fp16"] = compiled
    for name, times in peers.items():
        say(f"PyTorch {name}: batch 1 {times[1]:.3f} ms, batch 32 {times[32]:.2f} ms "
            f"({32000 / times[32]:.0f} images/s)")

    rate = next((v for k, v in RATES.items() if k in card), None)
    say("")
    say(f"| {card} | batch 1 (ms) | batch 32 (images/s) |")
    say("|---|---|---|")
    for name, times in peers.items():
        say(f"| PyTorch {name}, network only | {times[1]:.2f} | {32000 / times[32]:.0f} |")
    for arithmetic, figures in lookout.items():
        if not figures:
            continue
        say(f"| Lookout {arithmetic}, decoded pixels to boxes | {figures.get('gpu_ms', float('nan')):.2f} | "
            f"{figures.get('gpu_32_photos_per_s', float('nan')):.0f} one photo after another; "
            f"{figures.get('gpu_64_photos_4_threads_per_s', float('nan')):.0f} on 4 threads, "
            f"{figures.get('gpu_64_photos_8_threads_per_s', float('nan')):.0f} on 8; batches of 8 / 32 / 64: "
            f"{figures.get('gpu_batch_8_photos_per_s', float('nan')):.0f} / "
            f"{figures.get('gpu_batch_32_photos_per_s', float('nan')):.0f} / "
            f"{figures.get('gpu_batch_64_photos_per_s', float('nan')):.0f} |")
        say(f"| Lookout {arithmetic} re-query (kept features) | {figures.get('requery_ms', float('nan')):.2f} | |")
    if lookout.get("fp32"):
        say(f"| Lookout fp32 on this machine's CPU | {lookout['fp32'].get('cpu_ms', float('nan')):.2f} | |")
    if rate:
        flops = 2 * macs
        say(f"| floor: {flops / 1e9:.1f} GFLOP at {rate['fp32']:.0f} TFLOP/s fp32 / {rate['fp16']:.0f} fp16 "
            f"(nominal dense) | {flops / rate['fp32'] / 1e9:.3f} / {flops / rate['fp16'] / 1e9:.4f} | "
            f"{rate['fp32'] * 1e12 / flops:.0f} / {rate['fp16'] * 1e12 / flops:.0f} |")
    with open(os.path.join(args.out, "gpu-bench.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
