// SPDX-License-Identifier: MIT
/*
 * Runtime test: streams (create, flags, priority, query, synchronize, wait event, destroy)
 * and events (create, flags, record, query, synchronize, elapsed time, destroy), with the
 * errors CUDA gives for bad handles and for events that cannot be timed.
 */
#include <cstdio>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
    cudaStream_t s1, s2, s3;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int least = 1, greatest = 1;
    OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(greatest <= least);
    OK(cudaStreamCreateWithPriority(&s3, cudaStreamDefault, greatest));
    unsigned int flags = 99;
    OK(cudaStreamGetFlags(s2, &flags));
    EXPECT(flags == cudaStreamNonBlocking);
    OK(cudaStreamGetFlags(s1, &flags));
    EXPECT(flags == cudaStreamDefault);
    int prio = 99;
    OK(cudaStreamGetPriority(s3, &prio));
    EXPECT(prio == greatest);
    EXPECT_ERR(cudaStreamCreateWithFlags(&s3, 0x40), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // Work issued to a stream; query and synchronize on every kind of stream handle.
    float *d = NULL;
    OK(cudaMalloc(&d, 1 << 20));
    OK(cudaMemsetAsync(d, 0, 1 << 20, s1));
    cudaError_t q = cudaStreamQuery(s1);
    EXPECT(q == cudaSuccess || q == cudaErrorNotReady);
    OK(cudaStreamSynchronize(s1));
    OK(cudaStreamQuery(s1));
    OK(cudaStreamSynchronize(0));
    OK(cudaStreamSynchronize(cudaStreamLegacy));
    OK(cudaStreamSynchronize(cudaStreamPerThread));

    // Events: timing between two records on one stream.
    cudaEvent_t start, stop, untimed, never;
    OK(cudaEventCreate(&start));
    OK(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
    OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    OK(cudaEventCreate(&never, cudaEventDefault));          // the C++ overload with flags
    OK(cudaEventRecord(start, s1));
    for (int i = 0; i < 20; i++) OK(cudaMemsetAsync(d, i, 1 << 20, s1));
    OK(cudaEventRecord(stop, s1));
    OK(cudaEventRecord(untimed));
    OK(cudaEventSynchronize(stop));
    OK(cudaEventQuery(stop));
    float ms = -1.0f;
    OK(cudaEventElapsedTime(&ms, start, stop));
    EXPECT(ms >= 0.0f && ms < 10000.0f);
    float back = 1.0f;
    OK(cudaEventElapsedTime(&back, stop, start));
    EXPECT(back <= 0.0f);

    // A stream waits on an event recorded in another.
    OK(cudaStreamWaitEvent(s2, stop, 0));
    OK(cudaStreamWaitEvent(s2, stop));
    OK(cudaStreamSynchronize(s2));

    // Elapsed time needs two timed, recorded events.
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, never), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventElapsedTime(NULL, start, stop), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventCreateWithFlags(&never, 0x80), cudaErrorInvalidValue);
    EXPECT_ERR(cudaEventCreateWithFlags(&never, cudaEventInterprocess), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    OK(cudaEventDestroy(start));
    OK(cudaEventDestroy(stop));
    OK(cudaEventDestroy(untimed));
    OK(cudaEventDestroy(never));
#ifdef __CUEMU__
    // Handles that were destroyed are refused (on a GPU this is undefined behaviour).
    EXPECT_ERR(cudaEventRecord(start, s1), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventDestroy(start), cudaErrorInvalidResourceHandle);
#endif
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaStreamDestroy(s3));
#ifdef __CUEMU__
    EXPECT_ERR(cudaStreamSynchronize(s1), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaMemcpyAsync(d, d, 4, cudaMemcpyDeviceToDevice, s2), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaStreamDestroy(s1), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
#endif
    (void)cudaGetLastError();
    OK(cudaFree(d));
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("streams_events: ok\n");
    return 0;
}
