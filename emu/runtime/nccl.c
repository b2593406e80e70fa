/* SPDX-License-Identifier: MIT */
/*
 * nccl.c: NCCL's collectives over the emulated devices (emu/include/nccl.h), with NCCL's
 * semantics where a program can see them:
 *   - a communicator is one rank on one device (the current device at ncclCommInitRank, or the
 *     list given to ncclCommInitAll); two ranks of a clique on one device are refused, as NCCL
 *     refuses a duplicate GPU;
 *   - collectives are stream-ordered: each rank's call queues one operation on its stream, and
 *     the data moves once every rank's operation may run (after the work before it on each
 *     rank's stream), before any rank's later work; the i-th collective of each rank of a
 *     clique is one collective, and ranks that disagree on it are reported;
 *   - ncclGroupStart/ncclGroupEnd (per host thread, nested) defer the calls to the outermost
 *     ncclGroupEnd, which is how one thread drives several ranks;
 *   - one thread calling a collective for a second rank outside a group, while its call for
 *     another rank is still waiting, would hang NCCL (the first call waits for the others):
 *     that call fails with ncclInvalidUsage, naming ncclGroupStart, instead. A synchronisation
 *     that reaches a collective not every rank has called (a hang on a GPU) is reported and
 *     fails with cudaErrorLaunchTimeout;
 *   - ncclCommInitRank outside a group waits (CUEMU_NCCL_WAIT_MS, default 3000 ms) for the
 *     other ranks' threads, then fails with ncclInvalidUsage.
 * Reductions run in rank order 0, 1, ..., n-1 in the element type (half and bfloat16 through
 * float, rounded at each step); NCCL's order depends on its algorithm, so compare floating
 * point results with a tolerance. ncclAvg is a sum of x/n for floating types and sum/n for
 * integers, as NCCL computes it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuemu_half.h"
#include "nccl.h"
#include "rt_internal.h"

#define COMM_MAGIC 0x6e63636cu
#define MAXR RT_MAX_DEVICES

enum coll_kind { C_ALLREDUCE = 1, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER };
static const char *const coll_names[] = { "", "ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                          "ncclAllGather", "ncclReduceScatter" };

struct clique;

struct ncclComm {
    unsigned magic;
    struct clique *cl;
    int rank, device;
    unsigned long long seq;        /* collectives this rank has issued */
    struct ncclComm *next;         /* every live communicator */
};

typedef struct coll coll;
struct clique {
    ncclUniqueId id;
    int nranks, joined, refs;
    struct ncclComm *rank[MAXR];
    coll *pending;                 /* collectives not every rank has called yet */
    struct clique *next;
};

struct coll {
    int kind;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    unsigned long long seq;
    struct clique *cl;
    int nranks, arrived, done, abandoned, refs;
    const void *send[MAXR];
    void *recv[MAXR];
    struct rt_op *arrive[MAXR];   /* each rank's arrival on its stream (after its earlier work) */
    struct rt_op *ops[MAXR];      /* each rank's wait for the collective (its later work waits) */
    int device[MAXR], outside[MAXR];
    pthread_t thread[MAXR];
    const char *file[MAXR];
    int line[MAXR];
    coll *next;
};

/* One recorded call: issued at once, or at the outermost ncclGroupEnd. */
typedef struct call {
    int kind;
    ncclComm_t comm;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    cudaStream_t stream;
    const char *file;
    int line;
    struct call *next;
    int device;      /* current at the call: which device's stream 0 names (issued later) */
} call;

static struct ncclComm *comms;
static struct clique *cliques;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t init_cv = PTHREAD_COND_INITIALIZER;

static __thread int group_depth;
static __thread call *group_head, *group_tail;
static __thread ncclResult_t group_err;
static __thread struct ncclComm **group_inits[MAXR * 4];
static __thread int group_ninits;
static __thread char last_msg[1024];

/* The message ncclGetLastError returns, also said as a diagnostic. */
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    cuemu_diag("%s", last_msg);
    return r;
}

/* ---- communicators --------------------------------------------------------------------- */
static int comm_live(const struct ncclComm *c)
{
    for (struct ncclComm *p = comms; p; p = p->next)
        if (p == c) return c->magic == COMM_MAGIC;
    return 0;
}

static ncclResult_t check_comm(const struct ncclComm *c, const char *api)
{
    if (!c) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
    if (!comm_live(c))
        return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator (destroyed, or "
                    "never made by ncclCommInitRank/ncclCommInitAll)", api, (const void *)c);
    return ncclSuccess;
}

