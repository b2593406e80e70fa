/* SPDX-License-Identifier: MIT */
/*
 * stream.c: streams, events, the queue of asynchronous work, and per-function attributes.
 *
 * Asynchronous work is queued, not run: a kernel launch, an async copy or set, an event
 * record, a host function and a cudaFreeAsync each become an operation on their stream's
 * queue, and run only when the program must see their effect: a stream, event or device
 * synchronisation, or a call CUDA documents as blocking (see memory.c). Until then their
 * results are not there, as on a GPU that has not got to them yet, so a missing
 * synchronisation reads stale data every time instead of right data by luck.
 *
 * Order: an operation runs after everything before it in its stream, after the record of
 * any event its stream waits for, and with the legacy default stream's rule (work on stream 0
 * waits for all earlier work on blocking streams, and they for it; cudaStreamNonBlocking
 * streams are exempt). Among the operations that may run, CUEMU_STREAM_ORDER picks:
 *   rr (default)   round robin over the streams, so work of different streams interleaves
 *   fifo           issue order
 *   reverse        the most recently issued first
 *   random[:seed]  a seeded random choice
 * A synchronisation runs only what it must wait for; everything else stays queued.
 *
 * What the emulator can know, it reports:
 *   - two streams touching the same allocation (one writing) with nothing ordering them, and
 *     the event recorded after the first that the second stream did not wait for;
 *   - a host access to pinned (cudaMallocHost) or managed memory that queued work will still
 *     write (or, for a host write, read): the pages are protected while such work is queued,
 *     and the fault is reported with the operation's call site and the host instruction.
 * CUEMU_STREAM_RACES=error (default: the call that queues the second operation fails with
 * cudaErrorIllegalState), warn, or off.
 *
 * An event's timestamp is the host clock when its record runs: elapsed times measure the
 * emulator, not a GPU.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE                /* dladdr, clock_gettime */
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "rt_internal.h"

#define STREAM_MAGIC 0x7374726du
#define EVENT_MAGIC  0x65766e74u
#define MAX_ACC      18
#define LOG_CAP      (1 << 16)

struct CUstream_st {
    unsigned magic;
    unsigned flags;
    int priority;
    long long id;               /* 0 legacy, -1 per-thread, 1, 2, ... creation order */
    int destroyed;              /* cudaStreamDestroy'd with work still queued           */
    rt_op *last;                /* the latest operation queued (done or not)            */
    rt_op *head, *tail;         /* its pending operations, in order                     */
    long pending;
    struct CUstream_st *next;
    int device;                 /* the device current when it was made (implicit: its own) */
};

struct CUevent_st {
    unsigned magic;
    unsigned flags;
    int recorded;
    struct timespec when;
    rt_op *op;                  /* the latest record, while it may still be pending      */
    struct CUevent_st *next;
    int device;                 /* the device current when it was made                   */
};

/* watch: in a race that waits for the kernels to show whether they write (see suspects);
   wrote: the kernel changed the allocation's bytes (known once it ran); vol: a kernel's
   pointer to volatile (see host_access_legal) */
typedef struct { const char *lo, *hi; int write; rt_block *b; int watch, wrote, vol; } rt_acc;

struct rt_op {
    int kind;
    const char *api, *file;
    int line;
    struct CUstream_st *stream;
    int done;
    unsigned long long serial;
    unsigned mark, mark2;
    rt_op **deps;
    int ndeps, capdeps;
    rt_op *prev;                /* the operation before it in its stream                 */
    rt_op *next_in_stream, *next_all;
    rt_acc acc[MAX_ACC];
    int nacc;
    /* payloads */
    cuemu_launch_desc desc;
    void *dst; const void *src; void *staged;
    size_t dpitch, spitch, width, height;
    int value, dst_dev, src_dev;
    cudaEvent_t event;
    cudaHostFn_t fn;
    cudaStreamCallback_t cb;
    void *user;
    void *ptr;
    void (*devfn)(void *), (*release)(void *);   /* RT_OP_DEVFN */
};

static struct CUstream_st *streams;     /* created streams, destroyed ones with work too */
static struct CUevent_st *events;
/* Each device has its own legacy default stream and per-thread stream (ids 0 and -1 on every
   device); 0, cudaStreamLegacy and cudaStreamPerThread name those of the current device. */
static struct CUstream_st legacy_streams[RT_MAX_DEVICES], perthread_streams[RT_MAX_DEVICES];
static int implicit_ready;
static rt_op *running_kernel;       /* the kernel op_run is running, for the peer check */

static void implicit_init(void)
{
    if (implicit_ready) return;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        legacy_streams[d].magic = perthread_streams[d].magic = STREAM_MAGIC;
        legacy_streams[d].id = 0;
        perthread_streams[d].id = -1;
        legacy_streams[d].device = perthread_streams[d].device = d;
    }
    implicit_ready = 1;
}
static long long stream_ids;
static rt_op *all_head, *all_tail;
static long npending;
static unsigned long long op_serial;
static unsigned epoch, epoch2;
static __thread const char *site_file;
static __thread int site_line;

/* ---- the stream log (cuemuStreamLog) ----------------------------------------------------- */
static long long log_ids[LOG_CAP];
static int log_kinds[LOG_CAP], log_details[LOG_CAP];
static signed char log_devs[LOG_CAP];
static int log_n;

int cuemuStreamLog(long long *stream_ids, int *kinds, int max)
{
    rt_lock();
    int n = log_n;
    for (int i = 0; i < n && i < max && i < LOG_CAP; i++) {
        if (stream_ids) stream_ids[i] = log_ids[i];
        if (kinds) kinds[i] = log_kinds[i];
    }
    rt_unlock();
    return n;
}

int cuemuStreamLogDetail(int *details, int max)
{
    rt_lock();
    int n = log_n;
    for (int i = 0; i < n && i < max && i < LOG_CAP; i++)
        if (details) details[i] = log_details[i];
    rt_unlock();
    return n;
}

static struct CUstream_st *resolve(cudaStream_t s);
void rt_stream_log_note(cudaStream_t stream, int kind, int detail)
{
    rt_lock();
    if (log_n < LOG_CAP) {
        log_ids[log_n] = resolve(stream)->id;
        log_devs[log_n] = (signed char)resolve(stream)->device;
        log_kinds[log_n] = kind;
        log_details[log_n] = detail;
    }
    log_n++;
    rt_unlock();
}

int cuemuStreamLogDevice(int *devices, int max)
{
    rt_lock();
    int n = log_n;
    for (int i = 0; i < n && i < max && i < LOG_CAP; i++)
        if (devices) devices[i] = log_devs[i];
    rt_unlock();
    return n;
}

void cuemuStreamLogClear(void)
{
    rt_lock();
    log_n = 0;
    rt_unlock();
}

void cuemu_site(const char *file, int line)
{
    site_file = file;
    site_line = line;
}

void rt_site_take(const char **file, int *line)
{
    *file = site_file;
    *line = site_line;
    site_file = NULL;
    site_line = 0;
}

/* ---- policy --------------------------------------------------------------------------------- */
enum { ORD_RR = 0, ORD_FIFO, ORD_REVERSE, ORD_RANDOM };
static int order_mode = -1;
static unsigned long long order_seed;
static long long rr_last = -2;
static int race_mode = -1;          /* 0 off, 1 warn, 2 error */

static void policy_parse(void)
{
    if (order_mode >= 0) return;
    const char *e = getenv("CUEMU_STREAM_ORDER");
    order_mode = ORD_RR;
    if (e && *e) {
        if (!strcmp(e, "rr")) order_mode = ORD_RR;
        else if (!strcmp(e, "fifo")) order_mode = ORD_FIFO;
        else if (!strcmp(e, "reverse")) order_mode = ORD_REVERSE;
        else if (!strncmp(e, "random", 6)) {
            order_mode = ORD_RANDOM;
            order_seed = e[6] == ':' ? strtoull(e + 7, NULL, 10) : 1;
        } else
            cuemu_diag("CUEMU_STREAM_ORDER=\"%s\" is not rr, fifo, reverse or random[:seed]; using rr", e);
    }
    const char *r = getenv("CUEMU_STREAM_RACES");
    race_mode = 2;
    if (r && *r) {
        if (!strcmp(r, "off")) race_mode = 0;
        else if (!strcmp(r, "warn")) race_mode = 1;
        else if (strcmp(r, "error"))
            cuemu_diag("CUEMU_STREAM_RACES=\"%s\" is not error, warn or off; using error", r);
    }
}

static unsigned long long rnd(void)
{
    order_seed ^= order_seed << 13;
    order_seed ^= order_seed >> 7;
    order_seed ^= order_seed << 17;
    return order_seed;
}

