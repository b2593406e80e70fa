// SPDX-License-Identifier: MIT
/*
 * 02 explicit_allocation: cudaMalloc, cudaMemset, cudaFree, and who frees what, on every path.
 *
 * Device memory is a second address space: the host cannot dereference a cudaMalloc pointer and a
 * kernel cannot dereference a malloc pointer. Nothing frees device memory for you until the
 * process ends, so every cudaMalloc needs exactly one cudaFree, on the error paths too. A library
 * like this one lives inside the Python process: a leak here lasts as long as Python does.
 *
 * Build: make                 Run: make run CH=02 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 02.1 .. 02.4 (grep -n "TODO(student)" this file)
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>
#include <stdint.h>
#include <stdlib.h>

// ---- kernels ------------------------------------------------------------------------------

/* y[i] = a * x[i] + b. Grid-stride, so one launch of a bounded grid covers any n (a chunk, or an
   array of more than 2^31 elements). x == y is allowed: each element is read, then written, by
   the same thread. That is why x and y are NOT __restrict__: the qualifier promises the compiler
   that no memory is reached through both, and a caller that works in place (process_chunked,
   dev_array_scale_shift) would break that promise: undefined behaviour. */
__global__ void scale_shift_kernel(const float *x, float *y, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + b;
}

/* 64-bit index: blockIdx.x * blockDim.x is unsigned int arithmetic, which passes 2^31 near
   n = INT_MAX; kept in an int it goes negative and `i < n` would let it through. */
__global__ void fill_kernel(float *__restrict__ y, int n, float value)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = value;
}

/* Enough blocks of 256 to cover n, capped: past a few thousand blocks a grid-stride loop keeps
   every SM busy anyway. n = 0 gives 1 block (a grid of 0 blocks is a launch error). */
static int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

// ---- lesson: what cudaMalloc gives back -----------------------------------------------------

/* Allocates every size at once (so no two get the same recycled address), records each address,
   then frees them all. Python reads the alignment off the addresses: CUDA guarantees at least
   256 bytes. There is no cudaMallocAlignment to ask for more or less (a seed article says there
   is); 2D rows are padded by cudaMallocPitch instead (chapter 06). */
#define PROBE_MAX 64
extern "C" int alignment_probe(const size_t *sizes, int count, unsigned long long *addrs)
{
    int status = 0;
    void *ptrs[PROBE_MAX] = {0};

    TUT_REQUIRE(count >= 0 && count <= PROBE_MAX);
    for (int i = 0; i < count; i++) {
        CUDA_CHECK(cudaMalloc(&ptrs[i], sizes[i]));
        addrs[i] = (unsigned long long)(uintptr_t)ptrs[i];
    }
cleanup:
    for (int i = 0; i < PROBE_MAX; i++)
        cudaFree(ptrs[i]);   /* cudaFree(NULL) does nothing, so one loop frees what exists */
    return status;
}

/* cudaFree(NULL) is defined to succeed and do nothing, like free(NULL): that is what lets every
   function below free all its pointers in one cleanup block, allocated or not. */
extern "C" int free_null(void)
{
    int status = 0;
    CUDA_CHECK(cudaFree(NULL));
cleanup:
    return status;
}

/* Allocate and free `bytes`. Asking for more than the device has fails with
   cudaErrorMemoryAllocation; the error is not sticky (the next allocation works), but the runtime
   also keeps it as its "last error" until cudaGetLastError() reads it. */
extern "C" int try_malloc(size_t bytes)
{
    int status = 0;
    void *d = NULL;
    CUDA_CHECK(cudaMalloc(&d, bytes));
cleanup:
    cudaFree(d);
    return status;
}

// ---- lesson: a device array owned through a handle ----------------------------------------

/* Python cannot hold a C struct, but it can hold an opaque pointer (a handle) and promise to give
   it back exactly once to dev_array_destroy. The class DeviceArray in driver.py keeps that
   promise: free(), a `with` block, or the garbage collector as a last resort. */
typedef struct {
    float *d;
    size_t n;
} dev_array;

