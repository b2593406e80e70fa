/* SPDX-License-Identifier: MIT */
/*
 * access.c: the one place that sees every load and store an emulated kernel makes.
 *
 * Emulated .cu files are compiled by clang with -fsanitize-coverage=trace-loads,trace-stores
 * (emu/emu.mk): before each load or store of 1, 2, 4, 8 or 16 bytes the compiler calls
 * __sanitizer_cov_loadN / __sanitizer_cov_storeN with the address. Those hooks are in hooks.c
 * (inlined into the kernels at the link where it can be): their fast path settles the common
 * accesses from cuemu_fast, which this file keeps, and calls cuemu_access_slow here for the
 * rest. Host code in the same file is instrumented too; outside a launch the fast path settles
 * every access, and outside a kernel (cuemu_cur == NULL) the slow path returns at once.
 *
 * Interface (declared in core_internal.h for the scheduler; cuemu_access_forget and
 * cuemuNoAccess in cuemu_core.h):
 *   cuemu_access_launch(d, dyn, dyn_size, dyn_name)  a launch starts (its dynamic shared area)
 *   cuemu_access_block()                             a block starts
 *   cuemu_access_barrier()                           every thread of the block passed __syncthreads
 *   cuemu_access_warp_sync(warp)                     lanes of a warp met (__syncwarp, shuffles)
 *   cuemu_access_shared_var(p, n, name)              a static __shared__ variable exists
 *   cuemuNoAccess(p, n, buf, buf_n, on)             (ctypes) bytes no kernel may touch: the
 *                                                    harness's guard zones around a buffer
 *   cuemu_access_observer                            a hook for what else wants every access:
 *                                                    the memory-access profile (profile.c,
 *                                                    CUEMU_PROFILE=1: 32-byte sectors per warp
 *                                                    request, bank conflicts) installs it
 * What it checks now, for every access a kernel thread makes:
 *   - alignment (through the compiler's -fsanitize=alignment check, whose handler is here): an
 *     access to global or shared memory through a pointer not aligned for its type (a float4
 *     at an address that is not a multiple of 16) stops the launch with
 *     cudaErrorMisalignedAddress (716, sticky), as a GPU does, naming kernel, block, thread,
 *     source line, type and address;
 *   - shared-memory races, as compute-sanitizer's racecheck: a shared word written by one thread
 *     and read or written by another with no __syncthreads between them (or, within a warp, no
 *     __syncwarp or other warp rendezvous) stops the launch with cudaErrorLaunchFailure (not
 *     sticky: the synchronisation that ran the launch returns it once), naming
 *     kernel, block, both threads, both source lines and the variable. The check follows the
 *     barriers, not the order the emulator happens to run threads in, so it finds the race in
 *     every thread order. Atomics are not races (the device header marks them).
 * CUEMU_RACECHECK=0 turns the race check off (alignment is always checked). The race check
 * needs clang (trace-loads/stores); the alignment check works with g++ and clang.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

#define E_MISALIGNED     716
#define E_LAUNCH_FAILURE 719

CUEMU_HIDDEN void (*cuemu_access_observer)(const void *addr, unsigned size, int write, void *pc);

/* ---- shared regions and their shadow (the types: core_internal.h) ------------------------------ */
/* Per host thread (struct cuemu_worker, core_internal.h): a launch spread over several host
   threads has a copy of every __shared__ variable per thread, and each checks its own. */
#define MAX_REGIONS CUEMU_MAX_REGIONS
#define g_reg   (CUEMU_W->reg)
#define g_nreg  (CUEMU_W->nreg)
#define g_lo    (CUEMU_W->lo)
#define g_hi    (CUEMU_W->hi)
#define g_hit   cuemu_fast.hit
#define g_epoch cuemu_fast.epoch
#define g_wep   (CUEMU_W->wep)
#define g_armed (CUEMU_W->armed)
#define g_miss  (CUEMU_W->miss)
#define g_miss_next (CUEMU_W->miss_next)
static int g_race_on = -1;
static const cuemu_launch_desc *g_launch;
static uintptr_t g_zlo = UINTPTR_MAX, g_zhi;    /* bounding box of the guard zones (below) */

/* What an empty slot of the quiet words' cache points at: never an epoch (they are odd). */
static const uint32_t never_quiet = 0;

static void quiet_flush(struct cuemu_access_fast *f)
{
    for (int i = 0; i < CUEMU_QUIET_SLOTS; i++) {
        f->quiet[i].a = UINTPTR_MAX;
        f->quiet[i].quiet = &never_quiet;
    }
}