/* ---- legal host accesses to memory queued work uses (host_fault asks) ------------------- */
/* Nonzero when CUDA allows the host access that faulted on b: it then goes on, the queued work
   running after it (or, for a read of what a kernel writes, before it: host_fault), as it may
   on a GPU.
   - A locked read-modify-write is a host atomic: legal on managed memory while kernels run
     (concurrentManagedAccess = 1) and on pinned memory (system-scope atomics).
   - Memory that every queued operation touching it reaches through a kernel's pointer to
     volatile: the kernel says that another party changes or watches it while it runs (a flag
     the host sets and the kernel spins on, a "done" the kernel sets and the host polls).
   Every other access is a race, as CUDA's memory model says: a host write into memory that a
   queued copy reads (the classic reuse of a pinned buffer before its copy ran) or a kernel
   reads through a plain pointer (it may run before or after the write, and need not see it),
   a host read of what queued work will write.
   Returns 1 for a host atomic (the block then stays open to the host until the work ran, as
   a CAS loop's plain read of the old value needs), 2 for memory the kernels' volatile
   pointers reach, 0 for a race. */
static int host_access_legal(const rt_block *b, const void *pc)
{
    if (pc && cuemu_insn_atomic(pc)) return 1;
    int any = 0;
    for (const rt_op *o = all_head; o; o = o->next_all)
        for (int i = 0; i < o->nacc && !o->done; i++)
            if (o->acc[i].b == b) {
                if (o->kind != RT_OP_KERNEL || !o->acc[i].vol) return 0;
                any = 1;
            }
    return any ? 2 : 0;
}

/* ---- races that only a kernel's writes make: decided once the kernels ran ------------------
   A kernel "may write" through every pointer to non-const; most such pointers are only read
   (a factor, a table), and two kernels reading one buffer on two streams are no race. When
   every write in a conflict is such a maybe, on device memory small enough to compare, the
   conflict waits: each kernel's bytes are compared before and after it runs (op_run), and the
   race is reported (the next synchronisation returning cudaErrorIllegalState) only if a kernel
   did write them. Larger buffers keep the report at the launch. */
#define SUSPECT_MAX_BYTES ((size_t)1 << 20)
typedef struct suspect { rt_op *a, *b; int ia, ib; struct suspect *next; } suspect;
static suspect *suspects;
static int async_err;   /* defined with cuemu_take_async_error below */
static int ordered_before(rt_op *a, rt_op *b);
static const char *op_what(const rt_op *op, char *buf, size_t n);
static const char *stream_name(const struct CUstream_st *s, char *buf, size_t n);
static const char *acc_desc(const rt_op *op, int i, char *buf, size_t n);
static void race_hint(const rt_op *o, const rt_op *op, char *buf, size_t n);

/* race_check's question for the conflict of o's access xi with op's access i: 1 if it is
   none of race_check's business now (ordered, or waiting for the kernels to run). */
static int race_defer(rt_op *o, int xi, rt_op *op, int i)
{
    const rt_acc *x = &o->acc[xi], *a = &op->acc[i];
    if (a->b->kind != CUEMU_MEM_DEVICE || a->b->size > SUSPECT_MAX_BYTES ||
        (x->write && o->kind != RT_OP_KERNEL) || (a->write && op->kind != RT_OP_KERNEL))
        return 0;
    if (ordered_before(o, op)) return 1;
    suspect *s = (suspect *)malloc(sizeof *s);
    if (!s) return 0;
    s->a = o; s->ia = xi; s->b = op; s->ib = i;
    s->next = suspects;
    suspects = s;
    o->acc[xi].watch = op->acc[i].watch = 1;
    return 1;
}

/* After each operation ran: the suspects whose two operations both ran are decided. */
static void suspects_settle(void)
{
    for (suspect **pp = &suspects; *pp;) {
        suspect *x = *pp;
        if (!x->a->done || !x->b->done) { pp = &x->next; continue; }
        const rt_acc *p = &x->a->acc[x->ia], *q = &x->b->acc[x->ib];
        if ((p->write && p->wrote) || (q->write && q->wrote)) {
            const rt_block *b = q->b;
            char w1[400], w2[400], d1[100], d2[100], s1[64], s2[64], hint[600];
            race_hint(x->a, x->b, hint, sizeof hint);
            cuemu_diag("stream race on device memory allocated at %s:%d (%zu bytes): %s on %s %s, "
                       "and %s on %s %s, with nothing ordering them (an event recorded after the "
                       "first and waited for with cudaStreamWaitEvent before the second, or a "
                       "synchronisation, would)%s", b->file ? b->file : "(unknown file)", b->line,
                       b->size, op_what(x->a, w1, sizeof w1), stream_name(x->a->stream, s1, sizeof s1),
                       acc_desc(x->a, x->ia, d1, sizeof d1), op_what(x->b, w2, sizeof w2),
                       stream_name(x->b->stream, s2, sizeof s2), acc_desc(x->b, x->ib, d2, sizeof d2),
                       hint);
            if (race_mode == 2 && !async_err) async_err = cudaErrorIllegalState;
        }
        *pp = x->next;
        free(x);
    }
}

static void suspects_reset(void)
{
    while (suspects) {
        suspect *x = suspects;
        suspects = x->next;
        free(x);
    }
}

/* ---- streams ---------------------------------------------------------------------------- */
static int stream_listed(cudaStream_t s)
{
    for (struct CUstream_st *p = streams; p; p = p->next)
        if (p == s && !p->destroyed) return 1;
    return 0;
}

int rt_stream_valid(cudaStream_t s)
{
    if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) return 1;
    rt_lock();
    int ok = stream_listed(s);
    rt_unlock();
    return ok;
}

static struct CUstream_st *resolve(cudaStream_t s)
{
    implicit_init();
    if (s == 0 || s == cudaStreamLegacy) return &legacy_streams[rt_cur_dev()];
    if (s == cudaStreamPerThread) return &perthread_streams[rt_cur_dev()];
    return s;
}

static int is_legacy(const struct CUstream_st *s)
{
    return s >= legacy_streams && s < legacy_streams + RT_MAX_DEVICES;
}
static int is_perthread(const struct CUstream_st *s)
{
    return s >= perthread_streams && s < perthread_streams + RT_MAX_DEVICES;
}

int rt_stream_device(cudaStream_t s)
{
    rt_lock();
    int d = resolve(s)->device;
    rt_unlock();
    return d;
}
static int is_blocking(const struct CUstream_st *s)
{
    return !is_legacy(s) && !(s->flags & cudaStreamNonBlocking);
}

/* Every stream that may hold work: the two implicit ones and the created ones. */
static int all_streams(struct CUstream_st **out, int max)
{
    int n = 0;
    implicit_init();
    for (int d = 0; d < rt_ndev(); d++) {
        out[n++] = &legacy_streams[d];
        out[n++] = &perthread_streams[d];
    }
    for (struct CUstream_st *p = streams; p && n < max; p = p->next) out[n++] = p;
    return n;
}

static const char *stream_name(const struct CUstream_st *s, char *buf, size_t n)
{
    if (rt_ndev() > 1) {
        if (is_legacy(s)) snprintf(buf, n, "the default stream 0 of device %d", s->device);
        else if (is_perthread(s)) snprintf(buf, n, "cudaStreamPerThread of device %d", s->device);
        else snprintf(buf, n, "stream %lld (device %d)", s->id, s->device);
        return buf;
    }
    if (is_legacy(s)) return "the default stream 0";
    if (is_perthread(s)) return "cudaStreamPerThread";
    snprintf(buf, n, "stream %lld", s->id);
    return buf;
}

/* ---- operations ------------------------------------------------------------------------------ */
rt_op *rt_op_new(int kind, const char *api)
{
    rt_op *op = (rt_op *)calloc(1, sizeof *op);
    if (!op) return NULL;
    op->kind = kind;
    op->api = api;
    op->file = site_file;
    op->line = site_line;
    site_file = NULL;
    site_line = 0;
    return op;
}

void rt_op_copy(rt_op *op, void *dst, size_t dpitch, const void *src, size_t spitch,
                size_t width, size_t height, int value, int dst_dev, int src_dev)
{
    op->dst = dst; op->dpitch = dpitch; op->src = src; op->spitch = spitch;
    op->width = width; op->height = height; op->value = value;
    op->dst_dev = dst_dev; op->src_dev = src_dev;
}

int rt_op_stage(rt_op *op)
{
    size_t span = op->width * op->height;
    op->staged = malloc(span ? span : 1);
    if (!op->staged) return -1;
    for (size_t r = 0; r < op->height; r++)
        memcpy((char *)op->staged + r * op->width, (const char *)op->src + r * op->spitch, op->width);
    op->spitch = op->width;
    return 0;
}

void rt_op_free_ptr(rt_op *op, void *p) { op->ptr = p; }

void rt_op_site(const rt_op *op, const char **file, int *line)
{
    *file = op->file;
    *line = op->line;
}

void rt_op_access(rt_op *op, const void *p, size_t len, int write)
{
    if (!p || op->nacc >= MAX_ACC) return;
    rt_block *b = rt_registry_find(p);
    if (!b) return;
    rt_acc *a = &op->acc[op->nacc++];
    a->lo = (const char *)p;
    a->hi = (const char *)p + (len ? len : 1);
    a->write = write;
    a->b = b;
    a->watch = a->wrote = a->vol = 0;
}

