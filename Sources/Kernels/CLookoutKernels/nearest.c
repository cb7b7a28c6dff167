// Kernels of the region lists (the index's nearest-neighbour search): 8-bit vectors scored against a float
// query, and a checksum that tells a damaged file.
#include "lookout_kernels.h"
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512bw"))) static void int8_scores_avx512(const int8_t *codes, const float *scales,
                                                                           size_t count, int dimension,
                                                                           const float *query, float *out) {
    for (size_t i = 0; i < count; i++) {
        const int8_t *row = codes + i * (size_t)dimension;
        __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps();
        int d = 0;
        for (; d + 32 <= dimension; d += 32) {
            __m512 x0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(row + d))));
            __m512 x1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(row + d + 16))));
            a = _mm512_fmadd_ps(x0, _mm512_loadu_ps(query + d), a);
            b = _mm512_fmadd_ps(x1, _mm512_loadu_ps(query + d + 16), b);
        }
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
        for (; d < dimension; d++) sum += (float)row[d] * query[d];
        out[i] = sum * scales[i];
    }
}

static int has_avx512(void) {
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    }
    return cached;
}
#endif

void lookout_int8_scores(const int8_t *codes, const float *scales, size_t count, int dimension, const float *query,
                         float *out) {
#if defined(__x86_64__)
    if (has_avx512()) {
        int8_scores_avx512(codes, scales, count, dimension, query, out);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) {
        const int8_t *row = codes + i * (size_t)dimension;
        float sum = 0;
        for (int d = 0; d < dimension; d++) sum += (float)row[d] * query[d];
        out[i] = sum * scales[i];
    }
}

uint64_t lookout_checksum(const void *bytes, size_t length, uint64_t seed) {
    // Four independent multiply-rotate lanes over 8-byte words, then the tail byte by byte.
    const uint64_t prime1 = 0x9E3779B185EBCA87ULL, prime2 = 0xC2B2AE3D27D4EB4FULL;
    uint64_t lanes[4] = {seed + prime1, seed ^ prime2, seed - prime1, ~seed};
    const unsigned char *p = bytes;
    size_t i = 0;
    for (; i + 32 <= length; i += 32) {
        for (int k = 0; k < 4; k++) {
            uint64_t word;
            memcpy(&word, p + i + 8 * k, 8);
            lanes[k] += word * prime2;
            lanes[k] = (lanes[k] << 31) | (lanes[k] >> 33);
            lanes[k] *= prime1;
        }
    }
    uint64_t hash = length * prime1;
    for (int k = 0; k < 4; k++) {
        hash ^= lanes[k] * prime2;
        hash = ((hash << 27) | (hash >> 37)) * prime1;
    }
    for (; i < length; i++) {
        hash ^= p[i] * prime1;
        hash = ((hash << 11) | (hash >> 53)) * prime2;
    }
    hash ^= hash >> 33;
    hash *= prime2;
    hash ^= hash >> 29;
    return hash;
}
