// SPDX-License-Identifier: MIT
/*
 * Planted bugs: an index past the end of an array whose size the compiler knows.
 *   1. a thread's own array of 8 floats read at index 8 (a loop's `<=`), as in a register
 *      tile: on a GPU it reads whatever lies beyond the array, and the result may even be
 *      right;
 *   2. a __shared__ array of 64 floats written by 128 threads, one element each.
 * Both stop the launch at the access, naming the index, the array's type, the thread and the
 * line (-fsanitize=array-bounds, emu/core/access.c).
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kLocalLine = __LINE__ + 7;
__global__ void tile_kernel(const float *in, float *out, int k)
{
    float a[8];
    for (int i = 0; i < 8; i++) a[i] = in[threadIdx.x * 8 + i];
    float acc = 0.0f;
    for (int i = 0; i <= k; i++)                    // BUG: k = 8 reads a[8]
        acc += a[i];
    out[threadIdx.x] = acc;
}

[[maybe_unused]] static const int kSharedLine = __LINE__ + 4;
__global__ void stage_kernel(const float *in, float *out)
{
    __shared__ float s[64];
    s[threadIdx.x] = in[threadIdx.x];               // BUG: 128 threads, 64 elements
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x % 64];
}

int main()
{
    EMU_ONLY();
    float *in = nullptr, *out = nullptr;
    CUDA_OK(cudaMalloc(&in, 32 * 8 * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, 128 * sizeof(float)));
    CUDA_OK(cudaMemset(in, 0, 32 * 8 * sizeof(float)));
    tile_kernel<<<1, 32>>>(in, out, 8);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("out-of-bounds index 8 of an array 'float[8]' in kernel tile_kernel",
                here(__FILE__, kLocalLine), "its indices are 0 to 7");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&in, 128 * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, 128 * sizeof(float)));
    stage_kernel<<<1, 128>>>(in, out);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("out-of-bounds index 64 of an array 'float[64]' in kernel stage_kernel",
                "thread (64,0,0)", here(__FILE__, kSharedLine), "its indices are 0 to 63");
#endif
    cudaDeviceReset();
    return emu_test_result("array_index");
}