static void add_dep(rt_op *op, rt_op *d)
{
    if (!d || d->done) return;
    for (int i = 0; i < op->ndeps; i++) if (op->deps[i] == d) return;
    if (op->ndeps == op->capdeps) {
        int cap = op->capdeps ? op->capdeps * 2 : 4;
        rt_op **n = (rt_op **)realloc(op->deps, cap * sizeof *n);
        if (!n) return;
        op->deps = n;
        op->capdeps = cap;
    }
    op->deps[op->ndeps++] = d;
}

static void op_release(rt_op *op)
{
    if (op->kind == RT_OP_KERNEL && op->desc.ctx_free && op->desc.ctx) op->desc.ctx_free(op->desc.ctx);
    op->desc.ctx = NULL;
    if (op->kind == RT_OP_DEVFN && op->release) op->release(op->user);
    free(op->staged);
    op->staged = NULL;
    free(op->deps);
    free(op);
}

void rt_op_discard(rt_op *op) { op_release(op); }

static const char *op_what(const rt_op *op, char *buf, size_t n)
{
    const char *f = op->file ? op->file : "(unknown file)";
    if (op->kind == RT_OP_KERNEL)
        snprintf(buf, n, "kernel %s launched at %s:%d", op->desc.kernel, op->desc.file, op->desc.line);
    else if (op->file)
        snprintf(buf, n, "%s at %s:%d", op->api, f, op->line);
    else
        snprintf(buf, n, "%s", op->api);
    return buf;
}

/* ---- page protection of pinned and managed memory with queued work ----------------------- */
#define MAX_PROT 256
static rt_block *prot_list[MAX_PROT];
static int nprot;
static struct sigaction old_segv;
static int segv_installed;

static int protectable(const rt_block *b)
{
    return b->data && (b->kind == CUEMU_MEM_HOST_PINNED || b->kind == CUEMU_MEM_MANAGED);
}

static int want_prot(const rt_block *b)
{
    if (!protectable(b) || b->host_race_reported) return 0;
    return b->pend_w ? 2 : b->pend_r ? 1 : 0;
}

static void apply_prot(rt_block *b, int state)
{
    if (b->prot == state) return;
    mprotect(b->data, b->data_len, state == 2 ? PROT_NONE : state == 1 ? PROT_READ
                                                           : PROT_READ | PROT_WRITE);
    if (!b->prot && state) {
        if (nprot < MAX_PROT) prot_list[nprot++] = b;
        else { mprotect(b->data, b->data_len, PROT_READ | PROT_WRITE); return; }
    }
    if (b->prot && !state)
        for (int i = 0; i < nprot; i++)
            if (prot_list[i] == b) { prot_list[i] = prot_list[--nprot]; break; }
    b->prot = state;
}

/* ---- where the host made a faulting access: the program's own line ----------------------
   The faulting instruction is often not the program's: a memcpy in the C library, or the
   C library's code inlined into it (with _FORTIFY_SOURCE, which Ubuntu's compilers turn on at
   -O2, a memcpy call's line is that of the inline wrapper in string_fortified.h). So each frame,
   from the fault outwards, is tried in turn, and of each its chain of inlined calls, until one
   is a line of the program's: not in a system library, a system header or the emulator. */

/* 1 for code in a library of the system (its lines, where it has any, are not the program's). */
static int system_object(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char *const dirs[] = { "/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/",
                                        "/usr/libexec/", "/bin/", "/usr/bin/" };
    static const char *const libs[] = { "libc.so", "ld-linux", "libstdc++", "libgcc_s",
                                        "libm.so", "libpthread", "libdl.so", "linux-vdso" };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        if (!strncmp(path, dirs[i], strlen(dirs[i]))) return 1;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strncmp(base, libs[i], strlen(libs[i]))) return 1;
    return !*path || path[0] == '[';
}

/* The program's line of the code at a (ret: a return address, so the call before it), the
   innermost of its inlined calls that is the program's; 0 when there is none. */
static int program_line(const void *a, int ret, char *out, size_t n)
{
    Dl_info di;
    if (!a || !dladdr(a, &di) || !di.dli_fname || system_object(di.dli_fname)) return 0;
    uintptr_t off = (uintptr_t)a - (ret ? 1 : 0);
    if (di.dli_fbase != (void *)0x400000) off -= (uintptr_t)di.dli_fbase;   /* not a non-PIE exe */
    char cmd[1400], line[512];
    snprintf(cmd, sizeof cmd, "addr2line -i -e '%s' 0x%lx 2>/dev/null", di.dli_fname,
             (unsigned long)off);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = 0;
        char *disc = strstr(line, " (discriminator");
        if (disc) *disc = 0;
        const char *colon = strrchr(line, ':');
        if (!colon || line[0] == '?' || !strcmp(colon, ":?") || !strcmp(colon, ":0")
            || strstr(line, "/usr/include/") || strstr(line, "/c++/") || strstr(line, "cuemu_")
            || strstr(line, "emu/include/") || strstr(line, "emu/core/") || strstr(line, "emu/runtime/"))
            continue;
        /* relative to the working directory, like the call sites the compiler recorded */
        char cwd[1024];
        const char *shown = line;
        if (getcwd(cwd, sizeof cwd)) {
            size_t cl = strlen(cwd);
            if (!strncmp(line, cwd, cl) && line[cl] == '/') shown = line + cl + 1;
        }
        snprintf(out, n, "%s", shown);
        found = 1;
    }
    while (fgets(line, sizeof line, p)) {
    }
    pclose(p);
    return found;
}

/* 1 if the bytes before a look like the end of a call instruction (a is a return address). */
static int after_call(const unsigned char *a)
{
#if defined(__x86_64__)
    return a[-5] == 0xE8 || (a[-6] == 0xFF && (a[-5] & 0x38) == 0x10) ||
           (a[-2] == 0xFF && (a[-1] & 0xF8) == 0xD0) || (a[-3] == 0xFF && (a[-2] & 0x38) == 0x10);
#elif defined(__aarch64__)
    uint32_t i;                                   /* BL, or BLR (and its BLRAA... forms) */
    memcpy(&i, a - 4, 4);
    return (i & 0xfc000000) == 0x94000000 || (i & 0xfefff800) == 0xd63f0800 ||
           (i & 0xfffffc1f) == 0xd63f0000;
#else
    (void)a;
    return 1;
#endif
}

/* The C library's function at pc, as the program calls it: the exported functions whose
   implementation (what dlsym answers for an IFUNC: the variant this processor uses) starts
   nearest below pc. The implementations have no exported names of their own. */
static const char *libc_function(const void *pc)
{
    static const char *const names[] = { "memcpy", "memmove", "memset", "memcmp", "strlen",
                                         "strcpy", "strncpy", "strcmp", "strncmp", "strchr",
                                         "memchr", "wmemcpy", "wmemset", "mempcpy", "bcmp",
                                         "__memcpy_chk", "__memmove_chk", "__memset_chk",
                                         "fread", "fwrite", "read", "write", "qsort" };
    const char *best = NULL;
    uintptr_t best_at = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        uintptr_t f = (uintptr_t)dlsym(RTLD_DEFAULT, names[i]);
        if (f && f <= (uintptr_t)pc && (uintptr_t)pc - f < 0x4000 && f > best_at) {
            best = names[i];
            best_at = f;
        }
    }
    return best;
}

/* "file:line" of a host access at pc (sp: the stack pointer then), or "in memcpy called from
   file:line" when pc is the C library's or the emulator's. The callers come from the
   backtrace (the unwinder steps through the signal frame with the C library's unwind
   tables); when it cannot step past the signal frame, from the words at the top of the
   interrupted stack that are return addresses into the program (a routine without a frame
   keeps its return address there). */
static void host_site(const void *pc, const void *sp, char *where, size_t n)
{
    Dl_info di;
    char line[600];
    where[0] = 0;
    if (!pc) { snprintf(where, n, "an unknown location"); return; }
    if (program_line(pc, 0, where, n)) return;
    int found = 0;
    void *fr[48];
    int nf = backtrace(fr, 48), start = -1;
    for (int i = 0; i < nf; i++)
        if (fr[i] == pc) { start = i; break; }
    /* without the signal frame's pc among them, the frames from it on are unknown: the
       handler's own ones are not the program's (program_line skips the emulator) */
    for (int i = start + 1; i < nf && !found; i++) found = program_line(fr[i], 1, line, sizeof line);
    if (!found && sp && start < 0) {
        /* only where the unwinder did not get through: a stale word further up could name
           code that is not running */
        const void *const *w = (const void *const *)sp;
        for (int i = 0; i < 16 && !found; i++) {
            Dl_info wi;
            const unsigned char *v = (const unsigned char *)w[i];
            if (v && dladdr(v, &wi) && wi.dli_fname && !system_object(wi.dli_fname) &&
                (uintptr_t)v >= (uintptr_t)wi.dli_fbase + 8 && after_call(v))
                found = program_line(v, 1, line, sizeof line);
        }
    }
    const char *fn = NULL;
    char fbuf[160];
    if (dladdr(pc, &di) && di.dli_fname) {
        const char *base = strrchr(di.dli_fname, '/');
        base = base ? base + 1 : di.dli_fname;
        if (!strncmp(base, "libc.so", 7)) fn = libc_function(pc);
        if (!fn && di.dli_sname && system_object(di.dli_fname)) fn = di.dli_sname;
        if (!fn) {
            snprintf(fbuf, sizeof fbuf, "%s (%s+%#lx)", base, di.dli_sname ? di.dli_sname : "?",
                     (unsigned long)((const char *)pc - (const char *)(di.dli_saddr ? di.dli_saddr : di.dli_fbase)));
            fn = fbuf;
        }
    }
    if (found)
        snprintf(where, n, "in %s called from %s", fn ? fn : "a library function", line);
    else if (fn)
        snprintf(where, n, "%p in %s", pc, fn);
    else
        snprintf(where, n, "%p", pc);
}

