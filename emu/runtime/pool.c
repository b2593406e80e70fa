/* SPDX-License-Identifier: MIT */
/*
 * pool.c: stream-ordered allocation (cudaMallocAsync/cudaFreeAsync) and cudaMemPool.
 *
 * The model, chosen so the statistics move like a GPU's:
 * - a pool reserves memory in blocks of the request rounded up to 2 MiB; the reserve counts
 *   against the emulated device memory (cudaMemGetInfo sees it);
 * - cudaFreeAsync puts the block back into the pool's reserve (UsedMemCurrent drops,
 *   ReservedMemCurrent does not) and makes it inaccessible, so a late access still faults;
 * - the next allocation reuses the smallest reserved block that fits;
 * - at every synchronisation (device, stream, event) each pool releases reserved, unused
 *   blocks until its reserve is at most its release threshold (default 0, as on a GPU), and
 *   cudaMemPoolTrimTo does the same down to the size it is given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define POOL_MAGIC 0x706f6f6cu

typedef struct rt_pool {
    unsigned magic;
    int is_default;
    int destroyed;
    unsigned long long threshold, reserved, reserved_high, used, used_high;
    size_t max_size;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    rt_block *free_list;
    struct rt_pool *next;
    int device;                   /* where its memory lives */
    unsigned access;              /* bit d: device d may use its memory (cudaMemPoolSetAccess) */
    cuemu_mem_kind kind;          /* what it hands out: device memory (0 means it too), pinned
                                     host memory (CUDA 13.0: a host location), managed memory */
} rt_pool;

/* One default pool per device; each device's current pool starts as its default one. */
static rt_pool default_pools[RT_MAX_DEVICES];
static rt_pool *pools;            /* every pool, the default ones included */
static rt_pool *current_pools[RT_MAX_DEVICES];
/* CUDA 13.0's other default pools (cudaMemGetDefaultMemPool): pinned host memory, whose
   blocks count against no device and which no device may use until cudaMemPoolSetAccess says
   so; and managed memory, counted like cudaMallocManaged's, usable by every device. */
static rt_pool host_pool, managed_pool;

static int pool_is_host(const rt_pool *p) { return p->kind == CUEMU_MEM_HOST_PINNED; }

static void pool_defaults(rt_pool *p)
{
    rt_block *keep_list = p->free_list;
    rt_pool *keep_next = p->next;
    memset(p, 0, sizeof *p);
    p->magic = POOL_MAGIC;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    p->free_list = keep_list;
    p->next = keep_next;
}

static void pool_owned_by(rt_pool *p, int dev)
{
    p->device = dev;
    p->access = 1u << dev;
}

/* Default pools are made for the devices there are (in reverse, so the list starts with
   device 0's, the one pool of a single-device run). */
static void pools_init(void)
{
    if (default_pools[0].magic == POOL_MAGIC) return;
    for (int d = rt_ndev() - 1; d >= 0; d--) {
        rt_pool *p = &default_pools[d];
        pool_defaults(p);
        p->is_default = 1;
        pool_owned_by(p, d);
        p->next = pools;
        pools = p;
        current_pools[d] = p;
    }
    pool_defaults(&host_pool);
    host_pool.is_default = 1;
    host_pool.kind = CUEMU_MEM_HOST_PINNED;
    host_pool.device = -1;
    host_pool.next = pools;
    pools = &host_pool;
    pool_defaults(&managed_pool);
    managed_pool.is_default = 1;
    managed_pool.kind = CUEMU_MEM_MANAGED;
    managed_pool.access = ~0u;
    managed_pool.next = pools;
    pools = &managed_pool;
}

int rt_pool_accessible(const struct rt_pool *p, int dev)
{
    return dev >= 0 && dev < RT_MAX_DEVICES && (p->access & (1u << dev));
}

static rt_pool *pool_get(cudaMemPool_t h)
{
    pools_init();
    for (rt_pool *p = pools; p; p = p->next)
        if ((cudaMemPool_t)p == h && !p->destroyed) return p;
    return NULL;
}