static struct clique *clique_new(const ncclUniqueId *id, int nranks)
{
    struct clique *cl = (struct clique *)calloc(1, sizeof *cl);
    if (!cl) return NULL;
    if (id) cl->id = *id;
    cl->nranks = nranks;
    cl->next = cliques;
    cliques = cl;
    return cl;
}

static void coll_release(coll *c);

/* The last communicator of a clique gone: collectives some rank never called go too (their
   queued operations keep what they use until they are freed). */
static void clique_unref(struct clique *cl)
{
    if (--cl->refs > 0) return;
    for (struct clique **l = &cliques; *l; l = &(*l)->next)
        if (*l == cl) { *l = cl->next; break; }
    rt_lock();
    while (cl->pending) {
        coll *c = cl->pending;
        cl->pending = c->next;
        c->abandoned = 1;
        c->cl = NULL;
        coll_release(c);
    }
    rt_unlock();
    free(cl);
}

/* A rank joins its clique on the current device (lock init_mu held). */
static ncclResult_t join(struct clique *cl, int rank, int device, ncclComm_t *out, const char *api)
{
    if (cl->rank[rank])
        return fail(ncclInvalidUsage, "%s: rank %d of this %d-rank communicator was initialised "
                    "already", api, rank, cl->nranks);
    for (int r = 0; r < cl->nranks; r++)
        if (cl->rank[r] && cl->rank[r]->device == device)
            return fail(ncclInvalidUsage, "%s: duplicate GPU detected: rank %d and rank %d both on "
                        "device %d (one rank per device)", api, rank, r, device);
    struct ncclComm *c = (struct ncclComm *)calloc(1, sizeof *c);
    if (!c) return fail(ncclSystemError, "%s: out of host memory", api);
    c->magic = COMM_MAGIC;
    c->cl = cl;
    c->rank = rank;
    c->device = device;
    rt_lock();
    c->next = comms;
    comms = c;
    rt_unlock();
    cl->rank[rank] = c;
    cl->joined++;
    cl->refs++;
    *out = c;
    pthread_cond_broadcast(&init_cv);
    return ncclSuccess;
}

static void comm_free(struct ncclComm *c)
{
    rt_lock();
    for (struct ncclComm **l = &comms; *l; l = &(*l)->next)
        if (*l == c) { *l = c->next; break; }
    rt_unlock();
    pthread_mutex_lock(&init_mu);
    struct clique *cl = c->cl;
    if (cl->rank[c->rank] == c) cl->rank[c->rank] = NULL;
    cl->joined--;
    c->magic = 0;
    free(c);
    clique_unref(cl);
    pthread_mutex_unlock(&init_mu);
}

static long wait_ms(void)
{
    const char *e = getenv("CUEMU_NCCL_WAIT_MS");
    long v = e && *e ? strtol(e, NULL, 10) : 3000;
    return v > 0 ? v : 3000;
}

/* Blocks until every rank of cl joined (other host threads), as NCCL's init does; a thread
   that initialises several ranks one by one outside a group would wait forever there. */
static ncclResult_t wait_complete(struct clique *cl, int rank, const char *api)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ms = wait_ms();
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&init_mu);
    int rc = 0;
    while (cl->joined < cl->nranks && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&init_cv, &init_mu, &until);
    int ok = cl->joined >= cl->nranks;
    int joined = cl->joined;
    pthread_mutex_unlock(&init_mu);
    if (ok) return ncclSuccess;
    return fail(ncclInvalidUsage, "%s: rank %d waited %ld ms for the other ranks of its %d-rank "
                "communicator (%d joined): NCCL's init blocks until every rank joins, so one host "
                "thread that initialises several ranks must call ncclCommInitRank for all of them "
                "between ncclGroupStart() and ncclGroupEnd() (or use ncclCommInitAll)", api, rank,
                ms, cl->nranks, joined);
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    static unsigned long long counter;
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    memset(uniqueId, 0, sizeof *uniqueId);
    pthread_mutex_lock(&init_mu);
    unsigned long long n = ++counter;
    pthread_mutex_unlock(&init_mu);
    snprintf(uniqueId->internal, sizeof uniqueId->internal, "cuemu-nccl-%ld-%llu", (long)getpid(), n);
    return ncclSuccess;
}

