import Dispatch
import Foundation
import Hummingbird
import LookoutEngine
import LookoutIndex
import LookoutJSON
import LookoutSupport
import LookoutTracking
import NIOCore

/// The routes of ``LookoutServer``, by resource.
extension LookoutServer {
    /// `/` (the web page), `/api/v1/health`, `/api/v1/openapi.json` and `/metrics`.
    func pageRoutes(_ router: Router<ServerRequestContext>, metrics: ServerMetrics) {
        let service = self.service, registry = self.registry
        router.get("/") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-cache"],
                body: .init(byteBuffer: ByteBuffer(string: WebPage.html)))
        }
        router.get("/api/v1/health") { _, _ in
            var fields: [(String, JSONValue)] = [
                ("status", .string("ok")), ("index", .bool(service.indexPath != nil)),
                ("images_kept", .int(Int64(service.store.count))),
            ]
            if let tower = service.imageTower() {
                fields.append(
                    (
                        "image_tower",
                        .object([
                            ("family", .string(tower.family)), ("name", .string(tower.name)),
                            ("scores", .string(tower.scores)),
                        ])
                    ))
            }
            return Self.json(Array(JSONValue.object(fields).serialized.utf8))
        }
        router.get("/api/v1/openapi.json") { _, _ in Self.json(Array(OpenAPIDocument.json.utf8)) }
        let metricsToken = configuration.token.flatMap { $0.isEmpty ? nil : $0 }
        router.get("/metrics") { request, _ in
            if let metricsToken, !BearerToken<ServerRequestContext>.accepts(request, token: metricsToken) {
                return BearerToken<ServerRequestContext>.refusal
            }
            metrics.update()
            var out: [UInt8] = []
            registry.emit(into: &out)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
    }

    /// `POST /api/v1/detect` (a photo) and `POST /api/v1/images/{image_id}/detect` (a kept photo, again).
    func detectionRoutes(_ api: RouterGroup<ServerRequestContext>) {
        let service = self.service, queue = self.queue
        let limit = configuration.maximumBodyBytes, bodyTime = configuration.bodyTimeout
        api.post("/detect") { request, context in
            try await Self.answer {
                let query = FormQuery(request.uri.query ?? "")
                let track = query["track"]
                let (queries, thresholds) = try Self.detection(query, tracking: track != nil)
                let keep = try Self.flag(query, "keep", default: true)
                let slicing = try Self.slicing(size: query["slice"], overlap: query["overlap"])
                // The body arrives first (within its own limit), then the request takes its place in the queue.
                return try await queue.run(
                    clientGone: await context.clientGone(),
                    reading: { try await Self.body(request, limit: limit, seconds: bodyTime) }
                ) { body, _ in
                    try service.detect(
                        imageBytes: body, queries: queries, thresholds: thresholds, keep: keep, track: track,
                        slicing: slicing)
                }
            }
        }
        api.post("/images/{image_id}/detect") { request, context in
            try await Self.answer {
                let id = context.parameters.get("image_id") ?? ""
                return try await queue.run(
                    clientGone: await context.clientGone(),
                    reading: { try Self.requery(try await Self.body(request, limit: 1 << 20, seconds: bodyTime)) }
                ) {
                    request, _ in
                    try service.redetect(
                        imageID: id, queries: request.queries, prompts: request.prompts,
                        thresholds: request.thresholds, slicing: request.slicing, promptPhotos: request.promptPhotos,
                        combination: request.combination)
                }
            }
        }
    }

    /// `POST /api/v1/videos/detect`.
    func videoRoutes(_ api: RouterGroup<ServerRequestContext>) {
        let service = self.service, queue = self.queue
        let bodyTime = configuration.bodyTimeout
        let videoBytes = configuration.maximumVideoBytes, videoSeconds = configuration.maximumVideoSeconds
        let videoFrames = configuration.videoFrames
        let videoTime = max(configuration.requestTimeout, 300)
        api.post("/videos/detect") { request, context in
            try await Self.answer {
                let query = FormQuery(request.uri.query ?? "")
                var video = LookoutService.VideoRequest()
                video.maximumSeconds = videoSeconds
                video.maximumFrames = videoFrames
                video.track = try Self.flag(query, "track", default: false)
                if let tracker = query["tracker"] {
                    guard let method = ByteTracker.Method(rawValue: tracker) else {
                        throw ServiceError(400, "tracker must be bytetrack or botsort")
                    }
                    video.tracker = method
                }
                let (queries, thresholds) = try Self.detection(query, tracking: video.track)
                if let every = query["every"] {
                    guard let value = Int(every), (1...1000).contains(value) else {
                        throw ServiceError(400, "every must be a whole number from 1 to 1000")
                    }
                    video.every = value
                }
                let settings = video
                // A video holds the inference thread for all its frames: its own, longer time limit, and its work
                // stops at the next frame once that passes or the client leaves.
                return try await queue.run(
                    seconds: videoTime, clientGone: await context.clientGone(),
                    reading: { try await Self.body(request, limit: videoBytes, seconds: bodyTime) }
                ) { body, cancellation in
                    try service.detectVideo(
                        bytes: body, queries: queries, thresholds: thresholds, request: settings,
                        cancellation: cancellation)
                }
            }
        }
    }

    /// A search request as the search routes read it: the words or examples, the thresholds and filters, and the
    /// query's embeddings (computed on the compute queue, within the request's deadline).
    struct SearchRequest {
        var text: String
        var embeddings: [[Float]]
        var top: Int
        var thresholds: LookoutService.Thresholds
        var labels: [String]
        var scan: Bool
        var byExample: Bool
        var combination: Examples.Combination?
        var deadline: DispatchTime
        var evidence: PhotoIndex.Evidence { byExample ? .objects : .both }
        /// The name the results are shown under: the words, or "example" for examples alone.
        var shownQuery: String { byExample && combination == nil ? "example" : text }
    }

    /// Reads a search request (`q`, `top`, `conf`, `scan`, `label`, `image_id`, `prompt_box`, `combine_examples`)
    /// and computes its embeddings.
    static func searchRequest(
        _ request: Request, service: LookoutService, queue: InferenceQueue
    ) async throws -> SearchRequest {
        let query = FormQuery(request.uri.query ?? "")
        guard let top = Int(query["top"] ?? "20") else {
            throw ServiceError(400, "top must be a whole number")
        }
        var parsed = try LookoutService.Thresholds.parse(conf: query["conf"], iou: nil, maxDet: nil)
        if query["conf"] == nil { parsed.confidence = 0.1 }
        let scan = try Self.flag(query, "scan", default: false)
        let text = query["q"] ?? ""
        let labels = query.all("label")
        guard labels.allSatisfy({ !$0.trimmingCharacters(in: .whitespaces).isEmpty && $0.count <= 200 }) else {
            throw ServiceError(400, "label must be a name of 1 to 200 characters")
        }
        // Search by example (YOLOE): boxes drawn on photos sent to /detect before, instead of words (or with
        // them, combine_examples=best|mean). A box is on image_id's photo, or on the photo its own
        // x1,y1,x2,y2@ID names.
        let example = query["image_id"]
        // Four numbers each; whether they make a box on the photo is the engine's check (as for prompt_boxes).
        let boxes = try query.all("prompt_box").map { text -> (imageID: String, box: [Float]) in
            let (numbers, photo) =
                text.firstIndex(of: "@").map {
                    (text[..<$0], String(text[text.index(after: $0)...]) as String?)
                } ?? (Substring(text), example)
            let parts = numbers.split(separator: ",", omittingEmptySubsequences: false)
            let values = parts.compactMap { Float($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 4, values.count == 4 else {
                throw ServiceError(400, "prompt_box must be four numbers x1,y1,x2,y2[@image_id], got \(text)")
            }
            guard let photo, !photo.isEmpty else {
                throw ServiceError(
                    400,
                    "prompt_box \(text): on which photo? give image_id=… or write the box as x1,y1,x2,y2@image_id"
                )
            }
            return (photo, values)
        }
        guard example == nil || !boxes.isEmpty else {
            throw ServiceError(400, "search by example takes both image_id=… and prompt_box=x1,y1,x2,y2")
        }
        let combination = try query["combine_examples"].map { name -> Examples.Combination in
            guard let chosen = Examples.Combination(rawValue: name) else {
                throw ServiceError(400, "combine_examples must be best or mean, got \(name)")
            }
            guard !boxes.isEmpty else { throw ServiceError(400, "combine_examples needs prompt_box examples") }
            return chosen
        }
        let byExample = !boxes.isEmpty
        // One limit for the whole request, through both queues.
        let deadline = DispatchTime.now() + queue.timeout
        let (embeddings, threshold) = try await queue.run(until: deadline) { () throws -> ([[Float]], Float?) in
            if byExample {
                return try service.exampleEmbeddings(boxes, query: text, combination: combination, top: top)
            }
            return try service.searchEmbeddings(query: text, top: top)
        }
        // A threshold written in the query (`red car@0.4`) replaces conf, as on the command line.
        if let threshold { parsed.confidence = threshold }
        return SearchRequest(
            text: text, embeddings: embeddings, top: top, thresholds: parsed, labels: labels, scan: scan,
            byExample: byExample, combination: combination, deadline: deadline)
    }

    /// `GET /api/v1/search`, and `GET /api/v1/search/dataset`: its results as a training set (a ZIP archive).
    func searchRoutes(_ api: RouterGroup<ServerRequestContext>) {
        let service = self.service, queue = self.queue, searches = self.searches
        api.get("/search") { request, _ in
            try await Self.answer {
                let asked = try await Self.searchRequest(request, service: service, queue: queue)
                return try await searches.run(until: asked.deadline) {
                    try service.search(
                        query: asked.shownQuery, embeddings: asked.embeddings, top: asked.top,
                        thresholds: asked.thresholds, labels: asked.labels, evidence: asked.evidence, scan: asked.scan)
                }
            }
        }
        api.get("/search/dataset") { request, _ in
            do {
                let form = FormQuery(request.uri.query ?? "")
                let format =
                    try form["format"].map { name -> TrainingSet.Format in
                        guard let format = TrainingSet.Format(rawValue: name) else {
                            throw ServiceError(400, "format must be yolo or coco, got \(name)")
                        }
                        return format
                    } ?? .yolo
                let validation =
                    try form["val"].map { text -> Double in
                        guard let value = Double(text), value >= 0, value <= 0.9 else {
                            throw ServiceError(400, "val is the fraction of photos kept for validation, 0 to 0.9")
                        }
                        return value
                    } ?? 0.1
                let asked = try await Self.searchRequest(request, service: service, queue: queue)
                let label = (try? QuerySyntax.single(asked.shownQuery))?.label ?? asked.shownQuery
                let archive = try await searches.run(until: asked.deadline) {
                    try service.dataset(
                        label: label, embeddings: asked.embeddings, top: asked.top, thresholds: asked.thresholds,
                        labels: asked.labels, evidence: asked.evidence, scan: asked.scan, format: format,
                        validation: validation)
                }
                let file = Self.fileName(label) + "-" + format.rawValue + ".zip"
                return Response(
                    status: .ok,
                    headers: [
                        .contentType: "application/zip", .cacheControl: "no-store",
                        .contentDisposition: "attachment; filename=\"\(file)\"",
                    ],
                    body: .init(byteBuffer: ByteBuffer(bytes: archive)))
            } catch let error as ServiceError {
                return Self.failure(error)
            }
        }
    }

    /// A label as a download's file name: letters and digits kept, the rest a hyphen.
    static func fileName(_ label: String) -> String {
        let kept = String(label.prefix(60).map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "-" })
        return kept.isEmpty ? "dataset" : kept
    }

    /// `GET /api/v1/photos/{photo_id}` and its thumbnail.
    func photoRoutes(_ api: RouterGroup<ServerRequestContext>) {
        let service = self.service, queue = self.queue
        api.get("/photos/{photo_id}") { _, context in
            do {
                let id = context.parameters.get("photo_id") ?? ""
                let photo = try await queue.run { try service.photo(id: id) }
                return Response(
                    status: .ok, headers: [.contentType: photo.png ? "image/png" : "image/jpeg"],
                    body: .init(byteBuffer: ByteBuffer(bytes: photo.bytes)))
            } catch let error as ServiceError {
                return Self.failure(error)
            }
        }
        api.get("/photos/{photo_id}/thumbnail") { _, context in
            do {
                let id = context.parameters.get("photo_id") ?? ""
                let bytes = try await queue.run { try service.thumbnail(id: id) }
                return Response(
                    status: .ok, headers: [.contentType: "image/jpeg", .cacheControl: "max-age=300"],
                    body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
            } catch let error as ServiceError {
                return Self.failure(error)
            }
        }
    }
}
