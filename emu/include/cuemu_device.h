// SPDX-License-Identifier: MIT
/*
 * cuemu_device.h: the device side of CUDA for the host compiler.
 *
 * Included at the end of the emulator's cuda_runtime.h, which is force-included into every
 * emulated compile (C++ only). Qualifiers become nothing (`static thread_local` for
 * __shared__), the built-in variables read the current fiber, and barriers and warp operations
 * call into the core (emu/core/sched.c) with their source line, so a deadlock report can name
 * it. The
 * rewriter (emu/rewrite/) turns `k<<<g, b, s, st>>>(args)` into a call of cuemu::launch.
 */
#ifndef CUEMU_DEVICE_H
#define CUEMU_DEVICE_H
#ifdef __cplusplus

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuemu_core.h"

// ---- qualifiers -----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
/* nvcc's front end takes __noinline__ as a keyword, so a library's
   __attribute__((__noinline__)) stays an attribute; a macro would turn it into the invalid
   __attribute__((__attribute__((noinline)))) ("'noinline' was not declared"). libstdc++ writes
   it in <memory> (12 and newer) and <string> (13 and newer): both are included above, before
   the macro, and their include guards keep them from being read again. The C++17 headers are
   all compiled after it with each compiler (emu/tests/nvcc/std_headers.cu); only <stacktrace>
   (C++23) and <experimental/simd> would still collide. */
#define __noinline__ __attribute__((noinline))
/* Host code with no load/store hooks and no alignment or index checks: the rewriter puts it on each
   `extern "C"` function that is neither __global__ nor __device__ (emu/rewrite), and the launch
   below has it. Those checks act only inside a kernel (emu/core/access.c), so in host code they
   were code the compiler made, checked nothing with, and compiled again with the hooks inlined:
   most of a chapter's accesses (every launch expands here), and half its rebuild. A kernel's
   body keeps them wherever it is written, a lambda's too (the attribute is not inherited). */
#if defined(__clang__)
#define CUEMU_HOST_FN __attribute__((no_sanitize("coverage", "alignment", "array-bounds")))
#else
#define CUEMU_HOST_FN
#endif
/* The emulator's own device-side bookkeeping (<cuda/barrier>): no load/store hooks, and out of
   line, so that a kernel's hooks do not reach it by inlining either. What it reads of the
   program's memory it reads through a function that keeps them. */
#if defined(__clang__)
#define CUEMU_NO_HOOKS __attribute__((noinline, no_sanitize("coverage")))
#else
#define CUEMU_NO_HOOKS
#endif
#define __launch_bounds__(...)
/* sm_90 thread block clusters: the rewriter registers a kernel's __cluster_dims__(x, y, z) after
   its definition (cuemu::cluster_reg below); the attribute itself is then nothing. A template
   kernel's is not registered (each of its specialisations has an address of its own): it runs
   as clusters of one unless cudaLaunchKernelEx gives the shape (docs/no-gpu.md). */
#define __cluster_dims__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __grid_constant__
/* One block runs at a time on each host thread (a launch may use several: CUEMU_THREADS), so
   thread-local static storage is that block's shared memory. The rewriter turns each
   `__shared__` declaration into `static thread_local` plus a cuemu::shared_reg, so the core can
   poison the variable (0xFF bytes: NaN, -1) before every block; this macro is the fallback for
   a __shared__ the rewriter cannot see (one made by a macro), which is then not poisoned. */
#define __shared__ static thread_local

// ---- vector types ---------------------------------------------------------------------------
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define CUEMU_VEC1(T, N, A) struct __attribute__((aligned(A))) N##1 { T x; };            \
    static inline N##1 make_##N##1(T x) { N##1 v; v.x = x; return v; }
#define CUEMU_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; };         \
    static inline N##2 make_##N##2(T x, T y) { N##2 v; v.x = x; v.y = y; return v; }
#define CUEMU_VEC3(T, N, A) struct N##3 { T x, y, z; };                                  \
    static inline N##3 make_##N##3(T x, T y, T z) { N##3 v; v.x = x; v.y = y; v.z = z; return v; }
#define CUEMU_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };   \
    static inline N##4 make_##N##4(T x, T y, T z, T w)                                   \
    { N##4 v; v.x = x; v.y = y; v.z = z; v.w = w; return v; }
/* alignments are CUDA's: 2-vectors 2x the element, 4-vectors 4x (at most 16) */
#define CUEMU_VECS(T, N, S) CUEMU_VEC1(T, N, S) CUEMU_VEC2(T, N, 2 * S)                  \
    CUEMU_VEC3(T, N, S) CUEMU_VEC4(T, N, (4 * S > 16 ? 16 : 4 * S))
CUEMU_VECS(signed char, char, 1)
CUEMU_VECS(unsigned char, uchar, 1)
CUEMU_VECS(short, short, 2)
CUEMU_VECS(unsigned short, ushort, 2)
CUEMU_VECS(int, int, 4)
CUEMU_VECS(float, float, 4)
CUEMU_VECS(long long, longlong, 8)
CUEMU_VECS(unsigned long long, ulonglong, 8)
CUEMU_VECS(double, double, 8)
CUEMU_VECS(long, long, 8)
CUEMU_VECS(unsigned long, ulong, 8)
CUEMU_VEC1(unsigned int, uint, 4)
CUEMU_VEC2(unsigned int, uint, 8)
CUEMU_VEC4(unsigned int, uint, 16)
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z)
{ uint3 v; v.x = x; v.y = y; v.z = z; return v; }
#undef CUEMU_VECS
#undef CUEMU_VEC1
#undef CUEMU_VEC2
#undef CUEMU_VEC3
#undef CUEMU_VEC4

