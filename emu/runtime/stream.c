/* SPDX-License-Identifier: MIT */
/*
 * stream.c: streams, events and per-function attributes.
 *
 * All work runs at the moment it is issued, so every stream is always idle: a query says
 * cudaSuccess, a synchronisation has nothing to wait for (it still checks allocations and
 * lets pools shrink, as a GPU's synchronisation does). An event's timestamp is the host's
 * monotonic clock when cudaEventRecord runs, so elapsed times measure the emulator, not a GPU.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L    /* clock_gettime under -std=c11 */
#endif
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

#define STREAM_MAGIC 0x7374726du
#define EVENT_MAGIC  0x65766e74u

struct CUstream_st {
    unsigned magic;
    unsigned flags;
    int priority;
    struct CUstream_st *next;
};

struct CUevent_st {
    unsigned magic;
    unsigned flags;
    int recorded;
    struct timespec when;
    struct CUevent_st *next;
};

static struct CUstream_st *streams;
static struct CUevent_st *events;

/* ---- streams ---------------------------------------------------------------------------- */
static int stream_listed(cudaStream_t s)
{
    for (struct CUstream_st *p = streams; p; p = p->next)
        if (p == s) return 1;
    return 0;
}

int rt_stream_valid(cudaStream_t s)
{
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return 1;
    rt_lock();
    int ok = stream_listed(s);
    rt_unlock();
    return ok;
}

cudaError_t (cudaStreamCreateWithPriority)(cudaStream_t *pStream, unsigned int flags, int priority)
{
    RT_ENTER();
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return rt_err(cudaErrorInvalidValue);
    struct CUstream_st *s = (struct CUstream_st *)calloc(1, sizeof *s);
    if (!s) return rt_err(cudaErrorMemoryAllocation);
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    /* CUDA clamps a priority outside [greatest, least] = [-5, 0] instead of failing. */
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    rt_lock();
    s->next = streams;
    streams = s;
    rt_unlock();
    *pStream = s;
    return cudaSuccess;
}

cudaError_t (cudaStreamCreateWithFlags)(cudaStream_t *pStream, unsigned int flags)
{
    return (cudaStreamCreateWithPriority)(pStream, flags, 0);
}

cudaError_t (cudaStreamCreate)(cudaStream_t *pStream)
{
    return (cudaStreamCreateWithPriority)(pStream, cudaStreamDefault, 0);
}

cudaError_t (cudaStreamDestroy)(cudaStream_t stream)
{
    int sticky = cuemu_sticky_error();
    cudaError_t e = cudaErrorInvalidResourceHandle;
    rt_lock();
    for (struct CUstream_st **l = &streams; *l; l = &(*l)->next)
        if (*l == stream) {
            *l = stream->next;
            stream->magic = 0;
            free(stream);
            e = cudaSuccess;
            break;
        }
    rt_unlock();
    return sticky ? rt_err((cudaError_t)sticky) : rt_err(e);
}

cudaError_t (cudaStreamSynchronize)(cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    return rt_sync_point("cudaStreamSynchronize");
}

