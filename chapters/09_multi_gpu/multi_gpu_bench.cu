// SPDX-License-Identifier: MIT
/*
 * 09 multi_gpu, the benchmarks behind driver.py --bench: copies between two devices (with and
 * without peer access, both ways, from 4 bytes up) and the all-reduce, the ring of 09.5
 * against NCCL's, across message sizes. Kept apart so that the lesson file stays about
 * memory, not about timing. Linked into the same library.
 */
#include "tut_check.h"
#include "tut_timer.h"

/* From multi_gpu.cu (C linkage: one symbol, whatever the struct holds). */
typedef struct team team;
extern "C" int team_rank(team *t, int r, int *dev, cudaStream_t *stream, cudaEvent_t *event,
                         float **scratch);
extern "C" int ring_allreduce_queue(team *t, float *const *bufs, size_t n);
extern "C" int nccl_allreduce_queue(team *t, float *const *bufs, size_t n);

#define BENCH_MAX 8

/* y = x on dev, x read by the kernel from peer's memory over the link, one 4-byte load per
   thread (grid-stride): what a kernel that uses another device's memory directly gets, next
   to the copy engine's cudaMemcpyPeerAsync. Needs peer access from dev to peer (the caller's). */
__global__ void bench_pull_kernel(const float *x, float *y, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = x[i];
}

/* `bytes` of peer's memory brought to dev, on a stream of dev, between two events of dev,
   `reps` times after a warm-up: by the copy engine (by_kernel 0: cudaMemcpyPeerAsync; whether
   it goes straight over the link or through host memory is the peer-access state the caller
   set) or by bench_pull_kernel on dev (by_kernel 1: needs peer access from dev to peer). The
   source is filled (never time a copy of fresh memory: some drivers map it lazily). */
extern "C" int bench_peer_read(int dev, int peer, size_t bytes, int by_kernel, int reps,
                               float *times_ms)
{
    int status = 0, prev = -1, sms = 0;
    float *src = NULL, *dst = NULL;
    cudaStream_t stream = NULL;
    tut_timer t = {0};
    size_t n = bytes / sizeof(float);

    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(peer));
    CUDA_CHECK(cudaMalloc(&src, bytes));
    CUDA_CHECK(cudaMemset(src, 0x5A, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, stream));
        if (by_kernel) {
            bench_pull_kernel<<<8 * sms, 256, 0, stream>>>(src, dst, n);   /* 8 blocks per SM */
            CUDA_CHECK_LAUNCH();
        } else {
            CUDA_CHECK(cudaMemcpyPeerAsync(dst, dev, src, peer, bytes, stream));
        }
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (stream) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    tut_timer_free(&t);
    cudaFree(dst);
    if (src != NULL && cudaSetDevice(peer) == cudaSuccess)
        cudaFree(src);
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* One all-reduce of n floats per rank (which: 0 the ring, 1 NCCL), timed as a whole on rank
   0's device: a start event on rank 0's stream that every other rank's stream waits for, the
   all-reduce queued, then rank 0's stream waits for an event of every other rank and records
   the stop. The host queues while the devices work; nothing in between waits for the host. */
extern "C" int bench_allreduce(team *tm, float *const *bufs, size_t n, int ndev, int which,
                               int reps, float *times_ms)
{
    int status = 0, prev = -1;
    int dev[BENCH_MAX] = {0};
    cudaStream_t stream[BENCH_MAX] = {NULL};
    cudaEvent_t done[BENCH_MAX] = {NULL};
    tut_timer t = {0};

    TUT_REQUIRE(ndev >= 1 && ndev <= BENCH_MAX && (which == 0 || which == 1));
    CUDA_CHECK(cudaGetDevice(&prev));
    for (int r = 0; r < ndev; r++) {
        if ((status = team_rank(tm, r, &dev[r], &stream[r], NULL, NULL)) != 0)
            goto cleanup;
        CUDA_CHECK(cudaSetDevice(dev[r]));
        CUDA_CHECK(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaSetDevice(dev[0]));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(cudaSetDevice(dev[0]));
        CUDA_CHECK(tut_timer_start(&t, stream[0]));
        for (int r = 1; r < ndev; r++)
            CUDA_CHECK(cudaStreamWaitEvent(stream[r], t.start, 0));
        status = which == 0 ? ring_allreduce_queue(tm, bufs, n) : nccl_allreduce_queue(tm, bufs, n);
        if (status != 0)
            goto cleanup;   /* its own record says what failed */
        for (int r = 1; r < ndev; r++) {
            CUDA_CHECK(cudaSetDevice(dev[r]));
            CUDA_CHECK(cudaEventRecord(done[r], stream[r]));
            CUDA_CHECK(cudaStreamWaitEvent(stream[0], done[r], 0));
        }
        CUDA_CHECK(cudaSetDevice(dev[0]));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    for (int r = 0; r < ndev && r < BENCH_MAX; r++)
        if (stream[r] != NULL && cudaSetDevice(dev[r]) == cudaSuccess) {
            cudaStreamSynchronize(stream[r]);
            if (done[r] != NULL)
                cudaEventDestroy(done[r]);
        }
    if (ndev >= 1 && cudaSetDevice(dev[0]) == cudaSuccess)
        tut_timer_free(&t);
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}
