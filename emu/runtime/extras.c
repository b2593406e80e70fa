/* SPDX-License-Identifier: MIT */
/*
 * extras.c: the runtime calls of cuemu_runtime_ext.h (stream attributes, cudaStreamAttachMemAsync,
 * the profiler) and the one "not supported here" report. Kept apart from stream.c and memory.c:
 * none of them queues work or changes an allocation.
 */
#include <stdlib.h>
#include <string.h>
#include "rt_internal.h"

/* ---- stream attributes ----------------------------------------------------------------- */
/* The values a program set, per stream, so that a Get returns them as CUDA does. No L2 is
   modelled: an access policy window changes nothing but is checked like CUDA checks it. */
typedef struct attr_rec {
    cudaStream_t stream;
    struct cudaAccessPolicyWindow apw;
    enum cudaSynchronizationPolicy sync;
    struct attr_rec *next;
} attr_rec;
static attr_rec *attrs;

static attr_rec *attr_find(cudaStream_t s, int make)
{
    for (attr_rec *r = attrs; r; r = r->next)
        if (r->stream == s) return r;
    if (!make) return NULL;
    attr_rec *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->stream = s;
    r->sync = cudaSyncPolicyAuto;
    r->next = attrs;
    attrs = r;
    return r;
}

cudaError_t (cudaStreamSetAttribute)(cudaStream_t hStream, enum cudaLaunchAttributeID attr,
                                     const cudaLaunchAttributeValue *value)
{
    RT_ENTER();
    if (!value) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    cudaError_t e = cudaSuccess;
    rt_lock();
    attr_rec *r = attr_find(hStream, 1);
    if (!r) {
        e = cudaErrorMemoryAllocation;
    } else if (attr == cudaLaunchAttributeAccessPolicyWindow) {
        const struct cudaAccessPolicyWindow *w = &value->accessPolicyWindow;
        int max_window = 0;
        cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, 0);
        if (w->hitRatio < 0.0f || w->hitRatio > 1.0f || w->num_bytes > (size_t)max_window ||
            w->missProp == cudaAccessPropertyPersisting)
            e = cudaErrorInvalidValue;
        else
            r->apw = *w;
    } else if (attr == cudaLaunchAttributeSynchronizationPolicy) {
        if (value->syncPolicy < cudaSyncPolicyAuto || value->syncPolicy > cudaSyncPolicyBlockingSync)
            e = cudaErrorInvalidValue;
        else
            r->sync = value->syncPolicy;
    } else if (attr == cudaLaunchAttributePriority) {
        e = cudaErrorNotSupported;   /* CUDA too: a stream's priority is fixed at creation */
    } else {
        e = cudaErrorInvalidValue;
    }
    rt_unlock();
    return e == cudaSuccess ? e : rt_err(e);
}

cudaError_t (cudaStreamGetAttribute)(cudaStream_t hStream, enum cudaLaunchAttributeID attr,
                                     cudaLaunchAttributeValue *value_out)
{
    RT_ENTER();
    if (!value_out) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (attr == cudaLaunchAttributePriority)
        return cudaStreamGetPriority(hStream, &value_out->priority);
    if (attr != cudaLaunchAttributeAccessPolicyWindow &&
        attr != cudaLaunchAttributeSynchronizationPolicy)
        return rt_err(cudaErrorInvalidValue);
    rt_lock();
    attr_rec *r = attr_find(hStream, 0);
    memset(value_out, 0, sizeof *value_out);
    if (attr == cudaLaunchAttributeAccessPolicyWindow) {
        if (r) value_out->accessPolicyWindow = r->apw;
    } else {
        value_out->syncPolicy = r ? r->sync : cudaSyncPolicyAuto;
    }
    rt_unlock();
    return cudaSuccess;
}

cudaError_t (cudaCtxResetPersistingL2Cache)(void)
{
    RT_ENTER();
    rt_stream_log_note(0, RT_LOG_L2_RESET, 0);   /* logged: nothing else shows that it ran */
    return cudaSuccess;
}

/* ---- managed memory attached to a stream ---------------------------------------------- */
cudaError_t (cudaStreamAttachMemAsync)(cudaStream_t stream, void *devPtr, size_t length,
                                       unsigned int flags)
{
    RT_ENTER();
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
        return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    /* cudaMemAttachSingle names one stream: the legacy default stream is not one */
    if (flags == cudaMemAttachSingle && (stream == 0 || stream == cudaStreamLegacy))
        return rt_err(cudaErrorInvalidValue);
    rt_lock();
    rt_block *b = rt_registry_find(devPtr);
    /* CUDA: the whole allocation (length 0) or, for managed memory, exactly its size */
    int ok = b && b->kind == CUEMU_MEM_MANAGED && (char *)devPtr == b->base &&
             (length == 0 || length == b->size);
    rt_unlock();
    if (!ok) return rt_err(cudaErrorInvalidValue);
    return cudaSuccess;
}

/* ---- profiler --------------------------------------------------------------------------- */
cudaError_t (cudaProfilerStart)(void) { RT_ENTER(); return cudaSuccess; }
cudaError_t (cudaProfilerStop)(void) { RT_ENTER(); return cudaSuccess; }

/* ---- what a CPU emulator does not do ---------------------------------------------------- */
cudaError_t cuemu_not_supported(const char *what, const char *file, int line)
{
    cuemu_diag("not supported here: %s (%s:%d): the emulator runs the CUDA runtime API only; "
               "see docs/no-gpu.md", what, file ? file : "?", line);
    return rt_err(cudaErrorNotSupported);
}
