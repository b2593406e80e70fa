// SPDX-License-Identifier: MIT
/* tut_shm: the checking process's host memory, at addresses that mean the same in the worker
   (issues 26, 31).

   With TUT_ISOLATE=1 a student's library runs in a worker process; the checker (the chapter's
   driver) keeps the tests and the verdict. This file is the allocator NumPy's data comes from in
   the checker (common/tut_remote.py installs it with PyDataMem_SetHandler). Its pages are the
   checker's own (private, anonymous): the worker never sees them. The worker maps the first half
   of a memfd at the same addresses instead, and the checker copies a call's arguments there
   before the call and copies back only the declared outputs after it (tut_remote.py), so an
   address means the same array in both processes while nothing the worker writes reaches the
   checker's memory unasked. The worker allocates in the memfd's other half
   (emu/runtime/shared_heap.c).

   tut_shm_block() finds the block an address lies in: what a call's copy must take. Watched
   blocks (outputs of a call whose writes may still come, an async copy's destination) are
   forgotten when freed, so memory handed out again is never overwritten by a late copy back.
   Every byte of bookkeeping is private. No Python headers: the handler struct below has the
   layout of NumPy's PyDataMem_Handler (version 1, NumPy 1.22 and later). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE        4096u
#define NCLASS      9                   /* 16 B .. 4 KiB, powers of two: a block never spans
                                           pages, so its start follows from its address */
#define SMALL_MAX   (16u << (NCLASS - 1))
#define SLAB        (256u * 1024u)      /* what a size class carves its blocks from */
#define LARGE       0xFF                /* page_class of a page in a large run */

typedef struct {                        /* = PyDataMemAllocator */
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} data_allocator;

typedef struct {                        /* = PyDataMem_Handler */
    char name[127];
    uint8_t version;
    data_allocator allocator;
} data_handler;

typedef struct { size_t start, n; } extent;   /* a free run of pages */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *base;
static size_t npages, top;              /* pages [top, npages) were never handed out */
static int memfd = -1;
static long long fd_offset;
static unsigned char *page_class;       /* per page: 0 free, 1..NCLASS small slab, LARGE */
static uint32_t *run_pages;             /* per first page of a large run: its length */
static extent *runs;                    /* free runs below top, sorted, never adjacent */
static size_t nruns, cap_runs;
static void **free_list[NCLASS];        /* freed small blocks per class */
static size_t nfree[NCLASS], cap_free[NCLASS];
static size_t in_use, peak;
#define MAX_WATCH 4096
static char *watched[MAX_WATCH];        /* blocks whose worker copy comes back after each call */
static size_t nwatched;

/* ---- page runs ---------------------------------------------------------------------------- */
static void punch(size_t first, size_t n)
{
    /* Give the pages back to the kernel, the private ones and the worker's copy: freed memory
       stops counting as used, and reads as zero when handed out again (so a large calloc needs
       no memset). */
    if (memfd >= 0)
        fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  fd_offset + (long long)(first * PAGE), (long long)(n * PAGE));
    if (madvise(base + first * PAGE, n * PAGE, MADV_DONTNEED) != 0)
        memset(base + first * PAGE, 0, n * PAGE);
}

static long long run_alloc(size_t n)
{
    for (size_t i = 0; i < nruns; i++) {
        if (runs[i].n >= n) {
            size_t s = runs[i].start;
            runs[i].start += n;
            runs[i].n -= n;
            if (!runs[i].n) {
                memmove(runs + i, runs + i + 1, (nruns - i - 1) * sizeof *runs);
                nruns--;
            }
            return (long long)s;
        }
    }
    if (npages - top < n) return -1;
    top += n;
    return (long long)(top - n);
}

