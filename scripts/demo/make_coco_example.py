#!/usr/bin/env python3
"""examples/scenes/instances.json: the example scenes' ground truth (truth.json) in COCO's format, one
category per shape, for `lookout eval examples/scenes/instances.json --images examples/scenes`.

    python3 scripts/demo/make_coco_example.py [FOLDER] [--masks]

FOLDER (default examples/scenes) holds scenes.py's truth.json; FOLDER/instances.json is written (for the 500
held-out scenes of BENCHMARKS.md: `scripts/demo/scenes.py DIR --count 500 --seed 900000 --split eval`, then
this with DIR).

--masks writes FOLDER/instances-segm.json instead: the same annotations, each with its object's visible mask
(uncompressed RLE at the photo's size, the pixels its box was measured on) and the mask's area, for the YOLOE
demo model's segmentation mAP. The masks come from regenerating each scene from truth.json's seed and split
(scenes.scene(owners=True); needs numpy, OpenCV and scikit-image, as scenes.py does); a scene whose boxes do not
come out the same is an error.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]


def column_runs(mask) -> list[int]:
    """COCO's uncompressed RLE of a boolean mask: run lengths in column-major order, starting with zeros."""
    import numpy as np

    flat = np.asarray(mask, dtype=np.uint8).flatten(order="F")
    edges = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], edges, [flat.size]])
    runs = np.diff(bounds).tolist()
    return runs if flat.size == 0 or flat[0] == 0 else [0] + runs


def object_masks(truth: dict, image: dict) -> list:
    """The visible mask of each of the image's truth objects, regenerated from the scene's seed."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scenes as generator

    index = int(image["file"].split("-")[1].split(".")[0])
    _, objects, _, owner = generator.scene(truth["seed"], index, truth["split"], owners=True, small=truth.get("small", False))
    boxes = [[round(v, 2) for v in o["box"]] for o in objects]
    if boxes != [o["box"] for o in image["objects"]]:
        raise SystemExit(f"{image['file']}: the regenerated scene's boxes differ from truth.json's")
    return [owner == o["owner"] for o in objects]


def main():
    arguments = [a for a in sys.argv[1:] if a != "--masks"]
    masks = "--masks" in sys.argv[1:]
    scenes = arguments[0] if arguments else os.path.join(ROOT, "examples", "scenes")
    truth = json.load(open(os.path.join(scenes, "truth.json")))
    images, annotations = [], []
    for image_id, image in enumerate(truth["images"], start=1):
        images.append({"id": image_id, "file_name": image["file"], "width": image["width"],
                       "height": image["height"]})
        visible = object_masks(truth, image) if masks else [None] * len(image["objects"])
        for item, mask in zip(image["objects"], visible):
            x1, y1, x2, y2 = item["box"]
            shape = item["label"].split()[-1]
            annotation = {"id": len(annotations) + 1, "image_id": image_id,
                          "category_id": SHAPES.index(shape) + 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                          "area": (x2 - x1) * (y2 - y1), "iscrowd": 0}
            if mask is not None:
                annotation["segmentation"] = {"size": [image["height"], image["width"]],
                                              "counts": column_runs(mask)}
                annotation["area"] = float(mask.sum())
            annotations.append(annotation)
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(SHAPES)]
    what = "with each object's visible mask " if masks else ""
    out = {"info": {"description": f"Lookout's example scenes (examples/scenes/truth.json) {what}in COCO format"},
           "licenses": [], "images": images, "annotations": annotations, "categories": categories}
    with open(os.path.join(scenes, "instances-segm.json" if masks else "instances.json"), "w") as f:
        json.dump(out, f, indent=None if masks else 1, separators=(",", ":") if masks else None)
    print(len(images), "images,", len(annotations), "annotations")


if __name__ == "__main__":
    main()
