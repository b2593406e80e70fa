// SPDX-License-Identifier: MIT
/*
 * Planted bugs: __syncthreads that not every thread of the block reaches.
 *   1. early return before the barrier (threads past n exit, the rest wait forever);
 *   2. two different barriers in the two branches of an if.
 * On a GPU this hangs or silently misbehaves; the emulator reports a deadlock naming every site.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kBarrierLine = __LINE__ + 7;
__global__ void early_return_kernel(float *data, int n)
{
    __shared__ float s[128];
    int i = threadIdx.x;
    if (i >= n) return;                             // BUG: these threads skip the barrier
    s[i] = data[i];
    __syncthreads();
    data[i] = s[n - 1 - i];
}

[[maybe_unused]] static const int kThenLine = __LINE__ + 5;
__global__ void two_sites_kernel(int *out)
{
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = 1;
        __syncthreads();                            // BUG: a different barrier per branch
    } else {
        out[threadIdx.x] = 2;
        __syncthreads();
    }
}

int main()
{
    EMU_ONLY();
    float *d = nullptr;
    int *o = nullptr;
    CUDA_OK(cudaMalloc(&d, 128 * sizeof(float)));
    CUDA_OK(cudaMemset(d, 0, 128 * sizeof(float)));
    early_return_kernel<<<1, 128>>>(d, 100);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
#ifdef __CUEMU__
    EXPECT_DIAG("deadlock in kernel early_return_kernel", "divergent __syncthreads",
                "100 threads wait at __syncthreads", here(__FILE__, kBarrierLine),
                "28 threads exited (first: thread (100,0,0))");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&o, 64 * sizeof(int)));
    two_sites_kernel<<<1, 64>>>(o);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
#ifdef __CUEMU__
    EXPECT_DIAG("deadlock in kernel two_sites_kernel", "32 threads wait at __syncthreads",
                here(__FILE__, kThenLine), here(__FILE__, kThenLine + 3));
#endif
    cudaDeviceReset();
    return emu_test_result("divergent_barrier");
}
