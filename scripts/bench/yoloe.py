#!/usr/bin/env python3
"""YOLOE benchmark: Lookout beside ONNX Runtime and OpenVINO on the same random-weight YOLOE models, in one run
(numbers for BENCHMARKS.md, issue 31).

    swift build -c release --product lookout
    .build/reference-venv-requirements-track/bin/pip install onnx onnxruntime openvino onnxslim   # once
    .build/reference-venv-requirements-track/bin/python scripts/bench/yoloe.py [--models 11s,v8s] [--runs 7]

For each model (YOLOE-11s-seg, YOLOE-v8s-seg, or YOLOE-26s-seg with `--models 26s`; random weights in the released architecture and `.pt` format,
made with ultralytics under /tmp/lookout-bench-yoloe) with 3 random text embeddings:

- Lookout: `lookout detect PHOTO×(runs+1) --detector M.pt --text-embeddings Q.npy -q a,b,c --imgsz 640 --lanes 1
  --json`, the median over the photos after the first of each photo's `total_ms` (decode, letterbox, network,
  NMS and the masks at the photo's size). examples/photos/astronaut.jpg (512×512, letterboxed to 640×640).
- ONNX Runtime: ultralytics' ONNX export of the same weights at 640×640 with the same 3 embeddings (fused into
  the head, as ultralytics exports YOLOE), CPU provider, 2 intra-op threads, network only (boxes, scores, mask
  coefficients and prototypes; no decode, letterbox, NMS or masks).
- OpenVINO: the same ONNX file, CPU plugin, 2 threads, f32 inference precision, latency hint, network only.

`--bf16` also times Lookout with `--precision bf16` and OpenVINO with the bf16 inference precision hint (where
its CPU plugin offers BF16), and prints a second table: Lookout bf16 beside OpenVINO fp32 and bf16.

`--int8` also times Lookout with `--precision int8` on a copy `lookout models calibrate` made (with the same 3
embeddings, `--text-embeddings`), and the peers' int8 models of the same ONNX file made as
scripts/bench/detector.py makes them (OpenVINO after NNCF, ONNX Runtime's static QDQ), all three calibrated on
the same 29 photos; a third table: Lookout int8 against the faster int8 peer.

Each engine is warmed up once; medians of `--runs`. Prints one line per engine and a Markdown row per model.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

WORK = "/tmp/lookout-bench-yoloe"
PHOTO = os.path.join(ROOT, "examples", "photos", "astronaut.jpg")


def make_model(name: str) -> tuple[str, str, str]:
    """The random model's .pt, its ONNX export at 640 with the 3 embeddings, and the embeddings as .npy."""
    from ultralytics import YOLOE

    os.makedirs(WORK, exist_ok=True)
    pt, onnx_path, npy = (os.path.join(WORK, f"yoloe-{name}-seg{ext}") for ext in (".pt", ".onnx", "-queries.npy"))
    torch.manual_seed(3)
    text = torch.nn.functional.normalize(torch.randn(1, 3, 512), dim=-1)
    np.save(npy, text[0].numpy().astype(np.float32))
    if not os.path.exists(pt):
        YOLOE(f"yoloe-{name}-seg.yaml").save(pt)
    if not os.path.exists(onnx_path):
        model = YOLOE(pt)
        with torch.no_grad():
            model.set_classes(["a", "b", "c"], model.model.model[-1].get_tpe(text))
        exported = model.export(format="onnx", imgsz=640, simplify=False, verbose=False)
        os.replace(exported, onnx_path)
    return pt, onnx_path, npy


def time_lookout(pt: str, npy: str, runs: int, precision: str = "fp32") -> float:
    lookout = os.path.join(ROOT, ".build", "release", "lookout")
    out = subprocess.run(
        [lookout, "detect", *([PHOTO] * (runs + 1)), "--detector", pt, "--text-embeddings", npy, "-q", "a,b,c",
         "--imgsz", "640", "--lanes", "1", "--json", "--no-cache", "--precision", precision],
        check=True, capture_output=True, text=True).stdout
    totals = [json.loads(line)["timings"]["total_ms"] for line in out.splitlines() if line.strip()]
    return statistics.median(totals[1:])


def time_onnxruntime(onnx_path: str, runs: int) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: np.random.rand(1, 3, 640, 640).astype(np.float32)}
    session.run(None, feed)
    return median_ms(lambda: session.run(None, feed), runs)


