// SPDX-License-Identifier: MIT
/*
 * __device__ and __constant__ variables: written with cudaMemcpyToSymbol, read by kernels,
 * written by kernels, read back with cudaMemcpyFromSymbol (and with an offset).
 */
#include "emu_test.h"

__constant__ float coeffs[8];
__constant__ int offset_c;
__device__ int counter;
__device__ float results[16];

__global__ void poly_kernel(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 7; k >= 0; k--) acc = acc * x[i] + coeffs[k];
    y[i] = acc + (float)offset_c;
    atomicAdd(&counter, 1);
    if (i < 16) results[i] = (float)i * 2.0f;
}

int main()
{
    const int n = 100;
    float hc[8] = {1, -2, 0.5f, 0, 0, 0, 0, 0.125f}, hx[n], hy[n], *dx = nullptr, *dy = nullptr;
    int off = 3, zero = 0, got = 0;
    for (int i = 0; i < n; i++) hx[i] = (float)(i % 5) * 0.5f - 1.0f;
    CUDA_OK(cudaMemcpyToSymbol(coeffs, hc, sizeof hc));
    CUDA_OK(cudaMemcpyToSymbol(offset_c, &off, sizeof off));
    CUDA_OK(cudaMemcpyToSymbol(counter, &zero, sizeof zero));
    CUDA_OK(cudaMalloc(&dx, sizeof hx));
    CUDA_OK(cudaMalloc(&dy, sizeof hy));
    CUDA_OK(cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice));
    poly_kernel<<<(n + 31) / 32, 32>>>(dx, dy, n);
    CUDA_OK(cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int k = 7; k >= 0; k--) acc = acc * hx[i] + hc[k];
        EXPECT(hy[i] == acc + 3.0f);
    }
    CUDA_OK(cudaMemcpyFromSymbol(&got, counter, sizeof got));
    EXPECT_EQ_INT(got, n);
    float r[4];
    CUDA_OK(cudaMemcpyFromSymbol(r, results, sizeof r, 4 * sizeof(float)));
    for (int k = 0; k < 4; k++) EXPECT(r[k] == (float)(k + 4) * 2.0f);
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(dx); cudaFree(dy);
    return emu_test_result("symbols");
}
