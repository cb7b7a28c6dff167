#!/usr/bin/env python3
"""Golden tracking data: ultralytics 8.4.190's BYTETracker (bytetrack.yaml) and supervision 0.31.2's LineZone and
PolygonZone on detections that Lookout recorded.

    PYTHON scripts/reference/make_tracking_fixtures.py DETECTIONS.jsonl
    (PYTHON: scripts/reference-venv scripts/reference/requirements-track.txt)

DETECTIONS.jsonl is `lookout detect examples/tracking/shapes.mp4 -q "red circle, blue square, yellow triangle,
green star, purple heart" --conf 0.1 --json` (the demo model; conf 0.1 as ultralytics' track() asks for). Writes
Tests/Fixtures/tracking/bytetrack.json with two sequences:
  - "recorded": those detections as they are;
  - "stressed": the same detections degraded by a seeded generator so that every rule of the tracker is used:
    detections dropped for a few frames (lost, then found again, or removed after the buffer), scores lowered
    into the second association's band (0.1 to 0.25), boxes jittered, spurious boxes that never become tracks,
    three frames with nothing (every track lost), a start with no confident detection;
each frame's detections as the tracker received them ([x1, y1, x2, y2, score, class]) and what the frame shows
as ultralytics' track() reports it: "tracks" (rows [x1, y1, x2, y2, track_id, score, class, idx], the tracker's
Kalman boxes), "hidden" (no confirmed track, a new one waiting) or "untracked" (the detections shown without ids).
Then supervision's counts on the recorded sequence's tracks: a LineZone per line (in/out per class after each
frame) and a PolygonZone's count per frame; and the pixels of PolygonZone's mask for seeded polygons.
"""
import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401

import numpy as np  # noqa: E402
import supervision as sv  # noqa: E402
from ultralytics.engine.results import Boxes  # noqa: E402
from ultralytics.trackers.byte_tracker import BYTETracker  # noqa: E402
from ultralytics.utils import YAML  # noqa: E402
from ultralytics.utils.checks import check_yaml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINES = [[208, 0, 208, 320], [0, 150, 416, 150], [40, 300, 380, 40]]
ZONE = [[120, 180], [330, 180], [380, 319], [100, 319]]


def read(path):
    frames = []
    for line in open(path):
        record = json.loads(line)
        rows = [d["box"] + [d["score"], d["query_index"]] for d in record["detections"]]
        frames.append({"size": [record["height"], record["width"]], "rows": rows})
    return frames


def stressed(frames):
    """The recorded detections degraded, seeded: see the module's docstring."""
    rng = np.random.default_rng(20261125)
    out = []
    for index, frame in enumerate(frames):
        rows = []
        for k, row in enumerate(frame["rows"]):
            box, score, cls = np.array(row[:4], np.float64), row[4], row[5]
            if cls == 0 and 20 <= index < 26:  # the red circle vanishes for six frames, then is found again
                continue
            if cls == 3 and 40 <= index < 75:  # a green star gone for longer than the buffer would be: removed
                if k % 2 == 0:
                    continue
            if rng.random() < 0.08:
                continue
            if rng.random() < 0.2:
                score = float(rng.uniform(0.11, 0.24))  # into the second association's band
            box = box + rng.normal(0, 1.5, 4)
            rows.append([*box.tolist(), score, cls])
        if rng.random() < 0.3:  # a spurious box, low or high
            x, y = rng.uniform(0, 360), rng.uniform(0, 270)
            rows.append([x, y, x + rng.uniform(8, 50), y + rng.uniform(8, 50), float(rng.uniform(0.1, 0.4)), 4])
        if 33 <= index < 36:  # nothing at all for three frames: every track lost, the frames untracked
            rows = []
        rows.sort(key=lambda r: -r[4])
        out.append({"size": frame["size"], "rows": rows})
    # It starts with an empty frame and one holding a doubtful box only (untracked), so that the first tracks
    # start after frame 1 and wait a frame for confirmation (hidden).
    size = frames[0]["size"]
    return [{"size": size, "rows": []}, {"size": size, "rows": [[50.0, 60.0, 90.0, 100.0, 0.15, 1]]}] + out


