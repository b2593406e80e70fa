/* SPDX-License-Identifier: MIT */
/*
 * The kernel-running core: fibers, the block scheduler, barriers, warp rendezvous, the
 * watchdog and fault reports.
 *
 * A launch runs its blocks one after another on each host thread it uses (one, or several:
 * "several host threads"; a cluster's blocks each on its own, taking turns: "thread block
 * clusters"); the threads of a block are fibers that switch only at barriers, warp operations
 * and exit. Consequences we rely on: a static __shared__ array can be thread_local storage (one
 * block lives at a time on a host thread), and a run is deterministic for a given CUEMU_ORDER.
 */
#define _GNU_SOURCE
/* A kernel that fails is left by siglongjmp from the failing fiber's stack to its host
   thread's. glibc's fortified longjmp (_FORTIFY_SOURCE, which Ubuntu's gcc turns on by default)
   takes a jump to a stack at a lower address for a jump into a dead frame and aborts the
   process ("longjmp causes uninitialized stack frame"): it does not know fibers. */
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "core_internal.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CUEMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CUEMU_TSAN 1
#endif

#ifdef CUEMU_TSAN
#define CUEMU_TSAN_ON 1
#else
#define CUEMU_TSAN_ON 0
#endif

#ifdef CUEMU_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif
#ifdef CUEMU_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void  __tsan_destroy_fiber(void *fiber);
void  __tsan_switch_to_fiber(void *fiber, unsigned flags);
void  __tsan_acquire(void *addr);
void  __tsan_release(void *addr);
#endif

#ifdef CUEMU_TSAN
/* A fault report jumps from a signal handler on a fiber back to the launcher; TSan then
   believes the rest of the program runs inside that handler. Races stay reported. */
const char *__tsan_default_options(void) { return "report_signal_unsafe=0"; }
#endif

/* CUDA's numbers; the core does not include cuda_runtime.h (it is C and the runtime's). */
enum {
    E_INVALID_VALUE = 1, E_ILLEGAL_ADDRESS = 700, E_LAUNCH_OUT_OF_RESOURCES = 701,
    E_LAUNCH_TIMEOUT = 702, E_ASSERT = 710, E_ILLEGAL_INSTRUCTION = 715, E_LAUNCH_FAILURE = 719, E_NOT_SUPPORTED = 801,
    E_INVALID_CLUSTER_SIZE = 912,
    /* not CUDA's: a block stopped because another block of its cluster failed (reported by
       that one) */
    E_CLUSTER_STOPPED = -1000
};

/* -DCUEMU_FORCE_UCONTEXT tests the portable fallback on a machine that has the fast path */
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(CUEMU_FORCE_UCONTEXT)
#define CUEMU_ASM_SWITCH 1
void cuemu_ctx_switch(void **save_sp, void *load_sp) CUEMU_HIDDEN;
void cuemu_ctx_start(void) CUEMU_HIDDEN;
#endif

/* ---- state ------------------------------------------------------------------------------ */
enum { T_RUN = 0, T_BAR, T_WARP, T_DONE };

/* What a barrier reads of a thread it hands over to (pub, with its order position pos; sp,
   state, gen, bphase) comes first, in one cache line: a block's waiting threads outgrow the
   first-level cache. */
typedef struct cthread {
    cuemu_thread_pub pub;            /* first: cuemu_cur points here */
    void       *sp;
    int         state;
    unsigned    gen;                 /* == g_gen once started in the current block */
    unsigned    bphase;              /* T_BAR: the g_bar_phase it waits in */
    const char *file;                /* where it waits */
    int         line;
#ifndef CUEMU_ASM_SWITCH
    ucontext_t  uc;
#endif
    int         wkind, warg, wwidth;
    unsigned    wmask;
    uint64_t    wval, wres;
    char       *own_stack;           /* this slot's stack, allocated once                  */
    char       *stack_lo;            /* the stack in use: [stack_lo, stack_lo + stack_size) */
#ifdef CUEMU_TSAN
    void       *tsan_fiber;
#endif
} cthread;

typedef struct { unsigned exists, exited, arrived; } cwarp;

static pthread_mutex_t g_launch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t g_launch_thread;
static volatile int g_in_launch;

#define DSM_CANARY 0xFD
#define ALTSTACK_SIZE (256 * 1024)
/* The watchdog samples where the running thread is a few times before it stops the launch:
   the lines a spinning thread cycles through are the loop it never leaves (one sample would
   name any one line of it, or the instrumentation inside it). */
#define WD_SAMPLES 40
#define WD_FRAMES  6

/* static __shared__ variables, as the rewritten declarations register them */
typedef struct { void *p; size_t n; } shared_var;

/* What one block's output left for the launch to give, in block order, when a launch runs on
   several host threads (see "several host threads" below). */
typedef struct outbuf { char *p; size_t n, cap; } outbuf;

/* Everything the run of a block changes, per host thread: with CUEMU_THREADS > 1 several host
   threads each run blocks of one launch, with their own fibers, stacks, dynamic shared memory,
   copies of the __shared__ variables (thread_local) and fault capture. The fields keep the
   names they had as globals (the macros below), so the code reads as it did. */
typedef struct sched_w {
    struct cuemu_worker w;           /* first: cuemu_w points at w.pub */
    cthread *g_th;                   /* pool: threads and their stacks, grown on demand */
    int      g_th_cap;
    char   **g_free_stk;             /* stacks not in use by a started, unfinished thread */
    int      g_nfree, g_next_own;
    /* Per-block state is reset in O(1): a thread whose gen differs from g_gen has not started
       in this block (so it is runnable). Until some thread blocks, threads run strictly in
       order and the next one is found without a search. */
    unsigned g_gen;
    int      g_any_blocked;
    /* While g_lazy, no thread of the block has waited for another yet: the threads run one
       after another, in order, on one stack (that of g_th[g_order[0]], which started the
       block), and the one running is the one at order position cuemu_seq. What the finished
       ones leave behind (their state, their warps' exit bits, g_live) is written only when
       something needs it (lazy_settle): a barrier-free kernel never does, and pays no
       per-thread bookkeeping. */
    int      g_lazy;
    /* A barrier releases its threads by starting a new phase, not by visiting each of them: a
       thread still marked T_BAR from an earlier phase can run (it marks itself T_RUN when it
       does). */
    unsigned g_bar_phase;
    size_t   g_stack_size;
    int     *g_order;                /* g_order[pos] = thread index */
    int      g_n;                    /* threads in the block */
    int      g_live, g_at_bar, g_bar_mismatch, g_bar_count, g_bar_last_count, g_bar_last_n;
    const char *g_bar_file;
    int      g_bar_line;
    cwarp    g_warps[32];
#ifdef CUEMU_ASM_SWITCH
    void    *g_sched_sp;
    void    *g_dead_sp;
#else
    ucontext_t g_sched_uc;
#endif
    unsigned g_warned;               /* per launch: which warnings were given */
    /* dynamic shared memory: a fixed region whose end abuts a PROT_NONE page; a launch's area
       ends there too, so the first byte past it faults */
    char   *g_dsm_region;
    size_t  g_dsm_cap;               /* usable bytes before the guard page */
    char   *g_dsm_base;              /* this launch's area */
    size_t  g_dsm_size;
    const char *g_dsm_name;
    shared_var *g_shared;
    size_t g_nshared, g_shared_cap;
    /* fault / watchdog capture */
    sigjmp_buf g_jb;
    char g_abort_msg[4096];
    int g_abort_err, g_abort_sticky;
    volatile sig_atomic_t g_jb_armed;
    volatile int g_fault_sig, g_fault_code, g_fault_write;
    void *volatile g_fault_addr, *volatile g_fault_pc;
    void *g_fault_frames[48];
    volatile int g_fault_nframes;
    cthread *volatile g_fault_thread;
    struct uint3 g_fault_block;
    char *g_altstack;
    stack_t g_old_ss;
    timer_t g_timer;
    int g_timer_ok;
    void *g_wd_frames[WD_SAMPLES][WD_FRAMES];
    int g_wd_nf[WD_SAMPLES];
    cthread *g_wd_thread[WD_SAMPLES];
    volatile int g_wd_samples;
    /* several host threads: the position in launch order of the block running, and the
       output (printf, reports) of the blocks run, kept until the launch gives it */
    unsigned long long pos;
    struct blockout *out;
    size_t nout, capout;
    int failed, fail_err, fail_sticky;
    unsigned long long fail_pos;
    /* thread block clusters: the rank of the blocks this host thread runs, and the address of
       cuemu_w in this host thread (see cuemu_cluster_map) */
    int crank;
    char *anchor;
    /* the barrier split: the arena of this block's coroutine frames (chunks kept between
       blocks; co_chunk: the one in use, whose free space is w.co_ptr to w.co_end) */
    struct co_chunk { char *p; size_t cap; } *co_chunks;
    int co_nchunks, co_chunk;
    int co_cap;                      /* slots in w.co */
} sched_w;
/* Another host thread's record (the blocks of a cluster): its fields, which the macros below
   would read from this thread's. */
static inline char *dsm_base_of(const sched_w *w) { return w->g_dsm_base; }
static inline size_t dsm_size_of(const sched_w *w) { return w->g_dsm_size; }
static inline char *dsm_region_of(const sched_w *w) { return w->g_dsm_region; }
static inline size_t dsm_cap_of(const sched_w *w) { return w->g_dsm_cap; }

/* The running host thread's record, read once per function (CUEMU_W): everywhere but in
   the two functions that set cuemu_w, at the end of this file, and nothing they inline. */
#define SW ((sched_w *)CUEMU_W)
#undef cuemu_cur
#undef cuemu_tidx
#undef cuemu_block_idx
#undef cuemu_block_dim
#undef cuemu_grid_dim
#define cuemu_cur       (CUEMU_W->pub.cur)
#define cuemu_tidx      (CUEMU_W->pub.tidx)
#define cuemu_block_idx (CUEMU_W->pub.block_idx)
#define cuemu_block_dim (CUEMU_W->pub.block_dim)
#define cuemu_grid_dim  (CUEMU_W->pub.grid_dim)
#define g_th             (SW->g_th)
#define g_th_cap         (SW->g_th_cap)
#define g_free_stk       (SW->g_free_stk)
#define g_nfree          (SW->g_nfree)
#define g_next_own       (SW->g_next_own)
#define g_gen            (SW->g_gen)
#define g_any_blocked    (SW->g_any_blocked)
#define g_lazy           (SW->g_lazy)
#define g_bar_phase      (SW->g_bar_phase)
#define g_stack_size     (SW->g_stack_size)
#define g_order          (SW->g_order)
#define g_n              (SW->g_n)
#define g_live           (SW->g_live)
#define g_at_bar         (SW->g_at_bar)
#define g_bar_mismatch   (SW->g_bar_mismatch)
#define g_bar_count      (SW->g_bar_count)
#define g_bar_last_count (SW->g_bar_last_count)
#define g_bar_last_n     (SW->g_bar_last_n)
#define g_bar_file       (SW->g_bar_file)
#define g_bar_line       (SW->g_bar_line)
#define g_warps          (SW->g_warps)
#define g_sched_sp       (SW->g_sched_sp)
#define g_dead_sp        (SW->g_dead_sp)
#define g_sched_uc       (SW->g_sched_uc)
#define g_warned         (SW->g_warned)
#define g_dsm_region     (SW->g_dsm_region)
#define g_dsm_cap        (SW->g_dsm_cap)
#define g_dsm_base       (SW->g_dsm_base)
#define g_dsm_size       (SW->g_dsm_size)
#define g_dsm_name       (SW->g_dsm_name)
#define g_shared         (SW->g_shared)
#define g_nshared        (SW->g_nshared)
#define g_shared_cap     (SW->g_shared_cap)
#define g_jb             (SW->g_jb)
#define g_abort_msg      (SW->g_abort_msg)
#define g_abort_err      (SW->g_abort_err)
#define g_abort_sticky   (SW->g_abort_sticky)
#define g_jb_armed       (SW->g_jb_armed)
#define g_fault_sig      (SW->g_fault_sig)
#define g_fault_code     (SW->g_fault_code)
#define g_fault_write    (SW->g_fault_write)
#define g_fault_addr     (SW->g_fault_addr)
#define g_fault_pc       (SW->g_fault_pc)
#define g_fault_frames   (SW->g_fault_frames)
#define g_fault_nframes  (SW->g_fault_nframes)
#define g_fault_thread   (SW->g_fault_thread)
#define g_fault_block    (SW->g_fault_block)
#define g_altstack       (SW->g_altstack)
#define g_old_ss         (SW->g_old_ss)
#define g_timer          (SW->g_timer)
#define g_timer_ok       (SW->g_timer_ok)
#define g_wd_frames      (SW->g_wd_frames)
#define g_wd_nf          (SW->g_wd_nf)
#define g_wd_thread      (SW->g_wd_thread)
#define g_wd_samples     (SW->g_wd_samples)

/* The record of a host thread that runs no launch (host code, outside kernels): cur NULL,
   nothing for the hooks to check. */
static sched_w g_idle;
CUEMU_HIDDEN __thread struct cuemu_tls *cuemu_w
    = &g_idle.w.pub;
/* This host thread's own record, kept from one launch to the next (its __shared__ copies,
   registered once per host thread, are listed there). */
static __thread sched_w *t_self;
/* Output of a block is kept, to be given in block order, when the launch runs on several host
   threads (see "several host threads"). */
#define KEEP_OUTPUT (cuemu_w->mt && cuemu_w != &g_idle.w.pub)
static void out_add(char kind, const char *text, size_t n);
/* Where an extern __shared__ declared at namespace scope points (it is bound when the program
   loads, outside any launch): a PROT_NONE page, so that any use faults with a clear report. */
static char *g_ns_guard;

__attribute__((constructor)) static void idle_init(void)
{
    cuemu_access_worker_init(&g_idle.w);
}

#define STARTED(t) ((t)->gen == g_gen)
#define RUNNABLE(t) ((t)->state == T_RUN || ((t)->state == T_BAR && (t)->bphase != g_bar_phase))
#define ST(t) (!STARTED(t) ? T_RUN : RUNNABLE(t) ? T_RUN : (t)->state)
#define ORDER_TH(pos) ((cthread *)cuemu_order_pub[pos])
static size_t   g_page;

#ifdef CUEMU_TSAN
static void    *g_sched_fiber;
static char     g_tsan_barrier;      /* address TSan sees released/acquired at barriers */
/* happens-before edges TSan must see, and nothing more: launch -> every thread; every thread
   of block b -> every thread of block b+1 (tokens alternate); every thread -> the launcher */
static char     g_tsan_launch, g_tsan_block[2], g_tsan_abort;
static unsigned long long g_tsan_blockno;
#endif
#ifdef CUEMU_ASAN
static void    *g_asan_fake;
static void    *g_asan_main_bottom;   /* the launching thread's stack, for switches back to it */
static size_t   g_asan_main_size;
#endif

