/* The convolutions' GEMM in bf16: C (m × n) = A (m × k) · B (k × n) with A and B rounded to bfloat16 (round to
   nearest even) and products summed in fp32. Three paths compute it from the same packed A:
   - AMX (path 2): TDPBF16PS multiplies a 16 × 32 tile of A by a 32 × 16 tile of B (in pairs) into a 16 × 16
     fp32 tile; four accumulator tiles make a 32 × 32 block of C.
   - AVX-512 BF16 (path 1): VDPBF16PS multiplies two pairs of bf16 per fp32 lane and adds both to the lane;
     register blocks of 8 rows × 48 columns.
   - Portable C (path 0): both factors rounded, exact products, fp32 sums of each pair then of the chain — for
     tests and correctness, not speed.
   Each sums an output's products in an order fixed by k alone, so no path's result depends on how the work is
   split among threads; the paths' orders differ, so their results differ by fp32 rounding.

   A is packed once at load in the layout AMX loads its tiles from: panels of 16 rows; in each, blocks of 16
   pairs of k (32 values); in each block, 16 rows of 16 words, a word the two bf16 of a row for k = 2q, 2q + 1
   (the even index in the low half). The pairs are padded with zeros to a multiple of 16, the rows to a
   multiple of 16. B stays fp32 where it lies: each block of columns is rounded and paired once (a word the two
   rounded values of a column for rows 2q, 2q + 1) into a scratch buffer and then multiplied by every panel.
   Bias and SiLU as in gemm.c. */
#include "lookout_kernels.h"
#include "gemm_exp.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static inline uint16_t to_bf16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* NaN stays NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float from_bf16(uint16_t value) {
    uint32_t bits = (uint32_t)value << 16;
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

float lookout_bf16_round(float value) { return from_bf16(to_bf16(value)); }

/* Pairs of k padded to whole blocks of 16. */
static inline int padded_pairs(int k) { return ((k + 1) / 2 + 15) / 16 * 16; }

/* The word of row `row`, pair `q` in the packed A (`stride` = padded_pairs(k)). */
static inline size_t packed_index(int row, int q, int stride) {
    return (size_t)(row / 16) * 16 * stride + (size_t)(q / 16) * 256 + (size_t)(row % 16) * 16 + (size_t)(q % 16);
}

size_t lookout_gemm_bf16_packed_count(int m, int k) { return (size_t)((m + 15) / 16) * 16 * (size_t)padded_pairs(k); }

void lookout_gemm_bf16_pack(const float *a, int m, int k, size_t lda, uint32_t *packed) {
    int stride = padded_pairs(k);
    memset(packed, 0, lookout_gemm_bf16_packed_count(m, k) * sizeof(uint32_t));
    for (int row = 0; row < m; row++) {
        for (int q = 0; q < (k + 1) / 2; q++) {
            float even = a[(size_t)row * lda + 2 * q];
            float odd = 2 * q + 1 < k ? a[(size_t)row * lda + 2 * q + 1] : 0.0f;
            packed[packed_index(row, q, stride)] = (uint32_t)to_bf16(even) | ((uint32_t)to_bf16(odd) << 16);
        }
    }
}

int lookout_gemm_bf16_available(void) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                 getenv("LOOKOUT_NO_BF16") == NULL;
    }
    return cached;
#else
    return 0;
#endif
}

int lookout_gemm_bf16_tiles_available(void) {
#if defined(__x86_64__) && defined(__linux__)
    static int cached = -1;
    if (cached < 0) {
        cached = lookout_gemm_bf16_available() && lookout_amx_ready();
    }
    return cached;
#else
    return 0;
#endif
}

int lookout_gemm_bf16_best_path(void) {
    return lookout_gemm_bf16_tiles_available() ? 2 : lookout_gemm_bf16_available() ? 1 : 0;
}

#if defined(__x86_64__)
#define GBF __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline

/* Rows 2q and 2q + 1 of B's columns [0, width) → `pairs` × `columns` words (`columns` 32 or 48), each word the
   two rounded values of one column (row 2q in the low half); columns beyond `width` are zero, and so are the
   rows from `pairs` up to `padded` (for the tiles). B's row p is `b + p·ldb`, or (`rows_of_b` not NULL)
   `rows_of_b[p] + offset`. */
