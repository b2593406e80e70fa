/* SPDX-License-Identifier: MIT */
/*
 * cuda_runtime.h for the CPU emulator (cuemu): the CUDA runtime API subset the course uses,
 * with CUDA 13.0's names, signatures and numeric values, so the same .cu file compiles with
 * nvcc and with the host compiler. Force-included into every emulated compile.
 *
 * Asynchronous work (kernels, async copies and sets, event records, host functions,
 * cudaFreeAsync) is queued per stream and runs only when the program must see its effect
 * (a synchronisation or a call CUDA documents as blocking), in an order that respects streams
 * and events but is otherwise adversarial: see emu/runtime/stream.c and docs/no-gpu.md.
 * An event's timestamp is the host clock when the emulator runs its record.
 *
 * The part up to the C++ section is plain C (the runtime in emu/runtime/ is written in C).
 * Allocating calls are macros that add the caller's __FILE__/__LINE__, so a fault report can
 * name the line that made the allocation; the real functions exist too (`&cudaMalloc` works).
 */
#ifndef CUEMU_CUDA_RUNTIME_H
#define CUEMU_CUDA_RUNTIME_H
/* The toolkit's own headers' include guards: third-party code tests them (helper_cuda.h
   defines checkCudaErrors under #ifdef __DRIVER_TYPES_H__), and a toolkit header reached by
   some other path then adds nothing that clashes. The emulator ships a header of each name. */
#define __CUDA_RUNTIME_H__
#define __CUDA_RUNTIME_API_H__
#define __DRIVER_TYPES_H__
#define __DRIVER_FUNCTIONS_H__
#define __VECTOR_TYPES_H__
#define __VECTOR_FUNCTIONS_H__
#define __BUILTIN_TYPES_H__
#define __DEVICE_TYPES_H__
#define __DEVICE_LAUNCH_PARAMETERS_H__
#define __HOST_DEFINES_H__
#define __LIBRARY_TYPES_H__
#define __SURFACE_TYPES_H__
#define __TEXTURE_TYPES_H__

#include <stddef.h>

#define __CUEMU__ 1
#define CUDART_VERSION 13000
#define __CUDART_API_VERSION CUDART_VERSION

