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
#endif
