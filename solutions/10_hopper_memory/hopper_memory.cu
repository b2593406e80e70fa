// SPDX-License-Identifier: MIT
/*
 * 10 hopper_memory: what a Hopper GPU and CUDA 13.0 add to memory.
 *
 * - L2 persistence (sm_80 and later): part of the L2 cache set aside for accesses a stream
 *   marks as "persisting", so that a small table read again and again is not evicted by data
 *   that streams past once (10.1).
 * - CUDA 13.0's batched managed-memory calls: one call prefetches (10.2), or discards and
 *   prefetches (10.3), many ranges; one call queues many copies (10.4). One driver call in
 *   place of a loop of them, and a discard says "the contents are dead": nothing migrates.
 * - Pools beyond device memory (CUDA 13.0): a stream-ordered pool of pinned *host* memory,
 *   which the device may use only once the pool grants it access (10.5), and the default pool
 *   of managed memory.
 * Thread block clusters with distributed shared memory are in clusters.cu.
 *
 * Build: make                 Run: make run CH=10 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 10.1 .. 10.5 here (grep -n "TODO(student)" *.cu)
 */
#include "tut_check.h"

#include <stdint.h>

// ---- kernels -----------------------------------------------------------------------------------

/* The lookup the L2 window is for: every element of a large array that streams past (read
   once) adds a value from a small table (read again and again, at scattered places). */
__global__ void lookup_kernel(const float *table, unsigned table_mask, const float *in,
                              float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        /* a multiplicative hash: neighbouring threads read far-apart table entries, so the
           table's reads are not coalesced and each one is an L2 (or DRAM) transaction */
        unsigned slot = (unsigned)(i * 2654435761u) & table_mask;
        out[i] = in[i] + table[slot];
    }
}

__global__ void scale_kernel(float *x, size_t n, float a)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] *= a;
}

/* Writes x[i] = base + i: every element, so nothing that was there before survives. */
__global__ void iota_kernel(float *x, size_t n, float base)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = base + (float)i;
}

static int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 2048 ? 2048 : (int)blocks;
}

// ---- streams (given) ---------------------------------------------------------------------------

/* A blocking stream: its work waits for the legacy default stream's, where the course's
   Python buffers are filled (tut.DeviceBuffer), and the batch calls refuse the legacy stream
   itself. */
