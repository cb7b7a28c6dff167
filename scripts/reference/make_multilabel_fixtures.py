#!/usr/bin/env python3
"""Multi-label NMS (ultralytics' validator, `multi_label=True`) on the detector fixtures' raw outputs.

    PYTHON scripts/reference/make_multilabel_fixtures.py   (the reference environment: requirements.txt)

Reads `output` from Tests/Fixtures/detector/{n-rocket-416-queries,n-chelsea-352-queries}.safetensors and
writes Tests/Fixtures/detector/multilabel.json: for each, ultralytics 8.4.190's `non_max_suppression` with
multi_label=True at conf 0.05 and 0.15 (IoU 0.7, max_det 300), detections as [x1, y1, x2, y2, score, class]
in the network input's pixels (before scale_boxes), and how many (anchor, query) pairs passed the threshold
at anchors where another query scored higher (what multi-label adds).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import torch  # noqa: E402
from ultralytics.utils.nms import non_max_suppression  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_output(path):
    """The F32 tensor `output` of a safetensors file (8-byte header length, JSON header, data)."""
    import struct
    import numpy as np
    data = open(path, "rb").read()
    length = struct.unpack("<Q", data[:8])[0]
    entry = json.loads(data[8:8 + length])["output"]
    assert entry["dtype"] == "F32"
    start, end = entry["data_offsets"]
    values = np.frombuffer(data[8 + length + start:8 + length + end], dtype="<f4")
    return torch.from_numpy(values.copy()).reshape(entry["shape"])


def main():
    out = {}
    for name in ["n-rocket-416-queries", "n-chelsea-352-queries"]:
        output = load_output(os.path.join(ROOT, "Tests", "Fixtures", "detector", f"{name}.safetensors"))
        cases = {}
        for conf in (0.05, 0.15):
            kept = non_max_suppression(output.clone(), conf_thres=conf, iou_thres=0.7, multi_label=True,
                                       max_det=300)[0]
            scores = output[0, 4:, :]
            best = scores.max(0).values
            extra = int(((scores > conf) & (scores < best)).sum())
            cases[f"{conf}"] = {"detections": kept.tolist(), "second_labels_above": extra}
        out[name] = cases
        print(name, {k: (len(v["detections"]), v["second_labels_above"]) for k, v in cases.items()})
    with open(os.path.join(ROOT, "Tests", "Fixtures", "detector", "multilabel.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
