#ifndef LOOKOUT_KERNELS_H
#define LOOKOUT_KERNELS_H
#include <stddef.h>
#include <stdint.h>

/// y[r * outputs + c] += sum_k x[r * inputs + k] * half(weight[c * inputs + k]) for r < rows, c in [begin, end).
/// Uses AVX2/FMA/F16C when the CPU has them (checked at run time), portable C otherwise.
void lookout_linear_f16_rows(const float *x, int rows, int inputs, const uint16_t *weight, int begin, int end,
                             int outputs, float *y);

/// IEEE half → float for `count` values.
void lookout_f16_to_f32(const uint16_t *source, float *target, size_t count);

/// SiLU in place, x / (1 + exp(-x)); the vector path uses a polynomial exp accurate to about 2 ulp.
void lookout_silu(float *values, size_t count);
/// x · sigmoid(1.702 x) (CLIP's QuickGELU), in place.
void lookout_quick_gelu(float *values, size_t count);
/// x · Φ(x) = x/2 · (1 + erf(x/√2)) (PyTorch's exact `nn.GELU`), in place.
void lookout_gelu(float *values, size_t count);

/// The head's box decode (distribution focal loss): for side s < 4 and anchor i < count, the expectation
/// Σ_b b·softmax_b of rows (s·bins + b) of `box` (each `plane` floats, read from column `first + i`), into
/// distances[s·count + i]. The vector path's exp is the polynomial `lookout_silu`'s uses (about 2 ulp).
void lookout_dfl(const float *box, int plane, int first, int count, int bins, float *distances);

