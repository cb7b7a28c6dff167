#!/usr/bin/env python3
"""Detector benchmark: Lookout beside ONNX Runtime, OpenVINO and PyTorch (ultralytics) on the same random-weight
YOLO-World v2 models, in one run (numbers for BENCHMARKS.md).

    swift build -c release --product lookout-benchmarks
    .build/reference-venv-requirements-text/bin/pip install onnx onnxruntime openvino   # once
    .build/reference-venv-requirements-text/bin/python scripts/bench/detector.py [--models s] [--configs 640x640:3] \
        [--precisions fp32,bf16] [--skip-torch]

For each model (n, s, m, l, x; random weights in the released architecture and `.pt` format, made with
ultralytics under /tmp/lookout-bench) and each configuration (network input HxW : number of queries):

- Lookout: `lookout-benchmarks detect`, the full detection from the JPEG file (decode, letterbox, network,
  NMS), median of `--runs` runs. 640x640 uses examples/photos/astronaut.jpg (512x512, letterboxed to
  640x640); 448x640 uses examples/photos/rocket.jpg (640x427).
- ONNX Runtime: ultralytics' ONNX export of the same weights at that input size with that many (random) text
  embeddings baked in, CPU provider, 2 intra-op threads, network only (no decode, letterbox or NMS).
- OpenVINO: the same ONNX file read by OpenVINO's CPU plugin, 2 threads, f32 inference precision, latency
  hint, network only.
- PyTorch: ultralytics `predict` on the same photo (its full pipeline), 2 threads, median of 5.

`--precisions fp32,bf16` also runs Lookout with `--precision bf16`, and OpenVINO with the bf16 inference
precision hint where its CPU plugin offers BF16 (OPTIMIZATION_CAPABILITIES); the bf16 table's ratio is Lookout
bf16 against OpenVINO fp32 (issue 32's target: ≤ 0.6).

`--precisions ...,int8` also runs Lookout with `--precision int8` on a copy of the model that `lookout models
calibrate` made (`.build/release/lookout`; the demo text encoder for the queries "person, dog, car") and the
peers' int8 models of the same ONNX file: OpenVINO after NNCF post-training quantisation (`nncf.quantize`,
MIXED preset: symmetric per-channel weights, asymmetric activations) and ONNX Runtime's static QDQ model
(`quantize_static`, per-channel s8 weights, u8 activations, after `quant_pre_process`). All three calibrate on
the same 29 photos (examples/photos and examples/scenes, letterboxed as ultralytics does). The int8 table's
ratio is Lookout int8 against the faster of the two (issue 32's target: ≤ 1.0). `--rounds R` times the three int8
engines R times one after another (the peers' models compiled once), prints each round, and reports the medians
over the rounds with the range of the rounds' ratios: on this shared machine a slow spell then falls on all three.

Each engine is warmed up once. Prints one line per engine and a Markdown row per model and configuration
(ratio = Lookout / the faster of ONNX Runtime and OpenVINO).
"""
import argparse
import os
import re
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

WORK = "/tmp/lookout-bench"
PHOTOS = {
    (640, 640): os.path.join(ROOT, "examples", "photos", "astronaut.jpg"),
    (448, 640): os.path.join(ROOT, "examples", "photos", "rocket.jpg"),
}
BENCH = os.path.join(ROOT, ".build", "release", "lookout-benchmarks")
LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")


def calibration_photos():
    photos = []
    for folder in ("photos", "scenes"):
        directory = os.path.join(ROOT, "examples", folder)
        photos += sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".jpg"))
    return photos


def calibrated(size, pt):
    """A copy of the model with Lookout's int8 calibration (lookout models calibrate)."""
    path = os.path.join(WORK, f"yolov8{size}-worldv2-int8.safetensors")
    if not os.path.exists(path):
        subprocess.run(
            [LOOKOUT, "models", "calibrate", "--detector", pt, "--text-model",
             os.path.join(ROOT, "Models", "demo", "text-encoder.safetensors"), "-q", "person, dog, car", "-o", path]
            + calibration_photos(), check=True, capture_output=True)
    return path


def letterboxed(height, width):
    """The calibration photos as the network's input (ultralytics' LetterBox, RGB, 0..1, NCHW)."""
    import cv2
    from ultralytics.data.augment import LetterBox

    inputs = []
    for photo in calibration_photos():
        boxed = LetterBox(new_shape=(height, width), auto=False)(image=cv2.imread(photo))
        inputs.append(np.ascontiguousarray(boxed[..., ::-1].transpose(2, 0, 1)[None], dtype=np.float32) / 255)
    return inputs


def openvino_int8(core, path, inputs):
    target = path.replace(".onnx", "-nncf-int8.xml")
    if not os.path.exists(target):
        import nncf
        import openvino as ov

        quantized = nncf.quantize(
            core.read_model(path), nncf.Dataset(inputs), preset=nncf.QuantizationPreset.MIXED,
            subset_size=len(inputs))
        ov.save_model(quantized, target)
    return target


