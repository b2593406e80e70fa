// SPDX-License-Identifier: MIT
/*
 * 00 device_query: what is this machine, and which GPU should the program use?
 *
 * Before managing GPU memory, know the GPU: how much memory it has, how fast that memory is,
 * how much shared memory a block may use, and which features (memory pools, concurrent access to
 * managed memory, copy engines) the later chapters rely on. Every figure here is read from the
 * device, never assumed.
 *
 * Build: make                 Run: make run CH=00 (prints every device), ARGS=--check
 * Check: make check           Exercises: 00.1 theoretical bandwidth, 00.2 choosing a device
 */
#include "tut_check.h"

#include <string.h>

/* Everything the course reads about one device. Mirrored field by field by DeviceInfo in
   driver.py: change both together. */
typedef struct {
    char      name[256];
    int       major, minor;                 /* compute capability, e.g. 9.0 for Hopper */
    long long total_global_mem;             /* bytes */
    int       multiprocessor_count;
    int       max_threads_per_block;
    int       max_block_dim[3];
    int       max_grid_dim[3];
    int       warp_size;
    long long shared_mem_per_block;         /* what a block gets without asking */
    long long shared_mem_per_block_optin;   /* what it gets after cudaFuncSetAttribute */
    long long shared_mem_per_multiprocessor;
    int       regs_per_block;
    int       l2_cache_size;                /* bytes */
    int       memory_clock_khz;             /* peak memory clock */
    int       memory_bus_width;             /* bits */
    int       async_engine_count;           /* copy engines: copies that overlap kernels */
    int       concurrent_managed_access;    /* CPU and GPU may touch managed memory at once */
    int       memory_pools_supported;       /* cudaMallocAsync and cudaMemPool_t work */
    int       pageable_memory_access;       /* kernels may read plain malloc'ed memory */
    int       unified_addressing;           /* one address space for host and device */
} device_info;

// ---- exercises ------------------------------------------------------------------------------

/* Peak DRAM bandwidth in GB/s (10^9 bytes per second) from the memory clock (kHz) and the bus
   width (bits). The memory transfers data on both edges of its clock (double data rate). */
extern "C" int theoretical_bandwidth(int memory_clock_khz, int bus_width_bits, double *gb_per_s)
{
    int status = 0;
    TUT_REQUIRE(memory_clock_khz >= 0 && bus_width_bits >= 0);
    // @solution 00.1: clock in Hz x bytes per transfer (bus width / 8) x 2 transfers per clock, in GB/s (~1 line)
    *gb_per_s = 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

/* The rule the course uses to pick a GPU: among devices of compute capability 7.5 or newer (CUDA
   13 builds nothing older: `nvcc --list-gpu-arch` starts at compute_75, so a 7.0 V100 cannot run
   the course) that support memory pools, the one with the most global memory; on a tie, the
   lowest index. *chosen is -1 when no device qualifies. Works on a list, so it can be tested on
   made-up machines. */
extern "C" int choose_device(const device_info *devices, int count, int *chosen)
{
    int status = 0;
    TUT_REQUIRE(count >= 0 && (count == 0 || devices != NULL));
    // @solution 00.2: scan the devices, keep the index of the best qualifying one, -1 if none (~8 lines)
    *chosen = -1;
    for (int i = 0; i < count; i++) {
        const device_info *d = &devices[i];
        if (d->major * 10 + d->minor < 75 || !d->memory_pools_supported)
            continue;
        if (*chosen < 0 || d->total_global_mem > devices[*chosen].total_global_mem)
            *chosen = i;
    }
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

// ---- host entry points (called from driver.py) ------------------------------------------

/* Driver and runtime versions as CUDA encodes them: 1000 * major + 10 * minor (13000 = 13.0).
   Minor-version compatibility: a 13.x runtime runs on any 13.y driver (features newer than the
   driver fail alone, with cudaErrorCallRequiresNewerDriver); an older major fails every call
   with cudaErrorInsufficientDriver. */
extern "C" int query_versions(int *driver, int *runtime)
{
    int status = 0;
    *driver = *runtime = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(runtime));
    CUDA_CHECK(cudaDriverGetVersion(driver));
cleanup:
    return status;
}

/* The compiler that built this library, as text ("nvcc 13.0" or the emulator's host compiler). */
extern "C" const char *toolchain(void)
{
#if defined(__CUDACC_VER_MAJOR__)
#define TUT_STR2(x) #x
#define TUT_STR(x) TUT_STR2(x)
    return "nvcc " TUT_STR(__CUDACC_VER_MAJOR__) "." TUT_STR(__CUDACC_VER_MINOR__);
#else
    return "host compiler " __VERSION__ " with the course's CUDA emulator";
#endif
}

/* cudaGetDeviceProperties fills most fields. CUDA 13 removed the clock rates from
   cudaDeviceProp: they are attributes now, read one by one with cudaDeviceGetAttribute. */
extern "C" int query_device(int dev, device_info *out)
{
    int status = 0;
    cudaDeviceProp p;
    memset(out, 0, sizeof *out);
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    strncpy(out->name, p.name, sizeof out->name - 1);
    out->major = p.major;
    out->minor = p.minor;
    out->total_global_mem = (long long)p.totalGlobalMem;
    out->multiprocessor_count = p.multiProcessorCount;
    out->max_threads_per_block = p.maxThreadsPerBlock;
    for (int k = 0; k < 3; k++) {
        out->max_block_dim[k] = p.maxThreadsDim[k];
        out->max_grid_dim[k] = p.maxGridSize[k];
    }
    out->warp_size = p.warpSize;
    out->shared_mem_per_block = (long long)p.sharedMemPerBlock;
    out->shared_mem_per_block_optin = (long long)p.sharedMemPerBlockOptin;
    out->shared_mem_per_multiprocessor = (long long)p.sharedMemPerMultiprocessor;
    out->regs_per_block = p.regsPerBlock;
    out->l2_cache_size = p.l2CacheSize;
    out->memory_bus_width = p.memoryBusWidth;
    out->async_engine_count = p.asyncEngineCount;
    out->concurrent_managed_access = p.concurrentManagedAccess;
    out->pageable_memory_access = p.pageableMemoryAccess;
    out->unified_addressing = p.unifiedAddressing;
    CUDA_CHECK(cudaDeviceGetAttribute(&out->memory_clock_khz, cudaDevAttrMemoryClockRate, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&out->memory_pools_supported,
                                      cudaDevAttrMemoryPoolsSupported, dev));
cleanup:
    return status;
}

/* Make `dev` this host thread's current device: later allocations and launches go there. */
extern "C" int use_device(int dev)
{
    int status = 0;
    int current = -1;
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaGetDevice(&current));
    TUT_REQUIRE(current == dev);
cleanup:
    return status;
}

extern "C" int device_info_size(void)
{
    return (int)sizeof(device_info);
}