/* The fast path's view. Outside a launch nothing is checked (no kernel thread runs); with an
   observer every access goes to the slow path (the zone box spans everything); without the
   race check no shared access needs one. */
/* A record no launch has used: nothing to check (the hooks' fast path settles every access). */
void cuemu_access_worker_init(struct cuemu_worker *w)
{
    w->fast.lo = w->fast.span = 0;
    w->fast.slo = w->fast.sspan = 0;
    w->fast.zlo = UINTPTR_MAX;
    w->fast.zhi = 0;
    w->fast.epoch = 1;
    for (int i = 0; i < CUEMU_HITS; i++) w->fast.hit[i] = &w->reg[0];
    quiet_flush(&w->fast);
    w->seq_last = -1;
    w->rmap_nreg = -1;
}

void cuemu_access_fast_update(void)
{
    struct cuemu_access_fast *f = &cuemu_fast;
    /* a region's shadow may have moved (region_set), an observer come: nothing cached stays */
    quiet_flush(f);
    f->slo = f->sspan = 0;
    if (!g_armed) {
        f->lo = f->span = 0;
        f->zlo = UINTPTR_MAX;
        f->zhi = 0;
    } else if (cuemu_access_observer) {
        f->lo = 0;
        f->span = UINTPTR_MAX;
        f->zlo = 0;
        f->zhi = UINTPTR_MAX;
    } else {
        f->slo = g_lo;
        f->sspan = g_race_on ? g_hi - g_lo : 0;
        f->zlo = g_zlo;
        f->zhi = g_zhi;
        /* the box: the shared regions and the zones, these from 15 bytes before the first (an
           access of up to 16 bytes that starts there reaches into it) */
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        if (f->sspan) { lo = f->slo; hi = f->slo + f->sspan; }
        if (g_zhi > g_zlo) {
            uintptr_t zl = g_zlo > 15 ? g_zlo - 15 : 0;
            if (zl < lo) lo = zl;
            if (g_zhi > hi) hi = g_zhi;
        }
        f->lo = hi > lo ? lo : 0;
        f->span = hi > lo ? hi - lo : 0;
    }
}

/* Addresses inside the regions' bounding box but in none of them, found lately: the guard
   variable of each __shared__ declaration's registration (a static the rewriter adds beside the
   variable, tested by every thread that passes the declaration) lies between shared arrays. */
#define MISSES CUEMU_MISSES

/* The map of the static regions (core_internal.h), made again when one was added: they never
   move (thread_local storage) and only come, while the dynamic area (region 0, looked at
   first) changes at every launch. Up to 16 MB of span (4M words, 8 MB of map); beyond, none. */
#define RMAP_MAX_WORDS ((uintptr_t)1 << 22)
static void region_map(struct cuemu_worker *w)
{
    if (w->rmap_nreg == w->nreg) return;
    w->rmap_nreg = w->nreg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 1; i < w->nreg; i++) {
        if (!w->reg[i].n) continue;
        if ((uintptr_t)w->reg[i].lo < lo) lo = (uintptr_t)w->reg[i].lo;
        if ((uintptr_t)w->reg[i].lo + w->reg[i].n > hi) hi = (uintptr_t)w->reg[i].lo + w->reg[i].n;
    }
    lo &= ~(uintptr_t)3;
    size_t words = hi > lo ? (hi - lo + 3) / 4 : 0;
    w->rmap_lo = lo;
    w->rmap_span = 0;
    if (!words || words > RMAP_MAX_WORDS) return;
    if (words > w->rmap_cap) {
        uint16_t *m = (uint16_t *)realloc(w->rmap, words * sizeof *m);
        if (!m) return;
        w->rmap = m;
        w->rmap_cap = words;
    }
    memset(w->rmap, 0, words * sizeof *w->rmap);
    for (int i = 1; i < w->nreg; i++) {
        const region *r = &w->reg[i];
        if (!r->n) continue;
        for (uintptr_t k = ((uintptr_t)r->lo - lo) / 4; k <= ((uintptr_t)r->lo + r->n - 1 - lo) / 4; k++)
            w->rmap[k] = w->rmap[k] ? CUEMU_RMAP_SEVERAL : (uint16_t)(i + 1);
    }
    w->rmap_span = words * 4;
}