static void release_block(rt_pool *p, rt_block *b)
{
    p->reserved -= b->accounted;
    if (!pool_is_host(p)) rt_unaccount(p->device, b->accounted);
    free(b->acc_list);              /* the ring frees b, not what it points to */
    b->acc_list = NULL;
    b->nacc_list = b->cap_acc_list = 0;
    rt_freed_push(b, 1);
}

/* Release unused reserve until the pool holds at most `keep` bytes. */
static void pool_trim(rt_pool *p, unsigned long long keep)
{
    rt_block **link = &p->free_list;
    while (*link && p->reserved > keep) {
        rt_block *b = *link;
        *link = b->next_free;
        release_block(p, b);
    }
}

static void pool_unlink_if_empty(rt_pool *p)
{
    if (!p->destroyed || p->used || p->free_list || p->is_default) return;
    for (rt_pool **l = &pools; *l; l = &(*l)->next)
        if (*l == p) { *l = p->next; break; }
    p->magic = 0;
    free(p);
}

rt_block *rt_pool_find_free(const void *ptr)
{
    const char *c = (const char *)ptr;
    for (rt_pool *p = pools; p; p = p->next)
        for (rt_block *b = p->free_list; b; b = b->next_free)
            if (c >= b->ext && c < b->ext + b->ext_len) return b;
    return NULL;
}

void rt_pool_return(rt_block *b)
{
    rt_lock();
    rt_pool *p = b->pool;
    b->nacc_list = 0;
    b->acc_maxlen = 0;
    rt_registry_remove(b);
    if (b->kind == CUEMU_MEM_MANAGED) rt_managed_forget(b);
    p->used -= b->accounted;
    rt_freed_push(b, 0);
    rt_block_protect(b, 0);
    b->next_free = p->free_list;
    p->free_list = b;
    if (p->destroyed) {
        pool_trim(p, 0);
        pool_unlink_if_empty(p);
    }
    rt_unlock();
}

void rt_pools_release_to_threshold(void)
{
    rt_lock();
    pools_init();
    for (rt_pool *p = pools; p; p = p->next) pool_trim(p, p->threshold);
    rt_unlock();
}

static cudaError_t pool_alloc(rt_pool *p, void **out, size_t size, const char *file, int line,
                              cudaStream_t stream)
{
    if (!out) return cudaErrorInvalidValue;
    if (size == 0) { *out = NULL; return cudaSuccess; }
    size_t acc = rt_granule_round(size);
    if (!acc) return cudaErrorMemoryAllocation;

    rt_block *best = NULL, **best_link = NULL;
    for (rt_block **l = &p->free_list; *l; l = &(*l)->next_free)
        if ((*l)->capacity >= size && (!best || (*l)->capacity < best->capacity)) {
            best = *l;
            best_link = l;
        }
    /* memory freed earlier in the same stream may be reused by a later allocation in it */
    if (!best && rt_reclaim_frees(stream, p, size))
        for (rt_block **l = &p->free_list; *l; l = &(*l)->next_free)
            if ((*l)->capacity >= size && (!best || (*l)->capacity < best->capacity)) {
                best = *l;
                best_link = l;
            }
    if (best) {
        *best_link = best->next_free;
        best->next_free = NULL;
        rt_block_place(best, size, file, line);
        if (!best->base) { release_block(p, best); return cudaErrorMemoryAllocation; }
    } else {
        if (p->max_size && p->reserved + acc > p->max_size) return cudaErrorMemoryAllocation;
        cudaError_t e = pool_is_host(p) ? cudaSuccess : rt_account(p->device, acc);
        if (e != cudaSuccess) {
            /* Out of device memory: what the device's pools keep unused is given back first. */
            for (rt_pool *q = pools; q; q = q->next)
                if (q->device == p->device) pool_trim(q, 0);
            e = rt_account(p->device, acc);
            if (e != cudaSuccess) return e;
        }
        best = rt_block_map(acc, size, p->kind ? p->kind : CUEMU_MEM_DEVICE, file, line);
        if (!best) {
            if (!pool_is_host(p)) rt_unaccount(p->device, acc);
            return cudaErrorMemoryAllocation;
        }
        best->accounted = acc;
        best->pool = p;
        best->device = pool_is_host(p) ? rt_cur_dev() : p->device;   /* pinned: as cudaMallocHost */
        p->reserved += acc;
        if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
    }
    p->used += best->accounted;
    if (p->used > p->used_high) p->used_high = p->used;
    rt_registry_add(best);
    *out = best->base;
    return cudaSuccess;
}

