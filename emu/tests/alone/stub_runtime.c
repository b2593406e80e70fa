/* SPDX-License-Identifier: MIT */
/*
 * stub_runtime.c: the smallest runtime the emulator's core runs with: every function of
 * cuemu_internal.h, and nothing else the core could call. core_alone links it with emu/core's
 * objects (not with libcuemu.a); if the core needed any other function of the runtime, that
 * link would fail. No streams (a launch runs when it is queued), no CUDA API, a fixed table of
 * allocations.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuemu_core.h"
#include "cuemu_internal.h"
#include "stub_runtime.h"

/* ---- allocations ------------------------------------------------------------------------- */
typedef struct {
    cuemu_alloc_info info;
    char  *map;                  /* [map, map + map_len): the data pages, then the guard page */
    size_t map_len;
    int    live, freed;
} stub_block;

#define STUB_BLOCKS 64
static stub_block blocks[STUB_BLOCKS];
static unsigned long serial;

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

void *stub_alloc(size_t size, const char *file, int line)
{
    return stub_alloc_at(NULL, size, file, line);
}

void *stub_alloc_at(void *at, size_t size, const char *file, int line)
{
    for (int i = 0; i < STUB_BLOCKS; i++) {
        stub_block *b = &blocks[i];
        if (b->live || b->freed) continue;
        size_t data = (size + page() - 1) / page() * page();
        char *m = (char *)mmap(at, data + page(), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
        if (m == MAP_FAILED) return NULL;
        if (at && m != (char *)at) {             /* a kernel without MAP_FIXED_NOREPLACE */
            munmap(m, data + page());
            return NULL;
        }
        mprotect(m + data, page(), PROT_NONE);
        b->map = m;
        b->map_len = data + page();
        memset(&b->info, 0, sizeof b->info);
        b->info.base = m + data - size;          /* the end of the block abuts the guard page */
        b->info.size = size;
        b->info.kind = CUEMU_MEM_DEVICE;
        b->info.file = file;
        b->info.line = line;
        b->info.serial = ++serial;
        b->live = 1;
        return b->info.base;
    }
    return NULL;
}

void stub_free(void *p)
{
    for (int i = 0; i < STUB_BLOCKS; i++)
        if (blocks[i].live && blocks[i].info.base == p) {
            mprotect(blocks[i].map, blocks[i].map_len, PROT_NONE);
            blocks[i].live = 0;
            blocks[i].freed = 1;                 /* kept mapped: a later access faults */
            return;
        }
}

static stub_block *find(const void *p, int live)
{
    const char *c = (const char *)p;
    for (int i = 0; i < STUB_BLOCKS; i++)
        if ((live ? blocks[i].live : blocks[i].freed) && c >= blocks[i].map
            && c < blocks[i].map + blocks[i].map_len)
            return &blocks[i];
    return NULL;
}

int cuemu_alloc_lookup(const void *p, cuemu_alloc_info *out)
{
    stub_block *b = find(p, 1);
    if (!b || (const char *)p < (const char *)b->info.base
        || (const char *)p >= (const char *)b->info.base + b->info.size)
        return 0;
    if (out) *out = b->info;
    return 1;
}

int cuemu_alloc_nearest(const void *p, cuemu_alloc_info *out, long long *offset)
{
    stub_block *b = find(p, 1);
    if (!b) return 0;
    if (out) *out = b->info;
    if (offset) *offset = (long long)((const char *)p - (const char *)b->info.base);
    return 1;
}

/* The stub has no memory pools: nothing is denied. */
int cuemu_pool_denies(const void *p, const char *kernel, const char *file, int line)
{
    (void)p; (void)kernel; (void)file; (void)line;
    return 0;
}

int cuemu_alloc_was_freed(const void *p, cuemu_alloc_info *out)
{
    stub_block *b = find(p, 0);
    if (!b) return 0;
    if (out) *out = b->info;
    return 1;
}

/* The stub's blocks are always accessible: a fault is always a real one. */
int cuemu_device_fault(const void *p)
{
    (void)p;
    return 0;
}

/* ---- errors and diagnostics ------------------------------------------------------------------ */
static int last_error, sticky_error, async_error;
static char diag[16384];
static size_t diag_len;

int cuemu_set_last_error(int e)
{
    if (e) last_error = e;
    return e;
}

void cuemu_set_sticky_error(int e)
{
    if (!e) return;
    if (!sticky_error) sticky_error = e;
    last_error = sticky_error;
}

int cuemu_sticky_error(void) { return sticky_error; }

void cuemu_diag_device(const char *line)
{
    fprintf(stderr, "%s\n", line);
    int n = snprintf(diag + diag_len, sizeof diag - diag_len, "%s\n", line);
    if (n > 0) diag_len += (size_t)n;
}

void cuemu_diag(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuemu: %s\n", line);
    int n = snprintf(diag + diag_len, sizeof diag - diag_len, "cuemu: %s\n", line);
    if (n > 0) diag_len += (size_t)n;
    if (diag_len >= sizeof diag) diag_len = sizeof diag - 1;      /* full: later ones dropped */
}

const char *stub_diag_text(void) { return diag; }
void stub_diag_clear(void) { diag_len = 0; diag[0] = 0; }

int stub_last_error(void)
{
    int e = sticky_error ? sticky_error : last_error;
    last_error = 0;
    return e;
}

void stub_reset_errors(void) { last_error = sticky_error = async_error = 0; }

/* ---- limits ------------------------------------------------------------------------------------ */
int cuemu_max_threads_per_block(void) { return STUB_MAX_THREADS; }

void cuemu_max_block_dim(int out[3])
{
    out[0] = STUB_MAX_THREADS;
    out[1] = STUB_MAX_THREADS;
    out[2] = 64;
}

void cuemu_max_grid_dim(int out[3])
{
    out[0] = 2147483647;
    out[1] = 65535;
    out[2] = 65535;
}

size_t cuemu_shared_mem_per_block_optin(void) { return 64 * 1024; }

size_t cuemu_func_max_dynamic_smem(const void *func)
{
    (void)func;                                  /* no cudaFuncSetAttribute here */
    return STUB_MAX_DYN_SMEM;
}

/* ---- the queue: none; a launch runs when it is handed over ------------------------------------ */
static int enqueued;

void cuemu_stream_enqueue(const struct cuemu_launch_desc *d)
{
    enqueued++;
    int e = sticky_error ? 0 : cuemu_launch_run(d);
    if (e && !sticky_error) async_error = e;
    if (d->ctx_free) d->ctx_free(d->ctx);
}

int stub_enqueued(void) { return enqueued; }

int stub_async_error(void)
{
    int e = async_error;
    async_error = 0;
    return e;
}