cudaError_t (cudaStreamQuery)(cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

cudaError_t (cudaStreamGetFlags)(cudaStream_t hStream, unsigned int *flags)
{
    RT_ENTER();
    if (!flags) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    *flags = (hStream == 0 || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread)
                 ? cudaStreamDefault : hStream->flags;
    return cudaSuccess;
}

cudaError_t (cudaStreamGetPriority)(cudaStream_t hStream, int *priority)
{
    RT_ENTER();
    if (!priority) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    *priority = (hStream == 0 || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread)
                    ? 0 : hStream->priority;
    return cudaSuccess;
}

/* ---- events ----------------------------------------------------------------------------- */
static int event_valid(cudaEvent_t e)
{
    if (!e) return 0;
    rt_lock();
    int ok = 0;
    for (struct CUevent_st *p = events; p; p = p->next)
        if (p == e) { ok = 1; break; }
    rt_unlock();
    return ok;
}

cudaError_t (cudaStreamWaitEvent)(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_ENTER();
    if (flags & ~(unsigned)cudaEventWaitExternal) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(stream) || !event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

cudaError_t (cudaEventCreateWithFlags)(cudaEvent_t *event, unsigned int flags)
{
    RT_ENTER();
    if (!event) return rt_err(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return rt_err(cudaErrorInvalidValue);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return rt_err(cudaErrorInvalidValue);
    struct CUevent_st *e = (struct CUevent_st *)calloc(1, sizeof *e);
    if (!e) return rt_err(cudaErrorMemoryAllocation);
    e->magic = EVENT_MAGIC;
    e->flags = flags;
    rt_lock();
    e->next = events;
    events = e;
    rt_unlock();
    *event = e;
    return cudaSuccess;
}

cudaError_t (cudaEventCreate)(cudaEvent_t *event) { return (cudaEventCreateWithFlags)(event, 0); }

cudaError_t (cudaEventRecord)(cudaEvent_t event, cudaStream_t stream)
{
    RT_ENTER();
    if (!event_valid(event) || !rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    clock_gettime(CLOCK_MONOTONIC, &event->when);
    event->recorded = 1;
    return cudaSuccess;
}

cudaError_t (cudaEventSynchronize)(cudaEvent_t event)
{
    RT_ENTER();
    if (!event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    return rt_sync_point("cudaEventSynchronize");
}

cudaError_t (cudaEventQuery)(cudaEvent_t event)
{
    RT_ENTER();
    if (!event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

cudaError_t (cudaEventElapsedTime)(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RT_ENTER();
    if (!ms) return rt_err(cudaErrorInvalidValue);
    if (!event_valid(start) || !event_valid(end)) return rt_err(cudaErrorInvalidResourceHandle);
    /* What CUDA answers for an event made without timing or never recorded. */
    if ((start->flags | end->flags) & cudaEventDisableTiming) return rt_err(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return rt_err(cudaErrorInvalidResourceHandle);
    double d = (double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
               (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6;
    *ms = (float)d;
    return cudaSuccess;
}

cudaError_t (cudaEventDestroy)(cudaEvent_t event)
{
    int sticky = cuemu_sticky_error();
    cudaError_t e = cudaErrorInvalidResourceHandle;
    rt_lock();
    for (struct CUevent_st **l = &events; *l; l = &(*l)->next)
        if (*l == event) {
            *l = event->next;
            event->magic = 0;
            free(event);
            e = cudaSuccess;
            break;
        }
    rt_unlock();
    return sticky ? rt_err((cudaError_t)sticky) : rt_err(e);
}

void rt_streams_reset(void)
{
    rt_lock();
    while (streams) {
        struct CUstream_st *s = streams;
        streams = s->next;
        free(s);
    }
    while (events) {
        struct CUevent_st *e = events;
        events = e->next;
        free(e);
    }
    rt_unlock();
}

/* ---- per-function attributes ------------------------------------------------------------- */
typedef struct func_attr {
    const void *func;
    int max_dynamic_smem;
    int carveout;
    struct func_attr *next;
} func_attr;

static func_attr *funcs;

static func_attr *func_find(const void *func, int create)
{
    for (func_attr *f = funcs; f; f = f->next)
        if (f->func == func) return f;
    if (!create) return NULL;
    func_attr *f = (func_attr *)calloc(1, sizeof *f);
    if (!f) return NULL;
    f->func = func;
    f->max_dynamic_smem = (int)cuemu_shared_mem_per_block();
    f->carveout = cudaSharedmemCarveoutDefault;
    f->next = funcs;
    funcs = f;
    return f;
}

size_t cuemu_func_max_dynamic_smem(const void *func)
{
    rt_lock();
    func_attr *f = func_find(func, 0);
    size_t v = f ? (size_t)f->max_dynamic_smem : cuemu_shared_mem_per_block();
    rt_unlock();
    return v;
}

cudaError_t (cudaFuncSetAttribute)(const void *func, enum cudaFuncAttribute attr, int value)
{
    RT_ENTER();
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    cudaError_t e = cudaSuccess;
    rt_lock();
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        /* The opt-in ceiling: 227 KiB per block on an H200. */
        if (value < 0 || (size_t)value > cuemu_shared_mem_per_block_optin()) e = cudaErrorInvalidValue;
        else {
            func_attr *f = func_find(func, 1);
            if (f) f->max_dynamic_smem = value; else e = cudaErrorMemoryAllocation;
        }
        break;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        if (value < -1 || value > 100) e = cudaErrorInvalidValue;
        else {
            func_attr *f = func_find(func, 1);
            if (f) f->carveout = value; else e = cudaErrorMemoryAllocation;
        }
        break;
    case cudaFuncAttributeClusterDimMustBeSet:
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
        break;      /* accepted; clusters are not emulated */
    default:
        e = cudaErrorInvalidValue;
        break;
    }
    rt_unlock();
    return rt_err(e);
}

/* What a CPU cannot know (registers, static shared memory, local memory) reads as 0. */
cudaError_t (cudaFuncGetAttributes)(struct cudaFuncAttributes *attr, const void *func)
{
    RT_ENTER();
    if (!attr) return rt_err(cudaErrorInvalidValue);
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    rt_lock();
    func_attr *f = func_find(func, 0);
    attr->maxDynamicSharedSizeBytes = f ? f->max_dynamic_smem : (int)cuemu_shared_mem_per_block();
    attr->preferredShmemCarveout = f ? f->carveout : cudaSharedmemCarveoutDefault;
    rt_unlock();
    attr->maxThreadsPerBlock = cuemu_max_threads_per_block();
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}

cudaError_t (cudaFuncSetCacheConfig)(const void *func, enum cudaFuncCache cacheConfig)
{
    RT_ENTER();
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    if ((unsigned)cacheConfig > cudaFuncCachePreferEqual) return rt_err(cudaErrorInvalidValue);
    return cudaSuccess;
}

void rt_funcs_reset(void)
{
    rt_lock();
    while (funcs) {
        func_attr *f = funcs;
        funcs = f->next;
        free(f);
    }
    rt_unlock();
}
