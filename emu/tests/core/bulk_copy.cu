// SPDX-License-Identifier: MIT
/*
 * Bulk asynchronous copies (<cuda/barrier>, sm_90's TMA): 1D copies by cuda::memcpy_async,
 * by its group form and by memcpy_async_tx with barrier_arrive_tx, and a 2D tensor-map box
 * whose outside part arrives as zeros, each completed by a block-scope cuda::barrier. On the
 * emulator a copy lands when its barrier's phase ends, so a read without the wait reads the
 * poison; a phase that cannot end (more bytes expected than copied) is a reported deadlock; a
 * misaligned bulk copy is cudaErrorMisalignedAddress, one past the end of its destination
 * array or its source's allocation cudaErrorIllegalAddress; the encoder names the rule a map
 * breaks.
 */
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cudaTypedefs.h>
#include <utility>

#include "emu_test.h"

namespace cg = cooperative_groups;
typedef cuda::barrier<cuda::thread_scope_block> block_barrier;
#pragma nv_diag_suppress static_var_with_dynamic_init

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define HAS_BULK 1
#else
#define HAS_BULK 0
#endif

/* out[i] = 2 * in[i] for 64 floats per block, staged by `how`: 0 four memcpy_async by threads
   0..3, 1 one group memcpy_async, 2 memcpy_async_tx with barrier_arrive_tx; `wait` 0 (with how
   0) leaves out the arrival and the wait (a planted bug); `extra` bytes more expected than
   copied (another). */
__global__ void stage_kernel(const float *in, float *out, int how, int wait, int extra)
{
#if HAS_BULK
    __shared__ __align__(16) float tile[64];
    __shared__ block_barrier bar;
    const float *src = in + blockIdx.x * 64;
    if (threadIdx.x == 0)
        init(&bar, blockDim.x);
    __syncthreads();
    block_barrier::arrival_token token;
    if (how == 0) {
        if (threadIdx.x < 4)
            cuda::memcpy_async(tile + 16 * threadIdx.x, src + 16 * threadIdx.x,
                               cuda::aligned_size_t<16>(16 * sizeof(float)), bar);
        if (wait)
            token = bar.arrive();
    } else if (how == 1) {
        cuda::memcpy_async(cg::this_thread_block(), tile, src,
                           cuda::aligned_size_t<16>(sizeof tile), bar);
        token = bar.arrive();
    } else if (threadIdx.x == 0) {
        cuda::device::memcpy_async_tx(tile, src, cuda::aligned_size_t<16>(sizeof tile), bar);
        token = cuda::device::barrier_arrive_tx(bar, 1, sizeof tile + extra);
    } else {
        token = bar.arrive();
    }
    if (wait)
        bar.wait(std::move(token));
    else
        __syncthreads();   /* nobody arrived: the phase, and its copies, are still pending */
    for (int i = threadIdx.x; i < 64; i += blockDim.x)
        out[blockIdx.x * 64 + i] = 2.0f * tile[i];
#endif
}

/* A 4 x 4 box of a tensor map at (c0, c1), copied out as it arrived. */
__global__ void box_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, float *out)
{
#if HAS_BULK
    __shared__ __align__(128) float box[16];
    __shared__ block_barrier bar;
    if (threadIdx.x == 0)
        init(&bar, blockDim.x);
    __syncthreads();
    block_barrier::arrival_token token;
    if (threadIdx.x == 0) {
        cuda::device::experimental::cp_async_bulk_tensor_2d_global_to_shared(box, &map, c0, c1,
                                                                             bar);
        token = cuda::device::barrier_arrive_tx(bar, 1, sizeof box);
    } else {
        token = bar.arrive();
    }
    bar.wait(std::move(token));
    out[threadIdx.x] = box[threadIdx.x];
#endif
}

/* out[t] = the sum of in[p * 32 + t] over `phases` phases of one barrier, each chunk by a bulk
   copy into one of two buffers: a thread reaches the next phase's wait while others are still
   leaving the last one's. */
__global__ void phases_kernel(const float *in, int phases, float *out)
{
#if HAS_BULK
    __shared__ __align__(16) float buf[2][32];
    __shared__ block_barrier bar;
    if (threadIdx.x == 0)
        init(&bar, blockDim.x);
    __syncthreads();
    float acc = 0.0f;
    for (int p = 0; p < phases; p++) {
        if (threadIdx.x == 0)   /* buf[p & 1] was last read in phase p - 2: everyone is past it */
            cuda::memcpy_async(buf[p & 1], in + 32 * p, cuda::aligned_size_t<16>(sizeof buf[0]),
                               bar);
        bar.arrive_and_wait();
        acc += buf[p & 1][threadIdx.x];
    }
    out[threadIdx.x] = acc;
#endif
}

/* The planted bug: a copy 16 bytes longer than its destination array. */
__global__ void overflow_kernel(const float *in, float *out)
{
#if HAS_BULK
    __shared__ __align__(16) float tile[16];
    __shared__ block_barrier bar;
    if (threadIdx.x == 0)
        init(&bar, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0)
        cuda::memcpy_async(tile, in, cuda::aligned_size_t<16>(sizeof tile + 16), bar);
    bar.arrive_and_wait();
    out[threadIdx.x] = tile[threadIdx.x];
#endif
}

