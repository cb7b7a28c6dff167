#!/usr/bin/env python3
"""The web page of `lookout serve` in a real browser (headless Chromium through selenium).

    python scripts/web/check_page.py LOOKOUT [SCREENSHOT_DIR]

Indexes five example scenes into a temporary index, starts `LOOKOUT serve --port 0 --db INDEX` (the demo
model) and opens the page. Detect view: uploads a scene through the file input, types queries, waits for the
boxes and checks their number and labels against `LOOKOUT detect --json` for the same photo and queries;
changes the queries, then the confidence and IoU sliders, and checks again each time (the slider steps are
chosen so that the boxes change); checks in the server's /metrics that the photo was uploaded once and every
later answer came from the re-query endpoint. Search view: types a query (no Enter: the page searches as the
typing pauses, dropping answers a later keystroke overtook) and checks that the grid shows
the photos `LOOKOUT search --json` lists, in that order, each with its thumbnail loaded and its boxes drawn,
and that a click opens the photo. Then the same page at a phone's width, without sideways scrolling.
Camera: a second browser whose fake camera plays a video made from a demo scene by ffmpeg (a panning
window, Y4M); the Camera button starts it, and for three frames sent, then three more after the queries
are changed, the boxes drawn over the live picture (labels, scores, boxes and their place on the screen) must
equal `LOOKOUT detect --json` on the very PNG the page sent; never more than one request in flight; the
frames per second shown. YOLOE: a second server with the random YOLOE-11n-seg fixture; the masks the page
paints over the photo must cover exactly the pixels of `LOOKOUT detect --json`'s masks; a box dragged on the photo
(a visual prompt) must give what `LOOKOUT detect --prompt-box` gives for that box. YOLOE demo (`--model
demo-yoloe`) over an index of the example scenes that also stores a random prompt-free model's labels: a box
dragged around scene-0001's green circle, then "Search the index for this", must fill the grid with the API's
answer for that example, the scenes holding green circles first; a label chip on a card must narrow the grid to
the API's answer with that label, and its filter chip must undo it; a second photo opened keeps the first box as
an example beside one drawn on it (the API's answer for both, and a search by both). "Export as dataset" after a
search downloads the search's photos with boxes as a YOLO training set (checked in Python's zipfile). A video's
answer plays in a player with its boxes: a click on a timeline mark seeks to that frame and draws its boxes.
Keeps screenshots (laptop: detect, search, camera and masks; phone: detect) in SCREENSHOT_DIR (default .build/web-page).
Exits non-zero on any difference.
"""
import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENE = os.path.join(ROOT, "examples", "scenes", "scene-0003.jpg")


def detected(lookout: str, queries: str, conf: float, iou: float, extra: tuple = ()) -> list[str]:
    out = subprocess.run([lookout, "detect", SCENE, "-q", queries, "--conf", str(conf), "--iou", str(iou), "--json",
                          *extra],
                         capture_output=True, text=True, check=True).stdout
    return sorted(d["label"] for d in json.loads(out.splitlines()[0])["detections"])


def searched(lookout: str, index: str, query: str, extra: list[str] = []) -> list[tuple[str, int]]:
    out = subprocess.run([lookout, "search", query, "--db", index, "--top", "48", "--conf", "0.1", "--json", *extra],
                         capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [(os.path.basename(r["image"]), len(r["detections"])) for r in rows]


def detections_of(lookout: str, photo: str, queries: list[str], conf: float, iou: float) -> list[tuple]:
    out = subprocess.run([lookout, "detect", photo, "-q", ",".join(queries), "--conf", str(conf), "--iou", str(iou),
                          "--json"], capture_output=True, text=True, check=True).stdout
    return [(d["label"], d["score"], tuple(d["box"])) for d in json.loads(out.splitlines()[0])["detections"]]


def fake_camera_video(work: str) -> str:
    """A 640×480 Y4M video (Chromium's fake camera reads Y4M) panning over a demo scene."""
    path = os.path.join(work, "camera.y4m")
    scene = os.path.join(ROOT, "examples", "scenes", "scene-0019.jpg")
    subprocess.run(["ffmpeg", "-nostdin", "-y", "-loop", "1", "-framerate", "15", "-i", scene, "-vf",
                    "scale=w=960:h=600:force_original_aspect_ratio=increase,crop=640:480:x='n*4':y='n*2'",
                    "-frames:v", "60", "-pix_fmt", "yuv420p", path], check=True, capture_output=True)
    return path


def serve(lookout: str, arguments: list[str]) -> tuple[subprocess.Popen, str | None, str]:
    """`LOOKOUT serve --port 0 ARGUMENTS`, its URL once it listens (None, and its first line, if it does not)."""
    server = subprocess.Popen([lookout, "serve", "--port", "0"] + arguments, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    return server, line.strip().split("listening on ")[1] if "listening on " in line else None, line


@contextlib.contextmanager
def served_page(lookout: str, arguments: list[str], name: str, check):
    """`LOOKOUT serve … ARGUMENTS` with the page open in Chromium: (driver, wait, url), or None when the server did
    not start (a failed check `name`); the browser and server are stopped on leaving."""
    server, url, line = serve(lookout, arguments)
    driver = None
    try:
        if url is None:
            check(name, False, f"did not start: {line!r}")
            yield None
            return
        driver = chromium()
        driver.get(url)
        yield driver, WebDriverWait(driver, 60), url
    finally:
        stop(server, driver)


def stop(server: subprocess.Popen, driver) -> None:
    """Closes the browser (if one was opened) and stops the server, killed when it has not stopped within 10 s."""
    if driver:
        driver.quit()
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()


def chromium(*extra: str):
    """Debian's headless Chromium through its chromedriver, with `extra` command-line switches."""
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                     "--disable-dev-shm-usage", "--hide-scrollbars") + extra:
        options.add_argument(argument)
    binary = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(p)), None)
    if binary:
        options.binary_location = binary
    service = Service("/usr/bin/chromedriver") if os.path.exists("/usr/bin/chromedriver") else Service()
    return webdriver.Chrome(options=options, service=service)


