// SPDX-License-Identifier: MIT
/*
 * Planted bug: a host (malloc) pointer passed to a kernel. The emulator refuses the launch,
 * names the argument, and the next synchronisation returns cudaErrorIllegalAddress, which is
 * what a GPU returns after the kernel faults on its first access.
 */
#include "../core/emu_test.h"

__global__ void fill_kernel(float *out, int n, float v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = v;
}

int main()
{
    EMU_ONLY();
    const int n = 100;
    float *h = (float *)std::malloc(n * sizeof(float));
    float *d = nullptr;
    for (int i = 0; i < n; i++) h[i] = 1.0f;
    CUDA_OK(cudaMalloc(&d, n * sizeof(float)));
    fill_kernel<<<1, 128>>>(d + 10, n - 10, 3.0f);      // inside an allocation: fine
    CUDA_OK(cudaDeviceSynchronize());
    [[maybe_unused]] const int launch_line = __LINE__ + 1;
    fill_kernel<<<1, 128>>>(h, n, 5.0f);                // BUG: h is host memory
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    int untouched = 1;
    for (int i = 0; i < n; i++) untouched &= h[i] == 1.0f;
    EXPECT(untouched);                                  // the kernel did not run
#ifdef __CUEMU__
    EXPECT_DIAG("argument 0 of kernel fill_kernel", here(__FILE__, launch_line),
                "is a host pointer (not from cudaMalloc/cudaMallocManaged/cudaMallocHost/"
                "cudaHostRegister)");
#endif
    cudaDeviceReset();
    std::free(h);
    return emu_test_result("host_pointer");
}
