// SPDX-License-Identifier: MIT
/*
 * Kernels split at their barriers (emu/include/cuemu_split.h): each thread keeps its own
 * variables and its own copy of the parameters across barriers, a barrier in a loop, an early
 * return after the last barrier, cooperative groups' block barrier, the same answers as the
 * same code on fibers, helpers that wait (split too, nested, called in a loop, and run on
 * fibers from a kernel that stays there), and, on the emulator, the reports a fiber run gives:
 * a deadlock at a later barrier or at a helper's, a fault after a barrier, and a wait
 * the split could not see (through a function pointer), refused with the way out (and run, in
 * a build without the split: make EMU_SPLIT=0), and a kernel as students write it (a thread
 * loop: emu/rewrite's tl_plan).
 * Valid CUDA: on a GPU every check but the emulator's reports runs the same.
 */
#include <cooperative_groups.h>

#include "emu_test.h"

namespace cg = cooperative_groups;

// a tree reduction whose threads change their own copy of a parameter (as NVIDIA's merge
// sort does) and keep a local array across barriers
__global__ void tree_kernel(const int *in, int *out, int n)
{
    __shared__ int s[256];
    int own[4];
    in += blockIdx.x * blockDim.x;               // each thread's own copy moves
    for (int k = 0; k < 4; k++) own[k] = (int)threadIdx.x * k;
    s[threadIdx.x] = (int)(blockIdx.x * blockDim.x + threadIdx.x) < n ? in[threadIdx.x] : 0;
    __syncthreads();
    for (unsigned step = blockDim.x / 2; step > 0; step /= 2) {
        if (threadIdx.x < step) s[threadIdx.x] += s[threadIdx.x + step];
        __syncthreads();
    }
    int mine = own[0] + own[1] + own[2] + own[3];    // 6 * threadIdx.x, kept across barriers
    if (mine != 6 * (int)threadIdx.x) s[0] = -1000000;
    if (threadIdx.x != 0) return;                 // after the last barrier: allowed
    out[blockIdx.x] = s[0];
}

// the same reduction through a helper that waits (a split helper: a coroutine the kernel
// awaits, called in a loop), and through another that calls it (helpers nest)
static __device__ void tree_step(int *s, unsigned step)
{
    if (threadIdx.x < step) s[threadIdx.x] += s[threadIdx.x + step];
    __syncthreads();
}

inline __device__ void tree_steps(int *s, unsigned from)
{
    for (unsigned step = from; step > 0; step /= 2) tree_step(s, step);
}

