# SPDX-License-Identifier: MIT
"""Chapter 05 unified_memory: managed memory, prefetches, advice, and NumPy views with no copy.

From the repository's root (make run uses the exercise tree; TUT_TREE=solutions the solutions):
    make run CH=05                the lesson's demo: one pointer on both sides, what CUDA says of it
    make run CH=05 ARGS=--check   the tests (make check runs each exercise on its own)
    make run CH=05 ARGS=--bench   faults against prefetches (1 GiB), managed against cudaMalloc,
                                  read-mostly and the other advice, GB/s against size,
                                  oversubscription behind cudaMalloc ballast
    build/venv/bin/python chapters/05_unified_memory/driver.py [--check | --bench]   the same
"""
import ctypes
import functools
import gc
import os
import sys
from pathlib import Path
from types import SimpleNamespace

# The emulator fills every fresh allocation; a smaller emulated device keeps that cheap. A real
# GPU ignores this variable.
os.environ.setdefault("CUEMU_DEVICE_MEMORY", "256M")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(5, "05_unified_memory")
I, F, P, Z, LL = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
UNREGISTERED, PINNED, DEVICE, MANAGED = 0, 1, 2, 3             # cudaMemoryType
HOST, NONE_OR_MIXED = -1, -2                                    # cudaCpuDeviceId, cudaInvalidDeviceId
SET_READ_MOSTLY, UNSET_READ_MOSTLY = 1, 2                      # cudaMemoryAdvise
SET_PREFERRED, UNSET_PREFERRED, SET_ACCESSED_BY, UNSET_ACCESSED_BY = 3, 4, 5, 6
ATTR_READ_MOSTLY, ATTR_PREFERRED, ATTR_LAST_PREFETCH = 1, 2, 4  # cudaMemRangeAttribute
# Chunks of the pass-by-pass exercise are whole multiples of this: a prefetch is widened to
# whole pages, and 64 KiB is a whole number of pages on 4 KiB and 64 KiB page systems alike.
PASS_GRANULE = 64 * KiB
# struct list_node { long long key; struct list_node *next; } in unified_memory.cu
NODE = np.dtype([("key", "<i8"), ("next", "<u8")])


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int memory_type(const void *ptr, int *type, int *device)
        memory_type=lib.bind("memory_type", [P, ctypes.POINTER(I), ctypes.POINTER(I)]),
        # int device_caps(int device, int *managed, int *concurrent, int *pageable)
        device_caps=lib.bind("device_caps", [I] + [ctypes.POINTER(I)] * 3),
        # int pinned_alloc(void **h_ptr, size_t bytes)
        pinned_alloc=lib.bind("pinned_alloc", [ctypes.POINTER(P), Z]),
        # int pinned_free(void *h_ptr)
        pinned_free=lib.bind("pinned_free", [P]),
        # int managed_prefetch(const void *ptr, size_t bytes, int device)
        managed_prefetch=lib.bind("managed_prefetch", [P, Z, I]),
        # int managed_advise(const void *ptr, size_t bytes, int advice, int device)
        managed_advise=lib.bind("managed_advise", [P, Z, I, I]),
        # int managed_range_attr(const void *ptr, size_t bytes, int attribute, int *value)
        managed_range_attr=lib.bind("managed_range_attr", [P, Z, I, ctypes.POINTER(I)]),
        # int launch_scale_shift(float *x, size_t n, float a, float b)
        launch_scale_shift=lib.bind("launch_scale_shift", [P, Z, F, F]),
        # int lists_build(list_node *pool, int n_nodes, const long long *keys,
        #     const int *next_index, list_node **heads, const int *head_index, int n_lists)
        lists_build=lib.bind("lists_build", [P, I, P, P, P, P, I], out=(0, 4)),
        # int managed_scale_shift(float *m, size_t n, float a, float b)
        managed_scale_shift=lib.bind("managed_scale_shift", [P, Z, F, F]),
        # int lut_gather(const float *table, int table_n, const int *idx, float *out, size_t n)
        lut_gather=lib.bind("lut_gather", [P, I, P, P, Z], out=(3,)),
        # int lists_walk(list_node *const *heads, int n_lists, int max_nodes, long long *sums,
        #     int *lengths)
        lists_walk=lib.bind("lists_walk", [P, I, I, P, P], out=(3, 4)),
        # int managed_in_passes(float *m, size_t n, size_t chunk_elems, float a, float b,
        #     int *passes)
        managed_in_passes=lib.bind("managed_in_passes", [P, Z, Z, F, F, ctypes.POINTER(I)]),
        # int bench_managed(float *x, size_t n, int mode, int reps, float *times_ms)
        bench_managed=lib.bind("bench_managed", [P, Z, I, I, tut.c_float_p]),
        # int bench_lut(const float *table, int table_n, const int *idx, float *out, size_t n,
        #     int reps, float *times_ms)
        bench_lut=lib.bind("bench_lut", [P, I, P, P, Z, I, tut.c_float_p], out=(3, 6)),
        # int bench_host_owned(float *x, size_t n, int reps, float *times_ms)
        bench_host_owned=lib.bind("bench_host_owned", [P, Z, I, tut.c_float_p]),
        # int bench_oversubscribe(size_t leave_free, size_t bytes, int mode, int reps,
        #     float *times_ms, size_t *ballast_out)
        bench_oversubscribe=lib.bind("bench_oversubscribe", [Z, Z, I, I, tut.c_float_p,
                                                             tut.c_size_t_p]),
    )


# ---- what CUDA says about pointers, devices and managed ranges ---------------------------------
def memory_type(lib, address):
    """(cudaMemoryType, device) of an address, from cudaPointerGetAttributes."""
    t, d = I(-1), I(-9)
    c_api(lib).memory_type(address, ctypes.byref(t), ctypes.byref(d))
    return t.value, d.value


@functools.cache
def caps(lib, device=0):
    v = [I(-1) for _ in range(3)]
    c_api(lib).device_caps(device, *(ctypes.byref(x) for x in v))
    return SimpleNamespace(managed=v[0].value, concurrent=v[1].value, pageable=v[2].value)


