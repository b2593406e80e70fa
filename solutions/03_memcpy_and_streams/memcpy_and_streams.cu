// SPDX-License-Identifier: MIT
/*
 * 03 memcpy_and_streams: moving data between host and device, and hiding the moves behind work.
 *
 * A GPU reaches host memory over PCIe (or NVLink) through DMA copy engines. DMA needs host pages
 * that the OS cannot move or swap out: "pinned" (page-locked) memory. From ordinary (pageable)
 * memory the driver first copies into a pinned staging buffer of its own, chunk by chunk, which
 * is why pageable copies are slower and why cudaMemcpyAsync from pageable memory returns only
 * when the data has been staged: it is not really asynchronous. Pinned memory is costly to get
 * (the OS must lock every page): pin once, reuse.
 *
 * Work in one stream runs in order; work in different streams may overlap. An H200 has separate
 * copy engines for each direction, so a host-to-device copy, a kernel and a device-to-host copy
 * from three different streams can all run at the same time.
 *
 * Build: make                 Run: make run CH=03 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 03.1 .. 03.4 (grep -n "TODO(student)" this file)
 * The timing code for --bench is in memcpy_bench.cu, linked into the same library.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <atomic>
#include <stdlib.h>

// ---- kernels ------------------------------------------------------------------------------

/* y[i] = a * x[i] + b, grid-stride (x == y allowed). Transfer-bound on purpose: 8 bytes of
   device traffic per 8 bytes of PCIe traffic, so the copies, not the kernel, set the pace. */
__global__ void scale_shift_kernel(const float *x, float *y, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i] + b;
}

static inline int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

// ---- lesson: pinned host memory, counted --------------------------------------------------

/* Host bytes this library has pinned and not yet released. Python checks it returns to its
   start value: pinned memory leaks are invisible to cudaMemGetInfo, yet they take RAM the OS
   can never page out. Atomic: ctypes releases the GIL, so two Python threads may call in. */
static std::atomic<long long> pinned_bytes(0);

extern "C" long long pinned_bytes_in_use(void)
{
    return pinned_bytes.load();
}

/* cudaMallocHost: fresh page-locked memory, already mapped for the device's DMA engines. */
extern "C" int pinned_alloc(void **h_ptr, size_t bytes)
{
    int status = 0;
    *h_ptr = NULL;
    CUDA_CHECK(cudaMallocHost(h_ptr, bytes));
    pinned_bytes += (long long)bytes;
cleanup:
    return status;
}

/* The size comes from the caller (the Python class keeps it): CUDA does not say how big a
   pinned block is. */
extern "C" int pinned_free(void *h_ptr, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaFreeHost(h_ptr));
    pinned_bytes -= (long long)bytes;
cleanup:
    return status;
}

/* cudaHostRegister: pin memory that already exists, such as a NumPy array's buffer. Registering
   a range that overlaps one already registered fails with cudaErrorHostMemoryAlreadyRegistered;
   two disjoint ranges that share a page both register (measured on an H200). The OS locks whole
   pages, so a neighbour's bytes in the same page stay locked as long as either registration. */
extern "C" int host_register(void *h_ptr, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaHostRegister(h_ptr, bytes, cudaHostRegisterDefault));
    pinned_bytes += (long long)bytes;
cleanup:
    return status;
}

extern "C" int host_unregister(void *h_ptr, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaHostUnregister(h_ptr));
    pinned_bytes -= (long long)bytes;
cleanup:
    return status;
}

/* What CUDA knows about an address: 0 unregistered (pageable), 1 host (pinned), 2 device,
   3 managed (cudaMemoryType). */
extern "C" int memory_type(const void *ptr, int *type)
{
    int status = 0;
    struct cudaPointerAttributes attr;
    CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
    *type = (int)attr.type;
cleanup:
    return status;
}

// ---- lesson: copies and streams -----------------------------------------------------------

/* kind: 1 host to device, 2 device to host, 3 device to device (cudaMemcpyKind values). */
extern "C" int copy_bytes(void *dst, const void *src, size_t bytes, int kind)
{
    int status = 0;
    TUT_REQUIRE(kind >= 1 && kind <= 3);
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, (cudaMemcpyKind)kind));
cleanup:
    return status;
}

/* Streams as handles, for driver.py's Stream class (create/destroy in pairs). Blocking streams
   (cudaStreamCreate, not cudaStreamNonBlocking): work on the legacy default stream 0, like the
   benchmark's timing events, waits for them and they for it. */
extern "C" int stream_create(cudaStream_t *stream)
{
    int status = 0;
    *stream = NULL;
    CUDA_CHECK(cudaStreamCreate(stream));
cleanup:
    return status;
}

extern "C" int stream_destroy(cudaStream_t stream)
{
    int status = 0;
    CUDA_CHECK(cudaStreamDestroy(stream));
cleanup:
    return status;
}

extern "C" int stream_synchronize(cudaStream_t stream)
{
    int status = 0;
    CUDA_CHECK(cudaStreamSynchronize(stream));
cleanup:
    return status;
}

