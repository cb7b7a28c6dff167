#!/usr/bin/env python3
"""Golden token ids for Lookout's CLIP tokenizer, computed by the reference.

Reference: OpenAI CLIP `clip.tokenize(text, truncate=True)` (what ultralytics calls), from the pinned
environment in `scripts/reference/requirements.txt`. Output (JSON lines, one object per string):

    Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_golden.jsonl
        {"category": ..., "text": ..., "ids": [77 ints]}
    Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_mojibake.jsonl
        same, plus "ids_without_mojibake_repair": the reference's ids with ftfy's fix_encoding off
    Tests/LookoutTokenizerTests/Fixtures/clip_tokenizer_stages.jsonl
        per-stage reference outputs for the edge cases (ftfy without fix_encoding, full cleaning,
        pre-tokens, BPE symbols of each pre-token); the first line holds the byte map

A string lands in the mojibake file exactly when ftfy's mojibake repair (`fix_encoding`) changes what
the reference produces; every other string must be matched by Lookout 100%.

The corpus is deterministic (fixed seed) and covers the class-name lists that ultralytics ships, composed
prompts, and the edge cases listed in issue 2.
"""
from __future__ import annotations

import html
import json
import os
import random
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import clip  # noqa: E402
import clip.simple_tokenizer as simple_tokenizer  # noqa: E402
import ftfy  # noqa: E402
import ultralytics  # noqa: E402
import yaml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "Tests", "LookoutTokenizerTests", "Fixtures")


def class_names(dataset: str) -> list[str]:
    path = os.path.join(os.path.dirname(ultralytics.__file__), "cfg", "datasets", dataset)
    with open(path, encoding="utf-8") as handle:
        names = yaml.safe_load(handle)["names"]
    return list(names.values()) if isinstance(names, dict) else list(names)


