#include "lookout_kernels.h"
#include "gemm_exp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1F;
    uint32_t mantissa = h & 0x3FF;
    uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            exponent = 127 - 15 + 1;
            while ((mantissa & 0x400) == 0) {
                mantissa <<= 1;
                exponent--;
            }
            mantissa &= 0x3FF;
            bits = sign | (exponent << 23) | (mantissa << 13);
        }
    } else if (exponent == 31) {
        bits = sign | 0x7F800000 | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void linear_portable(const float *x, int rows, int inputs, const uint16_t *weight, int begin, int end,
                            int outputs, float *y) {
    for (int c = begin; c < end; c++) {
        const uint16_t *w = weight + (size_t)c * inputs;
        for (int r = 0; r < rows; r++) {
            const float *in = x + (size_t)r * inputs;
            float sum = 0;
            for (int k = 0; k < inputs; k++) sum += in[k] * half_to_float(w[k]);
            y[(size_t)r * outputs + c] += sum;
        }
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"))) static float horizontal_sum(__m256 v) {
    __m128 low = _mm256_castps256_ps128(v);
    __m128 high = _mm256_extractf128_ps(v, 1);
    low = _mm_add_ps(low, high);
    low = _mm_hadd_ps(low, low);
    low = _mm_hadd_ps(low, low);
    return _mm_cvtss_f32(low);
}

__attribute__((target("avx2,fma,f16c"))) static void linear_avx2(const float *x, int rows, int inputs,
                                                                 const uint16_t *weight, int begin, int end,
                                                                 int outputs, float *y) {
    int vectors = inputs / 8;
    for (int c = begin; c < end; c++) {
        const uint16_t *w = weight + (size_t)c * inputs;
        for (int r0 = 0; r0 < rows; r0 += 4) {
            int count = rows - r0 < 4 ? rows - r0 : 4;
            __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int v = 0; v < vectors; v++) {
                __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 8 * v)));
                for (int r = 0; r < count; r++) {
                    sum[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)(r0 + r) * inputs + 8 * v), sum[r]);
                }
            }
            for (int r = 0; r < count; r++) {
                float total = horizontal_sum(sum[r]);
                const float *in = x + (size_t)(r0 + r) * inputs;
                for (int k = vectors * 8; k < inputs; k++) total += in[k] * half_to_float(w[k]);
                y[(size_t)(r0 + r) * outputs + c] += total;
            }
        }
    }
}

__attribute__((target("avx2,fma,f16c"))) static void convert_avx2(const uint16_t *source, float *target,
                                                                  size_t count) {
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        _mm256_storeu_ps(target + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(source + i))));
    }
    for (; i < count; i++) target[i] = half_to_float(source[i]);
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void silu_avx2(float *values, size_t count) {
    size_t i = 0;
    __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= count; i += 8) {
        __m256 x = _mm256_loadu_ps(values + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(values + i, _mm256_div_ps(x, _mm256_add_ps(one, e)));
    }
    for (; i < count; i++) values[i] = values[i] / (1.0f + expf(-values[i]));
}
#endif

__attribute__((target("avx2,fma"))) static void quick_gelu_avx2(float *values, size_t count) {
    size_t i = 0;
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 factor = _mm256_set1_ps(-1.702f);
    for (; i + 8 <= count; i += 8) {
        __m256 x = _mm256_loadu_ps(values + i);
        __m256 e = exp8(_mm256_mul_ps(factor, x));
        _mm256_storeu_ps(values + i, _mm256_mul_ps(x, _mm256_div_ps(one, _mm256_add_ps(one, e))));
    }
    for (; i < count; i++) values[i] = values[i] * (1.0f / (1.0f + expf(-1.702f * values[i])));
}

void lookout_quick_gelu(float *values, size_t count) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        quick_gelu_avx2(values, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) values[i] = values[i] * (1.0f / (1.0f + expf(-1.702f * values[i])));
}

void lookout_gelu(float *values, size_t count) {
    // Scalar erff: GELU runs on the text tower's FFN rows once per query, never on an image.
    for (size_t i = 0; i < count; i++) values[i] = 0.5f * values[i] * (1.0f + erff(values[i] * 0.70710678118654752f));
}

void lookout_silu(float *values, size_t count) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        silu_avx2(values, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) values[i] = values[i] / (1.0f + expf(-values[i]));
}

