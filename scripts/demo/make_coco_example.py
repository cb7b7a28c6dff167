#!/usr/bin/env python3
"""examples/scenes/instances.json: the example scenes' ground truth (truth.json) in COCO's format, one
category per shape, for `lookout eval examples/scenes/instances.json --images examples/scenes`.

    python3 scripts/demo/make_coco_example.py [FOLDER]

FOLDER (default examples/scenes) holds scenes.py's truth.json; FOLDER/instances.json is written (for the 500
held-out scenes of BENCHMARKS.md: `scripts/demo/scenes.py DIR --count 500 --seed 900000 --split eval`, then
this with DIR).
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]


def main():
    scenes = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "examples", "scenes")
    truth = json.load(open(os.path.join(scenes, "truth.json")))
    images, annotations = [], []
    for image_id, image in enumerate(truth["images"], start=1):
        images.append({"id": image_id, "file_name": image["file"], "width": image["width"],
                       "height": image["height"]})
        for item in image["objects"]:
            x1, y1, x2, y2 = item["box"]
            shape = item["label"].split()[-1]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                "category_id": SHAPES.index(shape) + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                                "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(SHAPES)]
    out = {"info": {"description": "Lookout's example scenes (examples/scenes/truth.json) in COCO format"},
           "licenses": [], "images": images, "annotations": annotations, "categories": categories}
    with open(os.path.join(scenes, "instances.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(len(images), "images,", len(annotations), "annotations")


if __name__ == "__main__":
    main()