static void run_closure(rt_op **targets, int nt, long steps);

static int run_despite_sticky;

/* Runs the queued operations that will write b, and what they wait for; despite: also after
   a sticky error (a host loop polling them, already reported, can end only so). */
static void run_writers(const rt_block *b, int despite)
{
    rt_op *t[64];
    int nt = 0;
    rt_lock();
    for (rt_op *o = all_head; o && nt < 64; o = o->next_all)
        for (int i = 0; i < o->nacc && !o->done; i++)
            if (o->acc[i].b == b && o->acc[i].write) {
                t[nt++] = o;
                break;
            }
    run_despite_sticky = despite;
    run_closure(t, nt, -1);
    run_despite_sticky = 0;
    rt_unlock();
}

/* One instruction after a legal host write (a step, cuemu_step_arm, set by host_fault): its
   block is protected again. */
static __thread rt_block *step_block;
static __thread int step_state;     /* what it is protected as again; 0: as its work wants */
static struct sigaction old_trap;
static int trap_installed;

static void step_trap(int sig, siginfo_t *si, void *ucv)
{
    if (step_block && cuemu_step_done(ucv)) {
        rt_block *b = step_block;
        int st = step_state ? step_state : want_prot(b);
        step_block = NULL;
        step_state = 0;
        if (st) apply_prot(b, st);
        return;
    }
    /* not ours (a debugger's breakpoint, the program's own handler) */
    if (old_trap.sa_flags & SA_SIGINFO) old_trap.sa_sigaction(sig, si, ucv);
    else if (old_trap.sa_handler != SIG_IGN && old_trap.sa_handler != SIG_DFL) old_trap.sa_handler(sig);
    else { signal(sig, SIG_DFL); raise(sig); }
}

static int step_install(void)
{
    if (trap_installed) return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = step_trap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    trap_installed = sigaction(SIGTRAP, &sa, &old_trap) == 0;
    return trap_installed;
}

/* After a host read of what queued work will write was reported: the same instruction
   reading the same address again and again is a loop polling it (a flag), which calls no CUDA
   function that would run that work. It would spin forever: after POLL_TURNS turns it is
   named, and the work runs, so that the loop ends (the program has its error already). */
#define POLL_TURNS 1000
static __thread struct { rt_block *b; const void *pc; const char *a; int turns; } poll_w;

static void host_fault(int sig, siginfo_t *si, void *ucv)
{
    const char *a = (const char *)si->si_addr;
    int write = -1;
    const void *pc = cuemu_sig_pc(ucv), *sp = cuemu_sig_sp(ucv);
    write = cuemu_sig_write(ucv);
    char where[900], what[512], sn[64];
    rt_block *db = NULL;
    int dev = rt_dev_fault(a, &db);
    if (dev == 1) return;      /* device work touched a closed block: open now, retried */
    if (dev == 2) {
        host_site(pc, sp, where, sizeof where);
        cuemu_diag("host %s of device memory: address %p is byte %lld of the %zu-byte allocation "
                   "made at %s:%d; host code cannot dereference a device pointer (on a GPU this is "
                   "a segmentation fault): device memory is reached through cudaMemcpy or a "
                   "kernel. The host access: %s",
                   write < 0 ? "access" : write ? "write" : "read", (const void *)a,
                   (long long)(a - db->base), db->size, db->file ? db->file : "(unknown file)",
                   db->line, where);
        cuemu_set_sticky_error(cudaErrorIllegalAddress);
        return;
    }
    rt_block *b = NULL;
    for (int i = 0; i < nprot; i++)
        if (a >= prot_list[i]->data && a < prot_list[i]->data + prot_list[i]->data_len) {
            b = prot_list[i];
            break;
        }
    if (!b) {
        /* not ours: let the previous handler (or the default action) have it */
        sigaction(sig, &old_segv, NULL);
        segv_installed = 0;
        return;
    }
    if (b == poll_w.b) {
        if (write == 0 && pc == poll_w.pc && a == poll_w.a && ++poll_w.turns < POLL_TURNS &&
            step_install() && cuemu_step_arm(ucv)) {
            apply_prot(b, 0);
            step_block = b;
            step_state = 2;
            return;
        }
        poll_w.b = NULL;
        if (write == 0 && pc == poll_w.pc && a == poll_w.a) {
            host_site(pc, sp, where, sizeof where);
            cuemu_diag("the host polls address %p (byte %lld of the %s memory allocated at "
                       "%s:%d) in a loop that calls no CUDA function, waiting for "
                       "queued work to write it; nothing runs queued work here but a CUDA call "
                       "(a GPU would run it meanwhile, but the access is a race all the same: a "
                       "kernel that signals the host should write through a pointer to volatile), "
                       "so it runs now, and the loop can end. The loop: %s", (const void *)a,
                       (long long)(a - b->base),
                       b->kind == CUEMU_MEM_MANAGED ? "managed" : "pinned host", b->file ? b->file : "(unknown file)", b->line,
                       where);
            run_writers(b, 1);
        }
        apply_prot(b, 0);   /* another access: it was no poll */
        return;
    }
    int legal = host_access_legal(b, pc);
    if (legal) {
        /* a host polling what a kernel writes through its pointer to volatile (the kernel's
           "done"): the kernel runs now, as a GPU runs it while the host waits, so the host's
           loop sees it (nothing else would run it: the loop calls no CUDA function) */
        if (write == 0 && b->pend_w) run_writers(b, 0);
        apply_prot(b, 0);
        /* a write ("go") to memory a kernel will also write ("done", beside it): protected
           again after this one instruction, so the host's next read of it still runs the
           kernel */
        if (legal == 2 && write == 1 && b->pend_w && step_install() && cuemu_step_arm(ucv))
            step_block = b;
        return;
    }
    host_site(pc, sp, where, sizeof where);
    rt_op *op = b->pend_op;
    cuemu_diag("host %s of %s memory allocated at %s:%d (%zu bytes; address %p, byte %lld) while "
               "queued work will still %s it: %s, on %s, has not run yet. Synchronise (cudaStreamSynchronize, "
               "cudaEventSynchronize or cudaDeviceSynchronize) before the host touches it. The host access: %s",
               write > 0 ? "write" : "read", b->kind == CUEMU_MEM_MANAGED ? "managed" : "pinned host",
               b->file ? b->file : "(unknown file)", b->line, b->size, (const void *)a,
               (long long)(a - b->base), b->pend_w ? "write" : "read",
               op ? op_what(op, what, sizeof what) : "an operation",
               op ? stream_name(op->stream, sn, sizeof sn) : "a stream", where);
    cuemu_set_sticky_error(cudaErrorIllegalState);
    /* the access goes on, and sees what a GPU would not have written yet */
    b->host_race_reported = 1;
    apply_prot(b, 0);
    /* a read: protected again after it, to see whether it is a loop that polls (poll_w) */
    if (write == 0 && b->pend_w && step_install() && cuemu_step_arm(ucv)) {
        poll_w.b = b;
        poll_w.pc = pc;
        poll_w.a = a;
        poll_w.turns = 0;
        step_block = b;
        step_state = 2;
    }
}

void rt_segv_install(void)
{
    /* Another handler installed after ours (Python's faulthandler, a test framework) would see
       every first touch of device memory by device work first: put ours back in front of it,
       and hand it what is not ours. */
    struct sigaction cur;
    if (segv_installed && sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == host_fault)
        return;
    segv_installed = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = host_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) == 0) segv_installed = 1;
}

static void acc_count(rt_op *op, int delta)
{
    for (int i = 0; i < op->nacc; i++) {
        rt_block *b = op->acc[i].b;
        if (!protectable(b)) continue;
        if (op->acc[i].write) b->pend_w += delta; else b->pend_r += delta;
        if (delta > 0) b->pend_op = op;
        else if (b->pend_op == op) b->pend_op = NULL;
    }
}

static void protect_op(rt_op *op)
{
    for (int i = 0; i < op->nacc; i++) {
        rt_block *b = op->acc[i].b;
        if (protectable(b) && want_prot(b)) {
            rt_segv_install();
            apply_prot(b, want_prot(b));
        }
    }
}

