/* SPDX-License-Identifier: MIT */
/*
 * batch.c: CUDA 13.0's batched memory calls (cuemu_cuda13_memory.h). A batch is checked as a
 * whole first (the checks CUDA 13.0's documentation gives: arrays of one length, location or
 * attribute indices that start at 0 and grow, flags 0, not the legacy default stream), then
 * each item goes through its single form (cudaMemPrefetchAsync, cudaMemcpyAsync), so that an
 * item gets exactly the checks and diagnoses it would get alone. An item refused there stops
 * the batch at that item.
 *
 * The stream log (cuemuStreamLog) shows each batch as one entry of kind 14 (RT_LOG_BATCH,
 * detail: the number of items) before its items, so a test can tell one batch from a loop of
 * single calls; a discard is kind 13 (RT_LOG_DISCARD) per range. A discarded range is
 * poisoned (0xFF bytes) in stream order: CUDA says its contents are indeterminate until it is
 * written or prefetched, and a program that reads it before then reads NaNs here.
 */
#include <string.h>
#include "rt_internal.h"

/* The batch call's own line (cuemu_site, set by the caller's macro), handed to each item in
   turn: a report on an item names the program's batch call, not this file. */
typedef struct { const char *file; int line; } batch_site;

static batch_site site_take(void)
{
    batch_site b;
    rt_site_take(&b.file, &b.line);
    return b;
}

static void site_give(batch_site b)
{
    if (b.file) cuemu_site(b.file, b.line);
}

