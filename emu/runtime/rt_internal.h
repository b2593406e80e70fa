/* SPDX-License-Identifier: MIT */
/*
 * rt_internal.h: what the runtime's own files share. Not seen by student code or the core.
 * The runtime implements the core's needs (cuemu_internal.h) and calls the core only through
 * its public API (cuemu_core.h).
 *
 * Locking: one recursive mutex (rt_lock/rt_unlock) guards every table of the runtime. CUDA
 * lets any host thread call the runtime, and Python may do so from several threads.
 */
#ifndef CUEMU_RT_INTERNAL_H
#define CUEMU_RT_INTERNAL_H

#include <stddef.h>
#include "cuda_runtime.h"
#include "cuemu_internal.h"
#include "cuemu_core.h"

#ifdef __cplusplus
extern "C" {
#endif

void rt_lock(void);
void rt_unlock(void);

/* Every API call that needs the device starts with RT_ENTER: a sticky fault makes every
   such call fail with it, as a GPU's dead context does until cudaDeviceReset. */
cudaError_t rt_err(cudaError_t e);   /* records e (if not success) as last error, returns it */
#define RT_ENTER()                                                   \
    do {                                                             \
        int rt_sticky_ = cuemu_sticky_error();                       \
        if (rt_sticky_) return rt_err((cudaError_t)rt_sticky_);      \
    } while (0)

/* ---- devices (device.c) ------------------------------------------------------------------ */
/* CUEMU_DEVICES=N emulated devices (1..RT_MAX_DEVICES, default 1), read at the first call
   that needs it. Each has its own memory accounting, default streams, pools and peer-access
   state; they share one host, one registry and one queue of work. */
#define RT_MAX_DEVICES 8
int  rt_ndev(void);
/* cudaErrorNoDevice (reported once) when CUEMU_DEVICES is not a count from 1 to 8, else 0:
   cuemu_sticky_error() returns it, so every call that needs a device fails with it. */
int  rt_config_error(void);
int  rt_cur_dev(void);                 /* this host thread's current device */
int  rt_dev_valid(int dev);
int  rt_peer_enabled(int dev, int peer);   /* cudaDeviceEnablePeerAccess(peer) made on dev */
void rt_peers_reset(void);

/* ---- allocations --------------------------------------------------------------------- */
typedef struct rt_block rt_block;
struct rt_pool;
struct rt_block {
    char          *base;        /* what the program sees                                   */
    size_t         size;        /* what it asked for                                       */
    char          *ext;         /* extent: the whole mapping incl. guard pages, or base    */
    size_t         ext_len;
    char          *data;        /* first read-write byte of the mapping (NULL: not ours)   */
    size_t         data_len;
    size_t         accounted;   /* bytes counted against the emulated device memory        */
    size_t         capacity;    /* pool blocks: the largest size this block can hold again */
    cuemu_mem_kind kind;
    const char    *file;
    int            line;
    unsigned long  serial;
    const char    *free_file;   /* the cudaFreeAsync that freed it (a use after free names it) */
    int            free_line;
    unsigned int   flags;       /* cudaHostAlloc / cudaHostRegister flags                  */
    int            slack_reported;
    struct rt_pool *pool;       /* set for cudaMallocAsync blocks                          */
    /* managed memory: the hints, kept per allocation (cudaMemRangeGetAttribute reads them) */
    int            accessed_by;
    unsigned char *rm_pages;    /* managed: read-mostly advice, per page (NULL: none given)   */
    int            pref_type, pref_id, prefetch_type, prefetch_id;
    unsigned char *pages;       /* managed: each page's last prefetch location type (0: none) */
    rt_block      *next_free;   /* pool free list                                          */
    /* queued work on this block (stream.c): pending writers/readers, the page protection
       they put on pinned or managed memory, the latest pending op that touches it, and the
       pending accesses the stream race check compares a new operation with */
    int            pend_w, pend_r, prot, host_race_reported;
    struct rt_op  *pend_op;
    struct rt_acc_ref *acc_list;
    int            nacc_list, cap_acc_list;
    size_t         acc_maxlen;
    /* device memory out of host code's reach (memory.c): open while device work runs;
       dirty: opened since its canaries were last checked; exposed: host code touched it
       (reported once, then left open) */
    int            dev_open, dev_dirty, dev_exposed;
    const char    *free_q_file; /* a cudaFreeAsync of it is queued (not run yet): its call site */
    int            free_q_line, free_queued;
    int            device;      /* the device it was allocated on (current at the call, or
                                   its pool's); pinned memory: the device current then */
    int            peer_reported;   /* a kernel of another device touched it (said once) */
};

size_t    rt_page(void);
size_t    rt_device_total(void);          /* each device's memory (CUEMU_DEVICE_MEMORY) */
size_t    rt_device_used(int dev);
/* Count bytes against device dev's memory; cudaErrorMemoryAllocation if they do not fit. */
cudaError_t rt_account(int dev, size_t bytes);
void      rt_unaccount(int dev, size_t bytes);
size_t    rt_granule_round(size_t bytes);   /* 0 on overflow */

/* Map a guarded block of `bytes` capacity and place `size` bytes of it against the back
   guard page; NULL if the host is out of memory. Not registered, not accounted. */
rt_block *rt_block_map(size_t bytes, size_t size, cuemu_mem_kind kind, const char *file, int line);
/* shared_heap.c (issue 26): mappings from the region shared with a checking process when
   CUEMU_SHARED_HEAP names one. rt_shared_map: PROT_NONE pages, NULL when there is no region
   (mmap instead), MAP_FAILED when it is full; rt_shared_unmap: back to the region, else munmap;
   rt_shared_release: pages given back to the kernel, the range kept PROT_NONE. */
void     *rt_shared_map(size_t len);
int       rt_shared_owns(const void *p);
void      rt_shared_unmap(void *p, size_t len);
void      rt_shared_release(void *p, size_t len);
/* (Re-)place `size` bytes in a mapped block against its back guard page: read-write,
   poisoned, canaries around it, a new serial. Not registered. */
void      rt_block_place(rt_block *b, size_t size, const char *file, int line);
/* Register / unregister a live block (lock held). */
void      rt_registry_add(rt_block *b);
void      rt_registry_remove(rt_block *b);
rt_block *rt_registry_find(const void *p);          /* p in [ext, ext+ext_len) */
/* Record b as freed, for use-after-free reports; give_mapping: the ring takes the mapping
   (made inaccessible now, unmapped when the entry leaves the ring) and frees b. */
void      rt_freed_push(rt_block *b, int give_mapping);
/* Make a block's data inaccessible (pool blocks kept in reserve). */
void      rt_block_protect(rt_block *b, int accessible);
/* Drop a managed block's advice and prefetch records (lock held). */
void      rt_managed_forget(rt_block *b);
/* Check the poisoned bytes between the end of b and its guard page (lock held);
   reports and sets the sticky error once. Returns 1 if damaged. */
int       rt_block_check_slack(rt_block *b, const char *when);
int       rt_check_all_slack(const char *when);
void      rt_memory_reset(void);

/* Device memory (cudaMalloc, cudaMallocPitch, cudaMallocAsync) is PROT_NONE while host code
   runs, as it is out of a CPU's reach on a GPU machine. Emulated device work (kernels, the
   runtime's copies, sets and checks) runs between rt_dev_enter and rt_dev_leave; a block it
   touches faults once and is opened (rt_dev_fault), and the last rt_dev_leave closes every
   opened block again. Host functions (cudaLaunchHostFunc) are host code: rt_dev_suspend
   closes the blocks and returns the depth that rt_dev_resume restores. */
void      rt_dev_enter(void);
void      rt_dev_leave(void);
int       rt_dev_suspend(void);
void      rt_dev_resume(int depth);
/* A fault at addr: 0 if it is not in a closed device block; 1 if it was device work (the
   block is open now: retry); 2 if host code touched it (*out: the block, now left open so the
   access can go on once it is reported). */
int       rt_dev_fault(const void *addr, rt_block **out);
/* Install the runtime's SIGSEGV handler (stream.c) if it is not installed. */
void      rt_segv_install(void);
/* Several devices: closes every block device work opened, so that the next kernel's first
   touch of each block faults and its device's right to that memory is checked. */
void      rt_dev_reclose(void);

/* ---- pools ----------------------------------------------------------------------------- */
/* cudaFree / cudaFreeAsync of a pool block: back into its pool's reserve. */
void      rt_pool_return(rt_block *b);
/* A block sitting freed in some pool's reserve whose extent holds p, or NULL (lock held). */
rt_block *rt_pool_find_free(const void *p);
void      rt_pools_release_to_threshold(void);
void      rt_pools_reset(void);

/* Device dev may reach pool memory (cudaMemPoolSetAccess; the owner always may). */
int       rt_pool_accessible(const struct rt_pool *p, int dev);

/* ---- streams, functions ---------------------------------------------------------------- */
int       rt_stream_valid(cudaStream_t s);
/* The device a stream belongs to (0, cudaStreamLegacy, cudaStreamPerThread: the current one). */
int       rt_stream_device(cudaStream_t s);
/* The device of the kernel running now, and its name and launch site; -1 when none runs. */
int       rt_kernel_running(const char **kernel, const char **file, int *line);
/* Runs the work queued so far on every stream of device dev (cudaDeviceSynchronize). */
void      rt_drain_device(int dev);
/* A queued operation that runs fn(arg) as device work (device memory open), and then
   release(arg) when it is freed; for NCCL's collectives (nccl.c). */
struct rt_op *rt_op_devfn(const char *api, void (*fn)(void *), void *arg, void (*release)(void *),
                          const char *file, int line);
/* The call site cuemu_site recorded for the next operation (file NULL: none), now taken. */
void      rt_site_take(const char **file, int *line);
/* op also waits for dep (which must be queued already); the queue keeps it acyclic. */
void      rt_op_depend(struct rt_op *op, struct rt_op *dep);
/* The latest operation queued on stream, or NULL (for an operation that must wait for it). */
struct rt_op *rt_stream_last(cudaStream_t s);
void      rt_streams_reset(void);
void      rt_funcs_reset(void);
void      rt_errors_reset(void);

/* What every synchronising call does: verify allocations, let pools shrink to threshold. */
cudaError_t rt_sync_point(const char *what);
/* The error of a queued launch that failed without a sticky fault (0: none); cleared. */
int       cuemu_take_async_error(void);
/* The device's sharedMemPerBlock (48 KiB): the default limit of cuemu_func_max_dynamic_smem. */
size_t    cuemu_shared_mem_per_block(void);

/* ---- the queue of asynchronous work (stream.c) ------------------------------------------- */
enum rt_op_kind { RT_OP_KERNEL = 1, RT_OP_COPY, RT_OP_SET, RT_OP_EVENT, RT_OP_HOSTFN,
                  RT_OP_ALLOC, RT_OP_FREE, RT_OP_WAIT,
                  RT_LOG_PREFETCH = 9 /* logged only: a prefetch runs at the call (a hint) */,
                  RT_LOG_ADVICE = 10, RT_LOG_SYNC = 11,
                  RT_OP_DEVFN = 12 /* runtime code run as device work (NCCL collectives) */,
                  RT_LOG_DISCARD = 13, RT_LOG_BATCH = 14 /* logged only (batch.c) */,
                  RT_LOG_L2_RESET = 15 /* cudaCtxResetPersistingL2Cache (extras.c) */ };
enum { RT_SYNC_STREAM = 1, RT_SYNC_EVENT = 2, RT_SYNC_DEVICE = 3 };
/* Note in the stream log (cuemuStreamLog) a call that is not queued, with its stream and
   detail (cuemuStreamLogDetail). */
void rt_stream_log_note(cudaStream_t stream, int kind, int detail);
typedef struct rt_op rt_op;
struct rt_acc_ref { rt_op *op; int idx; };
/* A new operation for `api`, carrying the call site cuemu_site() recorded (if any). */
rt_op      *rt_op_new(int kind, const char *api);
/* A copy or set: rows of width bytes, pitches apart (height 1 for a linear one); src NULL
   for a set (value). dst_dev / src_dev: the pointer lies in an allocation (re-checked when
   the operation runs, so a cudaFreeAsync queued before it is caught). */
void        rt_op_copy(rt_op *op, void *dst, size_t dpitch, const void *src, size_t spitch,
                       size_t width, size_t height, int value, int dst_dev, int src_dev);
/* Takes a copy of the source now (a pageable source may be reused when the call returns). */
int         rt_op_stage(rt_op *op);
void        rt_op_free_ptr(rt_op *op, void *p);
/* An operation that will not be submitted after all. */
void        rt_op_discard(rt_op *op);
/* The call site op carries (file NULL when none was recorded). */
void        rt_op_site(const rt_op *op, const char **file, int *line);
/* Records that op reads (write 0) or writes [p, p+len) for the race check and the page
   protection of pinned and managed memory; p outside every allocation is ignored. */
void        rt_op_access(rt_op *op, const void *p, size_t len, int write);
/* Queues op on stream (a valid handle); run_now: the call blocks until op has run (with
   everything it depends on). Returns the error the caller should return. */
cudaError_t rt_submit(rt_op *op, cudaStream_t stream, int run_now);
/* Runs the work queued so far on stream (what a stream synchronisation would wait for). */
void        rt_drain_stream(cudaStream_t stream);
/* Runs every queued operation (cudaDeviceSynchronize, and calls that synchronise). */
void        rt_drain_all(void);
void        rt_queue_reset(void);
/* Stream-ordered reuse: runs the work up to the latest cudaFreeAsync queued on stream of a
   block of pool that can hold size bytes. 1 if there was one. */
int         rt_reclaim_frees(cudaStream_t stream, const struct rt_pool *pool, size_t size);
/* Forget every block's pending accesses (nothing is queued any more). */
void        rt_registry_clear_accesses(void);
int         rt_block_protected(const rt_block *b);
/* Frees a device allocation now (cudaFree's work, without its synchronisation). */
cudaError_t rt_free_device_now(void *devPtr, const char *api);
void rt_free_site(const char *file, int line);   /* where the next free was called */

/* Memory ranges for copies and sets. */
enum rt_loc { RT_LOC_HOST = 0, RT_LOC_DEVICE, RT_LOC_MANAGED, RT_LOC_PINNED };
/* Classify [p, p+count) for `api`; cudaErrorInvalidValue (with a diagnostic) when the range
   overruns an allocation, lies in a guard zone or in freed memory. */
cudaError_t rt_classify(const void *p, size_t count, const char *api, const char *role,
                        enum rt_loc *loc);

#ifdef __cplusplus
}
#endif
#endif