def needs_concurrent_access(lib):
    """Prefetching to the device needs concurrentManagedAccess = 1 (Linux with a Pascal or newer
    GPU); Windows, WSL and some virtual machines report 0."""
    c = caps(lib)
    if not c.managed:
        raise tut.Skip("this device has no managed memory (cudaDevAttrManagedMemory = 0)")
    if not c.concurrent:
        raise tut.Skip("concurrentManagedAccess = 0 here (Windows, WSL or a VM?): managed memory "
                       "cannot be prefetched to the device, and the host may not touch it while "
                       "any kernel runs")


def range_attr(lib, m, attribute, nbytes=None):
    """cudaMemRangeGetAttribute over the first nbytes of m (all of it by default)."""
    v = I(-99)
    c_api(lib).managed_range_attr(m.address, m.nbytes if nbytes is None else nbytes, attribute,
                                  ctypes.byref(v))
    return v.value


def advised_bytes(lib, m, attribute, want):
    """How many bytes from m's start the attribute reads `want` over (a binary search on the
    ranges' answer): what a call advised, to say against what it should have."""
    lo, hi = 0, m.nbytes
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if range_attr(lib, m, attribute, mid) == want:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _device_arg(lib, device):
    tut.check_count(device, "device", minimum=HOST)
    count = lib.device_count()
    if device >= count:
        raise ValueError(f"device {device} does not exist: this machine has {count} device(s) "
                         f"(0..{count - 1}), and the host is {HOST}")
    return device


def prefetch(lib, m, device):
    """Move all of a ManagedArray to `device` (HOST for the host) and wait."""
    tut.check_managed(m, m.dtype if isinstance(m, tut.ManagedArray) else np.float32, "m")
    c_api(lib).managed_prefetch(m.address, m.nbytes, _device_arg(lib, device))


def advise(lib, m, advice, device=0):
    tut.check_managed(m, m.dtype if isinstance(m, tut.ManagedArray) else np.float32, "m")
    if advice not in range(SET_READ_MOSTLY, UNSET_ACCESSED_BY + 1):
        raise ValueError(f"advice must be a cudaMemoryAdvise value, 1..6, not {advice!r}")
    c_api(lib).managed_advise(m.address, m.nbytes, advice, _device_arg(lib, device))


def _emu_prefetch_counter(lib):
    """The emulator's teaching aid, absent on a GPU: bytes of managed memory whose last
    prefetch went to the device, now and at their peak since the last reset."""
    fn = getattr(lib.cdll, "cuemuManagedDeviceBytes", None)
    if fn is None:
        return None
    fn.argtypes, fn.restype = [tut.c_size_t_p, tut.c_size_t_p, I], None

    def read(reset=False):
        now, peak = Z(0), Z(0)
        fn(ctypes.byref(now), ctypes.byref(peak), int(reset))
        return now.value, peak.value
    return read


# ---- Python entry points for the exercises -----------------------------------------------------
def managed_scale_shift(lib, m, a, b):
    x = tut.check_managed(m, np.float32, "m")
    c_api(lib).managed_scale_shift(m.address, x.size, a, b)
    return x


def lut_gather(lib, table, idx, out):
    t = tut.check_managed(table, np.float32, "table", ndim=1)
    i = tut.check_managed(idx, np.int32, "idx")
    tut.check_managed(out, np.float32, "out", shape=i.shape)
    if t.size > 2**31 - 1:
        raise ValueError("the table has more than 2^31 - 1 entries")
    if i.size and (i.min() < 0 or i.max() >= t.size):
        raise ValueError(f"idx must lie in [0, {t.size}): a kernel reading outside the table "
                         f"reads someone else's memory")
    c_api(lib).lut_gather(table.address, t.size, idx.address, out.address, i.size)
    return out.array


def lists_build(lib, pool, keys, next_index, heads, head_index):
    """Links pool's nodes on the host (C code): next_index[j] and head_index[k] are node
    numbers, -1 for none."""
    p = tut.check_managed(pool, NODE, "pool", ndim=1)
    tut.check_managed(heads, np.uint64, "heads", ndim=1)
    tut.check_array(keys, np.int64, "keys", shape=p.shape)
    tut.check_array(next_index, np.int32, "next_index", shape=p.shape)
    tut.check_array(head_index, np.int32, "head_index", shape=heads.shape)
    for name, v in (("next_index", next_index), ("head_index", head_index)):
        if v.size and (v.min() < -1 or v.max() >= p.size):
            raise ValueError(f"{name} must lie in [-1, {p.size})")
    c_api(lib).lists_build(pool.address, p.size, tut.ptr(keys), tut.ptr(next_index),
                           heads.address, tut.ptr(head_index), heads.shape[0])


def lists_walk(lib, heads, max_nodes, sums, lengths):
    h = tut.check_managed(heads, np.uint64, "heads", ndim=1)
    tut.check_managed(sums, np.int64, "sums", shape=h.shape)
    tut.check_managed(lengths, np.int32, "lengths", shape=h.shape)
    tut.check_count(max_nodes, "max_nodes")
    c_api(lib).lists_walk(heads.address, tut.check_count(h.size, "n_lists", minimum=1),
                          max_nodes, sums.address, lengths.address)


def chunk_for_budget(budget_bytes):
    """The most floats per pass that fit in budget_bytes, in whole 64 KiB granules."""
    tut.check_count(budget_bytes, "budget_bytes", maximum=2**62)
    if budget_bytes < PASS_GRANULE:
        raise ValueError(f"a budget of {budget_bytes} bytes is below one {PASS_GRANULE}-byte "
                         f"granule: no pass fits")
    return budget_bytes // PASS_GRANULE * PASS_GRANULE // 4


def in_passes(lib, m, budget_bytes, a, b):
    """m = a * m + b, with at most budget_bytes of m on the device at a time. Returns the
    number of passes."""
    x = tut.check_managed(m, np.float32, "m")
    chunk = chunk_for_budget(budget_bytes)
    passes = I(-1)
    c_api(lib).managed_in_passes(m.address, x.size, chunk, a, b, ctypes.byref(passes))
    return passes.value


