/* SPDX-License-Identifier: MIT */
/*
 * cuemu_cluster.h: thread block clusters (sm_90) as far as the CPU emulator goes, included by
 * cooperative_groups.h. The emulator runs the blocks of a grid one after another, never a
 * cluster's blocks together, so __cluster_dims__ is accepted and ignored and every block is a
 * cluster of one, which CUDA also makes of a launch without clusters: this_cluster() works,
 * sync() is the block's barrier, map_shared_rank(p, 0) is p. Any other rank names a block
 * that is not running here: it is reported ("not supported here"), with the line, and the
 * launch fails with cudaErrorNotSupported. Programs that need real clusters check
 * cudaDevAttrClusterLaunch and the backend (chapter 10's driver skips them here).
 */
#ifndef CUEMU_CLUSTER_H
#define CUEMU_CLUSTER_H
#ifdef __cplusplus

namespace cooperative_groups {

class cluster_group : public thread_group {
    friend cluster_group this_cluster();
    cluster_group()
        : thread_group(details::kind_block, details::block_threads(), details::block_rank(), 0) {}

public:
    static unsigned num_blocks() { return 1; }
    static unsigned block_rank() { return 0; }
    static dim3 dim_blocks() { return dim3(1, 1, 1); }
    static dim3 block_index() { return dim3(0, 0, 0); }
    unsigned long long num_threads() const { return details::block_threads(); }
    bool is_valid() const { return true; }
    template <class T>
    T *map_shared_rank(T *addr, int rank, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) const
    {
        if (rank != 0)
            cuemu_device_error(cudaErrorNotSupported, file, line,
                               "not supported here: cluster_group::map_shared_rank to another "
                               "block's shared memory (the emulator runs every block as a "
                               "cluster of one; distributed shared memory needs an sm_90 GPU)");
        return addr;
    }
    unsigned query_shared_rank(const void *addr) const { (void)addr; return 0; }
};

inline cluster_group this_cluster() { return cluster_group(); }

}  // namespace cooperative_groups

#endif /* __cplusplus */
#endif /* CUEMU_CLUSTER_H */
