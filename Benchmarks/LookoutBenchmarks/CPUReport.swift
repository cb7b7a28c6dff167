import ArgumentParser
import Foundation
import LookoutEngine
import LookoutTensor

/// `lookout-benchmarks cpu`: the CPU (model, the instruction sets that decide Lookout's paths), the nominal peak of
/// each precision at its reported clock, and per convolution of the s model at 640 the path each precision runs
/// (fp32's algorithm; bf16's choice by the per-layer tuner's rule; int8's kernel) with its time and measured rate
/// against that peak (issue 54).
struct CPUReport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cpu",
        abstract:
            "The CPU, its features, each precision's path per layer of s at 640 and its rate against the CPU's peak.")
    @Option(help: "Timed runs per layer and kernel (the median is kept).") var repetitions = 7
    @Option(help: "Threads (default: one per CPU).") var threads: Int?

    /// The fields of /proc/cpuinfo's first processor.
    static func cpuinfo() -> [String: String] {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return [:] }
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }  // the first processor only
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].trimmingCharacters(in: .whitespaces)] =
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    /// Operations per cycle and core of each precision on this CPU's widest units, nominal: AVX-512 with two FMA
    /// ports on Intel (16 lanes × 2 for the FMA × 2 ports fp32; bf16's dot products twice that, VNNI's four
    /// times), Zen 4's AVX-512 on two 256-bit halves (half Intel's), AVX2 with two FMA ports (32 fp32). int8
    /// without VNNI (VPMADDUBSW then VPMADDWD, two multiplier operations per four products a lane): twice fp32.
    /// AMX: one TDPBF16PS (16 × 16 × 32 products) every 16 cycles, 1,024 operations a cycle (TDPBSUD's int8
    /// twice that).
    static func perCycle(
        flags: Set<String>, vendor: String
    ) -> (
        fp32: Double, bf16: Double?, int8: Double?, amx: Double?
    ) {
        let wide = flags.contains("avx512f")
        let fp32: Double = wide ? (vendor == "AuthenticAMD" ? 32 : 64) : (flags.contains("fma") ? 32 : 8)
        return (
            fp32, flags.contains("avx512_bf16") ? 2 * fp32 : nil,
            flags.contains("avx512_vnni")
                ? 4 * fp32 : flags.contains("avx512bw") || flags.contains("avx2") ? 2 * fp32 : nil,
            flags.contains("amx_bf16") ? 1024 : nil
        )
    }

    func validate() throws {
        guard (1...1000).contains(repetitions) else { throw ValidationError("--repetitions must be from 1 to 1000.") }
        if let threads, !(1...256).contains(threads) { throw ValidationError("--threads must be from 1 to 256.") }
    }

    func run() throws {
        let info = Self.cpuinfo()
        let flags = Set((info["flags"] ?? "").split(separator: " ").map(String.init))
        let vendor = info["vendor_id"] ?? "?"
        let pool = ComputePool(threads: threads ?? ComputePool.availableCPUs())
        let megahertz = Double(info["cpu MHz"] ?? "") ?? 0
        print(
            "CPU: \(AutomaticPrecision.cpuModel()) (\(vendor), family \(info["cpu family"] ?? "?") model \(info["model"] ?? "?") stepping \(info["stepping"] ?? "?")), \(pool.threadCount) threads, \(Int(megahertz)) MHz as reported"
        )
        let watched = [
            "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
            "amx_bf16", "amx_int8",
        ]
        print(
            "features: " + watched.map { "\($0) \(flags.contains($0) ? "yes" : "no")" }.joined(separator: ", "))
        let int8Path =
            Precision.int8.isNative
            ? "\(Int8Convolution.pathName(Int8Convolution.bestLevel)) (\(Int8Convolution.weightBits)-bit weights), "
                + "chosen per layer against fp32"
            : "none (fp32)"
        print(
            "Lookout's paths: fp32 \(ConvolutionGEMM.available ? "packed AVX-512 GEMM" : "OpenBLAS")\(WinogradConvolution.available ? ", Winograd F(4×4, 3×3) for 3×3 stride 1" : ""); bf16 \(Precision.bf16.isNative ? (BF16Path.tiles.isAvailable ? "AMX tiles or AVX-512 BF16 dot products" : "AVX-512 BF16 dot products") + ", chosen per layer against fp32" : "none (fp32)"); int8 \(int8Path); AMX \(BF16Path.tiles.isAvailable ? "used for bf16 and int8" : Precision.amxUsable ? "usable, turned off (LOOKOUT_NO_AMX)" : flags.contains("amx_tile") ? "listed, but the kernel does not grant its state" : "not exposed"); AVX512-FP16 \(flags.contains("avx512_fp16") ? "exposed, not used" : "not exposed")"
        )
        let rates = Self.perCycle(flags: flags, vendor: vendor)
        let cycles = megahertz * 1e6 * Double(pool.threadCount)
        // No clock reported (some VMs, other architectures): no peak, no percentages.
        func peak(_ perCycle: Double?) -> Double? { cycles > 0 ? perCycle.map { $0 * cycles / 1e9 } : nil }
        print(
            "nominal peak at that clock (GFLOP/s, GOP/s for int8): fp32 \(peak(rates.fp32).map { String(Int($0)) } ?? "-"), bf16 \(peak(rates.bf16).map { String(Int($0)) } ?? "-"), bf16 AMX \(peak(rates.amx).map { String(Int($0)) } ?? "-"), int8 AMX \(peak(rates.amx.map { 2 * $0 }).map { String(Int($0)) } ?? "-"), int8 \(peak(rates.int8).map { String(Int($0)) } ?? "-")"
        )
        var generator = SystemRandomNumberGenerator()
        var totals: [String: Double] = [:]
        print("")
        print("| layer (s at 640) | per detection | fp32 | bf16 (the tuner's choice) | int8 (the tuner's choice) |")
        print("|---|---|---|---|---|")
        for (inputs, outputs, kernel, stride, height, width, count) in Layers.shapes {
            let (weights, x, operations) = Layers.randomLayer(
                inputs: inputs, outputs: outputs, kernel: kernel, stride: stride, height: height, width: width,
                using: &generator)
            func time(_ implementation: any ConvolutionKernel) -> Double {
                Layers.medianSeconds(implementation, weights, x, pool: pool, repetitions: repetitions)
            }
            func cell(_ name: String, _ seconds: Double, _ peak: Double?) -> String {
                let rate = operations / seconds / 1e9
                return "\(name) \(format3(seconds * 1000)) ms, \(Int(rate)) G/s"
                    + (peak.map { " (\(Int((100 * rate / $0).rounded())) %)" } ?? "")
            }
            // fp32: Winograd for stride-1 3×3 where the CPU has it (the engine's default), else the lowered GEMM.
            let winograd = kernel == 3 && stride == 1 && WinogradConvolution.available
            let fp32Name = winograd ? "winograd" : "lowered"
            let fp32 = time(winograd ? WinogradConvolution() : LoweredConvolution())
            totals["fp32", default: 0] += fp32 * Double(count)
            var cells = [cell(fp32Name, fp32, peak(rates.fp32))]
            if Precision.bf16.isNative {
                // The tuner's candidates in its order, and its rule: the first unless fp32 is faster by the margin
                // (with AMX: AMX against fp32, 20 %; without: AVX-512 BF16 against fp32, 5 %). AVX-512 BF16 is
                // timed on an AMX CPU too, and shown, but is not a candidate there.
                func bf16(_ path: BF16Path) -> any ConvolutionKernel {
                    winograd
                        ? WinogradConvolution(precision: .bf16, bf16Path: path)
                        : LoweredConvolution(precision: .bf16, bf16Path: path)
                }
                var options: [(name: String, seconds: Double, peak: Double?)] = []
                // (AMX through the lowered GEMM for 3×3 stride 1 was measured slower than through Winograd on every
                // such layer of s, 0.18–3.4 ms against 0.13–3.0: not a candidate.)
                let tiles = BF16Path.tiles.isAvailable
                if tiles { options.append(("bf16 AMX \(fp32Name)", time(bf16(.tiles)), peak(rates.amx))) }
                options.append(("bf16 AVX-512 \(fp32Name)", time(bf16(.vector)), peak(rates.bf16)))
                options.append(("fp32 \(fp32Name)", fp32, peak(rates.fp32)))
                let fp32Index = options.count - 1
                let chosen = fp32 < (tiles ? 0.8 : 0.95) * options[0].seconds ? fp32Index : 0
                totals["bf16", default: 0] += options[chosen].seconds * Double(count)
                let others = options.indices.filter { $0 != chosen }.map {
                    "\(options[$0].name) \(format3(options[$0].seconds * 1000))"
                }
                cells.append(
                    cell(options[chosen].name, options[chosen].seconds, options[chosen].peak)
                        + " (\(others.joined(separator: ", ")) ms)")
            } else {
                cells.append("-")
            }
            if Precision.int8.isNative {
                // The tuner's rule as for bf16: int8 unless fp32 is faster by the margin (20 % against AMX, 5 %
                // otherwise). The first convolution (3 inputs) is fp32 in both.
                let amx = Int8Convolution.bestLevel >= 4
                let int8 = time(Int8Convolution(fallback: winograd ? WinogradConvolution() : LoweredConvolution()))
                let own = inputs >= 16 ? (amx ? "int8 AMX" : "int8") : "fp32 (3 inputs)"
                let ownPeak = inputs >= 16 ? peak(amx ? rates.amx.map { 2 * $0 } : rates.int8) : peak(rates.fp32)
                let fp32Wins = inputs >= 16 && fp32 < (amx ? 0.8 : 0.95) * int8
                totals["int8", default: 0] += (fp32Wins ? fp32 : int8) * Double(count)
                cells.append(
                    fp32Wins
                        ? cell("fp32 \(fp32Name)", fp32, peak(rates.fp32)) + " (\(own) \(format3(int8 * 1000)) ms)"
                        : cell(own, int8, ownPeak) + (inputs >= 16 ? " (fp32 \(format3(fp32 * 1000)) ms)" : ""))
            } else {
                cells.append("-")
            }
            print(
                "| \(inputs)→\(outputs) k\(kernel) s\(stride) \(height)×\(width) | \(count) | "
                    + cells.joined(separator: " | ") + " |")
        }
        print(
            "| all convolutions of a detection | | "
                + ["fp32", "bf16", "int8"].map { totals[$0].map { "\(format3($0 * 1000)) ms" } ?? "-" }.joined(
                    separator: " | ") + " |")
        print("(G/s: operations counted as direct convolution over the median time; %: of the nominal peak above)")
    }
}
