/* SPDX-License-Identifier: MIT */
/*
 * cooperative_groups.h for the CPU emulator: the block and tile levels of CUDA's cooperative
 * groups (namespace cooperative_groups), built on the emulator's own barrier and warp
 * rendezvous, so that their checks hold here too (a tile's sync is a __syncwarp of the tile's
 * lanes: a thread that skips it is reported as a divergent warp operation, as a GPU hangs or
 * misbehaves).
 *
 *   this_thread_block(), thread_block: sync, thread_rank, size/num_threads, group_index,
 *       thread_index, group_dim/dim_threads
 *   tiled_partition<N>(parent) (N = 1, 2, 4, 8, 16, 32), thread_block_tile<N>: sync, ranks,
 *       meta_group_rank/size, shfl, shfl_up, shfl_down, shfl_xor, any, all, ballot
 *   tiled_partition(parent, n) (n a power of two up to 32): a thread_group
 *   coalesced_threads(), coalesced_group: the lanes active together
 *   thread_group: what all of them convert to (sync, thread_rank, size)
 *   sync(g), cooperative_groups/reduce.h's reduce(tile, v, op) with plus, less, greater,
 *       bit_and, bit_or, bit_xor
 * Grid-wide groups (this_grid().sync(), needing cudaLaunchCooperativeKernel) and multi-warp
 * tiles are not offered: they fail with "not supported here" naming the line.
 * The file and line of each member call come from __builtin_FILE/__builtin_LINE, so a report
 * names the .cu line of the call.
 */
#ifndef _COOPERATIVE_GROUPS_H_
#define _COOPERATIVE_GROUPS_H_
#include "cuda_runtime.h"
#ifdef __cplusplus

namespace cooperative_groups {
namespace details {
static inline unsigned block_threads()
{ return blockDim.x * blockDim.y * blockDim.z; }
static inline unsigned block_rank()
{ return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
/* The lanes of this thread's warp that exist (the last warp of a block may be partial). */
static inline unsigned warp_lanes()
{
    unsigned first = block_rank() & ~31u, n = block_threads() - first;
    return n >= 32 ? 0xFFFFFFFFu : ((1u << n) - 1u);
}
/* The lanes of the tile of `size` lanes (a power of two up to 32) this thread is in. */
static inline unsigned tile_mask(unsigned size)
{
    unsigned lane = block_rank() & 31u;
    unsigned m = size >= 32 ? 0xFFFFFFFFu : (((1u << size) - 1u) << (lane / size * size));
    return m & warp_lanes();
}
enum { kind_block = 1, kind_tile = 2, kind_coalesced = 3, kind_grid = 4, kind_cluster = 5 };
}  // namespace details

/* What every group converts to. A thread_group holds what it needs to synchronise itself. */
class thread_group {
protected:
    unsigned kind_, size_, rank_, mask_;
    thread_group(unsigned kind, unsigned size, unsigned rank, unsigned mask)
        : kind_(kind), size_(size), rank_(rank), mask_(mask) {}

public:
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        if (kind_ == details::kind_block)
            cuemu_syncthreads(file, line);
        else if (kind_ == details::kind_cluster)
            cuemu_cluster_sync(file, line);
        else if (kind_ == details::kind_grid)
            cuemu_device_error(cudaErrorNotSupported, file, line,
                               "not supported here: grid_group::sync (a grid-wide barrier, "
                               "cudaLaunchCooperativeKernel)");
        else
            (void)cuemu_warp_op(CUEMU_W_SYNC, mask_, 0, 0, 32, file, line);
    }
    unsigned long long size() const { return size_; }
    unsigned long long num_threads() const { return size_; }
    unsigned long long thread_rank() const { return rank_; }
    unsigned get_type() const { return kind_; }
};

class thread_block : public thread_group {
    friend thread_block this_thread_block();
    thread_block()
        : thread_group(details::kind_block, details::block_threads(), details::block_rank(), 0) {}

public:
    static void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE())
    { cuemu_syncthreads(file, line); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
    dim3 dim_threads() const { return group_dim(); }
};
inline thread_block this_thread_block() { return thread_block(); }

/* A grid_group exists so that code naming it compiles; its sync is refused (see above). */
class grid_group : public thread_group {
    friend grid_group this_grid();
    grid_group()
        : thread_group(details::kind_grid,
                       gridDim.x * gridDim.y * gridDim.z * details::block_threads(),
                       details::block_rank() + details::block_threads() *
                           (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)), 0) {}
public:
    bool is_valid() const { return false; }   /* not launched with cudaLaunchCooperativeKernel */
    dim3 group_dim() const { return dim3(gridDim.x, gridDim.y, gridDim.z); }
};
inline grid_group this_grid() { return grid_group(); }

/* Lanes of one warp acting together: the warp operations on the group's mask. */
class warp_group_base : public thread_group {
protected:
    unsigned width_;
    warp_group_base(unsigned kind, unsigned size, unsigned rank, unsigned mask, unsigned width)
        : thread_group(kind, size, rank, mask), width_(width) {}
    template <class T> T xchg(int kind, T v, int arg, const char *file, int line) const
    {
        static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                      "a group shuffle moves at most 8 bytes of a trivially copyable type");
        uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof(T));
        bits = cuemu_warp_op(kind, mask_, bits, arg, (int)width_, file, line);
        T out;
        std::memcpy(&out, &bits, sizeof(T));
        return out;
    }

