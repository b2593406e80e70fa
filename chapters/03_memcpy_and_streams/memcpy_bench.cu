// SPDX-License-Identifier: MIT
/*
 * 03 memcpy_and_streams, the benchmarks behind driver.py --bench: copy bandwidth, the cost of an
 * allocation, and the pipeline of memcpy_and_streams.cu timed as a whole. Kept apart so that
 * the lesson file stays about memory, not about timing. Linked into the same library.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>

/* From memcpy_and_streams.cu (C linkage: one symbol, whatever the struct holds). */
typedef struct pipeline pipeline;
extern "C" int pipeline_run(pipeline *p, const float *h_x, float *h_y, size_t n, float a, float b);

// ---- benchmarks (driver.py --bench) -------------------------------------------------------

/* One copy of `bytes` on a stream of its own, event-timed, `reps` times after a warm-up. With a
   pageable host buffer the events still bracket the copy: the staging happens inside it. */
extern "C" int bench_copy(void *dst, const void *src, size_t bytes, int kind, int reps,
                          float *times_ms)
{
    int status = 0;
    cudaStream_t stream = NULL;
    tut_timer t = {0};

    TUT_REQUIRE(kind >= 1 && kind <= 3);
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, stream));
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, (cudaMemcpyKind)kind, stream));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    if (stream)
        cudaStreamDestroy(stream);
    return status;
}

/* A host-to-device and a device-to-host copy of `bytes` each, on two streams at once, between
   two events on the legacy stream 0 (blocking streams: the start event precedes both copies and
   the stop event follows both). PCIe is full duplex and each direction has its own copy engine,
   so the two can overlap completely. h_src and h_dst must be pinned, or nothing overlaps. */
extern "C" int bench_copy_both(void *d_dst, const void *h_src, void *h_dst, const void *d_src,
                               size_t bytes, int reps, float *times_ms)
{
    int status = 0;
    cudaStream_t up = NULL, down = NULL;
    tut_timer t = {0};

    CUDA_CHECK(cudaStreamCreate(&up));
    CUDA_CHECK(cudaStreamCreate(&down));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, up));
        CUDA_CHECK(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, down));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    if (up)
        cudaStreamDestroy(up);
    if (down)
        cudaStreamDestroy(down);
    return status;
}

/* An allocation and its free, `reps` times after a warm-up pair: kind 0 = cudaMalloc +
   cudaFree, 1 = cudaMallocHost + cudaFreeHost (every page locked, then unlocked, by the OS).
   A host clock is right here: both calls return only when their work is done. */
extern "C" int bench_alloc_free(int kind, size_t bytes, int reps, float *times_ms)
{
    int status = 0;
    void *p = NULL;

    TUT_REQUIRE(kind == 0 || kind == 1);
    for (int i = -1; i < reps; i++) {
        auto start = std::chrono::steady_clock::now();
        if (kind == 0) {
            CUDA_CHECK(cudaMalloc(&p, bytes));
            CUDA_CHECK(cudaFree(p));
        } else {
            CUDA_CHECK(cudaMallocHost(&p, bytes));
            CUDA_CHECK(cudaFreeHost(p));
        }
        p = NULL;
        auto stop = std::chrono::steady_clock::now();
        if (i >= 0)
            times_ms[i] = std::chrono::duration<float, std::milli>(stop - start).count();
    }
cleanup:
    if (p != NULL)
        kind == 0 ? cudaFree(p) : cudaFreeHost(p);
    return status;
}

/* pipeline_run between two events on the legacy default stream 0: the pipeline's streams are
   blocking streams, so the start event is passed before any of their work begins and the stop
   event only after all of it has finished. */
extern "C" int bench_pipeline(pipeline *p, const float *h_x, float *h_y, size_t n, float a,
                              float b, int reps, float *times_ms)
{
    int status = 0;
    tut_timer t = {0};

    TUT_REQUIRE(p != NULL);
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, 0));
        status = pipeline_run(p, h_x, h_y, n, a, b);
        if (status != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}
