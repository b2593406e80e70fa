/* SPDX-License-Identifier: MIT */
/*
 * device.c: the emulated devices (CUEMU_DEVICES, default 1), their properties and attributes,
 * the current device of each host thread, peer access, synchronisation, reset.
 *
 * The device reports the limits of an NVIDIA H200 (compute capability 9.0, 132 SMs, 48 KiB
 * of shared memory per block, 227 KiB opt-in, 60 MiB of L2), so a chapter that sizes its
 * launch from the properties behaves as it would there. Its memory is CUEMU_DEVICE_MEMORY
 * (default 4 GiB). Clocks and bus width are the H200's; timings on the CPU mean nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define SMEM_PER_BLOCK        49152
#define SMEM_PER_BLOCK_OPTIN  232448
#define SMEM_PER_SM           233472
#define CLOCK_KHZ             CUEMU_CLOCK_KHZ
#define MEM_CLOCK_KHZ         3201000
#define BUS_WIDTH_BITS        6016
#define L2_BYTES              (60 * 1024 * 1024)
#define SM_COUNT              132

int cuemu_max_threads_per_block(void) { return 1024; }

void cuemu_max_block_dim(int out[3])
{
    out[0] = 1024;
    out[1] = 1024;
    out[2] = 64;
}

void cuemu_max_grid_dim(int out[3])
{
    out[0] = 2147483647;
    out[1] = 65535;
    out[2] = 65535;
}

size_t cuemu_shared_mem_per_block(void) { return SMEM_PER_BLOCK; }
size_t cuemu_shared_mem_per_block_optin(void) { return SMEM_PER_BLOCK_OPTIN; }

static unsigned int device_flags;
static size_t limits[7] = { 1024, 1048576, 8388608, 2, 2048, 32, 0 };

/* ---- how many devices, and which one is current ----------------------------------------- */
static int ndev;                    /* 0: CUEMU_DEVICES not read yet */
static int config_bad;
static __thread int cur_dev;        /* per host thread, as CUDA keeps it */
static unsigned char peer_on[RT_MAX_DEVICES][RT_MAX_DEVICES];

static void ndev_parse(void)
{
    const char *env = getenv("CUEMU_DEVICES");
    char *end = NULL;
    long v = env && *env ? strtol(env, &end, 10) : 1;
    if (env && *env && (*end != '\0' || v < 1 || v > RT_MAX_DEVICES)) {
        config_bad = 1;
        v = 1;
        cuemu_diag("CUEMU_DEVICES=\"%s\" is not a number of emulated devices from 1 to %d: "
                   "every CUDA call fails with cudaErrorNoDevice", env, RT_MAX_DEVICES);
    }
    ndev = (int)v;
}

int rt_ndev(void)
{
    if (!ndev) ndev_parse();
    return ndev;
}

int rt_config_error(void)
{
    if (!ndev) ndev_parse();
    return config_bad ? cudaErrorNoDevice : 0;
}

int rt_dev_valid(int dev) { return dev >= 0 && dev < rt_ndev(); }
int rt_cur_dev(void) { return cur_dev; }

int rt_peer_enabled(int dev, int peer)
{
    return dev == peer || (rt_dev_valid(dev) && rt_dev_valid(peer) && peer_on[dev][peer]);
}

void rt_peers_reset(void) { memset(peer_on, 0, sizeof peer_on); }

static cudaError_t check_device(int device)
{
    return rt_dev_valid(device) ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t (cudaGetDeviceCount)(int *count)
{
    if (!count) return rt_err(cudaErrorInvalidValue);
    if (rt_config_error()) { *count = 0; return rt_err(cudaErrorNoDevice); }
    *count = rt_ndev();
    return cudaSuccess;
}

cudaError_t (cudaGetDevice)(int *device)
{
    if (!device) return rt_err(cudaErrorInvalidValue);
    *device = cur_dev;
    return cudaSuccess;
}

cudaError_t (cudaSetDevice)(int device)
{
    if (rt_config_error()) return rt_err((cudaError_t)rt_config_error());
    cudaError_t e = check_device(device);
    if (e == cudaSuccess) cur_dev = device;
    return rt_err(e);
}

cudaError_t (cudaInitDevice)(int device, unsigned int deviceFlags, unsigned int flags)
{
    if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid) return rt_err(cudaErrorInvalidValue);
    if (flags & cudaInitDeviceFlagsAreValid) {
        if (deviceFlags & ~(unsigned)cudaDeviceMask) return rt_err(cudaErrorInvalidValue);
        device_flags = deviceFlags;
    }
    return rt_err(check_device(device));
}

