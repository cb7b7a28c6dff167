#!/usr/bin/env python3
"""Write Vocab/clip_vocab.json from CLIP's `bpe_simple_vocab_16e6.txt.gz`.

The layout is the one the iOS YOLO-World demo app reads:

    {"encoder": {token: id}, "merges": ["a b", ...], "bos_token": ..., "eos_token": ...,
     "context_length": 77, "source": {...}}

The vocabulary is built exactly as `clip/simple_tokenizer.py` builds it: the 256
byte symbols in `bytes_to_unicode` order, the same with `</w>`, one entry per merge (items 1...48894 of
the file), then `<|startoftext|>` and `<|endoftext|>`. When the reference package is importable, the
result is checked against `SimpleTokenizer().encoder` and `.bpe_ranks`.

Usage:
    python scripts/reference/make_vocab.py [path/to/bpe_simple_vocab_16e6.txt.gz] [-o Vocab/clip_vocab.json]

Without a path, the file shipped in the installed `clip` (openai-clip) or `open_clip` package is used.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import os
import sys

EXPECTED_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"
MERGE_COUNT = 49152 - 256 - 2  # 48,894


def bytes_to_unicode() -> list[tuple[int, str]]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    pairs = [(b, chr(b)) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            pairs.append((b, chr(256 + extra)))
            extra += 1
    return pairs


def find_default() -> str:
    for module in ("clip", "open_clip"):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        path = os.path.join(os.path.dirname(spec.origin), "bpe_simple_vocab_16e6.txt.gz")
        if os.path.exists(path):
            return path
    sys.exit("bpe_simple_vocab_16e6.txt.gz not found: pip install openai-clip (or open_clip_torch), or pass its path")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="?")
    parser.add_argument("-o", "--output", default="Vocab/clip_vocab.json")
    args = parser.parse_args()
    source = args.source or find_default()

    raw = open(source, "rb").read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != EXPECTED_SHA256:
        sys.exit(f"{source}: sha256 {digest} is not CLIP's {EXPECTED_SHA256}")
    lines = gzip.decompress(raw).decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1 : MERGE_COUNT + 1]]
    assert len(merges) == MERGE_COUNT and all(len(m) == 2 for m in merges)

    symbols = [ch for _, ch in bytes_to_unicode()]
    vocab = symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    encoder = {token: index for index, token in enumerate(vocab)}
    assert len(encoder) == len(vocab) == 49408, "duplicate vocabulary entries"

    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import reference_env  # noqa: F401

        from clip.simple_tokenizer import SimpleTokenizer

        reference = SimpleTokenizer(source)
        assert reference.encoder == encoder, "encoder differs from clip.simple_tokenizer"
        assert reference.bpe_ranks == {m: i for i, m in enumerate(merges)}, "merge ranks differ"
        checked = "clip.simple_tokenizer.SimpleTokenizer"
    except ImportError:
        checked = None

    document = {
        "encoder": encoder,
        "merges": [" ".join(m) for m in merges],
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "context_length": 77,
        "source": {"file": "bpe_simple_vocab_16e6.txt.gz", "sha256": digest, "checked_against": checked},
    }
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False, separators=(",", ":"))
        handle.write("\n")
    print(f"wrote {args.output}: {len(encoder)} tokens, {len(merges)} merges (source sha256 {digest})")


if __name__ == "__main__":
    main()
