// SPDX-License-Identifier: MIT
/*
 * 01 threads_blocks_grids: which thread am I, and what happens when a launch asks too much.
 *
 * A launch kernel<<<grid, block>>> starts grid.x*grid.y*grid.z blocks of block.x*block.y*block.z
 * threads. The hardware runs each block on one SM, in warps of 32 threads. Every thread runs the
 * same kernel and tells itself apart only by its built-in ids (threadIdx, blockIdx) and the
 * launch's shape (blockDim, gridDim).
 *
 * Build: make                 Run: make run CH=01 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 01.1 .. 01.5 (grep -n "TODO(student)" this file)
 * Buffers are device pointers owned by Python (tut.DeviceBuffer); this chapter is only launches.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <stdint.h>

// ---- exercises: indexing ------------------------------------------------------------------

/* The thread's number in the whole grid, counting x fastest, then y, then z, block after block:
   the C (row-major) order of an array of shape (gridDim.z, gridDim.y, gridDim.x, blockDim.z,
   blockDim.y, blockDim.x), which is how driver.py builds its NumPy reference.
   64-bit: a grid may hold more than 2^31 threads. */
__device__ long long linear_thread_id(void)
{
    // TODO(student) 01.1: number this block within the grid, then this thread within the block, and combine them (~4 lines) [2 points]
    return 0;
}

// ---- kernels ------------------------------------------------------------------------------

/* Each thread writes its six ids at its own slot: out[6*id .. 6*id+5]. Python checks every
   slot against NumPy, so a wrong id shows as a collision or a slot never written. */
__global__ void record_ids_kernel(int *out)
{
    long long id = linear_thread_id();
    int *slot = out + 6 * id;
    slot[0] = threadIdx.x; slot[1] = threadIdx.y; slot[2] = threadIdx.z;
    slot[3] = blockIdx.x;  slot[4] = blockIdx.y;  slot[5] = blockIdx.z;
}

/* One element per thread. The grid is rounded up to whole blocks, so the last block has
   threads past the end of the arrays: without the guard they write someone else's memory.
   __restrict__ promises the compiler that the three arrays do not overlap (a and b may be the
   same array, since neither is written), so it may keep loads in registers and use the
   read-only data path. blockIdx.x * blockDim.x is computed in unsigned int: near n = INT_MAX
   it passes 2^31 and, stored in an int, turns negative, which `i < n` lets through. */
__global__ void vector_add_kernel(const float *__restrict__ a, const float *__restrict__ b,
                                  float *__restrict__ c, int n)
{
    // TODO(student) 01.2: compute this thread's element index i in 64 bits and, only if i < n, c[i] = a[i] + b[i] (~3 lines) [2 points]
}

/* Blocks of `block` threads needed to cover n elements (n >= 0, block >= 1). Mind n near
   INT_MAX: n + block - 1 no longer fits in an int. (The launches below use the project's
   TUT_DIV_UP, so that each exercise is tested on its own.) */
extern "C" int blocks_for(int n, int block)
{
    // TODO(student) 01.3: the ceiling of n / block, without overflowing an int (~1 line) [1 point]
    return 0;
}

/* out = in * row_scale[row] + col_shift[col] on a height x width row-major matrix, one thread
   per element, with a 2D grid: x runs along a row (columns), y down the rows. Consecutive
   threads of a warp differ in threadIdx.x, so x must map to the column for coalesced access. */
__global__ void matrix_scale_shift_kernel(const float *__restrict__ in,
                                          const float *__restrict__ row_scale,
                                          const float *__restrict__ col_shift,
                                          float *__restrict__ out, int height, int width)
{
    // TODO(student) 01.4: find this thread's row and col, guard both, and write out[row * width + col] (~5 lines) [2 points]
}

/* y = a*x + y with a grid-stride loop: the grid is as large as the GPU needs to be busy, not as
   large as the data, and each thread strides by the whole grid's width. Correct for any grid. */
__global__ void saxpy_grid_stride_kernel(float a, const float *__restrict__ x,
                                         float *__restrict__ y, int n)
{
    // TODO(student) 01.5: loop i from this thread's global index to n in steps of the grid's total thread count (~3 lines) [2 points]
}

