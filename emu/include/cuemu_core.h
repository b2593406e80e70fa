/* SPDX-License-Identifier: MIT */
/*
 * cuemu_core.h: the kernel-running core's public API (emu/core/, in C): what the device header
 * (C++, cuemu_device.h) calls from inside kernels and launches, and the few entry points the
 * runtime calls (running a queued launch, a device reset, freed memory, source lines). The
 * core asks the runtime for what it needs through cuemu_internal.h; the runtime uses nothing
 * of the core but this header.
 *
 * Threads of a block are fibers on one host thread; the blocks of a launch run one after
 * another on the launching thread, or spread over several host threads (CUEMU_THREADS), so
 * "the current thread" is per host thread (cuemu_w).
 * Hidden visibility: each chapter library links its own copy of the core, and the globals
 * are then reached without a GOT indirection (threadIdx is read in every kernel line).
 */
#ifndef CUEMU_CORE_H
#define CUEMU_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUEMU_HIDDEN __attribute__((visibility("hidden")))

/* CUDA's uint3: a plain aggregate of three unsigned ints (threadIdx, blockIdx are this). */
struct uint3 { unsigned int x, y, z; };
#ifndef __cplusplus
typedef struct uint3 uint3;
#endif

/* The part of an emulated thread the device header reads; the core keeps the rest. */
typedef struct cuemu_thread_pub {
    struct uint3 idx;          /* threadIdx                                  */
    unsigned int linear;       /* x + y*bx + z*bx*by                         */
    unsigned int lane;         /* linear % 32                                */
    unsigned int warp;         /* linear / 32                                */
    int pos;                   /* where the block's thread order runs it (the core's) */
} cuemu_thread_pub;

/* What kernel code reads of the host thread it runs on. A launch may spread its blocks over
   several host threads (CUEMU_THREADS), each running its blocks' threads as fibers, so this is
   per host thread: one thread-local pointer, to the worker's own record while it runs a launch
   and to an idle record (cur NULL) otherwise. Not initial-exec: a module with any initial-exec
   variable gets its whole TLS block (its thread_local __shared__ arrays too) from the few
   hundred bytes of static TLS a dlopened library can have ("cannot allocate memory in static
   TLS block"). Hidden, it is local-dynamic: one __tls_get_addr per function that reads it. */
struct cuemu_tls {
    cuemu_thread_pub *cur;     /* NULL outside a kernel */
    /* threadIdx: cur->idx, copied by the core whenever cur changes. Read as a field rather
       than through cur, it stays in a register between calls, with no alignment check of the
       pointer and, in the clang build, no load hook for it. */
    struct uint3 tidx;
    struct uint3 block_idx, block_dim, grid_dim;
    int atomic_depth;          /* > 0 while an atomic runs: its accesses are not races */
    int mt;                    /* 1: this launch runs on several host threads (real atomics) */
    struct uint3 cluster_dim;  /* blocks per thread block cluster (1,1,1: none) */
};
extern CUEMU_HIDDEN __thread struct cuemu_tls *cuemu_w;
/* cuemu_w's value, read by an instruction of its own: in the clang build a plain read would
   be an 8-byte load with a load hook and an alignment check on the pointer, in every line that
   reads threadIdx. The "m" operand keeps it an ordinary read of that memory (again after a
   call, never from a register kept across one). */
static inline __attribute__((always_inline)) struct cuemu_tls *cuemu_w_now(void)
{
    struct cuemu_tls *p;
#if defined(__x86_64__)
    __asm__("movq %1, %0" : "=r"(p) : "m"(cuemu_w));
#elif defined(__aarch64__)
    __asm__("ldr %0, %1" : "=r"(p) : "m"(cuemu_w));
#else
    p = cuemu_w;
#endif
    return p;
}
/* One int field of it, read the same way (the atomics' cuemu_w->mt). */
static inline __attribute__((always_inline)) int cuemu_w_int(size_t offset)
{
    int v;
    const int *a = (const int *)(const void *)((const char *)cuemu_w_now() + offset);
#if defined(__x86_64__)
    __asm__("movl %1, %0" : "=r"(v) : "m"(*a));
#elif defined(__aarch64__)
    __asm__("ldr %w0, %1" : "=r"(v) : "m"(*a));
#else
    v = *a;
#endif
    return v;
}
#define cuemu_cur          (cuemu_w_now()->cur)
#define cuemu_tidx         (cuemu_w_now()->tidx)
#define cuemu_block_idx    (cuemu_w_now()->block_idx)
#define cuemu_block_dim    (cuemu_w_now()->block_dim)
#define cuemu_grid_dim     (cuemu_w_now()->grid_dim)
#define cuemu_atomic_depth (cuemu_w_now()->atomic_depth)