static const cuemu_launch_desc *g_desc;
static int      g_order_mode;        /* 0 forward, 1 reverse, 2 random */
static unsigned long long g_seed;

static const int g_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT };
#define NSIGS ((int)(sizeof g_sigs / sizeof g_sigs[0]))
static struct sigaction g_old_act[NSIGS + 1];

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return (s && *s) ? atoi(s) : dflt;
}

/* ---- fibers ----------------------------------------------------------------------------- */
static void fiber_main(void *arg);
static void fiber_reset(cthread *t);

static inline void do_switch(void **save, void *load, const char *lo, size_t size)
{
#ifdef CUEMU_ASAN
    __sanitizer_start_switch_fiber(&g_asan_fake, lo, size);
#else
    (void)lo; (void)size;
#endif
#ifdef CUEMU_ASM_SWITCH
    cuemu_ctx_switch(save, load);
#else
    (void)save; (void)load;
#endif
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(g_asan_fake, NULL, NULL);
#endif
}

static inline void thread_start(cthread *t)
{
    t->gen = g_gen;
    t->state = T_RUN;
    t->file = NULL;
    t->line = 0;
}

/* Switch from thread `from` (NULL: the scheduler) to `to` (NULL: the scheduler). */
static void switch_to(cthread *from, cthread *to)
{
    if (to && !STARTED(to)) {
        /* first run: a free stack (never the one a dying `from` still runs on: that one is
           pushed below, after this pop) */
        thread_start(to);
        to->stack_lo = g_nfree ? g_free_stk[--g_nfree] : g_th[g_next_own++].own_stack;
        fiber_reset(to);
    }
    if (from && from->state == T_DONE) g_free_stk[g_nfree++] = from->stack_lo;
    cuemu_cur = to ? &to->pub : NULL;
    if (to) cuemu_tidx = to->pub.idx;
#ifdef CUEMU_TSAN
    /* no_sync: a switch is not a happens-before edge; only barriers and warp ops are */
    __tsan_switch_to_fiber(to ? to->tsan_fiber : g_sched_fiber, 1);
#endif
#ifdef CUEMU_ASM_SWITCH
    void **save = from ? (from->state == T_DONE ? &g_dead_sp : &from->sp) : &g_sched_sp;
    void *load = to ? to->sp : g_sched_sp;
#ifdef CUEMU_ASAN
    do_switch(save, load, to ? to->stack_lo : (const char *)g_asan_main_bottom,
              to ? g_stack_size : g_asan_main_size);
#else
    do_switch(save, load, to ? to->stack_lo : NULL, to ? g_stack_size : 0);
#endif
#else
    swapcontext(from ? &from->uc : &g_sched_uc, to ? &to->uc : &g_sched_uc);
#endif
}

static void fiber_reset(cthread *t)
{
#ifdef CUEMU_ASM_SWITCH
    uintptr_t top = ((uintptr_t)(t->stack_lo + g_stack_size)) & ~(uintptr_t)15;
    void **sp;
#if defined(__x86_64__)
    sp = (void **)(top - 56);
    sp[6] = (void *)cuemu_ctx_start;          /* ret address, at top-8         */
    sp[5] = 0;                                /* rbp                           */
    sp[4] = 0;                                /* rbx                           */
    sp[3] = (void *)t;                        /* r12: argument                 */
    sp[2] = (void *)fiber_main;               /* r13: function                 */
    sp[1] = 0; sp[0] = 0;                     /* r14, r15                      */
#else
    sp = (void **)(top - 160);
    memset(sp, 0, 160);
    sp[0] = (void *)t;                        /* x19 */
    sp[1] = (void *)fiber_main;               /* x20 */
    sp[11] = (void *)cuemu_ctx_start;         /* x30 */
#endif
    t->sp = sp;
#else
    getcontext(&t->uc);
    t->uc.uc_stack.ss_sp = t->stack_lo;
    t->uc.uc_stack.ss_size = g_stack_size;
    t->uc.uc_link = NULL;
    makecontext(&t->uc, (void (*)(void))fiber_main, 1, t);   /* pointer fits: LP64 glibc */
#endif
#ifdef CUEMU_TSAN
    if (!t->tsan_fiber) t->tsan_fiber = __tsan_create_fiber(0);
#endif
}

static void pool_free(void)
{
    for (int i = 0; i < g_th_cap; i++) {
        if (g_th[i].own_stack) munmap(g_th[i].own_stack - g_page, g_stack_size + g_page);
#ifdef CUEMU_TSAN
        if (g_th[i].tsan_fiber) __tsan_destroy_fiber(g_th[i].tsan_fiber);
#endif
    }
    free(g_th); free(g_order); free(cuemu_order_pub); free(g_free_stk);
    g_th = NULL; g_order = NULL; cuemu_order_pub = NULL; g_free_stk = NULL; g_th_cap = 0;
}

/* Stacks are allocated once and reused by every block of every launch. */
static int pool_reserve(int n)
{
    size_t want = (size_t)env_int("CUEMU_STACK_KB",
#ifdef CUEMU_ASAN
                                  512
#else
                                  128
#endif
                                  ) * 1024;
    if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
    want = (want + g_page - 1) & ~(g_page - 1);
    if (want < 16 * 1024) want = 16 * 1024;
    if (g_th && want != g_stack_size) pool_free();
    g_stack_size = want;
    if (n <= g_th_cap) return 0;
    cthread *th = (cthread *)realloc(g_th, sizeof(cthread) * (size_t)n);
    int *order = (int *)realloc(g_order, sizeof(int) * (size_t)n);
    cuemu_thread_pub **order_th =
        (cuemu_thread_pub **)realloc(cuemu_order_pub, sizeof(cuemu_thread_pub *) * (size_t)n);
    char **fr = (char **)realloc(g_free_stk, sizeof(char *) * (size_t)n);
    if (th) g_th = th;
    if (order) g_order = order;
    if (order_th) cuemu_order_pub = order_th;
    if (fr) g_free_stk = fr;
    if (!th || !order || !order_th || !fr) return -1;
    for (int i = g_th_cap; i < n; i++) {
        memset(&g_th[i], 0, sizeof g_th[i]);
        /* [guard page][stack]: the stack grows down into the guard, which faults */
        char *m = (char *)mmap(NULL, g_stack_size + g_page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) { g_th_cap = i; return -1; }
        mprotect(m, g_page, PROT_NONE);
        g_th[i].own_stack = m + g_page;
    }
    g_th_cap = n;
    if (n > SW->co_cap) {
        struct cuemu_co_slot *co =
            (struct cuemu_co_slot *)realloc(SW->w.co, sizeof *co * (size_t)n);
        if (!co) return -1;
        memset(co + SW->co_cap, 0, sizeof *co * (size_t)(n - SW->co_cap));
        SW->w.co = co;
        SW->co_cap = n;
    }
    return 0;
}

/* ---- scheduling ------------------------------------------------------------------------- */
/* First runnable thread at or after order position `start` (cyclic), or NULL. */
static cthread *pick(int start)
{
    for (int k = 0; k < g_n; k++) {
        int p = start + k;
        if (p >= g_n) p -= g_n;
        cthread *u = &g_th[g_order[p]];
        if (ST(u) == T_RUN) return u;
    }
    return NULL;
}

/* t stops running (waits or exited): run the next runnable thread in order, or return to
   the scheduler, which then knows the block is finished or stuck. */
static void yield_from(cthread *t)
{
    cthread *u = pick(t->pub.pos + 1 >= g_n ? 0 : t->pub.pos + 1);
    if (u == t) return;
    switch_to(t, u);
}

