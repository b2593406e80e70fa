// SPDX-License-Identifier: MIT
/*
 * Planted bugs: distributed shared memory used against CUDA's rules, in clusters of 4 blocks.
 * Each block keeps a table in its dynamic shared memory and adds into its neighbour's.
 *   1. no cluster.sync() before the first remote add: the neighbour has not started;
 *   2. no cluster.sync() before exiting: a block adds into one that already exited;
 *   3. an index one past the neighbour's table: out of bounds of its shared memory;
 *   4. a rank outside the cluster;
 *   5. one block returns early, the others wait at cluster.sync() for ever.
 * The blocks of a cluster run in a fixed order, taking turns, so each is caught, with the
 * line, in every thread order (the first block to run finds its neighbour not started; the
 * last to run finds the first gone).
 */
#include <cooperative_groups.h>
#include "../core/emu_test.h"

namespace cg = cooperative_groups;

#define PER_BLOCK 256

[[maybe_unused]] static const int kAdd = __LINE__ + 10;

__global__ void __cluster_dims__(4, 1, 1) neighbour_kernel(int first_sync, int last_sync, int *out)
{
    extern __shared__ int part[];
    cg::cluster_group c = cg::this_cluster();
    unsigned r = c.block_rank();
    part[threadIdx.x] = 0;
    if (first_sync) c.sync();                 // BUG when 0: the neighbour may not have started
    int *theirs = c.map_shared_rank(part, (int)((r + 1) % 4));
    atomicAdd(&theirs[threadIdx.x], 1);
    if (last_sync) c.sync();                  // BUG when 0: the neighbour may have exited
    out[blockIdx.x * PER_BLOCK + threadIdx.x] = part[threadIdx.x];
}

[[maybe_unused]] static const int kPastEnd = __LINE__ + 8;
__global__ void __cluster_dims__(4, 1, 1) past_end_kernel(int *out)
{
    extern __shared__ int part[];
    cg::cluster_group c = cg::this_cluster();
    part[threadIdx.x] = 0;
    c.sync();
    int *theirs = c.map_shared_rank(part, (int)((c.block_rank() + 1) % 4));
    theirs[threadIdx.x + 1] = 1;              // BUG: thread 255 writes int 256 of 256
    c.sync();
    out[blockIdx.x] = part[0];
}

[[maybe_unused]] static const int kBadRank = __LINE__ + 6;
__global__ void __cluster_dims__(4, 1, 1) bad_rank_kernel(int *out)
{
    extern __shared__ int part[];
    cg::cluster_group c = cg::this_cluster();
    c.sync();
    int *theirs = c.map_shared_rank(part, (int)c.block_rank() + 1);   // BUG: rank 4 of 0..3
    out[blockIdx.x] = theirs[0];
    c.sync();
}

[[maybe_unused]] static const int kWaits = __LINE__ + 7;
__global__ void __cluster_dims__(4, 1, 1) early_exit_kernel(int *out)
{
    cg::cluster_group c = cg::this_cluster();
    if (c.block_rank() == 2)
        return;                               // BUG: every block must reach cluster.sync()
    out[blockIdx.x] = 1;
    c.sync();
}

int main()
{
    EMU_ONLY();
    int *d = nullptr;
    const size_t smem = PER_BLOCK * sizeof(int);

    CUDA_OK(cudaMalloc(&d, 8 * PER_BLOCK * sizeof(int)));
    neighbour_kernel<<<8, PER_BLOCK, smem>>>(0, 1, d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("in kernel neighbour_kernel",
                here(__FILE__, kAdd), "of extern __shared__ 'part' of block",
                "which has not started yet");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&d, 8 * PER_BLOCK * sizeof(int)));
    neighbour_kernel<<<8, PER_BLOCK, smem>>>(1, 0, d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("in kernel neighbour_kernel",
                here(__FILE__, kAdd), "which has already exited");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&d, 8 * PER_BLOCK * sizeof(int)));
    past_end_kernel<<<4, PER_BLOCK, smem>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("out-of-bounds write of distributed shared memory in kernel past_end_kernel",
                "thread (255,0,0)", here(__FILE__, kPastEnd),
                "byte 1024 of extern __shared__ 'part' of block", "which has 1024 bytes");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&d, 8 * PER_BLOCK * sizeof(int)));
    bad_rank_kernel<<<4, 32, smem>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("distributed shared memory misuse in kernel bad_rank_kernel",
                here(__FILE__, kBadRank), "the cluster has 4 blocks (ranks 0 to 3)");
    cuemuClearDiagnostic();
#endif
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&d, 8 * PER_BLOCK * sizeof(int)));
    early_exit_kernel<<<4, 32>>>(d);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
#ifdef __CUEMU__
    EXPECT_DIAG("deadlock in kernel early_exit_kernel", "waits at cluster.sync()",
                here(__FILE__, kWaits), "block (2,0,0) (rank 2) exited without reaching it");
#endif
    cudaDeviceReset();
    return emu_test_result("cluster_dsmem");
}