static int run_free(size_t s, size_t n)
{
    size_t lo = 0, hi = nruns;              /* first run starting after s */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (runs[mid].start < s) lo = mid + 1; else hi = mid;
    }
    int left = lo > 0 && runs[lo - 1].start + runs[lo - 1].n == s;
    int right = lo < nruns && s + n == runs[lo].start;
    if (left && right) {
        runs[lo - 1].n += n + runs[lo].n;
        memmove(runs + lo, runs + lo + 1, (nruns - lo - 1) * sizeof *runs);
        nruns--;
    } else if (left) {
        runs[lo - 1].n += n;
    } else if (right) {
        runs[lo].start = s;
        runs[lo].n += n;
    } else {
        if (nruns == cap_runs) {
            size_t cap = cap_runs ? 2 * cap_runs : 64;
            extent *r = realloc(runs, cap * sizeof *r);
            if (!r) return -1;              /* the pages are lost, nothing worse */
            runs = r;
            cap_runs = cap;
        }
        memmove(runs + lo + 1, runs + lo, (nruns - lo) * sizeof *runs);
        runs[lo].start = s;
        runs[lo].n = n;
        nruns++;
    }
    /* the run that now ends at top melts into it */
    if (nruns && runs[nruns - 1].start + runs[nruns - 1].n == top) {
        top = runs[nruns - 1].start;
        nruns--;
    }
    return 0;
}

/* ---- blocks ----------------------------------------------------------------------------- */
static int class_of(size_t size)
{
    int c = 0;
    size_t s = 16;
    while (s < size) s <<= 1, c++;
    return c;
}

static int push_free(int c, void *p)
{
    if (nfree[c] == cap_free[c]) {
        size_t cap = cap_free[c] ? 2 * cap_free[c] : 256;
        void **f = realloc(free_list[c], cap * sizeof *f);
        if (!f) return -1;
        free_list[c] = f;
        cap_free[c] = cap;
    }
    free_list[c][nfree[c]++] = p;
    return 0;
}

static void *alloc_locked(size_t size, int *fresh)
{
    if (!base) return NULL;
    if (size == 0) size = 1;
    *fresh = 0;
    if (size <= SMALL_MAX) {
        int c = class_of(size);
        size_t bs = (size_t)16 << c;
        if (!nfree[c]) {
            long long s = run_alloc(SLAB / PAGE);
            if (s < 0) return NULL;
            memset(page_class + s, c + 1, SLAB / PAGE);
            char *slab = base + (size_t)s * PAGE;
            for (size_t off = SLAB; off >= bs; off -= bs)   /* lowest address handed out first */
                if (push_free(c, slab + off - bs) != 0) break;
            if (!nfree[c]) return NULL;
        }
        in_use += bs;
        if (in_use > peak) peak = in_use;
        return free_list[c][--nfree[c]];
    }
    if (size > (size_t)UINT32_MAX * PAGE - PAGE) return NULL;
    size_t n = (size + PAGE - 1) / PAGE;
    long long s = run_alloc(n);
    if (s < 0) return NULL;
    memset(page_class + s, LARGE, n);
    run_pages[s] = (uint32_t)n;
    in_use += n * PAGE;
    if (in_use > peak) peak = in_use;
    *fresh = 1;                                 /* punched or never used: zeros */
    return base + (size_t)s * PAGE;
}

/* The block's usable size, or 0 when p is not a live block of this allocator. */
static size_t size_locked(const void *p)
{
    if (!base || (const char *)p < base || (const char *)p >= base + npages * PAGE) return 0;
    size_t pg = (size_t)((const char *)p - base) / PAGE;
    unsigned c = page_class[pg];
    if (c == 0) return 0;
    if (c == LARGE) return (const char *)p == base + pg * PAGE ? (size_t)run_pages[pg] * PAGE : 0;
    return (size_t)16 << (c - 1);
}

static void unwatch_locked(const void *p)
{
    for (size_t i = 0; i < nwatched; i++)
        if (watched[i] == p) {
            watched[i] = watched[--nwatched];
            return;
        }
}

static void free_locked(void *p)
{
    size_t size = size_locked(p);
    if (!size) return;          /* not ours (or freed twice): leave it, never corrupt the lists */
    if (nwatched) unwatch_locked(p);
    size_t pg = (size_t)((char *)p - base) / PAGE;
    if (page_class[pg] != LARGE) {
        if (push_free(page_class[pg] - 1, p) == 0) in_use -= size;
        return;
    }
    size_t n = run_pages[pg];
    memset(page_class + pg, 0, n);
    run_pages[pg] = 0;
    in_use -= size;
    punch(pg, n);
    run_free(pg, n);
}

/* ---- NumPy's four functions -------------------------------------------------------------- */
static void *h_malloc(void *ctx, size_t size)
{
    (void)ctx;
    int fresh;
    pthread_mutex_lock(&lock);
    void *p = alloc_locked(size, &fresh);
    pthread_mutex_unlock(&lock);
    return p;
}