/* Distribution focal loss decode: for each of the four sides and each anchor i of the run, the expectation
   Σ b·softmax(bins)_b of the side's `bins` rows (row (side·bins + b) of `box`, `plane` apart, from column
   `first`), into distances[side·count + i]. The softmax subtracts the bins' maximum, as PyTorch's does. */
static void dfl_portable(const float *box, int plane, int first, int count, int bins, float *distances) {
    for (int side = 0; side < 4; side++) {
        const float *rows = box + (size_t)side * bins * plane + first;
        for (int i = 0; i < count; i++) {
            float maximum = -INFINITY;
            for (int b = 0; b < bins; b++) maximum = fmaxf(maximum, rows[(size_t)b * plane + i]);
            float total = 0, weighted = 0;
            for (int b = 0; b < bins; b++) {
                float v = expf(rows[(size_t)b * plane + i] - maximum);
                total += v;
                weighted += (float)b * v;
            }
            distances[side * count + i] = weighted / total;
        }
    }
}

#if defined(__x86_64__)
/* Eight anchors at a time, the last group under a mask (its missing lanes read as 0 and are not stored), so that
   every anchor gets the same operations wherever it falls in the run. */
__attribute__((target("avx2,fma"))) static void dfl_avx2(const float *box, int plane, int first, int count, int bins,
                                                         float *distances) {
    for (int side = 0; side < 4; side++) {
        const float *rows = box + (size_t)side * bins * plane + first;
        for (int i = 0; i < count; i += 8) {
            __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256 maximum = _mm256_set1_ps(-INFINITY);
            for (int b = 0; b < bins; b++)
                maximum = _mm256_max_ps(maximum, _mm256_maskload_ps(rows + (size_t)b * plane + i, mask));
            __m256 total = _mm256_setzero_ps(), weighted = _mm256_setzero_ps();
            for (int b = 0; b < bins; b++) {
                __m256 v = exp8(_mm256_sub_ps(_mm256_maskload_ps(rows + (size_t)b * plane + i, mask), maximum));
                total = _mm256_add_ps(total, v);
                weighted = _mm256_fmadd_ps(_mm256_set1_ps((float)b), v, weighted);
            }
            _mm256_maskstore_ps(distances + side * count + i, mask, _mm256_div_ps(weighted, total));
        }
    }
}
#endif

void lookout_dfl(const float *box, int plane, int first, int count, int bins, float *distances) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        dfl_avx2(box, plane, first, count, bins, distances);
        return;
    }
#endif
    dfl_portable(box, plane, first, count, bins, distances);
}

int lookout_kernels_vectorized(void) {
#if defined(__x86_64__)
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    }
    return cached;
#else
    return 0;
#endif
}

void lookout_linear_f16_rows(const float *x, int rows, int inputs, const uint16_t *weight, int begin, int end,
                             int outputs, float *y) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        linear_avx2(x, rows, inputs, weight, begin, end, outputs, y);
        return;
    }
#endif
    linear_portable(x, rows, inputs, weight, begin, end, outputs, y);
}

void lookout_f16_to_f32(const uint16_t *source, float *target, size_t count) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        convert_avx2(source, target, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) target[i] = half_to_float(source[i]);
}

/* ---------------------------------------------------------------------------------------------------------
   Linear layers on weights packed once at load: panels of 16 output columns, each `inputs` rows of 16
   floats (column j of panel p is output 16p + j; the last panel is zero-padded). Blocked as GEMM libraries
   do: the inputs in chunks of KC (a chunk of two panels of halves, 24 KiB, stays in L1), the rows in blocks of MC (a
   block of x, MC × KC floats, stays in L2), and a register tile of up to 12 rows × 32 columns (AVX-512; 6 ×
   16 on AVX2) accumulating while k runs over the chunk. The first chunk starts from the bias, the others
   from y. Nothing is repacked per call (OpenBLAS copies the weight matrix into its own layout on every
   call, which costs as much as the products for the few dozen rows of one photo). */

enum { PACK_KC = 384, PACK_MC = 96 };