extern "C" int dev_array_create(dev_array **out, size_t n)
{
    int status = 0;
    dev_array *arr = NULL;

    *out = NULL;
    /* n * sizeof(float) must not wrap around size_t: n = 2^62 would ask cudaMalloc for 0 bytes,
       which succeeds, and every later kernel would write through a NULL pointer */
    TUT_REQUIRE(n <= SIZE_MAX / sizeof(float));
    arr = (dev_array *)calloc(1, sizeof *arr);
    if (arr == NULL) {
        status = tut_record((int)cudaErrorMemoryAllocation, "calloc(1, sizeof *arr)",
                            __FILE__, __LINE__);
        goto cleanup;
    }
    arr->n = n;
    CUDA_CHECK(cudaMalloc(&arr->d, n * sizeof(float)));
    *out = arr;     /* from here the caller owns both allocations */
    arr = NULL;
cleanup:
    if (arr != NULL) {   /* failed half way: undo what was done */
        cudaFree(arr->d);
        free(arr);
    }
    return status;
}

extern "C" int dev_array_destroy(dev_array *arr)
{
    int status = 0;
    TUT_REQUIRE(arr != NULL);
    CUDA_CHECK(cudaFree(arr->d));
cleanup:
    free(arr);   /* the host half goes even if cudaFree failed: the handle is dead either way */
    return status;
}

extern "C" int dev_array_upload(dev_array *arr, const float *h_src, size_t n)
{
    int status = 0;
    TUT_REQUIRE(arr != NULL && n <= arr->n);
    CUDA_CHECK(cudaMemcpy(arr->d, h_src, n * sizeof(float), cudaMemcpyHostToDevice));
cleanup:
    return status;
}

extern "C" int dev_array_download(const dev_array *arr, float *h_dst, size_t n)
{
    int status = 0;
    TUT_REQUIRE(arr != NULL && n <= arr->n);
    CUDA_CHECK(cudaMemcpy(h_dst, arr->d, n * sizeof(float), cudaMemcpyDeviceToHost));
cleanup:
    return status;
}

/* cudaMemset sets BYTES, like memset: value 1 makes every float 0x01010101 (2.4e-38), not 1.0f.
   Only 0 means the same thing for every type. */
extern "C" int dev_array_memset(dev_array *arr, int value)
{
    int status = 0;
    TUT_REQUIRE(arr != NULL);
    CUDA_CHECK(cudaMemset(arr->d, value, arr->n * sizeof(float)));
cleanup:
    return status;
}