#ifdef __cplusplus
#define CUEMU_DV(v) = v
extern "C" {
#else
#define CUEMU_DV(v)
#endif

/* ---- handles ------------------------------------------------------------------------- */
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;
typedef struct CUuuid_st { char bytes[16]; } cudaUUID_t;

/* ---- error codes: CUDA 13.0's names and numbers ------------------------------------- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorCudartUnloading = 4,
    cudaErrorProfilerDisabled = 5,
    cudaErrorProfilerNotInitialized = 6,
    cudaErrorProfilerAlreadyStarted = 7,
    cudaErrorProfilerAlreadyStopped = 8,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidPitchValue = 12,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidHostPointer = 16,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidTexture = 18,
    cudaErrorInvalidTextureBinding = 19,
    cudaErrorInvalidChannelDescriptor = 20,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorAddressOfConstant = 22,
    cudaErrorTextureFetchFailed = 23,
    cudaErrorTextureNotBound = 24,
    cudaErrorSynchronizationError = 25,
    cudaErrorInvalidFilterSetting = 26,
    cudaErrorInvalidNormSetting = 27,
    cudaErrorMixedDeviceExecution = 28,
    cudaErrorNotYetImplemented = 31,
    cudaErrorMemoryValueTooLarge = 32,
    cudaErrorStubLibrary = 34,
    cudaErrorInsufficientDriver = 35,
    cudaErrorCallRequiresNewerDriver = 36,
    cudaErrorInvalidSurface = 37,
    cudaErrorDuplicateVariableName = 43,
    cudaErrorDuplicateTextureName = 44,
    cudaErrorDuplicateSurfaceName = 45,
    cudaErrorDevicesUnavailable = 46,
    cudaErrorIncompatibleDriverContext = 49,
    cudaErrorMissingConfiguration = 52,
    cudaErrorPriorLaunchFailure = 53,
    cudaErrorLaunchMaxDepthExceeded = 65,
    cudaErrorLaunchFileScopedTex = 66,
    cudaErrorLaunchFileScopedSurf = 67,
    cudaErrorSyncDepthExceeded = 68,
    cudaErrorLaunchPendingCountExceeded = 69,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorDeviceNotLicensed = 102,
    cudaErrorSoftwareValidityNotEstablished = 103,
    cudaErrorStartupFailure = 127,
    cudaErrorInvalidKernelImage = 200,
    cudaErrorDeviceUninitialized = 201,
    cudaErrorMapBufferObjectFailed = 205,
    cudaErrorUnmapBufferObjectFailed = 206,
    cudaErrorArrayIsMapped = 207,
    cudaErrorAlreadyMapped = 208,
    cudaErrorNoKernelImageForDevice = 209,
    cudaErrorAlreadyAcquired = 210,
    cudaErrorNotMapped = 211,
    cudaErrorNotMappedAsArray = 212,
    cudaErrorNotMappedAsPointer = 213,
    cudaErrorECCUncorrectable = 214,
    cudaErrorUnsupportedLimit = 215,
    cudaErrorDeviceAlreadyInUse = 216,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorInvalidPtx = 218,
    cudaErrorInvalidGraphicsContext = 219,
    cudaErrorNvlinkUncorrectable = 220,
    cudaErrorJitCompilerNotFound = 221,
    cudaErrorUnsupportedPtxVersion = 222,
    cudaErrorJitCompilationDisabled = 223,
    cudaErrorUnsupportedExecAffinity = 224,
    cudaErrorUnsupportedDevSideSync = 225,
    cudaErrorContained = 226,
    cudaErrorInvalidSource = 300,
    cudaErrorFileNotFound = 301,
    cudaErrorSharedObjectSymbolNotFound = 302,
    cudaErrorSharedObjectInitFailed = 303,
    cudaErrorOperatingSystem = 304,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorLossyQuery = 402,
    cudaErrorSymbolNotFound = 500,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchTimeout = 702,
    cudaErrorLaunchIncompatibleTexturing = 703,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorSetOnActiveProcess = 708,
    cudaErrorContextIsDestroyed = 709,
    cudaErrorAssert = 710,
    cudaErrorTooManyPeers = 711,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorHardwareStackError = 714,
    cudaErrorIllegalInstruction = 715,
    cudaErrorMisalignedAddress = 716,
    cudaErrorInvalidAddressSpace = 717,
    cudaErrorInvalidPc = 718,
    cudaErrorLaunchFailure = 719,
    cudaErrorCooperativeLaunchTooLarge = 720,
    cudaErrorTensorMemoryLeak = 721,
    cudaErrorNotPermitted = 800,
    cudaErrorNotSupported = 801,
    cudaErrorSystemNotReady = 802,
    cudaErrorSystemDriverMismatch = 803,
    cudaErrorCompatNotSupportedOnDevice = 804,
    cudaErrorMpsConnectionFailed = 805,
    cudaErrorMpsRpcFailure = 806,
    cudaErrorMpsServerNotReady = 807,
    cudaErrorMpsMaxClientsReached = 808,
    cudaErrorMpsMaxConnectionsReached = 809,
    cudaErrorMpsClientTerminated = 810,
    cudaErrorCdpNotSupported = 811,
    cudaErrorCdpVersionMismatch = 812,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorTimeout = 909,
    cudaErrorGraphExecUpdateFailure = 910,
    cudaErrorExternalDevice = 911,
    cudaErrorInvalidClusterSize = 912,
    cudaErrorFunctionNotLoaded = 913,
    cudaErrorInvalidResourceType = 914,
    cudaErrorInvalidResourceConfiguration = 915,
    cudaErrorUnknown = 999,
    cudaErrorApiFailureBase = 10000
};
typedef enum cudaError cudaError_t;

/* ---- device attributes: CUDA 13.0's names and numbers --------------------------------- */
enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxBlockDimX = 2,
    cudaDevAttrMaxBlockDimY = 3,
    cudaDevAttrMaxBlockDimZ = 4,
    cudaDevAttrMaxGridDimX = 5,
    cudaDevAttrMaxGridDimY = 6,
    cudaDevAttrMaxGridDimZ = 7,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrTotalConstantMemory = 9,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMaxPitch = 11,
    cudaDevAttrMaxRegistersPerBlock = 12,
    cudaDevAttrClockRate = 13,
    cudaDevAttrTextureAlignment = 14,
    cudaDevAttrGpuOverlap = 15,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrKernelExecTimeout = 17,
    cudaDevAttrIntegrated = 18,
    cudaDevAttrCanMapHostMemory = 19,
    cudaDevAttrComputeMode = 20,
    cudaDevAttrMaxTexture1DWidth = 21,
    cudaDevAttrMaxTexture2DWidth = 22,
    cudaDevAttrMaxTexture2DHeight = 23,
    cudaDevAttrMaxTexture3DWidth = 24,
    cudaDevAttrMaxTexture3DHeight = 25,
    cudaDevAttrMaxTexture3DDepth = 26,
    cudaDevAttrMaxTexture2DLayeredWidth = 27,
    cudaDevAttrMaxTexture2DLayeredHeight = 28,
    cudaDevAttrMaxTexture2DLayeredLayers = 29,
    cudaDevAttrSurfaceAlignment = 30,
    cudaDevAttrConcurrentKernels = 31,
    cudaDevAttrEccEnabled = 32,
    cudaDevAttrPciBusId = 33,
    cudaDevAttrPciDeviceId = 34,
    cudaDevAttrTccDriver = 35,
    cudaDevAttrMemoryClockRate = 36,
    cudaDevAttrGlobalMemoryBusWidth = 37,
    cudaDevAttrL2CacheSize = 38,
    cudaDevAttrMaxThreadsPerMultiProcessor = 39,
    cudaDevAttrAsyncEngineCount = 40,
    cudaDevAttrUnifiedAddressing = 41,
    cudaDevAttrMaxTexture1DLayeredWidth = 42,
    cudaDevAttrMaxTexture1DLayeredLayers = 43,
    cudaDevAttrMaxTexture2DGatherWidth = 45,
    cudaDevAttrMaxTexture2DGatherHeight = 46,
    cudaDevAttrMaxTexture3DWidthAlt = 47,
    cudaDevAttrMaxTexture3DHeightAlt = 48,
    cudaDevAttrMaxTexture3DDepthAlt = 49,
    cudaDevAttrPciDomainId = 50,
    cudaDevAttrTexturePitchAlignment = 51,
    cudaDevAttrMaxTextureCubemapWidth = 52,
    cudaDevAttrMaxTextureCubemapLayeredWidth = 53,
    cudaDevAttrMaxTextureCubemapLayeredLayers = 54,
    cudaDevAttrMaxSurface1DWidth = 55,
    cudaDevAttrMaxSurface2DWidth = 56,
    cudaDevAttrMaxSurface2DHeight = 57,
    cudaDevAttrMaxSurface3DWidth = 58,
    cudaDevAttrMaxSurface3DHeight = 59,
    cudaDevAttrMaxSurface3DDepth = 60,
    cudaDevAttrMaxSurface1DLayeredWidth = 61,
    cudaDevAttrMaxSurface1DLayeredLayers = 62,
    cudaDevAttrMaxSurface2DLayeredWidth = 63,
    cudaDevAttrMaxSurface2DLayeredHeight = 64,
    cudaDevAttrMaxSurface2DLayeredLayers = 65,
    cudaDevAttrMaxSurfaceCubemapWidth = 66,
    cudaDevAttrMaxSurfaceCubemapLayeredWidth = 67,
    cudaDevAttrMaxSurfaceCubemapLayeredLayers = 68,
    cudaDevAttrMaxTexture1DLinearWidth = 69,
    cudaDevAttrMaxTexture2DLinearWidth = 70,
    cudaDevAttrMaxTexture2DLinearHeight = 71,
    cudaDevAttrMaxTexture2DLinearPitch = 72,
    cudaDevAttrMaxTexture2DMipmappedWidth = 73,
    cudaDevAttrMaxTexture2DMipmappedHeight = 74,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxTexture1DMipmappedWidth = 77,
    cudaDevAttrStreamPrioritiesSupported = 78,
    cudaDevAttrGlobalL1CacheSupported = 79,
    cudaDevAttrLocalL1CacheSupported = 80,
    cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
    cudaDevAttrMaxRegistersPerMultiprocessor = 82,
    cudaDevAttrManagedMemory = 83,
    cudaDevAttrIsMultiGpuBoard = 84,
    cudaDevAttrMultiGpuBoardGroupID = 85,
    cudaDevAttrHostNativeAtomicSupported = 86,
    cudaDevAttrSingleToDoublePrecisionPerfRatio = 87,
    cudaDevAttrPageableMemoryAccess = 88,
    cudaDevAttrConcurrentManagedAccess = 89,
    cudaDevAttrComputePreemptionSupported = 90,
    cudaDevAttrCanUseHostPointerForRegisteredMem = 91,
    cudaDevAttrReserved92 = 92,
    cudaDevAttrReserved93 = 93,
    cudaDevAttrReserved94 = 94,
    cudaDevAttrCooperativeLaunch = 95,
    cudaDevAttrReserved96 = 96,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
    cudaDevAttrCanFlushRemoteWrites = 98,
    cudaDevAttrHostRegisterSupported = 99,
    cudaDevAttrPageableMemoryAccessUsesHostPageTables = 100,
    cudaDevAttrDirectManagedMemAccessFromHost = 101,
    cudaDevAttrMaxBlocksPerMultiprocessor = 106,
    cudaDevAttrMaxPersistingL2CacheSize = 108,
    cudaDevAttrMaxAccessPolicyWindowSize = 109,
    cudaDevAttrReservedSharedMemoryPerBlock = 111,
    cudaDevAttrSparseCudaArraySupported = 112,
    cudaDevAttrHostRegisterReadOnlySupported = 113,
    cudaDevAttrTimelineSemaphoreInteropSupported = 114,
    cudaDevAttrMemoryPoolsSupported = 115,
    cudaDevAttrGPUDirectRDMASupported = 116,
    cudaDevAttrGPUDirectRDMAFlushWritesOptions = 117,
    cudaDevAttrGPUDirectRDMAWritesOrdering = 118,
    cudaDevAttrMemoryPoolSupportedHandleTypes = 119,
    cudaDevAttrClusterLaunch = 120,
    cudaDevAttrDeferredMappingCudaArraySupported = 121,
    cudaDevAttrReserved122 = 122,
    cudaDevAttrReserved123 = 123,
    cudaDevAttrReserved124 = 124,
    cudaDevAttrIpcEventSupport = 125,
    cudaDevAttrMemSyncDomainCount = 126,
    cudaDevAttrReserved127 = 127,
    cudaDevAttrReserved128 = 128,
    cudaDevAttrReserved129 = 129,
    cudaDevAttrNumaConfig = 130,
    cudaDevAttrNumaId = 131,
    cudaDevAttrReserved132 = 132,
    cudaDevAttrMpsEnabled = 133,
    cudaDevAttrHostNumaId = 134,
    cudaDevAttrD3D12CigSupported = 135,
    cudaDevAttrVulkanCigSupported = 138,
    cudaDevAttrGpuPciDeviceId = 139,
    cudaDevAttrGpuPciSubsystemId = 140,
    cudaDevAttrReserved141 = 141,
    cudaDevAttrHostNumaMemoryPoolsSupported = 142,
    cudaDevAttrHostNumaMultinodeIpcSupported = 143,
    cudaDevAttrHostMemoryPoolsSupported = 144,
    cudaDevAttrReserved145 = 145,
    cudaDevAttrOnlyPartialHostNativeAtomicSupported = 147,
    cudaDevAttrMax = 148

};