def time_openvino(path: str, runs: int, precision: str | None = "f32") -> float:
    """OpenVINO's network time of an ONNX file at `precision` (f32, bf16), or of a saved model (NNCF int8) with
    `precision` None; nan for bf16 where its CPU plugin does not offer BF16."""
    import openvino as ov

    core = ov.Core()
    if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        return float("nan")
    config = {"INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "LATENCY"}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    request = core.compile_model(core.read_model(path), "CPU", config).create_infer_request()
    data = np.random.rand(1, 3, 640, 640).astype(np.float32)
    request.infer([data])
    return median_ms(lambda: request.infer([data]), runs)


def calibrated(pt: str, npy: str) -> str:
    """A copy of the model with Lookout's int8 calibration, on detector.py's photos with the 3 embeddings."""
    import detector

    path = pt.replace(".pt", "-int8.safetensors")
    if not os.path.exists(path):
        subprocess.run(
            [detector.LOOKOUT, "models", "calibrate", "--detector", pt, "--text-embeddings", npy, "-q", "a,b,c",
             "-o", path] + detector.calibration_photos(), check=True, capture_output=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="11s,v8s")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bf16", action="store_true", help="also Lookout bf16 and OpenVINO bf16")
    parser.add_argument("--int8", action="store_true", help="also Lookout int8, OpenVINO NNCF and ONNX Runtime QDQ int8")
    args = parser.parse_args()
    reference_env.forget_torchvision()
    rows, bf16_rows, int8_rows = [], [], []
    for name in args.models.split(","):
        pt, onnx_path, npy = make_model(name)
        lookout = time_lookout(pt, npy, args.runs)
        onnxruntime = time_onnxruntime(onnx_path, args.runs)
        openvino = time_openvino(onnx_path, args.runs)
        print(f"yoloe-{name}-seg 640x640 3 queries: Lookout {lookout:.1f} ms (full detection with masks), "
              f"ONNX Runtime {onnxruntime:.1f} ms, OpenVINO {openvino:.1f} ms (network only)", flush=True)
        rows.append(f"| yoloe-{name}-seg | 640×640, 3 | {lookout:.1f} | {onnxruntime:.1f} | {openvino:.1f} | "
                    f"{lookout / min(onnxruntime, openvino):.2f} |")
        if args.bf16:
            lookout_bf16 = time_lookout(pt, npy, args.runs, "bf16")
            openvino_bf16 = time_openvino(onnx_path, args.runs, "bf16")
            print(f"yoloe-{name}-seg bf16: Lookout {lookout_bf16:.1f} ms, OpenVINO bf16 {openvino_bf16:.1f} ms",
                  flush=True)
            bf16_rows.append(f"| yoloe-{name}-seg | 640×640, 3 | {lookout_bf16:.1f} | {lookout:.1f} | "
                             f"{openvino:.1f} | {openvino_bf16:.1f} | {lookout_bf16 / openvino:.2f} |")
        if args.int8:
            import detector
            import openvino as ov

            photos = detector.letterboxed(640, 640)
            lookout_int8 = time_lookout(calibrated(pt, npy), npy, args.runs, "int8")
            openvino_int8 = time_openvino(detector.openvino_int8(ov.Core(), onnx_path, photos), args.runs, None)
            onnxruntime_int8 = time_onnxruntime(detector.onnxruntime_int8(onnx_path, photos), args.runs)
            print(f"yoloe-{name}-seg int8: Lookout {lookout_int8:.1f} ms, OpenVINO NNCF {openvino_int8:.1f} ms, "
                  f"ONNX Runtime QDQ {onnxruntime_int8:.1f} ms", flush=True)
            int8_rows.append(f"| yoloe-{name}-seg | 640×640, 3 | {lookout_int8:.1f} | {lookout:.1f} | "
                             f"{openvino_int8:.1f} | {onnxruntime_int8:.1f} | "
                             f"{lookout_int8 / min(openvino_int8, onnxruntime_int8):.2f} |")
    print("| model | input, queries | Lookout ms | ONNX Runtime ms | OpenVINO ms | Lookout / faster |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    if bf16_rows:
        print()
        print("| model | input, queries | Lookout bf16 ms | Lookout fp32 ms | OpenVINO fp32 ms | OpenVINO bf16 ms | "
              "Lookout bf16 / OpenVINO fp32 |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(bf16_rows))
    if int8_rows:
        print()
        print("| model | input, queries | Lookout int8 ms | Lookout fp32 ms | OpenVINO int8 (NNCF) ms | "
              "ONNX Runtime int8 (QDQ) ms | Lookout int8 / the faster int8 peer |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(int8_rows))


if __name__ == "__main__":
    main()
