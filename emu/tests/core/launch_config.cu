// SPDX-License-Identifier: MIT
/*
 * Launch configuration errors, as CUDA 13 on an H200 reports them: every one of these is
 * cudaErrorInvalidValue from cudaGetLastError, and the kernel does not run. Also the dynamic
 * shared memory limit raised by cudaFuncSetAttribute, and the sticky error after a fault.
 */
#include "emu_test.h"

__global__ void mark_kernel(int *flag) { if (threadIdx.x == 0 && blockIdx.x == 0) *flag += 1; }

__global__ void big_smem_kernel(int *out)
{
    extern __shared__ int big[];
    big[threadIdx.x * 800] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = big[(blockDim.x - 1 - threadIdx.x) * 800];
}

__global__ void null_write_kernel(int *p) { p[threadIdx.x] = 1; }

static int runs(int *d)
{
    int h = 0;
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    return h;
}

int main()
{
    int *d = nullptr;
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));
    CUDA_OK(cudaMemset(d, 0, 64 * sizeof(int)));
    struct { dim3 g, b; size_t s; } bad[] = {
        {dim3(1), dim3(1025), 0},                 // more than 1024 threads
        {dim3(1), dim3(0), 0},                    // no threads
        {dim3(1), dim3(32, 32, 2), 0},            // 2048 threads in 3D
        {dim3(1), dim3(1, 1, 65), 0},             // blockDim.z above 64
        {dim3(1, 70000), dim3(32), 0},            // gridDim.y above 65535
        {dim3(0), dim3(32), 0},                   // empty grid
        {dim3(1), dim3(32), 48 * 1024 + 4},       // dynamic shared memory above 48 KiB
    };
    for (auto &c : bad) {
        mark_kernel<<<c.g, c.b, c.s>>>(d);
        EXPECT_EQ_INT(cudaGetLastError(), cudaErrorInvalidValue);
        EXPECT_EQ_INT(cudaGetLastError(), cudaSuccess);   // not sticky
    }
    EXPECT_EQ_INT(runs(d), 0);
    mark_kernel<<<dim3(2147483648u), 1>>>(d);              // gridDim.x above 2^31 - 1
    EXPECT_EQ_INT(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_EQ_INT(runs(d), 0);
    mark_kernel<<<1, dim3(1024)>>>(d);
    CUDA_OK(cudaGetLastError());
    EXPECT_EQ_INT(runs(d), 1);

    // more than 48 KiB of dynamic shared memory once the kernel opts in
    const size_t big = 64 * 800 * sizeof(int);   // 200 KiB: under the 227 KiB opt-in
    big_smem_kernel<<<1, 64, big>>>(d);
    EXPECT_EQ_INT(cudaGetLastError(), cudaErrorInvalidValue);
    CUDA_OK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big));
    big_smem_kernel<<<1, 64, big>>>(d);
    CUDA_OK(cudaGetLastError());
    int h[64];
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int t = 0; t < 64; t++) EXPECT_EQ_INT(h[t], 63 - t);

#ifdef __CUEMU__
    // a fault is sticky: later launches do nothing and report it, until cudaDeviceReset
    null_write_kernel<<<1, 4>>>(nullptr);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("illegal address in kernel null_write_kernel", "(a NULL pointer?)");
    mark_kernel<<<1, 1>>>(d);
    EXPECT_EQ_INT(cudaGetLastError(), cudaErrorIllegalAddress);
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, sizeof(int)));
    CUDA_OK(cudaMemset(d, 0, sizeof(int)));
    mark_kernel<<<1, 1>>>(d);
    CUDA_OK(cudaGetLastError());
    EXPECT_EQ_INT(runs(d), 1);
#endif
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d);
    return emu_test_result("launch_config");
}
