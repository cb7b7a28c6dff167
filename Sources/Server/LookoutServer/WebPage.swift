import Foundation
import LookoutSupport

/// The page `lookout serve` answers at `/`: plain HTML, CSS and JavaScript in one document, no build step,
/// embedded in the binary. Detect: open or drop a photo, type queries (the boxes are redrawn as you type,
/// through the re-query endpoint), move the confidence and IoU sliders. Search: the index's best photos as a
/// grid of thumbnails with their boxes; a click opens the photo. Camera: the browser's camera
/// (`getUserMedia`), each frame sent as a PNG to the detect endpoint as soon as the previous answer came (never
/// two requests in flight), its boxes drawn over the live picture, frames per second shown; the last frames
/// sent and their answers are kept in `window.lookoutCamera.log` (three at most); with "track" ticked the frames
/// go with `track=NAME` and the boxes show their track ids (the session's frames kept in
/// `window.lookoutCamera.tracked`). A token given as
/// `#token=…` in the address is sent with every request.
enum WebPage {
    /// The Content-Security-Policy every answer carries: the page's one script and one style block by their
    /// SHA-256 (no other script or style runs, inline or fetched), requests and pictures from this server and
    /// the page's own blob: and data: URLs only, no plugins, no framing, no base or form targets elsewhere.
    static let contentSecurityPolicy: String = {
        func hash(between open: String, and close: String) -> String {
            guard let start = html.range(of: open),
                let end = html.range(of: close, range: start.upperBound..<html.endIndex)
            else { return "'none'" }
            var digest = SHA256()
            digest.update(Array(html[start.upperBound..<end.lowerBound].utf8))
            let hex = Array(digest.finalize().utf8)
            let bytes = stride(from: 0, to: hex.count, by: 2).map {
                UInt8(String(decoding: hex[$0..<($0 + 2)], as: UTF8.self), radix: 16)!
            }
            return "'sha256-\(Data(bytes).base64EncodedString())'"
        }
        return [
            "default-src 'none'", "script-src \(hash(between: "<script>", and: "</script>"))",
            "style-src \(hash(between: "<style>", and: "</style>"))", "img-src 'self' blob: data:",
            "media-src 'self' blob:", "connect-src 'self'", "base-uri 'none'", "frame-ancestors 'none'",
        ].joined(separator: "; ")
    }()

    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Lookout</title>
        <style>
          :root { --bg: #f6f6f4; --fg: #1d1d1f; --muted: #6b6b70; --line: #d9d9d6; --accent: #1f6feb; }
          * { box-sizing: border-box; }
          body { margin: 0; font: 15px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
          header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); background: #fff; flex-wrap: wrap; }
          header h1 { font-size: 1.1rem; margin: 0; }
          nav button { border: 1px solid var(--line); background: #fff; padding: .35rem .8rem; border-radius: 6px; cursor: pointer; font: inherit; }
          nav button[aria-selected="true"] { background: var(--fg); color: #fff; border-color: var(--fg); }
          main { padding: 1rem; max-width: 1200px; margin: 0 auto; }
          .controls { display: flex; flex-wrap: wrap; gap: .8rem 1.2rem; align-items: center; margin-bottom: .8rem; }
          .controls input[type=text], .controls input[type=search] { flex: 1 1 18rem; padding: .5rem .7rem; font: inherit; border: 1px solid var(--line); border-radius: 6px; }
          .controls label { display: flex; gap: .4rem; align-items: center; color: var(--muted); white-space: nowrap; }
          .drop { flex: 1 1 18rem; border: 2px dashed var(--line); border-radius: 10px; padding: 1.2rem; text-align: center; color: var(--muted); background: #fff; }
          .drop.over { border-color: var(--accent); color: var(--accent); }
          .stage { position: relative; display: inline-block; max-width: 100%; margin-top: .8rem; }
          .stage img, .stage video { display: block; max-width: 100%; height: auto; }
          .controls button { border: 1px solid var(--line); background: #fff; padding: .45rem .9rem; border-radius: 6px; cursor: pointer; font: inherit; }
          .controls button[aria-pressed="true"] { background: #c62828; color: #fff; border-color: #c62828; }
          #camera-fps { font-variant-numeric: tabular-nums; }
          #timeline .row { display: flex; gap: .5rem; align-items: center; margin: .2rem 0; }
          #timeline .name { flex: 0 0 12rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
          #timeline .strip { position: relative; flex: 1; height: 1rem; background: #eee; border-radius: 3px; }
          #timeline .tick { position: absolute; top: -2px; bottom: -2px; width: 3px; background: var(--c); cursor: pointer; border: 0; padding: 0; }
          #timeline .when { flex: 0 0 11rem; font-variant-numeric: tabular-nums; font-size: .85rem; }
          .box { position: absolute; border: 2px solid var(--c); pointer-events: none; }
          .stage canvas.masks { position: absolute; left: 0; top: 0; width: 100%; height: 100%; pointer-events: none; }
          .prompt { position: absolute; border: 2px dashed #222; background: rgba(255,255,255,.15); pointer-events: none; }
          #detect-stage { touch-action: none; cursor: crosshair; }
          .box span { position: absolute; left: -2px; top: -1.45em; background: var(--c); color: #fff; font-size: 12px; line-height: 1.3em;
                      padding: 0 .35em; white-space: nowrap; border-radius: 3px 3px 3px 0; text-shadow: 0 0 2px #000; }
          .box.low span { top: 0; border-radius: 0 0 3px 0; }
          #status, #search-status { color: var(--muted); min-height: 1.4em; margin: .4rem 0; }
          .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: .8rem; }
          .card { background: #fff; border: 1px solid var(--line); border-radius: 8px; overflow: hidden; cursor: pointer; }
          .card .stage { margin: 0 auto; display: block; width: fit-content; }
          .card .labels { margin: 0 .5rem .4rem; display: flex; flex-wrap: wrap; gap: .2rem; }
          .card .labels:empty { display: none; }
          .chip { font: inherit; font-size: 12px; border: 1px solid var(--line); border-radius: 999px; background: #f4f4f4; padding: 0 .5em; margin-right: .25em; cursor: pointer; }
          .card p { margin: .3rem .5rem; font-size: 13px; color: var(--muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
          dialog { max-width: 95vw; max-height: 95vh; padding: .5rem; border: 0; border-radius: 8px; }
          dialog .stage img { max-height: 85vh; }
          [hidden] { display: none !important; }
          @media (max-width: 600px) { main { padding: .5rem; } .controls label { flex: 1 1 100%; } }
        </style>
        </head>
        <body>
        <header>
          <h1>Lookout</h1>
          <nav role="tablist">
            <button id="tab-detect" role="tab" aria-selected="true">Detect</button>
            <button id="tab-search" role="tab" aria-selected="false">Search the index</button>
          </nav>
        </header>
        <main>
          <section id="detect-view">
            <div class="controls">
              <input id="queries" type="text" value="red star, ring, blue shape" placeholder="what to find, comma-separated: dog, sofa|couch, person@0.5" aria-label="queries">
              <label>confidence <input id="conf" type="range" min="0.01" max="0.95" step="0.01" value="0.25"> <output id="conf-value">0.25</output></label>
              <label>IoU <input id="iou" type="range" min="0.1" max="1" step="0.05" value="0.7"> <output id="iou-value">0.70</output></label>
            </div>
            <div class="controls">
              <div id="drop" class="drop">Drop a photo here, or <input id="file" type="file" accept="image/jpeg,image/png" aria-label="photo"></div>
              <button id="camera" type="button" aria-pressed="false">Camera</button>
              <label title="Follow each object from frame to frame (ByteTrack, as ultralytics' track()): an id over each box"><input id="track" type="checkbox"> track</label>
              <label title="Small objects: cut the photo into overlapping tiles, detect each and the whole photo, merge the boxes as sahi does">slice <select id="slice" aria-label="slice"><option value="">whole photo</option><option value="640">tiles of 640</option><option value="320">tiles of 320</option><option value="auto">auto tiles</option></select></label>
              <output id="camera-fps" aria-label="frames per second"></output>
            </div>
            <div class="controls"><label>or a video: <input id="video-file" type="file" accept="video/*" aria-label="video"></label></div>
            <div id="status" role="status"></div>
            <div class="controls" id="prompt-controls" hidden><span>Drag on the photo to mark an example of what to find (YOLOE); open another photo to mark more examples there.</span> <output id="prompt-summary"></output> <button id="clear-prompts" type="button">Clear examples</button> <button id="search-example" type="button" hidden>Search the index for this</button></div>
            <div id="timeline" hidden></div>
            <div id="video-stage" class="stage" hidden><video id="video-player" controls muted playsinline aria-label="the video"></video></div>
            <div id="detect-stage" class="stage" hidden><img id="photo" alt="the photo"></div>
            <div id="camera-stage" class="stage" hidden><video id="camera-video" muted playsinline aria-label="the camera"></video></div>
          </section>
          <section id="search-view" hidden>
            <form id="search-form" class="controls">
              <input id="search-query" type="search" placeholder="search the indexed photos: dog, beach at sunset" aria-label="search">
              <button type="submit">Search</button>
              <label title="Read every photo instead of the region lists: slower on a large library, the exact answer to compare with"><input id="search-scan" type="checkbox"> exact scan</label>
            </form>
            <div id="search-filters" class="controls" hidden></div>
            <div id="search-status" role="status"></div>
            <p id="tower" hidden></p>
            <div id="export" class="controls" hidden><span>These photos' boxes as a training set:</span> <select id="export-format" aria-label="data set format"><option value="yolo">YOLO (images, labels, data.yaml)</option><option value="coco">COCO (instances JSON)</option></select> <button id="export-button" type="button">Export as dataset</button> <output id="export-status"></output></div>
            <div id="results" class="grid"></div>
          </section>
        </main>
        <dialog id="viewer"><div class="stage"><img id="viewer-photo" alt=""></div><form method="dialog"><button>Close</button></form></dialog>
        <script>
        "use strict";
        const token = new URLSearchParams(location.hash.slice(1)).get("token");
        const headers = token ? { Authorization: "Bearer " + token } : {};
        const colours = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#008080", "#f032e6", "#9a6324", "#800000", "#000075"];
        const $ = (id) => document.getElementById(id);
        let imageId = null, photoFile = null, photoSize = null, pending = null, sequence = 0;

        function queries() { return $("queries").value.split(",").map((q) => q.trim()).filter((q) => q.length > 0); }
        // The queries as typed, sent as one line: the server reads Lookout's syntax (sofa|couch, dog@0.4, -person,
        // escaped commas) as lookout detect -q does.
        function queryLine() { return $("queries").value.trim(); }
        function thresholds() { return { conf: parseFloat($("conf").value), iou: parseFloat($("iou").value) }; }

        async function api(path, options = {}) {
          const response = await fetch(path, { ...options, headers: { ...headers, ...(options.headers || {}) } });
          const text = await response.text();
          let body = null;
          try { body = text ? JSON.parse(text) : null; } catch (e) { body = { error: text }; }
          return { status: response.status, body };
        }

        // A COCO compressed RLE mask (column-major runs, 5 bits a character) painted into a canvas over the photo.
        function paintMask(pixels, width, height, counts, rgb) {
          let position = 0, index = 0, runs = [];
          for (let p = 0; p < counts.length;) {
            let x = 0, shift = 0, more = true;
            while (more) {
              const c = counts.charCodeAt(p++) - 48;
              x |= (c & 0x1f) << shift;
              more = (c & 0x20) !== 0;
              shift += 5;
              if (!more && (c & 0x10)) x |= -1 << shift;
            }
            if (runs.length > 2) x += runs[runs.length - 2];
            runs.push(x);
          }
          for (const run of runs) {
            if (index % 2 === 1) {
              for (let p = position; p < position + run && p < width * height; p++) {
                const o = 4 * ((p % height) * width + Math.floor(p / height));
                pixels[o] = rgb[0]; pixels[o + 1] = rgb[1]; pixels[o + 2] = rgb[2]; pixels[o + 3] = 77;
              }
            }
            position += run;
            index++;
          }
        }

        function drawMasks(stage, width, height, detections) {
          stage.querySelectorAll("canvas.masks").forEach((c) => c.remove());
          const withMasks = detections.filter((d) => d.mask && d.mask.size[0] === height && d.mask.size[1] === width);
          if (withMasks.length === 0) return;
          const canvas = document.createElement("canvas");
          canvas.className = "masks";
          canvas.width = width;
          canvas.height = height;
          const context = canvas.getContext("2d");
          const image = context.createImageData(width, height);
          for (const d of withMasks) {
            const colour = colours[(d.track_id ?? d.query_index ?? 0) % colours.length];
            const rgb = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
            paintMask(image.data, width, height, d.mask.counts, rgb);
          }
          context.putImageData(image, 0, 0);
          canvas.dataset.masks = withMasks.length;
          stage.appendChild(canvas);
        }

        function drawBoxes(stage, width, height, detections, labelOf) {
          stage.querySelectorAll(".box").forEach((b) => b.remove());
          drawMasks(stage, width, height, detections);
          for (const d of detections) {
            const [x1, y1, x2, y2] = d.box;
            const box = document.createElement("div");
            box.className = "box" + (y1 / height < 0.06 ? " low" : "");
            box.style.setProperty("--c", colours[(d.track_id ?? d.query_index ?? 0) % colours.length]);
            box.style.left = (100 * x1 / width) + "%";
            box.style.top = (100 * y1 / height) + "%";
            box.style.width = (100 * (x2 - x1) / width) + "%";
            box.style.height = (100 * (y2 - y1) / height) + "%";
            box.dataset.label = d.label || "";
            box.dataset.score = d.score;
            box.dataset.box = d.box.join(",");
            box.dataset.track = d.track_id ?? "";
            const tag = document.createElement("span");
            tag.textContent = labelOf(d);
            box.appendChild(tag);
            stage.appendChild(box);
          }
        }

        // Visual prompts (YOLOE): boxes drawn on the photo, in its pixels, all one example ("example"). Boxes drawn on
        // photos opened before stay examples (`earlierExamples`, each with its photo's image_id, whose features the
        // server keeps), so one thing can be shown on several photos.
        let promptBoxes = [], earlierExamples = [], drawing = null;

        function allExamples() { return promptBoxes.concat(earlierExamples); }

        function showPromptSummary() {
          const photos = new Set(earlierExamples.map((p) => p.image_id)).size;
          $("prompt-summary").textContent = earlierExamples.length
            ? "+ " + earlierExamples.length + " example" + (earlierExamples.length === 1 ? "" : "s") + " on " + photos + " earlier photo" + (photos === 1 ? "" : "s")
            : "";
          $("prompt-controls").hidden = allExamples().length === 0;
          $("search-example").hidden = !serving.index || allExamples().length === 0;
        }

        function drawPrompts() {
          const stage = $("detect-stage");
          stage.querySelectorAll(".prompt").forEach((p) => p.remove());
          if (!photoSize) return;
          for (const p of promptBoxes) {
            const [x1, y1, x2, y2] = p.box;
            const mark = document.createElement("div");
            mark.className = "prompt";
            mark.style.left = (100 * x1 / photoSize[0]) + "%";
            mark.style.top = (100 * y1 / photoSize[1]) + "%";
            mark.style.width = (100 * (x2 - x1) / photoSize[0]) + "%";
            mark.style.height = (100 * (y2 - y1) / photoSize[1]) + "%";
            mark.dataset.box = p.box.join(",");
            stage.appendChild(mark);
          }
        }

        $("detect-stage").addEventListener("pointerdown", (e) => {
          if (!photoSize || e.button !== 0) return;
          const rect = $("photo").getBoundingClientRect();
          drawing = { x: e.clientX - rect.left, y: e.clientY - rect.top, rect };
          e.preventDefault();
        });
        window.addEventListener("pointerup", (e) => {
          if (!drawing) return;
          const { rect } = drawing;
          const scale = [photoSize[0] / rect.width, photoSize[1] / rect.height];
          const x = [drawing.x, e.clientX - rect.left].map((v) => Math.min(Math.max(v, 0), rect.width) * scale[0]);
          const y = [drawing.y, e.clientY - rect.top].map((v) => Math.min(Math.max(v, 0), rect.height) * scale[1]);
          drawing = null;
          const box = [Math.min(...x), Math.min(...y), Math.max(...x), Math.max(...y)].map((v) => Math.round(v * 10) / 10);
          if (box[2] - box[0] < 2 || box[3] - box[1] < 2) return;  // a click, not a box
          promptBoxes.push({ box, label: "example" });
          drawPrompts();
          showPromptSummary();
          scheduleDetect();
        });
        $("clear-prompts").addEventListener("click", () => {
          promptBoxes = [];
          earlierExamples = [];
          drawPrompts();
          showPromptSummary();
          scheduleDetect();
        });

        async function detect() {
          const list = queries();
          if (!photoFile) return;
          const examples = allExamples();
          if (list.length === 0 && examples.length === 0) {
            $("status").textContent = "Type what to look for, or drag on the photo to mark an example.";
            $("status").dataset.state = "idle";
            drawBoxes($("detect-stage"), 1, 1, [], () => "");
            return;
          }
          const mine = ++sequence;
          const t = thresholds();
          // Sliced inference: the tiles' features are kept under the photo's id and the tile size.
          const sliced = $("slice").value ? { slice: $("slice").value } : {};
          let reply;
          if (!imageId && list.length === 0) {
            // The photo is sent with its first query; with only examples marked, it is sent with theirs as a word
            // and then asked with the boxes.
            const q = new URLSearchParams({ q: "example", conf: t.conf, iou: t.iou, ...sliced });
            const sent = await api("/api/v1/detect?" + q, { method: "POST", body: photoFile,
              headers: { "Content-Type": photoFile.type || "application/octet-stream" } });
            if (sent.status === 200) imageId = sent.body.image_id;
          }
          if (imageId) {
            const body = { q: queryLine(), conf: t.conf, iou: t.iou, ...sliced };
            if (examples.length) body.prompt_boxes = examples;
            reply = await api("/api/v1/images/" + imageId + "/detect", {
              method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
          }
          if (!imageId || reply.status === 404) {
            const q = new URLSearchParams({ q: queryLine(), conf: t.conf, iou: t.iou, ...sliced });
            reply = await api("/api/v1/detect?" + q, { method: "POST", body: photoFile,
              headers: { "Content-Type": photoFile.type || "application/octet-stream" } });
          }
          if (mine !== sequence) return;  // a newer request is on its way
          if (reply.status !== 200) {
            $("status").textContent = "Error " + reply.status + ": " + (reply.body && reply.body.error);
            $("status").dataset.state = "error";
            return;
          }
          const r = reply.body;
          imageId = r.image_id;
          photoSize = [r.width, r.height];
          drawBoxes($("detect-stage"), r.width, r.height, r.detections, (d) => d.label + " " + d.score.toFixed(2));
          const ms = Object.values(r.timings).reduce((a, b) => a + b, 0);
          $("status").textContent = r.detections.length + " detection" + (r.detections.length === 1 ? "" : "s") +
            " (" + ms.toFixed(0) + " ms)";
          $("status").dataset.state = "done";
          $("status").dataset.sequence = mine;
        }

        function scheduleDetect() {
          clearTimeout(pending);
          $("status").dataset.state = "waiting";
          pending = setTimeout(detect, 200);
        }

        function openPhoto(file) {
          if (!file) return;
          if (camera.running) stopCamera();
          // The boxes drawn on the photo before stay examples, on that photo (by its id).
          if (imageId) earlierExamples.push(...promptBoxes.map((p) => ({ ...p, image_id: imageId })));
          photoFile = file;
          imageId = null;
          promptBoxes = [];
          drawPrompts();
          showPromptSummary();
          photoSize = null;
          $("photo").onload = () => { if (!photoSize) photoSize = [$("photo").naturalWidth, $("photo").naturalHeight]; };
          $("photo").src = URL.createObjectURL(file);
          $("detect-stage").hidden = false;
          scheduleDetect();
        }

        $("file").addEventListener("change", (e) => openPhoto(e.target.files[0]));
        const drop = $("drop");
        drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
        drop.addEventListener("dragleave", () => drop.classList.remove("over"));
        drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); openPhoto(e.dataTransfer.files[0]); });
        $("queries").addEventListener("input", scheduleDetect);
        $("slice").addEventListener("change", scheduleDetect);
        for (const id of ["conf", "iou"]) {
          $(id).addEventListener("input", () => { $(id + "-value").textContent = parseFloat($(id).value).toFixed(2); scheduleDetect(); });
        }

        async function imageURL(path) {
          const response = await fetch(path, { headers });
          return response.ok ? URL.createObjectURL(await response.blob()) : "";
        }

        // Search as you type: a pause of 150 ms in the typing asks the index (or Enter, at once); an answer that
        // a later question overtook is dropped, so the grid always shows the words in the box.
        // A search is words (q) or an example (YOLOE: boxes drawn on the photo in the Detect tab, by its image id),
        // narrowed to the photos a prompt-free detector labelled (`labels`: a card's label chip adds one).
        let searchSequence = 0, searchPending = null, example = null, lastSearch = null;
        const labels = new Set();
        async function search() {
          clearTimeout(searchPending);
          const q = example ? "example" : $("search-query").value.trim();
          const mine = ++searchSequence;
          const status = $("search-status");
          showFilters();
          if (!q) { status.textContent = ""; $("results").innerHTML = ""; return; }
          status.textContent = "Searching…";
          status.dataset.state = "searching";
          const started = performance.now();
          const params = new URLSearchParams({ q, top: 48 });
          if (example) {
            for (const p of example.boxes) params.append("prompt_box", p.box.map((v) => v.toFixed(1)).join(",") + "@" + p.image_id);
          }
          for (const label of labels) params.append("label", label);
          if ($("search-scan").checked) params.set("scan", "true");
          const reply = await api("/api/v1/search?" + params);
          if (mine !== searchSequence) return;
          lastSearch = params;
          $("export").hidden = reply.status !== 200 || !reply.body.results.some((r) => r.detections.length > 0);
          $("export-status").textContent = "";
          const grid = $("results");
          grid.innerHTML = "";
          status.dataset.query = q;
          status.dataset.state = "done";
          if (reply.status !== 200) { status.textContent = "Error " + reply.status + ": " + (reply.body && reply.body.error); return; }
          const results = reply.body.results;
          const ms = " (" + (performance.now() - started).toFixed(0) + " ms)";
          const what = example ? "the example" : "“" + q + "”";
          status.textContent = results.length ? results.length + " photos" + (example ? " like the example" : "") + ms : "Nothing found for " + what + ".";
          for (const r of results) {
            const card = document.createElement("div");
            card.className = "card";
            card.dataset.name = r.name;
            card.innerHTML = '<div class="stage"><img alt=""></div><p></p><div class="labels"></div>';
            card.querySelector("p").textContent = r.score.toFixed(2) + " · " + r.name + (r.evidence === "scenes" ? " · scene" : "");
            for (const name of [...new Set(r.labels || [])]) {
              const label = chip(name, "chip", () => labels.add(name));
              label.dataset.label = name;
              label.title = "only photos labelled " + name;
              card.querySelector(".labels").appendChild(label);
            }
            grid.appendChild(card);
            imageURL("/api/v1/photos/" + r.image + "/thumbnail").then((url) => { card.querySelector("img").src = url; });
            drawBoxes(card.querySelector(".stage"), r.width, r.height, r.detections, (d) => q + " " + d.score.toFixed(2));
            card.addEventListener("click", async () => {
              $("viewer-photo").src = await imageURL("/api/v1/photos/" + r.image);
              drawBoxes($("viewer").querySelector(".stage"), r.width, r.height, r.detections, (d) => q + " " + d.score.toFixed(2));
              $("viewer").showModal();
            });
          }
        }

        // What narrows the search, each with a button that drops it: the example searched by, the labels.
        // A chip: a small button that changes what narrows the search (`change`), then searches again.
        function chip(text, className, change) {
          const button = document.createElement("button");
          button.type = "button";
          button.className = className;
          button.textContent = text;
          button.addEventListener("click", (e) => { e.stopPropagation(); change(); search(); });
          return button;
        }

        function showFilters() {
          const filters = $("search-filters");
          filters.innerHTML = "";
          const add = (text, drop) => filters.appendChild(chip(text + " ×", "chip active", drop));
          if (example) {
            const photos = new Set(example.boxes.map((b) => b.image_id)).size;
            add("like the example (" + example.boxes.length + " box" + (example.boxes.length === 1 ? "" : "es") + (photos > 1 ? " on " + photos + " photos" : "") + ")", () => { example = null; });
          }
          for (const label of labels) add("labelled " + label, () => labels.delete(label));
          filters.hidden = filters.children.length === 0;
        }

        $("search-example").addEventListener("click", () => {
          const boxes = promptBoxes.filter(() => imageId).map((p) => ({ ...p, image_id: imageId })).concat(earlierExamples);
          if (boxes.length === 0) return;
          example = { boxes };
          $("search-query").value = "";
          show("search");
          search();
        });
        $("search-form").addEventListener("submit", (e) => { e.preventDefault(); search(); });

        // "Export as dataset": the last search's photos with boxes, as a training set in a ZIP archive
        // (/api/v1/search/dataset, the same parameters), downloaded. Kept in window.lookoutExport.
        window.lookoutExport = null;
        $("export-button").addEventListener("click", async () => {
          if (!lastSearch) return;
          const params = new URLSearchParams(lastSearch);
          params.set("format", $("export-format").value);
          const url = "/api/v1/search/dataset?" + params;
          $("export-status").textContent = "Packing…";
          const response = await fetch(url, { headers });
          if (!response.ok) {
            const text = await response.text();
            let message = text;
            try { message = JSON.parse(text).error; } catch (e) {}
            $("export-status").textContent = "Error " + response.status + ": " + message;
            return;
          }
          const blob = await response.blob();
          const name = (/filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "") || [])[1] || "dataset.zip";
          const link = document.createElement("a");
          link.href = URL.createObjectURL(blob);
          link.download = name;
          document.body.appendChild(link);
          link.click();
          link.remove();
          window.lookoutExport = { url, name, size: blob.size };
          $("export-status").textContent = name + " (" + (blob.size / 1048576).toFixed(1) + " MB)";
        });
        $("search-scan").addEventListener("change", search);
        $("search-query").addEventListener("input", () => {
          clearTimeout(searchPending);
          example = null;
          searchPending = setTimeout(search, 150);
        });

        // The camera: a frame goes to /api/v1/detect (features not kept) when the answer to the previous one
        // has come, so the page never has two requests in flight and runs as fast as the server answers.
        // With "track" ticked, the frames go with track=SESSION (a name made when tracking starts, and again
        // when the queries change): the server follows them with ByteTrack and each box gets its id. The frames
        // and answers of the current session are kept in `tracked` (the last 300).
        const camera = { stream: null, running: false, inFlight: 0, maxInFlight: 0, sent: 0, answers: [], log: [],
                         canvas: document.createElement("canvas"), session: null, sessionQueries: "", tracked: [] };
        window.lookoutCamera = camera;
        const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

        async function startCamera() {
          if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
            $("status").textContent = "This browser gives the page no camera (it needs https, or http on localhost).";
            return;
          }
          try {
            camera.stream = await navigator.mediaDevices.getUserMedia({ video: true, audio: false });
          } catch (e) {
            $("status").textContent = "No camera: " + e.message;
            $("status").dataset.state = "error";
            return;
          }
          const video = $("camera-video");
          video.srcObject = camera.stream;
          await video.play();
          camera.running = true;
          camera.answers = [];
          $("camera").textContent = "Stop camera";
          $("camera").setAttribute("aria-pressed", "true");
          $("detect-stage").hidden = true;
          $("camera-stage").hidden = false;
          cameraLoop();
        }

        function stopCamera() {
          camera.running = false;
          camera.session = null;
          if (camera.stream) camera.stream.getTracks().forEach((track) => track.stop());
          camera.stream = null;
          $("camera").textContent = "Camera";
          $("camera").setAttribute("aria-pressed", "false");
          $("camera-fps").textContent = "";
          $("camera-stage").hidden = true;
          $("detect-stage").hidden = !photoFile;
        }

        async function cameraLoop() {
          const video = $("camera-video"), stage = $("camera-stage");
          while (camera.running) {
            const list = queries();
            if (video.videoWidth === 0 || list.length === 0) {
              if (list.length === 0) { $("status").textContent = "Type what to look for."; drawBoxes(stage, 1, 1, [], () => ""); }
              await sleep(100);
              continue;
            }
            const width = video.videoWidth, height = video.videoHeight;
            camera.canvas.width = width;
            camera.canvas.height = height;
            camera.canvas.getContext("2d").drawImage(video, 0, 0, width, height);
            const blob = await new Promise((resolve) => camera.canvas.toBlob(resolve, "image/png"));
            const t = thresholds();
            const tracking = $("track").checked;
            if (!tracking) camera.session = null;
            else if (!camera.session || camera.sessionQueries !== queryLine()) {
              camera.session = "camera-" + Math.random().toString(36).slice(2, 12);
              camera.sessionQueries = queryLine();
              camera.tracked = [];
            }
            // Tracking detects at ultralytics' track() threshold (0.1, the server's default with track=).
            const q = new URLSearchParams(tracking ? { q: queryLine(), iou: t.iou, keep: "false", track: camera.session }
                                                   : { q: queryLine(), conf: t.conf, iou: t.iou, keep: "false" });
            const session = camera.session;
            camera.inFlight += 1;
            camera.maxInFlight = Math.max(camera.maxInFlight, camera.inFlight);
            let reply;
            try {
              reply = await api("/api/v1/detect?" + q, { method: "POST", body: blob, headers: { "Content-Type": "image/png" } });
            } catch (e) {
              reply = { status: 0, body: { error: e.message } };
            } finally {
              camera.inFlight -= 1;
            }
            if (!camera.running) break;
            if (reply.status !== 200) {
              $("status").textContent = "Error " + reply.status + ": " + (reply.body && reply.body.error);
              $("status").dataset.state = "error";
              await sleep(reply.status === 503 ? 1000 : 250);
              continue;
            }
            const r = reply.body;
            camera.sent += 1;
            drawBoxes(stage, r.width, r.height, r.detections,
                      (d) => (d.track_id !== undefined ? "#" + d.track_id + " " : "") + d.label + " " + d.score.toFixed(2));
            if (session && session === camera.session) {
              camera.tracked.push({ frame: camera.sent, blob, queries: list, reply: r });
              if (camera.tracked.length > 300) camera.tracked.shift();
            }
            stage.dataset.frame = camera.sent;
            camera.log.push({ frame: camera.sent, blob, queries: list, conf: t.conf, iou: t.iou, reply: r });
            if (camera.log.length > 3) camera.log.shift();
            const now = performance.now();
            camera.answers.push(now);
            while (camera.answers.length > 2 && now - camera.answers[0] > 3000) camera.answers.shift();
            if (camera.answers.length > 1) {
              const fps = (camera.answers.length - 1) * 1000 / (now - camera.answers[0]);
              $("camera-fps").textContent = fps.toFixed(1) + " fps";
            }
            $("status").textContent = r.detections.length + " detection" + (r.detections.length === 1 ? "" : "s") + " in the camera's frame";
            $("status").dataset.state = "camera";
          }
        }

        $("camera").addEventListener("click", () => (camera.running ? stopCamera() : startCamera()));

        // A video: sent whole to /api/v1/videos/detect (tracked when "track" is ticked); the answer is drawn as a
        // timeline, a row per query with a mark at each frame where it was found, and the video plays in a player
        // with the boxes (and track ids) of the frame on screen drawn over it; a click on a mark seeks to its frame.
        // Kept in window.lookoutVideo.
        window.lookoutVideo = { reply: null };

        // The answered frame on screen at `time`: the last one at or before it (frames are in time order).
        function frameAt(frames, time) {
          let low = 0, high = frames.length - 1, found = -1;
          while (low <= high) {
            const middle = (low + high) >> 1;
            if (frames[middle].time <= time + 1e-3) { found = middle; low = middle + 1; } else { high = middle - 1; }
          }
          return found;
        }

        function drawVideoFrame(index) {
          const r = window.lookoutVideo.reply, stage = $("video-stage");
          if (!r) return;
          const frame = index >= 0 ? r.frames[index] : null;
          if (stage.dataset.frame === String(frame ? frame.frame : "")) return;
          stage.dataset.frame = frame ? frame.frame : "";
          drawBoxes(stage, r.width, r.height, frame ? frame.detections : [],
                    (d) => d.label + (d.track_id !== undefined ? " #" + d.track_id : "") + " " + d.score.toFixed(2));
        }

        const player = $("video-player");
        function followPlayer() {
          const r = window.lookoutVideo.reply;
          if (r) drawVideoFrame(frameAt(r.frames, player.currentTime));
          if (player.requestVideoFrameCallback) player.requestVideoFrameCallback(followPlayer);
        }
        player.addEventListener("timeupdate", () => { const r = window.lookoutVideo.reply; if (r) drawVideoFrame(frameAt(r.frames, player.currentTime)); });
        player.addEventListener("seeked", () => { const r = window.lookoutVideo.reply; if (r) drawVideoFrame(frameAt(r.frames, player.currentTime)); });
        if (player.requestVideoFrameCallback) player.requestVideoFrameCallback(followPlayer);
        $("video-file").addEventListener("change", async () => {
          const file = $("video-file").files[0], list = queries();
          if (!file) return;
          if (list.length === 0) { $("status").textContent = "Type what to look for."; return; }
          const t = thresholds(), tracking = $("track").checked;
          const q = new URLSearchParams(tracking ? { q: queryLine(), iou: t.iou, track: "true" }
                                                 : { q: queryLine(), conf: t.conf, iou: t.iou });
          $("status").textContent = "Reading " + file.name + " …";
          $("status").dataset.state = "busy";
          const reply = await api("/api/v1/videos/detect?" + q, { method: "POST", body: file,
                                                                  headers: { "Content-Type": "application/octet-stream" } });
          if (reply.status !== 200) {
            $("status").textContent = "Error " + reply.status + ": " + (reply.body && reply.body.error);
            $("status").dataset.state = "error";
            return;
          }
          const r = reply.body, timeline = $("timeline");
          window.lookoutVideo.reply = r;
          const end = r.frames.length ? Math.max(r.frames[r.frames.length - 1].time, 0.001) : 1;
          timeline.replaceChildren();
          list.forEach((label, index) => {
            const found = r.found[label], row = document.createElement("div");
            row.className = "row";
            row.dataset.label = label;
            const name = document.createElement("span"), strip = document.createElement("span"), when = document.createElement("span");
            name.className = "name"; strip.className = "strip"; when.className = "when";
            name.textContent = label;
            strip.style.setProperty("--c", colours[index % colours.length]);
            when.textContent = found ? found.first.toFixed(2) + "–" + found.last.toFixed(2) + " s, " + found.frames + " frames" : "not found";
            r.frames.forEach((frame, frameIndex) => {
              if (!frame.detections.some((d) => d.label === label)) return;
              const tick = document.createElement("button");
              tick.type = "button";
              tick.className = "tick";
              tick.title = label + " at " + frame.time.toFixed(2) + " s";
              tick.dataset.frame = frame.frame;
              tick.style.left = (100 * frame.time / end) + "%";
              tick.addEventListener("click", () => {
                player.pause();
                player.currentTime = frame.time;
                drawVideoFrame(frameIndex);
              });
              strip.appendChild(tick);
            });
            row.append(name, strip, when);
            timeline.appendChild(row);
          });
          timeline.hidden = false;
          const stage = $("video-stage");
          if (player.src) URL.revokeObjectURL(player.src);
          stage.dataset.frame = "-";
          player.src = URL.createObjectURL(file);
          stage.hidden = false;
          drawVideoFrame(frameAt(r.frames, 0));
          $("status").textContent = file.name + ": " + r.frames.length + " frames" + (r.tracks !== undefined ? ", " + r.tracks + " tracks" : "");
          $("status").dataset.state = "video";
        });

        function show(view) {
          $("detect-view").hidden = view !== "detect";
          $("search-view").hidden = view !== "search";
          $("tab-detect").setAttribute("aria-selected", view === "detect");
          $("tab-search").setAttribute("aria-selected", view === "search");
        }
        $("tab-detect").addEventListener("click", () => show("detect"));
        $("tab-search").addEventListener("click", () => show("search"));
        // What the server serves: whether it has an index to search (then a marked example can be searched for).
        const serving = { index: false };
        api("/api/v1/health").then((r) => {
          if (r.status !== 200) return;
          serving.index = !!r.body.index;
          // The tower that finds scenes, and what its scores mean.
          const tower = r.body.image_tower;
          if (tower) {
            const scores = { sigmoid: "scores are its own probabilities", calibrated: "scores calibrated for it",
                             standard: "scores mapped from its cosine" }[tower.scores] || "";
            $("tower").textContent = "Scenes found by the " + tower.family + " tower " + tower.name + " (" + scores + ").";
            $("tower").hidden = false;
          }
        });
        </script>
        </body>
        </html>
        """#
}
