/* SPDX-License-Identifier: MIT */
/*
 * core_internal.h: what the core's own files share (sched.c, access.c, profile.c). Not seen by
 * student code or the runtime: the runtime reaches the core through cuemu_core.h only, and the
 * core reaches the runtime through cuemu_internal.h only.
 */
#ifndef CUEMU_CORE_INTERNAL_H
#define CUEMU_CORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "cuemu_core.h"
#include "cuemu_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the access hooks (hooks.c, access.c; see access.c's header comment) ------------------- */
/* The race detector's shadow of one 4-byte shared word. */
typedef struct {
    uint32_t w_epoch, r_epoch;      /* block-wide barrier epoch of the last write / read      */
    uint32_t w_wep, r_wep;          /* the accessing warp's rendezvous count at that time     */
    int32_t  w_tid, r_tid;          /* linear thread; r_tid -2: several readers               */
    uint8_t  w_mask, r_mask;        /* bytes of the word                                      */
    uint32_t quiet;                 /* == the epoch while a read can change nothing: several
                                       threads read every byte and none wrote in this epoch */
    void    *w_pc, *r_pc;
} shadow;

/* A shared region: the dynamic area or a static __shared__ variable. */
typedef struct {
    char *lo;
    size_t n;
    const char *name;
    shadow *sh;
    int dynamic;
} region;

/* What the hooks' inline fast path reads (kept by access.c): an access needs the slow path
   when it lies in [slo, slo + sspan) (where shared regions are) and is not a read of a quiet
   word of hit[0] or hit[1] (any other whole word of those two gets the check of that word
   alone, cuemu_access_word), or when it touches [zlo, zhi) (where guard zones are). [lo, lo +
   span) holds both: an access outside it (most global accesses, every coroutine frame's) is
   settled by one compare. hit[]: the regions the last shared accesses hit, the latest first
   (CUEMU_HITS of them, for the slow path). quiet[]: 4-byte reads of quiet words that the slow
   path saw lately, of any region, by address (a direct-mapped cache): a kernel that reads
   several __shared__ scalars between its reads of two arrays (NVIDIA's mergeSort: six) would
   otherwise send each to the slow path, which then also puts it in hit[0]. An entry holds the
   word's shadow, so a write (which clears its quiet) or a barrier (a new epoch) ends it with no
   more bookkeeping; entries are dropped whenever a shadow can move (cuemu_access_fast_update). */
#define CUEMU_HITS 8
#define CUEMU_QUIET_SLOTS 64
struct cuemu_quiet_slot {
    uintptr_t       a;           /* the read's address (UINTPTR_MAX: none) */
    const uint32_t *quiet;       /* its shadow word's quiet */
};
struct cuemu_access_fast {
    uintptr_t lo, span;
    uintptr_t slo, sspan;
    uintptr_t zlo, zhi;
    region   *hit[CUEMU_HITS];
    uint32_t  epoch;             /* the block-wide barrier epoch (odd) */
    struct cuemu_quiet_slot quiet[CUEMU_QUIET_SLOTS];
};

/* The region of hit[0] or hit[1] that holds address a, and a's offset in it (*off); NULL when
   neither does. What the fast path, the store's call and the atomics look at first. */
static inline __attribute__((always_inline)) region *cuemu_hit_region(
    const struct cuemu_access_fast *f, uintptr_t a, size_t *off)
{
    for (int i = 0; i < 2; i++) {
        region *r = f->hit[i];
        *off = (size_t)(a - (uintptr_t)r->lo);
        if (*off < r->n) return r;
    }
    return NULL;
}

/* A host thread's record while it runs blocks of a launch (cuemu_w points at its pub); sched.c
   extends it with the scheduler's state. Everything a block's run changes lives here, so that
   several host threads can each run blocks of one launch. */