static void warn_once(unsigned bit, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn_once(unsigned bit, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    if (g_warned & bit) return;
    g_warned |= bit;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (KEEP_OUTPUT) {
        /* its bit first: the launch gives each warning once (out_replay) */
        char tagged[1100];
        int b = 0;
        while (b < 31 && !(bit >> b & 1)) b++;
        tagged[0] = (char)('A' + b);
        snprintf(tagged + 1, sizeof tagged - 1, "%s", buf);
        out_add('w', tagged, strlen(tagged));
    } else {
        cuemu_diag("warning: %s", buf);
    }
}

static void warp_complete(cwarp *w, unsigned warp, unsigned m);
static void warp_recheck(cwarp *w, unsigned warp);

static void fiber_main(void *arg)
{
    cthread *t = (cthread *)arg;
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(g_asan_fake, NULL, NULL);
#endif
    for (;;) {
#ifdef CUEMU_TSAN
        __tsan_acquire(&g_tsan_launch);
        __tsan_acquire(&g_tsan_block[(g_tsan_blockno + 1) & 1]);
#endif
        g_desc->body(g_desc->ctx);
#ifdef CUEMU_TSAN
        __tsan_release(&g_tsan_block[g_tsan_blockno & 1]);
#endif
        if (g_lazy) {
            if (cuemu_thread_next()) continue;
            /* the whole block ran without a wait: only t, which owns this stack, needs to
               say it finished (switch_to frees the stack) */
            g_lazy = 0;
            cuemu_seq_last = -1;
            g_live = 0;
            t->state = T_DONE;
            switch_to(t, NULL);
        }
        t = (cthread *)cuemu_cur;      /* the thread running on this stack now */
        t->state = T_DONE;
        g_live--;
        cwarp *w = &g_warps[t->pub.warp];
        w->exited |= 1u << t->pub.lane;
        if (w->arrived) warp_recheck(w, t->pub.warp);
        cthread *u;
        if (!g_any_blocked)
            u = t->pub.pos + 1 < g_n ? &g_th[g_order[t->pub.pos + 1]] : NULL;
        else
            u = pick(t->pub.pos + 1 >= g_n ? 0 : t->pub.pos + 1);
        if (u && !STARTED(u) && !CUEMU_TSAN_ON) {
            /* the next thread has not started: run it right here, on this stack, with no
               switch at all (a kernel without barriers runs every thread on one stack) */
            thread_start(u);
            u->stack_lo = t->stack_lo;
            cuemu_cur = &u->pub;
            cuemu_tidx = u->pub.idx;
            continue;
        }
        switch_to(t, u);
        /* a finished thread is never resumed */
    }
}

/* Ends the block's lazy phase (see g_lazy): the threads before order position cuemu_seq finished,
   the one at cuemu_seq runs on the first thread's stack, and from now on every thread's state is
   kept up to date. Called before anything reads that state (a wait, __activemask, a report). */
static void lazy_settle(void)
{
    if (!g_lazy) return;
    g_lazy = 0;
    cuemu_seq_last = -1;
    cthread *first = ORDER_TH(0);
    for (int p = 0; p < cuemu_seq && p < g_n; p++) {
        cthread *d = ORDER_TH(p);
        d->gen = g_gen;
        d->state = T_DONE;
        d->stack_lo = first->stack_lo;
        g_warps[d->pub.warp].exited |= 1u << d->pub.lane;
    }
    g_live = cuemu_seq < g_n ? g_n - cuemu_seq : 0;
    if (cuemu_seq > 0 && cuemu_seq < g_n) {
        cthread *c = ORDER_TH(cuemu_seq);
        thread_start(c);
        c->stack_lo = first->stack_lo;
    }
}

/* cuemu_thread_next, which runs between the threads of the lazy phase, is in hooks.c. */

/* The step from one thread to the next in the common case: u started, is runnable, and no
   sanitizer needs to hear of the switch. Only what a resumed thread reads changes hands. */
static inline __attribute__((always_inline)) void switch_quick(cthread *from, cthread *to)
{
#ifdef CUEMU_ASM_SWITCH
    cuemu_cur = &to->pub;
    cuemu_tidx = to->pub.idx;
    cuemu_ctx_switch(&from->sp, to->sp);
#else
    switch_to(from, to);
#endif
}

#if defined(CUEMU_ASM_SWITCH) && !defined(CUEMU_ASAN) && !defined(CUEMU_TSAN)
#define QUICK_SWITCH 1
#else
#define QUICK_SWITCH 0
#endif

/* The next thread a waiting thread t hands over to: the one after it in order when that one
   has started and can run (a barrier's every thread but the last, in the usual case), else the
   search (pick) and the general switch. */
static inline __attribute__((always_inline)) void yield_quick(cthread *t)
{
    if (QUICK_SWITCH && t->pub.pos + 1 < g_n) {
        cthread *u = ORDER_TH(t->pub.pos + 1);
        if (u->gen == g_gen && RUNNABLE(u)) {
            /* a block's waiting threads do not fit in the first-level cache: the ones that
               follow are fetched while this one runs (their record, then their stack's top) */
            if (t->pub.pos + 3 < g_n) __builtin_prefetch(ORDER_TH(t->pub.pos + 3));
            if (t->pub.pos + 2 < g_n) {
                const char *sp = (const char *)ORDER_TH(t->pub.pos + 2)->sp;
                for (int k = 0; k < 320; k += 64) __builtin_prefetch(sp + k);
            }
            switch_quick(t, u);
            return;
        }
    }
    yield_from(t);
}

static void cluster_arrive(const char *file, int line);

/* ---- the barrier split (cuemu_split.h) ---------------------------------------------------
   A split kernel's threads run their first stretch (up to their first barrier) as in any
   kernel, one after another on one stack (the lazy phase), and each leaves its coroutine's
   frame in its slot (cuemu_co_wait, hooks.c). co_run then runs the block's phases: when every
   thread waits at the same barrier, the barrier ends (the race detector's epoch, as at a
   fiber barrier) and each thread, in the block's order, is resumed up to its next barrier or
   its end. A block where some waited and some exited, or where they wait at different
   barriers, is the deadlock a fiber run reports, and is described the same way. */
#define CO_CHUNK (1u << 20)

/* The arena's chunks stay from block to block; a block starts again at the first. */
void *cuemu_co_alloc_slow(size_t n)
{
    sched_w *w = SW;
    while (w->co_chunk + 1 < w->co_nchunks) {
        struct co_chunk *c = &w->co_chunks[++w->co_chunk];
        if (c->cap >= n) {
            w->w.co_ptr = c->p + n;
            w->w.co_end = c->p + c->cap;
            return c->p;
        }
    }
    struct co_chunk *cs = (struct co_chunk *)realloc(w->co_chunks, sizeof *cs
                                                     * (size_t)(w->co_nchunks + 1));
    size_t cap = n > CO_CHUNK ? n : CO_CHUNK;
    char *p = cs ? (char *)aligned_alloc(64, (cap + 63) & ~(size_t)63) : NULL;
    if (cs) w->co_chunks = cs;
    if (!p)
        cuemu_launch_abort(E_LAUNCH_OUT_OF_RESOURCES, 1, "cuemu: out of host memory for the "
                           "threads of a block (their state between barriers)");
    cs[w->co_nchunks].p = p;
    cs[w->co_nchunks].cap = cap;
    w->co_chunk = w->co_nchunks++;
    w->w.co_ptr = p + n;
    w->w.co_end = p + cap;
    return p;
}

/* What __syncthreads_count (op 0), _and (1) and _or (2) return once the barrier ended, a fiber
   barrier or a split one: from the predicates of the threads that arrived. */
static int bar_result(int op)
{
    if (op == 0) return g_bar_last_count;
    if (op == 1) return g_bar_last_count == g_bar_last_n;
    return g_bar_last_count > 0;
}

int cuemu_co_result(int op) { return bar_result(op); }

/* A wait the rewriter did not see, in split code: nothing can switch stacks there, and running
   on would be wrong, so the launch stops, saying why and what to do. */
static __attribute__((noreturn)) void co_refuse(const char *what, const char *file, int line)
{
    char msg[1024], at[512] = "";
    if (file) snprintf(at, sizeof at, " at %s:%d", file, line);
    snprintf(msg, sizeof msg, "kernel %s (launched at %s:%d) waits (%s%s) in a function "
             "called from its body, where the emulator's barrier split did not see it when it "
             "compiled the kernel (the function is in another file, or reached through a "
             "pointer); launch aborted. Without the split the kernel runs: build with "
             "`make EMU_SPLIT=0` (or compile with -DCUEMU_NO_SPLIT)", g_desc->kernel,
             g_desc->file, g_desc->line, what, at);
    SW->w.co_active = 0;
    cuemu_launch_abort(E_NOT_SUPPORTED, 1, msg);
}

static void co_block_start(void)
{
    sched_w *w = SW;
    w->w.co_phase++;
    w->w.co_waiting = w->w.co_count = w->w.co_sites = 0;
    w->w.co_active = 0;
    w->w.tl_n = g_n;
    w->w.tl_ran = 0;
    w->co_chunk = 0;
    w->w.co_ptr = w->co_nchunks ? w->co_chunks[0].p : NULL;
    w->w.co_end = w->co_nchunks ? w->co_chunks[0].p + w->co_chunks[0].cap : NULL;
    memset(w->w.co_free, 0, sizeof w->w.co_free);   /* their frames were in the arena */
}

/* 1 when the waiting threads wait at more than one barrier (co_sites said they might). */
static int co_sites_differ(void)
{
    struct cuemu_worker *w = &SW->w;
    for (int i = 0; i < g_n; i++) {
        const struct cuemu_co_slot *c = &w->co[i];
        if (c->phase == w->co_phase && (c->line != w->co_line || strcmp(c->file, w->co_file)))
            return 1;
    }
    return 0;
}

/* The block cannot go on: its threads' states as a fiber run would have left them, for
   report_deadlock. */
static int co_stuck(void)
{
    struct cuemu_worker *w = &SW->w;
    for (int i = 0; i < g_n; i++) {
        cthread *t = &g_th[i];
        const struct cuemu_co_slot *c = &w->co[t->pub.pos];
        t->gen = g_gen;
        if (c->phase == w->co_phase) {
            t->state = T_BAR;
            t->bphase = g_bar_phase;
            t->file = c->file;
            t->line = c->line;
        } else {
            t->state = T_DONE;
        }
    }
    g_at_bar = g_live = w->co_waiting;
    return 1;
}

/* The rest of a split kernel's block, phase by phase; 0 when every thread finished, 1 when
   it is stuck (see co_stuck). */
static int co_run(void)
{
    struct cuemu_worker *w = &SW->w;
    while (w->co_waiting) {
        if (w->co_waiting != g_n || (w->co_sites && co_sites_differ())) return co_stuck();
        g_bar_last_count = w->co_count;
        g_bar_last_n = w->co_waiting;
        w->co_waiting = w->co_count = w->co_sites = 0;
        w->co_phase++;
        cuemu_access_barrier();
        w->co_active = 1;
        for (int p = 0; p < g_n; p++) {
            cuemu_thread_pub *u = cuemu_order_pub[p];
            void *f = w->co[p].frame;   /* by position: no wait for u to load */
            w->pub.cur = u;
            w->pub.tidx = u->idx;
            /* a coroutine frame starts with its resume function (the ABI clang and g++ share:
               what coroutine_handle::resume calls) */
            (*(void (**)(void *))f)(f);
        }
        w->co_active = 0;
    }
    return 0;
}

/* A thread-loop kernel's barrier (cuemu_split.h) at file:line, once every thread ran the
   stretch before it; exited: how many of them returned in it (cuemu_tl_exit marked them).
   0: the block goes on; 1: it stops here: every thread returned, or some did and the others
   wait, which the core reports as it reports a split kernel's (co_run finds the slots as a
   coroutine run would have left them: who waits where, who ended). */
int cuemu_tl_sync(const char *file, int line, int exited)
{
    struct cuemu_worker *w = &SW->w;
    if (exited) {
        if (exited == g_n) return 1;
        unsigned ended = w->co_phase++;
        for (int p = 0; p < g_n; p++) {
            struct cuemu_co_slot *c = &w->co[p];
            if (c->phase == ended && !c->frame) continue;
            c->frame = c;                       /* any frame: it waits */
            c->file = file;
            c->line = line;
            c->phase = w->co_phase;
        }
        w->co_waiting = g_n - exited;
        w->co_count = w->co_sites = 0;
        w->co_file = file;
        w->co_line = line;
        return 1;
    }
    g_bar_last_count = 0;
    g_bar_last_n = g_n;
    cuemu_access_barrier();
    return 0;
}

/* Its thread at position p returned before the next barrier (marked in this block's phase). */
void cuemu_tl_exit(int p)
{
    struct cuemu_worker *w = &SW->w;
    w->co[p].frame = NULL;
    w->co[p].phase = w->co_phase;
}

/* Its block ended (or stopped). In the lazy phase the last thread in order is then the one
   running, so the other threads' calls are not made; otherwise (each thread on its fiber: a
   TSan build) the thread whose call ran the block is current again, and the others' calls
   return at once. */
void cuemu_tl_end(void)
{
    struct cuemu_worker *w = &SW->w;
    w->co_active = 0;
    cuemu_thread_pub *u = w->tl_self;
    if (w->seq_last >= 0) {
        w->seq = w->seq_last;
        u = w->order_pub[w->seq];
    }
    w->pub.cur = u;
    w->pub.tidx = u->idx;
}

/* cluster: 1 for cluster.sync(), whose block barrier, once complete, waits for the cluster's
   other blocks before it opens */
static void barrier_arrive(const char *file, int line, int pred, int cluster)
{
    cthread *t = (cthread *)cuemu_cur;
    if (!t) return;                   /* called from host code: nothing to wait for */
    if (SW->w.co_active) co_refuse(cluster ? "cluster.sync()" : "__syncthreads", file, line);
    if (g_lazy) lazy_settle();
#ifdef CUEMU_TSAN
    __tsan_release(&g_tsan_barrier);
#endif
    t->state = T_BAR;
    t->bphase = g_bar_phase;
    g_any_blocked = 1;
    t->file = file;
    t->line = line;
    if (g_at_bar++ == 0) {
        g_bar_file = file;
        g_bar_line = line;
    } else if (line != g_bar_line || (file != g_bar_file && strcmp(file, g_bar_file) != 0)) {
        g_bar_mismatch = 1;
    }
    g_bar_count += pred != 0;
    if (g_at_bar == g_live && !g_bar_mismatch && g_live == g_n) {
        if (cluster) cluster_arrive(file, line);
        g_bar_phase++;
        cuemu_access_barrier();
        g_bar_last_count = g_bar_count;
        g_bar_last_n = g_at_bar;
        g_at_bar = 0;
        g_bar_count = 0;
        /* after a barrier the order starts again from its first thread, so "forward" really
           means thread 0 first in every phase */
        cthread *u = pick(0);
        if (u != t) switch_to(t, u);
    } else {
        yield_quick(t);
    }
    t->state = T_RUN;                 /* released (see g_bar_phase) */
#ifdef CUEMU_TSAN
    __tsan_acquire(&g_tsan_barrier);
#endif
}

void cuemu_syncthreads(const char *file, int line)
{
    barrier_arrive(file, line, 0, 0);
}

void cuemu_cluster_sync(const char *file, int line)
{
    barrier_arrive(file, line, 0, 1);
}

int cuemu_syncthreads_op(int op, int pred, const char *file, int line)
{
    barrier_arrive(file, line, pred, 0);
    if (!cuemu_cur) return pred != 0;       /* host code: a block of one */
    return bar_result(op);
}

static const char *warp_op_name(int kind)
{
    static const char *names[] = { "__syncwarp", "__shfl_sync", "__shfl_up_sync",
                                   "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
                                   "__any_sync", "__all_sync" };
    return (kind >= 0 && kind < 8) ? names[kind] : "warp operation";
}

static void warp_complete(cwarp *w, unsigned warp, unsigned m)
{
    cthread *lanes = &g_th[warp * 32];
    unsigned ballot = 0;
    for (unsigned l = 0; l < 32; l++)
        if ((m >> l & 1) && lanes[l].wval) ballot |= 1u << l;
    for (unsigned l = 0; l < 32; l++) {
        if (!(m >> l & 1)) continue;
        cthread *u = &lanes[l];
        int wd = u->wwidth, src = (int)l;
        if (wd < 1 || wd > 32 || (wd & (wd - 1))) wd = 32;
        int seg = (int)l & ~(wd - 1), sub = (int)l & (wd - 1);
        switch (u->wkind) {
        case CUEMU_W_SHFL: src = seg + (((u->warg % wd) + wd) % wd); break;
        case CUEMU_W_UP:   src = sub - u->warg >= 0 ? (int)l - u->warg : (int)l; break;
        case CUEMU_W_DOWN: src = sub + u->warg < wd ? (int)l + u->warg : (int)l; break;
        case CUEMU_W_XOR:
            src = (int)l ^ u->warg;
            if (src < 0 || src >= seg + wd || src >= 32) src = (int)l;
            break;
        default: break;
        }
        switch (u->wkind) {
        case CUEMU_W_BALLOT: u->wres = ballot; break;
        case CUEMU_W_ANY:    u->wres = ballot != 0; break;
        case CUEMU_W_ALL:    u->wres = ballot == m; break;
        case CUEMU_W_SYNC:   u->wres = 0; break;
        default:
            /* reading a lane outside the mask is undefined on a GPU: give the caller its own */
            u->wres = (m >> src & 1) ? lanes[src].wval : u->wval;
        }
        if (u->state == T_WARP) u->state = T_RUN;
    }
    w->arrived &= ~m;
    cuemu_access_warp_sync(warp);
}

/* A lane exited: rendezvous that named it can complete without it (with a warning). */
static void warp_recheck(cwarp *w, unsigned warp)
{
    for (unsigned l = 0; l < 32; l++) {
        if (!(w->arrived >> l & 1)) continue;
        cthread *u = &g_th[warp * 32 + l];
        if (u->wmask & w->exited) {
            warn_once(1u << 3, "kernel %s: %s at %s:%d names lanes that exited before reaching "
                      "it (undefined behaviour on a GPU; the emulator leaves them out)",
                      g_desc->kernel, warp_op_name(u->wkind), u->file, u->line);
            u->wmask &= ~w->exited;
        }
        if ((w->arrived & u->wmask) == u->wmask) warp_complete(w, warp, u->wmask);
    }
}

uint64_t cuemu_warp_op(int kind, unsigned mask, uint64_t value, int arg, int width,
                       const char *file, int line)
{
    cthread *t = (cthread *)cuemu_cur;
    if (!t) return value;
    if (SW->w.co_active) co_refuse(warp_op_name(kind), file, line);
    lazy_settle();
    cwarp *w = &g_warps[t->pub.warp];
    unsigned lb = 1u << t->pub.lane;
    unsigned m = mask & w->exists;
#ifdef CUEMU_TSAN
    __tsan_release(&g_warps[t->pub.warp]);
#endif
    if (!(m & lb)) {
        warn_once(1u << 1, "kernel %s: %s at %s:%d called by a lane that is not in its mask "
                  "0x%08x (undefined behaviour on a GPU)", g_desc->kernel, warp_op_name(kind),
                  file, line, mask);
        m |= lb;
    }
    if (m & w->exited) {
        warn_once(1u << 3, "kernel %s: %s at %s:%d names lanes that exited before reaching it "
                  "(undefined behaviour on a GPU; the emulator leaves them out)",
                  g_desc->kernel, warp_op_name(kind), file, line);
        m &= ~w->exited;
    }
    t->wkind = kind; t->wmask = m; t->wval = value; t->warg = arg; t->wwidth = width;
    t->file = file; t->line = line;
    w->arrived |= lb;
    if ((w->arrived & m) == m) {
        warp_complete(w, t->pub.warp, m);
    } else {
        t->state = T_WARP;
        g_any_blocked = 1;
        yield_from(t);
    }
#ifdef CUEMU_TSAN
    __tsan_acquire(&g_warps[t->pub.warp]);
#endif
    return t->wres;
}

void cuemu_yield(void)
{
    cthread *t = (cthread *)cuemu_cur;
    if (!t) return;
    if (SW->w.co_active) co_refuse("__nanosleep", NULL, 0);
    lazy_settle();
    g_any_blocked = 1;
    yield_from(t);
}

unsigned cuemu_activemask(void)
{
    cthread *t = (cthread *)cuemu_cur;
    if (!t) return 1;
    if (SW->w.co_active) co_refuse("__activemask", NULL, 0);
    lazy_settle();
    cwarp *w = &g_warps[t->pub.warp];
    return w->exists & ~w->exited;
}

void cuemu_shared_register(void *p, size_t n) { cuemu_shared_register_named(p, n, NULL); }

void cuemu_shared_register_named(void *p, size_t n, const char *name)
{
    cuemu_access_shared_var(p, n, name);
    for (size_t i = 0; i < g_nshared; i++)
        if (g_shared[i].p == p) return;
    if (g_nshared == g_shared_cap) {
        size_t cap = g_shared_cap ? 2 * g_shared_cap : 64;
        shared_var *v = (shared_var *)realloc(g_shared, cap * sizeof *v);
        if (!v) return;          /* not poisoned: a wrong answer may then look right */
        g_shared = v;
        g_shared_cap = cap;
    }
    g_shared[g_nshared].p = p;
    g_shared[g_nshared].n = n;
    g_nshared++;
    memset(p, 0xFF, n);
}

void *cuemu_dyn_smem(const char *name)
{
    g_dsm_name = name;
    cuemu_access_dyn_name(name);
    if (!g_dsm_base) {
        /* outside a launch (a namespace-scope extern __shared__ initialised at load time):
           hand out a guard page so that any use faults with a clear report */
        if (!g_ns_guard) {
            if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
            void *m = mmap(NULL, g_page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m != MAP_FAILED) g_ns_guard = (char *)m;
        }
        return g_ns_guard ? g_ns_guard : (void *)(uintptr_t)0x10;
    }
    return g_dsm_base;
}

static int dsm_prepare(size_t size)
{
    if (!g_page) g_page = (size_t)sysconf(_SC_PAGESIZE);
    if (!g_dsm_region) {
        size_t cap = cuemu_shared_mem_per_block_optin();
        if (cap < 48 * 1024) cap = 48 * 1024;
        cap = (cap + g_page - 1) & ~(g_page - 1);
        char *m = (char *)mmap(NULL, cap + g_page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return -1;
        mprotect(m + cap, g_page, PROT_NONE);
        g_dsm_region = m;
        g_dsm_cap = cap;
    }
    if (size > g_dsm_cap) return -1;
    /* 16-byte aligned like a GPU's dynamic shared memory; any slack before the guard page
       (size not a multiple of 16) holds a canary checked after every block */
    size_t area = (size + 15) & ~(size_t)15;
    g_dsm_base = g_dsm_region + g_dsm_cap - area;
    g_dsm_size = size;
    return 0;
}

/* ---- reports ---------------------------------------------------------------------------- */
typedef struct { char *p; size_t left; } sbuf;
static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p, b->left, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= b->left) n = (int)b->left - 1;
    b->p += n;
    b->left -= (size_t)n;
}

