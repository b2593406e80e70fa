// SPDX-License-Identifier: MIT
/*
 * Runtime test: device count and selection, cudaGetDeviceProperties agreeing with
 * cudaDeviceGetAttribute for every attribute the course reads, limits and flags.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#ifdef __CUEMU__
#include "cuemu_internal.h"
#endif

#include "rt_test.h"

static int attr(cudaDeviceAttr a)
{
    int v = -12345;
    OK(cudaDeviceGetAttribute(&v, a, 0));
    return v;
}

int main(void)
{
    int n = 0, dev = -1;
    OK(cudaGetDeviceCount(&n));
    EXPECT(n >= 1);
    OK(cudaSetDevice(0));
    OK(cudaGetDevice(&dev));
    EXPECT(dev == 0);
    EXPECT_ERR(cudaSetDevice(n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);
    (void)cudaGetLastError();

    struct cudaDeviceProp p;
    OK(cudaGetDeviceProperties(&p, 0));
    EXPECT(strlen(p.name) > 0);
    EXPECT(p.major == attr(cudaDevAttrComputeCapabilityMajor));
    EXPECT(p.minor == attr(cudaDevAttrComputeCapabilityMinor));
    EXPECT(p.multiProcessorCount == attr(cudaDevAttrMultiProcessorCount));
    EXPECT(p.warpSize == 32 && attr(cudaDevAttrWarpSize) == 32);
    EXPECT(p.maxThreadsPerBlock == 1024 && attr(cudaDevAttrMaxThreadsPerBlock) == 1024);
    EXPECT(p.maxThreadsDim[0] == attr(cudaDevAttrMaxBlockDimX));
    EXPECT(p.maxThreadsDim[1] == attr(cudaDevAttrMaxBlockDimY));
    EXPECT(p.maxThreadsDim[2] == attr(cudaDevAttrMaxBlockDimZ));
    EXPECT(p.maxGridSize[0] == attr(cudaDevAttrMaxGridDimX) && p.maxGridSize[0] == 2147483647);
    EXPECT(p.maxGridSize[1] == attr(cudaDevAttrMaxGridDimY) && p.maxGridSize[1] == 65535);
    EXPECT(p.maxGridSize[2] == attr(cudaDevAttrMaxGridDimZ));
    EXPECT(p.sharedMemPerBlock == (size_t)attr(cudaDevAttrMaxSharedMemoryPerBlock));
    EXPECT(p.sharedMemPerBlock == 48 * 1024);
    EXPECT(p.sharedMemPerBlockOptin == (size_t)attr(cudaDevAttrMaxSharedMemoryPerBlockOptin));
    EXPECT(p.sharedMemPerBlockOptin > p.sharedMemPerBlock);
    EXPECT(p.l2CacheSize == attr(cudaDevAttrL2CacheSize) && p.l2CacheSize > 0);
    EXPECT(p.memoryBusWidth == attr(cudaDevAttrGlobalMemoryBusWidth) && p.memoryBusWidth > 0);
    EXPECT(p.asyncEngineCount == attr(cudaDevAttrAsyncEngineCount));
    EXPECT(p.concurrentManagedAccess == attr(cudaDevAttrConcurrentManagedAccess));
    EXPECT(p.pageableMemoryAccess == attr(cudaDevAttrPageableMemoryAccess));
    EXPECT(p.memoryPoolsSupported == attr(cudaDevAttrMemoryPoolsSupported));
    EXPECT(p.managedMemory == attr(cudaDevAttrManagedMemory) && p.managedMemory == 1);
    EXPECT(p.unifiedAddressing == attr(cudaDevAttrUnifiedAddressing) && p.unifiedAddressing == 1);
    EXPECT(attr(cudaDevAttrClockRate) > 0);
    EXPECT(attr(cudaDevAttrMemoryClockRate) > 0);
    EXPECT(p.totalGlobalMem > 0);
    // Theoretical bandwidth from the attributes, the way chapter 00 computes it: kHz * bits.
    double gbps = 2.0 * attr(cudaDevAttrMemoryClockRate) * 1e3 * (attr(cudaDevAttrGlobalMemoryBusWidth) / 8) / 1e9;
    EXPECT(gbps > 100.0);

    EXPECT_ERR(cudaGetDeviceProperties(&p, n), cudaErrorInvalidDevice);
    int v;
    EXPECT_ERR(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceGetAttribute(&v, (cudaDeviceAttr)100000, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaDeviceGetAttribute(NULL, cudaDevAttrWarpSize, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // One device here: no peer to reach, and no device 1 to ask about.
    int can = -1;
    if (n == 1) EXPECT_ERR(cudaDeviceCanAccessPeer(&can, 0, 1), cudaErrorInvalidDevice);
    (void)cudaGetLastError();

    size_t lim = 0;
    OK(cudaDeviceGetLimit(&lim, cudaLimitStackSize));
    EXPECT(lim > 0);
    OK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16u << 20));
    OK(cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize));
    EXPECT(lim >= (16u << 20));
    unsigned int flags = 0;
    OK(cudaGetDeviceFlags(&flags));
    EXPECT(flags & cudaDeviceMapHost);
    OK(cudaDeviceSynchronize());

#ifdef __CUEMU__
    // Occupancy from the H200's limits: 2048 threads, 32 blocks, 228 KiB of shared memory per SM.
    int blocks = -1;
    const void *k = (const void *)&attr;        // any address stands for a kernel here
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 256, 0));
    EXPECT(blocks == 8);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 32, 0));
    EXPECT(blocks == 32);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 100, 40 * 1024));
    EXPECT(blocks == 5);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 1025, 0));
    EXPECT(blocks == 0);
    EXPECT_ERR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 0, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // The limits the kernel launcher reads agree with what the program sees.
    int dims[3];
    EXPECT(cuemu_max_threads_per_block() == p.maxThreadsPerBlock);
    cuemu_max_block_dim(dims);
    EXPECT(dims[0] == p.maxThreadsDim[0] && dims[1] == p.maxThreadsDim[1] && dims[2] == p.maxThreadsDim[2]);
    cuemu_max_grid_dim(dims);
    EXPECT(dims[0] == p.maxGridSize[0] && dims[1] == p.maxGridSize[1] && dims[2] == p.maxGridSize[2]);
    EXPECT(cuemu_func_max_dynamic_smem(nullptr) == p.sharedMemPerBlock);   // no attribute set
    EXPECT(cuemu_shared_mem_per_block_optin() == p.sharedMemPerBlockOptin);
    EXPECT(p.major == 9 && p.minor == 0 && p.multiProcessorCount == 132);
    EXPECT(p.concurrentManagedAccess == 1 && p.pageableMemoryAccess == 0);
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("device_query: ok\n");
    return 0;
}