def edge_cases(rng: random.Random) -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []

    def add(category: str, *texts: str) -> None:
        cases.extend((category, t) for t in texts)

    add("composed", "a photo of a red car", "dog, cat", "a photo of a cat", "red car", "the blue bicycle next to a tree",
        "person wearing a hat", "two dogs playing in the snow", "a close-up photo of a traffic light at night",
        "yellow school bus", "a man riding a horse on the beach", "Hello, World!", "don't STOP", "it's a dog's life")
    add("punctuation", "!!!", "...", "?!?!", "a,b;c:d", "(parenthesised)", "[bracketed]", "{braced}", "semi;colon",
        "slash/separated/words", "back\\slash", "under_score", "hyphen-ated", "em—dash", "en–dash", "#hashtag",
        "@mention", "50% off", "$100", "a+b=c", "x*y", "~tilde~", "`backtick`", "^caret^", "a|b", "<tag>", "<b>bold</b>",
        "a <b> &amp; c", "1.5", "3,000", "e-mail@example.com", "https://example.com/a?b=c&d=e", "'quoted'", '"double"',
        "''", '""', "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "O'Neil's", "rock 'n' roll")
    add("digits", "0", "7", "42", "2024", "2024 model-x", "123456789012345678901234567890", "v1.2.3", "1st 2nd 3rd 4th",
        "٣ arabic-indic three", "४२ devanagari digits", "①②③ circled", "½ half", "Ⅻ roman", "x²", "10⁶", "３ full-width digit")
    add("contractions", "don't", "can't", "won't", "shouldn't've", "we're", "they've", "I'm", "you'll", "he'd",
        "DON'T", "Can'T", "isn’t", "it‘s", "let's go", "y'all'd've", "'s's's")
    add("accents", "naïve café", "Crème Brûlée", "jalapeño", "São Paulo", "Zürich", "Ærøskøbing", "Łódź", "Škoda",
        "Dvořák", "Façade", "smörgåsbord", "piñata", "Ångström", "Ðð Þþ ß", "İstanbul", "ıstanbul", "Iı İi",
        "e\u0301", "n\u0303", "a\u0308\u0304", "\u0301alone", "Cafe\u0301", "A\u030a", "\u212b", "\u2126")
    add("cjk", "日本語", "東京タワー", "北京烤鸭", "서울 타워", "ひらがな", "カタカナ", "漢字かな交じり文", "中文，标点。", "「引用」",
        "한국어 문장입니다", "ｶﾀｶﾅ half-width", "ㄱㄴㄷ", "\u1100\u1161\u11a8 jamo")
    add("scripts", "مرحبا بالعالم", "قطة سوداء", "שלום עולם", "חתול", "नमस्ते दुनिया", "बिल्ली", "Привет мир", "кошка",
        "Γειά σου Κόσμε", "ΟΔΟΣ", "ΣΊΣΥΦΟΣ", "ΣΑΣ ΣΑΣ.", "Σ", "aΣ", "aΣb", "aΣ.", "ΌΣΟΣ'Σ", "ελληνικά", "ไทย แมว",
        "ქართული", "Հայերեն", "ᚠᚢᚦ runes", "𝕳𝖊𝖑𝖑𝖔 fraktur", "𝐁𝐨𝐥𝐝", "ℌ𝔢𝔩𝔩𝔬", "Ꭰ Cherokee", "ﬓ armenian ligature")
    add("emoji", "emoji 😀!", "😀", "😀😃😄", "a 🐶 and a 🐱", "👍🏽", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🏴‍☠️", "🇫🇷", "🇺🇸🇯🇵",
        "🏴󠁧󠁢󠁥󠁮󠁧󠁿", "❤️", "❤", "✔ done", "☺︎", "1️⃣", "#️⃣", "🧑‍🚀 astronaut", "🚗 red car", "🐕‍🦺")
    add("html", "Tom &amp; Jerry", "&amp;amp;", "&amp;amp;amp;", "&lt;dog&gt;", "&quot;quoted&quot;", "&#39;single&#39;",
        "&#x27;hex&#x27;", "caf&eacute;", "&EACUTE;", "&Eacute;", "&nbsp;space", "&copy; 2024", "&hellip;", "&rsquo;",
        "&amp;eacute;", "&ampx", "&notin;", "&notit;", "&NOTIN;", "&#128512;", "&#x1F600;", "&#0;", "&#13;", "&#128;",
        "&#x80;", "&#150;", "&#xD800;", "&#1114112;", "&#99999999999999999999;", "&#1;", "&#x7f;", "&#65279;",
        "&bogus;", "& alone", "&;", "&#;", "&#x;", "AT&T", "R&D", "a&b", "&amp", "&lt", "&LT", "&gt;&lt;", "&AMP;",
        "&Amp;", "&frac12;", "&fjlig;", "&NotEqualTilde;", "&ThickSpace;", "&nbsp", "&nbspx", "&#65;&#66;&#x43;",
        "<&amp;>", "a&amp;b\n<x>&amp;", "&amp;\n<&amp;", "<\n&amp;", "&aacute&eacute;", "&#x41", "&#65", "&#65x")
    add("quotes", "“smart” quotes", "‘single’", "„low“", "‚low‘", "«guillemets»", "‹single›", "‛reversed‟", "ʼmodifier",
        "“”", "‘’", "“don’t”", "″ double prime", "′ prime", "＂full＂")
    add("fullwidth", "Ｔｅｓｔ", "ＬＯＵＤ　ＮＯＩＳＥＳ", "ｆｕｌｌ－ｗｉｄｔｈ", "１２３", "！？", "ｈｅｌｌｏ　ｗｏｒｌｄ", "￥１００", "ﾊﾞｯｸ",
        "￣", "｟paren｠", "￦won", "ｒｅｄ　ｃａｒ")
    add("ligatures", "ﬁsh", "ﬂower", "eﬀect", "oﬃce", "waﬄe", "ﬅ", "ﬆ", "Ĳsselmeer", "ĳs", "ǅ", "ǉubav", "ŉ",
        "Œuvre", "æsthetic", "ﬀﬁﬂﬃﬄ")
    add("control", "tab\tseparated", "new\nline", "carriage\rreturn", "crlf\r\nline", "form\x0cfeed", "vertical\x0btab",
        "bell\x07", "null\x00byte", "esc\x1b[31mred\x1b[0m", "\x1b[1;32mgreen", "\x1b[٣m", "file\x1cseparator", "unit\x1fsep",
        "del\x7fete", "\x80euro", "c1\x85ellipsis", "\x81\x8d\x8f\x90\x9d", "\x96dash", "\x93quoted\x94", "\u2028line sep",
        "\u2029para sep", "\u0085nel", "bom\ufeffmid", "\ufeffbom start", "obj\ufffcrepl", "\ufff9anno\ufffb",
        "\u206adeprecated", "\U000e0041tag", "\x00", "\x1c\x1d\x1e\x1f", " \x1c ")
    add("zero-width", "zero\u200bwidth", "zw\u200cnj", "zw\u200dj", "\u200b", "rtl\u200fmark", "\u202eevil", "word\u2060joiner",
        "soft\u00adhyphen", "\u180e mongolian", "\u034fcgj")
    add("whitespace", "", " ", "   ", "\t\n", "\u3000", "\u00a0", "\u2003em space", "  multiple \t\n spaces  ",
        "a  b", " leading", "trailing ", "\u00a0nbsp\u00a0", "\u2000\u2001\u2002\u200a", "\u205f\u3000x", "\u1680ogham",
        "\u202fnarrow", "\x85", "\n\n\n", "x\ny\nz")
    add("special", "<|endoftext|>", "<|endoftext|> inside", "<|startoftext|>", "a<|endoftext|>b", "<|ENDOFTEXT|>",
        "<|endoftext|><|endoftext|>", "<|endoftext", "endoftext|>", "<|ſtartoftext|>", "<|endoftext|>'s", "'ſ", "'ſtop")
    add("casefold", "ǅungla", "ẞ", "ß", "ŉ", "ﬃ", "K", "Å", "Ω", "ǈ", "ᾼ", "ᾈ", "ΐ", "İİ", "I\u0307", "ǰ", "ſ",
        "STRASSE", "Ǳ", "ᏸ", "Ⓐⓑ", "ⅫⅰI", "ꭰ", "𐐀𐐨", "𞤀")
    add("long", " ".join(["word"] * 100), "a photo of " * 30, "x" * 500, "🙂" * 80, "日本" * 60,
        ", ".join(class_names("coco.yaml")[:40]), "a-b-" * 50, "1" * 200)
    add("mixed", "Café & \"Bar\" #1 — 日本 😀 ﬁne", "naïve—résumé’s “déjà vu”", "C++ & C#", "Ｈｅｌｌｏ ﬂ 😀 &amp; “x”",
        "e\u0301 vs é", "ΟΔΟΣ\u0345", "σς Σ", "x\u0308\u0301\u0323", "\u0345\u0345")
    # Random mixtures drawn from the pieces above, so that stages interact.
    pieces = [t for _, t in cases if t and len(t) < 30]
    for _ in range(300):
        k = rng.randint(2, 4)
        sep = rng.choice([" ", ", ", "", "\n", " & "])
        add("random-mix", sep.join(rng.choice(pieces) for _ in range(k)))
    # Random code points from many blocks.
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x20A0, 0x21FF), (0x2460, 0x24FF), (0x3000, 0x30FF),
              (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFB00, 0xFB4F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF),
              (0x1D400, 0x1D7FF), (0x0300, 0x036F)]
    for _ in range(300):
        lo, hi = rng.choice(blocks)
        length = rng.randint(1, 8)
        chars = []
        for _ in range(length):
            c = rng.randint(lo, hi)
            if 0xD800 <= c <= 0xDFFF or unicodedata.category(chr(c)) == "Cn":
                c = 0x61
            chars.append(chr(c))
        add("random-codepoints", "".join(chars))
    return cases


