"""Examples as queries, measured: `lookout eval` of the YOLOE demo model on held-out scenes with each shape category
found by its name, by 1, 2, 4 or 8 examples (boxes on reference scenes apart from the evaluation, one example per
reference photo, averaged as `Examples.average`), and by its name with the examples (`--combine-examples best` and
`mean`). Prints AP50-95 and AP50 per configuration.

    python3 scripts/bench/examples.py --held-out 100
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]


def scenes(folder: str, count: int, seed: int, python: str) -> None:
    if not os.path.exists(os.path.join(folder, "instances.json")):
        subprocess.run([python, os.path.join(ROOT, "scripts/demo/scenes.py"), folder, "--count", str(count), "--seed",
                        str(seed), "--split", "eval"], check=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/demo/make_coco_example.py"), folder], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--held-out", type=int, default=100, help="evaluation scenes (seed 900000, as BENCHMARKS.md's)")
    parser.add_argument("--work", default="/tmp/lookout-examples")
    parser.add_argument("--python", default=sys.executable, help="a Python with numpy, OpenCV and scikit-image")
    parser.add_argument("--lookout", default=os.path.join(ROOT, ".build", "release", "lookout"))
    args = parser.parse_args()
    held, refs = os.path.join(args.work, f"held-out-{args.held_out}"), os.path.join(args.work, "references")
    scenes(held, args.held_out, 900000, args.python)
    scenes(refs, 60, 930000, args.python)  # reference photos: another seed, never evaluated

    truth = json.load(open(os.path.join(refs, "truth.json")))
    examples: dict[str, list[tuple[str, list[float]]]] = {shape: [] for shape in SHAPES}
    for image in truth["images"]:
        taken = set()
        for obj in image["objects"]:
            shape = obj["label"].split()[-1]
            x1, y1, x2, y2 = obj["box"]
            if shape in taken or len(examples[shape]) >= 8 or min(x2 - x1, y2 - y1) < 12:
                continue
            taken.add(shape)
            examples[shape].append((os.path.join(refs, image["file"]), obj["box"]))
    assert all(len(v) == 8 for v in examples.values()), {k: len(v) for k, v in examples.items()}

    def evaluate(extra: list[str]) -> tuple[float, float]:
        command = [args.lookout, "eval", os.path.join(held, "instances.json"), "--images", held, "--model", "demo-yoloe",
                   "--json", "--plain", *extra]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        result = json.loads(out)
        return result["AP"], result["AP50"]

    def prompt_arguments(k: int) -> list[str]:
        by_photo: dict[str, list[str]] = {}
        for shape in SHAPES:
            for path, box in examples[shape][:k]:
                by_photo.setdefault(path, []).append(",".join(f"{v:g}" for v in box) + ":" + shape)
        out = []
        for path, boxes in by_photo.items():
            out += ["--prompt-image", path]
            for box in boxes:
                out += ["--prompt-box", box]
        return out

    rows = [("names only", *evaluate([]))]
    for k in [1, 2, 4, 8]:
        prompts = prompt_arguments(k)
        rows.append((f"{k} example(s)", *evaluate(prompts + ["--examples-only"])))
        rows.append((f"name + {k}, best", *evaluate(prompts + ["--combine-examples", "best"])))
        rows.append((f"name + {k}, mean", *evaluate(prompts + ["--combine-examples", "mean"])))
    print(f"YOLOE demo, {args.held_out} held-out scenes (seed 900000), references: 60 scenes of seed 930000")
    print("| queries | AP50-95 | AP50 |\n|---|---|---|")
    for name, ap, ap50 in rows:
        print(f"| {name} | {ap:.3f} | {ap50:.3f} |")


if __name__ == "__main__":
    main()
