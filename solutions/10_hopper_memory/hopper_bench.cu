// SPDX-License-Identifier: MIT
/*
 * 10 hopper_memory, the benchmarks behind driver.py --bench: table lookups with and without an
 * L2 window, batched against looped prefetches and copies, discard-and-prefetch against a
 * prefetch of dirty pages, and pool-backed pinned and managed allocations against
 * cudaMallocHost and cudaMallocManaged. Linked into the same library; each sets up what it
 * times itself, outside the timed interval, and uses no exercise (it runs on any tree).
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>
#include <stdint.h>
#include <string.h>

/* Each element: 16 bytes read from a stream, 16 written, and a table value at a scattered
   place, the same for `spl` neighbouring elements (one table read per spl elements, a
   broadcast within the warp): 32 * spl bytes stream through L2 per table read, so between two
   reads of one table line about 2 * spl times the table's size passes through L2. */
__global__ void bench_lookup_kernel(const float *table, unsigned mask, const float4 *in,
                                    float4 *out, size_t n, unsigned spl)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float t = table[(unsigned)((i / spl) * 2654435761u) & mask];
        float4 v = in[i];
        out[i] = make_float4(v.x + t, v.y + t, v.z + t, v.w + t);
    }
}

static struct cudaMemLocation bench_where(int device)
{
    struct cudaMemLocation l;
    l.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    l.id = device < 0 ? 0 : device;
    return l;
}

/* n4 float4 elements stream past a table of table_floats (a power of two) floats. window 1:
   the table persists (set-aside and hit ratio as large as the device allows); 0: no window,
   after a reset of what persisted before. Times each launch. */
extern "C" int bench_lookup(size_t table_floats, size_t n4, unsigned spl, int window, int reps,
                            float *times_ms)
{
    int status = 0, dev = 0, persist_max = 0, window_max = 0;
    float *d_table = NULL;
    float4 *d_in = NULL, *d_out = NULL;
    cudaStream_t s = NULL;
    tut_timer t = {};
    cudaStreamAttrValue v = {};
    size_t table_bytes = table_floats * sizeof(float);
    TUT_REQUIRE(table_floats > 0 && (table_floats & (table_floats - 1)) == 0 && n4 > 0 && spl > 0);
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&persist_max, cudaDevAttrMaxPersistingL2CacheSize, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&window_max, cudaDevAttrMaxAccessPolicyWindowSize, dev));
    CUDA_CHECK(cudaMalloc(&d_table, table_bytes));
    CUDA_CHECK(cudaMalloc(&d_in, n4 * sizeof(float4)));
    CUDA_CHECK(cudaMalloc(&d_out, n4 * sizeof(float4)));
    CUDA_CHECK(cudaMemset(d_table, 0, table_bytes));
    CUDA_CHECK(cudaMemset(d_in, 0, n4 * sizeof(float4)));
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(tut_timer_init(&t));
    CUDA_CHECK(cudaCtxResetPersistingL2Cache());
    if (window) {
        size_t set_aside = table_bytes < (size_t)persist_max ? table_bytes : (size_t)persist_max;
        size_t span = table_bytes < (size_t)window_max ? table_bytes : (size_t)window_max;
        CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set_aside));
        v.accessPolicyWindow.base_ptr = d_table;
        v.accessPolicyWindow.num_bytes = span;
        /* more persisting lines than the set-aside holds would evict each other */
        v.accessPolicyWindow.hitRatio = (float)set_aside / (float)span;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        CUDA_CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    }
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, s));
        bench_lookup_kernel<<<2048, 256, 0, s>>>(d_table, (unsigned)(table_floats - 1), d_in,
                                                 d_out, n4, spl);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (s != NULL) {
        memset(&v, 0, sizeof v);
        cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v);
        cudaStreamSynchronize(s);
    }
    cudaCtxResetPersistingL2Cache();
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    tut_timer_free(&t);
    if (s != NULL)
        cudaStreamDestroy(s);
    cudaFree(d_table);
    cudaFree(d_in);
    cudaFree(d_out);
    return status;
}