/* What follows is CUDA C++'s device side: built-in variables, intrinsics, device math,
   launches. nvcc declares it only in CUDA sources (__CUDACC__); cuemu-nvcc compiles a .cpp or
   .c with CUEMU_HOST_SOURCE, so a host file may define its own min, umin, rsqrtf... as with
   nvcc. (The chapters' build compiles only .cu files and defines neither.) */
#ifndef CUEMU_HOST_SOURCE
// ---- built-in variables ---------------------------------------------------------------------
/* Macros, not variables: each read must see the fiber that is running now. Read-only like
   CUDA's (they are const references). */
#if defined(CUEMU_TRACE) && defined(__clang__)
/* In the build with load/store hooks (clang, emu/emu.mk) every load calls a hook, and the
   built-in variables are read in nearly every line: three of a vector add's six hook calls per
   thread were blockIdx.x, blockDim.x and threadIdx.x. They are the emulator's own globals,
   never device memory, so they are read as one 12-byte integer: the instrumentation calls
   hooks only for loads of 1, 2, 4, 8 or 16 bytes, and code generation still narrows the load
   to the component used. An ordinary load otherwise: dropped when unused, read again after a
   call (a thread switch is one). The variables are prvalues then, as good as CUDA's (whose
   address may not be taken). */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wbit-int-extension"
namespace cuemu {
typedef unsigned _BitInt(96) builtin_bits;
/* the field at `offset` of this host thread's record (cuemu_core.h), with no member access the
   alignment check would test */
static inline __attribute__((always_inline)) uint3 builtin(size_t offset)
{
    static_assert(sizeof(uint3) == 12, "uint3 is three unsigned ints");
    builtin_bits w;
    std::memcpy(&w, (const char *)cuemu_w_now() + offset, sizeof(uint3));
    return uint3{(unsigned)w, (unsigned)(w >> 32), (unsigned)(w >> 64)};
}
}  // namespace cuemu
#pragma clang diagnostic pop
#define threadIdx (::cuemu::builtin(offsetof(struct cuemu_tls, tidx)))
#define blockIdx  (::cuemu::builtin(offsetof(struct cuemu_tls, block_idx)))
#define blockDim  (::cuemu::builtin(offsetof(struct cuemu_tls, block_dim)))
#define gridDim   (::cuemu::builtin(offsetof(struct cuemu_tls, grid_dim)))
#else
namespace cuemu {
static inline __attribute__((always_inline)) const uint3 &builtin(size_t offset)
{
    return *(const uint3 *)(const void *)((const char *)cuemu_w_now() + offset);
}
}  // namespace cuemu
#define threadIdx (::cuemu::builtin(offsetof(struct cuemu_tls, tidx)))
#define blockIdx  (::cuemu::builtin(offsetof(struct cuemu_tls, block_idx)))
#define blockDim  (::cuemu::builtin(offsetof(struct cuemu_tls, block_dim)))
#define gridDim   (::cuemu::builtin(offsetof(struct cuemu_tls, grid_dim)))
#endif
constexpr int warpSize = 32;

// ---- barriers and warp operations -----------------------------------------------------------
#define __syncthreads() ::cuemu_syncthreads(__FILE__, __LINE__)
#define __syncthreads_count(p) ::cuemu_syncthreads_op(0, (p) ? 1 : 0, __FILE__, __LINE__)
#define __syncthreads_and(p) ::cuemu_syncthreads_op(1, (p) ? 1 : 0, __FILE__, __LINE__)
#define __syncthreads_or(p) ::cuemu_syncthreads_op(2, (p) ? 1 : 0, __FILE__, __LINE__)
#include "cuemu_split.h"

namespace cuemu {
struct site {
    const char *file;
    int line;
    void operator()(unsigned mask = 0xFFFFFFFFu) const   // __syncwarp(mask)
    { (void)cuemu_warp_op(CUEMU_W_SYNC, mask, 0, 0, 32, file, line); }
};

template <class T>
static inline T warp_xchg(int kind, const char *file, int line, unsigned mask, T var, int arg,
                          int width)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles move at most 8 bytes of a trivially copyable type");
    uint64_t bits = 0;
    std::memcpy(&bits, &var, sizeof(T));
    bits = cuemu_warp_op(kind, mask, bits, arg, width, file, line);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
}  // namespace cuemu

