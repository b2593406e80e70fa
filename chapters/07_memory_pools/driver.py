# SPDX-License-Identifier: MIT
"""Chapter 07 memory_pools: a pool you write in C, CUDA's stream-ordered pools, and a caching
allocator in Python, so that a loop of temporary buffers stops calling cudaMalloc.

From the repository's root (make run uses the exercise tree; TUT_TREE=solutions the solutions):
    make run CH=07                the lesson's demo: statistics, thresholds, reuse across streams
    make run CH=07 ARGS=--check   the tests (make check runs each exercise on its own)
    make run CH=07 ARGS=--bench   alloc + free cost per pair; a chain of kernels with temporaries
    build/venv/bin/python chapters/07_memory_pools/driver.py [--check | --bench]   the same
"""
import ctypes
import functools
import gc
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(7, "07_memory_pools")
I, U, F, P, Z = ctypes.c_int, ctypes.c_uint, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
LL, ULL = ctypes.c_longlong, ctypes.c_ulonglong
KiB, MiB = 1 << 10, 1 << 20
ALIGN = 256                  # every tpool block starts on this boundary (TPOOL_ALIGN)
TPOOL_MAX_BYTES = 4 << 30    # TPOOL_MAX_BYTES in memory_pools.cu
KEEP_ALL = 2**64 - 1         # a release threshold of "never release"
# bench_alloc_pairs / bench_chain kinds (the enum in stream_ordered.cu)
ALLOC_CUDA_MALLOC, ALLOC_CUDA_ASYNC, ALLOC_TPOOL, ALLOC_TPOOL_ASYNC, ALLOC_NONE = range(5)


class TpoolStats(ctypes.Structure):
    """tpool_stats in memory_pools.cu: the same fields, in the same order."""
    _fields_ = [(name, ULL) for name in (
        "capacity", "arena_top", "live_blocks", "live_bytes", "live_high", "requested",
        "cached_bytes", "allocs", "frees", "carved", "reused", "stream_waits", "base")]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int tpool_create(struct tpool **out, size_t capacity)
        tpool_create=lib.bind("tpool_create", [ctypes.POINTER(P), Z]),
        # int tpool_destroy(struct tpool *p)
        tpool_destroy=lib.bind("tpool_destroy", [P]),
        # int tpool_get_stats(struct tpool *p, tpool_stats *out)
        tpool_get_stats=lib.bind("tpool_get_stats", [P, ctypes.POINTER(TpoolStats)]),
        # int tpool_alloc(struct tpool *p, size_t bytes, cudaStream_t stream, void **out)
        tpool_alloc=lib.bind("tpool_alloc", [P, Z, P, ctypes.POINTER(P)]),
        # int tpool_free(struct tpool *p, void *ptr)
        tpool_free=lib.bind("tpool_free", [P, P]),
        # int tpool_free_async(struct tpool *p, void *ptr, cudaStream_t stream)
        tpool_free_async=lib.bind("tpool_free_async", [P, P, P]),
        # int stream_create(cudaStream_t *out)
        stream_create=lib.bind("stream_create", [ctypes.POINTER(P)]),
        # int stream_destroy(cudaStream_t s)
        stream_destroy=lib.bind("stream_destroy", [P]),
        # int stream_synchronize(cudaStream_t s)
        stream_synchronize=lib.bind("stream_synchronize", [P]),
        # int fill_u32(void *d, size_t n, unsigned value, cudaStream_t stream)
        fill_u32=lib.bind("fill_u32", [P, Z, U, P]),
        # int hold_and_check(void *d, size_t n, unsigned id, long long spin,
        #     unsigned *d_mismatches, cudaStream_t stream)
        hold_and_check=lib.bind("hold_and_check", [P, Z, U, LL, P, P]),
        # int chain_step(float *d_x, float *d_scratch, size_t n, float c, float s)
        chain_step=lib.bind("chain_step", [P, P, Z, F, F]),
        # int pools_supported(int *yes)
        pools_supported=lib.bind("pools_supported", [ctypes.POINTER(I)]),
        # int default_pool(cudaMemPool_t *out)
        default_pool=lib.bind("default_pool", [ctypes.POINTER(P)]),
        # int mempool_stats(cudaMemPool_t pool, unsigned long long *out)   (5 values)
        mempool_stats=lib.bind("mempool_stats", [P, P], out=(1,)),
        # int mempool_set_threshold(cudaMemPool_t pool, unsigned long long bytes)
        mempool_set_threshold=lib.bind("mempool_set_threshold", [P, ULL]),
        # int mempool_reset_high(cudaMemPool_t pool)
        mempool_reset_high=lib.bind("mempool_reset_high", [P]),
        # int mempool_trim(cudaMemPool_t pool, size_t keep)
        mempool_trim=lib.bind("mempool_trim", [P, Z]),
        # int mempool_destroy(cudaMemPool_t pool)
        mempool_destroy=lib.bind("mempool_destroy", [P]),
        # int mempool_roundtrip(cudaMemPool_t pool, size_t bytes, int count,
        #     cudaStream_t stream, int sync)
        mempool_roundtrip=lib.bind("mempool_roundtrip", [P, Z, I, P, I]),
        # int mempool_cross_stream(cudaMemPool_t pool, size_t bytes, cudaStream_t s1,
        #     cudaStream_t s2, int wait, long long spin, unsigned long long *addrs)
        mempool_cross_stream=lib.bind("mempool_cross_stream", [P, Z, P, P, I, LL, P], out=(6,)),
        # int mempool_create(cudaMemPool_t *out, unsigned long long threshold)
        mempool_create=lib.bind("mempool_create", [ctypes.POINTER(P), ULL]),
        # int scratch_chain(const float *h_x, float *h_y, size_t n, int steps, float c,
        #     cudaMemPool_t pool, cudaStream_t stream)
        scratch_chain=lib.bind("scratch_chain", [P, P, Z, I, F, P, P], out=(1,)),
        # int bench_alloc_pairs(int kind, size_t bytes, int pairs, int reps, float *times_ms,
        #     struct tpool *tp, cudaStream_t stream)
        bench_alloc_pairs=lib.bind("bench_alloc_pairs", [I, Z, I, I, tut.c_float_p, P, P]),
        # int bench_chain(int kind, size_t n, int steps, int reps, float *times_ms,
        #     struct tpool *tp, cudaStream_t stream)
        bench_chain=lib.bind("bench_chain", [I, Z, I, I, tut.c_float_p, P, P]),
    )


# ---- owners of C handles (tut.Handle): each destroyed exactly once, dead handles never reach C --
class Stream(tut.Handle):
    """A non-blocking CUDA stream (it does not wait for the legacy default stream)."""
    kind = "Stream"

    def __init__(self, lib):
        self._api = c_api(lib)
        handle = P()
        self._api.stream_create(ctypes.byref(handle))
        self._own_handle(handle.value, self._api.stream_destroy)

    def synchronize(self):
        self._api.stream_synchronize(self._live("synchronize"))

    def close(self):
        if self.alive:
            self.synchronize()
        super().close()