static void bounds(void)
{
    g_lo = UINTPTR_MAX;
    g_hi = 0;
    for (int i = 0; i < g_nreg; i++) {
        if (!g_reg[i].n) continue;
        if ((uintptr_t)g_reg[i].lo < g_lo) g_lo = (uintptr_t)g_reg[i].lo;
        if ((uintptr_t)g_reg[i].lo + g_reg[i].n > g_hi) g_hi = (uintptr_t)g_reg[i].lo + g_reg[i].n;
    }
    if (g_hi == 0) g_lo = 0;
    region_map(CUEMU_W);
    memset(g_miss, 0, sizeof g_miss);       /* a new region may hold one of them */
    cuemu_access_fast_update();
}

static void region_set(region *r, void *p, size_t n, const char *name, int dynamic)
{
    size_t words = (n + 3) / 4;
    if (r->sh && r->n >= n) {
        memset(r->sh, 0, words * sizeof *r->sh);
    } else {
        free(r->sh);
        r->sh = (shadow *)calloc(words ? words : 1, sizeof *r->sh);
    }
    r->lo = (char *)p;
    r->n = r->sh ? n : 0;
    r->name = name;
    r->dynamic = dynamic;
}

void cuemu_access_shared_var(void *p, size_t n, const char *name)
{
    for (int i = 0; i < g_nreg; i++)
        if (g_reg[i].lo == (char *)p && !g_reg[i].dynamic) {
            if (name && !g_reg[i].name) g_reg[i].name = name;
            return;
        }
    if (g_nreg >= MAX_REGIONS - 1) return;
    /* slot 0 is kept for the dynamic area */
    if (g_nreg == 0) g_nreg = 1;
    region_set(&g_reg[g_nreg++], p, n, name, 0);
    bounds();
}

void cuemu_access_launch(const struct cuemu_launch_desc *d, void *dyn, size_t dyn_size, const char *dyn_name)
{
    g_launch = d;
    if (g_race_on < 0) {
        const char *e = getenv("CUEMU_RACECHECK");
        g_race_on = !(e && e[0] == '0');
    }
    if (g_nreg == 0) g_nreg = 1;
    g_armed = 1;
    region_set(&g_reg[0], dyn, dyn ? dyn_size : 0, dyn_name, 1);
    cuemu_profile_launch(d);
    bounds();
}

void cuemu_access_launch_end(void)
{
    g_armed = 0;
    cuemu_access_fast_update();
}

/* For the profile (profile.c): 1 if p lies in the dynamic shared area or a __shared__ variable. */
int cuemu_access_in_shared(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (a < g_lo || a >= g_hi) return 0;
    for (int i = 0; i < g_nreg; i++)
        if (a - (uintptr_t)g_reg[i].lo < g_reg[i].n) return 1;
    return 0;
}

/* For <cuda/barrier>'s bulk copies: the shared region holding p (its first byte, size and
   name, "dynamic shared memory" for the dynamic area); 0 if p lies in none. */
int cuemu_access_shared_extent(const void *p, const void **lo, size_t *n, const char **name)
{
    uintptr_t a = (uintptr_t)p;
    if (a < g_lo || a >= g_hi) return 0;
    for (int i = 0; i < g_nreg; i++)
        if (a - (uintptr_t)g_reg[i].lo < g_reg[i].n) {
            *lo = g_reg[i].lo;
            *n = g_reg[i].n;
            *name = g_reg[i].name ? g_reg[i].name
                                  : g_reg[i].dynamic ? "dynamic shared memory" : "?";
            return 1;
        }
    return 0;
}

void cuemu_access_dyn_name(const char *name)
{
    if (g_nreg > 0) g_reg[0].name = name;
}

void cuemu_access_block(void)
{
    /* a new block: nothing written before can race with what its threads do */
    g_epoch += 2;
    memset(g_wep, 0, sizeof g_wep);
    cuemu_profile_block();
}

void cuemu_access_barrier(void) { g_epoch += 2; }

void cuemu_access_warp_sync(unsigned warp)
{
    if (warp < 32) g_wep[warp]++;
}

/* ---- reports ------------------------------------------------------------------------------------ */
static void site(void *pc, char *out, size_t n)
{
    cuemu_locate_pc(pc, out, n);
}

static void tid3(int linear, unsigned out[3])
{
    unsigned bx = cuemu_block_dim.x, by = cuemu_block_dim.y;
    out[0] = (unsigned)linear % bx;
    out[1] = ((unsigned)linear / bx) % by;
    out[2] = (unsigned)linear / (bx * by);
}

static const char *var_desc(const region *r, const char *a, char *buf, size_t n)
{
    if (r->dynamic)
        snprintf(buf, n, "extern __shared__ '%s' byte %td", r->name ? r->name : "?", a - r->lo);
    else
        snprintf(buf, n, "__shared__ '%s' byte %td (of %zu)", r->name ? r->name : "?", a - r->lo, r->n);
    return buf;
}

