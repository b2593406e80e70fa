// SPDX-License-Identifier: MIT
/*
 * Planted bugs: reading shared memory nobody wrote.
 *   1. a tile loaded by only half of the threads but read by all;
 *   2. block 1 reading what block 0 wrote (shared memory is per block: it is not there).
 * The emulator fills shared memory with 0xFF bytes before every block, so these reads give
 * NaN (float) or -1 (int), a visibly wrong answer, where a GPU often returns stale values
 * that look right.
 */
#include "../core/emu_test.h"
#include <cmath>

__global__ void half_loaded_kernel(const float *in, float *out)
{
    __shared__ float tile[256];
    int t = threadIdx.x;
    if (t < 128) tile[t] = in[t];                   // BUG: the upper half is never loaded
    __syncthreads();
    out[t] = tile[255 - t];
}

__global__ void cross_block_kernel(int *out)
{
    __shared__ int box;
    if (blockIdx.x == 0 && threadIdx.x == 0) box = 42;   // BUG: only block 0 writes it
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = box;
}

int main()
{
    EMU_ONLY();
    float h_in[256], h_out[256], *d_in = nullptr, *d_out = nullptr;
    int h_box[2], *d_box = nullptr;
    for (int i = 0; i < 256; i++) h_in[i] = (float)i;
    CUDA_OK(cudaMalloc(&d_in, sizeof h_in));
    CUDA_OK(cudaMalloc(&d_out, sizeof h_out));
    CUDA_OK(cudaMalloc(&d_box, sizeof h_box));
    CUDA_OK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));
    half_loaded_kernel<<<1, 256>>>(d_in, d_out);
    CUDA_OK(cudaMemcpy(h_out, d_out, sizeof h_out, cudaMemcpyDeviceToHost));
    int nans = 0;
    for (int t = 0; t < 128; t++) nans += std::isnan(h_out[t]);
    for (int t = 128; t < 256; t++) EXPECT(h_out[t] == h_in[255 - t]);
    EXPECT_EQ_INT(nans, 128);
    if (nans == 128) std::printf("caught: 128 reads of uninitialised shared memory gave NaN\n");

    cross_block_kernel<<<2, 32>>>(d_box);
    CUDA_OK(cudaMemcpy(h_box, d_box, sizeof h_box, cudaMemcpyDeviceToHost));
    EXPECT_EQ_INT(h_box[0], 42);
    EXPECT_EQ_INT(h_box[1], -1);
    if (h_box[1] == -1) std::printf("caught: block 1 read poison (-1), not block 0's 42\n");
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_box);
    return emu_test_result("uninit_shared");
}