def check_camera_tracking(driver, wait, lookout: str, work: str, check) -> None:
    """Ticks "track": the frames the page sent in its tracking session, made into a lossless video and given to
    `lookout track`, give the ids, labels, scores and boxes the server answered (and the page drew)."""
    count = 12
    driver.find_element(By.ID, "track").click()
    wait.until(lambda d: d.execute_script("return window.lookoutCamera.tracked.length") >= count)
    state = driver.execute_async_script("""
        const done = arguments[arguments.length - 1], count = arguments[0];
        const frames = window.lookoutCamera.tracked.slice(0, count);
        const tags = [...document.getElementById("camera-stage").querySelectorAll(".box span")].map((s) => s.textContent);
        const read = (blob) => new Promise((resolve) => {
          const reader = new FileReader();
          reader.onload = () => resolve(reader.result);
          reader.readAsDataURL(blob);
        });
        Promise.all(frames.map((f) => read(f.blob))).then((pngs) => done({
          pngs, replies: frames.map((f) => f.reply), queries: frames[0].queries, tags,
          iou: document.getElementById("iou").value }));
    """, count)
    folder = os.path.join(work, "tracked")
    os.makedirs(folder, exist_ok=True)
    for i, png in enumerate(state["pngs"]):
        with open(os.path.join(folder, f"{i:04d}.png"), "wb") as f:
            f.write(base64.b64decode(png.split(",", 1)[1]))
    video = os.path.join(folder, "frames.mkv")
    subprocess.run(["ffmpeg", "-nostdin", "-y", "-framerate", "10", "-i", os.path.join(folder, "%04d.png"),
                    "-c:v", "ffv1", "-pix_fmt", "bgr0", video], check=True, capture_output=True)
    out = subprocess.run([lookout, "track", video, "-q", ",".join(state["queries"]), "--iou", str(state["iou"]),
                          "--json"], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines() if '"frame"' in line]

    def shown(detections):
        return [(d.get("track_id"), d["label"], d["score"], tuple(d["box"])) for d in detections]

    page = [shown(r["detections"]) for r in state["replies"]]
    want = [shown(line["detections"]) for line in lines]
    ids = {d[0] for frame in page for d in frame if d[0] is not None}
    check(f"camera tracking: {count} frames equal `lookout track` on them", page == want,
          f"page ids {[[d[0] for d in f] for f in page]}, lookout track {[[d[0] for d in f] for f in want]}")
    check("camera tracking: ids over the boxes", len(ids) > 0 and (not state["tags"] or any(t.startswith("#") for t in state["tags"])),
          f"ids {sorted(ids)}, tags {state['tags']}")
    driver.find_element(By.ID, "track").click()


