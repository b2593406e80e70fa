// SPDX-License-Identifier: MIT
/*
 * 09 multi_gpu: memory across GPUs: devices, peer access, an array split over devices, and an
 * all-reduce written by hand against NCCL's.
 *
 * Every runtime call works on the *current device* of the calling host thread: cudaMalloc
 * allocates there, cudaStreamCreate and cudaEventCreate make objects that belong to it for
 * ever, cudaMallocAsync draws from the pool of the stream's device, cudaMemGetInfo and
 * cudaDeviceSynchronize see that device only. cudaSetDevice changes it; nothing else does. So a
 * multi-GPU function makes each device current before it touches that device's things, and
 * puts the caller's device back on the way out (every function here does, on every path).
 *
 * A kernel on one device may use another device's memory only once peer access is enabled
 * from the first to the second (cudaDeviceEnablePeerAccess, one direction per call). Copies
 * between devices (cudaMemcpyPeer, or cudaMemcpy with cudaMemcpyDefault) work either way: with
 * peer access they go straight over the link (NVLink or PCIe), without it the driver may stage
 * them through host memory.
 *
 * Build: make                 Run: make run CH=09 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check CH=09     Exercises: 09.1 .. 09.5 (grep -n "TODO(student)" this file)
 * The timing code for --bench is in multi_gpu_bench.cu, linked into the same library. On the
 * emulator the driver asks for 3 devices (CUEMU_DEVICES), unless you set it.
 */
#include "tut_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NCCL where the build found it (the Makefile sets TUT_HAVE_NCCL; on a GPU machine
   tools/find_nccl.sh looks for nccl.h and libnccl). Without it the chapter still builds, and
   its NCCL parts report "not built with NCCL", which the driver turns into a skip. */
#if TUT_HAVE_NCCL
#include <nccl.h>
#endif

// ---- kernels ------------------------------------------------------------------------------

/* y[i] = a * x[i] + b, grid-stride (x == y allowed). */
__global__ void scale_shift_kernel(const float *x, float *y, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + b;
}

/* y[i] += x[i]: the reduction step of the ring. */
__global__ void add_kernel(float *y, const float *x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += x[i];
}

static inline int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

/* Part r of n elements cut into `parts`: [r*n/parts, (r+1)*n/parts). The parts differ by one
   element at most, and none reaches past n, whatever n and parts (n < parts leaves some
   empty). The split of 09.3 and 09.4 and the ring's chunks (09.5) all use it (maybe_unused:
   until you write them, nothing does). */
[[maybe_unused]] static inline void part_of(size_t n, int parts, int r, size_t *first, size_t *len)
{
    size_t begin = n * (size_t)r / (size_t)parts, end = n * (size_t)(r + 1) / (size_t)parts;
    *first = begin;
    *len = end - begin;
}

// ---- lesson: devices ----------------------------------------------------------------------

extern "C" int get_device(int *dev)
{
    int status = 0;
    CUDA_CHECK(cudaGetDevice(dev));
cleanup:
    return status;
}

extern "C" int set_device(int dev)
{
    int status = 0;
    CUDA_CHECK(cudaSetDevice(dev));
cleanup:
    return status;
}

/* What one device is: its name, where it sits on the PCI bus (domain, bus, device: how
   nvidia-smi names it too), its memory as cudaMemGetInfo sees it, and whether it can share
   managed memory with the host at the same time (concurrentManagedAccess). cudaMemGetInfo
   answers for the current device only: hence the cudaSetDevice, undone at the end. */
extern "C" int device_describe(int dev, char *name, int name_len, int *pci, size_t *free_bytes,
                               size_t *total_bytes, int *concurrent_managed)
{
    int status = 0, prev = -1;
    struct cudaDeviceProp prop;

    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(name, (size_t)name_len, "%s", prop.name);
    pci[0] = prop.pciDomainID;
    pci[1] = prop.pciBusID;
    pci[2] = prop.pciDeviceID;
    *concurrent_managed = prop.concurrentManagedAccess;
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Device memory in use (total - free) on each device, used[0..count-1]: the per-device leak
   check of driver.py (the harness's own check sees the current device only). */
extern "C" int devices_mem_used(size_t *used, int max, int *count)
{
    int status = 0, prev = -1;
    size_t free_b = 0, total_b = 0;

    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaGetDeviceCount(count));
    for (int d = 0; d < *count && d < max; d++) {
        CUDA_CHECK(cudaSetDevice(d));
        /* what a stream-ordered free gave back is returned to the system at a synchronise */
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        used[d] = total_b - free_b;
    }
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* The links between the n devices, n x n matrices indexed [from * n + to]: can `from` map
   `to`'s memory (cudaDeviceCanAccessPeer), and the driver's own word on the link
   (cudaDeviceGetP2PAttribute): its relative performance rank (0 = the best this machine has)
   and whether atomics over it are native. Diagonal entries are 0 (the driver refuses a device
   paired with itself). */
extern "C" int topology(int n, int *access, int *perf_rank, int *atomics)
{
    int status = 0;

    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int k = i * n + j;
            access[k] = perf_rank[k] = atomics[k] = 0;
            if (i == j)
                continue;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&access[k], i, j));
            CUDA_CHECK(cudaDeviceGetP2PAttribute(&perf_rank[k], cudaDevP2PAttrPerformanceRank,
                                                 i, j));
            CUDA_CHECK(cudaDeviceGetP2PAttribute(&atomics[k],
                                                 cudaDevP2PAttrNativeAtomicSupported, i, j));
        }