static void unprotect_all(void)
{
    poll_w.b = NULL;
    while (nprot) apply_prot(prot_list[nprot - 1], 0);
}

static void reprotect_pending(void)
{
    for (rt_op *op = all_head; op; op = op->next_all)
        if (!op->done) protect_op(op);
}

int rt_block_protected(const rt_block *b) { return b->prot != 0; }

/* ---- ordering and the race check ------------------------------------------------------------ */
/* 1 if a must run before b: a is reachable from b through pending dependencies. */
static int ordered_before(rt_op *a, rt_op *b)
{
    if (a->done) return 1;
    epoch2++;
    size_t cap = 64, n = 0;
    rt_op **st = (rt_op **)malloc(cap * sizeof *st);
    if (!st) return 1;
    st[n++] = b;
    int found = 0;
    while (n && !found) {
        rt_op *o = st[--n];
        for (int i = -1; i < o->ndeps; i++) {
            rt_op *d = i < 0 ? o->prev : o->deps[i];
            if (!d || d->done || d->mark2 == epoch2) continue;
            if (d == a) { found = 1; break; }
            d->mark2 = epoch2;
            if (n == cap) {
                rt_op **m = (rt_op **)realloc(st, (cap *= 2) * sizeof *st);
                if (!m) { found = 1; break; }
                st = m;
            }
            st[n++] = d;
        }
    }
    free(st);
    return found;
}

static const char *acc_desc(const rt_op *op, int i, char *buf, size_t n)
{
    const rt_acc *a = &op->acc[i];
    if (op->kind == RT_OP_KERNEL)
        snprintf(buf, n, "%s (argument at byte %lld)",
                 !a->write ? "reads it" : !(op->done && a->watch) ? "may write it"
                 : a->wrote ? "writes it" : "reads it",
                 (long long)(a->lo - a->b->base));
    else
        snprintf(buf, n, "%s bytes %lld..%lld", a->write ? "writes" : "reads",
                 (long long)(a->lo - a->b->base), (long long)(a->hi - a->b->base) - 1);
    return buf;
}

/* A block's pending accesses are kept sorted by their first byte, with the longest one's
   length, so a new access is compared only with those that can overlap it. */
