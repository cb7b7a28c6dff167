import LookoutDetector
import LookoutEngine
import LookoutImage
import LookoutTestSupport
import Testing

/// Examples as queries (several reference photos for one label; words with examples) on the YOLOE demo model.
@Suite struct ExamplesTests {
    static let engine: Engine = {
        try! Engine.load(
            EngineConfiguration(model: .directory(Repository.root + "/Models/demo-yoloe"), caches: false)
        ).engine
    }()
    static let scenes = Repository.root + "/examples/scenes/"

    /// Reference photos letterboxed as ultralytics prepares a refer_image.
    static func reference(_ name: String) throws -> PreparedImage {
        engine.prepare(image: try ImageFile.read(scenes + name), name: name, size: 640, square: true)
    }

    /// Boxes of examples/scenes/truth.json: a star on scene-0000 and one on scene-0001, a circle on scene-0001.
    static func photos() throws -> [ExamplePhoto] {
        [
            ExamplePhoto(
                photo: try reference("scene-0000.jpg"),
                prompts: [VisualPrompt(box: [124, 62, 209, 108], label: "star")]),
            ExamplePhoto(
                photo: try reference("scene-0001.jpg"),
                prompts: [
                    VisualPrompt(box: [20, 108, 132, 237], label: "star"),
                    VisualPrompt(box: [147, 53, 218, 123], label: "circle"),
                ]),
        ]
    }