/* ---- flags (CUDA 13.0 values) ---------------------------------------------------------- */
#define cudaHostAllocDefault                0x00
#define cudaHostAllocPortable               0x01
#define cudaHostAllocMapped                 0x02
#define cudaHostAllocWriteCombined          0x04
#define cudaHostRegisterDefault             0x00
#define cudaHostRegisterPortable            0x01
#define cudaHostRegisterMapped              0x02
#define cudaHostRegisterIoMemory            0x04
#define cudaHostRegisterReadOnly            0x08
#define cudaStreamDefault                   0x00
#define cudaStreamNonBlocking               0x01
#define cudaStreamLegacy                    ((cudaStream_t)0x1)
#define cudaStreamPerThread                 ((cudaStream_t)0x2)
#define cudaEventDefault                    0x00
#define cudaEventBlockingSync               0x01
#define cudaEventDisableTiming              0x02
#define cudaEventInterprocess               0x04
#define cudaEventRecordDefault              0x00
#define cudaEventRecordExternal             0x01
#define cudaEventWaitDefault                0x00
#define cudaEventWaitExternal               0x01
#define cudaDeviceScheduleAuto              0x00
#define cudaDeviceScheduleSpin              0x01
#define cudaDeviceScheduleYield             0x02
#define cudaDeviceScheduleBlockingSync      0x04
#define cudaDeviceBlockingSync              0x04
#define cudaDeviceScheduleMask              0x07
#define cudaDeviceMapHost                   0x08
#define cudaDeviceLmemResizeToMax           0x10
#define cudaDeviceSyncMemops                0x80
#define cudaDeviceMask                      0xff
#define cudaMemAttachGlobal                 0x01
#define cudaMemAttachHost                   0x02
#define cudaMemAttachSingle                 0x04
#define cudaCpuDeviceId                     ((int)-1)
#define cudaInvalidDeviceId                 ((int)-2)
#define cudaInitDeviceFlagsAreValid         0x01
#define cudaMemPoolCreateUsageHwDecompress  0x2
#define cudaOccupancyDefault                0x00
#define cudaOccupancyDisableCachingOverride 0x01

