// SPDX-License-Identifier: MIT
/*
 * 04 shared_memory, part 2: a sum reduction (threads of a block combine their values through
 * shared memory, then warp shuffles) and a matrix transpose (a tile in shared memory turns
 * strided writes into coalesced ones, and one padding float removes the bank conflicts).
 *
 * Build: make                 Run: make run CH=04 ARGS=--bench
 * Check: make check           Exercises: 04.3 .. 04.5 (04.1 and 04.2 are in shared_memory.cu)
 * Reduction versions: 1 = one atomicAdd per element, 2 = shared-memory tree, 3 = warp shuffles
 * (0, in the benchmark only: the same reads with nothing combined, the ceiling).
 * Transpose versions: 1 = naive, 2 = 32x32 tile, 3 = tile with a padded row, 4 = a 64x64 padded
 * tile, 16 elements a thread (0 = plain copy).
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <stdint.h>

// ---- reduction ------------------------------------------------------------------------------

/* This thread's share of x[0..n): a grid-stride loop over float4s with four 16-byte loads in
   flight per iteration (a memory-bound kernel is fast when many bytes are on their way at
   once), then the last n % 4 floats. x must be 16-byte aligned, as cudaMalloc's memory is. */
__device__ float thread_sum(const float *x, int n)
{
    const float4 *x4 = (const float4 *)x;
    size_t n4 = (size_t)n / 4, stride = (size_t)gridDim.x * blockDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, i = first;
    float s = 0.0f;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = x4[i], b = x4[i + stride], c = x4[i + 2 * stride], d = x4[i + 3 * stride];
        s += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w))
           + ((c.x + c.y) + (c.z + c.w)) + ((d.x + d.y) + (d.z + d.w));
    }
    for (; i < n4; i += stride) {
        float4 a = x4[i];
        s += (a.x + a.y) + (a.z + a.w);
    }
    for (size_t j = 4 * n4 + first; j < (size_t)n; j += stride)
        s += x[j];
    return s;
}

/* The reduction's ceiling: the same reads as thread_sum, and nothing combined. A reduction
   only reads, so a copy (which reads and writes) is the wrong yardstick. The store never
   happens (no sum of the data is that value), but the compiler cannot know, so it keeps the
   loads. */
__global__ void read_only_kernel(const float *x, int n, float *never)
{
    float s = thread_sum(x, n);
    if (s == -1.0e-30f)
        *never = s;
}

/* Version 1: every element is an atomicAdd on the same float. Atomics on one address are
   serialised in the L2 cache: correct, and as slow as a queue of n customers at one till. */
__global__ void reduce_atomic_kernel(const float *x, int n, float *out)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride)
        atomicAdd(out, x[i]);
}

/* Version 2: each thread sums its share into a register, the block combines its blockDim.x
   partial sums in shared memory as a tree (log2(blockDim.x) steps), and only thread 0 does an
   atomicAdd: one per block. blockDim.x is a power of two. The array is DYNAMIC shared memory:
   its size, blockDim.x * sizeof(float), is the launch's third argument. */
__global__ void reduce_tree_kernel(const float *x, int n, float *out)
{
    extern __shared__ float partial[];
    unsigned t = threadIdx.x;
    partial[t] = thread_sum(x, n);
    __syncthreads();
    // TODO(student) 04.3: for s = blockDim.x / 2, then half of that, down to 1: threads t < s add partial[t + s] into partial[t]; a barrier after every step (~4 lines)
    if (t == 0)
        atomicAdd(out, partial[0]);
}

/* The 32 threads of a warp add their values without shared memory or __syncthreads: each
   __shfl_down_sync(mask, v, d) returns v of the lane d above (0xffffffff: all 32 lanes take
   part, and all must call it). After offsets 16, 8, 4, 2, 1, lane 0 holds the warp's total. */
__device__ float warp_sum(float v)
{
    // TODO(student) 04.4: five steps: for offset = 16, 8, 4, 2, 1, add the value of the lane `offset` above (__shfl_down_sync with mask 0xffffffff) (~2 lines)
    return v;
}

/* Version 3: each warp reduces its 32 values with shuffles; lane 0 of each warp leaves the
   warp's total in shared memory (one float per warp, 32 at most); after one barrier the first
   warp reduces those with shuffles again. blockDim.x is a multiple of 32. */
__global__ void reduce_warp_kernel(const float *x, int n, float *out)
{
    __shared__ float warp_totals[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(thread_sum(x, n));
    if (lane == 0)
        warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < (int)blockDim.x / 32 ? warp_totals[lane] : 0.0f);
        if (lane == 0)
            atomicAdd(out, v);
    }
}

// ---- transpose ------------------------------------------------------------------------------

/* A block of 32x8 threads moves one 32x32 tile; each thread moves 4 elements, 8 rows apart. */
#define TILE_DIM 32
#define TILE_ROWS 8

/* Shared memory is 32 banks, each 4 bytes wide: float i of a shared array lives in bank
   i % 32. A warp's 32 reads go out at once if they hit 32 different banks (or the same word);
   two different words in one bank take two turns. Reading a COLUMN of a tile whose rows are
   32 floats apart, float (r * 32 + c) sits in bank c for every r: all 32 threads in one bank,
   a 32-way conflict, 32 turns. */
