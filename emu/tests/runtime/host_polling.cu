// SPDX-License-Identifier: MIT
/*
 * A host that waits in a loop calling no CUDA function (issue 22): it must never hang.
 *   1. polling a flag that a cudaLaunchHostFunc callback sets, the callback queued behind a
 *      kernel and behind another stream's event: the loop ends (host functions run when
 *      queued, with the work before them);
 *   2. polling a pinned flag that a queued kernel sets through a plain pointer (a race by
 *      CUDA's memory model, reported): the loop still ends, and the report names the loop.
 * Each wait gives up after 30 s, so a hang is a failure, not a timeout (under qemu-user, where
 * every turn of the polled loop is a signal or two, the thousand turns take seconds).
 */
#include <chrono>
#include "rt_test.h"

__global__ void slow_fill(int *v, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = i;
}

__global__ void set_flag(int *flag, int value) { *flag = value; }

static volatile int host_flag;
static void CUDART_CB raise_flag(void *arg) { host_flag = *(const int *)arg; }

static bool wait_for(const volatile int *flag, int want)
{
    auto t0 = std::chrono::steady_clock::now();
    while (*flag != want)
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) return false;
    return true;
}

int main()
{
    cudaStream_t s1, s2;
    cudaEvent_t filled;
    int *v, *w;
    const int n = 1 << 16;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    OK(cudaMalloc(&v, n * sizeof(int)));
    OK(cudaMalloc(&w, n * sizeof(int)));

    // 1. the callback waits for a kernel on its own stream and for s1's event
    static int value = 3;
    host_flag = 0;
    slow_fill<<<4, 256, 0, s1>>>(v, n);
    OK(cudaGetLastError());
    OK(cudaEventRecord(filled, s1));
    OK(cudaStreamWaitEvent(s2, filled, 0));
    slow_fill<<<4, 256, 0, s2>>>(w, n);
    OK(cudaLaunchHostFunc(s2, raise_flag, &value));
    EXPECT(wait_for(&host_flag, 3));
    OK(cudaDeviceSynchronize());

#ifdef __CUEMU__
    // 2. a kernel that signals through a plain pointer: reported, but the loop ends
    int *flag;
    OK(cudaMallocHost(&flag, sizeof(int)));
    *flag = 0;
    set_flag<<<1, 1, 0, s1>>>(flag, 9);
    OK(cudaGetLastError());
    EXPECT(wait_for(flag, 9));
    EXPECT_ERR(cudaStreamSynchronize(s1), cudaErrorIllegalState);
    const char *d = cuemuLastDiagnostic();
    EXPECT(d && strstr(d, "host read of pinned host memory") && strstr(d, "kernel set_flag"));
    EXPECT(d && strstr(d, "the host polls address") && strstr(d, "in a loop that calls no CUDA function"));
    char loop[300];
    snprintf(loop, sizeof loop, "The loop: %s:", __FILE__);
    EXPECT(d && strstr(d, loop));      // wait_for's line
    cuemuClearDiagnostic();
    OK(cudaDeviceReset());
#else
    OK(cudaEventDestroy(filled));
    OK(cudaFree(v));
    OK(cudaFree(w));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
#endif
    printf("host_polling: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