static ncclResult_t cuda_state(const char *api)
{
    int e = cuemu_sticky_error();
    if (e) return fail(ncclUnhandledCudaError, "%s: CUDA failure %s (an earlier error)", api,
                       cudaGetErrorName((cudaError_t)e));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    const char *api = "ncclCommInitRank";
    ncclResult_t r = cuda_state(api);
    if (r) return r;
    if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
    *comm = NULL;
    if (nranks < 1 || nranks > rt_ndev())
        return fail(ncclInvalidArgument, "%s: nranks %d: the emulator runs one rank per emulated "
                    "device, 1 to %d here (CUEMU_DEVICES)", api, nranks, rt_ndev());
    if (rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "%s: rank %d is not in [0, %d)", api, rank, nranks);
    pthread_mutex_lock(&init_mu);
    struct clique *cl = NULL;
    for (struct clique *p = cliques; p; p = p->next)
        if (!memcmp(p->id.internal, commId.internal, NCCL_UNIQUE_ID_BYTES)) { cl = p; break; }
    if (cl && cl->nranks != nranks) {
        pthread_mutex_unlock(&init_mu);
        return fail(ncclInvalidArgument, "%s: rank %d says nranks %d, an earlier rank of the same "
                    "unique id said %d", api, rank, nranks, cl->nranks);
    }
    if (!cl && !(cl = clique_new(&commId, nranks))) {
        pthread_mutex_unlock(&init_mu);
        return fail(ncclSystemError, "%s: out of host memory", api);
    }
    cl->refs++;     /* held while this call waits */
    r = join(cl, rank, rt_cur_dev(), comm, api);
    pthread_mutex_unlock(&init_mu);
    if (r == ncclSuccess) {
        if (group_depth > 0) {
            /* completed at the outermost ncclGroupEnd, once every rank of the group joined */
            if (group_ninits < (int)(sizeof group_inits / sizeof group_inits[0]))
                group_inits[group_ninits++] = comm;
        } else if ((r = wait_complete(cl, rank, api)) != ncclSuccess) {
            comm_free(*comm);
            *comm = NULL;
        }
    }
    pthread_mutex_lock(&init_mu);
    clique_unref(cl);
    pthread_mutex_unlock(&init_mu);
    return r;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    const char *api = "ncclCommInitAll";
    ncclResult_t r = cuda_state(api);
    if (r) return r;
    if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", api);
    if (ndev < 1 || ndev > rt_ndev())
        return fail(ncclInvalidArgument, "%s: ndev %d: there are %d emulated devices "
                    "(CUEMU_DEVICES), one rank each", api, ndev, rt_ndev());
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (!rt_dev_valid(d))
            return fail(ncclInvalidArgument, "%s: devlist[%d] = %d is not a device", api, i, d);
        for (int j = 0; devlist && j < i; j++)
            if (devlist[j] == d)
                return fail(ncclInvalidUsage, "%s: duplicate GPU detected: devlist[%d] and "
                            "devlist[%d] are both device %d", api, j, i, d);
    }
    pthread_mutex_lock(&init_mu);
    struct clique *cl = clique_new(NULL, ndev);
    if (!cl) { pthread_mutex_unlock(&init_mu); return fail(ncclSystemError, "%s: out of host memory", api); }
    snprintf(cl->id.internal, sizeof cl->id.internal, "cuemu-nccl-initall-%p", (void *)cl);
    cl->refs++;
    for (int i = 0; i < ndev && r == ncclSuccess; i++) r = join(cl, i, devlist ? devlist[i] : i, &comm[i], api);
    pthread_mutex_unlock(&init_mu);
    if (r != ncclSuccess)
        for (int i = 0; i < ndev; i++)
            if (cl->rank[i]) { comm_free(cl->rank[i]); comm[i] = NULL; }
    pthread_mutex_lock(&init_mu);
    clique_unref(cl);
    pthread_mutex_unlock(&init_mu);
    return r;
}

/* Destroying waits for the work queued on the communicator's device, as NCCL finishes the
   operations the communicator has in flight. */
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    rt_lock();
    ncclResult_t r = check_comm(comm, "ncclCommDestroy");
    rt_unlock();
    if (r) return r;
    rt_drain_device(comm->device);
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    rt_lock();
    ncclResult_t r = check_comm(comm, "ncclCommFinalize");
    rt_unlock();
    if (r == ncclSuccess) rt_drain_device(comm->device);
    return r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    rt_lock();
    ncclResult_t r = check_comm(comm, "ncclCommGetAsyncError");
    rt_unlock();
    if (r) return r;
    if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    *asyncError = cuemu_sticky_error() ? ncclUnhandledCudaError : ncclSuccess;
    return ncclSuccess;
}