cudaError_t cuemu_mallocFromPoolAsync_at(const char *file, int line, void **ptr, size_t size,
                                         cudaMemPool_t memPool, cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_lock();
    rt_pool *p = pool_get(memPool);
    cudaError_t e = p ? pool_alloc(p, ptr, size, file, line, stream) : cudaErrorInvalidValue;
    rt_unlock();
    if (e == cudaSuccess) e = rt_submit(rt_op_new(RT_OP_ALLOC, "cudaMallocFromPoolAsync"), stream, 0);
    return rt_err(e);
}

cudaError_t cuemu_mallocAsync_at(const char *file, int line, void **devPtr, size_t size,
                                  cudaStream_t hStream)
{
    RT_ENTER();
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_lock();
    pools_init();
    /* the current pool of the stream's device */
    cudaError_t e = pool_alloc(current_pools[rt_stream_device(hStream)], devPtr, size, file, line,
                               hStream);
    rt_unlock();
    if (e == cudaSuccess) e = rt_submit(rt_op_new(RT_OP_ALLOC, "cudaMallocAsync"), hStream, 0);
    return rt_err(e);
}

cudaError_t (cudaMallocAsync)(void **devPtr, size_t size, cudaStream_t hStream)
{
    return cuemu_mallocAsync_at(NULL, 0, devPtr, size, hStream);
}

cudaError_t (cudaMallocFromPoolAsync)(void **ptr, size_t size, cudaMemPool_t memPool,
                                      cudaStream_t stream)
{
    return cuemu_mallocFromPoolAsync_at(NULL, 0, ptr, size, memPool, stream);
}

/* CUDA lets cudaFreeAsync free cudaMalloc memory too (and cudaFree pool memory). The free is
   queued: the memory stays usable by work queued before it in the stream. */
cudaError_t (cudaFreeAsync)(void *devPtr, cudaStream_t hStream)
{
    RT_ENTER();
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (!devPtr) return cudaSuccess;
    rt_lock();
    rt_block *b = rt_registry_find(devPtr);
    int ok = b && b->base == (char *)devPtr &&
             (b->kind == CUEMU_MEM_DEVICE || b->kind == CUEMU_MEM_MANAGED ||
              (b->kind == CUEMU_MEM_HOST_PINNED && b->pool));
    rt_unlock();
    if (!ok) return rt_free_device_now(devPtr, "cudaFreeAsync");   /* reports what it is */
    rt_op *op = rt_op_new(RT_OP_FREE, "cudaFreeAsync");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    rt_op_free_ptr(op, devPtr);
    const char *file;
    int line;
    rt_op_site(op, &file, &line);
    rt_lock();
    if (b->free_queued) {
        /* the second free of a pointer whose first cudaFreeAsync has not run yet: refused at
           this call, so the program's error check names this line, not a later call that
           would otherwise return the error when the queue reaches it */
        char here[320] = "";
        if (file) snprintf(here, sizeof here, " at %s:%d", file, line);
        cuemu_diag("cudaFreeAsync(%p)%s: freed twice: the cudaFreeAsync at %s:%d frees it already "
                   "(%zu bytes allocated at %s:%d)", devPtr, here,
                   b->free_q_file ? b->free_q_file : "(unknown file)", b->free_q_line, b->size,
                   b->file ? b->file : "(unknown file)", b->line);
        rt_unlock();
        rt_op_discard(op);
        return rt_err(cudaErrorInvalidValue);
    }
    b->free_queued = 1;
    b->free_q_file = file;
    b->free_q_line = line;
    rt_op_access(op, devPtr, b->size, 1);
    rt_unlock();
    return rt_err(rt_submit(op, hStream, 0));
}

