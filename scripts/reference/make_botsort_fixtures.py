#!/usr/bin/env python3
"""Golden BoT-SORT data: ultralytics 8.4.190's BOTSORT (botsort.yaml: with_reid False, gmc_method sparseOptFlow)
on detections that Lookout recorded from a video seen by a moving camera, and the frames as OpenCV decodes them.

    PYTHON scripts/reference/make_botsort_fixtures.py VIDEO DETECTIONS.jsonl
    (PYTHON: scripts/reference-venv scripts/reference/requirements-track.txt)

VIDEO is examples/tracking/camera.mp4 (scripts/demo/make_camera_video.py); DETECTIONS.jsonl is `lookout detect
VIDEO -q "red circle, blue square, yellow triangle, green star, purple heart" --conf 0.1 --json`. Writes
Tests/Fixtures/tracking/botsort.json:
  - "recorded" and "stressed" (the same degradation as make_tracking_fixtures.py; its two extra frames at the
    start repeat the first picture): per frame the detections, the camera-motion warp (2×3) that ultralytics'
    GMC estimated for it, and what the frame shows, as in bytetrack.json;
  - "gmc_steps": for the first frames, OpenCV's intermediate results on the grey, half-size picture:
    goodFeaturesToTrack's corners, calcOpticalFlowPyrLK's points and status, estimateAffinePartial2D's warp;
  - "grey_sums": per frame the sum and a position-weighted sum of the grey half-size picture, so that a test can
    tell whether it decoded and reduced the frames to the very same pixels.
"""
import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_env  # noqa: E402,F401
import make_tracking_fixtures as tracking  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from ultralytics.engine.results import Boxes  # noqa: E402
from ultralytics.trackers.bot_sort import BOTSORT  # noqa: E402
from ultralytics.utils import YAML  # noqa: E402
from ultralytics.utils.checks import check_yaml  # noqa: E402

ROOT = tracking.ROOT


def frames_of(path):
    capture = cv2.VideoCapture(path)
    images = []
    while True:
        ok, image = capture.read()
        if not ok:
            break
        images.append(image)
    return images


def grey_half(image):
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    return cv2.resize(grey, (grey.shape[1] // 2, grey.shape[0] // 2))


def track(frames, images):
    cfg = SimpleNamespace(**YAML.load(check_yaml("botsort.yaml")))
    assert cfg.gmc_method == "sparseOptFlow" and not cfg.with_reid
    tracker = BOTSORT(args=cfg)
    warps = []
    apply = tracker.gmc.apply

    def recording(image, detections=None):
        warp = apply(image, detections)
        warps.append(np.asarray(warp, np.float64).tolist())
        return warp

    tracker.gmc.apply = recording
    out = []
    for frame, image in zip(frames, images):
        data = np.array(frame["rows"], np.float32).reshape(-1, 6)
        boxes = Boxes(data, tuple(frame["size"]))
        count = len(warps)
        tracks = tracker.update(boxes, image)
        warp = warps[-1] if len(warps) > count else None  # GMC runs only when a frame has tracks to move
        if len(tracks) == 0:
            kind = "hidden" if any(not t.is_activated for t in tracker.tracked_stracks) else "untracked"
            shown = {"kind": kind, "tracks": []}
        else:
            shown = {"kind": "tracks", "tracks": np.asarray(tracks, np.float32).tolist()}
        out.append({"detections": data.tolist(), "warp": warp, **shown})
    return out


def gmc_steps(images, count=4):
    params = {"maxCorners": 400, "qualityLevel": 0.01, "minDistance": 0, "blockSize": 3,
              "useHarrisDetector": False, "k": 0.04}  # fmt: skip
    steps = []
    previous = grey_half(images[0])
    corners = cv2.goodFeaturesToTrack(previous, mask=None, **params)
    for image in images[1 : count + 1]:
        current = grey_half(image)
        moved, status, _ = cv2.calcOpticalFlowPyrLK(previous, current, corners, None)
        good = status.ravel().astype(bool)
        warp = cv2.estimateAffinePartial2D(corners[good], moved[good], cv2.RANSAC)[0]
        steps.append({
            "corners": corners.reshape(-1, 2).tolist(), "moved": moved.reshape(-1, 2).tolist(),
            "status": status.ravel().tolist(), "warp": warp.tolist(),
        })  # fmt: skip
        previous = current
        corners = cv2.goodFeaturesToTrack(previous, mask=None, **params)
    return steps


def main():
    video, detections = sys.argv[1], sys.argv[2]
    images = frames_of(video)
    frames = tracking.read(detections)
    assert len(images) == len(frames), (len(images), len(frames))
    stressed = tracking.stressed(frames)
    extra = len(stressed) - len(frames)
    greys = [grey_half(image).astype(np.float64) for image in images]
    weights = None
    sums = []
    for grey in greys:
        if weights is None:
            ys, xs = np.indices(grey.shape)
            weights = (xs * 7 + ys * 13) % 101
        sums.append([float(grey.sum()), float((grey * weights).sum())])
    result = {
        "source": "ultralytics 8.4.190 BOTSORT (botsort.yaml), lap 0.5.13, opencv-python " + cv2.__version__,
        "video": os.path.relpath(video, ROOT),
        "stressed_repeats_first_picture": extra,
        "recorded": track(frames, images),
        "stressed": track(stressed, [images[0]] * extra + images),
        "gmc_steps": gmc_steps(images),
        "grey_sums": sums,
    }
    path = os.path.join(ROOT, "Tests/Fixtures/tracking/botsort.json")
    with open(path, "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")
    for name in ["recorded", "stressed"]:
        ids = {int(t[4]) for fr in result[name] for t in fr["tracks"]}
        kinds = {k: sum(1 for fr in result[name] if fr["kind"] == k) for k in ["tracks", "hidden", "untracked"]}
        shifts = [abs(w[0][2]) + abs(w[1][2]) for w in (fr["warp"] for fr in result[name]) if w]
        print(f"{name}: {len(result[name])} frames, track ids {sorted(ids)}, {kinds}, "
              f"{len(shifts)} warps, mean |translation| {np.mean(shifts):.2f} px")  # fmt: skip


if __name__ == "__main__":
    main()
