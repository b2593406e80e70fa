// SPDX-License-Identifier: MIT
/*
 * 08 python_gpu_libraries: the same GPU memory seen by CuPy, PyTorch, Numba, cuda.core and you.
 *
 * No copy crosses between them: each library describes its memory (an address, a shape, strides,
 * a dtype, a device, a stream) through one of two standard protocols, and the consumer builds
 * its own view of the same bytes.
 * - CUDA Array Interface v3 (`__cuda_array_interface__`, a Python dict): strides in BYTES,
 *   a "stream" on which the consumer must synchronise;
 * - DLPack 1.x (`__dlpack__`, a PyCapsule around a C struct, DLManagedTensorVersioned): strides
 *   in ELEMENTS, a deleter the consumer calls when done, flags (read-only, copied).
 * This file is the C half of a producer (08.1, 08.2), a consumer that takes any strides (08.3),
 * the stream contract (08.4), and a pool that CuPy, PyTorch and Numba can allocate from (08.5).
 *
 * Build: make                 Run: make run CH=08 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 08.1 .. 08.5 (grep -n "TODO(student)" this file)
 * Every array here is float32, up to 4 dimensions.
 */
#include "tut_check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define XV_MAX_DIMS 4

/* The chapter's own errors: Python raises tut.LibraryError with the name. */
#define XV_ERR_STRIDE  (-101)   /* a byte stride or address that is not a whole float */
#define XV_ERR_STREAM  (-102)   /* a stream number the protocols forbid (0, or -1 in CAI) */
#define BP_ERR_FOREIGN (-103)   /* bpool_free of a pointer the pool did not hand out */

#define XV_FAIL(code, ...)                                                        \
    do {                                                                          \
        status = tut_record_error(code, #code, __FILE__, __LINE__, __VA_ARGS__); \
        goto cleanup;                                                             \
    } while (0)

// ---- DLPack 1.x, as its header dlpack.h declares it (the ABI: field order and sizes) --------
enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2 };
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)

typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void      *data;          /* the first element's address (plus byte_offset) */
    DLDevice   device;
    int32_t    ndim;
    DLDataType dtype;
    int64_t   *shape;         /* ndim extents */
    int64_t   *strides;       /* ndim strides in ELEMENTS; NULL means C-contiguous */
    uint64_t   byte_offset;
} DLTensor;
typedef struct { uint32_t major, minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void         *manager_ctx;   /* the producer's: whatever its deleter needs */
    void        (*deleter)(struct DLManagedTensorVersioned *self);   /* the consumer calls it */
    uint64_t      flags;
    DLTensor      dl_tensor;
} DLManagedTensorVersioned;

// ---- xbuf: memory with a reference count, so that no view outlives it ----------------------

/* The exporter (a Python object) holds one reference; every DLPack export another, dropped by
   the consumer through the deleter. The memory goes with the last one, whoever drops it: the
   exporter may be gone long before a PyTorch tensor that views its memory. Consumers call
   deleters from any thread, so the count is atomic. */
struct xbuf {
    void  *ptr;
    size_t bytes;
    int    on_host;    /* 1: pinned host memory (cudaMallocHost), 0: device memory */
    int    device;
    int    refs;
};

extern "C" int xbuf_create(size_t bytes, int on_host, struct xbuf **out)
{
    int status = 0;
    struct xbuf *b = NULL;
    TUT_REQUIRE(out != NULL && bytes > 0);
    *out = NULL;
    b = (struct xbuf *)calloc(1, sizeof *b);
    TUT_REQUIRE(b != NULL);
    if (on_host)
        CUDA_CHECK(cudaMallocHost(&b->ptr, bytes));
    else
        CUDA_CHECK(cudaMalloc(&b->ptr, bytes));
    CUDA_CHECK(cudaGetDevice(&b->device));
    b->bytes = bytes;
    b->on_host = on_host;
    b->refs = 1;
    *out = b;
    b = NULL;
cleanup:
    if (b != NULL) {
        if (b->ptr != NULL)
            on_host ? cudaFreeHost(b->ptr) : cudaFree(b->ptr);
        free(b);
    }
    return status;
}