def stream_handle(stream):
    """None -> the legacy default stream (0); a live Stream -> its handle; anything else is
    refused here, so a bad stream never reaches C."""
    if stream is None:
        return None
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
    return stream._live("be used as a stream")


class TPool(tut.Handle):
    """The pool you write (memory_pools.cu): one cudaMalloc of `capacity` bytes, carved into
    256-byte aligned blocks. Addresses are plain ints (device pointers)."""
    kind = "TPool"

    def __init__(self, lib, capacity):
        capacity = tut.check_count(capacity, "capacity", minimum=1, maximum=TPOOL_MAX_BYTES)
        self._api = c_api(lib)
        handle = P()
        self._api.tpool_create(ctypes.byref(handle), capacity)
        self._own_handle(handle.value, self._api.tpool_destroy)

    def alloc(self, nbytes, stream=None):
        nbytes = tut.check_count(nbytes, "nbytes", maximum=2**62)   # 0 is C's to refuse
        out = P()
        self._api.tpool_alloc(self._live("alloc"), nbytes, stream_handle(stream),
                              ctypes.byref(out))
        return out.value

    def free(self, addr):
        self._api.tpool_free(self._live("free"), addr)

    def free_async(self, addr, stream):
        self._api.tpool_free_async(self._live("free_async"), addr, stream_handle(stream))

    def stats(self):
        s = TpoolStats()
        self._api.tpool_get_stats(self._live("read its statistics"), ctypes.byref(s))
        return s


def _not_ours():
    """The release of a pool this process does not own (the device's default): nothing."""


class CudaPool(tut.Owner):
    """A cudaMemPool_t: the device's default pool (not owned: never destroyed) or one from
    mempool_create (exercise 07.5), destroyed by close()."""
    kind = "CudaPool"

    def __init__(self, lib, handle, owned):
        self._api, self.handle, self.owned = c_api(lib), handle, owned
        if owned:
            self._own(self._api.mempool_destroy, handle)
        else:
            self._own(_not_ours)

    @classmethod
    def default(cls, lib):
        handle = P()
        c_api(lib).default_pool(ctypes.byref(handle))
        return cls(lib, handle.value, owned=False)

    @classmethod
    def create(cls, lib, threshold):
        handle = P()
        c_api(lib).mempool_create(ctypes.byref(handle), threshold)
        return cls(lib, handle.value, owned=True)

    def _live(self):
        if self.owned and not self.alive:   # the default pool outlives close()
            raise ValueError("CudaPool used after close()")
        return self.handle

    def stats(self):
        out = np.zeros(5, np.uint64)
        self._api.mempool_stats(self._live(), tut.ptr(out))
        keys = ("reserved", "reserved_high", "used", "used_high", "threshold")
        return dict(zip(keys, (int(v) for v in out)))

    def set_threshold(self, nbytes):
        self._api.mempool_set_threshold(self._live(), nbytes)

    def reset_high(self):
        self._api.mempool_reset_high(self._live())

    def trim(self, keep=0):
        self._api.mempool_trim(self._live(), keep)

    def roundtrip(self, nbytes, count, stream, sync=True):
        self._api.mempool_roundtrip(self._live(), nbytes, count, stream_handle(stream), sync)


def pools_supported(lib):
    yes = I(0)
    c_api(lib).pools_supported(ctypes.byref(yes))
    return bool(yes.value)


def require_pools(lib):
    if not pools_supported(lib):
        raise tut.Skip("this device has no stream-ordered memory pools "
                       "(cudaDevAttrMemoryPoolsSupported = 0): cudaMallocAsync and "
                       "cudaMemPoolCreate are not available here")


# ---- a caching allocator in Python ------------------------------------------------------------
class CachedBlock(tut.Owner):
    """Device memory lent by a CachingAllocator. free() (or the end of a `with` block, or the
    garbage collector) gives it back to the cache, not to cudaFree."""
    kind = "CachedBlock"

    def __init__(self, owner, ptr, nbytes, binned):
        self.ptr, self.nbytes, self._binned = ptr, nbytes, binned
        self._own(owner._give_back, ptr, binned)

    def free(self):
        self._release_once("freed")


