#!/usr/bin/env python3
"""Video benchmark: `lookout detect VIDEO` stage by stage beside ffmpeg decoding alone and ultralytics'
video predict on the same file, in one run (numbers for BENCHMARKS.md).

    swift build -c release --product lookout --product lookout-benchmarks
    .build/reference-venv-requirements-text/bin/python scripts/bench/video.py [--models demo,s] [--seconds 6]

The video: a 1280x720 H.264 (libx264, crf 23, yuv420p) MP4 at 30 fps panning over a demo scene, made by
Debian's ffmpeg under /tmp/lookout-bench (`--noise`: with temporal film grain, about as hard to decode as
camera footage). Every frame is processed, at 640 with 3 queries.

- ffmpeg: `ffmpeg -threads 1 -i VIDEO -f null -` (decoding alone, one thread) and the same with ffmpeg's
  own thread count: frames / wall time.
- Lookout (`lookout-benchmarks video`): decoding alone to BGR (one thread, and FFmpeg's choice), the network
  alone on frames in memory (letterbox to NMS), H.264 encoding alone, and the pipeline as `detect` runs it
  (decoding on its own thread ahead of the network), without and with the annotated video written. For the
  demo model also `lookout detect VIDEO --json` end to end (process start, model load and all).
- ultralytics: `YOLOWorld(pt).predict(source=VIDEO, stream=True)`, every frame, 2 torch threads, with 3
  random text embeddings (as scripts/bench/detector.py); for the demo model the n architecture with random
  weights (the demo is an n-scale YOLO-World v2 in safetensors, which ultralytics does not read).
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from detector import WORK, weights, with_queries  # noqa: E402

BENCH = os.path.join(ROOT, ".build", "release", "lookout-benchmarks")
LOOKOUT = os.path.join(ROOT, ".build", "release", "lookout")


def make_video(seconds, noise):
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, f"pan-720p-{seconds}s{'-noise' if noise else ''}.mp4")
    if not os.path.exists(path):
        scene = os.path.join(ROOT, "examples", "scenes", "scene-0019.jpg")
        grain = ",noise=alls=12:allf=t+u" if noise else ""
        subprocess.run(["ffmpeg", "-nostdin", "-y", "-loop", "1", "-framerate", "30", "-i", scene, "-vf",
                        "scale=w=1800:h=1000:force_original_aspect_ratio=increase,crop=1280:720:x='n*2':y='n'" + grain,
                        "-frames:v", str(30 * seconds), "-c:v", "libx264", "-crf", "23", "-pix_fmt", "yuv420p", path],
                       check=True, capture_output=True)
    return path


def ffmpeg_fps(video, frames, threads):
    arguments = ["ffmpeg", "-nostdin", "-loglevel", "error"] + (["-threads", str(threads)] if threads else [])
    start = time.perf_counter()
    subprocess.run(arguments + ["-i", video, "-f", "null", "-"], check=True)
    return frames / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="demo,s")
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--noise", action="store_true", help="film grain on every frame: a video that is harder to decode")
    args = parser.parse_args()
    video = make_video(args.seconds, args.noise)
    frames = 30 * args.seconds
    print(f"video: {video}, {frames} frames of 1280x720 H.264", flush=True)
    print(f"ffmpeg decode alone, 1 thread: {ffmpeg_fps(video, frames, 1):.1f} fps", flush=True)
    print(f"ffmpeg decode alone, its own threads: {ffmpeg_fps(video, frames, 0):.1f} fps", flush=True)
    import torch

    torch.set_num_threads(2)
    for model in args.models.split(","):
        detector = [] if model == "demo" else ["--detector", weights(model)]
        out = subprocess.run([BENCH, "video", "--video", video, "--imgsz", "640", "--queries", "3", "--frames", "30"]
                             + detector, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            print(f"{model}: Lookout {line}", flush=True)
        if model == "demo":
            start = time.perf_counter()
            subprocess.run([LOOKOUT, "detect", video, "-q", "star, circle, shape", "--json"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(f"demo: lookout detect VIDEO --json end to end: {frames / (time.perf_counter() - start):.2f} fps",
                  flush=True)
        from ultralytics import YOLOWorld

        architecture = "n" if model == "demo" else model
        yolo = with_queries(YOLOWorld(weights(architecture)), 3)
        count = 0
        start = time.perf_counter()
        for _ in yolo.predict(source=video, stream=True, imgsz=640, verbose=False):
            count += 1
        fps = count / (time.perf_counter() - start)
        print(f"{model}: ultralytics {architecture} video predict ({count} frames, torch {torch.__version__}): "
              f"{fps:.2f} fps", flush=True)


if __name__ == "__main__":
    main()
