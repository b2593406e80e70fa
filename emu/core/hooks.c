/* SPDX-License-Identifier: MIT */
/*
 * hooks.c: the code that runs for every load and store of an emulated kernel, and between its
 * threads: the hottest code of the emulator, kept apart so that it can be inlined into kernels.
 *
 * clang's -fsanitize-coverage=trace-loads,trace-stores (emu/emu.mk) calls __sanitizer_cov_loadN /
 * __sanitizer_cov_storeN before each access of N = 1, 2, 4, 8 or 16 bytes. The hook settles the
 * common case in a few instructions (fast_done: a global access away from every guard zone, or a
 * read of a shared word that several threads read and none wrote since the last barrier) and
 * hands everything else to cuemu_access_slow (access.c), which holds every check.
 *
 * With link-time optimisation (CUEMU_HOOKS_LTO: the clang build, emu/emu.mk) this file is
 * compiled to bitcode and linked with the kernels' bitcode, so each hook, and cuemu_thread_next,
 * is inlined where the compiler put the call: no call, no registers saved around it, and the
 * fast path's loads hoisted out of loops where nothing in the loop can change them. The slow
 * path is then called from the kernel's code at the access, whose address it records itself
 * (cuemu_access_slow_here); with no debug information here, the inlined instructions carry the
 * source line of the access. Without it (a g++ or sanitizer build) the hooks are ordinary
 * functions and pass their own return address.
 */
#include <stdint.h>

#include "core_internal.h"

#ifdef CUEMU_HOOKS_LTO
#define HOOK_INLINE __attribute__((always_inline))
#define SLOW(p, n, w) cuemu_access_slow_here((p), (n), (w), CUEMU_W)
#define WORD(r, s, w) cuemu_access_word_here((r), (s), (w), CUEMU_W)
#define STORE4(p) cuemu_access_store4_here((p), CUEMU_W)
#else
#define HOOK_INLINE
#define SLOW(p, n, w) cuemu_access_slow((p), (n), (w), __builtin_return_address(0))
#define WORD(r, s, w) cuemu_access_word((r), (s), (w), __builtin_return_address(0))
#define STORE4(p) cuemu_access_store4((p), __builtin_return_address(0))
#endif

/* 1 when the access certainly needs nothing more (see cuemu_access_fast in core_internal.h).
   Outside a launch, and for an access away from every shared region and guard zone (most
   global accesses, every coroutine frame's), that is one compare; the common read of a shared
   tile is settled by the region it hit last, the read of a shared scalar by the quiet words'
   cache. */
static inline __attribute__((always_inline)) int fast_done(uintptr_t a, unsigned size, int write)
{
    const struct cuemu_access_fast *f = &cuemu_fast;
    if (a - f->lo >= f->span) return 1;
    /* an atomic's own load and store: the race check leaves them out (cuemu_access_slow), so
       only the guard zones remain (the regions' bounding box may span global memory too) */
    const int atomic = CUEMU_W->pub.atomic_depth;
    if (!write && size == 4 && !atomic) {
        size_t off;
        region *r = cuemu_hit_region(f, a, &off);
        if (r) {
            if ((off & 3) || off + 4 > r->n) return 0;
            shadow *s = &r->sh[off / 4];
            if (s->quiet == f->epoch) return 1;
            /* a whole word of a region found lately: the race check of that word alone
               (sspan 0: no race check, or an observer, which must see every access of one
               instruction come from one code address, the slow path's call) */
            if (!f->sspan) return 0;
            WORD(r, s, 0);
            return 1;
        }
        /* a quiet word of another region, read lately (a __shared__ scalar) */
        const struct cuemu_quiet_slot *q = &f->quiet[(a >> 2) % CUEMU_QUIET_SLOTS];
        if (q->a == a && *q->quiet == f->epoch) return 1;
    }
    if (a - f->slo < f->sspan && !atomic) return 0;
    return a + size <= f->zlo || a >= f->zhi;
}

/* A 4-byte store the fast path did not settle goes to cuemu_access_store4, which looks at
   hit[0] and hit[1] itself: a shared store is rarely settled here (a write is always
   recorded), and the search written out at every store made the link's code generation
   longer than the call it saved. */
#define HOOK(N, T)                                                                         \
    HOOK_INLINE void __sanitizer_cov_load##N(T *p)                                         \
    {                                                                                      \
        if (!fast_done((uintptr_t)p, N, 0)) SLOW(p, N, 0);                                 \
    }                                                                                      \
    HOOK_INLINE void __sanitizer_cov_store##N(T *p)                                        \
    {                                                                                      \
        if (!fast_done((uintptr_t)p, N, 1)) {                                              \
            if (N == 4) STORE4(p);                                                         \
            else SLOW(p, N, 1);                                                            \
        }                                                                                  \
    }