static __attribute__((noinline, cold)) void race(const region *r, const char *a, const char *kind,
                                                 int t_other, void *pc_other,
                                                 const char *other_what, const char *this_what,
                                                 void *pc)
{
    char s1[512], s2[512], v[200], msg[2048];
    unsigned me[3], ot[3];
    site(pc_other, s1, sizeof s1);
    site(pc, s2, sizeof s2);
    tid3((int)cuemu_cur->linear, me);
    tid3(t_other < 0 ? 0 : t_other, ot);
    char other[64];
    if (t_other < 0) {
        snprintf(other, sizeof other, "several threads");
        other_what = "read";
    }
    else snprintf(other, sizeof other, "thread (%u,%u,%u)", ot[0], ot[1], ot[2]);
    snprintf(msg, sizeof msg,
             "shared memory race (%s) in kernel %s (launched at %s:%d), block (%u,%u,%u), on %s: "
             "%s %s it at %s, and thread (%u,%u,%u) %s it at %s, with no __syncthreads() between "
             "(the result depends on which thread runs first); launch aborted",
             kind, g_launch ? g_launch->kernel : "?", g_launch ? g_launch->file : "?",
             g_launch ? g_launch->line : 0, cuemu_block_idx.x, cuemu_block_idx.y, cuemu_block_idx.z,
             var_desc(r, a, v, sizeof v), other, other_what, s1, me[0], me[1], me[2], this_what, s2);
    cuemu_launch_abort(E_LAUNCH_FAILURE, 0, msg);
}

/* The compiler's alignment check (-fsanitize=alignment, recoverable, no runtime linked): it
   calls this before a load or store through a pointer not aligned for its type, which for
   CUDA's vector types (float4: 16 bytes) and scalars is what a GPU requires of an access. */
struct ubsan_loc { const char *file; uint32_t line, column; };
struct ubsan_type { uint16_t kind, info; char name[1]; };
struct ubsan_mismatch {
    struct ubsan_loc loc;
    const struct ubsan_type *type;
    unsigned char log_align;
    unsigned char check_kind;
};

static void misaligned(struct ubsan_mismatch *d, uintptr_t p)
{
    if (!cuemu_cur || !p || !d) return;
    unsigned align = 1u << d->log_align;
    if (!(p & (align - 1))) return;
    const char *space = NULL;
    for (int i = 0; i < g_nreg; i++)
        if (p - (uintptr_t)g_reg[i].lo < g_reg[i].n) { space = "shared memory"; break; }
    cuemu_alloc_info ai;
    if (!space && cuemu_alloc_lookup((const void *)p, &ai)) space = "global memory";
    if (!space) return;                   /* a local variable: not the GPU's concern here */
    /* check kinds 0 load, 1 store; the others (member access, reference binding...) come
       with an access of the same alignment */
    const char *what = d->check_kind == 0 ? "read" : d->check_kind == 1 ? "write" : "access";
    char msg[1500];
    unsigned me[3];
    tid3((int)cuemu_cur->linear, me);
    snprintf(msg, sizeof msg,
             "misaligned %s of %s %s in kernel %s, block (%u,%u,%u), thread (%u,%u,%u) at %s:%u: "
             "address %p is not a multiple of %u -> cudaErrorMisalignedAddress; launch at %s:%d "
             "aborted", what, space, d->type ? d->type->name : "?",
             g_launch ? g_launch->kernel : "?", cuemu_block_idx.x, cuemu_block_idx.y,
             cuemu_block_idx.z, me[0], me[1], me[2], d->loc.file ? d->loc.file : "?", d->loc.line,
             (void *)p, align, g_launch ? g_launch->file : "?", g_launch ? g_launch->line : 0);
    cuemu_launch_abort(E_MISALIGNED, 1, msg);
}

/* Weak: a sanitizer build (make EMU_SANITIZE=thread or address, whose files are compiled
   without the alignment check) links clang's sanitizer runtime, which has its own, and the
   link failed on the second definition. */
__attribute__((weak)) void __ubsan_handle_type_mismatch_v1(struct ubsan_mismatch *d, uintptr_t p)
{
    misaligned(d, p);
}
__attribute__((weak)) void __ubsan_handle_type_mismatch_v1_abort(struct ubsan_mismatch *d,
                                                                 uintptr_t p)
{
    misaligned(d, p);
}

