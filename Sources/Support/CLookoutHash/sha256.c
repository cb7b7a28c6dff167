/* SHA-256 blocks with the x86 SHA extensions (SHA-NI): LookoutSupport.SHA256 uses them where the CPU has them
 * and its Swift compression function elsewhere; the digests are the same (SHA256Tests compare the two). */
#include "lookout_hash.h"

/* FIPS 180-4's round constants: both compression functions read them from here. */
static const uint32_t lookout_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

const uint32_t *lookout_sha256_constants(void) { return lookout_sha256_k; }

#if defined(__x86_64__)
#include <immintrin.h>
#include <cpuid.h>

int lookout_sha256_instructions(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int sha = (b >> 29) & 1;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    return sha && ssse3 && sse41;
}

/* `blocks` 64-byte blocks into `state` (a..h) with the SHA extensions: the message schedule of a block computed
 * first (sha256msg1/msg2), then its 64 rounds two at a time (sha256rnds2) on the state held as ABEF and CDGH. */
__attribute__((target("sha,sse4.1,ssse3"))) void lookout_sha256_blocks(uint32_t state[8], const uint8_t *data,
                                                                       size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)state);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)(state + 4));
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (size_t n = 0; n < blocks; n++, data += 64) {
        __m128i x[16];
        for (int g = 0; g < 4; g++) x[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * g)), swap);
        for (int g = 4; g < 16; g++) {
            __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(x[g - 4], x[g - 3]), _mm_alignr_epi8(x[g - 1], x[g - 2], 4));
            x[g] = _mm_sha256msg2_epu32(t, x[g - 1]);
        }
        __m128i abef0 = abef, cdgh0 = cdgh;
        for (int g = 0; g < 16; g++) {
            __m128i message = _mm_add_epi32(x[g], _mm_loadu_si128((const __m128i *)(lookout_sha256_k + 4 * g)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)state, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#else
int lookout_sha256_instructions(void) { return 0; }
void lookout_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    (void)state; (void)data; (void)blocks;
}
#endif
