#!/usr/bin/env python3
"""Weight files in the real formats, made by the reference code with random weights.

Writes into Tests/Fixtures/weights/:

  yolov8n-worldv2-random.pt   ultralytics `YOLOWorld("yolov8n-worldv2.yaml")` with unit-norm random text features
                              (as a released file's CLIP features are), BatchNorm statistics calibrated
                              on real photos (examples/photos: scikit-image's public-domain and CC0 photos, letterboxed, flipped and
                              cropped, run in train mode), contrastive-head bias −3.5 and logit scale 1 (so that
                              scores spread), saved by `YOLOWorld.save` (fp16, as released)
  clip-tiny-openai.pt         OpenAI CLIP architecture (width 64, 2 text layers, 512-d embeddings, the real
                              49,408-token vocabulary),
                              random weights converted like the official file (`convert_weights`: fp16
                              Linear/Conv/MHA weights and projections, fp32 embeddings and norms), saved as a
                              TorchScript archive (`torch.jit.trace_module(...).save`)
  clip-tiny-hf.safetensors    the same text weights under Hugging Face names (q/k/v split, transposed
                              projection), F16
  dtypes.safetensors          small F32/F16/BF16/I64 tensors with metadata
  evil-reduce.pt              a torch-zip whose data.pkl REDUCEs `os.system` (must never run)
  weights_expected.json       for each file: every tensor's name, shape, stored dtype and the CRC-32 of its values
                              converted to little-endian F32 (I64 tensors: of their int64 bytes), plus metadata

Deterministic: fixed seeds. Run in the pinned environment (scripts/reference/requirements.txt).
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "Tests", "Fixtures", "weights")


def crc_f32(tensor: torch.Tensor) -> int:
    if tensor.dtype in (torch.int64, torch.int32):
        data = tensor.detach().to(torch.int64).contiguous().numpy().astype("<i8").tobytes()
    else:
        data = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
    return zlib.crc32(data)


def describe(tensors: dict[str, torch.Tensor]) -> dict:
    return {
        name: {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "crc32_f32": crc_f32(t)}
        for name, t in tensors.items()
    }


def letterboxed_photos() -> torch.Tensor:
    import cv2
    from ultralytics.data.augment import LetterBox

    photos = os.path.join(ROOT, "examples", "photos")
    images = []
    for name in ("astronaut.jpg", "coffee.jpg", "chelsea.jpg", "rocket.jpg"):
        image = cv2.imread(os.path.join(photos, name))
        h, w = image.shape[:2]
        variants = [image, image[:, ::-1], image[: h // 2], image[h // 3 :, w // 4 :], image[:, : w // 2]]
        for variant in variants:
            boxed = LetterBox((320, 320), auto=False)(image=np.ascontiguousarray(variant))
            images.append(torch.from_numpy(boxed[:, :, ::-1].copy()).permute(2, 0, 1).float() / 255)
    return torch.stack(images)


def calibrate_batchnorm(net) -> None:
    """Calibrates an ultralytics network's BatchNorm on real photos: cumulative averages over a few passes in
    train mode (so that a random network's outputs depend on the image), then ultralytics' momentum again."""
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None
    photos = letterboxed_photos()
    net.train()
    with torch.no_grad():
        for start in range(0, len(photos), 5):
            net(photos[start : start + 5])
    net.eval()
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = 0.03


def make_yolo(expected: dict | None, scale: str = "n", out: str = OUT) -> str:
    """A random yolov8{scale}-worldv2 with calibrated BatchNorm, saved by YOLOWorld.save into `out`."""
    from ultralytics import YOLOWorld

    torch.manual_seed(1)
    model = YOLOWorld(f"yolov8{scale}-worldv2.yaml")
    net = model.model
    # A YAML-built model holds torch.randn text features; a released checkpoint holds CLIP features, which
    # are L2-normalised (set_classes stores encode_text / norm). Keep the random directions, at unit norm.
    net.txt_feats = torch.nn.functional.normalize(net.txt_feats, dim=-1)
    calibrate_batchnorm(net)
    # The released head starts from bias −10 and logit scale e^−1, which with random weights puts every
    # score near 5e-5: nothing to detect and nothing to compare. Bias −3.5 and scale 1 give scores that
    # cross the usual thresholds on a small share of anchors.
    with torch.no_grad():
        for head in net.model[-1].cv4:
            head.bias.fill_(-3.5)
            head.logit_scale.fill_(0.0)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"yolov8{scale}-worldv2-random.pt")
    model.save(path)
    if expected is None:
        return path

    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    saved = checkpoint.get("ema") or checkpoint["model"]
    head = saved.model[-1]
    expected["yolov8n-worldv2-random.pt"] = {
        "keys": sorted(k for k in checkpoint.keys()),
        "tensors": describe(saved.state_dict()),
        "txt_feats": {"shape": list(saved.txt_feats.shape), "dtype": str(saved.txt_feats.dtype).replace("torch.", ""),
                      "crc32_f32": crc_f32(saved.txt_feats)},
        "names": {str(k): v for k, v in saved.names.items()},
        "stride": [float(s) for s in head.stride.tolist()],
        "nc": int(head.nc),
        "bn_eps": sorted({float(m.eps) for m in saved.modules() if isinstance(m, torch.nn.BatchNorm2d)}),
        "scale": "n",
    }
    return path


def tiny_clip():
    import clip
    from clip.model import CLIP, convert_weights

    torch.manual_seed(2)
    # embed_dim 512, as ViT-B/32's: the text features then fit the YOLO-World fixture's 512-d neck and head.
    model = CLIP(embed_dim=512, image_resolution=32, vision_layers=1, vision_width=64, vision_patch_size=16,
                 context_length=77, vocab_size=49408, transformer_width=64, transformer_heads=1,
                 transformer_layers=2).eval()
    reference_env.realistic_random_clip_(model)
    convert_weights(model)
    return model, clip


def make_clip(expected: dict) -> None:
    model, clip = tiny_clip()
    image = torch.randn(1, 3, 32, 32).half()
    text = clip.tokenize(["a dog"])
    traced = torch.jit.trace_module(
        model, {"forward": (image, text), "encode_text": (text,), "encode_image": (image,)}, check_trace=False)
    path = os.path.join(OUT, "clip-tiny-openai.pt")
    traced.save(path)
    loaded = torch.jit.load(path, map_location="cpu")
    state = {k: v for k, v in loaded.state_dict().items()}
    expected["clip-tiny-openai.pt"] = {"tensors": describe(state)}

    # Hugging Face layout of the text side (transformers' convert_clip_original_pytorch_to_hf naming).
    from safetensors.torch import save_file

    hf: dict[str, torch.Tensor] = {
        "text_model.embeddings.token_embedding.weight": state["token_embedding.weight"],
        "text_model.embeddings.position_embedding.weight": state["positional_embedding"],
        "text_model.final_layer_norm.weight": state["ln_final.weight"],
        "text_model.final_layer_norm.bias": state["ln_final.bias"],
        "text_projection.weight": state["text_projection"].t().contiguous(),
        "logit_scale": state["logit_scale"],
    }
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("transformer.resblocks."))
    width = state["ln_final.weight"].shape[0]
    for i in range(layers):
        p = f"transformer.resblocks.{i}."
        q = f"text_model.encoder.layers.{i}."
        w, b = state[p + "attn.in_proj_weight"], state[p + "attn.in_proj_bias"]
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            hf[q + f"self_attn.{name}.weight"] = w[j * width : (j + 1) * width].contiguous()
            hf[q + f"self_attn.{name}.bias"] = b[j * width : (j + 1) * width].contiguous()
        hf[q + "self_attn.out_proj.weight"] = state[p + "attn.out_proj.weight"]
        hf[q + "self_attn.out_proj.bias"] = state[p + "attn.out_proj.bias"]
        for ours, theirs in (("ln_1", "layer_norm1"), ("ln_2", "layer_norm2")):
            hf[q + f"{theirs}.weight"] = state[p + f"{ours}.weight"]
            hf[q + f"{theirs}.bias"] = state[p + f"{ours}.bias"]
        hf[q + "mlp.fc1.weight"] = state[p + "mlp.c_fc.weight"]
        hf[q + "mlp.fc1.bias"] = state[p + "mlp.c_fc.bias"]
        hf[q + "mlp.fc2.weight"] = state[p + "mlp.c_proj.weight"]
        hf[q + "mlp.fc2.bias"] = state[p + "mlp.c_proj.bias"]
    hf = {k: v.to(torch.float16).contiguous() for k, v in hf.items()}
    save_file(hf, os.path.join(OUT, "clip-tiny-hf.safetensors"), metadata={"format": "pt"})
    expected["clip-tiny-hf.safetensors"] = {"tensors": describe(hf)}


def make_dtypes(expected: dict) -> None:
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(3)
    tensors = {
        "f32": torch.randn(3, 5, generator=g),
        "f16": (torch.randn(7, generator=g) * 100).to(torch.float16),
        "bf16": torch.randn(2, 2, 3, generator=g).to(torch.bfloat16),
        "i64": torch.arange(-3, 9, dtype=torch.int64).reshape(3, 4),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
    }
    special = torch.tensor([float("inf"), float("-inf"), 0.0, -0.0, 65504.0, 6e-8], dtype=torch.float16)
    tensors["f16_special"] = special
    save_file(tensors, os.path.join(OUT, "dtypes.safetensors"), metadata={"purpose": "dtype coverage"})
    expected["dtypes.safetensors"] = {"tensors": describe(tensors), "metadata": {"purpose": "dtype coverage"}}


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/lookout-pickle-executed",))


def make_evil() -> None:
    payload = pickle.dumps({"model": _Evil()}, protocol=2)
    with zipfile.ZipFile(os.path.join(OUT, "evil-reduce.pt"), "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("evil-reduce/data.pkl", payload)
        archive.writestr("evil-reduce/version", "3\n")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    expected: dict = {}
    make_yolo(expected)
    make_clip(expected)
    make_dtypes(expected)
    make_evil()
    with open(os.path.join(OUT, "weights_expected.json"), "w") as handle:
        json.dump(expected, handle, indent=1, sort_keys=True)
    for name in sorted(os.listdir(OUT)):
        print(f"{name}: {os.path.getsize(os.path.join(OUT, name)):,} bytes")


if __name__ == "__main__":
    main()