static PFN_cuTensorMapEncodeTiled_v12000 encoder()
{
    void *fn = NULL;
    cudaDriverEntryPointQueryResult found;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                             cudaEnableDefault, &found));
    EXPECT(found == cudaDriverEntryPointSuccess && fn != NULL);
    return (PFN_cuTensorMapEncodeTiled_v12000)fn;
}

/* A map over a 5 x 8 float matrix (rows 32 bytes apart), box 4 x 4 (box_w floats wide). */
static CUresult encode(CUtensorMap *map, float *d, unsigned box_w)
{
    cuuint64_t dims[2] = {8, 5}, strides[1] = {8 * sizeof(float)};
    cuuint32_t box[2] = {box_w, 4}, step[2] = {1, 1};
    return encoder()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, d, dims, strides, box, step,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                     CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

int main()
{
    int major = 0;
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    if (major < 9)
        return (std::printf("bulk copies need compute capability 9.0: skipped\n"), 77);
    const int blocks = 3, n = 64 * blocks;
    float h_in[n], h_out[n];
    for (int i = 0; i < n; i++)
        h_in[i] = (float)(i % 29) - 7.0f;
    float *d_in, *d_out;
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    CUDA_OK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));

    for (int how = 0; how < 3; how++) {
        CUDA_OK(cudaMemset(d_out, 0, sizeof h_out));
        stage_kernel<<<blocks, 32>>>(d_in, d_out, how, 1, 0);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h_out, d_out, sizeof h_out, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            EXPECT_EQ_INT(h_out[i], 2 * h_in[i]);
    }

    phases_kernel<<<1, 32>>>(d_in, 5, d_out);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h_out, d_out, 32 * sizeof(float), cudaMemcpyDeviceToHost));
    for (int t = 0; t < 32; t++) {
        float want = 0.0f;
        for (int p = 0; p < 5; p++)
            want += h_in[32 * p + t];
        EXPECT_EQ_INT(h_out[t], want);
    }

    /* the box at (6, 3): columns 6..9 and rows 3..6 of a 5 x 8 matrix; 8, 9 and 5, 6 outside */
    CUtensorMap map;
    EXPECT(encode(&map, d_in, 4) == CUDA_SUCCESS);
    box_kernel<<<1, 16>>>(map, 6, 3, d_out);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h_out, d_out, 16 * sizeof(float), cudaMemcpyDeviceToHost));
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) {
            int r = 3 + y, c = 6 + x;
            EXPECT_EQ_INT(h_out[y * 4 + x], (r < 5 && c < 8) ? h_in[r * 8 + c] : 0.0f);
        }

#ifdef __CUEMU__
    /* the inner box dimension must be a multiple of 16 bytes: 3 floats are 12 */
    cuemuClearDiagnostic();
    EXPECT(encode(&map, d_in, 3) == CUDA_ERROR_INVALID_VALUE);
    EXPECT_DIAG("boxDim[0] * element size = 12 bytes: must be a multiple of 16");

    /* no wait: the poison, not the data */
    stage_kernel<<<1, 32>>>(d_in, d_out, 0, 0, 0);
    CUDA_OK(cudaMemcpy(h_out, d_out, 64 * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++)
        EXPECT(!(h_out[i] == 2 * h_in[i]));

    /* 16 bytes more expected than copied: every thread waits for them */
    cuemuClearDiagnostic();
    stage_kernel<<<1, 32>>>(d_in, d_out, 2, 1, 16);
    EXPECT(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    EXPECT_DIAG("deadlock: every thread of the block waits on a cuda::barrier",
                "0 arrival(s) and 16 byte(s) of expected transactions missing");
    CUDA_OK(cudaDeviceReset());

    /* a copy past the end of its destination array */
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    cuemuClearDiagnostic();
    overflow_kernel<<<1, 16>>>(d_in, d_out);
    EXPECT(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
    EXPECT_DIAG("cuda::memcpy_async: the copy's 80 bytes at byte 0 of __shared__ 'tile' run 16 "
                "bytes past its end (64 bytes)");
    CUDA_OK(cudaDeviceReset());

    /* a bulk copy whose source runs 48 floats past the end of its allocation: read as the
       kernel's own loads are, the first load past the end stops the launch */
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    cuemuClearDiagnostic();
    stage_kernel<<<1, 32>>>(d_in + n - 16, d_out, 2, 1, 0);
    EXPECT(cudaDeviceSynchronize() == cudaErrorIllegalAddress);
    EXPECT_DIAG("out-of-bounds read of global memory in kernel stage_kernel");
    CUDA_OK(cudaDeviceReset());

    /* a bulk copy from 4 bytes past a 16-byte boundary */
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    cuemuClearDiagnostic();
    stage_kernel<<<1, 32>>>(d_in + 1, d_out, 2, 1, 0);
    EXPECT(cudaDeviceSynchronize() == cudaErrorMisalignedAddress);
    EXPECT_DIAG("memcpy_async_tx: a bulk copy needs 16-byte aligned addresses");
    CUDA_OK(cudaDeviceReset());
#else
    CUDA_OK(cudaFree(d_in));
    CUDA_OK(cudaFree(d_out));
#endif
    return emu_test_result("bulk_copy");
}