extern "C" int dev_array_scale_shift(dev_array *arr, float a, float b)
{
    int status = 0;
    TUT_REQUIRE(arr != NULL);
    scale_shift_kernel<<<grid_for(arr->n), 256>>>(arr->d, arr->d, arr->n, a, b);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- exercises ----------------------------------------------------------------------------

/* 02.1 The whole life of device memory in one call: h_y = a * h_x + b. */
extern "C" int roundtrip(const float *h_x, float *h_y, size_t n, float a, float b)
{
    int status = 0;
    float *d_x = NULL, *d_y = NULL;   /* NULL until allocated: the cleanup below relies on it */

    // TODO(student) 02.1: bytes = n floats; cudaMalloc d_x and d_y, copy h_x in, launch scale_shift_kernel<<<grid_for(n), 256>>>, check the launch, copy d_y out to h_y; CUDA_CHECK every call (~8 lines)
    TUT_TODO();
cleanup:
    /* reached on success and on every failure: both pointers are valid or NULL */
    cudaFree(d_x);
    cudaFree(d_y);
    return status;
}

/* The habit this chapter breaks: return as soon as a call fails. Whatever was allocated before
   that call is never freed (exercise 02.2 starts from code written this way). */
#define RETURN_ON_ERROR(expr)                                                    \
    do {                                                                         \
        cudaError_t e_ = (expr);                                                 \
        if (e_ != cudaSuccess)                                                   \
            return tut_record((int)e_, #expr, __FILE__, __LINE__);               \
    } while (0)

/* 02.2 h_y = a * (a * h_x + b) + b through an intermediate device buffer: three allocations. */
extern "C" int apply_twice(const float *h_x, float *h_y, size_t n, float a, float b)
{
    float *d_x = NULL, *d_tmp = NULL, *d_y = NULL;
    size_t bytes = n * sizeof(float);

    // TODO(student) 02.2: this works until a cudaMalloc fails: then it returns and leaks what it already allocated. Rewrite it with `int status = 0;`, CUDA_CHECK and one cleanup: label that frees all three (~16 lines)
    RETURN_ON_ERROR(cudaMalloc(&d_x, bytes));
    RETURN_ON_ERROR(cudaMalloc(&d_tmp, bytes));
    RETURN_ON_ERROR(cudaMalloc(&d_y, bytes));
    RETURN_ON_ERROR(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
    scale_shift_kernel<<<grid_for(n), 256>>>(d_x, d_tmp, n, a, b);
    RETURN_ON_ERROR(cudaGetLastError());
    scale_shift_kernel<<<grid_for(n), 256>>>(d_tmp, d_y, n, a, b);
    RETURN_ON_ERROR(cudaGetLastError());
    RETURN_ON_ERROR(cudaMemcpy(h_y, d_y, bytes, cudaMemcpyDeviceToHost));
    cudaFree(d_x);
    cudaFree(d_tmp);
    cudaFree(d_y);
    return 0;
}

/* 02.3, given: the whole array on the device at once. Fails with cudaErrorMemoryAllocation as
   soon as n floats are more than the device has free. */
extern "C" int process_whole(const float *h_x, float *h_y, size_t n, float a, float b)
{
    int status = 0;
    float *d_buf = NULL;
    size_t bytes = n * sizeof(float);

    CUDA_CHECK(cudaMalloc(&d_buf, bytes));
    CUDA_CHECK(cudaMemcpy(d_buf, h_x, bytes, cudaMemcpyHostToDevice));
    scale_shift_kernel<<<grid_for(n), 256>>>(d_buf, d_buf, n, a, b);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy(h_y, d_buf, bytes, cudaMemcpyDeviceToHost));
cleanup:
    cudaFree(d_buf);
    return status;
}

/* 02.3 The same work through one device buffer of chunk_elems floats, reused for every chunk:
   device memory needed = one chunk, whatever n is. */
extern "C" int process_chunked(const float *h_x, float *h_y, size_t n, float a, float b,
                               size_t chunk_elems)
{
    int status = 0;
    float *d_buf = NULL;

    TUT_REQUIRE(chunk_elems > 0);
    CUDA_CHECK(cudaMalloc(&d_buf, chunk_elems * sizeof(float)));
    // TODO(student) 02.3: for each chunk [first, first + len) of the array (the last one is shorter): copy it in, scale_shift_kernel it in place, copy it out (~8 lines)
    TUT_TODO();
cleanup:
    cudaFree(d_buf);
    return status;
}

/* 02.4 h_out[i] = value, with `block` threads per block. */
extern "C" int fill_checked(float *h_out, int n, float value, int block)
{
    float *d_y = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    /* block = 0 must reach CUDA (which refuses it), not divide by zero here */
    int grid = block > 0 ? TUT_DIV_UP(n, block) : 1;

    if (n == 0)
        return 0;
    // TODO(student) 02.4: no call here is checked, so a bad block size returns 0 and garbage. Add `int status = 0;`, CUDA_CHECK on every call, CUDA_CHECK_LAUNCH after the launch, and one cleanup: (~10 lines)
    cudaMalloc(&d_y, bytes);
    fill_kernel<<<grid, block>>>(d_y, n, value);
    cudaMemcpy(h_out, d_y, bytes, cudaMemcpyDeviceToHost);
    cudaFree(d_y);
    return 0;
}

/* fill_kernel alone, into d_y (device memory): the check of the lesson's claim at n = INT_MAX
   (driver.py) counts the result where it is, so its 8 GiB never cross to the host. */
extern "C" int fill_device(float *d_y, int n, float value, int block)
{
    int status = 0;
    fill_kernel<<<block > 0 ? TUT_DIV_UP(n, block) : 1, block>>>(d_y, n, value);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- benchmarks (driver.py --bench) -------------------------------------------------------

/* cudaMalloc + cudaFree of `bytes`, `reps` times after a warm-up pair. A host clock is right
   here, unlike around a kernel: both calls return only once their work is done (cudaFree even
   waits for the whole device), so there is no queued GPU work for the clock to miss. */
extern "C" int bench_malloc_free(size_t bytes, int reps, float *times_ms)
{
    int status = 0;
    void *d = NULL;

    for (int i = -1; i < reps; i++) {
        auto start = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaMalloc(&d, bytes));
        CUDA_CHECK(cudaFree(d));
        d = NULL;
        auto stop = std::chrono::steady_clock::now();
        if (i >= 0)
            times_ms[i] = std::chrono::duration<float, std::milli>(stop - start).count();
    }
cleanup:
    cudaFree(d);
    return status;
}

/* cudaMemset of `bytes`, event-timed: the GPU writes memory without reading it. */
extern "C" int bench_memset(size_t bytes, int reps, float *times_ms)
{
    int status = 0;
    void *d = NULL;
    tut_timer t = {0};

    CUDA_CHECK(cudaMalloc(&d, bytes));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaMemsetAsync(d, 0x3f, bytes, 0));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    cudaFree(d);
    return status;
}
