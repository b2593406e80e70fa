// SPDX-License-Identifier: MIT
/*
 * Every stream race report says what would have ordered the two operations, also the one
 * made after the fact (issue 22): when only a kernel's "may write" makes a race on a small
 * device buffer, the emulator waits until the kernels ran and reports it only if one did write;
 * that report names, as the one made at the launch does, the event the first stream recorded
 * after its access and the second stream did not wait for.
 */
#include "rt_test.h"

__global__ void read_first(int *out, int *in) { out[threadIdx.x] = in[0]; }

__global__ void bump_first(int *out, int *in)
{
    if (threadIdx.x == 0) out[0] = in[0]++;
}

int main()
{
#ifdef __CUEMU__
    int *a, *b, *c;
    cudaStream_t s1, s2;
    cudaEvent_t done;
    OK(cudaMalloc(&a, 32 * sizeof(int)));
    OK(cudaMalloc(&b, 32 * sizeof(int)));
    OK(cudaMalloc(&c, sizeof(int)));
    OK(cudaMemset(c, 0, sizeof(int)));
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));
    OK(cudaEventCreate(&done));

    // the event is recorded after the first kernel, but s2 never waits for it
    read_first<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    OK(cudaEventRecord(done, s1));
    const int record_line = __LINE__ - 1;
    bump_first<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());   // only a maybe-write so far: decided once both ran
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalState);
    const char *d = cuemuLastDiagnostic();
    char want[256];
    snprintf(want, sizeof want, "stream 1 recorded an event after the first, at the cudaEventRecord "
             "at %s:%d, and stream 2 did not wait for it (cudaStreamWaitEvent) before the second",
             __FILE__, record_line);
    EXPECT(d && strstr(d, "stream race on device memory") && strstr(d, "kernel bump_first") &&
           strstr(d, "writes it") && strstr(d, want));
    if (d) fprintf(stderr, "reported:\n%s", d);
    cuemuClearDiagnostic();
    (void)cudaGetLastError();   // the synchronisation's error is also the last error

    // no event at all: the report says so
    read_first<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    bump_first<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalState);
    d = cuemuLastDiagnostic();
    EXPECT(d && strstr(d, "; stream 1 recorded no event after the first for stream 2 to wait for"));
    cuemuClearDiagnostic();

    OK(cudaEventDestroy(done));
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(c));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
#endif
    printf("race_hints: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
