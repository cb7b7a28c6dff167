#ifndef LOOKOUT_CUDA_H
#define LOOKOUT_CUDA_H

#include <stddef.h>

// The NVIDIA driver (libcuda.so.1) and NVRTC, opened at run time with dlopen: nothing of CUDA is needed to
// build Lookout. Every function returns 0 on success, or fills `message` (a sentence naming what is missing or
// what failed) and returns non-zero.

typedef struct {
    char name[256];
    size_t memory;
    int major, minor;
    int multiprocessors;
} lookout_gpu;

/// Opens the driver and initialises it; `path` (or NULL) is where the library was found.
int lookout_cuda_open(char *path, size_t path_size, char *message, size_t size);
int lookout_cuda_driver_version(int *version);
int lookout_cuda_device_count(int *count, char *message, size_t size);
int lookout_cuda_device(int index, lookout_gpu *gpu, char *message, size_t size);

/// Opens NVRTC (the newest of libnvrtc.so.13, .12, .11.2, then libnvrtc.so).
int lookout_nvrtc_open(char *path, size_t path_size, char *message, size_t size);
int lookout_nvrtc_version(int *major, int *minor);
/// Compiles CUDA C++ `source` for `architecture` ("compute_90": PTX; "sm_90": a cubin). The result is malloc'd
/// into *output (free it) with its size; the compiler's log goes to `message` on failure.
int lookout_nvrtc_compile(
    const char *source, const char *name, const char *architecture, char **output, size_t *output_size,
    char *message, size_t size);

/// Runs `kernel` of the PTX or cubin `image` on GPU `index` over `count` floats: `out[i] = kernel(in[i])`,
/// launched as (count + 255) / 256 blocks of 256 threads with arguments (in, out, count). Returns the
/// milliseconds of the launch through the copy back in *milliseconds.
int lookout_cuda_map_floats(
    int index, const void *image, const char *kernel, const float *in, float *out, int count, double *milliseconds,
    char *message, size_t size);

#endif
