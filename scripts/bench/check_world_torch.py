#!/usr/bin/env python3
"""Checks scripts/bench/world_torch.py (the plain-PyTorch YOLO-World v2 the GPU peers run) against ultralytics:
the same random weights (ultralytics' `yolov8{s,...}-worldv2.yaml` built here, BatchNorm statistics randomised so
that they matter) loaded into both by name, the same input and text features, fp32 on the CPU; the outputs
(B, 4 + K, anchors) compared, unfused and with both fused.

    .build/reference-venv-requirements/bin/python scripts/bench/check_world_torch.py [--scales s,l]
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))
import reference_env  # noqa: E402,F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from world_torch import WorldNetwork, randomize_batchnorm  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default="s")
    args = parser.parse_args()
    from ultralytics.nn.tasks import WorldModel

    torch.manual_seed(0)
    worst = 0.0
    for scale in args.scales.split(","):
        reference = randomize_batchnorm(WorldModel(f"yolov8{scale}-worldv2.yaml", verbose=False).eval())
        mine = WorldNetwork(scale).eval()
        missing, unexpected = mine.load_state_dict(
            {k: v for k, v in reference.state_dict().items() if not k.startswith("txt_feats")}, strict=False)
        assert not missing, f"weights ultralytics lacks: {missing}"
        assert not unexpected, f"weights world_torch lacks: {unexpected}"
        text = torch.nn.functional.normalize(torch.randn(1, 3, 512), dim=-1)
        reference.model[-1].nc = text.shape[1]  # as set_classes leaves it
        x = torch.rand(1, 3, 640, 480)
        with torch.no_grad():
            want = reference.predict(x, txt_feats=text)
            want = want[0] if isinstance(want, (tuple, list)) else want
            got = mine(x, text)
            unfused = (got - want).abs().max().item()
            reference.fuse(verbose=False)
            mine.fuse()
            want = reference.predict(x, txt_feats=text)
            want = want[0] if isinstance(want, (tuple, list)) else want
            fused = (mine(x, text) - want).abs().max().item()
        scale_of = want.abs().max().item()
        print(f"yolov8{scale}-worldv2: output {tuple(want.shape)}, largest |difference| {unfused:.3g} unfused, "
              f"{fused:.3g} fused (largest |value| {scale_of:.3g})")
        worst = max(worst, unfused / scale_of, fused / scale_of)
    print("passed" if worst < 1e-5 else "FAILED", f"(largest difference relative to the output's range {worst:.3g})")
    sys.exit(0 if worst < 1e-5 else 1)


if __name__ == "__main__":
    main()
