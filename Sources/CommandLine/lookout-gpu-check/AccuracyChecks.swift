import LookoutCUDA
import LookoutDetector
import LookoutEngine
import LookoutEvaluation
import LookoutImage
import LookoutSupport

/// The accuracy of the GPU's arithmetics, as `lookout eval` measures it: the demo model on COCO-labelled scenes
/// (a folder with `instances.json`), every category's name (and synonyms) one query, ultralytics' validator
/// settings (conf 0.001, IoU 0.7, 300 boxes, multi-label), COCOeval's mAP50-95 and mAP50; the CPU's fp32 beside
/// the GPU's fp32, fp16 and bf16. fp16 and bf16 pass within 0.5 point of the GPU's fp32 mAP50-95 (issue 51's
/// bound, the CPU's bf16 bound), fp32 within 0.0005 of the CPU's (the same arithmetic, summed in another order).
struct AccuracyChecks {
    let model: String
    let folder: String

    struct Row {
        let name: String
        let stats: [Double]
        let milliseconds: Double
    }

    func run() -> (lines: [String], passed: Bool) {
        var lines: [String] = []
        let truth: COCODataset
        do { truth = try COCODataset.load(path: folder + "/instances.json") } catch {
            return (["  FAILED reading \(folder)/instances.json: \(error)"], false)
        }
        let categories = truth.categories.sorted { $0.id < $1.id }
        let queries = categories.map { category in
            var texts: [String] = []
            for text in [category.name] + category.synonyms where !text.isEmpty && !texts.contains(text) {
                texts.append(text)
            }
            return Query(alternatives: texts)
        }
        var options = SuppressionOptions()
        options.confidence = 0.001
        options.iou = 0.7
        options.maximumDetections = 300
        options.multiLabel = true
        let images: [(entry: COCODataset.ImageEntry, image: Image)]
        do {
            images = try truth.images.map { ($0, try ImageFile.read(folder + "/" + $0.fileName)) }
        } catch {
            return (["  FAILED reading the scenes of \(folder): \(error)"], false)
        }
        let runs: [(String, ComputeDevice, GPUArithmetic)] = [
            ("CPU fp32", .cpu, .fp32), ("GPU fp32", .cuda(0), .fp32), ("GPU fp16", .cuda(0), .fp16),
            ("GPU bf16", .cuda(0), .bf16),
        ]
        var rows: [Row] = []
        for (name, device, arithmetic) in runs {
            var configuration = EngineConfiguration(
                model: .directory(model), vocabulary: "Vocab/clip_vocab.json", caches: true,
                cacheDirectory: "/tmp/lookout-gpu-check-cache")
            configuration.device = device
            configuration.gpuArithmetic = arithmetic
            let engine: Engine
            do { engine = try Engine.load(configuration).engine } catch {
                return (lines + ["  FAILED loading \(model) for \(name): \(error)"], false)
            }
            var found: [COCODetection] = []
            var clock = Stopwatch()
            for (entry, image) in images {
                let result = engine.detect(
                    engine.prepare(image: image, name: entry.fileName), queries: queries, options: options)
                for item in result.detections {
                    found.append(
                        COCODetection(
                            imageID: entry.id, categoryID: categories[item.queryIndex].id, corners: item.box,
                            score: item.score))
                }
            }
            let milliseconds = clock.lap() * 1e3 / Double(max(images.count, 1))
            do {
                let summary = try COCOEvaluation.evaluate(truth: truth, detections: found)
                rows.append(Row(name: name, stats: summary.stats, milliseconds: milliseconds))
            } catch {
                return (lines + ["  FAILED evaluating \(name): \(error)"], false)
            }
        }
        lines.append("\(model) on \(folder) (\(images.count) scenes, \(categories.count) categories as queries):")
        lines.append("  | run | mAP50-95 | mAP50 | ms per scene |")
        for row in rows {
            lines.append(
                "  | \(row.name) | \(COCOEvaluation.format3(row.stats[0])) (\(row.stats[0])) | \(COCOEvaluation.format3(row.stats[1])) | \((row.milliseconds * 100).rounded() / 100) |"
            )
        }
        let cpu = rows[0].stats[0], gpu = rows[1].stats[0]
        var passed = abs(gpu - cpu) <= 0.0005
        lines.append(
            "  GPU fp32 against CPU fp32: \(gpu - cpu) (bound 0.0005): \(abs(gpu - cpu) <= 0.0005 ? "passed" : "FAILED")"
        )
        for row in rows.dropFirst(2) {
            let difference = row.stats[0] - gpu
            let within = abs(difference) <= 0.005
            passed = passed && within
            lines.append(
                "  \(row.name) against GPU fp32: \(difference) (bound 0.005, half a point): \(within ? "passed" : "FAILED")"
            )
        }
        return (lines, passed)
    }
}