/* One launch, as the launch template hands it over. */
struct cuemu_launch_desc {
    const char *kernel;        /* the kernel expression as written at the launch */
    const char *file;          /* launch site */
    int         line;
    const void *func;          /* kernel address, or NULL when a deduced template hides it */
    struct uint3 grid, block;
    size_t      dsmem;         /* dynamic shared memory bytes */
    void       *stream;
    void      (*body)(void *ctx);   /* runs one thread's kernel body */
    void       *ctx;
    void      (*ctx_free)(void *ctx);   /* releases ctx once the queued launch has run */
    /* the kernel's pointer arguments, for the stream race check: ptr_written bit 0, the
       pointee is not const (the kernel may write it); bit 1, it is volatile (the kernel
       expects the host to touch it while it runs) */
    int         nptr;
    const void *ptr[16];
    unsigned char ptr_written[16];
    /* thread block cluster: set by cudaLaunchKernelEx's cluster attribute, else {0,0,0}, and
       then by cuemu_launch_prepare from the kernel's __cluster_dims__ (or 1,1,1) */
    struct uint3 cluster;
};
typedef struct cuemu_launch_desc cuemu_launch_desc;

/* Sticky error and launch-configuration checks; 0 = go ahead, else the error (recorded).
   Resolves d->cluster (the kernel's __cluster_dims__ when the launch gave none). */
int  cuemu_launch_prepare(cuemu_launch_desc *d);
/* 0 when p (argument `index` of the kernel) may be passed to a kernel; else reported. */
int  cuemu_check_kernel_pointer(const cuemu_launch_desc *d, int index, const void *p);
/* Records the host-pointer error once all arguments were checked. */
void cuemu_launch_refuse(const cuemu_launch_desc *d);
/* Hands the checked launch to the runtime's queue for d->stream (cuemu_stream_enqueue), which
   runs it later with cuemu_launch_run and then calls d->ctx_free(d->ctx). */
void cuemu_launch_enqueue(const cuemu_launch_desc *d);

/* ---- entry points for the runtime ------------------------------------------------------ */
/* Runs every block; returns 0 or the error that stopped it (already recorded). */
int  cuemu_launch_run(const cuemu_launch_desc *d);
/* From cudaDeviceReset: drop the core's per-device state. */
void cuemu_core_reset(void);
/* The runtime frees [lo, hi): the core forgets what it keeps about those bytes (the
   harness's no-access zones inside them). */
void cuemu_access_forget(const void *lo, const void *hi);
/* "file:line" of the code at return address pc (addr2line on the -g build), for reports. */
void cuemu_locate_pc(void *pc, char *out, size_t n);
/* A signal's interrupted instruction, on x86-64 and aarch64 alike (emu/core/fault_arch.c),
   uc the handler's third argument: its address, the stack pointer, 1 write / 0 read / -1
   unknown for a memory fault; 1 if the instruction at pc is an atomic read-modify-write. */
void *cuemu_sig_pc(const void *uc);
void *cuemu_sig_sp(const void *uc);
int   cuemu_sig_write(const void *uc);
int   cuemu_insn_atomic(const void *pc);
/* One instruction, then a SIGTRAP: cuemu_step_arm (0 when it cannot) before returning from
   the fault's handler; in the SIGTRAP handler, cuemu_step_done is 1 when it ends such a step
   (the thread then goes on after the instruction). One step at a time per thread. */
int   cuemu_step_arm(void *uc);
int   cuemu_step_done(void *uc);
/* Exported for ctypes: bytes [p, p+n) of the buffer [buf, buf+buf_n) that no kernel may touch
   (on = 1) or may again (on = 0): the harness's guard zones. 0, or -1 when the table is full. */
int  cuemuNoAccess(void *p, size_t n, void *buf, size_t buf_n, int on);
/* Tests only (ctypes): the next launch runs only the blocks whose linear index is in
   [first, first + count), with blockIdx and gridDim as in the whole grid (chapter 01 runs the
   last blocks of a 2^31-thread grid, where an int index overflows, without the rest). */
void cuemuLaunchWindow(unsigned long long first, unsigned long long count);

/* ---- thread block clusters (sm_90) ------------------------------------------------------ */
/* A kernel's __cluster_dims__(x, y, z), registered when the program loads (the rewriter adds
   the call after the kernel's definition). */
void cuemu_cluster_dims_register(const void *func, unsigned x, unsigned y, unsigned z);
/* cudaFuncSetAttribute(func, cudaFuncAttributeNonPortableClusterSizeAllowed, on): clusters of
   up to 16 blocks instead of the portable 8 (from the runtime). */
void cuemu_cluster_nonportable(const void *func, int on);

