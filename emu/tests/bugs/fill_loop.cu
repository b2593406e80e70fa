// SPDX-License-Identifier: MIT
/*
 * Planted bug: a race through a loop the compiler could turn into memset or memcpy. Thread t
 * zero-fills (or copies) row t of a shared tile through a pointer, one float at a time, then
 * reads row t + 1, which thread t + 1 fills, with no __syncthreads() between. The optimiser must not make
 * the fill a call of memset (or the copy one of memcpy): the race detector sees only the
 * accesses that stay loads and stores.
 */
#include "../core/emu_test.h"

#define ROWS 8
#define W 32

__device__ void zero_row(float *row, int n)
{
    for (int k = 0; k < n; k++) row[k] = 0.0f;      // a memset, to an optimiser
}
[[maybe_unused]] static const int kZeroLine = __LINE__ - 2;

__device__ void copy_row(float *row, const float *src, int n)
{
    for (int k = 0; k < n; k++) row[k] = src[k];    // a memcpy, to an optimiser
}
[[maybe_unused]] static const int kCopyLine = __LINE__ - 2;
__global__ void fill_kernel(const float *in, float *out, int copy)
{
    __shared__ float tile[(ROWS + 1) * W];
    int t = threadIdx.x;
    if (copy) copy_row(tile + t * W, in + t * W, W);
    else zero_row(tile + t * W, W);
    float s = 0.0f;
    for (int k = 0; k < W; k++) s += tile[(t + 1) % (ROWS + 1) * W + k];   // BUG: no __syncthreads()
    out[t] = s;
}

int main()
{
    EMU_ONLY();
    EMU_NEEDS_RACE_DETECTOR("fill_loop");
    float *in = nullptr, *out = nullptr;
    CUDA_OK(cudaMalloc(&in, (ROWS + 1) * W * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, (ROWS + 1) * sizeof(float)));
    CUDA_OK(cudaMemset(in, 0, (ROWS + 1) * W * sizeof(float)));
    for (int copy = 0; copy < 2; copy++) {
        fill_kernel<<<1, ROWS + 1>>>(in, out, copy);
        EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
#ifdef __CUEMU__
        EXPECT_DIAG("shared memory race", "in kernel fill_kernel", "__shared__ 'tile'",
                    here(__FILE__, copy ? kCopyLine : kZeroLine));
        cuemuClearDiagnostic();
#endif
        cudaDeviceReset();
        CUDA_OK(cudaMalloc(&in, (ROWS + 1) * W * sizeof(float)));
        CUDA_OK(cudaMalloc(&out, (ROWS + 1) * sizeof(float)));
        CUDA_OK(cudaMemset(in, 0, (ROWS + 1) * W * sizeof(float)));
    }
    return emu_test_result("fill_loop");
}