#define __syncwarp(...) (::cuemu::site{__FILE__, __LINE__}(__VA_ARGS__))
#define __shfl_sync(...) ::cuemu::shfl_at(CUEMU_W_SHFL, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::cuemu::shfl_at(CUEMU_W_UP, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::cuemu::shfl_at(CUEMU_W_DOWN, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::cuemu::shfl_at(CUEMU_W_XOR, __FILE__, __LINE__, __VA_ARGS__)
#define __ballot_sync(m, p) ((unsigned)::cuemu_warp_op(CUEMU_W_BALLOT, (m), (p) ? 1 : 0, 0, 32, \
                                                        __FILE__, __LINE__))
#define __any_sync(m, p) ((int)::cuemu_warp_op(CUEMU_W_ANY, (m), (p) ? 1 : 0, 0, 32, \
                                                __FILE__, __LINE__))
#define __all_sync(m, p) ((int)::cuemu_warp_op(CUEMU_W_ALL, (m), (p) ? 1 : 0, 0, 32, \
                                                __FILE__, __LINE__))
static inline unsigned __activemask() { return cuemu_activemask(); }

namespace cuemu {
template <class T>
static inline T shfl_at(int kind, const char *file, int line, unsigned mask, T var, int arg,
                        int width = 32)
{
    return warp_xchg<T>(kind, file, line, mask, var, arg, width);
}
}  // namespace cuemu

// ---- atomics ------------------------------------------------------------------------------------
/* The fibers of one host thread never interleave inside these; while a launch runs on several
   host threads (cuemu_w->mt), blocks on other host threads may touch the same global memory,
   and the update is a compare-and-swap loop (one branch, settled the same way every time, on
   one host thread). The plain load comes first either way: the access checks see it. */
#if defined(__SANITIZE_THREAD__)
/* TSan build: make consecutive atomics on one address ordered, so only plain accesses that
   race with them (or each other) are reported */
extern "C" void __tsan_acquire(void *addr);
extern "C" void __tsan_release(void *addr);
#define CUEMU_TSAN_ACQ(p) __tsan_acquire((void *)(p))
#define CUEMU_TSAN_REL(p) __tsan_release((void *)(p))
#else
#define CUEMU_TSAN_ACQ(p) ((void)0)
#define CUEMU_TSAN_REL(p) ((void)0)
#endif
/* The access checks (emu/core/access.c) see atomics' loads and stores too; the depth counter
   tells them apart. The counter is the emulator's, not the program's: it is changed by an
   instruction of its own, which the load and store hooks do not see (as ++ and --, each was a
   load and a store with a hook and an alignment check: four checked accesses more for every
   atomic, most of the time of a shared-memory histogram); a volatile asm with a memory
   clobber, so that the atomic's own access stays between the two changes. */
#define CUEMU_ACCESS_FENCE() __asm__ __volatile__("" ::: "memory")
static inline __attribute__((always_inline)) void cuemu_atomic_depth_add(int d)
{
    /* the field's address by arithmetic: a member access would have its alignment checked */
    int *p = (int *)(void *)((char *)cuemu_w_now() + offsetof(struct cuemu_tls, atomic_depth));
#if defined(__x86_64__)
    __asm__ __volatile__("addl %1, %0" : "+m"(*p) : "ri"(d) : "memory");
#elif defined(__aarch64__)
    int t;
    __asm__ __volatile__("ldr %w0, %1\n\tadd %w0, %w0, %w2\n\tstr %w0, %1"
                         : "=&r"(t), "+m"(*p) : "r"(d) : "memory");
#else
    CUEMU_ACCESS_FENCE();
    *p += d;
    CUEMU_ACCESS_FENCE();
#endif
}
#define CUEMU_ATOMIC(NAME, T, EXPR)                                                      \
    static inline T NAME(T *address, T val)                                              \
    {                                                                                    \
        CUEMU_TSAN_ACQ(address);                                                         \
        cuemu_atomic_depth_add(1);                                                       \
        T old = *address;                                                                \
        if (__builtin_expect(cuemu_w_int(offsetof(struct cuemu_tls, mt)), 0) &&         \
            !cuemu_atomic_private(address)) {                                            \
            T nv;                                                                        \
            do nv = (EXPR);                                                              \
            while (!__atomic_compare_exchange(address, &old, &nv, false,                 \
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));      \
        } else {                                                                         \
            *address = (EXPR);                                                           \
        }                                                                                \
        cuemu_atomic_depth_add(-1);                                                      \
        CUEMU_TSAN_REL(address);                                                         \
        return old;                                                                      \
    }
