// SPDX-License-Identifier: MIT
/*
 * 03 memcpy_and_streams, the benchmarks behind driver.py --bench: copy bandwidth, the cost of an
 * allocation, and the pipeline of memcpy_and_streams.cu timed as a whole. Kept apart so that
 * the lesson file stays about memory, not about timing. Linked into the same library.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>
#include <stdlib.h>

/* From memcpy_and_streams.cu (C linkage: one symbol, whatever the struct holds). */
typedef struct pipeline pipeline;
extern "C" int pipeline_run(pipeline *p, const float *h_x, float *h_y, size_t n, float a, float b);

// ---- benchmarks (driver.py --bench) -------------------------------------------------------

/* Two streams for every benchmark, created by the first one that needs them and kept: a program
   creates its streams once, at setup, not around every call. bench_release destroys them
   (driver.py calls it at exit). */
static cudaStream_t bench_streams[2] = {NULL, NULL};

static cudaError_t bench_stream(int which, cudaStream_t *out)
{
    cudaError_t err = cudaSuccess;
    if (bench_streams[which] == NULL)
        err = cudaStreamCreate(&bench_streams[which]);
    *out = bench_streams[which];
    return err;
}

extern "C" int bench_release(void)
{
    int status = 0;
    for (int i = 0; i < 2; i++) {
        cudaStream_t s = bench_streams[i];
        bench_streams[i] = NULL;
        if (s != NULL)
            CUDA_CHECK(cudaStreamDestroy(s));
    }
cleanup:
    return status;
}

/* One copy of `bytes` on a stream of the benchmarks', event-timed, `reps` times after a warm-up. With a
   pageable host buffer the events still bracket the copy: the staging happens inside it. */
extern "C" int bench_copy(void *dst, const void *src, size_t bytes, int kind, int reps,
                          float *times_ms)
{
    int status = 0;
    cudaStream_t stream = NULL;
    tut_timer t = {0};

    TUT_REQUIRE(kind >= 1 && kind <= 3);
    CUDA_CHECK(bench_stream(0, &stream));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, stream));
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, (cudaMemcpyKind)kind, stream));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    if (stream && status != 0)
        cudaStreamSynchronize(stream);   /* nothing queued may outlive the caller's buffers */
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

    CUDA_CHECK(bench_stream(0, &up));
    CUDA_CHECK(bench_stream(1, &down));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, up));
        CUDA_CHECK(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, down));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    if (status != 0) {   /* nothing queued may outlive the caller's buffers */
        if (up)
            cudaStreamSynchronize(up);
        if (down)
            cudaStreamSynchronize(down);
    }
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

/* ---- the stream timeline (tools/pictures.py draws it) ------------------------------------- */

/* The pipeline's work, y = a * x + b, in a kernel of this file's own (the lesson's kernel lives
   in memcpy_and_streams.cu). */
__global__ void timeline_kernel(float *buf, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        buf[i] = a * buf[i] + b;
}

/* The pipeline of 03.3 once more, with an event before and after each step of each chunk:
   stamps_ms[4 * c + j], j = 0 before its copy in, 1 after it (the kernel starts), 2 after the
   kernel, 3 after its copy out, all in ms from one start event. An event records when the GPU
   reached that point of its stream, so the picture shows what really overlapped. h_x and h_y
   must be pinned. At most max_chunks chunks are stamped; the rest run unrecorded. */
#define TIMELINE_MAX_STREAMS 8
extern "C" int bench_timeline(const float *h_x, float *h_y, size_t n, size_t chunk_elems,
                              int nstreams, float *stamps_ms, int max_chunks)
{
    int status = 0;
    cudaStream_t streams[TIMELINE_MAX_STREAMS] = {0};
    float *d_buf[TIMELINE_MAX_STREAMS] = {0};
    cudaEvent_t start = NULL, *ev = NULL;
    size_t nchunks = chunk_elems ? (n + chunk_elems - 1) / chunk_elems : 0;
    int stamped = 0;

    TUT_REQUIRE(nstreams >= 1 && nstreams <= TIMELINE_MAX_STREAMS && chunk_elems >= 1);
    TUT_REQUIRE(max_chunks >= 0);
    stamped = nchunks < (size_t)max_chunks ? (int)nchunks : max_chunks;
    ev = (cudaEvent_t *)calloc((size_t)stamped * 4 + 1, sizeof *ev);
    if (ev == NULL) {
        status = tut_record((int)cudaErrorMemoryAllocation, "calloc", __FILE__, __LINE__);
        goto cleanup;
    }
    for (int s = 0; s < nstreams; s++) {
        CUDA_CHECK(cudaStreamCreate(&streams[s]));
        CUDA_CHECK(cudaMalloc(&d_buf[s], chunk_elems * sizeof(float)));
    }
    for (int i = 0; i < 4 * stamped; i++)
        CUDA_CHECK(cudaEventCreate(&ev[i]));
    CUDA_CHECK(cudaEventCreate(&start));
    /* blocking streams: their work starts after this event on the legacy stream 0 */
    CUDA_CHECK(cudaEventRecord(start, 0));
    for (size_t first = 0, c = 0; first < n; first += chunk_elems, c++) {
        int s = (int)(c % (size_t)nstreams);
        size_t len = n - first < chunk_elems ? n - first : chunk_elems;
        bool stamp = c < (size_t)stamped;
        if (stamp)
            CUDA_CHECK(cudaEventRecord(ev[4 * c], streams[s]));
        CUDA_CHECK(cudaMemcpyAsync(d_buf[s], h_x + first, len * sizeof(float),
                                   cudaMemcpyHostToDevice, streams[s]));
        if (stamp)
            CUDA_CHECK(cudaEventRecord(ev[4 * c + 1], streams[s]));
        timeline_kernel<<<4096, 256, 0, streams[s]>>>(d_buf[s], len, 2.0f, 1.0f);
        CUDA_CHECK_LAUNCH();
        if (stamp)
            CUDA_CHECK(cudaEventRecord(ev[4 * c + 2], streams[s]));
        CUDA_CHECK(cudaMemcpyAsync(h_y + first, d_buf[s], len * sizeof(float),
                                   cudaMemcpyDeviceToHost, streams[s]));
        if (stamp)
            CUDA_CHECK(cudaEventRecord(ev[4 * c + 3], streams[s]));
    }
    for (int s = 0; s < nstreams; s++)
        CUDA_CHECK(cudaStreamSynchronize(streams[s]));
    for (int i = 0; i < 4 * stamped; i++)
        CUDA_CHECK(cudaEventElapsedTime(&stamps_ms[i], start, ev[i]));
cleanup:
    for (int s = 0; s < nstreams && s < TIMELINE_MAX_STREAMS; s++) {
        if (streams[s]) {
            cudaStreamSynchronize(streams[s]);   /* nothing may still use d_buf, h_x, h_y */
            cudaStreamDestroy(streams[s]);
        }
        cudaFree(d_buf[s]);
    }
    if (ev != NULL)
        for (int i = 0; i < 4 * stamped; i++)
            if (ev[i])
                cudaEventDestroy(ev[i]);
    free(ev);
    if (start)
        cudaEventDestroy(start);
    return status;
}