def mojibake_samples(rng: random.Random) -> list[tuple[str, str]]:
    sources = ["café", "naïve", "Zürich", "crème brûlée", "São Paulo", "“smart quotes”", "it’s", "—", "…", "€100",
               "日本語", "😀", "ñandú", "Ærøskøbing", "Łódź", "déjà vu", "señor", "façade", "Straße", "½ cup", "©2024",
               "•bullet", "¿qué?", "résumé", "Dvořák", "Привет", "Γειά", "→ arrow", "✔ done", "™"]
    out = []
    for text in sources:
        raw = text.encode("utf-8")
        for codec in ("latin-1", "cp1252", "sloppy-windows-1252"):
            try:
                out.append(("mojibake-" + codec, raw.decode(codec)))
            except UnicodeDecodeError:
                pass
        out.append(("mojibake-double", raw.decode("sloppy-windows-1252").encode("utf-8").decode("sloppy-windows-1252")))
        out.append(("mojibake-in-sentence", "the " + raw.decode("sloppy-windows-1252") + " in a sentence"))
    rng.shuffle(out)
    return out


def reference_ids(text: str) -> list[int]:
    return [int(v) for v in clip.tokenize([text], truncate=True)[0].tolist()]


def ids_without_mojibake_repair(text: str) -> list[int]:
    original = simple_tokenizer.ftfy.fix_text
    simple_tokenizer.ftfy.fix_text = lambda t: original(t, fix_encoding=False)
    try:
        return reference_ids(text)
    finally:
        simple_tokenizer.ftfy.fix_text = original