extern "C" int xbuf_retain(struct xbuf *b)
{
    int status = 0;
    TUT_REQUIRE(b != NULL);
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
cleanup:
    return status;
}

/* Drops one reference; the last one frees the memory. */
extern "C" int xbuf_release(struct xbuf *b)
{
    int status = 0;
    TUT_REQUIRE(b != NULL);
    if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        /* cudaFree waits for the device: no kernel still reads the memory it takes back */
        cudaError_t err = b->on_host ? cudaFreeHost(b->ptr) : cudaFree(b->ptr);
        free(b);
        CUDA_CHECK(err);
    }
cleanup:
    return status;
}

extern "C" int xbuf_info(struct xbuf *b, unsigned long long *ptr, int *refs, int *device)
{
    int status = 0;
    TUT_REQUIRE(b != NULL && ptr != NULL && refs != NULL && device != NULL);
    *ptr = (unsigned long long)(uintptr_t)b->ptr;
    *refs = __atomic_load_n(&b->refs, __ATOMIC_ACQUIRE);
    *device = b->device;
cleanup:
    return status;
}

// ---- xview: a strided float32 view, what a kernel gets ----------------------------------------
/* Read by Python as a ctypes Structure of the same fields, in the same order. */
typedef struct {
    unsigned long long data;           /* the address of element [0, 0, ...] */
    int                ndim;
    long long          shape[XV_MAX_DIMS];
    long long          strides[XV_MAX_DIMS];   /* in elements (floats), may be negative */
} xview;

/* 08.1, the producer's half of __cuda_array_interface__: its strides are in BYTES (NumPy's
   convention), ours in elements. A C-contiguous view may say so instead (strides None in the
   dict): row-major, each stride the product of the extents after it. A dimension of extent 1
   has no stride that matters, and an empty view is contiguous whatever its strides say. */
extern "C" int cai_strides(const xview *v, long long *strides_bytes, int *c_contiguous)
{
    int status = 0;
    long long expect = 1;
    TUT_REQUIRE(v != NULL && strides_bytes != NULL && c_contiguous != NULL);
    TUT_REQUIRE(v->ndim >= 1 && v->ndim <= XV_MAX_DIMS);
    // @solution 08.1: each byte stride is the element stride times sizeof(float); then *c_contiguous: 1 unless some extent > 1 has a stride other than the product of the extents after it (an empty view: 1) (~10 lines)
    for (int d = 0; d < v->ndim; d++)
        strides_bytes[d] = (long long)sizeof(float) * v->strides[d];
    *c_contiguous = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != expect)
            *c_contiguous = 0;
        expect *= v->shape[d];
    }
    if (expect == 0)
        *c_contiguous = 1;
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

// ---- DLPack export (08.2) ----------------------------------------------------------------------

/* One export: the struct the capsule carries, the arrays it points to, and its reference to the
   memory. The consumer owns it once it has taken it, and hands it back through the deleter. */
typedef struct {
    DLManagedTensorVersioned managed;   /* first: &e->managed == (void *)e */
    int64_t                  shape[XV_MAX_DIMS], strides[XV_MAX_DIMS];
    struct xbuf             *buf;
} dl_export;

/* Called by whoever ends the export: the consumer when its view dies, or the capsule's
   destructor when no consumer ever took it. Exactly once. */
__attribute__((unused))   /* unused only until 08.2 hands it out */
static void dl_deleter(DLManagedTensorVersioned *self)
{
    dl_export *e = (dl_export *)self->manager_ctx;
    xbuf_release(e->buf);
    free(e);
}

/* A versioned DLPack export of view v of buffer b: DLPack 1.0, float32, the device (or pinned
   host memory) b lives in, strides in elements. *out goes into a "dltensor_versioned" capsule. */
