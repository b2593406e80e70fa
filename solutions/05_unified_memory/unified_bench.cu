// SPDX-License-Identifier: MIT
/*
 * 05 unified_memory, the benchmarks behind driver.py --bench: what faults cost against
 * prefetches, managed against cudaMalloc memory once resident, and what each piece of advice
 * changes. Kept apart so that the lesson file stays about memory, not about timing. Linked into
 * the same library; every repetition starts from the same placement of the data, set up
 * outside the timed interval.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <chrono>

/* The lesson's two kernels again (a kernel launched from another file would need relocatable
   device code), and one that only reads. */
__global__ void bench_scale_kernel(float *x, size_t n, float a, float b)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = a * x[i] + b;
}

__global__ void bench_gather_kernel(const float *table, const int *idx, float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = table[idx[i]];
}

/* Reads every element; writes only if the sum is one the data never gives, so that the
   compiler cannot drop the reads. */
__global__ void bench_read_kernel(const float *x, size_t n, float *never)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    float sum = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        sum += x[i];
    if (sum == -1.25e-30f)
        *never = sum;
}

static inline int bench_grid(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks == 0 ? 1 : blocks > 4096 ? 4096 : (int)blocks;
}

static inline struct cudaMemLocation where(int device)
{
    struct cudaMemLocation l;
    l.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    l.id = device < 0 ? 0 : device;
    return l;
}

/* Reads one float per 4 KiB on the host: each read of a page that is on the device faults it
   back (unless the page is read-mostly and the host still has its copy). */
static float host_touch(const float *x, size_t n)
{
    volatile float sum = 0.0f;
    for (size_t i = 0; i < n; i += 1024)
        sum = sum + x[i];
    return sum;
}

/* Writes one float per 4 KiB on the host, which takes each page back from the device. */
static void host_write(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i += 1024)
        x[i] = v;
}

/* Moving n floats of managed memory, `reps` times after a warm-up, each timed alone.
   mode 0  data on the host; time the kernel alone: its page faults migrate the data
   mode 1  data on the host; time a prefetch to the device and then the kernel
   mode 2  data already on the device (or x from cudaMalloc); time the kernel alone
   mode 3  data on the device; time the host reading one float per page (faults bring it back)
   mode 4  data on the device; time a prefetch to the host
   Modes 0-2 time GPU work with events; 3 is host work, timed by a host clock after the device
   has gone idle. The kernel is scale_shift with a = 1, b = 0: the data stays the same. */
