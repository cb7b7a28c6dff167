#!/usr/bin/env python3
"""Generate Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_mojibake_stress.jsonl.

A stress corpus for ftfy's mojibake repair (`fix_encoding`), which the reference tokenizer applies
through `ftfy.fix_text`: random runs of the characters ftfy's badness heuristic looks at; real words
encoded as UTF-8 and decoded in each of ftfy's single-byte encodings (once and twice, with 0xA0 turned
to spaces, with bytes lost to U+FFFD or `?`); mojibake embedded in clean text; unassigned code points
among Greek and emoji; and the strings a user reported. Each record holds the text and the ids of
OpenAI CLIP's `clip.tokenize(text, truncate=True)`, cut after the end token.

Run inside the pinned text reference environment (scripts/reference-venv requirements-text.txt):

    python scripts/reference/make_mojibake_corpus.py
"""
from __future__ import annotations

import json
import os
import random
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(__file__))
import reference_env  # noqa: E402,F401

import clip  # noqa: E402
import ftfy  # noqa: E402
import ftfy.bad_codecs  # noqa: E402,F401
import ftfy.badness  # noqa: E402
import ftfy.chardata  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "../../Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_mojibake_stress.jsonl")
COUNT = 3000

WORDS = ["café", "naïve", "Zürich", "crème brûlée", "São Paulo", "“smart”", "it’s", "—", "…", "€100", "日本語", "😀",
         "ñandú", "Ærøskøbing", "Łódź", "déjà vu", "señor", "Straße", "½ cup", "©2024", "Ελληνικά", "Москва", "İstanbul",
         "à la", "über", "ça va", "Ğ", "ŠKODA", "čeština", "ß", "naïveté", "✓ done", "👍🏽", "™", "Ω", "½", "€"]
ENCODINGS = ftfy.chardata.CHARMAP_ENCODINGS + ["windows-1252", "cp1251", "cp1250"]
REPORTED = ["cafÃ©", "Ã©mojibake Ã¨", "â€œquotedâ€\x9d", "Î±\u0379Î²ðŸ˜€\u0382 γ", "\u0379😀α\u0382β"]


def mojibake(rng: random.Random, text: str) -> str:
    for _ in range(10):
        try:
            out = text.encode("utf-8").decode(rng.choice(ENCODINGS))
        except UnicodeDecodeError:
            continue
        damage = rng.random()
        if damage < 0.15:
            out = out.replace("\xa0", " ")
        elif damage < 0.25:
            out = "".join("\ufffd" if rng.random() < 0.1 and ord(c) > 127 else c for c in out)
        elif damage < 0.3:
            out = "".join("?" if rng.random() < 0.15 and ord(c) > 127 else c for c in out)
        return out
    return text


def samples(rng: random.Random) -> list[tuple[str, str]]:
    categories = list(ftfy.badness.MOJIBAKE_CATEGORIES.values())
    alphabet = sorted(set("".join(categories)) | set("abcXYZ .,?!°µ×àâ√≈‚вЂГўВЂВΒΓΞΟā€β™Ά") - {"-"})
    unassigned = [c for c in range(0x370, 0x3FF) if unicodedata.category(chr(c)) == "Cn"]
    out = [("reported", text) for text in REPORTED]
    while len(out) < COUNT:
        kind = rng.random()
        if kind < 0.3:
            out.append(("heuristic-alphabet", "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))))
        elif kind < 0.55:
            out.append(("mojibake", mojibake(rng, " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))))))
        elif kind < 0.65:
            out.append(("mojibake-double", mojibake(rng, mojibake(rng, rng.choice(WORDS)))))
        elif kind < 0.8:
            text = rng.choice(WORDS) + " " + mojibake(rng, rng.choice(WORDS)) + " " + rng.choice(WORDS)
            out.append(("mojibake-embedded", text))
        elif kind < 0.9:
            pieces = [lambda: chr(rng.choice(unassigned)), lambda: chr(rng.randint(0x370, 0x3FF)), lambda: "😀",
                      lambda: " ", lambda: chr(rng.randint(0x1F300, 0x1F6FF))]
            out.append(("unassigned", "".join(rng.choice(pieces)() for _ in range(rng.randint(1, 8)))))
        else:
            text = "".join(rng.choice(rng.choice(categories)) if rng.random() < 0.7 else rng.choice("aZ ")
                           for _ in range(rng.randint(2, 5)))
            out.append(("heuristic-categories", text))
    return out


def main() -> None:
    rng = random.Random(20261123)
    repaired = 0
    with open(OUT, "w", encoding="utf-8") as handle:
        for category, text in samples(rng):
            ids = [int(v) for v in clip.tokenize([text], truncate=True)[0].tolist()]
            ids = ids[: ids.index(49407) + 1]
            repaired += ftfy.fix_encoding(text) != text
            handle.write(json.dumps({"category": category, "text": text, "ids": ids}, ensure_ascii=True) + "\n")
    print(f"{COUNT} strings, {repaired} changed by ftfy's fix_encoding")


if __name__ == "__main__":
    main()
