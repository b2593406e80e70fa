// SPDX-License-Identifier: MIT
/*
 * Legal CUDA the emulator once refused, hung on or got wrong (issue 22, found running NVIDIA's
 * samples), each in a few lines a GPU runs too:
 *   1. a parameter's constness comes from the kernel, not the argument: k(int *, const int *)
 *      on two streams with the same `int *` for the const one is no race;
 *   2. device clock() counts what clock64() counts (it was the C library's clock());
 *   3. a host function runs without a synchronisation: a host polling its flag sees it;
 *   4. `extern float __shared__ s[]` is the same as `extern __shared__ float s[]`;
 *   5. host atomics on managed memory while a kernel is queued (concurrentManagedAccess);
 *   6. a host write to a pinned flag that a queued kernel only reads;
 *   7. a pointer to non-const that two kernels on two streams only read is no race either.
 *   (The race a kernel's real write makes is still reported, at the end.)
 * The emulator must also report nothing for any of them.
 */
#include <chrono>
#include <cstdlib>
#include "rt_test.h"

__global__ void copy_first(int *out, const int *in) { out[threadIdx.x] = in[0]; }

__global__ void copy_first_nc(int *out, int *in) { out[threadIdx.x] = in[0]; }

__global__ void copy_and_bump(int *out, int *in) { out[threadIdx.x] = in[0]; in[0] = 5; }

__global__ void clocks(long long *out)
{
    long long c64 = clock64();
    unsigned int c = (unsigned int)clock();
    while (clock64() - c64 < 2000000) {   // about a millisecond at 2 GHz
    }
    out[0] = (long long)((unsigned int)clock() - c);   // 32 bits, as a GPU's clock() is
    out[1] = clock64() - c64;
}

__global__ void reverse_dyn(float *v)
{
    extern float __shared__ s[];
    s[threadIdx.x] = v[threadIdx.x];
    __syncthreads();
    v[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

__global__ void count(int *c, int n)
{
    for (int i = 0; i < n; i++) atomicAdd_system(c, 1);
}

__global__ void wait_flag(const volatile int *flag, int *seen)
{
    while (*flag == 0) {
    }
    *seen = *flag;
}

static volatile int host_flag;
static void CUDART_CB set_flag(void *) { host_flag = 1; }

int main()
{
    int *a, *b, *c;
    cudaStream_t s1, s2;
    OK(cudaMalloc(&a, 64 * sizeof(int)));
    OK(cudaMalloc(&b, 64 * sizeof(int)));
    OK(cudaMalloc(&c, sizeof(int)));
    OK(cudaMemset(c, 0, sizeof(int)));
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));

    // 1. both launches read c through a const parameter
    copy_first<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    copy_first<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());

    // 7. both launches only read c, through a non-const parameter
    copy_first_nc<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    copy_first_nc<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());

    // 2. clock() and clock64() count the same cycles (clock() in 32 bits)
    long long *t, h[2];
    OK(cudaMalloc(&t, 2 * sizeof(long long)));
    clocks<<<1, 1>>>(t);
    OK(cudaMemcpy(h, t, sizeof h, cudaMemcpyDeviceToHost));
    EXPECT(h[1] >= 2000000 && h[0] > h[1] / 2 && h[0] < h[1] * 2);

    // 3. the host function runs although the host only polls (2 s at most)
    host_flag = 0;
    OK(cudaLaunchHostFunc(s1, set_flag, nullptr));
    auto t0 = std::chrono::steady_clock::now();
    while (!host_flag && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
    }
    EXPECT(host_flag == 1);
    OK(cudaStreamSynchronize(s1));

    // 4. dynamic shared memory declared with the type before __shared__
    float hv[32], *dv;
    for (int i = 0; i < 32; i++) hv[i] = (float)i;
    OK(cudaMalloc(&dv, sizeof hv));
    OK(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));
    reverse_dyn<<<1, 32, 32 * sizeof(float)>>>(dv);
    OK(cudaMemcpy(hv, dv, sizeof hv, cudaMemcpyDeviceToHost));
    EXPECT(hv[0] == 31.0f && hv[31] == 0.0f);

    // 5. host and device atomics on one managed counter, the kernel still queued
    int cma = 0;
    OK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, 0));
    if (cma) {
        int *m;
        OK(cudaMallocManaged(&m, sizeof(int)));
        *m = 0;
        count<<<1, 1>>>(m, 1000);
        for (int i = 0; i < 1000; i++) __sync_fetch_and_add(m, 1);
        OK(cudaDeviceSynchronize());
        EXPECT(*m == 2000);
        OK(cudaFree(m));
    }

    // 6. the host sets a pinned flag a queued kernel waits for (zero-copy memory)
    int *flag, *dflag, *seen, hs = 0;
    OK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
    OK(cudaHostGetDevicePointer(&dflag, flag, 0));
    OK(cudaMalloc(&seen, sizeof(int)));
    *flag = 0;
    wait_flag<<<1, 1, 0, s2>>>(dflag, seen);
    *(volatile int *)flag = 7;
    OK(cudaMemcpy(&hs, seen, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT(hs == 7);

#ifdef __CUEMU__
    const char *d = cuemuLastDiagnostic();
    EXPECT(!d || !*d);
    if (d && *d) fprintf(stderr, "reported:\n%s", d);
    // a kernel that does write what another stream's kernel reads: reported once both ran
    copy_first_nc<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    copy_and_bump<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalState);
    d = cuemuLastDiagnostic();
    EXPECT(d && strstr(d, "stream race on device memory") && strstr(d, "kernel copy_and_bump") &&
           strstr(d, "writes it"));
    cuemuClearDiagnostic();
#endif
    OK(cudaFreeHost(flag));
    OK(cudaFree(seen));
    OK(cudaFree(dv));
    OK(cudaFree(t));
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(c));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    printf("legal_code: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
