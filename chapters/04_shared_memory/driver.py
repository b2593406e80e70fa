# SPDX-License-Identifier: MIT
"""Chapter 04 shared_memory: drive the kernels from Python and check them against NumPy.

    python3 driver.py            the lesson's demo: a missing barrier, the 48 KiB limit, matmuls
    python3 driver.py --check    the tests (make check runs each exercise on its own)
    python3 driver.py --bench    matmul TFLOP/s next to cuBLAS and NumPy, reduction and
                                 transpose GB/s next to copies measured in the same run
"""
import atexit
import ctypes
import functools
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(4, "04_shared_memory")
I, P = ctypes.c_int, ctypes.c_void_p
IP = ctypes.POINTER(ctypes.c_int)
INT_MAX = 2**31 - 1
U32 = 2.0**-24   # float32 unit roundoff

MATMUL = {1: "naive", 2: "32x32 shared-memory tiles", 3: "128x128 block, 8x8 register tiles",
          4: "cuBLAS SGEMM, FP32 (pedantic)"}
REDUCE = {1: "atomicAdd per element", 2: "shared-memory tree", 3: "warp shuffles"}
TRANSPOSE = {0: "plain copy", 1: "naive", 2: "32x32 tile", 3: "32x33 padded tile",
             4: "64x65 padded tile, 16 a thread"}


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    api = _declare(lib)
    # The library keeps one cuBLAS handle for its life; give it back before the process ends,
    # while CUDA is still up, so that nothing is left for compute-sanitizer to call a leak.
    atexit.register(_quietly, api.cublas_release)
    return api


def _quietly(fn):
    try:
        fn()
    except Exception:   # a test left the context broken (a kernel fault): nothing to give back
        pass


def _declare(lib):
    return SimpleNamespace(
        # int reverse_chunks(const float *d_in, float *d_out, int n, int chunk, int block,
        #     int opt_in, int use_barrier)
        reverse_chunks=lib.bind("reverse_chunks", [P, P, I, I, I, I, I]),
        # int shared_memory_limits(int *per_block, int *opt_in_max)
        shared_memory_limits=lib.bind("shared_memory_limits", [IP, IP]),
        # int matmul(int version, const float *d_a, const float *d_b, float *d_c,
        #     int m, int n, int k)
        matmul=lib.bind("matmul", [I, P, P, P, I, I, I]),
        # int bench_matmul(int version, const float *d_a, const float *d_b, float *d_c,
        #     int m, int n, int k, int reps, float *times_ms)
        bench_matmul=lib.bind("bench_matmul", [I, P, P, P, I, I, I, I, tut.c_float_p]),
        # int bench_matmul_with_transfers(int version, const float *h_a, const float *h_b,
        #     float *h_c, int m, int n, int k, int reps, float *times_ms)
        bench_matmul_with_transfers=lib.bind("bench_matmul_with_transfers",
                                             [I, P, P, P, I, I, I, I, tut.c_float_p], out=(3, 8)),
        # int reduce_sum(int version, const float *d_x, int n, float *d_out, int blocks,
        #     int block)
        reduce_sum=lib.bind("reduce_sum", [I, P, I, P, I, I]),
        # int bench_reduce(int version, const float *d_x, int n, float *d_out, int reps,
        #     float *times_ms)
        bench_reduce=lib.bind("bench_reduce", [I, P, I, P, I, tut.c_float_p]),
        # int transpose(int version, const float *d_in, float *d_out, int height, int width)
        transpose=lib.bind("transpose", [I, P, P, I, I]),
        # int bench_transpose(int version, const float *d_in, float *d_out, int height,
        #     int width, int reps, float *times_ms)
        bench_transpose=lib.bind("bench_transpose", [I, P, P, I, I, I, tut.c_float_p]),
        # int transpose_tile_layout(int *tile_dim, int *pitch, int *padded_shared_bytes)
        transpose_tile_layout=lib.bind("transpose_tile_layout", [IP, IP, IP]),
        # int cublas_warm_up(void)
        cublas_warm_up=lib.bind("cublas_warm_up", []),
        # int cublas_release(void)      destroys the library's cuBLAS handle, if made
        cublas_release=lib.bind("cublas_release", []),
    )


