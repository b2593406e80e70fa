// SPDX-License-Identifier: MIT
/*
 * 07 memory_pools, part 2: CUDA's own stream-ordered allocator (cudaMallocAsync,
 * cudaMallocFromPoolAsync, cudaFreeAsync on a cudaMemPool_t), exercise 07.5, the kernels and
 * streams the tests use, and the benchmarks behind driver.py --bench. Linked into the same
 * library as memory_pools.cu (the pool you write).
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>
#include <stdint.h>
#include <string.h>

/* From memory_pools.cu (C linkage: one symbol, whatever the struct holds). */
struct tpool;
extern "C" int tpool_alloc(struct tpool *p, size_t bytes, cudaStream_t stream, void **out);
extern "C" int tpool_free(struct tpool *p, void *ptr);
extern "C" int tpool_free_async(struct tpool *p, void *ptr, cudaStream_t stream);

// ---- kernels ------------------------------------------------------------------------------

/* Enough blocks of 256 to cover n, capped: a grid-stride loop does the rest. */
static int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

/* Every word of a block gets the block's id: reading it back shows whether two blocks overlap
   (the later fill wins) or a block was handed out twice. */
__global__ void fill_u32_kernel(unsigned *p, size_t n, unsigned value)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = value;
}

/* The cross-stream test's long user of a block: write `id`, keep the block for `spin` clock
   ticks, then check that it still holds `id`. Another stream that reuses the block before this
   kernel ends overwrites it and shows up in *mismatches. The re-read is volatile: otherwise the
   compiler may reuse the value it just stored instead of loading it again. */
__global__ void hold_and_check_kernel(unsigned *p, size_t n, unsigned id, long long spin,
                                      unsigned *mismatches)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = first; i < n; i += stride)
        p[i] = id;
    long long start = clock64();
    while (clock64() - start < spin) {
    }
    const volatile unsigned *again = p;
    for (size_t i = first; i < n; i += stride)
        if (again[i] != id)
            atomicAdd(mismatches, 1u);
}

/* One step of the chain the workloads run: scratch = c * x + s, then x = x + 0.5 * scratch.
   The scratch buffer lives for one step only: the temporary a pool exists for. */
__global__ void chain_scratch_kernel(const float *x, float *scratch, size_t n, float c, float s)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        scratch[i] = c * x[i] + s;
}

__global__ void chain_update_kernel(float *x, const float *scratch, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = x[i] + 0.5f * scratch[i];
}

// ---- host entry points: streams and kernels for the tests ------------------------------------

/* Non-blocking: the stream does not wait for the legacy default stream (nor it for this one),
   so two such streams really run side by side. A synchronous cudaMemcpy does not wait for it
   either: synchronise the stream before reading its results. */
extern "C" int stream_create(cudaStream_t *out)
{
    int status = 0;
    TUT_REQUIRE(out != NULL);
    CUDA_CHECK(cudaStreamCreateWithFlags(out, cudaStreamNonBlocking));
cleanup:
    return status;
}

extern "C" int stream_destroy(cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaStreamDestroy(s));
cleanup:
    return status;
}

extern "C" int stream_synchronize(cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaStreamSynchronize(s));
cleanup:
    return status;
}

extern "C" int fill_u32(void *d, size_t n, unsigned value, cudaStream_t stream)
{
    int status = 0;
    if (n == 0)
        return 0;
    fill_u32_kernel<<<grid_for(n), 256, 0, stream>>>((unsigned *)d, n, value);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* One block of threads: the kernel leaves the rest of the GPU free for another stream. */
extern "C" int hold_and_check(void *d, size_t n, unsigned id, long long spin,
                              unsigned *d_mismatches, cudaStream_t stream)
{
    int status = 0;
    hold_and_check_kernel<<<1, 256, 0, stream>>>((unsigned *)d, n, id, spin, d_mismatches);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* One chain step on the legacy default stream, not waited for: the Python caching allocator's
   loop calls it with a scratch buffer it got from its cache. */
extern "C" int chain_step(float *d_x, float *d_scratch, size_t n, float c, float s)
{
    int status = 0;
    if (n == 0)
        return 0;
    chain_scratch_kernel<<<grid_for(n), 256>>>(d_x, d_scratch, n, c, s);
    CUDA_CHECK_LAUNCH();
    chain_update_kernel<<<grid_for(n), 256>>>(d_x, d_scratch, n);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- lesson: CUDA's own pools ---------------------------------------------------------------

/* Devices (and drivers) without stream-ordered allocation say 0 here; the chapter then skips
   what needs it, with exit code 77. */
extern "C" int pools_supported(int *yes)
{
    int status = 0, dev = 0;
    *yes = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(yes, cudaDevAttrMemoryPoolsSupported, dev));
cleanup:
    return status;
}

/* The pool cudaMallocAsync uses unless told otherwise. It exists from the start and cannot be
   destroyed; its release threshold is 0 until someone sets it. */
extern "C" int default_pool(cudaMemPool_t *out)
{
    int status = 0, dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(out, dev));
cleanup:
    return status;
}

/* out = {reserved current, reserved high, used current, used high, release threshold}.
   Reserved: what the pool holds from the driver; used: what is allocated from it now. */
extern "C" int mempool_stats(cudaMemPool_t pool, unsigned long long *out)
{
    int status = 0;
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &out[0]));
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &out[1]));
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &out[2]));
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &out[3]));
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &out[4]));
cleanup:
    return status;
}

