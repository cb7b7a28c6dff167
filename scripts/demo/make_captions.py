"""Writes scripts/demo/captions.json: every caption the demo model trains on, with OpenAI CLIP token ids.

Run in the reference environment (openai-clip installed); the GPU machine then needs no tokenizer.
Captions: 80 colour–shape combinations ("red star"), 8 shapes ("star"), 10 colours ("red shape"), "shape",
and distractors — things that never appear in a scene, some sharing a colour word — that training uses as
negatives so that unrelated queries stay silent.
"""

import json
import os

import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import reference_env  # noqa: E402,F401  (CPU torch with the CUDA torchvision wheel)
import clip  # noqa: E402

from scenes import COLOUR_NAMES, SHAPES, caption

OBJECTS = [
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear",
    "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "kite",
    "baseball bat", "skateboard", "surfboard", "tennis racket", "bottle", "wine glass", "cup", "fork", "knife",
    "spoon", "bowl", "banana", "apple", "sandwich", "orange fruit", "broccoli", "carrot", "hot dog", "pizza",
    "donut", "cake", "chair", "couch", "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse",
    "remote", "keyboard", "cell phone", "microwave", "oven", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "toothbrush", "tree", "flower", "house", "window", "door", "road", "sky", "cloud",
    "grass", "rock", "coin", "moon", "rocket", "astronaut", "coffee", "text", "letter", "line", "dot",
    "face", "hand", "shoe", "hat", "lamp", "bag",
]  # fmt: skip
COLOURED_OBJECTS = [f"{c} {o}" for c in COLOUR_NAMES for o in ("car", "dog", "bird", "shirt", "flower", "ball")]


def main() -> None:
    fine = [caption(c, s) for s in SHAPES for c in COLOUR_NAMES]
    coarse_shape = list(SHAPES)
    coarse_colour = [f"{c} shape" for c in COLOUR_NAMES]
    distractors = OBJECTS + COLOURED_OBJECTS
    everything = fine + coarse_shape + coarse_colour + ["shape"] + distractors
    assert len(set(everything)) == len(everything)
    tokens = clip.tokenize(everything, truncate=True)
    ids = [[int(t) for t in row[: int(row.argmax()) + 1]] for row in tokens]
    out = {
        "fine": fine,
        "shape": coarse_shape,
        "colour": coarse_colour,
        "any": ["shape"],
        "distractors": distractors,
        "tokens": dict(zip(everything, ids)),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "captions.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(everything)} captions → {path}")


if __name__ == "__main__":
    main()