extern "C" int dlpack_export(struct xbuf *b, const xview *v, int readonly,
                             DLManagedTensorVersioned **out)
{
    int status = 0;
    dl_export *e = NULL;
    DLTensor *t;
    TUT_REQUIRE(b != NULL && v != NULL && out != NULL);
    TUT_REQUIRE(v->ndim >= 1 && v->ndim <= XV_MAX_DIMS);
    *out = NULL;
    e = (dl_export *)calloc(1, sizeof *e);
    TUT_REQUIRE(e != NULL);
    e->buf = b;
    t = &e->managed.dl_tensor;
    // @solution 08.2: version 1.0, manager_ctx = e, the deleter, the read-only flag; the tensor: data, device (kDLCUDAHost or kDLCUDA with b->device), ndim, dtype float 32 x 1, shape and strides (elements) copied into e's arrays; then the export's own reference to b (~19 lines)
    e->managed.version.major = 1;
    e->managed.version.minor = 0;
    e->managed.manager_ctx = e;
    e->managed.deleter = dl_deleter;
    e->managed.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    t->data = (void *)(uintptr_t)v->data;
    t->device.device_type = b->on_host ? kDLCUDAHost : kDLCUDA;
    t->device.device_id = b->on_host ? 0 : b->device;
    t->ndim = v->ndim;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    for (int d = 0; d < v->ndim; d++) {
        e->shape[d] = v->shape[d];
        e->strides[d] = v->strides[d];
    }
    t->shape = e->shape;
    t->strides = e->strides;
    t->byte_offset = 0;
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
    // @stub TUT_TODO();
    // @end
    *out = &e->managed;
    e = NULL;
cleanup:
    free(e);
    return status;
}

// ---- the consumer: any strides (08.3) ----------------------------------------------------------

/* From a __cuda_array_interface__ dict's fields to the view a kernel takes. strides_bytes NULL
   means C-contiguous. A byte stride (or an address) that is not a whole number of floats
   cannot be an element stride: refused (XV_ERR_STRIDE), never rounded. */
extern "C" int view_from_cai(unsigned long long data, int ndim, const long long *shape,
                             const long long *strides_bytes, xview *out)
{
    int status = 0;
    long long run = 1;
    TUT_REQUIRE(shape != NULL && out != NULL && ndim >= 1 && ndim <= XV_MAX_DIMS);
    memset(out, 0, sizeof *out);
    if (data % sizeof(float) != 0)
        XV_FAIL(XV_ERR_STRIDE, "address %#llx is not aligned to a float (4 bytes).", data);
    out->data = data;
    out->ndim = ndim;
    for (int d = ndim - 1; d >= 0; d--) {
        out->shape[d] = shape[d];
        // @solution 08.3: the element stride of dimension d: from strides_bytes (refuse one that is not a multiple of sizeof(float) with XV_FAIL(XV_ERR_STRIDE, ...)), or, when it is NULL, the C-contiguous one (run, the product of the extents after d) (~9 lines)
        if (strides_bytes == NULL) {
            out->strides[d] = run;
        } else {
            if (strides_bytes[d] % (long long)sizeof(float) != 0)
                XV_FAIL(XV_ERR_STRIDE, "a stride of %lld bytes (dimension %d) is not a whole "
                        "number of 4-byte floats.", strides_bytes[d], d);
            out->strides[d] = strides_bytes[d] / (long long)sizeof(float);
        }
        // @stub out->strides[d] = strides_bytes ? strides_bytes[d] : run;
        // @end
        run *= shape[d];
    }
cleanup:
    return status;
}

/* y[i] = a * x[the i-th element of x in row-major order] + y[i], y contiguous. Each thread
   turns its flat index into one index per dimension (the last dimension fastest), then into an
   offset with x's own strides: a transposed or sliced view is read where its elements really
   are, never as if it were contiguous. */
__global__ void view_axpy_kernel(xview x, float a, float *__restrict__ y, long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long offset = 0, rest = i;
        // @solution 08.3: peel off the index of each dimension from the last to the first (rest % shape, rest / shape) and add index * strides[d] to offset (~4 lines)
        for (int d = x.ndim - 1; d >= 0; d--) {
            offset += (rest % x.shape[d]) * x.strides[d];
            rest /= x.shape[d];
        }
        // @stub offset = i;
        // @end
        const float *p = (const float *)(uintptr_t)x.data;
        y[i] = a * p[offset] + y[i];
    }
}