#define COMM_QUERY(name, field)                                                           \
    ncclResult_t name(const ncclComm_t comm, int *out)                                    \
    {                                                                                     \
        rt_lock();                                                                        \
        ncclResult_t r = check_comm(comm, #name);                                         \
        if (r == ncclSuccess && !out) r = fail(ncclInvalidArgument, #name ": the result pointer is NULL"); \
        if (r == ncclSuccess) *out = (field);                                             \
        rt_unlock();                                                                      \
        return r;                                                                         \
    }
COMM_QUERY(ncclCommCount, comm->cl->nranks)
COMM_QUERY(ncclCommCuDevice, comm->device)
COMM_QUERY(ncclCommUserRank, comm->rank)

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_msg;
}

/* ---- element types and reductions ------------------------------------------------------ */
static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#define RED(a, b, op) ((op) == ncclProd ? (a) * (b) : (op) == ncclMax ? ((a) > (b) ? (a) : (b)) \
                       : (op) == ncclMin ? ((a) < (b) ? (a) : (b)) : (a) + (b))

/* acc[i] = acc[i] (op) x[i]; first: acc = x (scaled by 1/n for a floating average). */
#define INT_CASE(T, UT)                                                                   \
    {                                                                                     \
        T *a = (T *)acc; const T *b = (const T *)x;                                       \
        for (size_t i = 0; i < n; i++) {                                                  \
            if (first) a[i] = b[i];                                                       \
            else if (op == ncclSum || op == ncclAvg) a[i] = (T)((UT)a[i] + (UT)b[i]);     \
            else if (op == ncclProd) a[i] = (T)((UT)a[i] * (UT)b[i]);                     \
            else a[i] = RED(a[i], b[i], op);                                              \
            if (last && op == ncclAvg) a[i] = (T)(a[i] / (T)nranks);                      \
        }                                                                                 \
    } break;
#define FLT_CASE(T)                                                                       \
    {                                                                                     \
        T *a = (T *)acc; const T *b = (const T *)x;                                       \
        T k = op == ncclAvg ? (T)1 / (T)nranks : (T)1;                                     \
        for (size_t i = 0; i < n; i++) {                                                  \
            T v = op == ncclAvg ? b[i] * k : b[i];                                        \
            a[i] = first ? v : op == ncclAvg ? a[i] + v : RED(a[i], v, op);               \
        }                                                                                 \
    } break;
#define H16_CASE(TO, FROM)                                                                \
    {                                                                                     \
        uint16_t *a = (uint16_t *)acc; const uint16_t *b = (const uint16_t *)x;           \
        float k = op == ncclAvg ? 1.0f / (float)nranks : 1.0f;                             \
        for (size_t i = 0; i < n; i++) {                                                  \
            float v = op == ncclAvg ? TO(b[i]) * k : TO(b[i]), w = TO(a[i]);              \
            a[i] = first ? FROM(v) : FROM(op == ncclAvg ? w + v : RED(w, v, op));         \
        }                                                                                 \
    } break;

static void reduce_into(void *acc, const void *x, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int first, int last, int nranks)
{
    switch (t) {
    case ncclInt8: INT_CASE(int8_t, uint8_t)
    case ncclUint8: INT_CASE(uint8_t, uint8_t)
    case ncclInt32: INT_CASE(int32_t, uint32_t)
    case ncclUint32: INT_CASE(uint32_t, uint32_t)
    case ncclInt64: INT_CASE(int64_t, uint64_t)
    case ncclUint64: INT_CASE(uint64_t, uint64_t)
    case ncclFloat32: FLT_CASE(float)
    case ncclFloat64: FLT_CASE(double)
    case ncclFloat16: H16_CASE(cuemu_h2f_bits, cuemu_f2h_bits)
    case ncclBfloat16: H16_CASE(bf16_to_float, float_to_bf16)
    default: break;
    }
}

/* ---- running a collective (as device work, every rank's buffers open) -------------------- */
static int buffers_live(coll *c)
{
    size_t es = type_size(c->type), n = (size_t)c->nranks;
    size_t sb = (c->kind == C_REDUCESCATTER ? n : 1) * c->count * es;
    size_t rb = (c->kind == C_ALLGATHER ? n : 1) * c->count * es;
    for (int r = 0; r < c->nranks; r++) {
        cuemu_alloc_info ai;
        int need_s = c->kind == C_BROADCAST ? r == c->root : 1;
        int need_r = c->kind == C_REDUCE ? r == c->root : 1;
        const void *p[2] = { need_s ? c->send[r] : NULL, need_r ? c->recv[r] : NULL };
        size_t len[2] = { sb, rb };
        for (int k = 0; k < 2; k++)
            if (p[k] && (!cuemu_alloc_lookup(p[k], &ai) ||
                         (const char *)p[k] + len[k] > (const char *)ai.base + ai.size)) {
                cuemu_diag("%s (rank %d, called at %s:%d): its %s buffer %p was freed before the "
                           "collective ran", coll_names[c->kind], r,
                           c->file[r] ? c->file[r] : "(unknown file)", c->line[r],
                           k ? "receive" : "send", p[k]);
                return 0;
            }
    }
    return 1;
}