def track(frames):
    cfg = SimpleNamespace(**YAML.load(check_yaml("bytetrack.yaml")))
    tracker = BYTETracker(args=cfg)
    shown = []
    for frame in frames:
        data = np.array(frame["rows"], np.float32).reshape(-1, 6)
        boxes = Boxes(data, tuple(frame["size"]))
        tracks = tracker.update(boxes, None)
        if len(tracks) == 0:
            # ultralytics.trackers.track.on_predict_postprocess_end
            kind = "hidden" if any(not t.is_activated for t in tracker.tracked_stracks) else "untracked"
            shown.append({"kind": kind, "tracks": []})
        else:
            shown.append({"kind": "tracks", "tracks": np.asarray(tracks, np.float32).tolist()})
    return [
        {"detections": np.array(f["rows"], np.float32).reshape(-1, 6).tolist(), **s}
        for f, s in zip(frames, shown)
    ]


def counts(sequence):
    lines = [sv.LineZone(start=sv.Point(*l[:2]), end=sv.Point(*l[2:])) for l in LINES]
    zone = sv.PolygonZone(polygon=np.array(ZONE))
    out = []
    for frame in sequence:
        if frame["kind"] == "tracks":
            rows = np.array(frame["tracks"], np.float32)
            detections = sv.Detections(
                xyxy=rows[:, :4], confidence=rows[:, 5], class_id=rows[:, 6].astype(int),
                tracker_id=rows[:, 4].astype(int))  # fmt: skip
        else:
            detections = sv.Detections.empty()
        for line in lines:
            line.trigger(detections)
        in_zone = zone.trigger(detections)
        out.append({
            "lines": [{"in": {str(k): v for k, v in line.in_count_per_class.items()},
                       "out": {str(k): v for k, v in line.out_count_per_class.items()}} for line in lines],
            "zone": int(zone.current_count), "in_zone": [bool(v) for v in in_zone],
        })  # fmt: skip
    return out


def zone_cases():
    """PolygonZone's pixels (sv.polygon_to_mask, i.e. cv2.fillPoly) for seeded polygons: convex ones, and
    arbitrary vertex lists (non-convex, self-crossing); each mask as rows of 0/1 over its full resolution."""
    rng = np.random.default_rng(7)
    cases = []
    for t in range(12):
        n = int(rng.integers(3, 8))
        if t % 3 == 0:
            polygon = rng.integers(0, 60, (n, 2))
        else:
            angles = np.sort(rng.uniform(0, 2 * np.pi, n))
            radii = rng.uniform(5, 28, n)
            polygon = np.stack([30 + radii * np.cos(angles), 30 + radii * np.sin(angles)], 1).astype(int)
        mask = sv.polygon_to_mask(polygon, (polygon[:, 0].max() + 2, polygon[:, 1].max() + 2))
        cases.append({"polygon": polygon.tolist(), "rows": ["".join("1" if v else "0" for v in row) for row in mask]})
    return cases


def main():
    frames = read(sys.argv[1])
    recorded = track(frames)
    result = {
        "source": "ultralytics 8.4.190 BYTETracker (bytetrack.yaml), lap 0.5.13; supervision 0.31.2",
        "recorded": recorded,
        "stressed": track(stressed(frames)),
        "lines": LINES,
        "zone": ZONE,
        "counts": counts(recorded),
        "zone_cases": zone_cases(),
    }
    path = os.path.join(ROOT, "Tests/Fixtures/tracking/bytetrack.json")
    with open(path, "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")
    for name in ["recorded", "stressed"]:
        ids = {int(t[4]) for fr in result[name] for t in fr["tracks"]}
        kinds = {k: sum(1 for fr in result[name] if fr["kind"] == k) for k in ["tracks", "hidden", "untracked"]}
        print(f"{name}: {len(result[name])} frames, track ids {sorted(ids)}, {kinds}")
    last = result["counts"][-1]
    print("counts after the last frame:", last["lines"], "zone", last["zone"])


if __name__ == "__main__":
    main()
