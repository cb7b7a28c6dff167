#define _GNU_SOURCE
#include "lookout_cuda.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// The few driver and NVRTC types and signatures Lookout uses, as NVIDIA's headers declare them (stable ABI).
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;
/// CU_STREAM_PER_THREAD: each calling thread's own default stream. The backend issues everything there, so that
/// threads detecting side by side share the GPU without waiting for each other's work (a thread's own work stays
/// in the order it issued it).
#define STREAM ((CUstream)0x2)
typedef int nvrtcResult;
typedef void *nvrtcProgram;

enum { attribute_multiprocessors = 16, attribute_major = 75, attribute_minor = 76 };

static struct {
    void *library;
    CUresult (*init)(unsigned);
    CUresult (*driver_version)(int *);
    CUresult (*device_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_name)(char *, int, CUdevice);
    CUresult (*device_memory)(size_t *, CUdevice);
    CUresult (*device_attribute)(int *, int, CUdevice);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    // Optional: how a thread waits for the GPU (before the context is made).
    CUresult (*primary_flags)(CUdevice, unsigned);
    CUresult (*set_current)(CUcontext);
    CUresult (*module_load)(CUmodule *, const void *);
    CUresult (*module_function)(CUfunction *, CUmodule, const char *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*release)(CUdeviceptr);
    CUresult (*to_device)(CUdeviceptr, const void *, size_t);
    CUresult (*to_host)(void *, CUdeviceptr, size_t);
    CUresult (*launch)(
        CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);
    CUresult (*synchronize)(void);
    CUresult (*error_string)(CUresult, const char **);
    // Optional (stream-ordered memory, CUDA 11.2 on): cuMemAlloc/cuMemFree where absent.
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*to_device_async)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*to_host_async)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*copy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*memory_info)(size_t *, size_t *);
    // Optional (CUDA graphs, 11.4 on): a thread's launches recorded once and replayed (lookout_cuda_record_*).
    CUresult (*begin_capture)(CUstream, int);
    CUresult (*end_capture)(CUstream, void **);
    CUresult (*instantiate)(void **, void *, unsigned long long);
    CUresult (*graph_destroy)(void *);
    CUresult (*graph_launch)(void *, CUstream);
    CUresult (*graph_exec_destroy)(void *);
    CUresult (*host_alloc)(void **, size_t);
    CUresult (*host_free)(void *);
    // Optional: a kernel's dynamic shared memory past 48 KB (an opt-in on compute capability 7.0 and later).
    CUresult (*function_attribute)(CUfunction, int, int);
    // Optional (memory pools, CUDA 11.2 on): the device's pool keeps what cuMemFreeAsync gives back.
    CUresult (*default_pool)(void **, CUdevice);
    CUresult (*pool_attribute)(void *, int, void *);
    CUresult (*pool_trim)(void *, size_t);
} driver;

// The device's default memory pool (stream-ordered allocations come from it), or NULL.
static void *memory_pool = NULL;

static struct {
    void *library;
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    const char *(*error_string)(nvrtcResult);
} nvrtc;

static void say(char *message, size_t size, const char *format, ...) {
    if (!message || size == 0) return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, size, format, arguments);
    va_end(arguments);
}

