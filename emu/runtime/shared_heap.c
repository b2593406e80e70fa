/* SPDX-License-Identifier: MIT */
/*
 * shared_heap.c: the emulator's allocations in memory shared with a checking process.
 *
 * With TUT_ISOLATE=1 (common/tut_remote.py) a chapter's library runs in a worker process, and
 * the chapter's driver, which keeps the tests and the verdict, runs in another. The driver views
 * pinned and managed memory as NumPy arrays with no copy, as it does in one process, so that
 * memory must be at the same address in both: the worker (common/tut_worker.py) maps its half of
 * a shared region and names it in CUEMU_SHARED_HEAP="address:length:fd:offset" before it loads
 * the library. Every mapping rt_block_map makes then comes from here (device memory too, so an
 * address the library hands back is in the region, whatever its kind); without the variable
 * nothing changes and each block is its own anonymous mapping.
 *
 * The bookkeeping (free runs) is in this process's private memory. Pages are handed out
 * PROT_NONE, like a fresh anonymous reservation (rt_block_place opens the data pages); a freed
 * range gives its pages back to the kernel (a hole punched in the memfd) and stays PROT_NONE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE                /* fallocate, MAP_* */
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_internal.h"

typedef struct { char *start; size_t len; } run;

static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;
static int state;                  /* 0 not looked yet, 1 on, -1 off */
static char *lo, *hi, *top;        /* [top, hi) never handed out */
static int heap_fd = -1;
static long long heap_off;
static run *runs;                  /* free runs below top, sorted by address, never adjacent */
static size_t nruns, cap_runs;

static void look(void)
{
    const char *s = getenv("CUEMU_SHARED_HEAP");
    state = -1;
    if (!s || !*s) return;
    char *end;
    unsigned long long a = strtoull(s, &end, 0), n = 0, fd = 0, off = 0;
    if (*end == ':') n = strtoull(end + 1, &end, 0);
    if (*end == ':') fd = strtoull(end + 1, &end, 0);
    if (*end == ':') off = strtoull(end + 1, &end, 0);
    long pg = sysconf(_SC_PAGESIZE);
    if (*end || !a || !n || a % (unsigned long long)pg || n % (unsigned long long)pg) return;
    lo = top = (char *)(uintptr_t)a;
    hi = lo + n;
    heap_fd = (int)fd;
    heap_off = (long long)off;
    state = 1;
}

int rt_shared_owns(const void *p)
{
    pthread_mutex_lock(&heap_lock);
    if (!state) look();
    int yes = state == 1 && (const char *)p >= lo && (const char *)p < hi;
    pthread_mutex_unlock(&heap_lock);
    return yes;
}

void *rt_shared_map(size_t len)
{
    pthread_mutex_lock(&heap_lock);
    if (!state) look();
    if (state != 1) { pthread_mutex_unlock(&heap_lock); return NULL; }
    char *p = MAP_FAILED;
    for (size_t i = 0; i < nruns; i++)        /* first fit */
        if (runs[i].len >= len) {
            p = runs[i].start;
            runs[i].start += len;
            runs[i].len -= len;
            if (!runs[i].len) {
                memmove(runs + i, runs + i + 1, (nruns - i - 1) * sizeof *runs);
                nruns--;
            }
            break;
        }
    if (p == MAP_FAILED && (size_t)(hi - top) >= len) {
        p = top;
        top += len;
    }
    pthread_mutex_unlock(&heap_lock);
    /* full: MAP_FAILED, which the caller reports as cudaErrorMemoryAllocation (memory outside
       the region would be memory the checking process cannot see) */
    if (p != MAP_FAILED && mprotect(p, len, PROT_NONE) != 0) {
        rt_shared_unmap(p, len);
        return MAP_FAILED;
    }
    return p;
}

void rt_shared_release(void *p, size_t len)
{
    mprotect(p, len, PROT_NONE);
    fallocate(heap_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              heap_off + ((char *)p - lo), (long long)len);
}

void rt_shared_unmap(void *addr, size_t len)
{
    if (!rt_shared_owns(addr)) { munmap(addr, len); return; }
    char *p = addr;
    rt_shared_release(p, len);
    pthread_mutex_lock(&heap_lock);
    size_t i = 0;
    while (i < nruns && runs[i].start < p) i++;
    int left = i > 0 && runs[i - 1].start + runs[i - 1].len == p;
    int right = i < nruns && p + len == runs[i].start;
    if (left && right) {
        runs[i - 1].len += len + runs[i].len;
        memmove(runs + i, runs + i + 1, (nruns - i - 1) * sizeof *runs);
        nruns--;
    } else if (left) {
        runs[i - 1].len += len;
    } else if (right) {
        runs[i].start = p;
        runs[i].len += len;
    } else {
        if (nruns == cap_runs) {
            size_t cap = cap_runs ? 2 * cap_runs : 64;
            run *r = (run *)realloc(runs, cap * sizeof *r);
            if (!r) { pthread_mutex_unlock(&heap_lock); return; }   /* the range is lost */
            runs = r;
            cap_runs = cap;
        }
        memmove(runs + i + 1, runs + i, (nruns - i) * sizeof *runs);
        runs[i].start = p;
        runs[i].len = len;
        nruns++;
    }
    if (nruns && runs[nruns - 1].start + runs[nruns - 1].len == top) {
        top = runs[nruns - 1].start;
        nruns--;
    }
    pthread_mutex_unlock(&heap_lock);
}
