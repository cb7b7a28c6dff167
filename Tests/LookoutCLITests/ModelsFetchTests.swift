import Foundation
import LookoutJSON
import LookoutSupport
import LookoutWeights
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `lookout models fetch` against a local HTTPS server started by the test (scripts/test-file-server.py,
/// a self-signed certificate made with openssl and passed with --ca-file), serving the demo model's files
/// under a catalogue written by the test: a transfer cut in the middle and resumed with a range request, a
/// wrong digest (the file removed), a 404, an untrusted certificate, a damaged file fetched again, and the
/// fetched model used by name (`detect --model NAME`) with the same detections as the demo model, and a
/// fetch through a CONNECT proxy ($HTTPS_PROXY; $NO_PROXY honoured).
@Suite(.serialized) struct ModelsFetchTests {
    final class FileServer {
        let folder: String
        private let script: ScriptServer
        var url: String { script.url }
        var root: String { folder + "/root" }
        var certificate: String { folder + "/server.crt" }
        var log: String { folder + "/requests.log" }

        /// `extra`: files served beside the demo model's, under their own names. `plain`: HTTP, no TLS.
        /// `options`: more of test-file-server.py's options (`--redirect`, `--endless`).
        init(truncate: [String], extra: [String] = [], plain: Bool = false, options: [String] = []) throws {
            let folder = try CLI.scratch("file-server")
            self.folder = folder
            let root = folder + "/root", certificate = folder + "/server.crt", log = folder + "/requests.log"
            try FileManager.default.createDirectory(atPath: folder + "/root", withIntermediateDirectories: true)
            for name in ["detector.safetensors", "text-encoder.safetensors", "image-encoder.safetensors"] {
                try FileManager.default.copyItem(atPath: CLI.root + "/Models/demo/" + name, toPath: root + "/" + name)
            }
            for path in extra {
                try FileManager.default.copyItem(
                    atPath: path, toPath: root + "/" + URL(fileURLWithPath: path).lastPathComponent)
            }
            let (status, _, err) = try TestPostgres.shell([
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName = IP:127.0.0.1", "-keyout", folder + "/server.key", "-out", certificate,
            ])
            guard status == 0 else { throw TestFailure("openssl: \(err)") }
            script = try ScriptServer(
                [root] + (plain ? [] : ["--cert", certificate, "--key", folder + "/server.key"]) + ["--log", log]
                    + truncate.flatMap { ["--truncate", $0] } + options, script: "test-file-server.py",
                scheme: plain ? "http://" : "https://")
        }

        var requests: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

        deinit { CLI.remove(folder) }
    }

    /// A server of scripts/ (Python, standard library) that prints its URL on its first line of output;
    /// killed when released.
    final class ScriptServer {
        let process = Process()
        let url: String

        /// `python`: "python3" on the PATH, or a path (Debian's /usr/bin/python3 for GStreamer's bindings).
        init(_ arguments: [String], script: String, scheme: String, python: String = "python3") throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [python, CLI.root + "/scripts/" + script] + arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(output.fileHandleForReading.fileDescriptor, &byte, 1) == 1 && byte != 10 { line.append(byte) }
            url = String(decoding: line, as: UTF8.self)
            guard url.hasPrefix(scheme) else {
                kill(process.processIdentifier, SIGKILL)
                throw TestFailure("\(script) did not start: \(url)")
            }
        }

        deinit {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// scripts/test-connect-proxy.py: a CONNECT proxy that logs the tunnels it opens.
    final class Proxy {
        private let script: ScriptServer
        let log: String
        var url: String { script.url }

        init(log: String) throws {
            self.log = log
            script = try ScriptServer([log], script: "test-connect-proxy.py", scheme: "http://")
        }

        var tunnels: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    }

    static func sha256(_ path: String) throws -> String {
        let (status, out, err) = try TestPostgres.shell(["sha256sum", path])
        guard status == 0 else { throw TestFailure("sha256sum: \(err)") }
        return String(out.prefix(64))
    }

    /// The test's catalogue: the demo's text and image towers (digests pinned), its detector (no digest:
    /// recorded at the first download) requiring them, one with a wrong digest, one the server lacks.
    static func catalogue(_ server: FileServer) throws -> String {
        let text = try sha256(server.root + "/text-encoder.safetensors")
        let image = try sha256(server.root + "/image-encoder.safetensors")
        let json = """
            {"models": [
              {"name": "demo-towers", "description": "the demo's CLIP towers",
               "files": [{"file": "text-encoder.safetensors", "url": "\(server.url)text-encoder.safetensors", "sha256": "\(text)"},
                         {"file": "image-encoder.safetensors", "url": "\(server.url)image-encoder.safetensors", "sha256": "\(image)"}]},
              {"name": "demo-detector", "description": "the demo detector", "requires": ["demo-towers"],
               "files": [{"file": "detector.safetensors", "url": "\(server.url)detector.safetensors"}],
               "manifest": {"detector": "detector.safetensors", "text_encoder": "../demo-towers/text-encoder.safetensors",
                            "image_encoder": "../demo-towers/image-encoder.safetensors"}},
              {"name": "wrong-digest", "description": "a digest the file does not have",
               "files": [{"file": "detector.safetensors", "url": "\(server.url)detector.safetensors", "sha256": "\(String(repeating: "0", count: 64))"}]},
              {"name": "not-there", "description": "a file the server lacks",
               "files": [{"file": "absent.bin", "url": "\(server.url)absent.bin"}]}
            ]}
            """
        let path = server.folder + "/catalogue.json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A YOLOE model fetched as the built-in catalogue lists one (a detector requiring its text tower, a
    /// TorchScript `.ts`, a folder up): `detect --model NAME` with typed queries finds what `--detector` and
    /// `--text-model` find; the built-in list names the YOLOE families and their towers.
    @Test func aYOLOEModelIsFetchedWithItsTower() throws {
        let detector = CLI.root + "/Tests/Fixtures/yoloe/yoloe-26n-seg-random.pt"
        let tower = CLI.root + "/Tests/Fixtures/weights/mobileclip2-tiny-random.ts"
        let server = try FileServer(truncate: [], extra: [detector, tower])
        let json = """
            {"models": [
              {"name": "tower", "description": "YOLOE-26's text tower",
               "files": [{"file": "mobileclip2_b.ts", "url": "\(server.url)mobileclip2-tiny-random.ts"}]},
              {"name": "yoloe-26n-seg", "description": "YOLOE-26n", "requires": ["tower"],
               "files": [{"file": "yoloe-26n-seg.pt", "url": "\(server.url)yoloe-26n-seg-random.pt"}],
               "manifest": {"detector": "yoloe-26n-seg.pt", "text_encoder": "../tower/mobileclip2_b.ts"}}
            ]}
            """
        let catalogue = server.folder + "/catalogue.json"
        try json.write(toFile: catalogue, atomically: true, encoding: .utf8)
        let models = try CLI.scratch("fetched-yoloe")
        defer { CLI.remove(models) }
        let fetch = try CLI.run([
            "models", "fetch", "yoloe-26n-seg", "--dir", models, "--catalogue", catalogue, "--ca-file",
            server.certificate,
        ])
        try #require(fetch.status == 0, "\(fetch.stderr)")
        let photo = CLI.root + "/examples/photos/chelsea.jpg"
        let query = ["-q", "cat, red car", "--conf", "0.05", "--imgsz", "352", "--json"]
        let byName = try CLI.run(
            ["detect", photo, "--model", "yoloe-26n-seg"] + query, environment: ["LOOKOUT_MODELS_DIR": models])
        let direct = try CLI.run(["detect", photo, "--detector", detector, "--text-model", tower] + query)
        try #require(byName.status == 0 && direct.status == 0, "\(byName.stderr) \(direct.stderr)")
        let found = try Reference.lines(byName.stdout)[0]["detections"]!
        let expected = try Reference.lines(direct.stdout)[0]["detections"]!
        #expect(expected.count > 0 && found.count == expected.count, "\(found.count) vs \(expected.count)")
        let list = try CLI.run(["models", "fetch", "--list"])
        for name in ["yoloe-11s-seg", "yoloe-v8l-seg-pf", "yoloe-26x-seg", "mobileclip2-b", "mobileclip-blt"] {
            #expect(list.stdout.contains(name), "\(name) in \(list.stdout)")
        }
    }

    /// An open_clip tower fetched as the built-in catalogue lists one (issue 52: its folder's config and weights, no
    /// manifest), then used by its folder: `embed --image` gives open_clip's embedding; the built-in list names them.
    @Test func anOpenCLIPTowerIsFetchedAsAFolder() throws {
        let source = CLI.root + "/Tests/Fixtures/open-clip/gelu-224"
        let server = try FileServer(
            truncate: [], extra: [source + "/open_clip_config.json", source + "/open_clip_pytorch_model.bin"])
        let json = """
            {"models": [
              {"name": "openclip-tiny", "description": "an open_clip tower",
               "files": [{"file": "open_clip_config.json", "url": "\(server.url)open_clip_config.json"},
                         {"file": "open_clip_pytorch_model.bin", "url": "\(server.url)open_clip_pytorch_model.bin"}]}
            ]}
            """
        let catalogue = server.folder + "/catalogue.json"
        try json.write(toFile: catalogue, atomically: true, encoding: .utf8)
        let models = try CLI.scratch("fetched-open-clip")
        defer { CLI.remove(models) }
        let fetch = try CLI.run([
            "models", "fetch", "openclip-tiny", "--dir", models, "--catalogue", catalogue, "--ca-file",
            server.certificate,
        ])
        #expect(fetch.status == 0, "\(fetch.stderr)")
        let photo = "Tests/Fixtures/clip-image/gray.jpg"
        let embed = try CLI.run([
            "embed", "--image", "--image-model", models + "/openclip-tiny", CLI.root + "/" + photo,
        ])
        #expect(embed.status == 0, "\(embed.stderr)")
        let expected = try WeightFile.open(source + "/expected.safetensors")
        let reference = try expected.view("image:" + photo).floats()
        let actual = Reference.numbers(try JSONDocument(text: embed.stdout).root).map { Float($0) }
        let bound = min(1e-4, max(10 * Float(try #require(expected.metadata["reference_error"]))!, 1e-6))
        #expect(actual.count == reference.count && zip(actual, reference).map { abs($0 - $1) }.max()! <= bound)
        let list = try CLI.run(["models", "fetch", "--list"])
        for name in ["openclip-vit-b-32-256-datacomp", "openclip-vit-l-14-laion2b"] {
            #expect(list.stdout.contains(name), "\(name) in \(list.stdout)")
        }
    }

    /// A hostile or careless source: plain HTTP refused unless `--allow-http`, a redirect from HTTPS to HTTP
    /// refused (nothing kept), a body that never ends stopped at the file's cap and its part removed, a size
    /// over the cap refused before the download, and a manifest path out of the models' folders refused.
    @Test func fetchRefusesPlainHTTPDowngradesEndlessBodiesAndPathsOut() throws {
        let plain = try FileServer(truncate: [], plain: true)
        let secure = try FileServer(
            truncate: [],
            options: [
                "--redirect", "downgrade.safetensors=\(plain.url)detector.safetensors", "--endless", "endless.bin",
            ])
        let json = """
            {"models": [
              {"name": "plain", "files": [{"file": "detector.safetensors", "url": "\(plain.url)detector.safetensors"}]},
              {"name": "downgrade", "files": [{"file": "detector.safetensors", "url": "\(secure.url)downgrade.safetensors"}]},
              {"name": "endless", "files": [{"file": "endless.bin", "url": "\(secure.url)endless.bin", "max_bytes": 3000000}]},
              {"name": "too-big", "files": [{"file": "detector.safetensors", "url": "\(secure.url)detector.safetensors", "max_bytes": 1000}]}
            ]}
            """
        let catalogue = secure.folder + "/hostile.json"
        try json.write(toFile: catalogue, atomically: true, encoding: .utf8)
        let models = try CLI.scratch("hostile-models")
        defer { CLI.remove(models) }
        let options = ["--dir", models, "--catalogue", catalogue, "--ca-file", secure.certificate]
        for (name, says) in [
            ("plain", "plain HTTP"), ("downgrade", "away from HTTPS"), ("endless", "went past"),
            ("too-big", "more than"),
        ] {
            let started = Date()
            let result = try CLI.run(["models", "fetch", name] + options, timeout: 120)
            #expect(result.status != 0 && result.stderr.contains(says), "\(name): \(result.status) \(result.stderr)")
            #expect(Date().timeIntervalSince(started) < 60, "\(name) took too long")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: models + "/" + name)) ?? []
            #expect(left.isEmpty, "\(name) left \(left)")
        }
        #expect(!plain.requests.contains("detector.safetensors - 200"), "the downgrade was followed: \(plain.requests)")
        let allowed = try CLI.run(["models", "fetch", "plain", "--allow-http"] + options)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        let escape = secure.folder + "/escape.json"
        try """
        {"models": [{"name": "escape", "files": [{"file": "detector.safetensors", "url": "\(secure.url)detector.safetensors"}],
          "manifest": {"detector": "detector.safetensors", "text_encoder": "../../../etc/passwd"}}]}
        """.write(toFile: escape, atomically: true, encoding: .utf8)
        let refused = try CLI.run([
            "models", "fetch", "escape", "--dir", models, "--catalogue", escape, "--ca-file", secure.certificate,
        ])
        #expect(
            refused.status != 0 && refused.stderr.contains("must name a file of the model's folder"),
            "\(refused.stderr)")
    }

    @Test func fetchResumeVerifyAndUseByName() throws {
        let detectorSize =
            try FileManager.default.attributesOfItem(atPath: CLI.root + "/Models/demo/detector.safetensors")[
                .size] as! Int
        let cut = detectorSize / 2
        let server = try FileServer(truncate: ["detector.safetensors:\(cut)"])
        let catalogue = try Self.catalogue(server)
        let models = try CLI.scratch("fetched-models")
        defer { CLI.remove(models) }
        let options = ["--dir", models, "--catalogue", catalogue, "--ca-file", server.certificate]

        // The detector's transfer is cut halfway: an error that says so, the part kept.
        let first = try CLI.run(["models", "fetch", "demo-detector"] + options)
        #expect(first.status != 0, "\(first.stderr)")
        #expect(
            first.stderr.contains("stopped at") && first.stderr.contains("run the same command again to resume"),
            "\(first.stderr)")
        let part = models + "/demo-detector/detector.safetensors.part"
        // What arrived before the cut (TLS may drop the last records it had buffered).
        let kept = ModelsFetchTests.size(part) ?? 0
        #expect(kept > 0 && kept <= cut, "the part holds what arrived (\(kept) of \(cut) bytes)")
        #expect(!FileManager.default.fileExists(atPath: models + "/demo-detector/detector.safetensors"))
        #expect(FileManager.default.fileExists(atPath: models + "/demo-towers/text-encoder.safetensors"))

        // Again: resumed with a range request, then whole and identical.
        let second = try CLI.run(["models", "fetch", "demo-detector"] + options)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(server.requests.contains("/detector.safetensors bytes=\(kept)- 206"), "\(server.requests)")
        #expect(second.stderr.contains("resumed from"), "\(second.stderr)")
        #expect(second.stderr.contains("text-encoder.safetensors: already there, SHA-256 verified"), "\(second.stderr)")
        #expect(second.stdout.contains("demo-detector: ready in \(models)/demo-detector"), "\(second.stdout)")
        let fetched = models + "/demo-detector/detector.safetensors"
        #expect(
            try Self.sha256(fetched) == Self.sha256(CLI.root + "/Models/demo/detector.safetensors"),
            "the resumed file is the file")
        #expect(!FileManager.default.fileExists(atPath: part))
        let manifest = try String(contentsOfFile: models + "/demo-detector/lookout-model.json", encoding: .utf8)
        #expect(manifest.contains(try Self.sha256(fetched)), "the detector's digest recorded: \(manifest)")
        let verified = try CLI.run(["models", "verify", models + "/demo-detector"])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")

        // Used by name: the same detections as the demo model itself.
        let scene = CLI.root + "/examples/scenes/scene-0003.jpg"
        let byName = try CLI.run(
            ["detect", scene, "-q", "star, circle", "--json", "--model", "demo-detector"],
            environment: ["LOOKOUT_MODELS_DIR": models])
        let demo = try CLI.run(["detect", scene, "-q", "star, circle", "--json"])
        #expect(byName.status == 0 && demo.status == 0, "\(byName.stderr)")
        let found = try Reference.lines(byName.stdout)[0]["detections"]!
        let expected = try Reference.lines(demo.stdout)[0]["detections"]!
        #expect(expected.count > 0 && found.count == expected.count, "\(found.count) vs \(expected.count)")
        for k in 0..<min(found.count, expected.count) {
            #expect(found[k]["label"]!.string == expected[k]["label"]!.string)
            #expect(found[k]["score"]!.number == expected[k]["score"]!.number)
            #expect(Reference.numbers(found[k]["box"]!) == Reference.numbers(expected[k]["box"]!))
        }
        let unknown = try CLI.run(
            ["detect", scene, "-q", "star", "--model", "yolov8x-worldv2"], environment: ["LOOKOUT_MODELS_DIR": models])
        #expect(
            unknown.status != 0 && unknown.stderr.contains("lookout models fetch yolov8x-worldv2"), "\(unknown.stderr)")

        // A damaged file is fetched again (its recorded digest no longer matches).
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: fetched))
        try handle.seek(toOffset: 100)
        handle.write(Data([0xFF, 0xFE]))
        try handle.close()
        let repaired = try CLI.run(["models", "fetch", "demo-detector"] + options)
        #expect(
            repaired.status == 0 && repaired.stderr.contains("detector.safetensors: downloaded"), "\(repaired.stderr)")
        #expect(try Self.sha256(fetched) == Self.sha256(CLI.root + "/Models/demo/detector.safetensors"))

        // A wrong digest: a clear error, and nothing left behind.
        let wrong = try CLI.run(["models", "fetch", "wrong-digest"] + options)
        #expect(
            wrong.status != 0 && wrong.stderr.contains("has SHA-256")
                && wrong.stderr.contains("the download was removed"), "\(wrong.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: models + "/wrong-digest").isEmpty)

        // A 404, and a certificate nobody vouched for.
        let missing = try CLI.run(["models", "fetch", "not-there"] + options)
        #expect(missing.status != 0 && missing.stderr.contains("HTTP 404"), "\(missing.stderr)")
        let untrusted = try CLI.run([
            "models", "fetch", "demo-towers", "--dir", models + "/other", "--catalogue", catalogue,
        ])
        #expect(
            untrusted.status != 0 && untrusted.stderr.contains("certificate did not verify"), "\(untrusted.stderr)")
        let unknownName = try CLI.run(["models", "fetch", "yolov9"] + options)
        #expect(
            unknownName.status != 0 && unknownName.stderr.contains("no model named yolov9"), "\(unknownName.stderr)")

        // Through $HTTPS_PROXY (a CONNECT tunnel to the server), and past it for a host in $NO_PROXY.
        let proxy = try Proxy(log: server.folder + "/proxy.log")
        let proxied = try CLI.run(
            [
                "models", "fetch", "demo-towers", "--dir", models + "/proxied", "--catalogue", catalogue, "--ca-file",
                server.certificate,
            ], environment: ["HTTPS_PROXY": proxy.url])
        let port = server.url.split(separator: ":").last!.filter(\.isNumber)
        #expect(proxied.status == 0, "\(proxied.stderr)")
        #expect(proxy.tunnels.contains("CONNECT 127.0.0.1:\(port)"), "\(proxy.tunnels)")
        let tunnelsBefore = proxy.tunnels
        let direct = try CLI.run(
            [
                "models", "fetch", "demo-towers", "--dir", models + "/direct", "--catalogue", catalogue, "--ca-file",
                server.certificate,
            ], environment: ["HTTPS_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"])
        #expect(direct.status == 0 && proxy.tunnels == tunnelsBefore, "\(direct.stderr)")
        withExtendedLifetime(server) {}
    }

    static func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int
    }
}