/* ---- enums (CUDA 13.0 values) ---------------------------------------------------------- */
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
    cudaFuncAttributeClusterDimMustBeSet = 10,
    cudaFuncAttributeRequiredClusterWidth = 11,
    cudaFuncAttributeRequiredClusterHeight = 12,
    cudaFuncAttributeRequiredClusterDepth = 13,
    cudaFuncAttributeNonPortableClusterSizeAllowed = 14,
    cudaFuncAttributeClusterSchedulingPolicyPreference = 15,
    cudaFuncAttributeMax
};

enum cudaFuncCache {
    cudaFuncCachePreferNone = 0,
    cudaFuncCachePreferShared = 1,
    cudaFuncCachePreferL1 = 2,
    cudaFuncCachePreferEqual = 3
};

enum cudaSharedCarveout {
    cudaSharedmemCarveoutDefault = -1,
    cudaSharedmemCarveoutMaxShared = 100,
    cudaSharedmemCarveoutMaxL1 = 0
};

enum cudaComputeMode {
    cudaComputeModeDefault = 0,
    cudaComputeModeExclusive = 1,
    cudaComputeModeProhibited = 2,
    cudaComputeModeExclusiveProcess = 3
};

enum cudaLimit {
    cudaLimitStackSize = 0x00,
    cudaLimitPrintfFifoSize = 0x01,
    cudaLimitMallocHeapSize = 0x02,
    cudaLimitDevRuntimeSyncDepth = 0x03,
    cudaLimitDevRuntimePendingLaunchCount = 0x04,
    cudaLimitMaxL2FetchGranularity = 0x05,
    cudaLimitPersistingL2CacheSize = 0x06
};

enum cudaMemoryAdvise {
    cudaMemAdviseSetReadMostly = 1,
    cudaMemAdviseUnsetReadMostly = 2,
    cudaMemAdviseSetPreferredLocation = 3,
    cudaMemAdviseUnsetPreferredLocation = 4,
    cudaMemAdviseSetAccessedBy = 5,
    cudaMemAdviseUnsetAccessedBy = 6
};

enum cudaMemRangeAttribute {
    cudaMemRangeAttributeReadMostly = 1,
    cudaMemRangeAttributePreferredLocation = 2,
    cudaMemRangeAttributeAccessedBy = 3,
    cudaMemRangeAttributeLastPrefetchLocation = 4,
    cudaMemRangeAttributePreferredLocationType = 5,
    cudaMemRangeAttributePreferredLocationId = 6,
    cudaMemRangeAttributeLastPrefetchLocationType = 7,
    cudaMemRangeAttributeLastPrefetchLocationId = 8
};

enum cudaMemPoolAttr {
    cudaMemPoolReuseFollowEventDependencies = 0x1,
    cudaMemPoolReuseAllowOpportunistic = 0x2,
    cudaMemPoolReuseAllowInternalDependencies = 0x3,
    cudaMemPoolAttrReleaseThreshold = 0x4,
    cudaMemPoolAttrReservedMemCurrent = 0x5,
    cudaMemPoolAttrReservedMemHigh = 0x6,
    cudaMemPoolAttrUsedMemCurrent = 0x7,
    cudaMemPoolAttrUsedMemHigh = 0x8
};

enum cudaMemLocationType {
    cudaMemLocationTypeInvalid = 0,
    cudaMemLocationTypeNone = 0,
    cudaMemLocationTypeDevice = 1,
    cudaMemLocationTypeHost = 2,
    cudaMemLocationTypeHostNuma = 3,
    cudaMemLocationTypeHostNumaCurrent = 4
};

enum cudaMemAccessFlags {
    cudaMemAccessFlagsProtNone = 0,
    cudaMemAccessFlagsProtRead = 1,
    cudaMemAccessFlagsProtReadWrite = 3
};

enum cudaMemAllocationType {
    cudaMemAllocationTypeInvalid = 0x0,
    cudaMemAllocationTypePinned = 0x1,
    cudaMemAllocationTypeManaged = 0x2,
    cudaMemAllocationTypeMax = 0x7FFFFFFF
};

enum cudaMemAllocationHandleType {
    cudaMemHandleTypeNone = 0x0,
    cudaMemHandleTypePosixFileDescriptor = 0x1,
    cudaMemHandleTypeWin32 = 0x2,
    cudaMemHandleTypeWin32Kmt = 0x4,
    cudaMemHandleTypeFabric = 0x8
};

/* ---- structs (CUDA 13.0 layouts: the fields CUDA 13 removed are absent here too) ------- */
struct cudaMemLocation {
    enum cudaMemLocationType type;
    int id;
};

struct cudaMemAccessDesc {
    struct cudaMemLocation location;
    enum cudaMemAccessFlags flags;
};

struct cudaMemPoolProps {
    enum cudaMemAllocationType allocType;
    enum cudaMemAllocationHandleType handleTypes;
    struct cudaMemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
};

struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
    long reserved[8];
};