CUEMU_ATOMIC(atomicAdd, int, old + val)
CUEMU_ATOMIC(atomicAdd, unsigned int, old + val)
CUEMU_ATOMIC(atomicAdd, unsigned long long, old + val)
CUEMU_ATOMIC(atomicAdd, float, old + val)
CUEMU_ATOMIC(atomicAdd, double, old + val)
CUEMU_ATOMIC(atomicSub, int, old - val)
CUEMU_ATOMIC(atomicSub, unsigned int, old - val)
CUEMU_ATOMIC(atomicExch, int, val)
CUEMU_ATOMIC(atomicExch, unsigned int, val)
CUEMU_ATOMIC(atomicExch, unsigned long long, val)
CUEMU_ATOMIC(atomicExch, float, val)
CUEMU_ATOMIC(atomicMin, int, val < old ? val : old)
CUEMU_ATOMIC(atomicMin, unsigned int, val < old ? val : old)
CUEMU_ATOMIC(atomicMin, long long, val < old ? val : old)
CUEMU_ATOMIC(atomicMin, unsigned long long, val < old ? val : old)
CUEMU_ATOMIC(atomicMax, int, val > old ? val : old)
CUEMU_ATOMIC(atomicMax, unsigned int, val > old ? val : old)
CUEMU_ATOMIC(atomicMax, long long, val > old ? val : old)
CUEMU_ATOMIC(atomicMax, unsigned long long, val > old ? val : old)
CUEMU_ATOMIC(atomicAnd, int, old & val)
CUEMU_ATOMIC(atomicAnd, unsigned int, old & val)
CUEMU_ATOMIC(atomicAnd, unsigned long long, old & val)
CUEMU_ATOMIC(atomicOr, int, old | val)
CUEMU_ATOMIC(atomicOr, unsigned int, old | val)
CUEMU_ATOMIC(atomicOr, unsigned long long, old | val)
CUEMU_ATOMIC(atomicXor, int, old ^ val)
CUEMU_ATOMIC(atomicXor, unsigned int, old ^ val)
CUEMU_ATOMIC(atomicXor, unsigned long long, old ^ val)
/* CUDA's wrap-around counters */
CUEMU_ATOMIC(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUEMU_ATOMIC(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef CUEMU_ATOMIC
#define CUEMU_CAS(T) \
    static inline T atomicCAS(T *address, T compare, T val) \
    { CUEMU_TSAN_ACQ(address); cuemu_atomic_depth_add(1);                                \
      T old = *address;                                                                  \
      if (__builtin_expect(cuemu_w_int(offsetof(struct cuemu_tls, mt)), 0) &&           \
          !cuemu_atomic_private(address)) {                                              \
          old = compare;                                                                 \
          __atomic_compare_exchange_n(address, &old, val, false, __ATOMIC_SEQ_CST,       \
                                      __ATOMIC_SEQ_CST);                                 \
      } else if (old == compare) *address = val;                                         \
      cuemu_atomic_depth_add(-1); CUEMU_TSAN_REL(address); return old; }
CUEMU_CAS(int)
CUEMU_CAS(unsigned int)
CUEMU_CAS(unsigned long long)
CUEMU_CAS(unsigned short)
#undef CUEMU_CAS
/* scoped variants: one device; the block's threads share one host thread, and the device-wide
   forms are atomic across host threads: every scope is the device's */
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicInc_block atomicInc
#define atomicInc_system atomicInc
#define atomicDec_block atomicDec
#define atomicDec_system atomicDec
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor

/* printf in a kernel: in block order when a launch runs on several host threads (its output is
   kept with the block until the launch ends); the C library's printf otherwise. <cstdio>,
   included above, would undefine the macro if it came later. */
#define printf(...) cuemu_printf(__VA_ARGS__)
namespace std { using ::cuemu_printf; }

/* a trap faults like a GPU's (the launch fails with cudaErrorIllegalInstruction) */
static inline void __trap() { __builtin_trap(); }
/* lets the other threads of the block run: a spin-wait that sleeps can make progress here */
static inline void __nanosleep(unsigned int) { cuemu_yield(); }

static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- loads, math, intrinsics ----------------------------------------------------------------
template <class T> static inline T __ldg(const T *p) { return *p; }

static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned)a, b); }
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned)b); }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b)
{ return a < b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline float min(float a, float b) { return std::fmin(a, b); }
static inline double min(double a, double b) { return std::fmin(a, b); }
static inline double min(float a, double b) { return std::fmin((double)a, b); }
static inline double min(double a, float b) { return std::fmin(a, (double)b); }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned)a, b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned)b); }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b)
{ return a > b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline float max(float a, float b) { return std::fmax(a, b); }
static inline double max(double a, double b) { return std::fmax(a, b); }
static inline double max(float a, double b) { return std::fmax((double)a, b); }
static inline double max(double a, float b) { return std::fmax(a, (double)b); }

static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
namespace cuemu {
/* Directed rounding without touching the FPU's mode: r is the round-to-nearest result and
   err the sign of (exact - r), known exactly from an error-free transformation (two-sum, or
   an fma for products, quotients and roots); one step toward the asked direction fixes r. */
template <class T> static inline T round_dir(T r, T err, int mode /* 0 rz, 1 ru, -1 rd */)
{
    if (!std::isfinite(r) || err == 0) return r;
    const T inf = std::numeric_limits<T>::infinity();
    if (mode == 1) return err > 0 ? std::nextafter(r, inf) : r;
    if (mode == -1) return err < 0 ? std::nextafter(r, -inf) : r;
    return (r > 0 && err < 0) || (r < 0 && err > 0) ? std::nextafter(r, (T)0) : r;
}
template <class T> static inline T add_dir(T a, T b, int m)
{ T s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb); return round_dir(s, e, m); }
template <class T> static inline T mul_dir(T a, T b, int m)
{ T p = a * b; return round_dir(p, std::fma(a, b, -p), m); }
template <class T> static inline T div_dir(T a, T b, int m)
{ T q = a / b, r = std::fma(-q, b, a); return round_dir(q, b < 0 ? -r : r, m); }
template <class T> static inline T sqrt_dir(T a, int m)
{ T s = std::sqrt(a); return round_dir(s, std::fma(-s, s, a), m); }
}  // namespace cuemu
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rz(float a, float b) { return ::cuemu::add_dir(a, b, 0); }
static inline float __fsub_rz(float a, float b) { return ::cuemu::add_dir(a, -b, 0); }
static inline float __fmul_rz(float a, float b) { return ::cuemu::mul_dir(a, b, 0); }
static inline float __fdiv_rz(float a, float b) { return ::cuemu::div_dir(a, b, 0); }
static inline float __fadd_ru(float a, float b) { return ::cuemu::add_dir(a, b, 1); }
static inline float __fsub_ru(float a, float b) { return ::cuemu::add_dir(a, -b, 1); }
static inline float __fmul_ru(float a, float b) { return ::cuemu::mul_dir(a, b, 1); }
static inline float __fdiv_ru(float a, float b) { return ::cuemu::div_dir(a, b, 1); }
static inline float __fadd_rd(float a, float b) { return ::cuemu::add_dir(a, b, -1); }
static inline float __fsub_rd(float a, float b) { return ::cuemu::add_dir(a, -b, -1); }
static inline float __fmul_rd(float a, float b) { return ::cuemu::mul_dir(a, b, -1); }
static inline float __fdiv_rd(float a, float b) { return ::cuemu::div_dir(a, b, -1); }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rz(double a, double b) { return ::cuemu::add_dir(a, b, 0); }
static inline double __dsub_rz(double a, double b) { return ::cuemu::add_dir(a, -b, 0); }
static inline double __dmul_rz(double a, double b) { return ::cuemu::mul_dir(a, b, 0); }
static inline double __ddiv_rz(double a, double b) { return ::cuemu::div_dir(a, b, 0); }
static inline double __dadd_ru(double a, double b) { return ::cuemu::add_dir(a, b, 1); }
static inline double __dsub_ru(double a, double b) { return ::cuemu::add_dir(a, -b, 1); }
static inline double __dmul_ru(double a, double b) { return ::cuemu::mul_dir(a, b, 1); }
static inline double __ddiv_ru(double a, double b) { return ::cuemu::div_dir(a, b, 1); }
static inline double __dadd_rd(double a, double b) { return ::cuemu::add_dir(a, b, -1); }
static inline double __dsub_rd(double a, double b) { return ::cuemu::add_dir(a, -b, -1); }
static inline double __dmul_rd(double a, double b) { return ::cuemu::mul_dir(a, b, -1); }
static inline double __ddiv_rd(double a, double b) { return ::cuemu::div_dir(a, b, -1); }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline float __fsqrt_rz(float a) { return ::cuemu::sqrt_dir(a, 0); }
static inline float __fsqrt_ru(float a) { return ::cuemu::sqrt_dir(a, 1); }
static inline float __fsqrt_rd(float a) { return ::cuemu::sqrt_dir(a, -1); }
static inline double __dsqrt_rz(double a) { return ::cuemu::sqrt_dir(a, 0); }
static inline double __dsqrt_ru(double a) { return ::cuemu::sqrt_dir(a, 1); }
static inline double __dsqrt_rd(double a) { return ::cuemu::sqrt_dir(a, -1); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
/* glibc declares these names (without exporting them), so they are macros, not functions */
#define __expf(a) (::expf((float)(a)))
#define __logf(a) (::logf((float)(a)))
#define __log2f(a) (::log2f((float)(a)))
#define __sinf(a) (::sinf((float)(a)))
#define __cosf(a) (::cosf((float)(a)))
#define __tanf(a) (::tanf((float)(a)))
#define __powf(a, b) (::powf((float)(a), (float)(b)))
static inline float __saturatef(float a) { return a < 0.0f ? 0.0f : (a > 1.0f ? 1.0f : a); }
static inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
static inline double rsqrt(double a) { return 1.0 / std::sqrt(a); }
static inline float rcbrtf(float a) { return 1.0f / std::cbrt(a); }
static inline int __float2int_rn(float a) { return (int)std::nearbyint(a); }
static inline int __float2int_rz(float a) { return (int)a; }
static inline int __float2int_rd(float a) { return (int)std::floor(a); }
static inline int __float2int_ru(float a) { return (int)std::ceil(a); }
static inline unsigned int __float2uint_rn(float a) { return (unsigned int)std::nearbyint(a); }
static inline float __int2float_rn(int a) { return (float)a; }
static inline int __double2int_rn(double a) { return (int)std::nearbyint(a); }
static inline int __float_as_int(float a) { int i; std::memcpy(&i, &a, 4); return i; }
static inline float __int_as_float(int a) { float f; std::memcpy(&f, &a, 4); return f; }
static inline unsigned int __float_as_uint(float a) { unsigned i; std::memcpy(&i, &a, 4); return i; }
static inline float __uint_as_float(unsigned a) { float f; std::memcpy(&f, &a, 4); return f; }
static inline long long __double_as_longlong(double a) { long long i; std::memcpy(&i, &a, 8); return i; }
static inline double __longlong_as_double(long long a) { double d; std::memcpy(&d, &a, 8); return d; }
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
/* CUDA defines clz(0) = 32 and ffs(0) = 0; the builtins leave clz(0) undefined */
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x)
{
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(x);
}
static inline int __mul24(int a, int b) { return (int)((long long)(a << 8 >> 8) * (b << 8 >> 8)); }
static inline unsigned int __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned a, unsigned b)
{ return (unsigned)(((unsigned long long)a * b) >> 32); }
/* The device's cycle counters tick at the clock rate the emulator reports
   (cudaDevAttrClockRate, CUEMU_CLOCK_KHZ) in real time, so that a kernel that spins for
   `ms * clockRate` cycles waits `ms` milliseconds, as on a GPU. Cycle counts of code say
   nothing about a GPU's here: they count the emulator's time. */
