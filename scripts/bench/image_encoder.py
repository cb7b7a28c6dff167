#!/usr/bin/env python3
"""CLIP image-tower benchmark: Lookout, PyTorch and ONNX Runtime side by side on the same weights.

    swift build -c release --product lookout-benchmarks && ~/lookout-ref/bin/python scripts/bench/image_encoder.py [DIR]

DIR holds the full-size random ViT-B/32 that `scripts/check-full-clip` writes (default .build/full-clip).
PyTorch runs the reference path (clip.load on the CPU, float32, 2 threads); ONNX Runtime runs an export of
the same `model.visual` (opset 17, 2 intra-op threads, all graph optimisations). Times are for the tower
on one preprocessed photo, and per photo in a batch of 8; preprocessing is timed apart. Lookout runs in fp32
and in bf16 (`--precision bf16`), PyTorch in fp32 and under bf16 autocast.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402

import clip  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "full-clip")
    model_path = os.path.join(directory, "ViT-B-32-random.pt")
    photo = os.path.join(ROOT, "examples", "photos", "astronaut.jpg")
    for precision in ("fp32", "bf16"):  # bf16: the linear layers through AVX-512 BF16 (issue 32)
        print(f"Lookout {precision}:", flush=True)
        subprocess.run([os.path.join(ROOT, ".build", "release", "lookout-benchmarks"), "image", "--model",
                        model_path, "--photo", photo, "--precision", precision], check=True, cwd=ROOT)

    torch.set_num_threads(2)
    model, preprocess = clip.load(model_path, device="cpu", jit=False)
    model.eval()
    image = Image.open(photo)
    print(f"PyTorch preprocess: median {median_ms(lambda: preprocess(image), 20):.1f} ms")
    x = preprocess(image).unsqueeze(0)
    batch = x.repeat(8, 1, 1, 1)
    with torch.no_grad():
        model.encode_image(x)
        print(f"PyTorch {torch.__version__} (2 threads) encode_image, one photo: "
              f"median {median_ms(lambda: model.encode_image(x), 20):.1f} ms")
        print(f"PyTorch encode_image, 8 photos: median {median_ms(lambda: model.encode_image(batch), 5) / 8:.1f} ms per photo")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model.encode_image(x)
            print(f"PyTorch bf16 autocast encode_image, one photo: "
                  f"median {median_ms(lambda: model.encode_image(x), 20):.1f} ms")
            print(f"PyTorch bf16 autocast encode_image, 8 photos: "
                  f"median {median_ms(lambda: model.encode_image(batch), 5) / 8:.1f} ms per photo")

    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "visual.onnx")
        torch.onnx.export(model.visual, (x,), onnx_path, opset_version=17, input_names=["image"],
                          output_names=["embedding"], dynamic_axes={"image": {0: "n"}}, dynamo=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        one, eight = x.numpy(), batch.numpy()
        session.run(None, {"image": one})
        print(f"ONNX Runtime {ort.__version__} (2 threads), one photo: "
              f"median {median_ms(lambda: session.run(None, {'image': one}), 20):.1f} ms")
        print(f"ONNX Runtime, 8 photos: median {median_ms(lambda: session.run(None, {'image': eight}), 5) / 8:.1f} ms per photo")


if __name__ == "__main__":
    main()
