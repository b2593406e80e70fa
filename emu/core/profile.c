/* SPDX-License-Identifier: MIT */
/*
 * profile.c: the memory-access profile (CUEMU_PROFILE=1). Counted, not timed.
 *
 * For every source line of a kernel that reads or writes global or shared memory it counts:
 *   - requests: warp-wide accesses (one per warp each time the warp executes the instruction);
 *   - global memory: 32-byte sectors per request (the distinct 32-byte-aligned segments the
 *     warp's lanes touch): 1 float per thread, coalesced and aligned: 4; stride 2: 8; stride 32
 *     or more: 32; one address for the whole warp (a broadcast): 1;
 *   - shared memory: wavefronts per request, the largest number of distinct 4-byte words that
 *     the warp's lanes touch in any one of the 32 banks (bank = word index % 32), and bank
 *     conflicts = wavefronts - 1 (the extra passes). Lanes reading the same word do not conflict
 *     (a broadcast). A 32x32 float tile read by column: 32 wavefronts (31 conflicts); padded to
 *     33 columns: 1.
 * It runs on the load/store hooks of access.c (cuemu_access_observer), that is on clang's
 * -fsanitize-coverage=trace-loads,trace-stores: a build of the emulated code by g++ has no hooks,
 * and the profile says it is unavailable (cuemuProfileAvailable() == 0 after a launch).
 *
 * How lanes are grouped into a warp-wide request. A block's threads run as fibers, one after
 * another, so the 32 accesses a warp makes "at once" on a GPU arrive at different times. The
 * rule: per block, per warp (linear thread id / 32), per code address (pc) of the load or store,
 * each lane counts how many times it has executed that instruction; the k-th execution by each
 * lane of the warp is the same request. A request is complete when every lane the warp has made
 * it, and is counted then; those some lanes never make (a guard, divergence) are counted when
 * the block ends, with the lanes that did. This is what a GPU does for code where the warp's
 * lanes run the same instructions in step (loops with the same trip count, guards); its limits:
 *   - when lanes run a loop a different number of times, the k-th iterations are paired, as a
 *     GPU pairs them after divergence (lanes run the instruction together when their paths
 *     reconverge), but not where an independent thread schedule (Volta and later) splits them;
 *   - one source access the compiler splits into several instructions (a 16-byte struct copied
 *     as two 8-byte loads, an unrolled loop) is several requests; rows are per source line, so
 *     they add up there;
 *   - local variables the compiler keeps in memory, atomics and accesses inside warp functions
 *     are not counted (only addresses inside a live allocation or a __shared__ variable count);
 *   - accesses wider than 4 bytes to shared memory are counted word by word: 32 lanes reading
 *     a double each give 2 wavefronts, as the hardware's two passes, although Nsight Compute
 *     does not call that a conflict;
 *   - requests only count lanes' addresses: sector and wavefront counts, not cache hits, not
 *     time. A block with many pending requests (a long loop per thread between barriers) keeps
 *     at most PENDING_MAX of them; beyond that they are counted with the lanes seen so far and
 *     the rest of the block is not counted (the report says so).
 *
 * Interface (exported, for C programs and for Python through ctypes; see cuda_runtime.h):
 *   cuemuProfileEnable(on)     starts (1) or stops (0) counting; returns the previous state.
 *                              CUEMU_PROFILE=1 starts it at load and prints the report at exit.
 *   cuemuProfileReset()        forgets every count.
 *   cuemuProfileAvailable()    1: the hooks ran (counts are real); 0: a kernel ran while
 *                              counting and no access reached the hooks (a g++ build);
 *                              -1: not known yet (no kernel ran while counting).
 *   cuemuProfileRows()         the number of rows (kernel, file:line, read/write, space).
 *   cuemuProfileRow(i, kernel, kn, where, wn, out)  row i: kernel name and "file:line" copied
 *                              into the buffers; out[0..4] = write (0/1), shared (0/1),
 *                              requests, sectors (global) or wavefronts (shared), lanes.
 *   cuemuProfileReport()       the table as text (valid until the next call).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

#define PENDING_MAX (1u << 17)

/* ---- per-line results ---------------------------------------------------------------------- */
typedef struct {
    void *pc;
    const char *kernel;
    int write, shared;
    unsigned long long requests, units, lanes;   /* units: sectors or wavefronts */
} pc_stat;