cleanup:
    return status;
}

extern "C" int pointer_device(const void *ptr, int *dev)
{
    int status = 0;
    struct cudaPointerAttributes attr;
    CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
    *dev = attr.device;
cleanup:
    return status;
}

/* cudaStreamNonBlocking (1) or cudaStreamDefault (0): how a stream was made. */
extern "C" int stream_flags(cudaStream_t stream, unsigned int *flags)
{
    int status = 0;
    CUDA_CHECK(cudaStreamGetFlags(stream, flags));
cleanup:
    return status;
}

// ---- lesson: peer access and copies between devices --------------------------------------

extern "C" int peer_can_access(int dev, int peer, int *can)
{
    int status = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(can, dev, peer));
cleanup:
    return status;
}

/* Peer access from `dev` to `peer`, raw: the errors as CUDA gives them (a second enable is
   cudaErrorPeerAccessAlreadyEnabled, a disable of what is not enabled
   cudaErrorPeerAccessNotEnabled). The access is granted to the *current* device: that is
   what the cudaSetDevice is for. */
extern "C" int peer_enable(int dev, int peer)
{
    int status = 0, prev = -1;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaDeviceEnablePeerAccess(peer, 0));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

extern "C" int peer_disable(int dev, int peer)
{
    int status = 0, prev = -1;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaDeviceDisablePeerAccess(peer));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* y = a * x on device `dev`, where x may live on another device: the kernel reads it over the
   link, one load at a time, which needs peer access from dev to x's device. Without it a GPU
   faults (an illegal address, and the process's CUDA context is lost); the emulator says
   which allocation and that cudaDeviceEnablePeerAccess is missing. */
extern "C" int peer_scale(int dev, float *d_y, const float *d_x, size_t n, float a)
{
    int status = 0, prev = -1;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    scale_shift_kernel<<<grid_for(n), 256>>>(d_x, d_y, n, a, 0.0f);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Copies between devices. cudaMemcpyPeer names both devices; with unified addressing (every
   64-bit CUDA program) cudaMemcpy with cudaMemcpyDefault finds them from the pointers.
   how: 0 cudaMemcpyPeer, 1 cudaMemcpyPeerAsync on a stream of dst_dev then a wait for it,
   2 cudaMemcpy(cudaMemcpyDefault). Peer access is not needed for any of them. */
extern "C" int peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
                         int how)
{
    int status = 0, prev = -1;
    cudaStream_t stream = NULL;

    TUT_REQUIRE(how >= 0 && how <= 2);
    CUDA_CHECK(cudaGetDevice(&prev));
    if (how == 0) {
        CUDA_CHECK(cudaMemcpyPeer(dst, dst_dev, src, src_dev, bytes));
    } else if (how == 1) {
        CUDA_CHECK(cudaSetDevice(dst_dev));
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
    } else {
        CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
    }
cleanup:
    if (stream) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Pool memory across devices. cudaDeviceEnablePeerAccess maps cudaMalloc memory only: memory
   from a stream-ordered pool (cudaMallocAsync) is reachable from another device only once the
   pool itself grants it, cudaMemPoolSetAccess(pool, {device, ProtReadWrite}), which covers
   every allocation of that pool, present and future (VMM memory has cuMemSetAccess in the same
   role). The owner always has access. Here: the default pool of `owner`, and what `reader`
   may do with it (flags: 0 none, 3 read-write, cudaMemAccessFlags). */
extern "C" int pool_access_get(int owner, int reader, int *flags)
{
    int status = 0;
    cudaMemPool_t pool;
    struct cudaMemLocation loc;
    enum cudaMemAccessFlags f = cudaMemAccessFlagsProtNone;

    TUT_REQUIRE(flags != NULL);
    loc.type = cudaMemLocationTypeDevice;
    loc.id = reader;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, owner));
    CUDA_CHECK(cudaMemPoolGetAccess(&f, pool, &loc));
    *flags = (int)f;
cleanup:
    return status;
}