extern "C" int mempool_set_threshold(cudaMemPool_t pool, unsigned long long bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes));
cleanup:
    return status;
}

/* High-water marks can only be reset, by setting them to 0; they then grow again from there. */
extern "C" int mempool_reset_high(cudaMemPool_t pool)
{
    int status = 0;
    unsigned long long zero = 0;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
cleanup:
    return status;
}

/* Asks the pool to give unused reserve back to the driver now. `keep` is a floor, not a
   target: the pool keeps at least `keep` bytes, and releases only what it can safely: memory
   that backs a live allocation stays (the driver reserves in chunks larger than the blocks, so
   one live block can keep its whole chunk), and so may memory freed by a cudaFreeAsync that
   the host has not yet seen complete. */
extern "C" int mempool_trim(cudaMemPool_t pool, size_t keep)
{
    int status = 0;
    CUDA_CHECK(cudaMemPoolTrimTo(pool, keep));
cleanup:
    return status;
}

extern "C" int mempool_destroy(cudaMemPool_t pool)
{
    int status = 0;
    CUDA_CHECK(cudaMemPoolDestroy(pool));
cleanup:
    return status;
}

/* `count` blocks of `bytes` from `pool` on `stream`, written, then all freed on the stream;
   with sync, the stream is synchronised at the end, which is when a pool gives back whatever
   it holds above its release threshold. */
#define ROUNDTRIP_MAX 64
extern "C" int mempool_roundtrip(cudaMemPool_t pool, size_t bytes, int count,
                                 cudaStream_t stream, int sync)
{
    int status = 0;
    void *d[ROUNDTRIP_MAX] = {0};

    TUT_REQUIRE(count >= 0 && count <= ROUNDTRIP_MAX);
    for (int i = 0; i < count; i++) {
        CUDA_CHECK(cudaMallocFromPoolAsync(&d[i], bytes, pool, stream));
        CUDA_CHECK(cudaMemsetAsync(d[i], i, bytes, stream));
    }
cleanup:
    for (int i = 0; i < count && i < ROUNDTRIP_MAX; i++)
        if (d[i] != NULL)
            cudaFreeAsync(d[i], stream);
    if (status == 0 && sync) {
        cudaError_t err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess)
            status = tut_record((int)err, "cudaStreamSynchronize(stream)", __FILE__, __LINE__);
    }
    return status;
}

/* The reuse policies, seen from addresses: a block freed on s1 asked for again on s2, with or
   without s2 first waiting (cudaStreamWaitEvent) for an event recorded on s1 after the free.
   addrs = {first block, second block}. The pool alone decides whether it hands out the same
   block; it never hands s2 a block that s1's queued work may still use. */
extern "C" int mempool_cross_stream(cudaMemPool_t pool, size_t bytes, cudaStream_t s1,
                                    cudaStream_t s2, int wait, long long spin,
                                    unsigned long long *addrs)
{
    int status = 0;
    void *a = NULL, *b = NULL;
    unsigned *d_count = NULL;
    cudaEvent_t freed = NULL;

    CUDA_CHECK(cudaMalloc(&d_count, sizeof(unsigned)));
    CUDA_CHECK(cudaMemsetAsync(d_count, 0, sizeof(unsigned), s1));   /* the kernel counts into it */
    CUDA_CHECK(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming));
    CUDA_CHECK(cudaMallocFromPoolAsync(&a, bytes, pool, s1));
    addrs[0] = (unsigned long long)(uintptr_t)a;
    hold_and_check_kernel<<<1, 256, 0, s1>>>((unsigned *)a, bytes / 4, 1u, spin, d_count);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFreeAsync(a, s1));
    a = NULL;   /* freed: a failed record or wait below leaks nothing */
    if (wait) {
        CUDA_CHECK(cudaEventRecord(freed, s1));
        CUDA_CHECK(cudaStreamWaitEvent(s2, freed, 0));
    }
    CUDA_CHECK(cudaMallocFromPoolAsync(&b, bytes, pool, s2));
    addrs[1] = (unsigned long long)(uintptr_t)b;
    CUDA_CHECK(cudaFreeAsync(b, s2));
    b = NULL;