public:
    void sync(const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    { (void)cuemu_warp_op(CUEMU_W_SYNC, mask_, 0, 0, 32, file, line); }
    int any(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    { return (int)cuemu_warp_op(CUEMU_W_ANY, mask_, pred ? 1 : 0, 0, 32, file, line); }
    int all(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    { return (int)cuemu_warp_op(CUEMU_W_ALL, mask_, pred ? 1 : 0, 0, 32, file, line); }
    /* bit i: the group's thread of rank i */
    unsigned ballot(int pred, const char *file = __builtin_FILE(), int line = __builtin_LINE()) const
    {
        unsigned b = (unsigned)cuemu_warp_op(CUEMU_W_BALLOT, mask_, pred ? 1 : 0, 0, 32, file, line);
        return b >> __builtin_ctz(mask_);
    }
};

template <unsigned N, class Parent = void> class thread_block_tile;

/* tiled_partition<N>: the tile of N consecutive ranks of the block that holds this thread. */
template <unsigned N> class thread_block_tile<N, void> : public warp_group_base {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "not supported here: thread_block_tile sizes other than 1, 2, 4, 8, 16, 32");

protected:
    thread_block_tile()
        : warp_group_base(details::kind_tile, N, details::block_rank() % N,
                          details::tile_mask(N), N) {}

public:
    template <class P> thread_block_tile(const thread_block_tile<N, P> &) : thread_block_tile() {}
    static constexpr unsigned long long num_threads() { return N; }
    static constexpr unsigned long long size() { return N; }
    unsigned long long thread_rank() const { return rank_; }
    unsigned long long meta_group_rank() const { return details::block_rank() / N; }
    unsigned long long meta_group_size() const { return (details::block_threads() + N - 1) / N; }
    template <class T> T shfl(T v, int src, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) const
    { return xchg(CUEMU_W_SHFL, v, src, file, line); }
    template <class T> T shfl_up(T v, unsigned d, const char *file = __builtin_FILE(),
                                 int line = __builtin_LINE()) const
    { return xchg(CUEMU_W_UP, v, (int)d, file, line); }
    template <class T> T shfl_down(T v, unsigned d, const char *file = __builtin_FILE(),
                                   int line = __builtin_LINE()) const
    { return xchg(CUEMU_W_DOWN, v, (int)d, file, line); }
    template <class T> T shfl_xor(T v, unsigned m, const char *file = __builtin_FILE(),
                                  int line = __builtin_LINE()) const
    { return xchg(CUEMU_W_XOR, v, (int)m, file, line); }
};
template <unsigned N, class Parent> class thread_block_tile : public thread_block_tile<N, void> {
    template <unsigned M, class P> friend thread_block_tile<M, P> tiled_partition(const P &);

public:
    thread_block_tile() : thread_block_tile<N, void>() {}
};

template <unsigned N, class P> inline thread_block_tile<N, P> tiled_partition(const P &)
{ return thread_block_tile<N, P>(); }

/* The run-time size form: a power of two up to 32, as a thread_group. */
class dynamic_tile : public warp_group_base {
public:
    explicit dynamic_tile(unsigned n)
        : warp_group_base(details::kind_tile, n, details::block_rank() % n, details::tile_mask(n), n) {}
};
static inline thread_group tiled_partition(const thread_group &, unsigned n,
                                           const char *file = __builtin_FILE(),
                                           int line = __builtin_LINE())
{
    if (n == 0 || n > 32 || (n & (n - 1))) {
        cuemu_device_error(cudaErrorNotSupported, file, line,
                           "not supported here: tiled_partition(parent, n) with n not a power of "
                           "two up to 32 (tiles spanning several warps)");
        n = 1;
    }
    return dynamic_tile(n);
}

/* The lanes of this warp that are running this call together. */
class coalesced_group : public warp_group_base {
    friend coalesced_group coalesced_threads();
    explicit coalesced_group(unsigned m)
        : warp_group_base(details::kind_coalesced, (unsigned)__builtin_popcount(m),
                          (unsigned)__builtin_popcount(m & ((1u << (details::block_rank() & 31u)) - 1u)),
                          m, 32) {}

public:
    unsigned long long meta_group_rank() const { return 0; }
    unsigned long long meta_group_size() const { return 1; }
    /* a coalesced group's ranks are not lanes: src is a rank, as in CUDA */
    template <class T> T shfl(T v, unsigned src, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) const
    {
        unsigned m = mask_, lane = 0;
        for (unsigned r = 0; m; m &= m - 1, r++)
            if (r == src) { lane = (unsigned)__builtin_ctz(m); break; }
        return xchg(CUEMU_W_SHFL, v, (int)lane, file, line);
    }
};
inline coalesced_group coalesced_threads() { return coalesced_group(cuemu_activemask()); }

template <class G> static inline void sync(const G &g, const char *file = __builtin_FILE(),
                                           int line = __builtin_LINE())
{ g.sync(file, line); }
template <class G> static inline unsigned long long thread_rank(const G &g) { return g.thread_rank(); }
template <class G> static inline unsigned long long group_size(const G &g) { return g.size(); }

/* ---- cooperative_groups/reduce.h -------------------------------------------------------- */
template <class T> struct plus { T operator()(const T &a, const T &b) const { return a + b; } };
template <class T> struct less { T operator()(const T &a, const T &b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T &a, const T &b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T &a, const T &b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T &a, const T &b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T &a, const T &b) const { return a ^ b; } };

/* Every thread of the tile gets op over all its threads' values (a butterfly of shuffles). */
template <unsigned N, class P, class T, class Op>
static inline T reduce(const thread_block_tile<N, P> &g, T v, Op op,
                       const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    for (unsigned d = 1; d < N; d *= 2) v = op(v, g.shfl_xor(v, d, file, line));
    return v;
}
}  // namespace cooperative_groups

/* this_cluster(): thread block clusters (sm_90) */
#include "cuemu_cluster.h"

#endif /* __cplusplus */
#endif /* _COOPERATIVE_GROUPS_H_ */
