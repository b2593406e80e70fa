# SPDX-License-Identifier: MIT
"""Chapter 02 explicit_allocation: own device memory from Python, and free it on every path.

    python3 driver.py            the lesson's demo: alignment, ownership, out of memory
    python3 driver.py --check    the tests (make check runs each exercise on its own)
    python3 driver.py --bench    cudaMalloc + cudaFree cost per call; cudaMemset bandwidth
"""
import ctypes
import functools
import gc
import os
import sys
from pathlib import Path
from types import SimpleNamespace

# The emulator fills every fresh allocation, so the tests' "device nearly full" ballast would
# write all of a 4 GiB emulated device. A smaller emulated device keeps them fast; a real GPU
# ignores this variable.
os.environ.setdefault("CUEMU_DEVICE_MEMORY", "256M")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(2, "02_explicit_allocation")
I, F, P, Z = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
MiB = 1 << 20
MAX_FLOATS = (2**64 - 1) // 4   # the most floats whose size in bytes a size_t can hold


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int alignment_probe(const size_t *sizes, int count, unsigned long long *addrs)
        alignment_probe=lib.bind("alignment_probe", [P, I, P], out=(2,)),
        # int free_null(void)
        free_null=lib.bind("free_null", []),
        # int try_malloc(size_t bytes)
        try_malloc=lib.bind("try_malloc", [Z]),
        # int dev_array_create(dev_array **out, size_t n)
        dev_array_create=lib.bind("dev_array_create", [ctypes.POINTER(P), Z]),
        # int dev_array_destroy(dev_array *arr)
        dev_array_destroy=lib.bind("dev_array_destroy", [P]),
        # int dev_array_upload(dev_array *arr, const float *h_src, size_t n)
        dev_array_upload=lib.bind("dev_array_upload", [P, P, Z]),
        # int dev_array_download(const dev_array *arr, float *h_dst, size_t n)
        dev_array_download=lib.bind("dev_array_download", [P, P, Z], out=(1,)),
        # int dev_array_memset(dev_array *arr, int value)
        dev_array_memset=lib.bind("dev_array_memset", [P, I]),
        # int dev_array_scale_shift(dev_array *arr, float a, float b)
        dev_array_scale_shift=lib.bind("dev_array_scale_shift", [P, F, F]),
        # int roundtrip(const float *h_x, float *h_y, size_t n, float a, float b)
        roundtrip=lib.bind("roundtrip", [P, P, Z, F, F], out=(1,)),
        # int apply_twice(const float *h_x, float *h_y, size_t n, float a, float b)
        apply_twice=lib.bind("apply_twice", [P, P, Z, F, F], out=(1,)),
        # int process_whole(const float *h_x, float *h_y, size_t n, float a, float b)
        process_whole=lib.bind("process_whole", [P, P, Z, F, F], out=(1,)),
        # int process_chunked(const float *h_x, float *h_y, size_t n, float a, float b,
        #     size_t chunk_elems)
        process_chunked=lib.bind("process_chunked", [P, P, Z, F, F, Z], out=(1,)),
        # int fill_checked(float *h_out, int n, float value, int block)
        fill_checked=lib.bind("fill_checked", [P, I, F, I], out=(0,)),
        # int fill_device(float *d_y, int n, float value, int block)
        fill_device=lib.bind("fill_device", [P, I, F, I]),
        # int bench_malloc_free(size_t bytes, int reps, float *times_ms)
        bench_malloc_free=lib.bind("bench_malloc_free", [Z, I, tut.c_float_p]),
        # int bench_memset(size_t bytes, int reps, float *times_ms)
        bench_memset=lib.bind("bench_memset", [Z, I, tut.c_float_p]),
    )


