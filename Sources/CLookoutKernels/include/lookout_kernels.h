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
#endif
