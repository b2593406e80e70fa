// SPDX-License-Identifier: MIT
/*
 * 05 unified_memory: one pointer for host and device, and what it costs to make it fast.
 *
 * cudaMallocManaged returns an address that is valid on the host and on the device. The data
 * lives in one place at a time (per page): a processor that touches a page which is elsewhere
 * takes a page fault, and the driver migrates the page. Faults wait for the host's driver to
 * service them, batch after batch, so data moved by faults crawls; cudaMemPrefetchAsync moves
 * a whole range in bulk, in stream order, before anyone touches it. cudaMemAdvise tells the driver how a range will be
 * used (read by everyone, kept in one place, mapped for a processor) so it moves less.
 *
 * CUDA 13 names places with a struct cudaMemLocation {type, id}; CUDA 12 and older passed an
 * int device, with cudaCpuDeviceId (-1) for the host. loc() below builds one from that int.
 *
 * Build: make                 Run: make run CH=05 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 05.1 .. 05.4 (grep -n "TODO(student)" this file)
 * Managed buffers are owned by Python (tut.ManagedArray, a NumPy view with no copy). The timing
 * code for --bench is in unified_bench.cu, linked into the same library.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <stdlib.h>

// ---- kernels ------------------------------------------------------------------------------

/* x[i] = a * x[i] + b in place, grid-stride: the kernel every exercise migrates data for. */
__global__ void scale_shift_kernel(float *x, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = a * x[i] + b;
}

/* out[i] = table[idx[i]]: every thread of every SM reads the table, at random places. */
__global__ void lut_gather_kernel(const float *table, const int *idx, float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = table[idx[i]];
}

static inline int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

/* CUDA 12's int device, as CUDA 13's location: -1 (cudaCpuDeviceId) is the host. */
static inline struct cudaMemLocation loc(int device)
{
    struct cudaMemLocation l;
    l.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    l.id = device == cudaCpuDeviceId ? 0 : device;
    return l;
}

// ---- lesson: what CUDA knows about a pointer and a device ----------------------------------

/* cudaMemoryType: 0 unregistered (pageable host), 1 host (pinned), 2 device, 3 managed. */
extern "C" int memory_type(const void *ptr, int *type, int *device)
{
    int status = 0;
    struct cudaPointerAttributes attr;
    CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
    *type = (int)attr.type;
    *device = attr.device;
cleanup:
    return status;
}

/* managed: cudaMallocManaged works at all. concurrent: the host may touch managed memory
   while kernels run, and prefetches to the device are allowed (0 on Windows, WSL and some
   virtual machines). pageable: the device can reach ordinary malloc'd memory too. */
extern "C" int device_caps(int device, int *managed, int *concurrent, int *pageable)
{
    int status = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(managed, cudaDevAttrManagedMemory, device));
    CUDA_CHECK(cudaDeviceGetAttribute(concurrent, cudaDevAttrConcurrentManagedAccess, device));
    CUDA_CHECK(cudaDeviceGetAttribute(pageable, cudaDevAttrPageableMemoryAccess, device));
cleanup:
    return status;
}

extern "C" int pinned_alloc(void **h_ptr, size_t bytes)
{
    int status = 0;
    *h_ptr = NULL;
    CUDA_CHECK(cudaMallocHost(h_ptr, bytes));
cleanup:
    return status;
}

extern "C" int pinned_free(void *h_ptr)
{
    int status = 0;
    CUDA_CHECK(cudaFreeHost(h_ptr));
cleanup:
    return status;
}

// ---- lesson: moving managed memory, and advice ----------------------------------------------

/* Moves [ptr, ptr + bytes) to `device` (-1: the host) and waits for it. The range is widened
   to whole pages. Asynchronous in CUDA: the wait is here so that Python can call it alone. */
extern "C" int managed_prefetch(const void *ptr, size_t bytes, int device)
{
    int status = 0;
    CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, loc(device), 0, 0));
    CUDA_CHECK(cudaStreamSynchronize(0));
cleanup:
    return status;
}

/* advice: a cudaMemoryAdvise value (1 set read-mostly ... 6 unset accessed-by); device -1 is
   the host. Advice moves nothing by itself: it changes what the next fault or prefetch does. */
extern "C" int managed_advise(const void *ptr, size_t bytes, int advice, int device)
{
    int status = 0;
    CUDA_CHECK(cudaMemAdvise(ptr, bytes, (enum cudaMemoryAdvise)advice, loc(device)));
cleanup:
    return status;
}

/* One int-valued cudaMemRangeAttribute of a managed range: 1 read-mostly, 2 preferred
   location, 4 last prefetch location (devices as ints, -1 host, -2 none or mixed). */
extern "C" int managed_range_attr(const void *ptr, size_t bytes, int attribute, int *value)
{
    int status = 0;
    TUT_REQUIRE(attribute == 1 || attribute == 2 || attribute == 4);
    CUDA_CHECK(cudaMemRangeGetAttribute(value, sizeof *value,
                                        (enum cudaMemRangeAttribute)attribute, ptr, bytes));
cleanup:
    return status;
}

/* Queues the kernel on stream 0 and returns at once: the host must not read x until it has
   synchronised (the lesson's "forgot to wait" demonstration). */