/* "file:line" of the first frame in the student's code, via addr2line on the -g build. */
static void locate(void *const *frames, int n, char *out, size_t outsz)
{
    snprintf(out, outsz, "an unknown location");
    for (int i = 0; i < n; i++) {
        Dl_info di;
        void *pc = frames[i];
        if (!pc || !dladdr(pc, &di) || !di.dli_fname) continue;
        uintptr_t off = (uintptr_t)pc - (uintptr_t)di.dli_fbase - (i > 0 ? 1 : 0);
        /* a non-PIE executable is linked at its run address */
        if (di.dli_fbase == (void *)0x400000) off = (uintptr_t)pc - (i > 0 ? 1 : 0);
        if (strstr(di.dli_fname, "libc.so") || strstr(di.dli_fname, "libstdc++")) continue;
        char cmd[1400], line[1024] = "";
        /* -i: the functions inlined at pc too, innermost first: an atomic (the device
           header's, inlined into the kernel) faults in the header, called from the
           student's line, which the next frame (the kernel's caller) would not name */
        snprintf(cmd, sizeof cmd, "addr2line -i -e '%s' 0x%lx 2>/dev/null", di.dli_fname,
                 (unsigned long)off);
        FILE *p = popen(cmd, "r");
        if (!p) break;
        int found = 0;
        while (!found && fgets(line, sizeof line, p)) {
            line[strcspn(line, "\r\n")] = 0;
            char *disc = strstr(line, " (discriminator");
            if (disc) *disc = 0;
            found = !(!line[0] || line[0] == '?' || strstr(line, ":?") || strstr(line, ":0")
                      || strstr(line, "cuemu_") || strstr(line, "emu/include/")
                      || strstr(line, "emu/core/") || strstr(line, "/usr/include/")
                      || strstr(line, "/c++/"));
        }
        pclose(p);
        if (!found) {
            if (i == 0 && di.dli_sname)
                snprintf(out, outsz, "%s+0x%lx", di.dli_sname,
                         (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_saddr));
            continue;
        }
        /* relative to the working directory, like the launch sites the compiler recorded */
        char cwd[1024];
        const char *shown = line;
        if (getcwd(cwd, sizeof cwd)) {
            size_t cl = strlen(cwd);
            if (strncmp(line, cwd, cl) == 0 && line[cl] == '/') shown = line + cl + 1;
        }
        snprintf(out, outsz, "%s", shown);
        return;
    }
}

static void thread_desc(sbuf *b, const cthread *t)
{
    sb_add(b, "block (%u,%u,%u), thread (%u,%u,%u)", cuemu_block_idx.x, cuemu_block_idx.y,
           cuemu_block_idx.z, t->pub.idx.x, t->pub.idx.y, t->pub.idx.z);
}

/* Where the threads of the block are, grouped by what they wait at (`skip` left out). */
static void describe_threads(sbuf *b, const cthread *skip)
{
    char *seen = (char *)calloc((size_t)g_n, 1);
    for (int i = 0; i < g_n && seen; i++) {
        if (seen[i] || &g_th[i] == skip) continue;
        cthread *a = &g_th[i];
        int count = 0;
        for (int j = i; j < g_n; j++) {
            cthread *c = &g_th[j];
            if (seen[j] || c == skip || ST(c) != ST(a)) continue;
            if ((ST(a) == T_BAR || ST(a) == T_WARP)
                && (c->line != a->line || strcmp(c->file, a->file) != 0
                    || (ST(a) == T_WARP && c->wkind != a->wkind)))
                continue;
            seen[j] = 1;
            count++;
        }
        if (ST(a) == T_DONE) {
            sb_add(b, " %d thread%s exited (first: thread (%u,%u,%u));", count,
                   count == 1 ? "" : "s", a->pub.idx.x, a->pub.idx.y, a->pub.idx.z);
        } else if (ST(a) == T_RUN) {
            sb_add(b, " %d thread%s waiting for their turn (first: thread (%u,%u,%u));", count,
                   count == 1 ? "" : "s", a->pub.idx.x, a->pub.idx.y, a->pub.idx.z);
        } else {
            sb_add(b, " %d thread%s wait%s at %s %s:%d (first: thread (%u,%u,%u));", count,
                   count == 1 ? "" : "s", count == 1 ? "s" : "",
                   ST(a) == T_BAR ? "__syncthreads" : warp_op_name(a->wkind), a->file,
                   a->line, a->pub.idx.x, a->pub.idx.y, a->pub.idx.z);
        }
    }
    free(seen);
}

static void report_deadlock(void)
{
    char msg[4096];
    sbuf b = { msg, sizeof msg };
    sb_add(&b, "deadlock in kernel %s (launched at %s:%d), ", g_desc->kernel, g_desc->file,
           g_desc->line);
    sb_add(&b, "block (%u,%u,%u): %s", cuemu_block_idx.x, cuemu_block_idx.y, cuemu_block_idx.z,
           g_at_bar ? "divergent __syncthreads (every thread of a block must reach the same "
                      "__syncthreads):" : "warp operation never completed:");
    describe_threads(&b, NULL);
    sb_add(&b, " launch aborted");
    cuemu_core_diag("%s", msg);
}

/* 1 (load) or 2 (store) if the instruction at pc is an aligned 16-byte SSE move (movaps,
   movapd, movdqa), which faults on an address that is not a multiple of 16; else 0. */
static int aligned_sse(const void *pc)
{
#if defined(__x86_64__)
    const unsigned char *p = (const unsigned char *)pc;
    if (!p) return 0;
    int opsize = 0;
    for (int i = 0; i < 4 && (p[0] == 0x66 || (p[0] & 0xF0) == 0x40); i++, p++)
        if (p[0] == 0x66) opsize = 1;
    if (p[0] != 0x0F) return 0;
    if (p[1] == 0x28) return 1;                  /* movaps / movapd xmm, m128 */
    if (p[1] == 0x29) return 2;                  /* movaps / movapd m128, xmm */
    if (opsize && p[1] == 0x6F) return 1;        /* movdqa xmm, m128 */
    if (opsize && p[1] == 0x7F) return 2;        /* movdqa m128, xmm */
#else
    (void)pc;
#endif
    return 0;
}

/* "file:A-B" (or "file:A") of the lines of one file that the watchdog's samples of thread t
   found it on, or 0 when they do not fall in one file. */
static int watchdog_loop(const cthread *t, char *out, size_t n)
{
    char file[1024] = "", at[1024];
    int lo = 0, hi = 0, seen = 0;
    for (int i = 0; i < g_wd_samples; i++) {
        if (g_wd_thread[i] != t || !g_wd_nf[i]) continue;
        /* the same stack as an earlier sample: the same line (compared whole, because a
           sample inside the instrumentation's hook has that hook's pc for every call site) */
        int dup = 0;
        for (int k = 0; k < i && !dup; k++)
            dup = g_wd_thread[k] == t && g_wd_nf[k] == g_wd_nf[i] &&
                  !memcmp(g_wd_frames[k], g_wd_frames[i], sizeof(void *) * (size_t)g_wd_nf[i]);
        if (dup) continue;
        locate(g_wd_frames[i], g_wd_nf[i], at, sizeof at);
        char *colon = strrchr(at, ':');
        int line = colon ? atoi(colon + 1) : 0;
        if (line <= 0) continue;
        *colon = 0;
        /* the launch's own line: code the rewriter wrapped around the kernel, not the loop */
        if (line == g_desc->line && strstr(at, g_desc->file ? g_desc->file : "\1")) continue;
        if (!seen) { snprintf(file, sizeof file, "%s", at); lo = hi = line; seen = 1; }
        else if (strcmp(file, at) != 0) return 0;
        if (line < lo) lo = line;
        if (line > hi) hi = line;
    }
    if (!seen) return 0;
    if (lo == hi) snprintf(out, n, "%s:%d", file, lo);
    else snprintf(out, n, "%s:%d-%d", file, lo, hi);
    return 1;
}

static int cluster_fault(sbuf *b, const char *a, const char *what, const char *where, int *err);

static int report_fault(void)
{
    char msg[4096], where[1024];
    sbuf b = { msg, sizeof msg };
    cthread *t = g_fault_thread;
    void *addr = g_fault_addr;
    int err = E_LAUNCH_FAILURE;
    int nfr = g_fault_nframes;

    locate(g_fault_frames, nfr, where, sizeof where);
    const char *what = "fault";
    switch (g_fault_sig) {
    case SIGSEGV: case SIGBUS:
        what = g_fault_write < 0 ? "access" : g_fault_write ? "write" : "read";
        break;
    case SIGFPE: what = "arithmetic exception (integer division by zero?)"; break;
    case SIGILL: case SIGTRAP: what = "illegal instruction (__trap()?)"; break;
    case SIGABRT: what = "assertion failed (abort)"; break;
    case 0: what = "watchdog"; break;
    }

    int vec = (g_fault_sig == SIGSEGV && g_fault_code == SI_KERNEL && !addr) ? aligned_sse(g_fault_pc) : 0;
    if (vec) {
        /* a general-protection fault of an aligned SSE move: the compiler used it because the
           type (float4, double2, int4...) is 16-byte aligned, and the address is not */
        err = 716;   /* cudaErrorMisalignedAddress */
        sb_add(&b, "misaligned 16-byte %s in kernel %s, ", vec == 1 ? "read" : "write", g_desc->kernel);
        if (t) thread_desc(&b, t);
        sb_add(&b, " at %s: a 16-byte vector type (float4, int4, double2...) at an address that is "
               "not a multiple of 16 -> cudaErrorMisalignedAddress", where);
    } else if (g_fault_sig == SIGSEGV || g_fault_sig == SIGBUS) {
        cuemu_alloc_info ai;
        long long off = 0;
        char *a = (char *)addr;
        err = E_ILLEGAL_ADDRESS;
        /* The stack's own guard page is a stack overflow. Below it, a frame larger than a
           page can land anywhere in the next megabyte; but an address inside an allocation's
           mapping (its guard pages included, or a freed one's, held PROT_NONE while it is
           remembered) belongs to that allocation: mmap may have put it just below a stack. */
        int guard = t && a < t->stack_lo && a >= t->stack_lo - (ptrdiff_t)g_page;
        int live = !guard && cuemu_alloc_nearest(addr, &ai, &off);
        int freed = !guard && !live && cuemu_alloc_was_freed(addr, &ai);
        if (guard || (t && !live && !freed && a < t->stack_lo
                      && a >= t->stack_lo - (ptrdiff_t)(g_page + 1024 * 1024))) {
            sb_add(&b, "stack overflow in kernel %s, ", g_desc->kernel);
            thread_desc(&b, t);
            sb_add(&b, " at %s: the thread used more than its %zu KiB stack (large local "
                   "arrays or deep recursion; raise CUEMU_STACK_KB)", where,
                   g_stack_size / 1024);
        } else if (cluster_fault(&b, a, what, where, &err)) {
            /* another block's shared memory, reached through map_shared_rank */
        } else if (g_dsm_region && a >= g_dsm_region && a < g_dsm_region + g_dsm_cap + g_page
                   && g_dsm_base) {
            sb_add(&b, "dynamic shared memory overflow in kernel %s, ", g_desc->kernel);
            if (t) thread_desc(&b, t);
            if (a >= g_dsm_base)
                sb_add(&b, " at %s: %s of byte %td of extern __shared__ '%s', which has %zu "
                       "bytes (the third launch parameter)", where, what, a - g_dsm_base,
                       g_dsm_name ? g_dsm_name : "?", g_dsm_size);
            else
                sb_add(&b, " at %s: %s %td bytes before the start of extern __shared__ '%s'",
                       where, what, g_dsm_base - a, g_dsm_name ? g_dsm_name : "?");
        } else if ((g_dsm_region && a >= g_dsm_region + g_dsm_cap
                    && a < g_dsm_region + g_dsm_cap + g_page)
                   || (g_ns_guard && a >= g_ns_guard && a < g_ns_guard + g_page)) {
            sb_add(&b, "kernel %s used extern __shared__ '%s' declared at namespace scope; "
                   "declare it inside the kernel (the emulator binds it per launch)",
                   g_desc->kernel, g_dsm_name ? g_dsm_name : "?");
        } else if (live) {
            sb_add(&b, "out-of-bounds %s of global memory in kernel %s, ", what, g_desc->kernel);
            if (t) thread_desc(&b, t);
            sb_add(&b, " at %s: address %p is ", where, addr);
            if (off < 0)
                sb_add(&b, "%lld bytes before the start", -off);
            else
                sb_add(&b, "%lld bytes past the end", off - (long long)ai.size);
            sb_add(&b, " of a %zu-byte allocation made at %s:%d", ai.size,
                   ai.file ? ai.file : "(unknown)", ai.line);
        } else if (freed) {
            sb_add(&b, "use after free in kernel %s, ", g_desc->kernel);
            if (t) thread_desc(&b, t);
            sb_add(&b, " at %s: %s of %p in a %zu-byte allocation made at %s:%d and already "
                   "freed", where, what, addr, ai.size, ai.file ? ai.file : "(unknown)", ai.line);
            if (ai.free_file)
                sb_add(&b, " by the cudaFreeAsync at %s:%d", ai.free_file, ai.free_line);
        } else {
            sb_add(&b, "illegal address in kernel %s, ", g_desc->kernel);
            if (t) thread_desc(&b, t);
            sb_add(&b, " at %s: %s of %p, which is not device memory%s", where, what, addr,
                   (uintptr_t)addr < 65536 ? " (a NULL pointer?)" : "");
        }
    } else if (g_fault_sig == 0) {
        err = E_LAUNCH_TIMEOUT;
        sb_add(&b, "watchdog: kernel %s (launched at %s:%d) ran longer than %d s (CUEMU_WATCHDOG_S)"
               ": ", g_desc->kernel, g_desc->file, g_desc->line, env_int("CUEMU_WATCHDOG_S", 20));
        if (t) {
            char loop[1200];
            thread_desc(&b, t);
            if (watchdog_loop(t, loop, sizeof loop))
                sb_add(&b, " was spinning in a loop over %s (where it ran in its last %d "
                       "samples);", loop, g_wd_samples);
            else
                sb_add(&b, " was running at %s;", where);
            if (g_n > 1) {
                sb_add(&b, " the others:");
                describe_threads(&b, t);
            }
            sb_add(&b, " threads are fibers that run one at a time: a thread that spins waiting "
                   "for another thread never lets it run (unless the loop calls __nanosleep)");
        } else {
            sb_add(&b, "stopped in block (%u,%u,%u) between threads", cuemu_block_idx.x,
                   cuemu_block_idx.y, cuemu_block_idx.z);
        }
    } else {
        err = g_fault_sig == SIGABRT ? E_ASSERT
            : (g_fault_sig == SIGILL || g_fault_sig == SIGTRAP) ? E_ILLEGAL_INSTRUCTION
            : E_LAUNCH_FAILURE;
        sb_add(&b, "%s in kernel %s, ", what, g_desc->kernel);
        if (t) thread_desc(&b, t);
        sb_add(&b, " at %s", where);
    }
    sb_add(&b, "; launch at %s:%d aborted", g_desc->file, g_desc->line);
    cuemu_core_diag("%s", msg);
    return err;
}