#define CUEMU_MAX_REGIONS 256
#define CUEMU_MISSES 8
#define CUEMU_CO_FREE_LISTS 4
#define CUEMU_RMAP_SEVERAL 0xFFFFu
struct cuemu_worker {
    struct cuemu_tls pub;            /* first: cuemu_w points here */
    /* the lazy phase of a block (see g_lazy in sched.c), read by cuemu_thread_next (hooks.c):
       the thread at order position seq runs; positions up to seq_last (-1 outside the lazy
       phase) follow it on the same stack; order_pub[pos] is that thread */
    int seq, seq_last;
    cuemu_thread_pub **order_pub;
    struct cuemu_access_fast fast;   /* what the hooks' fast path reads (access.c) */
    /* access.c: the shared regions of this host thread (slot 0: the dynamic area) */
    region reg[CUEMU_MAX_REGIONS];
    int nreg;
    uintptr_t lo, hi;                /* bounding box of every region (0, 0: none) */
    /* the slow path's map of the static regions (access.c, region_map): for each 4-byte word
       of [rmap_lo, rmap_lo + rmap_span), 1 + the index of the one region in it, 0 for none, or
       CUEMU_RMAP_SEVERAL; rmap_span 0 when their span is too large to map (a search then) */
    uint16_t *rmap;
    uintptr_t rmap_lo, rmap_span;
    size_t rmap_cap;
    int rmap_nreg;                   /* the regions it was made for (static ones only come) */
    uint32_t wep[32];                /* each warp's rendezvous count */
    uintptr_t miss[CUEMU_MISSES];
    unsigned miss_next;
    int armed;                       /* a launch runs on this host thread */
    /* the barrier split (cuemu_split.h; sched.c's co_run): co[pos] is the coroutine frame
       and barrier of the thread at order position pos while it waits (its phase ==
       co_phase: co_run resumes them by position, with no thread to load first); co_waiting
       threads wait in
       this phase, co_count of them with a true predicate, at co_file:co_line (co_sites: 1 when
       some wait elsewhere, or at the same line of a file spelled apart) */
    struct cuemu_co_slot *co;
    unsigned co_phase;
    int co_waiting, co_count, co_sites;
    const char *co_file;
    int co_line;
    int co_active;                   /* split code runs: no wait may switch stacks */
    /* a thread-loop kernel (cuemu_split.h's CUEMU_TL_*): the block's threads, and 1 once the
       first thread's call ran the whole block (the other threads' calls return at once);
       tl_self: the thread whose call that was (the current one again when it returns) */
    int tl_n, tl_ran;
    cuemu_thread_pub *tl_self;
    char *co_ptr, *co_end;           /* the frames' arena: free space in its current chunk */
    /* frames of split helpers whose call ended (cuemu_co_sub_free), for the next call of the
       same size: a helper called in a loop reuses one frame instead of filling the arena */
    struct { size_t n; void *head; } co_free[CUEMU_CO_FREE_LISTS];
};
/* The arena's next chunk (sched.c), when the current one is full. */
CUEMU_HIDDEN void *cuemu_co_alloc_slow(size_t n);
struct cuemu_co_slot {
    void *frame;
    const char *file;
    int line;
    unsigned phase;
};
/* cuemu_w as a value that cannot change while the calling function runs (the compiler may read
   it once per function): for code that runs only between the start and the end of a launch on
   one host thread (the scheduler's switches, the hooks), never in a function that sets
   cuemu_w or one inlined into it (see cuemu_launch_run). */
static inline __attribute__((always_inline)) struct cuemu_worker *cuemu_w_fixed(void)
{
    struct cuemu_worker *p;
#if defined(__x86_64__)
    __asm__("movq (%1), %0" : "=r"(p) : "r"(&cuemu_w));
#elif defined(__aarch64__)
    __asm__("ldr %0, [%1]" : "=r"(p) : "r"(&cuemu_w));
#else
    p = (struct cuemu_worker *)cuemu_w;
#endif
    return p;
}
#if defined(__PIC__) && !defined(CUEMU_HOOKS_LTO) && defined(__x86_64__)
#define CUEMU_W_BY_CALL 1
/* In a shared library (a chapter's, which Python loads) the TLS variable's address is a call
   of __tls_get_addr, and gcc made that call again at each use instead of once per function:
   17 times in the race detector's slow path, in every iteration of the scheduler's loops.
   Here the same value comes from a call declared const, which the compiler makes once per
   function and hoists out of loops (as above, it cannot change while the caller runs). */
