/* SPDX-License-Identifier: MIT */
/*
 * core_alone: the emulator's core (emu/core/'s objects) with no runtime but stub_runtime.c,
 * which implements cuemu_internal.h and nothing more. That this links proves the core asks
 * the runtime for nothing else; that these kernels run and fail as they should proves the
 * interface is enough for launches, barriers, warp operations, dynamic shared memory, the
 * launch checks, fault reports and (in the clang build, with the load/store hooks) the
 * shared-memory race detector.
 *
 * Kernels are written as the device header would turn them out: a body run once per thread,
 * reading its indices from cuemu_cur and cuemu_block_idx. Run in every thread order
 * (CUEMU_ORDER, set by tests.cmake). Exits 0 when every check passed.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuemu_core.h"
#include "cuemu_internal.h"
#include "stub_runtime.h"

static int failures;
#define EXPECT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                  \
        }                                                                                \
    } while (0)
/* every needle in the diagnostics since the last clear */
#define EXPECT_DIAG(needle)                                                              \
    do {                                                                                 \
        if (!strstr(stub_diag_text(), (needle))) {                                       \
            fprintf(stderr, "FAIL %s:%d: no \"%s\" in the diagnostics:\n%s\n", __FILE__,  \
                    __LINE__, (needle), stub_diag_text());                               \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* CUDA's numbers, as the core reports them */
enum { E_INVALID_VALUE = 1, E_ILLEGAL_ADDRESS = 700, E_LAUNCH_FAILURE = 719 };

/* A launch of body on gx x gy blocks of bx threads, as if written at this file's line `line`. */
static cuemu_launch_desc desc_at(int line, const char *kernel, unsigned gx, unsigned gy,
                                 unsigned bx, void (*body)(void *), void *ctx)
{
    cuemu_launch_desc d;
    memset(&d, 0, sizeof d);
    d.kernel = kernel;
    d.file = __FILE__;
    d.line = line;
    d.grid.x = gx; d.grid.y = gy; d.grid.z = 1;
    d.block.x = bx; d.block.y = 1; d.block.z = 1;
    d.body = body;
    d.ctx = ctx;
    return d;
}
#define desc(...) desc_at(__LINE__, __VA_ARGS__)

/* ---- kernels ------------------------------------------------------------------------------- */
typedef struct { const int *in; int *out; int n; } args;

/* Block sums by a tree in static shared memory: wrong (poison, -1 bytes) in some thread order
   if any barrier did not hold every thread of the block. n need not be a power of two. */
static void block_sum_kernel(void *p)
{
    const args *a = (const args *)p;
    static int partial[256];
    cuemu_shared_register_named(partial, sizeof partial, "partial");
    unsigned t = cuemu_cur->idx.x, n = cuemu_block_dim.x;
    unsigned b = cuemu_block_idx.y * cuemu_grid_dim.x + cuemu_block_idx.x;
    partial[t] = a->in[b * n + t];
    cuemu_syncthreads(__FILE__, __LINE__);
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (t < s && t + s < n) partial[t] += partial[t + s];
        cuemu_syncthreads(__FILE__, __LINE__);
    }
    if (t == 0) a->out[b] = partial[0];
}

/* Warp sums by shuffles down. */
static void warp_sum_kernel(void *p)
{
    const args *a = (const args *)p;
    int v = a->in[cuemu_cur->linear];
    for (int off = 16; off > 0; off >>= 1)
        v += (int)cuemu_warp_op(CUEMU_W_DOWN, 0xFFFFFFFFu, (uint64_t)(uint32_t)v, off, 32,
                                __FILE__, __LINE__);
    if (cuemu_cur->lane == 0) a->out[cuemu_cur->warp] = v;
}

/* Reverses n ints through dynamic shared memory. */
static void reverse_kernel(void *p)
{
    const args *a = (const args *)p;
    int *buf = (int *)cuemu_dyn_smem("buf");
    unsigned t = cuemu_cur->idx.x;
    buf[t] = a->in[t];
    cuemu_syncthreads(__FILE__, __LINE__);
    a->out[t] = buf[a->n - 1 - (int)t];
}

/* No guard: the threads past n write beyond the allocation. */
static void oob_kernel(void *p)
{
    const args *a = (const args *)p;
    unsigned i = cuemu_block_idx.x * cuemu_block_dim.x + cuemu_cur->idx.x;
    a->out[i] = (int)i;
}

static void read_kernel(void *p)
{
    const args *a = (const args *)p;
    a->out[cuemu_cur->idx.x] += 1;
}

/* The first 16 threads leave before the barrier the others wait at. */
static void divergent_kernel(void *p)
{
    (void)p;
    if (cuemu_cur->idx.x < 16) return;
    cuemu_syncthreads(__FILE__, __LINE__);
}

#ifdef CORE_ALONE_TRACE
/* Neighbours read each other's word with no barrier between the write and the read. */
static void race_kernel(void *p)
{
    const args *a = (const args *)p;
    static int word[64];
    cuemu_shared_register_named(word, sizeof word, "word");
    unsigned t = cuemu_cur->idx.x;
    word[t] = (int)t;
    a->out[t] = word[(t + 1) % 64];
}
#endif

static int ctx_freed;
static void note_free(void *ctx) { (void)ctx; ctx_freed++; }

/* ---- checks ------------------------------------------------------------------------------- */
static void check_barriers_and_queue(void)
{
    enum { GX = 3, GY = 2, N = 200 };              /* 200 threads: not a power of two */
    int *in = (int *)stub_alloc(GX * GY * N * sizeof(int), __FILE__, __LINE__);
    int *out = (int *)stub_alloc(GX * GY * sizeof(int), __FILE__, __LINE__);
    long long want[GX * GY] = { 0 };
    for (int i = 0; i < GX * GY * N; i++) {
        in[i] = (i * 7919) % 1009 - 500;
        want[i / N] += in[i];
    }
    args a = { in, out, N };
    cuemu_launch_desc d = desc("block_sum_kernel", GX, GY, N, block_sum_kernel, &a);
    d.ctx_free = note_free;
    /* the path of a <<<>>> launch: checks, then the runtime's queue (which runs it here) */
    EXPECT(cuemu_launch_prepare(&d) == 0);
    int queued = stub_enqueued(), freed = ctx_freed;
    cuemu_launch_enqueue(&d);
    EXPECT(stub_enqueued() == queued + 1);
    EXPECT(ctx_freed == freed + 1);
    EXPECT(stub_async_error() == 0);
    for (int b = 0; b < GX * GY; b++) EXPECT(out[b] == want[b]);

    int win[64], wout[2];
    for (int i = 0; i < 64; i++) win[i] = i * i;
    args w = { win, wout, 64 };
    d = desc("warp_sum_kernel", 1, 1, 64, warp_sum_kernel, &w);
    EXPECT(cuemu_launch_run(&d) == 0);
    long long s0 = 0, s1 = 0;
    for (int i = 0; i < 32; i++) { s0 += i * i; s1 += (i + 32) * (i + 32); }
    EXPECT(wout[0] == s0 && wout[1] == s1);

    int *rin = (int *)stub_alloc(100 * sizeof(int), __FILE__, __LINE__);
    int *rout = (int *)stub_alloc(100 * sizeof(int), __FILE__, __LINE__);
    for (int i = 0; i < 100; i++) rin[i] = 3 * i + 1;
    args r = { rin, rout, 100 };
    d = desc("reverse_kernel", 1, 1, 100, reverse_kernel, &r);
    d.dsmem = 100 * sizeof(int);
    EXPECT(cuemu_launch_prepare(&d) == 0);
    EXPECT(cuemu_launch_run(&d) == 0);
    for (int i = 0; i < 100; i++) EXPECT(rout[i] == rin[99 - i]);
    EXPECT(stub_last_error() == 0);
    stub_free(in); stub_free(out); stub_free(rin); stub_free(rout);
}

static void check_launch_limits(void)
{
    /* the limits are the stub's (256 threads, 16 KiB), not an H200's: the core asked for them */
    args a = { NULL, NULL, 0 };
    cuemu_launch_desc d = desc("big_kernel", 1, 1, 512, read_kernel, &a);
    stub_diag_clear();
    EXPECT(cuemu_launch_prepare(&d) == E_INVALID_VALUE);
    EXPECT(stub_last_error() == E_INVALID_VALUE);
    EXPECT_DIAG("invalid launch configuration of kernel big_kernel");
    EXPECT_DIAG("blockDim.x = 512 (must be 1..256)");
    d = desc("smem_kernel", 1, 1, 32, read_kernel, &a);
    d.dsmem = STUB_MAX_DYN_SMEM + 1;
    stub_diag_clear();
    EXPECT(cuemu_launch_prepare(&d) == E_INVALID_VALUE);
    EXPECT_DIAG("16385 bytes of dynamic shared memory (at most 16384;");
    stub_last_error();
}

static void check_pointer_arguments(void)
{
    int local = 0;
    int *dev = (int *)stub_alloc(64, __FILE__, __LINE__);
    int *gone = (int *)stub_alloc(64, "gone.cu", 7);
    stub_free(gone);
    args a = { NULL, NULL, 0 };
    cuemu_launch_desc d = desc("args_kernel", 1, 1, 32, read_kernel, &a);
    stub_diag_clear();
    EXPECT(cuemu_check_kernel_pointer(&d, 0, dev) == 0);
    EXPECT(cuemu_check_kernel_pointer(&d, 1, dev + 15) == 0);
    EXPECT(cuemu_check_kernel_pointer(&d, 2, NULL) == 0);
    EXPECT(stub_diag_text()[0] == 0);
    EXPECT(cuemu_check_kernel_pointer(&d, 3, &local) == 1);
    EXPECT_DIAG("argument 3 of kernel args_kernel");
    EXPECT_DIAG("is a host pointer");
    EXPECT(cuemu_check_kernel_pointer(&d, 4, gone) == 1);
    EXPECT_DIAG("argument 4 of kernel args_kernel");
    EXPECT_DIAG("points into device memory freed earlier (allocated at gone.cu:7)");
    cuemu_launch_refuse(&d);
    EXPECT(cuemu_sticky_error() == E_ILLEGAL_ADDRESS);
    stub_reset_errors();
    stub_free(dev);
}

/* Where a thread's stack is: the address of a local. */
static volatile uintptr_t probe_sp;
static void probe_kernel(void *p)
{
    volatile int local = 0;
    (void)p;
    probe_sp = (uintptr_t)&local;
}

static void past_end_kernel(void *p)
{
    const args *a = (const args *)p;
    a->out[a->n] = 1;
}

/* mmap may put an allocation just below a thread's stack, inside the megabyte under it where
   a fault counts as a stack overflow (a frame larger than the guard page lands there): a write
   into the allocation's own guard page is still out-of-bounds. (Seen on a machine where every
   fault of check_faults read "stack overflow".) Runs first, while one stack is mapped and the
   space below it is free. */
static void check_fault_below_stack(void)
{
    args a = { NULL, NULL, 0 };
    cuemu_launch_desc d = desc("probe_kernel", 1, 1, 1, probe_kernel, &a);
    EXPECT(cuemu_launch_run(&d) == 0);
    const char *kb = getenv("CUEMU_STACK_KB");
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t stack = (kb && *kb ? (uintptr_t)atoi(kb) : 512) * 1024;   /* at most this */
    /* below the stack and its guard page, above the megabyte's end, whatever the stack size */
    uintptr_t top = (probe_sp - stack - 3 * pg) & ~(pg - 1), low = probe_sp - (1u << 20);
    int line = __LINE__ + 2, *out = NULL;
    for (uintptr_t at = top; !out && at >= low && at <= top; at -= pg)
        out = (int *)stub_alloc_at((void *)at, pg, __FILE__, line);
    if (!out) {
        printf("core_alone: no free page in the megabyte below the stack: check skipped\n");
        return;
    }
    char site[64];
    snprintf(site, sizeof site, "allocation made at %s:%d", __FILE__, line);
    a.out = out;
    a.n = (int)(pg / sizeof(int));
    d = desc("past_end_kernel", 1, 1, 1, past_end_kernel, &a);
    stub_diag_clear();
    EXPECT(cuemu_launch_run(&d) == E_ILLEGAL_ADDRESS);
    EXPECT_DIAG("out-of-bounds write of global memory in kernel past_end_kernel");
    EXPECT_DIAG("0 bytes past the end of a ");
    EXPECT_DIAG(site);
    cuemu_core_reset();
    stub_reset_errors();
    stub_free(out);
}

/* A fault ends the launch with the report, a sticky error, and the core ready for the next. */
static void check_faults(void)
{
    char site[64];
    int line = __LINE__ + 1;
    int *out = (int *)stub_alloc(100 * sizeof(int), __FILE__, line);
    snprintf(site, sizeof site, "400-byte allocation made at %s:%d", __FILE__, line);
    args a = { NULL, out, 100 };
    cuemu_launch_desc d = desc("oob_kernel", 1, 1, 128, oob_kernel, &a);
    stub_diag_clear();
    EXPECT(cuemu_launch_run(&d) == E_ILLEGAL_ADDRESS);
    EXPECT(cuemu_sticky_error() == E_ILLEGAL_ADDRESS);
    EXPECT_DIAG("out-of-bounds ");
    EXPECT_DIAG(" of global memory in kernel oob_kernel, block (0,0,0), thread (");
    EXPECT_DIAG("bytes past the end of a ");
    EXPECT_DIAG(site);
    /* sticky: the next launch is refused until the runtime's reset */
    EXPECT(cuemu_launch_prepare(&d) == E_ILLEGAL_ADDRESS);
    cuemu_core_reset();
    stub_reset_errors();

    stub_free(out);
    stub_diag_clear();
    d = desc("read_kernel", 1, 1, 32, read_kernel, &a);
    EXPECT(cuemu_launch_run(&d) == E_ILLEGAL_ADDRESS);
    EXPECT_DIAG("use after free in kernel read_kernel");
    stub_reset_errors();

    d = desc("divergent_kernel", 1, 1, 64, divergent_kernel, &a);
    stub_diag_clear();
    EXPECT(cuemu_launch_run(&d) == E_LAUNCH_FAILURE);
    EXPECT(cuemu_sticky_error() == E_LAUNCH_FAILURE);
    EXPECT_DIAG("deadlock in kernel divergent_kernel");
    EXPECT_DIAG("divergent __syncthreads");
    EXPECT_DIAG("48 threads wait at __syncthreads");
    EXPECT_DIAG("16 threads exited");
    stub_reset_errors();
}

#ifdef CORE_ALONE_TRACE
static void check_race(void)
{
    int *out = (int *)stub_alloc(64 * sizeof(int), __FILE__, __LINE__);
    args a = { NULL, out, 64 };
    cuemu_launch_desc d = desc("race_kernel", 1, 1, 64, race_kernel, &a);
    stub_diag_clear();
    /* not sticky: the launch's own error */
    EXPECT(cuemu_launch_run(&d) == E_LAUNCH_FAILURE);
    EXPECT(cuemu_sticky_error() == 0);
    EXPECT(stub_last_error() == E_LAUNCH_FAILURE);
    EXPECT_DIAG("shared memory race (");
    EXPECT_DIAG("in kernel race_kernel");
    EXPECT_DIAG("on __shared__ 'word' byte");
    stub_free(out);
}
#endif

int main(void)
{
    const char *order = getenv("CUEMU_ORDER");
    check_fault_below_stack();
    check_barriers_and_queue();
    check_launch_limits();
    check_pointer_arguments();
    check_faults();
#ifdef CORE_ALONE_TRACE
    check_race();
#else
    printf("core_alone: no load/store hooks in this build (they need clang and no sanitizer): "
           "race check skipped\n");
#endif
    /* the core runs again after every kind of failure */
    check_barriers_and_queue();
    EXPECT(cuemu_bench_switch_ns(1000) > 0);
    printf("core_alone (%s order): %s\n", order && *order ? order : "forward",
           failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
