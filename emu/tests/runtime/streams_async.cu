// SPDX-License-Identifier: MIT
/*
 * Runtime test (emulator only): asynchronous work is queued and runs only when the program must
 * see it, and the hazards the emulator can see are reported.
 *   - a result read before its synchronisation is stale (registered host memory a kernel writes);
 *   - a query says cudaErrorNotReady while work is queued, and the work still completes;
 *   - a host read of pinned memory that a queued copy will still write is reported, with the
 *     copy's call site, and the next call fails with cudaErrorIllegalState;
 *   - two streams writing one buffer with nothing ordering them: the second call fails;
 *   - the same with an event between them is legal;
 *   - cudaStreamNonBlocking work is not ordered by stream 0;
 *   - the stream log records the stream of each operation.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "rt_test.h"

#ifdef __CUEMU__
static int diag_has(const char *s) { return strstr(cuemuLastDiagnostic(), s) != NULL; }
#endif

__global__ void fill_kernel(float *p, int n, float v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

int main(void)
{
#ifndef __CUEMU__
    printf("streams_async: emulator only\n");
    return 77;
#else
    const int n = 4096;
    cudaStream_t s1, s2, nb;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));
    OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));

    // Stale before the synchronisation, right after it.
    static float host[4096];
    for (int i = 0; i < n; i++) host[i] = -1.0f;
    OK(cudaHostRegister(host, sizeof host, cudaHostRegisterDefault));
    fill_kernel<<<4, 256, 0, s1>>>(host, n, 3.0f);
    OK(cudaGetLastError());
    EXPECT(host[0] == -1.0f && host[n - 1] == -1.0f);      // not run yet
    EXPECT(cudaStreamQuery(s1) == cudaErrorNotReady);
    OK(cudaStreamSynchronize(s1));
    EXPECT(host[0] == 3.0f && host[n - 1] == 3.0f);
    OK(cudaStreamQuery(s1));

    // Non-blocking streams are not ordered by stream 0: a cudaMemcpy on stream 0 leaves nb's
    // work queued.
    fill_kernel<<<4, 256, 0, nb>>>(host, n, 4.0f);
    float *d = NULL, back = 0;
    OK(cudaMalloc(&d, n * sizeof(float)));
    OK(cudaMemset(d, 0, n * sizeof(float)));
    OK(cudaMemcpy(&back, d, sizeof back, cudaMemcpyDeviceToHost));
    EXPECT(back == 0.0f && host[0] == 3.0f);
    OK(cudaStreamSynchronize(nb));
    EXPECT(host[0] == 4.0f);
    OK(cudaHostUnregister(host));

    // The stream log: kernels on s1, s2, s1.
    cuemuStreamLogClear();
    fill_kernel<<<1, 32, 0, s1>>>(d, n, 1.0f);
    fill_kernel<<<1, 32, 0, s1>>>(d, n, 2.0f);
    long long ids[8];
    int kinds[8];
    EXPECT(cuemuStreamLog(ids, kinds, 8) == 2);
    EXPECT(ids[0] == ids[1] && ids[0] > 0 && kinds[0] == 1);
    OK(cudaDeviceSynchronize());

    // Two streams, one buffer, nothing between: the second call fails and names both.
    cuemuClearDiagnostic();
    OK(cudaMemsetAsync(d, 1, n * sizeof(float), s1));
    EXPECT_ERR(cudaMemsetAsync(d, 2, n * sizeof(float), s2), cudaErrorIllegalState);
    EXPECT(diag_has("stream race on device memory allocated at") && diag_has("streams_async.cu"));
    EXPECT(diag_has("recorded no event after the first for stream"));
    OK(cudaDeviceSynchronize());
    (void)cudaGetLastError();

    // The same with an event between them is legal.
    cudaEvent_t e;
    OK(cudaEventCreate(&e));
    OK(cudaMemsetAsync(d, 1, n * sizeof(float), s1));
    OK(cudaEventRecord(e, s1));
    OK(cudaStreamWaitEvent(s2, e, 0));
    OK(cudaMemsetAsync(d, 2, n * sizeof(float), s2));
    OK(cudaDeviceSynchronize());
    // An event recorded and never waited for: the race names the record, where the memory was
    // handed over and the wait belongs.
    cuemuClearDiagnostic();
    OK(cudaMemsetAsync(d, 1, n * sizeof(float), s1));
    const int record_line = __LINE__ + 1;
    OK(cudaEventRecord(e, s1));
    EXPECT_ERR(cudaMemsetAsync(d, 2, n * sizeof(float), s2), cudaErrorIllegalState);
    char rec[300];
    snprintf(rec, sizeof rec, "recorded an event after the first, at the cudaEventRecord at %s:%d, "
             "and stream", __FILE__, record_line);
    EXPECT(diag_has(rec));
    OK(cudaDeviceSynchronize());
    (void)cudaGetLastError();
    OK(cudaEventDestroy(e));

    // A host read of pinned memory a queued copy will still write.
    float *pinned = NULL;
    OK(cudaMallocHost(&pinned, n * sizeof(float)));
    const int copy_line = __LINE__ + 1;
    OK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s1));
    cuemuClearDiagnostic();
    volatile float early = pinned[7];                      // BUG: before cudaStreamSynchronize
    (void)early;
    char site[256];
    snprintf(site, sizeof site, "cudaMemcpyAsync at %s:%d", __FILE__, copy_line);
    EXPECT(diag_has("host read of pinned host memory") && diag_has(site));
    EXPECT_ERR(cudaStreamSynchronize(s1), cudaErrorIllegalState);
    OK(cudaDeviceReset());
    printf("streams_async: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
#endif
}
