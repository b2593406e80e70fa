/* SPDX-License-Identifier: MIT */
/*
 * cuemu_internal.h: the contract between the emulator's two halves.
 *
 *   core    (emu/core/, emu/include/cuemu_device.h, emu/rewrite/): kernel launches, fibers,
 *           scheduling, barriers, warp ops, atomics, fault checks, watchdog.
 *   runtime (emu/runtime/, emu/include/cuda_runtime.h): the CUDA runtime API subset, the
 *           allocation registry, last/sticky errors, device properties, function attributes.
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

/* ---- allocation registry (runtime owns it) ------------------------------------------ */
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
/* For fault reports: the live allocation whose range, or guard zone around it, holds p.
   *offset = p - base (negative before the start, >= size past the end). 1 if found. */
int cuemu_alloc_nearest(const void *p, cuemu_alloc_info *out, long long *offset);
/* 1 if p was freed earlier (use after free); fills *out with the freed block's info. */
int cuemu_alloc_was_freed(const void *p, cuemu_alloc_info *out);

/* ---- errors (runtime owns the state; both halves set it) ----------------------------- */
/* Records e as the last error (what cudaGetLastError returns and clears) and returns e.
   cudaSuccess is never recorded. `int` keeps this header free of cuda_runtime.h. */
int  cuemu_set_last_error(int e);
/* A fault inside a kernel: like a GPU's illegal address, every later call returns e
   until cudaDeviceReset (cudaGetLastError too, without clearing it). */
void cuemu_set_sticky_error(int e);
int  cuemu_sticky_error(void);
/* Diagnostics: printf-style; appended to a buffer Python can read and printed to stderr,
   one message per line, prefixed "cuemu: ". */
void cuemu_diag(const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Exported for ctypes: the diagnostics recorded since the last call to cuemuClearDiagnostic. */
const char *cuemuLastDiagnostic(void);
void        cuemuClearDiagnostic(void);

/* ---- device limits (runtime owns them; core reads them at launch) -------------------- */
int    cuemu_max_threads_per_block(void);                 /* 1024 */
void   cuemu_max_block_dim(int out[3]);                   /* 1024, 1024, 64 */
void   cuemu_max_grid_dim(int out[3]);                    /* 2^31-1, 65535, 65535 */
size_t cuemu_shared_mem_per_block(void);                  /* 48 KiB default */
size_t cuemu_shared_mem_per_block_optin(void);            /* 227 KiB */
/* The dynamic shared memory a launch of func may use: 48 KiB minus its static shared
   memory by default, raised by cudaFuncSetAttribute(func,
   cudaFuncAttributeMaxDynamicSharedMemorySize, n). */
size_t cuemu_func_max_dynamic_smem(const void *func);

/* ---- the access hooks (emu/core/access.c; see its header comment) --------------------- */
struct cuemu_launch_desc;
void cuemu_access_launch(const struct cuemu_launch_desc *d, void *dyn, size_t dyn_size,
                         const char *dyn_name);
void cuemu_access_dyn_name(const char *name);
void cuemu_access_block(void);
void cuemu_access_barrier(void);
void cuemu_access_warp_sync(unsigned warp);
void cuemu_access_shared_var(void *p, size_t n, const char *name);
void cuemu_access_forget(const void *lo, const void *hi);
int  cuemuNoAccess(void *p, size_t n, void *buf, size_t buf_n, int on);
/* Called for every access a kernel thread makes, once the checks passed (NULL: nobody). */
extern void (*cuemu_access_observer)(const void *addr, unsigned size, int write, void *pc);
/* The core's side: "file:line" of a code address; stop the running launch with err (the
   message is reported as the launch's diagnostic; sticky: until cudaDeviceReset, else the
   launch's own error, returned once by the synchronisation that ran it). */
void cuemu_locate_pc(void *pc, char *out, size_t n);
void cuemu_launch_abort(int err, int sticky, const char *msg) __attribute__((noreturn));
/* The error of a queued launch that failed without a sticky fault (0: none); cleared. */
int  cuemu_take_async_error(void);

/* ---- core hooks the runtime calls ---------------------------------------------------- */
void cuemu_core_reset(void);   /* from cudaDeviceReset: drop per-device core state */

#ifdef __cplusplus
}
#endif
#endif