static void packed_tile_portable(const float *x, int rows, int inputs, const void *panel, int half, int kc,
                                 const float *bias16, int first, float *out, int columns, int stride) {
    for (int r = 0; r < rows; r++) {
        float acc[16];
        for (int j = 0; j < 16; j++) {
            acc[j] = first ? (bias16 ? bias16[j] : 0.0f) : (j < columns ? out[(size_t)r * stride + j] : 0.0f);
        }
        const float *in = x + (size_t)r * inputs;
        for (int k = 0; k < kc; k++) {
            float a = in[k];
            for (int j = 0; j < 16; j++) {
                size_t i = (size_t)k * 16 + j;
                acc[j] += a * (half ? half_to_float(((const uint16_t *)panel)[i]) : ((const float *)panel)[i]);
            }
        }
        for (int j = 0; j < columns; j++) out[(size_t)r * stride + j] = acc[j];
    }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline __m256 load8(const void *panel, size_t i,
                                                                                const int H) {
    return H ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)panel + i)))
             : _mm256_loadu_ps((const float *)panel + i);
}

__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void
packed_tile_avx2(const int R, const int H, const float *x, int inputs, const void *panel, int kc,
                 const float *bias16, int first, float *out, int columns, int stride) {
    __m256 acc[6][2];
    float buffer[16];
    for (int r = 0; r < R; r++) {
        const float *start = first ? bias16 : out + (size_t)r * stride;
        if (start == NULL) {
            acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            continue;
        }
        if (!first && columns < 16) {
            for (int j = 0; j < 16; j++) buffer[j] = j < columns ? start[j] : 0.0f;
            start = buffer;
        }
        acc[r][0] = _mm256_loadu_ps(start);
        acc[r][1] = _mm256_loadu_ps(start + 8);
    }
    for (int k = 0; k < kc; k++) {
        __m256 w0 = load8(panel, (size_t)k * 16, H);
        __m256 w1 = load8(panel, (size_t)k * 16 + 8, H);
        for (int r = 0; r < R; r++) {
            __m256 a = _mm256_broadcast_ss(x + (size_t)r * inputs + k);
            acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        if (columns == 16) {
            _mm256_storeu_ps(out + (size_t)r * stride, acc[r][0]);
            _mm256_storeu_ps(out + (size_t)r * stride + 8, acc[r][1]);
        } else {
            _mm256_storeu_ps(buffer, acc[r][0]);
            _mm256_storeu_ps(buffer + 8, acc[r][1]);
            for (int j = 0; j < columns; j++) out[(size_t)r * stride + j] = buffer[j];
        }
    }
}

#define LOOKOUT_TILE2(R) packed_tile_avx2(R, H, xr, inputs, panel, kc, bias16, first, o, columns, stride)
#define LOOKOUT_ROWS2(H_)                                                                                          \
    {                                                                                                              \
        const int H = H_;                                                                                          \
        int r = 0;                                                                                                 \
        for (; r + 6 <= rows; r += 6) {                                                                            \
            const float *xr = x + (size_t)r * inputs;                                                              \
            float *o = out + (size_t)r * stride;                                                                   \
            LOOKOUT_TILE2(6);                                                                                      \
        }                                                                                                          \
        const float *xr = x + (size_t)r * inputs;                                                                  \
        float *o = out + (size_t)r * stride;                                                                       \
        switch (rows - r) {                                                                                        \
        case 5: LOOKOUT_TILE2(5); break;                                                                           \
        case 4: LOOKOUT_TILE2(4); break;                                                                           \
        case 3: LOOKOUT_TILE2(3); break;                                                                           \
        case 2: LOOKOUT_TILE2(2); break;                                                                           \
        case 1: LOOKOUT_TILE2(1); break;                                                                           \
        default: break;                                                                                            \
        }                                                                                                          \
    }

__attribute__((target("avx2,fma,f16c"))) static void packed_rows_avx2(const float *x, int rows, int inputs,
                                                                      const void *panel, int half, int kc,
                                                                      const float *bias16, int first, float *out,
                                                                      int columns, int stride) {
    if (half)
        LOOKOUT_ROWS2(1)
    else
        LOOKOUT_ROWS2(0)
}
#undef LOOKOUT_ROWS2
#undef LOOKOUT_TILE2

__attribute__((target("avx512f"), always_inline)) static inline __m512 load16(const void *panel, size_t i,
                                                                             const int H) {
    return H ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)panel + i)))
             : _mm512_loadu_ps((const float *)panel + i);
}