static void coll_run(coll *c)
{
    size_t es = type_size(c->type), n = c->count, bytes = n * es;
    int nr = c->nranks;
    if (!buffers_live(c)) { cuemu_set_sticky_error(cudaErrorIllegalAddress); return; }
    /* every input is read before any output is written: in-place calls are legal */
    size_t in_bytes = c->kind == C_REDUCESCATTER ? bytes * nr : bytes;
    char *in = (char *)malloc(in_bytes * nr + (c->kind == C_ALLGATHER ? 0 : in_bytes) + 1);
    if (!in) { cuemu_diag("%s: out of host memory", coll_names[c->kind]); cuemu_set_sticky_error(cudaErrorMemoryAllocation); return; }
    for (int r = 0; r < nr; r++)
        if (c->send[r] && (c->kind != C_BROADCAST || r == c->root))
            memcpy(in + r * in_bytes, c->send[r], in_bytes);
    char *acc = in + in_bytes * nr;
    switch (c->kind) {
    case C_ALLREDUCE:
    case C_REDUCE:
        for (int r = 0; r < nr; r++) reduce_into(acc, in + r * in_bytes, n, c->type, c->op, r == 0, r == nr - 1, nr);
        for (int r = 0; r < nr; r++)
            if (c->kind == C_ALLREDUCE || r == c->root) memcpy(c->recv[r], acc, bytes);
        break;
    case C_BROADCAST:
        for (int r = 0; r < nr; r++) memcpy(c->recv[r], in + c->root * in_bytes, bytes);
        break;
    case C_ALLGATHER:
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < nr; k++) memcpy((char *)c->recv[r] + k * bytes, in + k * in_bytes, bytes);
        break;
    case C_REDUCESCATTER:
        for (int r = 0; r < nr; r++) {
            for (int k = 0; k < nr; k++)
                reduce_into(acc, in + k * in_bytes + r * bytes, n, c->type, c->op, k == 0, k == nr - 1, nr);
            memcpy(c->recv[r], acc, bytes);
        }
        break;
    }
    free(in);
}

/* Each call queues, on its rank's stream, an arrival (a no-op the stream's earlier work and
   the default stream's rule order as usual) and then, except for the call that completes the
   collective, a wait. The completing call queues the collective itself after its arrival; it
   waits for every rank's arrival, and every other rank's wait waits for it, so each rank's
   later work comes after the data moved. */
typedef struct { coll *c; int rank; } rank_op;

static void coll_release(coll *c)
{
    if (--c->refs > 0) return;
    free(c);
}

static void coll_runner(void *arg)
{
    coll *c = ((rank_op *)arg)->c;
    if (c->abandoned || c->done) return;
    c->done = 1;
    coll_run(c);
}

static void rank_wait(void *arg)
{
    rank_op *ro = (rank_op *)arg;
    coll *c = ro->c;
    if (c->abandoned || c->done) return;
    /* reached before every rank called it: on a GPU the rank's kernel would wait forever */
    char missing[128] = "";
    size_t m = 0;
    for (int r = 0; r < c->nranks; r++)
        if (!c->ops[r] && m < sizeof missing - 8) m += (size_t)snprintf(missing + m, sizeof missing - m, "%s%d", m ? ", " : "", r);
    cuemu_diag("%s (rank %d of %d on device %d, called at %s:%d) was reached by a synchronisation "
               "before rank(s) %s called it: on a GPU that synchronisation waits forever. Every "
               "rank must call each collective (from one thread: between ncclGroupStart() and "
               "ncclGroupEnd()) before its stream is waited for", coll_names[c->kind], ro->rank,
               c->nranks, c->device[ro->rank], c->file[ro->rank] ? c->file[ro->rank] : "(unknown file)",
               c->line[ro->rank], missing);
    c->abandoned = 1;
    cuemu_set_sticky_error(cudaErrorLaunchTimeout);
}

static void rank_release(void *arg)
{
    rank_op *ro = (rank_op *)arg;
    /* freed before every rank called it (cudaDeviceReset dropped the queue): later callers
       must not wait for operations that are gone */
    if (ro->c->arrived < ro->c->nranks) ro->c->abandoned = 1;
    coll_release(ro->c);
    free(ro);
}

