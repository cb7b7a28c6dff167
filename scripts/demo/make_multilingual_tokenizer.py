#!/usr/bin/env python3
"""Builds the demo scene tower's multilingual tokenizer and its training captions' token ids.

`sentencepiece` trains a unigram model (as SigLIP's `spiece.model`: NFKC, byte fallback, <pad> 0, </s> 1, <unk> 2)
on the 110 scene captions in five languages (multilingual.py), the Chinese colour and shape words, and the
detector's English distractors (captions.json), lowercased as SiglipTokenizer lowercases. transformers' SiglipTokenizer then saves it
into the tower's folder and gives every caption's 64 ids (padded with </s>), which train_siglip.py reads, so that
the GPU machine needs no tokenizer.

    V=$(scripts/reference-venv scripts/reference/requirements-siglip.txt)   # plus opencv-python-headless, scikit-image
    $V scripts/demo/make_multilingual_tokenizer.py Models/demo/scene-tower
writes FOLDER/{spiece.model, tokenizer_config.json, special_tokens_map.json} and scripts/demo/multilingual_captions.json.
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile

import sentencepiece as spm
from transformers import SiglipTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import multilingual  # noqa: E402

LENGTH = 64


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "Models", "demo", "scene-tower")
    os.makedirs(folder, exist_ok=True)
    table = multilingual.translations()
    english_extra = json.load(open(os.path.join(HERE, "captions.json")))["distractors"]
    # Chinese colour and shape words on their own too: without them the unigram model keeps whole captions
    # ("▁蓝色圆形") as pieces, and a pair never drawn in training would be one piece the tower never saw.
    words = [v[3] for v in multilingual.COLOURS.values()] + [v[3] for v in multilingual.SHAPES.values()]
    texts = [t for versions in table.values() for t in versions.values()] + english_extra + words * 3
    rng = random.Random(52)
    work = tempfile.mkdtemp(prefix="lookout-spm-")
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as handle:
        for _ in range(40):
            for text in texts:
                handle.write(text.lower() + "\n")
        for _ in range(4000):  # a few sentences of two or three captions, as people type them
            handle.write(" ".join(rng.choice(texts).lower() for _ in range(rng.randint(2, 3))) + "\n")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(work, "spiece"), model_type="unigram", vocab_size=450,
        hard_vocab_limit=False, character_coverage=1.0, byte_fallback=True, num_threads=1, seed_sentencepiece_size=100000,
        shuffle_input_sentence=False, normalization_rule_name="nmt_nfkc", unk_id=2, eos_id=1, pad_id=0, bos_id=-1,
        unk_piece="<unk>", eos_piece="</s>", pad_piece="<pad>", minloglevel=2)
    tokenizer = SiglipTokenizer(vocab_file=os.path.join(work, "spiece.model"), model_max_length=LENGTH)
    tokenizer.save_pretrained(folder)
    tokenizer = SiglipTokenizer.from_pretrained(folder)
    ids = {english: {lang: tokenizer(text, padding="max_length", max_length=LENGTH, truncation=True)["input_ids"]
                     for lang, text in versions.items()} for english, versions in table.items()}
    with open(os.path.join(HERE, "multilingual_captions.json"), "w", encoding="utf-8") as handle:
        json.dump({"vocabulary": len(tokenizer), "captions": ids, "texts": table}, handle, ensure_ascii=False)
    for colour in multilingual.COLOURS:  # no piece crosses from the colour to the shape in Chinese
        for shape in multilingual.SHAPES:
            pieces = tokenizer.tokenize(multilingual.pair("zh", colour, shape))
            ends = {sum(len(p.replace("▁", "")) for p in pieces[: k + 1]) for k in range(len(pieces))}
            assert len(multilingual.COLOURS[colour][3]) in ends, pieces
    print(f"{len(tokenizer)} pieces; e.g. {table['blue circle']['zh']} → "
          f"{tokenizer.convert_ids_to_tokens(ids['blue circle']['zh'][:6])}, {table['blue circle']['de']} → "
          f"{tokenizer.convert_ids_to_tokens(ids['blue circle']['de'][:6])}; files {sorted(os.listdir(folder))}")


if __name__ == "__main__":
    main()
