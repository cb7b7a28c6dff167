#!/usr/bin/env python3
"""Reference text embeddings: OpenAI CLIP `encode_text` on the CPU, then ultralytics' `x / x.norm()`.

The model is loaded the way ultralytics loads it: `clip.load(path, device="cpu", jit=False)`, which
builds the model from the archive's state dict, rounds Linear/attention weights and projections to fp16
(`convert_weights`) and runs in fp32 (`model.float()`).

    python scripts/reference/make_text_encoder_fixtures.py
        -> Tests/Fixtures/text/clip-tiny-expected.safetensors (embeddings, F32) and clip-tiny-prompts.json for
           Tests/Fixtures/weights/clip-tiny-openai.pt and clip-tiny-hf.safetensors (the HF file's tensors
           loaded into the same OpenAI computation)
    python scripts/reference/make_text_encoder_fixtures.py --full DIR
        -> DIR/ViT-B-32-random.pt, a full-size random ViT-B/32 in the official format, and DIR/expected.json

Prompts: 240 strings from the tokenizer corpus (COCO names, other class names, composed prompts, edge
cases and strings longer than 77 tokens), chosen deterministically.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import clip  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def prompts() -> list[str]:
    records = [json.loads(line) for line in open(os.path.join(
        ROOT, "Tests", "LookoutTokenizerTests", "Fixtures", "clip_tokenizer_golden.jsonl"), encoding="utf-8")]
    rng = random.Random(4)
    coco = [r["text"] for r in records if r["category"] == "coco"]
    long = [r["text"] for r in records if r["ids"][76] == 49407]
    others = [r["text"] for r in records if r["category"] not in ("coco",) and r["ids"][76] != 49407]
    chosen = coco + long + rng.sample(others, 240 - len(coco) - len(long))
    assert len(chosen) == 240 and len(long) >= 5
    return chosen


def encode(model, texts: list[str]) -> list[list[float]]:
    with torch.no_grad():
        tokens = clip.tokenize(texts, truncate=True)
        features = model.encode_text(tokens)
        features = features / features.norm(p=2, dim=-1, keepdim=True)
    return features.tolist()


def float64_error(model, texts: list[str], embeddings: list[list[float]]) -> float:
    """The reference's own float32 error: the largest difference from the same model run in float64
    (clip.model.LayerNorm computes in float32 whatever its input; here it computes in float64)."""
    import copy

    exact = copy.deepcopy(model).double()
    for module in exact.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.forward = lambda x, m=module: torch.nn.LayerNorm.forward(m, x)
    with torch.no_grad():
        features = exact.encode_text(clip.tokenize(texts, truncate=True))
        features = features / features.norm(p=2, dim=-1, keepdim=True)
    return float((torch.tensor(embeddings, dtype=torch.float64) - features).abs().max())


def load_reference(path: str):
    model, _ = clip.load(path, device="cpu", jit=False)
    return model.eval()


def hf_into_openai(model, path: str) -> None:
    """Loads Hugging Face-named text weights into an OpenAI CLIP model (the inverse of the usual mapping)."""
    from safetensors.torch import load_file

    hf = {k: v.float() for k, v in load_file(path).items()}
    state = model.state_dict()
    width = state["ln_final.weight"].shape[0]
    mapped = {
        "token_embedding.weight": hf["text_model.embeddings.token_embedding.weight"],
        "positional_embedding": hf["text_model.embeddings.position_embedding.weight"],
        "ln_final.weight": hf["text_model.final_layer_norm.weight"],
        "ln_final.bias": hf["text_model.final_layer_norm.bias"],
        "text_projection": hf["text_projection.weight"].t(),
    }
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("transformer.resblocks."))
    for i in range(layers):
        p, q = f"transformer.resblocks.{i}.", f"text_model.encoder.layers.{i}."
        mapped[p + "attn.in_proj_weight"] = torch.cat([hf[q + f"self_attn.{n}.weight"] for n in ("q_proj", "k_proj", "v_proj")])
        mapped[p + "attn.in_proj_bias"] = torch.cat([hf[q + f"self_attn.{n}.bias"] for n in ("q_proj", "k_proj", "v_proj")])
        for ours, theirs in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"), ("ln_2", "layer_norm2"),
                             ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            mapped[p + ours + ".weight"] = hf[q + theirs + ".weight"]
            mapped[p + ours + ".bias"] = hf[q + theirs + ".bias"]
    assert all(v.shape == state[k].shape for k, v in mapped.items()) and width
    with torch.no_grad():
        for key, value in mapped.items():
            state[key].copy_(value)


def tiny() -> None:
    texts = prompts()
    weights = os.path.join(ROOT, "Tests", "Fixtures", "weights")
    model = load_reference(os.path.join(weights, "clip-tiny-openai.pt"))
    openai = encode(model, texts)
    error = float64_error(model, texts, openai)
    hf_into_openai(model, os.path.join(weights, "clip-tiny-hf.safetensors"))
    hf = encode(model, texts)
    error = max(error, float64_error(model, texts, hf))
    from safetensors.torch import save_file

    out = os.path.join(ROOT, "Tests", "Fixtures", "text")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "clip-tiny-prompts.json"), "w", encoding="utf-8") as handle:
        json.dump(texts, handle, ensure_ascii=True, indent=0)
    save_file({"clip-tiny-openai.pt": torch.tensor(openai), "clip-tiny-hf.safetensors": torch.tensor(hf)},
              os.path.join(out, "clip-tiny-expected.safetensors"),
              metadata={"source": "clip.load(path, device='cpu', jit=False).encode_text, then x / x.norm()",
                        "torch": torch.__version__, "reference_error": f"{error:.3g}"})
    print(f"wrote {len(texts)} embeddings of size {len(openai[0])} for each layout; float32 error of the reference {error:.3g}")


def full(directory: str) -> None:
    from clip.model import CLIP, convert_weights

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "ViT-B-32-random.pt")
    if not os.path.exists(path):
        torch.manual_seed(5)
        model = CLIP(embed_dim=512, image_resolution=224, vision_layers=12, vision_width=768, vision_patch_size=32,
                     context_length=77, vocab_size=49408, transformer_width=512, transformer_heads=8,
                     transformer_layers=12).eval()
        reference_env.realistic_random_clip_(model)
        convert_weights(model)
        image = torch.randn(1, 3, 224, 224).half()
        text = clip.tokenize(["a dog"])
        traced = torch.jit.trace_module(
            model, {"forward": (image, text), "encode_text": (text,), "encode_image": (image,)}, check_trace=False)
        traced.save(path)
    texts = prompts()
    model = load_reference(path)
    embeddings = encode(model, texts)
    error = float64_error(model, texts, embeddings)
    with open(os.path.join(directory, "expected.json"), "w", encoding="utf-8") as handle:
        json.dump({"prompts": texts, "ViT-B-32-random.pt": embeddings, "torch": torch.__version__,
                   "reference_error": error}, handle)
    print(f"wrote {path} ({os.path.getsize(path):,} bytes) and {len(texts)} reference embeddings")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", metavar="DIR")
    args = parser.parse_args()
    full(args.full) if args.full else tiny()