/* `P` panels side by side (2, or 1 for the last of an odd count); `next` is the distance between panels. */
__attribute__((target("avx512f"), always_inline)) static inline void
packed_tile_avx512(const int R, const int P, const int H, const float *x, int inputs, const void *panel, size_t next,
                   int kc, const float *bias, int first, float *out, int columns, int stride) {
    __m512 acc[12][2];
    float buffer[32];
    for (int r = 0; r < R; r++) {
        const float *start = first ? bias : out + (size_t)r * stride;
        if (start == NULL) {
            acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            continue;
        }
        if (!first && columns < 16 * P) {
            for (int j = 0; j < 16 * P; j++) buffer[j] = j < columns ? start[j] : 0.0f;
            start = buffer;
        }
        acc[r][0] = _mm512_loadu_ps(start);
        acc[r][1] = P == 2 ? _mm512_loadu_ps(start + 16) : _mm512_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        __m512 w0 = load16(panel, (size_t)k * 16, H);
        __m512 w1 = P == 2 ? load16(panel, next + (size_t)k * 16, H) : w0;
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(x[(size_t)r * inputs + k]);
            acc[r][0] = _mm512_fmadd_ps(a, w0, acc[r][0]);
            if (P == 2) acc[r][1] = _mm512_fmadd_ps(a, w1, acc[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        if (columns == 16 * P) {
            _mm512_storeu_ps(out + (size_t)r * stride, acc[r][0]);
            if (P == 2) _mm512_storeu_ps(out + (size_t)r * stride + 16, acc[r][1]);
        } else {
            _mm512_storeu_ps(buffer, acc[r][0]);
            if (P == 2) _mm512_storeu_ps(buffer + 16, acc[r][1]);
            for (int j = 0; j < columns; j++) out[(size_t)r * stride + j] = buffer[j];
        }
    }
}

#define LOOKOUT_TILE(R, P)                                                                                         \
    packed_tile_avx512(R, P, H, xr, inputs, panel, next, kc, bias, first, o, columns, stride)
/* The rows in tiles of at most 12, as even as can be (50 rows: five of 10, not four of 12 and one of 2, whose
   four accumulator chains would wait on the FMA latency). */
#define LOOKOUT_TILE_ROWS(P)                                                                                       \
    {                                                                                                              \
        int tiles = (rows + 11) / 12, base = rows / tiles, extra = rows % tiles, r = 0;                            \
        for (int t = 0; t < tiles; t++) {                                                                          \
            int count = base + (t < extra);                                                                        \
            const float *xr = x + (size_t)r * inputs;                                                              \
            float *o = out + (size_t)r * stride;                                                                   \
            switch (count) {                                                                                       \
            case 12: LOOKOUT_TILE(12, P); break;                                                                   \
            case 11: LOOKOUT_TILE(11, P); break;                                                                   \
            case 10: LOOKOUT_TILE(10, P); break;                                                                   \
            case 9: LOOKOUT_TILE(9, P); break;                                                                     \
            case 8: LOOKOUT_TILE(8, P); break;                                                                     \
            case 7: LOOKOUT_TILE(7, P); break;                                                                     \
            case 6: LOOKOUT_TILE(6, P); break;                                                                     \
            case 5: LOOKOUT_TILE(5, P); break;                                                                     \
            case 4: LOOKOUT_TILE(4, P); break;                                                                     \
            case 3: LOOKOUT_TILE(3, P); break;                                                                     \
            case 2: LOOKOUT_TILE(2, P); break;                                                                     \
            case 1: LOOKOUT_TILE(1, P); break;                                                                     \
            default: break;                                                                                        \
            }                                                                                                      \
            r += count;                                                                                            \
        }                                                                                                          \
    }

__attribute__((target("avx512f"))) static void packed_rows_avx512(int P, const float *x, int rows, int inputs,
                                                                  const void *panel, int half, size_t next, int kc,
                                                                  const float *bias, int first, float *out,
                                                                  int columns, int stride) {
    if (half) {
        const int H = 1;
        if (P == 2)
            LOOKOUT_TILE_ROWS(2)
        else
            LOOKOUT_TILE_ROWS(1)
    } else {
        const int H = 0;
        if (P == 2)
            LOOKOUT_TILE_ROWS(2)
        else
            LOOKOUT_TILE_ROWS(1)
    }
}
#undef LOOKOUT_TILE_ROWS
#undef LOOKOUT_TILE

static int lookout_kernels_avx512(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && getenv("LOOKOUT_NO_AVX512") == NULL;
    }
    return cached;
}
#endif

static int packed_level_forced = 0;

int lookout_packed_linear_level(int level) {
#if defined(__x86_64__)
    int best = lookout_kernels_avx512() ? 3 : lookout_kernels_vectorized() ? 2 : 1;
#else
    int best = 1;
#endif
    if (level == 0 || level > best) {
        packed_level_forced = 0;
        return best;
    }
    packed_level_forced = level;
    return level;
}

void lookout_pack_linear(const float *weight, int inputs, int outputs, float *packed) {
    int panels = (outputs + 15) / 16;
    for (int p = 0; p < panels; p++) {
        float *panel = packed + (size_t)p * inputs * 16;
        for (int k = 0; k < inputs; k++) {
            for (int j = 0; j < 16; j++) {
                int c = p * 16 + j;
                panel[(size_t)k * 16 + j] = c < outputs ? weight[(size_t)c * inputs + k] : 0.0f;
            }
        }
    }
}

void lookout_pack_linear_f16(const uint16_t *weight, int inputs, int outputs, uint16_t *packed) {
    int panels = (outputs + 15) / 16;
    for (int p = 0; p < panels; p++) {
        uint16_t *panel = packed + (size_t)p * inputs * 16;
        for (int k = 0; k < inputs; k++) {
            for (int j = 0; j < 16; j++) {
                int c = p * 16 + j;
                panel[(size_t)k * 16 + j] = c < outputs ? weight[(size_t)c * inputs + k] : 0;
            }
        }
    }
}

void lookout_packed_linear(const float *x, int rows, int inputs, const void *packed, int half,
                           const float *bias_padded, int panel_begin, int panel_end, int outputs, float *y) {
    const size_t next = (size_t)inputs * 16;
    const size_t element = half ? sizeof(uint16_t) : sizeof(float);
    const char *base = (const char *)packed;
#if defined(__x86_64__)
    const int forced = packed_level_forced;
    const int wide = forced ? forced == 3 : lookout_kernels_avx512();
    const int vectorized = forced ? forced == 2 : lookout_kernels_vectorized();
#endif
    for (int k0 = 0; k0 < inputs; k0 += PACK_KC) {
        int kc = inputs - k0 < PACK_KC ? inputs - k0 : PACK_KC;
        int first = k0 == 0;
        for (int r0 = 0; r0 < rows; r0 += PACK_MC) {
            int mc = rows - r0 < PACK_MC ? rows - r0 : PACK_MC;
            const float *xr = x + (size_t)r0 * inputs + k0;
#if defined(__x86_64__)
            if (wide) {
                for (int p = panel_begin; p < panel_end; p += 2) {
                    int P = p + 1 < panel_end ? 2 : 1;
                    int left = outputs - p * 16;
                    int columns = left < 16 * P ? left : 16 * P;
                    packed_rows_avx512(P, xr, mc, inputs, base + ((size_t)p * next + (size_t)k0 * 16) * element, half,
                                       next, kc,
                                       bias_padded ? bias_padded + (size_t)p * 16 : NULL, first,
                                       y + (size_t)r0 * outputs + (size_t)p * 16, columns, outputs);
                }
                continue;
            }
#endif
            for (int p = panel_begin; p < panel_end; p++) {
                const void *panel = base + ((size_t)p * next + (size_t)k0 * 16) * element;
                const float *bias16 = bias_padded ? bias_padded + (size_t)p * 16 : NULL;
                int columns = outputs - p * 16 < 16 ? outputs - p * 16 : 16;
                float *out = y + (size_t)r0 * outputs + (size_t)p * 16;
#if defined(__x86_64__)
                if (vectorized) {
                    packed_rows_avx2(xr, mc, inputs, panel, half, kc, bias16, first, out, columns, outputs);
                    continue;
                }
#endif
                packed_tile_portable(xr, mc, inputs, panel, half, kc, bias16, first, out, columns, outputs);
            }
        }
    }
}

/* ---- Winograd F(4×4, 3×3) for stride-1, padding-1 3×3 convolutions ----
   Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A on 6×6 input tiles that overlap by 2, 4×4 output tiles (Lavin & Gray's
   matrices, points 0, ±1, ±2, ±1/2 folded into integers). The transforms run over eight tiles of a tile row
   at a time; the 36 products are GEMMs over all tiles, made by the caller. */

static const double winograd_g[6][3] = {
    {1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};

void lookout_winograd_weights(const float *weight, int inputs, int outputs, float *transformed) {
    size_t plane = (size_t)outputs * inputs;
    for (int o = 0; o < outputs; o++) {
        for (int c = 0; c < inputs; c++) {
            const float *g = weight + ((size_t)o * inputs + c) * 9;
            double gg[6][3];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 3; j++)
                    gg[i][j] = winograd_g[i][0] * g[0 * 3 + j] + winograd_g[i][1] * g[1 * 3 + j] +
                               winograd_g[i][2] * g[2 * 3 + j];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    double u = gg[i][0] * winograd_g[j][0] + gg[i][1] * winograd_g[j][1] + gg[i][2] * winograd_g[j][2];
                    transformed[(size_t)(i * 6 + j) * plane + (size_t)o * inputs + c] = (float)u;
                }
        }
    }
}

