"""Sliced inference, side by side: `lookout detect --slice` against the `sahi` library driving ultralytics, with the
same demo detector (Tests/Fixtures/demo/demo-detector.pt, the shipped weights as an ultralytics checkpoint), the same
query embeddings (the demo CLIP text tower, computed here by OpenAI CLIP's code), the same photos, tiles, overlap and
merge (GREEDYNMM, IOS 0.5), in the same run on the same cores.

Reports per photo (decode to merged boxes): sahi's `get_sliced_prediction` wall time and Lookout's own total (its tiles
side by side, one per thread, and one after another with --tile-lanes 1), and how far their boxes agree (each box of one matched by a box of the other with the same label at IoU >= 0.9).

    python scripts/demo/scenes.py /tmp/small --count 10 --seed 910000 --small
    python scripts/bench/slicing.py /tmp/small --count 10 --slice 400 --threads 2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "demo"))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402  (torchvision's CUDA wheels on a CPU torch)

SHAPES = ["circle", "square", "triangle", "star", "hexagon", "heart", "cross", "ring"]


def text_features(queries: list[str]) -> torch.Tensor:
    import clip

    from make_demo_fixtures import load_models

    text = load_models()[2]
    with torch.no_grad():
        features = text.encode_text(clip.tokenize(queries)).float()
    return (features / features.norm(dim=-1, keepdim=True)).unsqueeze(0)


def ultralytics_model(queries: list[str], text: torch.Tensor):
    from ultralytics import YOLOWorld

    model = YOLOWorld(os.path.join(ROOT, "Tests", "Fixtures", "demo", "demo-detector.pt"))
    net = model.model
    net.txt_feats = text
    net.model[-1].nc = len(queries)
    net.names = dict(enumerate(queries))
    return model


def iou(a, b) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def matched(one: list, other: list) -> int:
    return sum(any(l == m and iou(b, c) >= 0.9 for c, m in other) for b, l in one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="scenes.py --small output")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--slice", type=int, default=400)
    parser.add_argument("--overlap", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--conf", type=float, default=0.25)
    parser.add_argument("--lookout", default=os.path.join(ROOT, ".build", "release", "lookout"))
    args = parser.parse_args()
    from sahi.models.ultralytics import UltralyticsDetectionModel
    from sahi.predict import get_sliced_prediction

    torch.set_num_threads(args.threads)
    text = text_features(SHAPES)
    reference_env.forget_torchvision()  # after clip: ultralytics then suppresses with its own TorchNMS
    photos = sorted(p for p in os.listdir(args.folder) if p.endswith(".jpg"))[: args.count]
    paths = [os.path.join(args.folder, p) for p in photos]
    model = UltralyticsDetectionModel(
        model=ultralytics_model(SHAPES, text), confidence_threshold=args.conf, image_size=640, device="cpu"
    )

    def sahi(path):
        return get_sliced_prediction(
            path, model, slice_height=args.slice, slice_width=args.slice, overlap_height_ratio=args.overlap,
            overlap_width_ratio=args.overlap, verbose=0,
        )

    from sahi.postprocess.backends import set_postprocess_backend

    set_postprocess_backend("numpy")  # the backend the fixtures of SlicingTests were written with
    # ultralytics imports torchvision again on the way, whose CUDA-build ops cannot load here: its NMS is then
    # ultralytics' own TorchNMS (the same rule, "matches torchvision behavior exactly").
    import torchvision.ops
    from ultralytics.utils.nms import TorchNMS

    torchvision.ops.nms = TorchNMS.nms
    sahi(paths[0])  # warm-up
    sahi_ms, sahi_boxes = [], []
    for path in paths:
        start = time.perf_counter()
        result = sahi(path)
        sahi_ms.append((time.perf_counter() - start) * 1000)
        sahi_boxes.append([(p.bbox.to_xyxy(), p.category.name) for p in result.object_prediction_list])

    def lookout(extra: list[str]) -> tuple[list[float], list]:
        command = [args.lookout, "detect", paths[0], *paths, "-q", ", ".join(SHAPES), "--slice", str(args.slice),
                   "--overlap", str(args.overlap), "--conf", str(args.conf), "--json", "--lanes", "1", *extra]
        env = dict(os.environ, LOOKOUT_THREADS=str(args.threads))
        out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
        lines = [json.loads(line) for line in out.splitlines()][1:]  # the first photo again: warm-up
        return ([line["timings"]["total_ms"] for line in lines],
                [[(d["box"], d["label"]) for d in line["detections"]] for line in lines])

    # The tiles side by side (one per thread, the default), and one after another on every thread.
    lookout_ms, lookout_boxes = lookout([])
    serial_ms, serial_boxes = lookout(["--tile-lanes", "1"])
    agree = sum(matched(a, b) + matched(b, a) for a, b in zip(sahi_boxes, lookout_boxes))
    total = sum(len(a) + len(b) for a, b in zip(sahi_boxes, lookout_boxes))
    print(f"{len(paths)} photos, tiles of {args.slice} with overlap {args.overlap}, conf {args.conf}, {args.threads} threads")
    print(f"sahi {__import__('sahi').__version__} + ultralytics, torch {torch.__version__}: median {statistics.median(sahi_ms):.0f} ms a photo "
          f"(min {min(sahi_ms):.0f}, max {max(sahi_ms):.0f})")
    print(f"Lookout --slice: median {statistics.median(lookout_ms):.0f} ms a photo (min {min(lookout_ms):.0f}, max {max(lookout_ms):.0f})")
    print(f"Lookout --slice --tile-lanes 1 (tiles one after another): median {statistics.median(serial_ms):.0f} ms a photo "
          f"(min {min(serial_ms):.0f}, max {max(serial_ms):.0f}); the same boxes: {serial_boxes == lookout_boxes}")
    print(f"ratio Lookout/sahi: {statistics.median(lookout_ms) / statistics.median(sahi_ms):.2f} "
          f"(tiles one after another: {statistics.median(serial_ms) / statistics.median(sahi_ms):.2f})")
    print(f"boxes: sahi {sum(map(len, sahi_boxes))}, Lookout {sum(map(len, lookout_boxes))}; "
          f"{agree} of {total} matched by the other's (same label, IoU >= 0.9)")


if __name__ == "__main__":
    main()
