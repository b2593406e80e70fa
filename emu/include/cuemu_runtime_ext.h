/* SPDX-License-Identifier: MIT */
/*
 * cuemu_runtime_ext.h: runtime-API calls and types beyond the course's subset that
 * third-party programs (NVIDIA's samples among them) use, with CUDA 13.0's names, numbers and
 * signatures. Included by cuda_runtime.h; implemented in emu/runtime/extras.c. What a CPU has
 * no equivalent of is accepted and recorded where CUDA calls it a hint (an L2 access policy),
 * and refused with "not supported here" where a program would depend on it.
 */
#ifndef CUEMU_RUNTIME_EXT_H
#define CUEMU_RUNTIME_EXT_H

/* The SM clock the emulator reports (cudaDevAttrClockRate, kHz); clock() and clock64() in a
   kernel count cycles of it. */
#define CUEMU_CLOCK_KHZ 1980000

#ifdef __cplusplus
extern "C" {
#endif

/* ---- L2 access policy and stream attributes (hints: no cache is modelled) ------------ */
enum cudaAccessProperty {
    cudaAccessPropertyNormal = 0,
    cudaAccessPropertyStreaming = 1,
    cudaAccessPropertyPersisting = 2
};
struct cudaAccessPolicyWindow {
    void *base_ptr;
    size_t num_bytes;
    float hitRatio;
    enum cudaAccessProperty hitProp;
    enum cudaAccessProperty missProp;
};
enum cudaSynchronizationPolicy {
    cudaSyncPolicyAuto = 1,
    cudaSyncPolicySpin = 2,
    cudaSyncPolicyYield = 3,
    cudaSyncPolicyBlockingSync = 4
};
enum cudaLaunchAttributeID {
    cudaLaunchAttributeIgnore = 0,
    cudaLaunchAttributeAccessPolicyWindow = 1,
    cudaLaunchAttributeCooperative = 2,
    cudaLaunchAttributeSynchronizationPolicy = 3,
    cudaLaunchAttributeClusterDimension = 4,
    cudaLaunchAttributeClusterSchedulingPolicyPreference = 5,
    cudaLaunchAttributeProgrammaticStreamSerialization = 6,
    cudaLaunchAttributeProgrammaticEvent = 7,
    cudaLaunchAttributePriority = 8
};
typedef union cudaLaunchAttributeValue {
    char pad[64];
    struct cudaAccessPolicyWindow accessPolicyWindow;
    int cooperative;
    enum cudaSynchronizationPolicy syncPolicy;
    struct { unsigned int x, y, z; } clusterDim;
    int priority;
} cudaLaunchAttributeValue;
#define cudaStreamAttrID cudaLaunchAttributeID
#define cudaStreamAttributeAccessPolicyWindow    cudaLaunchAttributeAccessPolicyWindow
#define cudaStreamAttributeSynchronizationPolicy cudaLaunchAttributeSynchronizationPolicy
#define cudaStreamAttributePriority              cudaLaunchAttributePriority
#define cudaStreamAttrValue cudaLaunchAttributeValue

cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, enum cudaLaunchAttributeID attr,
                                   const cudaLaunchAttributeValue *value);
cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, enum cudaLaunchAttributeID attr,
                                   cudaLaunchAttributeValue *value_out);
cudaError_t cudaCtxResetPersistingL2Cache(void);

/* ---- managed memory attached to a stream ------------------------------------------------ */
/* Recorded and checked (a managed allocation, a valid stream); every managed access is
   already legal at any time here (concurrentManagedAccess = 1), so it changes no access. */
cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr, size_t length CUEMU_DV(0),
                                     unsigned int flags CUEMU_DV(cudaMemAttachSingle));

/* ---- the profiler (nothing to profile: start and stop succeed) ------------------------- */
cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);

/* ---- things a CPU cannot do: one clear message, named by the caller's line ------------ */
/* Reports "not supported here: <what>" at file:line and returns cudaErrorNotSupported. */
cudaError_t cuemu_not_supported(const char *what, const char *file, int line);

#ifdef __cplusplus
} /* extern "C" */

/* cudaOccupancyMaxPotentialBlockSize: the block size (a multiple of the warp) with the most
   resident threads per SM, from the emulator's own occupancy rule, and the grid that fills
   the device with it. Templates in CUDA too, so the dynamic shared memory can follow the
   block size. */
template <class UnaryFunction, class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(
    int *minGridSize, int *blockSize, T func, UnaryFunction blockSizeToDynamicSMemSize,
    int blockSizeLimit = 0, unsigned int flags = 0)
{
    if (!minGridSize || !blockSize || !func) return cudaErrorInvalidValue;
    int dev = 0, maxThreads = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&maxThreads, cudaDevAttrMaxThreadsPerBlock, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return e;
    int limit = (blockSizeLimit > 0 && blockSizeLimit < maxThreads) ? blockSizeLimit : maxThreads;
    int best = 0, bestBlocks = 0;
    for (int b = limit - limit % 32 ? limit - limit % 32 : limit; b > 0; b -= 32) {
        int blocks = 0;
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            &blocks, (const void *)func, b, (size_t)blockSizeToDynamicSMemSize(b), flags);
        if (e != cudaSuccess) return e;
        if (blocks * b > bestBlocks * best) { best = b; bestBlocks = blocks; }
        if (b < 32) break;
    }
    *blockSize = best;
    *minGridSize = bestBlocks * sms;
    return cudaSuccess;
}
template <class UnaryFunction, class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSizeVariableSMem(
    int *minGridSize, int *blockSize, T func, UnaryFunction blockSizeToDynamicSMemSize,
    int blockSizeLimit = 0)
{ return cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(minGridSize, blockSize, func,
        blockSizeToDynamicSMemSize, blockSizeLimit, cudaOccupancyDefault); }
namespace cuemu { struct fixed_smem { size_t n; size_t operator()(int) const { return n; } }; }
template <class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize,
        T func, size_t dynamicSMemSize = 0, int blockSizeLimit = 0)
{ return cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(minGridSize, blockSize, func,
        cuemu::fixed_smem{dynamicSMemSize}, blockSizeLimit, cudaOccupancyDefault); }
template <class T>
static inline cudaError_t cudaOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize,
        int *blockSize, T func, size_t dynamicSMemSize = 0, int blockSizeLimit = 0,
        unsigned int flags = 0)
{ return cudaOccupancyMaxPotentialBlockSizeVariableSMemWithFlags(minGridSize, blockSize, func,
        cuemu::fixed_smem{dynamicSMemSize}, blockSizeLimit, flags); }
template <class T>
static inline cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, T *devPtr,
        size_t length = 0, unsigned int flags = cudaMemAttachSingle)
{ return cudaStreamAttachMemAsync(stream, (void *)devPtr, length, flags); }
#endif /* __cplusplus */

#endif /* CUEMU_RUNTIME_EXT_H */
