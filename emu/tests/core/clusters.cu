// SPDX-License-Identifier: MIT
/*
 * Thread block clusters (sm_90): the shape a launch gets (__cluster_dims__ or
 * cudaLaunchKernelEx's attribute) and the ranks and indices the cluster group gives, distributed
 * shared memory read, written and updated atomically across blocks (static and dynamic shared
 * memory), cluster.sync() ordering every block's writes before every block's reads, and the
 * launches CUDA refuses (a grid that is not a multiple of the cluster, too large a cluster).
 * Valid CUDA: nvcc -arch=sm_90 compiles it, and on an H200 it gives the same answers.
 */
#include <cooperative_groups.h>
#include "emu_test.h"

namespace cg = cooperative_groups;

/* Per block: block_rank, num_blocks, dim_blocks (x, y, z), block_index (x, y, z), and the
   cluster-wide thread_rank and num_threads of its thread 0. */
#define SHAPE_FIELDS 10
__global__ void __cluster_dims__(2, 2, 1) shape_kernel(unsigned *out)
{
    cg::cluster_group c = cg::this_cluster();
    unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0) {
        unsigned *o = out + b * SHAPE_FIELDS;
        dim3 d = c.dim_blocks(), i = c.block_index();
        o[0] = c.block_rank();
        o[1] = c.num_blocks();
        o[2] = d.x; o[3] = d.y; o[4] = d.z;
        o[5] = i.x; o[6] = i.y; o[7] = i.z;
        o[8] = (unsigned)c.thread_rank();
        o[9] = (unsigned)c.num_threads();
    }
    c.sync();
}

/* A ring through static shared memory: each block publishes its rank and reads its
   neighbour's, then every thread adds 1 to a counter in every block of the cluster. */
__global__ void ring_kernel(int *next_rank, int *counts)
{
    __shared__ int mine;
    __shared__ int count;
    cg::cluster_group c = cg::this_cluster();
    unsigned r = c.block_rank(), n = c.num_blocks();
    if (threadIdx.x == 0) {
        mine = (int)r;
        count = 0;
    }
    c.sync();                                   // every block's `mine` is written
    int *theirs = c.map_shared_rank(&mine, (int)((r + 1) % n));
    unsigned b = blockIdx.x;
    if (threadIdx.x == 0) next_rank[b] = *theirs + 100 * (int)c.query_shared_rank(theirs);
    for (unsigned k = 0; k < n; k++)
        atomicAdd(c.map_shared_rank(&count, (int)k), 1);
    c.sync();                                   // every add landed, and nobody has exited
    if (threadIdx.x == 0) counts[b] = count;
}

/* Dynamic shared memory across the cluster, in phases: in phase p every block writes p + its
   rank into its own table, and after cluster.sync() reads every other block's table, which
   must hold exactly that phase's values; the second cluster.sync() keeps the next phase's
   writes away from this phase's reads. A missing barrier shows as a wrong phase. */
__global__ void phases_kernel(int phases, int *bad)
{
    extern __shared__ int table[];
    cg::cluster_group c = cg::this_cluster();
    unsigned r = c.block_rank(), n = c.num_blocks();
    for (int p = 0; p < phases; p++) {
        table[threadIdx.x] = p * 100 + (int)r;
        c.sync();
        for (unsigned k = 0; k < n; k++) {
            const int *t = c.map_shared_rank(table, (int)k);
            if (t[threadIdx.x] != p * 100 + (int)k) atomicAdd(bad, 1);
        }
        c.sync();
    }
}

__global__ void __cluster_dims__(2, 1, 1) pair_kernel(int *out)
{
    cg::this_cluster().sync();
    if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

namespace ns {
/* the attribute before the specifiers, a default argument, a namespace */
__cluster_dims__(2, 1, 1) __global__ void lead_kernel(int *out, int scale = 10)
{
    cg::cluster_group c = cg::this_cluster();
    if (threadIdx.x == 0) out[blockIdx.x] = (int)(c.num_blocks() * scale + c.block_rank());
    c.sync();
}
}  // namespace ns

__global__ void plain_kernel(int *out)
{
    cg::cluster_group c = cg::this_cluster();     // no cluster: every block a cluster of one
    if (threadIdx.x == 0) out[blockIdx.x] = (int)(c.num_blocks() * 10 + c.block_rank());
    c.sync();
}

static cudaLaunchConfig_t config(dim3 grid, dim3 block, size_t smem, cudaLaunchAttribute *attr,
                                 unsigned cx)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = 0;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cx;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cfg;
}

