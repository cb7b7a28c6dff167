/* The convolutions' GEMM in bf16: C (m × n) = A (m × k) · B (k × n) with A and B rounded to bfloat16 (round to
   nearest even) and products summed in fp32, through AVX-512 BF16's VDPBF16PS, which multiplies two pairs of
   bf16 per fp32 lane and adds both to the lane.

   A is packed once at load: panels of eight rows as in gemm.c, but k taken two at a time — for each pair
   (2q, 2q + 1) eight 32-bit words, row r's two bf16 in word r (the even index in the low half). B stays fp32
   where it lies: each block of up to 48 columns is rounded and paired once (k/2 × 48 words in a scratch
   buffer) and then multiplied by every panel. Bias and SiLU as in gemm.c.

   Where the CPU lacks AVX512_BF16 (or LOOKOUT_NO_BF16 is set) `lookout_gemm_bf16_available` says 0 and the
   portable path computes the same products in C (both factors rounded to bf16, exact products, fp32 sums of
   each pair then of the chain) — for tests and correctness, not speed. */
#include "lookout_kernels.h"
#include "gemm_exp.h"
#include <math.h>
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

size_t lookout_gemm_bf16_packed_count(int m, int k) { return (size_t)((m + 7) / 8) * 8 * (size_t)((k + 1) / 2); }

void lookout_gemm_bf16_pack(const float *a, int m, int k, size_t lda, uint32_t *packed) {
    int pairs = (k + 1) / 2;
    for (int panel = 0; panel < (m + 7) / 8; panel++) {
        uint32_t *target = packed + (size_t)panel * 8 * pairs;
        for (int q = 0; q < pairs; q++) {
            for (int r = 0; r < 8; r++) {
                int row = panel * 8 + r;
                float even = row < m ? a[(size_t)row * lda + 2 * q] : 0.0f;
                float odd = row < m && 2 * q + 1 < k ? a[(size_t)row * lda + 2 * q + 1] : 0.0f;
                target[(size_t)q * 8 + r] = (uint32_t)to_bf16(even) | ((uint32_t)to_bf16(odd) << 16);
            }
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

#if defined(__x86_64__)
#define GBF __attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline

/* Rows 2q and 2q + 1 of B's columns [0, width) → `pairs` × 48 words, each word the two rounded values of one
   column (row 2q in the low half); columns beyond `width` are zero. B's row p is `b + p·ldb`, or (`rows_of_b`
   not NULL) `rows_of_b[p] + offset`. */
GBF void pair_block(const float *b, size_t ldb, const float *const *rows_of_b, size_t offset, int k, int width,
                    uint32_t *scratch) {
    int pairs = (k + 1) / 2;
    for (int q = 0; q < pairs; q++) {
        const float *even = rows_of_b ? rows_of_b[2 * q] + offset : b + (size_t)(2 * q) * ldb;
        const float *odd = 2 * q + 1 >= k ? NULL : rows_of_b ? rows_of_b[2 * q + 1] + offset : even + ldb;
        for (int j = 0; j < 48; j += 16) {
            int left = width - j;
            __mmask16 mask = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
            __m512 e = _mm512_maskz_loadu_ps(mask, even + j);
            __m512 o = odd ? _mm512_maskz_loadu_ps(mask, odd + j) : _mm512_setzero_ps();
            __m512i low = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(e));
            __m512i high = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(o));
            __m512i word = _mm512_or_si512(low, _mm512_slli_epi32(high, 16));
            _mm512_storeu_si512((void *)(scratch + (size_t)q * 48 + j), word);
        }
    }
}

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
        const uint32_t *w = a + (size_t)q * 8;
        for (int r = 0; r < 8; r++) {
            __m512bh s = (__m512bh)_mm512_set1_epi32((int)w[r]);
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

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void gemm_bf16_avx512(
    const uint32_t *packed, int m, int k, const float *b, size_t ldb, const float *const *rows_of_b, size_t offset,
    int n, float *c, size_t ldc, const float *bias, int activation) {
    int panels = (m + 7) / 8, pairs = (k + 1) / 2;
    uint32_t *scratch = aligned_alloc(64, (size_t)pairs * 48 * 4 + 64);
    for (int j0 = 0; j0 < n;) {
        column_block block = next_columns(n - j0);
        int P = block.P, width = block.width;
        __mmask16 mask = block.mask;
        if (rows_of_b)
            pair_block(NULL, 0, rows_of_b, offset + (size_t)j0, k, width, scratch);
        else
            pair_block(b + j0, ldb, NULL, 0, k, width, scratch);
        for (int panel = 0; panel < panels; panel++) {
            int rows = m - panel * 8 < 8 ? m - panel * 8 : 8;
            const uint32_t *a = packed + (size_t)panel * 8 * pairs;
            float *target = c + (size_t)panel * 8 * ldc + j0;
            const float *bb = bias ? bias + panel * 8 : NULL;
            if (P == 3)
                bf16_block(3, a, pairs, scratch, mask, target, ldc, rows, bb, activation);
            else if (P == 2)
                bf16_block(2, a, pairs, scratch, mask, target, ldc, rows, bb, activation);
            else
                bf16_block(1, a, pairs, scratch, mask, target, ldc, rows, bb, activation);
        }
        j0 += width;
    }
    free(scratch);
}
#endif

static void gemm_bf16_portable(const uint32_t *packed, int m, int k, const float *b, size_t ldb,
                               const float *const *rows_of_b, size_t offset, int n, float *c, size_t ldc,
                               const float *bias, int activation) {
    int pairs = (k + 1) / 2;
    for (int i = 0; i < m; i++) {
        const uint32_t *a = packed + (size_t)(i / 8) * 8 * pairs + i % 8;
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int q = 0; q < pairs; q++) {
                uint32_t word = a[(size_t)q * 8];
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

/* B strided (`b`, `ldb`) or through a row table (`rows`, `offset`); the portable C when `portable` or when the
   CPU lacks AVX-512 BF16. */
static void gemm_bf16(const uint32_t *packed, int m, int k, const float *b, size_t ldb, const float *const *rows,
                      size_t offset, int n, float *c, size_t ldc, const float *bias, int activation, int portable) {
#if defined(__x86_64__)
    if (!portable && lookout_gemm_bf16_available()) {
        gemm_bf16_avx512(packed, m, k, b, ldb, rows, offset, n, c, ldc, bias, activation);
        return;
    }
#endif
    gemm_bf16_portable(packed, m, k, b, ldb, rows, offset, n, c, ldc, bias, activation);
}

void lookout_gemm_bf16(const uint32_t *packed, int m, int k, const float *b, size_t ldb, int n, float *c,
                       size_t ldc, const float *bias, int activation) {
    gemm_bf16(packed, m, k, b, ldb, NULL, 0, n, c, ldc, bias, activation, 0);
}

void lookout_gemm_bf16_portable(const uint32_t *packed, int m, int k, const float *b, size_t ldb, int n, float *c,
                                size_t ldc, const float *bias, int activation) {
    gemm_bf16(packed, m, k, b, ldb, NULL, 0, n, c, ldc, bias, activation, 1);
}

void lookout_gemm_bf16_rows(const uint32_t *packed, int m, int k, const float *const *rows, size_t offset, int n,
                            float *c, size_t ldc, const float *bias, int activation, int portable) {
    gemm_bf16(packed, m, k, NULL, 0, rows, offset, n, c, ldc, bias, activation, portable);
}