/* ---- issuing a call ---------------------------------------------------------------------- */
static const char *type_name(ncclDataType_t t)
{
    static const char *const n[] = { "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64",
                                     "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64",
                                     "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2" };
    return (unsigned)t < ncclNumTypes ? n[t] : "?";
}

static void coll_drop(coll *c);

/* The collective this call joins (the comm's next one), or a new one. Lock held. */
static ncclResult_t coll_find(const call *k, coll **out)
{
    struct ncclComm *cm = k->comm;
    struct clique *cl = cm->cl;
    for (coll *c = cl->pending; c; c = c->next)
        if (c->seq == cm->seq) {
            if (c->kind != k->kind || c->count != k->count || c->type != k->type ||
                (k->kind != C_BROADCAST && k->kind != C_ALLGATHER && c->op != k->op) ||
                ((k->kind == C_BROADCAST || k->kind == C_REDUCE) && c->root != k->root)) {
                int other = 0;
                while (other < c->nranks && !c->ops[other]) other++;
                ncclResult_t r = fail(ncclInvalidUsage, "%s(count %zu, %s) at %s:%d on rank %d is the "
                            "communicator's collective #%llu, but rank %d called %s(count %zu, %s%s) "
                            "as that one: every rank must call the same collectives, with the same "
                            "count, type, operation and root, in the same order (the calls made "
                            "for it are dropped)",
                            coll_names[k->kind], k->count, type_name(k->type),
                            k->file ? k->file : "(unknown file)", k->line, cm->rank, cm->seq + 1,
                            other, coll_names[c->kind], c->count, type_name(c->type),
                            c->kind == C_BROADCAST || c->kind == C_REDUCE ? ", another root" : "");
                coll_drop(c);
                return r;
            }
            *out = c;
            return ncclSuccess;
        }
    coll *c = (coll *)calloc(1, sizeof *c);
    if (!c) return fail(ncclSystemError, "%s: out of host memory", coll_names[k->kind]);
    c->kind = k->kind; c->count = k->count; c->type = k->type; c->op = k->op; c->root = k->root;
    c->seq = cm->seq;
    c->cl = cl;
    c->nranks = cl->nranks;
    c->refs = 1;                  /* the clique's pending list */
    coll **l = &cl->pending;
    while (*l) l = &(*l)->next;
    *l = c;
    *out = c;
    return ncclSuccess;
}

static void coll_unlist(coll *c)
{
    for (coll **l = &c->cl->pending; *l; l = &(*l)->next)
        if (*l == c) { *l = c->next; coll_release(c); return; }
}

static ncclResult_t issue_now(const call *k, int outside);

/* A collective refused for one rank: the calls already made for it are dropped (their queued
   operations do nothing), and those ranks' count of collectives steps back, so nothing waits
   for it and the ranks stay in step. Lock held. */
static void coll_drop(coll *c)
{
    c->abandoned = 1;
    for (int x = 0; x < c->nranks; x++)
        if (c->ops[x] && c->cl->rank[x]) c->cl->rank[x]->seq--;
    coll_unlist(c);
}

/* Issued with the device that was current at the call, so that stream 0 (or
   cudaStreamPerThread) is that device's even when a group issues it later. */
static ncclResult_t issue(const call *k, int outside)
{
    int saved = rt_cur_dev();
    if (saved != k->device) (cudaSetDevice)(k->device);
    ncclResult_t r = issue_now(k, outside);
    if (saved != k->device) (cudaSetDevice)(saved);
    return r;
}