static size_t acc_lower(const rt_block *b, const char *p)
{
    size_t lo = 0, hi = (size_t)b->nacc_list;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct rt_acc_ref *r = &b->acc_list[mid];
        if (r->op->acc[r->idx].lo < p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* What would have ordered them: the first event recorded after o on its stream (the call a
   program makes to hand memory to another stream, as a pool's free does), which op's stream
   should have waited for. Naming its record sends the reader to the code that hands the memory
   over, where the wait belongs, instead of to the two accesses alone. */
static void race_hint(const rt_op *o, const rt_op *op, char *buf, size_t n)
{
    char b1[64], b2[64];
    const rt_op *e = NULL;
    for (const rt_op *x = o->next_in_stream; x && x != op; x = x->next_in_stream)
        if (x->kind == RT_OP_EVENT && x->event) { e = x; break; }
    const char *s1 = stream_name(o->stream, b1, sizeof b1);
    const char *s2 = stream_name(op->stream, b2, sizeof b2);
    if (e && e->file)
        snprintf(buf, n, "; %s recorded an event after the first, at the cudaEventRecord at %s:%d, "
                 "and %s did not wait for it (cudaStreamWaitEvent) before the second", s1, e->file,
                 e->line, s2);
    else if (e)
        snprintf(buf, n, "; %s recorded an event after the first, and %s did not wait for it "
                 "(cudaStreamWaitEvent) before the second", s1, s2);
    else
        snprintf(buf, n, "; %s recorded no event after the first for %s to wait for", s1, s2);
}

static int race_check(rt_op *op)
{
    int raced = 0;
    for (int i = 0; i < op->nacc; i++) {
        rt_acc *a = &op->acc[i];
        rt_block *b = a->b;
        size_t maxlen = b->acc_maxlen;
        const char *from = (size_t)(a->lo - b->base) > maxlen ? a->lo - maxlen : b->base - 1;
        for (size_t k = acc_lower(b, from); k < (size_t)b->nacc_list && !raced; k++) {
            rt_op *o = b->acc_list[k].op;
            rt_acc *x = &o->acc[b->acc_list[k].idx];
            if (x->lo >= a->hi) break;
            if (o->done || o->stream == op->stream || !(x->write || a->write)) continue;
            if (x->hi <= a->lo) continue;
            if (race_defer(o, b->acc_list[k].idx, op, i)) continue;
            if (ordered_before(o, op)) continue;
            char w1[400], w2[400], d1[100], d2[100], s1[64], s2[64], hint[600];
            race_hint(o, op, hint, sizeof hint);
            cuemu_diag("stream race on %s allocated at %s:%d (%zu bytes): %s on %s %s, and %s on %s %s, "
                       "with nothing ordering them (an event recorded after the first and waited for "
                       "with cudaStreamWaitEvent before the second, or a synchronisation, would)%s",
                       b->kind == CUEMU_MEM_DEVICE ? "device memory" : b->kind == CUEMU_MEM_MANAGED
                       ? "managed memory" : "pinned host memory",
                       b->file ? b->file : "(unknown file)", b->line, b->size,
                       op_what(o, w1, sizeof w1), stream_name(o->stream, s1, sizeof s1),
                       acc_desc(o, b->acc_list[k].idx, d1, sizeof d1),
                       op_what(op, w2, sizeof w2), stream_name(op->stream, s2, sizeof s2),
                       acc_desc(op, i, d2, sizeof d2), hint);
            raced = 1;
        }
        if (b->nacc_list == b->cap_acc_list) {
            int cap = b->cap_acc_list ? b->cap_acc_list * 2 : 8;
            struct rt_acc_ref *n = (struct rt_acc_ref *)realloc(b->acc_list, cap * sizeof *n);
            if (!n) continue;
            b->acc_list = n;
            b->cap_acc_list = cap;
        }
        size_t at = acc_lower(b, a->lo);
        /* drop what the new access makes redundant: finished ones, and earlier ones of the same
           stream over no more bytes that race with whatever this one races with */
        for (size_t k = at; k < (size_t)b->nacc_list;) {
            rt_op *o = b->acc_list[k].op;
            rt_acc *x = &o->acc[b->acc_list[k].idx];
            if (x->lo != a->lo) break;
            if (o->done || (o->stream == op->stream && x->hi <= a->hi && (a->write || !x->write))) {
                memmove(b->acc_list + k, b->acc_list + k + 1, (b->nacc_list - k - 1) * sizeof *b->acc_list);
                b->nacc_list--;
            } else
                k++;
        }
        memmove(b->acc_list + at + 1, b->acc_list + at, (b->nacc_list - at) * sizeof *b->acc_list);
        b->acc_list[at].op = op;
        b->acc_list[at].idx = i;
        b->nacc_list++;
        if ((size_t)(a->hi - a->lo) > b->acc_maxlen) b->acc_maxlen = (size_t)(a->hi - a->lo);
    }
    return raced;
}

/* ---- running operations ------------------------------------------------------------------------ */
/* A queued launch that failed without a sticky fault (a shared-memory race): the next
   synchronising call returns its error, once. */
static int async_err;
int cuemu_take_async_error(void)
{
    rt_lock();
    int e = async_err;
    async_err = 0;
    rt_unlock();
    return e;
}

static int recheck(rt_op *op, const void *p, size_t span, const char *role)
{
    enum rt_loc l;
    if (rt_classify(p, span, op->api, role, &l) == cudaSuccess) return 0;
    char w[400];
    cuemu_diag("%s reached memory that was freed before it ran", op_what(op, w, sizeof w));
    cuemu_set_sticky_error(cudaErrorIllegalAddress);
    return 1;
}

static void op_run(rt_op *op)
{
    int sticky = run_despite_sticky ? 0 : cuemu_sticky_error();
    switch (op->kind) {
    case RT_OP_KERNEL:
        if (!sticky) {
            /* the watched allocations' bytes before, to see whether the kernel writes them */
            unsigned char *snap[MAX_ACC] = { 0 };
            for (int i = 0; i < op->nacc; i++)
                if (op->acc[i].watch && op->acc[i].write &&
                    rt_registry_find(op->acc[i].lo) == op->acc[i].b &&   /* not freed since */
                    (snap[i] = (unsigned char *)malloc(op->acc[i].b->size ? op->acc[i].b->size : 1)))
                    memcpy(snap[i], op->acc[i].b->base, op->acc[i].b->size);
            /* several devices: the kernel's first touch of each block is checked against
               its device's peer access (memory.c) */
            if (rt_ndev() > 1) rt_dev_reclose();
            running_kernel = op;
            int e = cuemu_launch_run(&op->desc);
            running_kernel = NULL;
            for (int i = 0; i < op->nacc; i++)
                if (snap[i]) {
                    op->acc[i].wrote = memcmp(snap[i], op->acc[i].b->base, op->acc[i].b->size) != 0;
                    free(snap[i]);
                }
            if (e && !cuemu_sticky_error() && !async_err) async_err = e;
            /* a write into an allocation's slack (its last bytes before the guard page) is
               blamed on this launch, not on some later synchronisation */
            char when[400];
            snprintf(when, sizeof when, "the end of kernel %s launched at %s:%d", op->desc.kernel,
                     op->desc.file, op->desc.line);
            for (int i = 0; i < op->nacc; i++) rt_block_check_slack(op->acc[i].b, when);
        }
        if (op->desc.ctx_free) op->desc.ctx_free(op->desc.ctx);
        op->desc.ctx = NULL;
        break;
    case RT_OP_COPY:
    case RT_OP_SET: {
        if (sticky) break;
        size_t dspan = op->dpitch * (op->height - 1) + op->width;
        size_t sspan = op->spitch * (op->height - 1) + op->width;
        if (op->dst_dev && recheck(op, op->dst, dspan, "destination")) break;
        if (op->kind == RT_OP_COPY && op->src_dev && !op->staged && recheck(op, op->src, sspan, "source")) break;
        const char *src = op->staged ? (const char *)op->staged : (const char *)op->src;
        for (size_t r = 0; r < op->height; r++) {
            if (op->kind == RT_OP_SET) memset((char *)op->dst + r * op->dpitch, op->value, op->width);
            else memmove((char *)op->dst + r * op->dpitch, src + r * op->spitch, op->width);
        }
        free(op->staged);
        op->staged = NULL;
        break;
    }
    case RT_OP_EVENT:
        if (op->event) {
            clock_gettime(CLOCK_MONOTONIC, &op->event->when);
            if (op->event->op == op) op->event->op = NULL;
        }
        break;
    case RT_OP_HOSTFN: {
        /* a host function is host code: device memory is out of its reach */
        int depth = rt_dev_suspend();
        if (op->fn && !sticky) op->fn(op->user);
        if (op->cb) op->cb(is_legacy(op->stream) ? (cudaStream_t)0 : op->stream,
                           (cudaError_t)sticky, op->user);
        rt_dev_resume(depth);
        break;
    }
    case RT_OP_FREE:
        rt_free_site(op->file, op->line);
        rt_free_device_now(op->ptr, "cudaFreeAsync");
        break;
    case RT_OP_DEVFN:
        if (!sticky && op->devfn) op->devfn(op->user);
        break;
    default:
        break;
    }
}

static void op_finish(rt_op *op)
{
    op->done = 1;
    struct CUstream_st *s = op->stream;
    s->head = op->next_in_stream;
    if (!s->head) s->tail = NULL;
    s->pending--;
    npending--;
    acc_count(op, -1);
    if (suspects) suspects_settle();
}

static int deps_done(const rt_op *op)
{
    for (int i = 0; i < op->ndeps; i++) if (!op->deps[i]->done) return 0;
    return !op->prev || op->prev->done;
}

static void gc(void)
{
    if (npending) return;
    for (rt_op *op = all_head; op;) {
        rt_op *n = op->next_all;
        op_release(op);
        op = n;
    }
    all_head = all_tail = NULL;
    for (struct CUevent_st *e = events; e; e = e->next) e->op = NULL;
    for (int d = 0; d < RT_MAX_DEVICES; d++) legacy_streams[d].last = perthread_streams[d].last = NULL;
    for (struct CUstream_st **l = &streams; *l;) {
        struct CUstream_st *s = *l;
        s->last = NULL;
        if (s->destroyed) { *l = s->next; s->magic = 0; free(s); }
        else l = &s->next;
    }
    rt_registry_clear_accesses();
}

static int running;

/* Runs the pending operations the targets depend on (and the targets); steps > 0: at most
   that many (a query's progress). */
static void run_closure(rt_op **targets, int nt, long steps)
{
    if (running) return;   /* a host function calling the runtime: CUDA forbids it */
    policy_parse();
    epoch++;
    /* mark the closure */
    size_t cap = 64, n = 0;
    rt_op **st = (rt_op **)malloc(cap * sizeof *st);
    if (!st) return;
    long want = 0;
    for (int t = 0; t < nt; t++)
        if (targets[t] && !targets[t]->done && targets[t]->mark != epoch) {
            targets[t]->mark = epoch;
            st[n++] = targets[t];
            want++;
            if (n == cap) { rt_op **m = (rt_op **)realloc(st, (cap *= 2) * sizeof *st); if (!m) break; st = m; }
        }
    while (n) {
        rt_op *o = st[--n];
        for (int i = -1; i < o->ndeps; i++) {
            rt_op *d = i < 0 ? o->prev : o->deps[i];
            if (!d || d->done || d->mark == epoch) continue;
            d->mark = epoch;
            want++;
            if (n == cap) {
                rt_op **m = (rt_op **)realloc(st, (cap *= 2) * sizeof *st);
                if (!m) { free(st); return; }
                st = m;
            }
            st[n++] = d;
        }
    }
    free(st);
    running = 1;
    unprotect_all();
    rt_dev_enter();
    struct CUstream_st *ss[1024];
    int ns = all_streams(ss, 1024);
    while (want > 0 && steps != 0) {
        int cand[1024], nc = 0;
        for (int i = 0; i < ns; i++) {
            rt_op *h = ss[i]->head;
            if (h && h->mark == epoch && deps_done(h)) cand[nc++] = i;
        }
        if (!nc) break;   /* cannot happen: dependencies point to earlier operations */
        int pick = cand[0];
        switch (order_mode) {
        case ORD_FIFO:
        case ORD_REVERSE:
            for (int k = 1; k < nc; k++) {
                unsigned long long a = ss[cand[k]]->head->serial, b = ss[pick]->head->serial;
                if (order_mode == ORD_FIFO ? a < b : a > b) pick = cand[k];
            }
            break;
        case ORD_RANDOM:
            pick = cand[rnd() % (unsigned long long)nc];
            break;
        default: {
            /* the first stream after the one that ran last (by id), wrapping around */
            int best = -1;
            for (int k = 0; k < nc; k++) {
                long long id = ss[cand[k]]->id;
                if (id > rr_last && (best < 0 || id < ss[best]->id)) best = cand[k];
            }
            if (best < 0)
                for (int k = 0; k < nc; k++)
                    if (best < 0 || ss[cand[k]]->id < ss[best]->id) best = cand[k];
            pick = best;
            break;
        }
        }
        rt_op *op = ss[pick]->head;
        rr_last = ss[pick]->id;
        op_run(op);
        op_finish(op);
        want--;
        if (steps > 0) steps--;
    }
    rt_dev_leave();
    running = 0;
    reprotect_pending();
    gc();
}

int rt_reclaim_frees(cudaStream_t stream, const struct rt_pool *pool, size_t size)
{
    rt_lock();
    rt_op *best = NULL;
    for (rt_op *op = resolve(stream)->head; op; op = op->next_in_stream)
        if (op->kind == RT_OP_FREE && op->nacc && op->acc[0].b->pool == pool &&
            op->acc[0].b->capacity >= size)
            best = op;
    if (best) run_closure(&best, 1, -1);
    rt_unlock();
    return best != NULL;
}

void rt_drain_stream(cudaStream_t stream)
{
    rt_lock();
    struct CUstream_st *s = resolve(stream);
    rt_op *t = s->last;
    run_closure(&t, 1, -1);
    rt_unlock();
}

void rt_drain_device(int dev)
{
    rt_lock();
    struct CUstream_st *ss[1024];
    rt_op *t[1024];
    int ns = all_streams(ss, 1024), nt = 0;
    for (int i = 0; i < ns; i++)
        if (ss[i]->device == dev) t[nt++] = ss[i]->last;
    run_closure(t, nt, -1);
    rt_unlock();
}

int rt_kernel_running(const char **kernel, const char **file, int *line)
{
    const rt_op *op = running_kernel;
    if (!op) return -1;
    *kernel = op->desc.kernel;
    *file = op->desc.file;
    *line = op->desc.line;
    return op->stream->device;
}

rt_op *rt_op_devfn(const char *api, void (*fn)(void *), void *arg, void (*release)(void *),
                   const char *file, int line)
{
    rt_op *op = rt_op_new(RT_OP_DEVFN, api);
    if (!op) return NULL;
    op->file = file;
    op->line = line;
    op->devfn = fn;
    op->user = arg;
    op->release = release;
    return op;
}

void rt_op_depend(rt_op *op, rt_op *dep) { add_dep(op, dep); }

rt_op *rt_stream_last(cudaStream_t s)
{
    rt_lock();
    rt_op *op = resolve(s)->last;
    if (op && op->done) op = NULL;
    rt_unlock();
    return op;
}

void rt_drain_all(void)
{
    rt_lock();
    struct CUstream_st *ss[1024];
    rt_op *t[1024];
    int ns = all_streams(ss, 1024);
    for (int i = 0; i < ns; i++) t[i] = ss[i]->last;
    run_closure(t, ns, -1);
    rt_unlock();
}

cudaError_t rt_submit(rt_op *op, cudaStream_t stream, int run_now)
{
    if (!op) return cudaErrorMemoryAllocation;
    rt_lock();
    policy_parse();
    struct CUstream_st *s = resolve(stream);
    op->stream = s;
    op->serial = ++op_serial;
    op->prev = s->last && !s->last->done ? s->last : NULL;
    /* the legacy stream's rule holds within one device */
    if (is_legacy(s)) {
        struct CUstream_st *ss[1024];
        int ns = all_streams(ss, 1024);
        for (int i = 0; i < ns; i++)
            if (is_blocking(ss[i]) && ss[i]->device == s->device) add_dep(op, ss[i]->last);
    } else if (is_blocking(s)) {
        add_dep(op, legacy_streams[s->device].last);
    }
    if (op->kind == RT_OP_WAIT && op->event && op->event->op) add_dep(op, op->event->op);
    int raced = race_mode ? race_check(op) : 0;
    if (all_tail) all_tail->next_all = op; else all_head = op;
    all_tail = op;
    if (s->tail) s->tail->next_in_stream = op; else s->head = op;
    s->tail = op;
    s->last = op;
    s->pending++;
    npending++;
    acc_count(op, +1);
    if (log_n < LOG_CAP) {
        log_ids[log_n] = s->id;
        log_devs[log_n] = (signed char)s->device;
        log_kinds[log_n] = op->kind;
        log_details[log_n] = 0;
    }
    log_n++;
    if (run_now) run_closure(&op, 1, -1);
    else if (!running) protect_op(op);
    rt_unlock();
    int sticky = cuemu_sticky_error();
    if (sticky) return (cudaError_t)sticky;
    if (raced && race_mode == 2) return cudaErrorIllegalState;
    return cudaSuccess;
}

void cuemu_stream_enqueue(const cuemu_launch_desc *d)
{
    /* "A kernel launch will fail if it is issued to a stream that is not associated to the
       current device" (the programming guide's multi-device stream and event behaviour) */
    if (rt_ndev() > 1 && rt_stream_valid((cudaStream_t)d->stream) &&
        rt_stream_device((cudaStream_t)d->stream) != rt_cur_dev()) {
        char sn[64];
        rt_lock();
        const char *name = stream_name(resolve((cudaStream_t)d->stream), sn, sizeof sn);
        rt_unlock();
        cuemu_diag("kernel %s launched at %s:%d on %s while device %d is current: a kernel runs "
                   "on the current device, and a stream of another device is an invalid handle "
                   "there (cudaSetDevice(%d) before the launch)", d->kernel,
                   d->file ? d->file : "(unknown file)", d->line, name, rt_cur_dev(),
                   rt_stream_device((cudaStream_t)d->stream));
        if (d->ctx_free) d->ctx_free(d->ctx);
        cuemu_set_last_error(cudaErrorInvalidResourceHandle);
        return;
    }
    rt_op *op = rt_op_new(RT_OP_KERNEL, "kernel launch");
    if (!op) {
        if (d->ctx_free) d->ctx_free(d->ctx);
        cuemu_set_last_error(cudaErrorMemoryAllocation);
        return;
    }
    op->desc = *d;
    op->file = d->file;
    op->line = d->line;
    rt_lock();
    for (int i = 0; i < d->nptr; i++) {
        /* the whole allocation from the pointer on is unknown; the pointer's own element
           stands for it, so kernels on disjoint chunks of one buffer are not a race */
        int before = op->nacc;
        rt_op_access(op, d->ptr[i], 1, d->ptr_written[i] & 1);
        if (op->nacc > before) op->acc[before].vol = (d->ptr_written[i] >> 1) & 1;
    }
    rt_unlock();
    cudaError_t e = rt_submit(op, (cudaStream_t)d->stream, 0);
    if (e == cudaErrorIllegalState) cuemu_set_last_error(e);
}

void rt_queue_reset(void)
{
    rt_lock();
    suspects_reset();
    unprotect_all();
    for (rt_op *op = all_head; op;) {
        rt_op *n = op->next_all;
        acc_count(op, -1);
        op_release(op);
        op = n;
    }
    all_head = all_tail = NULL;
    npending = 0;
    for (int d = 0; d < RT_MAX_DEVICES; d++) {
        legacy_streams[d].last = legacy_streams[d].head = legacy_streams[d].tail = NULL;
        perthread_streams[d].last = perthread_streams[d].head = perthread_streams[d].tail = NULL;
        legacy_streams[d].pending = perthread_streams[d].pending = 0;
    }
    for (struct CUstream_st *s = streams; s; s = s->next) { s->last = s->head = s->tail = NULL; s->pending = 0; }
    for (struct CUevent_st *e = events; e; e = e->next) e->op = NULL;
    rt_registry_clear_accesses();
    rt_unlock();
}

cudaError_t (cudaStreamCreateWithPriority)(cudaStream_t *pStream, unsigned int flags, int priority)
{
    RT_ENTER();
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking)) return rt_err(cudaErrorInvalidValue);
    struct CUstream_st *s = (struct CUstream_st *)calloc(1, sizeof *s);
    if (!s) return rt_err(cudaErrorMemoryAllocation);
    s->magic = STREAM_MAGIC;
    s->flags = flags;
    /* CUDA clamps a priority outside [greatest, least] = [-5, 0] instead of failing. */
    s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    rt_lock();
    s->id = ++stream_ids;
    s->device = rt_cur_dev();
    s->next = streams;
    streams = s;
    rt_unlock();
    *pStream = s;
    return cudaSuccess;
}

cudaError_t (cudaStreamCreateWithFlags)(cudaStream_t *pStream, unsigned int flags)
{
    return (cudaStreamCreateWithPriority)(pStream, flags, 0);
}

cudaError_t (cudaStreamCreate)(cudaStream_t *pStream)
{
    return (cudaStreamCreateWithPriority)(pStream, cudaStreamDefault, 0);
}

/* CUDA: "the function will return immediately and the resources associated with stream will
   be released automatically once the device has completed all work in stream". Nothing runs. */
cudaError_t (cudaStreamDestroy)(cudaStream_t stream)
{
    int sticky = cuemu_sticky_error();
    cudaError_t e = cudaErrorInvalidResourceHandle;
    rt_lock();
    for (struct CUstream_st **l = &streams; *l; l = &(*l)->next)
        if (*l == stream && !stream->destroyed) {
            stream->destroyed = 1;
            e = cudaSuccess;
            break;
        }
    gc();
    rt_unlock();
    return sticky ? rt_err((cudaError_t)sticky) : rt_err(e);
}

cudaError_t (cudaStreamSynchronize)(cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_stream_log_note(stream, RT_LOG_SYNC, RT_SYNC_STREAM);
    rt_drain_stream(stream);
    return rt_sync_point("cudaStreamSynchronize");
}

/* A query that finds work queued runs one step of it and says cudaErrorNotReady, so a loop
   that polls makes progress and sees "not ready" at least once. */
cudaError_t (cudaStreamQuery)(cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_lock();
    rt_op *t = resolve(stream)->last;
    int busy = t && !t->done;
    if (busy) run_closure(&t, 1, 1);
    rt_unlock();
    if (cuemu_sticky_error()) return rt_err((cudaError_t)cuemu_sticky_error());
    return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t (cudaStreamGetFlags)(cudaStream_t hStream, unsigned int *flags)
{
    RT_ENTER();
    if (!flags) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    *flags = (hStream == 0 || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread)
                 ? cudaStreamDefault : hStream->flags;
    return cudaSuccess;
}

cudaError_t (cudaStreamGetPriority)(cudaStream_t hStream, int *priority)
{
    RT_ENTER();
    if (!priority) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(hStream)) return rt_err(cudaErrorInvalidResourceHandle);
    *priority = (hStream == 0 || hStream == cudaStreamLegacy || hStream == cudaStreamPerThread)
                    ? 0 : hStream->priority;
    return cudaSuccess;
}

cudaError_t (cudaLaunchHostFunc)(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RT_ENTER();
    if (!fn) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_op *op = rt_op_new(RT_OP_HOSTFN, "cudaLaunchHostFunc");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    op->fn = fn;
    op->user = userData;
    /* run now, with the work before it: a host function is how a GPU tells the host its work
       is done, and a host that waits for it (a flag, a semaphore) calls no CUDA function that
       would run it later; on a GPU it runs as soon as that work is done */
    return rt_err(rt_submit(op, stream, 1));
}

cudaError_t (cudaStreamAddCallback)(cudaStream_t stream, cudaStreamCallback_t callback,
                                    void *userData, unsigned int flags)
{
    RT_ENTER();
    if (!callback || flags != 0) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_op *op = rt_op_new(RT_OP_HOSTFN, "cudaStreamAddCallback");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    op->cb = callback;
    op->user = userData;
    return rt_err(rt_submit(op, stream, 1));   /* as cudaLaunchHostFunc */
}

/* ---- events ----------------------------------------------------------------------------- */
static int event_valid(cudaEvent_t e)
{
    if (!e) return 0;
    rt_lock();
    int ok = 0;
    for (struct CUevent_st *p = events; p; p = p->next)
        if (p == e) { ok = 1; break; }
    rt_unlock();
    return ok;
}

/* Work queued on stream from now on waits for the event's latest record; an event never
   recorded (or already passed) makes it wait for nothing. */
cudaError_t (cudaStreamWaitEvent)(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_ENTER();
    if (flags & ~(unsigned)cudaEventWaitExternal) return rt_err(cudaErrorInvalidValue);
    if (!rt_stream_valid(stream) || !event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_op *op = rt_op_new(RT_OP_WAIT, "cudaStreamWaitEvent");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    op->event = event;
    return rt_err(rt_submit(op, stream, 0));
}

cudaError_t (cudaEventCreateWithFlags)(cudaEvent_t *event, unsigned int flags)
{
    RT_ENTER();
    if (!event) return rt_err(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess))
        return rt_err(cudaErrorInvalidValue);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return rt_err(cudaErrorInvalidValue);
    struct CUevent_st *e = (struct CUevent_st *)calloc(1, sizeof *e);
    if (!e) return rt_err(cudaErrorMemoryAllocation);
    e->magic = EVENT_MAGIC;
    e->flags = flags;
    e->device = rt_cur_dev();
    rt_lock();
    e->next = events;
    events = e;
    rt_unlock();
    *event = e;
    return cudaSuccess;
}

cudaError_t (cudaEventCreate)(cudaEvent_t *event) { return (cudaEventCreateWithFlags)(event, 0); }

cudaError_t (cudaEventRecord)(cudaEvent_t event, cudaStream_t stream)
{
    RT_ENTER();
    if (!event_valid(event) || !rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    /* "cudaEventRecord() will fail if the input event and input stream are associated to
       different devices" (the programming guide's multi-device stream and event behaviour) */
    if (event->device != rt_stream_device(stream)) {
        cuemu_diag("cudaEventRecord: the event was made on device %d and the stream belongs to "
                   "device %d: an event is recorded on a stream of its own device",
                   event->device, rt_stream_device(stream));
        return rt_err(cudaErrorInvalidResourceHandle);
    }
    rt_op *op = rt_op_new(RT_OP_EVENT, "cudaEventRecord");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    op->event = event;
    rt_lock();
    event->op = op;
    event->recorded = 1;
    rt_unlock();
    return rt_err(rt_submit(op, stream, 0));
}

cudaError_t (cudaEventSynchronize)(cudaEvent_t event)
{
    RT_ENTER();
    if (!event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_stream_log_note(0, RT_LOG_SYNC, RT_SYNC_EVENT);
    rt_lock();
    rt_op *t = event->op;
    run_closure(&t, 1, -1);
    rt_unlock();
    return rt_sync_point("cudaEventSynchronize");
}

cudaError_t (cudaEventQuery)(cudaEvent_t event)
{
    RT_ENTER();
    if (!event_valid(event)) return rt_err(cudaErrorInvalidResourceHandle);
    rt_lock();
    rt_op *t = event->op;
    int busy = t && !t->done;
    if (busy) run_closure(&t, 1, 1);
    rt_unlock();
    if (cuemu_sticky_error()) return rt_err((cudaError_t)cuemu_sticky_error());
    return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t (cudaEventElapsedTime)(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RT_ENTER();
    if (!ms) return rt_err(cudaErrorInvalidValue);
    if (!event_valid(start) || !event_valid(end)) return rt_err(cudaErrorInvalidResourceHandle);
    /* What CUDA answers for an event made without timing or never recorded. */
    if ((start->flags | end->flags) & cudaEventDisableTiming) return rt_err(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return rt_err(cudaErrorInvalidResourceHandle);
    if (start->device != end->device) return rt_err(cudaErrorInvalidResourceHandle);
    if ((start->op && !start->op->done) || (end->op && !end->op->done)) return rt_err(cudaErrorNotReady);
    double d = (double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
               (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6;
    *ms = (float)d;
    return cudaSuccess;
}

cudaError_t (cudaEventDestroy)(cudaEvent_t event)
{
    int sticky = cuemu_sticky_error();
    cudaError_t e = cudaErrorInvalidResourceHandle;
    rt_lock();
    for (struct CUevent_st **l = &events; *l; l = &(*l)->next)
        if (*l == event) {
            *l = event->next;
            /* a record still queued runs later without it */
            for (rt_op *op = all_head; op; op = op->next_all)
                if (op->event == event) op->event = NULL;
            event->magic = 0;
            free(event);
            e = cudaSuccess;
            break;
        }
    rt_unlock();
    return sticky ? rt_err((cudaError_t)sticky) : rt_err(e);
}

void cuemuLiveObjects(int *nstreams, int *nevents)
{
    int ns = 0, ne = 0;
    rt_lock();
    for (struct CUstream_st *s = streams; s; s = s->next) ns += !s->destroyed;
    for (struct CUevent_st *e = events; e; e = e->next) ne++;
    rt_unlock();
    if (nstreams) *nstreams = ns;
    if (nevents) *nevents = ne;
}

void rt_streams_reset(void)
{
    rt_queue_reset();
    rt_lock();
    while (streams) {
        struct CUstream_st *s = streams;
        streams = s->next;
        free(s);
    }
    while (events) {
        struct CUevent_st *e = events;
        events = e->next;
        free(e);
    }
    rt_unlock();
}

/* ---- per-function attributes ------------------------------------------------------------- */
typedef struct func_attr {
    const void *func;
    int max_dynamic_smem;
    int carveout;
    struct func_attr *next;
} func_attr;

static func_attr *funcs;

static func_attr *func_find(const void *func, int create)
{
    for (func_attr *f = funcs; f; f = f->next)
        if (f->func == func) return f;
    if (!create) return NULL;
    func_attr *f = (func_attr *)calloc(1, sizeof *f);
    if (!f) return NULL;
    f->func = func;
    f->max_dynamic_smem = (int)cuemu_shared_mem_per_block();
    f->carveout = cudaSharedmemCarveoutDefault;
    f->next = funcs;
    funcs = f;
    return f;
}

size_t cuemu_func_max_dynamic_smem(const void *func)
{
    rt_lock();
    func_attr *f = func_find(func, 0);
    size_t v = f ? (size_t)f->max_dynamic_smem : cuemu_shared_mem_per_block();
    rt_unlock();
    return v;
}

cudaError_t (cudaFuncSetAttribute)(const void *func, enum cudaFuncAttribute attr, int value)
{
    RT_ENTER();
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    cudaError_t e = cudaSuccess;
    rt_lock();
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        /* The opt-in ceiling: 227 KiB per block on an H200. */
        if (value < 0 || (size_t)value > cuemu_shared_mem_per_block_optin()) e = cudaErrorInvalidValue;
        else {
            func_attr *f = func_find(func, 1);
            if (f) f->max_dynamic_smem = value; else e = cudaErrorMemoryAllocation;
        }
        break;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        if (value < -1 || value > 100) e = cudaErrorInvalidValue;
        else {
            func_attr *f = func_find(func, 1);
            if (f) f->carveout = value; else e = cudaErrorMemoryAllocation;
        }
        break;
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
        /* clusters of up to 16 blocks for this kernel (the core checks launches) */
        if (value < 0 || value > 1) e = cudaErrorInvalidValue;
        else cuemu_cluster_nonportable(func, value);
        break;
    case cudaFuncAttributeClusterDimMustBeSet:
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
        break;      /* accepted: the shape comes from __cluster_dims__ or the launch */
    default:
        e = cudaErrorInvalidValue;
        break;
    }
    rt_unlock();
    return rt_err(e);
}

/* What a CPU cannot know (registers, static shared memory, local memory) reads as 0. */
cudaError_t (cudaFuncGetAttributes)(struct cudaFuncAttributes *attr, const void *func)
{
    RT_ENTER();
    if (!attr) return rt_err(cudaErrorInvalidValue);
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    memset(attr, 0, sizeof *attr);
    rt_lock();
    func_attr *f = func_find(func, 0);
    attr->maxDynamicSharedSizeBytes = f ? f->max_dynamic_smem : (int)cuemu_shared_mem_per_block();
    attr->preferredShmemCarveout = f ? f->carveout : cudaSharedmemCarveoutDefault;
    rt_unlock();
    attr->maxThreadsPerBlock = cuemu_max_threads_per_block();
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    return cudaSuccess;
}

cudaError_t (cudaFuncSetCacheConfig)(const void *func, enum cudaFuncCache cacheConfig)
{
    RT_ENTER();
    if (!func) return rt_err(cudaErrorInvalidDeviceFunction);
    if ((unsigned)cacheConfig > cudaFuncCachePreferEqual) return rt_err(cudaErrorInvalidValue);
    return cudaSuccess;
}

void rt_funcs_reset(void)
{
    rt_lock();
    while (funcs) {
        func_attr *f = funcs;
        funcs = f->next;
        free(f);
    }
    rt_unlock();
}