struct cudaFuncAttributes {
    size_t sharedSizeBytes;
    size_t constSizeBytes;
    size_t localSizeBytes;
    int maxThreadsPerBlock;
    int numRegs;
    int ptxVersion;
    int binaryVersion;
    int cacheModeCA;
    int maxDynamicSharedSizeBytes;
    int preferredShmemCarveout;
    int clusterDimMustBeSet;
    int requiredClusterWidth;
    int requiredClusterHeight;
    int requiredClusterDepth;
    int clusterSchedulingPolicyPreference;
    int nonPortableClusterSizeAllowed;
    int reserved[16];
};

struct cudaDeviceProp {
    char         name[256];
    cudaUUID_t   uuid;
    char         luid[8];
    unsigned int luidDeviceNodeMask;
    size_t       totalGlobalMem;
    size_t       sharedMemPerBlock;
    int          regsPerBlock;
    int          warpSize;
    size_t       memPitch;
    int          maxThreadsPerBlock;
    int          maxThreadsDim[3];
    int          maxGridSize[3];
    size_t       totalConstMem;
    int          major;
    int          minor;
    size_t       textureAlignment;
    size_t       texturePitchAlignment;
    int          multiProcessorCount;
    int          integrated;
    int          canMapHostMemory;
    int          maxTexture1D;
    int          maxTexture1DMipmap;
    int          maxTexture2D[2];
    int          maxTexture2DMipmap[2];
    int          maxTexture2DLinear[3];
    int          maxTexture2DGather[2];
    int          maxTexture3D[3];
    int          maxTexture3DAlt[3];
    int          maxTextureCubemap;
    int          maxTexture1DLayered[2];
    int          maxTexture2DLayered[3];
    int          maxTextureCubemapLayered[2];
    int          maxSurface1D;
    int          maxSurface2D[2];
    int          maxSurface3D[3];
    int          maxSurface1DLayered[2];
    int          maxSurface2DLayered[3];
    int          maxSurfaceCubemap;
    int          maxSurfaceCubemapLayered[2];
    size_t       surfaceAlignment;
    int          concurrentKernels;
    int          ECCEnabled;
    int          pciBusID;
    int          pciDeviceID;
    int          pciDomainID;
    int          tccDriver;
    int          asyncEngineCount;
    int          unifiedAddressing;
    int          memoryBusWidth;
    int          l2CacheSize;
    int          persistingL2CacheMaxSize;
    int          maxThreadsPerMultiProcessor;
    int          streamPrioritiesSupported;
    int          globalL1CacheSupported;
    int          localL1CacheSupported;
    size_t       sharedMemPerMultiprocessor;
    int          regsPerMultiprocessor;
    int          managedMemory;
    int          isMultiGpuBoard;
    int          multiGpuBoardGroupID;
    int          hostNativeAtomicSupported;
    int          pageableMemoryAccess;
    int          concurrentManagedAccess;
    int          computePreemptionSupported;
    int          canUseHostPointerForRegisteredMem;
    int          cooperativeLaunch;
    size_t       sharedMemPerBlockOptin;
    int          pageableMemoryAccessUsesHostPageTables;
    int          directManagedMemAccessFromHost;
    int          maxBlocksPerMultiProcessor;
    int          accessPolicyMaxWindowSize;
    size_t       reservedSharedMemPerBlock;
    int          hostRegisterSupported;
    int          sparseCudaArraySupported;
    int          hostRegisterReadOnlySupported;
    int          timelineSemaphoreInteropSupported;
    int          memoryPoolsSupported;
    int          gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int          gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int          deferredMappingCudaArraySupported;
    int          ipcEventSupported;
    int          clusterLaunch;
    int          unifiedFunctionPointers;
    int          deviceNumaConfig;
    int          deviceNumaId;
    int          mpsEnabled;
    int          hostNumaId;
    unsigned int gpuPciDeviceID;
    unsigned int gpuPciSubsystemID;
    int          hostNumaMultinodeIpcSupported;
    int          reserved[56];
};

/* ---- the API (CUDA 13.0 signatures) ---------------------------------------------------- */
/* errors */
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

/* device */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags);
cudaError_t cudaSetDeviceFlags(unsigned int flags);
cudaError_t cudaGetDeviceFlags(unsigned int *flags);
cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit);
cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value);
cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaDriverGetVersion(int *driverVersion);
cudaError_t cudaRuntimeGetVersion(int *runtimeVersion);
cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peerDevice);
enum cudaDeviceP2PAttr {
    cudaDevP2PAttrPerformanceRank = 1,
    cudaDevP2PAttrAccessSupported = 2,
    cudaDevP2PAttrNativeAtomicSupported = 3,
    cudaDevP2PAttrCudaArrayAccessSupported = 4,
    cudaDevP2PAttrOnlyPartialNativeAtomicSupported = 5
};
cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice, int dstDevice);
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId);
/* CUDA IPC: declared so a program builds; every call is "not supported here" (one process). */
#define CUDA_IPC_HANDLE_SIZE 64
#define cudaIpcMemLazyEnablePeerAccess 0x01
typedef struct cudaIpcMemHandle_st { char reserved[CUDA_IPC_HANDLE_SIZE]; } cudaIpcMemHandle_t;
typedef struct cudaIpcEventHandle_st { char reserved[CUDA_IPC_HANDLE_SIZE]; } cudaIpcEventHandle_t;
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr);
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags);
cudaError_t cudaIpcCloseMemHandle(void *devPtr);
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event);
cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle);

/* memory */
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height);
cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags CUEMU_DV(cudaMemAttachGlobal));
cudaError_t cudaMallocHost(void **ptr, size_t size);
cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void *ptr);
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags);
cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr);
cudaError_t cudaMemset(void *devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count);
cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                size_t count, cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                               size_t offset CUEMU_DV(0),
                               enum cudaMemcpyKind kind CUEMU_DV(cudaMemcpyHostToDevice));
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count,
                                 size_t offset CUEMU_DV(0),
                                 enum cudaMemcpyKind kind CUEMU_DV(cudaMemcpyDeviceToHost));
cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind,
                                    cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol);
cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol);

/* managed memory */
cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                                 unsigned int flags, cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                          struct cudaMemLocation location);
cudaError_t cudaMemRangeGetAttribute(void *data, size_t dataSize, enum cudaMemRangeAttribute attribute,
                                     const void *devPtr, size_t count);

/* stream-ordered allocation and pools */
cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                    cudaStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device);
cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool);
cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device);
cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps);
cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep);
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList,
                                 size_t count);
cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
                                 struct cudaMemLocation *location);

/* streams and events */
cudaError_t cudaStreamCreate(cudaStream_t *pStream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                unsigned int flags CUEMU_DV(0));
cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags);
cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream CUEMU_DV(0));
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);
#define CUDART_CB
typedef void (CUDART_CB *cudaHostFn_t)(void *userData);
typedef void (CUDART_CB *cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void *userData);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData);
cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                                  unsigned int flags);

/* functions */
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func);
cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                                          size_t dynamicSMemSize);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
                                                                   int blockSize, size_t dynamicSMemSize,
                                                                   unsigned int flags);

/* ---- emulator entry points behind the allocation macros (not CUDA API) ----------------- */
/* Same behaviour as the CUDA call of the same name, plus the caller's file and line. */
cudaError_t cuemu_malloc_at(const char *file, int line, void **devPtr, size_t size);
cudaError_t cuemu_mallocPitch_at(const char *file, int line, void **devPtr, size_t *pitch,
                                 size_t width, size_t height);
cudaError_t cuemu_mallocManaged_at(const char *file, int line, void **devPtr, size_t size,
                                   unsigned int flags CUEMU_DV(cudaMemAttachGlobal));
cudaError_t cuemu_mallocHost_at(const char *file, int line, void **ptr, size_t size);
cudaError_t cuemu_hostAlloc_at(const char *file, int line, void **pHost, size_t size,
                               unsigned int flags);
cudaError_t cuemu_mallocAsync_at(const char *file, int line, void **devPtr, size_t size,
                                 cudaStream_t hStream);
cudaError_t cuemu_mallocFromPoolAsync_at(const char *file, int line, void **ptr, size_t size,
                                         cudaMemPool_t memPool, cudaStream_t stream);
/* cudaMemcpyTo/FromSymbol and cudaGetSymbolAddress/Size with the symbol's size known
   (from the C++ templates, which see sizeof(T)); size 0 = unknown (C callers). */
cudaError_t cuemu_memcpyToSymbol(const void *symbol, size_t symbolSize, const void *src,
                                 size_t count, size_t offset, enum cudaMemcpyKind kind,
                                 cudaStream_t stream);
cudaError_t cuemu_memcpyFromSymbol(void *dst, const void *symbol, size_t symbolSize,
                                   size_t count, size_t offset, enum cudaMemcpyKind kind,
                                   cudaStream_t stream);
cudaError_t cuemu_getSymbolAddress(void **devPtr, const void *symbol, size_t symbolSize);

/* The call site of the next queued operation (set by the macros below, consumed by it). */
void cuemu_site(const char *file, int line);

/* The stream of every queued operation, in issue order, for tests (ctypes): up to max
   entries since the last cuemuStreamLogClear into stream_ids (0: the legacy default stream,
   -1: cudaStreamPerThread, 1, 2, ...: streams in creation order) and kinds (1 kernel,
   2 copy, 3 set, 4 event record, 5 host function, 6 cudaMallocAsync, 7 cudaFreeAsync,
   8 cudaStreamWaitEvent, 9 cudaMemPrefetchAsync, logged at the call: a prefetch is a hint
   the emulator carries out at once, 12 an NCCL collective); returns how many were logged
   (may exceed max).
   The log also holds calls that are not queued, for tests of memory behaviour that right
   answers cannot show: 10 cudaMemAdvise (stream 0: advice is not stream-ordered) and
   11 a host synchronisation (cudaStreamSynchronize: its stream; cudaEventSynchronize and
   cudaDeviceSynchronize: 0). cuemuStreamLogDetail gives each entry's detail in the same order:
   a prefetch's destination (a device ordinal, or -1 = cudaCpuDeviceId for the host), the
   advice (a cudaMemoryAdvise value), the synchronisation (1 stream, 2 event, 3 device); 0 for
   the rest. CUDA 13.0's batch calls (emu/runtime/batch.c) log 14 once per batch (detail: its
   items) before their items, a discard 13 per range; cudaCtxResetPersistingL2Cache logs 15.
   cuemuStreamLogDevice gives the device each entry's stream belongs to (stream ids
   0 and -1 are each device's own default streams; CUEMU_DEVICES). */
int  cuemuStreamLog(long long *stream_ids, int *kinds, int max);
int  cuemuStreamLogDetail(int *details, int max);
int  cuemuStreamLogDevice(int *devices, int max);
void cuemuStreamLogClear(void);
/* Not CUDA: the streams (created, not destroyed) and events (created, not destroyed) alive
   now, so a test can check that a function gives back what it creates. */
void cuemuLiveObjects(int *streams, int *events);

/* Python (ctypes) reads the emulator's diagnostics through these two. */
const char *cuemuLastDiagnostic(void);
void cuemuClearDiagnostic(void);
/* Not CUDA: bytes of managed memory whose last prefetch went to the device, now and at their
   peak since the last reset (reset_peak != 0 resets it to now). A teaching aid for passes
   under a memory budget; a GPU has no such counter. */
void cuemuManagedDeviceBytes(size_t *now, size_t *peak, int reset_peak);
/* Not CUDA: the memory-access profile (emu/core/profile.c; CUEMU_PROFILE=1 turns it on and
   prints its table at exit). Counted, not timed: per kernel and source line, warp-wide requests,
   32-byte sectors (global) and bank wavefronts (shared). Needs the clang build (load/store
   hooks): Available() is 0 once a kernel ran with no access seen, -1 before any, 1 when real.
   Row(i, ...) fills out[5] = {write, shared, requests, sectors or wavefronts, lanes} for the
   rows that Rows() (which gathers the counts so far) numbers. */