def check_video_upload(lookout: str, url: str, shots: str, check) -> None:
    """The tracking video chosen in the page: its timeline gives, per query, the first and last time and the
    frames where `lookout detect VIDEO` found it, and a mark per such frame."""
    queries = ["red circle", "blue square", "yellow triangle", "green star", "purple heart"]
    video = os.path.join(ROOT, "examples", "tracking", "shapes.mp4")
    out = subprocess.run([lookout, "detect", video, "-q", ",".join(queries), "--json"], capture_output=True, text=True,
                         check=True).stdout
    want = {}
    for line in out.splitlines():
        frame = json.loads(line)
        for label in {d["label"] for d in frame["detections"]}:
            first, _, frames = want.get(label, (frame["time"], 0, 0))
            want[label] = (first, frame["time"], frames + 1)
    driver = chromium()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 120)
        box = driver.find_element(By.ID, "queries")
        box.clear()
        box.send_keys(", ".join(queries))
        driver.find_element(By.ID, "video-file").send_keys(video)
        wait.until(lambda d: d.execute_script("return window.lookoutVideo.reply !== null"))
        rows = driver.execute_script("""
            return [...document.querySelectorAll('#timeline .row')].map((r) => ({
              label: r.dataset.label, when: r.querySelector('.when').textContent,
              ticks: r.querySelectorAll('.tick').length }));""")
        shown = {r["label"]: r for r in rows}
        for label in queries:
            first, last, frames = want.get(label, (None, None, 0))
            text = f"{first:.2f}–{last:.2f} s, {frames} frames" if frames else "not found"
            row = shown.get(label, {})
            check(f"video timeline '{label}'", row.get("when") == text and row.get("ticks") == frames,
                  f"page {row.get('when')!r} with {row.get('ticks')} marks, lookout detect {text!r}")
        check("the video timeline has something on it", sum(w[2] for w in want.values()) > 0, f"{want}")
        # The player: a click on a mark seeks there and draws that frame's boxes (labels as detect gives them).
        frames = {json.loads(line)["frame"]: json.loads(line) for line in out.splitlines()}
        ticks = driver.find_elements(By.CSS_SELECTOR, "#timeline .tick")
        chosen = ticks[len(ticks) // 2] if ticks else None
        if chosen is None:
            check("video player: a mark seeks to its frame", False, "no marks")
        else:
            frame = int(chosen.get_attribute("data-frame"))
            driver.execute_script("arguments[0].click()", chosen)
            wait.until(lambda d: d.find_element(By.ID, "video-stage").get_attribute("data-frame") == str(frame))
            drawn = sorted(b.get_attribute("data-label") for b in driver.find_elements(By.CSS_SELECTOR, "#video-stage .box"))
            expected = sorted(d["label"] for d in frames[frame]["detections"])
            wait.until(lambda d: d.execute_script("const p = document.getElementById('video-player');"
                                                  "return p.readyState >= 1 && !p.seeking"))
            position = driver.execute_script("return document.getElementById('video-player').currentTime")
            check("video player: a mark seeks to its frame and draws its boxes",
                  drawn == expected and bool(expected) and abs(position - frames[frame]["time"]) < 0.05,
                  f"frame {frame} at {frames[frame]['time']} s: player at {position}, boxes {drawn}, detect {expected}")
            # Playing: the boxes follow the picture (the frame drawn changes as the video plays).
            driver.execute_script("const p = document.getElementById('video-player'); p.currentTime = 0; p.play();")
            try:
                WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, "video-stage").get_attribute("data-frame")
                                                not in ("", str(frame), "0"))
                followed = True
            except Exception:
                followed = False
            check("video player: the boxes follow the video as it plays", followed,
                  driver.execute_script("const p = document.getElementById('video-player');"
                                        "return 'time ' + p.currentTime + ', error ' + (p.error && p.error.code)"))
        driver.save_screenshot(os.path.join(shots, "video.png"))
    finally:
        driver.quit()