void cuemu_locate_pc(void *pc, char *out, size_t n)
{
    void *f[1] = { (char *)pc - 1 };
    locate(f, 1, out, n);
}

/* ---- signals ---------------------------------------------------------------------------- */
static int g_wd_sig;

/* Back to the launcher from a fiber's stack (an abort, or a fault's signal handler). The jump
   switches stacks: ASan must be told so, and TSan, which keeps the jump buffer with the
   launcher's fiber, switched back to it. */
static void jump_to_launcher(void) __attribute__((noreturn));
static void jump_to_launcher(void)
{
#ifdef CUEMU_ASAN
    __sanitizer_start_switch_fiber(NULL, g_asan_main_bottom, g_asan_main_size);
#endif
#ifdef CUEMU_TSAN
    __tsan_switch_to_fiber(g_sched_fiber, 1);
#endif
    siglongjmp(g_jb, 1);
}

void cuemu_launch_abort(int err, int sticky, const char *msg)
{
    snprintf(g_abort_msg, sizeof g_abort_msg, "%s", msg);
    g_abort_err = err;
    g_abort_sticky = sticky;
    g_jb_armed = 0;
    g_fault_thread = (cthread *)cuemu_cur;
    jump_to_launcher();
}

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = (ucontext_t *)ucv;
    /* device memory is closed while host code runs: its first touch by a kernel opens it */
    if ((sig == SIGSEGV || sig == SIGBUS) && cuemu_device_fault(si->si_addr)) return;
    if (cuemu_w == &g_idle.w.pub || !g_jb_armed) {
        if (sig == g_wd_sig) return;
        /* not ours: put the previous handler back and let the fault happen again */
        for (int i = 0; i < NSIGS; i++)
            if (g_sigs[i] == sig) sigaction(sig, &g_old_act[i], NULL);
        return;
    }
    if (sig == g_wd_sig && g_timer_ok && g_wd_samples < WD_SAMPLES) {
        /* a sample of where the thread is; the launch goes on for another 2 ms */
        int k = g_wd_samples;
        void *tmp[48];
        void *pc = cuemu_sig_pc(uc);
        int nb = CUEMU_TSAN_ON ? 0 : backtrace(tmp, 48), start = -1, m = 0;
        for (int i = 0; i < nb; i++)
            if (tmp[i] == pc) { start = i; break; }
        g_wd_frames[k][m++] = pc;
        for (int i = start + 1; start >= 0 && i < nb && m < WD_FRAMES; i++) g_wd_frames[k][m++] = tmp[i];
        g_wd_nf[k] = pc ? m : 0;
        g_wd_thread[k] = (cthread *)cuemu_cur;
        g_wd_samples = k + 1;
        if (g_wd_samples < WD_SAMPLES) {
            struct itimerspec its;
            memset(&its, 0, sizeof its);
            its.it_value.tv_nsec = 2 * 1000 * 1000;
            timer_settime(g_timer, 0, &its, NULL);
            return;
        }
    }
    g_jb_armed = 0;
    g_fault_sig = sig == g_wd_sig ? 0 : sig;
    g_fault_code = si->si_code;
    g_fault_addr = si->si_addr;
    g_fault_thread = (cthread *)cuemu_cur;
    g_fault_pc = cuemu_sig_pc(uc);
    g_fault_write = (sig == SIGSEGV || sig == SIGBUS) ? cuemu_sig_write(uc) : -1;
    /* the unwinder walks from here through the signal frame into the fiber's stack (not under
       TSan, which rightly calls the unwinder's allocations signal-unsafe) */
    void *tmp[48];
    int n = CUEMU_TSAN_ON ? 0 : backtrace(tmp, 48), k = 0, start = -1;
    for (int i = 0; i < n; i++)
        if (tmp[i] == g_fault_pc) { start = i; break; }
    g_fault_frames[k++] = g_fault_pc;
    if (start >= 0)
        for (int i = start + 1; i < n && k < 48; i++) g_fault_frames[k++] = tmp[i];
    g_fault_nframes = k;
    jump_to_launcher();
}

/* The handlers, for every host thread of the launch (the launcher installs them). */
static void signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NSIGS; i++) sigaction(g_sigs[i], &sa, &g_old_act[i]);
    g_wd_sig = SIGRTMIN + 7;
    sigaction(g_wd_sig, &sa, &g_old_act[NSIGS]);
}

static void signals_restore(void)
{
    for (int i = 0; i < NSIGS; i++) sigaction(g_sigs[i], &g_old_act[i], NULL);
    sigaction(g_wd_sig, &g_old_act[NSIGS], NULL);
}

/* What each host thread running blocks needs of its own: a stack for the handlers and the
   watchdog's timer, on this thread's CPU time. */
static void worker_signals_on(void)
{
    stack_t ss;
    if (!g_altstack) {
        void *warm[2];
        backtrace(warm, 2);           /* loads the unwinder now, not inside a handler */
        g_altstack = (char *)malloc(ALTSTACK_SIZE);
    }
    ss.ss_sp = g_altstack;
    ss.ss_size = ALTSTACK_SIZE;
    ss.ss_flags = 0;
    sigaltstack(&ss, &g_old_ss);

    int secs = env_int("CUEMU_WATCHDOG_S", 20);
    g_timer_ok = 0;
    g_wd_samples = 0;
    if (secs > 0) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = g_wd_sig;
        sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        /* the thread's CPU time, not the wall clock: a machine busy with other work must
           not stop a kernel that is merely slow, and a spinning thread burns CPU all the same */
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &g_timer) == 0) {
            struct itimerspec its;
            memset(&its, 0, sizeof its);
            its.it_value.tv_sec = secs;
            timer_settime(g_timer, 0, &its, NULL);
            g_timer_ok = 1;
        }
    }
}

static void worker_signals_off(void)
{
    if (g_timer_ok) timer_delete(g_timer);
    g_timer_ok = 0;
    if (g_old_ss.ss_flags & SS_DISABLE) {
        stack_t off;
        memset(&off, 0, sizeof off);
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, NULL);
    } else {
        sigaltstack(&g_old_ss, NULL);
    }
}

/* ---- launch ----------------------------------------------------------------------------- */
/* ---- thread block clusters: what a launch's clusters are ------------------------------------
   A kernel's __cluster_dims__ is registered by address when the program loads; a launch through
   cudaLaunchKernelEx may give the shape instead (not both, unless they agree). */
#define MAX_CLUSTER 16
typedef struct { const void *func; unsigned dim[3]; int nonportable; } cluster_kernel;
static cluster_kernel *g_ck;
static size_t g_nck, g_ck_cap;
static pthread_mutex_t g_ck_mu = PTHREAD_MUTEX_INITIALIZER;

/* The kernel's entry, made when `make` (caller holds g_ck_mu). */
static cluster_kernel *ck_find(const void *func, int make)
{
    for (size_t i = 0; i < g_nck; i++)
        if (g_ck[i].func == func) return &g_ck[i];
    if (!make || !func) return NULL;
    if (g_nck == g_ck_cap) {
        size_t cap = g_ck_cap ? 2 * g_ck_cap : 16;
        cluster_kernel *v = (cluster_kernel *)realloc(g_ck, cap * sizeof *v);
        if (!v) return NULL;
        g_ck = v;
        g_ck_cap = cap;
    }
    memset(&g_ck[g_nck], 0, sizeof g_ck[g_nck]);
    g_ck[g_nck].func = func;
    return &g_ck[g_nck++];
}

void cuemu_cluster_dims_register(const void *func, unsigned x, unsigned y, unsigned z)
{
    pthread_mutex_lock(&g_ck_mu);
    cluster_kernel *k = ck_find(func, 1);
    if (k) { k->dim[0] = x; k->dim[1] = y; k->dim[2] = z; }
    pthread_mutex_unlock(&g_ck_mu);
}

void cuemu_cluster_nonportable(const void *func, int on)
{
    pthread_mutex_lock(&g_ck_mu);
    cluster_kernel *k = ck_find(func, 1);
    if (k) k->nonportable = on != 0;
    pthread_mutex_unlock(&g_ck_mu);
}

/* d->cluster from the launch's attribute or the kernel's __cluster_dims__, checked as CUDA
   checks it: every dimension at least 1, the grid a multiple of it in each dimension, at most
   8 blocks (16 with cudaFuncAttributeNonPortableClusterSizeAllowed). */
static int cluster_prepare(cuemu_launch_desc *d)
{
    unsigned want[3] = { d->cluster.x, d->cluster.y, d->cluster.z }, have[3] = { 0, 0, 0 };
    int nonportable = 0, given = want[0] || want[1] || want[2];
    pthread_mutex_lock(&g_ck_mu);
    cluster_kernel *k = d->func ? ck_find(d->func, 0) : NULL;
    if (k) {
        memcpy(have, k->dim, sizeof have);
        nonportable = k->nonportable;
    }
    pthread_mutex_unlock(&g_ck_mu);
    const char *why = NULL;
    char buf[320];
    if (given && have[0] && memcmp(want, have, sizeof want) != 0) {
        snprintf(buf, sizeof buf, "the launch asks for clusters of %ux%ux%u blocks, and the "
                 "kernel's __cluster_dims__ fixes %ux%ux%u (a compile-time cluster shape cannot "
                 "be changed at launch)", want[0], want[1], want[2], have[0], have[1], have[2]);
        why = buf;
    }
    if (!given) {
        for (int i = 0; i < 3; i++) want[i] = have[0] ? have[i] : 1;
    }
    const unsigned gd[3] = { d->grid.x, d->grid.y, d->grid.z };
    unsigned long long blocks = (unsigned long long)want[0] * want[1] * want[2];
    int limit = nonportable ? MAX_CLUSTER : 8;
    for (int i = 0; i < 3 && !why; i++) {
        if (want[i] == 0) {
            snprintf(buf, sizeof buf, "cluster dimension %c is 0", "xyz"[i]);
            why = buf;
        } else if (gd[i] % want[i] != 0) {
            snprintf(buf, sizeof buf, "gridDim.%c = %u is not a multiple of the cluster's %u "
                     "blocks in %c (clusters of %ux%ux%u)", "xyz"[i], gd[i], want[i], "xyz"[i],
                     want[0], want[1], want[2]);
            why = buf;
        }
    }
    if (!why && blocks > (unsigned long long)limit) {
        snprintf(buf, sizeof buf, "clusters of %llu blocks (%ux%ux%u; at most 8, or 16 after "
                 "cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1))",
                 blocks, want[0], want[1], want[2]);
        why = buf;
    }
    if (why) {
        cuemu_diag("invalid cluster configuration of kernel %s at %s:%d: %s -> "
                   "cudaErrorInvalidClusterSize", d->kernel, d->file, d->line, why);
        return cuemu_set_last_error(E_INVALID_CLUSTER_SIZE);
    }
#if defined(CUEMU_ASAN) || defined(CUEMU_TSAN)
    if (blocks > 1) {
        cuemu_diag("kernel %s at %s:%d: not supported here: clusters of more than one block under "
                   "the sanitizer builds (a cluster's blocks run on host threads of their own, and "
                   "the sanitizers are told of one launcher's fibers)", d->kernel, d->file, d->line);
        return cuemu_set_last_error(E_NOT_SUPPORTED);
    }
#endif
    d->cluster.x = want[0];
    d->cluster.y = want[1];
    d->cluster.z = want[2];
    return 0;
}

int cuemu_launch_prepare(cuemu_launch_desc *d)
{
    int e = cuemu_sticky_error();
    if (e) {
        cuemu_set_last_error(e);
        return e;
    }
    if (cuemu_cur || (g_in_launch && pthread_equal(pthread_self(), g_launch_thread))) {
        cuemu_core_diag("kernel %s launched at %s:%d from inside a kernel: dynamic parallelism is "
                   "not supported by the emulator", d->kernel, d->file, d->line);
        return cuemu_set_last_error(E_NOT_SUPPORTED);
    }
    int mb[3], mg[3];
    cuemu_max_block_dim(mb);
    cuemu_max_grid_dim(mg);
    const unsigned bd[3] = { d->block.x, d->block.y, d->block.z };
    const unsigned gd[3] = { d->grid.x, d->grid.y, d->grid.z };
    unsigned long long threads = (unsigned long long)bd[0] * bd[1] * bd[2];
    const char *why = NULL;
    char buf[256];
    for (int i = 0; i < 3 && !why; i++) {
        if (bd[i] == 0 || bd[i] > (unsigned)mb[i]) {
            snprintf(buf, sizeof buf, "blockDim.%c = %u (must be 1..%d)", "xyz"[i], bd[i], mb[i]);
            why = buf;
        } else if (gd[i] == 0 || gd[i] > (unsigned)mg[i]) {
            snprintf(buf, sizeof buf, "gridDim.%c = %u (must be 1..%d)", "xyz"[i], gd[i], mg[i]);
            why = buf;
        }
    }
    if (!why && threads > (unsigned long long)cuemu_max_threads_per_block()) {
        snprintf(buf, sizeof buf, "%llu threads per block (%ux%ux%u; at most %d)", threads,
                 bd[0], bd[1], bd[2], cuemu_max_threads_per_block());
        why = buf;
    }
    if (!why) {
        size_t lim = cuemu_func_max_dynamic_smem(d->func);
        if (d->dsmem > lim) {
            snprintf(buf, sizeof buf, "%zu bytes of dynamic shared memory (at most %zu; more "
                     "needs cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize"
                     ", n))", d->dsmem, lim);
            why = buf;
        }
    }
    if (why) {
        cuemu_diag("invalid launch configuration of kernel %s at %s:%d: %s -> "
                   "cudaErrorInvalidValue", d->kernel, d->file, d->line, why);
        return cuemu_set_last_error(E_INVALID_VALUE);
    }
    return cluster_prepare(d);
}