/* ---- pools ------------------------------------------------------------------------------ */
cudaError_t (cudaDeviceGetDefaultMemPool)(cudaMemPool_t *memPool, int device)
{
    RT_ENTER();
    if (!memPool) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    rt_lock();
    pools_init();
    *memPool = (cudaMemPool_t)&default_pools[device];
    rt_unlock();
    return cudaSuccess;
}

/* CUDA 13.0: the default pool of a location and allocation type. Pinned: a device's own
   (cudaDeviceGetDefaultMemPool's) or the host's; managed: one pool, whatever location is
   named (none, a device, the host), as the emulator keeps no per-location managed pools. */
cudaError_t (cudaMemGetDefaultMemPool)(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                                       enum cudaMemAllocationType type)
{
    RT_ENTER();
    if (!memPool || !location) return rt_err(cudaErrorInvalidValue);
    enum cudaMemLocationType t = location->type;
    rt_pool *p = NULL;
    if (type == cudaMemAllocationTypePinned && t == cudaMemLocationTypeDevice) {
        if (!rt_dev_valid(location->id)) return rt_err(cudaErrorInvalidValue);
        p = &default_pools[location->id];
    } else if (type == cudaMemAllocationTypePinned && t == cudaMemLocationTypeHost) {
        p = &host_pool;
    } else if (type == cudaMemAllocationTypeManaged &&
               (t == cudaMemLocationTypeNone || t == cudaMemLocationTypeHost ||
                (t == cudaMemLocationTypeDevice && rt_dev_valid(location->id)))) {
        p = &managed_pool;
    } else {
        return rt_err(cudaErrorInvalidValue);
    }
    rt_lock();
    pools_init();
    rt_unlock();
    *memPool = (cudaMemPool_t)p;
    return cudaSuccess;
}

/* A kernel argument in a pinned host pool's memory that the launching device was not given
   access to (cudaMemPoolSetAccess): a GPU faults; reported here at the launch. */
int cuemu_pool_denies(const void *ptr, const char *kernel, const char *file, int line)
{
    int denied = 0, dev = rt_cur_dev();
    rt_lock();
    rt_block *b = rt_registry_find(ptr);
    if (b && b->pool && pool_is_host(b->pool) && !rt_pool_accessible(b->pool, dev)) {
        denied = 1;
        cuemu_diag("kernel %s launched at %s:%d on device %d is given %p, memory of a pinned "
                   "host memory pool (the %zu-byte cudaMallocFromPoolAsync at %s:%d) that "
                   "device %d has no access to: a host pool's memory is the host's alone until "
                   "cudaMemPoolSetAccess gives a device read-write access (on a GPU: an illegal "
                   "address)", kernel, file ? file : "(unknown file)", line, dev, ptr, b->size,
                   b->file ? b->file : "(unknown file)", b->line, dev);
    }
    rt_unlock();
    return denied;
}

cudaError_t (cudaDeviceGetMemPool)(cudaMemPool_t *memPool, int device)
{
    RT_ENTER();
    if (!memPool) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    rt_lock();
    pools_init();
    *memPool = (cudaMemPool_t)current_pools[device];
    rt_unlock();
    return cudaSuccess;
}

cudaError_t (cudaDeviceSetMemPool)(int device, cudaMemPool_t memPool)
{
    RT_ENTER();
    if (!rt_dev_valid(device)) return rt_err(cudaErrorInvalidDevice);
    rt_lock();
    rt_pool *p = pool_get(memPool);
    /* a pool serves the device its memory is on */
    int ok = p && p->device == device;
    if (ok) current_pools[device] = p;
    rt_unlock();
    return ok ? cudaSuccess : rt_err(cudaErrorInvalidValue);
}