HOOK(1, uint8_t)
HOOK(2, uint16_t)
HOOK(4, uint32_t)
HOOK(8, uint64_t)
HOOK(16, __int128)
#undef HOOK

/* cuemu_core.h: an atomic in the shared region a kernel's accesses hit last (a shared-memory
   histogram's bins) needs no compare-and-swap, which took most of such a kernel's time. */
HOOK_INLINE int cuemu_atomic_private(const void *p)
{
    size_t off;
    return cuemu_hit_region(&cuemu_fast, (uintptr_t)p, &off) != NULL;
}

/* A thread's kernel body returned during the block's lazy phase (sched.c): the next thread in
   order becomes current and runs on the same stack, with no switch. 0 when the caller must go
   back to the core (the block is done, or some thread waited). */
HOOK_INLINE int cuemu_thread_next(void)
{
    if (cuemu_seq >= cuemu_seq_last) return 0;
    cuemu_thread_pub *u = cuemu_order_pub[++cuemu_seq];
    CUEMU_W->pub.cur = u;
    CUEMU_W->pub.tidx = u->idx;
    return 1;
}

/* A split kernel's thread reached a barrier (cuemu_split.h): its coroutine frame waits in this
   phase; the core resumes it when every thread of the block has arrived (sched.c, co_run). */
HOOK_INLINE void cuemu_co_wait(void *frame, int pred, const char *file, int line)
{
    struct cuemu_worker *w = CUEMU_W;
    struct cuemu_co_slot *s = &w->co[w->pub.cur->pos];
    s->frame = frame;
    s->file = file;
    s->line = line;
    s->phase = w->co_phase;
    if (w->co_waiting++ == 0) {
        w->co_file = file;
        w->co_line = line;
    } else if (line != w->co_line || file != w->co_file) {
        w->co_sites = 1;
    }
    w->co_count += pred != 0;
}

/* Memory for a split thread's coroutine frame and its copy of the kernel's parameters: the
   block's arena, freed all at once when the next block starts (sched.c). */
HOOK_INLINE void *cuemu_co_alloc(size_t n)
{
    struct cuemu_worker *w = CUEMU_W;
    n = (n + 15) & ~(size_t)15;
    if ((size_t)(w->co_end - w->co_ptr) >= n && w->co_ptr) {
        void *p = w->co_ptr;
        w->co_ptr += n;
        return p;
    }
    return cuemu_co_alloc_slow(n);
}

HOOK_INLINE void cuemu_co_active(int on) { CUEMU_W->co_active = on; }

HOOK_INLINE int cuemu_co_is_active(void) { return CUEMU_W->co_active; }

/* A thread-loop kernel (cuemu_split.h): the first thread's call runs the block; it gets the
   block's size, every other call 0 (it returns at once). */
HOOK_INLINE int cuemu_tl_begin(void)
{
    struct cuemu_worker *w = CUEMU_W;
    if (w->tl_ran) return 0;
    w->tl_ran = 1;
    w->co_active = 1;
    w->tl_self = w->pub.cur;
    return w->tl_n;
}

/* The thread at order position p runs the code of a thread loop next. */
HOOK_INLINE void cuemu_tl_thread(int p)
{
    struct cuemu_worker *w = CUEMU_W;
    cuemu_thread_pub *u = w->order_pub[p];
    w->pub.cur = u;
    w->pub.tidx = u->idx;
}

/* A split helper's frame (cuemu_split.h's co_sub): one its size freed by an ended call, or the
   arena's; freed when the call ends, onto a list of frames of its size (a few sizes; a frame
   of another size stays in the arena until the block ends, as a kernel's own does). */
HOOK_INLINE void *cuemu_co_sub_alloc(size_t n)
{
    struct cuemu_worker *w = CUEMU_W;
    n = (n + 15) & ~(size_t)15;
    for (int k = 0; k < CUEMU_CO_FREE_LISTS; k++)
        if (w->co_free[k].n == n && w->co_free[k].head) {
            void *p = w->co_free[k].head;
            w->co_free[k].head = *(void **)p;
            return p;
        }
    return cuemu_co_alloc(n);
}

HOOK_INLINE void cuemu_co_sub_free(void *p, size_t n)
{
    struct cuemu_worker *w = CUEMU_W;
    n = (n + 15) & ~(size_t)15;
    for (int k = 0; k < CUEMU_CO_FREE_LISTS; k++)
        if (w->co_free[k].n == n || !w->co_free[k].n) {
            w->co_free[k].n = n;
            *(void **)p = w->co_free[k].head;
            w->co_free[k].head = p;
            return;
        }
}