/* `count` ranges of `each` bytes of one managed allocation, dirty on the host before each
   repetition (the host wrote every page), sent to `device`:
   mode 0  a loop of cudaMemPrefetchAsync, one per range
   mode 1  one cudaMemPrefetchBatchAsync
   mode 2  one cudaMemDiscardAndPrefetchBatchAsync: the contents are declared dead first
   mode 3  a loop of cudaMemPrefetchAsync of ranges already on the device (nothing moves: what
           the calls themselves cost)
   mode 4  one cudaMemPrefetchBatchAsync of the same
   Events on the stream around the calls (so the host's time to issue a loop counts). */
extern "C" int bench_prefetch(int mode, size_t count, size_t each, int device, int reps,
                              float *times_ms)
{
    int status = 0;
    char *m = NULL;
    void **ptrs = NULL;
    size_t *sizes = NULL;
    cudaStream_t s = NULL;
    tut_timer t = {};
    struct cudaMemLocation to = bench_where(device), host = bench_where(-1);
    TUT_REQUIRE(mode >= 0 && mode <= 4 && count > 0 && each > 0);
    ptrs = (void **)calloc(count, sizeof *ptrs);
    sizes = (size_t *)calloc(count, sizeof *sizes);
    TUT_REQUIRE(ptrs != NULL && sizes != NULL);
    CUDA_CHECK(cudaMallocManaged(&m, count * each));
    for (size_t i = 0; i < count; i++) {
        ptrs[i] = m + i * each;
        sizes[i] = each;
    }
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        if (mode <= 2) {
            CUDA_CHECK(cudaMemPrefetchAsync(m, count * each, host, 0, s));
            CUDA_CHECK(cudaStreamSynchronize(s));
            memset(m, i & 0x7F, count * each);   /* every page dirty on the host */
        } else {
            CUDA_CHECK(cudaMemPrefetchAsync(m, count * each, to, 0, s));
            CUDA_CHECK(cudaStreamSynchronize(s));
        }
        CUDA_CHECK(tut_timer_start(&t, s));
        if (mode == 0 || mode == 3) {
            for (size_t r = 0; r < count; r++)
                CUDA_CHECK(cudaMemPrefetchAsync(ptrs[r], sizes[r], to, 0, s));
        } else {
#if TUT_HAS_CUDA13
            size_t first = 0;   /* one location, for the ranges from the first on */
            if (mode == 1 || mode == 4)
                CUDA_CHECK(cudaMemPrefetchBatchAsync(ptrs, sizes, count, &to, &first, 1, 0, s));
            else
                CUDA_CHECK(cudaMemDiscardAndPrefetchBatchAsync(ptrs, sizes, count, &to, &first,
                                                               1, 0, s));
#else
            TUT_NEEDS_CUDA13(mode == 2 ? "cudaMemDiscardAndPrefetchBatchAsync"
                                       : "cudaMemPrefetchBatchAsync");
#endif
        }
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (s != NULL) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    tut_timer_free(&t);
    cudaFree(m);
    free(ptrs);
    free(sizes);
    return status;
}

/* `count` copies of `each` bytes from pinned host memory to device memory:
   mode 0  a loop of cudaMemcpyAsync;  mode 1  one cudaMemcpyBatchAsync. Events around. */