/* The benchmark's fastest version: 16-byte float4 loads, grid-stride, then a scalar tail.
   A float4 access must be 16-byte aligned (a misaligned one faults with
   cudaErrorMisalignedAddress): cudaMalloc gives 256, but a caller may pass a + 1. Then every
   element goes through the scalar loop instead. */
__global__ void vector_add_float4_kernel(const float *__restrict__ a,
                                         const float *__restrict__ b, float *__restrict__ c,
                                         int n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    bool aligned = (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
    int n4 = aligned ? n / 4 : 0;
    const float4 *a4 = (const float4 *)a, *b4 = (const float4 *)b;
    float4 *c4 = (float4 *)c;
    for (size_t i = first; i < (size_t)n4; i += stride) {
        float4 x = a4[i], y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (size_t i = 4 * (size_t)n4 + first; i < (size_t)n; i += stride)
        c[i] = a[i] + b[i];
}

__global__ void vector_add_grid_stride_kernel(const float *__restrict__ a,
                                              const float *__restrict__ b,
                                              float *__restrict__ c, int n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride)
        c[i] = a[i] + b[i];
}

__global__ void empty_kernel(void) {}

// ---- host entry points (called from driver.py) ------------------------------------------

extern "C" int record_ids(int gx, int gy, int gz, int bx, int by, int bz, int *d_out)
{
    int status = 0;
    record_ids_kernel<<<dim3(gx, gy, gz), dim3(bx, by, bz)>>>(d_out);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* Any launch shape, on a kernel that does nothing: shows which shapes CUDA refuses. */
extern "C" int launch_empty(int gx, int gy, int gz, int bx, int by, int bz)
{
    int status = 0;
    empty_kernel<<<dim3(gx, gy, gz), dim3(bx, by, bz)>>>();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int vector_add(const float *d_a, const float *d_b, float *d_c, int n, int block)
{
    int status = 0;
    if (n == 0)
        return 0;   /* a grid of 0 blocks is a launch error, and there is nothing to do */
    vector_add_kernel<<<TUT_DIV_UP(n, block), block>>>(d_a, d_b, d_c, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int matrix_scale_shift(const float *d_in, const float *d_row_scale,
                                  const float *d_col_shift, float *d_out,
                                  int height, int width, int bx, int by)
{
    int status = 0;
    if (height == 0 || width == 0)
        return 0;
    matrix_scale_shift_kernel<<<dim3(TUT_DIV_UP(width, bx), TUT_DIV_UP(height, by)),
                                dim3(bx, by)>>>(d_in, d_row_scale, d_col_shift, d_out,
                                                height, width);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int saxpy_grid_stride(float a, const float *d_x, float *d_y, int n, int blocks,
                                 int block)
{
    int status = 0;
    if (n == 0)
        return 0;
    saxpy_grid_stride_kernel<<<blocks, block>>>(a, d_x, d_y, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* Times `reps` launches of one version, each between its own pair of events, after a warm-up.
   1 = one element per thread, 2 = grid-stride with 8 blocks of 256 per SM, 3 = float4 + stride. */
extern "C" int bench_vector_add(int version, const float *d_a, const float *d_b, float *d_c,
                                int n, int reps, float *times_ms)
{
    int status = 0;
    int block = 256, sms = 0, dev = 0, grid;
    tut_timer t = {0};

    /* the current device's SM count: the launches below go to it, which need not be device 0 */
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    grid = version == 1 ? TUT_DIV_UP(n, block) : 8 * sms;
    TUT_REQUIRE(version >= 1 && version <= 3);
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        if (version == 1)
            vector_add_kernel<<<grid, block>>>(d_a, d_b, d_c, n);
        else if (version == 2)
            vector_add_grid_stride_kernel<<<grid, block>>>(d_a, d_b, d_c, n);
        else
            vector_add_float4_kernel<<<grid, block>>>(d_a, d_b, d_c, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    tut_timer_free(&t);
    return status;
}