CUEMU_HIDDEN struct cuemu_worker *cuemu_w_call(void) __attribute__((const));
#define CUEMU_W (cuemu_w_call())
#else
#define CUEMU_W (cuemu_w_fixed())
#endif
#define cuemu_fast (CUEMU_W->fast)
/* The slow path: every check of one access (pc: its code address). */
CUEMU_HIDDEN void cuemu_access_slow(const void *addr, unsigned size, int write, void *pc);
/* The same, with pc the return address of this call (from a fast path inlined at the access),
   w the caller's CUEMU_W. */
CUEMU_HIDDEN void cuemu_access_slow_here(const void *addr, unsigned size, int write,
                                         struct cuemu_worker *w);
/* The slow path's check of one whole, aligned 4-byte word of region r (its shadow s), which
   the fast path found in hit[0] or hit[1]: what cuemu_access_slow does for it, without looking
   for its region. The _here form as cuemu_access_slow_here. */
CUEMU_HIDDEN void cuemu_access_word(region *r, shadow *s, int write, void *pc);
CUEMU_HIDDEN void cuemu_access_word_here(region *r, shadow *s, int write,
                                         struct cuemu_worker *w);
/* A 4-byte store that the fast path did not settle: the check of its word when it lies in
   hit[0] or hit[1], else the slow path's. */
CUEMU_HIDDEN void cuemu_access_store4(const void *p, void *pc);
CUEMU_HIDDEN void cuemu_access_store4_here(const void *p, struct cuemu_worker *w);
/* Recomputes cuemu_fast (the observer, the regions or the zones changed). */
void cuemu_access_fast_update(void);
void cuemu_access_launch_end(void);

/* Told by the scheduler: */
void cuemu_access_launch(const struct cuemu_launch_desc *d, void *dyn, size_t dyn_size,
                         const char *dyn_name);
void cuemu_access_dyn_name(const char *name);
void cuemu_access_block(void);
void cuemu_access_barrier(void);
void cuemu_access_warp_sync(unsigned warp);
void cuemu_access_shared_var(void *p, size_t n, const char *name);
/* For the profile: 1 if p lies in the dynamic shared area or a __shared__ variable. */
int  cuemu_access_in_shared(const void *p);
/* The region holding p: first byte, size, name (<cuda/barrier>'s bulk copies); 0 if none. */
int  cuemu_access_shared_extent(const void *p, const void **lo, size_t *n, const char **name);
/* Called for every access a kernel thread makes, once the checks passed (NULL: nobody). */
extern CUEMU_HIDDEN void (*cuemu_access_observer)(const void *addr, unsigned size, int write,
                                                  void *pc);

/* ---- the memory-access profile (profile.c), told of launches and blocks by access.c -------- */
void cuemu_profile_launch(const struct cuemu_launch_desc *d);
void cuemu_profile_block(void);

/* ---- the scheduler (sched.c) ---------------------------------------------------------------- */
#define cuemu_seq       (CUEMU_W->seq)
#define cuemu_seq_last  (CUEMU_W->seq_last)
#define cuemu_order_pub (CUEMU_W->order_pub)
/* The region table of an idle record (no launch on this host thread). */
void cuemu_access_worker_init(struct cuemu_worker *w);
/* The launch's report of a problem: at once on one host thread; with several, kept with the
   block that made it and given in block order when the launch ends (sched.c). */
void cuemu_core_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cuemu_core_diag_device(const char *line);
/* Stops the running launch with err (the message, unless "", is reported as the launch's diagnostic;
   sticky: until cudaDeviceReset, else the launch's own error, returned once by the
   synchronisation that ran it). */
void cuemu_launch_abort(int err, int sticky, const char *msg) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif
