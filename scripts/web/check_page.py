#!/usr/bin/env python3
"""The web page of `lookout serve` in a real browser (headless Chromium through selenium).

    python scripts/web/check_page.py LOOKOUT [SCREENSHOT_DIR]

Indexes five example scenes into a temporary index, starts `LOOKOUT serve --port 0 --db INDEX` (the demo
model) and opens the page. Detect view: uploads a scene through the file input, types queries, waits for the
boxes and checks their number and labels against `LOOKOUT detect --json` for the same photo and queries;
changes the queries, then the confidence and IoU sliders, and checks again each time (the slider steps are
chosen so that the boxes change); checks in the server's /metrics that the photo was uploaded once and every
later answer came from the re-query endpoint. Search view: searches the index, checks that the grid shows
the photos `LOOKOUT search --json` lists, in that order, each with its thumbnail loaded and its boxes drawn,
and that a click opens the photo. Then the same page at a phone's width, without sideways scrolling.
Keeps screenshots (laptop: detect and search; phone: detect) in SCREENSHOT_DIR (default .build/web-page).
Exits non-zero on any difference.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENE = os.path.join(ROOT, "examples", "scenes", "scene-0003.jpg")


def detected(lookout: str, queries: str, conf: float, iou: float) -> list[str]:
    out = subprocess.run([lookout, "detect", SCENE, "-q", queries, "--conf", str(conf), "--iou", str(iou), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(d["label"] for d in json.loads(out.splitlines()[0])["detections"])


def searched(lookout: str, index: str, query: str) -> list[tuple[str, int]]:
    out = subprocess.run([lookout, "search", query, "--db", index, "--top", "48", "--conf", "0.1", "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [(os.path.basename(r["image"]), len(r["detections"])) for r in rows]


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
        options = Options()
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                         "--disable-dev-shm-usage", "--hide-scrollbars"):
            options.add_argument(argument)
        binary = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(p)), None)
        if binary:
            options.binary_location = binary
        service = Service("/usr/bin/chromedriver") if os.path.exists("/usr/bin/chromedriver") else Service()
        driver = webdriver.Chrome(options=options, service=service)
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
        label_tags = driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box span")
        check("labels drawn with their scores", bool(label_tags) and all(
            re.fullmatch(r".+ \d\.\d\d", t.text) for t in label_tags), f"{[t.text for t in label_tags]}")
        driver.save_screenshot(os.path.join(shots, "detect.png"))

        # Search: the grid, in the order of lookout search, thumbnails and boxes, a click opens the photo.
        driver.find_element(By.ID, "tab-search").click()
        box = driver.find_element(By.ID, "search-query")
        box.send_keys("red shape", Keys.ENTER)  # two words: a space in the query string
        want = searched(lookout, index, "red shape")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results .card")) == len(want) and all(
            d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", img)
            for img in d.find_elements(By.CSS_SELECTOR, "#results .card img")))
        cards = driver.find_elements(By.CSS_SELECTOR, "#results .card")
        got = [(c.get_attribute("data-name"), len(c.find_elements(By.CSS_SELECTOR, ".box"))) for c in cards]
        check("search 'red shape': photos in order, with their boxes", got == want and bool(want),
              f"page {got}, search {want}")
        driver.save_screenshot(os.path.join(shots, "search.png"))
        cards[0].click()
        wait.until(lambda d: d.execute_script(
            "const v = document.getElementById('viewer'), i = document.getElementById('viewer-photo');"
            "return v.open && i.complete && i.naturalWidth > 0"))
        shown = len(driver.find_elements(By.CSS_SELECTOR, "#viewer .box"))
        check("a click opens the photo with its boxes", shown == want[0][1], f"{shown} boxes, search {want[0][1]}")
        driver.find_element(By.CSS_SELECTOR, "#viewer button").click()

        # A phone's width: no sideways scrolling, the photo fits.
        driver.set_window_size(390, 844)
        driver.find_element(By.ID, "tab-detect").click()
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        photo_width = driver.execute_script("return document.getElementById('photo').getBoundingClientRect().right")
        inner = driver.execute_script("return window.innerWidth")
        check("phone width: nothing wider than the screen", overflow <= 0 and photo_width <= inner,
              f"overflow {overflow} px, photo right edge {photo_width:.0f} of {inner}")
        driver.save_screenshot(os.path.join(shots, "phone.png"))
        print(f"screenshots: {shots}/detect.png, search.png, phone.png")
    finally:
        if driver:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok, _ in checks if not ok]
    print(f"page: {len(checks) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