def check_camera(lookout: str, url: str, work: str, shots: str, check) -> None:
    driver = chromium("--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                      "--use-file-for-fake-video-capture=" + fake_camera_video(work))
    try:
        driver.set_script_timeout(60)
        driver.get(url)
        wait = WebDriverWait(driver, 90)
        queries = driver.find_element(By.ID, "queries")
        queries.clear()
        queries.send_keys("star, circle, shape")
        driver.find_element(By.ID, "camera").click()

        def frame_count() -> int:
            return driver.execute_script("return window.lookoutCamera.sent")

        def compare_frames(count: int, want_queries: list[str], name: str) -> int:
            """Checks `count` frames answered for `want_queries`; returns the boxes seen."""
            seen = 0
            for _ in range(count):
                start = frame_count()
                wait.until(lambda d: frame_count() > start and d.execute_script(
                    "const l = window.lookoutCamera.log; return l[l.length - 1].queries.join(',')") == ",".join(
                        want_queries))
                # The drawn boxes and the frame they belong to, read in one go (the page cannot run in between).
                state = driver.execute_async_script("""
                    const done = arguments[arguments.length - 1];
                    const log = window.lookoutCamera.log, last = log[log.length - 1];
                    const stage = document.getElementById("camera-stage");
                    const video = document.getElementById("camera-video").getBoundingClientRect();
                    const boxes = [...stage.querySelectorAll(".box")].map((b) => {
                      const r = b.getBoundingClientRect();
                      return { label: b.dataset.label, score: b.dataset.score, box: b.dataset.box,
                               left: r.left - video.left, top: r.top - video.top, right: r.right - video.left,
                               bottom: r.bottom - video.top };
                    });
                    const drawnFrame = stage.dataset.frame, shown = [video.width, video.height];
                    const reader = new FileReader();
                    reader.onload = () => done({ frame: last.frame, drawnFrame, boxes, shown, queries: last.queries,
                                                 conf: last.conf, iou: last.iou, reply: last.reply, png: reader.result });
                    reader.readAsDataURL(last.blob);
                """)
                png = os.path.join(work, f"camera-frame-{state['frame']}.png")
                with open(png, "wb") as f:
                    f.write(base64.b64decode(state["png"].split(",", 1)[1]))
                want = detections_of(lookout, png, state["queries"], state["conf"], state["iou"])
                width, height = state["reply"]["width"], state["reply"]["height"]
                drawn = [(b["label"], float(b["score"]), tuple(float(v) for v in b["box"].split(",")))
                         for b in state["boxes"]]
                # Where the boxes sit on the screen: the frame's pixels scaled to the picture shown (±1.5 px).
                scale_x, scale_y = state["shown"][0] / width, state["shown"][1] / height
                placed = all(abs(b["left"] - d[2][0] * scale_x) <= 1.5 and abs(b["top"] - d[2][1] * scale_y) <= 1.5
                             and abs(b["right"] - d[2][2] * scale_x) <= 1.5
                             and abs(b["bottom"] - d[2][3] * scale_y) <= 1.5
                             for b, d in zip(state["boxes"], drawn))
                check(f"{name}, frame {state['frame']} ({width}×{height})",
                      str(state["drawnFrame"]) == str(state["frame"]) and drawn == want and placed,
                      f"page {[(l, round(s, 4)) for l, s, _ in drawn]}, detect {[(l, round(s, 4)) for l, s, _ in want]}"
                      + ("" if placed else ", boxes misplaced on screen"))
                seen += len(want)
            return seen

        seen = compare_frames(3, ["star", "circle", "shape"], "camera 'star, circle, shape'")
        check("the camera's frames hold something to find", seen > 0, f"{seen} boxes in 3 frames")
        queries.send_keys(Keys.CONTROL, "a")
        queries.send_keys("ring, square, blue shape, shape")
        seen = compare_frames(3, ["ring", "square", "blue shape", "shape"], "camera after typing new queries")
        in_flight = driver.execute_script("return window.lookoutCamera.maxInFlight")
        check("never more than one request in flight", in_flight == 1, f"at most {in_flight}")
        fps = driver.find_element(By.ID, "camera-fps").text
        check("frames per second shown", re.fullmatch(r"\d+\.\d fps", fps) is not None and float(fps.split()[0]) > 0,
              repr(fps))
        driver.save_screenshot(os.path.join(shots, "camera.png"))
        check_camera_tracking(driver, wait, lookout, work, check)
        driver.find_element(By.ID, "camera").click()
        stopped = driver.execute_script("return !window.lookoutCamera.running && "
                                        "document.getElementById('camera-stage').hidden")
        check("the button stops the camera", stopped, f"stopped {stopped}")
    finally:
        driver.quit()


def mask_pixels(counts: str, height: int, width: int) -> set[int]:
    """Row-major indices of the pixels a COCO compressed RLE mask sets."""
    runs, p = [], 0
    while p < len(counts):
        x, shift, more = 0, 0, True
        while more:
            c = ord(counts[p]) - 48
            p += 1
            x |= (c & 0x1F) << shift
            more = bool(c & 0x20)
            shift += 5
            if not more and c & 0x10:
                x |= -1 << shift
        if len(runs) > 2:
            x += runs[-2]
        runs.append(x)
    pixels, position = set(), 0
    for index, run in enumerate(runs):
        if index % 2:
            pixels.update((q % height) * width + q // height for q in range(position, position + run))
        position += run
    return pixels


def check_yoloe_masks(lookout: str, shots: str, check) -> None:
    """A YOLOE segmentation model (the random YOLOE-11n fixture with its MobileCLIP text fixture): the page
    overlays each detection's mask, and the pixels it paints are the union of `LOOKOUT detect --json`'s masks."""
    model = ["--detector", os.path.join(ROOT, "Tests", "Fixtures", "yoloe", "yoloe-11n-seg-random.pt"),
             "--text-model", os.path.join(ROOT, "Tests", "Fixtures", "weights", "mobileclip-tiny-random.ts"),
             "--imgsz", "352"]
    photo = os.path.join(ROOT, "examples", "photos", "chelsea.jpg")
    queries = "cat, a tabby cat on a sofa, red car, sky"
    with served_page(lookout, model, "YOLOE server", check) as opened:
        if opened is None:
            return
        driver, wait, _ = opened
        driver.execute_script("const c = document.getElementById('conf'); c.value = '0.2';"
                              "c.dispatchEvent(new Event('input'));")
        field = driver.find_element(By.ID, "queries")
        field.clear()
        field.send_keys(queries)
        driver.find_element(By.ID, "file").send_keys(photo)
        wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == "done"
                   and len(d.find_elements(By.CSS_SELECTOR, "#detect-stage .box")) > 0)
        out = subprocess.run([lookout, "detect", photo, "-q", queries, "--conf", "0.2", "--json"] + model,
                             capture_output=True, text=True, check=True).stdout
        answer = json.loads(out.splitlines()[0])
        height, width = answer["height"], answer["width"]
        union: set[int] = set()
        for d in answer["detections"]:
            union |= mask_pixels(d["mask"]["counts"], height, width)
        painted = driver.execute_script(
            "const c = document.querySelector('#detect-stage canvas.masks'); if (!c) return [-1, -1];"
            "const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
            "for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++; return [n, Number(c.dataset.masks)];")
        check("YOLOE masks overlaid as detect gives them",
              painted[0] == len(union) and painted[1] == len(answer["detections"]) and len(union) > 0,
              f"page painted {painted[0]} pixels of {painted[1]} masks, detect's masks cover {len(union)} pixels "
              f"of {len(answer['detections'])}")
        driver.save_screenshot(os.path.join(shots, "masks.png"))

        # A visual prompt: no typed queries, a box dragged on the photo; the answer must be `detect --prompt-box`'s.
        driver.execute_script("const q = document.getElementById('queries'); q.value = '';"
                              "q.dispatchEvent(new Event('input'));"
                              "const c = document.getElementById('conf'); c.value = '0.05';"
                              "c.dispatchEvent(new Event('input'));")
        wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") != "waiting")
        before = driver.find_element(By.ID, "status").get_attribute("data-sequence") or ""
        image = driver.find_element(By.ID, "photo")
        size = image.size
        ActionChains(driver).move_to_element_with_offset(image, -size["width"] // 4, -size["height"] // 4) \
            .click_and_hold().move_by_offset(size["width"] // 3, size["height"] // 3).release().perform()
        wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == "done"
                   and (d.find_element(By.ID, "status").get_attribute("data-sequence") or "") != before)
        marks = [m.get_attribute("data-box") for m in driver.find_elements(By.CSS_SELECTOR, "#detect-stage .prompt")]
        shown = sorted((b.get_attribute("data-label"), round(float(b.get_attribute("data-score")), 4))
                       for b in driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box"))
        out = subprocess.run([lookout, "detect", photo, "--prompt-box", marks[0] + ":example", "--conf", "0.05", "--json"]
                             + model, capture_output=True, text=True, check=True).stdout if len(marks) == 1 else "{}"
        want = sorted((d["label"], round(d["score"], 4)) for d in json.loads(out.splitlines()[0]).get("detections", []))
        check("YOLOE visual prompt drawn on the photo", len(marks) == 1 and shown == want and bool(want),
              f"box {marks}: page {shown}, detect --prompt-box {want}")
        driver.save_screenshot(os.path.join(shots, "visual-prompt.png"))


def check_yoloe_demo_search(lookout: str, work: str, shots: str, check) -> None:
    """Search the index by an example drawn on the page, and narrow a search by a prompt-free label."""
    scenes = os.path.join(ROOT, "examples", "scenes")
    with open(os.path.join(ROOT, "scripts", "demo", "captions.json")) as f:
        fine = json.load(f)["fine"]
    classes = os.path.join(work, "fine.txt")
    with open(classes, "w") as f:
        f.write("\n".join(fine) + "\n")
    index = os.path.join(work, "yoloe.sqlite")
    subprocess.run([lookout, "index", scenes, "--db", index, "--model", "demo-yoloe", "--classes", classes,
                    "--prompt-free", os.path.join(ROOT, "Tests", "Fixtures", "yoloe", "yoloe-11n-seg-pf-random.pt"),
                    "--prompt-free-conf", "0.05", "--plain"], check=True, capture_output=True)
    with served_page(lookout, ["--model", "demo-yoloe", "--db", index], "YOLOE demo server", check) as opened:
        if opened is None:
            return
        driver, wait, url = opened

        def api(path: str) -> dict:
            with urllib.request.urlopen(url.rstrip("/") + path) as response:
                return json.load(response)

        def grid() -> list[str]:
            return [c.get_attribute("data-name") for c in driver.find_elements(By.CSS_SELECTOR, "#results .card")]

        def drag(natural_width: int, x1: float, y1: float, x2: float, y2: float) -> None:
            """Drags a box (x1,y1 to x2,y2 in the photo's pixels) on the photo and waits for its answer."""
            image = driver.find_element(By.ID, "photo")
            size = image.size
            scale = size["width"] / natural_width
            before = driver.find_element(By.ID, "status").get_attribute("data-sequence") or ""
            ActionChains(driver).move_to_element_with_offset(
                image, round(x1 * scale - size["width"] / 2), round(y1 * scale - size["height"] / 2)) \
                .click_and_hold().move_by_offset(round((x2 - x1) * scale), round((y2 - y1) * scale)).release().perform()
            wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == "done"
                       and (d.find_element(By.ID, "status").get_attribute("data-sequence") or "") != before)

        def example_search() -> list[str]:
            """The API's answer for the example the page searched by (each box on its photo's id)."""
            boxes = driver.execute_script(
                "return example.boxes.map((b) => b.box.map((v) => v.toFixed(1)).join(',') + '@' + b.image_id)")
            query = "&".join(["q=example", "top=48"] + [f"prompt_box={b}" for b in boxes])
            return [r["name"] for r in api("/api/v1/search?" + query)["results"]]

        def searched(previous: str) -> None:
            wait.until(lambda d: d.find_element(By.ID, "search-status").get_attribute("data-state") == "done"
                       and d.find_element(By.ID, "search-status").text != previous)

        # A box around scene-0001's green circle (309,263 to 388,343 in its 406×353 pixels), dragged on the photo.
        driver.find_element(By.ID, "file").send_keys(os.path.join(scenes, "scene-0001.jpg"))
        wait.until(lambda d: d.find_element(By.ID, "photo").get_attribute("naturalWidth") not in (None, "0"))
        wait.until(lambda d: d.execute_script("return serving.index"))
        drag(406, 309, 263, 388, 343)
        button = driver.find_element(By.ID, "search-example")
        check("YOLOE demo: a marked example can be searched for", button.is_displayed(), "button shown")
        previous = driver.find_element(By.ID, "search-status").text
        button.click()
        searched(previous)
        shown = grid()
        want = example_search()
        with open(os.path.join(scenes, "truth.json")) as f:
            truth = {i["file"]: [o["label"] for o in i["objects"]] for i in json.load(f)["images"]}
        holding = sorted(n for n, objects in truth.items() if "green circle" in objects)
        check("YOLOE demo: search by a drawn example",
              shown == want and sorted(shown[:len(holding)]) == holding,
              f"page {shown[:5]}…, API {want[:5]}…, scenes with a green circle {holding}")
        driver.save_screenshot(os.path.join(shots, "search-by-example.png"))

        # Examples on two photos: the circle's box stays an example when scene-0003 is opened, a box around its
        # green circle (4,284 to 135,391 in its 554×391 pixels) is added; the photo's answer is the API's for both boxes (the first by its photo's id), and "Search the
        # index for this" searches by both.
        driver.find_element(By.ID, "tab-detect").click()
        first_id = driver.execute_script("return imageId")
        before = driver.find_element(By.ID, "status").get_attribute("data-sequence") or ""
        driver.find_element(By.ID, "file").send_keys(os.path.join(scenes, "scene-0003.jpg"))
        wait.until(lambda d: (d.find_element(By.ID, "status").get_attribute("data-sequence") or "") != before
                   and d.find_element(By.ID, "status").get_attribute("data-state") == "done")
        summary = driver.find_element(By.ID, "prompt-summary").text
        drag(554, 4, 284, 132, 388)
        second_id, examples, line, limits = driver.execute_script("return [imageId, allExamples(), queryLine(), thresholds()]")
        shown = sorted((b.get_attribute("data-label"), round(float(b.get_attribute("data-score")), 4))
                       for b in driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box"))
        request = urllib.request.Request(
            url.rstrip("/") + f"/api/v1/images/{second_id}/detect", method="POST",
            data=json.dumps({"q": line, "conf": limits["conf"], "iou": limits["iou"], "prompt_boxes": examples}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            answer = json.load(response)
        want = sorted((d["label"], round(d["score"], 4)) for d in answer["detections"])
        on = sorted({e.get("image_id", second_id) for e in examples})
        check("YOLOE demo: examples on two photos make one query",
              summary.startswith("+ 1 example on 1 earlier photo") and len(examples) == 2
              and on == sorted({first_id, second_id}) and shown == want and bool(want),
              f"summary {summary!r}, examples on {on}: page {shown}, API {want}")
        previous = driver.find_element(By.ID, "search-status").text
        driver.find_element(By.ID, "search-example").click()
        searched(previous)
        shown = grid()
        boxes = driver.execute_script("return example.boxes.length")
        want = example_search()
        filters = driver.find_element(By.ID, "search-filters").text
        check("YOLOE demo: search by examples on two photos",
              shown == want and boxes == 2 and "on 2 photos" in filters and bool(shown),
              f"page {shown[:5]}…, API {want[:5]}…, filter {filters!r}")

        # A label chip narrows a word search to the photos the prompt-free model labelled so.
        driver.execute_script("document.querySelector('#search-filters .chip').click()")  # drop the example
        field = driver.find_element(By.ID, "search-query")
        field.clear()
        previous = driver.find_element(By.ID, "search-status").text
        field.send_keys("shape")
        searched(previous)
        wait.until(lambda d: d.find_element(By.ID, "search-status").get_attribute("data-query") == "shape")
        unfiltered = grid()
        # A label of the first photo that some other photo lacks, so that the chip must narrow the grid.
        cards = [[c.get_attribute("data-label") for c in card.find_elements(By.CSS_SELECTOR, ".chip")]
                 for card in driver.find_elements(By.CSS_SELECTOR, "#results .card")]
        label = next((l for l in cards[0] if any(l not in other for other in cards)), None) if cards else None
        if label is None:
            check("YOLOE demo: a label chip narrows the search", False, f"no label to narrow by among {cards[:3]}")
            return
        chip = driver.find_element(By.CSS_SELECTOR, f"#results .card .chip[data-label='{label}']")
        previous = driver.find_element(By.ID, "search-status").text
        chip.click()
        searched(previous)
        shown = grid()
        want = [r["name"] for r in api("/api/v1/search?" + urllib.parse.urlencode(
            {"q": "shape", "top": 48, "label": label}))["results"]]
        every = all(label in [c.get_attribute("data-label") for c in card.find_elements(By.CSS_SELECTOR, ".chip")]
                    for card in driver.find_elements(By.CSS_SELECTOR, "#results .card"))
        check("YOLOE demo: a label chip narrows the search",
              shown == want and every and 0 < len(shown) < len(unfiltered),
              f"label {label}: page {len(shown)} photos, API {len(want)}, unfiltered {len(unfiltered)}")
        previous = driver.find_element(By.ID, "search-status").text
        driver.find_element(By.CSS_SELECTOR, "#search-filters .chip").click()
        searched(previous)
        check("YOLOE demo: the label filter undone", grid() == unfiltered, f"{len(grid())} photos again")


def check_export(driver, wait, url: str, check) -> None:
    """Clicks "Export as dataset" (YOLO) after a search: the page downloads /api/v1/search/dataset with the
    search's own parameters; the archive opens in Python's zipfile (every CRC checked) and holds a photo and a
    label file per card with boxes, each label file a line per box drawn on that card, and data.yaml."""
    import io
    import zipfile
    check("the export button shows after a search with boxes",
          driver.find_element(By.ID, "export-button").is_displayed(), "export controls hidden")
    driver.find_element(By.ID, "export-button").click()
    wait.until(lambda d: d.execute_script("return window.lookoutExport !== null"))
    exported = driver.execute_script("return window.lookoutExport")
    with urllib.request.urlopen(url.rstrip("/") + exported["url"]) as response:
        archive = response.read()
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        bad = z.testzip()
        names = z.namelist()
        labels = {n.rsplit("/", 1)[1].rsplit(".", 1)[0]: z.read(n).decode().splitlines()
                  for n in names if n.startswith("labels/") and n.endswith(".txt")}
        yaml = z.read("data.yaml").decode() if "data.yaml" in names else ""
    cards = {c.get_attribute("data-name").rsplit(".", 1)[0]: len(c.find_elements(By.CSS_SELECTOR, ".box"))
             for c in driver.find_elements(By.CSS_SELECTOR, "#results .card")}
    with_boxes = {k: v for k, v in cards.items() if v > 0}
    got = {k: len(v) for k, v in labels.items()}
    check("export as dataset: the grid's boxes as YOLO labels in a ZIP archive",
          bad is None and exported["size"] == len(archive) and got == with_boxes and "names:" in yaml
          and "format=yolo" in exported["url"] and exported["name"].endswith("-yolo.zip"),
          f"archive {exported['name']} {exported['size']} bytes (API {len(archive)}), labels {got}, cards {with_boxes}")


def metric(url: str, route: str, method: str) -> int:
    text = urllib.request.urlopen(url + "metrics").read().decode()
    pattern = re.compile(r"^hb_requests\{(.*)\} (\d+)$", re.M)
    total = 0
    for labels, value in pattern.findall(text):
        if f'http_route="{route}"' in labels and f'http_request_method="{method}"' in labels:
            total += int(value)
    return total


def main() -> None:
    lookout = os.path.abspath(sys.argv[1])
    shots = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, ".build", "web-page")
    os.makedirs(shots, exist_ok=True)
    work = tempfile.mkdtemp(prefix="lookout-page-")
    photos = os.path.join(work, "photos")
    os.makedirs(photos)
    for n in range(1, 6):
        shutil.copy(os.path.join(ROOT, "examples", "scenes", f"scene-{n:04d}.jpg"), photos)
    index = os.path.join(work, "index.sqlite")
    subprocess.run([lookout, "index", photos, "--db", index, "--plain"], check=True, capture_output=True)
    server = subprocess.Popen([lookout, "serve", "--port", "0", "--db", index], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    driver = None
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append((name, ok, detail))
        print(f"{'ok' if ok else 'FAIL'}  {name}: {detail}", flush=True)

    try:
        line = server.stdout.readline()
        if "listening on " not in line:
            sys.exit(f"lookout serve did not start: {line!r} {server.stderr.read()}")
        url = line.strip().split("listening on ")[1]
        driver = chromium()
        driver.get(url)
        wait = WebDriverWait(driver, 60)

        def sequence() -> str:
            return driver.find_element(By.ID, "status").get_attribute("data-sequence") or ""

        def answered(previous: str) -> None:
            wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == "done"
                       and sequence() != previous)

        def labels() -> list[str]:
            return sorted(b.get_attribute("data-label")
                          for b in driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box"))

        def slide(name: str, value: float) -> None:
            driver.execute_script(f"const c = document.getElementById('{name}'); c.value = '{value}';"
                                  "c.dispatchEvent(new Event('input'));")

        # Detect: upload, type, re-query, sliders.
        queries = driver.find_element(By.ID, "queries")
        queries.clear()
        queries.send_keys("star, circle")
        before = sequence()
        driver.find_element(By.ID, "file").send_keys(SCENE)
        answered(before)
        want = detected(lookout, "star, circle", 0.25, 0.7)
        check("upload, 'star, circle'", labels() == want and bool(want), f"page {labels()}, detect {want}")

        shapes = "star, circle, triangle, hexagon, square"
        before = sequence()
        queries.send_keys(", triangle, hexagon, square")  # typed key by key: the page waits for a pause
        answered(before)
        want = detected(lookout, shapes, 0.25, 0.7)
        check(f"re-query '{shapes}'", labels() == want, f"page {labels()}, detect {want}")
        previous = want

        before = sequence()
        slide("conf", 0.9)
        answered(before)
        want = detected(lookout, shapes, 0.9, 0.7)
        check("confidence 0.90", labels() == want and want != previous, f"page {labels()}, detect {want}")
        previous = want

        before = sequence()
        slide("conf", 0.01)
        slide("iou", 0.1)
        answered(before)
        want = detected(lookout, shapes, 0.01, 0.1)
        check("confidence 0.01, IoU 0.10", labels() == want and want != previous, f"page {labels()}, detect {want}")

        uploads = metric(url, "/api/v1/detect", "POST")
        requeries = metric(url, "/api/v1/images/{image_id}/detect", "POST")
        check("one upload, the rest re-queries", uploads == 1 and requeries == 3,
              f"{uploads} POST /api/v1/detect, {requeries} POST /api/v1/images/{{image_id}}/detect")
        # The slice switch: tiles of 320 (sliced inference), as lookout detect --slice 320; then the whole photo
        # again, from its kept features.
        def choose_slice(value: str) -> None:
            driver.execute_script(f"const c = document.getElementById('slice'); c.value = '{value}';"
                                  "c.dispatchEvent(new Event('change'));")

        before = sequence()
        choose_slice("320")
        answered(before)
        want = detected(lookout, shapes, 0.01, 0.1, ("--slice", "320"))
        whole = detected(lookout, shapes, 0.01, 0.1)
        check("slice: tiles of 320", labels() == want and want != whole, f"page {labels()}, detect {want}")
        before = sequence()
        choose_slice("")
        answered(before)
        want = detected(lookout, shapes, 0.01, 0.1)
        check("slice off again", labels() == want, f"page {labels()}, detect {want}")
        label_tags = driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box span")
        check("labels drawn with their scores", bool(label_tags) and all(
            re.fullmatch(r".+ \d\.\d\d", t.text) for t in label_tags), f"{[t.text for t in label_tags]}")
        driver.save_screenshot(os.path.join(shots, "detect.png"))

        # Search as you type: the grid, in the order of lookout search, thumbnails and boxes, a click opens the
        # photo.
        driver.find_element(By.ID, "tab-search").click()
        # The tower that finds scenes is named: the demo model's multilingual SigLIP tower, its scores calibrated
        # (the calibration its config.json records).
        tower = driver.find_element(By.ID, "tower")
        wait.until(lambda d: d.find_element(By.ID, "tower").text != "")
        check("search names its tower", "SigLIP tower scene-tower" in tower.text
              and "calibrated" in tower.text, tower.text)
        box = driver.find_element(By.ID, "search-query")
        box.send_keys("red shape")  # typed, no Enter: the page searches as the typing pauses
        want = searched(lookout, index, "red shape")
        wait.until(lambda d: d.find_element(By.ID, "search-status").get_attribute("data-query") == "red shape"
                   and len(d.find_elements(By.CSS_SELECTOR, "#results .card")) == len(want) and all(
            d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
            for img in d.find_elements(By.CSS_SELECTOR, "#results .card img")))
        cards = driver.find_elements(By.CSS_SELECTOR, "#results .card")
        got = [(c.get_attribute("data-name"), len(c.find_elements(By.CSS_SELECTOR, ".box"))) for c in cards]
        check("search 'red shape': photos in order, with their boxes", got == want and bool(want),
              f"page {got}, search {want}")
        driver.save_screenshot(os.path.join(shots, "search.png"))
        # The exact scan, for comparison (issue 49): the switch asks the API with scan=true, and the grid holds
        # what `lookout search --scan` lists.
        driver.find_element(By.ID, "search-scan").click()
        want_scan = searched(lookout, index, "red shape", ["--scan"])
        wait.until(lambda d: d.execute_script(
            "return performance.getEntriesByType('resource').some((e) => e.name.includes('scan=true'))")
                   and d.find_element(By.ID, "search-status").get_attribute("data-state") == "done"
                   and len(d.find_elements(By.CSS_SELECTOR, "#results .card")) == len(want_scan))
        scanned = [(c.get_attribute("data-name"), len(c.find_elements(By.CSS_SELECTOR, ".box")))
                   for c in driver.find_elements(By.CSS_SELECTOR, "#results .card")]
        check("the exact-scan switch: scan=true sent, the scan's photos shown", scanned == want_scan,
              f"page {scanned}, search --scan {want_scan}")
        # "Export as dataset": the download is /api/v1/search/dataset with the grid's search, a ZIP archive whose
        # YOLO labels hold the grid's boxes.
        check_export(driver, wait, url, check)
        cards = driver.find_elements(By.CSS_SELECTOR, "#results .card")
        want = want_scan
        cards[0].click()
        wait.until(lambda d: d.execute_script(
            "const v = document.getElementById('viewer'), i = document.getElementById('viewer-photo');"
            "return v.open && i.complete && i.naturalWidth > 0"))
        shown = len(driver.find_elements(By.CSS_SELECTOR, "#viewer .box"))
        check("a click opens the photo with its boxes", shown == want[0][1], f"{shown} boxes, search {want[0][1]}")
        driver.find_element(By.CSS_SELECTOR, "#viewer button").click()
        # A query in Chinese ("blue circle"): the demo's multilingual tower reads it; the grid holds what `lookout
        # search` lists (the scan switch is still on).
        box.clear()
        box.send_keys("蓝色圆形")
        want = searched(lookout, index, "蓝色圆形", ["--scan"])
        wait.until(lambda d: d.find_element(By.ID, "search-status").get_attribute("data-query") == "蓝色圆形"
                   and d.find_element(By.ID, "search-status").get_attribute("data-state") == "done"
                   and len(d.find_elements(By.CSS_SELECTOR, "#results .card")) == len(want))
        got = [(c.get_attribute("data-name"), len(c.find_elements(By.CSS_SELECTOR, ".box")))
               for c in driver.find_elements(By.CSS_SELECTOR, "#results .card")]
        check("search '蓝色圆形' (Chinese): the photos of lookout search, in order", got == want and bool(want),
              f"page {got}, search {want}")

        # A phone's width: no sideways scrolling, the photo fits.
        driver.set_window_size(390, 844)
        driver.find_element(By.ID, "tab-detect").click()
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        photo_width = driver.execute_script("return document.getElementById('photo').getBoundingClientRect().right")
        inner = driver.execute_script("return window.innerWidth")
        check("phone width: nothing wider than the screen", overflow <= 0 and photo_width <= inner,
              f"overflow {overflow} px, photo right edge {photo_width:.0f} of {inner}")
        driver.save_screenshot(os.path.join(shots, "phone.png"))
        check_camera(lookout, url, work, shots, check)
        check_video_upload(lookout, url, shots, check)
        check_yoloe_masks(lookout, shots, check)
        check_yoloe_demo_search(lookout, work, shots, check)
        print(f"screenshots: {shots}/detect.png, search.png, phone.png, camera.png, masks.png")
    finally:
        stop(server, driver)
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok, _ in checks if not ok]
    print(f"page: {len(checks) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