extern "C" int pool_access_set(int owner, int reader, int flags)
{
    int status = 0;
    cudaMemPool_t pool;
    struct cudaMemAccessDesc desc;

    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = reader;
    desc.flags = (enum cudaMemAccessFlags)flags;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, owner));
    CUDA_CHECK(cudaMemPoolSetAccess(pool, &desc, 1));
cleanup:
    return status;
}

/* n floats from `dev`'s default pool (cudaMallocAsync on its legacy stream, then a wait: the
   memory is usable from any stream once this returns), and their release. */
extern "C" int pool_alloc_on(int dev, size_t bytes, void **out)
{
    int status = 0, prev = -1;

    TUT_REQUIRE(out != NULL);
    *out = NULL;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaMallocAsync(out, bytes, 0));
    CUDA_CHECK(cudaStreamSynchronize(0));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

extern "C" int pool_free_on(int dev, void *ptr)
{
    int status = 0, prev = -1;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaFreeAsync(ptr, 0));
    CUDA_CHECK(cudaStreamSynchronize(0));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- exercise 09.1: peer access for a group of devices ----------------------------------

/* 09.1 Peer access for every ordered pair (devs[i], devs[j]), i != j, of the n devices that
   can have it (cudaDeviceCanAccessPeer): afterwards a kernel on any of them may use the
   memory of any other. *pairs = how many ordered pairs now have it. Pairs enabled already
   (by an earlier call, or by someone else) are not an error: cudaDeviceEnablePeerAccess then
   returns cudaErrorPeerAccessAlreadyEnabled, which CUDA also keeps as the thread's "last
   error": clear it with cudaGetLastError, or the next CUDA_CHECK_LAUNCH() anywhere reports it
   as the failure of an innocent kernel. The caller's current device is restored (cleanup). */
extern "C" int peer_enable_all(const int *devs, int n, int *pairs)
{
    int status = 0, prev = -1;

    *pairs = 0;
    CUDA_CHECK(cudaGetDevice(&prev));
    // TODO(student) 09.1: for each ordered pair i != j that cudaDeviceCanAccessPeer allows: make devs[i] current, enable access to devs[j]; take cudaErrorPeerAccessAlreadyEnabled as done (and clear it with cudaGetLastError), any other error as a failure; count the pair (~16 lines)
    TUT_TODO();
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- lesson: device memory shared with another process (CUDA IPC) ---------------------------

/* Another process on the same machine may use this process's device memory: cudaIpcGetMemHandle
   turns a cudaMalloc allocation into 64 bytes (CUDA_IPC_HANDLE_SIZE) that can travel by any
   means (a pipe, a file); the other process opens them with cudaIpcOpenMemHandle and gets its
   own pointer to the same memory, the start of the whole allocation. The exporter must keep
   the memory alive until the importer has closed it (cudaIpcCloseMemHandle), and neither
   process orders its work after the other's by itself: they must tell each other (here: the
   importer synchronises before it says it is done). The emulator's devices live in one
   process: it declares these calls and answers cudaErrorNotSupported. */
extern "C" int ipc_export(void *d_ptr, void *handle /* CUDA_IPC_HANDLE_SIZE bytes */)
{
    int status = 0;
    cudaIpcMemHandle_t h;
    CUDA_CHECK(cudaIpcGetMemHandle(&h, d_ptr));
    memcpy(handle, &h, sizeof h);
cleanup:
    return status;
}

/* In the importing process: opens the handle on device `dev` (another device than the
   exporter's needs peer access between them, which the flag enables), scales the n floats
   there by `a` in place, waits, and closes it again. */
extern "C" int ipc_import_scale(const void *handle, int dev, size_t n, float a)
{
    int status = 0, prev = -1;
    cudaIpcMemHandle_t h;
    float *d = NULL;

    memcpy(&h, handle, sizeof h);
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaIpcOpenMemHandle((void **)&d, h, cudaIpcMemLazyEnablePeerAccess));
    scale_shift_kernel<<<grid_for(n), 256>>>(d, d, n, a, 0.0f);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());   /* before the exporter is told: done */
cleanup:
    if (d != NULL)
        cudaIpcCloseMemHandle(d);
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- a team: one stream, one event and one scratch buffer per device -----------------------

