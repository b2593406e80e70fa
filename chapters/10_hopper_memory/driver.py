# SPDX-License-Identifier: MIT
"""Chapter 10 hopper_memory: the memory of a Hopper GPU and of CUDA 13.0: an L2 window that
keeps a table resident, batched prefetch, discard and copy calls, pools of pinned host and of
managed memory, thread block clusters sharing their shared memory, and bulk asynchronous copies
(the TMA) feeding a tiled kernel.

From the repository's root (make run uses the exercise tree; TUT_TREE=solutions the solutions):
    make run CH=10                the lesson's demo: this device's L2, a batch, a host pool
    make run CH=10 ARGS=--check   the tests (make check runs each exercise on its own)
    make run CH=10 ARGS=--bench   L2 window speedup, batched against looped calls, allocation
                                  costs, the cluster histogram against global atomics, a
                                  tile kernel fed by the TMA against one fed by loads
    build/venv/bin/python chapters/10_hopper_memory/driver.py [--check | --bench]   the same
"""
import ctypes
import functools
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(10, "10_hopper_memory")
I, F, P, Z = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
IP, ZP, FP = ctypes.POINTER(I), ctypes.POINTER(Z), ctypes.POINTER(F)
ULLP = ctypes.POINTER(ctypes.c_ulonglong)
KiB, MiB = 1 << 10, 1 << 20
HOST = -1                                    # cudaCpuDeviceId: a prefetch to the host
ACCESS_NORMAL, ACCESS_STREAMING, ACCESS_PERSISTING = 0, 1, 2   # cudaAccessProperty
MEM_HOST, MEM_DEVICE, MEM_MANAGED = 1, 2, 3  # cudaMemoryType
# the emulator's stream log (tut.stream_log(detail=True)): its kinds for these calls
CLUSTER = 4                                  # blocks per cluster (CLUSTER in clusters.cu)
HIST_CLUSTER, HIST_SHARED, HIST_GLOBAL = 0, 1, 2   # histogram()'s `how`
SHARED_TABLE_MAX = 200 * KiB   # a per-block table this large fits an H100's or H200's 227 KiB
LOG_COPY, LOG_PREFETCH, LOG_DISCARD, LOG_BATCH, LOG_L2_RESET = 2, 9, 13, 14, 15
BLUR_R, TILE_W, TILE_H = 4, 32, 32           # bulk_copies.cu's BLUR_R, TILE_W, TILE_H
BLUR_LOADS, BLUR_BULK, BLUR_TMA = 0, 1, 2    # blur()'s `how`


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int stream_create(cudaStream_t *out)
        stream_create=lib.bind("stream_create", [ctypes.POINTER(P)]),
        # int stream_destroy(cudaStream_t s)
        stream_destroy=lib.bind("stream_destroy", [P]),
        # int stream_synchronize(cudaStream_t s)
        stream_synchronize=lib.bind("stream_synchronize", [P]),
        # int l2_info(int *l2_bytes, int *persist_max, int *window_max)
        l2_info=lib.bind("l2_info", [IP, IP, IP]),
        # int l2_state(cudaStream_t s, unsigned long long *base, size_t *bytes, float *hit_ratio,
        #     int *hit_prop, int *miss_prop, size_t *set_aside)
        l2_state=lib.bind("l2_state", [P, ULLP, ZP, FP, IP, IP, ZP]),
        # int l2_persist(cudaStream_t s, const void *base, size_t bytes, float hit_ratio)
        l2_persist=lib.bind("l2_persist", [P, P, Z, F]),
        # int l2_persist_off(cudaStream_t s)
        l2_persist_off=lib.bind("l2_persist_off", [P]),
        # int lookup(const float *d_table, unsigned table_mask, const float *d_in, float *d_out,
        #     size_t n, cudaStream_t s)
        lookup=lib.bind("lookup", [P, ctypes.c_uint, P, P, Z, P]),
        # int managed_last_prefetch(const void *ptr, size_t bytes, int *where)
        managed_last_prefetch=lib.bind("managed_last_prefetch", [P, Z, IP]),
        # int prefetch_one(const void *ptr, size_t bytes, int device, cudaStream_t s)
        prefetch_one=lib.bind("prefetch_one", [P, Z, I, P]),
        # int iota(float *d_x, size_t n, float base, cudaStream_t s)
        iota=lib.bind("iota", [P, Z, F, P]),
        # int scale(float *d_x, size_t n, float a, cudaStream_t s)
        scale=lib.bind("scale", [P, Z, F, P]),
        # int prefetch_batch(void **ptrs, size_t *sizes, size_t count, size_t split, int device,
        #     cudaStream_t s)
        prefetch_batch=lib.bind("prefetch_batch", [P, P, Z, Z, I, P]),
        # int discard_prefetch_batch(void **ptrs, size_t *sizes, size_t count, int device,
        #     cudaStream_t s)
        discard_prefetch_batch=lib.bind("discard_prefetch_batch", [P, P, Z, I, P]),
        # int copy_batch(void **dsts, const void **srcs, size_t *sizes, size_t count,
        #     cudaStream_t s)
        copy_batch=lib.bind("copy_batch", [P, P, P, Z, P]),
        # int host_pool_create(cudaMemPool_t *out, int device)
        host_pool_create=lib.bind("host_pool_create", [ctypes.POINTER(P), I]),
        # int managed_pool(cudaMemPool_t *out)
        managed_pool=lib.bind("managed_pool", [ctypes.POINTER(P)]),
        # int pool_destroy(cudaMemPool_t pool)
        pool_destroy=lib.bind("pool_destroy", [P]),
        # int pool_access(cudaMemPool_t pool, int device, int *read_write)
        pool_access=lib.bind("pool_access", [P, I, IP]),
        # int pool_alloc(cudaMemPool_t pool, size_t bytes, cudaStream_t s, void **out)
        pool_alloc=lib.bind("pool_alloc", [P, Z, P, ctypes.POINTER(P)]),
        # int pool_free(void *ptr, cudaStream_t s)
        pool_free=lib.bind("pool_free", [P, P]),
        # int pointer_type(const void *ptr, int *type)
        pointer_type=lib.bind("pointer_type", [P, IP]),
        # int host_pools_supported(int *yes)
        host_pools_supported=lib.bind("host_pools_supported", [IP]),
        # int bench_lookup(size_t table_floats, size_t n4, unsigned spl, int window, int reps,
        #     float *times_ms)
        bench_lookup=lib.bind("bench_lookup", [Z, Z, ctypes.c_uint, I, I, tut.c_float_p]),
        # int bench_prefetch(int mode, size_t count, size_t each, int device, int reps,
        #     float *times_ms)
        bench_prefetch=lib.bind("bench_prefetch", [I, Z, Z, I, I, tut.c_float_p]),
        # int bench_copies(int mode, size_t count, size_t each, int reps, float *times_ms)
        bench_copies=lib.bind("bench_copies", [I, Z, Z, I, tut.c_float_p]),
        # int bench_alloc(int kind, size_t bytes, int count, int reps, float *times_ms)
        bench_alloc=lib.bind("bench_alloc", [I, Z, I, I, tut.c_float_p]),
        # int cluster_supported(int *yes)                                       (clusters.cu)
        cluster_supported=lib.bind("cluster_supported", [IP]),
        # int histogram(int how, const unsigned *d_data, size_t n, unsigned nbins,
        #     unsigned *d_hist, cudaStream_t s)
        histogram=lib.bind("histogram", [I, P, Z, ctypes.c_uint, P, P]),
        # int bench_histogram(int how, size_t n, unsigned nbins, int reps, float *times_ms)
        bench_histogram=lib.bind("bench_histogram", [I, Z, ctypes.c_uint, I, tut.c_float_p]),
        # int bulk_supported(int *yes)                                        (bulk_copies.cu)
        bulk_supported=lib.bind("bulk_supported", [IP]),
        # int blur(int how, const float *d_in, float *d_out, int height, int width,
        #     cudaStream_t s)
        blur=lib.bind("blur", [I, P, P, I, I, P]),
        # int bench_blur(int how, int height, int width, int reps, float *times_ms)
        bench_blur=lib.bind("bench_blur", [I, I, I, I, tut.c_float_p]),
    )