int  cuemuProfileEnable(int on);
void cuemuProfileReset(void);
int  cuemuProfileAvailable(void);
int  cuemuProfileRows(void);
int  cuemuProfileRow(int i, char *kernel, int kernel_n, char *where, int where_n, long long *out);
const char *cuemuProfileReport(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Runtime calls and types beyond the course's subset (stream attributes, occupancy helpers,
   profiler, ...), kept apart: emu/runtime/extras.c implements them. */
#include "cuemu_runtime_ext.h"
/* CUDA 13.0's batched prefetch, discard and copy calls, and pools by location and type */
#include "cuemu_cuda13_memory.h"
/* tensor maps and cudaGetDriverEntryPointByVersion (emu/runtime/tensor_map.c) */
#include "cuemu_tensor_map.h"

#ifdef __cplusplus
/* ---- C++ overloads that CUDA's own cuda_runtime.h adds -------------------------------- */
static inline cudaError_t cudaEventCreate(cudaEvent_t *event, unsigned int flags)
{ return cudaEventCreateWithFlags(event, flags); }
static inline cudaError_t cudaMallocHost(void **ptr, size_t size, unsigned int flags)
{ return cudaHostAlloc(ptr, size, flags); }
template <class T> static inline cudaError_t cudaMallocHost(T **ptr, size_t size, unsigned int flags = 0)
{ return cudaHostAlloc((void **)(void *)ptr, size, flags); }
template <class T> static inline cudaError_t cudaHostAlloc(T **ptr, size_t size, unsigned int flags)
{ return cudaHostAlloc((void **)(void *)ptr, size, flags); }
template <class T> static inline cudaError_t cudaHostGetDevicePointer(T **pDevice, void *pHost, unsigned int flags)
{ return cudaHostGetDevicePointer((void **)(void *)pDevice, pHost, flags); }
template <class T> static inline cudaError_t cudaMallocManaged(T **devPtr, size_t size, unsigned int flags = cudaMemAttachGlobal)
{ return cudaMallocManaged((void **)(void *)devPtr, size, flags); }
template <class T> static inline cudaError_t cudaMalloc(T **devPtr, size_t size)
{ return cudaMalloc((void **)(void *)devPtr, size); }
template <class T> static inline cudaError_t cudaMallocPitch(T **devPtr, size_t *pitch, size_t width, size_t height)
{ return cudaMallocPitch((void **)(void *)devPtr, pitch, width, height); }
static inline cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{ return cudaMallocFromPoolAsync(ptr, size, memPool, stream); }
template <class T> static inline cudaError_t cudaMallocAsync(T **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{ return cudaMallocFromPoolAsync((void **)(void *)ptr, size, memPool, stream); }
template <class T> static inline cudaError_t cudaMallocAsync(T **ptr, size_t size, cudaStream_t stream)
{ return cudaMallocAsync((void **)(void *)ptr, size, stream); }
template <class T> static inline cudaError_t cudaMallocFromPoolAsync(T **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{ return cudaMallocFromPoolAsync((void **)(void *)ptr, size, memPool, stream); }

/* A __device__/__constant__ variable is an ordinary global here, so "the symbol" is its
   address; the template also knows its size, which lets an overrun be refused like CUDA does. */
template <class T> static inline cudaError_t cudaMemcpyToSymbol(const T &symbol, const void *src, size_t count,
        size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyHostToDevice)
{ return cuemu_memcpyToSymbol((const void *)&symbol, sizeof(T), src, count, offset, kind, 0); }
template <class T> static inline cudaError_t cudaMemcpyToSymbolAsync(const T &symbol, const void *src, size_t count,
        size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyHostToDevice, cudaStream_t stream = 0)
{ return cuemu_memcpyToSymbol((const void *)&symbol, sizeof(T), src, count, offset, kind, stream); }
template <class T> static inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &symbol, size_t count,
        size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost)
{ return cuemu_memcpyFromSymbol(dst, (const void *)&symbol, sizeof(T), count, offset, kind, 0); }
template <class T> static inline cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const T &symbol, size_t count,
        size_t offset = 0, enum cudaMemcpyKind kind = cudaMemcpyDeviceToHost, cudaStream_t stream = 0)
{ return cuemu_memcpyFromSymbol(dst, (const void *)&symbol, sizeof(T), count, offset, kind, stream); }
template <class T> static inline cudaError_t cudaGetSymbolAddress(void **devPtr, const T &symbol)
{ return cuemu_getSymbolAddress(devPtr, (const void *)&symbol, sizeof(T)); }
template <class T> static inline cudaError_t cudaGetSymbolSize(size_t *size, const T &symbol)
{   /* the C function reports a NULL `size` (and records the error) */
    if (!size) return cudaGetSymbolSize(size, (const void *)&symbol);
    *size = sizeof(T);
    return cudaSuccess; }

/* A kernel is identified by its address, the same key the launcher uses. */
template <class T> static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, T *entry)
{ return cudaFuncGetAttributes(attr, (const void *)entry); }
template <class T> static inline cudaError_t cudaFuncSetAttribute(T *entry, enum cudaFuncAttribute attr, int value)
{ return cudaFuncSetAttribute((const void *)entry, attr, value); }
template <class T> static inline cudaError_t cudaFuncSetCacheConfig(T *func, enum cudaFuncCache cacheConfig)
{ return cudaFuncSetCacheConfig((const void *)func, cacheConfig); }
template <class T> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, T func,
        int blockSize, size_t dynamicSMemSize)
{ return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, (const void *)func, blockSize,
                                                                dynamicSMemSize, cudaOccupancyDefault); }