static ncclResult_t issue_now(const call *k, int outside)
{
    const char *api = coll_names[k->kind];
    struct ncclComm *cm = k->comm;
    rt_lock();
    ncclResult_t r = check_comm(cm, api);
    if (r) { rt_unlock(); return r; }
    coll *c = NULL;
    if ((r = coll_find(k, &c)) != ncclSuccess) { rt_unlock(); return r; }
    int me = cm->rank;
    if (c->abandoned) {
        rt_unlock();
        return fail(ncclInvalidUsage, "%s at %s:%d for rank %d: the communicator's collective #%llu "
                    "was abandoned (a synchronisation reached it before every rank had called it, "
                    "or the queue was reset): the ranks are out of step", api,
                    k->file ? k->file : "(unknown file)", k->line, me, cm->seq + 1);
    }
    pthread_t self = pthread_self();
    if (outside)
        for (int q = 0; q < c->nranks; q++)
            if (q != me && c->ops[q] && c->outside[q] && pthread_equal(c->thread[q], self)) {
                r = fail(ncclInvalidUsage, "%s at %s:%d for rank %d: this host thread called it for "
                         "rank %d already (at %s:%d), outside ncclGroupStart/ncclGroupEnd, and that "
                         "call waits for the other ranks: NCCL would hang there. One thread driving "
                         "several ranks calls the collective for each of them between "
                         "ncclGroupStart() and ncclGroupEnd()", api,
                         k->file ? k->file : "(unknown file)", k->line, me, q,
                         c->file[q] ? c->file[q] : "(unknown file)", c->line[q]);
                coll_drop(c);
                rt_unlock();
                return r;
            }
    int complete = c->arrived + 1 == c->nranks;
    rank_op *ro = (rank_op *)malloc(sizeof *ro);
    if (ro) { ro->c = c; ro->rank = me; c->refs++; }
    rt_op *arrive = rt_op_devfn(api, NULL, NULL, NULL, k->file, k->line);
    rt_op *op = ro ? rt_op_devfn(api, complete ? coll_runner : rank_wait, ro, rank_release,
                                 k->file, k->line) : NULL;
    if (!op || !arrive) {
        if (op) rt_op_discard(op);
        else if (ro) { c->refs--; free(ro); }
        if (arrive) rt_op_discard(arrive);
        rt_unlock();
        return fail(ncclSystemError, "%s: out of host memory", api);
    }
    c->send[me] = k->send;
    c->recv[me] = k->recv;
    c->device[me] = cm->device;
    c->outside[me] = outside;
    c->thread[me] = self;
    c->file[me] = k->file;
    c->line[me] = k->line;
    c->arrive[me] = arrive;
    c->ops[me] = op;
    c->arrived++;
    cm->seq++;
    cudaError_t e = rt_submit(arrive, k->stream, 0);
    if (complete) {
        size_t es = type_size(c->type), n = (size_t)c->nranks;
        size_t sb = (c->kind == C_REDUCESCATTER ? n : 1) * c->count * es;
        size_t rb = (c->kind == C_ALLGATHER ? n : 1) * c->count * es;
        for (int q = 0; q < c->nranks; q++) {
            int need_s = c->kind == C_BROADCAST ? q == c->root : 1;
            int need_r = c->kind == C_REDUCE ? q == c->root : 1;
            if (need_s && c->send[q]) rt_op_access(op, c->send[q], sb, 0);
            if (need_r && c->recv[q]) rt_op_access(op, c->recv[q], rb, 1);
            if (q != me) rt_op_depend(op, c->arrive[q]);
        }
        coll_unlist(c);   /* no more callers; the operations hold it */
    }
    cudaError_t e2 = rt_submit(op, k->stream, 0);
    if (e == cudaSuccess) e = e2;
    if (complete)
        for (int q = 0; q < c->nranks; q++)
            if (q != me) rt_op_depend(c->ops[q], op);
    rt_unlock();
    if (e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "%s: CUDA failure %s", api, cudaGetErrorName(e));
    return ncclSuccess;
}

