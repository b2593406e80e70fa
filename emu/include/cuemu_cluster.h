/* SPDX-License-Identifier: MIT */
/*
 * cuemu_cluster.h: thread block clusters (sm_90) on the CPU emulator, included by
 * cooperative_groups.h. A launch's cluster shape comes from the kernel's __cluster_dims__ or
 * from cudaLaunchKernelEx's cluster attribute (checked by the core: the grid a multiple of it,
 * at most 8 blocks, 16 with cudaFuncAttributeNonPortableClusterSizeAllowed); a launch without
 * one runs every block as a cluster of one, as CUDA does.
 *
 * The blocks of a cluster run together, each on a host thread of its own, taking turns in a
 * fixed order (emu/core/sched.c, "thread block clusters"): sync() is a barrier of every thread
 * of every block of the cluster, and map_shared_rank(p, r) is the same shared variable in the
 * block of rank r, which this block may read, write and update atomically. Misuse is reported
 * with the line: a rank outside the cluster, an address that is not shared memory, an access
 * to a block's dynamic shared memory before that block started or after it exited (no
 * cluster.sync() first or last), or past the end of it.
 */
#ifndef CUEMU_CLUSTER_H
#define CUEMU_CLUSTER_H
#ifdef __cplusplus

namespace cooperative_groups {
namespace details {
static inline uint3 cluster_dim()
{
    uint3 d = cuemu_w_now()->cluster_dim;
    if (d.x == 0) d = uint3{1, 1, 1};   /* outside a launch */
    return d;
}
static inline unsigned cluster_blocks()
{ uint3 d = cluster_dim(); return d.x * d.y * d.z; }
/* block_rank(): x fastest, as CUDA numbers a cluster's blocks */
static inline unsigned cluster_block_rank()
{
    uint3 d = cluster_dim();
    return blockIdx.x % d.x + d.x * (blockIdx.y % d.y + d.y * (blockIdx.z % d.z));
}
}  // namespace details

class cluster_group : public thread_group {
    friend cluster_group this_cluster();
    cluster_group()
        : thread_group(details::kind_cluster, details::cluster_blocks() * details::block_threads(),
                       details::cluster_block_rank() * details::block_threads() +
                           details::block_rank(), 0) {}

public:
    static unsigned num_blocks() { return details::cluster_blocks(); }
    static unsigned block_rank() { return details::cluster_block_rank(); }
    static dim3 dim_blocks()
    { uint3 d = details::cluster_dim(); return dim3(d.x, d.y, d.z); }
    static dim3 block_index()
    {
        uint3 d = details::cluster_dim();
        return dim3(blockIdx.x % d.x, blockIdx.y % d.y, blockIdx.z % d.z);
    }
    unsigned long long num_threads() const { return size_; }
    unsigned long long size() const { return size_; }
    dim3 dim_threads() const
    {
        uint3 d = details::cluster_dim();
        return dim3(d.x * blockDim.x, d.y * blockDim.y, d.z * blockDim.z);
    }
    bool is_valid() const { return true; }
    static void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE())
    { cuemu_cluster_sync(file, line); }
    template <class T>
    T *map_shared_rank(T *addr, int rank, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) const
    { return static_cast<T *>(cuemu_cluster_map((const void *)addr, (unsigned)rank, file, line)); }
    unsigned query_shared_rank(const void *addr) const
    { int r = cuemu_cluster_query(addr); return r < 0 ? 0u : (unsigned)r; }
};

inline cluster_group this_cluster() { return cluster_group(); }

}  // namespace cooperative_groups

#endif /* __cplusplus */
#endif /* CUEMU_CLUSTER_H */