cleanup:
    /* a block not freed yet (the launch or its cudaFreeAsync failed): freed on its own stream,
       after the work queued there */
    if (a != NULL)
        cudaFreeAsync(a, s1);
    if (b != NULL)
        cudaFreeAsync(b, s2);
    cudaStreamSynchronize(s1);
    cudaStreamSynchronize(s2);
    if (freed != NULL)
        cudaEventDestroy(freed);
    cudaFree(d_count);
    return status;
}

// ---- exercise 07.5: stream-ordered allocation from a pool of your own --------------------------

/* A pool for device memory on the current device that keeps up to `threshold` bytes across
   synchronisations. With the default threshold, 0, every synchronisation hands all unused
   memory back to the driver, and the next allocation pays for it again. */
extern "C" int mempool_create(cudaMemPool_t *out, unsigned long long threshold)
{
    int status = 0, dev = 0;
    cudaMemPool_t pool = NULL;
    struct cudaMemPoolProps props;

    TUT_REQUIRE(out != NULL);
    *out = NULL;
    memset(&props, 0, sizeof props);   /* unused fields must be zero */
    CUDA_CHECK(cudaGetDevice(&dev));
    // TODO(student) 07.5: ordinary device memory: props.allocType = cudaMemAllocationTypePinned, props.location = {cudaMemLocationTypeDevice, dev}; cudaMemPoolCreate into pool, then set its cudaMemPoolAttrReleaseThreshold to threshold (~6 lines)
    TUT_TODO();
    *out = pool;
    pool = NULL;
cleanup:
    if (pool != NULL)
        cudaMemPoolDestroy(pool);
    return status;
}

/* Chapter 02's loop made stream-ordered: `steps` chain steps on h_x, each with its own scratch
   buffer of n floats from `pool`, all queued on `stream` with no synchronisation until the
   result is copied out. h_y gets the result. */
extern "C" int scratch_chain(const float *h_x, float *h_y, size_t n, int steps, float c,
                             cudaMemPool_t pool, cudaStream_t stream)
{
    int status = 0;
    float *d_x = NULL, *d_s = NULL;
    size_t bytes = n * sizeof(float);

    TUT_REQUIRE(steps >= 0);
    if (n == 0)
        return 0;
    CUDA_CHECK(cudaMallocFromPoolAsync(&d_x, bytes, pool, stream));
    CUDA_CHECK(cudaMemcpyAsync(d_x, h_x, bytes, cudaMemcpyHostToDevice, stream));
    for (int s = 0; s < steps; s++) {
        // TODO(student) 07.5: d_s from cudaMallocFromPoolAsync(&d_s, bytes, pool, stream); chain_scratch_kernel(d_x, d_s, n, c, (float)s) then chain_update_kernel(d_x, d_s, n), both on `stream`, each checked; cudaFreeAsync(d_s, stream) and d_s = NULL (~8 lines)
        TUT_TODO();
    }
    CUDA_CHECK(cudaMemcpyAsync(h_y, d_x, bytes, cudaMemcpyDeviceToHost, stream));
cleanup:
    if (d_s != NULL)
        cudaFreeAsync(d_s, stream);
    if (d_x != NULL)
        cudaFreeAsync(d_x, stream);
    /* h_y is pageable and owned by Python: wait until the copy into it is done, on every path */
    cudaError_t err = cudaStreamSynchronize(stream);
    if (status == 0 && err != cudaSuccess)
        status = tut_record((int)err, "cudaStreamSynchronize(stream)", __FILE__, __LINE__);
    return status;
}

// ---- benchmarks (driver.py --bench) -------------------------------------------------------

enum { ALLOC_CUDA_MALLOC = 0, ALLOC_CUDA_ASYNC = 1, ALLOC_TPOOL = 2, ALLOC_TPOOL_ASYNC = 3,
       ALLOC_NONE = 4 };

/* One allocation and its free, by `kind`, for work on `stream`. ALLOC_CUDA_ASYNC uses the
   device's current pool (the default one unless changed). */