GBF void pair_block(const float *b, size_t ldb, const float *const *rows_of_b, size_t offset, int k, int width,
                    int columns, int padded, uint32_t *scratch) {
    int pairs = (k + 1) / 2;
    for (int q = 0; q < pairs; q++) {
        const float *even = rows_of_b ? rows_of_b[2 * q] + offset : b + (size_t)(2 * q) * ldb;
        const float *odd = 2 * q + 1 >= k ? NULL : rows_of_b ? rows_of_b[2 * q + 1] + offset : even + ldb;
        for (int j = 0; j < columns; j += 16) {
            int left = width - j;
            __mmask16 mask = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            __m512 e = _mm512_maskz_loadu_ps(mask, even + j);
            __m512 o = odd ? _mm512_maskz_loadu_ps(mask, odd + j) : _mm512_setzero_ps();
            __m512i low = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(e));
            __m512i high = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(o));
            __m512i word = _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
            _mm512_storeu_si512((void *)(scratch + (size_t)q * columns + j), word);
        }
    }
    if (padded > pairs) memset(scratch + (size_t)pairs * columns, 0, (size_t)(padded - pairs) * columns * 4);
}

/* Eight rows of the packed A (`a` at the first's word of block 0) by a paired block of B. */
GBF void bf16_block(const int P, const uint32_t *a, int pairs, const uint32_t *b, __mmask16 mask, float *c,
                    size_t ldc, int rows, const float *bias, int activation) {
    __m512 acc[8][3];
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < P; j++) acc[r][j] = _mm512_setzero_ps();
    for (int q = 0; q < pairs; q++) {
        const uint32_t *row = b + (size_t)q * 48;
        __m512bh x0 = (__m512bh)_mm512_loadu_si512((const void *)row);
        __m512bh x1 = (__m512bh)_mm512_loadu_si512((const void *)(row + 16));
        __m512bh x2 = (__m512bh)_mm512_loadu_si512((const void *)(row + 32));
        const uint32_t *w = a + (size_t)(q / 16) * 256 + q % 16;
        for (int r = 0; r < 8; r++) {
            __m512bh s = (__m512bh)_mm512_set1_epi32((int)w[16 * r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], s, x0);
            if (P >= 2) acc[r][1] = _mm512_dpbf16_ps(acc[r][1], s, x1);
            if (P >= 3) acc[r][2] = _mm512_dpbf16_ps(acc[r][2], s, x2);
        }
    }
    for (int r = 0; r < rows; r++) {
        __m512 add = bias ? _mm512_set1_ps(bias[r]) : _mm512_setzero_ps();
        for (int j = 0; j < P; j++) {
            __m512 value = bias ? _mm512_add_ps(acc[r][j], add) : acc[r][j];
            store_output(value, activation, c + (size_t)r * ldc + 16 * j, j, P, mask);
        }
    }
}

/* Rows [row0, row0 + rows) (row0 a multiple of 8); `c` and `bias` at row row0. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void gemm_bf16_avx512(
    const uint32_t *packed, int row0, int rows, int k, const float *b, size_t ldb, const float *const *rows_of_b,
    size_t offset, int n, float *c, size_t ldc, const float *bias, int activation) {
    int pairs = (k + 1) / 2, stride = padded_pairs(k);
    uint32_t *scratch = aligned_alloc(64, (size_t)pairs * 48 * 4 + 64);
    for (int j0 = 0; j0 < n;) {
        column_block block = next_columns(n - j0);
        int P = block.P, width = block.width;
        __mmask16 mask = block.mask;
        if (rows_of_b)
            pair_block(NULL, 0, rows_of_b, offset + (size_t)j0, k, width, 48, pairs, scratch);
        else
            pair_block(b + j0, ldb, NULL, 0, k, width, 48, pairs, scratch);
        for (int r0 = 0; r0 < rows; r0 += 8) {
            int row = row0 + r0, count = rows - r0 < 8 ? rows - r0 : 8;
            const uint32_t *a = packed + packed_index(row, 0, stride);
            float *target = c + (size_t)r0 * ldc + j0;
            const float *bb = bias ? bias + r0 : NULL;
            if (P == 3)
                bf16_block(3, a, pairs, scratch, mask, target, ldc, count, bb, activation);
            else if (P == 2)
                bf16_block(2, a, pairs, scratch, mask, target, ldc, count, bb, activation);
            else
                bf16_block(1, a, pairs, scratch, mask, target, ldc, count, bb, activation);
        }
        j0 += width;
    }
    free(scratch);
}

#define GAMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

/* Accumulator tile `t` (rows `first` of its 16 in C from `c`, columns `columns` of 16) + bias, SiLU, stored. */
GAMX static inline void store_tile(const float *tile, float *c, size_t ldc, int skip, int count, int columns,
                                   const float *bias, int activation) {
    __mmask16 mask = columns >= 16 ? 0xFFFF : (__mmask16)((1u << columns) - 1);
    for (int r = skip; r < count; r++) {
        __m512 value = _mm512_load_ps(tile + 16 * r);
        if (bias) value = _mm512_add_ps(value, _mm512_set1_ps(bias[r]));
        _mm512_mask_storeu_ps(c + (size_t)r * ldc, mask, activate16(value, activation));
    }
}