# ---- Python entry points: check arguments, own the device buffers, return NumPy arrays --------
def check_version(version, known):
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)):
        raise TypeError(f"version must be an integer, not {type(version).__name__}")
    if version not in known:
        raise ValueError(f"version must be one of {sorted(known)}, got {version}")
    return int(version)


def check_matmul_shapes(m, k, n):
    """The kernels index with 32-bit ints: every matrix must have at most 2^31 - 1 elements."""
    for name, count in (("a", m * k), ("b", k * n), ("c = a @ b", m * n)):
        if count > INT_MAX:
            raise ValueError(f"{name} would have {count} elements; this chapter's kernels "
                             f"index with int (at most {INT_MAX})")


def matmul(lib, a, b, version):
    """a @ b on the GPU: a (m x k) and b (k x n), float32, C-contiguous."""
    version = check_version(version, MATMUL)
    tut.check_array(a, np.float32, "a", ndim=2)
    tut.check_array(b, np.float32, "b", ndim=2)
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k:
        raise ValueError(f"a is {a.shape} and b is {b.shape}: a's columns must equal b's rows")
    check_matmul_shapes(m, k, n)
    with tut.DeviceBuffer.from_array(lib, a) as d_a, tut.DeviceBuffer.from_array(lib, b) as d_b, \
            tut.DeviceBuffer(lib, m * n * 4) as d_c:
        c_api(lib).matmul(version, d_a.ptr, d_b.ptr, d_c.ptr, m, n, k)
        d_c.check_guards()
        return d_c.download(np.float32, (m, n))


def reduce_sum(lib, x, version, blocks=0, block=256):
    """sum(x) on the GPU; blocks=0 lets the C code fill the GPU."""
    version = check_version(version, REDUCE)
    tut.check_array(x, np.float32, "x", ndim=1)
    n = tut.check_count(x.size, "len(x)")
    tut.check_count(blocks, "blocks")
    tut.check_count(block, "block", minimum=1, maximum=1024)
    if version == 2 and block & (block - 1):
        raise ValueError(f"the tree (version 2) halves the block each step: block must be a "
                         f"power of two, not {block}")
    if version == 3 and block % 32:
        raise ValueError(f"version 3 works in whole warps: block must be a multiple of 32, "
                         f"not {block}")
    with tut.DeviceBuffer.from_array(lib, x) as d_x, tut.DeviceBuffer(lib, 4) as d_out:
        c_api(lib).reduce_sum(version, d_x.ptr, n, d_out.ptr, blocks, block)
        d_out.check_guards()
        return d_out.download(np.float32, (1,))[0]


def transpose(lib, m, version):
    """m.T (as a new C-contiguous array) on the GPU; version 0 copies instead."""
    version = check_version(version, TRANSPOSE)
    tut.check_array(m, np.float32, "m", ndim=2)
    height, width = m.shape
    tut.check_count(m.size, "m.size")
    with tut.DeviceBuffer.from_array(lib, m) as d_in, tut.DeviceBuffer(lib, m.nbytes) as d_out:
        c_api(lib).transpose(version, d_in.ptr, d_out.ptr, height, width)
        d_out.check_guards()
        return d_out.download(np.float32, (height, width) if version == 0 else (width, height))


def reverse_chunks(lib, x, chunk, block=128, opt_in=False, use_barrier=True):
    """Each chunk of `chunk` floats reversed, through chunk * 4 bytes of dynamic shared memory."""
    tut.check_array(x, np.float32, "x", ndim=1)
    n = tut.check_count(x.size, "len(x)")
    tut.check_count(chunk, "chunk", minimum=1)
    tut.check_count(block, "block", minimum=1, maximum=1024)
    with tut.DeviceBuffer.from_array(lib, x) as d_in, tut.DeviceBuffer(lib, x.nbytes) as d_out:
        c_api(lib).reverse_chunks(d_in.ptr, d_out.ptr, n, chunk, block, int(opt_in),
                                  int(use_barrier))
        d_out.check_guards()
        return d_out.download(np.float32, x.shape)


