"""The demo scene tower's captions in five languages: English, German, French, Spanish and Chinese.

Every English scene caption of train_image.caption_list() (counts, backgrounds, colours, shapes, colour–shape pairs)
has one translation per language, written here by hand with each language's agreement: German adjectives take the
noun's gender ("blauer Kreis", "blaues Quadrat", "blaue Form"; lila and rosa do not inflect), French and Spanish
adjectives follow the noun and agree with it ("étoile bleue", "estrella roja"), Chinese puts the colour word
before the shape ("蓝色圆形"). `translations()` maps each English caption to its five versions.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

LANGUAGES = ["en", "de", "fr", "es", "zh"]

# shape: (German noun, its gender), (French noun, gender), (Spanish noun, gender), Chinese
SHAPES = {
    "circle": (("Kreis", "m"), ("cercle", "m"), ("círculo", "m"), "圆形"),
    "square": (("Quadrat", "n"), ("carré", "m"), ("cuadrado", "m"), "正方形"),
    "triangle": (("Dreieck", "n"), ("triangle", "m"), ("triángulo", "m"), "三角形"),
    "star": (("Stern", "m"), ("étoile", "f"), ("estrella", "f"), "星形"),
    "hexagon": (("Sechseck", "n"), ("hexagone", "m"), ("hexágono", "m"), "六边形"),
    "heart": (("Herz", "n"), ("cœur", "m"), ("corazón", "m"), "心形"),
    "cross": (("Kreuz", "n"), ("croix", "f"), ("cruz", "f"), "十字形"),
    "ring": (("Ring", "m"), ("anneau", "m"), ("anillo", "m"), "圆环"),
}

# colour: German stem (None: does not inflect), French (m, f), Spanish (m, f), Chinese
COLOURS = {
    "red": ("rot", ("rouge", "rouge"), ("rojo", "roja"), "红色"),
    "orange": ("orang", ("orange", "orange"), ("naranja", "naranja"), "橙色"),
    "yellow": ("gelb", ("jaune", "jaune"), ("amarillo", "amarilla"), "黄色"),
    "green": ("grün", ("vert", "verte"), ("verde", "verde"), "绿色"),
    "blue": ("blau", ("bleu", "bleue"), ("azul", "azul"), "蓝色"),
    "purple": (None, ("violet", "violette"), ("morado", "morada"), "紫色"),
    "pink": (None, ("rose", "rose"), ("rosa", "rosa"), "粉色"),
    "brown": ("braun", ("marron", "marron"), ("marrón", "marrón"), "棕色"),
    "black": ("schwarz", ("noir", "noire"), ("negro", "negra"), "黑色"),
    "white": ("weiß", ("blanc", "blanche"), ("blanco", "blanca"), "白色"),
}
GERMAN_UNINFLECTED = {"purple": "lila", "pink": "rosa"}
GERMAN_ENDINGS = {"m": "er", "n": "es", "f": "e"}  # after no article: "blauer Kreis", "blaues Quadrat", "blaue Form"

COUNTS = {
    "de": ["eine Form", "zwei Formen", "drei Formen", "vier Formen", "fünf Formen", "sechs Formen", "sieben Formen",
           "acht Formen"],
    "fr": ["une forme", "deux formes", "trois formes", "quatre formes", "cinq formes", "six formes", "sept formes",
           "huit formes"],
    "es": ["una forma", "dos formas", "tres formas", "cuatro formas", "cinco formas", "seis formas", "siete formas",
           "ocho formas"],
    "zh": ["一个形状", "两个形状", "三个形状", "四个形状", "五个形状", "六个形状", "七个形状", "八个形状"],
}
BACKGROUNDS = {  # plain, textured, cluttered, photo
    "de": ["einfarbiger Hintergrund", "gemusterter Hintergrund", "unruhiger Hintergrund", "Fotohintergrund"],
    "fr": ["fond uni", "fond texturé", "fond encombré", "fond photo"],
    "es": ["fondo liso", "fondo con textura", "fondo recargado", "fondo fotográfico"],
    "zh": ["纯色背景", "纹理背景", "杂乱背景", "照片背景"],
}


def german_colour(colour: str, gender: str) -> str:
    stem = COLOURS[colour][0]
    return GERMAN_UNINFLECTED[colour] if stem is None else stem + GERMAN_ENDINGS[gender]


def pair(language: str, colour: str, shape: str) -> str:
    german, french, spanish, chinese = SHAPES[shape]
    if language == "de":
        return f"{german_colour(colour, german[1])} {german[0]}"
    if language == "fr":
        return f"{french[0]} {COLOURS[colour][1][0 if french[1] == 'm' else 1]}"
    if language == "es":
        return f"{spanish[0]} {COLOURS[colour][2][0 if spanish[1] == 'm' else 1]}"
    if language == "zh":
        return COLOURS[colour][3] + chinese
    return scenes.caption(colour, shape)


def translations() -> dict[str, dict[str, str]]:
    """English caption → {language: caption}, for every caption of train_image.caption_list(), in its order."""
    from train_image import BACKGROUNDS as ENGLISH_BACKGROUNDS, COUNTS as ENGLISH_COUNTS, caption_list

    table: dict[str, dict[str, str]] = {}
    for k, english in enumerate(ENGLISH_COUNTS):
        table[english] = {"en": english, **{lang: COUNTS[lang][k] for lang in COUNTS}}
    for k, english in enumerate(ENGLISH_BACKGROUNDS.values()):
        table[english] = {"en": english, **{lang: BACKGROUNDS[lang][k] for lang in BACKGROUNDS}}
    for colour in scenes.COLOUR_NAMES:
        table[f"{colour} shape"] = {
            "en": f"{colour} shape", "de": f"{german_colour(colour, 'f')} Form",
            "fr": f"forme {COLOURS[colour][1][1]}", "es": f"forma {COLOURS[colour][2][1]}",
            "zh": COLOURS[colour][3] + "形状"}
    for shape, (german, french, spanish, chinese) in SHAPES.items():
        table[shape] = {"en": shape, "de": german[0], "fr": french[0], "es": spanish[0], "zh": chinese}
    for shape in scenes.SHAPES:
        for colour in scenes.COLOUR_NAMES:
            table[scenes.caption(colour, shape)] = {lang: pair(lang, colour, shape) for lang in LANGUAGES}
    order = caption_list()
    assert sorted(order) == sorted(table), set(order) ^ set(table)
    meaning: dict[str, str] = {}  # a text shared by two languages ("triangle") must mean the same in both
    for english in order:
        for text in table[english].values():
            assert meaning.setdefault(text.lower(), english) == english, (text, english, meaning[text.lower()])
    return {c: table[c] for c in order}


if __name__ == "__main__":
    for english, versions in translations().items():
        print(" | ".join(versions[lang] for lang in LANGUAGES))
