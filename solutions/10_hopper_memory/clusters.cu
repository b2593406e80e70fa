// SPDX-License-Identifier: MIT
/*
 * 10 hopper_memory, part two: thread block clusters and distributed shared memory (sm_90).
 *
 * A cluster is a group of blocks (here 4, fixed by __cluster_dims__) that the GPU runs at the
 * same time on neighbouring SMs, so that each block may read, write and atomically update the
 * shared memory of the others (distributed shared memory, DSMEM), and all of them may wait for
 * each other (cluster.sync()). A histogram with more bins than one block's shared memory holds
 * then splits its table over the cluster: each block keeps a quarter of the bins, and a value
 * is counted in the shared memory of the block that owns its bin, whichever block read it.
 * Against it: one table per block in shared memory, flushed with global atomics (while the
 * table fits one block), and global atomics alone.
 *
 * Exercise: 10.6 (grep -n "TODO(student)" *.cu). It runs on sm_90 GPUs and on the emulator,
 * which runs a cluster's blocks together and reports a block's shared memory used before that
 * block started or after it exited.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define CLUSTER 4   /* blocks per cluster: __cluster_dims__ below, and the grid a multiple of it */
#define HIST_THREADS 512

// ---- kernels -----------------------------------------------------------------------------------

/* Clusters exist from sm_90 (Hopper) on: compiled for an older GPU (make ARCH=sm_80, say),
   __cluster_dims__ and this_cluster() do not compile, so there the kernel below is empty. It is
   never launched there: cluster_supported() answers 0 and the tests skip, saying why. */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define HAS_CLUSTERS 1
#else
#define HAS_CLUSTERS 0
#endif

/* hist[v] += 1 for each data[i] = v < nbins (values at or above nbins are not counted). The
   cluster's blocks share one table: block rank r holds bins [r * per_block, (r + 1) * per_block)
   in its dynamic shared memory (nbins is a multiple of CLUSTER). */
#if HAS_CLUSTERS
__global__ void __cluster_dims__(CLUSTER, 1, 1)
#else
__global__ void
#endif
cluster_hist_kernel(const unsigned *data, size_t n, unsigned nbins, unsigned *hist)
{
#if HAS_CLUSTERS
    extern __shared__ unsigned part[];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned per_block = nbins / CLUSTER;
    for (unsigned b = threadIdx.x; b < per_block; b += blockDim.x)
        part[b] = 0;
    // @solution 10.6: wait for every block's share to be zeroed, count each value < nbins in the share of the block that owns its bin (map_shared_rank, atomicAdd), then wait again before any block reads its share or exits (~12 lines)
    /* every block of the cluster zeroed its share before any block adds into it */
    cluster.sync();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned v = data[i];
        if (v >= nbins)
            continue;   /* no block owns it: rank v / per_block would be past the cluster */
        unsigned *owner = cluster.map_shared_rank(part, (int)(v / per_block));
        atomicAdd(owner + v % per_block, 1u);   /* an atomic in another SM's shared memory */
    }
    /* every block done adding before each flushes its share, and before any block exits: a
       block's shared memory goes with it, and a late add into it would be an illegal address */
    cluster.sync();
    // @end
    const unsigned first = cluster.block_rank() * per_block;
    for (unsigned b = threadIdx.x; b < per_block; b += blockDim.x)
        if (part[b] != 0)
            atomicAdd(&hist[first + b], part[b]);
#endif
}

/* The same histogram with the whole table in each block's shared memory (nbins * 4 bytes). */
__global__ void shared_hist_kernel(const unsigned *data, size_t n, unsigned nbins, unsigned *hist)
{
    extern __shared__ unsigned table[];
    for (unsigned b = threadIdx.x; b < nbins; b += blockDim.x)
        table[b] = 0;
    __syncthreads();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned v = data[i];
        if (v < nbins)
            atomicAdd(&table[v], 1u);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < nbins; b += blockDim.x)
        if (table[b] != 0)
            atomicAdd(&hist[b], table[b]);
}

/* And with global atomics alone: every count an atomic in L2. */
__global__ void global_hist_kernel(const unsigned *data, size_t n, unsigned nbins, unsigned *hist)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned v = data[i];
        if (v < nbins)
            atomicAdd(&hist[v], 1u);
    }
}

/* Values in [0, nbins), from a hash of the index: the bench's data, made on the device. */
__global__ void hash_fill_kernel(unsigned *data, size_t n, unsigned nbins)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 29;
        data[i] = (unsigned)(x % nbins);
    }
}

// ---- host --------------------------------------------------------------------------------------

/* Whether this device launches clusters (cudaDevAttrClusterLaunch: sm_90 and later). */
extern "C" int cluster_supported(int *yes)
{
    int status = 0, dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(yes, cudaDevAttrClusterLaunch, dev));
cleanup:
    return status;
}

/* The grid: enough blocks to cover n once, at most 8 per SM, a multiple of CLUSTER. */
static int hist_grid(size_t n)
{
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) == cudaSuccess)
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    size_t blocks = (n + HIST_THREADS - 1) / HIST_THREADS;
    if (blocks > (size_t)sms * 8)
        blocks = (size_t)sms * 8;
    return (int)((blocks + CLUSTER - 1) / CLUSTER * CLUSTER);
}

/* hist (nbins counters, zeroed here) = the histogram of data by `how`:
   0 the cluster's shared table (DSMEM), 1 a table per block + global atomics, 2 global atomics.
   Queued on s, not synchronised. */
extern "C" int histogram(int how, const unsigned *d_data, size_t n, unsigned nbins,
                         unsigned *d_hist, cudaStream_t s)
{
    int status = 0;
    int grid = hist_grid(n);
    size_t smem = how == 0 ? nbins / CLUSTER * sizeof(unsigned) : (size_t)nbins * sizeof(unsigned);
    TUT_REQUIRE(how >= 0 && how <= 2 && nbins > 0 && nbins % CLUSTER == 0);
    CUDA_CHECK(cudaMemsetAsync(d_hist, 0, (size_t)nbins * sizeof(unsigned), s));
    if (how == 0) {
        /* more than 48 KiB of dynamic shared memory needs the kernel's consent */
        CUDA_CHECK(cudaFuncSetAttribute(cluster_hist_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        cluster_hist_kernel<<<grid, HIST_THREADS, smem, s>>>(d_data, n, nbins, d_hist);
    } else if (how == 1) {
        CUDA_CHECK(cudaFuncSetAttribute(shared_hist_kernel,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        shared_hist_kernel<<<grid, HIST_THREADS, smem, s>>>(d_data, n, nbins, d_hist);
    } else {
        global_hist_kernel<<<grid, HIST_THREADS, 0, s>>>(d_data, n, nbins, d_hist);
    }
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* n hashed values in [0, nbins), then `reps` timed histograms by `how` (after one warm-up). */
extern "C" int bench_histogram(int how, size_t n, unsigned nbins, int reps, float *times_ms)
{
    int status = 0;
    unsigned *d_data = NULL, *d_hist = NULL;
    cudaStream_t s = NULL;
    tut_timer t = {};
    CUDA_CHECK(cudaMalloc(&d_data, n * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&d_hist, (size_t)nbins * sizeof(unsigned)));
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(tut_timer_init(&t));
    hash_fill_kernel<<<1024, 256, 0, s>>>(d_data, n, nbins);
    CUDA_CHECK_LAUNCH();
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, s));
        status = histogram(how, d_data, n, nbins, d_hist, s);
        if (status != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (s != NULL) {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    tut_timer_free(&t);
    cudaFree(d_data);
    cudaFree(d_hist);
    return status;
}