static pc_stat *g_stat;
static size_t g_nstat, g_capstat;

/* ---- per-block pairing state --------------------------------------------------------------- */
typedef struct {                 /* the k-th execution of one instruction by one warp's lanes */
    uint32_t n;                  /* lanes seen */
    uint8_t  done, write, shared;
    void *pc;
    const char *kernel;
    uintptr_t addr[32];
    uint8_t size[32];
} request;

/* (warp, pc) -> how many times each lane executed it, and its requests k = head.. in order:
   lanes walk the array front to back, so it stays in cache; counted ones are dropped from the
   front */
typedef struct {
    void *pc;
    uint32_t gen, warp;
    uint32_t cnt[32];
    uint32_t base;               /* k of req[0] */
    uint32_t head, len, cap;     /* req[head..len) may be pending */
    request *req;
} lane_ctr;

static lane_ctr *g_ctr;
static size_t g_capctr, g_nctr;
static uint32_t g_gen = 1;
static size_t g_npend;                   /* requests not yet counted */
static int g_skip_block;                 /* this block overflowed: not counted further */
static int g_on = -1, g_env, g_seen_access, g_ran_kernel, g_overflowed;
static const char *g_kernel;
static unsigned g_block_threads;
#define GCACHE 8
static uintptr_t g_glo[GCACHE], g_ghi[GCACHE];   /* allocations found lately (a cache) */
static unsigned g_gnext;

static inline size_t hash2(uintptr_t pc, uint32_t warp)
{
    uint64_t h = (uint64_t)pc * 0x9E3779B97F4A7C15ull ^ (uint64_t)warp * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h ^ (h >> 29));
}

static void stat_add(const request *r, unsigned long long units)
{
    pc_stat *s = NULL;
    for (size_t i = g_nstat; i-- > 0;)   /* few distinct pcs: a linear scan, newest first */
        if (g_stat[i].pc == r->pc && g_stat[i].kernel == r->kernel) { s = &g_stat[i]; break; }
    if (!s) {
        if (g_nstat == g_capstat) {
            size_t cap = g_capstat ? 2 * g_capstat : 64;
            pc_stat *p = (pc_stat *)realloc(g_stat, cap * sizeof *p);
            if (!p) return;
            g_stat = p;
            g_capstat = cap;
        }
        s = &g_stat[g_nstat++];
        memset(s, 0, sizeof *s);
        s->pc = r->pc;
        s->kernel = r->kernel;
        s->write = r->write;
        s->shared = r->shared;
    }
    s->requests++;
    s->units += units;
    s->lanes += r->n;
}

/* Counts one request: distinct sectors (global) or the worst bank's distinct words (shared). */
static void finish(request *r)
{
    if (r->done) return;
    r->done = 1;
    if (g_npend) g_npend--;
    uint64_t u[32 * 5];
    size_t m = 0;
    unsigned shift = r->shared ? 2 : 5;
    for (uint32_t i = 0; i < r->n; i++)
        for (uint64_t x = r->addr[i] >> shift; x <= (r->addr[i] + r->size[i] - 1) >> shift && m < 160; x++)
            u[m++] = x;
    /* lanes' addresses mostly ascend already: an insertion sort is linear then */
    for (size_t i = 1; i < m; i++) {
        uint64_t v = u[i];
        size_t j = i;
        while (j > 0 && u[j - 1] > v) { u[j] = u[j - 1]; j--; }
        u[j] = v;
    }
    size_t distinct = 0;
    unsigned per_bank[32] = {0};
    for (size_t i = 0; i < m; i++) {
        if (i && u[i] == u[i - 1]) continue;
        distinct++;
        per_bank[u[i] % 32]++;
    }
    unsigned long long units = distinct;
    if (r->shared) {
        units = 0;
        for (int b = 0; b < 32; b++)
            if (per_bank[b] > units) units = per_bank[b];
    }
    stat_add(r, units);
}

