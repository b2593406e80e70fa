/* SPDX-License-Identifier: MIT */
/*
 * cuemu_internal.h: the contract between the emulator's two halves, seen from the core: the
 * services the core asks of the runtime, and nothing else.
 *
 *   core    (emu/core/, emu/include/cuemu_core.h, cuemu_device.h, emu/rewrite/): kernel
 *           launches, fibers, scheduling, barriers, warp ops, atomics, fault checks and
 *           reports, the race detector, the memory-access profile, the watchdog.
 *   runtime (emu/runtime/, emu/include/cuda_runtime.h): the CUDA runtime API subset, the
 *           allocation registry, streams and their queues, last/sticky errors, diagnostics,
 *           device properties, function attributes.
 *
 * The layering, enforced by the tests in emu/tests/alone/ (run by `make test`):
 *   - the core's files call the runtime only through the functions declared here, and include
 *     no runtime header; the tests link the core's objects with a stub runtime that implements
 *     just this header, and run kernels through it;
 *   - the runtime implements this header and calls the core only through cuemu_core.h.
 * These are plain functions, resolved at link time (no table of callbacks): the core calls them
 * per launch or per report, and the profile's allocation lookup (behind a cache) per access.
 *
 * Plain C; usable from C and C++. Nothing here is visible to student code by design
 * (the cuemu_ prefix is reserved for the emulator).
 */
#ifndef CUEMU_INTERNAL_H
#define CUEMU_INTERNAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cuemu_launch_desc;

/* ---- allocations: for fault reports and the kernel-argument check ------------------------- */
typedef enum {
    CUEMU_MEM_DEVICE = 1,        /* cudaMalloc, cudaMallocPitch, cudaMallocAsync     */
    CUEMU_MEM_MANAGED,           /* cudaMallocManaged                                 */
    CUEMU_MEM_HOST_PINNED,       /* cudaMallocHost, cudaHostAlloc (device-accessible) */
    CUEMU_MEM_HOST_REGISTERED,   /* cudaHostRegister (device-accessible)              */
    CUEMU_MEM_SYMBOL             /* a __device__/__constant__ variable, if registered */
} cuemu_mem_kind;

typedef struct {
    void          *base;         /* first byte the program may use                   */
    size_t         size;         /* bytes the program asked for                      */
    cuemu_mem_kind kind;
    const char    *file;         /* call site of the allocating call, or NULL        */
    int            line;
    unsigned long  serial;       /* 1, 2, 3... in allocation order                    */
    const char    *free_file;    /* call site of the cudaFreeAsync that freed it, or NULL */
    int            free_line;
} cuemu_alloc_info;

/* 1 and *out filled when p lies in [base, base+size) of a live allocation, else 0. */
int cuemu_alloc_lookup(const void *p, cuemu_alloc_info *out);
/* 1 (and a diagnosis) if p is in a pinned host memory pool the current device may not use. */
int cuemu_pool_denies(const void *p, const char *kernel, const char *file, int line);
/* For fault reports: the live allocation whose range, or guard zone around it, holds p.
   *offset = p - base (negative before the start, >= size past the end). 1 if found. */
int cuemu_alloc_nearest(const void *p, cuemu_alloc_info *out, long long *offset);
/* 1 if p was freed earlier (use after free); fills *out with the freed block's info. */
int cuemu_alloc_was_freed(const void *p, cuemu_alloc_info *out);
/* A kernel faulted at p: 1 if p is in device memory the runtime keeps inaccessible while host
   code runs, now opened (the access is to be retried), else 0 (a real fault). */
int cuemu_device_fault(const void *p);

/* ---- errors and diagnostics (the runtime owns the state; the core reports into it) -------- */
/* Records e as the last error (what cudaGetLastError returns and clears) and returns e.
   cudaSuccess is never recorded. `int` keeps this header free of cuda_runtime.h. */
int  cuemu_set_last_error(int e);
/* A fault inside a kernel: like a GPU's illegal address, every later call returns e
   until cudaDeviceReset (cudaGetLastError too, without clearing it). */
void cuemu_set_sticky_error(int e);
int  cuemu_sticky_error(void);
/* Diagnostics: printf-style; appended to a buffer Python can read (cuemuLastDiagnostic) and
   printed to stderr, one message per line, prefixed "cuemu: ". */
void cuemu_diag(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The device's own message (a failed assert's): printed as it is and kept like a diagnostic. */
void cuemu_diag_device(const char *line);

/* ---- device limits (the runtime's device properties; the core checks launches with them) -- */
int    cuemu_max_threads_per_block(void);                 /* 1024 */
void   cuemu_max_block_dim(int out[3]);                   /* 1024, 1024, 64 */
void   cuemu_max_grid_dim(int out[3]);                    /* 2^31-1, 65535, 65535 */
size_t cuemu_shared_mem_per_block_optin(void);            /* 227 KiB: the dynamic area's size */
/* The dynamic shared memory a launch of func may use: 48 KiB by default, raised by
   cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, n). */
size_t cuemu_func_max_dynamic_smem(const void *func);

/* ---- streams (the runtime owns the queues) -------------------------------------------------- */
/* Queues a checked launch on d->stream (copying *d); the queue later runs it with
   cuemu_launch_run and then calls d->ctx_free(d->ctx). A launch that cannot be queued is
   released (ctx_free) and its error recorded. */
void cuemu_stream_enqueue(const struct cuemu_launch_desc *d);

#ifdef __cplusplus
}
#endif
#endif