// TODO(student) 04.5: choose the distance, in floats, from one tile row to the next so that the 32 floats of a column fall in 32 different banks (~1 line)
#define TRANSPOSE_PITCH TILE_DIM

/* Plain copy with the same block shape: the bandwidth a transpose should approach. Like the
   tiled transposes below, each thread issues all 4 of its loads before its first store (they
   stage through shared memory, this one through registers): a copy that stored each value
   before loading the next would keep fewer loads in flight, and be an unfairly low ceiling. */
__global__ void copy_kernel(const float *in, float *out, int height, int width)
{
    int col = blockIdx.x * TILE_DIM + threadIdx.x;
    float v[TILE_DIM / TILE_ROWS];
#pragma unroll
    for (int j = 0; j < TILE_DIM / TILE_ROWS; j++) {
        int row = blockIdx.y * TILE_DIM + threadIdx.y + j * TILE_ROWS;
        v[j] = (row < height && col < width) ? in[row * width + col] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < TILE_DIM / TILE_ROWS; j++) {
        int row = blockIdx.y * TILE_DIM + threadIdx.y + j * TILE_ROWS;
        if (row < height && col < width)
            out[row * width + col] = v[j];
    }
}

/* out (width x height) = in (height x width) transposed. Reads are coalesced (a warp reads 32
   neighbours of one row); writes are not: a warp writes 32 floats `height` apart, 32 separate
   memory transactions. */
__global__ void transpose_naive_kernel(const float *in, float *out, int height, int width)
{
    int col = blockIdx.x * TILE_DIM + threadIdx.x;
    for (int j = 0; j < TILE_DIM; j += TILE_ROWS) {
        int row = blockIdx.y * TILE_DIM + threadIdx.y + j;
        if (row < height && col < width)
            out[col * height + row] = in[row * width + col];
    }
}

/* Through a tile: read a T x T tile by rows (coalesced), wait, write it out by rows of `out`
   (coalesced), which means reading the tile by COLUMNS: that is where the banks matter. The
   32 x 8 threads of a block cover the tile in T / 32 x T / 8 steps. */
template <int T>
__device__ __forceinline__ void transpose_via_tile(const float *in, float *out, int height,
                                                   int width, float *tile, int pitch)
{
#pragma unroll
    for (int cx = 0; cx < T; cx += TILE_DIM)
#pragma unroll
        for (int j = 0; j < T; j += TILE_ROWS) {
            int row = blockIdx.y * T + threadIdx.y + j;
            int col = blockIdx.x * T + cx + threadIdx.x;
            if (row < height && col < width)
                tile[(threadIdx.y + j) * pitch + cx + threadIdx.x] = in[row * width + col];
        }
    __syncthreads();   /* the writes below read elements other threads loaded */
    /* This block's tile goes to the mirrored place in out: out's row = in's column. */
#pragma unroll
    for (int cx = 0; cx < T; cx += TILE_DIM)
#pragma unroll
        for (int j = 0; j < T; j += TILE_ROWS) {
            int out_row = blockIdx.x * T + threadIdx.y + j;
            int out_col = blockIdx.y * T + cx + threadIdx.x;
            if (out_row < width && out_col < height)
                out[out_row * height + out_col] =
                    tile[(cx + threadIdx.x) * pitch + threadIdx.y + j];
        }
}

__global__ void transpose_tiled_kernel(const float *in, float *out, int height, int width)
{
    __shared__ float tile[TILE_DIM * TILE_DIM];
    transpose_via_tile<TILE_DIM>(in, out, height, width, tile, TILE_DIM);
}

__global__ void transpose_padded_kernel(const float *in, float *out, int height, int width)
{
    __shared__ float tile[TILE_DIM * TRANSPOSE_PITCH];
    transpose_via_tile<TILE_DIM>(in, out, height, width, tile, TRANSPOSE_PITCH);
}

/* Version 4: the padded tile, twice as wide and twice as tall, for the same 256 threads. Each
   thread now has 16 loads in flight before its barrier instead of 4, and a block's barrier
   and index arithmetic are paid once for 4096 elements instead of 1024. The padding is the
   one chosen for 04.5: a column of the 64-float rows is 32 consecutive rows at a time, and
   (r * (64 + pad) + c) % 32 = (r * pad + c) % 32 spreads them like a 32-float row. */
#define WIDE_TILE (2 * TILE_DIM)
#define WIDE_PITCH (WIDE_TILE + TRANSPOSE_PITCH - TILE_DIM)
__global__ void transpose_wide_kernel(const float *in, float *out, int height, int width)
{
    __shared__ float tile[WIDE_TILE * WIDE_PITCH];
    transpose_via_tile<WIDE_TILE>(in, out, height, width, tile, WIDE_PITCH);
}

// ---- host entry points (called from driver.py) ------------------------------------------