/* Queues the copy and returns. The host buffer must stay alive, and unchanged, until the stream
   has passed this point: that is what Stream.synchronize() in driver.py waits for. */
extern "C" int copy_async(void *dst, const void *src, size_t bytes, int kind, cudaStream_t stream)
{
    int status = 0;
    TUT_REQUIRE(kind >= 1 && kind <= 3);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, (cudaMemcpyKind)kind, stream));
cleanup:
    return status;
}

/* Queues scale_shift_kernel on `stream` and returns: the kernel starts once the work queued
   before it in the same stream is done. */
extern "C" int launch_scale_shift(float *d_buf, size_t n, float a, float b, cudaStream_t stream)
{
    int status = 0;
    scale_shift_kernel<<<grid_for(n), 256, 0, stream>>>(d_buf, d_buf, n, a, b);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- exercises ----------------------------------------------------------------------------

/* 03.1 h_out = h_in through the device, with both host arrays pinned for the duration of the
   call (cudaHostRegister) and released again on every path, errors included. */
extern "C" int pinned_roundtrip(void *h_in, void *h_out, size_t bytes)
{
    int status = 0;
    void *d_buf = NULL;

    // @solution 03.1: declare two flags for what is registered; register h_in and h_out (cudaHostRegisterDefault), setting each flag on success; cudaMalloc d_buf; copy h_in -> d_buf -> h_out (~9 lines)
    int in_pinned = 0, out_pinned = 0;   /* what to undo in cleanup */
    CUDA_CHECK(cudaHostRegister(h_in, bytes, cudaHostRegisterDefault));
    in_pinned = 1;
    CUDA_CHECK(cudaHostRegister(h_out, bytes, cudaHostRegisterDefault));
    out_pinned = 1;
    CUDA_CHECK(cudaMalloc(&d_buf, bytes));
    CUDA_CHECK(cudaMemcpy(d_buf, h_in, bytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(h_out, d_buf, bytes, cudaMemcpyDeviceToHost));
    // @stub TUT_TODO();
    // @end
cleanup:
    cudaFree(d_buf);
    // @solution 03.1: unregister exactly what was registered, no more: unregistering memory that is not registered is an error too (~4 lines)
    if (in_pinned)
        cudaHostUnregister(h_in);
    if (out_pinned)
        cudaHostUnregister(h_out);
    // @end
    return status;
}

/* 03.2 h_y = a * h_x + b, with every step queued on a stream of its own: copy h_x into d_buf,
   kernel in place, copy out to h_y, then wait for that stream (not for the whole device).
   h_x and h_y are pinned; d_buf (n floats) belongs to the caller. Nothing in the cleanup
   waits for the GPU (cudaStreamDestroy returns at once), so without the synchronisation the
   caller would read h_y while the copy into it is still running. */
extern "C" int stream_scale_shift(const float *h_x, float *h_y, float *d_buf, size_t n,
                                  float a, float b)
{
    int status = 0;
    cudaStream_t stream = NULL;

    // @solution 03.2: bytes = n floats; create the stream; cudaMemcpyAsync in, scale_shift_kernel<<<grid_for(n), 256, 0, stream>>> on d_buf in place, cudaMemcpyAsync out; cudaStreamSynchronize (~8 lines)
    size_t bytes = n * sizeof(float);
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(cudaMemcpyAsync(d_buf, h_x, bytes, cudaMemcpyHostToDevice, stream));
    scale_shift_kernel<<<grid_for(n), 256, 0, stream>>>(d_buf, d_buf, n, a, b);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpyAsync(h_y, d_buf, bytes, cudaMemcpyDeviceToHost, stream));
    /* until here nothing guarantees h_y holds the result: the calls above only queued work */
    CUDA_CHECK(cudaStreamSynchronize(stream));
    // @stub TUT_TODO();
    // @end
cleanup:
    if (stream) {
        if (status != 0)   /* a failure after queuing: let nothing run on into h_y */
            cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);   /* returns at once; freed when its work is done */
    }
    return status;
}

/* A pipeline owns nstreams streams and one device buffer of chunk_elems floats per stream:
   nstreams * chunk_elems * 4 bytes of device memory, whatever the size of the arrays it runs
   over. Creating them once and reusing them keeps cudaMalloc (tens of microseconds) out of the
   loop, and out of the timings. */
#define PIPE_MAX_STREAMS 8
typedef struct pipeline {
    int          nstreams;
    size_t       chunk_elems;
    cudaStream_t streams[PIPE_MAX_STREAMS];
    float       *d_buf[PIPE_MAX_STREAMS];
} pipeline;

extern "C" int pipeline_destroy(pipeline *p);

