#!/usr/bin/env python3
"""The web page of `lookout serve` in a real browser (headless Chromium through selenium).

    python scripts/web/check_page.py LOOKOUT [SCREENSHOT.png]

Starts `LOOKOUT serve --port 0` (the demo model), opens the page, uploads an example scene through the
file input, types a query set, waits for the boxes and checks their number and labels against
`LOOKOUT detect --json` for the same photo and queries; changes the queries (the page re-queries without
sending the photo again) and a threshold, and checks again; keeps a screenshot. Exits non-zero on any
difference.
"""
import json
import os
import subprocess
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def expected(lookout: str, photo: str, queries: str, conf: float) -> list[str]:
    out = subprocess.run([lookout, "detect", photo, "-q", queries, "--conf", str(conf), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(d["label"] for d in json.loads(out.splitlines()[0])["detections"])


def main() -> None:
    lookout = os.path.abspath(sys.argv[1])
    screenshot = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, ".build", "web-page.png")
    photo = os.path.join(ROOT, "examples", "scenes", "scene-0003.jpg")
    server = subprocess.Popen([lookout, "serve", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    driver = None
    try:
        line = server.stdout.readline()
        if "listening on " not in line:
            sys.exit(f"lookout serve did not start: {line!r} {server.stderr.read()}")
        url = line.strip().split("listening on ")[1]
        options = Options()
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                         "--disable-dev-shm-usage"):
            options.add_argument(argument)
        binary = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(p)), None)
        if binary:
            options.binary_location = binary
        service = Service("/usr/bin/chromedriver") if os.path.exists("/usr/bin/chromedriver") else Service()
        driver = webdriver.Chrome(options=options, service=service)
        driver.get(url)
        wait = WebDriverWait(driver, 60)

        def answered(previous: str) -> None:
            wait.until(lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == "done"
                       and d.find_element(By.ID, "status").get_attribute("data-sequence") != previous)

        def labels() -> list[str]:
            return sorted(b.get_attribute("data-label") for b in driver.find_elements(By.CSS_SELECTOR, "#detect-stage .box"))

        def sequence() -> str:
            return driver.find_element(By.ID, "status").get_attribute("data-sequence") or ""

        checks = []
        queries = driver.find_element(By.ID, "queries")
        queries.clear()
        queries.send_keys("star, circle")
        before = sequence()
        driver.find_element(By.ID, "file").send_keys(photo)
        answered(before)
        checks.append(("upload, 'star, circle'", labels(), expected(lookout, photo, "star, circle", 0.25)))

        before = sequence()
        queries.clear()
        queries.send_keys("red shape, ring, square")
        answered(before)
        checks.append(("re-query 'red shape, ring, square'", labels(),
                       expected(lookout, photo, "red shape, ring, square", 0.25)))

        before = sequence()
        driver.execute_script("const c = document.getElementById('conf'); c.value = '0.05';"
                              "c.dispatchEvent(new Event('input'));")
        answered(before)
        checks.append(("conf 0.05", labels(), expected(lookout, photo, "red shape, ring, square", 0.05)))
        driver.save_screenshot(screenshot)

        failed = False
        for name, got, want in checks:
            ok = got == want
            failed |= not ok
            print(f"{'ok' if ok else 'FAIL'}  {name}: page {len(got)} boxes {got}; lookout detect {len(want)} {want}")
        if not any(want for _, _, want in checks):
            failed = True
            print("FAIL  no check had any detection: the comparison proves nothing")
        print(f"screenshot: {screenshot}")
        sys.exit(1 if failed else 0)
    finally:
        if driver:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
