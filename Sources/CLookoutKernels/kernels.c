#include "lookout_kernels.h"

#include <math.h>
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
/* exp(x) for 8 floats: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two parts for accuracy),
   e^r by a degree-6 polynomial, 2^n through the exponent bits. Inputs are clamped to ±88. */
__attribute__((target("avx2,fma"))) static __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

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

void lookout_silu(float *values, size_t count) {
#if defined(__x86_64__)
    if (lookout_kernels_vectorized()) {
        silu_avx2(values, count);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) values[i] = values[i] / (1.0f + expf(-values[i]));
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