def onnxruntime_int8(path, inputs):
    target = path.replace(".onnx", "-qdq-int8.onnx")
    if not os.path.exists(target):
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process

        prepared = path.replace(".onnx", "-pre.onnx")
        try:
            quant_pre_process(path, prepared)
        except Exception as error:  # its symbolic shape inference fails on some exports: quantise the file itself
            print(f"quant_pre_process failed ({type(error).__name__}); quantising the export as it is", flush=True)
            prepared = path

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.items = iter([{"images": x} for x in inputs])

            def get_next(self):
                return next(self.items, None)

        quantize_static(prepared, target, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return target


def weights(size):
    os.makedirs(WORK, exist_ok=True)
    pt = os.path.join(WORK, f"yolov8{size}-worldv2.pt")
    if not os.path.exists(pt):
        from ultralytics import YOLOWorld

        torch.manual_seed(0)
        YOLOWorld(f"yolov8{size}-worldv2.yaml").save(pt)
    return pt


def with_queries(model, queries):
    """Random unit text embeddings for `queries` classes, as `set_classes` would leave them (without CLIP)."""
    generator = torch.Generator().manual_seed(queries)
    feats = torch.randn(1, queries, 512, generator=generator)
    model.model.txt_feats = feats / feats.norm(dim=-1, keepdim=True)
    model.model.model[-1].nc = queries
    model.model.names = {k: f"q{k}" for k in range(queries)}
    return model


def onnx_file(size, pt, height, width, queries):
    path = os.path.join(WORK, f"yolov8{size}-worldv2-{height}x{width}-{queries}q.onnx")
    if not os.path.exists(path):
        from ultralytics import YOLOWorld

        model = with_queries(YOLOWorld(pt), queries)
        exported = model.export(format="onnx", imgsz=(height, width), simplify=False, dynamic=False, verbose=False)
        os.replace(exported, path)
    return path


def lookout(pt, height, width, queries, runs, precision="fp32"):
    photo = PHOTOS[(height, width)]
    result = subprocess.run(
        [BENCH, "detect", "--detector", pt, "--image", photo, "--imgsz", str(max(height, width)),
         "--queries", str(queries), "--repetitions", str(runs), "--full-only", "--precision", precision],
        check=True, capture_output=True, text=True)
    match = re.search(r"full detect .*: median ([0-9.]+) ms", result.stdout)
    size = re.search(r"network input (\d+)x(\d+)", result.stdout)
    if size and (int(size[1]), int(size[2])) != (height, width):
        sys.exit(f"Lookout's input was {size[1]}x{size[2]}, expected {height}x{width}")
    return float(match[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="n,s,m,l,x")
    parser.add_argument("--configs", default="640x640:3,448x640:80")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=1,
                        help="int8: rounds of Lookout, OpenVINO and ONNX Runtime one after another (medians over them)")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--precisions", default="fp32")
    args = parser.parse_args()
    precisions = args.precisions.split(",")
    reference_env.forget_torchvision()
    torch.set_num_threads(2)
    import onnxruntime as ort
    import openvino as ov

    core = ov.Core()
    ov_bf16 = "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    print(f"OpenVINO CPU capabilities: {core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES')}")
    rows = []
    bf16_rows = []
    int8_rows = []
    for size in args.models.split(","):
        pt = weights(size)
        for config in args.configs.split(","):
            shape, queries = config.split(":")
            height, width = (int(v) for v in shape.split("x"))
            queries = int(queries)
            label = f"{size} {height}x{width} {queries}q"
            lookout_ms = lookout(pt, height, width, queries, args.runs)
            print(f"{label}: Lookout full detect median {lookout_ms:.1f} ms", flush=True)
            lookout_bf16 = float("nan")
            if "bf16" in precisions:
                lookout_bf16 = lookout(pt, height, width, queries, args.runs, "bf16")
                print(f"{label}: Lookout bf16 full detect median {lookout_bf16:.1f} ms", flush=True)
            path = onnx_file(size, pt, height, width, queries)
            x = np.random.default_rng(0).random((1, 3, height, width), dtype=np.float32)

            def onnxruntime_run(model_path):
                """One inference of ONNX Runtime's CPU provider on `model_path`, 2 intra-op threads (warmed up)."""
                options = ort.SessionOptions()
                options.intra_op_num_threads = 2
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
                name = session.get_inputs()[0].name
                session.run(None, {name: x})
                return lambda: session.run(None, {name: x})

            def openvino_run(model_path, hint="f32"):
                """One inference of OpenVINO's CPU plugin on `model_path`, 2 threads, latency hint (warmed up)."""
                compiled = core.compile_model(core.read_model(model_path), "CPU", {
                    "INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"})
                request = compiled.create_infer_request()
                request.infer({0: x})
                return lambda: request.infer({0: x})

            def onnxruntime_ms(model_path):
                return median_ms(onnxruntime_run(model_path), args.runs)

            def openvino_ms(model_path, hint="f32"):
                return median_ms(openvino_run(model_path, hint), args.runs)

            ort_ms = onnxruntime_ms(path)
            print(f"{label}: ONNX Runtime {ort.__version__} network only median {ort_ms:.1f} ms", flush=True)
            ov_ms = openvino_ms(path)
            print(f"{label}: OpenVINO {ov.__version__} network only median {ov_ms:.1f} ms", flush=True)
            ov_bf16_ms = float("nan")
            if "bf16" in precisions and ov_bf16:
                ov_bf16_ms = openvino_ms(path, "bf16")
                print(f"{label}: OpenVINO bf16 network only median {ov_bf16_ms:.1f} ms", flush=True)
            if "bf16" in precisions:
                bf16_rows.append((size, f"{height}×{width}", queries, lookout_bf16, lookout_ms, ov_ms, ov_bf16_ms))
            if "int8" in precisions:
                inputs = letterboxed(height, width)
                ov_int8 = openvino_run(openvino_int8(core, path, inputs))
                ort_int8 = onnxruntime_run(onnxruntime_int8(path, inputs))
                # Rounds of the three engines one after another, so that a slow spell of the shared machine
                # falls on all of them: each round's ratio, and the medians over the rounds.
                rounds = []
                for round_index in range(args.rounds):
                    lk = lookout(calibrated(size, pt), height, width, queries, args.runs, "int8")
                    vino = median_ms(ov_int8, args.runs)
                    runtime = median_ms(ort_int8, args.runs)
                    rounds.append((lk, vino, runtime, lk / min(vino, runtime)))
                    print(f"{label}: round {round_index + 1}: Lookout int8 full detect {lk:.1f} ms, OpenVINO NNCF int8 "
                          f"{vino:.1f} ms, ONNX Runtime QDQ int8 {runtime:.1f} ms (network only): "
                          f"{lk / min(vino, runtime):.2f}×", flush=True)
                lookout_int8, ov_int8_ms, ort_int8_ms, _ = (statistics.median(v) for v in zip(*rounds))
                ratios = sorted(r[3] for r in rounds)
                int8_rows.append((size, f"{height}×{width}", queries, lookout_int8, lookout_ms, ov_int8_ms,
                                  ort_int8_ms, statistics.median(ratios), ratios[0], ratios[-1]))

            torch_ms = float("nan")
            if not args.skip_torch:
                from ultralytics import YOLOWorld

                model = with_queries(YOLOWorld(pt), queries)
                photo = PHOTOS[(height, width)]
                model.predict(photo, verbose=False, imgsz=max(height, width))
                torch_ms = median_ms(lambda: model.predict(photo, verbose=False, imgsz=max(height, width)), 5)
                del model
                print(f"{label}: PyTorch {torch.__version__} ultralytics predict median {torch_ms:.1f} ms", flush=True)
            rows.append((size, f"{height}×{width}", queries, lookout_ms, ort_ms, ov_ms, torch_ms))
    print("\n| model | input | queries | Lookout full detect | ONNX Runtime | OpenVINO | ratio to the faster | PyTorch predict |")
    print("|---|---|---|---|---|---|---|---|")
    for size, shape, queries, lk, ort_ms, ov_ms, torch_ms in rows:
        print(f"| {size} | {shape} | {queries} | {lk:.1f} ms | {ort_ms:.1f} ms | {ov_ms:.1f} ms | "
              f"**{lk / min(ort_ms, ov_ms):.2f}×** | {torch_ms:.1f} ms |")
    if bf16_rows:
        print("\n| model | input | queries | Lookout bf16 | Lookout fp32 | OpenVINO fp32 | OpenVINO bf16 | "
              "bf16 / OpenVINO fp32 |")
        print("|---|---|---|---|---|---|---|---|")
        for size, shape, queries, bf, lk, ov_ms, ov_bf in bf16_rows:
            print(f"| {size} | {shape} | {queries} | {bf:.1f} ms | {lk:.1f} ms | {ov_ms:.1f} ms | {ov_bf:.1f} ms | "
                  f"**{bf / ov_ms:.2f}×** |")


    if int8_rows:
        print(f"\n| model | input | queries | Lookout int8 | Lookout fp32 | OpenVINO int8 (NNCF) | "
              f"ONNX Runtime int8 (QDQ) | int8 / the faster int8 peer (median of {args.rounds} rounds, range) |")
        print("|---|---|---|---|---|---|---|---|")
        for size, shape, queries, i8, lk, ov_i8, ort_i8, ratio, low, high in int8_rows:
            print(f"| {size} | {shape} | {queries} | {i8:.1f} ms | {lk:.1f} ms | {ov_i8:.1f} ms | {ort_i8:.1f} ms | "
                  f"**{ratio:.2f}×** ({low:.2f}–{high:.2f}) |")


if __name__ == "__main__":
    main()
