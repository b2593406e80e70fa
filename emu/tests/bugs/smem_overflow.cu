// SPDX-License-Identifier: MIT
/*
 * Planted bugs: dynamic shared memory smaller than the kernel uses.
 *   1. 128 floats given at launch, 256 threads write one each: the write of byte 512 faults
 *      (the area ends at a guard page) and the report names `extern __shared__ tile`;
 *   2. 130 bytes given (not a multiple of 16): the overflow lands in the slack before the guard
 *      page, whose canary is checked after the block.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kLine = __LINE__ + 5;
__global__ void fill_tile_kernel(float *out)
{
    extern __shared__ float tile[];
    int t = threadIdx.x;
    tile[t] = (float)t;                             // BUG: only 128 floats were given
    __syncthreads();
    out[t] = tile[t];
}

__global__ void bytes_kernel(unsigned char *out, int n)
{
    extern __shared__ __align__(16) unsigned char buf[];
    int t = threadIdx.x;
    if (t < n) buf[t] = (unsigned char)t;           // BUG: n = 136 > 130 bytes given
    __syncthreads();
    if (t < n) out[t] = buf[t];
}

int main()
{
    EMU_ONLY();
    float *d = nullptr;
    unsigned char *b = nullptr;
    CUDA_OK(cudaMalloc(&d, 256 * sizeof(float)));
    CUDA_OK(cudaMalloc(&b, 256));
    fill_tile_kernel<<<1, 256, 128 * sizeof(float)>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("dynamic shared memory overflow in kernel fill_tile_kernel",
                "thread (128,0,0)", here(__FILE__, kLine),
                "write of byte 512 of extern __shared__ 'tile', which has 512 bytes");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&b, 256));
    bytes_kernel<<<1, 256, 130>>>(b, 136);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("dynamic shared memory overflow in kernel bytes_kernel",
                "past the end of extern __shared__ 'buf' (130 bytes given at launch");
#endif
    cudaDeviceReset();
    return emu_test_result("smem_overflow");
}