cudaError_t (cudaSetDeviceFlags)(unsigned int flags)
{
    if (flags & ~(unsigned)cudaDeviceMask) return rt_err(cudaErrorInvalidValue);
    device_flags = flags;
    return cudaSuccess;
}

/* Unified addressing maps all pinned memory, so CUDA reports cudaDeviceMapHost as set. */
cudaError_t (cudaGetDeviceFlags)(unsigned int *flags)
{
    if (!flags) return rt_err(cudaErrorInvalidValue);
    *flags = device_flags | cudaDeviceMapHost;
    return cudaSuccess;
}

cudaError_t (cudaChooseDevice)(int *device, const struct cudaDeviceProp *prop)
{
    if (!device || !prop) return rt_err(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t (cudaGetDeviceProperties)(struct cudaDeviceProp *p, int device)
{
    if (!p) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu CPU emulator (NVIDIA H200 limits)");
    memcpy(p->uuid.bytes, "cuemu-emulator-0", 16);
    p->uuid.bytes[15] = (char)('0' + device);
    /* each emulated device its own slot on the bus, as GPUs in one host have */
    p->pciBusID = device;
    p->isMultiGpuBoard = 0;
    p->totalGlobalMem = rt_device_total();
    p->sharedMemPerBlock = SMEM_PER_BLOCK;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    cuemu_max_block_dim(p->maxThreadsDim);
    cuemu_max_grid_dim(p->maxGridSize);
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = SM_COUNT;
    p->canMapHostMemory = 1;
    p->maxTexture1D = 131072;
    p->maxTexture1DMipmap = 32768;
    p->maxTexture2D[0] = 131072; p->maxTexture2D[1] = 65536;
    p->maxTexture2DMipmap[0] = 32768; p->maxTexture2DMipmap[1] = 32768;
    p->maxTexture2DLinear[0] = 131072; p->maxTexture2DLinear[1] = 65000; p->maxTexture2DLinear[2] = 2097120;
    p->maxTexture2DGather[0] = 32768; p->maxTexture2DGather[1] = 32768;
    p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = 16384;
    p->maxTexture3DAlt[0] = p->maxTexture3DAlt[1] = 8192; p->maxTexture3DAlt[2] = 32768;
    p->maxTextureCubemap = 32768;
    p->maxTexture1DLayered[0] = 32768; p->maxTexture1DLayered[1] = 2048;
    p->maxTexture2DLayered[0] = p->maxTexture2DLayered[1] = 32768; p->maxTexture2DLayered[2] = 2048;
    p->maxTextureCubemapLayered[0] = 32768; p->maxTextureCubemapLayered[1] = 2046;
    p->maxSurface1D = 32768;
    p->maxSurface2D[0] = 131072; p->maxSurface2D[1] = 65536;
    p->maxSurface3D[0] = 16384; p->maxSurface3D[1] = 16384; p->maxSurface3D[2] = 16384;
    p->maxSurface1DLayered[0] = 32768; p->maxSurface1DLayered[1] = 2048;
    p->maxSurface2DLayered[0] = p->maxSurface2DLayered[1] = 32768; p->maxSurface2DLayered[2] = 2048;
    p->maxSurfaceCubemap = 32768;
    p->maxSurfaceCubemapLayered[0] = 32768; p->maxSurfaceCubemapLayered[1] = 2046;
    p->surfaceAlignment = 512;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->asyncEngineCount = 3;   /* what an H200 reports (read 2026-11-30) */
    p->unifiedAddressing = 1;
    p->memoryBusWidth = BUS_WIDTH_BITS;
    p->l2CacheSize = L2_BYTES;
    p->persistingL2CacheMaxSize = 47185920;
    p->maxThreadsPerMultiProcessor = 2048;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = SMEM_PER_SM;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->hostNativeAtomicSupported = 0;
    p->pageableMemoryAccess = 0;
    p->concurrentManagedAccess = 1;
    p->computePreemptionSupported = 1;
    p->canUseHostPointerForRegisteredMem = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = SMEM_PER_BLOCK_OPTIN;
    p->maxBlocksPerMultiProcessor = 32;
    p->accessPolicyMaxWindowSize = 134213632;
    p->reservedSharedMemPerBlock = 1024;
    p->hostRegisterSupported = 1;
    p->sparseCudaArraySupported = 1;
    p->hostRegisterReadOnlySupported = 1;
    p->timelineSemaphoreInteropSupported = 1;
    p->memoryPoolsSupported = 1;
    p->memoryPoolSupportedHandleTypes = cudaMemHandleTypePosixFileDescriptor;
    p->deferredMappingCudaArraySupported = 1;
    p->ipcEventSupported = 1;
    p->clusterLaunch = 1;
    p->unifiedFunctionPointers = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
    return cudaSuccess;
}

cudaError_t (cudaDeviceGetAttribute)(int *value, enum cudaDeviceAttr attr, int device)
{
    struct cudaDeviceProp p;
    if (!value) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    (cudaGetDeviceProperties)(&p, device);
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: v = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: v = p.warpSize; break;
    case cudaDevAttrMaxPitch: v = (int)p.memPitch; break;
    case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
    case cudaDevAttrClockRate: v = CLOCK_KHZ; break;
    case cudaDevAttrTextureAlignment: v = (int)p.textureAlignment; break;
    case cudaDevAttrGpuOverlap: v = 1; break;
    case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
    case cudaDevAttrKernelExecTimeout: v = 0; break;
    case cudaDevAttrIntegrated: v = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: v = p.canMapHostMemory; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrMaxTexture1DWidth: v = p.maxTexture1D; break;
    case cudaDevAttrMaxTexture2DWidth: v = p.maxTexture2D[0]; break;
    case cudaDevAttrMaxTexture2DHeight: v = p.maxTexture2D[1]; break;
    case cudaDevAttrMaxTexture3DWidth: v = p.maxTexture3D[0]; break;
    case cudaDevAttrMaxTexture3DHeight: v = p.maxTexture3D[1]; break;
    case cudaDevAttrMaxTexture3DDepth: v = p.maxTexture3D[2]; break;
    case cudaDevAttrMaxTexture2DLayeredWidth: v = p.maxTexture2DLayered[0]; break;
    case cudaDevAttrMaxTexture2DLayeredHeight: v = p.maxTexture2DLayered[1]; break;
    case cudaDevAttrMaxTexture2DLayeredLayers: v = p.maxTexture2DLayered[2]; break;
    case cudaDevAttrSurfaceAlignment: v = (int)p.surfaceAlignment; break;
    case cudaDevAttrConcurrentKernels: v = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: v = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: v = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: v = p.pciDeviceID; break;
    case cudaDevAttrTccDriver: v = p.tccDriver; break;
    case cudaDevAttrMemoryClockRate: v = MEM_CLOCK_KHZ; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: v = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: v = p.unifiedAddressing; break;
    case cudaDevAttrMaxTexture1DLayeredWidth: v = p.maxTexture1DLayered[0]; break;
    case cudaDevAttrMaxTexture1DLayeredLayers: v = p.maxTexture1DLayered[1]; break;
    case cudaDevAttrMaxTexture2DGatherWidth: v = p.maxTexture2DGather[0]; break;
    case cudaDevAttrMaxTexture2DGatherHeight: v = p.maxTexture2DGather[1]; break;
    case cudaDevAttrMaxTexture3DWidthAlt: v = p.maxTexture3DAlt[0]; break;
    case cudaDevAttrMaxTexture3DHeightAlt: v = p.maxTexture3DAlt[1]; break;
    case cudaDevAttrMaxTexture3DDepthAlt: v = p.maxTexture3DAlt[2]; break;
    case cudaDevAttrPciDomainId: v = p.pciDomainID; break;
    case cudaDevAttrTexturePitchAlignment: v = (int)p.texturePitchAlignment; break;
    case cudaDevAttrMaxTextureCubemapWidth: v = p.maxTextureCubemap; break;
    case cudaDevAttrMaxTextureCubemapLayeredWidth: v = p.maxTextureCubemapLayered[0]; break;
    case cudaDevAttrMaxTextureCubemapLayeredLayers: v = p.maxTextureCubemapLayered[1]; break;
    case cudaDevAttrMaxSurface1DWidth: v = p.maxSurface1D; break;
    case cudaDevAttrMaxSurface2DWidth: v = p.maxSurface2D[0]; break;
    case cudaDevAttrMaxSurface2DHeight: v = p.maxSurface2D[1]; break;
    case cudaDevAttrMaxSurface3DWidth: v = p.maxSurface3D[0]; break;
    case cudaDevAttrMaxSurface3DHeight: v = p.maxSurface3D[1]; break;
    case cudaDevAttrMaxSurface3DDepth: v = p.maxSurface3D[2]; break;
    case cudaDevAttrMaxSurface1DLayeredWidth: v = p.maxSurface1DLayered[0]; break;
    case cudaDevAttrMaxSurface1DLayeredLayers: v = p.maxSurface1DLayered[1]; break;
    case cudaDevAttrMaxSurface2DLayeredWidth: v = p.maxSurface2DLayered[0]; break;
    case cudaDevAttrMaxSurface2DLayeredHeight: v = p.maxSurface2DLayered[1]; break;
    case cudaDevAttrMaxSurface2DLayeredLayers: v = p.maxSurface2DLayered[2]; break;
    case cudaDevAttrMaxSurfaceCubemapWidth: v = p.maxSurfaceCubemap; break;
    case cudaDevAttrMaxSurfaceCubemapLayeredWidth: v = p.maxSurfaceCubemapLayered[0]; break;
    case cudaDevAttrMaxSurfaceCubemapLayeredLayers: v = p.maxSurfaceCubemapLayered[1]; break;
    case cudaDevAttrMaxTexture1DLinearWidth: v = 268435456; break;
    case cudaDevAttrMaxTexture2DLinearWidth: v = p.maxTexture2DLinear[0]; break;
    case cudaDevAttrMaxTexture2DLinearHeight: v = p.maxTexture2DLinear[1]; break;
    case cudaDevAttrMaxTexture2DLinearPitch: v = p.maxTexture2DLinear[2]; break;
    case cudaDevAttrMaxTexture2DMipmappedWidth: v = p.maxTexture2DMipmap[0]; break;
    case cudaDevAttrMaxTexture2DMipmappedHeight: v = p.maxTexture2DMipmap[1]; break;
    case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
    case cudaDevAttrMaxTexture1DMipmappedWidth: v = p.maxTexture1DMipmap; break;
    case cudaDevAttrStreamPrioritiesSupported: v = p.streamPrioritiesSupported; break;
    case cudaDevAttrGlobalL1CacheSupported: v = p.globalL1CacheSupported; break;
    case cudaDevAttrLocalL1CacheSupported: v = p.localL1CacheSupported; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: v = p.managedMemory; break;
    case cudaDevAttrIsMultiGpuBoard: v = p.isMultiGpuBoard; break;
    case cudaDevAttrMultiGpuBoardGroupID: v = p.multiGpuBoardGroupID; break;
    case cudaDevAttrHostNativeAtomicSupported: v = p.hostNativeAtomicSupported; break;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: v = 2; break;
    case cudaDevAttrPageableMemoryAccess: v = p.pageableMemoryAccess; break;
    case cudaDevAttrConcurrentManagedAccess: v = p.concurrentManagedAccess; break;
    case cudaDevAttrComputePreemptionSupported: v = p.computePreemptionSupported; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: v = p.canUseHostPointerForRegisteredMem; break;
    case cudaDevAttrCooperativeLaunch: v = p.cooperativeLaunch; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrCanFlushRemoteWrites: v = 0; break;
    case cudaDevAttrHostRegisterSupported: v = p.hostRegisterSupported; break;
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables: v = p.pageableMemoryAccessUsesHostPageTables; break;
    case cudaDevAttrDirectManagedMemAccessFromHost: v = p.directManagedMemAccessFromHost; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMaxPersistingL2CacheSize: v = p.persistingL2CacheMaxSize; break;
    case cudaDevAttrMaxAccessPolicyWindowSize: v = p.accessPolicyMaxWindowSize; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = (int)p.reservedSharedMemPerBlock; break;
    case cudaDevAttrSparseCudaArraySupported: v = p.sparseCudaArraySupported; break;
    case cudaDevAttrHostRegisterReadOnlySupported: v = p.hostRegisterReadOnlySupported; break;
    case cudaDevAttrTimelineSemaphoreInteropSupported: v = p.timelineSemaphoreInteropSupported; break;
    case cudaDevAttrMemoryPoolsSupported: v = p.memoryPoolsSupported; break;
    case cudaDevAttrGPUDirectRDMASupported: v = p.gpuDirectRDMASupported; break;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions: v = (int)p.gpuDirectRDMAFlushWritesOptions; break;
    case cudaDevAttrGPUDirectRDMAWritesOrdering: v = p.gpuDirectRDMAWritesOrdering; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: v = (int)p.memoryPoolSupportedHandleTypes; break;
    case cudaDevAttrClusterLaunch: v = p.clusterLaunch; break;
    case cudaDevAttrDeferredMappingCudaArraySupported: v = p.deferredMappingCudaArraySupported; break;
    case cudaDevAttrIpcEventSupport: v = p.ipcEventSupported; break;
    case cudaDevAttrMemSyncDomainCount: v = 4; break;
    case cudaDevAttrNumaConfig: v = p.deviceNumaConfig; break;
    case cudaDevAttrNumaId: v = p.deviceNumaId; break;
    case cudaDevAttrMpsEnabled: v = p.mpsEnabled; break;
    case cudaDevAttrHostNumaId: v = p.hostNumaId; break;
    case cudaDevAttrD3D12CigSupported: v = 0; break;
    case cudaDevAttrVulkanCigSupported: v = 0; break;
    case cudaDevAttrGpuPciDeviceId: v = (int)p.gpuPciDeviceID; break;
    case cudaDevAttrGpuPciSubsystemId: v = (int)p.gpuPciSubsystemID; break;
    case cudaDevAttrHostNumaMemoryPoolsSupported: v = 0; break;
    case cudaDevAttrHostNumaMultinodeIpcSupported: v = p.hostNumaMultinodeIpcSupported; break;
    case cudaDevAttrHostMemoryPoolsSupported: v = 1; break;   /* pool.c: host pools */
    case cudaDevAttrOnlyPartialHostNativeAtomicSupported: v = 0; break;
    default: return rt_err(cudaErrorInvalidValue);
    }
    *value = v;
    return cudaSuccess;
}

cudaError_t (cudaDeviceGetLimit)(size_t *pValue, enum cudaLimit limit)
{
    if (!pValue || (unsigned)limit >= sizeof limits / sizeof limits[0])
        return rt_err(cudaErrorUnsupportedLimit);
    *pValue = limits[limit];
    return cudaSuccess;
}

cudaError_t (cudaDeviceSetLimit)(enum cudaLimit limit, size_t value)
{
    RT_ENTER();
    if ((unsigned)limit >= sizeof limits / sizeof limits[0]) return rt_err(cudaErrorUnsupportedLimit);
    if (limit == cudaLimitMaxL2FetchGranularity && value > 128) return rt_err(cudaErrorInvalidValue);
    if (limit == cudaLimitPersistingL2CacheSize && value > 47185920) return rt_err(cudaErrorInvalidValue);
    limits[limit] = value;
    return cudaSuccess;
}

cudaError_t (cudaDeviceGetStreamPriorityRange)(int *leastPriority, int *greatestPriority)
{
    if (leastPriority) *leastPriority = 0;
    if (greatestPriority) *greatestPriority = -5;
    return cudaSuccess;
}

/* ---- peer access ---------------------------------------------------------------------------
   Every emulated device can reach every other one (they are one host's memory), as the GPUs of
   an NVLink machine can; a kernel may touch another device's memory only once its own device
   enabled access to that peer (memory.c's fault check reports the rest). */
cudaError_t (cudaDeviceCanAccessPeer)(int *canAccessPeer, int device, int peerDevice)
{
    if (rt_config_error()) return rt_err((cudaError_t)rt_config_error());
    if (!canAccessPeer) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device) || !rt_dev_valid(peerDevice)) return rt_err(cudaErrorInvalidDevice);
    *canAccessPeer = device != peerDevice;
    return cudaSuccess;
}

