// SPDX-License-Identifier: MIT
/*
 * Planted bug: off-by-one bounds guard (`i <= n`). With n = 1024 floats the allocation ends
 * exactly at a guard page, so the one extra write faults at once and the emulator names the
 * kernel, block, thread, the kernel's line and the cudaMalloc line. A GPU usually hides it.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kWriteLine = __LINE__ + 5;
__global__ void off_by_one_kernel(float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)                                    // BUG: must be i < n
        c[i] = 2.0f * (float)i;
}

int main()
{
    EMU_ONLY();
    const int n = 1024;
    float *d_c = nullptr;
    [[maybe_unused]] const int alloc_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&d_c, n * sizeof(float)));
    // the grid is sized for n + 1 elements, as the buggy guard invites
    off_by_one_kernel<<<(n + 1 + 255) / 256, 256>>>(d_c, n);
    // the launch is queued, as on a GPU: the fault shows at the synchronisation
    EXPECT_EQ_INT(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("out-of-bounds write of global memory in kernel off_by_one_kernel",
                "block (4,0,0), thread (0,0,0)", here(__FILE__, kWriteLine),
                "0 bytes past the end of a 4096-byte allocation made at",
                here(__FILE__, alloc_line));
#endif
    cudaDeviceReset();
    return emu_test_result("off_by_one");
}