/* Rank r of a team works on device dev[r]. Each of its objects belongs to that device for
   ever, because it was made while that device was current:
     - stream[r]: non-blocking (cudaStreamNonBlocking), so it never waits for the legacy
       default stream of its device, nor that stream for it: nothing else synchronises with
       the team's work by accident, and a missing wait cannot hide behind a cudaMemcpy;
     - event[r]: recorded on stream[r] (an event and the stream it is recorded on must be of
       the same device); the other devices' streams wait on it (cudaStreamWaitEvent works
       across devices: it is how devices wait for each other without the host);
     - scratch[r]: scratch_elems floats of dev[r]'s memory, where the ring receives a chunk.
   Timing is off on the events: they only order work, and are cheaper so. */
#define TEAM_MAX 8
typedef struct team {
    int          ndev;
    int          dev[TEAM_MAX];
    cudaStream_t stream[TEAM_MAX];
    cudaEvent_t  event[TEAM_MAX];
    float       *scratch[TEAM_MAX];
    size_t       scratch_elems;
#if TUT_HAVE_NCCL
    ncclComm_t   comm[TEAM_MAX];   /* made at the first NCCL call: NCCL's setup takes a while */
#endif
} team;

/* Releases what exists of a team, each device's objects with that device current, and frees
   the team; also what a failed team_create left half made. */
