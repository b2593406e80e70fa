/* SPDX-License-Identifier: MIT */
/*
 * memory.c: the emulated device memory: allocations, their registry, copies and sets.
 *
 * Every allocation is its own mapping: [guard page][data ...][guard page]. The pointer handed
 * out is 256-byte aligned (what cudaMalloc guarantees) and placed as late as that alignment
 * allows, so the allocation ends at most 255 bytes before the back guard page: a kernel that
 * runs off the end faults at once, or (within those few bytes) changes a canary that is
 * checked at every synchronising call. Fresh memory is filled with 0xFF bytes: NaN as a
 * float, -1 as an int, so a read of memory nobody wrote shows in the result. Device memory
 * (not managed, pinned or mapped memory) is PROT_NONE while host code runs, as it is out of a
 * CPU's reach on a GPU machine: see "device memory out of host code's reach" below.
 *
 * Accounting (what cudaMemGetInfo reports): each device or managed allocation counts its
 * size rounded up to 2 MiB, the GPU's large-page granule; a memory pool counts its reserve
 * the same way. Freeing returns exactly what the allocation counted, so "memory in use"
 * comes back to its starting value after a program frees everything.
 */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE            /* MAP_ANONYMOUS, MAP_NORESERVE under -std=c11 */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_internal.h"

#define POISON_BYTE  0xFF
#define CANARY_BYTE  0xFA
#define ALLOC_ALIGN  256
#define GRANULE      ((size_t)2 << 20)
#define FRONT_CHECK  256           /* canary bytes kept just before each allocation */
#define FREED_RING   256
#define PITCH_ALIGN  512
#define MAX_PITCH    ((size_t)2147483647)
#define DEFAULT_DEVICE_MEMORY ((size_t)4 << 30)

static size_t page_size;
static size_t total_mem;
static size_t used_mem[RT_MAX_DEVICES];   /* per emulated device */
static unsigned long serial_counter;

size_t rt_page(void)
{
    if (!page_size) {
        long p = sysconf(_SC_PAGESIZE);
        page_size = p > 0 ? (size_t)p : 4096;
    }
    return page_size;
}

/* CUEMU_DEVICE_MEMORY: bytes, with an optional K, M, G or T (powers of 1024; "GiB", "GB"
   and "G" all mean the same here). */
static size_t parse_size(const char *s, int *ok)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    *ok = 0;
    if (end == s || errno || v <= 0) return 0;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return 0;
    v *= mul;
    if (v < 1 || v > 1.0e18) return 0;
    *ok = 1;
    return (size_t)v;
}

size_t rt_device_total(void)
{
    if (!total_mem) {
        const char *env = getenv("CUEMU_DEVICE_MEMORY");
        total_mem = DEFAULT_DEVICE_MEMORY;
        if (env && *env) {
            int ok;
            size_t v = parse_size(env, &ok);
            if (ok) total_mem = v;
            else cuemu_diag("CUEMU_DEVICE_MEMORY=\"%s\" is not a size (try 4G or 512M); using 4 GiB", env);
        }
    }
    return total_mem;
}

size_t rt_device_used(int dev) { return rt_dev_valid(dev) ? used_mem[dev] : 0; }

size_t rt_granule_round(size_t bytes)
{
    if (bytes > SIZE_MAX - GRANULE) return 0;
    return (bytes + GRANULE - 1) & ~(GRANULE - 1);
}

cudaError_t rt_account(int dev, size_t bytes)
{
    cudaError_t e = cudaSuccess;
    if (!rt_dev_valid(dev)) return cudaErrorInvalidDevice;
    rt_lock();
    size_t total = rt_device_total();
    if (used_mem[dev] > total || bytes > total - used_mem[dev]) e = cudaErrorMemoryAllocation;
    else used_mem[dev] += bytes;
    rt_unlock();
    return e;
}

void rt_unaccount(int dev, size_t bytes)
{
    if (!rt_dev_valid(dev)) return;
    rt_lock();
    used_mem[dev] = bytes > used_mem[dev] ? 0 : used_mem[dev] - bytes;
    rt_unlock();
}

static void dev_forget(rt_block *b);

/* ---- registry: live blocks sorted by extent, binary-searched ----------------------------- */
static rt_block **reg;
static size_t reg_n, reg_cap;