int main()
{
    int yes = 0;
    CUDA_OK(cudaDeviceGetAttribute(&yes, cudaDevAttrClusterLaunch, 0));
    if (!yes) {
        std::printf("clusters: no cluster launch on this device (compute capability < 9.0): skipped\n");
        return 77;
    }

    // 1. The shape: a 4 x 4 grid in clusters of 2 x 2, 64 threads per block.
    {
        const int gx = 4, gy = 4, nb = gx * gy, threads = 64;
        unsigned *d = nullptr, h[nb * SHAPE_FIELDS];
        CUDA_OK(cudaMalloc(&d, sizeof h));
        shape_kernel<<<dim3(gx, gy), threads>>>(d);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        for (int by = 0; by < gy; by++)
            for (int bx = 0; bx < gx; bx++) {
                const unsigned *o = h + (bx + gx * by) * SHAPE_FIELDS;
                unsigned rank = bx % 2 + 2 * (by % 2);
                EXPECT_EQ_INT(o[0], rank);
                EXPECT_EQ_INT(o[1], 4);
                EXPECT(o[2] == 2 && o[3] == 2 && o[4] == 1);
                EXPECT(o[5] == (unsigned)bx % 2 && o[6] == (unsigned)by % 2 && o[7] == 0);
                EXPECT_EQ_INT(o[8], rank * threads);
                EXPECT_EQ_INT(o[9], 4 * threads);
            }
        CUDA_OK(cudaFree(d));
    }

    // 2. The ring and the atomics, clusters of 4 set at launch (cudaLaunchKernelEx).
    {
        const int nb = 12, threads = 96;
        int *d_next = nullptr, *d_counts = nullptr, next[nb], counts[nb];
        cudaLaunchAttribute attr[1];
        CUDA_OK(cudaMalloc(&d_next, sizeof next));
        CUDA_OK(cudaMalloc(&d_counts, sizeof counts));
        cudaLaunchConfig_t cfg = config(dim3(nb), dim3(threads), 0, attr, 4);
        CUDA_OK(cudaLaunchKernelEx(&cfg, ring_kernel, d_next, d_counts));
        CUDA_OK(cudaMemcpy(next, d_next, sizeof next, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(counts, d_counts, sizeof counts, cudaMemcpyDeviceToHost));
        for (int b = 0; b < nb; b++) {
            EXPECT_EQ_INT(next[b], (b % 4 + 1) % 4 * 101);   // its value, and whose it is
            EXPECT_EQ_INT(counts[b], 4 * threads);      // every thread of the cluster added 1
        }
        CUDA_OK(cudaFree(d_next));
        CUDA_OK(cudaFree(d_counts));
    }

    // 3. cluster.sync() orders the phases: clusters of 8, dynamic shared memory.
    {
        const int threads = 128, phases = 5;
        int *d_bad = nullptr, bad = -1;
        cudaLaunchAttribute attr[1];
        CUDA_OK(cudaMalloc(&d_bad, sizeof bad));
        CUDA_OK(cudaMemset(d_bad, 0, sizeof bad));
        cudaLaunchConfig_t cfg = config(dim3(16), dim3(threads), threads * sizeof(int), attr, 8);
        CUDA_OK(cudaLaunchKernelEx(&cfg, phases_kernel, phases, d_bad));
        CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
        EXPECT_EQ_INT(bad, 0);
        CUDA_OK(cudaFree(d_bad));
    }

    // 4. Launches CUDA refuses, and one it takes.
    {
        int *d = nullptr, h[16];
        cudaLaunchAttribute attr[1];
        CUDA_OK(cudaMalloc(&d, sizeof h));
        pair_kernel<<<3, 32>>>(d);                     // 3 blocks: not a multiple of 2
        EXPECT_EQ_INT(cudaGetLastError(), cudaErrorInvalidClusterSize);
        cudaLaunchConfig_t cfg = config(dim3(16), dim3(32), 0, attr, 16);
        EXPECT_EQ_INT(cudaLaunchKernelEx(&cfg, ring_kernel, d, d), cudaErrorInvalidClusterSize);
        EXPECT_EQ_INT(cudaGetLastError(), cudaErrorInvalidClusterSize);
        cfg = config(dim3(8), dim3(32), 0, attr, 4);    // a shape other than __cluster_dims__
        EXPECT(cudaLaunchKernelEx(&cfg, pair_kernel, d) != cudaSuccess);
        (void)cudaGetLastError();
        plain_kernel<<<3, 32>>>(d);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h, d, 3 * sizeof(int), cudaMemcpyDeviceToHost));
        EXPECT(h[0] == 10 && h[1] == 10 && h[2] == 10);
        pair_kernel<<<4, 32>>>(d);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h, d, 4 * sizeof(int), cudaMemcpyDeviceToHost));
        EXPECT(h[0] == 1 && h[1] == 1 && h[2] == 1 && h[3] == 1);
        ns::lead_kernel<<<4, 32>>>(d);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaMemcpy(h, d, 4 * sizeof(int), cudaMemcpyDeviceToHost));
        EXPECT(h[0] == 20 && h[1] == 21 && h[2] == 20 && h[3] == 21);
        CUDA_OK(cudaFree(d));
    }
    CUDA_OK(cudaDeviceSynchronize());
    return emu_test_result("clusters");
}
