/* SPDX-License-Identifier: MIT */
/*
 * cuemu_cuda13_memory.h: CUDA 13.0's batched memory calls and location-typed pools, with
 * 13.0's names, numbers and signatures (cuda_runtime_api.h, driver_types.h). Included by
 * cuda_runtime.h; implemented in emu/runtime/batch.c and emu/runtime/pool.c. Each batch call
 * makes the checks of its single form on every item, plus the batch's own (arrays of the same
 * length, location indices that start at 0 and grow, no legacy default stream).
 */
#ifndef CUEMU_CUDA13_MEMORY_H
#define CUEMU_CUDA13_MEMORY_H

#ifdef __cplusplus
extern "C" {
#endif

enum cudaMemcpyFlags {
    cudaMemcpyFlagDefault = 0x0,
    cudaMemcpyFlagPreferOverlapWithCompute = 0x1
};

enum cudaMemcpySrcAccessOrder {
    cudaMemcpySrcAccessOrderInvalid = 0x0,
    cudaMemcpySrcAccessOrderStream = 0x1,
    cudaMemcpySrcAccessOrderDuringApiCall = 0x2,
    cudaMemcpySrcAccessOrderAny = 0x3,
    cudaMemcpySrcAccessOrderMax = 0x7FFFFFFF
};

struct cudaMemcpyAttributes {
    enum cudaMemcpySrcAccessOrder srcAccessOrder;
    struct cudaMemLocation srcLocHint;
    struct cudaMemLocation dstLocHint;
    unsigned int flags;
};

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                 size_t count, struct cudaMemcpyAttributes *attrs,
                                 size_t *attrsIdxs, size_t numAttrs, cudaStream_t stream);
cudaError_t cudaMemPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                      struct cudaMemLocation *prefetchLocs,
                                      size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                      unsigned long long flags, cudaStream_t stream);
cudaError_t cudaMemDiscardBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                     unsigned long long flags, cudaStream_t stream);
cudaError_t cudaMemDiscardAndPrefetchBatchAsync(void **dptrs, size_t *sizes, size_t count,
                                                struct cudaMemLocation *prefetchLocs,
                                                size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                unsigned long long flags, cudaStream_t stream);
/* The default pool of a location (device, host) and allocation type (pinned, managed). */
cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                                     enum cudaMemAllocationType type);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The caller's line, for what a batch's items report (cuda_runtime.h's call-site macros). */
#ifndef CUEMU_NO_SITE_MACROS
#define cudaMemcpyBatchAsync(...)      (cuemu_site(__FILE__, __LINE__), cudaMemcpyBatchAsync(__VA_ARGS__))
#define cudaMemDiscardBatchAsync(...)  (cuemu_site(__FILE__, __LINE__), cudaMemDiscardBatchAsync(__VA_ARGS__))
#define cudaMemDiscardAndPrefetchBatchAsync(...) \
    (cuemu_site(__FILE__, __LINE__), cudaMemDiscardAndPrefetchBatchAsync(__VA_ARGS__))
#endif

#endif