static inline long long clock64()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * (CUEMU_CLOCK_KHZ * 1000LL) +
           (long long)ts.tv_nsec * CUEMU_CLOCK_KHZ / 1000000LL;
}
/* clock() is the C library's in host code and the cycle counter in a kernel (where CUDA's
   device clock() is one): the same name serves both in a .cu file. */
static inline clock_t cuemu_clock() { return cuemu_cur ? (clock_t)clock64() : ::clock(); }
namespace std { using ::cuemu_clock; }
#define clock() cuemu_clock()

// ---- static shared memory registration (the rewriter's addition after `__shared__ T x;`) -----
namespace cuemu {
/* thread_local (the rewriter's declaration): each host thread registers its own copy. */
struct shared_reg {
    shared_reg(void *p, size_t n) { cuemu_shared_register(p, n); }
    shared_reg(void *p, size_t n, const char *name) { cuemu_shared_register_named(p, n, name); }
};
/* The same for a declaration in a block (the rewriter's choice where it can tell): done is a
   thread_local flag of the declaration's own, read and set by instructions of their own
   rather than through the load and store hooks (it lies among the shared variables, where
   every hooked access takes the slow path). */
static inline __attribute__((always_inline)) void shared_once(unsigned char &done, void *p,
                                                              size_t n, const char *name)
{
    unsigned char d;
#if defined(__x86_64__)
    __asm__("movzbl %1, %k0" : "=r"(d) : "m"(done));
#elif defined(__aarch64__)
    __asm__("ldrb %w0, %1" : "=r"(d) : "m"(done));
#else
    d = done;
#endif
    if (__builtin_expect(d == 0, 0)) {
#if defined(__x86_64__)
        __asm__("movb $1, %0" : "=m"(done));
#elif defined(__aarch64__)
        __asm__("strb %w1, %0" : "=m"(done) : "r"(1));
#else
        done = 1;
#endif
        cuemu_shared_register_named(p, n, name);
    }
}
}  // namespace cuemu

