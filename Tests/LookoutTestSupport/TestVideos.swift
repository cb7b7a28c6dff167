#if canImport(Glibc)
    import Glibc
#endif

/// Test videos made from the demo scenes by Debian's `ffmpeg` command (installed by scripts/test).
public enum TestVideos {
    /// Runs a shell command line, its output into `log` (or discarded); returns its exit status. (`system`,
    /// not Foundation's Process: it neither inherits the test's pipes nor waits on them.)
    @discardableResult
    public static func shell(_ command: String, log: String = "/dev/null") -> Int32 {
        let status = system("\(command) >\(quoted(log)) 2>&1 </dev/null")
        return status >= 0 ? (status >> 8) & 0xFF : status
    }

    public static func quoted(_ text: String) -> String { "'" + text.replacingAll("'", with: "'\\''") + "'" }

    /// Whether `ffmpeg` and `ffprobe` are on PATH.
    public static var haveFFmpeg: Bool { shell("command -v ffmpeg && command -v ffprobe") == 0 }

    /// A moving scene: a `width`×`height` window panning over a demo scene (`scene`, a file) at 10 frames per
    /// second for `frames` frames, `speed` pixels a frame across, then down. `codec` is ffmpeg's output
    /// arguments (the lossless default: FFV1 in BGR).
    public static func pan(
        scene: String, to output: String, frames: Int = 20, width: Int = 320, height: Int = 256, speed: Int = 9,
        codec: String = "-c:v ffv1 -pix_fmt bgr0"
    ) -> Int32 {
        let filter =
            "scale=w='max(iw,\(width + frames * speed))':h='max(ih,\(height + frames * speed))':force_original_aspect_ratio=increase,"
            + "crop=\(width):\(height):x='n*\(speed)':y='n*\(speed / 2)'"
        return shell(
            "ffmpeg -nostdin -y -loop 1 -framerate 10 -i \(quoted(scene)) -vf \(quoted(filter)) -frames:v \(frames) \(codec) \(quoted(output))"
        )
    }

    /// Every frame of `video` as PNG files `prefix0001.png`, … (ffmpeg's own decoding and conversion to RGB,
    /// rotation applied), one per decoded frame.
    public static func framesAsPNG(_ video: String, prefix: String) -> Int32 {
        shell(
            "ffmpeg -nostdin -y -i \(quoted(video)) -fps_mode passthrough -pix_fmt rgb24 \(quoted(prefix + "%04d.png"))"
        )
    }
}

extension String {
    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