/* Index of the first block whose extent starts above p. */
static size_t reg_upper(const void *p)
{
    size_t lo = 0, hi = reg_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((const char *)reg[mid]->ext <= (const char *)p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

rt_block *rt_registry_find(const void *p)
{
    rt_block *found = NULL;
    rt_lock();
    size_t i = reg_upper(p);
    if (i > 0) {
        rt_block *b = reg[i - 1];
        if ((const char *)p < b->ext + b->ext_len) found = b;
    }
    rt_unlock();
    return found;
}

/* The first live block whose extent overlaps [lo, lo+len). */
static rt_block *registry_overlap(const char *lo, size_t len)
{
    /* Extents are disjoint and sorted, so only the last one starting inside can overlap. */
    size_t i = reg_upper(lo + len - 1);
    if (i > 0 && reg[i - 1]->ext + reg[i - 1]->ext_len > lo) return reg[i - 1];
    return NULL;
}

void rt_registry_add(rt_block *b)
{
    rt_lock();
    if (reg_n == reg_cap) {
        size_t cap = reg_cap ? reg_cap * 2 : 256;
        rt_block **r = (rt_block **)realloc(reg, cap * sizeof *r);
        if (!r) { rt_unlock(); return; }   /* unreachable in practice; lookup then says "host" */
        reg = r;
        reg_cap = cap;
    }
    size_t i = reg_upper(b->ext);
    memmove(reg + i + 1, reg + i, (reg_n - i) * sizeof *reg);
    reg[i] = b;
    reg_n++;
    rt_unlock();
}

void rt_registry_remove(rt_block *b)
{
    rt_lock();
    dev_forget(b);
    size_t i = reg_upper(b->ext);
    if (i > 0 && reg[i - 1] == b) {
        memmove(reg + i - 1, reg + i, (reg_n - i) * sizeof *reg);
        reg_n--;
    }
    rt_unlock();
}

void rt_registry_clear_accesses(void)
{
    rt_lock();
    for (size_t i = 0; i < reg_n; i++) reg[i]->nacc_list = 0, reg[i]->acc_maxlen = 0;
    rt_unlock();
}

/* cuemuMallocSparse: the allocation being made is sparse (set under the lock) */
static int sparse_next;
/* cuemuMallocBallast: the allocation this host thread is making is not poisoned */
static __thread int ballast_next;

/* ---- mapping ------------------------------------------------------------------------------ */
static unsigned char canary_ref[65536];

static void canary_init(void)
{
    if (canary_ref[0] != CANARY_BYTE) memset(canary_ref, CANARY_BYTE, sizeof canary_ref);
}

rt_block *rt_block_map(size_t bytes, size_t size, cuemu_mem_kind kind, const char *file, int line)
{
    size_t pg = rt_page();
    if (bytes < size) bytes = size;
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX - 3 * pg) return NULL;
    size_t data_len = (bytes + pg - 1) / pg * pg;
    size_t ext_len = data_len + 2 * pg;
    /* issue 26: memory shared with a checker, if any. Not a sparse allocation: the region
       is too small for it, and the checker reaches it only through calls (copies) anyway. */
    void *m = sparse_next ? NULL : rt_shared_map(ext_len);
    size_t align = 0;
    if (sparse_next) {
        /* Shared, not private: made readable and writable as a whole, a private mapping of
           24 GiB would count in full against a grader's RLIMIT_DATA; a shared one commits
           (and counts in a process's RssShmem) only the pages written. */
        m = mmap(NULL, ext_len, PROT_NONE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    } else if (!m) {
        /* Device memory is closed and opened again at every synchronisation (rt_dev_enter), and
           mprotect's cost is per page table entry: a large allocation starts on a 2 MiB
           boundary, in huge pages where the host has them, which makes that cost (and the
           kernels' TLB misses) about 500 times smaller. */
        align = kind == CUEMU_MEM_DEVICE && size >= GRANULE ? GRANULE : 0;
        m = mmap(NULL, ext_len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    }
    if (m == MAP_FAILED) return NULL;
    if (align) {
        char *data = (char *)(((uintptr_t)m + pg + align - 1) & ~(uintptr_t)(align - 1));
        char *ext = data - pg;
        size_t head = (size_t)(ext - (char *)m), tail = align - head;
        if (head) munmap(m, head);
        if (tail) munmap(ext + ext_len, tail);
        m = ext;
#ifdef MADV_HUGEPAGE
        madvise(data, data_len, MADV_HUGEPAGE);
#endif
    }
    rt_block *b = (rt_block *)calloc(1, sizeof *b);
    if (!b) { rt_shared_unmap(m, ext_len); return NULL; }
    b->ext = (char *)m;
    b->ext_len = ext_len;
    b->data = (char *)m + pg;
    b->data_len = data_len;
    b->capacity = data_len;
    b->kind = kind;
    b->device = rt_cur_dev();
    rt_block_place(b, size, file, line);
    if (!b->base) { rt_shared_unmap(m, ext_len); free(b); return NULL; }
    return b;
}

static int closable(const rt_block *b);
static int dev_open_block(rt_block *b);

void rt_block_place(rt_block *b, size_t size, const char *file, int line)
{
    canary_init();
    rt_dev_enter();
    int ok = closable(b) ? dev_open_block(b) == 0
                         : mprotect(b->data, b->data_len, PROT_READ | PROT_WRITE) == 0;
    if (!ok) { b->base = NULL; rt_dev_leave(); return; }
    char *end = b->data + b->data_len;
    char *base = (char *)((uintptr_t)(end - size) & ~(uintptr_t)(ALLOC_ALIGN - 1));
    b->base = base;
    b->size = size;
    b->file = file;
    b->line = line;
    b->serial = ++serial_counter;
    b->slack_reported = 0;
    /* Only what a kernel can plausibly reach is written, so a large pool block that holds a
       small allocation commits no more host memory than the allocation itself. */
    char *front = base - FRONT_CHECK < b->data ? b->data : base - FRONT_CHECK;
    memset(front, CANARY_BYTE, (size_t)(base - front));
    if (!sparse_next && !ballast_next) memset(base, POISON_BYTE, size);
    memset(base + size, CANARY_BYTE, (size_t)(end - (base + size)));
    b->dev_dirty = 0;
    b->dev_exposed = 0;
    b->free_queued = 0;
    if (closable(b)) rt_segv_install();
    rt_dev_leave();
}

/* ---- device memory out of host code's reach (rt_internal.h) -------------------------------
   On a GPU machine a cudaMalloc pointer is an address the CPU cannot reach: host code that
   dereferences it (a memcpy instead of cudaMemcpy) dies with a segmentation fault. Here device
   memory is host memory, so it is kept PROT_NONE except while emulated device work runs. The
   work opens only what it touches (one fault per block), and the cost is a few system calls per
   block per synchronisation, not per access. */
static rt_block **dev_opened;
static int ndev_opened, cap_dev_opened;
static __thread int dev_depth;

static int closable(const rt_block *b)
{
    return b->data && b->kind == CUEMU_MEM_DEVICE && !b->dev_exposed;
}

/* Lock held, or called from a fault handler on the thread that holds it. */
static int dev_open_block(rt_block *b)
{
    if (b->dev_open) return 0;
    if (ndev_opened == cap_dev_opened) {
        int cap = cap_dev_opened ? cap_dev_opened * 2 : 64;
        rt_block **n = (rt_block **)realloc(dev_opened, (size_t)cap * sizeof *n);
        if (!n) return -1;
        dev_opened = n;
        cap_dev_opened = cap;
    }
    if (mprotect(b->data, b->data_len, PROT_READ | PROT_WRITE) != 0) return -1;
    dev_opened[ndev_opened++] = b;
    b->dev_open = 1;
    b->dev_dirty = 1;
    return 0;
}

static void dev_close_all(void)
{
    rt_lock();
    for (int i = 0; i < ndev_opened; i++) {
        rt_block *b = dev_opened[i];
        if (closable(b)) mprotect(b->data, b->data_len, PROT_NONE);
        b->dev_open = 0;
    }
    ndev_opened = 0;
    rt_unlock();
}

/* A block leaves the registry (freed, back in a pool's reserve): forget that it is open. */
static void dev_forget(rt_block *b)
{
    if (!b->dev_open) return;
    for (int i = 0; i < ndev_opened; i++)
        if (dev_opened[i] == b) { dev_opened[i] = dev_opened[--ndev_opened]; break; }
    b->dev_open = 0;
}

void rt_dev_enter(void)
{
    if (dev_depth++ == 0 && reg_n) rt_segv_install();
}

void rt_dev_leave(void)
{
    if (dev_depth > 0 && --dev_depth == 0 && ndev_opened) dev_close_all();
}

int rt_dev_suspend(void)
{
    int d = dev_depth;
    dev_depth = 0;
    if (ndev_opened) dev_close_all();
    return d;
}

void rt_dev_resume(int depth) { dev_depth = depth; }

void rt_dev_reclose(void)
{
    if (ndev_opened) dev_close_all();
}

/* A kernel on one device touched memory of another: allowed once the kernel's device enabled
   peer access to it (cudaDeviceEnablePeerAccess), or for pool memory once the pool granted
   that device access (cudaMemPoolSetAccess, which is what covers pools). Otherwise a GPU
   stops the kernel with an illegal address; here it is reported and made the sticky error
   (the kernel runs on, its results are never seen: every later call fails with it). */
static const char *site_file(const char *f);
static void peer_check(rt_block *b, const char *addr)
{
    const char *kernel, *kfile;
    int kline, kd = rt_kernel_running(&kernel, &kfile, &kline);
    if (kd < 0 || b->device == kd || b->peer_reported) return;
    if (b->pool ? rt_pool_accessible(b->pool, kd) : rt_peer_enabled(kd, b->device)) return;
    b->peer_reported = 1;
    if (b->pool)
        cuemu_diag("kernel %s launched at %s:%d runs on device %d and touched memory of device %d "
                   "(address %p, byte %lld of the %zu-byte cudaMallocAsync allocation made at "
                   "%s:%d, from device %d's memory pool) that device %d was given no access to: "
                   "on a GPU this is an illegal address (cudaErrorIllegalAddress). Pool memory "
                   "is opened to another device with cudaMemPoolSetAccess (cudaDeviceEnablePeerAccess "
                   "does not cover memory pools)", kernel, kfile ? kfile : "(unknown file)", kline,
                   kd, b->device, (const void *)addr, (long long)(addr - b->base), b->size,
                   site_file(b->file), b->line, b->device, kd);
    else
        cuemu_diag("kernel %s launched at %s:%d runs on device %d and touched memory of device %d "
                   "without peer access (address %p, byte %lld of the %zu-byte allocation made by "
                   "the cudaMalloc at %s:%d on device %d): on a GPU this is an illegal address "
                   "(cudaErrorIllegalAddress). Call cudaDeviceEnablePeerAccess(%d, 0) with device %d "
                   "current before the launch (cudaDeviceCanAccessPeer says whether it can)",
                   kernel, kfile ? kfile : "(unknown file)", kline, kd, b->device,
                   (const void *)addr, (long long)(addr - b->base), b->size, site_file(b->file),
                   b->line, b->device, b->device, kd);
    cuemu_set_sticky_error(cudaErrorIllegalAddress);
}

int rt_dev_fault(const void *addr, rt_block **out)
{
    int r = 0;
    rt_lock();
    rt_block *b = rt_registry_find(addr);
    /* a kernel thread's fault is device work on whichever host thread runs it (a launch may
       spread its blocks over several: CUEMU_THREADS) */
    int device_work = dev_depth > 0 || cuemu_cur;
    if (b && closable(b) && b->dev_open && device_work && (const char *)addr >= b->data &&
        (const char *)addr < b->data + b->data_len) {
        r = 1;          /* another host thread of the launch opened it meanwhile: retry */
    } else if (b && closable(b) && !b->dev_open && (const char *)addr >= b->data &&
        (const char *)addr < b->data + b->data_len) {
        if (device_work) {
            if (rt_ndev() > 1) peer_check(b, (const char *)addr);
            r = dev_open_block(b) == 0 ? 1 : 0;
        } else {
            /* reported once; then the access goes on (the sticky error fails the program's
               next call), as pinned memory's host race does */
            mprotect(b->data, b->data_len, PROT_READ | PROT_WRITE);
            b->dev_exposed = 1;
            if (out) *out = b;
            r = 2;
        }
    }
    rt_unlock();
    return r;
}

int cuemu_device_fault(const void *p) { return rt_dev_fault(p, NULL) == 1; }

void rt_block_protect(rt_block *b, int accessible)
{
    if (b->data) mprotect(b->data, b->data_len, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
}

/* ---- freed blocks: kept (inaccessible) for a while so a late access can be named -------- */
typedef struct {
    cuemu_alloc_info info;
    char  *ext;
    size_t ext_len;
    void  *own;          /* mapping this entry holds (PROT_NONE) until it leaves the ring */
    size_t own_len;
} freed_entry;

static freed_entry ring[FREED_RING];
static unsigned ring_next;

static void fill_info(const rt_block *b, cuemu_alloc_info *out)
{
    out->base = b->base;
    out->size = b->size;
    out->kind = b->kind;
    out->file = b->file;
    out->line = b->line;
    out->serial = b->serial;
    out->free_file = b->free_file;
    out->free_line = b->free_line;
}

void rt_freed_push(rt_block *b, int give_mapping)
{
    rt_lock();
    freed_entry *e = &ring[ring_next];
    if (e->own) rt_shared_unmap(e->own, e->own_len);
    memset(e, 0, sizeof *e);
    fill_info(b, &e->info);
    e->ext = b->ext;
    e->ext_len = b->ext_len;
    if (give_mapping) {
        if (b->data && rt_shared_owns(b->ext)) {   /* issue 26: the same, in the region */
            rt_shared_release(b->ext, b->ext_len);
            e->own = b->ext;
            e->own_len = b->ext_len;
        } else if (b->data) {
            /* A fresh PROT_NONE mapping over the old one hands the pages back to the host
               and keeps the addresses reserved: a late access faults instead of landing in
               whatever a later allocation put there. */
            void *m = mmap(b->ext, b->ext_len, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
            if (m == MAP_FAILED) munmap(b->ext, b->ext_len);
            else { e->own = b->ext; e->own_len = b->ext_len; }
        }
        free(b);
    }
    ring_next = (ring_next + 1) % FREED_RING;
    rt_unlock();
}

/* ---- lookups for the core (cuemu_internal.h) ---------------------------------------------- */
int cuemu_alloc_lookup(const void *p, cuemu_alloc_info *out)
{
    int found = 0;
    rt_lock();
    rt_block *b = rt_registry_find(p);
    if (b && (const char *)p >= b->base && (const char *)p < b->base + b->size) {
        if (out) fill_info(b, out);
        found = 1;
    }
    rt_unlock();
    return found;
}

int cuemu_alloc_nearest(const void *p, cuemu_alloc_info *out, long long *offset)
{
    int found = 0;
    rt_lock();
    rt_block *b = rt_registry_find(p);
    if (b) {
        if (out) fill_info(b, out);
        if (offset) *offset = (long long)((const char *)p - b->base);
        found = 1;
    }
    rt_unlock();
    return found;
}

int cuemu_alloc_was_freed(const void *p, cuemu_alloc_info *out)
{
    int found = 0;
    rt_lock();
    if (rt_registry_find(p)) { rt_unlock(); return 0; }
    rt_block *pb = rt_pool_find_free(p);
    if (pb) {
        if (out) fill_info(pb, out);
        found = 1;
    }
    for (unsigned k = 0; !found && k < FREED_RING; k++) {
        freed_entry *e = &ring[(ring_next + FREED_RING - 1 - k) % FREED_RING];
        if (e->ext && (const char *)p >= e->ext && (const char *)p < e->ext + e->ext_len) {
            if (out) *out = e->info;
            found = 1;
        }
    }
    rt_unlock();
    return found;
}

/* ---- canaries ---------------------------------------------------------------------------- */
static const char *site_file(const char *f) { return f ? f : "(unknown file)"; }

static long first_bad(const char *p, size_t n)
{
    for (size_t off = 0; off < n; off += sizeof canary_ref) {
        size_t len = n - off < sizeof canary_ref ? n - off : sizeof canary_ref;
        if (memcmp(p + off, canary_ref, len) != 0) {
            for (size_t i = 0; i < len; i++)
                if ((unsigned char)p[off + i] != CANARY_BYTE) return (long)(off + i);
        }
    }
    return -1;
}

static int slack_damaged(rt_block *b, const char *when);

int rt_block_check_slack(rt_block *b, const char *when)
{
    if (!b || !b->data || b->slack_reported || rt_block_protected(b)) return 0;
    /* closed device memory not opened since its last check: nothing can have changed it */
    if (closable(b) && !b->dev_dirty) return 0;
    rt_dev_enter();
    if (closable(b) && dev_open_block(b) != 0) { rt_dev_leave(); return 0; }
    int bad = slack_damaged(b, when);
    b->dev_dirty = b->dev_open && dev_depth > 1;
    rt_dev_leave();
    return bad;
}

static int slack_damaged(rt_block *b, const char *when)
{
    canary_init();
    char *end = b->data + b->data_len;
    char *front = b->base - FRONT_CHECK < b->data ? b->data : b->base - FRONT_CHECK;
    long bad_back = first_bad(b->base + b->size, (size_t)(end - (b->base + b->size)));
    long bad_front = first_bad(front, (size_t)(b->base - front));
    if (bad_back < 0 && bad_front < 0) return 0;
    b->slack_reported = 1;
    /* Said as a student reads it: which buffer (its line and size), how far out, found when. */
    if (bad_back >= 0) {
        char how_far[64] = "the byte right after its last one";
        if (bad_back > 0)
            snprintf(how_far, sizeof how_far, "a byte %ld bytes after its last one", bad_back + 1);
        cuemu_diag("write past the end of the allocation made at %s:%d (a buffer of %zu byte%s "
                   "at %p): %s was changed, found by %s",
                   site_file(b->file), b->line, b->size, b->size == 1 ? "" : "s", (void *)b->base,
                   how_far, when);
    } else {
        long before = (long)(b->base - front) - bad_front;
        cuemu_diag("write before the start of the allocation made at %s:%d (a buffer of %zu "
                   "byte%s at %p): the byte %ld before its first one was changed, found by %s",
                   site_file(b->file), b->line, b->size, b->size == 1 ? "" : "s", (void *)b->base,
                   before, when);
    }
    cuemu_set_sticky_error(cudaErrorIllegalAddress);
    return 1;
}

int rt_check_all_slack(const char *when)
{
    int bad = 0;
    rt_lock();
    for (size_t i = 0; i < reg_n; i++) bad += rt_block_check_slack(reg[i], when);
    rt_unlock();
    return bad;
}

/* ---- classification of pointers handed to copies and sets -------------------------------- */
static const char *kind_name(cuemu_mem_kind k)
{
    switch (k) {
    case CUEMU_MEM_DEVICE: return "device memory";
    case CUEMU_MEM_MANAGED: return "managed memory";
    case CUEMU_MEM_HOST_PINNED: return "pinned host memory";
    case CUEMU_MEM_HOST_REGISTERED: return "registered host memory";
    case CUEMU_MEM_SYMBOL: return "a __device__ variable";
    }
    return "memory";
}

cudaError_t rt_classify(const void *p, size_t count, const char *api, const char *role,
                        enum rt_loc *loc)
{
    const char *c = (const char *)p;
    cuemu_alloc_info fi;
    if (!p) {
        cuemu_diag("%s: the %s pointer is NULL", api, role);
        return cudaErrorInvalidValue;
    }
    rt_lock();
    rt_block *b = rt_registry_find(p);
    if (b) {
        cudaError_t e = cudaSuccess;
        if (c < b->base || c >= b->base + b->size) {
            long long off = (long long)(c - b->base);
            cuemu_diag("%s: the %s pointer %p lies %lld bytes %s the %zu-byte allocation made at %s:%d",
                       api, role, p, off < 0 ? -off : off - (long long)b->size,
                       off < 0 ? "before" : "past the end of", b->size, site_file(b->file), b->line);
            e = cudaErrorInvalidValue;
        } else if (count > (size_t)(b->base + b->size - c)) {
            cuemu_diag("%s: %zu bytes at the %s pointer %p (offset %zu) overrun the %zu-byte allocation "
                       "made at %s:%d", api, count, role, p, (size_t)(c - b->base), b->size,
                       site_file(b->file), b->line);
            e = cudaErrorInvalidValue;
        } else {
            switch (b->kind) {
            case CUEMU_MEM_DEVICE: case CUEMU_MEM_SYMBOL: *loc = RT_LOC_DEVICE; break;
            case CUEMU_MEM_MANAGED: *loc = RT_LOC_MANAGED; break;
            default: *loc = RT_LOC_PINNED; break;
            }
        }
        rt_unlock();
        return e;
    }
    rt_unlock();
    if (cuemu_alloc_was_freed(p, &fi)) {
        char freed[320] = "";
        if (fi.free_file)
            snprintf(freed, sizeof freed, ", freed by the cudaFreeAsync at %s:%d",
                     site_file(fi.free_file), fi.free_line);
        cuemu_diag("%s: the %s pointer %p is in %s that was freed (%zu bytes, allocated at %s:%d%s)",
                   api, role, p, kind_name(fi.kind), fi.size, site_file(fi.file), fi.line, freed);
        return cudaErrorInvalidValue;
    }
    *loc = RT_LOC_HOST;
    return cudaSuccess;
}

/* ---- allocation --------------------------------------------------------------------------- */
static cudaError_t device_alloc(void **p, size_t size, cuemu_mem_kind kind, const char *file, int line)
{
    size_t acc = rt_granule_round(size);
    if (!acc) return cudaErrorMemoryAllocation;
    rt_lock();
    cudaError_t e = rt_account(rt_cur_dev(), acc);
    if (e == cudaSuccess) {
        rt_block *b = rt_block_map(size, size, kind, file, line);
        if (!b) {
            rt_unaccount(rt_cur_dev(), acc);
            e = cudaErrorMemoryAllocation;
        } else {
            b->accounted = acc;
            rt_registry_add(b);
            *p = b->base;
        }
    }
    rt_unlock();
    return e;
}

cudaError_t cuemu_malloc_at(const char *file, int line, void **devPtr, size_t size)
{
    RT_ENTER();
    if (!devPtr) return rt_err(cudaErrorInvalidValue);
    if (size == 0) { *devPtr = NULL; return cudaSuccess; }
    return rt_err(device_alloc(devPtr, size, CUEMU_MEM_DEVICE, file, line));
}

cudaError_t (cudaMalloc)(void **devPtr, size_t size) { return cuemu_malloc_at(NULL, 0, devPtr, size); }

/* Tests only (ctypes; cuemu_core.h): device memory of any size that commits host memory only
   where it is written and counts against no device memory; its body is not poisoned (it reads
   0 until written). Chapter 01's INT_MAX test reaches two 8 GiB buffers only near their ends. */
cudaError_t cuemuMallocSparse(void **devPtr, size_t size)
{
    RT_ENTER();
    if (!devPtr || size == 0) return rt_err(cudaErrorInvalidValue);
    rt_lock();
    sparse_next = 1;
    rt_block *b = rt_block_map(size, size, CUEMU_MEM_DEVICE, NULL, 0);
    sparse_next = 0;
    if (b) {
        rt_registry_add(b);
        *devPtr = b->base;
    }
    rt_unlock();
    /* not recorded as the last error: a test that finds no room for it says so and goes on,
       and the student's next cudaGetLastError must not see it */
    return b ? cudaSuccess : cudaErrorMemoryAllocation;
}

/* Tests only (ctypes): device memory that counts against the device like cudaMalloc's but is
   not poisoned, so that it commits no host memory until written. tut.device_ballast fills the
   emulated device with it ("more than the device has" at a size the host holds): poisoned, a
   4 GiB ballast wrote 4 GiB of a student's RAM and took 0.3 s. */
cudaError_t cuemuMallocBallast(void **devPtr, size_t size)
{
    RT_ENTER();
    if (!devPtr || size == 0) return rt_err(cudaErrorInvalidValue);
    ballast_next = 1;
    cudaError_t e = device_alloc(devPtr, size, CUEMU_MEM_DEVICE, NULL, 0);
    ballast_next = 0;
    /* not the last error either: device_ballast asks for less when it does not fit */
    return e;
}

/* Rows padded to a multiple of 512 bytes, what an H200 hands out for cudaMallocPitch. */
cudaError_t cuemu_mallocPitch_at(const char *file, int line, void **devPtr, size_t *pitch,
                                 size_t width, size_t height)
{
    RT_ENTER();
    if (!devPtr || !pitch) return rt_err(cudaErrorInvalidValue);
    if (width > SIZE_MAX - PITCH_ALIGN) return rt_err(cudaErrorMemoryAllocation);
    size_t p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (width == 0 || height == 0) { *pitch = p; *devPtr = NULL; return cudaSuccess; }
    if (p > MAX_PITCH) return rt_err(cudaErrorInvalidValue);
    if (height > SIZE_MAX / p) return rt_err(cudaErrorMemoryAllocation);
    cudaError_t e = device_alloc(devPtr, p * height, CUEMU_MEM_DEVICE, file, line);
    if (e == cudaSuccess) *pitch = p;
    return rt_err(e);
}

cudaError_t (cudaMallocPitch)(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    return cuemu_mallocPitch_at(NULL, 0, devPtr, pitch, width, height);
}

cudaError_t cuemu_mallocManaged_at(const char *file, int line, void **devPtr, size_t size,
                                   unsigned int flags)
{
    RT_ENTER();
    if (!devPtr) return rt_err(cudaErrorInvalidValue);
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost) return rt_err(cudaErrorInvalidValue);
    /* Size 0 succeeds on an H200 with CUDA 13.0 (measured 2026-11-30), as cudaMalloc does. */
    if (size == 0) { *devPtr = NULL; return cudaSuccess; }
    return rt_err(device_alloc(devPtr, size, CUEMU_MEM_MANAGED, file, line));
}

cudaError_t (cudaMallocManaged)(void **devPtr, size_t size, unsigned int flags)
{
    return cuemu_mallocManaged_at(NULL, 0, devPtr, size, flags);
}

cudaError_t cuemu_hostAlloc_at(const char *file, int line, void **pHost, size_t size, unsigned int flags)
{
    RT_ENTER();
    if (!pHost) return rt_err(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return rt_err(cudaErrorInvalidValue);
    if (size == 0) { *pHost = NULL; return cudaSuccess; }
    rt_block *b = rt_block_map(size, size, CUEMU_MEM_HOST_PINNED, file, line);
    if (!b) return rt_err(cudaErrorMemoryAllocation);
    b->flags = flags;
    rt_registry_add(b);
    *pHost = b->base;
    return cudaSuccess;
}

cudaError_t cuemu_mallocHost_at(const char *file, int line, void **ptr, size_t size)
{
    return cuemu_hostAlloc_at(file, line, ptr, size, cudaHostAllocDefault);
}

cudaError_t (cudaHostAlloc)(void **pHost, size_t size, unsigned int flags)
{
    return cuemu_hostAlloc_at(NULL, 0, pHost, size, flags);
}

cudaError_t (cudaMallocHost)(void **ptr, size_t size) { return cuemu_hostAlloc_at(NULL, 0, ptr, size, 0); }

/* ---- freeing -------------------------------------------------------------------------------- */
static void managed_forget(rt_block *b);

static void release_block(rt_block *b)
{
    managed_forget(b);
    cuemu_access_forget(b->base, b->base + b->size);
    free(b->acc_list);
    b->acc_list = NULL;
    b->nacc_list = b->cap_acc_list = 0;
    rt_registry_remove(b);
    rt_unaccount(b->device, b->accounted);
    rt_freed_push(b, 1);
}

static cudaError_t bad_free(const char *api, void *p, const char *wants)
{
    cuemu_alloc_info fi;
    rt_block *b = rt_registry_find(p);
    if (b && b->base == p)
        cuemu_diag("%s(%p): that is %s (made at %s:%d), not %s", api, p, kind_name(b->kind),
                   site_file(b->file), b->line, wants);
    else if (b)
        cuemu_diag("%s(%p): points %lld bytes into an allocation made at %s:%d, not at its start",
                   api, p, (long long)((char *)p - b->base), site_file(b->file), b->line);
    else if (cuemu_alloc_was_freed(p, &fi))
        cuemu_diag("%s(%p): freed twice (%zu bytes allocated at %s:%d)", api, p, fi.size,
                   site_file(fi.file), fi.line);
    else
        cuemu_diag("%s(%p): not a pointer returned by %s", api, p, wants);
    return cudaErrorInvalidValue;
}

/* The call site of the free that rt_free_device_now is about to run (a queued cudaFreeAsync
   knows it), so that a later use of the block names where it was freed. */
static __thread const char *free_site_file;
static __thread int free_site_line;
void rt_free_site(const char *file, int line)
{
    free_site_file = file;
    free_site_line = line;
}

cudaError_t rt_free_device_now(void *devPtr, const char *api)
{
    int sticky = cuemu_sticky_error();
    if (!devPtr) return sticky ? rt_err((cudaError_t)sticky) : cudaSuccess;
    rt_lock();
    rt_block *b = rt_registry_find(devPtr);
    /* pinned host memory from a pool (CUDA 13.0's host pools) is freed as pool memory */
    if (!b || b->base != (char *)devPtr ||
        (b->kind != CUEMU_MEM_DEVICE && b->kind != CUEMU_MEM_MANAGED &&
         !(b->kind == CUEMU_MEM_HOST_PINNED && b->pool))) {
        cudaError_t e = bad_free(api, devPtr, "cudaMalloc, cudaMallocPitch, cudaMallocManaged "
                                 "or cudaMallocAsync");
        rt_unlock();
        return rt_err(sticky ? (cudaError_t)sticky : e);
    }
    rt_block_check_slack(b, api);
    b->free_file = free_site_file;
    b->free_line = free_site_line;
    free_site_file = NULL;
    free_site_line = 0;
    if (b->pool) rt_pool_return(b);
    else release_block(b);
    rt_unlock();
    sticky = cuemu_sticky_error();
    return sticky ? rt_err((cudaError_t)sticky) : cudaSuccess;
}

/* cudaFree waits for the device (queued work may still use the memory); a dead context still
   lets the program clean up: free, then report the fault. */
cudaError_t (cudaFree)(void *devPtr)
{
    if (devPtr) rt_drain_all();
    return rt_free_device_now(devPtr, "cudaFree");
}

cudaError_t (cudaFreeHost)(void *ptr)
{
    if (ptr) rt_drain_all();   /* queued copies may still use it */
    int sticky = cuemu_sticky_error();
    if (!ptr) return sticky ? rt_err((cudaError_t)sticky) : cudaSuccess;
    rt_lock();
    rt_block *b = rt_registry_find(ptr);
    if (!b || b->base != (char *)ptr || b->kind != CUEMU_MEM_HOST_PINNED) {
        cudaError_t e = bad_free("cudaFreeHost", ptr, "cudaMallocHost or cudaHostAlloc");
        rt_unlock();
        return rt_err(sticky ? (cudaError_t)sticky : e);
    }
    rt_block_check_slack(b, "cudaFreeHost");
    release_block(b);
    rt_unlock();
    sticky = cuemu_sticky_error();
    return sticky ? rt_err((cudaError_t)sticky) : cudaSuccess;
}

/* ---- registered host memory ------------------------------------------------------------ */
cudaError_t (cudaHostRegister)(void *ptr, size_t size, unsigned int flags)
{
    RT_ENTER();
    if (!ptr || size == 0 || (uintptr_t)ptr > UINTPTR_MAX - size) return rt_err(cudaErrorInvalidValue);
    if (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped |
                            cudaHostRegisterIoMemory | cudaHostRegisterReadOnly))
        return rt_err(cudaErrorInvalidValue);
    cudaError_t e = cudaSuccess;
    rt_lock();
    rt_block *o = registry_overlap((const char *)ptr, size);
    if (o) {
        if (o->kind == CUEMU_MEM_HOST_REGISTERED) {
            e = cudaErrorHostMemoryAlreadyRegistered;
        } else if (o->kind == CUEMU_MEM_HOST_PINNED) {
            /* cudaMallocHost memory: an H200 said cudaErrorInvalidValue (2026-11-30) */
            cuemu_diag("cudaHostRegister(%p, %zu): the range is cudaMallocHost memory (allocated "
                       "at %s:%d), pinned already", ptr, size, site_file(o->file), o->line);
            e = cudaErrorInvalidValue;
        } else {
            cuemu_diag("cudaHostRegister(%p, %zu): the range overlaps %s allocated at %s:%d",
                       ptr, size, kind_name(o->kind), site_file(o->file), o->line);
            e = cudaErrorInvalidValue;
        }
    } else {
        rt_block *b = (rt_block *)calloc(1, sizeof *b);
        if (!b) e = cudaErrorMemoryAllocation;
        else {
            b->base = b->ext = (char *)ptr;
            b->size = b->ext_len = size;
            b->kind = CUEMU_MEM_HOST_REGISTERED;
            b->flags = flags;
            b->serial = ++serial_counter;
            rt_registry_add(b);
        }
    }
    rt_unlock();
    return rt_err(e);
}

cudaError_t (cudaHostUnregister)(void *ptr)
{
    RT_ENTER();
    rt_drain_all();   /* queued copies may still use it */
    rt_lock();
    rt_block *b = ptr ? rt_registry_find(ptr) : NULL;
    if (!b || b->base != (char *)ptr || b->kind != CUEMU_MEM_HOST_REGISTERED) {
        rt_unlock();
        return rt_err(cudaErrorHostMemoryNotRegistered);
    }
    free(b->acc_list);
    rt_registry_remove(b);
    free(b);
    rt_unlock();
    return cudaSuccess;
}

static rt_block *host_block(const void *p)
{
    rt_block *b = p ? rt_registry_find(p) : NULL;
    if (b && (b->kind == CUEMU_MEM_HOST_PINNED || b->kind == CUEMU_MEM_HOST_REGISTERED) &&
        (const char *)p >= b->base && (const char *)p < b->base + b->size)
        return b;
    return NULL;
}

/* Unified addressing: a pinned page has the same address on the device. */
cudaError_t (cudaHostGetDevicePointer)(void **pDevice, void *pHost, unsigned int flags)
{
    RT_ENTER();
    if (!pDevice || flags != 0) return rt_err(cudaErrorInvalidValue);
    rt_lock();
    rt_block *b = host_block(pHost);
    rt_unlock();
    if (!b) return rt_err(cudaErrorInvalidValue);
    *pDevice = pHost;
    return cudaSuccess;
}

cudaError_t (cudaHostGetFlags)(unsigned int *pFlags, void *pHost)
{
    RT_ENTER();
    if (!pFlags) return rt_err(cudaErrorInvalidValue);
    rt_lock();
    rt_block *b = host_block(pHost);
    if (b) *pFlags = b->flags;
    rt_unlock();
    return b ? cudaSuccess : rt_err(cudaErrorInvalidValue);
}

cudaError_t (cudaPointerGetAttributes)(struct cudaPointerAttributes *attributes, const void *ptr)
{
    RT_ENTER();
    if (!attributes) return rt_err(cudaErrorInvalidValue);
    memset(attributes, 0, sizeof *attributes);
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = cudaInvalidDeviceId;
    rt_lock();
    rt_block *b = ptr ? rt_registry_find(ptr) : NULL;
    if (b && (const char *)ptr >= b->base && (const char *)ptr < b->base + b->size) {
        attributes->device = b->kind == CUEMU_MEM_SYMBOL ? rt_cur_dev() : b->device;
        switch (b->kind) {
        case CUEMU_MEM_DEVICE:
        case CUEMU_MEM_SYMBOL:
            attributes->type = cudaMemoryTypeDevice;
            attributes->devicePointer = (void *)ptr;
            break;
        case CUEMU_MEM_MANAGED:
            attributes->type = cudaMemoryTypeManaged;
            attributes->devicePointer = attributes->hostPointer = (void *)ptr;
            break;
        default:
            attributes->type = cudaMemoryTypeHost;
            attributes->devicePointer = attributes->hostPointer = (void *)ptr;
            break;
        }
    }
    rt_unlock();
    return cudaSuccess;
}

/* ---- sets and copies -------------------------------------------------------------------- */
#define LOC_BIT(l) (1u << (l))
#define HOSTISH   (LOC_BIT(RT_LOC_HOST) | LOC_BIT(RT_LOC_MANAGED) | LOC_BIT(RT_LOC_PINNED))
#define DEVICEISH (LOC_BIT(RT_LOC_DEVICE) | LOC_BIT(RT_LOC_MANAGED) | LOC_BIT(RT_LOC_PINNED))

static const char *const kind_names[] = {
    "cudaMemcpyHostToHost", "cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost",
    "cudaMemcpyDeviceToDevice", "cudaMemcpyDefault"
};
static const unsigned src_ok[5] = { HOSTISH, HOSTISH, DEVICEISH, DEVICEISH, HOSTISH | DEVICEISH };
static const unsigned dst_ok[5] = { HOSTISH, DEVICEISH, HOSTISH, DEVICEISH, HOSTISH | DEVICEISH };

static const char *loc_name(enum rt_loc l)
{
    switch (l) {
    case RT_LOC_HOST: return "host memory not known to CUDA";
    case RT_LOC_DEVICE: return "device memory";
    case RT_LOC_MANAGED: return "managed memory";
    case RT_LOC_PINNED: return "pinned host memory";
    }
    return "memory";
}

static void report_kind(const char *api, enum cudaMemcpyKind kind, const char *role, const void *p,
                        enum rt_loc l)
{
    cuemu_alloc_info ai;
    if (l != RT_LOC_HOST && cuemu_alloc_lookup(p, &ai) && ai.file)
        cuemu_diag("%s: %s, but the %s %p is %s (allocated at %s:%d)", api, kind_names[kind], role, p,
                   loc_name(l), ai.file, ai.line);
    else
        cuemu_diag("%s: %s, but the %s %p is %s", api, kind_names[kind], role, p, loc_name(l));
}

/* Validate a copy of two spans like CUDA does: the direction must be a real one, and with
   unified addressing CUDA knows where each pointer lives, so a kind that contradicts it is
   cudaErrorInvalidValue. */
static cudaError_t check_copy(void *dst, size_t dspan, const void *src, size_t sspan,
                              enum cudaMemcpyKind kind, const char *api, enum rt_loc *dlp,
                              enum rt_loc *slp)
{
    enum rt_loc dl = RT_LOC_HOST, sl = RT_LOC_HOST;
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    cudaError_t e = rt_classify(dst, dspan, api, "destination", &dl);
    if (e == cudaSuccess) e = rt_classify(src, sspan, api, "source", &sl);
    if (e != cudaSuccess) return e;
    if (!(src_ok[kind] & LOC_BIT(sl))) {
        report_kind(api, kind, "source", src, sl);
        return cudaErrorInvalidValue;
    }
    if (!(dst_ok[kind] & LOC_BIT(dl))) {
        report_kind(api, kind, "destination", dst, dl);
        return cudaErrorInvalidValue;
    }
    *dlp = dl;
    *slp = sl;
    return cudaSuccess;
}

/* The device of the device allocation holding p, or -1. */
static int block_device(const void *p)
{
    rt_lock();
    rt_block *b = p ? rt_registry_find(p) : NULL;
    int d = b && b->kind == CUEMU_MEM_DEVICE ? b->device : -1;
    rt_unlock();
    return d;
}

/* dst and src are device memory of two different devices. */
static int cross_device(const void *dst, const void *src)
{
    if (rt_ndev() == 1) return 0;
    int dd = block_device(dst), sd = block_device(src);
    return dd >= 0 && sd >= 0 && dd != sd;
}

/* cudaMemcpyPeer (and a blocking copy between two devices' memory) is "serialized with respect
   to all pending and future asynchronous work in to the current device, srcDevice, and
   dstDevice": the work queued on those devices runs first, and the copy then runs at once, so
   nothing queued later can overtake it. */
static void peer_serialise(int src_dev, int dst_dev)
{
    rt_drain_device(rt_cur_dev());
    if (src_dev >= 0 && src_dev != rt_cur_dev()) rt_drain_device(src_dev);
    if (dst_dev >= 0 && dst_dev != rt_cur_dev() && dst_dev != src_dev) rt_drain_device(dst_dev);
}

/* Queues a (2D) copy on stream, as CUDA's "API synchronization behavior" describes:
   blocking (cudaMemcpy*):
     - pageable host to device: "a stream sync is performed before the copy is initiated. The
       function will return once the pageable buffer has been copied to the staging memory",
       the copy itself may still be queued;
     - pinned host to device: "synchronous with respect to the host";
     - device to host: "returns only once the copy has completed";
     - device to device: "no host-side synchronization is performed";
     - host to host: "fully synchronous with respect to the host".
   asynchronous (cudaMemcpy*Async): queued; a pageable source is staged at the call (so it may be
     reused on return), and a pageable destination is written before the call returns ("might
     be synchronous"; the emulator takes the side that never writes a host buffer the program
     may already have freed). */
static cudaError_t queue_copy(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream, int blocking, const char *api)
{
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    if (width == 0 || height == 0) return cudaSuccess;
    size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
    enum rt_loc dl, sl;
    cudaError_t e = check_copy(dst, dspan, src, sspan, kind, api, &dl, &sl);
    if (e != cudaSuccess) return e;
    rt_op *op = rt_op_new(RT_OP_COPY, api);
    if (!op) return cudaErrorMemoryAllocation;
    rt_op_copy(op, dst, dpitch, src, spitch, width, height, 0, dl != RT_LOC_HOST, sl != RT_LOC_HOST);
    rt_lock();
    if (dl != RT_LOC_HOST) rt_op_access(op, dst, dspan, 1);
    if (sl != RT_LOC_HOST) rt_op_access(op, src, sspan, 0);
    rt_unlock();
    int now;
    if (dl == RT_LOC_HOST) {
        now = 1;
    } else if (sl == RT_LOC_HOST) {
        if (blocking) rt_drain_stream(stream);
        if (rt_op_stage(op) != 0) { rt_op_free_ptr(op, NULL); return cudaErrorMemoryAllocation; }
        /* Several devices: the blocking copy is done when it returns. Programs (NVIDIA's
           simpleP2P among them) read the memory from another device's stream right after it,
           which nothing else orders; with one device the legacy stream orders it. */
        now = blocking && rt_ndev() > 1;
    } else {
        /* device to device: no host synchronisation, except between two devices (below) */
        now = blocking && !(dl == RT_LOC_DEVICE && sl == RT_LOC_DEVICE && !cross_device(dst, src));
    }
    return rt_submit(op, stream, now);
}

/* The checks a synchronising copy makes after it ran: a canary hit by an earlier kernel. */
static cudaError_t after_blocking(const char *api)
{
    rt_check_all_slack(api);
    if (cuemu_sticky_error()) return rt_err((cudaError_t)cuemu_sticky_error());
    int e = cuemu_take_async_error();
    return e ? rt_err((cudaError_t)e) : cudaSuccess;
}

cudaError_t (cudaMemcpy)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    RT_ENTER();
    if (count && cross_device(dst, src)) peer_serialise(block_device(src), block_device(dst));
    cudaError_t e = queue_copy(dst, count, src, count, count, 1, kind, 0, 1, "cudaMemcpy");
    if (e != cudaSuccess) return rt_err(e);
    return after_blocking("cudaMemcpy");
}

cudaError_t (cudaMemcpyAsync)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    return rt_err(queue_copy(dst, count, src, count, count, 1, kind, stream, 0, "cudaMemcpyAsync"));
}

/* ---- copies between devices --------------------------------------------------------------
   With unified addressing the pointers say where they live; the device numbers a peer copy
   names are checked against them, and a mismatch is said (the copy still runs, as CUDA's does
   with unified addressing). */
static cudaError_t check_peer(void *dst, int dstDevice, const void *src, int srcDevice,
                              size_t count, const char *api)
{
    enum rt_loc dl = RT_LOC_HOST, sl = RT_LOC_HOST;
    if (!rt_dev_valid(dstDevice) || !rt_dev_valid(srcDevice)) {
        cuemu_diag("%s: device %d does not exist (%d emulated device%s, CUEMU_DEVICES)", api,
                   rt_dev_valid(dstDevice) ? srcDevice : dstDevice, rt_ndev(), rt_ndev() == 1 ? "" : "s");
        return cudaErrorInvalidDevice;
    }
    cudaError_t e = rt_classify(dst, count, api, "destination", &dl);
    if (e == cudaSuccess) e = rt_classify(src, count, api, "source", &sl);
    if (e != cudaSuccess) return e;
    const void *ptr[2] = { dst, src };
    enum rt_loc loc[2] = { dl, sl };
    int dev[2] = { dstDevice, srcDevice };
    const char *role[2] = { "destination", "source" };
    for (int i = 0; i < 2; i++) {
        if (loc[i] == RT_LOC_HOST) {
            cuemu_diag("%s: the %s %p is host memory not known to CUDA, not device memory", api,
                       role[i], ptr[i]);
            return cudaErrorInvalidValue;
        }
        int bd = block_device(ptr[i]);
        if (bd >= 0 && bd != dev[i]) {
            cuemu_alloc_info ai;
            cuemu_alloc_lookup(ptr[i], &ai);
            cuemu_diag("%s: the %s %p is memory of device %d (allocated at %s:%d), but the call "
                       "names device %d for it", api, role[i], ptr[i], bd, site_file(ai.file),
                       ai.line, dev[i]);
        }
    }
    return cudaSuccess;
}

cudaError_t (cudaMemcpyPeer)(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    RT_ENTER();
    if (count == 0) return rt_dev_valid(dstDevice) && rt_dev_valid(srcDevice) ? cudaSuccess
                                                                           : rt_err(cudaErrorInvalidDevice);
    cudaError_t e = check_peer(dst, dstDevice, src, srcDevice, count, "cudaMemcpyPeer");
    if (e != cudaSuccess) return rt_err(e);
    peer_serialise(srcDevice, dstDevice);
    rt_op *op = rt_op_new(RT_OP_COPY, "cudaMemcpyPeer");
    if (!op) return rt_err(cudaErrorMemoryAllocation);
    rt_op_copy(op, dst, count, src, count, count, 1, 0, 1, 1);
    rt_lock();
    rt_op_access(op, dst, count, 1);
    rt_op_access(op, src, count, 0);
    rt_unlock();
    e = rt_submit(op, 0, 1);
    if (e != cudaSuccess) return rt_err(e);
    return after_blocking("cudaMemcpyPeer");
}

/* Queued on stream (any device's), ordered like any other work on it. */
cudaError_t (cudaMemcpyPeerAsync)(void *dst, int dstDevice, const void *src, int srcDevice,
                                  size_t count, cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (count == 0) return rt_dev_valid(dstDevice) && rt_dev_valid(srcDevice) ? cudaSuccess
                                                                           : rt_err(cudaErrorInvalidDevice);
    cudaError_t e = check_peer(dst, dstDevice, src, srcDevice, count, "cudaMemcpyPeerAsync");
    if (e != cudaSuccess) return rt_err(e);
    return rt_err(queue_copy(dst, count, src, count, count, 1, cudaMemcpyDefault, stream, 0,
                             "cudaMemcpyPeerAsync"));
}

static cudaError_t check_2d(size_t dpitch, size_t spitch, size_t width, size_t height,
                            enum cudaMemcpyKind kind)
{
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    if (width == 0 || height == 0) return cudaSuccess;
    if (dpitch < width || spitch < width || dpitch > MAX_PITCH || spitch > MAX_PITCH)
        return cudaErrorInvalidPitchValue;
    if (height - 1 > (SIZE_MAX - width) / dpitch || height - 1 > (SIZE_MAX - width) / spitch)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

cudaError_t (cudaMemcpy2D)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind)
{
    RT_ENTER();
    cudaError_t e = check_2d(dpitch, spitch, width, height, kind);
    if (e == cudaSuccess)
        e = queue_copy(dst, dpitch, src, spitch, width, height, kind, 0, 1, "cudaMemcpy2D");
    if (e != cudaSuccess) return rt_err(e);
    return after_blocking("cudaMemcpy2D");
}

cudaError_t (cudaMemcpy2DAsync)(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, enum cudaMemcpyKind kind,
                                cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    cudaError_t e = check_2d(dpitch, spitch, width, height, kind);
    if (e == cudaSuccess)
        e = queue_copy(dst, dpitch, src, spitch, width, height, kind, stream, 0, "cudaMemcpy2DAsync");
    return rt_err(e);
}

/* CUDA: "The cudaMemset functions are asynchronous with respect to the host except when the
   target memory is pinned host memory." */
static cudaError_t queue_set(void *p, size_t pitch, int value, size_t width, size_t height,
                             cudaStream_t stream, int blocking, const char *api)
{
    enum rt_loc l;
    if (width == 0 || height == 0) return cudaSuccess;
    size_t span = pitch * (height - 1) + width;
    cudaError_t e = rt_classify(p, span, api, "destination", &l);
    if (e != cudaSuccess) return e;
    if (l == RT_LOC_HOST) {
        cuemu_diag("%s: %p is %s, not device memory", api, p, loc_name(l));
        return cudaErrorInvalidValue;
    }
    rt_op *op = rt_op_new(RT_OP_SET, api);
    if (!op) return cudaErrorMemoryAllocation;
    rt_op_copy(op, p, pitch, NULL, 0, width, height, value, 1, 0);
    rt_lock();
    rt_op_access(op, p, span, 1);
    rt_unlock();
    return rt_submit(op, stream, blocking && l == RT_LOC_PINNED);
}

cudaError_t (cudaMemset)(void *devPtr, int value, size_t count)
{
    RT_ENTER();
    return rt_err(queue_set(devPtr, count, value, count, 1, 0, 1, "cudaMemset"));
}

cudaError_t (cudaMemsetAsync)(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    return rt_err(queue_set(devPtr, count, value, count, 1, stream, 0, "cudaMemsetAsync"));
}

cudaError_t (cudaMemset2D)(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    RT_ENTER();
    if (width == 0 || height == 0) return cudaSuccess;
    if (pitch < width || pitch > MAX_PITCH) return rt_err(cudaErrorInvalidPitchValue);
    if (height - 1 > (SIZE_MAX - width) / pitch) return rt_err(cudaErrorInvalidValue);
    return rt_err(queue_set(devPtr, pitch, value, width, height, 0, 1, "cudaMemset2D"));
}

/* ---- symbols: a __device__ variable is an ordinary global, its address is the symbol ----- */
static cudaError_t symbol_range(const void *symbol, size_t symbolSize, size_t count, size_t offset,
                                const char *api)
{
    if (!symbol) return cudaErrorInvalidSymbol;
    if (symbolSize && (offset > symbolSize || count > symbolSize - offset)) {
        cuemu_diag("%s: %zu bytes at offset %zu do not fit in the %zu-byte symbol", api, count,
                   offset, symbolSize);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* A __device__ variable is read by queued kernels, so a copy to or from it is queued too
   (in stream order); a copy with host memory on one side runs before the call returns, like
   cudaMemcpy's, a pageable source being staged. */
static cudaError_t symbol_copy(void *dst, const void *src, size_t count, int dst_dev, int src_dev,
                               cudaStream_t stream, const char *api)
{
    rt_op *op = rt_op_new(RT_OP_COPY, api);
    if (!op) return cudaErrorMemoryAllocation;
    /* a symbol is not always registered: re-check only what the registry knows */
    rt_op_copy(op, dst, count, src, count, count, 1, 0, 0, 0);
    rt_lock();
    if (dst_dev) rt_op_access(op, dst, count, 1);
    if (src_dev) rt_op_access(op, src, count, 0);
    rt_unlock();
    return rt_submit(op, stream, 1);
}

cudaError_t cuemu_memcpyToSymbol(const void *symbol, size_t symbolSize, const void *src,
                                 size_t count, size_t offset, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    enum rt_loc l;
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return rt_err(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = symbol_range(symbol, symbolSize, count, offset, "cudaMemcpyToSymbol");
    if (e != cudaSuccess || count == 0) return rt_err(e);
    e = rt_classify(src, count, "cudaMemcpyToSymbol", "source", &l);
    if (e == cudaSuccess && !((kind == cudaMemcpyHostToDevice ? HOSTISH :
                               kind == cudaMemcpyDeviceToDevice ? DEVICEISH : HOSTISH | DEVICEISH)
                              & LOC_BIT(l))) {
        cuemu_diag("cudaMemcpyToSymbol: %s, but the source %p is %s", kind_names[kind], src, loc_name(l));
        e = cudaErrorInvalidValue;
    }
    if (e != cudaSuccess) return rt_err(e);
    return rt_err(symbol_copy((char *)symbol + offset, src, count, l != RT_LOC_HOST, 1, stream,
                              "cudaMemcpyToSymbol"));
}

cudaError_t cuemu_memcpyFromSymbol(void *dst, const void *symbol, size_t symbolSize, size_t count,
                                   size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    enum rt_loc l;
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
        return rt_err(cudaErrorInvalidMemcpyDirection);
    cudaError_t e = symbol_range(symbol, symbolSize, count, offset, "cudaMemcpyFromSymbol");
    if (e != cudaSuccess || count == 0) return rt_err(e);
    e = rt_classify(dst, count, "cudaMemcpyFromSymbol", "destination", &l);
    if (e == cudaSuccess && !((kind == cudaMemcpyDeviceToHost ? HOSTISH :
                               kind == cudaMemcpyDeviceToDevice ? DEVICEISH : HOSTISH | DEVICEISH)
                              & LOC_BIT(l))) {
        cuemu_diag("cudaMemcpyFromSymbol: %s, but the destination %p is %s", kind_names[kind], dst,
                   loc_name(l));
        e = cudaErrorInvalidValue;
    }
    if (e != cudaSuccess) return rt_err(e);
    return rt_err(symbol_copy(dst, (const char *)symbol + offset, count, 1, l != RT_LOC_HOST, stream,
                              "cudaMemcpyFromSymbol"));
}

cudaError_t (cudaMemcpyToSymbol)(const void *symbol, const void *src, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind)
{
    return cuemu_memcpyToSymbol(symbol, 0, src, count, offset, kind, 0);
}

cudaError_t (cudaMemcpyFromSymbol)(void *dst, const void *symbol, size_t count, size_t offset,
                                   enum cudaMemcpyKind kind)
{
    return cuemu_memcpyFromSymbol(dst, symbol, 0, count, offset, kind, 0);
}

cudaError_t (cudaMemcpyToSymbolAsync)(const void *symbol, const void *src, size_t count,
                                      size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cuemu_memcpyToSymbol(symbol, 0, src, count, offset, kind, stream);
}

cudaError_t (cudaMemcpyFromSymbolAsync)(void *dst, const void *symbol, size_t count, size_t offset,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return cuemu_memcpyFromSymbol(dst, symbol, 0, count, offset, kind, stream);
}

/* The address of a __device__ variable is registered as device memory, so a kernel may be
   handed it as an argument without being taken for a host pointer. */
cudaError_t cuemu_getSymbolAddress(void **devPtr, const void *symbol, size_t symbolSize)
{
    RT_ENTER();
    if (!devPtr) return rt_err(cudaErrorInvalidValue);
    if (!symbol) return rt_err(cudaErrorInvalidSymbol);
    rt_lock();
    rt_block *b = rt_registry_find(symbol);
    if (!b) {
        b = (rt_block *)calloc(1, sizeof *b);
        if (b) {
            b->base = b->ext = (char *)symbol;
            b->size = b->ext_len = symbolSize ? symbolSize : 1;
            b->kind = CUEMU_MEM_SYMBOL;
            b->serial = ++serial_counter;
            rt_registry_add(b);
        }
    }
    rt_unlock();
    *devPtr = (void *)symbol;
    return cudaSuccess;
}

cudaError_t (cudaGetSymbolAddress)(void **devPtr, const void *symbol)
{
    return cuemu_getSymbolAddress(devPtr, symbol, 0);
}

cudaError_t (cudaGetSymbolSize)(size_t *size, const void *symbol)
{
    RT_ENTER();
    if (!size) return rt_err(cudaErrorInvalidValue);
    rt_lock();
    rt_block *b = symbol ? rt_registry_find(symbol) : NULL;
    int ok = b && b->kind == CUEMU_MEM_SYMBOL && b->base == (const char *)symbol;
    if (ok) *size = b->size;
    rt_unlock();
    return ok ? cudaSuccess : rt_err(cudaErrorInvalidSymbol);
}

/* ---- managed memory: where each page was last prefetched --------------------------------
   Kept per page, as a GPU keeps it: a range whose pages were last prefetched to different
   places answers cudaInvalidDeviceId, as an H200 does. Nothing moves on one host; the
   locations are what cudaMemRangeGetAttribute reports, and the bytes last prefetched to the
   device are counted, now and at their peak, for cuemuManagedDeviceBytes (a teaching aid:
   the most a GPU would have held for those prefetches). Lock held in all of these. */
static size_t managed_dev_bytes, managed_dev_peak;

/* The pages of b that [p, p + count) touches, numbered from the page holding b->base: CUDA
   widens a prefetch or an advice to whole pages. */
static void managed_pages(const rt_block *b, const char *p, size_t count, size_t *first,
                          size_t *last)
{
    size_t pg = rt_page();
    uintptr_t origin = (uintptr_t)b->base / pg * pg;
    *first = ((uintptr_t)p / pg * pg - origin) / pg;
    *last = (((uintptr_t)p + count + pg - 1) / pg * pg - origin) / pg;
}

/* The bytes of b in page i (the first and last pages may hold less than a page of it). */
static size_t managed_page_bytes(const rt_block *b, size_t i)
{
    size_t pg = rt_page();
    uintptr_t lo = (uintptr_t)b->base / pg * pg + i * pg, hi = lo + pg;
    uintptr_t s = (uintptr_t)b->base, e = s + b->size;
    return (size_t)((hi < e ? hi : e) - (lo > s ? lo : s));
}

/* A page's location: its type, and for a device its ordinal in the high bits (pages
   prefetched to two devices are in different places). */
#define PAGE_LOC(type, id) ((type) == cudaMemLocationTypeDevice ? (type) | ((id) << 4) : (type))
#define PAGE_TYPE(v)       ((v) & 15)
#define PAGE_ID(v)         ((v) >> 4)

static void managed_record_prefetch(rt_block *b, const char *p, size_t count, int type, int id)
{
    size_t first, last, npages;
    managed_pages(b, b->base, b->size, &first, &npages);
    if (!b->pages) {
        b->pages = (unsigned char *)calloc(npages, 1);
        if (!b->pages) return;   /* out of host memory: the locations are not tracked */
    }
    managed_pages(b, p, count, &first, &last);
    for (size_t i = first; i < last && i < npages; i++) {
        int was_dev = PAGE_TYPE(b->pages[i]) == cudaMemLocationTypeDevice;
        int is_dev = type == cudaMemLocationTypeDevice;
        if (is_dev && !was_dev) managed_dev_bytes += managed_page_bytes(b, i);
        if (was_dev && !is_dev) managed_dev_bytes -= managed_page_bytes(b, i);
        b->pages[i] = (unsigned char)PAGE_LOC(type, id);
    }
    if (managed_dev_bytes > managed_dev_peak) managed_dev_peak = managed_dev_bytes;
    b->prefetch_type = type;
    b->prefetch_id = type == cudaMemLocationTypeDevice ? id : 0;
}

/* The last prefetch location (PAGE_LOC) of every page of [p, p + count), or
   cudaMemLocationTypeInvalid if they differ or were never prefetched. */
static int managed_last_prefetch(const rt_block *b, const char *p, size_t count)
{
    size_t first, last;
    if (!b->pages) return cudaMemLocationTypeInvalid;
    managed_pages(b, p, count, &first, &last);
    for (size_t i = first + 1; i < last; i++)
        if (b->pages[i] != b->pages[first]) return cudaMemLocationTypeInvalid;
    return b->pages[first];
}

/* cudaMemAdviseSet/UnsetReadMostly on the pages [p, p + count) touches. */
static void managed_read_mostly(rt_block *b, const char *p, size_t count, int on)
{
    size_t first, last, npages;
    managed_pages(b, b->base, b->size, &first, &npages);
    if (!b->rm_pages) {
        if (!on) return;
        b->rm_pages = (unsigned char *)calloc(npages, 1);
        if (!b->rm_pages) return;   /* out of host memory: the advice is not tracked */
    }
    managed_pages(b, p, count, &first, &last);
    for (size_t i = first; i < last && i < npages; i++) b->rm_pages[i] = (unsigned char)on;
}

/* cudaMemRangeAttributeReadMostly: 1 only if every page of the range is read-mostly. */
static int managed_is_read_mostly(const rt_block *b, const char *p, size_t count)
{
    size_t first, last;
    if (!b->rm_pages) return 0;
    managed_pages(b, p, count, &first, &last);
    for (size_t i = first; i < last; i++)
        if (!b->rm_pages[i]) return 0;
    return 1;
}

/* Also for managed pool blocks (pool.c) when they go back to their pool: a block handed out
   again starts with no advice and no prefetch, as a new allocation does. */
void rt_managed_forget(rt_block *b) { managed_forget(b); }

static void managed_forget(rt_block *b)
{
    free(b->rm_pages);
    b->rm_pages = NULL;
    if (b->pages) {
        size_t first, npages;
        managed_pages(b, b->base, b->size, &first, &npages);
        for (size_t i = 0; i < npages; i++)
            if (PAGE_TYPE(b->pages[i]) == cudaMemLocationTypeDevice)
                managed_dev_bytes -= managed_page_bytes(b, i);
        free(b->pages);
        b->pages = NULL;
    }
}

void cuemuManagedDeviceBytes(size_t *now, size_t *peak, int reset_peak)
{
    rt_lock();
    if (reset_peak) managed_dev_peak = managed_dev_bytes;
    if (now) *now = managed_dev_bytes;
    if (peak) *peak = managed_dev_peak;
    rt_unlock();
}

/* ---- managed memory hints: validated like CUDA 13, then nothing to do on one host ------- */
static cudaError_t check_location(struct cudaMemLocation loc)
{
    switch (loc.type) {
    case cudaMemLocationTypeDevice:
        return rt_dev_valid(loc.id) ? cudaSuccess : cudaErrorInvalidDevice;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNuma:
    case cudaMemLocationTypeHostNumaCurrent:
        return cudaSuccess;
    default:
        return cudaErrorInvalidValue;
    }
}

static cudaError_t check_managed(const void *p, size_t count, const char *api)
{
    enum rt_loc l;
    if (count == 0) return cudaErrorInvalidValue;
    cudaError_t e = rt_classify(p, count, api, "managed", &l);
    if (e != cudaSuccess) return e;
    if (l != RT_LOC_MANAGED) {
        /* This device reports pageableMemoryAccess = 0: only managed memory migrates. */
        cuemu_diag("%s: %p is %s, not managed memory", api, p, loc_name(l));
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

cudaError_t (cudaMemPrefetchAsync)(const void *devPtr, size_t count, struct cudaMemLocation location,
                                   unsigned int flags, cudaStream_t stream)
{
    RT_ENTER();
    if (!rt_stream_valid(stream)) return rt_err(cudaErrorInvalidResourceHandle);
    if (flags != 0) return rt_err(cudaErrorInvalidValue);
    cudaError_t e = check_location(location);
    if (e == cudaSuccess) e = check_managed(devPtr, count, "cudaMemPrefetchAsync");
    if (e == cudaSuccess) {
        rt_lock();
        rt_block *b = rt_registry_find(devPtr);
        if (b) managed_record_prefetch(b, (const char *)devPtr, count, location.type, location.id);
        rt_unlock();
        rt_stream_log_note(stream, RT_LOG_PREFETCH,
                           location.type == cudaMemLocationTypeDevice ? location.id : cudaCpuDeviceId);
    }
    return rt_err(e);
}

cudaError_t (cudaMemAdvise)(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                            struct cudaMemLocation location)
{
    RT_ENTER();
    if ((int)advice < cudaMemAdviseSetReadMostly || (int)advice > cudaMemAdviseUnsetAccessedBy)
        return rt_err(cudaErrorInvalidValue);
    cudaError_t e = cudaSuccess;
    if (advice != cudaMemAdviseSetReadMostly && advice != cudaMemAdviseUnsetReadMostly)
        e = check_location(location);
    /* An H200 with CUDA 13.0 answered a bad device here with cudaErrorInvalidValue (while
       cudaMemPrefetchAsync says cudaErrorInvalidDevice), measured 2026-11-30. */
    if (e == cudaErrorInvalidDevice) e = cudaErrorInvalidValue;
    if (e == cudaSuccess) e = check_managed(devPtr, count, "cudaMemAdvise");
    if (e != cudaSuccess) return rt_err(e);
    rt_stream_log_note(0, RT_LOG_ADVICE, (int)advice);
    /* Read-mostly is kept per page, as on a GPU (advice on part of an allocation covers the
       pages of that part); the other advice per allocation. */
    rt_lock();
    rt_block *b = rt_registry_find(devPtr);
    /* accessed-by: bit d for device d, bit RT_MAX_DEVICES for the host */
    int bit = location.type == cudaMemLocationTypeDevice ? 1 << location.id : 1 << RT_MAX_DEVICES;
    if (b) switch (advice) {
    case cudaMemAdviseSetReadMostly: managed_read_mostly(b, (const char *)devPtr, count, 1); break;
    case cudaMemAdviseUnsetReadMostly: managed_read_mostly(b, (const char *)devPtr, count, 0); break;
    case cudaMemAdviseSetPreferredLocation:
        b->pref_type = location.type;
        b->pref_id = location.type == cudaMemLocationTypeDevice ? location.id : 0;
        break;
    case cudaMemAdviseUnsetPreferredLocation: b->pref_type = cudaMemLocationTypeInvalid; break;
    case cudaMemAdviseSetAccessedBy: b->accessed_by |= bit; break;
    case cudaMemAdviseUnsetAccessedBy: b->accessed_by &= ~bit; break;
    }
    rt_unlock();
    return cudaSuccess;
}

/* The int form of a location: a device ordinal, cudaCpuDeviceId for the host, or
   cudaInvalidDeviceId when there is none. */
static int location_as_device(int type, int id)
{
    if (type == cudaMemLocationTypeDevice) return id;
    if (type == cudaMemLocationTypeInvalid) return cudaInvalidDeviceId;
    return cudaCpuDeviceId;
}

cudaError_t (cudaMemRangeGetAttribute)(void *data, size_t dataSize, enum cudaMemRangeAttribute attribute,
                                       const void *devPtr, size_t count)
{
    RT_ENTER();
    if (!data || dataSize < sizeof(int) || dataSize % sizeof(int)) return rt_err(cudaErrorInvalidValue);
    if (attribute != cudaMemRangeAttributeAccessedBy && dataSize != sizeof(int))
        return rt_err(cudaErrorInvalidValue);
    cudaError_t e = check_managed(devPtr, count, "cudaMemRangeGetAttribute");
    if (e != cudaSuccess) return rt_err(e);
    int *out = (int *)data;
    rt_lock();
    rt_block *b = rt_registry_find(devPtr);
    switch (attribute) {
    case cudaMemRangeAttributeReadMostly:
        *out = managed_is_read_mostly(b, (const char *)devPtr, count);
        break;
    case cudaMemRangeAttributePreferredLocation: *out = location_as_device(b->pref_type, b->pref_id); break;
    case cudaMemRangeAttributePreferredLocationType: *out = b->pref_type; break;
    case cudaMemRangeAttributePreferredLocationId: *out = b->pref_id; break;
    case cudaMemRangeAttributeLastPrefetchLocation: {
        int v = managed_last_prefetch(b, (const char *)devPtr, count);
        *out = location_as_device(PAGE_TYPE(v), PAGE_ID(v));
        break;
    }
    case cudaMemRangeAttributeLastPrefetchLocationType:
        *out = PAGE_TYPE(managed_last_prefetch(b, (const char *)devPtr, count));
        break;
    case cudaMemRangeAttributeLastPrefetchLocationId: {
        int v = managed_last_prefetch(b, (const char *)devPtr, count);
        *out = v != cudaMemLocationTypeInvalid ? PAGE_ID(v) : b->prefetch_id;
        break;
    }
    case cudaMemRangeAttributeAccessedBy: {
        size_t n = dataSize / sizeof(int), k = 0;
        for (int d = 0; d < RT_MAX_DEVICES; d++)
            if ((b->accessed_by & (1 << d)) && k < n) out[k++] = d;
        if ((b->accessed_by & (1 << RT_MAX_DEVICES)) && k < n) out[k++] = cudaCpuDeviceId;
        while (k < n) out[k++] = cudaInvalidDeviceId;
        break;
    }
    default: e = cudaErrorInvalidValue; break;
    }
    rt_unlock();
    return rt_err(e);
}

cudaError_t (cudaMemGetInfo)(size_t *free, size_t *total)
{
    RT_ENTER();
    if (!free || !total) return rt_err(cudaErrorInvalidValue);
    rt_lock();
    size_t used = used_mem[rt_cur_dev()];
    *total = rt_device_total();
    *free = used > *total ? 0 : *total - used;
    rt_unlock();
    return cudaSuccess;
}

/* ---- cudaDeviceReset's part: every allocation and registration goes ------------------ */
void rt_memory_reset(void)
{
    rt_lock();
    for (size_t i = 0; i < reg_n; i++) {
        rt_block *b = reg[i];
        if (b->data) rt_shared_unmap(b->ext, b->ext_len);
        free(b->pages);
        free(b->rm_pages);
        free(b->acc_list);
        free(b);
    }
    reg_n = 0;
    for (unsigned k = 0; k < FREED_RING; k++) {
        if (ring[k].own) rt_shared_unmap(ring[k].own, ring[k].own_len);
        memset(&ring[k], 0, sizeof ring[k]);
    }
    ring_next = 0;
    ndev_opened = 0;
    memset(used_mem, 0, sizeof used_mem);
    managed_dev_bytes = managed_dev_peak = 0;
    rt_unlock();
}