int cuemu_check_kernel_pointer(const cuemu_launch_desc *d, int index, const void *p)
{
    cuemu_alloc_info ai;
    if (p && cuemu_alloc_lookup(p, &ai))   /* pinned host pool memory needs the device's access */
        return cuemu_pool_denies(p, d->kernel, d->file, d->line);
    if (!p) return 0;
    if (cuemu_alloc_was_freed(p, &ai)) {
        char freed[320] = "";
        if (ai.free_file)
            snprintf(freed, sizeof freed, ", freed by the cudaFreeAsync at %s:%d", ai.free_file,
                     ai.free_line);
        cuemu_diag("argument %d of kernel %s (launched at %s:%d) points into device memory "
                   "freed earlier (allocated at %s:%d%s)", index, d->kernel, d->file, d->line,
                   ai.file ? ai.file : "(unknown)", ai.line, freed);
        return 1;
    }
    cuemu_diag("argument %d of kernel %s (launched at %s:%d) is a host pointer (not from "
               "cudaMalloc/cudaMallocManaged/cudaMallocHost/cudaHostRegister): %p", index,
               d->kernel, d->file, d->line, p);
    return 1;
}

void cuemu_launch_refuse(const cuemu_launch_desc *d)
{
    (void)d;
    /* a GPU faults on the first access and reports it at the next synchronisation */
    cuemu_set_sticky_error(E_ILLEGAL_ADDRESS);
}

void cuemu_launch_enqueue(const cuemu_launch_desc *d)
{
    /* streams and their queues are the runtime's; it calls cuemu_launch_run when it is time */
    cuemu_stream_enqueue(d);
}

static unsigned long long rng_next(unsigned long long *s)
{
    unsigned long long x = *s += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static __attribute__((noinline)) void order_parse(void)
{
    const char *s = getenv("CUEMU_ORDER");
    g_order_mode = 0;
    if (!s || !*s || !strcmp(s, "forward")) return;
    if (!strcmp(s, "reverse")) { g_order_mode = 1; return; }
    if (!strncmp(s, "random", 6)) {
        g_order_mode = 2;
        g_seed = s[6] == ':' ? strtoull(s + 7, NULL, 10) : 1;
        return;
    }
    warn_once(1u << 5, "CUEMU_ORDER=%s not understood (forward, reverse, random:SEED); "
              "using forward", s);
}

static void order_fill(unsigned long long block_linear)
{
    for (int i = 0; i < g_n; i++) g_order[i] = g_order_mode == 1 ? g_n - 1 - i : i;
    if (g_order_mode == 2) {
        unsigned long long s = g_seed * 0x2545F4914F6CDD1Dull + block_linear;
        for (int i = g_n - 1; i > 0; i--) {
            int j = (int)(rng_next(&s) % (unsigned long long)(i + 1));
            int tmp = g_order[i]; g_order[i] = g_order[j]; g_order[j] = tmp;
        }
    }
    for (int i = 0; i < g_n; i++) {
        g_th[g_order[i]].pub.pos = i;
        cuemu_order_pub[i] = &g_th[g_order[i]].pub;
    }
}

/* Runs one block; 0 when every thread finished, 1 when it is stuck. */
static int run_block(void)
{
    if (++g_gen == 0) {                   /* wrapped: no stale gen may look current */
        for (int i = 0; i < g_th_cap; i++) g_th[i].gen = 0;
        g_gen = 1;
    }
    g_any_blocked = 0;
    g_nfree = 0;
    g_next_own = 0;
    for (int w = 0; w < (g_n + 31) / 32; w++) {
        int lanes = g_n - w * 32 < 32 ? g_n - w * 32 : 32;
        g_warps[w].exists = lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1);
        g_warps[w].exited = g_warps[w].arrived = 0;
    }
    g_live = g_n;
    g_at_bar = g_bar_mismatch = g_bar_count = 0;
    g_lazy = !CUEMU_TSAN_ON;
    cuemu_seq = 0;
    cuemu_seq_last = g_lazy ? g_n - 1 : -1;
    co_block_start();
    switch_to(NULL, &g_th[g_order[0]]);
    if (SW->w.co_waiting) return co_run();
    return g_live > 0;
}

static int dsm_canary_ok(void)
{
    size_t area = (g_dsm_size + 15) & ~(size_t)15;
    for (size_t i = g_dsm_size; i < area; i++)
        if ((unsigned char)g_dsm_base[i] != DSM_CANARY) return 0;
    return 1;
}

static unsigned long long g_win_first, g_win_count;   /* cuemuLaunchWindow: next launch */

void cuemuLaunchWindow(unsigned long long first, unsigned long long count)
{
    g_win_first = first;
    g_win_count = count;
}

/* ---- several host threads ---------------------------------------------------------------
   With CUEMU_THREADS = N > 1 (default: the cores this process may run on) a launch of enough
   work hands its blocks, in launch order, to N host threads, each with its own record
   (sched_w: fibers, stacks, dynamic shared memory, its copies of the __shared__ variables, its
   race detector's shadow, its fault capture and watchdog). What a one-thread run shows is kept:
   each block's printf output and reports are kept with the block and given, in block order,
   when the launch ends; a block that fails stops the handing out of later blocks, and of the
   failures the one of the lowest block in launch order is reported (what one thread reports
   first, since it runs blocks in that order). Blocks after a failed one that were already
   running finish, and their output is dropped: global memory after a failed launch may hold
   their writes (it holds whatever a GPU's blocks wrote too). */
typedef struct blockout { unsigned long long pos; outbuf b; } blockout;

static struct {
    const cuemu_launch_desc *d;
    unsigned long long total, nbx, nby, win_first, win_count;
    unsigned int *perm;
    int nthreads;
    unsigned long long next;          /* the next position to hand out (atomic) */
    unsigned long long stop;          /* the lowest position that failed (atomic; ~0: none) */
} L;

#define MAX_HELPERS 63
static sched_w *g_helper[MAX_HELPERS];

/* ---- thread block clusters: how a launch's clusters run ----------------------------------
   The blocks of one cluster must run at the same time: cluster.sync() waits for all of them,
   and each may use the others' shared memory. Each block of a cluster therefore runs on a host
   thread of its own (rank r of every cluster on the same one), with its own fibers, dynamic
   shared memory and thread_local __shared__ copies, whatever CUEMU_THREADS is. They do not run
   at once: one holds the turn, and hands it on, in the order CUEMU_ORDER gives the ranks, when
   its block waits at cluster.sync() or exits, exactly as the threads of a block hand over at a
   barrier. So a run is deterministic, and so are its reports: the first block to run of a
   cluster finds every other one not started, and a block that exits early is gone for every
   block that runs after it. Clusters run one after another, in launch order.
   A block's dynamic shared memory is open (read/write) only while the block runs or waits at
   cluster.sync(): a map_shared_rank access before the block started or after it exited faults,
   and the fault is reported as such (cluster_fault). */
enum { C_WAIT = 0, C_RUN, C_SYNC, C_DONE };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int C;                            /* blocks per cluster; 1: no clusters in this launch */
    unsigned dim[3];
    unsigned long long k, nk;         /* the cluster running (launch order), and how many */
    unsigned long long ncx, ncy;      /* clusters in x and y */
    int turn;                         /* the rank that runs */
    int ready;                        /* host threads set up (shared memory known, closed) */
    int abort;                        /* a block failed: every other one stops */
    unsigned phase;                   /* cluster.sync() phase */
    int state[MAX_CLUSTER];
    unsigned sphase[MAX_CLUSTER];     /* C_SYNC: the phase it waits in */
    const char *sfile[MAX_CLUSTER];   /* C_SYNC: where */
    int sline[MAX_CLUSTER];
    int order[MAX_CLUSTER];           /* order[pos]: the rank that runs pos-th */
    sched_w *w[MAX_CLUSTER];          /* the host thread of each rank */
} CL = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .C = 1,
         .dim = { 1, 1, 1 } };

static sched_w *worker_new(void)
{
    sched_w *w = (sched_w *)calloc(1, sizeof *w);
    if (w) cuemu_access_worker_init(&w->w);
    return w;
}

/* Keeps text with the running block's output (several host threads). kind: 'o' printf output,
   'd' a report, 'D' the device's own words (assert), 'w' a warning (first byte: its bit). */
static void out_add(char kind, const char *text, size_t n)
{
    sched_w *me = SW;
    blockout *o = me->nout ? &me->out[me->nout - 1] : NULL;
    if (!o || o->pos != me->pos) {
        if (me->nout == me->capout) {
            size_t cap = me->capout ? 2 * me->capout : 16;
            blockout *v = (blockout *)realloc(me->out, cap * sizeof *v);
            if (!v) return;
            me->out = v;
            me->capout = cap;
        }
        o = &me->out[me->nout++];
        o->pos = me->pos;
        memset(&o->b, 0, sizeof o->b);
    }
    if (o->b.n + n + 2 > o->b.cap) {
        size_t cap = o->b.cap ? o->b.cap : 256;
        while (o->b.n + n + 2 > cap) cap *= 2;
        char *p = (char *)realloc(o->b.p, cap);
        if (!p) return;
        o->b.p = p;
        o->b.cap = cap;
    }
    o->b.p[o->b.n++] = kind;
    memcpy(o->b.p + o->b.n, text, n);
    o->b.n += n;
    o->b.p[o->b.n++] = 0;
}


void cuemu_core_diag(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (KEEP_OUTPUT) out_add('d', buf, strlen(buf));
    else cuemu_diag("%s", buf);
}

void cuemu_core_diag_device(const char *line)
{
    if (KEEP_OUTPUT) out_add('D', line, strlen(line));
    else cuemu_diag_device(line);
}

int cuemu_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!cuemu_cur || !KEEP_OUTPUT) {
        int r = vprintf(fmt, ap);
        va_end(ap);
        return r;
    }
    char small[512];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof small) {
        out_add('o', small, (size_t)n);
    } else if (n >= 0) {
        char *big = (char *)malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, aq);
            out_add('o', big, (size_t)n);
            free(big);
        }
    }
    va_end(aq);
    return n;
}

static int out_cmp(const void *a, const void *b)
{
    unsigned long long x = (*(blockout *const *)a)->pos, y = (*(blockout *const *)b)->pos;
    return x < y ? -1 : x > y;
}

/* Gives the kept output of the blocks up to position `stop`, in block order, and forgets all. */
static void out_replay(sched_w **ws, int nw, unsigned long long stop)
{
    size_t total = 0, k = 0;
    for (int i = 0; i < nw; i++) if (ws[i]) total += ws[i]->nout;
    blockout **all = total ? (blockout **)malloc(total * sizeof *all) : NULL;
    for (int i = 0; i < nw && all; i++)
        for (size_t j = 0; ws[i] && j < ws[i]->nout; j++)
            if (ws[i]->out[j].pos <= stop) all[k++] = &ws[i]->out[j];
    if (all) qsort(all, k, sizeof *all, out_cmp);
    unsigned warned = 0;
    for (size_t i = 0; i < k; i++) {
        const char *p = all[i]->b.p, *end = p + all[i]->b.n;
        while (p < end) {
            char kind = *p++;
            const char *text = p;
            p += strlen(p) + 1;
            if (kind == 'o') {
                fputs(text, stdout);
            } else if (kind == 'd') {
                cuemu_diag("%s", text);
            } else if (kind == 'D') {
                cuemu_diag_device(text);
            } else if (kind == 'w') {
                unsigned bit = 1u << (unsigned)(text[0] - 'A');
                if (!(warned & bit)) cuemu_diag("warning: %s", text + 1);
                warned |= bit;
            }
        }
    }
    free(all);
    for (int i = 0; i < nw; i++) {
        for (size_t j = 0; ws[i] && j < ws[i]->nout; j++) free(ws[i]->out[j].b.p);
        if (ws[i]) ws[i]->nout = 0;
    }
}

/* The host threads a launch of `blocks` blocks of `per_block` threads runs on. */
static int threads_for(unsigned long long blocks, unsigned long long per_block)
{
#if defined(CUEMU_ASAN) || defined(CUEMU_TSAN)
    /* the sanitizers are told of one launcher's fibers (see jump_to_launcher) */
    (void)blocks; (void)per_block;
    return 1;
#else
    static int cores;
    if (!cores) {
        cpu_set_t set;
        cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
        if (cores < 1) cores = 1;
    }
    int n = env_int("CUEMU_THREADS", cores);
    if (n > MAX_HELPERS + 1) n = MAX_HELPERS + 1;
    /* the memory-access profile counts in one table, in block order */
    if (n <= 1 || cuemu_access_observer) return 1;
    /* a small launch costs less on one thread than starting others */
    if (blocks < 2 || blocks * per_block < 4096) return 1;
    if ((unsigned long long)n > blocks) n = (int)blocks;
    return n;
#endif
}