class CachingAllocator:
    """The idea behind CuPy's MemoryPool and PyTorch's caching allocator, in 40 lines.

    malloc() rounds the size up to a bin (a multiple of 512 bytes) and hands out a cached block
    of that bin if there is one; only a miss calls cudaMalloc. free() puts the block back in the
    cache. cudaFree is called only by empty_cache(). Reuse is safe without any synchronisation
    because every kernel this chapter's Python code launches goes to one stream (the legacy
    default stream): a block freed after a launch is only reused by launches queued after it.
    A block used on another stream would need an event first, as tpool_free_async does."""

    BIN = 512

    def __init__(self, lib):
        self.lib, self._free = lib, {}
        self.stats = dict(cuda_mallocs=0, cuda_frees=0, hits=0, misses=0, bytes_in_use=0,
                          bytes_cached=0, bytes_in_use_high=0)

    def malloc(self, nbytes):
        nbytes = tut.check_count(nbytes, "nbytes", minimum=1, maximum=2**62)
        binned = -(-nbytes // self.BIN) * self.BIN
        cached = self._free.get(binned)
        if cached:
            ptr = cached.pop()
            self.stats["hits"] += 1
            self.stats["bytes_cached"] -= binned
        else:
            raw = P()
            try:
                self.lib.malloc_raw(ctypes.byref(raw), binned)
            except tut.CudaError as e:   # out of memory: give the cache back, try once more
                if e.name != "cudaErrorMemoryAllocation" or not self.stats["bytes_cached"]:
                    raise
                self.lib.clear_last_error()
                self.empty_cache()
                self.lib.malloc_raw(ctypes.byref(raw), binned)
            ptr = raw.value
            self.stats["cuda_mallocs"] += 1
            self.stats["misses"] += 1
        self.stats["bytes_in_use"] += binned
        self.stats["bytes_in_use_high"] = max(self.stats["bytes_in_use_high"],
                                              self.stats["bytes_in_use"])
        return CachedBlock(self, ptr, nbytes, binned)

    def _give_back(self, ptr, binned):
        self._free.setdefault(binned, []).append(ptr)
        self.stats["bytes_in_use"] -= binned
        self.stats["bytes_cached"] += binned

    def empty_cache(self):
        """cudaFree every cached block (blocks still lent out stay lent)."""
        for binned, ptrs in self._free.items():
            while ptrs:
                self.lib.free_raw(ptrs.pop())
                self.stats["cuda_frees"] += 1
                self.stats["bytes_cached"] -= binned


# ---- Python entry points: check arguments before any CUDA call --------------------------------
def fill(lib, addr, nbytes, value, stream=None):
    """Every 32-bit word of [addr, addr + nbytes) gets `value` (nbytes rounded down to words)."""
    c_api(lib).fill_u32(addr, nbytes // 4, value, stream_handle(stream))


def read_u32(lib, addr, nbytes):
    out = tut.poisoned(nbytes // 4, np.uint32)
    lib.dtoh(tut.ptr(out), addr, out.nbytes)
    return out


def scratch_chain(lib, x, steps, c, pool, stream):
    tut.check_array(x, np.float32, "x", ndim=1)
    steps = tut.check_count(steps, "steps")
    if not isinstance(pool, CudaPool):
        raise TypeError(f"pool must be a CudaPool, not {type(pool).__name__}")
    y = tut.poisoned(x.size, np.float32)
    c_api(lib).scratch_chain(tut.ptr(x), tut.ptr(y), x.size, steps, c, pool._live(),
                             stream_handle(stream))
    return y


def chain_reference(x, steps, c):
    """float64: x <- x + 0.5 * (c * x + s) for s = 0 .. steps-1."""
    x = x.astype(np.float64)
    for s in range(steps):
        x = x + 0.5 * (np.float64(np.float32(c)) * x + s)
    return x


# ---- test helpers -------------------------------------------------------------------------------
def expect_library_error(name, fn, what):
    e = tut.expect_raises(tut.LibraryError, fn, f"{what} (want {name})")
    if e.name != name:
        raise AssertionError(f"{what}: got {e.name}, want {name}") from e
    return e


def class_bytes(nbytes):
    """The block size tpool gives a request: the smallest 256 << k that holds it."""
    size = ALIGN
    while size < nbytes:
        size *= 2
    return size


class PoolModel:
    """What tpool must do, in Python: bump-carve class-sized blocks, and reuse freed blocks of
    the same class last-in first-out. Tests compare every address and statistic with it."""

    def __init__(self, base, capacity):
        self.base, self.capacity, self.top = base, capacity, 0
        self.free, self.live = {}, {}          # class bytes -> [addr]; addr -> (bytes, class)
        self.reused = self.carved = 0

    def alloc(self, nbytes):
        size = class_bytes(nbytes)
        if self.free.get(size):
            addr = self.free[size].pop()
            self.reused += 1
        elif size <= self.capacity - self.top:
            addr = self.base + self.top
            self.top += size
            self.carved += 1
        else:
            return None
        self.live[addr] = (nbytes, size)
        return addr

    def release(self, addr):
        _, size = self.live.pop(addr)
        self.free.setdefault(size, []).append(addr)

    def cached(self):
        return sum(size * len(v) for size, v in self.free.items())


def check_against_model(pool, model, what):
    s = pool.stats()
    want = dict(arena_top=model.top, live_blocks=len(model.live),
                live_bytes=sum(sz for _, sz in model.live.values()),
                requested=sum(b for b, _ in model.live.values()),
                cached_bytes=model.cached(), reused=model.reused, carved=model.carved)
    bad = {k: (getattr(s, k), v) for k, v in want.items() if getattr(s, k) != v}
    if bad:
        raise AssertionError(f"{what}: statistics (got, want): {bad}")


def check_no_overlap(lib, blocks, what):
    """blocks: {addr: nbytes}. Aligned, pairwise disjoint by address, and each filled with its
    own id then read back: two blocks sharing memory show as the later fill in the earlier."""
    spans = sorted(blocks.items())
    for addr, _ in spans:
        if addr % ALIGN:
            raise AssertionError(f"{what}: block at {addr:#x} is not {ALIGN}-byte aligned")
    for (a0, n0), (a1, _) in zip(spans, spans[1:]):
        if a0 + n0 > a1:
            raise AssertionError(f"{what}: blocks overlap: {a0:#x} + {n0} bytes > {a1:#x}")
    ids = {addr: 0x1000 + i for i, (addr, _) in enumerate(spans)}
    for addr, nbytes in spans:
        fill(lib, addr, max(nbytes, 4), ids[addr])
    lib.synchronize()
    for addr, nbytes in spans:
        got = read_u32(lib, addr, max(nbytes, 4))
        wrong = np.flatnonzero(got != ids[addr])
        if wrong.size:
            raise AssertionError(f"{what}: block {addr:#x} ({nbytes} bytes) holds "
                                 f"{got[wrong[0]]:#x} at word {wrong[0]}, not its id "
                                 f"{ids[addr]:#x}: another live block shares its memory")


def spin_ticks(ctx):
    """How long the cross-stream test's first kernel keeps its block: about 10 ms of GPU clock
    ticks on a GPU, where the second stream really runs alongside; none on the emulator, where
    the order streams run in is what exposes a missing wait."""
    return 20_000_000 if ctx.backend == "gpu" else 0


# ---- exercises ----------------------------------------------------------------------------------
@CH.exercise(1, "tpool arena: aligned blocks carved one after another, size errors, full pool")
def test_arena(ctx):
    lib, used0 = ctx.lib, ctx.lib.mem_used()
    capacity = MiB + 3 * ALIGN + 100             # not a multiple of 256: rounded up
    with TPool(lib, capacity) as pool:
        s = pool.stats()
        if s.capacity != MiB + 4 * ALIGN or s.arena_top != 0:
            raise AssertionError(f"a new pool: capacity {s.capacity}, top {s.arena_top}")
        model = PoolModel(s.base, s.capacity)
        sizes = [1, 255, 256, 257, 4099, 31, 65537, 7919] + \
            [int(v) for v in ctx.rng.integers(1, 40_000, 200)]
        blocks = {}
        for nbytes in sizes:
            want = model.alloc(nbytes)
            if want is None:   # the arena is full: the pool must say so, and change nothing
                before = pool.stats().as_dict()
                expect_library_error("TPOOL_ERR_FULL", lambda: pool.alloc(nbytes),
                                     f"tpool_alloc({nbytes}) with {model.capacity - model.top} "
                                     f"bytes left to carve")
                if pool.stats().as_dict() != before:
                    raise AssertionError("a failed tpool_alloc changed the statistics")
                break
            got = pool.alloc(nbytes)
            if got != want:
                raise AssertionError(f"tpool_alloc({nbytes}) -> {got:#x}, want {want:#x} "
                                     f"(base + the bytes carved before it, {want - s.base})")
            blocks[got] = nbytes
        else:
            raise AssertionError("the test never filled the pool")
        check_against_model(pool, model, "after carving")
        check_no_overlap(lib, blocks, "carved blocks")
        for bad in (0, s.capacity + 1):
            expect_library_error("TPOOL_ERR_SIZE", lambda: pool.alloc(bad),
                                 f"tpool_alloc({bad}) in a {s.capacity}-byte pool")
    with TPool(lib, 64 * KiB) as small:       # the whole pool in one block, then nothing
        whole = small.alloc(64 * KiB)
        check_no_overlap(lib, {whole: 64 * KiB}, "one block of the whole pool")
        expect_library_error("TPOOL_ERR_FULL", lambda: small.alloc(1), "tpool_alloc(1) when full")
    if lib.mem_used() != used0:
        raise AssertionError(f"{lib.mem_used() - used0} bytes of device memory still in use "
                             f"after tpool_destroy")


@CH.exercise(2, "tpool free lists: freed blocks reused (same class, last freed first)")
def test_free_lists(ctx):
    lib = ctx.lib
    with TPool(lib, MiB) as pool:
        a, b, c = pool.alloc(1000), pool.alloc(3000), pool.alloc(1000)
        top = pool.stats().arena_top
        pool.free(b)
        d = pool.alloc(2049)                       # the same 4096-byte class as b
        s = pool.stats()
        if d != b or s.reused != 1 or s.arena_top != top:
            raise AssertionError(f"after freeing a 4096-byte block, tpool_alloc(2049) gave "
                                 f"{d:#x} (the freed block is {b:#x}), reused={s.reused}, "
                                 f"top {top} -> {s.arena_top}: the freed block was not reused")
        pool.free(a)
        pool.free(c)
        if pool.alloc(700) != c or pool.alloc(1) == a:
            raise AssertionError("free lists are last-in first-out per class: the block freed "
                                 "last comes back first, and a 256-byte request does not take "
                                 "a 1024-byte block")

    # Random work against the model: every address and statistic must match it.
    with TPool(lib, 4 * MiB) as pool:
        model = PoolModel(pool.stats().base, pool.stats().capacity)
        for op in range(3000):
            if model.live and (len(model.live) > 60 or ctx.rng.random() < 0.45):
                addr = list(model.live)[int(ctx.rng.integers(len(model.live)))]
                pool.free(addr)
                model.release(addr)
                continue
            nbytes = int(np.exp(ctx.rng.uniform(0, np.log(200_000))))
            want = model.alloc(nbytes)
            if want is None:
                expect_library_error("TPOOL_ERR_FULL", lambda: pool.alloc(nbytes),
                                     f"tpool_alloc({nbytes}) with no free block of its class")
                continue
            got = pool.alloc(nbytes)
            if got != want:
                raise AssertionError(f"operation {op}: tpool_alloc({nbytes}) -> {got:#x}, want "
                                     f"{want:#x} (a freed {class_bytes(nbytes)}-byte block "
                                     f"first, else the arena's top)")
            if op % 500 == 0:
                check_no_overlap(lib, {a: n for a, (n, _) in model.live.items()},
                                 f"live blocks at operation {op}")
        check_against_model(pool, model, "after 3000 random operations")
        check_no_overlap(lib, {a: n for a, (n, _) in model.live.items()}, "live blocks at the end")

    # Steady state: a loop of temporaries stops carving after its first round.
    with TPool(lib, MiB) as pool:
        for i in range(300):
            ptrs = [pool.alloc(n) for n in (1000, 5000, 70_000, 200)]
            for p in ptrs:
                pool.free(p)
            if i == 0:
                top = pool.stats().arena_top
        s = pool.stats()
        if s.arena_top != top or s.reused != 4 * 299 or s.live_blocks != 0:
            raise AssertionError(f"300 rounds of the same 4 temporaries: top {top} -> "
                                 f"{s.arena_top}, reused {s.reused} (want {4 * 299})")

    # Fragmentation: half the pool free, in 256-byte blocks, and still no room for 512 bytes.
    with TPool(lib, 256 * KiB) as pool:
        small = [pool.alloc(ALIGN) for _ in range(256 * KiB // ALIGN)]
        for p in small[::2]:
            pool.free(p)
        s = pool.stats()
        if s.cached_bytes != 128 * KiB:
            raise AssertionError(f"{s.cached_bytes} bytes cached after freeing 512 blocks of "
                                 f"256 bytes (want {128 * KiB})")
        expect_library_error("TPOOL_ERR_FULL", lambda: pool.alloc(2 * ALIGN),
                             "tpool_alloc(512) with 128 KiB free, all in 256-byte blocks")
        again = [pool.alloc(ALIGN) for _ in range(len(small) // 2)]
        if sorted(again) != sorted(small[::2]) or pool.stats().cached_bytes != 0:
            raise AssertionError("the 512 freed 256-byte blocks were not all reused")
        check_no_overlap(lib, {p: ALIGN for p in again + small[1::2]}, "after refilling")


@CH.exercise(3, "tpool errors: double free and foreign pointers refused, pool unharmed")
def test_bad_frees(ctx):
    lib = ctx.lib
    with TPool(lib, MiB) as pool, TPool(lib, 64 * KiB) as other, \
            tut.DeviceBuffer(lib, 4096) as elsewhere:
        x, y = pool.alloc(1000), pool.alloc(5000)
        pool.free(x)
        before = pool.stats().as_dict()
        expect_library_error("TPOOL_ERR_DOUBLE_FREE", lambda: pool.free(x), "freeing x twice")
        if pool.stats().as_dict() != before:
            raise AssertionError(f"a refused double free changed the statistics: "
                                 f"{before} -> {pool.stats().as_dict()}")
        p1, p2 = pool.alloc(1000), pool.alloc(1000)
        if p1 == p2:
            raise AssertionError(f"after a double free, two live blocks share {p1:#x}")
        base, top = pool.stats().base, pool.stats().arena_top
        foreign = {"NULL": 0, "an address inside a live block": y + ALIGN,
                   "a misaligned address": y + 4, "the arena's top (never carved)": base + top,
                   "past the pool's end": base + pool.stats().capacity + ALIGN,
                   "a cudaMalloc pointer": elsewhere.ptr.value,
                   "another pool's block": other.alloc(100)}
        for what, addr in foreign.items():
            before = pool.stats().as_dict()
            expect_library_error("TPOOL_ERR_FOREIGN", lambda: pool.free(addr),
                                 f"tpool_free of {what}")
            expect_library_error("TPOOL_ERR_FOREIGN", lambda: pool.free_async(addr, None),
                                 f"tpool_free_async of {what}")
            if pool.stats().as_dict() != before:
                raise AssertionError(f"the refused free of {what} changed the statistics")
        for p in (y, p1, p2):
            pool.free(p)
        s = pool.stats()
        if s.live_blocks != 0 or s.live_bytes != 0:
            raise AssertionError(f"{s.live_blocks} blocks still live after freeing them all")


@CH.exercise(4, "tpool stream-ordered free: reuse across streams waits for the free's event")
def test_cross_stream(ctx):
    lib, nbytes = ctx.lib, MiB + 12
    with TPool(lib, 8 * MiB) as pool, Stream(lib) as s1, Stream(lib) as s2, \
            tut.DeviceBuffer(lib, 4) as count:
        lib.memset(count.ptr, 0, 4)
        lib.synchronize()   # s1 is non-blocking: it would not wait for this memset
        a = pool.alloc(nbytes, s1)
        # s1: a long kernel that writes its id into the block, keeps it, then checks it.
        c_api(lib).hold_and_check(a, nbytes // 4, 0xA, spin_ticks(ctx), count.ptr, s1.handle)
        pool.free_async(a, s1)
        b = pool.alloc(nbytes, s2)              # the same class: the block freed on s1
        if b != a:
            raise AssertionError(f"tpool_alloc on s2 gave {b:#x}, not the block just freed on "
                                 f"s1 ({a:#x}): this test needs the reuse")
        waits = pool.stats().stream_waits
        fill(lib, b, nbytes, 0xB, s2)           # s2 writes its own id
        s1.synchronize()
        s2.synchronize()
        hits = int(count.download(np.uint32, 1)[0])
        if hits:
            raise AssertionError(f"s2 overwrote {hits} words of the block while s1's kernel "
                                 f"still used it: the block was freed on s1, so s2 must wait "
                                 f"for the event recorded at the free (cudaStreamWaitEvent)")
        got = read_u32(lib, b, nbytes)
        if (got != 0xB).any():
            raise AssertionError(f"the block holds {got[np.flatnonzero(got != 0xB)[0]]:#x}, "
                                 f"not s2's 0xb: s2's work ran before s1's was done with it")
        if waits != 1:
            raise AssertionError(f"stats.stream_waits = {waits} after one reuse across streams "
                                 f"(want 1)")
        # The same stream needs no wait: its work runs in order.
        pool.free_async(b, s2)
        c = pool.alloc(nbytes, s2)
        if c != b or pool.stats().stream_waits != 1:
            raise AssertionError(f"a block freed on s2 and reused on s2 made a stream wait "
                                 f"(stream_waits {pool.stats().stream_waits}, want 1)")
        pool.free_async(c, s2)
        s2.synchronize()


@CH.exercise(5, "cudaMallocFromPoolAsync in a loop, from a pool with a release threshold")
def test_stream_ordered(ctx):
    lib = ctx.lib
    require_pools(lib)
    n, steps, c = 100_003, 12, 0.01
    x = tut.random_f32(ctx.rng, n)
    with Stream(lib) as s, CudaPool.create(lib, KEEP_ALL) as keep, \
            CudaPool.create(lib, 0) as drop:
        for pool, name in ((keep, "threshold max"), (drop, "threshold 0")):
            y = scratch_chain(lib, x, steps, c, pool, s)
            tut.assert_close(y, chain_reference(x, steps, c), rtol=2e-5, atol=1e-5,
                             name=f"scratch_chain ({name})")
        st = keep.stats()
        if st["threshold"] != KEEP_ALL:
            raise AssertionError(f"the pool's release threshold is {st['threshold']}, not the "
                                 f"{KEEP_ALL} asked for")
        if st["used"] != 0:
            raise AssertionError(f"{st['used']} bytes still allocated from the pool after "
                                 f"scratch_chain: cudaFreeAsync every scratch buffer")
        if st["reserved"] == 0:
            raise AssertionError("the pool gave all its memory back at the synchronisation: "
                                 "set cudaMemPoolAttrReleaseThreshold so it keeps it")
        # What x alone takes from the pool, then x and the scratch buffers: more, or the
        # scratch buffers came from somewhere else. The kept reserve must cover both runs.
        kept = st["reserved"]
        keep.reset_high()
        tut.assert_equal(scratch_chain(lib, x, 0, c, keep, s), x, name="0 steps")
        x_only = keep.stats()["used_high"]
        keep.reset_high()
        scratch_chain(lib, x, steps, c, keep, s)
        st = keep.stats()
        if st["used_high"] <= x_only:
            raise AssertionError(f"the pool's used high-water mark is {st['used_high']} bytes "
                                 f"with scratch buffers, {x_only} without: take each scratch "
                                 f"buffer from the pool given (cudaMallocFromPoolAsync)")
        if st["reserved_high"] > kept:
            raise AssertionError(f"a second run grew the pool from {kept} to "
                                 f"{st['reserved_high']} bytes: it should reuse what it kept")
        if drop.stats()["reserved"] != 0:
            raise AssertionError(f"a pool with threshold 0 kept {drop.stats()['reserved']} "
                                 f"bytes across the synchronisation")
        if ctx.backend == "cpu":
            check_one_stream(lib, x, c, keep, s)
        keep.trim(0)


def check_one_stream(lib, x, c, pool, stream):
    """CPU backend only: the emulator logs the stream of every queued operation. Each scratch
    buffer's allocation, both kernels and its free must go to the caller's stream: an
    allocation on the default stream is not ordered with the non-blocking stream's work that
    frees the block it may reuse."""
    steps = 3
    ops = tut.stream_log(lib, lambda: scratch_chain(lib, x, steps, c, pool, stream))
    ids, kinds = [i for i, _ in ops], [k for _, k in ops]
    streams = sorted(set(ids))
    allocs = sum(1 for k in kinds if k == 6)   # 6: cudaMallocAsync (and FromPool)
    if len(streams) != 1 or streams[0] in (0, -1) or allocs != steps + 1:
        raise AssertionError(f"scratch_chain with {steps} steps queued {allocs} allocations "
                             f"(want {steps + 1}) on streams {streams} (0 is the default "
                             f"stream): every allocation, kernel, copy and free goes to the "
                             f"stream given")
    # Host synchronisations (the emulator logs them; a GPU does not, so this is not checked
    # there): one, for the copy out. One per step gives the same numbers and costs what 07.5
    # removes: the host waits for the GPU at every step.
    syncs = sum(1 for _, k, _ in tut.stream_log(
        lib, lambda: scratch_chain(lib, x, steps, c, pool, stream), detail=True)
        if k == tut.LOG_SYNC)
    if syncs != 1:
        raise AssertionError(f"scratch_chain with {steps} steps made the host wait {syncs} "
                             f"times (cudaStreamSynchronize, cudaDeviceSynchronize...): want "
                             f"one, after the copy out; the loop queues its work and goes on")


# ---- checks of the lesson's other claims -------------------------------------------------------
@CH.check("release-threshold", "default pool: threshold 0 releases at a sync; max keeps; trim")
def test_release_threshold(ctx):
    lib = ctx.lib
    require_pools(lib)
    pool, used0 = CudaPool.default(lib), lib.mem_used()
    old = pool.stats()["threshold"]
    try:
        with Stream(lib) as s:
            pool.set_threshold(0)
            pool.roundtrip(MiB, 4, s, sync=False)
            if pool.stats()["reserved_high"] < 4 * MiB:
                raise AssertionError("4 MiB allocated from the pool and not yet synchronised: "
                                     "the pool should still hold them")
            s.synchronize()
            st = pool.stats()
            if st["reserved"] != 0 or st["used"] != 0:
                raise AssertionError(f"threshold 0: after the synchronisation the pool still "
                                     f"reserves {st['reserved']} bytes ({st['used']} used)")
            pool.set_threshold(KEEP_ALL)
            pool.roundtrip(MiB, 4, s)
            st = pool.stats()
            if st["reserved"] < 4 * MiB or st["used"] != 0:
                raise AssertionError(f"threshold max: {st['reserved']} bytes reserved after "
                                     f"the synchronisation, want at least {4 * MiB}")
            if lib.mem_used() - used0 < 4 * MiB:
                raise AssertionError("cudaMemGetInfo does not count the pool's reserve as used")
            pool.reset_high()
            pool.roundtrip(MiB, 4, s)
            if pool.stats()["reserved_high"] > st["reserved"]:
                raise AssertionError("the same allocations again grew the pool: no reuse")
            pool.trim(0)
            if pool.stats()["reserved"] != 0 or lib.mem_used() != used0:
                raise AssertionError(f"cudaMemPoolTrimTo(pool, 0) left {pool.stats()['reserved']}"
                                     f" bytes reserved, {lib.mem_used() - used0} in use")
    finally:
        pool.set_threshold(old)
        pool.trim(0)


@CH.check("caching", "the Python caching allocator: a loop of temporaries, few cudaMallocs")
def test_caching(ctx):
    lib, used0 = ctx.lib, ctx.lib.mem_used()
    n, steps, c = 50_021, 60, 0.01
    x = tut.random_f32(ctx.rng, n)
    alloc = CachingAllocator(lib)
    with tut.DeviceBuffer.from_array(lib, x) as d_x:
        for s in range(steps):
            nbytes = 4 * n + 512 * (s % 5)     # five bins, one per size
            with alloc.malloc(nbytes) as tmp:
                c_api(lib).chain_step(d_x.ptr, tmp.ptr, n, c, float(s))
        got = d_x.download(np.float32, n)
        d_x.check_guards()
    tut.assert_close(got, chain_reference(x, steps, c), rtol=2e-5, atol=1e-5,
                     name="chain through the caching allocator")
    st = alloc.stats
    if st["cuda_mallocs"] != 5 or st["hits"] != steps - 5 or st["bytes_in_use"] != 0:
        raise AssertionError(f"{steps} temporaries of 5 sizes: {st}")
    if st["bytes_cached"] != sum(-(-(4 * n + 512 * k) // 512) * 512 for k in range(5)):
        raise AssertionError(f"the cache should hold the 5 blocks, one per size: {st}")
    alloc.empty_cache()
    if lib.mem_used() != used0 or alloc.stats["cuda_frees"] != 5:
        raise AssertionError(f"empty_cache left {lib.mem_used() - used0} bytes in use")
    block = alloc.malloc(100)
    tut.expect_raises(ValueError, lambda: (block.free(), block.free()), "freeing a block twice")
    del block
    gc.collect()
    alloc.empty_cache()
    for bad, exc in ((lambda: alloc.malloc(0), ValueError), (lambda: alloc.malloc(1.5), TypeError)):
        tut.expect_raises(exc, bad, "a bad caching-allocator size")


@CH.check("bad-input", "bad sizes, dead pools, bad streams: clear errors, nothing leaks")
def test_bad_input(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    for bad, exc in ((lambda: TPool(lib, 0), ValueError), (lambda: TPool(lib, -5), ValueError),
                     (lambda: TPool(lib, 2.0), TypeError),
                     (lambda: TPool(lib, TPOOL_MAX_BYTES + 1), ValueError)):
        tut.expect_raises(exc, bad, "a bad pool capacity")
    handle = P()
    expect_library_error("TPOOL_ERR_SIZE", lambda: api.tpool_create(ctypes.byref(handle), 0),
                         "tpool_create with capacity 0, called from C")
    pool = TPool(lib, 64 * KiB)
    stale = pool.handle
    pool.close()
    for what, fn in (("alloc", lambda: pool.alloc(10)), ("free", lambda: pool.free(stale)),
                     ("stats", pool.stats)):
        tut.expect_raises(ValueError, fn, f"{what} on a closed TPool")
    out = P()
    expect_library_error("TPOOL_ERR_HANDLE",
                         lambda: api.tpool_alloc(stale, 10, None, ctypes.byref(out)),
                         "tpool_alloc on a destroyed pool, called from C")
    expect_library_error("TPOOL_ERR_HANDLE", lambda: api.tpool_destroy(stale),
                         "tpool_destroy twice, called from C")
    with TPool(lib, 64 * KiB) as live:
        s = Stream(lib)
        stale_stream = s.handle
        s.close()
        tut.expect_raises(ValueError, lambda: live.alloc(10, s), "a closed Stream")
        tut.expect_raises(TypeError, lambda: live.alloc(10, 42), "an int as a stream")
        if pools_supported(lib) and ctx.backend == "cpu":
            # Only the emulator: on a GPU a destroyed stream's handle is undefined behaviour.
            tut.expect_cuda_error(lib, "cudaErrorInvalidResourceHandle",
                                  lambda: api.mempool_roundtrip(CudaPool.default(lib).handle,
                                                                1024, 1, stale_stream, 1),
                                  "cudaMallocFromPoolAsync on a destroyed stream")


# ---- what the emulator catches, kept true by a test -----------------------------------------------
def _forgotten_wait_child():
    """Run in a child process by test_stream_race: what a pool that forgets 07.4's wait lets
    happen. A block is held by a kernel on s1 and written at once on s2, with nothing ordering
    the two (no event, no synchronisation). The emulator's stream-race detector reports it, and
    the context is broken from then on (which is why this runs in a process of its own)."""
    lib = tut.load_chapter(CH.name)
    result = {"error": None}
    try:
        with Stream(lib) as s1, Stream(lib) as s2, tut.DeviceBuffer(lib, 4096) as block, \
                tut.DeviceBuffer(lib, 4) as count:
            lib.memset(count.ptr, 0, 4)
            lib.synchronize()
            c_api(lib).hold_and_check(block.ptr, 1024, 0xA, 1000, count.ptr, s1.handle)
            fill(lib, block.ptr.value, 4096, 0xB, s2)   # the bug: s2 does not wait for s1
            s1.synchronize()
            s2.synchronize()
    except (tut.CudaError, ValueError) as e:
        result["error"] = getattr(e, "name", type(e).__name__)
    return tut.child_result(result)


@CH.check("stream-race", "the emulator reports two streams using one block with nothing "
                         "ordering them")
def test_stream_race(ctx):
    """The lesson says the emulator's stream-race detector fails a 07.4 that forgets its wait:
    this keeps it true. On a GPU the race is timing-dependent: 07.4's long kernel shows it."""
    if ctx.backend != "cpu":
        raise tut.Skip("on a GPU the race depends on timing (07.4's long kernel exposes it); "
                       "the emulator's report of it is what this checks")
    result, report = tut.run_child(__file__, "_forgotten_wait_child")
    if not ("stream race" in report and "hold_and_check_kernel" in report
            and "fill_u32_kernel" in report):
        raise AssertionError(f"the emulator did not report the race between s1's "
                             f"hold_and_check_kernel and s2's fill_u32_kernel on one block; "
                             f"its stderr:\n{report[-1500:]}")
    if result["error"] is None:
        raise AssertionError("after the reported race the calls went on succeeding: the "
                             "emulator should fail the calls that follow it")


# ---- demo and benchmark -----------------------------------------------------------------------
# The arena the lesson's picture shows (docs/img/tpool-arena.svg): these steps, run on the
# solutions' tpool by the demo, which writes what the pool did to build/figures/07_arena.json;
# `make pictures` commits a copy as docs/figures/07_arena.json and draws from it. ("free", k)
# frees the k-th allocation.
ARENA_STEPS = (("alloc", 100), ("alloc", 1000), ("alloc", 3000), ("alloc", 1000), ("alloc", 300),
               ("alloc", 200), ("alloc", 700), ("free", 1), ("free", 5), ("free", 3),
               ("alloc", 600))


def arena_snapshot(lib, path=None):
    """Runs ARENA_STEPS on a fresh 10 KiB tpool and returns (and, with path, writes as JSON) its
    blocks: offsets and statistics from the pool itself, the free lists in the order tpool
    hands them out (last freed first)."""
    import json
    with TPool(lib, 10 * KiB) as pool:
        blocks, free_lists, allocs = [], {}, []   # allocs: the k-th allocation's block
        for op, arg in ARENA_STEPS:
            if op == "alloc":
                addr = pool.alloc(arg)
                off = addr - pool.stats().base
                reused = [b for b in blocks if b["offset"] == off]
                for b in reused:            # a block handed out again
                    free_lists[b["bytes"]].remove(off)
                    b.update(requested=arg, live=True, reused=True)
                if not reused:
                    blocks.append({"offset": off, "bytes": class_bytes(arg), "requested": arg,
                                   "live": True, "reused": False})
                allocs.append(reused[0] if reused else blocks[-1])
            else:
                b = allocs[arg]
                pool.free(pool.stats().base + b["offset"])
                b["live"] = False
                free_lists.setdefault(b["bytes"], []).insert(0, b["offset"])
        s = pool.stats()
        if s.cached_bytes != sum(b["bytes"] for b in blocks if not b["live"]):
            raise AssertionError("the pool's cached_bytes do not match its free blocks")
        data = {"backend": lib.backend, "capacity": int(s.capacity), "top": int(s.arena_top),
                "live_bytes": int(s.live_bytes), "requested": int(s.requested),
                "cached_bytes": int(s.cached_bytes), "carved": int(s.carved),
                "reused": int(s.reused), "steps": [list(x) for x in ARENA_STEPS],
                "blocks": sorted(blocks, key=lambda b: b["offset"]),
                "free_lists": {str(k): v for k, v in sorted(free_lists.items()) if v}}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def demo(lib):
    print("tpool, the pool you write (memory_pools.cu):")
    try:
        with TPool(lib, MiB) as pool:
            ptrs = [pool.alloc(n) for n in (100, 1000, 3000, 1000)]
            pool.free(ptrs[1])
            again = pool.alloc(600)
            s = pool.stats()
            print(f"  4 blocks of 100, 1000, 3000, 1000 bytes at offsets "
                  f"{[p - s.base for p in ptrs]}")
            print(f"  freed the 1000-byte block; 600 bytes then came back at offset "
                  f"{again - s.base} (reused {s.reused}, carved {s.carved})")
            print(f"  live {s.live_bytes} bytes for {s.requested} asked: power-of-two classes "
                  f"waste up to half a block")
            try:
                pool.free(ptrs[1])
                pool.free(ptrs[1])
            except tut.LibraryError as e:
                print(f"  freeing it twice: {e.name}")
        if tut.tree() == "solutions":   # the lesson's picture is drawn from the solutions' pool
            path = tut.build_dir() / "figures" / "07_arena.json"
            a = arena_snapshot(lib, path)
            print(f"  the picture's arena: {len(a['blocks'])} blocks carved to offset "
                  f"{a['top']}, free lists {a['free_lists']} (written to {path})")
    except tut.ExerciseNotDone as e:
        print(f"  (not written yet: {e})")
    if not pools_supported(lib):
        print("\nthis device has no memory pools: skipping cudaMallocAsync")
        return
    pool, used0 = CudaPool.default(lib), lib.mem_used()
    print("\nCUDA's default pool (cudaMallocAsync), 4 blocks of 1 MiB then freed, synchronised:")
    with Stream(lib) as s, Stream(lib) as s2:
        for threshold in (0, KEEP_ALL):
            pool.set_threshold(threshold)
            pool.roundtrip(MiB, 4, s)
            st = pool.stats()
            print(f"  threshold {'max' if threshold else 0:>3}: reserved {st['reserved']:>9} "
                  f"(high {st['reserved_high']}), used {st['used']}, cudaMemGetInfo +"
                  f"{lib.mem_used() - used0} bytes")
        pool.trim(0)
        print(f"  after cudaMemPoolTrimTo(pool, 0): reserved {pool.stats()['reserved']}")
        print("\nreuse across streams (a 1 MiB block freed on s1, asked for on s2):")
        for wait in (0, 1):
            addrs = np.zeros(2, np.uint64)
            c_api(lib).mempool_cross_stream(pool.handle, MiB, s.handle, s2.handle, wait,
                                            2_000_000 if lib.backend == "gpu" else 0,
                                            tut.ptr(addrs))
            print(f"  {'with' if wait else 'without'} cudaStreamWaitEvent: "
                  f"{'same block' if addrs[0] == addrs[1] else 'another block'}")
        if lib.backend == "cpu":
            print("  (the emulator's pool reuses a block freed by cudaFreeAsync only on the same "
                  "stream or after a synchronisation, and follows no event: another block both "
                  "times. The H200's pool gave the same block once s2 waited. Both are legal: "
                  "the reuse policies permit a reuse, they never promise one.)")
        pool.set_threshold(0)
        pool.trim(0)
    print("\nNext: make check CH=07 (the tests of your exercises)")


def _python_chain(lib, n, steps, reps, how):
    """Per-step seconds (median of reps) of a Python loop of chain steps whose scratch buffer
    comes from `how`: a host clock around the loop and a final synchronisation."""
    api, times = c_api(lib), []
    with tut.DeviceBuffer(lib, 4 * n) as d_x, tut.DeviceBuffer(lib, 4 * n) as keep:
        lib.memset(d_x.ptr, 0x3f, 4 * n)
        for r in range(reps + 1):
            lib.synchronize()
            start = time.perf_counter()
            for s in range(steps):
                with how(keep) as scratch:
                    api.chain_step(d_x.ptr, scratch, n, 1e-3, 0.0)
            lib.synchronize()
            if r:
                times.append((time.perf_counter() - start) / steps)
    return float(np.median(times))


class _Plain:
    """cudaMalloc + cudaFree around every use, from Python."""

    def __init__(self, lib, nbytes):
        self.lib, self.nbytes = lib, nbytes

    def __call__(self, keep):
        return self

    def __enter__(self):
        raw = P()
        self.lib.malloc_raw(ctypes.byref(raw), self.nbytes)
        self.ptr = raw.value
        return self.ptr

    def __exit__(self, *exc):
        self.lib.free_raw(self.ptr)


class _Cached:
    def __init__(self, alloc, nbytes):
        self.alloc, self.nbytes = alloc, nbytes

    def __call__(self, keep):
        return self

    def __enter__(self):
        self.block = self.alloc.malloc(self.nbytes)
        return self.block.ptr

    def __exit__(self, *exc):
        self.block.free()


class _Cupy:
    def __init__(self, cupy_pool, nbytes):
        self.pool, self.nbytes = cupy_pool, nbytes

    def __call__(self, keep):
        return self

    def __enter__(self):
        self.mem = self.pool.malloc(self.nbytes)
        return self.mem.ptr

    def __exit__(self, *exc):
        self.mem = None   # CuPy's pool takes the block back when the last reference goes


class _Kept:
    def __call__(self, keep):
        self.keep = keep
        return self

    def __enter__(self):
        return self.keep.ptr

    def __exit__(self, *exc):
        pass


def _cupy_pool():
    """CuPy's MemoryPool, or the reason there is none."""
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy.cuda.MemoryPool(), ""
    except Exception as e:   # not installed, or no matching CUDA runtime: say why, go on
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def bench(lib):
    b = tut.Bench(lib, "07 memory pools")
    gpu, api = lib.backend == "gpu", c_api(lib)
    has_pools = pools_supported(lib)
    default = CudaPool.default(lib) if has_pools else None
    with Stream(lib) as s, TPool(lib, 64 * MiB) as tp:
        if default:
            old = default.stats()["threshold"]
            default.set_threshold(KEEP_ALL)
        # -- 1 MiB allocate + free, from C --
        print("1 MiB allocate + free, per pair, from C (host clock, median):")
        pair_us = {}
        kinds = [(ALLOC_CUDA_MALLOC, "cudaMalloc + cudaFree", 20 if gpu else 5),
                 (ALLOC_CUDA_ASYNC, "cudaMallocAsync + cudaFreeAsync (threshold max)", 1000),
                 (ALLOC_TPOOL, "tpool_alloc + tpool_free", 1000),
                 (ALLOC_TPOOL_ASYNC, "tpool_alloc + tpool_free_async (one stream)", 1000)]
        for kind, what, pairs in kinds:
            if kind == ALLOC_CUDA_ASYNC and not has_pools:
                print(f"  {what}: skipped, this device has no memory pools")
                continue
            reps = 15 if gpu else 3
            ms = tut.median_ms(lambda r, t: api.bench_alloc_pairs(kind, MiB, pairs, r, t, tp.handle,
                                                                  s.handle), reps)
            pair_us[kind] = ms * 1e3 / pairs
            b.row(what, pair_us[kind], "us")
        for kind, short in ((ALLOC_CUDA_ASYNC, "cudaMallocAsync"), (ALLOC_TPOOL, "tpool"),
                            (ALLOC_TPOOL_ASYNC, "tpool, stream-ordered free")):
            if kind in pair_us:
                b.row(f"  cudaMalloc pair / {short} pair",
                      pair_us[ALLOC_CUDA_MALLOC] / pair_us[kind], "x")
        # -- the chain: many small temporaries --
        n, steps = (64 * KiB, 200) if gpu else (4 * KiB, 20)
        reps = 10 if gpu else 2
        print(f"\na chain of {steps} steps of 2 kernels on {n} floats, each step with a "
              f"{4 * n // KiB} KiB scratch buffer (events on the stream, median; higher is "
              f"better; ceiling = the scratch allocated once, outside the loop):")
        per_ms = {}
        for kind, what in ((ALLOC_NONE, "scratch allocated once (ceiling)"),
                           (ALLOC_CUDA_MALLOC, "cudaMalloc + cudaFree per step"),
                           (ALLOC_CUDA_ASYNC, "cudaMallocAsync + cudaFreeAsync per step"),
                           (ALLOC_TPOOL_ASYNC, "tpool_alloc + tpool_free_async per step")):
            if kind == ALLOC_CUDA_ASYNC and not has_pools:
                print(f"  {what}: skipped, this device has no memory pools")
                continue
            ms = tut.median_ms(lambda r, t: api.bench_chain(kind, n, steps, r, t, tp.handle,
                                                            s.handle), reps)
            per_ms[kind] = steps / ms
            b.row(what, per_ms[kind], "steps/ms", per_ms.get(ALLOC_NONE))
        b.figure("cudaMalloc + cudaFree per step: us per step over the ceiling",
                 1e3 / per_ms[ALLOC_CUDA_MALLOC] - 1e3 / per_ms[ALLOC_NONE], "us")
        if default:
            default.set_threshold(old)
            default.trim(0)
    # -- the same chain driven from Python, one ctypes call per step --
    pyreps = 5 if gpu else 1
    print(f"\nthe chain driven from Python, one call per step (host clock around the loop "
          f"and a final synchronisation, median of {pyreps}):")
    floor = 1e-3 / _python_chain(lib, n, steps, pyreps, _Kept())
    b.row("scratch allocated once (ceiling)", floor, "steps/ms", floor)
    alloc = CachingAllocator(lib)
    cupy_pool, why = _cupy_pool()
    for what, how in (("cudaMalloc + cudaFree per step (ctypes)", _Plain(lib, 4 * n)),
                      ("CachingAllocator (this chapter)", _Cached(alloc, 4 * n)),
                      ("CuPy MemoryPool", _Cupy(cupy_pool, 4 * n) if cupy_pool else None)):
        if how is None:
            print(f"  {what}: skipped, CuPy is not usable here ({why})")
            continue
        py_per_ms = 1e-3 / _python_chain(lib, n, steps, pyreps, how)
        b.row(what, py_per_ms, "steps/ms", floor)
        if isinstance(how, _Cached):
            b.figure("CachingAllocator: us per step over the ceiling, from Python",
                     1e3 / py_per_ms - 1e3 / floor, "us")
    print(f"  CachingAllocator: {alloc.stats['cuda_mallocs']} cudaMalloc calls for "
          f"{alloc.stats['hits'] + alloc.stats['misses']} allocations")
    alloc.empty_cache()
    if cupy_pool:
        cupy_pool.free_all_blocks()


def warm_up(lib):
    """The first stream, event and stream-ordered allocation of a process make the driver set up
    device memory it keeps (chapter 03 measured 2 to 4 MiB for streams on an H200), which the
    leak check would blame on the first test. Use each once, through lesson code only."""
    with Stream(lib) as s1, Stream(lib) as s2, TPool(lib, 4096):
        if pools_supported(lib):
            pool = CudaPool.default(lib)
            old = pool.stats()["threshold"]
            c_api(lib).mempool_cross_stream(pool.handle, MiB, s1.handle, s2.handle, 1, 0,
                                            tut.ptr(np.zeros(2, np.uint64)))
            pool.roundtrip(MiB, 2, s1)
            pool.set_threshold(old)
            pool.trim(0)
        c_api(lib).fill_u32(None, 0, 0, s1.handle)
    lib.synchronize()


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