extern "C" int pipeline_create(pipeline **out, size_t chunk_elems, int nstreams,
                               size_t budget_bytes)
{
    int status = 0;
    pipeline *p = NULL;

    *out = NULL;
    TUT_REQUIRE(nstreams >= 1 && nstreams <= PIPE_MAX_STREAMS && chunk_elems >= 1);
    TUT_REQUIRE(chunk_elems <= budget_bytes / sizeof(float) / (size_t)nstreams);
    p = (pipeline *)calloc(1, sizeof *p);
    if (p == NULL) {
        status = tut_record((int)cudaErrorMemoryAllocation, "calloc", __FILE__, __LINE__);
        goto cleanup;
    }
    p->nstreams = nstreams;
    p->chunk_elems = chunk_elems;
    for (int s = 0; s < nstreams; s++) {
        CUDA_CHECK(cudaStreamCreate(&p->streams[s]));
        CUDA_CHECK(cudaMalloc(&p->d_buf[s], chunk_elems * sizeof(float)));
    }
    *out = p;
    p = NULL;
cleanup:
    if (p != NULL)
        pipeline_destroy(p);
    return status;
}

extern "C" int pipeline_destroy(pipeline *p)
{
    int status = 0;
    TUT_REQUIRE(p != NULL);
    for (int s = 0; s < p->nstreams; s++) {
        CUDA_CHECK(cudaFree(p->d_buf[s]));
        p->d_buf[s] = NULL;
        if (p->streams[s])
            CUDA_CHECK(cudaStreamDestroy(p->streams[s]));
        p->streams[s] = NULL;
    }
cleanup:
    if (p != NULL) {   /* after a failure, release the rest anyway: the handle is dead */
        for (int s = 0; s < p->nstreams; s++) {
            cudaFree(p->d_buf[s]);
            if (p->streams[s])
                cudaStreamDestroy(p->streams[s]);
        }
        free(p);
    }
    return status;
}

/* 03.3 h_y = a * h_x + b for n floats, streamed through the pipeline's device buffers. Chunk c
   goes to stream c % nstreams and that stream's buffer: copy in, kernel in place, copy out.
   Inside a stream the three run in order, so a buffer is refilled only after its previous chunk
   has been copied out; across streams, chunk c's copy-in overlaps chunk c-1's kernel and chunk
   c-2's copy-out. That is double (or triple...) buffering, with the streams doing the waiting.
   h_x and h_y should be pinned: from pageable memory the copies cannot overlap anything. */
extern "C" int pipeline_run(pipeline *p, const float *h_x, float *h_y, size_t n, float a, float b)
{
    int status = 0;

    TUT_REQUIRE(p != NULL);
    // @solution 03.3: loop over the chunks, queuing copy in / kernel / copy out on stream c % nstreams with its buffer (the last chunk is shorter); then synchronise every stream (~12 lines)
    for (size_t first = 0, c = 0; first < n; first += p->chunk_elems, c++) {
        int s = (int)(c % (size_t)p->nstreams);
        size_t len = n - first < p->chunk_elems ? n - first : p->chunk_elems;
        size_t bytes = len * sizeof(float);
        CUDA_CHECK(cudaMemcpyAsync(p->d_buf[s], h_x + first, bytes, cudaMemcpyHostToDevice,
                                   p->streams[s]));
        scale_shift_kernel<<<grid_for(len), 256, 0, p->streams[s]>>>(p->d_buf[s], p->d_buf[s],
                                                                      len, a, b);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaMemcpyAsync(h_y + first, p->d_buf[s], bytes, cudaMemcpyDeviceToHost,
                                   p->streams[s]));
    }
    for (int s = 0; s < p->nstreams; s++)
        CUDA_CHECK(cudaStreamSynchronize(p->streams[s]));
    // @stub TUT_TODO();
    // @end
cleanup:
    /* A failure half way may leave copies queued that still read h_x or write h_y: wait for
       them, or the caller could free those arrays under a running DMA. */
    if (status != 0 && p != NULL)
        for (int s = 0; s < p->nstreams; s++)
            cudaStreamSynchronize(p->streams[s]);
    return status;
}

/* 03.4 The chunk size, in floats, for a pipeline of nstreams buffers over n floats (n >= 1):
   the largest multiple of 64 floats such that
     - nstreams buffers of it fit in budget_bytes, and
     - it is no larger than ceil(n / (2 * nstreams)) rounded up to a multiple of 64: about two
       chunks per stream, so the copies have something to overlap with. The rounding up can
       leave fewer for a small n (n = 100 on 4 streams: 2 chunks in all), where there is too
       little to move for the overlap to matter.
   64 floats = 256 bytes: every chunk then starts 256-byte aligned within an aligned array.
   Returns 0 when not even 64 floats per stream fit in the budget. */
extern "C" size_t choose_chunk(size_t n, size_t budget_bytes, int nstreams)
{
    // @solution 03.4: compute both limits in whole 64-float units and return the smaller (~4 lines)
    size_t by_budget = budget_bytes / sizeof(float) / (size_t)nstreams / 64 * 64;
    size_t per_stream = (n + 2 * (size_t)nstreams - 1) / (2 * (size_t)nstreams);
    size_t by_overlap = (per_stream + 63) / 64 * 64;
    return by_budget < by_overlap ? by_budget : by_overlap;
    // @stub return 0;
    // @end
}