int lookout_winograd_available(void) {
#if defined(__x86_64__)
    return lookout_kernels_vectorized();
#else
    return 0;
#endif
}

#if defined(__x86_64__)
#define WG __attribute__((target("avx2,fma"), always_inline)) static inline

/* Bᵀ applied to six vectors. */
WG void winograd_bt(const __m256 d[6], __m256 o[6]) {
    __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
    o[0] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);
    __m256 a = _mm256_fnmadd_ps(four, d[2], d[4]); /* d4 − 4 d2 */
    __m256 b = _mm256_fnmadd_ps(four, d[1], d[3]); /* d3 − 4 d1 */
    o[1] = _mm256_add_ps(a, b);
    o[2] = _mm256_sub_ps(a, b);
    __m256 c = _mm256_sub_ps(d[4], d[2]);                        /* d4 − d2 */
    __m256 e = _mm256_mul_ps(two, _mm256_sub_ps(d[3], d[1])); /* 2 (d3 − d1) */
    o[3] = _mm256_add_ps(c, e);
    o[4] = _mm256_sub_ps(c, e);
    o[5] = _mm256_add_ps(_mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);
}

/* Aᵀ applied to six vectors. */
WG void winograd_at(const __m256 m[6], __m256 y[4]) {
    __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f), eight = _mm256_set1_ps(8.0f);
    __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
    __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
    y[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    y[1] = _mm256_fmadd_ps(two, d34, d12);
    y[2] = _mm256_fmadd_ps(four, s34, s12);
    y[3] = _mm256_add_ps(_mm256_fmadd_ps(eight, d34, d12), m[5]);
}