extern "C" int launch_scale_shift(float *x, size_t n, float a, float b)
{
    int status = 0;
    scale_shift_kernel<<<grid_for(n), 256>>>(x, n, a, b);
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

// ---- lesson: a linked structure built on the host ------------------------------------------

/* One node of a singly linked list, in managed memory. `next` is an ordinary pointer, and
   it is the same on both sides: the host writes it, the device follows it. */
typedef struct list_node {
    long long         key;
    struct list_node *next;
} list_node;

/* Links the nodes of `pool` (n_nodes, one managed allocation) into lists, on the host:
   pool[j].next = &pool[next_index[j]] (NULL for -1), heads[k] = &pool[head_index[k]] (NULL for
   an empty list). With cudaMalloc the host would have to compute device addresses it cannot
   dereference, build a copy of every node on the host and copy them over; here it just writes
   pointers. The indices were checked by Python; C checks them again. */
extern "C" int lists_build(list_node *pool, int n_nodes, const long long *keys,
                           const int *next_index, list_node **heads, const int *head_index,
                           int n_lists)
{
    int status = 0;
    for (int j = 0; j < n_nodes; j++)
        TUT_REQUIRE(next_index[j] >= -1 && next_index[j] < n_nodes);
    for (int k = 0; k < n_lists; k++)
        TUT_REQUIRE(head_index[k] >= -1 && head_index[k] < n_nodes);
    for (int j = 0; j < n_nodes; j++) {
        pool[j].key = keys[j];
        pool[j].next = next_index[j] < 0 ? NULL : &pool[next_index[j]];
    }
    for (int k = 0; k < n_lists; k++)
        heads[k] = head_index[k] < 0 ? NULL : &pool[head_index[k]];
cleanup:
    return status;
}

// ---- exercises ----------------------------------------------------------------------------

/* 05.1 m = a * m + b for n floats of managed memory that the host wrote, and that the host
   will read the moment this function returns. On a stream of its own: prefetch m to device 0,
   run scale_shift_kernel, prefetch m back to the host, then wait for the stream. Without the
   first prefetch the kernel still works, page fault by page fault, several times slower;
   without the second, NumPy's first reads fault the pages back one by one; without the wait,
   NumPy may read before the kernel has written. */
extern "C" int managed_scale_shift(float *m, size_t n, float a, float b)
{
    int status = 0;
    cudaStream_t stream = NULL;

    // TODO(student) 05.1: bytes = n floats; create the stream; cudaMemPrefetchAsync to loc(0), launch on the stream, cudaMemPrefetchAsync to loc(cudaCpuDeviceId), cudaStreamSynchronize (~9 lines)
    TUT_TODO();
cleanup:
    if (stream) {
        if (status != 0)   /* a failure after queuing: let nothing run on behind the host */
            cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    return status;
}

/* 05.2 out[i] = table[idx[i]] for n lookups into a table of table_n floats, all three managed.
   Every SM reads the table, and the host reads it too between calls: advise it read-mostly
   (cudaMemAdviseSetReadMostly; the location is ignored for this advice, pass loc(0)), so that
   each side keeps a read-only copy instead of pulling the pages back and forth, and prefetch
   it to device 0 so the copy is made in bulk. The advice stays on the table after the call.
   Wait for the kernel before returning: the host reads `out` next. */
extern "C" int lut_gather(const float *table, int table_n, const int *idx, float *out, size_t n)
{
    int status = 0;

    TUT_REQUIRE(table_n >= 1);
    // TODO(student) 05.2: advise the table read-mostly, prefetch it to device 0 on stream 0, launch lut_gather_kernel, cudaDeviceSynchronize (~6 lines)
    TUT_TODO();
cleanup:
    return status;
}

/* 05.3 sums[k] = the sum of the keys of list k and lengths[k] its node count, one thread per
   list, following the `next` pointers the host wrote (lists_build). A list that has not ended
   after max_nodes steps has a cycle: stop there and store length -1 (and the sum so far),
   instead of looping forever on the GPU. */
__global__ void lists_walk_kernel(list_node *const *heads, int n_lists, int max_nodes,
                                  long long *sums, int *lengths)
{
    // TODO(student) 05.3: k from the grid, guarded; walk from heads[k] while the node is not NULL, adding keys and counting, at most max_nodes steps (~10 lines)
}

/* The walk, and the wait the host needs before Python reads sums and lengths. */
extern "C" int lists_walk(list_node *const *heads, int n_lists, int max_nodes, long long *sums,
                          int *lengths)
{
    int status = 0;

    TUT_REQUIRE(n_lists >= 1 && max_nodes >= 0);
    // TODO(student) 05.3: launch lists_walk_kernel with enough 128-thread blocks for n_lists, check the launch, cudaDeviceSynchronize (~3 lines)
    TUT_TODO();
cleanup:
    return status;
}

/* 05.4 m = a * m + b for n floats of managed memory, with at most chunk_elems floats on the
   device at a time: the way to process an array larger than the device (or than the share of
   it you may use). Pass after pass on one stream: prefetch chunk c to device 0, run the kernel
   on it, prefetch it back to the host (evicting it), then the next chunk; the stream's order
   guarantees chunk c has left before chunk c+1 arrives. Then wait, and store the number of
   passes in *passes. chunk_elems * 4 bytes is a whole number of 64 KiB (Python makes it so):
   in an array that starts on a page boundary, two chunks then never share a page. */
extern "C" int managed_in_passes(float *m, size_t n, size_t chunk_elems, float a, float b,
                                 int *passes)
{
    int status = 0;
    cudaStream_t stream = NULL;

    TUT_REQUIRE(chunk_elems >= 1);
    *passes = 0;
    // TODO(student) 05.4: create the stream; for each chunk (the last one shorter): prefetch it in, kernel, prefetch it out, count the pass; then synchronise the stream (~13 lines)
    TUT_TODO();
cleanup:
    if (stream) {
        if (status != 0)
            cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    return status;
}