/* The compiler's index check (-fsanitize=array-bounds; gcc: bounds): an index outside an array
   whose size it knows, a thread's local array or a __shared__ one. On a GPU the access reads or
   overwrites whatever lies beyond the array (another variable, another array of the tile), and
   what a test then sees depends on the code generated; here the launch stops at the access.
   A chapter's entry points are compiled without the check (CUEMU_HOST_FN); in other host code
   the report goes to stderr and the process stops, the check not being recoverable. */
struct ubsan_oob {
    struct ubsan_loc loc;
    const struct ubsan_type *array, *index;
};

static void out_of_bounds(struct ubsan_oob *d, uintptr_t v, int fatal)
{
    if (!d) return;
    /* the index: an integer of 2^(info >> 1) bits, signed when info & 1, held in v itself */
    long long idx = (long long)v;
    int sgn = 1;
    if (d->index && d->index->kind == 0) {
        unsigned bits = 1u << (d->index->info >> 1);
        sgn = d->index->info & 1;
        if (bits < 64) {
            uint64_t u = (uint64_t)v & ((UINT64_C(1) << bits) - 1);
            idx = sgn && (u >> (bits - 1)) ? (long long)(u | ~((UINT64_C(1) << bits) - 1))
                                           : (long long)u;
        }
    }
    /* the array's type names its size: 'float[8]', 'float[16][16]' (the first is the one
       checked); gcc writes 'float [8]', shown as clang writes it so that reports read the same */
    char name[128];
    size_t m = 0;
    for (const char *c = d->array ? d->array->name : "?"; *c && m + 1 < sizeof name; c++)
        if (!(c[0] == ' ' && c[1] == '[')) name[m++] = *c;
    name[m] = 0;
    const char *lb = strchr(name, '[');
    char valid[96] = "";
    long long n = lb ? strtoll(lb + 1, NULL, 10) : 0;
    if (n > 0) snprintf(valid, sizeof valid, ": its indices are 0 to %lld", n - 1);
    char msg[1500], at[32];
    unsigned me[3];
    if (sgn) snprintf(at, sizeof at, "%lld", idx);
    else snprintf(at, sizeof at, "%llu", (unsigned long long)idx);
    if (!cuemu_cur) {
        if (!fatal) return;
        /* host code (not a chapter's entry point): no launch to stop, and the compiled check
           does not go on after this call */
        fprintf(stderr, "cuemu: out-of-bounds index %s of an array %s in host code at %s:%u%s; "
                "the process stops here\n", at, name, d->loc.file ? d->loc.file : "?",
                d->loc.line, valid);
        abort();
    }
    tid3((int)cuemu_cur->linear, me);
    snprintf(msg, sizeof msg,
             "out-of-bounds index %s of an array %s in kernel %s, block (%u,%u,%u), thread "
             "(%u,%u,%u) at %s:%u%s (a thread's own array or a __shared__ one: on a GPU the "
             "access reads or overwrites whatever lies beyond it) -> cudaErrorIllegalAddress; "
             "launch at %s:%d aborted", at, name, g_launch ? g_launch->kernel : "?",
             cuemu_block_idx.x, cuemu_block_idx.y, cuemu_block_idx.z, me[0], me[1], me[2],
             d->loc.file ? d->loc.file : "?", d->loc.line, valid,
             g_launch ? g_launch->file : "?", g_launch ? g_launch->line : 0);
    cuemu_launch_abort(700 /* cudaErrorIllegalAddress */, 1, msg);
}

/* Weak, as the alignment check's handlers above. Emulated code is compiled with the check not
   recoverable (emu/emu.mk): the compiler then knows that the failing branch does not come
   back, and keeps a kernel's inner loop as tight as without it (a tiled matmul's unrolled loop
   was left rolled by the recoverable call, 103 ms to 155 ms). */
__attribute__((weak)) void __ubsan_handle_out_of_bounds(struct ubsan_oob *d, uintptr_t index)
{
    out_of_bounds(d, index, 0);
}
__attribute__((weak, noreturn)) void __ubsan_handle_out_of_bounds_abort(struct ubsan_oob *d,
                                                                       uintptr_t index)
{
    out_of_bounds(d, index, 1);
    abort();
}

/* ---- no-access zones (the Python harness's guard zones around a DeviceBuffer) --------------------- */
typedef struct { uintptr_t lo, hi, buf_lo, buf_hi; } zone;
#define MAX_ZONES 4096
static zone g_zone[MAX_ZONES];
static int g_nzone;

