// SPDX-License-Identifier: MIT
/*
 * Planted bug for cuemu-nvcc's test: a standalone program, as a student would write one, whose
 * bounds guard is off by one. Built with cuemu-nvcc, it must get the chapters' diagnostics: the
 * kernel, block, thread and line of the bad write, and the line of the cudaMalloc. n is a
 * multiple of the page size, so the write lands on the guard page at once.
 */
#include <cstdio>

__global__ void scale_kernel(float *v, int n, float s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n)                 // BUG: must be i < n
        v[i] = s * (float)i;    // @oob-write
}

int main()
{
    const int n = 1 << 20;
    float *v = nullptr;
    cudaMalloc(&v, n * sizeof(float));    // @oob-alloc
    scale_kernel<<<(n + 1 + 255) / 256, 256>>>(v, n, 2.0f);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("cudaDeviceSynchronize: %s\n", cudaGetErrorName(err));
    cudaFree(v);
    return err == cudaSuccess ? 0 : 1;
}