# ---- ownership: a device array held through a C handle ----------------------------------------
class DeviceArray(tut.Owner):
    """n float32 on the device, created by dev_array_create and destroyed exactly once by
    dev_array_destroy: through free(), the end of a `with` block, or (the safety net, not the
    plan) the garbage collector. Using or freeing it again raises ValueError in Python: the dead
    handle never reaches C, where it would be a use-after-free of host memory."""
    kind = "DeviceArray"

    def __init__(self, lib, n):
        # n * 4 bytes must fit in a size_t: 2^62 floats would wrap to a 0-byte cudaMalloc
        self.n = tut.check_count(n, "n", maximum=MAX_FLOATS)
        self._api = c_api(lib)
        handle = P()
        self._api.dev_array_create(ctypes.byref(handle), self.n)
        self._handle = handle.value
        self._own(self._api.dev_array_destroy, self._handle)

    @classmethod
    def from_array(cls, lib, x):
        arr = cls(lib, tut.check_array(x, np.float32, "x", ndim=1).size)
        arr.upload(x)
        return arr

    def _live_handle(self, what):
        if not self.alive:
            raise ValueError(f"DeviceArray used after free(): cannot {what}")
        return self._handle

    def upload(self, x):
        tut.check_array(x, np.float32, "x", shape=(self.n,))
        self._api.dev_array_upload(self._live_handle("upload"), tut.ptr(x), self.n)

    def download(self):
        out = tut.poisoned(self.n, np.float32)
        self._api.dev_array_download(self._live_handle("download"), tut.ptr(out), self.n)
        return out

    def memset(self, byte_value):
        tut.check_count(byte_value, "byte_value", maximum=255)
        self._api.dev_array_memset(self._live_handle("memset"), byte_value)

    def scale_shift(self, a, b):
        self._api.dev_array_scale_shift(self._live_handle("scale_shift"), a, b)

    def free(self):
        self._release_once("freed")   # calls dev_array_destroy once; a second free() raises


# ---- Python entry points: check arguments before any CUDA call --------------------------------
OUT_GUARD = 64   # poisoned floats after every output array: a copy that runs past its end shows


def _run(x, call):
    """call(h_x, h_y) with h_y a poisoned output of x's size, followed by a poisoned tail."""
    tut.check_array(x, np.float32, "x", ndim=1)
    full = tut.poisoned(x.size + OUT_GUARD, np.float32)
    call(tut.ptr(x), tut.ptr(full))
    tail = full[x.size:].view(np.uint32)
    if (tail != 0x7F7F7F7F).any():
        raise AssertionError(f"the C code wrote past the end of the {x.size}-float output "
                             f"array on the host (a last chunk that is too long?)")
    return full[:x.size]


def roundtrip(lib, x, a, b):
    return _run(x, lambda h_x, h_y: c_api(lib).roundtrip(h_x, h_y, x.size, a, b))


def apply_twice(lib, x, a, b):
    return _run(x, lambda h_x, h_y: c_api(lib).apply_twice(h_x, h_y, x.size, a, b))


def process_whole(lib, x, a, b):
    return _run(x, lambda h_x, h_y: c_api(lib).process_whole(h_x, h_y, x.size, a, b))


def process_chunked(lib, x, a, b, chunk_elems):
    tut.check_array(x, np.float32, "x", ndim=1)
    chunk_elems = tut.check_count(chunk_elems, "chunk_elems", minimum=1, maximum=2**62)
    return _run(x, lambda h_x, h_y: c_api(lib).process_chunked(h_x, h_y, x.size, a, b,
                                                               chunk_elems))


def fill_checked(lib, n, value, block, poison=True):
    """poison=False: the output starts as zeros (np.zeros takes pages the kernel zeroes when
    first touched, no pass of its own), for a caller whose value is not 0: 8 GiB at INT_MAX."""
    n = tut.check_count(n, "n")
    block = tut.check_count(block, "block")   # 0 or 1025 is CUDA's to refuse: the lesson
    out = tut.poisoned(n, np.float32) if poison else np.zeros(n, np.float32)
    c_api(lib).fill_checked(tut.ptr(out), n, value, block)
    return out


def alignment_probe(lib, sizes):
    sizes_arr = np.array([tut.check_count(s, "size", maximum=2**62) for s in sizes], np.uint64)
    addrs = np.zeros(len(sizes), np.uint64)
    c_api(lib).alignment_probe(tut.ptr(sizes_arr), len(sizes), tut.ptr(addrs))
    return [int(a) for a in addrs]


def alignment_of(addr):
    """The largest power of two that divides addr."""
    return addr & -addr