static int bench_alloc(int kind, struct tpool *tp, size_t bytes, cudaStream_t stream, void **d)
{
    int status = 0;
    if (kind == ALLOC_CUDA_MALLOC)
        CUDA_CHECK(cudaMalloc(d, bytes));
    else if (kind == ALLOC_CUDA_ASYNC)
        CUDA_CHECK(cudaMallocAsync(d, bytes, stream));
    else
        status = tpool_alloc(tp, bytes, stream, d);
cleanup:
    return status;
}

static int bench_free(int kind, struct tpool *tp, void *d, cudaStream_t stream)
{
    int status = 0;
    if (kind == ALLOC_CUDA_MALLOC)
        CUDA_CHECK(cudaFree(d));
    else if (kind == ALLOC_CUDA_ASYNC)
        CUDA_CHECK(cudaFreeAsync(d, stream));
    else if (kind == ALLOC_TPOOL)
        status = tpool_free(tp, d);
    else
        status = tpool_free_async(tp, d, stream);
cleanup:
    return status;
}

/* `pairs` allocate + free pairs of `bytes`, per repetition, after one untimed repetition.
   The host clock is right here: what is measured is the host's cost of the calls (cudaMalloc
   and cudaFree return only when done), and each repetition ends by synchronising the stream,
   so any work the calls queued is counted too. */
extern "C" int bench_alloc_pairs(int kind, size_t bytes, int pairs, int reps, float *times_ms,
                                 struct tpool *tp, cudaStream_t stream)
{
    int status = 0;
    void *d = NULL;

    TUT_REQUIRE(kind >= ALLOC_CUDA_MALLOC && kind <= ALLOC_TPOOL_ASYNC && pairs > 0);
    for (int r = -1; r < reps; r++) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < pairs; i++) {
            status = bench_alloc(kind, tp, bytes, stream, &d);
            if (status != 0)
                goto cleanup;
            status = bench_free(kind, tp, d, stream);
            d = NULL;
            if (status != 0)
                goto cleanup;
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        auto stop = std::chrono::steady_clock::now();
        if (r >= 0)
            times_ms[r] = std::chrono::duration<float, std::milli>(stop - start).count();
    }
cleanup:
    return status;
}

/* The end-to-end workload: `steps` chain steps on n floats, each with a scratch buffer from
   `kind` (ALLOC_NONE: one buffer made before the timing, the floor), all on `stream`. Timed
   with events on the stream: with cudaMalloc the GPU sits idle while the host allocates, and
   that idle time is between the events too. */
extern "C" int bench_chain(int kind, size_t n, int steps, int reps, float *times_ms,
                           struct tpool *tp, cudaStream_t stream)
{
    int status = 0;
    float *d_x = NULL, *d_keep = NULL;
    void *d_s = NULL;
    size_t bytes = n * sizeof(float);
    tut_timer t = {0};

    /* not ALLOC_TPOOL: its free says the GPU is done with the block, and here it is not */
    TUT_REQUIRE(kind >= ALLOC_CUDA_MALLOC && kind <= ALLOC_NONE && kind != ALLOC_TPOOL && n > 0);
    CUDA_CHECK(cudaMalloc(&d_x, bytes));
    CUDA_CHECK(cudaMalloc(&d_keep, bytes));
    CUDA_CHECK(cudaMemsetAsync(d_x, 0x3f, bytes, stream));   /* non-zero data */
    CUDA_CHECK(tut_timer_init(&t));
    for (int r = -1; r < reps; r++) {   /* r = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, stream));
        for (int s = 0; s < steps; s++) {
            if (kind == ALLOC_NONE)
                d_s = d_keep;
            else if ((status = bench_alloc(kind, tp, bytes, stream, &d_s)) != 0)
                goto cleanup;
            chain_scratch_kernel<<<grid_for(n), 256, 0, stream>>>(d_x, (float *)d_s, n,
                                                                  1e-3f, 0.0f);
            CUDA_CHECK_LAUNCH();
            chain_update_kernel<<<grid_for(n), 256, 0, stream>>>(d_x, (float *)d_s, n);
            CUDA_CHECK_LAUNCH();
            if (kind != ALLOC_NONE && (status = bench_free(kind, tp, d_s, stream)) != 0)
                goto cleanup;
            d_s = NULL;
        }
        CUDA_CHECK(tut_timer_lap(&t, r, times_ms));
    }
cleanup:
    if (d_s != NULL && kind != ALLOC_NONE)   /* a launch failed between its alloc and free */
        bench_free(kind, tp, d_s, stream);
    cudaStreamSynchronize(stream);
    tut_timer_free(&t);
    cudaFree(d_x);
    cudaFree(d_keep);
    return status;
}