/* The block ended (or too much is pending): count what is pending, forget the pairing state. */
static void flush(void)
{
    for (size_t i = 0; i < g_capctr; i++) {
        lane_ctr *c = &g_ctr[i];
        if (c->gen != g_gen) continue;
        for (uint32_t j = c->head; j < c->len; j++) finish(&c->req[j]);
        free(c->req);
        c->req = NULL;
        c->gen = 0;
    }
    g_nctr = 0;
    g_npend = 0;
    g_gen++;
}

static lane_ctr *ctr_find(void *pc, uint32_t warp)
{
    if (2 * (g_nctr + 1) > g_capctr) {
        size_t cap = g_capctr ? 2 * g_capctr : 256;
        lane_ctr *n = (lane_ctr *)calloc(cap, sizeof *n);
        if (!n) return NULL;
        for (size_t i = 0; i < g_capctr; i++) {
            if (g_ctr[i].gen != g_gen) continue;
            size_t j = hash2((uintptr_t)g_ctr[i].pc, g_ctr[i].warp) & (cap - 1);
            while (n[j].gen == g_gen) j = (j + 1) & (cap - 1);
            n[j] = g_ctr[i];
        }
        free(g_ctr);
        g_ctr = n;
        g_capctr = cap;
    }
    size_t j = hash2((uintptr_t)pc, warp) & (g_capctr - 1);
    while (g_ctr[j].gen == g_gen) {
        if (g_ctr[j].pc == pc && g_ctr[j].warp == warp) return &g_ctr[j];
        j = (j + 1) & (g_capctr - 1);
    }
    lane_ctr *c = &g_ctr[j];
    memset(c, 0, sizeof *c);
    c->gen = g_gen;
    c->pc = pc;
    c->warp = warp;
    g_nctr++;
    return c;
}

/* Request k of (warp, pc): an existing one, or a new one at the end (k == base + len). */
static request *req_find(lane_ctr *c, uint32_t k)
{
    if (k < c->base + c->head) return NULL;            /* already counted */
    if (k < c->base + c->len) return &c->req[k - c->base];
    if (g_npend + 1 > PENDING_MAX) {
        /* count what is there with the lanes seen so far, and leave the rest of the block out:
           pairing again from scratch would count every later access as its own request */
        g_overflowed = 1;
        flush();
        g_skip_block = 1;
        return NULL;
    }
    if (c->len == c->cap) {
        if (c->head > c->len / 2) {                    /* reuse the counted front */
            memmove(c->req, c->req + c->head, (c->len - c->head) * sizeof *c->req);
            c->base += c->head;
            c->len -= c->head;
            c->head = 0;
        } else {
            uint32_t cap = c->cap ? 2 * c->cap : 8;
            request *r = (request *)realloc(c->req, cap * sizeof *r);
            if (!r) return NULL;
            c->req = r;
            c->cap = cap;
        }
    }
    while (c->base + c->len <= k) {                    /* k == base + len, unless skipped */
        request *r = &c->req[c->len++];
        r->n = 0;
        r->done = 0;
        r->pc = c->pc;
        r->kernel = g_kernel;
        g_npend++;
        if (c->len == c->cap) break;
    }
    return k < c->base + c->len ? &c->req[k - c->base] : NULL;
}

