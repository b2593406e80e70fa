// SPDX-License-Identifier: MIT
/*
 * Planted bugs: vector and word accesses at addresses that are not multiples of their size.
 * A GPU stops such a kernel with cudaErrorMisalignedAddress (716); a CPU would not care, so the
 * emulator checks that every access to global and shared memory is aligned for its type:
 *   1. a float4 load from a float array one element in (4 bytes past a 16-byte boundary);
 *   2. an int written to shared memory at an odd byte offset.
 * An aligned float4 copy of the same array runs clean.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kVecLine = __LINE__ + 5;
__global__ void shifted_float4_kernel(const float *in, float4 *out)
{
    int t = threadIdx.x;
    const float4 *v = reinterpret_cast<const float4 *>(in + 1);   // BUG: in + 1 is not 16-aligned
    out[t] = v[t];
}

__global__ void aligned_float4_kernel(const float *in, float4 *out)
{
    int t = threadIdx.x;
    out[t] = reinterpret_cast<const float4 *>(in)[t];
}

[[maybe_unused]] static const int kSharedLine = __LINE__ + 6;
__global__ void odd_shared_kernel(int *out)
{
    __shared__ __align__(16) unsigned char raw[64];
    int t = threadIdx.x;
    if (t == 0) {
        *reinterpret_cast<int *>(raw + 1) = 7;                     // BUG: byte offset 1
        out[0] = raw[1];
    }
}

int main()
{
    EMU_ONLY();
    float *in = nullptr;
    float4 *out = nullptr;
    CUDA_OK(cudaMalloc(&in, 1024 * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, 1024 * sizeof(float)));
    CUDA_OK(cudaMemset(in, 0, 1024 * sizeof(float)));
    aligned_float4_kernel<<<1, 64>>>(in, out);
    CUDA_OK(cudaDeviceSynchronize());
#if defined(__CUEMU__) && defined(__aarch64__) && defined(__clang__)
    /* Not caught there, so not asserted: clang copies the float4 struct with one memcpy of 16
       bytes, which neither its alignment check nor the load/store hooks see, and Arm's 16-byte
       load does not fault at an address that is not a multiple of 16 (x86-64's aligned SSE
       move does). docs/no-gpu.md, "64-bit Arm", lists it. */
    std::printf("float4 part skipped on 64-bit Arm with clang: a float4 struct copy is one "
                "16-byte memcpy that clang's alignment check does not cover, and Arm's 16-byte "
                "load does not fault on a misaligned address\n");
    std::fflush(stdout);   /* before the next report, which goes to stderr */
#else
    shifted_float4_kernel<<<1, 64>>>(in, out);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorMisalignedAddress);
#endif
#if defined(__CUEMU__) && !(defined(__aarch64__) && defined(__clang__))
    /* clang builds catch it from the CPU's fault on the 16-byte move ("misaligned 16-byte
       read"); g++ builds (no clang installed) from the alignment check of the float4 type
       ("misaligned access of global memory 'const struct float4'", with the address). */
    EXPECT_DIAG("misaligned", "in kernel shifted_float4_kernel",
                "block (0,0,0), thread (0,0,0)", here(__FILE__, kVecLine), "not a multiple of 16");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();
    int *d = nullptr;
    CUDA_OK(cudaMalloc(&d, sizeof(int)));
    odd_shared_kernel<<<1, 32>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorMisalignedAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("misaligned write of shared memory 'int' in kernel odd_shared_kernel",
                here(__FILE__, kSharedLine), "is not a multiple of 4");
#endif
    cudaDeviceReset();
    return emu_test_result("misaligned");
}