GAMX static void gemm_bf16_amx(const uint32_t *packed, int row0, int rows, int k, const float *b, size_t ldb,
                               const float *const *rows_of_b, size_t offset, int n, float *c, size_t ldc,
                               const float *bias, int activation) {
    int stride = padded_pairs(k), blocks = stride / 16, end = row0 + rows;
    load_tile_config();
    uint32_t *scratch = aligned_alloc(64, (size_t)stride * 32 * 4);
    float tile[256] __attribute__((aligned(64)));
    for (int j0 = 0; j0 < n; j0 += 32) {
        int width = n - j0 < 32 ? n - j0 : 32;
        if (rows_of_b)
            pair_block(NULL, 0, rows_of_b, offset + (size_t)j0, k, width, 32, stride, scratch);
        else
            pair_block(b + j0, ldb, NULL, 0, k, width, 32, stride, scratch);
        int wide = width > 16;
        for (int R = row0 / 16 * 16; R < end; R += 32) {
            int tall = end - R > 16;
            const uint32_t *a0 = packed + (size_t)(R / 16) * 16 * stride, *a1 = a0 + (size_t)16 * stride;
            ZERO_ACCUMULATORS();
            for (int block = 0; block < blocks; block++) {
                const uint32_t *x = scratch + (size_t)block * 16 * 32;
                TILE_STEP_2X2(_tile_dpbf16ps, a0 + (size_t)block * 256, a1 + (size_t)block * 256, x, x + 16, 128,
                              wide, tall);
            }
            /* Rows of C from R (those before row0 belong to another call), at most 16 per tile. */
            for (int half = 0; half < (tall ? 2 : 1); half++) {
                int first = R + 16 * half, skip = row0 > first ? row0 - first : 0;
                int count = end - first < 16 ? end - first : 16;
                float *target = c + (ptrdiff_t)(first - row0) * (ptrdiff_t)ldc + j0;
                const float *bb = bias ? bias + (first - row0) : NULL;
                store_accumulator(half, 0, tile);
                store_tile(tile, target, ldc, skip, count, width < 16 ? width : 16, bb, activation);
                if (wide) {
                    store_accumulator(half, 1, tile);
                    store_tile(tile, target + 16, ldc, skip, count, width - 16, bb, activation);
                }
            }
        }
    }
    free(scratch);
    _tile_release();
}
#endif

static void gemm_bf16_portable(const uint32_t *packed, int row0, int rows, int k, const float *b, size_t ldb,
                               const float *const *rows_of_b, size_t offset, int n, float *c, size_t ldc,
                               const float *bias, int activation) {
    int pairs = (k + 1) / 2, stride = padded_pairs(k);
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int q = 0; q < pairs; q++) {
                uint32_t word = packed[packed_index(row0 + i, q, stride)];
                const float *even = rows_of_b ? rows_of_b[2 * q] + offset : b + (size_t)(2 * q) * ldb;
                float left = from_bf16((uint16_t)(word & 0xffff)) * lookout_bf16_round(even[j]);
                float right = 0.0f;
                if (2 * q + 1 < k) {
                    const float *odd = rows_of_b ? rows_of_b[2 * q + 1] + offset : b + (size_t)(2 * q + 1) * ldb;
                    right = from_bf16((uint16_t)(word >> 16)) * lookout_bf16_round(odd[j]);
                }
                sum += left + right;
            }
            if (bias) sum += bias[i];
            if (activation) sum = sum / (1.0f + expf(-sum));
            c[(size_t)i * ldc + j] = sum;
        }
    }
}

void lookout_gemm_bf16_at(int path, const uint32_t *packed, int row0, int rows, int k, const float *b, size_t ldb,
                          const float *const *table, size_t offset, int n, float *c, size_t ldc, const float *bias,
                          int activation) {
    if (rows <= 0 || n <= 0) return;
#if defined(__x86_64__)
    if (path >= 2 && lookout_gemm_bf16_tiles_available()) {
        gemm_bf16_amx(packed, row0, rows, k, b, ldb, table, offset, n, c, ldc, bias, activation);
        return;
    }
    if (path >= 1 && lookout_gemm_bf16_available()) {
        gemm_bf16_avx512(packed, row0, rows, k, b, ldb, table, offset, n, c, ldc, bias, activation);
        return;
    }
#endif
    gemm_bf16_portable(packed, row0, rows, k, b, ldb, table, offset, n, c, ldc, bias, activation);
}