// ---- dynamic shared memory (the rewriter's target for `extern __shared__ T name[];`) ---------
namespace cuemu {
struct dsmem_ref {
    void *p;
    template <class T> operator T *() const { return static_cast<T *>(p); }
};
static inline dsmem_ref dsmem(const char *name) { return dsmem_ref{cuemu_dyn_smem(name)}; }
}  // namespace cuemu

// ---- kernel launch (the rewriter's target for `k<<<g, b, s, st>>>(args)`) --------------------
namespace cuemu {
template <int N> struct prio : prio<N - 1> {};
template <> struct prio<0> {};
/* The kernel's address (for cudaFuncSetAttribute limits): direct for a function or an explicit
   specialisation, by the argument types for a deduced template; when neither works (a deduced
   template with converted arguments) the launch goes on without it. */
/* With the address comes, per parameter, whether it is a pointer to non-const: what the kernel
   may write is what its parameters say, not its arguments (an `int *` passed for a
   `const int *` parameter is only read). */
/* A pointer to volatile says the kernel expects another party (the host) to change or watch
   the memory while it runs: the host's access to it is then no race (stream.c). */
struct kfunc {
    const void *addr;
    unsigned writable;   /* bit i: parameter i is a pointer to non-const */
    unsigned vol;        /* bit i: parameter i is a pointer to volatile */
    operator const void *() const { return addr; }
};
template <class... P> static constexpr unsigned writable_params()
{
    unsigned m = 0, i = 0;
    ((m |= (std::is_pointer<P>::value &&
            !std::is_const<typename std::remove_pointer<P>::type>::value ? 1u : 0u) << (i++ & 31)), ...);
    return m;
}
template <class... P> static constexpr unsigned volatile_params()
{
    unsigned m = 0, i = 0;
    ((m |= (std::is_pointer<P>::value &&
            std::is_volatile<typename std::remove_pointer<P>::type>::value ? 1u : 0u) << (i++ & 31)), ...);
    return m;
}
template <class... P, class... A>
static inline kfunc kaddr(prio<2>, void (*f)(P...), A &&...)
{ return kfunc{(const void *)f, writable_params<P...>(), volatile_params<P...>()}; }
template <class... A>
static inline kfunc kaddr(prio<1>, void (*f)(typename std::decay<A>::type...), A &&...)
{
    return kfunc{(const void *)f, writable_params<typename std::decay<A>::type...>(),
                 volatile_params<typename std::decay<A>::type...>()};
}

/* A literal 0 or NULL kernel argument (the rewriter substitutes this): converts to whatever
   the parameter is, as the literal would have at a direct call. */
struct zero_arg {
    template <class T> constexpr operator T() const { return T(0); }
};

struct cfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    uint3 cluster;   /* {0,0,0}: the kernel's own __cluster_dims__, if any */
    cfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0)
        : grid(g), block(b), smem(s), stream(st), cluster{0, 0, 0} {}
};