template <class T> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
        T func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{ return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, (const void *)func, blockSize,
                                                                dynamicSMemSize, flags); }

/* The same overloads for the call-site-recording entry points the macros below call. */
template <class T> static inline cudaError_t cuemu_malloc_at(const char *f, int l, T **p, size_t size)
{ return cuemu_malloc_at(f, l, (void **)(void *)p, size); }
template <class T> static inline cudaError_t cuemu_mallocPitch_at(const char *f, int l, T **p, size_t *pitch,
        size_t width, size_t height)
{ return cuemu_mallocPitch_at(f, l, (void **)(void *)p, pitch, width, height); }
template <class T> static inline cudaError_t cuemu_mallocManaged_at(const char *f, int l, T **p, size_t size,
        unsigned int flags = cudaMemAttachGlobal)
{ return cuemu_mallocManaged_at(f, l, (void **)(void *)p, size, flags); }
static inline cudaError_t cuemu_mallocHost_at(const char *f, int l, void **p, size_t size, unsigned int flags)
{ return cuemu_hostAlloc_at(f, l, p, size, flags); }
template <class T> static inline cudaError_t cuemu_mallocHost_at(const char *f, int l, T **p, size_t size,
        unsigned int flags = 0)
{ return cuemu_hostAlloc_at(f, l, (void **)(void *)p, size, flags); }
template <class T> static inline cudaError_t cuemu_hostAlloc_at(const char *f, int l, T **p, size_t size,
        unsigned int flags)
{ return cuemu_hostAlloc_at(f, l, (void **)(void *)p, size, flags); }
static inline cudaError_t cuemu_mallocAsync_at(const char *f, int l, void **p, size_t size,
        cudaMemPool_t pool, cudaStream_t stream)
{ return cuemu_mallocFromPoolAsync_at(f, l, p, size, pool, stream); }
template <class T> static inline cudaError_t cuemu_mallocAsync_at(const char *f, int l, T **p, size_t size,
        cudaMemPool_t pool, cudaStream_t stream)
{ return cuemu_mallocFromPoolAsync_at(f, l, (void **)(void *)p, size, pool, stream); }
template <class T> static inline cudaError_t cuemu_mallocAsync_at(const char *f, int l, T **p, size_t size,
        cudaStream_t stream)
{ return cuemu_mallocAsync_at(f, l, (void **)(void *)p, size, stream); }
template <class T> static inline cudaError_t cuemu_mallocFromPoolAsync_at(const char *f, int l, T **p, size_t size,
        cudaMemPool_t pool, cudaStream_t stream)
{ return cuemu_mallocFromPoolAsync_at(f, l, (void **)(void *)p, size, pool, stream); }
#endif /* __cplusplus */

/* ---- call-site recording ----------------------------------------------------------------
   Function-like macros, so `&cudaMalloc` and `(cudaMalloc)(...)` still reach the functions.
   Variadic, so commas inside template arguments and the C++ default/extra arguments pass. */
#ifndef CUEMU_NO_SITE_MACROS
#define cudaMalloc(...)              cuemu_malloc_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaMallocPitch(...)         cuemu_mallocPitch_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaMallocManaged(...)       cuemu_mallocManaged_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaMallocHost(...)          cuemu_mallocHost_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaHostAlloc(...)           cuemu_hostAlloc_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaMallocAsync(...)         cuemu_mallocAsync_at(__FILE__, __LINE__, __VA_ARGS__)
#define cudaMallocFromPoolAsync(...) cuemu_mallocFromPoolAsync_at(__FILE__, __LINE__, __VA_ARGS__)
/* Queued operations remember where they were issued, for race and stale-read reports. */
#define cudaMemcpy(...)              (cuemu_site(__FILE__, __LINE__), cudaMemcpy(__VA_ARGS__))
#define cudaMemcpyAsync(...)         (cuemu_site(__FILE__, __LINE__), cudaMemcpyAsync(__VA_ARGS__))
#define cudaMemcpyPeer(...)          (cuemu_site(__FILE__, __LINE__), cudaMemcpyPeer(__VA_ARGS__))
#define cudaMemcpyPeerAsync(...)     (cuemu_site(__FILE__, __LINE__), cudaMemcpyPeerAsync(__VA_ARGS__))
#define cudaMemcpy2D(...)            (cuemu_site(__FILE__, __LINE__), cudaMemcpy2D(__VA_ARGS__))
#define cudaMemcpy2DAsync(...)       (cuemu_site(__FILE__, __LINE__), cudaMemcpy2DAsync(__VA_ARGS__))
#define cudaMemset(...)              (cuemu_site(__FILE__, __LINE__), cudaMemset(__VA_ARGS__))
#define cudaMemsetAsync(...)         (cuemu_site(__FILE__, __LINE__), cudaMemsetAsync(__VA_ARGS__))
#define cudaMemset2D(...)            (cuemu_site(__FILE__, __LINE__), cudaMemset2D(__VA_ARGS__))
#define cudaEventRecord(...)         (cuemu_site(__FILE__, __LINE__), cudaEventRecord(__VA_ARGS__))
#define cudaLaunchHostFunc(...)      (cuemu_site(__FILE__, __LINE__), cudaLaunchHostFunc(__VA_ARGS__))
#define cudaFreeAsync(...)           (cuemu_site(__FILE__, __LINE__), cudaFreeAsync(__VA_ARGS__))
#define cudaStreamWaitEvent(...)     (cuemu_site(__FILE__, __LINE__), cudaStreamWaitEvent(__VA_ARGS__))
#endif

#if defined(__cplusplus) && defined(__has_include)
#if __has_include("cuemu_device.h")
#include "cuemu_device.h"
#endif
#endif

#endif /* CUEMU_CUDA_RUNTIME_H */
