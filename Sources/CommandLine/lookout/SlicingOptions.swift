import ArgumentParser
import LookoutEngine

/// `--slice` and its companions: sliced inference (SAHI) on detect, track and eval.
struct SlicingOptions: ParsableArguments {
    @Option(
        name: .customLong("slice"),
        help: ArgumentHelp(
            "Sliced inference for small objects (SAHI): cut each photo or frame into overlapping tiles of WxH pixels (N: N×N; auto: sized from the photo as sahi's auto_slice_resolution does), detect every tile at --imgsz and the whole photo too, and merge the boxes as the sahi library does. A photo smaller than a tile is one tile.",
            valueName: "WxH|N|auto"))
    var slice: String?

    @Option(
        name: .customLong("overlap"),
        help: ArgumentHelp(
            "The fraction of a tile its neighbours share, across and down (default 0.2, as sahi).",
            valueName: "ratio"))
    var overlap: Double?

    @Option(
        name: .customLong("slice-merge"),
        help: ArgumentHelp(
            "How the boxes of the tiles and the whole photo become one: greedynmm (default: each box, best first, takes in the boxes that overlap it, their union its box), nmm (the same, passed on from box to box) or nms (overlapping boxes are dropped). Named here, it is kept at any --conf; otherwise, as sahi, a --conf below 0.1 merges by nms with iou.",
            valueName: "method"))
    var merge: String?

    @Option(
        name: .customLong("slice-metric"),
        help: ArgumentHelp(
            "What overlap means for the merge: ios (the intersection over the smaller box, default) or iou.",
            valueName: "metric"))
    var metric: String?

    @Option(
        name: .customLong("slice-match"),
        help: ArgumentHelp("Boxes merge from this overlap up (default 0.5).", valueName: "fraction"))
    var match: Float?

    @Flag(name: .customLong("slice-agnostic"), help: "Merge boxes of different queries too.")
    var agnostic = false

    @Option(
        name: .customLong("tile-lanes"),
        help: ArgumentHelp(
            "Tiles computed side by side, each on one thread (default: one per thread; 1: one tile after another on every thread). In fp32 and int8 it changes the time, never the boxes; bf16's per-layer kernel choice is measured per thread count, so a lane of one thread may choose otherwise than all threads.",
            valueName: "n"))
    var tileLanes: Int?

    @Flag(
        name: .customLong("tiles-only"),
        help: "Detect the tiles only, not the whole photo as well (sahi's perform_standard_pred=False).")
    var tilesOnly = false

    /// The options, or nil without `--slice`; a companion without `--slice` or a bad value is an error that says
    /// what to give.
    func options() throws -> SliceOptions? {
        guard let slice else {
            if overlap != nil || merge != nil || metric != nil || match != nil || agnostic || tilesOnly
                || tileLanes != nil
            {
                throw ValidationError(
                    "--overlap, --slice-merge, --slice-metric, --slice-match, --slice-agnostic, --tiles-only and --tile-lanes go with --slice WxH (sliced inference)."
                )
            }
            return nil
        }
        do {
            var options = SliceOptions(size: try SliceOptions.parseSize(slice))
            if options.size == .automatic && overlap != nil {
                throw ValidationError(
                    "--slice auto brings its own overlap (as sahi's): leave out --overlap, or give the tile size.")
            }
            if let overlap {
                options.overlapWidth = overlap
                options.overlapHeight = overlap
            }
            if let merge {
                guard let method = SliceMerge.Method(rawValue: merge.lowercased()) else {
                    throw ValidationError("--slice-merge \(merge): give greedynmm, nmm or nms.")
                }
                options.merge.method = method
                options.merge.forced = true
            }
            if let metric {
                guard let value = SliceMerge.Metric(rawValue: metric.lowercased()) else {
                    throw ValidationError("--slice-metric \(metric): give ios or iou.")
                }
                options.merge.metric = value
            }
            if let match { options.merge.threshold = match }
            options.merge.classAgnostic = agnostic
            options.wholePhoto = !tilesOnly
            if let tileLanes {
                guard (1...64).contains(tileLanes) else { throw ValidationError("--tile-lanes must be from 1 to 64.") }
                options.lanes = tileLanes
            }
            return try options.validated()
        } catch let error as SliceError {
            throw ValidationError("--slice: \(error.description)")
        }
    }

    /// Says on standard error when sahi's low-confidence switch changes the merge (a `--conf` below 0.1 without
    /// `--slice-merge`).
    func explain(_ options: SliceOptions?, confidence: Float) {
        guard let options, options.merge.forConfidence(confidence) != options.merge else { return }
        printError(
            "lookout: --conf \(confidence) is below 0.1, so the tiles' boxes merge by nms with iou, as sahi does (name --slice-merge to keep another)"
        )
    }
}
