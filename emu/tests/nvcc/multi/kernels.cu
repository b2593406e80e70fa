// SPDX-License-Identifier: MIT
// The multi-file program's kernels: one launched here, one launched from main.cu.
#include "vecops.h"

__global__ void saxpy_kernel(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = axpy(a, x[i], y[i]);
}

__global__ void block_sum_kernel(const float *in, float *out, int n)
{
    __shared__ float s[BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

void launch_saxpy(float a, const float *x, float *y, int n)
{
    saxpy_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(a, x, y, n);
}