/* ---- device-side operations (called only from inside a kernel) ------------------------ */
/* cluster_group::sync(): a barrier of every thread of every block of the cluster. */
void  cuemu_cluster_sync(const char *file, int line);
/* cluster_group::map_shared_rank(p, rank): the same shared variable in block `rank`. */
void *cuemu_cluster_map(const void *p, unsigned rank, const char *file, int line);
/* cluster_group::query_shared_rank(p): the rank whose shared memory holds p (-1: none). */
int   cuemu_cluster_query(const void *p);
/* A thread's kernel body returned: 1 if the next thread of the block is now current and its
   body may run right away, on the same stack (nothing in the block has waited yet); 0 if the
   caller must return to the core instead. */
CUEMU_HIDDEN int cuemu_thread_next(void);
/* 1 when an atomic on p needs no compare-and-swap although the launch runs on several host
   threads: p lies in a shared region of this host thread's (each has its own copy of a block's
   shared memory, and nothing else runs on it during the operation). Only the regions it
   touched last are looked at: a 0 costs a compare-and-swap, never a wrong result. */
CUEMU_HIDDEN int cuemu_atomic_private(const void *p);
void cuemu_syncthreads(const char *file, int line);
/* op: 0 count, 1 and, 2 or */
int  cuemu_syncthreads_op(int op, int pred, const char *file, int line);

/* The barrier split (cuemu_split.h): a kernel whose body calls __syncthreads directly runs as a
   coroutine per thread, and the core runs the code between two barriers as a loop over the
   block's threads, with no stack switch. cuemu_co_alloc: memory for this block's threads'
   coroutine frames (freed all at once when the next block starts). cuemu_co_wait: the running
   thread's coroutine (frame) waits at the barrier at file:line, with its predicate (pred) for
   __syncthreads_count/and/or. cuemu_co_result: after it, what those return (op: 0 count,
   1 and, 2 or). cuemu_co_active: 1 while split code runs, when nothing may switch stacks (a
   wait the split did not see is refused). */
CUEMU_HIDDEN void *cuemu_co_alloc(size_t n);
CUEMU_HIDDEN void cuemu_co_wait(void *frame, int pred, const char *file, int line);
int   cuemu_co_result(int op);
CUEMU_HIDDEN void cuemu_co_active(int on);
/* A split helper (a device function of the kernel's file that waits; cuemu_split.h): whether
   it runs in split code (1) or on a fiber (0: its barriers are the fibers'), and its frame's
   memory, taken when it is called and given back when its call ended. */
CUEMU_HIDDEN int cuemu_co_is_active(void);
CUEMU_HIDDEN void *cuemu_co_sub_alloc(size_t n);
CUEMU_HIDDEN void cuemu_co_sub_free(void *p, size_t n);
/* A thread-loop kernel (cuemu_split.h's CUEMU_TL_*): its block runs in the first thread's call
   (cuemu_tl_begin: the block's size, 0 for the other calls), each stretch between two barriers
   as a loop over the threads in the block's order (cuemu_tl_thread: position p runs next);
   cuemu_tl_exit: that thread returned; cuemu_tl_sync: the barrier (1: the block stops);
   cuemu_tl_end: the block is over. */
CUEMU_HIDDEN int cuemu_tl_begin(void);
CUEMU_HIDDEN void cuemu_tl_thread(int p);
void cuemu_tl_exit(int p);
int  cuemu_tl_sync(const char *file, int line, int exited);
void cuemu_tl_end(void);

enum cuemu_warp_kind {
    CUEMU_W_SYNC = 0, CUEMU_W_SHFL, CUEMU_W_UP, CUEMU_W_DOWN, CUEMU_W_XOR,
    CUEMU_W_BALLOT, CUEMU_W_ANY, CUEMU_W_ALL
};
/* A warp-level rendezvous of the lanes in mask; returns this lane's result (raw bits). */
uint64_t cuemu_warp_op(int kind, unsigned mask, uint64_t value, int arg, int width,
                       const char *file, int line);
unsigned cuemu_activemask(void);
/* Lets the next runnable thread of the block run (from __nanosleep). */
void     cuemu_yield(void);

/* A static __shared__ variable, registered the first time a thread passes its declaration:
   poisoned now and before every later block. */
void cuemu_shared_register(void *p, size_t n);
void cuemu_shared_register_named(void *p, size_t n, const char *name);

/* Base of this launch's dynamic shared memory; name is the extern __shared__ variable. */
void *cuemu_dyn_smem(const char *name);

/* Changes at every block the core starts (never 0): per-thread state a device header keeps
   (the pipeline primitives' pending copies) is stale when it was made under another value. */
unsigned cuemu_block_gen(void);

/* printf in a kernel (the device header's printf): the C library's, or, while a launch runs on
   several host threads, kept with the block and printed in block order when the launch ends. */
int cuemu_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reports a device-side problem that is not a fault (e.g. a kernel launched from a kernel). */
void cuemu_device_error(int err, const char *file, int line, const char *what);

/* The context switch the benchmark times: ns per switch, measured over n round trips. */
double cuemu_bench_switch_ns(long n);

#ifdef __cplusplus
}
#endif
#endif
