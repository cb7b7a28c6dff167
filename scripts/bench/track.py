#!/usr/bin/env python3
"""Tracking benchmark and end-to-end check: `lookout track` beside ultralytics' `model.track()` (ByteTrack or
BoT-SORT) on the same video with the same model, in one run (numbers for BENCHMARKS.md).

    swift build -c release --product lookout
    $(scripts/reference-venv scripts/reference/requirements-track.txt) scripts/bench/track.py [--repeat 3] \
        [--model demo|s] [--tracker bytetrack|botsort]

`--tracker botsort` runs both with BoT-SORT (botsort.yaml: no ReID, sparse-optical-flow camera motion) on
examples/tracking/camera.mp4, the video seen by a moving camera (60 frames, 416x320).

The model: the demo detector as ultralytics reads it (Tests/Fixtures/demo/demo-detector.pt, made from the
shipped weights by scripts/demo/make_demo_fixtures.py), with the text embeddings of the queries from the
demo text encoder (`lookout embed`), given to ultralytics as its `txt_feats` (what `set_classes` computes
with its own CLIP). The video: examples/tracking/shapes.mp4 (72 frames, 416x320), every frame at 640, conf
0.1 (track()'s default), 2 threads each. `--model s`: the random-weight yolov8s-worldv2 of the s-scale parity
fixtures (Tests/Fixtures/s-scale, calibrated BatchNorm) in both, with the same demo text embeddings: the speed
of the s architecture (its boxes mean nothing). Lookout's time is the whole command (process start, model load,
decoding, detection, tracking, JSON); ultralytics' the `track()` loop after the model is loaded. Also says in
how many frames the two report the same ids in the same order.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import torch  # noqa: E402
from ultralytics import YOLOWorld  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")
VIDEO = os.path.join(ROOT, "examples", "tracking", "shapes.mp4")
QUERIES = ["red circle", "blue square", "yellow triangle", "green star", "purple heart"]


DETECTORS = {
    "demo": os.path.join(ROOT, "Tests", "Fixtures", "demo", "demo-detector.pt"),
    "s": os.path.join(ROOT, "Tests", "Fixtures", "s-scale", "yolov8s-worldv2-random.pt"),
}
MODEL = "demo"
TRACKER = "bytetrack"


def lookout_track():
    started = time.perf_counter()
    model = [] if MODEL == "demo" else ["--detector", DETECTORS[MODEL], "--text-model",
                                        os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors")]
    out = subprocess.run([LOOKOUT, "track", VIDEO, "-q", ", ".join(QUERIES), "--json", "--tracker", TRACKER, *model],
                         check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    seconds = time.perf_counter() - started
    frames = [json.loads(line) for line in out.splitlines() if '"frame"' in line]
    return seconds, [[d.get("track_id") for d in f["detections"]] for f in frames]


def ultralytics_model():
    out = subprocess.run([LOOKOUT, "embed", *QUERIES], check=True, capture_output=True, text=True).stdout
    feats = torch.tensor([json.loads(line) for line in out.splitlines()], dtype=torch.float32)
    model = YOLOWorld(DETECTORS[MODEL])
    net = model.model
    net.txt_feats = feats.reshape(1, len(QUERIES), -1)
    net.model[-1].nc = len(QUERIES)
    net.names = {i: q for i, q in enumerate(QUERIES)}
    return model


def ultralytics_track(model):
    started = time.perf_counter()
    ids = []
    for result in model.track(source=VIDEO, conf=0.1, imgsz=640, tracker=TRACKER + ".yaml", stream=True,
                              verbose=False, persist=False):  # fmt: skip
        boxes = result.boxes
        ids.append([int(i) for i in boxes.id.tolist()] if boxes.id is not None else [None] * len(boxes))
    return time.perf_counter() - started, ids


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", choices=sorted(DETECTORS), default="demo")
    parser.add_argument("--tracker", choices=["bytetrack", "botsort"], default="bytetrack")
    options = parser.parse_args()
    global MODEL, TRACKER, VIDEO
    MODEL = options.model
    TRACKER = options.tracker
    if TRACKER == "botsort":
        VIDEO = os.path.join(ROOT, "examples", "tracking", "camera.mp4")
    torch.set_num_threads(2)
    model = ultralytics_model()
    # PyPI's torchvision is a CUDA build whose NMS cannot load here, and the video loader imports it: its NMS
    # is ultralytics' own TorchNMS (which matches torchvision's exactly), as in the reference scripts.
    import torchvision.ops
    from ultralytics.utils.nms import TorchNMS

    torchvision.ops.nms = TorchNMS.nms
    ultralytics_track(model)  # warm-up
    lookout_runs, ultralytics_runs = [], []
    for _ in range(options.repeat):
        seconds, lookout_ids = lookout_track()
        lookout_runs.append(seconds)
        seconds, ultralytics_ids = ultralytics_track(model)
        ultralytics_runs.append(seconds)
    frames = len(lookout_ids)
    same = sum(1 for a, b in zip(lookout_ids, ultralytics_ids) if a == b)
    result = {
        "model": MODEL, "tracker": TRACKER, "frames": frames,
        "lookout_s": sorted(lookout_runs), "ultralytics_s": sorted(ultralytics_runs),
        "lookout_fps": frames / np.median(lookout_runs), "ultralytics_fps": len(ultralytics_ids) / np.median(ultralytics_runs),
        "same_ids_frames": same, "ultralytics_frames": len(ultralytics_ids),
        "ids": sorted({i for f in lookout_ids for i in f if i is not None}),
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