static void observe(const void *addr, unsigned size, int write, void *pc)
{
    if (!cuemu_cur) return;
    g_seen_access = 1;
    if (cuemu_atomic_depth || g_skip_block) return;
    uintptr_t a = (uintptr_t)addr;
    int shared;
    if (cuemu_access_in_shared(addr)) {
        shared = 1;
    } else {
        int hit = 0;
        for (unsigned i = 0; i < GCACHE; i++)
            if (a - g_glo[i] < g_ghi[i] - g_glo[i]) { hit = 1; break; }
        if (!hit) {
            cuemu_alloc_info ai;
            if (!cuemu_alloc_lookup(addr, &ai)) return;  /* a local variable, a constant... */
            g_glo[g_gnext] = (uintptr_t)ai.base;
            g_ghi[g_gnext] = (uintptr_t)ai.base + ai.size;
            g_gnext = (g_gnext + 1) % GCACHE;
        }
        shared = 0;
    }
    uint32_t warp = cuemu_cur->warp, lane = cuemu_cur->lane & 31;
    lane_ctr *c = ctr_find(pc, warp);
    if (!c) return;
    uint32_t k = c->cnt[lane]++;
    request *r = req_find(c, k);
    if (!r || r->done || r->n >= 32) return;
    if (r->n == 0) {
        r->write = (uint8_t)write;
        r->shared = (uint8_t)shared;
    }
    r->addr[r->n] = a;
    r->size[r->n] = (uint8_t)(size > 16 ? 16 : size);
    r->n++;
    unsigned lanes = g_block_threads - warp * 32;
    if (lanes > 32) lanes = 32;
    if (r->n >= lanes) {
        finish(r);
        while (c->head < c->len && c->req[c->head].done) c->head++;
    }
}

/* ---- hooks from access.c ------------------------------------------------------------------- */
void cuemu_profile_launch(const struct cuemu_launch_desc *d)
{
    if (g_on <= 0) return;
    flush();
    g_kernel = d && d->kernel ? d->kernel : "?";
    g_ran_kernel = 1;
    memset(g_glo, 0, sizeof g_glo);
    memset(g_ghi, 0, sizeof g_ghi);
}

void cuemu_profile_block(void)
{
    if (g_on <= 0) return;
    flush();
    g_skip_block = 0;
    g_block_threads = cuemu_block_dim.x * cuemu_block_dim.y * cuemu_block_dim.z;
}

/* ---- the interface ------------------------------------------------------------------------- */
static void report_at_exit(void);

static void init(void)
{
    if (g_on >= 0) return;
    const char *e = getenv("CUEMU_PROFILE");
    g_env = e && e[0] && e[0] != '0';
    g_on = g_env;
    if (g_on) {
        cuemu_access_observer = observe;
        cuemu_access_fast_update();
        atexit(report_at_exit);
    }
}

__attribute__((constructor)) static void profile_ctor(void) { init(); }

int cuemuProfileEnable(int on)
{
    init();
    int was = g_on;
    if (!on && g_on) flush();
    g_on = on ? 1 : 0;
    cuemu_access_observer = g_on ? observe : NULL;
    cuemu_access_fast_update();
    return was;
}

void cuemuProfileReset(void)
{
    init();
    flush();
    g_nstat = 0;
    g_seen_access = g_ran_kernel = g_overflowed = 0;
}

int cuemuProfileAvailable(void)
{
    if (g_seen_access) return 1;
    return g_ran_kernel ? 0 : -1;
}

/* Rows merge the pcs of one (kernel, file:line, read/write, space). */
typedef struct {
    const char *kernel;
    char where[256];
    int write, shared;
    unsigned long long requests, units, lanes;
} row;

static row *g_rows;
static size_t g_nrows;