extern "C" int team_destroy(team *t)
{
    int status = 0, prev = -1;

    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    for (int r = 0; r < t->ndev; r++)   /* nothing may still run on what goes below */
        if (t->stream[r] != NULL) {
            CUDA_CHECK(cudaSetDevice(t->dev[r]));
            CUDA_CHECK(cudaStreamSynchronize(t->stream[r]));
        }
#if TUT_HAVE_NCCL
    for (int r = 0; r < t->ndev; r++)
        if (t->comm[r] != NULL) {
            ncclCommDestroy(t->comm[r]);
            t->comm[r] = NULL;
        }
#endif
    for (int r = 0; r < t->ndev; r++) {
        CUDA_CHECK(cudaSetDevice(t->dev[r]));
        if (t->stream[r] != NULL) {
            CUDA_CHECK(cudaStreamDestroy(t->stream[r]));
            t->stream[r] = NULL;
        }
        if (t->event[r] != NULL) {
            CUDA_CHECK(cudaEventDestroy(t->event[r]));
            t->event[r] = NULL;
        }
        CUDA_CHECK(cudaFree(t->scratch[r]));
        t->scratch[r] = NULL;
    }
cleanup:
    if (t != NULL) {   /* after a failure, release the rest anyway: the handle is dead */
        for (int r = 0; r < t->ndev; r++) {
            if (cudaSetDevice(t->dev[r]) != cudaSuccess)
                continue;
            if (t->stream[r] != NULL)
                cudaStreamDestroy(t->stream[r]);
            if (t->event[r] != NULL)
                cudaEventDestroy(t->event[r]);
            cudaFree(t->scratch[r]);
        }
        free(t);
    }
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* A team over devs[0..ndev-1] (distinct devices): for each rank r, with dev[r] current, a
   non-blocking stream, an event without timing, and (scratch_elems > 0) a cudaMalloc of
   scratch_elems floats. On failure (a device's memory is full) everything made so far, on
   every device, is released by team_destroy (cleanup), and *out stays NULL. */
extern "C" int team_create(team **out, const int *devs, int ndev, size_t scratch_elems)
{
    int status = 0, prev = -1, count = 0;
    team *t = NULL;

    *out = NULL;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaGetDeviceCount(&count));
    TUT_REQUIRE(ndev >= 1 && ndev <= TEAM_MAX && ndev <= count);
    for (int r = 0; r < ndev; r++) {
        TUT_REQUIRE(devs[r] >= 0 && devs[r] < count);
        for (int q = 0; q < r; q++)
            TUT_REQUIRE(devs[q] != devs[r]);
    }
    t = (team *)calloc(1, sizeof *t);
    if (t == NULL) {
        status = tut_record((int)cudaErrorMemoryAllocation, "calloc", __FILE__, __LINE__);
        goto cleanup;
    }
    t->ndev = ndev;
    t->scratch_elems = scratch_elems;
    for (int r = 0; r < ndev; r++)
        t->dev[r] = devs[r];   /* before anything is made: team_destroy walks these */
    for (int r = 0; r < ndev; r++) {
        /* what is made now belongs to the current device for ever */
        CUDA_CHECK(cudaSetDevice(t->dev[r]));
        CUDA_CHECK(cudaStreamCreateWithFlags(&t->stream[r], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&t->event[r], cudaEventDisableTiming));
        if (scratch_elems > 0)
            CUDA_CHECK(cudaMalloc(&t->scratch[r], scratch_elems * sizeof(float)));
    }
    *out = t;
    t = NULL;
cleanup:
    if (t != NULL)
        team_destroy(t);
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* What a rank holds, for driver.py's checks and the benchmarks (any pointer may be NULL). */
extern "C" int team_rank(team *t, int r, int *dev, cudaStream_t *stream, cudaEvent_t *event,
                         float **scratch)
{
    int status = 0;
    TUT_REQUIRE(t != NULL && r >= 0 && r < t->ndev);
    if (dev) *dev = t->dev[r];
    if (stream) *stream = t->stream[r];
    if (event) *event = t->event[r];
    if (scratch) *scratch = t->scratch[r];
cleanup:
    return status;
}

/* Uses rank r's objects the way only their own device allows: a kernel on its stream (a
   launch into another device's stream fails), its event recorded there (an event recorded on
   another device's stream fails), a wait for it. */
extern "C" int team_probe(team *t, int r)
{
    int status = 0, prev = -1;
    TUT_REQUIRE(t != NULL && r >= 0 && r < t->ndev);
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(t->dev[r]));
    if (t->scratch[r] != NULL) {
        scale_shift_kernel<<<1, 256, 0, t->stream[r]>>>(t->scratch[r], t->scratch[r], 1, 1.0f,
                                                         0.0f);
        CUDA_CHECK_LAUNCH();
    }
    CUDA_CHECK(cudaEventRecord(t->event[r], t->stream[r]));
    CUDA_CHECK(cudaEventSynchronize(t->event[r]));
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Waits for every rank's stream, each device current in turn: cudaDeviceSynchronize would
   only wait for the current device. */
extern "C" int team_synchronize(team *t)
{
    int status = 0, prev = -1;
    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    for (int r = 0; r < t->ndev; r++) {
        CUDA_CHECK(cudaSetDevice(t->dev[r]));
        CUDA_CHECK(cudaStreamSynchronize(t->stream[r]));
    }
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Queues on each rank's stream a kernel that sets all n floats of bufs[r] (on dev[r]) to r + 1. */
extern "C" int team_fill(team *t, float *const *bufs, size_t n)
{
    int status = 0, prev = -1;
    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    for (int r = 0; r < t->ndev; r++) {
        CUDA_CHECK(cudaSetDevice(t->dev[r]));
        scale_shift_kernel<<<grid_for(n), 256, 0, t->stream[r]>>>(bufs[r], bufs[r], n, 0.0f,
                                                                   (float)(r + 1));
        CUDA_CHECK_LAUNCH();
    }
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* Queues on each rank's stream a copy of the next rank's bufs[(r+1) % N] into dst[r] (on
   dev[r]): a read of another device's memory, which needs that device's work to be done. */
extern "C" int team_shift(team *t, float *const *bufs, float *const *dst, size_t n)
{
    int status = 0;
    TUT_REQUIRE(t != NULL);
    for (int r = 0; r < t->ndev; r++) {
        int next = (r + 1) % t->ndev;
        CUDA_CHECK(cudaMemcpyPeerAsync(dst[r], t->dev[r], bufs[next], t->dev[next],
                                       n * sizeof(float), t->stream[r]));
    }
cleanup:
    return status;
}

// ---- exercise 09.2: devices that wait for each other ---------------------------------------

/* 09.2 A barrier across the team, with no host wait: what is queued on any rank's stream
   after it starts only once everything queued on every rank's stream before it is done.
   Record each rank's event on its stream, with its device current (an event and the stream it
   is recorded on must belong to the same device); then make each rank's stream wait
   (cudaStreamWaitEvent, which works across devices) for every other rank's event. The call
   returns at once: the devices wait, the host does not (cudaDeviceSynchronize would make the
   host wait, and for the current device only). */
extern "C" int team_barrier(team *t)
{
    int status = 0, prev = -1;

    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    // TODO(student) 09.2: for each rank: its device current, cudaEventRecord(event[r], stream[r]); then for each rank r and each other rank q: cudaStreamWaitEvent(stream[r], event[q], 0) (~9 lines)
    TUT_TODO();
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- exercise 09.3: an array split over the devices ---------------------------------------

/* 09.3 h_y = a * h_x + b for n floats, rank r taking part r (part_of) on its own device and
   stream, all ranks at once: with dev[r] current, a cudaMallocAsync of its part on stream[r]
   (from the memory pool of that stream's device: each device has its own), copy in, kernel in
   place, copy out, cudaFreeAsync, all on stream[r]; only then wait for every stream. Waiting
   inside the loop would make the devices take turns. Empty parts (n < ndev) do nothing. */
extern "C" int team_scale_shift(team *t, const float *h_x, float *h_y, size_t n, float a,
                                float b)
{
    int status = 0, prev = -1;
    float *d_part[TEAM_MAX] = {NULL};   /* what a failure must give back, rank by rank */

    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    // TODO(student) 09.3: for each rank with a non-empty part: its device current; cudaMallocAsync d_part[r] on its stream; cudaMemcpyAsync in, scale_shift_kernel<<<grid_for(len), 256, 0, stream>>> in place, cudaMemcpyAsync out, cudaFreeAsync (then d_part[r] = NULL); after the loop, cudaStreamSynchronize every rank's stream (~20 lines)
    TUT_TODO();
cleanup:
    if (status != 0) {   /* give back what was allocated, and let nothing run on into h_y */
        for (int r = 0; r < t->ndev; r++) {
            if (cudaSetDevice(t->dev[r]) != cudaSuccess)
                continue;
            if (d_part[r] != NULL)
                cudaFreeAsync(d_part[r], t->stream[r]);
            cudaStreamSynchronize(t->stream[r]);
        }
    }
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- exercise 09.4: managed memory split over the devices ---------------------------------

/* What the driver knows of [ptr, ptr + bytes) of managed memory: the preferred location all its
   pages were advised, and the device they were last prefetched to (what was asked, not
   whether the move is done); each is cudaInvalidDeviceId (-2) where the pages disagree or
   were given none. */
extern "C" int managed_where(const void *ptr, size_t bytes, int *preferred, int *prefetched)
{
    int status = 0;
    CUDA_CHECK(cudaMemRangeGetAttribute(preferred, sizeof *preferred,
                                        cudaMemRangeAttributePreferredLocation, ptr, bytes));
    CUDA_CHECK(cudaMemRangeGetAttribute(prefetched, sizeof *prefetched,
                                        cudaMemRangeAttributeLastPrefetchLocation, ptr, bytes));
cleanup:
    return status;
}

/* Lesson code for the driver's warm-up: the first managed memory a device holds makes the driver
   set up state for that device that it keeps for the life of the process, which a test would
   report as its leak (09.4 was blamed for 42 MiB on an H200, 2026-12-02, while the warm-up
   only wrote a managed array from the host). Advice, a prefetch to dev, a kernel there and a prefetch back, once per device. */
extern "C" int managed_touch(float *m, size_t n, int dev)
{
    int status = 0, prev = -1;
    struct cudaMemLocation loc, host;

    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));
    loc.type = cudaMemLocationTypeDevice;
    loc.id = dev;
    host.type = cudaMemLocationTypeHost;
    host.id = 0;
    CUDA_CHECK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, loc));
    CUDA_CHECK(cudaMemPrefetchAsync(m, n * sizeof(float), loc, 0, 0));
    scale_shift_kernel<<<grid_for(n), 256>>>(m, m, n, 1.0f, 0.0f);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseUnsetPreferredLocation, loc));
    CUDA_CHECK(cudaMemPrefetchAsync(m, n * sizeof(float), host, 0, 0));
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* 09.4 m = a * m + b in place, m managed memory (cudaMallocManaged) of n floats, rank r taking
   part r on its device. The pages of part r should live on dev[r]: advise that
   (cudaMemAdviseSetPreferredLocation, so that the driver keeps them there rather than moving
   them at the first touch from elsewhere) and move them there before the kernel needs them
   (cudaMemPrefetchAsync on stream[r]: otherwise the kernel's page faults move them, a few at a
   time). Then the kernel on stream[r], and after the loop a wait for every stream. The host
   may read m once the call returns: its pages come back on demand. */
extern "C" int team_scale_shift_managed(team *t, float *m, size_t n, float a, float b)
{
    int status = 0, prev = -1;

    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    // TODO(student) 09.4: for each rank with a non-empty part: a cudaMemLocation of type cudaMemLocationTypeDevice and id dev[r]; its device current; cudaMemAdvise(part, bytes, cudaMemAdviseSetPreferredLocation, loc); cudaMemPrefetchAsync(part, bytes, loc, 0, stream); the kernel on the stream; then synchronise every stream (~18 lines)
    TUT_TODO();
cleanup:
    if (status != 0)   /* nothing may still run on m once the caller has it back */
        for (int r = 0; r < t->ndev; r++)
            if (cudaSetDevice(t->dev[r]) == cudaSuccess)
                cudaStreamSynchronize(t->stream[r]);
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

// ---- exercise 09.5: all-reduce, a ring by hand ------------------------------------------

/* 09.5 Queues an all-reduce: afterwards every rank's buffer bufs[r] (n floats on dev[r]) holds
   the element-wise sum of all the ranks' buffers. A ring of N ranks, rank r receiving from
   rank r-1 (mod N) only, over the buffers cut into N chunks (part_of(n, N, c)):
     - reduce-scatter, steps s = 0 .. N-2: rank r copies chunk (r-1-s) mod N of rank r-1's
       buffer into its scratch (cudaMemcpyPeerAsync on its own stream) and adds it into its
       own chunk (add_kernel). After N-1 steps rank r holds the whole sum of chunk (r+1) mod N;
     - all-gather, steps s = 0 .. N-2: rank r copies chunk (r-s) mod N of rank r-1's buffer,
       which is whole there, into the same chunk of its own buffer.
   Each rank sends and receives about n/N floats per step, 2(N-1)/N x n in all, whatever N:
   that is why rings are used. Before a rank reads its neighbour's chunk, its stream must wait
   (cudaStreamWaitEvent) for the neighbour's previous step (event[r-1], recorded at the end of
   every step, after all ranks have queued their waits of that step). Begin by recording every
   rank's event, so that the first step also waits for what the caller queued. C's % of a
   negative number is negative: add N before taking it. Only queues: the caller waits
   (ring_allreduce below). N = 1 is a ring too: nothing to do. */
extern "C" int ring_allreduce_queue(team *t, float *const *bufs, size_t n)
{
    int status = 0, prev = -1, N = 0;

    TUT_REQUIRE(t != NULL);
    N = t->ndev;
    TUT_REQUIRE(N == 1 || (n + N - 1) / N <= t->scratch_elems);   /* a chunk fits the scratch */
    CUDA_CHECK(cudaGetDevice(&prev));
    // TODO(student) 09.5: record every rank's event; then for the two phases, for each step s: for each rank r (from = (r + N - 1) % N, chunk c as above): its device current, wait for event[from], cudaMemcpyPeerAsync the chunk from bufs[from] (reduce-scatter, phase 0: into scratch, then add_kernel into bufs[r]; all-gather, phase 1: straight into bufs[r]); after all ranks of the step, record every rank's event (~28 lines)
    TUT_TODO();
cleanup:
    if (prev >= 0)
        cudaSetDevice(prev);
    return status;
}

/* The all-reduce as a caller wants it: queued, then waited for on every device. */
extern "C" int ring_allreduce(team *t, float *const *bufs, size_t n)
{
    int status = 0;
    int queued = ring_allreduce_queue(t, bufs, n);
    int waited = t != NULL ? team_synchronize(t) : 0;   /* after a failure too: nothing runs on */
    status = queued != 0 ? queued : waited;
    return status;
}

// ---- lesson: the same all-reduce through NCCL ---------------------------------------------

/* NCCL's errors are not CUDA's: they become chapter errors (Python's LibraryError), named. */
#define NCCL_ERR_BASE (TUT_ERR_LIBRARY - 1)
#define TUT_ERR_NO_NCCL (TUT_ERR_LIBRARY - 50)

#if TUT_HAVE_NCCL
#define NCCL_CHECK(expr)                                                                  \
    do {                                                                                  \
        ncclResult_t nccl_r_ = (expr);                                                    \
        if (nccl_r_ != ncclSuccess) {                                                     \
            status = tut_record_error(NCCL_ERR_BASE - (int)nccl_r_, "NCCL_ERROR", __FILE__, \
                                      __LINE__, "%s -> %s", #expr,                        \
                                      ncclGetErrorString(nccl_r_));                       \
            goto cleanup;                                                                 \
        }                                                                                 \
    } while (0)
#endif

/* NCCL's version (e.g. 22703 for 2.27.3), or 0 when this library was built without NCCL. */
extern "C" int nccl_version(int *version)
{
    int status = 0;
    *version = 0;
#if TUT_HAVE_NCCL
    NCCL_CHECK(ncclGetVersion(version));
cleanup:
#endif
    return status;
}

/* Queues NCCL's all-reduce of the same buffers, in place, on the team's streams. One host
   thread drives every rank, so the calls go between ncclGroupStart and ncclGroupEnd: a
   collective returns only once every rank has joined it, and without the group the first call
   would wait for ranks this thread has not reached yet, for ever. The communicators (one per
   rank, made together by ncclCommInitAll) are made at the first call and kept in the team. */
extern "C" int nccl_allreduce_queue(team *t, float *const *bufs, size_t n)
{
    int status = 0;
#if TUT_HAVE_NCCL
    int in_group = 0, prev = -1;

    TUT_REQUIRE(t != NULL);
    CUDA_CHECK(cudaGetDevice(&prev));
    if (t->comm[0] == NULL)
        NCCL_CHECK(ncclCommInitAll(t->comm, t->ndev, t->dev));
    NCCL_CHECK(ncclGroupStart());
    in_group = 1;
    for (int r = 0; r < t->ndev; r++)
        NCCL_CHECK(ncclAllReduce(bufs[r], bufs[r], n, ncclFloat, ncclSum, t->comm[r],
                                 t->stream[r]));
    in_group = 0;
    NCCL_CHECK(ncclGroupEnd());
    /* NCCL handles the errors of its own CUDA calls (a peer access enabled already, when it sets
       up its links), but the runtime keeps the last one as this thread's last error: it is
       NCCL's, handled, and must not fail the next kernel launch check of ours */
    (void)cudaGetLastError();
cleanup:
    if (in_group)
        ncclGroupEnd();
    if (prev >= 0)
        cudaSetDevice(prev);
#else
    (void)t; (void)bufs; (void)n;
    status = tut_record_error(TUT_ERR_NO_NCCL, "NO_NCCL", __FILE__, __LINE__,
                              "this library was built without NCCL (make found no nccl.h and "
                              "libnccl: see tools/find_nccl.sh, or make NCCL_HOME=...)");
#endif
    return status;
}

extern "C" int nccl_allreduce(team *t, float *const *bufs, size_t n)
{
    int status = 0;
    int queued = nccl_allreduce_queue(t, bufs, n);
    int waited = t != NULL ? team_synchronize(t) : 0;
    status = queued != 0 ? queued : waited;
    return status;
}

/* NCCL the way training jobs run it: one process (or thread) per GPU, each the only rank it
   drives. One of them makes the communicator's name, ncclGetUniqueId (128 bytes), and hands it
   to every other by any means it has (a pipe, an environment variable, torch.distributed's
   store, MPI_Bcast); each then calls ncclCommInitRank(&comm, nranks, id, rank) with its own
   device current. That call returns once all nranks have joined, so no group is needed: each
   caller drives one rank. Then a collective per rank, in its own stream, as before. */
extern "C" int nccl_unique_id(void *id /* NCCL_UNIQUE_ID_BYTES = 128 */)
{
    int status = 0;
#if TUT_HAVE_NCCL
    ncclUniqueId u;
    NCCL_CHECK(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
cleanup:
#else
    (void)id;
    status = tut_record_error(TUT_ERR_NO_NCCL, "NO_NCCL", __FILE__, __LINE__,
                              "this library was built without NCCL");
#endif
    return status;
}

/* Rank `rank` of `nranks` on device `dev`: joins the communicator named by `id`, sums the n
   floats of h across every rank (in place, on a stream of its device), and leaves. `queued`,
   when not NULL, is called once the all-reduce is queued, before anything waits for it:
   threads of one process use it as a barrier for the emulator, which runs a collective when a
   stream is waited for and so needs every rank's call queued first (a GPU's NCCL does not:
   there a rank's kernel simply waits for the others). */
typedef void (*nccl_queued_fn)(int rank);

extern "C" int nccl_rank_allreduce(const void *id, int nranks, int rank, int dev, float *h,
                                   size_t n, nccl_queued_fn queued)
{
    int status = 0;
#if TUT_HAVE_NCCL
    int prev = -1;
    ncclUniqueId u;
    ncclComm_t comm = NULL;
    cudaStream_t stream = NULL;
    float *d = NULL;

    TUT_REQUIRE(id != NULL && h != NULL && n > 0);
    memcpy(&u, id, sizeof u);
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(dev));          /* the rank's device: NCCL takes the current one */
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, stream));
    NCCL_CHECK(ncclCommInitRank(&comm, nranks, u, rank));
    NCCL_CHECK(ncclAllReduce(d, d, n, ncclFloat, ncclSum, comm, stream));
    if (queued != NULL)
        queued(rank);
    /* into pageable memory: returns once the copy, and so the all-reduce, is done */
    CUDA_CHECK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    (void)cudaGetLastError();   /* what NCCL's set-up handled is no error of ours */
cleanup:
    if (comm != NULL)
        ncclCommDestroy(comm);
    if (stream != NULL) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    cudaFree(d);
    if (prev >= 0)
        cudaSetDevice(prev);
#else
    (void)id; (void)nranks; (void)rank; (void)dev; (void)h; (void)n; (void)queued;
    status = tut_record_error(TUT_ERR_NO_NCCL, "NO_NCCL", __FILE__, __LINE__,
                              "this library was built without NCCL");
#endif
    return status;
}