# ---- references ---------------------------------------------------------------------------------
def random_ab(rng):
    return float(rng.uniform(0.5, 2.0)), float(rng.uniform(-3.0, 3.0))


def check_on_host(lib, m, what):
    """After a function that promised to leave m on the host: the last prefetch of every page
    of it went to the host."""
    last = range_attr(lib, m, ATTR_LAST_PREFETCH)
    if last != HOST:
        raise AssertionError(f"{what}: the last prefetch of the array went to "
                             f"{'several places (or none)' if last == NONE_OR_MIXED else f'device {last}'}"
                             f", not to the host ({HOST}): NumPy's reads will fault the pages back "
                             f"one at a time (prefetch the data back to the host before returning)")


# ---- exercises ------------------------------------------------------------------------------------
def check_one_stream(lib, call, what):
    """CPU backend only: every prefetch and kernel call() issues must go to one stream the
    function created. The default stream gives the same numbers (it waits for a blocking
    stream, and the other way round) but serialises against every other stream of the program."""
    ops = [(s, k) for s, k in tut.stream_log(lib, call) if k in (1, 9)]   # kernels, prefetches
    streams = sorted({s for s, _ in ops})
    if not ops or len(streams) != 1 or streams[0] in (0, -1):
        raise AssertionError(f"{what}: its prefetches and kernels went to streams {streams} "
                             f"(0: the default stream): put every one on the stream you "
                             f"created")


def check_prefetch_order(lib, call, what):
    """CPU backend only (a GPU keeps no log of the calls; on one this is not checked): the
    prefetches and the kernel call() issues, in stream order, with each prefetch's destination,
    must be: to device 0, the kernel, back to the host. A first prefetch to the host instead
    still gives the right numbers, but the kernel then demand-faults every page (7x slower at
    1 GiB on an H200)."""
    ops = [(k, d) for _, k, d in tut.stream_log(lib, call, detail=True) if k in (1, 9)]
    want = [(9, 0), (1, 0), (9, HOST)]
    if ops != want:
        names = {1: "kernel", 9: "prefetch"}
        shown = [names[k] + (f" to {'the host' if d == HOST else f'device {d}'}" if k == 9 else "")
                 for k, d in ops]
        raise AssertionError(f"{what}: it issued {shown}: want a prefetch to device 0, the "
                             f"kernel, then a prefetch to the host ({HOST})")


@CH.exercise(1, "managed_scale_shift: prefetch in, kernel, prefetch back, synchronise")
def test_managed_scale_shift(ctx):
    lib = ctx.lib
    needs_concurrent_access(lib)
    for n in ctx.sizes():
        a, b = random_ab(ctx.rng)
        with tut.ManagedArray(lib, n) as m:
            x = tut.random_f32(ctx.rng, n)
            m.array[:] = x   # NumPy writes the managed memory itself: the pages are on the host
            address = m.address
            managed_scale_shift(lib, m, a, b)
            # Read at once, as a NumPy user would: the function must have waited for the GPU.
            tut.assert_close(m.array, tut.ref_scale_shift(x, a, b), rtol=1e-6, atol=1e-6,
                             name=f"managed_scale_shift n={n}")
            assert m.address == address and m.array.ctypes.data == address
            check_on_host(lib, m, f"managed_scale_shift n={n}")
            if ctx.backend == "cpu":
                check_one_stream(lib, lambda: managed_scale_shift(lib, m, a, b),
                                 f"managed_scale_shift n={n}")
                check_prefetch_order(lib, lambda: managed_scale_shift(lib, m, a, b),
                                     f"managed_scale_shift n={n}")


@CH.exercise(2, "lut_gather: a read-mostly table every SM reads, and the host too")
def test_lut_gather(ctx):
    lib = ctx.lib
    needs_concurrent_access(lib)
    for table_n, n in ((1, 33), (1000, 999_983), (65_537, 257)):
        with tut.ManagedArray(lib, table_n) as table, tut.ManagedArray(lib, n, np.int32) as idx, \
                tut.ManagedArray(lib, n) as out:
            table.array[:] = tut.random_f32(ctx.rng, table_n)
            idx.array[:] = ctx.rng.integers(0, table_n, n, dtype=np.int32)
            out.array.view(np.uint8)[:] = tut.POISON_BYTE
            if range_attr(lib, table, ATTR_READ_MOSTLY) != 0:
                raise AssertionError("a fresh table is read-mostly already")
            got = lut_gather(lib, table, idx, out)
            tut.assert_equal(got, table.array[idx.array], name=f"lut_gather table_n={table_n}")
            # Read back on the emulator only: on an H200 (CUDA 13.0, 2026-12-01) the attribute
            # read 0 over a 4000-byte table right after the advice (over a 4-byte one, 1); small
            # managed allocations share pages, and why that changes the answer is not settled.
            if ctx.backend == "cpu" and range_attr(lib, table, ATTR_READ_MOSTLY) != 1:
                done = advised_bytes(lib, table, ATTR_READ_MOSTLY, 1)
                raise AssertionError(
                    f"lut_gather table_n={table_n}: the table is {table.nbytes} bytes, and "
                    + (f"only its first {done} bytes were advised read-mostly" if done else
                       "none of it was advised read-mostly")
                    + f" (cudaMemAdviseSetReadMostly over table_n * sizeof(float) = "
                      f"{table.nbytes} bytes; "
                    + ("a count of elements where bytes were meant?)"
                       if done and done * 4 <= table.nbytes + 4096 else "was it given?)"))
            # Every page of the table was last prefetched to device 0 (a byte count without
            # its sizeof prefetches a quarter of it). Checked where the answer is per page as
            # documented: the emulator (see the read-mostly note above for the H200).
            if ctx.backend == "cpu" and range_attr(lib, table, ATTR_LAST_PREFETCH) != 0:
                raise AssertionError(f"lut_gather table_n={table_n}: the table's pages were "
                                     f"not all prefetched to device 0 (prefetch all "
                                     f"table_n * sizeof(float) bytes)")
            if ctx.backend == "cpu":
                check_advice_first(lib, lambda: lut_gather(lib, table, idx, out),
                                   f"lut_gather table_n={table_n}")
            # The host writes the table: every other copy of the pages it writes is dropped, so
            # the next call must see the new values (read-mostly is a hint, never a stale copy).
            table.array[:] = -table.array - 1.0
            got = lut_gather(lib, table, idx, out)
            tut.assert_equal(got, table.array[idx.array],
                             name=f"lut_gather table_n={table_n}, after the host rewrote the table")