static void zone_bounds(void)
{
    g_zlo = UINTPTR_MAX;
    g_zhi = 0;
    for (int i = 0; i < g_nzone; i++) {
        if (g_zone[i].lo < g_zlo) g_zlo = g_zone[i].lo;
        if (g_zone[i].hi > g_zhi) g_zhi = g_zone[i].hi;
    }
    cuemu_access_fast_update();
}

/* Exported for ctypes: bytes [p, p+n) of an allocation must not be touched by a kernel (on = 1)
   or may be again (on = 0). A kernel that reads or writes them stops with
   cudaErrorIllegalAddress and a report naming thread, line and how far outside [buf,
   buf+buf_n) it went. Returns 0, or -1 when the table is full. */
int cuemuNoAccess(void *p, size_t n, void *buf, size_t buf_n, int on)
{
    uintptr_t lo = (uintptr_t)p;
    if (!on) {
        for (int i = 0; i < g_nzone; i++)
            if (g_zone[i].lo == lo) { g_zone[i] = g_zone[--g_nzone]; i--; }
        zone_bounds();
        return 0;
    }
    if (g_nzone >= MAX_ZONES || !n) return -1;
    g_zone[g_nzone].lo = lo;
    g_zone[g_nzone].hi = lo + n;
    g_zone[g_nzone].buf_lo = (uintptr_t)buf;
    g_zone[g_nzone].buf_hi = (uintptr_t)buf + buf_n;
    g_nzone++;
    zone_bounds();
    return 0;
}

/* The runtime frees [lo, hi): zones inside it go with it. */
void cuemu_access_forget(const void *lo, const void *hi)
{
    int before = g_nzone;
    for (int i = 0; i < g_nzone; i++)
        if (g_zone[i].lo >= (uintptr_t)lo && g_zone[i].lo < (uintptr_t)hi) { g_zone[i] = g_zone[--g_nzone]; i--; }
    if (g_nzone != before) zone_bounds();
}

static __attribute__((noinline, cold)) void zone_hit(const zone *z, uintptr_t a, int write,
                                                     void *pc)
{
    char s[512], msg[1500];
    unsigned me[3];
    site(pc, s, sizeof s);
    tid3((int)cuemu_cur->linear, me);
    long long off = a < z->buf_lo ? (long long)(z->buf_lo - a) : (long long)(a - z->buf_hi);
    snprintf(msg, sizeof msg,
             "out-of-bounds %s of global memory in kernel %s, block (%u,%u,%u), thread (%u,%u,%u) at "
             "%s: address %p is %lld bytes %s of a %llu-byte buffer (in the guard zone the test "
             "harness keeps around it); launch at %s:%d aborted", write ? "write" : "read",
             g_launch ? g_launch->kernel : "?", cuemu_block_idx.x, cuemu_block_idx.y, cuemu_block_idx.z,
             me[0], me[1], me[2], s, (void *)a, off, a < z->buf_lo ? "before the start" : "past the end",
             (unsigned long long)(z->buf_hi - z->buf_lo), g_launch ? g_launch->file : "?",
             g_launch ? g_launch->line : 0);
    cuemu_launch_abort(700 /* cudaErrorIllegalAddress */, 1, msg);
}

/* ---- the check --------------------------------------------------------------------------------- */
/* The shadow word s of region r, of which an access by this thread covers the bytes in mask.
   Inlined with a constant mask for the common whole-word access. */
static inline __attribute__((always_inline)) void word_access(struct cuemu_worker *w, region *r,
                                                              shadow *s, uint8_t mask,
                                                              const char *a, int write, void *pc)
{
    const uint32_t ep = w->fast.epoch;
    /* the common read of a shared tile: nothing to report and nothing to record */
    if (!write && s->quiet == ep) return;
    const cuemu_thread_pub *cur = w->pub.cur;
    const int me = (int)cur->linear;
    const uint32_t wep = w->wep[cur->warp < 32 ? cur->warp : 31];
    /* a conflicting earlier access: same barrier epoch, other thread, overlapping bytes,
       and, for a thread of the same warp, no warp rendezvous since */
#define UNORDERED(tid, e, wp) ((e) == ep && (tid) != me && \
        ((unsigned)(tid) / 32 != (unsigned)me / 32 || (wp) == wep))
    if (s->w_mask & mask && UNORDERED(s->w_tid, s->w_epoch, s->w_wep))
        race(r, a, write ? "write after write" : "read after write", s->w_tid, s->w_pc,
             "writes", write ? "writes" : "reads", pc);
    if (write && (s->r_mask & mask) && s->r_epoch == ep &&
        (s->r_tid == -2 || UNORDERED(s->r_tid, s->r_epoch, s->r_wep)))
        race(r, a, "write after read", s->r_tid, s->r_pc, "reads", "writes", pc);
