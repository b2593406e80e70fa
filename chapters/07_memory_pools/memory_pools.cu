// SPDX-License-Identifier: MIT
/*
 * 07 memory_pools: why allocation inside a loop is slow, and the pools that make it cheap.
 *
 * cudaMalloc and cudaFree are driver calls (which may change the GPU's page tables, and cudaFree
 * may synchronise the device): tens of microseconds each. A pool asks the driver once and then
 * hands out pieces of what it holds, with no driver call and no synchronisation. Two kinds here:
 * - tpool, the pool you write: one cudaMalloc, carved by a bump pointer (an arena) into blocks
 *   of power-of-two size classes, freed blocks kept on one free list per class and reused;
 * - CUDA's own stream-ordered allocator (cudaMallocAsync / cudaMallocFromPoolAsync /
 *   cudaFreeAsync on a cudaMemPool_t), whose release threshold decides what it keeps.
 *
 * Build: make                 Run: make run CH=07 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 07.1 .. 07.4 here, 07.5 in stream_ordered.cu
 *                             (grep -n "TODO(student)" *.cu)
 * Not thread-safe: one host thread per pool (Python calls it from one thread).
 */
#include "tut_check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- the pool's errors: Python raises tut.LibraryError with the name --------------------------
#define TPOOL_ERR_SIZE        (-101)   /* 0 bytes, or more than the whole pool */
#define TPOOL_ERR_FULL        (-102)   /* no free block of the class and no room to carve; or
                                          TPOOL_MAX_POOLS pools live already */
#define TPOOL_ERR_DOUBLE_FREE (-103)   /* the block is already free */
#define TPOOL_ERR_FOREIGN     (-104)   /* not the start of a block this pool handed out */
#define TPOOL_ERR_HANDLE      (-105)   /* not a live pool: destroyed, or never created */