def main() -> None:
    rng = random.Random(20261122)
    entries: list[tuple[str, str]] = []
    for dataset, category in [("coco.yaml", "coco"), ("lvis.yaml", "lvis"), ("Objects365.yaml", "objects365"),
                              ("open-images-v7.yaml", "openimages"), ("ImageNet.yaml", "imagenet")]:
        entries.extend((category, name) for name in class_names(dataset))
    coco = class_names("coco.yaml")
    colours = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple", "pink", "brown"]
    for _ in range(200):
        template = rng.choice(["a photo of a {}", "a {} {}", "{}, {}", "the {} next to the {}", "{}", "a photo of the {} {}"])
        slots = template.count("{}")
        fill = [rng.choice(colours) if i == 0 and slots == 2 and "a {} {}" in template else rng.choice(coco) for i in range(slots)]
        entries.append(("composed-random", template.format(*fill)))
    entries.extend(edge_cases(rng))

    seen = set()
    golden, mojibake = [], []
    for category, text in entries + mojibake_samples(rng):
        if (category, text) in seen:
            continue
        seen.add((category, text))
        ids = reference_ids(text)
        plain = ids_without_mojibake_repair(text)
        record = {"category": category, "text": text, "ids": ids}
        if plain != ids or category.startswith("mojibake"):
            record["ids_without_mojibake_repair"] = plain
            mojibake.append(record)
        else:
            golden.append(record)

    os.makedirs(OUT_DIR, exist_ok=True)
    for name, records in [("clip_tokenizer_golden.jsonl", golden), ("clip_tokenizer_mojibake.jsonl", mojibake)]:
        with open(os.path.join(OUT_DIR, name), "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=True) + "\n")
    stage_records = [{"byte_encoder": {str(b): c for b, c in simple_tokenizer.bytes_to_unicode().items()}}]
    tokenizer = clip.clip._tokenizer
    for category, text in entries:
        if category in ("coco", "lvis", "objects365", "openimages", "imagenet") and rng.random() > 0.05:
            continue
        fixed = ftfy.fix_text(text, fix_encoding=False)
        if fixed != ftfy.fix_text(text):
            continue
        cleaned = simple_tokenizer.whitespace_clean(simple_tokenizer.basic_clean(text)).lower()
        pretokens = tokenizer.pat.findall(cleaned)
        bpe = []
        for token in pretokens:
            mapped = "".join(tokenizer.byte_encoder[b] for b in token.encode("utf-8"))
            bpe.append(tokenizer.bpe(mapped).split(" "))
        stage_records.append({"category": category, "text": text, "fixed": fixed,
                              "unescaped": html.unescape(html.unescape(fixed)),
                              "cleaned": cleaned, "pretokens": pretokens, "bpe": bpe})
    with open(os.path.join(OUT_DIR, "clip_tokenizer_stages.jsonl"), "w", encoding="utf-8") as handle:
        for record in stage_records:
            handle.write(json.dumps(record, ensure_ascii=True) + "\n")

    moved = sorted({r["category"] for r in mojibake if not r["category"].startswith("mojibake")})
    print(f"golden: {len(golden)} strings; mojibake: {len(mojibake)} strings "
          f"(of which repaired by ftfy fix_encoding: {sum(r['ids'] != r['ids_without_mojibake_repair'] for r in mojibake)}; "
          f"non-mojibake categories moved there: {moved}); stages: {len(stage_records) - 1} strings")


if __name__ == "__main__":
    main()