#undef UNORDERED
    if (write) {
        s->w_epoch = ep;
        s->w_wep = wep;
        s->w_tid = me;
        s->w_mask = mask;
        s->w_pc = pc;
        s->quiet = 0;
    } else if (s->r_epoch == ep && s->r_tid != me && (s->r_mask & mask)) {
        s->r_tid = -2;
        s->r_mask |= mask;
        /* (never while an observer watches: the hooks' fast path would settle such reads) */
        if (s->r_mask == 0xF && (s->w_epoch != ep || !s->w_mask) && !cuemu_access_observer)
            s->quiet = ep;
    } else {
        s->r_epoch = ep;
        s->r_wep = wep;
        s->r_tid = me;
        s->r_mask = mask;
        s->r_pc = pc;
    }
}

/* Any access: each word it touches, with the bytes of that word it covers. */
static __attribute__((noinline)) void shared_access(struct cuemu_worker *w, region *r,
                                                    const char *a, unsigned size, int write,
                                                    void *pc)
{
    size_t off = (size_t)(a - r->lo);
    for (size_t k = off / 4; k * 4 < off + size && k * 4 < r->n; k++) {
        /* the bytes of word k the access covers */
        size_t b0 = k * 4 > off ? 0 : off - k * 4;
        size_t b1 = (k + 1) * 4 < off + size ? 4 : off + size - k * 4;
        uint8_t mask = (uint8_t)(((1u << b1) - 1) & ~((1u << b0) - 1));
        word_access(w, r, &r->sh[k], mask, a, write, pc);
    }
}

static __attribute__((noinline)) region *find_region_slow(struct cuemu_worker *w, uintptr_t a)
{
    for (int i = 0; i < w->nreg; i++)
        if (a - (uintptr_t)w->reg[i].lo < w->reg[i].n) return &w->reg[i];
    return NULL;
}

/* The region holding address a, or NULL: the one found last, then the dynamic area and the
   static regions' map (region_map), or, without a map, the regions found last, the latest
   first (a kernel's accesses mostly go to a few arrays: a tiled matmul's two tiles, a merge
   sort's eight). hit[0] and hit[1] are the fast path's (hooks.c). */
static inline __attribute__((always_inline)) region *find_region(struct cuemu_worker *w,
                                                                  uintptr_t a)
{
    region **hit = w->fast.hit;
    if (a - w->lo >= w->hi - w->lo) return NULL;
    region *r = hit[0];
    if (a - (uintptr_t)r->lo < r->n) return r;
    if (w->rmap_span) {
        r = &w->reg[0];
        if (a - (uintptr_t)r->lo >= r->n) {
            uintptr_t off = a - w->rmap_lo;
            if (off >= w->rmap_span) return NULL;
            unsigned k = w->rmap[off / 4];
            if (k == CUEMU_RMAP_SEVERAL) r = find_region_slow(w, a);
            else if (!k || a - (uintptr_t)w->reg[k - 1].lo >= w->reg[k - 1].n) return NULL;
            else r = &w->reg[k - 1];
            if (!r) return NULL;
        }
        hit[1] = hit[0];
        hit[0] = r;
        return r;
    }
    int i = 1;
    for (; i < CUEMU_HITS; i++) {
        r = hit[i];
        if (a - (uintptr_t)r->lo < r->n) break;
    }
    if (i == CUEMU_HITS) {
        for (int k = 0; k < MISSES; k++)
            if (w->miss[k] == a) return NULL;
        if (!(r = find_region_slow(w, a))) {
            w->miss[w->miss_next++ % MISSES] = a;
            return NULL;
        }
        i = CUEMU_HITS - 1;
    }
    for (; i > 0; i--) hit[i] = hit[i - 1];
    hit[0] = r;
    return r;
}

/* A 4-byte read of a that left its word (shadow s) quiet: the fast path settles the next one
   from the quiet words' cache (hooks.c), also once its region has left hit[]. */
static inline __attribute__((always_inline)) void quiet_remember(struct cuemu_worker *w,
                                                                uintptr_t a, shadow *s)
{
    struct cuemu_quiet_slot *q = &w->fast.quiet[(a >> 2) % CUEMU_QUIET_SLOTS];
    q->a = a;
    q->quiet = &s->quiet;
}

/* Everything about one access that the hooks' fast path (hooks.c) could not settle; pc is the
   code address of the access (the return address of the hook, or of the call here). */
