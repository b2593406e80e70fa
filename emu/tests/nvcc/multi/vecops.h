// SPDX-License-Identifier: MIT
// The header the two .cu files of the multi-file program share (found next to them, as with nvcc).
#pragma once
#include <cstddef>

#define BLOCK 128

// Defined in kernels.cu, launched from main.cu: a kernel may live in another translation unit.
__global__ void block_sum_kernel(const float *in, float *out, int n);
// Host helpers: kernels.cu launches saxpy; host_util.cpp is plain C++.
void launch_saxpy(float a, const float *x, float *y, int n);
double device_checksum(const float *d_v, int n);

__host__ __device__ inline float axpy(float a, float x, float y) { return a * x + y; }