/* Eight groups of four floats (32 contiguous) → four vectors, vector j holding element j of each group, in
   the group order 0 2 4 6 1 3 5 7. */
WG void deinterleave4(const float *p, __m256 out[4]) {
    __m256 q0 = _mm256_loadu_ps(p), q1 = _mm256_loadu_ps(p + 8), q2 = _mm256_loadu_ps(p + 16),
           q3 = _mm256_loadu_ps(p + 24);
    __m256 t0 = _mm256_unpacklo_ps(q0, q1), t1 = _mm256_unpackhi_ps(q0, q1);
    __m256 t2 = _mm256_unpacklo_ps(q2, q3), t3 = _mm256_unpackhi_ps(q2, q3);
    out[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    out[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    out[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    out[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
}

/* The inverse of deinterleave4: four vectors (group order 0 2 4 6 1 3 5 7) → 32 contiguous floats. */
WG void interleave4(const __m256 v[4], float *p) {
    __m256 lo01 = _mm256_unpacklo_ps(v[0], v[1]), hi01 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 lo23 = _mm256_unpacklo_ps(v[2], v[3]), hi23 = _mm256_unpackhi_ps(v[2], v[3]);
    _mm256_storeu_ps(p, _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm256_storeu_ps(p + 8, _mm256_shuffle_ps(lo01, lo23, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm256_storeu_ps(p + 16, _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm256_storeu_ps(p + 24, _mm256_shuffle_ps(hi01, hi23, _MM_SHUFFLE(3, 2, 3, 2)));
}

WG __m256i lane_mask(int valid) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Tile rows [ty_begin, ty_end) of channels [c_begin, c_end): V holds the block's tiles only, (ty_end − ty_begin) ×
   tiles_x of them in each of its 36 matrices. */
__attribute__((target("avx2,fma"))) static void winograd_input_avx2(const float *x, int height, int width, int c_begin,
                                                                     int c_end, int ty_begin, int ty_end, int channels,
                                                                     float *v, float *scratch) {
    int tiles_x = (width + 3) / 4;
    size_t tiles = (size_t)(ty_end - ty_begin) * tiles_x;
    size_t plane = (size_t)channels * tiles; /* one of the 36 matrices */
    int groups = (tiles_x + 7) / 8;
    int span = groups * 32 + 8; /* padded row: position p holds input column p − 1 */
    float *rows = scratch;        /* 6 padded input rows */
    float *t = scratch + 6 * span; /* 6 vertically transformed rows */
    const __m256i to_natural = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int c = c_begin; c < c_end; c++) {
        const float *image = x + (size_t)c * height * width;
        /* Consecutive tile rows overlap by two input rows: the six padded rows are a ring, four filled per
           tile row after the first. */
        float *ring[6];
        for (int i = 0; i < 6; i++) ring[i] = rows + i * span;
        for (int ty = ty_begin; ty < ty_end; ty++) {
            if (ty > ty_begin) {
                float *first = ring[0], *second = ring[1];
                ring[0] = ring[4];
                ring[1] = ring[5];
                ring[4] = first;
                ring[5] = second;
            }
            for (int i = ty == ty_begin ? 0 : 2; i < 6; i++) {
                float *row = ring[i];
                int y = ty * 4 - 1 + i;
                if (y >= 0 && y < height) {
                    row[0] = 0;
                    memcpy(row + 1, image + (size_t)y * width, sizeof(float) * width);
                    memset(row + 1 + width, 0, sizeof(float) * (span - 1 - width));
                } else {
                    memset(row, 0, sizeof(float) * span);
                }
            }
            for (int p = 0; p < span; p += 8) {
                __m256 d[6], o[6];
                for (int i = 0; i < 6; i++) d[i] = _mm256_loadu_ps(ring[i] + p);
                winograd_bt(d, o);
                for (int r = 0; r < 6; r++) _mm256_storeu_ps(t + r * span + p, o[r]);
            }
            for (int g = 0; g < groups; g++) {
                int tx0 = g * 8;
                int valid = tiles_x - tx0 < 8 ? tiles_x - tx0 : 8;
                __m256i mask = lane_mask(valid);
                size_t column = (size_t)(ty - ty_begin) * tiles_x + tx0;
                for (int r = 0; r < 6; r++) {
                    __m256 d[6], h[4], o[6];
                    deinterleave4(t + r * span + tx0 * 4, d);
                    deinterleave4(t + r * span + tx0 * 4 + 4, h);
                    d[4] = h[0];
                    d[5] = h[1];
                    winograd_bt(d, o);
                    for (int s = 0; s < 6; s++) {
                        __m256 value = _mm256_permutevar8x32_ps(o[s], to_natural);
                        float *target = v + (size_t)(r * 6 + s) * plane + (size_t)c * tiles + column;
                        if (valid == 8)
                            _mm256_storeu_ps(target, value);
                        else
                            _mm256_maskstore_ps(target, mask, value);
                    }
                }
            }
        }
    }
}

/* Tile rows [ty_begin, ty_end) of outputs [k_begin, k_end), from M holding the block's tiles only. */
__attribute__((target("avx2,fma"))) static void winograd_output_avx2(const float *m, const float *bias, int outputs,
                                                                      int height, int width, int activation,
                                                                      int k_begin, int k_end, int ty_begin,
                                                                      int ty_end, float *y, float *scratch) {
    int tiles_x = (width + 3) / 4;
    size_t tiles = (size_t)(ty_end - ty_begin) * tiles_x;
    size_t plane = (size_t)outputs * tiles;
    int groups = (tiles_x + 7) / 8;
    const __m256i to_grouped = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256 one = _mm256_set1_ps(1.0f);
    float *line = scratch; /* 32 floats for a partial store */
    for (int k = k_begin; k < k_end; k++) {
        __m256 b = _mm256_set1_ps(bias[k]);
        float *image = y + (size_t)k * height * width;
        for (int ty = ty_begin; ty < ty_end; ty++) {
            for (int g = 0; g < groups; g++) {
                int tx0 = g * 8;
                int valid = tiles_x - tx0 < 8 ? tiles_x - tx0 : 8;
                __m256i mask = lane_mask(valid);
                size_t column = (size_t)(ty - ty_begin) * tiles_x + tx0;
                __m256 w[4][6]; /* Aᵀ over the rows, for each of the six columns */
                for (int s = 0; s < 6; s++) {
                    __m256 col[6], out[4];
                    for (int r = 0; r < 6; r++) {
                        const float *source = m + (size_t)(r * 6 + s) * plane + (size_t)k * tiles + column;
                        col[r] = valid == 8 ? _mm256_loadu_ps(source) : _mm256_maskload_ps(source, mask);
                    }
                    winograd_at(col, out);
                    for (int i = 0; i < 4; i++) w[i][s] = out[i];
                }
                for (int i = 0; i < 4; i++) {
                    int row_y = ty * 4 + i;
                    if (row_y >= height) break;
                    __m256 out[4];
                    winograd_at(w[i], out);
                    for (int j = 0; j < 4; j++) {
                        __m256 value = _mm256_add_ps(out[j], b);
                        if (activation) {
                            __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), value));
                            value = _mm256_div_ps(value, _mm256_add_ps(one, e));
                        }
                        out[j] = _mm256_permutevar8x32_ps(value, to_grouped);
                    }
                    float *target = image + (size_t)row_y * width + tx0 * 4;
                    int count = width - tx0 * 4 < 32 ? width - tx0 * 4 : 32;
                    if (count == 32) {
                        interleave4(out, target);
                    } else {
                        interleave4(out, line);
                        memcpy(target, line, sizeof(float) * count);
                    }
                }
            }
        }
    }
}
#endif

size_t lookout_winograd_scratch(int width) {
    int groups = ((width + 3) / 4 + 7) / 8;
    return (size_t)12 * (groups * 32 + 8) + 32;
}

void lookout_winograd_input(const float *x, int channels, int height, int width, int c_begin, int c_end, float *v,
                            float *scratch) {
#if defined(__x86_64__)
    winograd_input_avx2(x, height, width, c_begin, c_end, 0, (height + 3) / 4, channels, v, scratch);
#endif
}

void lookout_winograd_output(const float *m, const float *bias, int outputs, int height, int width, int activation,
                             int k_begin, int k_end, float *y, float *scratch) {
#if defined(__x86_64__)
    winograd_output_avx2(m, bias, outputs, height, width, activation, k_begin, k_end, 0, (height + 3) / 4, y, scratch);
#endif
}

void lookout_winograd_input_rows(const float *x, int channels, int height, int width, int ty_begin, int ty_end,
                                 float *v, float *scratch) {
#if defined(__x86_64__)
    winograd_input_avx2(x, height, width, 0, channels, ty_begin, ty_end, channels, v, scratch);
#endif
}

void lookout_winograd_output_rows(const float *m, const float *bias, int outputs, int height, int width,
                                  int activation, int ty_begin, int ty_end, float *y, float *scratch) {
#if defined(__x86_64__)
    winograd_output_avx2(m, bias, outputs, height, width, activation, 0, outputs, ty_begin, ty_end, y, scratch);
#endif
}


/* Max pooling of one channel: the maximum over columns into `rows`, then over rows into `out`, each window's
   values taken in ascending order with `v >= best ? v : best` (as `Swift.max(best, v)`), so the same floats as
   that loop; the interior columns run with the window's offset outside, which vectorises. */
void lookout_max_pool(const float *x, int height, int width, int radius, float *rows, float *out) {
    for (int y = 0; y < height; y++) {
        const float *line = x + (size_t)y * width;
        float *target = rows + (size_t)y * width;
        int first = radius < width ? radius : width, last = width - radius > first ? width - radius : first;
        for (int c = 0; c < width; c++) {
            if (c >= first && c < last) continue;
            int lo = c - radius < 0 ? 0 : c - radius, hi = c + radius > width - 1 ? width - 1 : c + radius;
            float best = line[c];
            for (int d = lo; d <= hi; d++) best = line[d] >= best ? line[d] : best;
            target[c] = best;
        }
        for (int c = first; c < last; c++) target[c] = line[c];
        for (int d = -radius; d <= radius; d++) {
            for (int c = first; c < last; c++) {
                float v = line[c + d];
                target[c] = v >= target[c] ? v : target[c];
            }
        }
    }
    for (int y = 0; y < height; y++) {
        int top = y - radius < 0 ? 0 : y - radius, bottom = y + radius > height - 1 ? height - 1 : y + radius;
        float *line = out + (size_t)y * width;
        memcpy(line, rows + (size_t)top * width, sizeof(float) * (size_t)width);
        for (int dy = top + 1; dy <= bottom; dy++) {
            const float *other = rows + (size_t)dy * width;
            for (int c = 0; c < width; c++) line[c] = other[c] >= line[c] ? other[c] : line[c];
        }
    }
}