/* The rewriter's registration of a kernel's __cluster_dims__ (at namespace scope, after the
   kernel's definition). */
struct cluster_reg {
    cluster_reg(const void *f, unsigned x, unsigned y = 1, unsigned z = 1)
    { cuemu_cluster_dims_register(f, x, y, z); }
};

/* A launch's copy of its arguments, and the call of the kernel with them: what std::tuple and
   std::apply did, for a fraction of the compile time (each launch site instantiates its own:
   they were half the front end's time on a chapter's file). */
template <size_t I, class T> struct arg_slot {
    T v;
    template <class U> explicit arg_slot(U &&u) : v(std::forward<U>(u)) {}
};
template <class Idx, class... T> struct args_of;
template <size_t... I, class... T>
struct args_of<std::index_sequence<I...>, T...> : arg_slot<I, T>... {
    template <class... U>
    explicit args_of(std::in_place_t, U &&...u) : arg_slot<I, T>(std::forward<U>(u))... {}
    template <class F> void call(F &f) { f(static_cast<arg_slot<I, T> &>(*this).v...); }
    template <class F> void each(F &&f) const
    { (f(static_cast<const arg_slot<I, T> &>(*this).v), ...); }
};
template <class... T> using args = args_of<std::index_sequence_for<T...>, T...>;

/* What a queued launch keeps until it runs: the kernel body and the copied arguments. */
template <class Body, class Tup> struct launch_ctx {
    Body body;
    Tup args;
};
template <class Body, class Tup> static void run_thread(void *p)
{
    launch_ctx<Body, Tup> *c = static_cast<launch_ctx<Body, Tup> *>(p);
    /* the kernel's by-value parameters are this thread's own copies (kernels cannot take
       references), so the argument copy is never written; this stack's copy of it is one the
       compiler knows to be aligned, so the alignment checks of each access to it go, and the
       threads that run here one after another (cuemu_thread_next) share it */
    Body body(c->body);
    Tup args(c->args);
    do args.call(body);
    while (cuemu_thread_next());
}
template <class Body, class Tup> static void free_ctx(void *p)
{
    delete static_cast<launch_ctx<Body, Tup> *>(p);
}

/* writable, vol: the kernel's parameter masks (kfunc), or ~0u and 0 when the kernel's type is
   unknown (then the argument's own type decides) */
template <class T>
CUEMU_HOST_FN static inline int check_arg(cuemu_launch_desc *d, int i, const T &v,
                                          unsigned writable, unsigned vol)
{
    if constexpr (std::is_pointer<T>::value && !std::is_function<
                      typename std::remove_pointer<T>::type>::value) {
        if (v && d->nptr < 16) {
            typedef typename std::remove_pointer<T>::type E;
            d->ptr[d->nptr] = (const void *)v;
            d->ptr_written[d->nptr++] =
                (!std::is_const<E>::value && (i >= 32 || ((writable >> i) & 1u)) ? 1 : 0) |
                (std::is_volatile<E>::value || (i < 32 && ((vol >> i) & 1u)) ? 2 : 0);
        }
        return cuemu_check_kernel_pointer(d, i, (const void *)v);
    } else
        return 0;
}