cudaError_t (cudaDeviceEnablePeerAccess)(int peerDevice, unsigned int flags)
{
    RT_ENTER();
    /* as an H200 answers (CUDA 13.0, driver 580): a device that does not exist, then flags
       other than 0, then the device itself, which is "peer access unsupported" (217) */
    if (!rt_dev_valid(peerDevice)) return rt_err(cudaErrorInvalidDevice);
    if (flags != 0) return rt_err(cudaErrorInvalidValue);
    if (peerDevice == cur_dev) return rt_err(cudaErrorPeerAccessUnsupported);
    rt_lock();
    cudaError_t e = peer_on[cur_dev][peerDevice] ? cudaErrorPeerAccessAlreadyEnabled : cudaSuccess;
    peer_on[cur_dev][peerDevice] = 1;
    rt_unlock();
    return rt_err(e);
}

cudaError_t (cudaDeviceDisablePeerAccess)(int peerDevice)
{
    RT_ENTER();
    /* the device itself was never enabled: "not enabled" (705), as an H200 answers */
    if (!rt_dev_valid(peerDevice)) return rt_err(cudaErrorInvalidDevice);
    rt_lock();
    cudaError_t e = peerDevice != cur_dev && peer_on[cur_dev][peerDevice] ? cudaSuccess
                                                                          : cudaErrorPeerAccessNotEnabled;
    peer_on[cur_dev][peerDevice] = 0;
    rt_unlock();
    return rt_err(e);
}

