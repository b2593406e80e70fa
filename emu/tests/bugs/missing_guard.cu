// SPDX-License-Identifier: MIT
/*
 * Planted bugs: a kernel without a bounds guard, launched with more threads than elements.
 *   1. n = 1536 (the allocation's end abuts a guard page): the first extra read faults at once.
 *   2. n = 1000 (not a multiple of 256 bytes): the extra writes land in the allocation's
 *      alignment slack, which the runtime poisons and verifies at the next synchronisation.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kLine = __LINE__ + 4;
__global__ void scale_kernel(const float *a, float *c, float f)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // BUG: no `if (i < n)`
    c[i] = f * a[i];
}

int main()
{
    EMU_ONLY();
    float *d_a = nullptr, *d_c = nullptr;
    int n = 1536;
    [[maybe_unused]] const int alloc_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&d_a, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_c, n * sizeof(float)));
    CUDA_OK(cudaMemset(d_a, 0, n * sizeof(float)));
    scale_kernel<<<(n + 1023) / 1024, 1024>>>(d_a, d_c, 2.0f);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("out-of-bounds read of global memory in kernel scale_kernel",
                "block (1,0,0), thread (512,0,0)", here(__FILE__, kLine),
                "0 bytes past the end of a 6144-byte allocation made at",
                here(__FILE__, alloc_line));
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    n = 1000;
    [[maybe_unused]] const int alloc_line2 = __LINE__ + 2;
    CUDA_OK(cudaMalloc(&d_a, 4096));
    CUDA_OK(cudaMalloc(&d_c, n * sizeof(float)));
    CUDA_OK(cudaMemset(d_a, 0, 4096));
    scale_kernel<<<(n + 255) / 256, 256>>>(d_a, d_c, 2.0f);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("write past the end of the allocation made at", here(__FILE__, alloc_line2));
#endif
    cudaDeviceReset();
    return emu_test_result("missing_guard");
}