extern "C" int stream_create(cudaStream_t *out)
{
    int status = 0;
    TUT_REQUIRE(out != NULL);
    CUDA_CHECK(cudaStreamCreate(out));
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

// ---- L2 persistence ----------------------------------------------------------------------------

/* What this device has: its L2 size, the most of it that may be set aside for persisting
   accesses, and the largest access policy window. */
extern "C" int l2_info(int *l2_bytes, int *persist_max, int *window_max)
{
    int status = 0, dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(l2_bytes, cudaDevAttrL2CacheSize, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(persist_max, cudaDevAttrMaxPersistingL2CacheSize, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(window_max, cudaDevAttrMaxAccessPolicyWindowSize, dev));
cleanup:
    return status;
}

/* The stream's access policy window and the device's set-aside, as CUDA reports them. */
extern "C" int l2_state(cudaStream_t s, unsigned long long *base, size_t *bytes, float *hit_ratio,
                        int *hit_prop, int *miss_prop, size_t *set_aside)
{
    int status = 0;
    cudaStreamAttrValue v;
    CUDA_CHECK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    *base = (unsigned long long)(uintptr_t)v.accessPolicyWindow.base_ptr;
    *bytes = v.accessPolicyWindow.num_bytes;
    *hit_ratio = v.accessPolicyWindow.hitRatio;
    *hit_prop = (int)v.accessPolicyWindow.hitProp;
    *miss_prop = (int)v.accessPolicyWindow.missProp;
    CUDA_CHECK(cudaDeviceGetLimit(set_aside, cudaLimitPersistingL2CacheSize));
cleanup:
    return status;
}

/* 10.1 (first half). Make [base, base + bytes) persist in L2 for the kernels of stream s:
   - set aside min(bytes, the device's persisting maximum) of L2 for persisting lines
     (cudaDeviceSetLimit with cudaLimitPersistingL2CacheSize; the set-aside is the device's,
     shared by every stream);
   - give the stream an access policy window over the table: at most the device's largest
     window, a fraction hit_ratio of its lines persisting (hitProp), the rest streaming
     (missProp: used once, evicted first). */
extern "C" int l2_persist(cudaStream_t s, const void *base, size_t bytes, float hit_ratio)
{
    int status = 0, l2 = 0, persist_max = 0, window_max = 0;
    status = l2_info(&l2, &persist_max, &window_max);   /* it records its own error */
    if (status != 0)
        goto cleanup;
    // @solution 10.1: set the persisting set-aside, then the stream's window over [base, base + bytes): both clamped to the device's maxima, hitProp persisting, missProp streaming (~12 lines)
    CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                                  bytes < (size_t)persist_max ? bytes : (size_t)persist_max));
    {   /* a block of its own: a goto may not jump over an initialised variable into its scope */
    cudaStreamAttrValue v = {};
    v.accessPolicyWindow.base_ptr = (void *)base;
    /* a window larger than the maximum is refused (cudaErrorInvalidValue), not clamped */
    v.accessPolicyWindow.num_bytes = bytes < (size_t)window_max ? bytes : (size_t)window_max;
    v.accessPolicyWindow.hitRatio = hit_ratio;
    v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CUDA_CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    }
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

/* 10.1 (second half). Undo it: the stream's window emptied (0 bytes), the lines that persist
   now made normal again (cudaCtxResetPersistingL2Cache: a window removed does not evict what
   it made persist, and those lines would keep their share of L2 from every later kernel), and
   the set-aside given back (limit 0). */
extern "C" int l2_persist_off(cudaStream_t s)
{
    int status = 0;
    // @solution 10.1: an empty window on s, cudaCtxResetPersistingL2Cache, then the set-aside back to 0 (~8 lines)
    {
    cudaStreamAttrValue v = {};   /* num_bytes 0: no window */
    v.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
    v.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
    CUDA_CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    }
    CUDA_CHECK(cudaCtxResetPersistingL2Cache());
    CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

/* out = in + table[hash(i)], on stream s (which may carry a window), not synchronised. */
extern "C" int lookup(const float *d_table, unsigned table_mask, const float *d_in, float *d_out,
                      size_t n, cudaStream_t s)
{
    int status = 0;
    lookup_kernel<<<grid_for(n), 256, 0, s>>>(d_table, table_mask, d_in, d_out, n);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- managed memory: where the pages are ------------------------------------------------------

static struct cudaMemLocation location_of(int device)
{
    struct cudaMemLocation l;
    l.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    l.id = device < 0 ? 0 : device;
    return l;
}

/* Where the last prefetch of [ptr, ptr + bytes) sent it: a device, cudaCpuDeviceId (-1) for the
   host, cudaInvalidDeviceId (-2) if its pages went to different places or were never sent. */
extern "C" int managed_last_prefetch(const void *ptr, size_t bytes, int *where)
{
    int status = 0;
    CUDA_CHECK(cudaMemRangeGetAttribute(where, sizeof *where,
                                        cudaMemRangeAttributeLastPrefetchLocation, (void *)ptr,
                                        bytes));
cleanup:
    return status;
}

/* One range prefetched to `device` (-1: the host) with the single call. */
extern "C" int prefetch_one(const void *ptr, size_t bytes, int device, cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, location_of(device), 0, s));
cleanup:
    return status;
}

/* x[i] = base + i over n floats of any memory the device may write, on stream s. */
extern "C" int iota(float *d_x, size_t n, float base, cudaStream_t s)
{
    int status = 0;
    iota_kernel<<<grid_for(n), 256, 0, s>>>(d_x, n, base);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

extern "C" int scale(float *d_x, size_t n, float a, cudaStream_t s)
{
    int status = 0;
    scale_kernel<<<grid_for(n), 256, 0, s>>>(d_x, n, a);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- CUDA 13.0's batches -----------------------------------------------------------------------
/* Built with a CUDA 12.x toolkit, which has none of these calls, the functions below that need
   one say so instead (TUT_NEEDS_CUDA13, common/tut_cuda_compat.h) and their tests skip. */

/* 10.2. One cudaMemPrefetchBatchAsync for `count` ranges of managed memory: ranges
   [0, split) to `device`, ranges [split, count) to the host. A batch names its destinations
   as a table of locations and, for each, the index of the first range it applies to (the
   first index 0, each greater than the one before, all below count): one entry when every
   range goes to the same place (split 0 or count), two otherwise. */
extern "C" int prefetch_batch(void **ptrs, size_t *sizes, size_t count, size_t split, int device,
                              cudaStream_t s)
{
    int status = 0;
    TUT_REQUIRE(count > 0 && split <= count);
#if TUT_HAS_CUDA13
    // @solution 10.2: fill locs/idxs (device from range 0 if split > 0, the host from range split if split < count) and make the one batch call (~13 lines)
    {
    struct cudaMemLocation locs[2];
    size_t idxs[2], nlocs = 0;
    if (split > 0) {
        locs[nlocs] = location_of(device);
        idxs[nlocs++] = 0;
    }
    if (split < count) {
        locs[nlocs] = location_of(-1);
        idxs[nlocs++] = split;
    }
    CUDA_CHECK(cudaMemPrefetchBatchAsync(ptrs, sizes, count, locs, idxs, nlocs, 0, s));
    }
    // @stub TUT_TODO();
    // @end
#else
    TUT_NEEDS_CUDA13("cudaMemPrefetchBatchAsync");
#endif
cleanup:
    return status;
}

/* 10.3. Scratch ranges whose contents are dead (the next kernel overwrites them all): one
   cudaMemDiscardAndPrefetchBatchAsync sends them to `device` without migrating what they
   hold. A plain prefetch would copy every dirty page over the link first. */
extern "C" int discard_prefetch_batch(void **ptrs, size_t *sizes, size_t count, int device,
                                      cudaStream_t s)
{
    int status = 0;
    struct cudaMemLocation loc = location_of(device);
    TUT_REQUIRE(count > 0);
#if TUT_HAS_CUDA13
    // @solution 10.3: one cudaMemDiscardAndPrefetchBatchAsync: every range to loc (~4 lines)
    {
    size_t first = 0;   /* one location, for the ranges from the first on */
    CUDA_CHECK(cudaMemDiscardAndPrefetchBatchAsync(ptrs, sizes, count, &loc, &first, 1, 0, s));
    }
    // @stub TUT_TODO();
    // @end
#else
    (void)loc;
    TUT_NEEDS_CUDA13("cudaMemDiscardAndPrefetchBatchAsync");
#endif
cleanup:
    return status;
}

/* 10.4. `count` copies in one cudaMemcpyBatchAsync on stream s (not the legacy default stream,
   which a batch refuses). Every copy needs attributes; one set applies to all of them: the
   source read in stream order (the sources may be written by earlier work in s). */
extern "C" int copy_batch(void **dsts, const void **srcs, size_t *sizes, size_t count,
                          cudaStream_t s)
{
    int status = 0;
    TUT_REQUIRE(count > 0);
#if TUT_HAS_CUDA13
    // @solution 10.4: the attributes (srcAccessOrder: stream order), then one cudaMemcpyBatchAsync (~6 lines)
    {
    struct cudaMemcpyAttributes attr = {};
    size_t first = 0;   /* one set of attributes, for the copies from the first on */
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    CUDA_CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, count, &attr, &first, 1, s));
    }
    // @stub TUT_TODO();
    // @end
#else
    TUT_NEEDS_CUDA13("cudaMemcpyBatchAsync");
#endif
cleanup:
    return status;
}

// ---- pools beyond device memory ----------------------------------------------------------------

/* 10.5. A stream-ordered pool of pinned host memory (CUDA 13.0: a pool whose location is the
   host) whose memory the kernels of `device` may use. A host pool's memory is the host's
   alone until cudaMemPoolSetAccess gives a device read-write access; a kernel that touches it
   before then faults. Host pools support no IPC handle type (handleTypes must be none). */
extern "C" int host_pool_create(cudaMemPool_t *out, int device)
{
    int status = 0;
    cudaMemPool_t pool = NULL;
    TUT_REQUIRE(out != NULL);
    *out = NULL;
    // @solution 10.5: props (pinned, host location, no handle types), cudaMemPoolCreate, then read-write access for device (~13 lines)
    {
    struct cudaMemPoolProps props = {};
    struct cudaMemAccessDesc access = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeHost;
    props.location.id = 0;   /* ignored for the host */
    CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = device;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
    }
    // @stub TUT_TODO();
    // @end
    *out = pool;
    pool = NULL;   /* the caller owns it now */
cleanup:
    if (pool != NULL)
        cudaMemPoolDestroy(pool);
    return status;
}

/* The default pool of managed memory (CUDA 13.0), with no preferred location: where the
   driver and toolkit have none, cudaErrorNotSupported, which Python reports as a skip. */
extern "C" int managed_pool(cudaMemPool_t *out)
{
    int status = 0;
#if TUT_HAS_CUDA13
    struct cudaMemLocation none = {};
    none.type = cudaMemLocationTypeNone;
    CUDA_CHECK(cudaMemGetDefaultMemPool(out, &none, cudaMemAllocationTypeManaged));
#else
    TUT_NEEDS_CUDA13("cudaMemGetDefaultMemPool");
#endif
cleanup:
    return status;
}

extern "C" int pool_destroy(cudaMemPool_t pool)
{
    int status = 0;
    CUDA_CHECK(cudaMemPoolDestroy(pool));
cleanup:
    return status;
}

/* Whether `device` may read and write the pool's memory (cudaMemPoolGetAccess). */
extern "C" int pool_access(cudaMemPool_t pool, int device, int *read_write)
{
    int status = 0;
    enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    struct cudaMemLocation loc = location_of(device);
    CUDA_CHECK(cudaMemPoolGetAccess(&flags, pool, &loc));
    *read_write = flags == cudaMemAccessFlagsProtReadWrite;
cleanup:
    return status;
}

extern "C" int pool_alloc(cudaMemPool_t pool, size_t bytes, cudaStream_t s, void **out)
{
    int status = 0;
    CUDA_CHECK(cudaMallocFromPoolAsync(out, bytes, pool, s));
cleanup:
    return status;
}

extern "C" int pool_free(void *ptr, cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaFreeAsync(ptr, s));
cleanup:
    return status;
}

/* What CUDA says a pointer is: cudaMemoryTypeHost (1), Device (2) or Managed (3). */
extern "C" int pointer_type(const void *ptr, int *type)
{
    int status = 0;
    struct cudaPointerAttributes a;
    CUDA_CHECK(cudaPointerGetAttributes(&a, ptr));
    *type = (int)a.type;
cleanup:
    return status;
}

/* The device attribute that says whether host pools are there (CUDA 13.0). */
extern "C" int host_pools_supported(int *yes)
{
    int status = 0;
#if TUT_HAS_CUDA13
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(yes, cudaDevAttrHostMemoryPoolsSupported, dev));
#else
    TUT_NEEDS_CUDA13("cudaDevAttrHostMemoryPoolsSupported");
#endif
cleanup:
    return status;
}