// Folders to look in, after the dynamic loader's own search: $LOOKOUT_CUDA_PATH (a folder, or its lib64 and
// lib), the CUDA toolkit's, and pip-installed nvidia-* packages (nvidia/cuda_nvrtc/lib, nvidia/cu13/lib, …).
static void *open_first(const char *const *names, char *found, size_t found_size) {
    for (const char *const *name = names; *name; name++) {
        void *library = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (library) {
            if (found) snprintf(found, found_size, "%s", *name);
            return library;
        }
    }
    const char *folders[16];
    int count = 0;
    char custom[3][4096];
    const char *variable = getenv("LOOKOUT_CUDA_PATH");
    if (variable && *variable) {
        snprintf(custom[0], sizeof custom[0], "%s", variable);
        snprintf(custom[1], sizeof custom[1], "%s/lib64", variable);
        snprintf(custom[2], sizeof custom[2], "%s/lib", variable);
        for (int i = 0; i < 3; i++) folders[count++] = custom[i];
    }
    folders[count++] = "/usr/local/cuda/lib64";
    folders[count++] = "/usr/local/cuda/targets/x86_64-linux/lib";
    folders[count++] = "/usr/lib/x86_64-linux-gnu";
    folders[count++] = "/usr/local/nvidia/lib64";
    for (int i = 0; i < count; i++) {
        for (const char *const *name = names; *name; name++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", folders[i], *name);
            void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (library) {
                if (found) snprintf(found, found_size, "%s", path);
                return library;
            }
        }
    }
    const char *patterns[] = {
        "/usr/local/lib/python3*/dist-packages/nvidia/*/lib/",
        "/usr/local/lib/python3*/site-packages/nvidia/*/lib/",
        "/usr/lib/python3/dist-packages/nvidia/*/lib/",
        "/opt/*/lib/python3*/site-packages/nvidia/*/lib/",
        NULL,
    };
    for (const char **pattern = patterns; *pattern; pattern++) {
        glob_t matches;
        if (glob(*pattern, GLOB_ONLYDIR, NULL, &matches) != 0) continue;
        for (size_t i = 0; i < matches.gl_pathc; i++) {
            for (const char *const *name = names; *name; name++) {
                char path[4096];
                snprintf(path, sizeof path, "%s%s", matches.gl_pathv[i], *name);
                void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (library) {
                    if (found) snprintf(found, found_size, "%s", path);
                    globfree(&matches);
                    return library;
                }
            }
        }
        globfree(&matches);
    }
    return NULL;
}

