// SPDX-License-Identifier: MIT
/*
 * 10 hopper_memory, part three: bulk asynchronous copies (the Tensor Memory Accelerator, sm_90).
 *
 * Chapter 04 fed shared memory the classic way: every thread loads a value into a register and
 * stores it into the tile, then __syncthreads. A Hopper SM has a copy engine of its own, the
 * TMA: one thread names a block of global memory and a place in shared memory, the TMA moves
 * the bytes, and a cuda::barrier in shared memory counts them in. The threads issue no loads,
 * use no registers for the data, and wait on the barrier's phase instead of a __syncthreads.
 *
 * The kernel: a vertical box blur (one pass of a separable blur), out[r][c] = the mean of
 * in[r - R .. r + R][c], rows outside the image counted as 0. A block stages a tile of
 * TILE_ROWS x TILE_W floats (its 32 x 32 outputs and R rows above and below) and reads it
 * back along rows, so that only how the tile arrives differs between the three versions:
 *   0  plain loads (chapter 04's way), for any width;
 *   1  one cuda::memcpy_async per tile row, each a 1D bulk copy (10.7);
 *   2  the whole tile as one 2D box through a tensor map (10.8).
 * A bulk copy has two rules: both addresses 16-byte aligned and the size a multiple of 16
 * bytes (so here the width a multiple of 4 floats: versions 1 and 2 refuse any other), and the
 * barrier must expect exactly the bytes that arrive (`expect_tx`): with more, its phase never
 * ends; with fewer, it may end before the data is there.
 *
 * Exercises: 10.7, 10.8 (grep -n "TODO(student)" *.cu). On the emulator both run (the copies
 * land when the barrier's phase ends, a read before the wait sees shared memory's poison); on
 * a GPU they need compute capability 9.0, and the tests skip elsewhere, saying so.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <cuda/barrier>
#include <cudaTypedefs.h>   /* PFN_cuTensorMapEncodeTiled: the driver's encoder, found at run time */
#include <stdint.h>
#include <utility>

#define BLUR_R 4                          /* rows above and below each output */
#define TILE_W 32                         /* columns per tile: 128 bytes, a multiple of 16 */
#define TILE_H 32                         /* output rows per tile */
#define TILE_ROWS (TILE_H + 2 * BLUR_R)   /* rows staged per tile */
#define BLOCK_Y 8                         /* a block is TILE_W x BLOCK_Y threads */

/* The chapter's own errors (tut.LibraryError in Python): a rule of the bulk copies broken. */
#define BULK_ERR_RULES (TUT_ERR_LIBRARY - 1)
#define BULK_ERR_DRIVER (TUT_ERR_LIBRARY - 2)

typedef cuda::barrier<cuda::thread_scope_block> block_barrier;
/* A barrier in shared memory is set up by init() in the kernel, not by a constructor (shared
   memory has none); nvcc would warn that its default constructor does not run. */
#pragma nv_diag_suppress static_var_with_dynamic_init

/* Bulk copies exist from sm_90 on; compiled for an older GPU (make ARCH=sm_80), the two bulk
   kernels are empty there and never launched: bulk_supported() answers 0 and the tests skip. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define HAS_BULK 1
#else
#define HAS_BULK 0
#endif

// ---- kernels -----------------------------------------------------------------------------------

/* What every version does once the tile is in: row t of the tile is image row
   row0 - BLUR_R + t, so output row row0 + j sums tile rows j .. j + 2R. A warp reads 32
   consecutive floats of one tile row: 32 banks, no conflict. */
__device__ __forceinline__ void blur_from_tile(const float *tile, float *out, int height,
                                               int width, int row0, int col0)
{
    int c = col0 + threadIdx.x;
    if (c >= width)
        return;   /* the last tile's columns past the image: never written, never read */
    for (int j = threadIdx.y; j < TILE_H && row0 + j < height; j += BLOCK_Y) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k <= 2 * BLUR_R; k++)
            s += tile[(j + k) * TILE_W + threadIdx.x];
        out[(size_t)(row0 + j) * width + c] = s * (1.0f / (2 * BLUR_R + 1));
    }
}

