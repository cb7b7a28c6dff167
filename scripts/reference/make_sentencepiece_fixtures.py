"""SentencePiece tokenizer models built here and the ids the reference gives (issue 52): the official SigLIP
tokenizer files cannot be downloaded on these machines, so the algorithm is proved on models trained here by
Google's `sentencepiece` in the real file format (`spiece.model`, a ModelProto), and SigLIP's text pipeline on
them by `transformers`' SiglipTokenizer.

    python3 -m venv V && V/bin/pip install -r scripts/reference/requirements-siglip.txt
    V/bin/python scripts/reference/make_sentencepiece_fixtures.py Tests/Fixtures/sentencepiece

Writes into the folder:
- `unigram.model`: a unigram model (nmt_nfkc normalisation, byte fallback), 3,000 pieces;
- `unigram-unk.model`: the same corpus without byte fallback (unknown pieces become <unk>), 2,000 pieces;
- `cases.jsonl`: held-out strings in many scripts (not in the training corpus), each with the ids of
  `SentencePieceProcessor.encode` for both models, and SiglipTokenizer's `input_ids` (lowercased, punctuation
  removed, `</s>` appended, padded with `</s>` or truncated to 64) for `unigram.model`.
"""
import json
import os
import random
import sys

import sentencepiece as spm
from transformers import SiglipTokenizer

WORDS = {
    "en": "red blue green yellow circle square triangle star heart ring cross hexagon small large two three on a the "
          "with and near grey background white black photo of dog cat car bicycle tree house".split(),
    "de": "roter blauer grüner gelber Kreis Quadrat Dreieck Stern Herz Ring Kreuz Sechseck klein groß zwei drei auf "
          "einem grauen Hintergrund weiß schwarz Foto von Hund Katze Straße Fahrrad Baum Häuser".split(),
    "fr": "rouge bleu vert jaune cercle carré triangle étoile cœur anneau croix hexagone petit grand deux trois sur "
          "un fond gris blanc noir photo d'un chien chat voiture vélo arbre maison".split(),
    "es": "rojo azul verde amarillo círculo cuadrado triángulo estrella corazón anillo cruz hexágono pequeño grande "
          "dos tres sobre un fondo gris blanco negro foto de perro gato coche bicicleta árbol niño".split(),
    "ru": "красный синий зелёный жёлтый круг квадрат треугольник звезда сердце кольцо крест маленький большой два "
          "три на сером фоне белый чёрный фото собака кошка машина".split(),
    "el": "κόκκινος μπλε πράσινος κίτρινος κύκλος τετράγωνο τρίγωνο αστέρι καρδιά δαχτυλίδι σταυρός μικρός "
          "μεγάλος δύο τρία σε γκρι φόντο σκύλος γάτα".split(),
    "ar": "أحمر أزرق أخضر أصفر دائرة مربع مثلث نجمة قلب حلقة صليب صغير كبير اثنان ثلاثة على خلفية رمادية كلب قطة".split(),
    "hi": "लाल नीला हरा पीला वृत्त वर्ग त्रिभुज तारा दिल अंगूठी क्रॉस छोटा बड़ा दो तीन पर धूसर पृष्ठभूमि कुत्ता बिल्ली".split(),
    "zh": "红色 蓝色 绿色 黄色 圆形 正方形 三角形 星形 心形 圆环 十字 六边形 小 大 两个 三个 在 灰色 背景 上 狗 猫 汽车".split(),
    "ja": "赤い 青い 緑の 黄色い 円 四角 三角形 星 ハート 指輪 十字 小さい 大きい 二つ 三つ 灰色の 背景 犬 猫 車".split(),
    "emoji": "🔴 🔵 🟢 ⭐ ❤️ 🐶 🐱 🚗 🌳 🏠 👍🏽 🇩🇪".split(),
}


def sentence(rng, languages):
    language = rng.choice(languages)
    words = [rng.choice(WORDS[language]) for _ in range(rng.randint(2, 9))]
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 999)))
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words) + 1), rng.choice(WORDS["emoji"]))
    joiner = "" if language in ("zh", "ja") and rng.random() < 0.7 else " "
    text = joiner.join(words)
    if rng.random() < 0.3:
        text = text.capitalize() + rng.choice([".", "!", "?", ",", ";"])
    return text


def held_out(rng):
    """Strings in many scripts and the edges the tokenizer must handle, none of them a training line."""
    languages = list(WORDS)
    cases = [sentence(rng, languages) for _ in range(240)]
    cases += [
        "", " ", "   \t\n  ", "a", "A", ".", "!!!", "▁", "▁▁a", "a▁b",
        "blue circle", "  blue   circle  ", "Blue Circle!", "blauer Kreis", "cercle bleu", "círculo azul",
        "蓝色圆形", "синий круг", "μπλε κύκλος", "دائرة زرقاء", "नीला वृत्त", "青い円",
        # NFKC and compatibility forms the normaliser maps.
        "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ﬁne ﬂour", "① ② ③", "x²+y³", "Å Å", "é é", "ǅ ǆ", "㎞ ㍱",
        "ﾊﾝｶｸ ｶﾀｶﾅ", "e\u0301\u0302 o\u0308", "\u00a0non\u2009breaking\u3000space",
        # Not in the training text: rare characters, byte fallback (or <unk>).
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕥𝕖𝕩𝕥", "龘 齉 靐", "ꙮ ᚠᚢᚦ ⴰⵣⵓⵍ", "🦜🦩🪿", "\u0007bell\u001b", "tab\there",
        "<unk> </s> <s>", "a" * 300, "blue circle " * 40, " ".join(WORDS["zh"]) * 3,
        "Mixed: red 红色 красный κόκκινος أحمر लाल 赤い 🔴!",
    ]
    return cases


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "Tests/Fixtures/sentencepiece"
    os.makedirs(out, exist_ok=True)
    rng = random.Random(52)
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for _ in range(30000):
            f.write(sentence(rng, list(WORDS)) + "\n")
    common = dict(input=corpus, model_type="unigram", character_coverage=0.9995, num_threads=1,
                  input_sentence_size=30000, shuffle_input_sentence=False, seed_sentencepiece_size=100000,
                  normalization_rule_name="nmt_nfkc", unk_id=2, eos_id=1, pad_id=0, bos_id=-1,
                  unk_piece="<unk>", eos_piece="</s>", pad_piece="<pad>")
    spm.SentencePieceTrainer.train(model_prefix=os.path.join(out, "unigram"), vocab_size=3000,
                                   byte_fallback=True, **common)
    spm.SentencePieceTrainer.train(model_prefix=os.path.join(out, "unigram-unk"), vocab_size=2000,
                                   byte_fallback=False, **common)
    os.remove(corpus)
    for name in ("unigram", "unigram-unk"):
        os.remove(os.path.join(out, name + ".vocab"))
    fallback = spm.SentencePieceProcessor(model_file=os.path.join(out, "unigram.model"))
    unknown = spm.SentencePieceProcessor(model_file=os.path.join(out, "unigram-unk.model"))
    siglip = SiglipTokenizer(vocab_file=os.path.join(out, "unigram.model"))
    cases = held_out(random.Random(5252))
    with open(os.path.join(out, "cases.jsonl"), "w", encoding="utf-8") as f:
        for text in cases:
            record = {
                "text": text,
                "unigram": fallback.encode(text),
                "unigram_unk": unknown.encode(text),
                "siglip": siglip(text, padding="max_length", max_length=64, truncation=True)["input_ids"],
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases; pieces {fallback.get_piece_size()} and {unknown.get_piece_size()}")


if __name__ == "__main__":
    main()