extern "C" int bench_copies(int mode, size_t count, size_t each, int reps, float *times_ms)
{
    int status = 0;
    char *h = NULL, *d = NULL;
    void **dsts = NULL;
    const void **srcs = NULL;
    size_t *sizes = NULL;
    cudaStream_t s = NULL;
    tut_timer t = {};
    TUT_REQUIRE((mode == 0 || mode == 1) && count > 0 && each > 0);
    dsts = (void **)calloc(count, sizeof *dsts);
    srcs = (const void **)calloc(count, sizeof *srcs);
    sizes = (size_t *)calloc(count, sizeof *sizes);
    TUT_REQUIRE(dsts != NULL && srcs != NULL && sizes != NULL);
    CUDA_CHECK(cudaMallocHost(&h, count * each));
    CUDA_CHECK(cudaMalloc(&d, count * each));
    memset(h, 1, count * each);
    /* the destinations in reverse order: not one contiguous copy in disguise */
    for (size_t i = 0; i < count; i++) {
        srcs[i] = h + i * each;
        dsts[i] = d + (count - 1 - i) * each;
        sizes[i] = each;
    }
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, s));
        if (mode == 0) {
            for (size_t c = 0; c < count; c++)
                CUDA_CHECK(cudaMemcpyAsync(dsts[c], srcs[c], sizes[c], cudaMemcpyHostToDevice,
                                           s));
        } else {
#if TUT_HAS_CUDA13
            struct cudaMemcpyAttributes attr = {};
            size_t first = 0;   /* one set of attributes, for the copies from the first on */
            attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            CUDA_CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attr, &first, 1, s));
#else
            TUT_NEEDS_CUDA13("cudaMemcpyBatchAsync");
#endif
        }
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (s != NULL) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    tut_timer_free(&t);
    cudaFreeHost(h);
    cudaFree(d);
    free(dsts);
    free(srcs);
    free(sizes);
    return status;
}

/* `count` allocate + free pairs of `bytes`, host clock per repetition (allocation is host
   work; the stream-ordered kinds end with a synchronisation, inside the interval):
   kind 0  cudaMallocHost + cudaFreeHost
   kind 1  cudaMallocFromPoolAsync + cudaFreeAsync from a pinned host pool (keeps all it got)
   kind 2  cudaMallocManaged + cudaFree
   kind 3  cudaMallocFromPoolAsync + cudaFreeAsync from the default managed pool */
extern "C" int bench_alloc(int kind, size_t bytes, int count, int reps, float *times_ms)
{
    int status = 0, dev = 0;
    cudaStream_t s = NULL;
    cudaMemPool_t pool = NULL, made = NULL;
    unsigned long long keep_all = UINT64_MAX, old_threshold = 0;
    struct cudaMemPoolProps props = {};
    struct cudaMemAccessDesc access = {};
    void *p = NULL;
    TUT_REQUIRE(kind >= 0 && kind <= 3 && count > 0 && bytes > 0);
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaStreamCreate(&s));
    if (kind == 1) {
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeHost;
        CUDA_CHECK(cudaMemPoolCreate(&made, &props));
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = dev;
        access.flags = cudaMemAccessFlagsProtReadWrite;
        CUDA_CHECK(cudaMemPoolSetAccess(made, &access, 1));
        pool = made;
    } else if (kind == 3) {
#if TUT_HAS_CUDA13
        struct cudaMemLocation none = {};
        none.type = cudaMemLocationTypeNone;
        CUDA_CHECK(cudaMemGetDefaultMemPool(&pool, &none, cudaMemAllocationTypeManaged));
#else
        TUT_NEEDS_CUDA13("cudaMemGetDefaultMemPool");
#endif
    }
    if (pool != NULL) {
        CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &old_threshold));
        CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    }
    for (int i = -1; i < reps; i++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int c = 0; c < count; c++) {
            if (kind == 0) {
                CUDA_CHECK(cudaMallocHost(&p, bytes));
                CUDA_CHECK(cudaFreeHost(p));
            } else if (kind == 2) {
                CUDA_CHECK(cudaMallocManaged(&p, bytes));
                CUDA_CHECK(cudaFree(p));
            } else {
                CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
                CUDA_CHECK(cudaFreeAsync(p, s));
            }
            p = NULL;
        }
        CUDA_CHECK(cudaStreamSynchronize(s));
        auto t1 = std::chrono::steady_clock::now();
        if (i >= 0)
            times_ms[i] = std::chrono::duration<float, std::milli>(t1 - t0).count();
    }
cleanup:
    if (s != NULL) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    if (pool != NULL) {
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &old_threshold);
        cudaMemPoolTrimTo(pool, 0);
    }
    if (made != NULL)
        cudaMemPoolDestroy(made);
    return status;
}