/* Version 0: every thread loads and stores its share of the tile, zeros outside the image. */
__global__ void blur_loads_kernel(const float *in, float *out, int height, int width)
{
    __shared__ __align__(128) float tile[TILE_ROWS * TILE_W];
    const int row0 = blockIdx.y * TILE_H, col0 = blockIdx.x * TILE_W, c = col0 + threadIdx.x;
    for (int t = threadIdx.y; t < TILE_ROWS; t += BLOCK_Y) {
        int r = row0 - BLUR_R + t;
        tile[t * TILE_W + threadIdx.x] =
            (r >= 0 && r < height && c < width) ? in[(size_t)r * width + c] : 0.0f;
    }
    __syncthreads();   /* the sums read values other threads loaded */
    blur_from_tile(tile, out, height, width, row0, col0);
}

/* Version 1 (10.7): tile row t arrives as one bulk copy of the image row's `cols` floats. */
__global__ void blur_bulk_kernel(const float *in, float *out, int height, int width)
{
#if HAS_BULK
    __shared__ __align__(128) float tile[TILE_ROWS * TILE_W];
    __shared__ block_barrier bar;
    const int t = threadIdx.y * TILE_W + threadIdx.x;
    const int row0 = blockIdx.y * TILE_H, col0 = blockIdx.x * TILE_W;
    const int cols = min(TILE_W, width - col0);   /* a multiple of 4: the launcher checked */
    if (t == 0) {
        /* every thread of the block arrives once per phase */
        init(&bar, TILE_W * BLOCK_Y);
        /* the TMA (the "async proxy") sees the initialised barrier only after this fence */
        cuda::device::experimental::fence_proxy_async_shared_cta();
    }
    __syncthreads();   /* nobody arrives on a barrier before it is initialised */
    // TODO(student) 10.7: threads t < TILE_ROWS each bring tile row t: image row row0 - BLUR_R + t, `cols` floats from column col0, by cuda::memcpy_async(dst, src, cuda::aligned_size_t<16>(bytes), bar), or zeros for a row outside the image; then every thread arrives and waits for the phase to end (~12 lines)
    blur_from_tile(tile, out, height, width, row0, col0);
#endif
}

/* Version 2 (10.8): the whole tile as one box of a 2D tensor map. The map lives in the kernel's
   parameters (__grid_constant__: the TMA reads it there, no copy to global memory). Rows and
   columns of the box outside the image arrive as zeros: the TMA fills them. */
__global__ void blur_tma_kernel(const __grid_constant__ CUtensorMap map, float *out, int height,
                                int width)
{
#if HAS_BULK
    __shared__ __align__(128) float tile[TILE_ROWS * TILE_W];   /* a TMA box needs 128-byte aligned */
    __shared__ block_barrier bar;
    const int t = threadIdx.y * TILE_W + threadIdx.x;
    const int row0 = blockIdx.y * TILE_H, col0 = blockIdx.x * TILE_W;
    if (t == 0) {
        init(&bar, TILE_W * BLOCK_Y);
        cuda::device::experimental::fence_proxy_async_shared_cta();
    }
    __syncthreads();
    block_barrier::arrival_token token;
    // TODO(student) 10.8: thread 0 asks the TMA for the box at (column col0, row row0 - BLUR_R) (cp_async_bulk_tensor_2d_global_to_shared) and arrives saying how many bytes to expect (cuda::device::barrier_arrive_tx: the whole box, zero-filled parts included); every other thread just arrives; all wait (~7 lines)
    token = bar.arrive();
    bar.wait(std::move(token));
    blur_from_tile(tile, out, height, width, row0, col0);
#endif
}

// ---- host --------------------------------------------------------------------------------------

/* Whether this device has the TMA (compute capability 9.0 and later). */
extern "C" int bulk_supported(int *yes)
{
    int status = 0, dev = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    *yes = major >= 9;
cleanup:
    return status;
}