/* Records the error under its own name and jumps to cleanup (needs `status` and `cleanup:`). */
#define TPOOL_FAIL(code, ...)                                                     \
    do {                                                                          \
        status = tut_record_error(code, #code, __FILE__, __LINE__, __VA_ARGS__); \
        goto cleanup;                                                             \
    } while (0)

// ---- tpool: the data structure -----------------------------------------------------------------

/* Every block starts on a 256-byte boundary, the alignment cudaMalloc itself promises, so a
   kernel may use any type (float4, double2...) on any block. Block sizes are 256 << class. */
#define TPOOL_ALIGN     256
#define TPOOL_CLASSES   40
#define TPOOL_MAX_POOLS 64
#define TPOOL_MAX_BYTES (4ull << 30)   /* block_at[] needs 4 bytes of host memory per 256 */

typedef struct {
    size_t       offset;      /* from the pool's base: a multiple of TPOOL_ALIGN */
    size_t       bytes;       /* what the live block's tpool_alloc asked for */
    int          klass;       /* holds TPOOL_ALIGN << klass bytes, for ever */
    int          live;        /* handed out by tpool_alloc and not freed since */
    int          next_free;   /* the next block on this class's free list; -1 ends it */
    int          pending;     /* freed by tpool_free_async: `freed` guards the block */
    cudaStream_t freed_on;    /* ... on this stream, whose work may still be using it. A
                                 handle compared by value: if that stream were destroyed with
                                 work in flight and a new stream got the same handle, the
                                 wait would be skipped. A limit of this small pool: finish a
                                 stream's work before destroying it. */
    cudaEvent_t  freed;       /* ... and this event, recorded on freed_on at the free */
} tpool_block;

/* Read by Python as a ctypes Structure of the same fields, in the same order. */
typedef struct {
    unsigned long long capacity;       /* bytes in the one cudaMalloc */
    unsigned long long arena_top;      /* bytes carved so far: [0, arena_top) */
    unsigned long long live_blocks;
    unsigned long long live_bytes;     /* class sizes of the live blocks */
    unsigned long long live_high;      /* the most live_bytes ever */
    unsigned long long requested;      /* bytes asked for by the live blocks (<= live_bytes) */
    unsigned long long cached_bytes;   /* bytes in free lists, waiting for reuse */
    unsigned long long allocs, frees;
    unsigned long long carved;         /* allocations served from the arena's top */
    unsigned long long reused;         /* allocations served from a free list */
    unsigned long long stream_waits;   /* reuses that made a stream wait for another's free */
    unsigned long long base;           /* the device address of the cudaMalloc */
} tpool_stats;

struct tpool {
    char        *base;
    size_t       capacity, top;               /* the arena: [base, base + top) is carved */
    int          free_head[TPOOL_CLASSES];    /* first free block of each class; -1: none */
    tpool_block *blocks;                      /* every block ever carved, by index */
    int          nblocks, blocks_cap;
    int         *block_at;                    /* per 256-byte granule: 1 + index of the block
                                                 that starts there, 0 if none does */
    tpool_stats  stats;
};

/* The live pools. A handle is checked against this list before it is used, so a destroyed
   pool is reported, not dereferenced. (A new pool may get a destroyed one's address; the
   Python wrapper never hands a dead handle to C, this is the second line of defence.) */
static struct tpool *tpool_live[TPOOL_MAX_POOLS];

static int tpool_is_live(const struct tpool *p)
{
    for (int i = 0; p != NULL && i < TPOOL_MAX_POOLS; i++)
        if (tpool_live[i] == p)
            return 1;
    return 0;
}

#define TPOOL_CHECK_HANDLE(p)                                                            \
    do {                                                                                 \
        if (!tpool_is_live(p))                                                           \
            TPOOL_FAIL(TPOOL_ERR_HANDLE, "%p is not a live tpool (destroyed already, or " \
                       "never created by tpool_create).", (void *)(p));                  \
    } while (0)

/* The smallest class whose blocks hold `bytes`: 256 -> 0, 257..512 -> 1, ... */
static int tpool_class_of(size_t bytes)
{
    int k = 0;
    while (((size_t)TPOOL_ALIGN << k) < bytes)
        k++;
    return k;
}

static size_t tpool_class_bytes(int k) { return (size_t)TPOOL_ALIGN << k; }

/* The block that starts at ptr, or NULL: outside the carved arena, not on a 256-byte
   boundary, or inside a block rather than at its start. Reads nothing at ptr. */
static tpool_block *tpool_find(struct tpool *p, const void *ptr)
{
    uintptr_t a = (uintptr_t)ptr, base = (uintptr_t)p->base;
    if (a < base || a >= base + p->top || (a - base) % TPOOL_ALIGN != 0)
        return NULL;
    int i = p->block_at[(a - base) / TPOOL_ALIGN] - 1;
    return i < 0 ? NULL : &p->blocks[i];
}

/* Records a new block of class k at `offset` (host bookkeeping only); *index gets its index. */
__attribute__((unused))   /* unused only until 07.1 calls it */
static int tpool_add_block(struct tpool *p, size_t offset, int k, int *index)
{
    int status = 0;
    if (p->nblocks == p->blocks_cap) {
        int cap = p->blocks_cap ? 2 * p->blocks_cap : 64;
        tpool_block *grown = (tpool_block *)realloc(p->blocks, cap * sizeof *grown);
        if (grown == NULL) {   /* the host is out of memory: CUDA's own word for it */
            status = tut_record((int)cudaErrorMemoryAllocation, "realloc(p->blocks, ...)",
                                __FILE__, __LINE__);
            goto cleanup;
        }
        p->blocks = grown;
        p->blocks_cap = cap;
    }
    *index = p->nblocks++;
    memset(&p->blocks[*index], 0, sizeof(tpool_block));
    p->blocks[*index].offset = offset;
    p->blocks[*index].klass = k;
    p->blocks[*index].next_free = -1;
    p->block_at[offset / TPOOL_ALIGN] = *index + 1;
cleanup:
    return status;
}

// ---- tpool: create and destroy (given) ---------------------------------------------------------

/* One cudaMalloc of `capacity` bytes (rounded up to 256): the only device allocation the pool
   ever makes. Everything else is host bookkeeping. */
extern "C" int tpool_create(struct tpool **out, size_t capacity)
{
    int status = 0, slot = -1;
    struct tpool *p = NULL;

    TUT_REQUIRE(out != NULL);
    *out = NULL;
    if (capacity == 0 || capacity > TPOOL_MAX_BYTES)
        TPOOL_FAIL(TPOOL_ERR_SIZE, "a tpool holds 1 byte to %llu bytes, not %zu.",
                   TPOOL_MAX_BYTES, capacity);
    capacity = (capacity + TPOOL_ALIGN - 1) / TPOOL_ALIGN * TPOOL_ALIGN;
    for (int i = 0; i < TPOOL_MAX_POOLS && slot < 0; i++)
        if (tpool_live[i] == NULL)
            slot = i;
    if (slot < 0)
        TPOOL_FAIL(TPOOL_ERR_FULL, "%d tpools are live already: destroy one first.",
                   TPOOL_MAX_POOLS);
    p = (struct tpool *)calloc(1, sizeof *p);
    if (p != NULL)
        p->block_at = (int *)calloc(capacity / TPOOL_ALIGN, sizeof(int));
    if (p == NULL || p->block_at == NULL) {
        status = tut_record((int)cudaErrorMemoryAllocation, "calloc (the pool's host tables)",
                            __FILE__, __LINE__);
        goto cleanup;
    }
    CUDA_CHECK(cudaMalloc(&p->base, capacity));
    p->capacity = capacity;
    for (int k = 0; k < TPOOL_CLASSES; k++)
        p->free_head[k] = -1;
    p->stats.capacity = capacity;
    p->stats.base = (unsigned long long)(uintptr_t)p->base;
    tpool_live[slot] = p;
    *out = p;
    p = NULL;   /* the caller owns it now */
cleanup:
    if (p != NULL) {   /* failed half way: undo what was done */
        cudaFree(p->base);
        free(p->block_at);
        free(p);
    }
    return status;
}

/* Gives everything back: the one cudaFree, the events, the host tables. Blocks still live die
   with the pool. Work queued on any stream may still be using a block (tpool_free_async says
   only that the stream will be done with it), so the device is synchronised first, explicitly:
   cudaFree may synchronise implicitly, but CUDA does not promise it, and a kernel still running
   on freed memory is a fault, or worse, a write into whatever the driver hands out next. */
extern "C" int tpool_destroy(struct tpool *p)
{
    int status = 0;
    TPOOL_CHECK_HANDLE(p);
    for (int i = 0; i < TPOOL_MAX_POOLS; i++)
        if (tpool_live[i] == p)
            tpool_live[i] = NULL;
    {
        cudaError_t err = cudaDeviceSynchronize();
        const char *what = "cudaDeviceSynchronize()";
        cudaError_t freed = cudaFree(p->base);   /* freed even if the wait failed: no leak */
        if (err == cudaSuccess && freed != cudaSuccess) {
            err = freed;
            what = "cudaFree(p->base)";
        }
        for (int i = 0; i < p->nblocks; i++)
            if (p->blocks[i].freed != NULL)
                cudaEventDestroy(p->blocks[i].freed);
        free(p->blocks);
        free(p->block_at);
        free(p);
        if (err != cudaSuccess)
            status = tut_record((int)err, what, __FILE__, __LINE__);
    }
cleanup:
    return status;
}

extern "C" int tpool_get_stats(struct tpool *p, tpool_stats *out)
{
    int status = 0;
    TPOOL_CHECK_HANDLE(p);
    TUT_REQUIRE(out != NULL);
    *out = p->stats;
cleanup:
    return status;
}

// ---- tpool: the exercises ----------------------------------------------------------------------

/* Called by tpool_alloc and defined below it, with the exercises they belong to: the file
   reads in the exercises' order, 07.1 first. */
static int tpool_pop_free(struct tpool *p, int k);
static int tpool_wait_for_free(struct tpool *p, tpool_block *b, cudaStream_t stream);
static void tpool_push_free(struct tpool *p, int i);

/* A block of at least `bytes`, 256-byte aligned, for work queued on `stream` (0: the legacy
   default stream, which is also right for synchronous calls such as cudaMemcpy). */
extern "C" int tpool_alloc(struct tpool *p, size_t bytes, cudaStream_t stream, void **out)
{
    int status = 0, k, i = -1, popped = 0;
    size_t size;
    tpool_block *b;

    TPOOL_CHECK_HANDLE(p);
    TUT_REQUIRE(out != NULL);
    *out = NULL;
    // TODO(student) 07.1: refuse 0 bytes and more than the pool's capacity with TPOOL_FAIL(TPOOL_ERR_SIZE, "...sentence...", ...) (~3 lines)
    k = tpool_class_of(bytes);
    size = tpool_class_bytes(k);
    i = tpool_pop_free(p, k);   /* 07.2: a freed block of class k, if there is one */
    popped = i >= 0;
    if (i < 0) {
        // TODO(student) 07.1: carve a new block of `size` bytes at the arena's top: TPOOL_ERR_FULL if it does not fit, else tpool_add_block(p, p->top, k, &i), move the top, count p->stats.carved (~6 lines)
        TUT_TODO();
    }
    b = &p->blocks[i];
    status = tpool_wait_for_free(p, b, stream);   /* 07.4: after its stream-ordered free */
    if (status != 0)
        goto cleanup;
    if (popped) {   /* counted once the block is surely handed out */
        p->stats.reused++;
        p->stats.cached_bytes -= size;
    }
    b->live = 1;
    b->bytes = bytes;
    b->next_free = -1;
    p->stats.allocs++;
    p->stats.live_blocks++;
    p->stats.live_bytes += size;
    p->stats.requested += bytes;
    if (p->stats.live_bytes > p->stats.live_high)
        p->stats.live_high = p->stats.live_bytes;
    p->stats.arena_top = p->top;
    *out = p->base + b->offset;
cleanup:
    if (status != 0 && popped)   /* the stream wait failed: the block goes back, still pending */
        tpool_push_free(p, i);
    return status;
}

/* 07.2, part 1: block i goes back on its class's free list. Last in, first out: the block freed
   most recently is the next one handed out, as in most caching allocators (one pointer to move,
   and the memory used last is used again). */
static void tpool_push_free(struct tpool *p, int i)
{
    // TODO(student) 07.2: push block i onto the free list of its class: its next_free is the old head, and it becomes the head (~2 lines)
}

/* 07.2, part 2: the head of class k's free list, taken off the list; -1 if the list is empty.
   tpool_alloc hands it out again before it carves anything new. */
static int tpool_pop_free(struct tpool *p, int k)
{
    int i = -1;
    // TODO(student) 07.2: take the head of class k's free list, if there is one, into i (it stays -1 otherwise) (~3 lines)
    return i;
}

/* The block a free may release: the one that starts at ptr, live. */
static int tpool_check_free(struct tpool *p, void *ptr, tpool_block **found)
{
    int status = 0;
    tpool_block *b = tpool_find(p, ptr);

    *found = NULL;
    // TODO(student) 07.3: a pointer the pool never handed out (b == NULL) is TPOOL_ERR_FOREIGN; a block that is not live is TPOOL_ERR_DOUBLE_FREE; each with a sentence naming the pointer (~6 lines)
    if (b == NULL)
        goto cleanup;   /* a careless pool: ignores what it does not know */
    *found = b;
cleanup:
    return status;
}

/* Both frees end here: not live any more, the statistics, back on its class's free list. */
static void tpool_release(struct tpool *p, tpool_block *b)
{
    b->live = 0;
    p->stats.frees++;
    p->stats.live_blocks--;
    p->stats.live_bytes -= tpool_class_bytes(b->klass);
    p->stats.requested -= b->bytes;
    p->stats.cached_bytes += tpool_class_bytes(b->klass);
    tpool_push_free(p, (int)(b - p->blocks));
}

/* Returns a block the GPU no longer uses (after a synchronisation, or before any kernel got
   it): any stream may have it next, at once. */
extern "C" int tpool_free(struct tpool *p, void *ptr)
{
    int status = 0;
    tpool_block *b = NULL;
    TPOOL_CHECK_HANDLE(p);
    status = tpool_check_free(p, ptr, &b);
    if (status != 0 || b == NULL)
        goto cleanup;
    b->pending = 0;
    tpool_release(p, b);
cleanup:
    return status;
}

/* Stream-ordered free: work queued on `stream` may still be using the block. It is reusable
   at once by allocations on the same stream (a stream runs its work in order); another stream
   must first wait for this moment of `stream`, which an event marks. */
extern "C" int tpool_free_async(struct tpool *p, void *ptr, cudaStream_t stream)
{
    int status = 0;
    tpool_block *b = NULL;
    TPOOL_CHECK_HANDLE(p);
    status = tpool_check_free(p, ptr, &b);
    if (status != 0 || b == NULL)
        goto cleanup;
    if (b->freed == NULL)   /* one event per block, made the first time it is needed */
        CUDA_CHECK(cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming));
    // TODO(student) 07.4: mark this moment of `stream`: record b->freed on it, remember the stream in b->freed_on, and set b->pending (~3 lines)
    TUT_TODO();
    tpool_release(p, b);
cleanup:
    return status;
}

/* 07.4, part 2 (part 1 is the event tpool_free_async records, above): before tpool_alloc
   hands out block b for work on `stream`. A block freed by tpool_free_async (b->pending)
   may still be in use by work queued on b->freed_on before that free; on the same stream,
   that work is ordered before anything queued now. */
static int tpool_wait_for_free(struct tpool *p, tpool_block *b, cudaStream_t stream)
{
    int status = 0;
    if (!b->pending)   /* freed by tpool_free, or never freed: nothing to wait for */
        goto cleanup;
    // TODO(student) 07.4: if the block was freed on another stream, make `stream` wait for the event recorded at the free (cudaStreamWaitEvent), and count it in p->stats.stream_waits (~4 lines)
    b->pending = 0;
cleanup:
    return status;
}