static inline __attribute__((always_inline)) void access_slow(struct cuemu_worker *w,
                                                             const void *addr, unsigned size,
                                                             int write, void *pc)
{
    if (!w->pub.cur) return;
    uintptr_t a = (uintptr_t)addr;
    region *r = find_region(w, a);
    if (r) {
        if (g_race_on && !w->pub.atomic_depth) {
            size_t off = (size_t)(a - (uintptr_t)r->lo);
            /* whole aligned words inside the region (every float, int, double, float4 access
               of a correct kernel) */
            if (!(off & 3) && size >= 4 && off + size <= r->n) {
                shadow *s = &r->sh[off / 4];
                word_access(w, r, s, 0xF, (const char *)addr, write, pc);
                if (size == 4 && !write && s->quiet == w->fast.epoch) quiet_remember(w, a, s);
                if (size >= 8) {
                    word_access(w, r, s + 1, 0xF, (const char *)addr, write, pc);
                    if (size == 16) {
                        word_access(w, r, s + 2, 0xF, (const char *)addr, write, pc);
                        word_access(w, r, s + 3, 0xF, (const char *)addr, write, pc);
                    }
                }
            } else {
                shared_access(w, r, (const char *)addr, size, write, pc);
            }
        }
    } else if (a + size > g_zlo && a < g_zhi) {
        for (int i = 0; i < g_nzone; i++)
            if (a + size > g_zone[i].lo && a < g_zone[i].hi) zone_hit(&g_zone[i], a, write, pc);
    }
    if (cuemu_access_observer) cuemu_access_observer(addr, size, write, pc);
}

__attribute__((noinline)) void cuemu_access_slow(const void *addr, unsigned size, int write, void *pc)
{
    /* the record read once: each use of cuemu_w in this file is a call of __tls_get_addr
       (dynamic TLS of a library that Python loads), four or more per shared access before */
    access_slow(CUEMU_W, addr, size, write, pc);
}

/* The same, called from the fast path inlined into the kernel (hooks.c, CUEMU_HOOKS_LTO): this
   call's own return address is the access's, and the kernel hands over the host thread's
   record it has read already (a TLS lookup less, and one call instead of two: in NVIDIA's
   mergeSort a billion shared accesses come here). */
__attribute__((noinline)) void cuemu_access_slow_here(const void *addr, unsigned size, int write,
                                                      struct cuemu_worker *w)
{
    access_slow(w, addr, size, write, __builtin_return_address(0));
}

/* One whole aligned word of a region the fast path found lately (hooks.c), which calls this
   only while the race check is on and no observer watches: access_slow's work for it, less
   the search for its region. (In NVIDIA's mergeSort, 600 million accesses came to the slow
   path, nearly all of them such words, first touched since the barrier.) */
static inline __attribute__((always_inline)) void access_word(struct cuemu_worker *w, region *r,
                                                             shadow *s, int write, void *pc)
{
    if (!w->pub.cur) return;
    const char *a = r->lo + (s - r->sh) * 4;
    word_access(w, r, s, 0xF, a, write, pc);
    if (!write && s->quiet == w->fast.epoch) quiet_remember(w, (uintptr_t)a, s);
}

/* A 4-byte store (hooks.c): the check of its word when it lies, whole, in hit[0] or hit[1]
   (and, as above, the race check is on and no observer watches; nor is it an atomic's), else
   the slow path. */
static inline __attribute__((always_inline)) void access_store4(struct cuemu_worker *w,
                                                               const void *p, void *pc)
{
    if (w->fast.sspan && !w->pub.atomic_depth) {
        size_t off;
        region *r = cuemu_hit_region(&w->fast, (uintptr_t)p, &off);
        if (r && !(off & 3) && off + 4 <= r->n) {
            access_word(w, r, &r->sh[off / 4], 1, pc);
            return;
        }
    }
    access_slow(w, p, 4, 1, pc);
}

__attribute__((noinline)) void cuemu_access_store4(const void *p, void *pc)
{
    access_store4(CUEMU_W, p, pc);
}

__attribute__((noinline)) void cuemu_access_store4_here(const void *p, struct cuemu_worker *w)
{
    access_store4(w, p, __builtin_return_address(0));
}

__attribute__((noinline)) void cuemu_access_word(region *r, shadow *s, int write, void *pc)
{
    access_word(CUEMU_W, r, s, write, pc);
}

__attribute__((noinline)) void cuemu_access_word_here(region *r, shadow *s, int write,
                                                      struct cuemu_worker *w)
{
    access_word(w, r, s, write, __builtin_return_address(0));
}