extern "C" int view_axpy(const xview *x, float a, float *d_y, long long n, cudaStream_t stream)
{
    int status = 0;
    long long blocks;
    TUT_REQUIRE(x != NULL && n >= 0);
    if (n == 0)
        return 0;
    blocks = (n + 255) / 256;
    view_axpy_kernel<<<(int)(blocks > 4096 ? 4096 : blocks), 256, 0, stream>>>(*x, a, d_y, n);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- the stream contract (08.4) ----------------------------------------------------------------

/* Writes `value` into n floats after spinning `spin` clock ticks: a producer whose work is still
   queued on its stream when the consumer starts. */
__global__ void slow_fill_kernel(float *p, long long n, float value, long long spin)
{
    long long start = clock64();
    while (clock64() - start < spin) {
    }
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = value;
}

extern "C" int slow_fill(float *d, long long n, float value, long long spin, cudaStream_t s)
{
    int status = 0;
    TUT_REQUIRE(n > 0 && spin >= 0);
    slow_fill_kernel<<<(int)((n + 255) / 256 > 1024 ? 1024 : (n + 255) / 256), 256, 0, s>>>(
        d, n, value, spin);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* The number a protocol puts in "stream" (CUDA Array Interface) or passes as __dlpack__'s
   stream= (DLPack), as a cudaStream_t. 1 is the legacy default stream and 2 the per-thread
   default stream (0 would not say which, and both protocols forbid it); any other value is a
   cudaStream_t's own bits. DLPack alone has -1: "do not synchronise", *sync = 0. */
extern "C" int stream_from_protocol(long long s, int dlpack, cudaStream_t *out, int *sync)
{
    int status = 0;
    TUT_REQUIRE(out != NULL && sync != NULL);
    *out = NULL;
    *sync = 1;
    // @solution 08.4: 0 is XV_FAIL(XV_ERR_STREAM, ...); -1 is no synchronisation for DLPack and XV_ERR_STREAM for CAI; 1 is cudaStreamLegacy, 2 cudaStreamPerThread, anything else the handle itself (~13 lines)
    if (s == 0)
        XV_FAIL(XV_ERR_STREAM, "stream 0 is ambiguous (legacy or per-thread default stream?): "
                "both protocols forbid it; use 1 (legacy) or 2 (per-thread).");
    if (s == -1) {
        if (!dlpack)
            XV_FAIL(XV_ERR_STREAM, "stream -1 means \"do not synchronise\" in DLPack only; "
                    "the CUDA Array Interface says that with no stream (None).");
        *sync = 0;
    } else if (s == 1) {
        *out = cudaStreamLegacy;
    } else if (s == 2) {
        *out = cudaStreamPerThread;
    } else {
        *out = (cudaStream_t)(uintptr_t)s;
    }
    // @stub TUT_TODO();
    // @end
cleanup:
    return status;
}

/* Work queued on `consumer` from now on runs only after everything already queued on
   `producer`. The host does not wait: an event marks this moment of the producer's stream, and
   the consumer's stream waits for it on the GPU. Nothing to do on one and the same stream. */
extern "C" int stream_handoff(cudaStream_t producer, cudaStream_t consumer)
{
    int status = 0;
    cudaEvent_t ev = NULL;
    if (producer == consumer)
        return 0;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    // @solution 08.4: record ev on the producer's stream, then make the consumer's stream wait for it (~2 lines)
    CUDA_CHECK(cudaEventRecord(ev, producer));
    CUDA_CHECK(cudaStreamWaitEvent(consumer, ev, 0));
    // @stub TUT_TODO();
    // @end
cleanup:
    if (ev != NULL)
        cudaEventDestroy(ev);   /* safe at once: CUDA keeps it until the wait is done */
    return status;
}

extern "C" int stream_create(cudaStream_t *out)
{
    int status = 0;
    TUT_REQUIRE(out != NULL);
    CUDA_CHECK(cudaStreamCreateWithFlags(out, cudaStreamNonBlocking));
cleanup:
    return status;
}

extern "C" int stream_destroy(cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaStreamDestroy(s));
cleanup:
    return status;
}

extern "C" int stream_synchronize(cudaStream_t s)
{
    int status = 0;
    CUDA_CHECK(cudaStreamSynchronize(s));
cleanup:
    return status;
}

// ---- bpool: one pool behind CuPy, PyTorch and Numba (08.5) -------------------------------------

/* Chapter 07's caching idea (a freed block kept per size class, handed out again, and a stream
   that reuses it waits for the free's event) with what a pool inside other libraries also needs:
   a lock (PyTorch and CuPy allocate from whichever thread runs), and C entry points with the
   exact signatures PyTorch's CUDAPluggableAllocator loads. Blocks come from cudaMalloc one by
   one (no arena), in power-of-two classes from 512 bytes; bpool_empty gives the cached ones
   back. One pool per process, for the one device this chapter uses: CuPy and PyTorch keep a
   pool per device, and a pool for several devices would need one such table per device. */
#define BP_MIN       512
#define BP_CLASSES   48
#define BP_MAX_BLOCK 65536

typedef struct {
    void        *ptr;
    int          klass, live, next_free;
    cudaStream_t freed_on;   /* the stream of the last free; its work may still use the block */
    cudaEvent_t  freed;      /* recorded on freed_on at that free */
} bp_block;

static struct {
    pthread_mutex_t    lock;
    bp_block           blocks[BP_MAX_BLOCK];
    int                nblocks, free_head[BP_CLASSES], ready;
    unsigned long long stats[8];
} bp = {PTHREAD_MUTEX_INITIALIZER};

/* bpool_stats order; Python reads the same names. */
enum { BP_CUDA_MALLOCS, BP_CUDA_FREES, BP_ALLOCS, BP_FREES, BP_HITS, BP_IN_USE, BP_CACHED,
       BP_STREAM_WAITS };

static int bp_class_of(size_t bytes)
{
    int k = 0;
    while (((size_t)BP_MIN << k) < bytes)
        k++;
    return k;
}

static void bp_init(void)
{
    if (!bp.ready) {
        for (int k = 0; k < BP_CLASSES; k++)
            bp.free_head[k] = -1;
        bp.ready = 1;
    }
}

/* A block of at least `bytes` for work on `stream`. Called with the lock held. */
static int bp_alloc_locked(size_t bytes, cudaStream_t stream, void **out)
{
    int status = 0, k, i;
    bp_block *b;
    *out = NULL;
    bp_init();
    TUT_REQUIRE(bytes > 0 && bytes <= ((size_t)BP_MIN << (BP_CLASSES - 1)));
    k = bp_class_of(bytes);
    i = bp.free_head[k];
    if (i >= 0) {
        b = &bp.blocks[i];
        // @solution 08.5: a cached block: unlink it from class k's free list; if it was freed on another stream, make `stream` wait for its event (cudaStreamWaitEvent) and count BP_STREAM_WAITS; count BP_HITS and take its bytes out of BP_CACHED (~8 lines)
        if (b->freed_on != stream && b->freed != NULL) {
            CUDA_CHECK(cudaStreamWaitEvent(stream, b->freed, 0));
            bp.stats[BP_STREAM_WAITS]++;
        }
        bp.free_head[k] = b->next_free;
        bp.stats[BP_HITS]++;
        bp.stats[BP_CACHED] -= (size_t)BP_MIN << k;
        // @stub i = -1;   /* the stub never reuses: every allocation is a cudaMalloc */
        // @end
    }
    if (i < 0) {
        TUT_REQUIRE(bp.nblocks < BP_MAX_BLOCK);
        i = bp.nblocks;
        b = &bp.blocks[i];
        memset(b, 0, sizeof *b);
        CUDA_CHECK(cudaMalloc(&b->ptr, (size_t)BP_MIN << k));
        b->klass = k;
        bp.nblocks++;
        bp.stats[BP_CUDA_MALLOCS]++;
    }
    b = &bp.blocks[i];
    b->live = 1;
    b->next_free = -1;
    bp.stats[BP_ALLOCS]++;
    bp.stats[BP_IN_USE] += (size_t)BP_MIN << k;
    *out = b->ptr;
cleanup:
    return status;
}

/* The block at ptr goes back to its class, marked with this moment of `stream`. */
static int bp_free_locked(void *ptr, cudaStream_t stream)
{
    int status = 0, i;
    bp_block *b = NULL;
    for (i = bp.nblocks - 1; i >= 0; i--)   /* newest first: a loop frees what it just took */
        if (bp.blocks[i].ptr == ptr && bp.blocks[i].live) {
            b = &bp.blocks[i];
            break;
        }
    if (b == NULL)
        XV_FAIL(BP_ERR_FOREIGN, "bpool_free(%p): not a live block of this pool.", ptr);
    if (b->freed == NULL)
        CUDA_CHECK(cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming));
    // @solution 08.5: record b->freed on `stream` and remember the stream in b->freed_on; then push block i on its class's free list (~4 lines)
    CUDA_CHECK(cudaEventRecord(b->freed, stream));
    b->freed_on = stream;
    b->next_free = bp.free_head[b->klass];
    bp.free_head[b->klass] = i;
    // @stub TUT_TODO();
    // @end
    b->live = 0;
    bp.stats[BP_FREES]++;
    bp.stats[BP_IN_USE] -= (size_t)BP_MIN << b->klass;
    bp.stats[BP_CACHED] += (size_t)BP_MIN << b->klass;
cleanup:
    return status;
}