extern "C" int bench_managed(float *x, size_t n, int mode, int reps, float *times_ms)
{
    int status = 0;
    size_t bytes = n * sizeof(float);
    int managed = 0;
    struct cudaPointerAttributes attr;
    tut_timer t = {0};

    TUT_REQUIRE(mode >= 0 && mode <= 4);
    CUDA_CHECK(cudaPointerGetAttributes(&attr, x));
    managed = attr.type == cudaMemoryTypeManaged;
    TUT_REQUIRE(managed || mode == 2);
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        if (managed) {   /* the starting placement, outside the timing */
            CUDA_CHECK(cudaMemPrefetchAsync(x, bytes, where(mode <= 1 ? -1 : 0), 0, 0));
            CUDA_CHECK(cudaStreamSynchronize(0));
        }
        if (mode == 3) {
            auto start = std::chrono::steady_clock::now();
            host_touch(x, n);
            auto stop = std::chrono::steady_clock::now();
            if (i >= 0)
                times_ms[i] = std::chrono::duration<float, std::milli>(stop - start).count();
            continue;
        }
        CUDA_CHECK(tut_timer_start(&t, 0));
        if (mode == 1)
            CUDA_CHECK(cudaMemPrefetchAsync(x, bytes, where(0), 0, 0));
        if (mode == 4) {
            CUDA_CHECK(cudaMemPrefetchAsync(x, bytes, where(-1), 0, 0));
        } else {
            bench_scale_kernel<<<bench_grid(n), 256>>>(x, n, 1.0f, 0.0f);
            CUDA_CHECK_LAUNCH();
        }
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

/* The lookup table read by every SM, with the host reading the table between kernels (one
   float per page), `reps` times after a warm-up. Only the kernel is timed: without advice it
   faults back every page the host read; with read-mostly both sides keep a copy. */
extern "C" int bench_lut(const float *table, int table_n, const int *idx, float *out, size_t n,
                         int reps, float *times_ms)
{
    int status = 0;
    tut_timer t = {0};

    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        /* the last kernel is done, so the host's reads start from the placement it left (the
           warm-up's lap does not wait for it) */
        CUDA_CHECK(cudaDeviceSynchronize());
        host_touch(table, (size_t)table_n);
        CUDA_CHECK(tut_timer_start(&t, 0));
        bench_gather_kernel<<<bench_grid(n), 256>>>(table, idx, out, n);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

/* Data the host owns and rewrites before every kernel, which reads it once: one step is the
   host writing one float per page, then a kernel that reads all of it. The events bracket both (the stream is idle
   when the start event is recorded, so the host's writes fall inside the interval). The advice
   on x (none, preferred location host, plus accessed-by device) is the caller's. */
extern "C" int bench_host_owned(float *x, size_t n, int reps, float *times_ms)
{
    int status = 0;
    tut_timer t = {0};

    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaEventSynchronize(t.start));
        host_write(x, n, (float)i);
        bench_read_kernel<<<bench_grid(n), 256>>>(x, n, x);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

/* Oversubscription, measured without risking the GPU: asking for more managed memory than the
   card has free can hang it, so the device is made small instead. Ballast from cudaMalloc
   (never evicted) takes all of the free device memory but `leave_free` bytes; then a managed
   array of `bytes`, at most 8 x leave_free and less than half of what was free before the
   ballast (so far below the card's memory and the host's), is swept by the scale kernel
   (a = 1, b = 0: read and write every float once), `reps` times after a warm-up sweep, each
   timed with events on the stream. What it shows: how the sweep's speed changes once the array
   no longer fits in what is left.
   mode 0  no advice: pages migrate on fault; once the device is full the driver must evict
           pages (back to the host) to make room, which later faults fetch again
   mode 1  preferred location host + accessed-by device: nothing migrates, the kernel reads and
           writes host memory over the bus
   mode 2  in passes (05.4's method): chunks of leave_free / 2 prefetched in, swept, prefetched
           out, one after another on the stream
   *ballast_out gets the ballast's size. Everything is freed on every path. */
extern "C" int bench_oversubscribe(size_t leave_free, size_t bytes, int mode, int reps,
                                   float *times_ms, size_t *ballast_out)
{
    int status = 0;
    size_t free_b = 0, total_b = 0, n = bytes / sizeof(float), ballast = 0;
    size_t chunk = leave_free / 2 / (64 << 10) * (64 << 10) / sizeof(float);
    void *d_ballast = NULL;
    float *m = NULL;
    cudaStream_t stream = NULL;
    tut_timer t = {0};

    TUT_REQUIRE(mode >= 0 && mode <= 2 && reps >= 1 && n > 0 && chunk > 0);
    TUT_REQUIRE(bytes <= 8 * leave_free);
    *ballast_out = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    TUT_REQUIRE(leave_free < free_b && bytes < free_b / 2);
    ballast = free_b - leave_free;
    CUDA_CHECK(cudaMalloc(&d_ballast, ballast));
    *ballast_out = ballast;
    CUDA_CHECK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
    for (size_t i = 0; i < n; i++)   /* the host writes it all: every page starts there */
        m[i] = 1.0f;
    if (mode == 1) {
        CUDA_CHECK(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, where(-1)));
        CUDA_CHECK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, where(0)));
    }
    CUDA_CHECK(cudaStreamCreate(&stream));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up sweep, not timed */
        CUDA_CHECK(tut_timer_start(&t, stream));
        if (mode == 2) {
            for (size_t first = 0; first < n; first += chunk) {
                size_t len = n - first < chunk ? n - first : chunk;
                CUDA_CHECK(cudaMemPrefetchAsync(m + first, len * sizeof(float), where(0), 0,
                                                stream));
                bench_scale_kernel<<<bench_grid(len), 256, 0, stream>>>(m + first, len, 1.0f,
                                                                        0.0f);
                CUDA_CHECK_LAUNCH();
                CUDA_CHECK(cudaMemPrefetchAsync(m + first, len * sizeof(float), where(-1), 0,
                                                stream));
            }
        } else {
            bench_scale_kernel<<<bench_grid(n), 256, 0, stream>>>(m, n, 1.0f, 0.0f);
            CUDA_CHECK_LAUNCH();
        }
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    if (stream != NULL) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    tut_timer_free(&t);
    cudaFree(m);
    cudaFree(d_ballast);
    return status;
}