def check_advice_first(lib, call, what):
    """CPU backend only (a GPU keeps no log of the calls; on one this is not checked): the
    read-mostly advice must come before the prefetch to device 0, and both before the kernel.
    Advice given after the prefetch leaves the right numbers, but the prefetch has then moved
    the pages instead of copying them, and the host's next read pulls them back."""
    log = [(k, d) for _, k, d in tut.stream_log(lib, call, detail=True)]
    at = {name: next((i for i, e in enumerate(log) if e == want), None) for name, want in
          (("advice", (tut.LOG_ADVICE, SET_READ_MOSTLY)), ("prefetch", (9, 0)),
           ("kernel", (1, 0)))}
    if None in at.values() or not at["advice"] < at["prefetch"] < at["kernel"]:
        order = sorted((i, name) for name, i in at.items() if i is not None)
        raise AssertionError(f"{what}: the calls came in the order {[n for _, n in order]}: "
                             f"want the read-mostly advice, then the prefetch to device 0, then "
                             f"the kernel")


def random_lists(rng, n_nodes, n_lists):
    """A random forest of lists over n_nodes nodes: node order shuffled (a walk jumps around
    memory), list lengths uneven, some lists empty. Returns the build arrays and, per list,
    the reference sum and length."""
    keys = rng.integers(-2**40, 2**40, n_nodes, dtype=np.int64)
    order = rng.permutation(n_nodes).astype(np.int32)
    owner = rng.integers(0, n_lists, n_nodes)
    owner[owner % 5 == 4] -= 1   # lists 4, 9, 14, ... stay empty
    next_index = np.full(n_nodes, -1, np.int32)
    head_index = np.full(n_lists, -1, np.int32)
    sums = np.zeros(n_lists, np.int64)
    lengths = np.zeros(n_lists, np.int32)
    by_list = order[np.argsort(owner, kind="stable")]
    groups = np.split(by_list, np.cumsum(np.bincount(owner, minlength=n_lists))[:-1])
    for k, members in enumerate(groups):
        if members.size:
            head_index[k] = members[0]
            next_index[members[:-1]] = members[1:]
            sums[k] = keys[members].sum()
            lengths[k] = members.size
    return keys, next_index, head_index, sums, lengths


@CH.exercise(3, "lists_walk: lists built on the host, walked on the device")
def test_lists_walk(ctx):
    lib = ctx.lib
    sizes = [(1, 1), (50, 7), (3001, 129)] + ([(200_003, 4099)] if ctx.large else [])
    for n_nodes, n_lists in sizes:
        keys, next_index, head_index, want_sums, want_lengths = random_lists(ctx.rng, n_nodes,
                                                                             n_lists)
        cycle = n_lists >= 7 and want_lengths[3] >= 1
        if cycle:   # the last node of list 3 points back to its first: a cycle
            last = head_index[3]
            while next_index[last] >= 0:
                last = next_index[last]
            next_index[last] = head_index[3]
        with tut.ManagedArray(lib, n_nodes, NODE) as pool, \
                tut.ManagedArray(lib, n_lists, np.uint64) as heads, \
                tut.ManagedArray(lib, n_lists, np.int64) as sums, \
                tut.ManagedArray(lib, n_lists, np.int32) as lengths:
            lists_build(lib, pool, keys, next_index, heads, head_index)
            for out in (sums, lengths):
                out.array.view(np.uint8)[:] = tut.POISON_BYTE
            lists_walk(lib, heads, n_nodes, sums, lengths)
            got_len, got_sum = lengths.array.copy(), sums.array.copy()
            if cycle:
                if got_len[3] != -1:
                    raise AssertionError(f"lists_walk: list 3 has a cycle, but its length came "
                                         f"back as {got_len[3]}, not -1 (stop after max_nodes "
                                         f"steps)")
                # "the sum so far": the keys of exactly max_nodes (= n_nodes) steps
                node, cycle_sum = head_index[3], 0
                for _ in range(n_nodes):
                    cycle_sum += int(keys[node])
                    node = next_index[node]
                if got_sum[3] != cycle_sum:
                    raise AssertionError(f"lists_walk: list 3 has a cycle; its sum after "
                                         f"max_nodes = {n_nodes} steps is {cycle_sum}, got "
                                         f"{got_sum[3]} (take exactly max_nodes steps)")
                got_len[3], got_sum[3] = want_lengths[3], want_sums[3]
            tut.assert_equal(got_len, want_lengths,
                             name=f"lists_walk lengths, {n_nodes} nodes in {n_lists} lists")
            tut.assert_equal(got_sum, want_sums,
                             name=f"lists_walk sums, {n_nodes} nodes in {n_lists} lists")