/* The checks every batch call makes before it looks at an item. */
static cudaError_t batch_common(void **ptrs, size_t *sizes, size_t count, unsigned long long flags,
                                cudaStream_t stream, const char *api)
{
    if (stream == 0 || stream == cudaStreamLegacy) {
        cuemu_diag("%s: the legacy default stream is refused (CUDA 13.0: \"must not be legacy "
                   "NULL stream\"): pass a created stream", api);
        return cudaErrorInvalidValue;
    }
    if (!rt_stream_valid(stream)) return cudaErrorInvalidResourceHandle;
    if (flags != 0 || count == 0 || !ptrs || !sizes) return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* idxs[k] is the first item locs[k] (or attrs[k]) applies to: 0 first, then growing, all
   below count, and no more entries than items. */
static cudaError_t batch_indices(const void *table, const size_t *idxs, size_t n, size_t count,
                                 const char *api, const char *what)
{
    if (n == 0 || n > count || !table || !idxs) {
        cuemu_diag("%s: %zu %s for %zu items (must be 1..count, with their index array)", api, n,
                   what, count);
        return cudaErrorInvalidValue;
    }
    for (size_t k = 0; k < n; k++) {
        int bad = k == 0 ? idxs[0] != 0 : idxs[k] <= idxs[k - 1];
        if (bad || idxs[k] >= count) {
            cuemu_diag("%s: index %zu of the %s is %zu: the first must be 0, each one greater "
                       "than the one before, all below count (%zu)", api, k, what, idxs[k],
                       count);
            return cudaErrorInvalidValue;
        }
    }
    return cudaSuccess;
}

/* Which entry of a (table, idxs) pair applies to item i. */
static size_t entry_for(const size_t *idxs, size_t n, size_t i)
{
    size_t k = 0;
    while (k + 1 < n && idxs[k + 1] <= i) k++;
    return k;
}

static cudaError_t prefetch_items(void **dptrs, size_t *sizes, size_t count,
                                  struct cudaMemLocation *locs, size_t *idxs, size_t nlocs,
                                  cudaStream_t stream)
{
    for (size_t i = 0; i < count; i++) {
        cudaError_t e = (cudaMemPrefetchAsync)(dptrs[i], sizes[i], locs[entry_for(idxs, nlocs, i)],
                                             0, stream);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

static cudaError_t discard_items(void **dptrs, size_t *sizes, size_t count, cudaStream_t stream,
                                 const char *api, batch_site at)
{
    /* managed memory only, as for a prefetch; then the poison, queued */
    for (size_t i = 0; i < count; i++) {
        struct cudaPointerAttributes a;
        if (sizes[i] == 0 || cudaPointerGetAttributes(&a, dptrs[i]) != cudaSuccess ||
            a.type != cudaMemoryTypeManaged) {
            cudaGetLastError();
            cuemu_diag("%s: item %zu (%p, %zu bytes) is not a range of managed memory", api, i,
                       dptrs[i], sizes[i]);
            return cudaErrorInvalidValue;
        }
    }
    for (size_t i = 0; i < count; i++) {
        rt_stream_log_note(stream, RT_LOG_DISCARD, 0);
        site_give(at);
        cudaError_t e = (cudaMemsetAsync)(dptrs[i], 0xFF, sizes[i], stream);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

cudaError_t (cudaMemPrefetchBatchAsync)(void **dptrs, size_t *sizes, size_t count,
                                        struct cudaMemLocation *prefetchLocs,
                                        size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                        unsigned long long flags, cudaStream_t stream)
{
    RT_ENTER();
    const char *api = "cudaMemPrefetchBatchAsync";
    cudaError_t e = batch_common(dptrs, sizes, count, flags, stream, api);
    if (e == cudaSuccess)
        e = batch_indices(prefetchLocs, prefetchLocIdxs, numPrefetchLocs, count, api,
                          "prefetch locations");
    if (e != cudaSuccess) return rt_err(e);
    rt_stream_log_note(stream, RT_LOG_BATCH, (int)count);
    return rt_err(prefetch_items(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                                 numPrefetchLocs, stream));
}

cudaError_t (cudaMemDiscardBatchAsync)(void **dptrs, size_t *sizes, size_t count,
                                       unsigned long long flags, cudaStream_t stream)
{
    batch_site at = site_take();
    RT_ENTER();
    const char *api = "cudaMemDiscardBatchAsync";
    cudaError_t e = batch_common(dptrs, sizes, count, flags, stream, api);
    if (e != cudaSuccess) return rt_err(e);
    rt_stream_log_note(stream, RT_LOG_BATCH, (int)count);
    return rt_err(discard_items(dptrs, sizes, count, stream, api, at));
}

cudaError_t (cudaMemDiscardAndPrefetchBatchAsync)(void **dptrs, size_t *sizes, size_t count,
                                                  struct cudaMemLocation *prefetchLocs,
                                                  size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                  unsigned long long flags, cudaStream_t stream)
{
    batch_site at = site_take();
    RT_ENTER();
    const char *api = "cudaMemDiscardAndPrefetchBatchAsync";
    cudaError_t e = batch_common(dptrs, sizes, count, flags, stream, api);
    if (e == cudaSuccess)
        e = batch_indices(prefetchLocs, prefetchLocIdxs, numPrefetchLocs, count, api,
                          "prefetch locations");
    if (e != cudaSuccess) return rt_err(e);
    rt_stream_log_note(stream, RT_LOG_BATCH, (int)count);
    e = discard_items(dptrs, sizes, count, stream, api, at);
    if (e == cudaSuccess)
        e = prefetch_items(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs,
                           stream);
    return rt_err(e);
}

cudaError_t (cudaMemcpyBatchAsync)(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                   size_t count, struct cudaMemcpyAttributes *attrs,
                                   size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream)
{
    batch_site at = site_take();
    RT_ENTER();
    const char *api = "cudaMemcpyBatchAsync";
    cudaError_t e = batch_common((void **)dsts, (size_t *)sizes, count, 0, stream, api);
    if (e == cudaSuccess && !srcs) e = cudaErrorInvalidValue;
    if (e == cudaSuccess) e = batch_indices(attrs, attrsIdxs, numAttrs, count, api, "attributes");
    for (size_t k = 0; e == cudaSuccess && k < numAttrs; k++) {
        enum cudaMemcpySrcAccessOrder o = attrs[k].srcAccessOrder;
        if (o < cudaMemcpySrcAccessOrderStream || o > cudaMemcpySrcAccessOrderAny ||
            (attrs[k].flags & ~(unsigned)cudaMemcpyFlagPreferOverlapWithCompute)) {
            cuemu_diag("%s: attributes %zu: srcAccessOrder %d, flags %u (every copy needs a "
                       "source access order: Stream, DuringApiCall or Any)", api, k, (int)o,
                       attrs[k].flags);
            e = cudaErrorInvalidValue;
        }
    }
    if (e != cudaSuccess) return rt_err(e);
    rt_stream_log_note(stream, RT_LOG_BATCH, (int)count);
    for (size_t i = 0; i < count; i++) {
        site_give(at);
        e = (cudaMemcpyAsync)(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, stream);
        if (e != cudaSuccess) return rt_err(e);
    }
    /* DuringApiCall: every source read before the call returns (it may be a stack variable
       the caller drops next) */
    for (size_t k = 0; k < numAttrs; k++)
        if (attrs[k].srcAccessOrder == cudaMemcpySrcAccessOrderDuringApiCall) {
            rt_drain_stream(stream);
            break;
        }
    return cudaSuccess;
}