    @Test func averagingIsOrderIndependentToTheBit() {
        var generator = SystemRandomNumberGenerator()
        let embeddings = (0..<8).map { _ in (0..<512).map { _ in Float.random(in: -1...1, using: &generator) } }
        let first = Examples.average(embeddings)
        for _ in 0..<20 { #expect(Examples.average(embeddings.shuffled()) == first) }
        let norm = first.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
        #expect(abs(norm - 1) < 1e-6)
        // The mean direction, computed here in Double from the normalised inputs.
        let normalised = embeddings.map { v -> [Double] in
            let n = v.reduce(0.0) { $0 + Double($1) * Double($1) }.squareRoot()
            return v.map { Double($0) / n }
        }
        let sum = (0..<512).map { i in normalised.reduce(0.0) { $0 + $1[i] } }
        let sumNorm = sum.reduce(0.0) { $0 + $1 * $1 }.squareRoot()
        #expect(zip(first, sum).allSatisfy { abs(Double($0) - $1 / sumNorm) < 1e-7 })
    }

    /// One reference photo gives exactly the single visual prompt's embedding; several photos in either order give
    /// the same bits; a label's count of examples is its photos.
    @Test func oneExampleIsTheSinglePromptAndOrderDoesNotMatter() throws {
        let engine = Self.engine
        let photos = try Self.photos()
        let single = try engine.exampleQueries([photos[0]])
        let direct = try engine.visualPromptEmbeddings(photos[0].prompts, on: photos[0].photo)
        #expect(single.map(\.embedding) == direct.map(\.embedding))
        let both = try engine.exampleQueries(photos)
        #expect(both.map(\.label) == ["star", "circle"])
        #expect(both.map(\.examples) == [2, 1])
        let swapped = try engine.exampleQueries(photos.reversed())
        #expect(swapped.first { $0.label == "star" }!.embedding == both[0].embedding)
        let second = try engine.visualPromptEmbeddings(photos[1].prompts, on: photos[1].photo)
        #expect(both[0].embedding == Examples.average([direct[0].embedding, second[0].embedding]))
        #expect(both[1].embedding == second[1].embedding)
    }

    /// Text with examples, `best`: the query's score at each place is the better of the text's and the examples'
    /// (the same detections as scoring them as two queries and taking the maximum); `mean`: one class embedding,
    /// the normalised mean of the text's class embedding (get_tpe) and the examples'.
    @Test func textWithExamplesCombinesAsSpecified() throws {
        let engine = Self.engine
        let star = try engine.exampleQueries(try Self.photos()).first { $0.label == "star" }!
        let photo = try engine.prepare(path: Self.scenes + "scene-0003.jpg", size: 640)
        let typed = QueryPlan([Query("star"), Query("hexagon")])

        var best = typed
        engine.add([star], to: &best, combination: .best)
        #expect(best.count == 2 && best.groups[0].count == 2)
        var apart = typed
        apart.append(label: "star examples", embedding: star.embedding, asIs: true)
        let query = engine.prepare(apart)
        let scored = engine.score(photo, plan: apart, text: query.features)
        let anchors = scored.output.count / (4 + 3)
        var merged = Array(scored.output[0..<(6 * anchors)])
        for a in 0..<anchors {
            merged[4 * anchors + a] = max(scored.output[4 * anchors + a], scored.output[6 * anchors + a])
        }
        let expected = engine.detections(
            ScoredImage(prepared: photo, labels: ["star", "hexagon"], output: merged, timings: scored.timings),
            options: SuppressionOptions())
        let combined = engine.detect(photo, engine.prepare(best))
        // (The expected answer was built without the mask coefficients: compare what the boxes say.)
        func boxes(_ result: ImageDetections) -> [String] {
            result.detections.map { "\($0.label) \($0.queryIndex) \($0.score) \($0.box)" }
        }
        #expect(boxes(combined) == boxes(expected))
        #expect(combined.detections.contains { $0.label == "star" })

        var mean = typed
        engine.add([star], to: &mean, combination: .mean)
        #expect(mean.count == 2 && mean.groups[0].count == 1 && mean.asIs.contains(mean.groups[0][0]))
        let text = engine.prepare(typed).features[0..<engine.network.embeddingSize]
        let tpe = engine.network.classEmbeddings(Array(text), classes: 1)
        #expect(mean.embedded[mean.groups[0][0]] == Examples.average([tpe, star.embedding]))
        #expect(engine.detect(photo, engine.prepare(mean)).detections.contains { $0.label == "star" })
    }

    /// A label with no typed query is a query of its own; a negative query is never combined.
    @Test func examplesWithoutTextAreQueriesOfTheirOwn() throws {
        let engine = Self.engine
        let examples = try engine.exampleQueries(try Self.photos())
        var plan = QueryPlan([Query("hexagon"), Query(alternatives: ["circle"], negative: true)])
        engine.add(examples, to: &plan, combination: .best)
        #expect(plan.labels == ["hexagon", "circle", "star", "circle"])
        #expect(plan.groups.map(\.count) == [1, 1, 1, 1])
    }

    /// `lookout query`'s `:box N …`: examples on several of the session's photos, averaged per label from their
    /// kept features, join every question as `detect` joins them; a photo number out of range is refused.
    @Test func aQuerySessionTakesExamplesOnSeveralPhotos() throws {
        let engine = Self.engine
        let store = FeatureStore(modelKey: "demo-yoloe")
        let session = QuerySession(engine: engine, store: store)
        let names = ["scene-0003.jpg", "scene-0000.jpg", "scene-0001.jpg"]
        #expect(session.add(names.map { Self.scenes + $0 }).failures.isEmpty)
        let prompts = [
            VisualPrompt(box: [124, 62, 209, 108], label: "star"),
            VisualPrompt(box: [20, 108, 132, 237], label: "star"),
        ]
        _ = try session.setVisualPrompts(prompts, photos: [1, 2])
        let answer = session.ask(["hexagon"])
        let photos = try zip(names.dropFirst(), prompts).map {
            ExamplePhoto(photo: try engine.prepare(path: Self.scenes + $0.0, size: 640), prompts: [$0.1])
        }
        var plan = QueryPlan([Query("hexagon")])
        engine.add(try engine.exampleQueries(photos), to: &plan, combination: .best)
        let expected = engine.detect(try engine.prepare(path: Self.scenes + names[0], size: 640), engine.prepare(plan))
        #expect(answer.results[0].detections.map(\.label) == expected.detections.map(\.label))
        #expect(answer.results[0].detections.map(\.score) == expected.detections.map(\.score))
        #expect(answer.results[0].detections.contains { $0.label == "star" })
        #expect(throws: VisualPromptError.self) { try session.setVisualPrompts(prompts, photos: [1, 3]) }
    }
}