# ---- test helpers -------------------------------------------------------------------------------
def random_ab(rng):
    return np.float32(rng.uniform(0.5, 2.0)), np.float32(rng.uniform(-3.0, 3.0))


# ---- exercises ----------------------------------------------------------------------------------
@CH.exercise(1, "roundtrip: allocate, copy in, compute, copy out, free", ballast=True)
def test_roundtrip(ctx):
    sizes = [0, 1, 31, 257, 999_983] + ([(1 << 22) + 7] if ctx.large else [])
    for n in sizes:
        x = tut.random_f32(ctx.rng, n)
        a, b = random_ab(ctx.rng)
        tut.assert_close(roundtrip(ctx.lib, x, a, b), tut.ref_scale_shift(x, a, b),
                         rtol=1e-6, atol=1e-6, name=f"roundtrip n={n}")
    # The error path: room for d_x but not for d_y. Everything allocated must come back.
    with tut.device_ballast(ctx.lib, tut.ballast_budget(ctx.backend)) as free:
        used = ctx.lib.mem_used()
        x = tut.random_f32(ctx.rng, int(free * 0.6) // 4)
        tut.expect_cuda_error(ctx.lib, "cudaErrorMemoryAllocation",
                              lambda: roundtrip(ctx.lib, x, 1.0, 0.0),
                              "roundtrip with room for one buffer of two")
        if ctx.lib.mem_used() != used:
            raise AssertionError(f"roundtrip leaked {ctx.lib.mem_used() - used} bytes when its "
                                 f"second cudaMalloc failed")


@CH.exercise(2, "apply_twice: no leak when the second or third cudaMalloc fails",
             ballast=True)
def test_apply_twice(ctx):
    for n in (1, 257, 999_983):
        x = tut.random_f32(ctx.rng, n)
        a, b = random_ab(ctx.rng)
        want = np.float64(a) * tut.ref_scale_shift(x, a, b) + np.float64(b)
        tut.assert_close(apply_twice(ctx.lib, x, a, b), want, rtol=1e-5, atol=1e-5,
                         name=f"apply_twice n={n}")
    # Force each error path in turn: buffers of 60% of what is free (the second cudaMalloc
    # fails), then of 40% (the third fails). Memory in use must return to where it started.
    with tut.device_ballast(ctx.lib, tut.ballast_budget(ctx.backend)) as free:
        for fraction, which in ((0.6, "second"), (0.4, "third")):
            used = ctx.lib.mem_used()
            x = tut.random_f32(ctx.rng, int(free * fraction) // 4)
            tut.expect_cuda_error(ctx.lib, "cudaErrorMemoryAllocation",
                                  lambda: apply_twice(ctx.lib, x, 1.0, 0.0),
                                  f"apply_twice when its {which} cudaMalloc cannot fit")
            leaked = ctx.lib.mem_used() - used
            if leaked:
                raise AssertionError(f"apply_twice leaked {leaked} bytes when its {which} "
                                     f"cudaMalloc failed: free everything on the error path")
    # A failure after all three cudaMallocs: h_x is NULL, so the first cudaMemcpy fails
    # (cudaErrorInvalidValue, as a driver answers a NULL host pointer). A function that checks
    # its arguments first refuses it before allocating (ValueError); either way, nothing leaks.
    used = ctx.lib.mem_used()
    out = tut.poisoned(1000, np.float32)
    try:
        c_api(ctx.lib).apply_twice(None, tut.ptr(out), out.size, 1.0, 0.0)
    except (tut.CudaError, ValueError):
        pass
    else:
        raise AssertionError("apply_twice with h_x = NULL reported success: the copy from "
                             "NULL must fail, and its error come back as the status")
    leaked = ctx.lib.mem_used() - used
    if leaked:
        raise AssertionError(f"apply_twice leaked {leaked} bytes when a call after its three "
                             f"cudaMallocs failed: free all three on every error path")


@CH.exercise(3, "process_chunked: an array larger than free device memory, in chunks",
             ballast=True)
def test_chunked(ctx):
    n = 999_983
    x = tut.random_f32(ctx.rng, n)
    for chunk in (1000, 4099, 1 << 18, n, 2 * n):
        a, b = random_ab(ctx.rng)
        tut.assert_close(process_chunked(ctx.lib, x, a, b, chunk), tut.ref_scale_shift(x, a, b),
                         rtol=1e-6, atol=1e-6, name=f"chunked n={n} chunk={chunk}")
    with tut.device_ballast(ctx.lib, tut.ballast_budget(ctx.backend)) as free:
        big = tut.random_f32(ctx.rng, int(free * 1.5) // 4)   # 1.5x what the device has free
        a, b = random_ab(ctx.rng)
        tut.expect_cuda_error(ctx.lib, "cudaErrorMemoryAllocation",
                              lambda: process_whole(ctx.lib, big, a, b),
                              f"process_whole of {big.nbytes} bytes with {free} free")
        chunk = free // 4 // 4 - 13   # a quarter of what is free, not a divisor of n
        got = process_chunked(ctx.lib, big, a, b, chunk)
    tut.assert_scale_shift(got, big, a, b, name=f"chunked n={big.size} chunk={chunk}")


@CH.exercise(4, "fill_checked: every call checked, a bad launch reported and consumed")
def test_fill_checked(ctx):
    for n, block in ((1, 32), (1000, 256), (999_983, 128), (257, 1024)):
        value = np.float32(ctx.rng.uniform(-10, 10))
        tut.assert_equal(fill_checked(ctx.lib, n, value, block), np.full(n, value, np.float32),
                         name=f"fill n={n} block={block}")
    for block in (1025, 0, 4096):
        try:
            tut.expect_cuda_error(ctx.lib, tut.launch_config_errors(ctx.lib),
                                  lambda: fill_checked(ctx.lib, 1000, 1.0, block),
                                  f"fill_checked with {block} threads per block", clear=False)
            pending = ctx.lib.clear_last_error()
            if pending:
                raise AssertionError(f"after fill_checked failed, the runtime still holds "
                                     f"{ctx.lib.error_name(pending)}: read it with "
                                     f"cudaGetLastError (CUDA_CHECK_LAUNCH) after the launch")
        finally:
            ctx.lib.clear_last_error()   # a failing attempt must not poison the next test
    tut.assert_equal(fill_checked(ctx.lib, 77, 2.5, 64), np.full(77, 2.5, np.float32),
                     name="fill after the errors")


@CH.check("fill-int-max", "fill_kernel at n = INT_MAX: the index must not overflow")
def test_fill_int_max(ctx):
    """n = 2^31 - 1 with blocks of 1000: the last 352 threads have blockIdx.x * blockDim.x +
    threadIdx.x >= 2^31, which an `int i` turns negative, and `i < n` lets them through to write
    8 GiB before the buffer: a fault, or another allocation's data silently overwritten."""
    n, block, value = 2**31 - 1, 1000, np.float32(1.5)
    if ctx.backend == "cpu":
        raise tut.Skip("needs 16 GiB of device memory and 2^31 threads: the emulator's device "
                       "has 4 GiB by default (CUEMU_DEVICE_MEMORY) and would run for hours; "
                       "the overflow is checked on a GPU")
    if tut.under_sanitizer():
        raise tut.Skip("under compute-sanitizer every one of its 2^31 threads' accesses is "
                       "checked, which would take hours; the overflow is checked by the tests "
                       "without it")
    free, _ = ctx.lib.mem_info()
    if free < 2 * (4 * n + 2 * tut.DeviceBuffer.GUARD) + (256 << 20):
        raise tut.Skip(f"needs 16 GiB of free device memory: {free / 2**30:.1f} GiB free here")
    # A neighbour allocated first: if wrapped indices land in it rather than fault, it shows.
    # Both are counted on the device (common/tut_check.cu), not copied: 16 GiB in milliseconds.
    with tut.DeviceBuffer(ctx.lib, 4 * n) as neighbour, tut.DeviceBuffer(ctx.lib, 4 * n) as out:
        ctx.lib.memset(out.ptr, 0, 4 * n)   # an element left unwritten stays 0, not 1.5
        c_api(ctx.lib).fill_device(out.ptr, n, value, block)
        bad, first = ctx.lib.count_ne_u32(out.ptr, n, int(value.view(np.uint32)))
        if bad:
            raise AssertionError(f"fill n={n} block={block}: {bad} element(s) not {value!r}, "
                                 f"the first out[{first}] (an index that overflowed skips the "
                                 f"last elements)")
        out.check_guards()
        neighbour.check_guards()
        bad, first = ctx.lib.count_ne_u32(neighbour.ptr, n, int.from_bytes(
            bytes([tut.POISON_BYTE]) * 4, "little"))
        if bad:
            raise AssertionError(f"fill n={n} block={block} wrote into another allocation "
                                 f"({bad} words from its word {first} on): an index that "
                                 f"overflowed to a negative int?")


# ---- checks of the lesson's other claims -------------------------------------------------------
@CH.check("alignment", "cudaMalloc returns addresses aligned to at least 256 bytes")
def test_alignment(ctx):
    sizes = [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 100, 255, 256, 257, 511, 1000, 1023, 1024, 1025,
             4095, 4097, 65535, 65537, MiB - 1, MiB + 1, 3 * MiB + 5, 2, 1, 999_983, 17]
    addrs = alignment_probe(ctx.lib, sizes)
    worst = min(alignment_of(a) for a in addrs)
    if worst < 256:
        bad = [(s, hex(a)) for s, a in zip(sizes, addrs) if alignment_of(a) < 256]
        raise AssertionError(f"cudaMalloc returned addresses aligned to less than 256 bytes: "
                             f"(size, address) {bad[:5]}")
    spans = sorted(zip(addrs, sizes))
    for (a0, s0), (a1, _) in zip(spans, spans[1:]):
        if a0 + s0 > a1:
            raise AssertionError(f"allocations overlap: {hex(a0)} + {s0} > {hex(a1)}")


@CH.check("free-null", "cudaFree(NULL) succeeds and does nothing")
def test_free_null(ctx):
    used = ctx.lib.mem_used()
    c_api(ctx.lib).free_null()
    assert ctx.lib.mem_used() == used


@CH.check("ownership", "DeviceArray: free(), with, finaliser; double free and use after free")
def test_ownership(ctx):
    lib = ctx.lib
    used = lib.mem_used()
    x = tut.random_f32(ctx.rng, 100_003)
    arr = DeviceArray.from_array(lib, x)
    arr.scale_shift(2.0, -1.0)
    tut.assert_close(arr.download(), tut.ref_scale_shift(x, 2.0, -1.0), rtol=1e-6, atol=1e-6,
                     name="scale_shift through the handle")
    arr.memset(1)   # bytes, not floats: every float becomes 0x01010101
    tut.assert_equal(arr.download().view(np.uint32), np.full(x.size, 0x01010101, np.uint32),
                     name="cudaMemset(d, 1, bytes) as uint32")
    arr.free()
    for what, fn in (("free twice", arr.free), ("download after free", arr.download),
                     ("upload after free", lambda: arr.upload(x)),
                     ("scale after free", lambda: arr.scale_shift(1.0, 0.0))):
        tut.expect_raises(ValueError, fn, what)
    with DeviceArray(lib, 1 << 20) as held:
        if lib.mem_used() <= used:
            raise AssertionError("a live 4 MiB DeviceArray does not show in cudaMemGetInfo")
        held.memset(0)
    assert not held.alive
    # The safety net: an array nobody freed is destroyed when the last reference goes.
    DeviceArray(lib, 12345)
    gc.collect()
    if lib.mem_used() != used:
        raise AssertionError(f"{lib.mem_used() - used} bytes still in use after every "
                             f"DeviceArray was freed or collected")
    for bad, exc in ((lambda: DeviceArray(lib, -1), ValueError),
                     (lambda: DeviceArray(lib, 2.5), TypeError),
                     (lambda: DeviceArray(lib, 2**62), ValueError),   # 2^64 bytes: wraps to 0
                     (lambda: DeviceArray.from_array(lib, x.astype(np.float64)), TypeError),
                     (lambda: DeviceArray.from_array(lib, x[::2]), ValueError)):
        tut.expect_raises(exc, bad, "a bad DeviceArray argument")


@CH.check("out-of-memory", "more than the device has: cudaErrorMemoryAllocation, not sticky")
def test_out_of_memory(ctx):
    lib = ctx.lib
    _, total = lib.mem_info()
    e = tut.expect_cuda_error(lib, "cudaErrorMemoryAllocation",
                              lambda: c_api(lib).try_malloc(2 * total),
                              f"cudaMalloc of twice the device's {total} bytes")
    assert "cudaMalloc" in e.expr, e.expr
    c_api(lib).try_malloc(MiB)   # the next allocation works
    with DeviceArray(lib, 1000) as arr:
        arr.memset(0)
        arr.scale_shift(1.0, 3.0)   # and so does a launch
        tut.assert_equal(arr.download(), np.full(1000, 3.0, np.float32), name="after OOM")


@CH.check("bad-input", "wrong dtype, strided, bad chunk: Python errors before any CUDA call")
def test_bad_input(ctx):
    lib = ctx.lib
    x = np.ones(64, np.float32)
    for bad, exc in ((lambda: roundtrip(lib, x.astype(np.float64), 1.0, 0.0), TypeError),
                     (lambda: roundtrip(lib, x[::2], 1.0, 0.0), ValueError),
                     (lambda: roundtrip(lib, x.tolist(), 1.0, 0.0), TypeError),
                     (lambda: roundtrip(lib, x.reshape(8, 8), 1.0, 0.0), ValueError),
                     (lambda: process_chunked(lib, x, 1.0, 0.0, 0), ValueError),
                     (lambda: process_chunked(lib, x, 1.0, 0.0, -5), ValueError),
                     (lambda: process_chunked(lib, x, 1.0, 0.0, 1.5), TypeError),
                     (lambda: fill_checked(lib, -1, 1.0, 32), ValueError),
                     (lambda: alignment_probe(lib, [1] * 65), ValueError)):
        tut.expect_raises(exc, bad, "a bad argument")


# ---- demo and benchmark -----------------------------------------------------------------------
def demo(lib):
    sizes = [1, 100, 1000, 4097, MiB + 1]
    print("cudaMalloc addresses and the largest power of two dividing each:")
    for s, a in zip(sizes, alignment_probe(lib, sizes)):
        print(f"  {s:>8} bytes -> {a:#x}  aligned to {alignment_of(a)} bytes")
    print("  (CUDA promises at least 256; there is no cudaMallocAlignment to change it)")
    used = lib.mem_used()
    with DeviceArray(lib, 1 << 20):
        print(f"\nDeviceArray of 1 Mi floats: device memory in use went up by "
              f"{lib.mem_used() - used} bytes")
    print(f"after the with block: {lib.mem_used() - used} bytes")
    _, total = lib.mem_info()
    try:
        c_api(lib).try_malloc(2 * total)
    except tut.CudaError as e:
        lib.clear_last_error()
        print(f"\ncudaMalloc of {2 * total} bytes: CudaError {e.name} at {e.where}")
    print("\nNext: make check CH=02 (the tests of your exercises)")


def bench(lib):
    b = tut.Bench(lib, "02 explicit allocation")
    gpu = lib.backend == "gpu"
    api = c_api(lib)
    for nbytes, label in ((4096, "4 KiB"), (MiB, "1 MiB"), (64 * MiB, "64 MiB")):
        ms = tut.median_ms(lambda r, t: api.bench_malloc_free(nbytes, r, t), 50 if gpu else 10)
        b.row(f"cudaMalloc + cudaFree, {label}, per pair", ms * 1e3, "us")
    nbytes = (1 << 30) if gpu else 8 * MiB
    ceiling = b.d2d_copy_gbps(nbytes)
    ms = tut.median_ms(lambda r, t: api.bench_memset(nbytes, r, t))
    # memset writes `nbytes` and reads nothing; the copy ceiling counts read + write
    b.row(f"cudaMemset, {nbytes >> 20} MiB (bytes written)", nbytes / (ms * 1e-3) / 1e9,
          "GB/s", ceiling)


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo))
