// SPDX-License-Identifier: MIT
/*
 * parity.cu: one source that calls every runtime API the emulator provides, with CUDA 13.0's
 * exact signatures. It must compile with nvcc and with the emulator, and return 0 on both:
 *
 *   nvcc -arch=sm_90 -o parity emu/tests/parity.cu && ./parity          (a real GPU)
 *   make emu-tests && build/emu/tests/parity                           (the CPU emulator)
 *
 * Part 1 takes the address of every function into a pointer of CUDA 13's exact type, so a
 * signature that drifts in either header is a compile error. Part 2 runs each call and checks
 * only what both backends must agree on (results, error codes), never emulator details.
 * Part 3 checks the stream rules the emulator follows (legacy default stream, events, host
 * functions, a pageable source reused at once, queries, a stream destroyed with work queued).
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "runtime/rt_test.h"

// ---- part 1: signatures ----------------------------------------------------------------------
// static_cast to a function pointer type picks the overload of exactly that type, or fails.
#define SIG(name, ...) do { using sig_t_ = __VA_ARGS__; (void)static_cast<sig_t_>(name); } while (0)
static void signatures(void)
{
    SIG(cudaGetLastError, cudaError_t (*)(void));
    SIG(cudaPeekAtLastError, cudaError_t (*)(void));
    SIG(cudaGetErrorName, const char *(*)(cudaError_t));
    SIG(cudaGetErrorString, const char *(*)(cudaError_t));
    SIG(cudaGetDeviceCount, cudaError_t (*)(int *));
    SIG(cudaGetDevice, cudaError_t (*)(int *));
    SIG(cudaSetDevice, cudaError_t (*)(int));
    SIG(cudaInitDevice, cudaError_t (*)(int, unsigned int, unsigned int));
    SIG(cudaSetDeviceFlags, cudaError_t (*)(unsigned int));
    SIG(cudaGetDeviceFlags, cudaError_t (*)(unsigned int *));
    SIG(cudaChooseDevice, cudaError_t (*)(int *, const struct cudaDeviceProp *));
    SIG(cudaGetDeviceProperties, cudaError_t (*)(struct cudaDeviceProp *, int));
    SIG(cudaDeviceGetAttribute, cudaError_t (*)(int *, enum cudaDeviceAttr, int));
    SIG(cudaDeviceGetLimit, cudaError_t (*)(size_t *, enum cudaLimit));
    SIG(cudaDeviceSetLimit, cudaError_t (*)(enum cudaLimit, size_t));
    SIG(cudaDeviceGetStreamPriorityRange, cudaError_t (*)(int *, int *));
    SIG(cudaDeviceSynchronize, cudaError_t (*)(void));
    SIG(cudaDeviceReset, cudaError_t (*)(void));
    SIG(cudaDriverGetVersion, cudaError_t (*)(int *));
    SIG(cudaRuntimeGetVersion, cudaError_t (*)(int *));
    SIG(cudaMemGetInfo, cudaError_t (*)(size_t *, size_t *));
    SIG(cudaMalloc, cudaError_t (*)(void **, size_t));
    SIG(cudaMallocPitch, cudaError_t (*)(void **, size_t *, size_t, size_t));
    SIG(cudaMallocManaged, cudaError_t (*)(void **, size_t, unsigned int));
    SIG(cudaMallocHost, cudaError_t (*)(void **, size_t));
    SIG(cudaHostAlloc, cudaError_t (*)(void **, size_t, unsigned int));
    SIG(cudaFree, cudaError_t (*)(void *));
    SIG(cudaFreeHost, cudaError_t (*)(void *));
    SIG(cudaHostRegister, cudaError_t (*)(void *, size_t, unsigned int));
    SIG(cudaHostUnregister, cudaError_t (*)(void *));
    SIG(cudaHostGetDevicePointer, cudaError_t (*)(void **, void *, unsigned int));
    SIG(cudaHostGetFlags, cudaError_t (*)(unsigned int *, void *));
    SIG(cudaPointerGetAttributes, cudaError_t (*)(struct cudaPointerAttributes *, const void *));
    SIG(cudaMemset, cudaError_t (*)(void *, int, size_t));
    SIG(cudaMemsetAsync, cudaError_t (*)(void *, int, size_t, cudaStream_t));
    SIG(cudaMemset2D, cudaError_t (*)(void *, size_t, int, size_t, size_t));
    SIG(cudaMemcpy, cudaError_t (*)(void *, const void *, size_t, enum cudaMemcpyKind));
    SIG(cudaMemcpyAsync, cudaError_t (*)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t));
    SIG(cudaMemcpy2D, cudaError_t (*)(void *, size_t, const void *, size_t, size_t, size_t, enum cudaMemcpyKind));
    SIG(cudaMemcpy2DAsync, cudaError_t (*)(void *, size_t, const void *, size_t, size_t, size_t,
                                           enum cudaMemcpyKind, cudaStream_t));
    SIG(cudaMemcpyToSymbol, cudaError_t (*)(const void *, const void *, size_t, size_t, enum cudaMemcpyKind));
    SIG(cudaMemcpyFromSymbol, cudaError_t (*)(void *, const void *, size_t, size_t, enum cudaMemcpyKind));
    SIG(cudaMemcpyToSymbolAsync, cudaError_t (*)(const void *, const void *, size_t, size_t,
                                                 enum cudaMemcpyKind, cudaStream_t));
    SIG(cudaMemcpyFromSymbolAsync, cudaError_t (*)(void *, const void *, size_t, size_t,
                                                   enum cudaMemcpyKind, cudaStream_t));
    SIG(cudaGetSymbolAddress, cudaError_t (*)(void **, const void *));
    SIG(cudaGetSymbolSize, cudaError_t (*)(size_t *, const void *));
    SIG(cudaMemPrefetchAsync, cudaError_t (*)(const void *, size_t, struct cudaMemLocation, unsigned int,
                                              cudaStream_t));
    SIG(cudaMemAdvise, cudaError_t (*)(const void *, size_t, enum cudaMemoryAdvise, struct cudaMemLocation));
    SIG(cudaMallocAsync, cudaError_t (*)(void **, size_t, cudaStream_t));
    SIG(cudaFreeAsync, cudaError_t (*)(void *, cudaStream_t));
    SIG(cudaMallocFromPoolAsync, cudaError_t (*)(void **, size_t, cudaMemPool_t, cudaStream_t));
    SIG(cudaDeviceGetDefaultMemPool, cudaError_t (*)(cudaMemPool_t *, int));
    SIG(cudaDeviceSetMemPool, cudaError_t (*)(int, cudaMemPool_t));
    SIG(cudaDeviceGetMemPool, cudaError_t (*)(cudaMemPool_t *, int));
    SIG(cudaMemPoolCreate, cudaError_t (*)(cudaMemPool_t *, const struct cudaMemPoolProps *));
    SIG(cudaMemPoolDestroy, cudaError_t (*)(cudaMemPool_t));
    SIG(cudaMemPoolSetAttribute, cudaError_t (*)(cudaMemPool_t, enum cudaMemPoolAttr, void *));
    SIG(cudaMemPoolGetAttribute, cudaError_t (*)(cudaMemPool_t, enum cudaMemPoolAttr, void *));
    SIG(cudaMemPoolTrimTo, cudaError_t (*)(cudaMemPool_t, size_t));
    SIG(cudaMemPoolSetAccess, cudaError_t (*)(cudaMemPool_t, const struct cudaMemAccessDesc *, size_t));
    SIG(cudaMemPoolGetAccess, cudaError_t (*)(enum cudaMemAccessFlags *, cudaMemPool_t, struct cudaMemLocation *));
    SIG(cudaStreamCreate, cudaError_t (*)(cudaStream_t *));
    SIG(cudaStreamCreateWithFlags, cudaError_t (*)(cudaStream_t *, unsigned int));
    SIG(cudaStreamCreateWithPriority, cudaError_t (*)(cudaStream_t *, unsigned int, int));
    SIG(cudaStreamDestroy, cudaError_t (*)(cudaStream_t));
    SIG(cudaStreamSynchronize, cudaError_t (*)(cudaStream_t));
    SIG(cudaStreamQuery, cudaError_t (*)(cudaStream_t));
    SIG(cudaStreamWaitEvent, cudaError_t (*)(cudaStream_t, cudaEvent_t, unsigned int));
    SIG(cudaStreamGetFlags, cudaError_t (*)(cudaStream_t, unsigned int *));
    SIG(cudaStreamGetPriority, cudaError_t (*)(cudaStream_t, int *));
    SIG(cudaEventCreate, cudaError_t (*)(cudaEvent_t *));
    SIG(cudaEventCreateWithFlags, cudaError_t (*)(cudaEvent_t *, unsigned int));
    SIG(cudaEventRecord, cudaError_t (*)(cudaEvent_t, cudaStream_t));
    SIG(cudaEventSynchronize, cudaError_t (*)(cudaEvent_t));
    SIG(cudaEventQuery, cudaError_t (*)(cudaEvent_t));
    SIG(cudaLaunchHostFunc, cudaError_t (*)(cudaStream_t, cudaHostFn_t, void *));
    SIG(cudaStreamAddCallback, cudaError_t (*)(cudaStream_t, cudaStreamCallback_t, void *, unsigned int));
    SIG(cudaEventElapsedTime, cudaError_t (*)(float *, cudaEvent_t, cudaEvent_t));
    SIG(cudaEventDestroy, cudaError_t (*)(cudaEvent_t));
    SIG(cudaFuncSetAttribute, cudaError_t (*)(const void *, enum cudaFuncAttribute, int));
    SIG(cudaFuncGetAttributes, cudaError_t (*)(struct cudaFuncAttributes *, const void *));
    SIG(cudaFuncSetCacheConfig, cudaError_t (*)(const void *, enum cudaFuncCache));
    SIG(cudaOccupancyMaxActiveBlocksPerMultiprocessor, cudaError_t (*)(int *, const void *, int, size_t));
    SIG(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
        cudaError_t (*)(int *, const void *, int, size_t, unsigned int));
    SIG(cudaDeviceCanAccessPeer, cudaError_t (*)(int *, int, int));
    SIG(cudaDeviceEnablePeerAccess, cudaError_t (*)(int, unsigned int));
    SIG(cudaDeviceDisablePeerAccess, cudaError_t (*)(int));
    SIG(cudaMemcpyPeer, cudaError_t (*)(void *, int, const void *, int, size_t));
    SIG(cudaMemcpyPeerAsync, cudaError_t (*)(void *, int, const void *, int, size_t, cudaStream_t));
    SIG(cudaIpcGetMemHandle, cudaError_t (*)(cudaIpcMemHandle_t *, void *));
    SIG(cudaDeviceGetP2PAttribute, cudaError_t (*)(int *, enum cudaDeviceP2PAttr, int, int));
    SIG(cudaDeviceGetPCIBusId, cudaError_t (*)(char *, int, int));
    SIG(cudaDeviceGetByPCIBusId, cudaError_t (*)(int *, const char *));
    SIG(cudaIpcOpenMemHandle, cudaError_t (*)(void **, cudaIpcMemHandle_t, unsigned int));
    SIG(cudaIpcCloseMemHandle, cudaError_t (*)(void *));
    SIG(cudaMemRangeGetAttribute, cudaError_t (*)(void *, size_t, enum cudaMemRangeAttribute, const void *, size_t));
}

// Enum and flag values both headers must agree on (CUDA's numbers).
static_assert(cudaSuccess == 0 && cudaErrorInvalidValue == 1 && cudaErrorMemoryAllocation == 2, "errors");
static_assert(cudaErrorInvalidPitchValue == 12 && cudaErrorInvalidSymbol == 13, "errors");
static_assert(cudaErrorInvalidMemcpyDirection == 21 && cudaErrorInsufficientDriver == 35, "errors");
static_assert(cudaErrorNoDevice == 100 && cudaErrorInvalidDevice == 101, "errors");
static_assert(cudaErrorInvalidResourceHandle == 400 && cudaErrorNotReady == 600, "errors");
static_assert(cudaErrorPeerAccessAlreadyEnabled == 704 && cudaErrorPeerAccessNotEnabled == 705, "errors");
static_assert(cudaDevP2PAttrPerformanceRank == 1 && cudaDevP2PAttrAccessSupported == 2 &&
              cudaDevP2PAttrNativeAtomicSupported == 3 && cudaDevP2PAttrCudaArrayAccessSupported == 4, "p2p");
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && CUDA_IPC_HANDLE_SIZE == 64, "ipc");
static_assert(cudaErrorIllegalAddress == 700 && cudaErrorLaunchFailure == 719, "errors");
static_assert(cudaErrorHostMemoryAlreadyRegistered == 712 && cudaErrorHostMemoryNotRegistered == 713, "errors");
static_assert(cudaMemcpyHostToHost == 0 && cudaMemcpyHostToDevice == 1 && cudaMemcpyDeviceToHost == 2 &&
              cudaMemcpyDeviceToDevice == 3 && cudaMemcpyDefault == 4, "memcpy kinds");
static_assert(cudaDevAttrMaxThreadsPerBlock == 1 && cudaDevAttrClockRate == 13 &&
              cudaDevAttrMultiProcessorCount == 16 && cudaDevAttrMemoryClockRate == 36 &&
              cudaDevAttrGlobalMemoryBusWidth == 37 && cudaDevAttrL2CacheSize == 38 &&
              cudaDevAttrAsyncEngineCount == 40 && cudaDevAttrComputeCapabilityMajor == 75 &&
              cudaDevAttrPageableMemoryAccess == 88 && cudaDevAttrConcurrentManagedAccess == 89 &&
              cudaDevAttrMaxSharedMemoryPerBlockOptin == 97 && cudaDevAttrMemoryPoolsSupported == 115,
              "device attributes");
static_assert(cudaMemPoolAttrReleaseThreshold == 4 && cudaMemPoolAttrReservedMemCurrent == 5 &&
              cudaMemPoolAttrReservedMemHigh == 6 && cudaMemPoolAttrUsedMemCurrent == 7 &&
              cudaMemPoolAttrUsedMemHigh == 8, "pool attributes");
static_assert(cudaFuncAttributeMaxDynamicSharedMemorySize == 8 && cudaMemAdviseSetReadMostly == 1 &&
              cudaMemAdviseSetAccessedBy == 5 && cudaMemLocationTypeDevice == 1 &&
              cudaMemLocationTypeHost == 2 && cudaMemoryTypeManaged == 3, "enums");
static_assert(cudaHostAllocMapped == 2 && cudaHostRegisterMapped == 2 && cudaStreamNonBlocking == 1 &&
              cudaEventDisableTiming == 2 && cudaMemAttachGlobal == 1 && cudaMemAttachHost == 2, "flags");
static_assert(sizeof(struct cudaDeviceProp) >= 1008 && sizeof(struct cudaPointerAttributes) == 88 &&
              sizeof(struct cudaMemLocation) == 8, "struct layouts");

// ---- part 2: behaviour both backends share ---------------------------------------------------
__constant__ float c_scale[4];
__device__ int d_values[32];

__global__ void scale_kernel(const float *in, float *out, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = tile[threadIdx.x] * c_scale[i % 4] + (float)d_values[i % 32];
}

static void device_and_errors(void)
{
    OK(cudaSetDeviceFlags(cudaDeviceScheduleAuto));
    int n = 0, dev = -1, v = 0;
    OK(cudaGetDeviceCount(&n));
    EXPECT(n >= 1);
    OK(cudaInitDevice(0, 0, 0));
    OK(cudaSetDevice(0));
    OK(cudaGetDevice(&dev));
    EXPECT(dev == 0);
    unsigned int dflags = 0;
    OK(cudaGetDeviceFlags(&dflags));
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    prop.major = 9;
    OK(cudaChooseDevice(&dev, &prop));
    EXPECT(dev >= 0 && dev < n);
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(prop.warpSize == 32 && prop.maxThreadsPerBlock == 1024);
    const cudaDeviceAttr attrs[] = {
        cudaDevAttrMemoryPoolsSupported, cudaDevAttrConcurrentManagedAccess, cudaDevAttrAsyncEngineCount,
        cudaDevAttrL2CacheSize, cudaDevAttrMaxSharedMemoryPerBlock, cudaDevAttrMaxSharedMemoryPerBlockOptin,
        cudaDevAttrMemoryClockRate, cudaDevAttrGlobalMemoryBusWidth, cudaDevAttrClockRate,
        cudaDevAttrMultiProcessorCount, cudaDevAttrPageableMemoryAccess, cudaDevAttrMaxThreadsPerBlock,
        cudaDevAttrMaxBlockDimX, cudaDevAttrMaxBlockDimY, cudaDevAttrMaxBlockDimZ, cudaDevAttrMaxGridDimX,
        cudaDevAttrMaxGridDimY, cudaDevAttrMaxGridDimZ, cudaDevAttrWarpSize, cudaDevAttrComputeCapabilityMajor,
        cudaDevAttrComputeCapabilityMinor, cudaDevAttrManagedMemory, cudaDevAttrUnifiedAddressing,
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) OK(cudaDeviceGetAttribute(&v, attrs[i], 0));
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    EXPECT(v == prop.multiProcessorCount);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    EXPECT((size_t)v == prop.sharedMemPerBlockOptin);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, 0));
    EXPECT(v == prop.l2CacheSize);
    OK(cudaDriverGetVersion(&v));
    EXPECT(v >= 13000);
    OK(cudaRuntimeGetVersion(&v));
    EXPECT(v == CUDART_VERSION);
    if (n > 1) {
        int can = -1;
        OK(cudaDeviceCanAccessPeer(&can, 0, 1));
        EXPECT(can == 0 || can == 1);
    }
    size_t lim = 0;
    OK(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize));
    OK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, lim));
    int least = 0, greatest = 0;
    OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(greatest <= least);

    // Last-error semantics and CUDA's names.
    OK(cudaGetLastError());
    EXPECT_ERR(cudaSetDevice(n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);
    EXPECT(strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation") == 0);
    EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
    EXPECT(strcmp(cudaGetErrorString(cudaErrorIllegalAddress), "an illegal memory access was encountered") == 0);
}

static void memory(void)
{
    const int n = 1000;
    size_t free0 = 0, total = 0;
    OK(cudaMemGetInfo(&free0, &total));
    EXPECT(free0 > 0 && free0 <= total);

    float h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = (float)i - 0.25f;
    float *d_a = NULL, *d_b = NULL;
    OK(cudaMalloc(&d_a, n * sizeof(float)));
    OK(cudaMalloc((void **)&d_b, n * sizeof(float)));
    EXPECT(((size_t)d_a & 255) == 0);
    OK(cudaMemset(d_b, 0, n * sizeof(float)));
    OK(cudaMemcpy(d_a, h, sizeof h, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(d_b, d_a, sizeof h, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(back, d_b, sizeof h, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back, h, sizeof h) == 0);
    OK(cudaMemcpy(back, h, sizeof h, cudaMemcpyHostToHost));
    OK(cudaMemcpy(d_b, h, sizeof h, cudaMemcpyDefault));
    OK(cudaMemcpy(back, d_b, sizeof h, cudaMemcpyDefault));
    EXPECT(memcmp(back, h, sizeof h) == 0);
    OK(cudaMemcpy(d_a, h, 0, cudaMemcpyHostToDevice));
    OK(cudaFree(NULL));

    // Errors both must give.
    // (Not here: a copy whose kind contradicts its pointers, e.g. a device source for
    // cudaMemcpyHostToDevice, is undefined behaviour. An H200 with CUDA 13.0 performed it
    // (2026-11-30); the emulator refuses it on purpose, see emu/tests/runtime/memcpy_kinds.cu.)
    void *huge = NULL;
    EXPECT_ERR(cudaMalloc(&huge, (size_t)1 << 50), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);

    // Pitched memory and 2D copies.
    const size_t width = 37 * sizeof(float), height = 11;
    float img[37 * 11], img_back[37 * 11];
    for (int i = 0; i < 37 * 11; i++) img[i] = (float)(i * 3);
    float *d_img = NULL;
    size_t pitch = 0;
    OK(cudaMallocPitch(&d_img, &pitch, width, height));
    EXPECT(pitch >= width);
    OK(cudaMemset2D(d_img, pitch, 0, width, height));
    OK(cudaMemcpy2D(d_img, pitch, img, width, width, height, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2DAsync(img_back, width, d_img, pitch, width, height, cudaMemcpyDeviceToHost, 0));
    OK(cudaDeviceSynchronize());
    EXPECT(memcmp(img, img_back, sizeof img) == 0);
    EXPECT_ERR(cudaMemcpy2D(d_img, width - 4, img, width, width, height, cudaMemcpyHostToDevice),
               cudaErrorInvalidPitchValue);
    (void)cudaGetLastError();

    // Async copies and sets on a stream.
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMemsetAsync(d_a, 0, sizeof h, s));
    OK(cudaMemcpyAsync(d_a, h, sizeof h / 2, cudaMemcpyHostToDevice, s));
    OK(cudaMemcpyAsync(back, d_a, sizeof h, cudaMemcpyDeviceToHost, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(back[0] == h[0] && back[n / 2 - 1] == h[n / 2 - 1] && back[n - 1] == 0.0f);
    OK(cudaStreamDestroy(s));

    // Pointer attributes.
    struct cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, d_a));
    EXPECT(pa.type == cudaMemoryTypeDevice && pa.devicePointer == d_a);
    char *plain = (char *)malloc(64);
    OK(cudaPointerGetAttributes(&pa, plain));
    EXPECT(pa.type == cudaMemoryTypeUnregistered);
    free(plain);

    OK(cudaFree(d_img));
    OK(cudaFree(d_a));
    OK(cudaFree(d_b));
}

static void symbols_and_kernels(void)
{
    const int n = 1000;
    float scale[4] = { 1.0f, 2.0f, -1.0f, 0.5f };
    int values[32];
    for (int i = 0; i < 32; i++) values[i] = i * 10;
    OK(cudaMemcpyToSymbol(c_scale, scale, sizeof scale));
    OK(cudaMemcpyToSymbolAsync(d_values, values, sizeof values, 0, cudaMemcpyHostToDevice, 0));
    int check[32];
    OK(cudaMemcpyFromSymbol(check, d_values, sizeof check));
    EXPECT(memcmp(check, values, sizeof check) == 0);
    float s2[2];
    OK(cudaMemcpyFromSymbolAsync(s2, c_scale, sizeof s2, 2 * sizeof(float), cudaMemcpyDeviceToHost, 0));
    OK(cudaStreamSynchronize(0));
    EXPECT(s2[0] == -1.0f && s2[1] == 0.5f);
    void *sym = NULL;
    size_t sym_size = 0;
    OK(cudaGetSymbolAddress(&sym, d_values));
    OK(cudaGetSymbolSize(&sym_size, d_values));
    EXPECT(sym != NULL && sym_size == sizeof values);
    EXPECT_ERR(cudaMemcpyToSymbol(c_scale, scale, sizeof scale, sizeof(float)), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // A kernel with 64 KiB of dynamic shared memory needs the opt-in attribute.
    const int smem = 64 * 1024;
    OK(cudaFuncSetAttribute(scale_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    struct cudaFuncAttributes fa;
    OK(cudaFuncGetAttributes(&fa, scale_kernel));
    EXPECT(fa.maxDynamicSharedSizeBytes == smem);
    OK(cudaFuncSetCacheConfig(scale_kernel, cudaFuncCachePreferShared));
    int blocks = 0;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale_kernel, 256, smem));
    EXPECT(blocks >= 1 && blocks <= 3);        // 228 KiB per SM holds at most three 64 KiB blocks
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, scale_kernel, 256, 0,
                                                              cudaOccupancyDefault));
    EXPECT(blocks >= 1 && blocks <= 8);        // 2048 threads per SM / 256

    float h[n], out[n];
    for (int i = 0; i < n; i++) h[i] = (float)(i % 17);
    float *d_in = NULL, *d_out = NULL;
    OK(cudaMalloc(&d_in, sizeof h));
    OK(cudaMalloc(&d_out, sizeof out));
    OK(cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice));
    scale_kernel<<<(n + 255) / 256, 256, smem>>>(d_in, d_out, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(out[i] == h[i] * scale[i % 4] + (float)values[i % 32]);
    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
}

static void host_memory(void)
{
    float *h_pin = NULL;
    int *h_mapped = NULL;
    OK(cudaMallocHost(&h_pin, 4096 * sizeof(float)));
    OK(cudaHostAlloc(&h_mapped, 4096, cudaHostAllocMapped));
    for (int i = 0; i < 4096; i++) h_pin[i] = (float)i;
    float *d = NULL;
    OK(cudaMalloc(&d, 4096 * sizeof(float)));
    OK(cudaMemcpy(d, h_pin, 4096 * sizeof(float), cudaMemcpyHostToDevice));
    memset(h_pin, 0, 4096 * sizeof(float));
    OK(cudaMemcpy(h_pin, d, 4096 * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT(h_pin[4095] == 4095.0f);
    unsigned int flags = 0;
    OK(cudaHostGetFlags(&flags, h_mapped));
    EXPECT(flags & cudaHostAllocMapped);
    void *d_alias = NULL;
    OK(cudaHostGetDevicePointer(&d_alias, h_mapped, 0));
    EXPECT(d_alias != NULL);
    struct cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, h_pin));
    EXPECT(pa.type == cudaMemoryTypeHost && pa.hostPointer == h_pin);

    // Registering pageable memory, twice, and unregistering what is not registered.
    const size_t bytes = 16 * 4096;
    char *buf = (char *)aligned_alloc(4096, bytes);
    OK(cudaHostRegister(buf, bytes, cudaHostRegisterDefault));
    EXPECT_ERR(cudaHostRegister(buf, bytes, cudaHostRegisterDefault), cudaErrorHostMemoryAlreadyRegistered);
    (void)cudaGetLastError();
    OK(cudaMemcpy(d, buf, 4096, cudaMemcpyHostToDevice));
    OK(cudaHostUnregister(buf));
    EXPECT_ERR(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
    (void)cudaGetLastError();
    free(buf);

    OK(cudaFree(d));
    OK(cudaFreeHost(h_pin));
    OK(cudaFreeHost(h_mapped));
}

static void managed(void)
{
    const int n = 1 << 16;
    float *m = NULL;
    OK(cudaMallocManaged(&m, n * sizeof(float)));
    void *m2 = NULL;
    OK(cudaMallocManaged(&m2, 4096, cudaMemAttachGlobal));
    for (int i = 0; i < n; i++) m[i] = (float)i;
    struct cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 };
    struct cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetAccessedBy, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetReadMostly, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseUnsetReadMostly, dev));
    OK(cudaMemPrefetchAsync(m, n * sizeof(float), dev, 0, 0));
    OK(cudaMemPrefetchAsync(m, n * sizeof(float), host, 0));
    OK(cudaDeviceSynchronize());
    EXPECT(m[n - 1] == (float)(n - 1));
    int where = -7;
    OK(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributeLastPrefetchLocation, m, n * sizeof(float)));
    EXPECT(where == cudaCpuDeviceId);
    OK(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributePreferredLocation, m, n * sizeof(float)));
    EXPECT(where == 0);
    struct cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, m));
    EXPECT(pa.type == cudaMemoryTypeManaged);
    OK(cudaFree(m));
    OK(cudaFree(m2));
}

static unsigned long long pool_stat(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
    unsigned long long v = ~0ull;
    OK(cudaMemPoolGetAttribute(pool, attr, &v));
    return v;
}

static void pools(void)
{
    cudaMemPool_t def = NULL, cur = NULL;
    OK(cudaDeviceGetDefaultMemPool(&def, 0));
    OK(cudaDeviceGetMemPool(&cur, 0));
    EXPECT(def == cur);
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    const size_t bytes = 8u << 20;
    void *a = NULL;
    OK(cudaMallocAsync(&a, bytes, s));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemCurrent) >= bytes);
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) >= bytes);
    OK(cudaFreeAsync(a, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemCurrent) == 0);
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemHigh) >= bytes);

    // With the threshold at its maximum the reserve stays after a synchronisation; a trim
    // releases it.
    unsigned long long keep = ~0ull, zero = 0;
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep));
    OK(cudaMallocAsync(&a, bytes, s));
    OK(cudaFreeAsync(a, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) >= bytes);
    OK(cudaMemPoolTrimTo(def, 0));
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) == 0);
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &zero));
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &zero));
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReservedMemHigh, &zero));

    // A pool of our own.
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = NULL;
    OK(cudaMemPoolCreate(&pool, &props));
    struct cudaMemAccessDesc desc = { props.location, cudaMemAccessFlagsProtReadWrite };
    OK(cudaMemPoolSetAccess(pool, &desc, 1));
    cudaMemAccessFlags fl = cudaMemAccessFlagsProtNone;
    struct cudaMemLocation loc = props.location;
    OK(cudaMemPoolGetAccess(&fl, pool, &loc));
    EXPECT(fl == cudaMemAccessFlagsProtReadWrite);
    void *b = NULL, *c = NULL;
    OK(cudaMallocFromPoolAsync(&b, 1 << 20, pool, s));
    OK(cudaDeviceSetMemPool(0, pool));
    OK(cudaMallocAsync(&c, 1 << 20, s));
    EXPECT(pool_stat(pool, cudaMemPoolAttrUsedMemCurrent) >= (2u << 20));
    OK(cudaFreeAsync(b, s));
    OK(cudaFreeAsync(c, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(pool_stat(pool, cudaMemPoolAttrUsedMemCurrent) == 0);
    OK(cudaDeviceSetMemPool(0, def));
    OK(cudaMemPoolDestroy(pool));
    OK(cudaStreamDestroy(s));
}

static void streams_and_events(void)
{
    cudaStream_t s1, s2, s3;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithPriority(&s3, cudaStreamDefault, 0));
    unsigned int flags = 99;
    OK(cudaStreamGetFlags(s2, &flags));
    EXPECT(flags == cudaStreamNonBlocking);
    int prio = 99;
    OK(cudaStreamGetPriority(s3, &prio));
    EXPECT(prio == 0);

    cudaEvent_t start, stop, untimed;
    OK(cudaEventCreate(&start));
    OK(cudaEventCreateWithFlags(&stop, cudaEventBlockingSync));
    OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    float *d = NULL;
    OK(cudaMalloc(&d, 1 << 20));
    OK(cudaEventRecord(start, s1));
    OK(cudaMemsetAsync(d, 1, 1 << 20, s1));
    OK(cudaEventRecord(stop, s1));
    OK(cudaEventRecord(untimed, s1));
    OK(cudaStreamWaitEvent(s2, stop, 0));
    OK(cudaEventSynchronize(stop));
    OK(cudaEventQuery(stop));
    OK(cudaStreamSynchronize(s2));
    OK(cudaStreamQuery(s2));
    float ms = -1.0f;
    OK(cudaEventElapsedTime(&ms, start, stop));
    EXPECT(ms >= 0.0f);
    EXPECT_ERR(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    OK(cudaEventDestroy(start));
    OK(cudaEventDestroy(stop));
    OK(cudaEventDestroy(untimed));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaStreamDestroy(s3));
    OK(cudaFree(d));
}

// ---- part 3: the stream rules both backends follow (docs/no-gpu.md, "Streams") ----------------
__global__ void fill_kernel(float *p, int n, float v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}
__global__ void add_kernel(const float *a, float *b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) b[i] += a[i];
}

static int host_calls[8], host_ncalls;
static void CUDART_CB record_call(void *arg) { host_calls[host_ncalls++ & 7] = (int)(size_t)arg; }

static int all_equal(const float *p, int n, float v)
{
    for (int i = 0; i < n; i++) if (p[i] != v) return 0;
    return 1;
}

static void stream_rules(void)
{
    const int n = 1 << 20;
    float *a = NULL, *b = NULL, *h = NULL;
    OK(cudaMalloc(&a, n * sizeof(float)));
    OK(cudaMalloc(&b, n * sizeof(float)));
    OK(cudaMallocHost(&h, n * sizeof(float)));
    cudaStream_t s1, s2, nb;
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));
    OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));

    // The legacy default stream: work on stream 0 waits for earlier work on blocking streams,
    // and they for it.
    fill_kernel<<<64, 256, 0, s1>>>(a, n, 2.0f);
    fill_kernel<<<64, 256>>>(b, n, 1.0f);            // stream 0: after s1's fill
    add_kernel<<<64, 256, 0, s2>>>(a, b, n);          // s2: after stream 0's fill
    OK(cudaMemcpy(h, b, n * sizeof(float), cudaMemcpyDeviceToHost));   // stream 0: after s2
    EXPECT(all_equal(h, n, 3.0f));

    // Events: s2 waits for what s1 did before the record.
    cudaEvent_t e;
    OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    fill_kernel<<<64, 256, 0, nb>>>(a, n, 5.0f);
    OK(cudaEventRecord(e, nb));
    OK(cudaStreamWaitEvent(s2, e, 0));
    fill_kernel<<<64, 256, 0, s2>>>(b, n, 0.0f);
    add_kernel<<<64, 256, 0, s2>>>(a, b, n);
    OK(cudaMemcpyAsync(h, b, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
    OK(cudaStreamSynchronize(s2));
    EXPECT(all_equal(h, n, 5.0f));
    OK(cudaEventSynchronize(e));
    EXPECT(cudaEventQuery(e) == cudaSuccess);

    // Host functions run in stream order, after the work before them.
    host_ncalls = 0;
    OK(cudaLaunchHostFunc(s1, record_call, (void *)1));
    fill_kernel<<<64, 256, 0, s1>>>(a, n, 7.0f);
    OK(cudaLaunchHostFunc(s1, record_call, (void *)2));
    OK(cudaStreamSynchronize(s1));
    EXPECT(host_ncalls == 2 && host_calls[0] == 1 && host_calls[1] == 2);

    // A pageable source may be reused as soon as cudaMemcpyAsync returns.
    float *pageable = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) pageable[i] = 9.0f;
    OK(cudaMemcpyAsync(a, pageable, n * sizeof(float), cudaMemcpyHostToDevice, s1));
    for (int i = 0; i < n; i++) pageable[i] = -1.0f;
    OK(cudaMemcpyAsync(h, a, n * sizeof(float), cudaMemcpyDeviceToHost, s1));
    OK(cudaStreamSynchronize(s1));
    EXPECT(all_equal(h, n, 9.0f));
    free(pageable);

    // Queries: not ready or done while work is queued, done after a synchronisation.
    for (int r = 0; r < 4; r++) add_kernel<<<64, 256, 0, nb>>>(a, b, n);
    cudaError_t q = cudaStreamQuery(nb);
    EXPECT(q == cudaSuccess || q == cudaErrorNotReady);
    OK(cudaStreamSynchronize(nb));
    OK(cudaStreamQuery(nb));
    (void)cudaGetLastError();

    // A stream destroyed with work queued still runs it.
    cudaStream_t tmp;
    OK(cudaStreamCreate(&tmp));
    fill_kernel<<<64, 256, 0, tmp>>>(b, n, 4.0f);
    OK(cudaStreamDestroy(tmp));
    OK(cudaDeviceSynchronize());
    OK(cudaMemcpy(h, b, n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT(all_equal(h, n, 4.0f));

    OK(cudaEventDestroy(e));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaStreamDestroy(nb));
    OK(cudaFreeHost(h));
    OK(cudaFree(a));
    OK(cudaFree(b));
}

int main(void)
{
    signatures();
    device_and_errors();
    memory();
    symbols_and_kernels();
    host_memory();
    managed();
    pools();
    streams_and_events();
    stream_rules();
    OK(cudaDeviceSynchronize());
    OK(cudaDeviceReset());
    size_t free_b = 0, total = 0;
    OK(cudaMemGetInfo(&free_b, &total));
    EXPECT(free_b > 0);
    if (failures) { fprintf(stderr, "parity: %d check(s) failed\n", failures); return 1; }
    printf("parity: ok\n");
    return 0;
}
