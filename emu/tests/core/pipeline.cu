// SPDX-License-Identifier: MIT
/*
 * Asynchronous global-to-shared copies (cuda_pipeline_primitives.h): a double-buffered sum
 * whose tiles arrive by __pipeline_memcpy_async, 16-byte copies and zero-filled 4-byte ones at
 * the ragged end, batches waited for with __pipeline_wait_prior. On the emulator a copy lands
 * only at the wait that covers it, so a kernel that reads before waiting reads the poison
 * shared memory starts with: that case is checked on the emulator only (a GPU may land it
 * early, by luck).
 */
#include <cuda_pipeline_primitives.h>

#include "emu_test.h"

#define TILE 128   /* floats per tile: 32 threads, one 16-byte copy each */

/* out[block] = sum of in[block * per_block .. + per_block), by tiles double-buffered. */
__global__ void tiled_sum_kernel(const float *in, int n, int per_block, float *out)
{
    __shared__ __align__(16) float buf[2][TILE];
    int base = blockIdx.x * per_block, end = min(base + per_block, n);
    int ntiles = (end - base + TILE - 1) / TILE;
    auto load = [&](int stage, int t) {
        int first = base + t * TILE + threadIdx.x * 4;
        for (int j = 0; j < 4; j++) {   /* 4-byte copies, zero-filled past the end */
            bool in_range = first + j < end;
            __pipeline_memcpy_async(&buf[stage][threadIdx.x * 4 + j],
                                    in_range ? &in[first + j] : in, 4, in_range ? 0 : 4);
        }
    };
    auto load16 = [&](int stage, int t) {
        int first = base + t * TILE + threadIdx.x * 4;
        if (first + 4 <= end && first % 4 == 0)
            __pipeline_memcpy_async(&buf[stage][threadIdx.x * 4], &in[first], 16);
        else
            load(stage, t);
    };
    float acc = 0.0f;
    load16(0, 0);
    __pipeline_commit();
    for (int t = 0; t < ntiles; t++) {
        if (t + 1 < ntiles)
            load16((t + 1) & 1, t + 1);
        __pipeline_commit();
        __pipeline_wait_prior(1);   /* tile t has landed (this thread's copies) */
        __syncthreads();            /* ... and everyone's */
        if (threadIdx.x == 0)
            for (int i = 0; i < TILE; i++)
                acc += buf[t & 1][i];
        __syncthreads();            /* before tile t + 2 overwrites this buffer */
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = acc;
}

/* The planted bug: the copy is committed and the block synchronised, but nobody waited. */
__global__ void no_wait_kernel(const float *in, float *out)
{
    __shared__ __align__(16) float tile[4];
    if (threadIdx.x == 0) {
        __pipeline_memcpy_async(tile, in, 16);
        __pipeline_commit();
    }
    __syncthreads();
    out[threadIdx.x] = tile[threadIdx.x];
}

/* zfill: of an 8-byte copy with zfill 4, the first 4 bytes are copied, the last 4 are 0. */
__global__ void zfill_kernel(const float *in, float *out)
{
    __shared__ __align__(8) float pair[2];
    __pipeline_memcpy_async(pair, in, 8, 4);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    out[0] = pair[0];
    out[1] = pair[1];
}

int main()
{
    const int n = 1000, per_block = 300, blocks = (n + per_block - 1) / per_block;
    float h_in[n], h_out[8];
    double want[8] = {0};
    for (int i = 0; i < n; i++) {
        h_in[i] = (float)(i % 17) - 8.0f;
        want[i / per_block] += h_in[i];
    }
    float *d_in, *d_out;
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_out, 8 * sizeof(float)));
    CUDA_OK(cudaMemcpy(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice));

    tiled_sum_kernel<<<blocks, 32>>>(d_in, n, per_block, d_out);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h_out, d_out, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        EXPECT_EQ_INT(h_out[b], want[b]);   /* small integers: exact */

    zfill_kernel<<<1, 1>>>(d_in + 2, d_out);   /* 8-byte aligned, as the copy needs */
    CUDA_OK(cudaMemcpy(h_out, d_out, 2 * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT(h_out[0] == h_in[2] && h_out[1] == 0.0f);

#ifdef __CUEMU__
    no_wait_kernel<<<1, 4>>>(d_in, d_out);
    CUDA_OK(cudaMemcpy(h_out, d_out, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++)
        EXPECT(h_out[i] != h_in[i]);   /* the poison, not the data: the copy never landed */
#endif
    CUDA_OK(cudaFree(d_in));
    CUDA_OK(cudaFree(d_out));
    return emu_test_result("pipeline");
}
