// SPDX-License-Identifier: MIT
/*
 * tut_cuda_compat.h: the chapters are written against CUDA 13's runtime API; this header lets
 * the same source build with CUDA 12.4 and newer 12.x too (drivers older than 580 run only
 * those). Included by tut_check.h, so every chapter has it. Where 12 and 13 differ:
 *
 *   - cudaMemPrefetchAsync and cudaMemAdvise take a struct cudaMemLocation in 13; 12.2 added
 *     those forms as cudaMemPrefetchAsync_v2 and cudaMemAdvise_v2 (the old names took an int
 *     device). On 12.x the 13 names are made to mean the _v2 functions.
 *   - cudaDeviceProp lost clockRate, memoryClockRate and other fields in 13: the chapters read
 *     them with cudaDeviceGetAttribute (cudaDevAttrMemoryClockRate, ...), which both have.
 *   - Calls that are new in 13.0 (chapter 10's batched prefetch, discard and copy, the default
 *     managed pool, the host pools' device attribute) have no 12.x form to stand in for them.
 *     Code using one is compiled only `#if TUT_HAS_CUDA13`; in its place TUT_NEEDS_CUDA13("the
 *     call") returns TUT_ERR_NEWER_CUDA, which Python raises as a skip: "needs CUDA 13.0 (built
 *     with 12.4)". A test of such a call cannot run on 12.x, so it must neither pass nor fail.
 *
 * The emulator's cuda_runtime.h is CUDA 13's API (CUDART_VERSION 13000): nothing here applies
 * unless TUT_HAS_CUDA13=0 is forced.
 */
#ifndef TUT_CUDA_COMPAT_H
#define TUT_CUDA_COMPAT_H

#include <cuda_runtime.h>

#if CUDART_VERSION < 12040
#error "the course needs the CUDA toolkit 12.4 or newer (nvcc --version); or the emulator: make BACKEND=cpu"
#endif

/* -DTUT_HAS_CUDA13=0 builds the 12.x side with 13's headers: make platforms ONLY=cuda12 runs
   chapter 10 built so on the emulator. */
#ifndef TUT_HAS_CUDA13
#define TUT_HAS_CUDA13 (CUDART_VERSION >= 13000)
#endif

/* In a function with `int status` and a `cleanup:` label, like CUDA_CHECK. */
#define TUT_NEEDS_CUDA13(call)                                                \
    do {                                                                      \
        status = tut_record(TUT_ERR_NEWER_CUDA, call, __FILE__, __LINE__);    \
        goto cleanup;                                                         \
    } while (0)

#if CUDART_VERSION < 13000
#define cudaMemPrefetchAsync cudaMemPrefetchAsync_v2
#define cudaMemAdvise cudaMemAdvise_v2
#endif

#if CUDART_VERSION < 12050
/* cudaGetDriverEntryPointByVersion came with 12.5. Before it, cudaGetDriverEntryPoint gives a
   symbol's default version; for what chapter 10 looks up (cuTensorMapEncodeTiled, which has one
   version, 12.0's) that is the same function. */
static inline cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int cuda_version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *found)
{
    (void)cuda_version;
    return cudaGetDriverEntryPoint(symbol, fn, flags, found);
}
#endif

#endif /* TUT_CUDA_COMPAT_H */
