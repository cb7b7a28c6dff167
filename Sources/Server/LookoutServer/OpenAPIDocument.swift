/// The API `lookout serve` answers, as one OpenAPI 3.0 document, served at `/api/v1/openapi.json`.
/// `ServerTests` checks that every operation here is routed and every route is here.
public enum OpenAPIDocument {
    public static let json = #"""
        {
          "openapi": "3.0.3",
          "info": {
            "title": "Lookout",
            "version": "1",
            "description": "Open-vocabulary object detection (YOLO-World v2 + CLIP) on the CPU: detect what you describe in a photo, ask again without recomputing the photo's features, search an indexed photo folder. When the server was started with --token, every request except /, /api/v1/health and this document needs `Authorization: Bearer TOKEN`."
          },
          "paths": {
            "/api/v1/health": {
              "get": {
                "operationId": "health",
                "responses": {"200": {"description": "The server is up.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}
              }
            },
            "/api/v1/openapi.json": {
              "get": {
                "operationId": "openapi",
                "responses": {"200": {"description": "This document.", "content": {"application/json": {"schema": {"type": "object"}}}}}
              }
            },
            "/api/v1/detect": {
              "post": {
                "operationId": "detect",
                "description": "Detects the queries in the photo sent as the body (JPEG or PNG bytes). The photo's features are kept under image_id for /api/v1/images/{image_id}/detect.",
                "parameters": [
                  {"$ref": "#/components/parameters/Queries"}, {"$ref": "#/components/parameters/Conf"},
                  {"$ref": "#/components/parameters/Iou"}, {"$ref": "#/components/parameters/MaxDet"},
                  {"name": "keep", "in": "query", "description": "false: do not keep the photo's features (a camera's frames, never asked again).", "schema": {"type": "boolean", "default": true}},
                  {"name": "track", "in": "query", "description": "A name the client picks for a sequence of frames (a camera): the frames sent with it are followed by ByteTrack as ultralytics' track() does, each detection gets a track_id, and conf defaults to 0.1. New queries start the sequence again; a name unused for 2 minutes is forgotten.", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
                  {"name": "slice", "in": "query", "description": "Sliced inference for small objects, as lookout detect --slice: the photo cut into tiles of WxH pixels (N: N×N; auto: sized from the photo as sahi's auto_slice_resolution), each tile and the whole photo detected, the boxes merged as the sahi library merges them (GREEDYNMM, IOS 0.5; NMS with IoU below conf 0.1). At most 256 tiles a request (422 beyond). The tiles' features are kept under image_id and these settings.", "schema": {"type": "string", "pattern": "^([0-9]{1,5}(x[0-9]{1,5})?|auto)$"}},
                  {"name": "overlap", "in": "query", "description": "With slice: the fraction of a tile its neighbours share (default 0.2; not with slice=auto).", "schema": {"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1}}
                ],
                "requestBody": {"required": true, "content": {
                  "image/jpeg": {"schema": {"type": "string", "format": "binary"}},
                  "image/png": {"schema": {"type": "string", "format": "binary"}},
                  "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {
                  "200": {"description": "Detections.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Detections"}}},
                    "links": {"Requery": {"operationId": "redetect", "parameters": {"image_id": "$response.body#/image_id"}}}},
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Error"},
                  "408": {"$ref": "#/components/responses/Error"},
                  "413": {"$ref": "#/components/responses/Error"},
                  "415": {"$ref": "#/components/responses/Error"},
                  "422": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/videos/detect": {
              "post": {
                "operationId": "detectVideo",
                "description": "Detects the queries in every frame (or every Nth) of the video sent as the body (MP4, MOV, MKV, WebM, AVI; at most 64 MB and the server's --max-video-seconds), answered as one JSON document once the video is read. With track=true the frames are followed by ByteTrack (or with tracker=botsort by BoT-SORT, camera motion compensated) as ultralytics' track() does (conf 0.1 by default) and each detection has a track_id.",
                "parameters": [
                  {"$ref": "#/components/parameters/Queries"}, {"$ref": "#/components/parameters/Conf"},
                  {"$ref": "#/components/parameters/Iou"}, {"$ref": "#/components/parameters/MaxDet"},
                  {"name": "every", "in": "query", "description": "Detect on every Nth frame (the first, then every Nth).", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1}},
                  {"name": "track", "in": "query", "schema": {"type": "boolean", "default": false}},
                  {"name": "tracker", "in": "query", "description": "With track=true: bytetrack (ultralytics' bytetrack.yaml) or botsort (botsort.yaml without re-identification: the camera's motion estimated from the frames).", "schema": {"type": "string", "enum": ["bytetrack", "botsort"], "default": "bytetrack"}}
                ],
                "requestBody": {"required": true, "content": {
                  "video/mp4": {"schema": {"type": "string", "format": "binary"}},
                  "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {
                  "200": {"description": "The processed frames and what was found when.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/VideoDetections"}}}},
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Error"},
                  "408": {"$ref": "#/components/responses/Error"},
                  "413": {"$ref": "#/components/responses/Error"},
                  "415": {"$ref": "#/components/responses/Error"},
                  "422": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/images/{image_id}/detect": {
              "post": {
                "operationId": "redetect",
                "description": "New queries or thresholds on a photo sent before: the backbone is not run again. 404 once its features were dropped (send the photo again).",
                "parameters": [{"name": "image_id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Requery"}}}},
                "responses": {
                  "200": {"description": "Detections.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Detections"}}}},
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Error"},
                  "404": {"$ref": "#/components/responses/Error"},
                  "408": {"$ref": "#/components/responses/Error"},
                  "413": {"$ref": "#/components/responses/Error"},
                  "415": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/search": {
              "get": {
                "operationId": "search",
                "description": "The indexed photos (the served index: --db, else the default one) best matching the query, objects and scenes; or, with prompt_box (YOLOE), the photos whose stored regions best match examples boxed on photos sent to /api/v1/detect before (their visual prompt embeddings averaged over the photos, regions only), alone or with the words (combine_examples).",
                "parameters": [
                  \#(searchParameters)
                ],
                "responses": {
                  "200": {"description": "Results, best first.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SearchResults"}}},
                    "links": {
                      "Photo": {"operationId": "photo", "parameters": {"photo_id": "$response.body#/results/0/image"}},
                      "Thumbnail": {"operationId": "thumbnail", "parameters": {"photo_id": "$response.body#/results/0/image"}}}},
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Error"},
                  "404": {"$ref": "#/components/responses/Error"},
                  "409": {"$ref": "#/components/responses/Error"},
                  "500": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/search/dataset": {
              "get": {
                "operationId": "searchDataset",
                "description": "A search's results as a training set, in a ZIP archive: the photos found with boxes (those found by their scene alone are left out), their boxes labelled with the query's name (class 0), in YOLO's layout (images/train|val, labels/train|val, data.yaml, which ultralytics' check_det_dataset reads) or COCO's (images/, annotations/instances_train.json and instances_val.json). The same parameters as /api/v1/search, and format and val.",
                "parameters": [
                  \#(searchParameters),
                  {"name": "format", "in": "query", "description": "yolo (default) or coco.", "schema": {"type": "string", "enum": ["yolo", "coco"], "default": "yolo"}},
                  {"name": "val", "in": "query", "description": "The fraction of the photos kept for validation (from a hash of each name), 0 to 0.9.", "schema": {"type": "number", "minimum": 0, "maximum": 0.9, "default": 0.1}}
                ],
                "responses": {
                  "200": {"description": "The data set.", "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}}},
                  "400": {"$ref": "#/components/responses/Error"},
                  "401": {"$ref": "#/components/responses/Error"},
                  "404": {"$ref": "#/components/responses/Error"},
                  "409": {"$ref": "#/components/responses/Error"},
                  "413": {"$ref": "#/components/responses/Error"},
                  "500": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/photos/{photo_id}": {
              "get": {
                "operationId": "photo",
                "description": "An indexed photo's bytes, by the id search gave (never by path).",
                "parameters": [{"name": "photo_id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {
                  "200": {"description": "The photo.", "content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}, "image/png": {"schema": {"type": "string", "format": "binary"}}}},
                  "401": {"$ref": "#/components/responses/Error"},
                  "404": {"$ref": "#/components/responses/Error"},
                  "410": {"$ref": "#/components/responses/Error"},
                  "500": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/api/v1/photos/{photo_id}/thumbnail": {
              "get": {
                "operationId": "thumbnail",
                "parameters": [{"name": "photo_id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {
                  "200": {"description": "A JPEG, 320 pixels on its longer side at most.", "content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}}},
                  "401": {"$ref": "#/components/responses/Error"},
                  "404": {"$ref": "#/components/responses/Error"},
                  "410": {"$ref": "#/components/responses/Error"},
                  "500": {"$ref": "#/components/responses/Error"},
                  "503": {"$ref": "#/components/responses/Error"}
                }
              }
            },
            "/metrics": {
              "get": {
                "operationId": "metrics",
                "description": "Prometheus text: requests and latencies per route, inference queue depth, feature-store bytes and images. Needs the token too when the server has one.",
                "responses": {"200": {"description": "Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}},
                  "401": {"$ref": "#/components/responses/Error"}}
              }
            }
          },
          "components": {
            "parameters": {
              "Queries": {"name": "q", "in": "query", "required": true, "description": "Comma-separated queries in Lookout's syntax, read as lookout detect -q reads them (at most 4096): dog, red car; sofa|couch (alternatives, labelled sofa); dog@0.4 (its own threshold); -person (negative: never reported, removes the boxes it outscores); \\, \\| \\@ \\- for the characters.", "schema": {"type": "string", "pattern": "[^,\\s]"}},
              "Conf": {"name": "conf", "in": "query", "schema": {"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1, "default": 0.25}},
              "Iou": {"name": "iou", "in": "query", "schema": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "maximum": 1, "default": 0.7}},
              "MaxDet": {"name": "max_det", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 300}}
            },
            "responses": {
              "Error": {"description": "What was wrong.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            },
            "schemas": {
              "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
              "Health": {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}, "model": {"type": "string"}, "index": {"type": "boolean"}, "images_kept": {"type": "integer"},
                "image_tower": {"type": "object", "description": "The served index's whole-photo tower: its family, the name of its file or folder, and how its scene scores read (sigmoid: SigLIP's own probability; calibrated: the tower's recorded calibration; standard: the fixed mapping of the cosine).", "required": ["family", "name", "scores"], "properties": {"family": {"type": "string", "enum": ["CLIP", "open_clip", "SigLIP"]}, "name": {"type": "string"}, "scores": {"type": "string", "enum": ["sigmoid", "calibrated", "standard"]}}}}},
              "Requery": {"type": "object", "properties": {
                "q": {"type": "string", "description": "The queries as one line, as the q parameter of /api/v1/detect takes them (instead of queries)."},
                "queries": {"type": "array", "maxItems": 4096, "items": {"type": "string"},
                  "description": "One query per string, in Lookout's syntax (sofa|couch, dog@0.4, -person; commas are text here). At least one with a character other than white space (blank ones are dropped), unless prompt_boxes are given."},
                "prompt_boxes": {"type": "array", "maxItems": 64, "description": "YOLOE visual prompts: boxes drawn around examples of what to find, on this photo or (image_id) on other photos sent before, in that photo's pixels; the boxes of one label make one query, its embeddings from each photo averaged as lookout detect --prompt-image does (default label: object; a label also typed is one query with them, see combine_examples). A model without a visual prompt encoder answers 400.",
                  "items": {"type": "object", "required": ["box"], "properties": {
                    "box": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4, "description": "[x1, y1, x2, y2]"},
                    "label": {"type": "string"},
                    "image_id": {"type": "string", "maxLength": 128, "description": "The photo the box is drawn on, as /api/v1/detect named it (its features still kept; 404 once dropped); default: this photo. At most 16 photos."}}}},
                "combine_examples": {"type": "string", "enum": ["best", "mean"], "description": "How a label both typed and given by prompt_boxes makes one query: best (default; the examples an alternative of the text) or mean (one averaged embedding)."},
                "conf": {"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1},
                "iou": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "maximum": 1},
                "max_det": {"type": "integer", "minimum": 1, "maximum": 10000},
                "slice": {"type": "string", "pattern": "^([0-9]{1,5}(x[0-9]{1,5})?|auto)$", "description": "The photo's tiles, as /api/v1/detect was sent them with slice=…: their kept features answer (404 when none are kept for these settings). Not with prompt_boxes."},
                "overlap": {"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1, "description": "With slice, as sent to /api/v1/detect."}}},
              "Detection": {"type": "object", "required": ["label", "query_index", "score", "box"], "properties": {
                "label": {"type": "string"}, "query_index": {"type": "integer"}, "score": {"type": "number"},
                "track_id": {"type": "integer", "description": "With track=NAME: the object's id in that sequence of frames."},
                "mask": {"type": "object", "description": "A segmentation model's (YOLOE) mask of the detection at the photo's size, as COCO compressed RLE (what pycocotools' mask.decode reads).", "properties": {"size": {"type": "array", "items": {"type": "integer"}, "description": "[height, width]"}, "counts": {"type": "string"}}},
                "box": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}}},
              "VideoDetections": {"type": "object", "required": ["width", "height", "frames", "found"], "properties": {
                "width": {"type": "integer"}, "height": {"type": "integer"},
                "frames": {"type": "array", "items": {"type": "object", "required": ["frame", "time", "detections"], "properties": {
                  "frame": {"type": "integer"}, "time": {"type": "number"},
                  "detections": {"type": "array", "items": {"$ref": "#/components/schemas/Detection"}}}}},
                "found": {"type": "object", "additionalProperties": {"type": "object", "required": ["first", "last", "frames"], "properties": {
                  "first": {"type": "number"}, "last": {"type": "number"}, "frames": {"type": "integer"}}}},
                "tracks": {"type": "integer"}}},
              "Detections": {"type": "object", "required": ["image_id", "width", "height", "detections"], "properties": {
                "image_id": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
                "detections": {"type": "array", "items": {"$ref": "#/components/schemas/Detection"}},
                "timings": {"type": "object", "additionalProperties": {"type": "number"}}}},
              "SearchResults": {"type": "object", "required": ["results"], "properties": {
                "query": {"type": "string"},
                "results": {"type": "array", "items": {"type": "object", "required": ["image", "score", "detections"], "properties": {
                  "image": {"type": "string"}, "name": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"},
                  "score": {"type": "number"}, "evidence": {"type": "string"},
                  "labels": {"type": "array", "items": {"type": "string"}, "description": "What the index's prompt-free detector named in the photo, best first (an index made with --prompt-free)."},
                  "detections": {"type": "array", "items": {"type": "object", "properties": {"score": {"type": "number"}, "box": {"type": "array", "items": {"type": "number"}}}}}}}}}}
            }
          }
        }
        """#

    /// The methods the document gives `path` (a request path: `{name}` segments match any one segment).
    public static func methods(for path: String) -> [String] {
        let given = path.split(separator: "/", omittingEmptySubsequences: false)
        return operations.filter { operation in
            let template = operation.path.split(separator: "/", omittingEmptySubsequences: false)
            return template.count == given.count
                && zip(template, given).allSatisfy { $0.hasPrefix("{") && !$1.isEmpty || $0 == $1 }
        }.map(\.method)
    }

    /// Every operation the document describes, as (method, path template) — what the server routes.
    /// The parameters of a search, shared by `/api/v1/search` and `/api/v1/search/dataset`.
    static let searchParameters = #"""
        {"name": "q", "in": "query", "required": true, "description": "What to find, in words; searching by example, the name it is shown under.", "schema": {"type": "string", "minLength": 1}},
        {"name": "image_id", "in": "query", "description": "Search by example (YOLOE): the photo the prompt_box boxes are drawn on (those that name no photo of their own), as /api/v1/detect named it (its features still kept; 404 once dropped).", "schema": {"type": "string"}},
        {"name": "prompt_box", "in": "query", "description": "Search by example: x1,y1,x2,y2 in the image_id photo's pixels, or x1,y1,x2,y2@ID on the photo /api/v1/detect named ID, around the thing to find; repeat it for more examples of the same thing, on one photo or several (at most 64).", "schema": {"type": "array", "items": {"type": "string", "pattern": "^[^,]+,[^,]+,[^,]+,[^,]+$"}}, "style": "form", "explode": true},
        {"name": "combine_examples", "in": "query", "description": "Search by example with the words too: best (the words and the examples are alternatives: each region takes the better score) or mean (one embedding, their normalised average), as lookout search --combine-examples. Without it the examples alone are searched.", "schema": {"type": "string", "enum": ["best", "mean"]}},
        {"name": "top", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20}},
        {"name": "conf", "in": "query", "schema": {"type": "number", "minimum": 0, "exclusiveMaximum": true, "maximum": 1, "default": 0.1}},
        {"name": "scan", "in": "query", "description": "true: read and score every indexed photo instead of those the region lists or pgvector's indexes point to (the exact scan, slower, for comparison), as lookout search --scan.", "schema": {"type": "boolean", "default": false}},
        {"name": "label", "in": "query", "description": "Only photos where the index's prompt-free detector (lookout index --prompt-free) named this; repeat it for photos that show all of several. An index without such labels answers 400.", "schema": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}}, "style": "form", "explode": true}
        """#

    public static let operations: [(method: String, path: String)] = [
        ("GET", "/api/v1/health"), ("GET", "/api/v1/openapi.json"), ("POST", "/api/v1/detect"),
        ("POST", "/api/v1/images/{image_id}/detect"), ("POST", "/api/v1/videos/detect"), ("GET", "/api/v1/search"),
        ("GET", "/api/v1/search/dataset"), ("GET", "/api/v1/photos/{photo_id}"),
        ("GET", "/api/v1/photos/{photo_id}/thumbnail"), ("GET", "/metrics"),
    ]
}
