#!/usr/bin/env python3
"""Detector benchmark: Lookout, ONNX Runtime and PyTorch (ultralytics) on the same random-weight s model and
the same photo, in one run (numbers for BENCHMARKS.md).

    swift build -c release && ~/lookout-ref/bin/python scripts/bench/detector.py

Uses /tmp/lookout-bench/yolov8s-worldv2.pt (made by scripts/bench/weights.py), examples/photos/rocket.jpg
(640×427 → network input 448×640) and 80 classes. ONNX: ultralytics' own export of the same model at
that input size (text features baked in), run with 2 threads.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

WORK = "/tmp/lookout-bench"
PHOTO = os.path.join(ROOT, "examples", "photos", "rocket.jpg")


def main():
    pt = os.path.join(WORK, "yolov8s-worldv2.pt")
    subprocess.run([os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "detect", "--detector", pt, "--image", PHOTO, "--imgsz", "640"], check=True)
    reference_env.forget_torchvision()
    from ultralytics import YOLOWorld

    torch.set_num_threads(2)
    onnx_path = os.path.join(WORK, "yolov8s-worldv2-448x640.onnx")
    if not os.path.exists(onnx_path):
        exported = YOLOWorld(pt).export(format="onnx", imgsz=(448, 640), simplify=False, dynamic=False)
        os.replace(exported, onnx_path)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, 448, 640), dtype=np.float32)
    name = session.get_inputs()[0].name
    session.run(None, {name: x})
    print(f"ONNX Runtime {ort.__version__} (2 threads) network only, 448x640, 80 classes: "
          f"median {median_ms(lambda: session.run(None, {name: x}), 10):.1f} ms")
    model = YOLOWorld(pt)
    model.predict(PHOTO, verbose=False)
    print(f"PyTorch {torch.__version__} (2 threads) ultralytics predict, full pipeline: "
          f"median {median_ms(lambda: model.predict(PHOTO, verbose=False), 5):.1f} ms")


if __name__ == "__main__":
    main()