/* Enough blocks to fill every SM to its thread limit, fewer if n is small. */
static int reduce_blocks(int n, int block, int *blocks)
{
    int status = 0, sms = 0, per_sm = 0, dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));   /* the device the launch goes to, not always device 0 */
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
    *blocks = sms * (per_sm >= block ? per_sm / block : 1);
    if (*blocks > TUT_DIV_UP(n, block))
        *blocks = TUT_DIV_UP(n, block) > 0 ? TUT_DIV_UP(n, block) : 1;
cleanup:
    return status;
}

/* Queues *out = 0 and one reduction (no synchronisation); version 0: the read-only ceiling,
   which leaves *out alone. */
static int launch_reduce(int version, const float *d_x, int n, float *d_out, int blocks,
                         int block)
{
    int status = 0;
    if (version != 0)
        CUDA_CHECK(cudaMemsetAsync(d_out, 0, sizeof(float), 0));
    if (version == 0)
        read_only_kernel<<<blocks, block>>>(d_x, n, d_out);
    else if (version == 1)
        reduce_atomic_kernel<<<blocks, block>>>(d_x, n, d_out);
    else if (version == 2)
        reduce_tree_kernel<<<blocks, block, block * sizeof(float)>>>(d_x, n, d_out);
    else
        reduce_warp_kernel<<<blocks, block>>>(d_x, n, d_out);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* *d_out = sum of d_x[0..n). blocks = 0: as many as fill the GPU. */
extern "C" int reduce_sum(int version, const float *d_x, int n, float *d_out, int blocks,
                          int block)
{
    int status = 0;
    TUT_REQUIRE(version >= 1 && version <= 3 && n >= 0 && blocks >= 0);
    TUT_REQUIRE(version != 2 || (block > 0 && (block & (block - 1)) == 0));
    TUT_REQUIRE(version != 3 || (block % 32 == 0 && block <= 1024));
    TUT_REQUIRE(version == 1 || (uintptr_t)d_x % 16 == 0);
    if (n == 0) {
        CUDA_CHECK(cudaMemset(d_out, 0, sizeof(float)));
        return 0;
    }
    if (blocks == 0 && (status = reduce_blocks(n, block, &blocks)) != 0)
        goto cleanup;
    if ((status = launch_reduce(version, d_x, n, d_out, blocks, block)) != 0)
        goto cleanup;
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int bench_reduce(int version, const float *d_x, int n, float *d_out, int reps,
                            float *times_ms)
{
    int status = 0, block = 256, blocks = 0;
    tut_timer t = {0};
    TUT_REQUIRE(version >= 0 && version <= 3 && n > 0 && (uintptr_t)d_x % 16 == 0);
    if ((status = reduce_blocks(n, block, &blocks)) != 0)
        goto cleanup;
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        if ((status = launch_reduce(version, d_x, n, d_out, blocks, block)) != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

static int launch_transpose(int version, const float *d_in, float *d_out, int height, int width)
{
    int status = 0;
    int tile = version == 4 ? WIDE_TILE : TILE_DIM;
    dim3 grid(TUT_DIV_UP(width, tile), TUT_DIV_UP(height, tile));
    dim3 block(TILE_DIM, TILE_ROWS);
    if (version == 0)
        copy_kernel<<<grid, block>>>(d_in, d_out, height, width);
    else if (version == 1)
        transpose_naive_kernel<<<grid, block>>>(d_in, d_out, height, width);
    else if (version == 2)
        transpose_tiled_kernel<<<grid, block>>>(d_in, d_out, height, width);
    else if (version == 3)
        transpose_padded_kernel<<<grid, block>>>(d_in, d_out, height, width);
    else
        transpose_wide_kernel<<<grid, block>>>(d_in, d_out, height, width);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* d_out (width x height) = d_in (height x width) transposed; version 0 copies instead. */
extern "C" int transpose(int version, const float *d_in, float *d_out, int height, int width)
{
    int status = 0;
    TUT_REQUIRE(version >= 0 && version <= 4 && height >= 0 && width >= 0);
    if (height == 0 || width == 0)
        return 0;
    if ((status = launch_transpose(version, d_in, d_out, height, width)) != 0)
        goto cleanup;
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int bench_transpose(int version, const float *d_in, float *d_out, int height,
                               int width, int reps, float *times_ms)
{
    int status = 0;
    tut_timer t = {0};
    TUT_REQUIRE(version >= 0 && version <= 4 && height > 0 && width > 0);
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, 0));
        if ((status = launch_transpose(version, d_in, d_out, height, width)) != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

/* The padded tile's shape, for the test of 04.5: floats per row of the tile, the pitch in
   floats, and the static shared memory the compiler gave transpose_padded_kernel (0 where the
   backend cannot tell: the emulator). */
extern "C" int transpose_tile_layout(int *tile_dim, int *pitch, int *padded_shared_bytes)
{
    int status = 0;
    struct cudaFuncAttributes attr;
    *tile_dim = TILE_DIM;
    *pitch = TRANSPOSE_PITCH;
    CUDA_CHECK(cudaFuncGetAttributes(&attr, transpose_padded_kernel));
    *padded_shared_bytes = (int)attr.sharedSizeBytes;
cleanup:
    return status;
}
