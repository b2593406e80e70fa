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

/* Ends repetition i of a timed loop that starts at i = -1, the untimed warm-up:
       for (int i = -1; i < reps; i++) {
           CUDA_CHECK(tut_timer_start(&t, stream));
           ... the work ...
           CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
       }
   stops the timer and, from i = 0 on, stores that repetition's time in times_ms[i]. */
static inline cudaError_t tut_timer_lap(tut_timer *t, int i, float *times_ms)
{
    cudaError_t err = tut_timer_stop(t);
    if (err == cudaSuccess && i >= 0)
        err = tut_timer_elapsed_ms(t, &times_ms[i]);
    return err;
}

static inline void tut_timer_free(tut_timer *t)
{
    if (t->start) cudaEventDestroy(t->start);
    if (t->stop) cudaEventDestroy(t->stop);
    t->start = t->stop = NULL;
}

#endif