/* Checks a call as NCCL does before it is queued (or recorded in a group). */
static ncclResult_t check_call(const call *k)
{
    const char *api = coll_names[k->kind];
    ncclResult_t r = cuda_state(api);
    if (r) return r;
    rt_lock();
    r = check_comm(k->comm, api);
    rt_unlock();
    if (r) return r;
    struct ncclComm *cm = k->comm;
    int nr = cm->cl->nranks, me = cm->rank;
    if ((unsigned)k->type >= ncclNumTypes)
        return fail(ncclInvalidArgument, "%s: datatype %d is not an ncclDataType_t", api, (int)k->type);
    if (!type_size(k->type))
        return fail(ncclInvalidArgument, "%s: %s is not emulated (8-bit floats)", api, type_name(k->type));
    if (k->kind != C_BROADCAST && k->kind != C_ALLGATHER && (unsigned)k->op >= ncclNumOps)
        return fail(ncclInvalidArgument, "%s: op %d is not ncclSum, ncclProd, ncclMax, ncclMin or "
                    "ncclAvg", api, (int)k->op);
    if ((k->kind == C_BROADCAST || k->kind == C_REDUCE) && (k->root < 0 || k->root >= nr))
        return fail(ncclInvalidArgument, "%s: root %d is not a rank of this %d-rank communicator",
                    api, k->root, nr);
    if (!rt_stream_valid(k->stream))
        return fail(ncclUnhandledCudaError, "%s: the stream is not a valid stream "
                    "(cudaErrorInvalidResourceHandle)", api);
    if (rt_stream_device(k->stream) != cm->device)
        return fail(ncclUnhandledCudaError, "%s: rank %d runs on device %d, and the stream belongs "
                    "to device %d (cudaErrorInvalidResourceHandle): each rank's collectives go on a "
                    "stream of its own device", api, me, cm->device, rt_stream_device(k->stream));
    size_t es = type_size(k->type);
    size_t sb = (k->kind == C_REDUCESCATTER ? (size_t)nr : 1) * k->count * es;
    size_t rb = (k->kind == C_ALLGATHER ? (size_t)nr : 1) * k->count * es;
    int need_s = k->kind == C_BROADCAST ? me == k->root : 1;
    int need_r = k->kind == C_REDUCE ? me == k->root : 1;
    if (k->count == 0) return ncclSuccess;
    const void *p[2] = { need_s ? k->send : NULL, need_r ? k->recv : NULL };
    size_t len[2] = { sb, rb };
    const char *role[2] = { "sendbuff", "recvbuff" };
    for (int i = 0; i < 2; i++) {
        if (!(i ? need_r : need_s)) continue;
        if (!p[i]) return fail(ncclInvalidArgument, "%s: %s is NULL on rank %d", api, role[i], me);
        struct cudaPointerAttributes a;
        enum rt_loc loc;
        if (rt_classify(p[i], len[i], api, role[i], &loc) != cudaSuccess)
            return fail(ncclInvalidArgument, "%s: %s on rank %d does not hold the %zu bytes the "
                        "call reads or writes there", api, role[i], me, len[i]);
        (cudaPointerGetAttributes)(&a, p[i]);
        if (a.type == cudaMemoryTypeUnregistered)
            return fail(ncclInvalidArgument, "%s: %s %p on rank %d is host memory CUDA does not know: "
                        "NCCL moves device memory", api, role[i], p[i], me);
        if (a.type == cudaMemoryTypeDevice && a.device != cm->device)
            return fail(ncclInvalidArgument, "%s: %s %p is memory of device %d, and rank %d runs on "
                        "device %d", api, role[i], p[i], a.device, me, cm->device);
    }
    return ncclSuccess;
}

static ncclResult_t submit(int kind, const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    call k = { kind, comm, send, recv, count, type, op, root, stream, NULL, 0, NULL, rt_cur_dev() };
    rt_site_take(&k.file, &k.line);
    ncclResult_t r = check_call(&k);
    if (r) { if (group_depth > 0 && !group_err) group_err = r; return r; }
    if (group_depth == 0) return issue(&k, 1);
    call *g = (call *)malloc(sizeof *g);
    if (!g) return fail(ncclSystemError, "%s: out of host memory", coll_names[kind]);
    *g = k;
    if (group_tail) group_tail->next = g; else group_head = g;
    group_tail = g;
    return ncclSuccess;
}

ncclResult_t (ncclAllReduce)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return submit(C_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t (ncclBroadcast)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit(C_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t (ncclBcast)(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream)
{
    return submit(C_BROADCAST, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t (ncclReduce)(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return submit(C_REDUCE, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t (ncclAllGather)(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit(C_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

ncclResult_t (ncclReduceScatter)(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return submit(C_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}

/* ---- groups -------------------------------------------------------------------------------- */
ncclResult_t ncclGroupStart(void)
{
    if (group_depth == 0) { group_err = ncclSuccess; group_ninits = 0; }
    group_depth++;
    return ncclSuccess;
}

/* The outermost ncclGroupEnd: the group's inits complete (every rank joined, from this
   thread or others), then its collectives are issued in the order they were called. An error
   in the group (a call refused when it was made) fails ncclGroupEnd too, and nothing of the
   group is issued. */
ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    ncclResult_t r = group_err;
    for (int i = 0; i < group_ninits && r == ncclSuccess; i++) {
        ncclComm_t c = *group_inits[i];
        if (c) r = wait_complete(c->cl, c->rank, "ncclGroupEnd (ncclCommInitRank)");
    }
    if (r != ncclSuccess)
        for (int i = 0; i < group_ninits; i++)
            if (*group_inits[i] && (*group_inits[i])->cl->joined < (*group_inits[i])->cl->nranks) {
                comm_free(*group_inits[i]);
                *group_inits[i] = NULL;
            }
    group_ninits = 0;
    for (call *k = group_head; k;) {
        call *next = k->next;
        if (r == ncclSuccess) r = issue(k, 0);
        free(k);
        k = next;
    }
    group_head = group_tail = NULL;
    group_err = ncclSuccess;
    return r;
}