__global__ void tree_helper_kernel(const int *in, int *out, int n)
{
    __shared__ int s[256];
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    s[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned step = blockDim.x / 2; step > 8; step /= 2) tree_step(s, step);
    tree_steps(s, 8);
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// the same helpers called from a kernel that stays on fibers (it also waits with __syncwarp):
// there the helpers' barriers are the fibers'
__global__ void tree_fibers_kernel(const int *in, int *out, int n)
{
    __shared__ int s[256];
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    s[threadIdx.x] = i < n ? in[i] : 0;
    __syncwarp();
    __syncthreads();
    tree_steps(s, blockDim.x / 2);
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// a helper's __syncthreads_count, split and on fibers
static __device__ void count_odd(int *out)
{
    int c = __syncthreads_count(threadIdx.x & 1);
    out[threadIdx.x] = c;
}

__global__ void count_helper_kernel(int *out) { count_odd(out); }
__global__ void count_fibers_kernel(int *out) { __syncwarp(); count_odd(out); }

// cooperative groups' block barrier, counted with __syncthreads_count
__global__ void cg_count_kernel(int *out)
{
    cg::thread_block block = cg::this_thread_block();
    __shared__ int flags[128];
    flags[block.thread_rank()] = block.thread_rank() % 3 == 0;
    block.sync();
    int left = flags[(block.thread_rank() + 1) % block.size()];
    cg::sync(block);
    int count = __syncthreads_count(left);
    int all = __syncthreads_and(count == 43);
    out[block.thread_rank()] = count * 10 + all;
}

// a parameter without a name (the split captures the parameters instead), and a parameter pack
__global__ void unnamed_param_kernel(int *out, int)
{
    __shared__ int s[32];
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[31 - threadIdx.x];
}

template <class... A>
__global__ void pack_kernel(int *out, A... a)
{
    __shared__ int s[32];
    s[threadIdx.x] = (int)threadIdx.x + (a + ...);
    __syncthreads();
    out[threadIdx.x] = s[31 - threadIdx.x];
}

// threads 0..31 leave between the first and the second barrier
[[maybe_unused]] static const int kSecondBarrier = __LINE__ + 7;
__global__ void late_exit_kernel(int *out)
{
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    if (threadIdx.x < 32) return;               // BUG: the others wait at the next barrier
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}

// an out-of-bounds write after a barrier
[[maybe_unused]] static const int kFaultLine = __LINE__ + 7;
__global__ void fault_after_barrier_kernel(int *out, int n)
{
    __shared__ int s[64];
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    int i = s[63 - threadIdx.x];
    out[i + n * (threadIdx.x == 5)] = 1;          // thread 5 writes past the end
}

// threads 0..31 leave before a helper's barrier, which the others wait at
[[maybe_unused]] static const int kHelperBarrier = __LINE__ + 4;
static __device__ void publish(int *s)
{
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
}

__global__ void helper_exit_kernel(int *out)
{
    __shared__ int s[64];
    if (threadIdx.x < 32) return;               // BUG: the others wait in publish
    publish(s);
    out[threadIdx.x] = s[95 - threadIdx.x];
}

// a wait reached through a pointer, which the rewriter cannot follow
__device__ void wait_here() { __syncthreads(); }
__device__ void (*wait_ptr)() = wait_here;

__global__ void hidden_wait_kernel(int *out)
{
    __shared__ int s[32];
    s[threadIdx.x] = 1;
    __syncthreads();
    wait_ptr();
    out[threadIdx.x] = s[31 - threadIdx.x];
}

// a tiled sum written as students write it: indices first, the tile after them, a bound every
// thread computes alike, a sum kept per thread across barriers, and a value declared unset
// (a thread loop in the emulator's default build, a coroutine in split_coroutines)
__global__ void tiles_kernel(const int *in, int *out, int n)
{
    int tx = threadIdx.x;
    int base = blockIdx.x * 64;
    __shared__ int tile[64];
    int tiles = (n + 63) / 64;
    int acc = 0;
    int last;
    for (int t = 0; t < tiles; t++) {
        tile[tx] = t * 64 + tx < n ? in[t * 64 + tx] : 0;
        __syncthreads();
        last = tile[(tx + base) % 64];
        acc += last;
        __syncthreads();
    }
    out[base + tx] = acc + 0 * last;
}

int main()
{
    const int n = 256 * 37 + 11, blocks = (n + 255) / 256;
    int *in = nullptr, *a = nullptr, *b = nullptr, *o = nullptr;
    CUDA_OK(cudaMallocManaged(&in, n * sizeof(int)));
    CUDA_OK(cudaMallocManaged(&a, blocks * sizeof(int)));
    CUDA_OK(cudaMallocManaged(&b, blocks * sizeof(int)));
    CUDA_OK(cudaMallocManaged(&o, 256 * sizeof(int)));
    for (int i = 0; i < n; i++) in[i] = (i * 7919) % 1000 - 500;
    int *c = nullptr;
    CUDA_OK(cudaMallocManaged(&c, blocks * sizeof(int)));
    tree_kernel<<<blocks, 256>>>(in, a, n);
    tree_helper_kernel<<<blocks, 256>>>(in, b, n);
    tree_fibers_kernel<<<blocks, 256>>>(in, c, n);
    CUDA_OK(cudaDeviceSynchronize());
    for (int blk = 0; blk < blocks; blk++) {
        int want = 0;
        for (int i = blk * 256; i < n && i < blk * 256 + 256; i++) want += in[i];
        EXPECT_EQ_INT(a[blk], want);
        EXPECT_EQ_INT(b[blk], want);
        EXPECT_EQ_INT(c[blk], want);
    }

    tiles_kernel<<<2, 64>>>(in, o, 200);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 128; t++) {
        int want = 0;
        for (int k = t % 64; k < 200; k += 64) want += in[k];
        EXPECT_EQ_INT(o[t], want);
    }

    count_helper_kernel<<<1, 96>>>(o);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 96; t++) EXPECT_EQ_INT(o[t], 48);
    count_fibers_kernel<<<1, 64>>>(o);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 64; t++) EXPECT_EQ_INT(o[t], 32);

    cg_count_kernel<<<1, 128>>>(o);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 128; t++) EXPECT_EQ_INT(o[t], 431);   // 43 multiples of 3 below 128

    unnamed_param_kernel<<<1, 32>>>(o, 7);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 32; t++) EXPECT_EQ_INT(o[t], 31 - t);
    pack_kernel<<<1, 32>>>(o, 1, 2);
    CUDA_OK(cudaDeviceSynchronize());
    for (int t = 0; t < 32; t++) EXPECT_EQ_INT(o[t], 31 - t + 3);

    EMU_ONLY();
#ifdef __CUEMU__
    late_exit_kernel<<<1, 64>>>(o);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_DIAG("deadlock in kernel late_exit_kernel", "divergent __syncthreads",
                "32 threads wait at __syncthreads", here(__FILE__, kSecondBarrier),
                "32 threads exited (first: thread (0,0,0))");
    cuemuClearDiagnostic();
    cudaDeviceReset();

    CUDA_OK(cudaMallocManaged(&o, 64 * sizeof(int)));
    helper_exit_kernel<<<1, 64>>>(o);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_DIAG("deadlock in kernel helper_exit_kernel", "divergent __syncthreads",
                "32 threads wait at __syncthreads", here(__FILE__, kHelperBarrier),
                "32 threads exited (first: thread (0,0,0))");
    cuemuClearDiagnostic();
    cudaDeviceReset();

    CUDA_OK(cudaMalloc(&o, 64 * sizeof(int)));
    fault_after_barrier_kernel<<<1, 64>>>(o, 64);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("out-of-bounds write of global memory in kernel fault_after_barrier_kernel",
                "thread (5,0,0)", here(__FILE__, kFaultLine));
    cuemuClearDiagnostic();
    cudaDeviceReset();

    CUDA_OK(cudaMallocManaged(&o, 32 * sizeof(int)));
    hidden_wait_kernel<<<1, 32>>>(o);
#if CUEMU_SPLIT
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorNotSupported);
    EXPECT_DIAG("kernel hidden_wait_kernel", "waits (__syncthreads at", "EMU_SPLIT=0");
    cuemuClearDiagnostic();
#else
    CUDA_OK(cudaDeviceSynchronize());              // on fibers every wait works
    for (int t = 0; t < 32; t++) EXPECT_EQ_INT(o[t], 1);
#endif
    cudaDeviceReset();
#endif
    return emu_test_result("split");
}