@CH.exercise(4, "managed_in_passes: an array larger than the budget, pass by pass")
def test_in_passes(ctx):
    lib = ctx.lib
    needs_concurrent_access(lib)
    counter = _emu_prefetch_counter(lib)
    # A prefetch is widened to whole pages: a chunk that does not start on a page boundary
    # (the emulator's allocations start 256-byte aligned) brings part of a page more at each end.
    slack = 2 * os.sysconf("SC_PAGE_SIZE")
    n_big = 12_500_003 if ctx.large else 1_000_003   # 50 MB: 763 passes of 64 KiB
    # The last case's n is a whole number of chunks: no empty pass after the last one.
    for n, budget in ((n_big, PASS_GRANULE), (n_big, 5 * PASS_GRANULE + 123),
                      (n_big, 4 * n_big + 1), (3 * chunk_for_budget(PASS_GRANULE), PASS_GRANULE)):
        a, b = random_ab(ctx.rng)
        chunk = chunk_for_budget(budget)
        with tut.ManagedArray(lib, n) as m:
            x = tut.random_f32(ctx.rng, n)
            m.array[:] = x
            if counter:
                counter(reset=True)
            passes = in_passes(lib, m, budget, a, b)
            tut.assert_close(m.array, tut.ref_scale_shift(x, a, b), rtol=1e-6, atol=1e-6,
                             name=f"managed_in_passes n={n} budget={budget}")
            want = -(-n // chunk)
            if passes != want:
                raise AssertionError(f"managed_in_passes n={n}, {chunk} floats per pass: "
                                     f"reported {passes} passes, want {want}")
            check_on_host(lib, m, f"managed_in_passes budget={budget}")
            if ctx.backend == "cpu":
                check_one_stream(lib, lambda: in_passes(lib, m, budget, a, b),
                                 f"managed_in_passes n={n} budget={budget}")
            if counter:   # the emulator counted what the prefetches put on the device at once
                peak = counter()[1]
                if peak > min(budget, 4 * n) + slack:
                    raise AssertionError(f"managed_in_passes: {peak} bytes were prefetched to "
                                         f"the device at once, over the budget of {budget}: "
                                         f"evict each chunk before the next one comes in")


# ---- checks of the lesson's other claims -------------------------------------------------------
@CH.check("view", "ManagedArray: a NumPy view without a copy, kept alive by views, freed once")
def test_view(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    m = tut.ManagedArray(lib, (3, 1001), np.float32)
    assert m.array.ctypes.data == m.address, "the NumPy array is not a view of the memory"
    assert np.asarray(m).ctypes.data == m.address, "np.asarray(ManagedArray) copied"
    assert memory_type(lib, m.address)[0] == MANAGED
    x = tut.random_f32(ctx.rng, 3, 1001)
    m.array[:] = x
    api.launch_scale_shift(m.address, x.size, 2.0, 1.0)   # queued, not waited for
    lib.synchronize()                                      # only now may the host read
    tut.assert_close(m.array, tut.ref_scale_shift(x, 2.0, 1.0), name="kernel on a ManagedArray")
    row = m.array[1]
    tut.expect_raises(ValueError, m.free, "free() while a NumPy view is alive")
    del row
    as_u32 = m.view(np.uint32)
    assert as_u32.shape == (3003,) and as_u32.ctypes.data == m.address
    tut.expect_raises(ValueError, m.free, "free() while a view() is alive")
    del as_u32
    m.free()
    tut.expect_raises(ValueError, m.free, "free() twice")
    tut.expect_raises(ValueError, lambda: m.array, "use after free()")
    tut.expect_raises(ValueError, lambda: m.address, "address after free()")
    tut.expect_raises(ValueError, lambda: np.asarray(m), "np.asarray after free()")
    tut.expect_raises(ValueError, lambda: managed_scale_shift(lib, m, 1.0, 0.0),
                      "a freed ManagedArray passed to C")
    # A view that outlives its ManagedArray (and the `with` block) keeps the memory alive.
    with tut.ManagedArray(lib, 4099, np.int32) as k:
        k.array[:] = np.arange(4099)
        survivor = k.array[4000:]
        fin = k._finalizer
    assert not k.alive and fin.alive, "the memory went while a view still shows it"
    tut.assert_equal(survivor, np.arange(4000, 4099), name="a view after the with block")
    del survivor
    gc.collect()
    assert not fin.alive, "the memory outlived its last view"
    tut.ManagedArray(lib, 12345)   # nobody keeps it: freed at once
    gc.collect()
    # Wrong dtype or shape for a view, or a bad ManagedArray.
    with tut.ManagedArray(lib, 5) as v:
        for bad, exc, what in (
                (lambda: v.view(np.float64), ValueError, "20 bytes as float64"),
                (lambda: v.view(np.float32, (2, 2)), ValueError, "5 floats as 2x2"),
                (lambda: v.view(np.float32, (6,)), ValueError, "5 floats as 6"),
                (lambda: v.view(object), TypeError, "object dtype view"),
                (lambda: np.asarray(v, dtype=np.float64, copy=False), ValueError,
                 "another dtype without a copy"),
                (lambda: tut.ManagedArray(lib, 0), ValueError, "0 elements"),
                (lambda: tut.ManagedArray(lib, -3), ValueError, "negative shape"),
                (lambda: tut.ManagedArray(lib, 2.5), TypeError, "float shape"),
                (lambda: tut.ManagedArray(lib, 4, object), TypeError, "object dtype")):
            tut.expect_raises(exc, bad, what)
        assert v.view(np.uint8, (4, 5)).shape == (4, 5)


@CH.check("pointer-types", "cudaPointerGetAttributes tells managed, device, pinned, pageable apart")
def test_pointer_types(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    pageable = np.ones(1000, np.float32)
    pinned = P()
    api.pinned_alloc(ctypes.byref(pinned), 4096)
    try:
        with tut.DeviceBuffer(lib, 4096) as d_buf, tut.ManagedArray(lib, 1024) as m:
            got = {"pageable (NumPy)": memory_type(lib, tut.ptr(pageable))[0],
                   "pinned (cudaMallocHost)": memory_type(lib, pinned.value)[0],
                   "device (cudaMalloc)": memory_type(lib, d_buf.ptr)[0],
                   "managed (cudaMallocManaged)": memory_type(lib, m.address + 1000)[0]}
            want = {"pageable (NumPy)": UNREGISTERED, "pinned (cudaMallocHost)": PINNED,
                    "device (cudaMalloc)": DEVICE, "managed (cudaMallocManaged)": MANAGED}
            if got != want:
                raise AssertionError(f"cudaMemoryType: got {got}, want {want}")
            assert memory_type(lib, d_buf.ptr)[1] == 0, "device memory not on device 0"
    finally:
        api.pinned_free(pinned.value)


@CH.check("advice", "advice read back: read-mostly, preferred location, last prefetch")
def test_advice(ctx):
    lib = ctx.lib
    needs_concurrent_access(lib)
    with tut.ManagedArray(lib, 100_000) as m:
        m.array[:] = 1.0
        assert range_attr(lib, m, ATTR_READ_MOSTLY) == 0
        advise(lib, m, SET_READ_MOSTLY)
        assert range_attr(lib, m, ATTR_READ_MOSTLY) == 1
        advise(lib, m, UNSET_READ_MOSTLY)
        assert range_attr(lib, m, ATTR_READ_MOSTLY) == 0
        advise(lib, m, SET_PREFERRED, HOST)
        assert range_attr(lib, m, ATTR_PREFERRED) == HOST
        advise(lib, m, SET_PREFERRED, 0)
        assert range_attr(lib, m, ATTR_PREFERRED) == 0
        advise(lib, m, UNSET_PREFERRED)
        assert range_attr(lib, m, ATTR_PREFERRED) == NONE_OR_MIXED
        advise(lib, m, SET_ACCESSED_BY, 0)
        advise(lib, m, UNSET_ACCESSED_BY, 0)
        prefetch(lib, m, 0)
        assert range_attr(lib, m, ATTR_LAST_PREFETCH) == 0
        prefetch(lib, m, HOST)
        assert range_attr(lib, m, ATTR_LAST_PREFETCH) == HOST
        tut.assert_equal(m.array, np.ones(100_000), name="data after two prefetches")


@CH.check("bad-input", "bad device, advice on device memory, wrong arrays: clear errors")
def test_bad_input(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    count = lib.device_count()
    with tut.ManagedArray(lib, 1000) as m, tut.ManagedArray(lib, 10, np.float64) as m64, \
            tut.DeviceBuffer(lib, 4000) as d_buf:
        # A device that does not exist: Python says so first; CUDA says cudaErrorInvalidDevice.
        tut.expect_raises(ValueError, lambda: prefetch(lib, m, count), "prefetch to a device "
                          "that does not exist")
        tut.expect_raises(ValueError, lambda: prefetch(lib, m, -2), "device -2")
        tut.expect_cuda_error(lib, "cudaErrorInvalidDevice",
                              lambda: api.managed_prefetch(m.address, m.nbytes, count),
                              f"cudaMemPrefetchAsync to device {count}")
        # Advice is for managed memory: device memory gets cudaErrorInvalidValue.
        tut.expect_raises(TypeError, lambda: advise(lib, d_buf, SET_READ_MOSTLY),
                          "advise() on a DeviceBuffer")
        tut.expect_cuda_error(lib, "cudaErrorInvalidValue",
                              lambda: api.managed_advise(d_buf.ptr.value, 4000, SET_READ_MOSTLY, 0),
                              "cudaMemAdvise on cudaMalloc memory")
        tut.expect_raises(ValueError, lambda: advise(lib, m, 7), "advice 7")
        plain = np.ones(1000, np.float32)
        idx = tut.ManagedArray(lib, 10, np.int32)
        idx.array[:] = 0
        out = tut.ManagedArray(lib, 10)
        for bad, exc, what in (
                (lambda: managed_scale_shift(lib, plain, 1.0, 0.0), TypeError, "a NumPy array"),
                (lambda: managed_scale_shift(lib, m64, 1.0, 0.0), TypeError, "float64 managed"),
                (lambda: managed_scale_shift(lib, d_buf, 1.0, 0.0), TypeError, "a DeviceBuffer"),
                (lambda: lut_gather(lib, m, idx, m), ValueError, "out of the wrong shape"),
                (lambda: lut_gather(lib, m, m, out), TypeError, "float idx"),
                (lambda: in_passes(lib, m, PASS_GRANULE - 1, 1.0, 0.0), ValueError,
                 "a budget below one granule"),
                (lambda: in_passes(lib, m, 2.5, 1.0, 0.0), TypeError, "a float budget")):
            tut.expect_raises(exc, bad, what)
        idx.array[3] = 1000
        tut.expect_raises(ValueError, lambda: lut_gather(lib, m, idx, out), "idx past the table")
        idx.array[3] = -1
        tut.expect_raises(ValueError, lambda: lut_gather(lib, m, idx, out), "negative idx")
        idx.free()
        out.free()
        with tut.ManagedArray(lib, 4, NODE) as pool, tut.ManagedArray(lib, 2, np.uint64) as h:
            keys, nxt, hd = np.zeros(4, np.int64), np.full(4, -1, np.int32), np.zeros(2, np.int32)
            nxt[1] = 4
            tut.expect_raises(ValueError, lambda: lists_build(lib, pool, keys, nxt, h, hd),
                              "a next index past the pool")
            # The C side refuses it too, if Python is bypassed.
            tut.expect_raises(ValueError, lambda: api.lists_build(
                pool.address, 4, tut.ptr(keys), tut.ptr(nxt), h.address, tut.ptr(hd), 2),
                "C: a next index past the pool")


# ---- what the emulator catches, kept true by a test -----------------------------------------------
def _early_read_child():
    """Run in a child process by test_early_read: a kernel is launched on managed memory and the
    host reads it before any synchronisation. On the emulator the read is reported and the
    context is broken from then on (which is why this runs in a process of its own)."""
    lib = tut.load_chapter(CH.name)
    result = {"read": None, "next_call": "cudaSuccess"}
    try:
        with tut.ManagedArray(lib, 4099) as m:
            m.array[:] = 1.0
            c_api(lib).launch_scale_shift(m.address, m.array.size, 2.0, 0.0)
            result["read"] = float(m.array[7])   # the bug: no synchronisation before this read
            try:
                lib.synchronize()
            except tut.CudaError as e:
                result["next_call"] = e.name
    except (tut.CudaError, ValueError) as e:   # the teardown of a broken context
        result.setdefault("teardown", str(e)[:200])
    return tut.child_result(result)


@CH.check("early-read", "the emulator reports a host read of managed memory a queued kernel "
                        "will write")
def test_early_read(ctx):
    """The lesson says the emulator catches a missing synchronisation before a host read: this
    keeps it true. On a GPU the same read is a race (old, new or mixed values), nothing to test."""
    if ctx.backend != "cpu":
        raise tut.Skip("on a GPU a read before the synchronisation is a race with no fixed "
                       "outcome; the emulator's report of it is what this checks")
    if tut.isolated():
        raise tut.Skip("the library runs in a worker process here (grading): the emulator sees "
                       "host reads only in the process that runs the library")
    result, report = tut.run_child(__file__, "_early_read_child")
    if "host read of managed memory" not in report or "scale_shift_kernel" not in report:
        raise AssertionError(f"the emulator did not report the host's early read of managed "
                             f"memory that scale_shift_kernel will write (read {result['read']}); "
                             f"its stderr:\n{report[-1500:]}")
    if result["next_call"] == "cudaSuccess":
        raise AssertionError("after the reported early read, cudaDeviceSynchronize succeeded: "
                             "the emulator should fail the calls that follow it")


# ---- demo and benchmark -----------------------------------------------------------------------
def demo(lib):
    c = caps(lib)
    print(f"device 0: managedMemory={c.managed} concurrentManagedAccess={c.concurrent} "
          f"pageableMemoryAccess={c.pageable}")
    with tut.ManagedArray(lib, 8) as m:
        m.array[:] = np.arange(8)
        print(f"a ManagedArray at {m.address:#x}; its NumPy view at {m.array.ctypes.data:#x} "
              f"(the same memory, no copy); cudaMemoryType {memory_type(lib, m.address)[0]} "
              f"(3 = managed)")
        c_api(lib).launch_scale_shift(m.address, 8, 10.0, 1.0)
        lib.synchronize()   # the host may read only after this
        print(f"after a kernel (10 x + 1) and cudaDeviceSynchronize: {m.array}")
        try:
            if c.concurrent:
                managed_scale_shift(lib, m, 0.5, 0.0)
                print(f"after managed_scale_shift (0.5 x), which prefetched both ways: {m.array}")
        except tut.ExerciseNotDone as e:
            print(f"managed_scale_shift: {e}")
    print("\nNext: make check CH=05 (the tests of your exercises); make run CH=05 ARGS=--bench for the figures")


def _size(nbytes):
    return f"{nbytes >> 30} GiB" if nbytes >= GiB else (
        f"{nbytes >> 20} MiB" if nbytes >= MiB else f"{nbytes >> 10} KiB")


def _gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


MODES = ("GPU faults", "prefetch+kernel", "resident", "host faults", "prefetch to host")


def bench(lib):
    b = tut.Bench(lib, "05 unified memory")
    gpu = lib.backend == "gpu"
    api = c_api(lib)
    if not gpu:
        print("  (sizes cut down for the emulator)")
    c = caps(lib)
    print(f"  concurrentManagedAccess={c.concurrent} pageableMemoryAccess={c.pageable}")
    if not c.concurrent:
        print("  SKIP: prefetches need concurrentManagedAccess = 1")
        return
    top = GiB if gpu else 16 * MiB
    ceiling = b.d2d_copy_gbps(top, 20 if gpu else 3)
    reps = 10 if gpu else 3
    rng = np.random.default_rng(5)

    def timed(m, mode, r=reps):
        return tut.median_ms(lambda k, t: api.bench_managed(m.address if isinstance(
            m, tut.ManagedArray) else m, m.nbytes // 4 if isinstance(m, tut.ManagedArray)
            else top // 4, mode, k, t), r)

    # GB/s against size: who moves the data, and how.
    sizes = [s for s in (MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB) if s <= top]
    table = {}
    for size in sizes:
        with tut.ManagedArray(lib, size // 4) as m:
            m.array[:] = 1.0
            for mode, label in enumerate(MODES):
                table[(size, label)] = _gbps(size, timed(m, mode))
    print(f"  {'size':>8}  " + "  ".join(f"{lab:>16}" for lab in MODES) + "   (GB/s of data)")
    for size in sizes:
        print(f"  {_size(size):>8}  " + "  ".join(f"{table[(size, lab)]:>16.2f}" for lab in MODES))
    tut.plot_gbps("05_managed", sizes,
                  {label: [table[(s, label)] for s in sizes] for label in MODES},
                  "bytes of managed memory", "managed memory: faults, prefetch, resident",
                  lib.backend)
    fault, pref = table[(top, "GPU faults")], table[(top, "prefetch+kernel")]
    b.row(f"GPU first touch by page faults, {_size(top)}", fault, "GB/s")
    b.row(f"prefetch, then the kernel, {_size(top)}", pref, "GB/s")
    b.figure(f"prefetch+kernel vs fault-driven first touch at {_size(top)}", pref / fault, "x", 1)
    b.row(f"host reads after a kernel, by faults, {_size(top)}", table[(top, "host faults")],
          "GB/s")
    b.row(f"prefetch back to the host, {_size(top)}", table[(top, "prefetch to host")], "GB/s")

    # Resident managed memory against cudaMalloc: the same kernel, read + write in place.
    with tut.ManagedArray(lib, top // 4) as m, tut.DeviceBuffer(lib, top) as d_buf:
        m.array[:] = 1.0
        lib.memset(d_buf.ptr, 0x3F, top)
        ms_managed = timed(m, 2)
        ms_device = tut.median_ms(lambda k, t: api.bench_managed(d_buf.ptr, top // 4, 2, k, t),
                                  reps)
    managed_gbps, device_gbps = _gbps(2 * top, ms_managed), _gbps(2 * top, ms_device)
    b.row(f"kernel on cudaMalloc memory, {_size(top)} (read + write)", device_gbps, "GB/s",
          ceiling)
    b.row(f"kernel on resident managed memory, {_size(top)}", managed_gbps, "GB/s", ceiling)
    b.figure("resident managed / cudaMalloc", managed_gbps / device_gbps, "x", 3)

    # Read-mostly: a 64 MiB table every SM reads, which the host also reads between kernels.
    table_n, n = (16 * MiB, 16 * MiB) if gpu else (256 * KiB, 256 * KiB)
    lut_ms = {}
    with tut.ManagedArray(lib, table_n) as t, tut.ManagedArray(lib, n, np.int32) as idx, \
            tut.ManagedArray(lib, n) as out:
        t.array[:] = rng.random(table_n, dtype=np.float32)
        idx.array[:] = rng.integers(0, table_n, n, dtype=np.int32)
        prefetch(lib, idx, 0)
        prefetch(lib, out, 0)
        for label, advice in (("no advice", UNSET_READ_MOSTLY), ("read-mostly", SET_READ_MOSTLY)):
            advise(lib, t, advice)
            lut_ms[label] = tut.median_ms(lambda k, tm: api.bench_lut(
                t.address, table_n, idx.address, out.address, n, k, tm), reps)
    b.row(f"lookup kernel, {_size(4 * table_n)} table the host reads too: no advice",
          lut_ms["no advice"], "ms")
    b.row("the same, table advised read-mostly", lut_ms["read-mostly"], "ms")
    b.figure("lookup kernel, no advice / read-mostly", lut_ms["no advice"] / lut_ms["read-mostly"],
             "x", 1)

    # Host-owned data the GPU reads once per step: preferred location host, accessed-by device.
    size = 256 * MiB if gpu else 4 * MiB
    step_ms = {}
    with tut.ManagedArray(lib, size // 4) as m:
        m.array[:] = 1.0
        for label, advice in (("no advice", ()),
                              ("preferred location host", ((SET_PREFERRED, HOST),)),
                              ("+ accessed-by device", ((SET_ACCESSED_BY, 0),))):
            for a, d in advice:
                advise(lib, m, a, d)
            step_ms[label] = tut.median_ms(lambda k, tm: api.bench_host_owned(
                m.address, size // 4, k, tm), reps)
    for label, ms in step_ms.items():
        b.row(f"host writes {_size(size)}, kernel reads it: {label}", ms, "ms")
    b.figure("host-written data, no advice / preferred location host",
             step_ms["no advice"] / step_ms["preferred location host"], "x", 1)
    b.figure("host-written data, no advice / preferred location + accessed-by",
             step_ms["no advice"] / step_ms["+ accessed-by device"], "x", 1)

    oversubscribe(lib, b)


OVER_MODES = ("faults", "host-mapped", "in passes")   # bench_oversubscribe's modes 0, 1, 2


def oversubscribe(lib, b):
    """Managed memory larger than what the device has left, made safe: ballast (cudaMalloc)
    leaves `left` bytes free, and the arrays stay at most 2 x left, far below the card's memory
    (asking for more managed memory than the card has free can hang a GPU)."""
    gpu, api = lib.backend == "gpu", c_api(lib)
    left = 2 * GiB if gpu else 8 * MiB
    reps = 3 if gpu else 1
    print(f"  oversubscription: ballast leaves {_size(left)} of device memory free; sweeps of "
          f"a managed array, read + write, GB/s of data"
          + ("" if gpu else " (the emulator counts managed memory as device memory and "
                            "cannot oversubscribe: every size is cut to fit, and the numbers "
                            "mean nothing)"))

    def sweep(nbytes, mode):
        ballast = Z(0)
        ms = tut.median_ms(lambda k, t: api.bench_oversubscribe(left, nbytes, mode, k, t,
                                                                 ctypes.byref(ballast)), reps)
        return _gbps(nbytes, ms)
    fits, over = left // 2, 2 * left if gpu else left // 2
    rates = {("fits", "faults"): sweep(fits, 0),
             ("1.5x", "faults"): sweep(3 * left // 2 if gpu else fits, 0)}
    for mode, label in enumerate(OVER_MODES):
        rates[("2x", label)] = sweep(over, mode)
    b.row(f"sweep of {_size(fits)} managed, half of the {_size(left)} left: resident after "
          f"the first", rates[("fits", "faults")], "GB/s")
    b.row(f"sweep of 1.5x the {_size(left)} left, no advice (evict, fault again)",
          rates[("1.5x", "faults")], "GB/s")
    b.row(f"sweep of {_size(over)}, 2x the {_size(left)} left, no advice",
          rates[("2x", "faults")], "GB/s")
    b.row("the same 2x, preferred location host + accessed-by device",
          rates[("2x", "host-mapped")], "GB/s")
    b.row("the same 2x, in passes of half the free memory (05.4)", rates[("2x", "in passes")],
          "GB/s")
    b.figure("oversubscribed 2x: in passes / faults",
             rates[("2x", "in passes")] / rates[("2x", "faults")], "x", 1)
    b.figure("oversubscribed 2x: host-mapped / faults",
             rates[("2x", "host-mapped")] / rates[("2x", "faults")], "x", 1)
    b.figure("resident (fits) / oversubscribed 2x with faults",
             rates[("fits", "faults")] / rates[("2x", "faults")], "x", 0)


def warm_up(lib):
    """The first managed allocation, prefetch, advice and fault of a process make the driver
    set up memory it keeps; do each once before any test measures. Lesson code only."""
    c = caps(lib)
    with tut.ManagedArray(lib, 1 << 20) as m:
        m.array[:] = 1.0
        c_api(lib).launch_scale_shift(m.address, m.array.size, 1.0, 0.0)
        lib.synchronize()
        if c.concurrent:
            advise(lib, m, SET_READ_MOSTLY)
            prefetch(lib, m, 0)
            advise(lib, m, UNSET_READ_MOSTLY)
            advise(lib, m, SET_PREFERRED, HOST)
            advise(lib, m, SET_ACCESSED_BY, 0)
            prefetch(lib, m, 0)
            prefetch(lib, m, HOST)
        float(m.array.sum())


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