def shared_memory_limits(lib):
    per_block, opt_in = ctypes.c_int(0), ctypes.c_int(0)
    c_api(lib).shared_memory_limits(ctypes.byref(per_block), ctypes.byref(opt_in))
    return per_block.value, opt_in.value


def transpose_tile_layout(lib):
    vals = [ctypes.c_int(0) for _ in range(3)]
    c_api(lib).transpose_tile_layout(*(ctypes.byref(v) for v in vals))
    return tuple(v.value for v in vals)


# ---- references -------------------------------------------------------------------------------
def matmul_reference(a, b):
    """float64 a @ b, and the bound on float32 rounding: summing k products in float32 errs by
    at most (k + 2) * 2^-24 * (|a| @ |b|) per element, whatever the order of the sum."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return a64 @ b64, (a.shape[1] + 2) * U32 * (np.abs(a64) @ np.abs(b64))


def assert_within(got, want, bound, name, show=5):
    """|got - want| <= bound, element by element (bound: an array like want)."""
    err = np.abs(np.asarray(got, np.float64) - want)
    bad = ~(err <= bound)   # NaN counts as bad
    if bad.any():
        poison = tut.poisoned(1, np.float32)[0]
        lines = [f"{name}: {int(bad.sum())} of {bad.size} elements outside the bound; first ones:"]
        for i in np.flatnonzero(bad)[:show]:
            g = got.flat[i]
            note = "   <- never written (still the poison value)" if g == poison else ""
            where = tuple(int(j) for j in np.unravel_index(i, got.shape))
            lines.append(f"  {where}: got {float(g)!r}, want {float(want.flat[i])!r} "
                         f"(bound {float(bound.flat[i]):.3g}){note}")
        raise AssertionError("\n".join(lines))


def reverse_reference(x, chunk):
    out = np.empty_like(x)
    for base in range(0, x.size, chunk):
        out[base:base + chunk] = x[base:base + chunk][::-1]
    return out


def small_ints(rng, shape, low=-4, high=4, scale=1.0):
    """Integers (times a power of two) as float32: every partial sum of these is exact in
    float32 while it stays below 2^24, so ANY summation order must give exactly NumPy's answer,
    and a dropped or doubled term cannot hide behind a tolerance."""
    ints = rng.integers(low, high + 1, size=shape, dtype=np.int8)
    return ints.astype(np.float32) * np.float32(scale)


def random_f32(rng, *shape):
    # the course's asymmetric inputs, with a smaller spread for this chapter
    return tut.random_f32(rng, *shape, scale=2.0, offset=0.3)


# ---- tests --------------------------------------------------------------------------------------
def matmul_shapes(ctx):
    # (m, k, n): 1x1, tall-thin, wide, no dimension a multiple of any tile (32, 128, 8, 4),
    # and a few whose k and n are multiples of 4, so the 16-byte load path runs too
    shapes = [(1, 1, 1), (2, 3, 5), (200, 3, 1), (1, 150, 190), (33, 65, 17), (129, 130, 131),
              (37, 200, 100), (128, 96, 132), (130, 64, 256)]
    if ctx.large:
        shapes += [(1000, 777, 1234), (3, 5000, 2), (1025, 1, 513), (2048, 512, 1024),
                   (4099, 40, 260)]
    return shapes


def check_matmul(ctx, version):
    for m, k, n in matmul_shapes(ctx):
        a, b = small_ints(ctx.rng, (m, k)), small_ints(ctx.rng, (k, n))
        tut.assert_equal(matmul(ctx.lib, a, b, version),
                         (a.astype(np.float64) @ b).astype(np.float32),
                         name=f"v{version} {m}x{k} @ {k}x{n}, small integers (exact)")
        a, b = random_f32(ctx.rng, m, k), random_f32(ctx.rng, k, n)
        want, bound = matmul_reference(a, b)
        assert_within(matmul(ctx.lib, a, b, version), want, bound,
                      name=f"v{version} {m}x{k} @ {k}x{n}, random (bound: "
                           f"(k + 2) * 2^-24 * |a| @ |b|)")


@CH.exercise(1, "matmul_tiled_kernel: load both tiles, and the two barriers (version 2)")
def test_matmul_tiled(ctx):
    check_matmul(ctx, 2)


@CH.exercise(2, "matmul_regtile_kernel: the 8x8 register-tile loop (version 3)")
def test_matmul_regtile(ctx):
    check_matmul(ctx, 3)


def reduce_sizes(ctx):
    out = [1, 31, 32, 33, 257, 4099, 999_983]
    return out + ([10_000_019] if ctx.large else [])


def check_reduce(ctx, version, launches):
    for n in reduce_sizes(ctx):
        # |x| <= 2 in steps of 1/4: every partial sum is a multiple of 1/4 below 2^22, exact
        # in float32, while n < 2^21; for larger n, {-1, 0, 1} keeps every sum below 2^24
        x = small_ints(ctx.rng, n, -8, 8, 0.25) if n < 2**21 else small_ints(ctx.rng, n, -1, 1)
        want = np.float32(x.astype(np.float64).sum())
        for blocks, block in launches:
            got = reduce_sum(ctx.lib, x, version, blocks, block)
            if got != want:
                raise AssertionError(f"v{version} n={n} <<<{blocks or 'auto'}, {block}>>>: "
                                     f"got {got!r}, want exactly {want!r} (small integers: "
                                     f"any order sums them exactly)")
        # Random floats: each thread adds up to ceil(n / block) terms in a row, then the tree
        # and the atomics add a few dozen levels more; rounding stays within that many ulps.
        x = random_f32(ctx.rng, n)
        for blocks, block in launches:
            depth = 2 * -(-n // block) + 64 if version != 1 else n
            bound = depth * U32 * float(np.abs(x.astype(np.float64)).sum())
            tut.assert_close(np.float64(reduce_sum(ctx.lib, x, version, blocks, block)),
                             x.astype(np.float64).sum(), rtol=0, atol=bound,
                             name=f"v{version} n={n} <<<{blocks or 'auto'}, {block}>>> random")


@CH.exercise(3, "reduce_tree_kernel: the shared-memory tree (version 2)")
def test_reduce_tree(ctx):
    check_reduce(ctx, 2, [(0, 256), (1, 32), (3, 128), (5, 1024), (2, 1)])


@CH.exercise(4, "warp_sum: the warp-shuffle finish (version 3)")
def test_reduce_warp(ctx):
    check_reduce(ctx, 3, [(0, 256), (1, 32), (3, 96), (5, 1024)])


def transpose_shapes(ctx):
    shapes = [(1, 1), (1, 1000), (1000, 1), (33, 65), (257, 100), (64, 96), (31, 32)]
    return shapes + ([(4097, 3001), (2, 1 << 20)] if ctx.large else [])


def check_transpose(ctx, version):
    for h, w in transpose_shapes(ctx):
        m = random_f32(ctx.rng, h, w)
        tut.assert_equal(transpose(ctx.lib, m, version), m.T,
                         name=f"transpose v{version} of {h}x{w}")


@CH.exercise(5, "transpose_padded_kernel: pad the tile so a column read has no bank conflict")
def test_transpose_padded(ctx):
    check_transpose(ctx, 3)
    # Padding changes no result: a correct transpose through an unpadded tile passes the test
    # above. What it changes is which bank each float is in, which this checks by arithmetic:
    # a warp's 32 threads read one column of the tile, floats (t * pitch + c) for t = 0..31.
    tile_dim, pitch, shared_bytes = transpose_tile_layout(ctx.lib)
    if pitch < tile_dim:
        raise AssertionError(f"TRANSPOSE_PITCH = {pitch} < TILE_DIM = {tile_dim}: tile rows "
                             f"would overlap")
    for c in range(tile_dim):
        banks = {(t * pitch + c) % 32 for t in range(32)}
        if len(banks) != 32:
            raise AssertionError(
                f"TRANSPOSE_PITCH = {pitch}: the 32 threads of a warp reading column {c} of "
                f"the tile hit {len(banks)} bank(s), a {32 // len(banks)}-way bank conflict "
                f"(bank of float i = i % 32)")
    # On a GPU the compiled kernel's static shared memory must be that tile (the emulator
    # reports 0: it cannot tell).
    if shared_bytes and shared_bytes != tile_dim * pitch * 4:
        raise AssertionError(f"transpose_padded_kernel uses {shared_bytes} bytes of shared "
                             f"memory, not a {tile_dim} x {pitch} tile of floats")


@CH.check("matmul-naive-cublas", "matmul versions 1 (naive) and 4 (cuBLAS) on every shape",
          full="it loads cuBLAS, whose warm-up took 2.8 s on the H200")
def test_matmul_reference_versions(ctx):
    check_matmul(ctx, 1)
    check_matmul(ctx, 4)


@CH.check("reduce-atomics", "reduction version 1: one atomicAdd per element")
def test_reduce_atomics(ctx):
    check_reduce(ctx, 1, [(0, 256), (3, 32)])


@CH.check("transpose-naive-tiled", "transpose versions 1 (naive), 2 (unpadded), 4 (64x64), a copy")
def test_transpose_versions(ctx):
    check_transpose(ctx, 1)
    check_transpose(ctx, 2)
    check_transpose(ctx, 4)
    m = random_f32(ctx.rng, 45, 77)
    tut.assert_equal(transpose(ctx.lib, m, 0), m, name="copy kernel")


@CH.check("dynamic-shared", "dynamic shared memory: the third launch argument, 48 KiB, opt-in")
def test_dynamic_shared(ctx):
    per_block, opt_in_max = shared_memory_limits(ctx.lib)
    assert per_block == 48 * 1024, f"default shared memory per block: {per_block}"
    assert opt_in_max >= per_block, f"opt-in maximum {opt_in_max} < default {per_block}"
    cases = [(257, 64, False), (1, 32, False), (1000, 1024, False),
             (per_block // 4, 256, False),          # exactly 48 KiB: no opt-in needed
             (16384, 256, True),                    # 64 KiB: allowed after opting in
             (opt_in_max // 4, 512, True)]          # the most one block may have
    for chunk, block, opt_in in cases:
        x = random_f32(ctx.rng, 2 * chunk + 5)
        tut.assert_equal(reverse_chunks(ctx.lib, x, chunk, block, opt_in),
                         reverse_reference(x, chunk),
                         name=f"chunk of {chunk * 4} bytes, block {block}, opt_in={opt_in}")
    # Above the limit: the launch (without the attribute) or cudaFuncSetAttribute (above the
    # opt-in maximum) refuses with cudaErrorInvalidValue, and nothing is left behind.
    x = random_f32(ctx.rng, 20000)
    for chunk, opt_in in ((16384, False), (opt_in_max // 4 + 1, True)):
        tut.expect_cuda_error(ctx.lib, "cudaErrorInvalidValue",
                              lambda: reverse_chunks(ctx.lib, x, chunk, 256, opt_in),
                              f"{chunk * 4} bytes of shared memory (opt_in={opt_in})",
                              clear=False)
    tut.assert_equal(reverse_chunks(ctx.lib, x, 300), reverse_reference(x, 300),
                     name="a launch after the refused ones")


@CH.check("missing-barrier", "without __syncthreads a thread reads shared memory too early")
def test_missing_barrier(ctx):
    x = random_f32(ctx.rng, 1000)
    want = reverse_reference(x, 256)
    tut.assert_equal(reverse_chunks(ctx.lib, x, 256, 64, use_barrier=True), want,
                     name="with the barrier")
    try:
        got = reverse_chunks(ctx.lib, x, 256, 64, use_barrier=False)
    except tut.CudaError as e:
        # The emulator's race detector stops the launch and names both threads and lines.
        if ctx.backend == "cpu" and "shared memory race" in str(e):
            ctx.lib.clear_last_error()
            return
        raise
    # The emulator runs a block's threads one after another until each reaches a barrier, in
    # forward or reverse order: with no barrier, some thread always reads a slot that its
    # owner has not written (poisoned). A GPU usually gets it wrong too, but not always:
    # that is a race, and the reason the test does not assert it there.
    if ctx.backend == "cpu" and np.array_equal(got, want):
        raise AssertionError("the emulator computed the right answer without the barrier")


@CH.check("errors", "bad arguments refused before any CUDA call; empty and k = 0 products")
def test_errors(ctx):
    a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    x = np.ones(100, np.float32)
    bad_calls = [
        (lambda: matmul(ctx.lib, a.astype(np.float64), b, 2), TypeError),
        (lambda: matmul(ctx.lib, a, b.T.copy(), 2), ValueError),
        (lambda: matmul(ctx.lib, a, np.ones((8, 5), np.float32)[::2], 2), ValueError),
        (lambda: matmul(ctx.lib, a.tolist(), b, 2), TypeError),
        (lambda: matmul(ctx.lib, a, b, 5), ValueError),
        (lambda: matmul(ctx.lib, a.ravel(), b, 1), ValueError),
        (lambda: check_matmul_shapes(1 << 16, 1 << 16, 1), ValueError),
        (lambda: reduce_sum(ctx.lib, x, 2, block=96), ValueError),
        (lambda: reduce_sum(ctx.lib, x, 3, block=48), ValueError),
        (lambda: reduce_sum(ctx.lib, x, 3, block=2048), ValueError),
        (lambda: reduce_sum(ctx.lib, x.astype(np.float64), 1), TypeError),
        (lambda: reduce_sum(ctx.lib, x, 0), ValueError),
        (lambda: reduce_sum(ctx.lib, x, 2, blocks=-1), ValueError),
        (lambda: transpose(ctx.lib, x, 3), ValueError),
        (lambda: transpose(ctx.lib, a, True), TypeError),
        (lambda: reverse_chunks(ctx.lib, x, 0), ValueError),
    ]
    for i, (call, exc) in enumerate(bad_calls):
        tut.expect_raises(exc, call, f"bad call #{i}")
    # The C side refuses too (ValueError from its TUT_REQUIRE), if Python is bypassed.
    tut.expect_raises(ValueError, lambda: c_api(ctx.lib).matmul(9, None, None, None, 1, 1, 1),
                      "matmul(version 9) in the C code")
    for version in MATMUL:
        tut.assert_equal(matmul(ctx.lib, np.ones((3, 0), np.float32), np.ones((0, 5), np.float32),
                                version), np.zeros((3, 5), np.float32), name=f"v{version} k = 0")
        assert matmul(ctx.lib, np.ones((0, 4), np.float32), b, version).shape == (0, 5)
    for version in REDUCE:
        assert reduce_sum(ctx.lib, np.empty(0, np.float32), version) == 0.0
    assert transpose(ctx.lib, np.empty((0, 7), np.float32), 3).shape == (7, 0)


# ---- demo and benchmark -----------------------------------------------------------------------
def demo(lib):
    per_block, opt_in_max = shared_memory_limits(lib)
    print(f"Shared memory per block: {per_block // 1024} KiB by default, up to "
          f"{opt_in_max // 1024} KiB after cudaFuncSetAttribute (backend: {lib.backend})")
    x = np.arange(1000, dtype=np.float32)
    want = reverse_reference(x, 256)
    for use_barrier in (True, False):
        try:
            got = reverse_chunks(lib, x, 256, 64, use_barrier=use_barrier)
        except tut.CudaError as e:   # the CPU backend's race detector stops the launch
            lib.clear_last_error()
            print(f"  reverse 256-float chunks, WITHOUT __syncthreads: {e.name} (the race "
                  f"detector's report is above)")
            continue
        print(f"  reverse 256-float chunks, {'with' if use_barrier else 'WITHOUT'} "
              f"__syncthreads: {int((got != want).sum())} of {x.size} elements wrong")
    try:
        reverse_chunks(lib, x, 16384)
    except tut.CudaError as e:
        print(f"  64 KiB of dynamic shared memory without opting in: {e.name}")
    rng = np.random.default_rng(0)
    a, b = random_f32(rng, 300, 200), random_f32(rng, 200, 100)
    want, _ = matmul_reference(a, b)
    print("\n300x200 @ 200x100, largest difference from float64 NumPy:")
    for version, what in MATMUL.items():
        got = matmul(lib, a, b, version)
        print(f"  v{version} {what:<36} {np.abs(got - want).max():.2e}")
    print("\nNext: make check CH=04 (the tests of your exercises); make run CH=04 ARGS=--bench for the figures")


def numpy_matmul_ms(a, b, reps):
    """NumPy runs on the CPU and returns when it is done: a host clock is right here."""
    np.matmul(a, b)   # warm-up (threads started, pages touched)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        np.matmul(a, b)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def correct(what, check):
    """Correctness before any figure counts. An unfinished exercise gets no figure, and the
    benchmark goes on with the other versions."""
    try:
        check()
        return True
    except AssertionError as e:
        first = str(e).splitlines()[0].removesuffix("; first ones:")
        print(f"  {what}: WRONG RESULT, no figure ({first})")
        return False


def bench(lib):
    gpu = lib.backend == "gpu"
    reps = 20 if gpu else 3
    rng = np.random.default_rng(1)
    api = c_api(lib)
    b = tut.Bench(lib, "04 shared memory")
    print("(kernel time only unless a row says otherwise; median of event-timed runs)")

    # -- matrix multiply, against cuBLAS FP32 ------------------------------------------------
    size = 4096 if gpu else 128
    m = n = k = size
    a, bm = random_f32(rng, m, k), random_f32(rng, k, n)
    rows = rng.choice(m, size=min(32, m), replace=False)
    want, bound = matmul_reference(a[rows], bm)
    flop = 2.0 * m * n * k
    tflops = {}
    with tut.DeviceBuffer.from_array(lib, a) as d_a, \
            tut.DeviceBuffer.from_array(lib, bm) as d_b, tut.DeviceBuffer(lib, m * n * 4) as d_c:
        for version in (4, 1, 2, 3):
            ms = tut.median_ms(lambda r, t: api.bench_matmul(version, d_a.ptr, d_b.ptr, d_c.ptr,
                                                             m, n, k, r, t),
                               reps if version != 1 else max(3, reps // 2))
            # 32 rows of the last timed run's output against float64 NumPy
            if not correct(f"matmul v{version}", lambda: assert_within(
                    d_c.download(np.float32, (m, n))[rows], want, bound, f"matmul v{version}")):
                continue
            tflops[version] = flop / (ms * 1e-3) / 1e12
            b.row(f"matmul {size}: v{version} {MATMUL[version]}", tflops[version], "TFLOP/s",
                  tflops.get(4))

    # -- the seed article's comparison, done right: NumPy vs the best kernel -----------------
    mine = [v for v in (3, 2, 1) if v in tflops]
    if mine:
        best = max(mine, key=tflops.get)
        np_ms = numpy_matmul_ms(a, bm, 3)
        gpu_ms = flop / (tflops[best] * 1e12) * 1e3
        c = np.empty((m, n), np.float32)
        xfer_ms = tut.median_ms(lambda r, t: api.bench_matmul_with_transfers(
            best, tut.ptr(a), tut.ptr(bm), tut.ptr(c), m, n, k, r, t), max(3, reps // 4))
        if correct("with transfers", lambda: assert_within(c[rows], want, bound, "transfers")):
            b.row(f"NumPy np.matmul {size} on the CPU (host clock)", flop / (np_ms * 1e-3) / 1e12,
                  "TFLOP/s", tflops.get(4))
            b.row(f"v{best} + copies of a, b in and c out (pageable)",
                  flop / (xfer_ms * 1e-3) / 1e12, "TFLOP/s", tflops.get(4))
            b.figure(f"NumPy np.matmul {size}, host clock", np_ms, "ms")
            b.figure(f"v{best} {size}, kernel alone", gpu_ms, "ms", 3)
            b.figure(f"v{best} {size}, with the transfers", xfer_ms, "ms")
            b.figure(f"v{best} alone / NumPy, speed-up", np_ms / gpu_ms, "x", 1)
            b.figure(f"v{best} with transfers / NumPy, speed-up", np_ms / xfer_ms, "x", 1)

    # -- reduction, against a kernel that reads the same bytes and combines nothing ----------
    n = (1 << 28) if gpu else (1 << 16)
    b.d2d_copy_gbps(4 * n, reps)   # for reference: a copy reads AND writes
    # {-1, 0, 1} with random signs: every partial sum stays far below 2^24, so the float32
    # result is exact (a sum of integers below 2^53 is exact in float64 too)
    x = small_ints(rng, n, -1, 1)
    with tut.DeviceBuffer.from_array(lib, x) as d_x, tut.DeviceBuffer(lib, 4) as d_out:
        ms = tut.median_ms(lambda r, t: api.bench_reduce(0, d_x.ptr, n, d_out.ptr, r, t), reps)
        ceiling = n * 4 / (ms * 1e-3) / 1e9
        b.row(f"read-only streaming kernel, {n * 4 / 2**20:g} MiB (ceiling)", ceiling, "GB/s")
        for version in (1, 2, 3):
            # one atomic per element is slow: fewer elements (stated) keep --bench short
            count = min(n, 1 << 24) if version == 1 else n
            want_sum = np.float32(x[:count].sum(dtype=np.float64))
            ms = tut.median_ms(lambda r, t: api.bench_reduce(version, d_x.ptr, count, d_out.ptr,
                                                             r, t), reps)
            got = d_out.download(np.float32, (1,))[0]
            if correct(f"reduce v{version}", lambda: tut.assert_equal(got, want_sum, "sum")):
                b.row(f"reduce v{version} {REDUCE[version]}, {count * 4 / 2**20:g} MiB",
                      count * 4 / (ms * 1e-3) / 1e9, "GB/s", ceiling)   # bytes read

    # -- transpose, against a copy kernel of the same shape ----------------------------------
    h = w = 8192 if gpu else 256
    mat = random_f32(rng, h, w)
    with tut.DeviceBuffer.from_array(lib, mat) as d_in, tut.DeviceBuffer(lib, mat.nbytes) as d_out:
        copy_gbps = None
        for version in (0, 1, 2, 3, 4):
            ms = tut.median_ms(lambda r, t: api.bench_transpose(version, d_in.ptr, d_out.ptr,
                                                                h, w, r, t), reps)
            if correct(f"transpose v{version}", lambda: tut.assert_equal(
                    d_out.download(np.float32, (w, h) if version else (h, w)),
                    mat.T if version else mat, name=f"transpose v{version}")):
                gbps = 2 * mat.nbytes / (ms * 1e-3) / 1e9   # read + write
                copy_gbps = copy_gbps or gbps
                b.row(f"transpose {h}x{w} v{version} {TRANSPOSE[version]}", gbps, "GB/s",
                      copy_gbps)


def warm_up(lib):
    """cuBLAS puts its kernels on the GPU the first time a process uses it and keeps them there:
    device memory that the harness's leak check would blame on the first test that uses
    cuBLAS. The harness runs this once, before any test measures. Under compute-sanitizer the
    leak check steps aside, and loading cuBLAS's kernels under the sanitizer for every test
    would cost far more than the tests: only the tests that use cuBLAS load it then. A quick
    make check on a GPU runs no test that uses cuBLAS (04.matmul-naive-cublas waits for
    make check FULL=1), so it loads nothing either."""
    if not tut.under_sanitizer() and not tut.quick_check(lib.backend):
        c_api(lib).cublas_warm_up()


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
