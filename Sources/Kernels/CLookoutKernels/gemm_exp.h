/* Shared by the GEMMs (gemm.c, gemm_bf16.c, gemm_int8.c) and kernels.c, private to CLookoutKernels: exp in AVX2
   and AVX-512 (the same operations), how a row of columns is cut into register blocks, and the epilogue's SiLU
   and store. */
#ifndef LOOKOUT_GEMM_EXP_H
#define LOOKOUT_GEMM_EXP_H
#if defined(__x86_64__)
#include <immintrin.h>

/* exp(x) for 8 floats: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two parts for accuracy),
   e^r by a degree-6 polynomial, 2^n through the exponent bits. Inputs are clamped to ±88. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 exp8(__m256 x) {
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

/* exp(x) as exp8 computes it, sixteen lanes (the same operations, so the same results). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* The next block of a row with `left` columns to go: `P` registers of 16 columns (at most three, spread evenly
   over the blocks the rest needs — 100 columns: 48, 32 and 20, not 48, 48 and 4), its `width`, and the `mask`
   of its last register, the only partial one. */
typedef struct {
    int P, width;
    __mmask16 mask;
} column_block;

static inline column_block next_columns(int left) {
    int vectors = (left + 15) / 16, blocks = (vectors + 2) / 3;
    column_block block;
    block.P = (vectors + blocks - 1) / blocks;
    block.width = left < 16 * block.P ? left : 16 * block.P;
    int last = block.width - 16 * (block.P - 1);
    block.mask = (__mmask16)(last == 16 ? 0xFFFF : (1u << last) - 1);
    return block;
}

/* Register `j` of a `P`-register row of a block, bias already added: SiLU (x / (1 + exp(−x))) when `activation`,
   then stored at `target` (the last register under `mask`). */
__attribute__((target("avx512f"), always_inline)) static inline __m512 activate16(__m512 value, int activation) {
    if (!activation) return value;
    __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), value));
    return _mm512_div_ps(value, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

__attribute__((target("avx512f"), always_inline)) static inline void store_output(__m512 value, int activation,
                                                                                 float *target, int j, int P,
                                                                                 __mmask16 mask) {
    value = activate16(value, activation);
    if (j == P - 1)
        _mm512_mask_storeu_ps(target, mask, value);
    else
        _mm512_storeu_ps(target, value);
}

/* AMX's tile configuration as Lookout's kernels use it: palette 1, tiles 0–7 each 16 rows of 64 bytes (0–3
   accumulators of a 32 × 32 block, 4–5 the left operand's two 16-row tiles, 6–7 the right operand's two 16-column
   tiles). Loaded at the start of each kernel call (the thread's tile state is its own), released at its end. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} lookout_tile_config;

__attribute__((target("amx-tile"), always_inline)) static inline void load_tile_config(void) {
    lookout_tile_config config;
    __builtin_memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) {
        config.bytes_per_row[t] = 64;
        config.rows[t] = 16;
    }
    _tile_loadconfig(&config);
}

/* The four accumulators set to zero. */
#define ZERO_ACCUMULATORS() \
    do {                    \
        _tile_zero(0);      \
        _tile_zero(1);      \
        _tile_zero(2);      \
        _tile_zero(3);      \
    } while (0)

/* One step of k into the 2 × 2 accumulators by DP (_tile_dpbf16ps or _tile_dpbsud): the left operand's tiles from
   `a0` and `a1` (16 rows of 64 bytes, packed), the right operand's from `b0` and `b1` (16 rows `stride` bytes
   apart); the second row of tiles only where `tall`, the second column only where `wide`. */
#define TILE_STEP_2X2(DP, a0, a1, b0, b1, stride, wide, tall) \
    do {                                                       \
        _tile_loadd(4, (a0), 64);                              \
        _tile_loadd(6, (b0), (stride));                        \
        DP(0, 4, 6);                                           \
        if (wide) {                                            \
            _tile_loadd(7, (b1), (stride));                    \
            DP(1, 4, 7);                                       \
        }                                                      \
        if (tall) {                                            \
            _tile_loadd(5, (a1), 64);                          \
            DP(2, 5, 6);                                       \
            if (wide) DP(3, 5, 7);                             \
        }                                                      \
    } while (0)

/* Accumulator `half · 2 + side` (row and column of the 2 × 2 block) stored to `tile` (16 rows of 64 bytes). */
__attribute__((target("amx-tile"), always_inline)) static inline void store_accumulator(int half, int side,
                                                                                      void *tile) {
    switch (half * 2 + side) {
    case 0: _tile_stored(0, tile, 64); break;
    case 1: _tile_stored(1, tile, 64); break;
    case 2: _tile_stored(2, tile, 64); break;
    default: _tile_stored(3, tile, 64); break;
    }
}

#endif
#endif
