// SPDX-License-Identifier: MIT
/*
 * tut_timer.h: time GPU work with CUDA events, never with a host clock.
 *
 * Events are recorded into the stream itself, so the elapsed time is what the GPU spent between
 * them, not how long the CPU took to queue the work. tut_timer_elapsed_ms waits for the stop event.
 *
 *     tut_timer t = {0};
 *     CUDA_CHECK(tut_timer_init(&t));
 *     CUDA_CHECK(tut_timer_start(&t, stream));
 *     kernel<<<grid, block, 0, stream>>>(...);
 *     CUDA_CHECK(tut_timer_stop(&t));
 *     CUDA_CHECK(tut_timer_elapsed_ms(&t, &ms));
 * cleanup:
 *     tut_timer_free(&t);          // safe on a zeroed timer
 */
#ifndef TUT_TIMER_H
#define TUT_TIMER_H

#include <cuda_runtime.h>

typedef struct {
    cudaEvent_t  start, stop;
    cudaStream_t stream;
} tut_timer;

static inline cudaError_t tut_timer_init(tut_timer *t)
{
    cudaError_t err = cudaEventCreate(&t->start);
    if (err == cudaSuccess) err = cudaEventCreate(&t->stop);
    return err;
}

static inline cudaError_t tut_timer_start(tut_timer *t, cudaStream_t stream)
{
    t->stream = stream;
    return cudaEventRecord(t->start, stream);
}

static inline cudaError_t tut_timer_stop(tut_timer *t)
{
    return cudaEventRecord(t->stop, t->stream);
}

static inline cudaError_t tut_timer_elapsed_ms(tut_timer *t, float *ms)
{
    cudaError_t err = cudaEventSynchronize(t->stop);
    if (err == cudaSuccess) err = cudaEventElapsedTime(ms, t->start, t->stop);
    return err;
}

static inline void tut_timer_free(tut_timer *t)
{
    if (t->start) cudaEventDestroy(t->start);
    if (t->stop) cudaEventDestroy(t->stop);
    t->start = t->stop = NULL;
}

#endif