static void record_failure(int err, int sticky)
{
    sched_w *me = SW;
    me->failed = 1;
    me->fail_err = err;
    me->fail_sticky = sticky;
    me->fail_pos = me->pos;
    unsigned long long cur = __atomic_load_n(&L.stop, __ATOMIC_RELAXED);
    while (me->pos < cur &&
           !__atomic_compare_exchange_n(&L.stop, &cur, me->pos, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

/* Where a fault or an abort of a block lands (siglongjmp to g_jb): the host thread's own
   stack again, its signals off, the failing block kept for the report. */
static void fault_landed(void)
{
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    worker_signals_off();
    g_jb_armed = 0;
    lazy_settle();                   /* the reports read every thread's state */
    g_fault_block = cuemu_block_idx;
    cuemu_cur = NULL;
}

/* Before each block: its shared memory poisoned, so that uninitialised shared memory reads as
   0xFF bytes (NaN, -1), and the canary past the end of its dynamic area set. */
static void shared_poison(void)
{
    for (size_t v = 0; v < g_nshared; v++) memset(g_shared[v].p, 0xFF, g_shared[v].n);
    if (g_dsm_size) memset(g_dsm_base, 0xFF, g_dsm_size);
    if (g_dsm_size & 15)
        memset(g_dsm_base + g_dsm_size, DSM_CANARY, 16 - (g_dsm_size & 15));
}

/* After a block whose canary was overwritten (dsm_canary_ok() false). */
static void report_dsm_overflow(const cuemu_launch_desc *d)
{
    cuemu_core_diag("dynamic shared memory overflow in kernel %s, block (%u,%u,%u): a write past "
                    "the end of extern __shared__ '%s' (%zu bytes given at launch at %s:%d); "
                    "launch aborted", d->kernel, cuemu_block_idx.x, cuemu_block_idx.y,
                    cuemu_block_idx.z, g_dsm_name ? g_dsm_name : "?", g_dsm_size, d->file,
                    d->line);
}

/* Runs blocks of the launch L on this host thread (cuemu_w: its record, set up) until none
   is left or one failed; a failure is kept in the record, its report with the block's output
   (several host threads) or given at once (one). */
static __attribute__((noinline)) void worker_run(void)
{
    const cuemu_launch_desc *d = L.d;
    worker_signals_on();
    if (sigsetjmp(g_jb, 1)) {
        fault_landed();
        int sticky = 1, err;
        if (g_abort_err) {
            if (g_abort_msg[0]) cuemu_core_diag("%s", g_abort_msg);   /* "": said already (assert.c) */
            err = g_abort_err;
            sticky = g_abort_sticky;
            g_abort_err = 0;
        } else
            err = report_fault();
        record_failure(err, sticky);
        return;
    }
    g_jb_armed = 1;
    for (;;) {
        unsigned long long k = __atomic_fetch_add(&L.next, 1, __ATOMIC_RELAXED);
        if (k >= L.total || k > __atomic_load_n(&L.stop, __ATOMIC_RELAXED)) break;
        unsigned long long b = g_order_mode == 1 ? L.total - 1 - k : L.perm ? L.perm[k] : k;
        if (L.win_count && (b < L.win_first || b - L.win_first >= L.win_count)) continue;
        SW->pos = k;
        cuemu_block_idx.x = (unsigned)(b % L.nbx);
        cuemu_block_idx.y = (unsigned)((b / L.nbx) % L.nby);
        cuemu_block_idx.z = (unsigned)(b / (L.nbx * L.nby));
        if (g_order_mode == 2) order_fill(b);
#ifdef CUEMU_TSAN
        g_tsan_blockno = k;
#endif
        shared_poison();
#ifdef CUEMU_TSAN
        __tsan_release(&g_tsan_launch);          /* the poisoning precedes the block */
#endif
        cuemu_access_block();
        int stuck = run_block();
#ifdef CUEMU_TSAN
        __tsan_acquire(&g_tsan_block[k & 1]);    /* and follows the previous one */
#endif
        if (stuck) {
            g_jb_armed = 0;
            worker_signals_off();
            report_deadlock();
            record_failure(E_LAUNCH_FAILURE, 1);
            return;
        }
        if ((g_dsm_size & 15) && !dsm_canary_ok()) {
            g_jb_armed = 0;
            worker_signals_off();
            report_dsm_overflow(d);
            record_failure(E_ILLEGAL_ADDRESS, 1);
            return;
        }
    }
    g_jb_armed = 0;
    worker_signals_off();
}

/* This host thread's record ready for the launch L: 0, or -1 when its stacks or shared memory
   cannot be had. */
static __attribute__((noinline)) int worker_setup(int mt)
{
    const cuemu_launch_desc *d = L.d;
    SW->w.pub.mt = mt;
    SW->failed = 0;
    g_warned = 0;
    g_n = (int)(d->block.x * d->block.y * d->block.z);
    if (pool_reserve(g_n) != 0 || dsm_prepare(d->dsmem) != 0) return -1;
    cuemu_block_dim = d->block;
    cuemu_grid_dim = d->grid;
    SW->w.pub.cluster_dim.x = CL.dim[0];
    SW->w.pub.cluster_dim.y = CL.dim[1];
    SW->w.pub.cluster_dim.z = CL.dim[2];
    SW->anchor = (char *)&cuemu_w;
    cuemu_access_launch(d, g_dsm_base, g_dsm_size, NULL);
    for (int i = 0; i < g_n; i++) {
        cthread *t = &g_th[i];
        unsigned bx = d->block.x, by = d->block.y;
        t->pub.idx.x = (unsigned)i % bx;
        t->pub.idx.y = ((unsigned)i / bx) % by;
        t->pub.idx.z = (unsigned)i / (bx * by);
        t->pub.linear = (unsigned)i;
        t->pub.lane = (unsigned)i & 31;
        t->pub.warp = (unsigned)i >> 5;
    }
    if (g_order_mode != 2) order_fill(0);
    return 0;
}

/* ---- thread block clusters: the run (see CL above) ---------------------------------------- */
static void cluster_order_fill(unsigned long long k)
{
    for (int i = 0; i < CL.C; i++) CL.order[i] = g_order_mode == 1 ? CL.C - 1 - i : i;
    if (g_order_mode == 2) {
        unsigned long long s = g_seed * 0x9E3779B97F4A7C15ull + k + 1;
        for (int i = CL.C - 1; i > 0; i--) {
            int j = (int)(rng_next(&s) % (unsigned long long)(i + 1));
            int tmp = CL.order[i]; CL.order[i] = CL.order[j]; CL.order[j] = tmp;
        }
    }
}

/* The rank that runs after `from` (CL.mu held): the next in order that has not started or
   was released from cluster.sync(); -1 when none can run. */
static int cluster_next(int from)
{
    int p = 0;
    while (p < CL.C && CL.order[p] != from) p++;
    for (int j = 1; j <= CL.C; j++) {
        int r = CL.order[(p + j) % CL.C];
        if (CL.state[r] == C_WAIT || (CL.state[r] == C_SYNC && CL.sphase[r] != CL.phase))
            return r;
    }
    return -1;
}

/* blockIdx of rank r of the running cluster */
static struct uint3 cluster_block(int r)
{
    unsigned long long k = g_order_mode == 1 ? CL.nk - 1 - CL.k : CL.k;
    struct uint3 b;
    b.x = (unsigned)(k % CL.ncx) * CL.dim[0] + (unsigned)r % CL.dim[0];
    b.y = (unsigned)((k / CL.ncx) % CL.ncy) * CL.dim[1] + ((unsigned)r / CL.dim[0]) % CL.dim[1];
    b.z = (unsigned)(k / (CL.ncx * CL.ncy)) * CL.dim[2] + (unsigned)r / (CL.dim[0] * CL.dim[1]);
    return b;
}

/* "deadlock ...": blocks wait at cluster.sync() for blocks that exited (CL.mu held). */
static void cluster_deadlock_msg(char *msg, size_t n)
{
    sbuf b = { msg, n };
    int first = 1;
    sb_add(&b, "deadlock in kernel %s (launched at %s:%d): thread block cluster of blocks (%u,%u,%u)"
           " to (%u,%u,%u):", g_desc->kernel, g_desc->file, g_desc->line, cluster_block(0).x,
           cluster_block(0).y, cluster_block(0).z, cluster_block(CL.C - 1).x,
           cluster_block(CL.C - 1).y, cluster_block(CL.C - 1).z);
    for (int r = 0; r < CL.C; r++) {
        if (CL.state[r] != C_SYNC) continue;
        struct uint3 bi = cluster_block(r);
        sb_add(&b, "%s block (%u,%u,%u) (rank %d) waits at cluster.sync() %s:%d", first ? "" : ";",
               bi.x, bi.y, bi.z, r, CL.sfile[r], CL.sline[r]);
        first = 0;
    }
    for (int r = 0; r < CL.C; r++) {
        if (CL.state[r] != C_DONE) continue;
        struct uint3 bi = cluster_block(r);
        sb_add(&b, "; block (%u,%u,%u) (rank %d) exited without reaching it", bi.x, bi.y, bi.z, r);
    }
    sb_add(&b, " (every thread of every block of a cluster must reach each cluster.sync()); "
           "launch aborted");
}

/* The last thread of this block reached cluster.sync() (the block barrier is complete): wait
   until every block of the cluster is there, running the others meanwhile. */
static void cluster_arrive(const char *file, int line)
{
    sched_w *me = SW;
    struct uint3 cd = me->w.pub.cluster_dim;
    if ((unsigned long long)cd.x * cd.y * cd.z <= 1) return;   /* a cluster of one: the block */
    int r = me->crank, stop;
    pthread_mutex_lock(&CL.mu);
    CL.state[r] = C_SYNC;
    CL.sphase[r] = CL.phase;
    CL.sfile[r] = file;
    CL.sline[r] = line;
    int waiting = 0;
    for (int i = 0; i < CL.C; i++) waiting += CL.state[i] == C_SYNC && CL.sphase[i] == CL.phase;
    if (waiting == CL.C) {
        /* everyone is here: the barrier opens, and the order starts again from its first */
        CL.phase++;
        CL.turn = CL.order[0];
    } else {
        int nxt = cluster_next(r);
        if (nxt < 0) {
            char msg[2048];
            cluster_deadlock_msg(msg, sizeof msg);
            pthread_mutex_unlock(&CL.mu);
            cuemu_launch_abort(E_LAUNCH_FAILURE, 1, msg);
        }
        CL.turn = nxt;
    }
    pthread_cond_broadcast(&CL.cv);
    while (!CL.abort && CL.turn != r) pthread_cond_wait(&CL.cv, &CL.mu);
    stop = CL.abort;
    if (!stop) CL.state[r] = C_RUN;
    pthread_mutex_unlock(&CL.mu);
    if (stop) cuemu_launch_abort(E_CLUSTER_STOPPED, 0, "");
}

static void cluster_stop_all(void)
{
    pthread_mutex_lock(&CL.mu);
    CL.abort = 1;
    pthread_cond_broadcast(&CL.cv);
    pthread_mutex_unlock(&CL.mu);
}

/* This block's dynamic shared memory open (it runs) or closed (not started, or exited): the
   pages from its first byte's to the guard page; what lies before them stays closed. */
static void dsm_open(int open)
{
    if (!g_dsm_size || !g_dsm_region) return;
    char *lo = (char *)((uintptr_t)g_dsm_base & ~(uintptr_t)(g_page - 1));
    mprotect(lo, (size_t)(g_dsm_region + g_dsm_cap - lo), open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

static void cluster_worker_end(void)
{
    /* the next launch may be an ordinary one: the whole region open again */
    if (g_dsm_region) mprotect(g_dsm_region, g_dsm_cap, PROT_READ | PROT_WRITE);
}

/* Runs rank SW->crank of every cluster of the launch L, taking turns with the other ranks'
   host threads (see CL). */
static __attribute__((noinline)) void cluster_worker_run(void)
{
    const cuemu_launch_desc *d = L.d;
    worker_signals_on();
    if (g_dsm_region) mprotect(g_dsm_region, g_dsm_cap, PROT_NONE);
    if (sigsetjmp(g_jb, 1)) {
        fault_landed();
        int sticky = 1, err;
        if (g_abort_err) {
            err = g_abort_err;
            sticky = g_abort_sticky;
            g_abort_err = 0;
            if (err != E_CLUSTER_STOPPED && g_abort_msg[0]) cuemu_core_diag("%s", g_abort_msg);
        } else
            err = report_fault();
        if (err != E_CLUSTER_STOPPED) record_failure(err, sticky);
        cluster_stop_all();
        cluster_worker_end();
        return;
    }
    g_jb_armed = 1;
    const int r = SW->crank;
    /* no block runs before every rank's shared memory is where map_shared_rank looks, and
       closed */
    pthread_mutex_lock(&CL.mu);
    CL.ready++;
    pthread_cond_broadcast(&CL.cv);
    while (!CL.abort && CL.ready < CL.C) pthread_cond_wait(&CL.cv, &CL.mu);
    pthread_mutex_unlock(&CL.mu);
    for (unsigned long long k = 0; k < CL.nk; k++) {
        pthread_mutex_lock(&CL.mu);
        while (!CL.abort && !(CL.k == k && CL.turn == r)) pthread_cond_wait(&CL.cv, &CL.mu);
        int stop = CL.abort;
        if (!stop) CL.state[r] = C_RUN;
        struct uint3 bi = cluster_block(r);
        pthread_mutex_unlock(&CL.mu);
        if (stop) break;
        cuemu_block_idx = bi;
        unsigned long long b = bi.x + L.nbx * (bi.y + L.nby * (unsigned long long)bi.z);
        SW->pos = (g_order_mode == 1 ? CL.nk - 1 - k : k) * (unsigned long long)CL.C + (unsigned)r;
        if (g_order_mode == 2) order_fill(b);
        dsm_open(1);
        shared_poison();
        cuemu_access_block();
        int stuck = run_block();
        int err = 0;
        if (stuck) {
            g_jb_armed = 0;
            report_deadlock();
            err = E_LAUNCH_FAILURE;
        } else if ((g_dsm_size & 15) && !dsm_canary_ok()) {
            g_jb_armed = 0;
            report_dsm_overflow(d);
            err = E_ILLEGAL_ADDRESS;
        }
        dsm_open(0);
        pthread_mutex_lock(&CL.mu);
        CL.state[r] = C_DONE;
        int nxt = err ? -1 : cluster_next(r), all_done = 1;
        for (int i = 0; i < CL.C; i++) all_done &= CL.state[i] == C_DONE;
        if (!err && nxt >= 0) {
            CL.turn = nxt;
        } else if (!err && all_done) {
            /* the cluster is finished: the next one starts with every block not started */
            CL.k++;
            for (int i = 0; i < CL.C; i++) CL.state[i] = C_WAIT;
            CL.phase = 0;
            cluster_order_fill(CL.k);
            CL.turn = CL.order[0];
        } else if (!err) {
            char msg[2048];
            cluster_deadlock_msg(msg, sizeof msg);
            g_jb_armed = 0;
            cuemu_core_diag("%s", msg);
            err = E_LAUNCH_FAILURE;
        }
        if (err) {
            pthread_mutex_unlock(&CL.mu);
            worker_signals_off();
            record_failure(err, 1);
            cluster_stop_all();
            cluster_worker_end();
            return;
        }
        pthread_cond_broadcast(&CL.cv);
        while (!CL.abort && CL.k == k) pthread_cond_wait(&CL.cv, &CL.mu);
        stop = CL.abort;
        pthread_mutex_unlock(&CL.mu);
        if (stop) break;
    }
    g_jb_armed = 0;
    worker_signals_off();
    cluster_worker_end();
}

/* ---- distributed shared memory ---------------------------------------------------------- */
/* The dynamic area and the static __shared__ variables of each block of a cluster are those
   of its host thread: the dynamic area at that thread's g_dsm_base, a static variable (a
   thread_local of the same module as cuemu_w) at the same distance from that thread's
   cuemu_w as this thread's copy is from this thread's. */
static void cluster_msg(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cluster_msg(char *msg, size_t n, const char *fmt, ...)
{
    sbuf b = { msg, n };
    cthread *t = (cthread *)cuemu_cur;
    sb_add(&b, "distributed shared memory misuse in kernel %s, ", g_desc->kernel);
    if (t) thread_desc(&b, t);
    va_list ap;
    va_start(ap, fmt);
    size_t used = (size_t)(b.p - msg);
    vsnprintf(b.p, n - used, fmt, ap);
    va_end(ap);
}

void *cuemu_cluster_map(const void *p, unsigned rank, const char *file, int line)
{
    if (!cuemu_cur) return (void *)p;
    sched_w *me = SW;
    struct uint3 cd = me->w.pub.cluster_dim;
    unsigned long long C = (unsigned long long)cd.x * cd.y * cd.z;
    char msg[1024];
    if (C < 1) C = 1;
    if (rank >= C) {
        cluster_msg(msg, sizeof msg, " at %s:%d: map_shared_rank(%p, %d): the cluster has %llu "
                    "block%s (ranks 0 to %llu)", file, line, p, (int)rank, C, C == 1 ? "" : "s",
                    C - 1);
        cuemu_launch_abort(E_ILLEGAL_ADDRESS, 1, msg);
    }
    if (C == 1 || (int)rank == me->crank) return (void *)p;
    sched_w *tw = CL.w[rank];
    const char *a = (const char *)p;
    if (g_dsm_size && a >= g_dsm_base && a <= g_dsm_base + g_dsm_size)
        return dsm_base_of(tw) + (a - g_dsm_base);
    for (size_t v = 0; v < g_nshared; v++) {
        const char *lo = (const char *)g_shared[v].p;
        if (a < lo || a > lo + g_shared[v].n) continue;
        if (CL.state[rank] == C_DONE) {
            struct uint3 bi = cluster_block((int)rank);
            cluster_msg(msg, sizeof msg, " at %s:%d: map_shared_rank to block (%u,%u,%u) (rank %u "
                        "of the cluster), which has already exited: its shared memory is gone (on "
                        "a GPU an access is an illegal address); a cluster.sync() before any block "
                        "exits keeps every block's shared memory there until all are done with it",
                        file, line, bi.x, bi.y, bi.z, rank);
            cuemu_launch_abort(E_ILLEGAL_ADDRESS, 1, msg);
        }
        return tw->anchor + (a - me->anchor);
    }
    cluster_msg(msg, sizeof msg, " at %s:%d: map_shared_rank(%p, %u): the address is not in this "
                "block's shared memory", file, line, p, rank);
    cuemu_launch_abort(E_ILLEGAL_ADDRESS, 1, msg);
}

int cuemu_cluster_query(const void *p)
{
    if (!cuemu_cur) return 0;
    sched_w *me = SW;
    struct uint3 cd = me->w.pub.cluster_dim;
    int C = (int)(cd.x * cd.y * cd.z);
    const char *a = (const char *)p;
    if (C <= 1) return 0;
    for (int r = 0; r < C; r++) {
        sched_w *w = CL.w[r];
        if (dsm_size_of(w) && a >= dsm_base_of(w) && a < dsm_base_of(w) + dsm_size_of(w)) return r;
        for (size_t v = 0; v < g_nshared; v++) {
            const char *lo = w->anchor + ((const char *)g_shared[v].p - me->anchor);
            if (a >= lo && a < lo + g_shared[v].n) return r;
        }
    }
    return -1;
}

/* A fault at a in another block's dynamic shared memory (see dsm_open): the report, and 1. */
static int cluster_fault(sbuf *b, const char *a, const char *what, const char *where, int *err)
{
    sched_w *me = SW;
    struct uint3 cd = me->w.pub.cluster_dim;
    int C = (int)(cd.x * cd.y * cd.z);
    cthread *t = g_fault_thread;
    for (int r = 0; r < C && C > 1; r++) {
        sched_w *w = CL.w[r];
        if (w == me || !w || !dsm_region_of(w) || a < dsm_region_of(w)
            || a >= dsm_region_of(w) + dsm_cap_of(w) + g_page)
            continue;
        struct uint3 bi = cluster_block(r);
        const char *name = g_dsm_name ? g_dsm_name : "?";
        *err = E_ILLEGAL_ADDRESS;
        if (a >= dsm_base_of(w) && a < dsm_base_of(w) + dsm_size_of(w)) {
            int st = CL.state[r];
            sb_add(b, "distributed shared memory %s in kernel %s, ", what, g_desc->kernel);
            if (t) thread_desc(b, t);
            sb_add(b, " at %s: byte %td of extern __shared__ '%s' of block (%u,%u,%u) (rank %d of "
                   "the cluster), ", where, a - dsm_base_of(w), name, bi.x, bi.y, bi.z, r);
            if (st == C_DONE)
                sb_add(b, "which has already exited: its shared memory is gone (on a GPU an "
                       "illegal address); a cluster.sync() before any block exits keeps every "
                       "block's shared memory there until all are done with it");
            else
                sb_add(b, "which has not started yet: a cluster.sync() before the first access "
                       "to another block's shared memory makes sure every block of the cluster "
                       "runs");
        } else {
            sb_add(b, "out-of-bounds %s of distributed shared memory in kernel %s, ", what,
                   g_desc->kernel);
            if (t) thread_desc(b, t);
            if (a >= dsm_base_of(w))
                sb_add(b, " at %s: byte %td of extern __shared__ '%s' of block (%u,%u,%u) (rank %d "
                       "of the cluster), which has %zu bytes (the third launch parameter)", where,
                       a - dsm_base_of(w), name, bi.x, bi.y, bi.z, r, dsm_size_of(w));
            else
                sb_add(b, " at %s: %td bytes before the start of extern __shared__ '%s' of block "
                       "(%u,%u,%u) (rank %d of the cluster)", where, dsm_base_of(w) - a, name,
                       bi.x, bi.y, bi.z, r);
        }
        return 1;
    }
    return 0;
}

#ifdef CUEMU_W_BY_CALL
/* CUEMU_W's call (core_internal.h): kept out of line, or the compiler would see the asm and
   no longer the const call it may make once. */
__attribute__((noinline)) struct cuemu_worker *cuemu_w_call(void) { return cuemu_w_fixed(); }
#endif

/* From here on cuemu_w changes: it is read as memory, in order with its stores. What these
   functions call with a fixed read (worker_setup, worker_run, order_parse) is not inlined. */
#undef SW
#undef cuemu_cur
#define SW ((sched_w *)cuemu_w)
#define cuemu_cur (cuemu_w->cur)

/* A helper host thread of a launch: runs blocks with record g_helper[i]. Its copies of the
   __shared__ variables die with it, so its record forgets them at the end. */
static void *helper_main(void *arg)
{
    sched_w *me = (sched_w *)arg;
    cuemu_w = &me->w.pub;
    if (worker_setup(1) == 0) {
        if (CL.C > 1) cluster_worker_run();
        else worker_run();
    } else if (CL.C > 1) {
        /* the cluster cannot run without this block */
        record_failure(2 /* cudaErrorMemoryAllocation */, 0);
        cluster_stop_all();
    }
    cuemu_access_launch_end();
    g_nshared = 0;
    me->w.nreg = 0;
    me->w.rmap_nreg = -1;           /* the next thread's regions are elsewhere */
    cuemu_cur = NULL;
    g_dsm_base = NULL;
    me->w.pub.mt = 0;
    cuemu_w = &g_idle.w.pub;
    return NULL;
}

int cuemu_launch_run(const cuemu_launch_desc *d)
{
    int err = 0;
    const unsigned long long win_first = g_win_first, win_count = g_win_count;
    g_win_count = 0;
    pthread_mutex_lock(&g_launch_mu);
    g_launch_thread = pthread_self();
    g_in_launch = 1;
    g_desc = d;
    if (!t_self) t_self = worker_new();
    if (!t_self) {
        cuemu_diag("kernel %s at %s:%d: cannot allocate the scheduler's state", d->kernel,
                   d->file, d->line);
        err = cuemu_set_last_error(2 /* cudaErrorMemoryAllocation */);
        g_in_launch = 0;
        pthread_mutex_unlock(&g_launch_mu);
        return err;
    }
    cuemu_w = &t_self->w.pub;
    t_self->w.pub.mt = 0;
    g_warned = 0;
    order_parse();
    memset(&L, 0, sizeof L);
    L.d = d;
    L.nbx = d->grid.x;
    L.nby = d->grid.y;
    L.total = L.nbx * L.nby * d->grid.z;
    L.win_first = win_first;
    L.win_count = win_count;
    L.stop = ~0ull;
    unsigned long long run = win_count ? (win_count < L.total ? win_count : L.total) : L.total;
    L.nthreads = threads_for(run, (unsigned long long)d->block.x * d->block.y * d->block.z);
    /* clusters: one host thread per block of a cluster, whatever CUEMU_THREADS says (see CL) */
    CL.dim[0] = d->cluster.x ? d->cluster.x : 1;
    CL.dim[1] = d->cluster.y ? d->cluster.y : 1;
    CL.dim[2] = d->cluster.z ? d->cluster.z : 1;
    CL.C = (int)(CL.dim[0] * CL.dim[1] * CL.dim[2]);
    if (CL.C > 1) {
        L.nthreads = CL.C;
        CL.ncx = L.nbx / CL.dim[0];
        CL.ncy = L.nby / CL.dim[1];
        CL.nk = L.total / (unsigned long long)CL.C;
        CL.k = 0;
        CL.abort = 0;
        CL.ready = 0;
        CL.phase = 0;
        for (int i = 0; i < CL.C; i++) CL.state[i] = C_WAIT;
        cluster_order_fill(0);
        CL.turn = CL.order[0];
        t_self->crank = 0;
        CL.w[0] = t_self;
    }
    if (worker_setup(L.nthreads > 1) != 0) {
        cuemu_diag("kernel %s at %s:%d: cannot allocate fiber stacks or shared memory",
                   d->kernel, d->file, d->line);
        err = cuemu_set_last_error(2 /* cudaErrorMemoryAllocation */);
        goto out;
    }
#ifdef CUEMU_TSAN
    if (!g_sched_fiber) g_sched_fiber = __tsan_get_current_fiber();
#endif
#ifdef CUEMU_ASAN
    {
        pthread_attr_t at;
        if (pthread_getattr_np(pthread_self(), &at) == 0) {
            pthread_attr_getstack(&at, &g_asan_main_bottom, &g_asan_main_size);
            pthread_attr_destroy(&at);
        }
    }
#endif
    if (g_order_mode == 2 && L.total <= (1ull << 24)) {
        L.perm = (unsigned int *)malloc(sizeof *L.perm * L.total);
        if (L.perm) {
            unsigned long long s = g_seed ^ 0xA5A5A5A5ull;
            for (unsigned long long i = 0; i < L.total; i++) L.perm[i] = (unsigned)i;
            for (unsigned long long i = L.total - 1; i > 0; i--) {
                unsigned long long j = rng_next(&s) % (i + 1);
                unsigned tmp = L.perm[i]; L.perm[i] = L.perm[j]; L.perm[j] = tmp;
            }
        }
    }
#ifdef CUEMU_TSAN
    __tsan_release(&g_tsan_launch);
#endif
    signals_install();
    {
        pthread_t tid[MAX_HELPERS];
        int started[MAX_HELPERS] = { 0 };
        int nh = L.nthreads - 1;
        for (int i = 0; i < nh; i++) {
            if (!g_helper[i]) g_helper[i] = worker_new();
            if (CL.C > 1 && g_helper[i]) {
                g_helper[i]->crank = i + 1;
                CL.w[i + 1] = g_helper[i];
            }
            /* a helper that cannot start leaves its blocks to the others (not in a cluster:
               there every block needs its own) */
            if (g_helper[i]) started[i] = pthread_create(&tid[i], NULL, helper_main, g_helper[i]) == 0;
            if (CL.C > 1 && !started[i]) {
                cuemu_core_diag("kernel %s at %s:%d: cannot start a host thread for block rank %d "
                                "of each cluster", d->kernel, d->file, d->line, i + 1);
                record_failure(2 /* cudaErrorMemoryAllocation */, 0);
                cluster_stop_all();
            }
        }
        if (CL.C > 1) cluster_worker_run();
        else worker_run();
        for (int i = 0; i < nh; i++)
            if (started[i]) pthread_join(tid[i], NULL);
        signals_restore();
        sched_w *ws[MAX_HELPERS + 1];
        int nw = 0;
        ws[nw++] = t_self;
        for (int i = 0; i < nh; i++) ws[nw++] = started[i] ? g_helper[i] : NULL;
        unsigned long long stop = __atomic_load_n(&L.stop, __ATOMIC_RELAXED);
        cuemu_w = &t_self->w.pub;
        if (L.nthreads > 1) out_replay(ws, nw, stop);
        for (int i = 0; i < nw; i++) {
            if (!ws[i] || !ws[i]->failed || ws[i]->fail_pos != stop) continue;
            err = ws[i]->fail_err;
            if (ws[i]->fail_sticky) cuemu_set_sticky_error(err);
            else cuemu_set_last_error(err);
            break;
        }
        free(L.perm);
        L.perm = NULL;
    }
out:
    cuemu_access_launch_end();
#ifdef CUEMU_ASAN
    /* an aborted launch leaves stacks with the redzones of frames that never returned */
    if (err)
        for (int i = 0; i < g_th_cap; i++)
            if (g_th[i].own_stack) __asan_unpoison_memory_region(g_th[i].own_stack, g_stack_size);
#endif
#ifdef CUEMU_TSAN
    if (err) {
        /* threads stopped mid-kernel never reached their release: make it for them, so the
           launcher's next writes (the next launch's arguments) are not called races */
        for (int i = 0; i < g_th_cap; i++) {
            if (!g_th[i].tsan_fiber) continue;
            __tsan_switch_to_fiber(g_th[i].tsan_fiber, 1);
            __tsan_release(&g_tsan_abort);
            __tsan_switch_to_fiber(g_sched_fiber, 1);
        }
        __tsan_acquire(&g_tsan_abort);
    }
    __tsan_acquire(&g_tsan_block[0]);
    __tsan_acquire(&g_tsan_block[1]);
#endif
    cuemu_cur = NULL;
    g_dsm_base = NULL;
    t_self->w.pub.mt = 0;
    CL.C = 1;
    CL.dim[0] = CL.dim[1] = CL.dim[2] = 1;
    cuemu_w = &g_idle.w.pub;
    g_in_launch = 0;
    pthread_mutex_unlock(&g_launch_mu);
    return err;
}

unsigned cuemu_block_gen(void)
{
    return g_gen;
}

void cuemu_device_error(int err, const char *file, int line, const char *what)
{
    cuemu_core_diag("%s at %s:%d", what, file, line);
    cuemu_set_sticky_error(err);
}

void cuemu_core_reset(void)
{
    /* nothing device-wide survives a launch except the stack pool, which stays valid */
}

/* ---- benchmark hook --------------------------------------------------------------------- */
static long g_bench_left;
static cuemu_launch_desc g_bench_desc;
static void bench_body(void *ctx)
{
    /* two threads ping-pong through a barrier: every barrier costs one switch per thread */
    for (long i = *(const long *)ctx; i > 0; i--) cuemu_syncthreads("bench", 0);
}

double cuemu_bench_switch_ns(long n)
{
    struct timespec a, b;
    memset(&g_bench_desc, 0, sizeof g_bench_desc);
    g_bench_desc.kernel = "switch_bench";
    g_bench_desc.file = __FILE__;
    g_bench_desc.line = __LINE__;
    g_bench_desc.grid.x = g_bench_desc.grid.y = g_bench_desc.grid.z = 1;
    g_bench_desc.block.x = 2;
    g_bench_desc.block.y = g_bench_desc.block.z = 1;
    g_bench_desc.body = bench_body;
    g_bench_left = n;
    g_bench_desc.ctx = &g_bench_left;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int e = cuemu_launch_run(&g_bench_desc);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (e) return -1.0;
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    return ns / (double)(2 * n);
}