static void build_rows(void)
{
    flush();
    free(g_rows);
    g_rows = (row *)calloc(g_nstat ? g_nstat : 1, sizeof *g_rows);
    g_nrows = 0;
    if (!g_rows) return;
    for (size_t i = 0; i < g_nstat; i++) {
        const pc_stat *s = &g_stat[i];
        char where[512];
        cuemu_locate_pc(s->pc, where, sizeof where);
        /* keep "file:line" only (the locator may add the function); a pc with no line (code
           the compiler merged from two source lines) prints as "?" */
        char *sp = strchr(where, ' ');
        if (!strncmp(where, "an unknown", 10))
            snprintf(where, sizeof where, "?");
        else if (sp)
            *sp = 0;
        row *r = NULL;
        for (size_t j = 0; j < g_nrows; j++)
            if (g_rows[j].write == s->write && g_rows[j].shared == s->shared &&
                !strcmp(g_rows[j].kernel, s->kernel) && !strcmp(g_rows[j].where, where)) {
                r = &g_rows[j];
                break;
            }
        if (!r) {
            r = &g_rows[g_nrows++];
            r->kernel = s->kernel;
            where[sizeof r->where - 1] = 0;
            memcpy(r->where, where, sizeof r->where);
            r->write = s->write;
            r->shared = s->shared;
        }
        r->requests += s->requests;
        r->units += s->units;
        r->lanes += s->lanes;
    }
}

int cuemuProfileRows(void)
{
    init();
    build_rows();
    return (int)g_nrows;
}

int cuemuProfileRow(int i, char *kernel, int kn, char *where, int wn, long long *out)
{
    if (i < 0 || (size_t)i >= g_nrows) return -1;
    const row *r = &g_rows[i];
    if (kernel && kn > 0) snprintf(kernel, (size_t)kn, "%s", r->kernel);
    if (where && wn > 0) snprintf(where, (size_t)wn, "%s", r->where);
    if (out) {
        out[0] = r->write;
        out[1] = r->shared;
        out[2] = (long long)r->requests;
        out[3] = (long long)r->units;
        out[4] = (long long)r->lanes;
    }
    return 0;
}

static char *g_text;

const char *cuemuProfileReport(void)
{
    init();
    build_rows();
    size_t cap = 1024 + g_nrows * 400;
    free(g_text);
    g_text = (char *)malloc(cap);
    if (!g_text) return "";
    size_t n = 0;
#define OUT(...) do { int w_ = snprintf(g_text + n, cap - n, __VA_ARGS__); \
                      if (w_ > 0) n += (size_t)w_ < cap - n ? (size_t)w_ : cap - n - 1; } while (0)
    OUT("memory-access profile (counted by the emulator, not timed: requests are warp-wide "
        "accesses, lanes paired by their k-th execution of each load or store)\n");
    if (cuemuProfileAvailable() == 0) {
        OUT("  unavailable: this program's kernels were compiled without load/store "
            "instrumentation (the emulator's g++ build); build with clang++ to profile\n");
        return g_text;
    }
    if (!g_nrows) {
        OUT("  no global or shared memory access was counted\n");
        return g_text;
    }
    OUT("  %-28s %-34s %-13s %10s %9s %14s\n", "kernel", "file:line", "access", "requests",
        "lanes/req", "per request");
    for (size_t i = 0; i < g_nrows; i++) {
        const row *r = &g_rows[i];
        double q = r->requests ? (double)r->requests : 1.0;
        char per[64];
        if (r->shared)
            snprintf(per, sizeof per, "%.2f bank conflicts (%.2f-way)", r->units / q - 1.0, r->units / q);
        else
            snprintf(per, sizeof per, "%.2f sectors", r->units / q);
        const char *where = strrchr(r->where, '/');
        OUT("  %-28.28s %-34.34s %-13s %10llu %9.1f %s\n", r->kernel, where ? where + 1 : r->where,
            r->shared ? (r->write ? "shared write" : "shared read")
                      : (r->write ? "global write" : "global read"),
            r->requests, r->lanes / q, per);
    }
    OUT("  global: 32-byte sectors per request (1 float per lane, coalesced: 4; stride 32: 32); "
        "shared: extra passes per request from lanes touching different words of one bank\n");
    if (g_overflowed)
        OUT("  note: incomplete: a block had more than %u requests waiting for their other "
            "lanes (long loops per thread); its requests so far were counted with the lanes "
            "seen, the rest of that block not at all\n", PENDING_MAX);
#undef OUT
    return g_text;
}

static void report_at_exit(void)
{
    if (g_on < 0) return;
    fputs(cuemuProfileReport(), stderr);
}
