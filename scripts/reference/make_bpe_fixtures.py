"""A byte-fallback BPE tokenizer built here in the format of Gemma's `tokenizer.json` (SigLIP 2's tokenizer), and
the ids the reference gives (issue 52): the official files cannot be downloaded on these machines, so the
algorithm is proved on a model made as Gemma's was — Google's `sentencepiece` trains a BPE model with Gemma's
settings (byte fallback, digits split, no dummy prefix, no normalisation, <pad> <eos> <bos> <unk> as ids 0–3),
and `transformers`' GemmaTokenizer converts it to the `tokenizers` format (`tokenizer.json`: a `Replace(" ", "▁")`
normaliser, the BPE model with its merges and `<0xNN>` byte pieces, `<bos>` put first by the post-processor).

    V=$(scripts/reference-venv scripts/reference/requirements-siglip.txt)
    $V scripts/reference/make_bpe_fixtures.py Tests/Fixtures/bpe

Writes into the folder:
- `gemma-style/tokenizer.json`, `tokenizer_config.json`: the converted tokenizer (3,000 pieces);
- `cases.jsonl`: held-out strings in many scripts (those of make_sentencepiece_fixtures.py, not in the training
  corpus), each with `tokenizers`' `Tokenizer.encode(text).ids` (`<bos>` first) and GemmaTokenizer's
  `input_ids` as SigLIP's processor asks for them (`padding="max_length", max_length=64, truncation=True`).
"""
import json
import os
import random
import sys

import sentencepiece as spm
from tokenizers import Tokenizer
from tokenizers.models import BPE
from transformers.convert_slow_tokenizer import SentencePieceExtractor
from transformers import GemmaTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_sentencepiece_fixtures import WORDS, held_out, sentence  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "Tests/Fixtures/bpe"
    folder = os.path.join(out, "gemma-style")
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(53)
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for _ in range(30000):
            f.write(sentence(rng, list(WORDS)) + "\n")
    prefix = os.path.join(out, "bpe")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=3000, character_coverage=0.9995,
        num_threads=1, input_sentence_size=30000, shuffle_input_sentence=False, byte_fallback=True,
        split_digits=True, add_dummy_prefix=False, remove_extra_whitespaces=False, normalization_rule_name="identity",
        allow_whitespace_only_pieces=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>")
    os.remove(corpus)
    # What GemmaTokenizer.from_pretrained does with a tokenizer.model: the pieces in order as the vocabulary, the
    # merges generated from it (transformers' SentencePieceExtractor).
    extracted = SentencePieceExtractor(prefix + ".model").extract(BPE)
    converted = GemmaTokenizer(vocab=extracted["vocab"], merges=extracted["merges"])
    converted.save_pretrained(folder)
    for name in os.listdir(folder):
        if name not in ("tokenizer.json", "tokenizer_config.json"):
            os.remove(os.path.join(folder, name))
    os.remove(prefix + ".model")
    os.remove(prefix + ".vocab")
    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    gemma = GemmaTokenizer.from_pretrained(folder)
    cases = held_out(random.Random(5353)) + ["<bos>", "<eos> and <pad>", "a<unk>b", "1234567890", "  two  spaces"]
    with open(os.path.join(out, "cases.jsonl"), "w", encoding="utf-8") as f:
        for text in cases:
            record = {
                "text": text,
                "ids": tokenizer.encode(text).ids,
                "siglip2": gemma(text, padding="max_length", max_length=64, truncation=True)["input_ids"],
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases; {tokenizer.get_vocab_size()} pieces")


if __name__ == "__main__":
    main()
