// SPDX-License-Identifier: MIT
/*
 * The host and a queued kernel signalling each other through pinned or managed memory, which
 * CUDA allows (issue 22), and the races around it, which it does not:
 *   1. the host sets a pinned flag a queued kernel spins on through a `volatile int *` (a
 *      pointer to non-const: the kernel may write it too);
 *   2. the host polls a pinned "done" flag that a queued kernel sets through a pointer to
 *      volatile, with no CUDA call in its loop: the loop ends;
 *   3. both: the host says "go" in one pinned flag, the kernel answers in another (in
 *      another allocation, or beside it in the same one);
 *   4. host atomics (read-modify-writes, and a CAS loop's plain read of the old value, as
 *      NVIDIA's systemWideAtomics sample does) on managed memory a queued kernel updates with
 *      system-scope atomics (concurrentManagedAccess = 1);
 * none of which the emulator may report; and, still reported:
 *   5. a host write into pinned memory that a queued kernel reads through a plain pointer
 *      (it may read it before or after the write), and one that a queued copy reads.
 */
#include <chrono>
#include "rt_test.h"

__global__ void wait_then_copy(volatile int *flag, int *seen)
{
    while (*flag == 0) {
    }
    *seen = *flag;
}

__global__ void set_done(volatile int *done, int value) { *done = value; }

__global__ void answer(const volatile int *go, volatile int *done)
{
    while (*go == 0) {
    }
    *done = *go + 1;
}

__global__ void count_system(int *c, int n)
{
    for (int i = 0; i < n; i++) atomicAdd_system(c, 1);
}

__global__ void read_first(int *out, const int *in) { *out = in[0]; }

// The host's side of a flag: volatile, so the compiler reads it on every turn of the loop.
static bool wait_for(const volatile int *flag, int want)
{
    auto t0 = std::chrono::steady_clock::now();
    while (*flag != want)
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) return false;
    return true;
}

int main()
{
    cudaStream_t s;
    OK(cudaStreamCreate(&s));

    // 1. the host sets the flag the queued kernel waits for (cudaMallocHost: one address space)
    int *flag, *seen, hs = 0;
    OK(cudaMallocHost(&flag, sizeof(int)));
    OK(cudaMalloc(&seen, sizeof(int)));
    *flag = 0;
    wait_then_copy<<<1, 1, 0, s>>>(flag, seen);
    OK(cudaGetLastError());
    *(volatile int *)flag = 7;
    OK(cudaMemcpy(&hs, seen, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT(hs == 7);

    // 2. the host polls what the queued kernel sets (cudaHostAlloc, mapped)
    int *done, *d_done;
    OK(cudaHostAlloc(&done, sizeof(int), cudaHostAllocMapped));
    OK(cudaHostGetDevicePointer(&d_done, done, 0));
    *done = 0;
    set_done<<<1, 1, 0, s>>>(d_done, 42);
    OK(cudaGetLastError());
    EXPECT(wait_for(done, 42));

    // 3. go and answer
    int *go;
    OK(cudaMallocHost(&go, sizeof(int)));
    *go = 0;
    *done = 0;
    answer<<<1, 1, 0, s>>>(go, done);
    OK(cudaGetLastError());
    *(volatile int *)go = 5;
    EXPECT(wait_for(done, 6));
    OK(cudaStreamSynchronize(s));
    // ... the two flags side by side in one allocation
    int *pair;
    OK(cudaMallocHost(&pair, 2 * sizeof(int)));
    pair[0] = pair[1] = 0;
    answer<<<1, 1, 0, s>>>(pair, pair + 1);
    OK(cudaGetLastError());
    *(volatile int *)pair = 8;
    EXPECT(wait_for(pair + 1, 9));
    OK(cudaStreamSynchronize(s));

    // 4. host and device atomics on one managed counter while the kernel is queued
    int cma = 0;
    OK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, 0));
    if (cma) {
        int *m;
        OK(cudaMallocManaged(&m, 2 * sizeof(int)));
        m[0] = m[1] = 0;
        count_system<<<1, 1, 0, s>>>(m, 100);
        OK(cudaGetLastError());
        for (int i = 0; i < 100; i++) __atomic_fetch_add(&m[0], 1, __ATOMIC_SEQ_CST);
        int expected = m[1];   // a CAS loop's plain read of the old value (systemWideAtomics)
        EXPECT(__atomic_compare_exchange_n(&m[1], &expected, 9, false, __ATOMIC_SEQ_CST,
                                           __ATOMIC_SEQ_CST));
        EXPECT(__atomic_exchange_n(&m[1], 3, __ATOMIC_SEQ_CST) == 9);
        OK(cudaDeviceSynchronize());
        EXPECT(m[0] == 200 && m[1] == 3);
        OK(cudaFree(m));
    }

#ifdef __CUEMU__
    const char *d = cuemuLastDiagnostic();
    EXPECT(!d || !*d);
    if (d && *d) fprintf(stderr, "reported:\n%s", d);
    cuemuClearDiagnostic();

    // 5. races: the kernel may read `in` before or after the host's write; so may the copy
    int *in, *out;
    OK(cudaMallocHost(&in, sizeof(int)));
    OK(cudaMalloc(&out, sizeof(int)));
    *in = 1;
    read_first<<<1, 1, 0, s>>>(out, in);
    OK(cudaGetLastError());
    *in = 2;                                      // BUG: before the kernel surely ran
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorIllegalState);
    d = cuemuLastDiagnostic();
    EXPECT(d && strstr(d, "host write of pinned host memory") &&
           strstr(d, "kernel read_first launched at"));
    cuemuClearDiagnostic();
    OK(cudaDeviceReset());                        // the error is sticky

    // ... and a pinned buffer refilled before its copy ran
    int *staging, *dst;
    OK(cudaStreamCreate(&s));
    OK(cudaMallocHost(&staging, 64 * sizeof(int)));
    OK(cudaMalloc(&dst, 64 * sizeof(int)));
    OK(cudaMemcpyAsync(dst, staging, 64 * sizeof(int), cudaMemcpyHostToDevice, s));
    staging[3] = 4;                               // BUG: the copy may not have read it yet
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorIllegalState);
    d = cuemuLastDiagnostic();
    EXPECT(d && strstr(d, "host write of pinned host memory") && strstr(d, "cudaMemcpyAsync at"));
    cuemuClearDiagnostic();
    OK(cudaDeviceReset());
#else
    OK(cudaFreeHost(flag));
    OK(cudaFreeHost(done));
    OK(cudaFreeHost(go));
    OK(cudaFreeHost(pair));
    OK(cudaFree(seen));
    OK(cudaStreamDestroy(s));
#endif
    printf("host_signals: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