cudaError_t (cudaMemPoolCreate)(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    RT_ENTER();
    if (!memPool || !poolProps) return rt_err(cudaErrorInvalidValue);
    if (poolProps->allocType != cudaMemAllocationTypePinned) return rt_err(cudaErrorInvalidValue);
    /* CUDA 13.0: a host location makes a pool of pinned host memory (id ignored, no IPC) */
    int host = poolProps->location.type == cudaMemLocationTypeHost;
    if (host && poolProps->handleTypes != cudaMemHandleTypeNone) return rt_err(cudaErrorInvalidValue);
    if (!host && poolProps->location.type != cudaMemLocationTypeDevice)
        return rt_err(cudaErrorInvalidValue);
    /* a device that does not exist: cudaErrorInvalidValue on an H200 (measured 2026-11-30) */
    if (!host && !rt_dev_valid(poolProps->location.id)) return rt_err(cudaErrorInvalidValue);
    if ((unsigned)poolProps->handleTypes & ~(unsigned)cudaMemHandleTypePosixFileDescriptor)
        return rt_err(cudaErrorNotSupported);
    rt_pool *p = (rt_pool *)calloc(1, sizeof *p);
    if (!p) return rt_err(cudaErrorMemoryAllocation);
    pool_defaults(p);
    pool_owned_by(p, host ? 0 : poolProps->location.id);
    if (host) {   /* the host's own: no device may use it before cudaMemPoolSetAccess */
        p->kind = CUEMU_MEM_HOST_PINNED;
        p->device = -1;   /* no device owns it (not even device 0 for cudaMemPoolSetAccess) */
        p->access = 0;
    }
    p->max_size = poolProps->maxSize;
    rt_lock();
    pools_init();
    p->next = pools;
    pools = p;
    rt_unlock();
    *memPool = (cudaMemPool_t)p;
    return cudaSuccess;
}

cudaError_t (cudaMemPoolDestroy)(cudaMemPool_t memPool)
{
    RT_ENTER();
    rt_lock();
    rt_pool *p = pool_get(memPool);
    if (!p || p->is_default) { rt_unlock(); return rt_err(cudaErrorInvalidValue); }
    if (p->device >= 0 && current_pools[p->device] == p)
        current_pools[p->device] = &default_pools[p->device];
    /* Allocations still out are released when they are freed, as CUDA defers it too. */
    p->destroyed = 1;
    pool_trim(p, 0);
    pool_unlink_if_empty(p);
    rt_unlock();
    return cudaSuccess;
}

cudaError_t (cudaMemPoolTrimTo)(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    RT_ENTER();
    rt_lock();
    rt_pool *p = pool_get(memPool);
    if (p) pool_trim(p, minBytesToKeep);
    rt_unlock();
    return p ? cudaSuccess : rt_err(cudaErrorInvalidValue);
}

cudaError_t (cudaMemPoolSetAttribute)(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    rt_lock();
    rt_pool *p = pool_get(memPool);
    if (!p || !value) e = cudaErrorInvalidValue;
    else switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies: p->reuse_follow = *(int *)value != 0; break;
    case cudaMemPoolReuseAllowOpportunistic: p->reuse_opportunistic = *(int *)value != 0; break;
    case cudaMemPoolReuseAllowInternalDependencies: p->reuse_internal = *(int *)value != 0; break;
    case cudaMemPoolAttrReleaseThreshold: p->threshold = *(unsigned long long *)value; break;
    /* High watermarks can only be reset, and a reset starts them again from now. */
    case cudaMemPoolAttrReservedMemHigh:
        if (*(unsigned long long *)value != 0) e = cudaErrorInvalidValue;
        else p->reserved_high = p->reserved;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        if (*(unsigned long long *)value != 0) e = cudaErrorInvalidValue;
        else p->used_high = p->used;
        break;
    default: e = cudaErrorInvalidValue; break;
    }
    rt_unlock();
    return rt_err(e);
}