/* The two rules of a bulk copy, as this kernel meets them: each tile row starts at
   in + r * width + col0 floats, and its size is `cols` floats. */
static int bulk_rules(const float *d_in, int width)
{
    int status = 0;
    if ((uintptr_t)d_in % 16 != 0 || width % 4 != 0) {
        status = tut_record_error(BULK_ERR_RULES, "BULK_COPY_RULES", __FILE__, __LINE__,
                                  "a bulk copy needs 16-byte aligned addresses and a size that "
                                  "is a multiple of 16 bytes: the image (at %p) must be 16-byte "
                                  "aligned and its width (%d floats) a multiple of 4; version 0 "
                                  "(plain loads) takes any width", (const void *)d_in, width);
    }
    return status;
}

/* Fills *map with a 2D tensor map over the height x width floats at d_in, whose box is one
   tile (TILE_W x TILE_ROWS). The encoder is a driver function: the runtime hands its address
   out, so the library needs no -lcuda. */
static int encode_tile_map(CUtensorMap *map, const float *d_in, int height, int width)
{
    int status = 0;
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    CUresult r = CUDA_SUCCESS;
    // TODO(student) 10.8: find cuTensorMapEncodeTiled (cudaGetDriverEntryPointByVersion, CUDA 12.0's version of it: 12000), then describe the image to it: sizes and box innermost first, the row stride in bytes, float32, no interleave, no swizzle (~14 lines)
    TUT_TODO();
    if (r != CUDA_SUCCESS)
        status = tut_record_error(BULK_ERR_DRIVER, "TENSOR_MAP_REFUSED", __FILE__, __LINE__,
                                  "cuTensorMapEncodeTiled refused the map: CUresult %d", (int)r);
cleanup:
    return status;
}

/* out = the vertical box blur of in (height x width floats, both on the device) by version
   `how` (0 loads, 1 bulk copies per row, 2 a tensor map). Queued on s, not synchronised. */
extern "C" int blur(int how, const float *d_in, float *d_out, int height, int width,
                    cudaStream_t s)
{
    int status = 0;
    CUtensorMap map;
    dim3 block(TILE_W, BLOCK_Y);
    dim3 grid((unsigned)TUT_DIV_UP(width, TILE_W), (unsigned)TUT_DIV_UP(height, TILE_H));
    TUT_REQUIRE(how >= 0 && how <= 2 && height > 0 && width > 0);
    TUT_REQUIRE(grid.y <= 65535);
    if (how == 0) {
        blur_loads_kernel<<<grid, block, 0, s>>>(d_in, d_out, height, width);
    } else {
        status = bulk_rules(d_in, width);
        if (status != 0)
            goto cleanup;
        if (how == 1) {
            blur_bulk_kernel<<<grid, block, 0, s>>>(d_in, d_out, height, width);
        } else {
            status = encode_tile_map(&map, d_in, height, width);
            if (status != 0)
                goto cleanup;
            blur_tma_kernel<<<grid, block, 0, s>>>(map, d_out, height, width);
        }
    }
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* A height x width image of values from a hash of the index: the bench's input, made on the
   device. */
__global__ void blur_fill_kernel(float *x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = (float)((i * 2654435761u) >> 20 & 1023) * (1.0f / 1024);
}

/* `reps` timed blurs of a height x width image by version `how` (after one warm-up). */
extern "C" int bench_blur(int how, int height, int width, int reps, float *times_ms)
{
    int status = 0;
    float *d_in = NULL, *d_out = NULL;
    size_t n = (size_t)height * width;
    cudaStream_t s = NULL;
    tut_timer t = {};
    TUT_REQUIRE(height > 0 && width > 0 && reps >= 0);
    CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(tut_timer_init(&t));
    blur_fill_kernel<<<1024, 256, 0, s>>>(d_in, n);
    CUDA_CHECK_LAUNCH();
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, s));
        status = blur(how, d_in, d_out, height, width, s);
        if (status != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (s != NULL) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    tut_timer_free(&t);
    cudaFree(d_in);
    cudaFree(d_out);
    return status;
}
