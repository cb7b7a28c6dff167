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

// The backend's calls (``CUDABackend``): one GPU per process, its primary context made current on each calling
// thread, memory from the stream-ordered allocator, every launch, copy and product on the calling thread's own
// stream (CUDA's per-thread default stream, and a cuBLAS handle per thread): a thread's work runs in the order it
// issued it, and threads side by side do not wait for each other. A copy back waits for the thread's own work.

/// Makes GPU `index`'s primary context the one the calls below use.
int lookout_cuda_use(int index, char *message, size_t size);
/// Free and total memory of the GPU in use.
int lookout_cuda_memory(size_t *free_bytes, size_t *total_bytes);
int lookout_cuda_alloc(unsigned long long *pointer, size_t bytes, char *message, size_t size);
void lookout_cuda_free(unsigned long long pointer);
int lookout_cuda_upload(unsigned long long target, const void *source, size_t bytes, char *message, size_t size);
int lookout_cuda_download(void *target, unsigned long long source, size_t bytes, char *message, size_t size);
int lookout_cuda_copy(unsigned long long target, unsigned long long source, size_t bytes, char *message, size_t size);
/// Loads a PTX (NUL-terminated) or cubin image; *module keeps it loaded for the process.
int lookout_cuda_load(const void *image, void **module, char *message, size_t size);
int lookout_cuda_function(void *module, const char *name, void **function, char *message, size_t size);
/// Launches `function` with its arguments packed into one buffer as the kernel's parameters lie (each at its
/// own alignment).
int lookout_cuda_launch(
    void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,
    unsigned block_z, unsigned shared, void *arguments, size_t arguments_size, char *message, size_t size);
/// Memory allocated and freed at once (not in stream order: what a thread recording a graph may use).
int lookout_cuda_alloc_now(unsigned long long *pointer, size_t bytes, char *message, size_t size);
void lookout_cuda_free_now(unsigned long long pointer);
/// Pinned host memory (a recorded copy to the GPU reads from it at every replay).
int lookout_cuda_host_alloc(void **pointer, size_t bytes, char *message, size_t size);
void lookout_cuda_host_free(void *pointer);
/// CUDA graphs: the calling thread's launches, copies and products from `record_begin` to `record_end` are
/// recorded (not run) as one graph, which `replay` runs on the thread's stream; `forget` frees it.
int lookout_cuda_record_begin(char *message, size_t size);
int lookout_cuda_record_end(void **graph, char *message, size_t size);
int lookout_cuda_replay(void *graph, char *message, size_t size);
void lookout_cuda_forget(void *graph);
/// Waits for the work the calling thread issued (its stream).
int lookout_cuda_wait(char *message, size_t size);
/// Waits for everything issued, on every thread.
int lookout_cuda_synchronize(char *message, size_t size);

/// Opens cuBLAS (libcublas.so.13 or .12) and makes a handle on the GPU in use; `path` is where it was found.
int lookout_cublas_open(char *path, size_t path_size, char *message, size_t size);
/// Column-major `C = A·B` (transposed where `transpose_a`/`b`), fp32 arithmetic (cuBLAS's default math: no TF32).
int lookout_cublas_sgemm(
    int transpose_a, int transpose_b, int m, int n, int k, unsigned long long a, int lda, unsigned long long b,
    int ldb, float beta, unsigned long long c, int ldc, char *message, size_t size);

/// The 16-bit operand types of ``lookout_cublas_gemm_16``.
enum { LOOKOUT_CUDA_FP16 = 1, LOOKOUT_CUDA_BF16 = 2 };
/// The same product with fp16 or bf16 operands (`type`), summed in fp32 into an fp32 C (or, with `c16`, a C of
/// the operands' type, each sum rounded once): the tensor cores.
int lookout_cublas_gemm_16(
    int type, int transpose_a, int transpose_b, int m, int n, int k, unsigned long long a, int lda,
    unsigned long long b, int ldb, float beta, unsigned long long c, int ldc, int c16, char *message, size_t size);

#endif
