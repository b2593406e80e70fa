// SPDX-License-Identifier: MIT
/*
 * Faults the emulator must survive and report (kernel, block, thread, line), each followed by
 * a working launch: use after free, stack overflow, a spinning thread (watchdog), a spin that
 * sleeps (and so completes), __trap, a failed assert, integer division by zero; and the thread
 * order chosen by CUEMU_ORDER.
 */
#include "emu_test.h"
#include <cassert>

struct Holder { float *p; };

__global__ void through_struct_kernel(Holder h) { h.p[threadIdx.x] = 1.0f; }

__device__ int deep(int n)
{
    volatile char buf[2048];
    buf[n % 2048] = (char)n;
    return n <= 0 ? 0 : deep(n - 1) + buf[(n * 7) % 2048];
}
__global__ void recursion_kernel(int *out, int n) { out[threadIdx.x] = deep(n); }

static const int spin_line = __LINE__ + 4;
__global__ void spin_kernel(volatile int *flag)
{
    if (threadIdx.x == 0)
        while (*flag == 0) { }                    // SPIN: waits for thread 1, which never runs
    if (threadIdx.x == 1) *flag = 1;
}

__global__ void polite_spin_kernel(volatile int *flag)
{
    if (threadIdx.x == 0)
        while (*flag == 0) __nanosleep(100);      // sleeping lets thread 1 run
    if (threadIdx.x == 1) *flag = 1;
}

__global__ void trap_kernel(int *v) { if (threadIdx.x == 3) __trap(); v[threadIdx.x] = 1; }
__global__ void assert_kernel(const int *v) { assert(v[threadIdx.x] >= 0); }
__global__ void divide_kernel(int *v, int d) { v[threadIdx.x] = 100 / (d - (int)threadIdx.x); }

__global__ void shfl_vs_barrier_kernel(int *out)
{
    if (threadIdx.x == 0) out[0] = __shfl_sync(0x3u, 5, 1);   // waits for lane 1...
    else __syncthreads();                                     // ...which waits here
}

__global__ void order_kernel(int *order, int *pos)
{
    order[atomicAdd(pos, 1)] = threadIdx.x + 100 * blockIdx.x;
}

[[maybe_unused]] static int works(int *d)
{
    cudaMemset(d + 16, 0, sizeof(int));
    order_kernel<<<1, 4>>>(d, d + 16);
    return cudaDeviceSynchronize() == cudaSuccess;
}

int main()
{
    EMU_ONLY();
#ifdef __CUEMU__
    int *d = nullptr;
    float *f = nullptr;
    const int alloc_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&f, 64 * sizeof(float)));
    CUDA_OK(cudaFree(f));
    through_struct_kernel<<<1, 8>>>(Holder{f});
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("use after free in kernel through_struct_kernel", "block (0,0,0), thread (",
                here(__FILE__, alloc_line));
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());

    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));
    recursion_kernel<<<1, 2>>>(d, 100000);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("stack overflow in kernel recursion_kernel", "CUEMU_STACK_KB");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));
    EXPECT(works(d));

#ifndef __SANITIZE_THREAD__
    // (TSan holds asynchronous signals until a call it intercepts: a bare spin never makes one)
    setenv("CUEMU_ORDER", "forward", 1);
    setenv("CUEMU_WATCHDOG_S", "1", 1);
    CUDA_OK(cudaMemset(d, 0, sizeof(int)));
    spin_kernel<<<1, 2>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchTimeout);
    // the watchdog names the loop the thread spins in (sampled), not the launch
    EXPECT_DIAG("watchdog: kernel spin_kernel", "thread (0,0,0) was spinning in a loop over",
                here(__FILE__, spin_line));
    unsetenv("CUEMU_WATCHDOG_S");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));
    EXPECT(works(d));
#endif

    CUDA_OK(cudaMemset(d, 0, sizeof(int)));
    polite_spin_kernel<<<1, 2>>>(d);
    CUDA_OK(cudaDeviceSynchronize());

    trap_kernel<<<1, 8>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalInstruction);
    EXPECT_DIAG("illegal instruction (__trap()?) in kernel trap_kernel", "thread (3,0,0)");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));

    int neg[4] = {1, 2, -3, 4};
    CUDA_OK(cudaMemcpy(d, neg, sizeof neg, cudaMemcpyHostToDevice));
    assert_kernel<<<1, 4>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorAssert);
    /* the function's name as the host compiler spells it: "const int *" (clang), "const int*" (gcc) */
    EXPECT_DIAG("faults.cu:39: void assert_kernel(const int", "block: [0,0,0], thread: [2,0,0] Assertion `v[threadIdx.x] >= 0` failed.");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));

    divide_kernel<<<1, 4>>>(d, 2);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_DIAG("integer division by zero", "thread (2,0,0)");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));

    shfl_vs_barrier_kernel<<<1, 2>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_DIAG("deadlock in kernel shfl_vs_barrier_kernel", "1 thread waits at __shfl_sync",
                "1 thread waits at __syncthreads");
    cuemuClearDiagnostic();
    CUDA_OK(cudaDeviceReset());
    CUDA_OK(cudaMalloc(&d, 64 * sizeof(int)));

    // thread and block order
    int h[16];
    const char *orders[] = {"forward", "reverse", "random:5", "random:5", "random:6"};
    int seen[5][16];
    for (int o = 0; o < 5; o++) {
        setenv("CUEMU_ORDER", orders[o], 1);
        CUDA_OK(cudaMemset(d + 16, 0, sizeof(int)));
        order_kernel<<<2, 8>>>(d, d + 16);
        CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        std::memcpy(seen[o], h, sizeof h);
    }
    for (int i = 0; i < 16; i++) EXPECT_EQ_INT(seen[0][i], (i / 8) * 100 + i % 8);
    for (int i = 0; i < 16; i++) EXPECT_EQ_INT(seen[1][i], (1 - i / 8) * 100 + 7 - i % 8);
    EXPECT(std::memcmp(seen[2], seen[3], sizeof seen[2]) == 0);   // a seed repeats exactly
    EXPECT(std::memcmp(seen[2], seen[0], sizeof seen[2]) != 0);
    EXPECT(std::memcmp(seen[2], seen[4], sizeof seen[2]) != 0);
    unsetenv("CUEMU_ORDER");
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d);
#endif
    return emu_test_result("faults");
}