/// A spin-wait hint to the CPU (x86 `pause`), for loops that poll a flag.
static inline void lookout_spin_pause(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

/// Whether the vector paths are used.
int lookout_kernels_vectorized(void);

/* Packs a Linear weight (`outputs × inputs`, row-major) into panels of 16 output columns
   (`ceil(outputs / 16) × inputs × 16` floats, the last panel zero-padded). */
void lookout_pack_linear(const float *weight, int inputs, int outputs, float *packed);

/* Which code `lookout_packed_linear` runs, for tests: 1 portable C, 2 AVX2, 3 AVX-512, 0 the best this CPU
   has (the default). A level the CPU lacks falls back to the best; returns the level now in force. */
int lookout_packed_linear_level(int level);

/* The same for IEEE-half weights (bit patterns), packed as halves. */
void lookout_pack_linear_f16(const uint16_t *weight, int inputs, int outputs, uint16_t *packed);

/* y[r, c] = bias[c] + x[r, :]·W[c, :] for the columns of panels [panel_begin, panel_end) (y is `rows × outputs`);
   `packed` holds floats, or halves when `half` is non-zero (widened exactly as they are read);
   `bias_padded` holds ceil(outputs / 16) × 16 values, or is NULL. */
void lookout_packed_linear(const float *x, int rows, int inputs, const void *packed, int half,
                           const float *bias_padded, int panel_begin, int panel_end, int outputs, float *y);

/* Winograd F(4x4, 3x3) for stride-1, padding-1 3x3 convolutions (AVX2/FMA only: check
   `lookout_winograd_available`). Weights `outputs × inputs × 3 × 3` → 36 matrices `outputs × inputs`. */
void lookout_winograd_weights(const float *weight, int inputs, int outputs, float *transformed);
int lookout_winograd_available(void);
/* Floats of per-thread scratch that the transforms need for a map `width` wide. */
size_t lookout_winograd_scratch(int width);
/* Input transform of channels [c_begin, c_end): `v` holds 36 matrices `channels × tiles`, tiles row-major
   (ceil(height/4) × ceil(width/4)). */
void lookout_winograd_input(const float *x, int channels, int height, int width, int c_begin, int c_end, float *v,
                            float *scratch);
/* Output transform of outputs [k_begin, k_end) from 36 matrices `outputs × tiles`, plus bias, SiLU when
   `activation`; `y` is `outputs × height × width`. */
void lookout_winograd_output(const float *m, const float *bias, int outputs, int height, int width, int activation,
                             int k_begin, int k_end, float *y, float *scratch);
/* One block of tile rows [ty_begin, ty_end) through every channel (input) or output: V and M hold that block's
   (ty_end − ty_begin) × ⌈width/4⌉ tiles only, so that a block's transforms and products stay in cache. */
void lookout_winograd_input_rows(const float *x, int channels, int height, int width, int ty_begin, int ty_end,
                                 float *v, float *scratch);
void lookout_winograd_output_rows(const float *m, const float *bias, int outputs, int height, int width,
                                  int activation, int ty_begin, int ty_end, float *y, float *scratch);
/* The convolutions' GEMM (gemm.c): C (m × n, row stride ldc) = A (m × k) · B (k × n, row stride ldb), plus
   bias[i] per row when `bias` is not NULL, then SiLU when `activation`. A is packed once with
   `lookout_gemm_pack` into ceil(m / 8) panels of k × 8 floats (`lookout_gemm_packed_count` floats); rows
   [8p, 8p + 8) start at panel p, so a caller can compute a range of panels. Each element is one chain of
   fused multiply-adds in the order of k: the result does not depend on how the work is split.
   AVX-512 where `lookout_gemm_available`, portable C otherwise. */
size_t lookout_gemm_packed_count(int m, int k);
void lookout_gemm_pack(const float *a, int m, int k, size_t lda, float *packed);
/* The inverse: the packed panels → A (m × k, dense). */
void lookout_gemm_unpack(const float *packed, int m, int k, float *a);
int lookout_gemm_available(void);
void lookout_gemm(const float *packed, int m, int k, const float *b, size_t ldb, int n, float *c, size_t ldc,
                  const float *bias, int activation);
/* `lookout_gemm` with B's rows wherever they lie: row p is `rows[p] + offset` (a map stacked along channels from
   parts that are not contiguous, read without joining them). The same operations in the same order. */
void lookout_gemm_rows(const float *packed, int m, int k, const float *const *rows, size_t offset, int n, float *c,
                       size_t ldc, const float *bias, int activation);
/* The same GEMM in bf16 (gemm_bf16.c): A and B rounded to bfloat16 (nearest even), products summed in fp32.
   A is packed once with `lookout_gemm_bf16_pack` (`lookout_gemm_bf16_packed_count` words: panels of 16 rows,
   blocks of 32 values of k, the layout AMX loads its tiles from). `lookout_gemm_bf16_at` computes rows
   [row0, row0 + rows) of C (row0 a multiple of 8; `c` and `bias` point at row row0) by `path`: 2 AMX tiles
   (TDPBF16PS), 1 AVX-512 BF16 (VDPBF16PS), 0 portable C; a path the CPU lacks falls to the next below. B is
   `b` with row stride `ldb`, or (`table` not NULL) row p at `table[p] + offset`. */
size_t lookout_gemm_bf16_packed_count(int m, int k);
void lookout_gemm_bf16_pack(const float *a, int m, int k, size_t lda, uint32_t *packed);
/* AVX-512 BF16 present and not turned off by LOOKOUT_NO_BF16. */
int lookout_gemm_bf16_available(void);
/* AMX usable (`lookout_amx_usable`), LOOKOUT_NO_AMX unset, and the tile data permission granted to the process
   (asked once, here). */
int lookout_gemm_bf16_tiles_available(void);
/* The fastest path this CPU has: 2, 1 or 0. */
int lookout_gemm_bf16_best_path(void);
void lookout_gemm_bf16_at(int path, const uint32_t *packed, int row0, int rows, int k, const float *b, size_t ldb,
                          const float *const *table, size_t offset, int n, float *c, size_t ldc, const float *bias,
                          int activation);
/* The same GEMM in int8 (gemm_int8.c): A quantised per row (symmetric, to ±`limit`: 127 with VNNI, 63 without,
   `lookout_gemm_int8_limit`) and packed with `lookout_gemm_int8_pack` into ceil(m / 8) panels of ceil(k / 4) × 8
   words (four s8 of a row per word), writing each row's scale and the sum of its quantised values; B is u8
   (`lookout_quantize_u8`), row stride ldb. c_ij = float(Σ_k q_ik·b_kj − corrections_i)·scales_i + bias_i, then
   SiLU when `activation`. Exact 32-bit integer sums: AMX, VNNI, AVX-512BW, AVX2 and the portable C agree. */
size_t lookout_gemm_int8_packed_count(int m, int k);
void lookout_gemm_int8_pack(const float *a, int m, int k, size_t lda, int limit, uint32_t *packed, float *scales,
                            int32_t *sums);
/* The quantised A back as floats (q · scale), m × k dense. */
void lookout_gemm_int8_unpack(const uint32_t *packed, const float *scales, int m, int k, float *a);
/* The fastest int8 path this CPU has: 4: AMX (TDPBSUD tiles, `lookout_amx_ready`) with VNNI, 3: AVX-512 VNNI,
   2: AVX-512BW without it (or LOOKOUT_NO_VNNI set), 1: AVX2 (or LOOKOUT_NO_AVX512 set), 0: portable C (or
   LOOKOUT_NO_AVX2 set). Levels 2 and 1 multiply through VPMADDUBSW, whose 16-bit pair sums need 7-bit weights.
   All compute the same integers. */
int lookout_int8_level(void);
/* `lookout_amx_usable`, LOOKOUT_NO_AMX unset, and the tile data permission granted to the process (asked once,
   here: arch_prctl ARCH_REQ_XCOMP_PERM). */
int lookout_amx_ready(void);
/* The int8 weights (packed as above, k cut into `segments` equal runs of quads: 1, or 9 taps for the direct 3×3
   kernel) in AMX's layout: groups of 16 rows, blocks of 16 quads, a block 16 rows × 16 words; each run padded to
   whole blocks. `lookout_gemm_int8_tiles_count` words. */
size_t lookout_gemm_int8_tiles_count(int m, int k, int segments);
void lookout_gemm_int8_tiles(const uint32_t *packed, int m, int k, int segments, uint32_t *tiles);
/* Rows [row0, row0 + rows) of the int8 GEMM through AMX (level 4; nothing where the CPU lacks it), from the
   weights in AMX's layout (whole, one segment); `scales`, `corrections`, `bias` and `c` at row row0. */
void lookout_gemm_int8_tiled(const uint32_t *tiles, int row0, int rows, int k, const float *scales,
                             const int32_t *corrections, const uint8_t *b, size_t ldb, int n, float *c, size_t ldc,
                             const float *bias, int activation);
/* 1 when the CPU has AMX (tiles with bf16 and int8 products) and the kernel supports its tile data state
   (arch_prctl ARCH_GET_XCOMP_SUPP), 0 otherwise. The bf16 GEMM's tile path needs it. */
int lookout_amx_usable(void);
/* The weights' range this CPU's path needs: 127 from level 3, 63 below. */
int lookout_gemm_int8_limit(void);
void lookout_gemm_int8(const uint32_t *packed, const float *scales, const int32_t *corrections, int m, int k,
                       const uint8_t *b, size_t ldb, int n, float *c, size_t ldc, const float *bias, int activation);
/* At a given level (lowered to what the CPU has), for tests. Levels 1 and 2 need weights packed with limit 63. */
void lookout_gemm_int8_at(int level, const uint32_t *packed, const float *scales, const int32_t *corrections, int m,
                          int k, const uint8_t *b, size_t ldb, int n, float *c, size_t ldc, const float *bias,
                          int activation);
/* out_i = clamp(round_half_even(x_i · inverse_scale) + zero, 0, 255); NaN → 0. */
void lookout_quantize_u8(const float *x, size_t count, float inverse_scale, int zero, uint8_t *out);
void lookout_quantize_u8_portable(const float *x, size_t count, float inverse_scale, int zero, uint8_t *out);
/* The same through a given level's instructions (lowered to what the CPU has): the same bytes. */
void lookout_quantize_u8_at(int level, const float *x, size_t count, float inverse_scale, int zero, uint8_t *out);
/* Direct 3×3 int8 convolutions, stride 1 or 2, padding 1 (gemm_int8.c): the input (C × H × W) quantised into a
   blocked map — ceil(C/4) channel quads one after another, each H + 2 padded rows of W + 2 pixels of four
   channel bytes (for stride 2 split into four phase planes, even or odd row × even or odd column), a border of `zero`
   (`lookout_int8_blocked_count` bytes, slack included) — for channel quads [q_begin, q_end); the weights packed
   by `lookout_gemm_int8_pack` from an m × 36·ceil(C/4) matrix whose column (t·Q + q)·4 + j is channel 4q + j at
   tap t (0 beyond C). Output rows [row_begin, row_end) of panels [panel_begin, panel_end), into `out`
   (m × ((H − 1)/stride + 1) × ((W − 1)/stride + 1)), as the GEMM's epilogue. */
size_t lookout_int8_blocked_count(int channels, int height, int width);
void lookout_quantize_u8_blocked(const float *x, int channels, int height, int width, int stride, float inverse_scale,
                                 int zero, int q_begin, int q_end, uint8_t *out);
void lookout_quantize_u8_blocked_portable(const float *x, int channels, int height, int width, int stride,
                                          float inverse_scale, int zero, int q_begin, int q_end, uint8_t *out);
void lookout_quantize_u8_blocked_at(int level, const float *x, int channels, int height, int width, int stride,
                                    float inverse_scale, int zero, int q_begin, int q_end, uint8_t *out);
void lookout_conv3x3_int8(int level, const uint32_t *packed, const uint32_t *tiles, const float *scales,
                          const int32_t *corrections, int m, int channels, const uint8_t *blocked, int height,
                          int width, int stride, int row_begin, int row_end, int panel_begin, int panel_end,
                          float *out, const float *bias, int activation);
/* Max pooling of one height × width channel, window 2·radius + 1, stride 1, padding that never wins: the maximum
   over columns into `rows` (height × width scratch), then over rows into `out`. */
void lookout_max_pool(const float *x, int height, int width, int radius, float *rows, float *out);
/* A float rounded to bfloat16 (nearest even) and back. */
float lookout_bf16_round(float value);
/* glibc: keep freed memory for reuse (no mmap below 256 MB, no trimming below 1 GB, the heap grown 64 MB at a
   time) instead of returning it to the kernel; 1 when set, 0 elsewhere. */
int lookout_keep_freed_memory(void);

/* Region lists: out[i] = scales[i] * sum_d codes[i * dimension + d] * query[d] for i < count (AVX-512 where the
   CPU has it, portable C otherwise; the two may round differently: the scores only choose candidates). */
void lookout_int8_scores(const int8_t *codes, const float *scales, size_t count, int dimension, const float *query,
                         float *out);
/* A 64-bit checksum of `length` bytes that tells damaged data (not cryptographic). */
uint64_t lookout_checksum(const void *bytes, size_t length, uint64_t seed);
#endif