/* The link between two emulated devices, as an NVLink pair reports it: peer access and native
   atomics supported, the best rank (0); CUDA arrays are not emulated. */
cudaError_t (cudaDeviceGetP2PAttribute)(int *value, enum cudaDeviceP2PAttr attr, int srcDevice,
                                        int dstDevice)
{
    RT_ENTER();
    if (!value) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(srcDevice) || !rt_dev_valid(dstDevice) || srcDevice == dstDevice)
        return rt_err(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevP2PAttrPerformanceRank: *value = 0; break;
    case cudaDevP2PAttrAccessSupported: *value = 1; break;
    case cudaDevP2PAttrNativeAtomicSupported: *value = 1; break;
    case cudaDevP2PAttrCudaArrayAccessSupported: *value = 0; break;
    case cudaDevP2PAttrOnlyPartialNativeAtomicSupported: *value = 0; break;
    default: return rt_err(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* [domain]:[bus]:[device].[function] in hexadecimal; the bus is the device's pciBusID. */
cudaError_t (cudaDeviceGetPCIBusId)(char *pciBusId, int len, int device)
{
    RT_ENTER();
    if (!pciBusId || len <= 0) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0, device, 0);
    return cudaSuccess;
}

cudaError_t (cudaDeviceGetByPCIBusId)(int *device, const char *pciBusId)
{
    RT_ENTER();
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (!device || !pciBusId) return rt_err(cudaErrorInvalidValue);
    if (sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
        dom = 0;
        if (sscanf(pciBusId, "%x:%x.%x", &bus, &dev, &fn) != 3) return rt_err(cudaErrorInvalidValue);
    }
    if (dom != 0 || dev != 0 || fn != 0 || !rt_dev_valid((int)bus)) return rt_err(cudaErrorInvalidDevice);
    *device = (int)bus;
    return cudaSuccess;
}

/* ---- CUDA IPC: memory shared between processes; the emulated devices live in one -------- */
static cudaError_t no_ipc(const char *api)
{
    RT_ENTER();
    cuemu_diag("not supported here: %s: CUDA IPC shares device memory between processes, and the "
               "emulated devices live in one process; see docs/no-gpu.md", api);
    return rt_err(cudaErrorNotSupported);
}

cudaError_t (cudaIpcGetMemHandle)(cudaIpcMemHandle_t *handle, void *devPtr)
{
    (void)handle; (void)devPtr;
    return no_ipc("cudaIpcGetMemHandle");
}
cudaError_t (cudaIpcOpenMemHandle)(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags)
{
    (void)devPtr; (void)handle; (void)flags;
    return no_ipc("cudaIpcOpenMemHandle");
}
cudaError_t (cudaIpcCloseMemHandle)(void *devPtr)
{
    (void)devPtr;
    return no_ipc("cudaIpcCloseMemHandle");
}
cudaError_t (cudaIpcGetEventHandle)(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    (void)handle; (void)event;
    return no_ipc("cudaIpcGetEventHandle");
}
cudaError_t (cudaIpcOpenEventHandle)(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    (void)event; (void)handle;
    return no_ipc("cudaIpcOpenEventHandle");
}

/* The H200's occupancy limits, with what a CPU cannot know (registers, static shared memory)
   taken as no limit: threads per SM (2048), blocks per SM (32), and shared memory per SM
   (228 KiB, each block also using 1 KiB the system reserves). */
cudaError_t (cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(int *numBlocks, const void *func,
                                                                     int blockSize, size_t dynamicSMemSize,
                                                                     unsigned int flags)
{
    RT_ENTER();
    if (!numBlocks || (flags & ~(unsigned)cudaOccupancyDisableCachingOverride))
        return rt_err(cudaErrorInvalidValue);
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    if (blockSize <= 0) return rt_err(cudaErrorInvalidValue);
    if (blockSize > cuemu_max_threads_per_block() || dynamicSMemSize > cuemu_func_max_dynamic_smem(func)) {
        *numBlocks = 0;
        return cudaSuccess;
    }
    int warps = (blockSize + 31) / 32;
    int by_threads = 2048 / (warps * 32);
    int by_smem = (int)(SMEM_PER_SM / (dynamicSMemSize + 1024));
    int n = by_threads < 32 ? by_threads : 32;
    *numBlocks = by_smem < n ? by_smem : n;
    return cudaSuccess;
}

cudaError_t (cudaOccupancyMaxActiveBlocksPerMultiprocessor)(int *numBlocks, const void *func, int blockSize,
                                                            size_t dynamicSMemSize)
{
    return (cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)(numBlocks, func, blockSize,
                                                                    dynamicSMemSize, cudaOccupancyDefault);
}

cudaError_t (cudaDriverGetVersion)(int *driverVersion)
{
    if (!driverVersion) return rt_err(cudaErrorInvalidValue);
    *driverVersion = 13000;
    return cudaSuccess;
}

cudaError_t (cudaRuntimeGetVersion)(int *runtimeVersion)
{
    if (!runtimeVersion) return rt_err(cudaErrorInvalidValue);
    *runtimeVersion = 13000;
    return cudaSuccess;
}

cudaError_t rt_sync_point(const char *what)
{
    rt_check_all_slack(what);
    rt_pools_release_to_threshold();
    int sticky = cuemu_sticky_error();
    if (sticky) return rt_err((cudaError_t)sticky);
    int e = cuemu_take_async_error();
    return e ? rt_err((cudaError_t)e) : cudaSuccess;
}

cudaError_t (cudaDeviceSynchronize)(void)
{
    RT_ENTER();
    rt_stream_log_note(0, RT_LOG_SYNC, RT_SYNC_DEVICE);
    /* the current device's work only: another device's is not waited for */
    if (rt_ndev() > 1) rt_drain_device(cur_dev);
    else rt_drain_all();
    return rt_sync_point("cudaDeviceSynchronize");
}

cudaError_t (cudaDeviceReset)(void)
{
    cuemu_core_reset();
    rt_queue_reset();
    rt_lock();
    rt_pools_reset();
    rt_memory_reset();
    rt_streams_reset();
    rt_funcs_reset();
    rt_peers_reset();
    device_flags = 0;
    limits[cudaLimitPersistingL2CacheSize] = 0;
    rt_errors_reset();
    rt_unlock();
    return cudaSuccess;
}