extern "C" int bpool_alloc(size_t bytes, cudaStream_t stream, void **out)
{
    int status = 0;
    TUT_REQUIRE(out != NULL);
    pthread_mutex_lock(&bp.lock);
    status = bp_alloc_locked(bytes, stream, out);
    pthread_mutex_unlock(&bp.lock);
cleanup:
    return status;
}

extern "C" int bpool_free(void *ptr, cudaStream_t stream)
{
    int status;
    pthread_mutex_lock(&bp.lock);
    status = bp_free_locked(ptr, stream);
    pthread_mutex_unlock(&bp.lock);
    return status;
}

/* cudaFree every cached block (after a synchronisation: a cached block's last user is done). */
extern "C" int bpool_empty(void)
{
    int status = 0, kept = 0;
    pthread_mutex_lock(&bp.lock);
    bp_init();
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < bp.nblocks; i++) {
        bp_block *b = &bp.blocks[i];
        if (b->live) {   /* still lent out: it stays, at a new index */
            bp.blocks[kept++] = *b;
            continue;
        }
        if (b->freed != NULL)
            cudaEventDestroy(b->freed);
        CUDA_CHECK(cudaFree(b->ptr));
        bp.stats[BP_CUDA_FREES]++;
        bp.stats[BP_CACHED] -= (size_t)BP_MIN << b->klass;
    }
    bp.nblocks = kept;
    for (int k = 0; k < BP_CLASSES; k++)
        bp.free_head[k] = -1;
cleanup:
    pthread_mutex_unlock(&bp.lock);
    return status;
}

extern "C" int bpool_stats(unsigned long long *out)
{
    int status = 0;
    TUT_REQUIRE(out != NULL);
    pthread_mutex_lock(&bp.lock);
    memcpy(out, bp.stats, sizeof bp.stats);
    pthread_mutex_unlock(&bp.lock);
cleanup:
    return status;
}

/* The two functions PyTorch's CUDAPluggableAllocator calls (their signatures are its contract:
   no status to return, so a failure can only be NULL; PyTorch does not check it, reports no
   out-of-memory error, and takes NULL as the tensor's address, so keep this pool from failing
   quietly: bpool_alloc records what went wrong, tut_last_error() says it). */
extern "C" void *bpool_torch_alloc(ssize_t size, int device, cudaStream_t stream)
{
    void *p = NULL;
    (void)device;
    if (size <= 0 || bpool_alloc((size_t)size, stream, &p) != 0)
        return NULL;
    return p;
}

extern "C" void bpool_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream)
{
    (void)size;
    (void)device;
    bpool_free(ptr, stream);
}
