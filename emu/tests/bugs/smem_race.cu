// SPDX-License-Identifier: MIT
/*
 * Planted bug: the tree reduction with its __syncthreads() moved out of the loop. A GPU hides it
 * most of the time, and one thread order of the emulator hides it too (reverse gives the right
 * sum); the race detector reports it in every order, naming kernel, block, both threads, both
 * lines and the shared variable, and the launch fails. Legal sharing is not reported: the same
 * reduction with the barrier in the loop, threads writing neighbouring bytes of one word,
 * atomics on shared memory, and lanes of a warp exchanging through shared memory after
 * __syncwarp(). A write to a shared scalar that every thread reads is reported too.
 */
#include "../core/emu_test.h"

[[maybe_unused]] static const int kReadLine = __LINE__ + 8;
__global__ void reduce_barrier_outside_kernel(const float *in, float *out)
{
    __shared__ float partial[256];
    int t = threadIdx.x;
    partial[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1)
        if (t < k) partial[t] += partial[t + k];     // BUG: no barrier between the steps
    __syncthreads();
    if (t == 0) out[blockIdx.x] = partial[0];
}

__global__ void reduce_ok_kernel(const float *in, float *out)
{
    __shared__ float partial[256];
    int t = threadIdx.x;
    partial[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (t < k) partial[t] += partial[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

__global__ void legal_sharing_kernel(float *out)
{
    __shared__ unsigned char bytes[128];
    __shared__ int count;
    __shared__ float lanes[32];
    int t = threadIdx.x;
    bytes[t] = (unsigned char)t;          // neighbouring bytes of one word: not the same data
    if (t == 0) count = 0;
    __syncthreads();
    atomicAdd(&count, 1);                 // atomics do not race with each other
    float v = 0.0f;
    if (t < 32) {
        lanes[t] = (float)(t * 2);
        __syncwarp();                     // orders the lanes of warp 0
        v = lanes[(t + 1) % 32];
    }
    __syncthreads();
    out[t] = v + bytes[(t + 1) % 128] + (float)count;
}

// Shared scalars that every thread reads, again and again, as NVIDIA's mergeSort reads its six:
// the hooks' fast path settles such reads from a cache of quiet words (emu/core/hooks.c), which
// must still see thread 100's write to one of them (no barrier between it and the others' reads).
[[maybe_unused]] static const int kScalarWriteLine = __LINE__ + 10;
__global__ void scalars_race_kernel(int *out, int racy)
{
    __shared__ int lenA, lenB, startA, startB;
    int t = threadIdx.x;
    if (t == 0) { lenA = 1; lenB = 2; startA = 3; startB = 4; }
    __syncthreads();
    int s = 0;
    for (int k = 0; k < 4; k++)
        s += lenA * k + lenB + startA + startB;
    if (racy && t == 100) startB = s;                // BUG: the others read it in this phase
    __syncthreads();
    out[t] = s + startB;
}

// Launched from a C entry point, as a chapter's kernels are: the rewriter marks such host code
// as having no load/store hooks (CUEMU_HOST_FN), and the kernel it launches keeps them.
extern "C" int launch_racy(const float *in, float *out)
{
    reduce_barrier_outside_kernel<<<4, 256>>>(in, out);
    return (int)cudaDeviceSynchronize();
}

[[maybe_unused]] static const char *orders[] = { "forward", "reverse", "random:3" };

int main()
{
    EMU_ONLY();
    EMU_NEEDS_RACE_DETECTOR("smem_race");
    float h_in[1024], h_out[128], *d_in = nullptr, *d_out = nullptr;
    for (int i = 0; i < 1024; i++) h_in[i] = (float)(i % 7);
    CUDA_OK(cudaMalloc(&d_in, sizeof h_in));
    CUDA_OK(cudaMalloc(&d_out, sizeof h_in));
    for (int o = 0; o < 3; o++) {
#ifdef __CUEMU__
        setenv("CUEMU_ORDER", orders[o], 1);
#endif
        CUDA_OK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));
        reduce_ok_kernel<<<4, 256>>>(d_in, d_out);
        CUDA_OK(cudaMemcpy(h_out, d_out, 4 * sizeof(float), cudaMemcpyDeviceToHost));
        legal_sharing_kernel<<<1, 128>>>(d_out);
        CUDA_OK(cudaDeviceSynchronize());
        int *d_int = reinterpret_cast<int *>(d_out);
        scalars_race_kernel<<<2, 128>>>(d_int, 0);
        CUDA_OK(cudaDeviceSynchronize());
        int h_int[128];
        CUDA_OK(cudaMemcpy(h_int, d_int, sizeof h_int, cudaMemcpyDeviceToHost));
        EXPECT_EQ_INT(h_int[5], 1 * (0 + 1 + 2 + 3) + 4 * (2 + 3 + 4) + 4);
        scalars_race_kernel<<<2, 128>>>(d_int, 1);
        EXPECT_EQ_INT((int)cudaDeviceSynchronize(), cudaErrorLaunchFailure);
#ifdef __CUEMU__
        EXPECT_DIAG("shared memory race", "in kernel scalars_race_kernel", "__shared__ 'startB'",
                    "thread (100,0,0)", here(__FILE__, kScalarWriteLine));
        cuemuClearDiagnostic();
#endif
        EXPECT_EQ_INT(launch_racy(d_in, d_out), cudaErrorLaunchFailure);
#ifdef __CUEMU__
        EXPECT_DIAG("shared memory race", "in kernel reduce_barrier_outside_kernel",
                    "block (", "__shared__ 'partial'", here(__FILE__, kReadLine),
                    "with no __syncthreads() between");
        std::printf("caught in %s order\n", orders[o]);
        cuemuClearDiagnostic();
#endif
        cudaDeviceReset();
        CUDA_OK(cudaMalloc(&d_in, sizeof h_in));
        CUDA_OK(cudaMalloc(&d_out, sizeof h_in));
    }
    return emu_test_result("smem_race");
}