# ---- owners of C handles: each destroyed exactly once, dead handles never reach C ------------
class Stream(tut.Handle):
    """A CUDA stream that waits for the legacy default stream (which the batch calls refuse)."""
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


def stream_of(stream):
    if not isinstance(stream, Stream):
        raise TypeError(f"stream must be a Stream, not {type(stream).__name__} (the batch "
                        f"calls refuse the legacy default stream)")
    return stream._live("be used as a stream")


class HostPool(tut.Handle):
    """A pool of pinned host memory that `device` may use (10.5)."""
    kind = "HostPool"

    def __init__(self, lib, device=0):
        self._api = c_api(lib)
        handle = P()
        self._api.host_pool_create(ctypes.byref(handle), tut.check_count(device, "device"))
        self._own_handle(handle.value, self._api.pool_destroy)


# ---- L2 ---------------------------------------------------------------------------------------
def l2_info(lib):
    l2, persist, window = I(), I(), I()
    c_api(lib).l2_info(ctypes.byref(l2), ctypes.byref(persist), ctypes.byref(window))
    return SimpleNamespace(l2=l2.value, persist_max=persist.value, window_max=window.value)


def l2_state(lib, stream):
    base, nbytes, hit, hp, mp, aside = ctypes.c_ulonglong(), Z(), F(), I(), I(), Z()
    c_api(lib).l2_state(stream_of(stream), ctypes.byref(base), ctypes.byref(nbytes),
                        ctypes.byref(hit), ctypes.byref(hp), ctypes.byref(mp),
                        ctypes.byref(aside))
    return SimpleNamespace(base=base.value, bytes=nbytes.value, hit_ratio=hit.value,
                           hit_prop=hp.value, miss_prop=mp.value, set_aside=aside.value)


def l2_persist(lib, stream, address, nbytes, hit_ratio):
    if not 0.0 <= hit_ratio <= 1.0:
        raise ValueError(f"hit_ratio is a fraction of the window's lines: 0..1, not {hit_ratio}")
    c_api(lib).l2_persist(stream_of(stream), address, tut.check_count(nbytes, "nbytes", 2**62,
                                                                     1), hit_ratio)


def lookup_reference(table, x):
    i = np.arange(x.size, dtype=np.uint64)
    slot = (i * np.uint64(2654435761)) & np.uint64(table.size - 1)
    return x + table[slot.astype(np.int64)]


# ---- managed ranges ----------------------------------------------------------------------------
def last_prefetch(lib, address, nbytes):
    where = I()
    c_api(lib).managed_last_prefetch(address, nbytes, ctypes.byref(where))
    return where.value