/* Returns 0, or the launch configuration's error (recorded as the last error too). Not
   inlined: in a caller that has the hooks it would have them too (they are added after
   inlining). */
template <class AddrL, class Body, class... A>
__attribute__((noinline)) CUEMU_HOST_FN static int launch(const cfg &c, const char *name,
                                                          const char *file, int line, AddrL addr,
                                                          Body body, A &&...a)
{
    cuemu_launch_desc d;
    std::memset(&d, 0, sizeof d);
    d.kernel = name;
    d.file = file;
    d.line = line;
    unsigned writable = ~0u, vol = 0;
    if constexpr (std::is_invocable<AddrL &, A &...>::value) {
        kfunc kf = addr(a...);
        d.func = kf.addr;
        writable = kf.writable;
        vol = kf.vol;
    }
    d.grid = c.grid;
    d.block = c.block;
    d.dsmem = c.smem;
    d.stream = (void *)c.stream;
    d.cluster = c.cluster;
    if (int e = cuemu_launch_prepare(&d)) return e;
    /* arguments are copied at the launch, as CUDA does; the copy lives until the queued
       launch has run */
    typedef args<typename std::decay<A>::type...> Tup;
    launch_ctx<Body, Tup> *ctx =
        new launch_ctx<Body, Tup>{body, Tup(std::in_place, std::forward<A>(a)...)};
    int bad = 0, i = 0;
    ctx->args.each([&](const auto &v) { bad |= check_arg(&d, i++, v, writable, vol); });
    if (bad) {
        delete ctx;
        cuemu_launch_refuse(&d);
        return 0;   /* as a GPU: the fault comes at the next synchronisation */
    }
    d.body = &run_thread<Body, Tup>;
    d.ctx = ctx;
    d.ctx_free = &free_ctx<Body, Tup>;
    cuemu_launch_enqueue(&d);
    return 0;
}
}  // namespace cuemu

// ---- cudaLaunchKernelEx: a launch with attributes (thread block clusters) ---------------------
typedef struct cudaLaunchAttribute_st {
    enum cudaLaunchAttributeID id;
    char pad[8 - sizeof(enum cudaLaunchAttributeID)];
    cudaLaunchAttributeValue val;
} cudaLaunchAttribute;
/* gridDim and blockDim are the built-in variables' macros: the rewriter renames the members
   where a program names them (config.gridDim -> config.cuemu_gridDim) */
typedef struct cudaLaunchConfig_st {
    dim3 cuemu_gridDim;
    dim3 cuemu_blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned int numAttrs;
} cudaLaunchConfig_t;
namespace cuemu {
/* The config pointer with the call's site: a parameter pack leaves no room for default
   arguments after it, so the site comes with the first argument's conversion. */
struct launch_ex_site {
    const cudaLaunchConfig_t *config;
    const char *file;
    int line;
    launch_ex_site(const cudaLaunchConfig_t *c, const char *f = __builtin_FILE(),
                   int l = __builtin_LINE()) : config(c), file(f), line(l) {}
};
}  // namespace cuemu
/* Runs the kernel like <<<gridDim, blockDim, dynamicSmemBytes, stream>>> with the attributes:
   a cluster dimension sets the launch's clusters; an access policy window, a priority and a
   synchronisation policy are hints accepted here; a cooperative launch is not supported here.
   Errors come back from this call (and cudaGetLastError), as from a <<<>>> launch. */
template <class... ExpTypes, class... ActTypes>
static inline cudaError_t cudaLaunchKernelEx(::cuemu::launch_ex_site site,
                                             void (*kernel)(ExpTypes...), ActTypes &&...args)
{
    const cudaLaunchConfig_t *config = site.config;
    if (!config || !kernel || (config->numAttrs && !config->attrs))
        return cudaErrorInvalidValue;
    ::cuemu::cfg c(config->cuemu_gridDim, config->cuemu_blockDim, config->dynamicSmemBytes,
                   config->stream);
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const cudaLaunchAttribute &a = config->attrs[i];
        if (a.id == cudaLaunchAttributeClusterDimension) {
            c.cluster = uint3{a.val.clusterDim.x, a.val.clusterDim.y, a.val.clusterDim.z};
        } else if (a.id == cudaLaunchAttributeCooperative && a.val.cooperative) {
            return cuemu_not_supported("cudaLaunchKernelEx with cudaLaunchAttributeCooperative "
                                       "(grid-wide synchronisation)", site.file, site.line);
        }
    }
    return (cudaError_t)::cuemu::launch(
        c, "(the kernel given to cudaLaunchKernelEx)", site.file, site.line,
        [&](auto &&...) { return ::cuemu::kaddr(::cuemu::prio<2>{}, kernel); },
        [kernel](auto &&...a) { kernel(a...); }, static_cast<ExpTypes>(std::forward<ActTypes>(args))...);
}

#endif /* CUEMU_HOST_SOURCE */
#endif /* __cplusplus */
#endif /* CUEMU_DEVICE_H */