cudaError_t (cudaMemPoolGetAttribute)(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    RT_ENTER();
    cudaError_t e = cudaSuccess;
    rt_lock();
    rt_pool *p = pool_get(memPool);
    if (!p || !value) e = cudaErrorInvalidValue;
    else switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies: *(int *)value = p->reuse_follow; break;
    case cudaMemPoolReuseAllowOpportunistic: *(int *)value = p->reuse_opportunistic; break;
    case cudaMemPoolReuseAllowInternalDependencies: *(int *)value = p->reuse_internal; break;
    case cudaMemPoolAttrReleaseThreshold: *(unsigned long long *)value = p->threshold; break;
    case cudaMemPoolAttrReservedMemCurrent: *(unsigned long long *)value = p->reserved; break;
    case cudaMemPoolAttrReservedMemHigh: *(unsigned long long *)value = p->reserved_high; break;
    case cudaMemPoolAttrUsedMemCurrent: *(unsigned long long *)value = p->used; break;
    case cudaMemPoolAttrUsedMemHigh: *(unsigned long long *)value = p->used_high; break;
    default: e = cudaErrorInvalidValue; break;
    }
    rt_unlock();
    return rt_err(e);
}

/* The owning device always has read-write access to its pool; another device gets it here
   (read-write, or none again), and not from cudaDeviceEnablePeerAccess. The list is checked
   whole before any of it is applied. */
cudaError_t (cudaMemPoolSetAccess)(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList,
                                   size_t count)
{
    RT_ENTER();
    rt_lock();
    rt_pool *p = pool_get(memPool);
    rt_unlock();
    if (!p || (count && !descList)) return rt_err(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++) {
        int id = descList[i].location.id;
        if (descList[i].location.type != cudaMemLocationTypeDevice) return rt_err(cudaErrorInvalidValue);
        if (!rt_dev_valid(id)) return rt_err(cudaErrorInvalidDevice);
        /* the owner's own access cannot be taken away: an H200 answers cudaErrorInvalidDevice */
        if (id == p->device && descList[i].flags == cudaMemAccessFlagsProtNone)
            return rt_err(cudaErrorInvalidDevice);
        if (descList[i].flags != cudaMemAccessFlagsProtReadWrite &&
            descList[i].flags != cudaMemAccessFlagsProtNone)
            return rt_err(cudaErrorInvalidValue);
    }
    rt_lock();
    for (size_t i = 0; i < count; i++) {
        unsigned bit = 1u << descList[i].location.id;
        if (descList[i].flags == cudaMemAccessFlagsProtReadWrite) p->access |= bit;
        else p->access &= ~bit;
    }
    rt_unlock();
    return cudaSuccess;
}

cudaError_t (cudaMemPoolGetAccess)(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
                                   struct cudaMemLocation *location)
{
    RT_ENTER();
    rt_lock();
    rt_pool *p = pool_get(memPool);
    rt_unlock();
    if (!p || !flags || !location) return rt_err(cudaErrorInvalidValue);
    if (location->type != cudaMemLocationTypeDevice) return rt_err(cudaErrorInvalidValue);
    if (!rt_dev_valid(location->id)) return rt_err(cudaErrorInvalidDevice);
    *flags = rt_pool_accessible(p, location->id) ? cudaMemAccessFlagsProtReadWrite
                                                 : cudaMemAccessFlagsProtNone;
    return cudaSuccess;
}

/* cudaDeviceReset: reserves are dropped (live pool blocks go with the registry). */
void rt_pools_reset(void)
{
    rt_lock();
    pools_init();
    rt_pool *p = pools;
    while (p) {
        rt_pool *next = p->next;
        while (p->free_list) {
            rt_block *b = p->free_list;
            p->free_list = b->next_free;
            release_block(p, b);
        }
        if (!p->is_default) { p->magic = 0; free(p); }
        p = next;
    }
    pools = NULL;
    host_pool.free_list = managed_pool.free_list = NULL;
    host_pool.magic = managed_pool.magic = 0;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        default_pools[d].free_list = NULL;
        default_pools[d].next = NULL;
        default_pools[d].magic = 0;
    }
    pools_init();
    rt_unlock();
}
