/* A GEMM for convolutions: C (m × n) = A (m × k) · B (k × n), with A packed once at load into panels of eight
   rows and B read where it lies (an im2col tile, a feature map, Winograd's transformed tiles), vectorised along
   n with AVX-512 (sixteen columns per register, 8 rows × 48 columns of accumulators), bias and SiLU applied to
   the accumulators before they are stored.

   Every element is one chain of fused multiply-adds in the order of k, whatever the blocking: the result does
   not depend on how the caller splits the columns among threads, nor on the matrix's shape. */
#include "lookout_kernels.h"
#include "gemm_exp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

size_t lookout_gemm_packed_count(int m, int k) { return (size_t)((m + 7) / 8) * 8 * (size_t)k; }

void lookout_gemm_pack(const float *a, int m, int k, size_t lda, float *packed) {
    for (int panel = 0; panel < (m + 7) / 8; panel++) {
        float *target = packed + (size_t)panel * 8 * k;
        for (int p = 0; p < k; p++) {
            for (int r = 0; r < 8; r++) {
                int row = panel * 8 + r;
                target[(size_t)p * 8 + r] = row < m ? a[(size_t)row * lda + p] : 0.0f;
            }
        }
    }
}

void lookout_gemm_unpack(const float *packed, int m, int k, float *a) {
    for (int row = 0; row < m; row++) {
        const float *panel = packed + (size_t)(row / 8) * 8 * k + row % 8;
        for (int p = 0; p < k; p++) a[(size_t)row * k + p] = panel[(size_t)p * 8];
    }
}

int lookout_gemm_available(void) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && getenv("LOOKOUT_NO_AVX512") == NULL;
    }
    return cached;
#else
    return 0;
#endif
}

#if defined(__x86_64__)
#define G512 __attribute__((target("avx512f"), always_inline)) static inline

/* One block: eight rows of the packed panel `a` × `P` registers of columns (the last `mask`ed), k in order. B's row
   p is `b + p·ldb`, or with `table` `rows[p] + offset` (a map stacked from parts that lie apart). */
G512 void gemm_block(const int P, const int table, const float *a, int k, const float *b, size_t ldb,
                     const float *const *rows_of_b, size_t offset, __mmask16 mask, float *c, size_t ldc, int rows,
                     const float *bias, int activation) {
    __m512 acc[8][3];
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < P; j++) acc[r][j] = _mm512_setzero_ps();
    for (int p = 0; p < k; p++) {
        const float *row = table ? rows_of_b[p] + offset : b + (size_t)p * ldb;
        __m512 x0 = P == 1 ? _mm512_maskz_loadu_ps(mask, row) : _mm512_loadu_ps(row);
        __m512 x1 = P == 2 ? _mm512_maskz_loadu_ps(mask, row + 16) : P == 3 ? _mm512_loadu_ps(row + 16) : x0;
        __m512 x2 = P == 3 ? _mm512_maskz_loadu_ps(mask, row + 32) : x0;
        const float *w = a + (size_t)p * 8;
        for (int r = 0; r < 8; r++) {
            __m512 s = _mm512_set1_ps(w[r]);
            acc[r][0] = _mm512_fmadd_ps(s, x0, acc[r][0]);
            if (P >= 2) acc[r][1] = _mm512_fmadd_ps(s, x1, acc[r][1]);
            if (P >= 3) acc[r][2] = _mm512_fmadd_ps(s, x2, acc[r][2]);
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

/* B as `b` with row stride `ldb`, or (`rows_of_b` not NULL) row p at `rows_of_b[p] + offset`. */
__attribute__((target("avx512f"))) static void gemm_avx512(const float *packed, int m, int k, const float *b,
                                                           size_t ldb, const float *const *rows_of_b, size_t offset,
                                                           int n, float *c, size_t ldc, const float *bias,
                                                           int activation) {
    int panels = (m + 7) / 8;
    for (int j0 = 0; j0 < n;) {
        column_block block = next_columns(n - j0);
        int P = block.P, width = block.width;
        __mmask16 mask = block.mask;
        for (int panel = 0; panel < panels; panel++) {
            int rows = m - panel * 8 < 8 ? m - panel * 8 : 8;
            const float *a = packed + (size_t)panel * 8 * k;
            float *target = c + (size_t)panel * 8 * ldc + j0;
            const float *bb = bias ? bias + panel * 8 : NULL;
            if (rows_of_b) {
                size_t at = offset + (size_t)j0;
                if (P == 3)
                    gemm_block(3, 1, a, k, NULL, 0, rows_of_b, at, mask, target, ldc, rows, bb, activation);
                else if (P == 2)
                    gemm_block(2, 1, a, k, NULL, 0, rows_of_b, at, mask, target, ldc, rows, bb, activation);
                else
                    gemm_block(1, 1, a, k, NULL, 0, rows_of_b, at, mask, target, ldc, rows, bb, activation);
            } else if (P == 3)
                gemm_block(3, 0, a, k, b + j0, ldb, NULL, 0, mask, target, ldc, rows, bb, activation);
            else if (P == 2)
                gemm_block(2, 0, a, k, b + j0, ldb, NULL, 0, mask, target, ldc, rows, bb, activation);
            else
                gemm_block(1, 0, a, k, b + j0, ldb, NULL, 0, mask, target, ldc, rows, bb, activation);
        }
        j0 += width;
    }
}
#endif

/* Portable: the same order of operations per element (fmaf in the order of k). */
static void gemm_portable(const float *packed, int m, int k, const float *b, size_t ldb,
                          const float *const *rows_of_b, size_t offset, int n, float *c, size_t ldc,
                          const float *bias, int activation) {
    for (int i = 0; i < m; i++) {
        const float *a = packed + (size_t)(i / 8) * 8 * k + i % 8;
        for (int j = 0; j < n; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++) {
                const float *row = rows_of_b ? rows_of_b[p] + offset : b + (size_t)p * ldb;
                sum = fmaf(a[(size_t)p * 8], row[j], sum);
            }
            if (bias) sum += bias[i];
            if (activation) sum = sum / (1.0f + expf(-sum));
            c[(size_t)i * ldc + j] = sum;
        }
    }
}

/* B strided (`b`, `ldb`) or through a row table (`rows`, `offset`), on the best code the CPU has. */
static void gemm(const float *packed, int m, int k, const float *b, size_t ldb, const float *const *rows,
                 size_t offset, int n, float *c, size_t ldc, const float *bias, int activation) {
#if defined(__x86_64__)
    if (lookout_gemm_available()) {
        gemm_avx512(packed, m, k, b, ldb, rows, offset, n, c, ldc, bias, activation);
        return;
    }
#endif
    gemm_portable(packed, m, k, b, ldb, rows, offset, n, c, ldc, bias, activation);
}

void lookout_gemm(const float *packed, int m, int k, const float *b, size_t ldb, int n, float *c, size_t ldc,
                  const float *bias, int activation) {
    gemm(packed, m, k, b, ldb, NULL, 0, n, c, ldc, bias, activation);
}

void lookout_gemm_rows(const float *packed, int m, int k, const float *const *rows, size_t offset, int n, float *c,
                       size_t ldc, const float *bias, int activation) {
    gemm(packed, m, k, NULL, 0, rows, offset, n, c, ldc, bias, activation);
}

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#endif

int lookout_keep_freed_memory(void) {
#if defined(__linux__) && defined(__GLIBC__)
    return mallopt(M_MMAP_THRESHOLD, 256 << 20) && mallopt(M_TRIM_THRESHOLD, 1 << 30) &&
           mallopt(M_TOP_PAD, 64 << 20);
#else
    return 0;
#endif
}