static void *h_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    if (elsize && nelem > SIZE_MAX / elsize) return NULL;
    int fresh;
    pthread_mutex_lock(&lock);
    void *p = alloc_locked(nelem * elsize, &fresh);
    pthread_mutex_unlock(&lock);
    if (p && !fresh) memset(p, 0, nelem * elsize);
    return p;
}

static void h_free(void *ctx, void *p, size_t size)
{
    (void)ctx, (void)size;      /* our own record of the size, not the caller's */
    if (!p) return;
    pthread_mutex_lock(&lock);
    free_locked(p);
    pthread_mutex_unlock(&lock);
}

static void *h_realloc(void *ctx, void *p, size_t new_size)
{
    if (!p) return h_malloc(ctx, new_size);
    pthread_mutex_lock(&lock);
    size_t old = size_locked(p);
    pthread_mutex_unlock(&lock);
    if (!old) return NULL;
    if (new_size <= old && (old <= SMALL_MAX || new_size > old / 2)) return p;
    void *q = h_malloc(ctx, new_size);
    if (!q) return NULL;
    memcpy(q, p, old < new_size ? old : new_size);
    h_free(ctx, p, old);
    return q;
}

static data_handler handler = {
    "tut_shm: host memory shared with the worker", 1,
    {NULL, h_malloc, h_calloc, h_realloc, h_free},
};

/* ---- for common/tut_remote.py (ctypes) ------------------------------------------------------ */
/* The region [region, region + size) is mapped already; fd and offset name it in the memfd
   (fd -1: not a memfd, freed pages are zeroed by hand). 0, or -1 (no memory, or twice). */
int tut_shm_init(void *region, size_t size, int fd, long long offset)
{
    pthread_mutex_lock(&lock);
    int rc = -1;
    if (!base && region && size >= SLAB && (uintptr_t)region % PAGE == 0) {
        size_t n = size / PAGE;
        page_class = calloc(n, 1);
        run_pages = calloc(n, sizeof *run_pages);
        if (page_class && run_pages) {
            base = region;
            npages = n;
            memfd = fd;
            fd_offset = offset;
            rc = 0;
        } else {
            free(page_class);
            free(run_pages);
            page_class = NULL;
            run_pages = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void *tut_shm_handler(void) { return &handler; }
void *tut_shm_malloc(size_t size) { return h_malloc(NULL, size); }
void tut_shm_free(void *p) { h_free(NULL, p, 0); }

/* The block holding address p: 1 and its start and usable size, or 0 when p is in no block
   handed out (never handed out, or freed). */
int tut_shm_block(const void *p, void **start, size_t *size)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    if (base && (const char *)p >= base && (const char *)p < base + top * PAGE) {
        size_t pg = (size_t)((const char *)p - base) / PAGE;
        unsigned c = page_class[pg];
        if (c == LARGE) {
            while (!run_pages[pg]) pg--;        /* a run's length is kept on its first page */
            *start = base + pg * PAGE;
            *size = (size_t)run_pages[pg] * PAGE;
            found = (const char *)p < (char *)*start + *size;
        } else if (c) {
            size_t bs = (size_t)16 << (c - 1), off = (size_t)((const char *)p - base);
            *start = base + off / bs * bs;
            *size = bs;
            found = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

/* Watch the block starting at p (0), or stop (on = 0); -1 when the list is full. */
int tut_shm_watch(void *p, int on)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    unwatch_locked(p);
    if (on) {
        if (nwatched < MAX_WATCH) watched[nwatched++] = p;
        else rc = -1;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Up to max watched blocks' starts into out; how many there are. */
size_t tut_shm_watched(void **out, size_t max)
{
    pthread_mutex_lock(&lock);
    size_t n = nwatched;
    for (size_t i = 0; i < n && i < max; i++) out[i] = watched[i];
    pthread_mutex_unlock(&lock);
    return n;
}

/* Bytes handed out now and at most (rounded up to blocks and pages). */
void tut_shm_stats(size_t *now, size_t *most)
{
    pthread_mutex_lock(&lock);
    if (now) *now = in_use;
    if (most) *most = peak;
    pthread_mutex_unlock(&lock);
}