def ranges_of(m, sizes):
    """Pointers and sizes (C arrays) of consecutive ranges of managed array m, each starting on
    a 64 KiB boundary (a managed page of a GPU is 4 KiB or 64 KiB: ranges share no page)."""
    offsets, at = [], 0
    for s in sizes:
        offsets.append(at)
        at += -(-s // (64 * KiB)) * (64 * KiB)
    if at > m.nbytes:
        raise ValueError(f"{len(sizes)} ranges need {at} bytes, the array has {m.nbytes}")
    ptrs = (P * len(sizes))(*[m.address + o for o in offsets])
    szs = (Z * len(sizes))(*sizes)
    return ptrs, szs, offsets


def batch_entries(lib, call):
    """CPU backend: the batch entries (kind 14, detail = items) and every discard and prefetch
    logged while call() ran."""
    return [(k, d) for _, k, d in tut.stream_log(lib, call, detail=True)
            if k in (LOG_PREFETCH, LOG_DISCARD, LOG_BATCH, LOG_COPY)]


# ---- exercises ----------------------------------------------------------------------------------
@CH.exercise(1, "l2_persist / l2_persist_off: a stream's L2 window over a table, and undoing it")
def test_l2_persist(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    info = l2_info(lib)
    if info.persist_max == 0:
        raise tut.Skip(f"this device sets no L2 aside for persisting accesses "
                       f"(cudaDevAttrMaxPersistingL2CacheSize = 0; sm_80 and later have it)")
    if lib.backend == "cpu":
        tut.note("the emulator checks the window and the set-aside as CUDA does; a CPU has no "
                 "such cache, so nothing runs faster (--bench on a GPU measures it)")
    table_n = 1 << 14
    n = 100_003
    table = tut.random_f32(ctx.rng, table_n)
    x = tut.random_f32(ctx.rng, n)
    with Stream(lib) as s, tut.DeviceBuffer.from_array(lib, table) as d_table, \
            tut.DeviceBuffer.from_array(lib, x) as d_in, tut.DeviceBuffer(lib, 4 * n) as d_out:
        cases = [(table.nbytes, 0.75), (info.window_max + 64 * KiB, 1.0),
                 (info.persist_max + 4 * KiB, 0.5)]
        for nbytes, hit in cases:
            l2_persist(lib, s, d_table.ptr, nbytes, hit)
            st = l2_state(lib, s)
            what = f"after l2_persist(table, {nbytes} bytes, hit_ratio {hit})"
            want_bytes = min(nbytes, info.window_max)
            if st.base != d_table.ptr.value or st.bytes != want_bytes:
                raise AssertionError(f"{what}: the stream's window is {st.bytes} bytes at "
                                     f"{st.base:#x}, want {want_bytes} bytes (the device's "
                                     f"largest window is {info.window_max}) at "
                                     f"{d_table.ptr.value:#x}")
            if abs(st.hit_ratio - hit) > 1e-6:
                raise AssertionError(f"{what}: hitRatio {st.hit_ratio}, want {hit}")
            if (st.hit_prop, st.miss_prop) != (ACCESS_PERSISTING, ACCESS_STREAMING):
                raise AssertionError(f"{what}: hitProp {st.hit_prop}, missProp {st.miss_prop}; "
                                     f"want cudaAccessPropertyPersisting (2) for the hits and "
                                     f"cudaAccessPropertyStreaming (1) for the rest")
            want_aside = min(nbytes, info.persist_max)
            # a GPU may round the set-aside to its own granularity: never above the maximum
            if not (want_aside * 0.9 <= st.set_aside <= info.persist_max) or \
                    (lib.backend == "cpu" and st.set_aside != want_aside):
                raise AssertionError(f"{what}: cudaLimitPersistingL2CacheSize is "
                                     f"{st.set_aside}, want about {want_aside} (the smaller of "
                                     f"the table and the device's maximum, {info.persist_max})")
            api.lookup(d_table.ptr, table_n - 1, d_in.ptr, d_out.ptr, n, s.handle)
            s.synchronize()
            tut.assert_close(d_out.download(np.float32, n), lookup_reference(table, x),
                             name=f"lookup with the window ({what})")
        api.l2_persist_off(s.handle)
        st = l2_state(lib, s)
        if st.bytes != 0 or st.set_aside != 0:
            raise AssertionError(f"after l2_persist_off: the window is {st.bytes} bytes and the "
                                 f"set-aside {st.set_aside} bytes; want 0 and 0")
        if lib.backend == "cpu":
            # lines made persisting stay so until a reset: the emulator logs the reset
            got = [k for _, k, _ in tut.stream_log(lib, lambda: api.l2_persist_off(s.handle),
                                                    detail=True)]
            if LOG_L2_RESET not in got:
                raise AssertionError("l2_persist_off: no cudaCtxResetPersistingL2Cache; an "
                                     "emptied window leaves the lines it made persisting in "
                                     "their set-aside, taking L2 from every later kernel")
        api.lookup(d_table.ptr, table_n - 1, d_in.ptr, d_out.ptr, n, s.handle)
        s.synchronize()
        tut.assert_close(d_out.download(np.float32, n), lookup_reference(table, x),
                         name="lookup after l2_persist_off")
        tut.expect_raises(ValueError, lambda: l2_persist(lib, s, d_table.ptr, 4096, 1.5),
                          "a hit ratio above 1")


@CH.exercise(2, "prefetch_batch: one cudaMemPrefetchBatchAsync, ranges split between two places")
def test_prefetch_batch(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    sizes = [4 * KiB, 64 * KiB, 100 * KiB, 64 * KiB, 8 * KiB, 192 * KiB, 64 * KiB]
    count = len(sizes)
    with Stream(lib) as s, tut.ManagedArray(lib, (count * 256 * KiB) // 4) as m:
        m.array[:] = 1.0
        ptrs, szs, offsets = ranges_of(m, sizes)
        for split in (0, 1, 3, count - 1, count):
            # every range first where the batch must not leave it
            for r in range(count):
                api.prefetch_one(ptrs[r], szs[r], HOST if r < split else 0, s.handle)
            s.synchronize()

            def call():
                api.prefetch_batch(ptrs, szs, count, split, 0, s.handle)
                s.synchronize()
            if lib.backend == "cpu":
                got = batch_entries(lib, call)
                batches = [d for k, d in got if k == LOG_BATCH]
                singles = [d for k, d in got if k == LOG_PREFETCH]
                if batches != [count] or len(singles) != count:
                    raise AssertionError(
                        f"prefetch_batch(split={split}): the emulator saw {len(batches)} batch "
                        f"call(s) (items: {batches}) and {len(singles)} prefetches; want one "
                        f"cudaMemPrefetchBatchAsync of {count} ranges, not a loop of "
                        f"cudaMemPrefetchAsync")
            else:
                call()
            for r in range(count):
                want = 0 if r < split else HOST
                got = last_prefetch(lib, ptrs[r], szs[r])
                if got != want:
                    raise AssertionError(
                        f"prefetch_batch(split={split}, device 0): range {r} ({szs[r]} bytes) "
                        f"was last prefetched to {got}, want {want} (ranges [0, {split}) to the "
                        f"device, the rest to the host, -1)")
        if not np.all(m.array == 1.0):
            raise AssertionError("prefetch_batch changed the data: a prefetch moves pages, it "
                                 "never changes them")
        # What the single form refuses, the batch refuses (memory that is not managed), and
        # more (the legacy default stream). The emulator's error is CUDA 13.0's documented
        # one; on a GPU any CUDA error will do (the documentation names none for the stream).
        small = (Z * 2)(4096, 4096)
        name = "cudaErrorInvalidValue" if lib.backend == "cpu" else None
        with tut.DeviceBuffer(lib, 4096) as d:
            bad = (P * 2)(ptrs[0], d.ptr.value)
            refused(lib, name, lambda: api.prefetch_batch(bad, small, 2, 2, 0, s.handle),
                    "prefetch_batch of cudaMalloc memory")
        refused(lib, name, lambda: api.prefetch_batch(ptrs, small, 2, 2, 0, None),
                "prefetch_batch on the legacy default stream")


def refused(lib, name, fn, what):
    if name:
        tut.expect_cuda_error(lib, name, fn, what)
    else:
        tut.expect_raises(tut.CudaError, fn, what)
        lib.clear_last_error()


@CH.exercise(3, "discard_prefetch_batch: scratch ranges sent to the device, their contents dead")
def test_discard_prefetch(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    sizes = [64 * KiB, 4 * KiB, 128 * KiB, 64 * KiB, 20 * KiB]
    count = len(sizes)
    with Stream(lib) as s, tut.ManagedArray(lib, (count * 192 * KiB) // 4) as m:
        ptrs, szs, offsets = ranges_of(m, sizes)
        for rnd in range(2):
            m.array[:] = 7.0   # dirty on the host: what a plain prefetch would carry over

            def call():
                api.discard_prefetch_batch(ptrs, szs, count, 0, s.handle)
            if lib.backend == "cpu":
                got = batch_entries(lib, call)
                batches = [d for k, d in got if k == LOG_BATCH]
                discards = [k for k, _ in got if k == LOG_DISCARD]
                singles = [d for k, d in got if k == LOG_PREFETCH]
                if batches != [count] or len(discards) != count or singles != [0] * count:
                    raise AssertionError(
                        f"discard_prefetch_batch: the emulator saw batch calls {batches}, "
                        f"{len(discards)} discards and prefetches to {singles}; want one "
                        f"cudaMemDiscardAndPrefetchBatchAsync of {count} ranges to device 0")
            else:
                call()
            if rnd == 1:   # asked before the host reads them back (which moves them again)
                s.synchronize()
                for r in range(count):
                    where = last_prefetch(lib, ptrs[r], szs[r])
                    if where != 0:
                        raise AssertionError(f"discard_prefetch_batch: range {r} was last "
                                             f"prefetched to {where}, want device 0")
            for r in range(count):   # the kernels that own the scratch write all of it
                api.iota(ptrs[r], szs[r] // 4, 1000.0 * r + rnd, s.handle)
            s.synchronize()
            for r in range(count):
                got = m.array[offsets[r] // 4: (offsets[r] + szs[r]) // 4]
                tut.assert_equal(got, (1000.0 * r + rnd + np.arange(got.size)).astype(np.float32),
                                 name=f"range {r} written after the discard")


@CH.exercise(4, "copy_batch: many small copies in one cudaMemcpyBatchAsync")
def test_copy_batch(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    for count in (1, 3, 40):
        sizes = [int(ctx.rng.integers(1, 600)) * 4 for _ in range(count)]
        srcs_np = [tut.random_f32(ctx.rng, z // 4) for z in sizes]
        gaps = [int(ctx.rng.integers(0, 8)) * 64 for _ in range(count)]
        total = sum(sizes) + sum(gaps)
        with Stream(lib) as s, tut.DeviceBuffer(lib, total) as d:
            # destinations in a shuffled order, with poisoned gaps between them
            order = ctx.rng.permutation(count)
            at, dst_off = 0, [0] * count
            for r in order:
                at += gaps[r]
                dst_off[r] = at
                at += sizes[r]
            dsts = (P * count)(*[d.ptr.value + o for o in dst_off])
            srcs = (P * count)(*[a.ctypes.data for a in srcs_np])
            szs = (Z * count)(*sizes)

            def call():
                api.copy_batch(dsts, srcs, szs, count, s.handle)
                s.synchronize()
            if lib.backend == "cpu":
                got = batch_entries(lib, call)
                if [dd for k, dd in got if k == LOG_BATCH] != [count]:
                    raise AssertionError(f"copy_batch({count} copies): the emulator saw batch "
                                         f"calls {[dd for k, dd in got if k == LOG_BATCH]}; "
                                         f"want one cudaMemcpyBatchAsync of {count}")
            else:
                call()
            whole = d.download(np.uint8, total)
            for r in range(count):
                got = whole[dst_off[r]: dst_off[r] + sizes[r]].view(np.float32)
                tut.assert_equal(got, srcs_np[r], name=f"copy {r} of {count} ({sizes[r]} bytes)")
            mask = np.ones(total, bool)
            for r in range(count):
                mask[dst_off[r]: dst_off[r] + sizes[r]] = False
            if np.any(whole[mask] != tut.POISON_BYTE):
                raise AssertionError(f"copy_batch({count} copies) wrote bytes between the "
                                     f"destinations: a copy went to the wrong place or was too "
                                     f"long")
            d.check_guards()


@CH.exercise(5, "host_pool_create: a pool of pinned host memory that the device may use")
def test_host_pool(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    yes = I()
    api.host_pools_supported(ctypes.byref(yes))
    if not yes.value:
        raise tut.Skip("this device and driver have no host memory pools "
                       "(cudaDevAttrHostMemoryPoolsSupported = 0; CUDA 13.0 and a driver "
                       "that supports it)")
    n = 100_003
    with Stream(lib) as s, HostPool(lib, 0) as pool:
        rw = I()
        api.pool_access(pool.handle, 0, ctypes.byref(rw))
        if not rw.value:
            raise AssertionError("host_pool_create(device 0): device 0 has no read-write "
                                 "access to the pool (cudaMemPoolGetAccess): a kernel of it "
                                 "would fault on the pool's memory")
        for rnd in range(2):   # the second allocation may reuse the first's memory
            p = P()
            api.pool_alloc(pool.handle, 4 * n, s.handle, ctypes.byref(p))
            try:
                kind = I()
                api.pointer_type(p, ctypes.byref(kind))
                if kind.value != MEM_HOST:
                    raise AssertionError(f"memory from the pool is cudaMemoryType {kind.value}, "
                                         f"want cudaMemoryTypeHost ({MEM_HOST}): the pool's "
                                         f"location must be the host")
                s.synchronize()   # the allocation is stream-ordered: the host waits for it
                view = np.ctypeslib.as_array((ctypes.c_float * n).from_address(p.value))
                x = tut.random_f32(ctx.rng, n)
                view[:] = x   # the host writes pinned memory directly, no copy
                api.scale(p, n, 3.0, s.handle)   # and a kernel reads and writes it in place
                s.synchronize()
                tut.assert_close(view.copy(), x * 3.0, name=f"a kernel on host pool memory "
                                                            f"(round {rnd})")
                del view
            finally:
                api.pool_free(p, s.handle)
                s.synchronize()


def require_clusters(lib):
    yes = I()
    c_api(lib).cluster_supported(ctypes.byref(yes))
    if not yes.value:
        raise tut.Skip("this GPU launches no thread block clusters (cudaDevAttrClusterLaunch = "
                       "0): they need compute capability 9.0 (Hopper) or later")


def histogram_cases(ctx, large, most=None):
    """(nbins, data): few and many bins, values past the last bin (not counted), one hot bin.
    large: the cases of 16384 and 65536 bins too; most: at most this many values a case."""
    cases = []
    for nbins, n in ((4, 1000), (1024, 100_003), (16384, (1 << 20) + 5), (65536, 3_000_017)):
        if not large and n > 200_000:
            continue
        n = min(n, most or n)
        data = ctx.rng.integers(0, nbins + nbins // 8 + 1, n).astype(np.uint32)
        data[::3] = nbins // 2 + 1 if nbins > 4 else 1   # a hot bin: many atomics on one address
        cases.append((nbins, data))
    return cases


def run_histogram(lib, how, data, nbins):
    with Stream(lib) as s, tut.DeviceBuffer.from_array(lib, data) as d, \
            tut.DeviceBuffer(lib, 4 * nbins) as h:
        c_api(lib).histogram(how, d.ptr, data.size, nbins, h.ptr, s.handle)
        s.synchronize()
        got = h.download(np.uint32, nbins)
        h.check_guards()
    return got


@CH.exercise(6, "cluster_hist_kernel: a cluster of 4 blocks shares one table through DSMEM")
def test_cluster_histogram(ctx):
    lib = ctx.lib
    require_clusters(lib)
    # the tables too large for one block's shared memory (what a cluster is for) everywhere;
    # on the emulator, whose clusters run block by block, 250,007 values a case, not 3 million
    # (2.6 s of the 3.2 s of chapter 10's make check)
    for nbins, data in histogram_cases(ctx, True, None if ctx.large else 250_007):
        want = np.bincount(data[data < nbins], minlength=nbins).astype(np.uint32)
        tut.assert_equal(run_histogram(lib, HIST_CLUSTER, data, nbins), want,
                         name=f"cluster histogram, {nbins} bins, {data.size} values")


# ---- bulk asynchronous copies (bulk_copies.cu) ---------------------------------------------------
def require_bulk(lib):
    if lib.backend == "cpu":
        tut.note("the emulator lands each bulk copy when its barrier's phase ends: a read of the "
                 "tile before the wait sees shared memory's poison (NaN), in every thread order")
        return
    yes = I()
    c_api(lib).bulk_supported(ctypes.byref(yes))
    if not yes.value:
        raise tut.Skip("this GPU has no Tensor Memory Accelerator: bulk asynchronous copies and "
                       "tensor maps need compute capability 9.0 (Hopper) or later")


def blur_reference(img):
    """out[r][c] = mean of img[r - R .. r + R][c], rows outside the image counted as 0."""
    h = img.shape[0]
    padded = np.zeros((h + 2 * BLUR_R, img.shape[1]))
    padded[BLUR_R:BLUR_R + h] = img
    return sum(padded[k:k + h] for k in range(2 * BLUR_R + 1)) / (2 * BLUR_R + 1)


def blur_shapes(ctx, widths_of_4=True):
    """(height, width): one row, fewer rows than the blur's reach, tiles cut at both edges, and
    (on a GPU) a large image; widths a multiple of 4 (what a bulk copy needs) unless asked."""
    shapes = [(1, 4), (3, 36), (32, 32), (41, 68), (100, 132)]
    if not widths_of_4:
        shapes += [(5, 1), (37, 33), (66, 70)]
    if ctx.large:
        shapes.append((2049, 4100))
    return shapes


def run_blur(lib, how, img, offset=0):
    """blur(how) of img on the device; offset: bytes the input starts past a 256-byte boundary."""
    h, w = img.shape
    with Stream(lib) as s, tut.DeviceBuffer(lib, img.nbytes + offset) as d_in, \
            tut.DeviceBuffer(lib, img.nbytes) as d_out:
        src = ctypes.c_void_p(d_in.ptr.value + offset)
        lib.htod(src, tut.ptr(img), img.nbytes)
        c_api(lib).blur(how, src, d_out.ptr, h, w, s.handle)
        s.synchronize()
        got = d_out.download(np.float32, img.shape)
        d_out.check_guards()
    return got


def check_blur(ctx, how, what, widths_of_4=True):
    for h, w in blur_shapes(ctx, widths_of_4):
        img = tut.random_f32(ctx.rng, h, w)
        tut.assert_close(run_blur(ctx.lib, how, img), blur_reference(img), rtol=1e-5, atol=1e-5,
                         name=f"{what}, {h} x {w} image ({-(-h // TILE_H)} x {-(-w // TILE_W)} "
                              f"tiles of {TILE_H} x {TILE_W})")


def check_bulk_rules(ctx, how, what):
    """A width that is not a multiple of 4 floats, or an image not 16-byte aligned: refused."""
    for h, w, offset in ((9, 34, 0), (9, 36, 4)):
        img = tut.random_f32(ctx.rng, h, w)
        e = tut.expect_raises(tut.LibraryError, lambda: run_blur(ctx.lib, how, img, offset),
                              f"{what} of a {h} x {w} image {offset} bytes past a 16-byte "
                              f"boundary (a bulk copy needs 16-byte aligned rows)")
        if e.name != "BULK_COPY_RULES":
            raise AssertionError(f"{what}: refused with {e.name}, want BULK_COPY_RULES: {e}")
    ctx.lib.clear_last_error()


@CH.exercise(7, "blur_bulk_kernel: a tile's rows by cuda::memcpy_async, completed by a cuda::barrier")
def test_blur_bulk(ctx):
    require_bulk(ctx.lib)
    check_blur(ctx, BLUR_BULK, "blur fed by bulk copies (version 1)")
    check_bulk_rules(ctx, BLUR_BULK, "blur fed by bulk copies")


@CH.exercise(8, "blur_tma_kernel: the tile as one box of a 2D tensor map")
def test_blur_tma(ctx):
    require_bulk(ctx.lib)
    check_blur(ctx, BLUR_TMA, "blur fed by a tensor map (version 2)")
    check_bulk_rules(ctx, BLUR_TMA, "blur fed by a tensor map")


# ---- checks (lesson code) ---------------------------------------------------------------------
@CH.check("managed-pool", "the default managed pool (CUDA 13.0): managed memory, stream-ordered")
def test_managed_pool(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    pool = P()
    try:
        api.managed_pool(ctypes.byref(pool))
    except tut.CudaError as e:
        if "NotSupported" in str(e) or "InvalidValue" in str(e):
            raise tut.Skip(f"no managed memory pool here: {e}")
        raise
    n = 65_537
    with Stream(lib) as s:
        p = P()
        api.pool_alloc(pool.value, 4 * n, s.handle, ctypes.byref(p))
        try:
            kind = I()
            api.pointer_type(p, ctypes.byref(kind))
            if kind.value != MEM_MANAGED:
                raise AssertionError(f"memory from the managed pool is cudaMemoryType "
                                     f"{kind.value}, want cudaMemoryTypeManaged ({MEM_MANAGED})")
            api.iota(p, n, 5.0, s.handle)
            s.synchronize()
            view = np.ctypeslib.as_array((ctypes.c_float * n).from_address(p.value))
            tut.assert_equal(view.copy(), (5.0 + np.arange(n)).astype(np.float32),
                             name="managed pool memory written by a kernel, read by the host")
            del view
        finally:
            api.pool_free(p, s.handle)
            s.synchronize()


@CH.check("histograms", "the histograms 10.6 is measured against: a table per block, global atomics")
def test_histograms(ctx):
    for nbins, data in histogram_cases(ctx, ctx.large):
        want = np.bincount(data[data < nbins], minlength=nbins).astype(np.uint32)
        for how, what in ((HIST_SHARED, "table per block"), (HIST_GLOBAL, "global atomics")):
            if how == HIST_SHARED and nbins * 4 > SHARED_TABLE_MAX:
                continue   # more than one block's shared memory: what 10.6's clusters are for
            tut.assert_equal(run_histogram(ctx.lib, how, data, nbins), want,
                             name=f"{what} histogram, {nbins} bins, {data.size} values")


@CH.check("blur-loads", "the blur 10.7 and 10.8 are measured against: a tile fed by plain loads")
def test_blur_loads(ctx):
    check_blur(ctx, BLUR_LOADS, "blur fed by loads (version 0)", widths_of_4=False)


# ---- demo and bench -----------------------------------------------------------------------------
def demo(lib):
    info = l2_info(lib)
    print(f"L2: {info.l2 / MiB:.1f} MiB; at most {info.persist_max / MiB:.1f} MiB of it set aside "
          f"for persisting accesses; the largest window {info.window_max / MiB:.1f} MiB")
    if lib.backend == "cpu":
        print("  (figures the emulator makes up, near an H200's; a CPU has no such cache)")
    with Stream(lib) as s, tut.ManagedArray(lib, 4 * 64 * KiB // 4) as m:
        ptrs, szs, _ = ranges_of(m, [64 * KiB] * 4)
        try:
            c_api(lib).prefetch_batch(ptrs, szs, 4, 2, 0, s.handle)
            s.synchronize()
            print("one cudaMemPrefetchBatchAsync: ranges 0-1 to device 0, 2-3 to the host: "
                  + ", ".join(str(last_prefetch(lib, ptrs[r], szs[r])) for r in range(4)))
        except (tut.ExerciseNotDone, tut.Skip) as e:
            print(f"prefetch_batch: {e}")
    print("\nNext: make check CH=10 (the tests of your exercises); make run CH=10 ARGS=--bench")


def bench(lib):
    b = tut.Bench(lib, "10 hopper memory")
    gpu, api = lib.backend == "gpu", c_api(lib)
    info = l2_info(lib)
    b.figure("L2 cache size (cudaDevAttrL2CacheSize)", info.l2 / MiB, "MiB", 1)
    b.figure("L2 persisting set-aside maximum", info.persist_max / MiB, "MiB", 1)
    ceiling = b.d2d_copy_gbps(1 << 30 if gpu else 4 * MiB)
    # -- L2 window: a table read at scattered places while 32 bytes per read stream past --
    n4 = (64 * MiB) if gpu else 64 * KiB      # float4 elements: 1 GiB in + 1 GiB out on a GPU
    reps = 10 if gpu else 2
    print(f"\ntable lookups while {n4 * 32 // MiB} MiB stream past (in + out; GB/s of the "
          f"stream; ratio: to the copy ceiling); one table read per `spl` float4 elements:")
    for table_mib, spl in (((8, 1), (32, 1), (64, 1), (16, 8), (32, 8)) if gpu else ((1, 1),)):
        floats = table_mib * MiB // 4
        ms = {}
        for window in (0, 1):
            ms[window] = tut.median_ms(lambda r, t: api.bench_lookup(floats, n4, spl, window, r,
                                                                     t), reps)
            gbps = n4 * 32 / (ms[window] * 1e-3) / 1e9
            b.row(f"lookups, {table_mib} MiB table, spl {spl}, " +
                  ("L2 window" if window else "no window"), gbps, "GB/s", ceiling)
        b.figure(f"L2 window speedup, {table_mib} MiB table, spl {spl}", ms[0] / ms[1], "x")
    _bench_histograms(lib, b, gpu, reps, ceiling)
    _bench_blur(lib, b, gpu, reps, ceiling)
    # -- batched against looped prefetches, and a discard --
    count, each = (1024, 64 * KiB) if gpu else (16, 64 * KiB)
    print(f"\n{count} managed ranges of {each // KiB} KiB, dirty on the host, sent to device 0 "
          f"(events around the calls; median):")
    pm = {}
    for mode, what in ((0, "loop of cudaMemPrefetchAsync"), (1, "one cudaMemPrefetchBatchAsync"),
                       (2, "one cudaMemDiscardAndPrefetchBatchAsync"),
                       (3, "loop of cudaMemPrefetchAsync, pages on the device already"),
                       (4, "one cudaMemPrefetchBatchAsync, pages on the device already")):
        ms = _unless_newer_cuda(what, lambda: tut.median_ms(
            lambda r, t: api.bench_prefetch(mode, count, each, 0, r, t), reps))
        if ms is not None:
            pm[mode] = ms
            b.row(what, pm[mode], "ms")
    if len(pm) == 5:
        b.figure("looped / batched prefetch time", pm[0] / pm[1], "x")
        b.figure("prefetch of dirty pages / discard-and-prefetch time", pm[1] / pm[2], "x")
        b.figure("looped / batched prefetch time, nothing to move", pm[3] / pm[4], "x")
    # -- batched against looped copies --
    count, each = (1024, 4 * KiB) if gpu else (16, 4 * KiB)
    print(f"\n{count} copies of {each // KiB} KiB, pinned host to device (events; median):")
    cm = {}
    for mode, what in ((0, "loop of cudaMemcpyAsync"), (1, "one cudaMemcpyBatchAsync")):
        ms = _unless_newer_cuda(what, lambda: tut.median_ms(
            lambda r, t: api.bench_copies(mode, count, each, r, t), reps))
        if ms is not None:
            cm[mode] = ms
            b.row(what, cm[mode], "ms")
    if len(cm) == 2:
        b.figure("looped / batched copy time", cm[0] / cm[1], "x")
    # -- allocation costs: pools beyond device memory --
    nbytes, pairs = MiB, (100 if gpu else 10)
    print(f"\n1 MiB allocate + free, per pair (host clock; median of {reps}):")
    us = {}
    for kind, what in ((0, "cudaMallocHost + cudaFreeHost"),
                       (1, "host pool: cudaMallocFromPoolAsync + cudaFreeAsync"),
                       (2, "cudaMallocManaged + cudaFree"),
                       (3, "managed pool: cudaMallocFromPoolAsync + cudaFreeAsync")):
        try:
            ms = tut.median_ms(lambda r, t: api.bench_alloc(kind, nbytes, pairs, r, t), reps)
        except (tut.CudaError, tut.Skip) as e:
            print(f"  {what}: not measured here ({str(e).splitlines()[0]})")
            lib.clear_last_error()
            continue
        us[kind] = ms * 1e3 / pairs
        b.row(what, us[kind], "us")
    if 0 in us and 1 in us:
        b.figure("cudaMallocHost pair / host pool pair", us[0] / us[1], "x")
    if 2 in us and 3 in us:
        b.figure("cudaMallocManaged pair / managed pool pair", us[2] / us[3], "x")


def _unless_newer_cuda(what, measure):
    """measure(), or None after saying why when the library was built with a CUDA that lacks
    the call (CUDA 12.x: tut.Skip "needs CUDA 13.0")."""
    try:
        return measure()
    except tut.Skip as e:
        print(f"  {what}: not measured here ({e})")
        return None


def _bench_histograms(lib, b, gpu, reps, ceiling):
    api = c_api(lib)
    n = (64 << 20) if gpu else (1 << 16)
    print(f"\nhistogram of {n >> 20 if n >= 1 << 20 else n} {'Mi ' if n >= 1 << 20 else ''}"
          f"uint32 values (GB/s of the values read; ratio: to the copy ceiling):")
    clusters = True
    try:
        require_clusters(lib)
    except tut.Skip as e:
        clusters = False
        print(f"  the cluster histogram: not measured ({e})")
    for nbins in ((4096, 16384, 65536) if gpu else (4096,)):
        ms = {}
        for how, what in ((HIST_CLUSTER, "cluster of 4, one table in DSMEM"),
                          (HIST_SHARED, "a table per block + global atomics"),
                          (HIST_GLOBAL, "global atomics alone")):
            if how == HIST_CLUSTER and not clusters:
                continue
            if how == HIST_SHARED and nbins * 4 > SHARED_TABLE_MAX:
                print(f"  {nbins} bins, {what}: not measured ({nbins * 4 // KiB} KiB of table "
                      f"is more than one block's shared memory)")
                continue
            ms[how] = tut.median_ms(lambda r, t: api.bench_histogram(how, n, nbins, r, t), reps)
            b.row(f"histogram, {nbins} bins, {what}", 4 * n / (ms[how] * 1e-3) / 1e9, "GB/s",
                  ceiling)
        if HIST_CLUSTER in ms:
            b.figure(f"histogram, {nbins} bins: global atomics time / cluster DSMEM time",
                     ms[HIST_GLOBAL] / ms[HIST_CLUSTER], "x")
            if HIST_SHARED in ms:
                b.figure(f"histogram, {nbins} bins: per-block table time / cluster DSMEM time",
                         ms[HIST_SHARED] / ms[HIST_CLUSTER], "x")


def _bench_blur(lib, b, gpu, reps, ceiling):
    api = c_api(lib)
    h, w = (8192, 8192) if gpu else (256, 256)
    print(f"\nvertical blur of a {h} x {w} float image, {2 * BLUR_R + 1} rows per output, tiles of "
          f"{TILE_H} x {TILE_W} (GB/s of 2 * h * w * 4 bytes: the image read once and written "
          f"once; ratio: to the copy ceiling):")
    try:
        require_bulk(lib)
        bulk = True
    except tut.Skip as e:
        bulk = False
        print(f"  the TMA-fed versions: not measured ({e})")
    ms = {}
    for how, what in ((BLUR_LOADS, "tile fed by plain loads"),
                      (BLUR_BULK, "tile fed by one bulk copy per row (cuda::memcpy_async)"),
                      (BLUR_TMA, "tile fed by one 2D tensor-map copy")):
        if how != BLUR_LOADS and not bulk:
            continue
        ms[how] = tut.median_ms(lambda r, t: api.bench_blur(how, h, w, r, t), reps)
        b.row(f"blur, {what}", 2 * h * w * 4 / (ms[how] * 1e-3) / 1e9, "GB/s", ceiling)
    for how, what in ((BLUR_BULK, "bulk copies"), (BLUR_TMA, "tensor map")):
        if how in ms:
            b.figure(f"blur: loads time / {what} time", ms[BLUR_LOADS] / ms[how], "x")


def warm_up(lib):
    """What CUDA sets up once per process (a stream's resources, a pool's first block, the
    managed memory machinery) would show as a leak of the first test: use each once, through
    lesson code only."""
    api = c_api(lib)
    with Stream(lib) as s, tut.ManagedArray(lib, 64 * KiB) as m:
        m.array[:] = 0.0
        api.prefetch_one(m.address, m.nbytes, 0, s.handle)
        api.prefetch_one(m.address, m.nbytes, HOST, s.handle)
        s.synchronize()
        pool = P()
        try:
            api.managed_pool(ctypes.byref(pool))
            p = P()
            api.pool_alloc(pool.value, 4096, s.handle, ctypes.byref(p))
            api.pool_free(p, s.handle)
            s.synchronize()
        except (tut.CudaError, tut.Skip):   # none here: managed-pool says why
            pass
    lib.clear_last_error()


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