#define LOAD(table, field, symbol)                                                                                     \
    do {                                                                                                               \
        *(void **)&table.field = dlsym(table.library, symbol);                                                       \
        if (!table.field) {                                                                                            \
            say(message, size, "%s lacks %s: it is too old for Lookout", library_name, symbol);                       \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

// A library opened once per process: where it was found, or why it could not be opened.
typedef struct {
    int state;  // 0 not tried, 1 open, -1 failed
    char path[4096];
    char problem[1024];
} opening;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static opening driver_opening, nvrtc_opening;

/// Opens a library through `open` the first time (under the lock), then answers from what that found.
static int open_once(
    opening *library, int (*open)(char *, size_t), char *path, size_t path_size, char *message, size_t size) {
    pthread_mutex_lock(&lock);
    if (library->state == 0) library->state = open(library->problem, sizeof library->problem) == 0 ? 1 : -1;
    int state = library->state;
    pthread_mutex_unlock(&lock);
    if (state < 0) {
        say(message, size, "%s", library->problem);
        return 1;
    }
    if (path) snprintf(path, path_size, "%s", library->path);
    return 0;
}

static int open_driver(char *message, size_t size) {
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    const char *library_name = "libcuda.so.1";
    driver.library = open_first(names, driver_opening.path, sizeof driver_opening.path);
    if (!driver.library) {
        say(message, size,
            "no NVIDIA driver: libcuda.so.1 is not on this machine (install the NVIDIA driver for the GPU, or name "
            "the folder that holds libcuda.so.1 in LOOKOUT_CUDA_PATH)");
        return 1;
    }
    LOAD(driver, init, "cuInit");
    LOAD(driver, driver_version, "cuDriverGetVersion");
    LOAD(driver, device_count, "cuDeviceGetCount");
    LOAD(driver, device_get, "cuDeviceGet");
    LOAD(driver, device_name, "cuDeviceGetName");
    LOAD(driver, device_memory, "cuDeviceTotalMem_v2");
    LOAD(driver, device_attribute, "cuDeviceGetAttribute");
    LOAD(driver, primary_retain, "cuDevicePrimaryCtxRetain");
    LOAD(driver, set_current, "cuCtxSetCurrent");
    LOAD(driver, module_load, "cuModuleLoadData");
    LOAD(driver, module_function, "cuModuleGetFunction");
    LOAD(driver, module_unload, "cuModuleUnload");
    LOAD(driver, alloc, "cuMemAlloc_v2");
    LOAD(driver, release, "cuMemFree_v2");
    LOAD(driver, to_device, "cuMemcpyHtoD_v2");
    LOAD(driver, to_host, "cuMemcpyDtoH_v2");
    LOAD(driver, launch, "cuLaunchKernel");
    LOAD(driver, synchronize, "cuCtxSynchronize");
    LOAD(driver, error_string, "cuGetErrorString");
    LOAD(driver, copy, "cuMemcpyDtoD_v2");
    LOAD(driver, memory_info, "cuMemGetInfo_v2");
    LOAD(driver, to_device_async, "cuMemcpyHtoDAsync_v2");
    LOAD(driver, to_host_async, "cuMemcpyDtoHAsync_v2");
    LOAD(driver, copy_async, "cuMemcpyDtoDAsync_v2");
    LOAD(driver, stream_synchronize, "cuStreamSynchronize");
    *(void **)&driver.alloc_async = dlsym(driver.library, "cuMemAllocAsync");
    *(void **)&driver.free_async = dlsym(driver.library, "cuMemFreeAsync");
    *(void **)&driver.primary_flags = dlsym(driver.library, "cuDevicePrimaryCtxSetFlags_v2");
    *(void **)&driver.begin_capture = dlsym(driver.library, "cuStreamBeginCapture_v2");
    *(void **)&driver.end_capture = dlsym(driver.library, "cuStreamEndCapture");
    *(void **)&driver.instantiate = dlsym(driver.library, "cuGraphInstantiateWithFlags");
    *(void **)&driver.graph_destroy = dlsym(driver.library, "cuGraphDestroy");
    *(void **)&driver.graph_launch = dlsym(driver.library, "cuGraphLaunch");
    *(void **)&driver.graph_exec_destroy = dlsym(driver.library, "cuGraphExecDestroy");
    *(void **)&driver.host_alloc = dlsym(driver.library, "cuMemAllocHost_v2");
    *(void **)&driver.default_pool = dlsym(driver.library, "cuDeviceGetDefaultMemPool");
    *(void **)&driver.pool_attribute = dlsym(driver.library, "cuMemPoolSetAttribute");
    *(void **)&driver.pool_trim = dlsym(driver.library, "cuMemPoolTrimTo");
    *(void **)&driver.host_free = dlsym(driver.library, "cuMemFreeHost");
    *(void **)&driver.function_attribute = dlsym(driver.library, "cuFuncSetAttribute");
    CUresult status = driver.init(0);
    if (status != 0) {
        const char *text = NULL;
        driver.error_string(status, &text);
        say(message, size, "the NVIDIA driver (%s) did not start: %s (error %d)", driver_opening.path,
            text ? text : "unknown error", status);
        return 1;
    }
    return 0;
}

int lookout_cuda_open(char *path, size_t path_size, char *message, size_t size) {
    return open_once(&driver_opening, open_driver, path, path_size, message, size);
}

static int check(CUresult status, const char *what, char *message, size_t size) {
    if (status == 0) return 0;
    const char *text = NULL;
    driver.error_string(status, &text);
    say(message, size, "%s failed: %s (CUDA error %d)", what, text ? text : "unknown error", status);
    return 1;
}

int lookout_cuda_driver_version(int *version) {
    if (driver_opening.state != 1) return 1;
    return driver.driver_version(version);
}

int lookout_cuda_device_count(int *count, char *message, size_t size) {
    if (lookout_cuda_open(NULL, 0, message, size)) return 1;
    return check(driver.device_count(count), "counting the GPUs", message, size);
}

int lookout_cuda_device(int index, lookout_gpu *gpu, char *message, size_t size) {
    if (lookout_cuda_open(NULL, 0, message, size)) return 1;
    CUdevice device;
    if (check(driver.device_get(&device, index), "opening the GPU", message, size)) return 1;
    memset(gpu, 0, sizeof *gpu);
    if (check(driver.device_name(gpu->name, sizeof gpu->name - 1, device), "naming the GPU", message, size)) return 1;
    if (check(driver.device_memory(&gpu->memory, device), "reading the GPU's memory", message, size)) return 1;
    if (check(driver.device_attribute(&gpu->major, attribute_major, device), "reading the GPU", message, size) ||
        check(driver.device_attribute(&gpu->minor, attribute_minor, device), "reading the GPU", message, size) ||
        check(driver.device_attribute(&gpu->multiprocessors, attribute_multiprocessors, device), "reading the GPU",
              message, size))
        return 1;
    return 0;
}

static int open_nvrtc(char *message, size_t size) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", NULL};
    const char *library_name = "libnvrtc";
    nvrtc.library = open_first(names, nvrtc_opening.path, sizeof nvrtc_opening.path);
    if (!nvrtc.library) {
        say(message, size,
            "no NVRTC (libnvrtc.so.13 or .12), which compiles Lookout's GPU kernels: install the CUDA toolkit's "
            "NVRTC, or `pip install nvidia-cuda-nvrtc-cu12`, or name its folder in LOOKOUT_CUDA_PATH");
        return 1;
    }
    LOAD(nvrtc, version, "nvrtcVersion");
    LOAD(nvrtc, create, "nvrtcCreateProgram");
    LOAD(nvrtc, compile, "nvrtcCompileProgram");
    LOAD(nvrtc, ptx_size, "nvrtcGetPTXSize");
    LOAD(nvrtc, ptx, "nvrtcGetPTX");
    LOAD(nvrtc, cubin_size, "nvrtcGetCUBINSize");
    LOAD(nvrtc, cubin, "nvrtcGetCUBIN");
    LOAD(nvrtc, log_size, "nvrtcGetProgramLogSize");
    LOAD(nvrtc, log, "nvrtcGetProgramLog");
    LOAD(nvrtc, destroy, "nvrtcDestroyProgram");
    LOAD(nvrtc, error_string, "nvrtcGetErrorString");
    return 0;
}

int lookout_nvrtc_open(char *path, size_t path_size, char *message, size_t size) {
    return open_once(&nvrtc_opening, open_nvrtc, path, path_size, message, size);
}

int lookout_nvrtc_version(int *major, int *minor) {
    if (nvrtc_opening.state != 1) return 1;
    return nvrtc.version(major, minor);
}

int lookout_nvrtc_compile(
    const char *source, const char *name, const char *architecture, char **output, size_t *output_size,
    char *message, size_t size) {
    if (lookout_nvrtc_open(NULL, 0, message, size)) return 1;
    nvrtcProgram program = NULL;
    nvrtcResult status = nvrtc.create(&program, source, name, 0, NULL, NULL);
    if (status != 0) {
        say(message, size, "NVRTC could not take %s: %s", name, nvrtc.error_string(status));
        return 1;
    }
    char option[64];
    snprintf(option, sizeof option, "--gpu-architecture=%s", architecture);
    const char *options[] = {option, "--std=c++17", "--fmad=false"};
    status = nvrtc.compile(program, 3, options);
    if (status != 0) {
        size_t log_size = 0;
        nvrtc.log_size(program, &log_size);
        char *log = malloc(log_size + 1);
        if (log) {
            nvrtc.log(program, log);
            log[log_size] = 0;
        }
        say(message, size, "NVRTC could not compile %s for %s: %s", name, architecture, log ? log : "");
        free(log);
        nvrtc.destroy(&program);
        return 1;
    }
    int cubin = strncmp(architecture, "sm_", 3) == 0;
    size_t length = 0;
    status = cubin ? nvrtc.cubin_size(program, &length) : nvrtc.ptx_size(program, &length);
    char *image = status == 0 ? malloc(length) : NULL;
    if (image) status = cubin ? nvrtc.cubin(program, image) : nvrtc.ptx(program, image);
    nvrtc.destroy(&program);
    if (!image || status != 0) {
        free(image);
        say(message, size, "NVRTC gave no %s for %s", cubin ? "cubin" : "PTX", name);
        return 1;
    }
    *output = image;
    *output_size = length;
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/// How a thread waits for the GPU, set on the device's context before it is made: `LOOKOUT_CUDA_SYNC` = `spin`
/// (CU_CTX_SCHED_SPIN: the thread spins on its core, the least delay), `yield` (spins, yielding the core), `block`
/// (sleeps until the GPU is done: the core is free for other work, such as the index's decoding), else the
/// driver's own choice (spin where the process has fewer contexts than the machine has cores). A context already
/// made keeps its flags.
static void set_waiting(CUdevice device) {
    const char *variable = getenv("LOOKOUT_CUDA_SYNC");
    if (!variable || !driver.primary_flags) return;
    unsigned flags = strcmp(variable, "spin") == 0    ? 1u
                     : strcmp(variable, "yield") == 0 ? 2u
                     : strcmp(variable, "block") == 0 ? 4u
                                                      : 0u;
    driver.primary_flags(device, flags);
}

/// The device's primary context, its waiting set first (``set_waiting``).
static CUresult retain_primary(CUcontext *context, CUdevice device) {
    set_waiting(device);
    return driver.primary_retain(context, device);
}

int lookout_cuda_map_floats(
    int index, const void *image, const char *kernel, const float *in, float *out, int count, double *milliseconds,
    char *message, size_t size) {
    if (lookout_cuda_open(NULL, 0, message, size)) return 1;
    CUdevice device;
    CUcontext context;
    if (check(driver.device_get(&device, index), "opening the GPU", message, size) ||
        check(retain_primary(&context, device), "making the GPU's context", message, size) ||
        check(driver.set_current(context), "using the GPU's context", message, size))
        return 1;
    CUmodule module = NULL;
    CUfunction function = NULL;
    if (check(driver.module_load(&module, image), "loading the compiled kernels", message, size)) return 1;
    int failed = check(driver.module_function(&function, module, kernel), "finding the kernel", message, size);
    CUdeviceptr input = 0, output = 0;
    size_t bytes = (size_t)count * sizeof(float);
    if (!failed) failed = check(driver.alloc(&input, bytes), "allocating GPU memory", message, size);
    if (!failed) failed = check(driver.alloc(&output, bytes), "allocating GPU memory", message, size);
    double start = now_ms();
    if (!failed) failed = check(driver.to_device(input, in, bytes), "copying to the GPU", message, size);
    if (!failed) {
        void *arguments[] = {&input, &output, &count};
        unsigned blocks = (unsigned)((count + 255) / 256);
        failed = check(
            driver.launch(function, blocks, 1, 1, 256, 1, 1, 0, NULL, arguments, NULL), "launching the kernel",
            message, size);
    }
    if (!failed) failed = check(driver.synchronize(), "running the kernel", message, size);
    if (!failed) failed = check(driver.to_host(out, output, bytes), "copying from the GPU", message, size);
    if (milliseconds) *milliseconds = now_ms() - start;
    if (input) driver.release(input);
    if (output) driver.release(output);
    driver.module_unload(module);
    return failed;
}

// MARK: The backend's calls

static CUcontext backend_context;
static __thread CUcontext thread_context;

/// The backend's context made current on this thread (once per thread).
static int current(char *message, size_t size) {
    if (!backend_context) {
        say(message, size, "no GPU chosen (lookout_cuda_use was not called)");
        return 1;
    }
    if (thread_context == backend_context) return 0;
    if (check(driver.set_current(backend_context), "using the GPU's context", message, size)) return 1;
    thread_context = backend_context;
    return 0;
}

int lookout_cuda_use(int index, char *message, size_t size) {
    if (lookout_cuda_open(NULL, 0, message, size)) return 1;
    CUdevice device;
    CUcontext context;
    if (check(driver.device_get(&device, index), "opening the GPU", message, size) ||
        check(retain_primary(&context, device), "making the GPU's context", message, size))
        return 1;
    pthread_mutex_lock(&lock);
    backend_context = context;
    pthread_mutex_unlock(&lock);
    if (current(message, size)) return 1;
    // The pool keeps up to an eighth of the GPU's memory freed for the next allocation instead of handing it back
    // to the driver at each synchronisation (its default): a batch's maps of hundreds of MB are then not mapped
    // again every time. Bounded, because what it keeps counts as used in cuMemGetInfo, which sizes batches and
    // decides whether a graph is recorded. It is trimmed where an allocation finds no room.
    void *pool = NULL;
    size_t total_bytes = 0;
    if (driver.default_pool && driver.pool_attribute && driver.default_pool(&pool, device) == 0 && pool &&
        driver.device_memory(&total_bytes, device) == 0) {
        unsigned long long keep = total_bytes / 8;
        if (driver.pool_attribute(pool, 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */, &keep) == 0) memory_pool = pool;
    }
    return 0;
}

int lookout_cuda_memory(size_t *free_bytes, size_t *total_bytes) {
    if (current(NULL, 0)) return 1;
    return driver.memory_info(free_bytes, total_bytes);
}

int lookout_cuda_alloc(unsigned long long *pointer, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    CUdeviceptr address = 0;
    if (bytes == 0) bytes = 4;
    CUresult status = driver.alloc_async ? driver.alloc_async(&address, bytes, STREAM) : driver.alloc(&address, bytes);
    if (status != 0 && memory_pool && driver.pool_trim && driver.alloc_async) {
        // What the pool keeps and no work still uses given back, then once more. No context-wide wait first: it
        // would spoil another thread's recording.
        driver.pool_trim(memory_pool, 0);
        status = driver.alloc_async(&address, bytes, STREAM);
    }
    if (status != 0) {
        size_t free_bytes = 0, total = 0;
        driver.memory_info(&free_bytes, &total);
        const char *text = NULL;
        driver.error_string(status, &text);
        say(message, size, "the GPU has no room for %zu MiB more (%zu MiB of %zu MiB free): %s", bytes >> 20,
            free_bytes >> 20, total >> 20, text ? text : "unknown error");
        return 1;
    }
    *pointer = address;
    return 0;
}

void lookout_cuda_free(unsigned long long pointer) {
    if (!pointer || current(NULL, 0)) return;
    if (driver.free_async)
        driver.free_async(pointer, STREAM);
    else
        driver.release(pointer);
}

int lookout_cuda_upload(unsigned long long target, const void *source, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    if (bytes == 0) return 0;
    // From pageable memory: returns once the values are staged, so `source` may go at once.
    return check(driver.to_device_async(target, source, bytes, STREAM), "copying to the GPU", message, size);
}

int lookout_cuda_download(void *target, unsigned long long source, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    if (bytes == 0) return 0;
    return check(driver.to_host_async(target, source, bytes, STREAM), "copying from the GPU", message, size) ||
           check(driver.stream_synchronize(STREAM), "copying from the GPU", message, size);
}

int lookout_cuda_copy(unsigned long long target, unsigned long long source, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    if (bytes == 0) return 0;
    return check(driver.copy_async(target, source, bytes, STREAM), "copying on the GPU", message, size);
}

int lookout_cuda_load(const void *image, void **module, char *message, size_t size) {
    if (current(message, size)) return 1;
    return check(driver.module_load((CUmodule *)module, image), "loading the compiled kernels", message, size);
}

int lookout_cuda_function(void *module, const char *name, void **function, char *message, size_t size) {
    if (current(message, size)) return 1;
    char what[256];
    snprintf(what, sizeof what, "finding the kernel %s", name);
    return check(driver.module_function((CUfunction *)function, (CUmodule)module, name), what, message, size);
}

int lookout_cuda_launch(
    void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,
    unsigned block_z, unsigned shared, void *arguments, size_t arguments_size, char *message, size_t size) {
    if (current(message, size)) return 1;
    // CU_LAUNCH_PARAM_BUFFER_POINTER (1), CU_LAUNCH_PARAM_BUFFER_SIZE (2), CU_LAUNCH_PARAM_END (0).
    void *extra[] = {(void *)1, arguments, (void *)2, &arguments_size, (void *)0};
    // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8): past 48 KB a kernel must be allowed its shared memory.
    if (shared > 48 * 1024) {
        if (!driver.function_attribute) {
            say(message, size, "this NVIDIA driver cannot give a kernel more than 48 KB of shared memory");
            return 1;
        }
        if (check(driver.function_attribute(function, 8, (int)shared), "allowing a kernel its shared memory", message,
                  size))
            return 1;
    }
    return check(
        driver.launch(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared, STREAM, NULL, extra),
        "launching a kernel", message, size);
}

int lookout_cuda_alloc_now(unsigned long long *pointer, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    CUdeviceptr address = 0;
    if (check(driver.alloc(&address, bytes ? bytes : 4), "allocating GPU memory", message, size)) return 1;
    *pointer = address;
    return 0;
}

void lookout_cuda_free_now(unsigned long long pointer) {
    if (!pointer || current(NULL, 0)) return;
    driver.release(pointer);
}

int lookout_cuda_host_alloc(void **pointer, size_t bytes, char *message, size_t size) {
    if (current(message, size)) return 1;
    if (!driver.host_alloc) return say(message, size, "the NVIDIA driver has no cuMemAllocHost"), 1;
    return check(driver.host_alloc(pointer, bytes ? bytes : 4), "allocating pinned host memory", message, size);
}

void lookout_cuda_host_free(void *pointer) {
    if (pointer && driver.host_free && !current(NULL, 0)) driver.host_free(pointer);
}

int lookout_cuda_record_begin(char *message, size_t size) {
    if (current(message, size)) return 1;
    if (!driver.begin_capture || !driver.end_capture || !driver.instantiate || !driver.graph_launch ||
        !driver.graph_destroy || !driver.graph_exec_destroy || !driver.host_alloc) {
        say(message, size, "the NVIDIA driver has no CUDA graphs (11.4 or newer is needed)");
        return 1;
    }
    // CU_STREAM_CAPTURE_MODE_RELAXED (2): the thread may still allocate (cuMemAlloc) while it records.
    return check(driver.begin_capture(STREAM, 2), "starting to record the GPU's work", message, size);
}

int lookout_cuda_record_end(void **graph, char *message, size_t size) {
    if (current(message, size)) return 1;
    void *recorded = NULL;
    *graph = NULL;
    if (check(driver.end_capture(STREAM, &recorded), "recording the GPU's work", message, size)) return 1;
    CUresult status = driver.instantiate(graph, recorded, 0);
    driver.graph_destroy(recorded);
    return check(status, "preparing the recorded work", message, size);
}

int lookout_cuda_replay(void *graph, char *message, size_t size) {
    if (current(message, size)) return 1;
    return check(driver.graph_launch(graph, STREAM), "replaying recorded work", message, size);
}

void lookout_cuda_forget(void *graph) {
    if (graph && driver.graph_exec_destroy && !current(NULL, 0)) driver.graph_exec_destroy(graph);
}

int lookout_cuda_wait(char *message, size_t size) {
    if (current(message, size)) return 1;
    return check(driver.stream_synchronize(STREAM), "waiting for the GPU", message, size);
}

int lookout_cuda_synchronize(char *message, size_t size) {
    if (current(message, size)) return 1;
    return check(driver.synchronize(), "running the GPU's kernels", message, size);
}

// MARK: cuBLAS

typedef void *cublasHandle_t;
static struct {
    void *library;
    int (*create)(cublasHandle_t *);
    int (*sgemm)(
        cublasHandle_t, int, int, int, int, int, const float *, const float *, int, const float *, int, const float *,
        float *, int);
    // cublasGemmEx: (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
    // computeType, algo).
    int (*set_stream)(cublasHandle_t, CUstream);
    int (*set_workspace)(cublasHandle_t, void *, size_t);
    int (*gemm_ex)(
        cublasHandle_t, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
        const void *, void *, int, int, int, int);
    cublasHandle_t handle;
} cublas;
static opening cublas_opening;

static int open_cublas(char *message, size_t size) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    const char *library_name = "libcublas";
    cublas.library = open_first(names, cublas_opening.path, sizeof cublas_opening.path);
    if (!cublas.library) {
        say(message, size,
            "no cuBLAS (libcublas.so.13 or .12): install the CUDA toolkit's cuBLAS, or `pip install "
            "nvidia-cublas-cu12`, or name its folder in LOOKOUT_CUDA_PATH");
        return 1;
    }
    LOAD(cublas, create, "cublasCreate_v2");
    LOAD(cublas, sgemm, "cublasSgemm_v2");
    LOAD(cublas, gemm_ex, "cublasGemmEx");
    LOAD(cublas, set_stream, "cublasSetStream_v2");
    *(void **)&cublas.set_workspace = dlsym(cublas.library, "cublasSetWorkspace_v2");
    if (current(message, size)) return 1;
    int status = cublas.create(&cublas.handle);
    if (status != 0) {
        say(message, size, "cuBLAS (%s) did not start on the GPU (cuBLAS status %d)", cublas_opening.path, status);
        return 1;
    }
    return 0;
}

int lookout_cublas_open(char *path, size_t path_size, char *message, size_t size) {
    return open_once(&cublas_opening, open_cublas, path, path_size, message, size);
}

/// The calling thread's cuBLAS handle, on its own stream (made at its first product; a handle is not shared by
/// threads, so products on several threads need no lock).
static __thread cublasHandle_t thread_handle;
static cublasHandle_t handle_here(char *message, size_t size) {
    if (thread_handle) return thread_handle;
    cublasHandle_t handle = NULL;
    int status = cublas.create(&handle);
    if (status == 0) status = cublas.set_stream(handle, STREAM);
    // A workspace of its own (32 MiB, NVIDIA's advice for Hopper), so that a product recorded into a CUDA graph
    // allocates nothing while recording.
    CUdeviceptr workspace = 0;
    if (status == 0 && cublas.set_workspace && driver.alloc(&workspace, 32 << 20) == 0)
        status = cublas.set_workspace(handle, (void *)workspace, 32 << 20);
    if (status != 0) {
        say(message, size, "cuBLAS (%s) did not start on this thread (cuBLAS status %d)", cublas_opening.path,
            status);
        return NULL;
    }
    thread_handle = handle;
    return handle;
}

int lookout_cublas_sgemm(
    int transpose_a, int transpose_b, int m, int n, int k, unsigned long long a, int lda, unsigned long long b,
    int ldb, float beta, unsigned long long c, int ldc, char *message, size_t size) {
    if (lookout_cublas_open(NULL, 0, message, size) || current(message, size)) return 1;
    const float alpha = 1;
    cublasHandle_t handle = handle_here(message, size);
    if (!handle) return 1;
    int status = cublas.sgemm(
        handle, transpose_a ? 1 : 0, transpose_b ? 1 : 0, m, n, k, &alpha, (const float *)a, lda,
        (const float *)b, ldb, &beta, (float *)c, ldc);
    if (status != 0) {
        say(message, size, "cuBLAS's sgemm (%d×%d×%d) failed (cuBLAS status %d)", m, n, k, status);
        return 1;
    }
    return 0;
}

int lookout_cublas_gemm_16(
    int type, int transpose_a, int transpose_b, int m, int n, int k, unsigned long long a, int lda,
    unsigned long long b, int ldb, float beta, unsigned long long c, int ldc, int c16, char *message, size_t size) {
    if (lookout_cublas_open(NULL, 0, message, size) || current(message, size)) return 1;
    // library_types.h: CUDA_R_32F 0, CUDA_R_16F 2, CUDA_R_16BF 14; cublas_api.h: CUBLAS_COMPUTE_32F 68,
    // CUBLAS_GEMM_DEFAULT -1.
    enum { R_32F = 0, R_16F = 2, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1 };
    int operand = type == LOOKOUT_CUDA_BF16 ? R_16BF : R_16F;
    const float alpha = 1;
    cublasHandle_t handle = handle_here(message, size);
    if (!handle) return 1;
    int status = cublas.gemm_ex(
        handle, transpose_a ? 1 : 0, transpose_b ? 1 : 0, m, n, k, &alpha, (const void *)a, operand, lda,
        (const void *)b, operand, ldb, &beta, (void *)c, c16 ? operand : R_32F, ldc, COMPUTE_32F,
        GEMM_DEFAULT);
    if (status != 0) {
        say(message, size, "cuBLAS's %s GEMM (%d×%d×%d) failed (cuBLAS status %d)",
            type == LOOKOUT_CUDA_BF16 ? "bf16" : "fp16", m, n, k, status);
        return 1;
    }
    return 0;
}
