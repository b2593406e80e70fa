# SPDX-License-Identifier: MIT
"""Chapter 01 threads_blocks_grids: drive the kernels from Python and check them against NumPy.

    python3 driver.py            the lesson's demo: ids of a small launch, a launch CUDA refuses
    python3 driver.py --check    the tests (make check runs each exercise on its own)
    python3 driver.py --bench    vector add GB/s next to the device-to-device copy bandwidth

01.5+speed is a performance test: make grade BACKEND=gpu times saxpy_grid_stride_kernel against
the copy ceiling and gives part of its points for part of the speed (saxpy_performance).
"""
import ctypes
import functools
import itertools
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(1, "01_threads_blocks_grids")
I, F, P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int record_ids(int gx, int gy, int gz, int bx, int by, int bz, int *d_out)
        record_ids=lib.bind("record_ids", [I, I, I, I, I, I, P]),
        # int launch_empty(int gx, int gy, int gz, int bx, int by, int bz)
        launch_empty=lib.bind("launch_empty", [I, I, I, I, I, I]),
        # int vector_add(const float *d_a, const float *d_b, float *d_c, int n, int block)
        vector_add=lib.bind("vector_add", [P, P, P, I, I]),
        # int blocks_for(int n, int block)      returns a count, not a status
        blocks_for=lib.bind("blocks_for", [I, I], status=False),
        # int matrix_scale_shift(const float *d_in, const float *d_row_scale,
        #     const float *d_col_shift, float *d_out, int height, int width, int bx, int by)
        matrix_scale_shift=lib.bind("matrix_scale_shift", [P, P, P, P, I, I, I, I]),
        # int saxpy_grid_stride(float a, const float *d_x, float *d_y, int n, int blocks,
        #     int block)
        saxpy_grid_stride=lib.bind("saxpy_grid_stride", [F, P, P, I, I, I]),
        # int bench_vector_add(int version, const float *d_a, const float *d_b, float *d_c,
        #     int n, int reps, float *times_ms)
        bench_vector_add=lib.bind("bench_vector_add", [I, P, P, P, I, I, tut.c_float_p]),
    )


# ---- Python entry points: check arguments, own the device buffers, return NumPy arrays --------
def record_ids(lib, grid, block):
    """Run record_ids_kernel<<<grid, block>>>; returns (gz, gy, gx, bz, by, bx, 6) int32:
    per thread, threadIdx.x/y/z and blockIdx.x/y/z."""
    grid, block = tuple(grid), tuple(block)
    shape = grid[::-1] + block[::-1] + (6,)
    with tut.DeviceBuffer(lib, int(np.prod(shape)) * 4) as d_out:
        c_api(lib).record_ids(*grid, *block, d_out.ptr)
        d_out.check_guards()
        return d_out.download(np.int32, shape)


def vector_add(lib, a, b, block=256):
    """c = a + b on the GPU, one element per thread."""
    tut.check_array(a, np.float32, "a", ndim=1)
    tut.check_array(b, np.float32, "b", shape=a.shape)
    n = tut.check_count(a.size, "len(a)")
    tut.check_count(block, "block", maximum=2**31 - 1)   # CUDA, not Python, rejects 0 or 1025
    with tut.DeviceBuffer.from_array(lib, a) as d_a, tut.DeviceBuffer.from_array(lib, b) as d_b, \
            tut.DeviceBuffer(lib, a.nbytes) as d_c:
        c_api(lib).vector_add(d_a.ptr, d_b.ptr, d_c.ptr, n, block)
        d_c.check_guards()
        return d_c.download(np.float32, a.shape)


def matrix_scale_shift(lib, m, row_scale, col_shift, block=(16, 16)):
    """out[r, c] = m[r, c] * row_scale[r] + col_shift[c], one thread per element, 2D grid."""
    tut.check_array(m, np.float32, "m", ndim=2)
    height, width = m.shape
    tut.check_array(row_scale, np.float32, "row_scale", shape=(height,))
    tut.check_array(col_shift, np.float32, "col_shift", shape=(width,))
    with tut.DeviceBuffer.from_array(lib, m) as d_m, \
            tut.DeviceBuffer.from_array(lib, row_scale) as d_r, \
            tut.DeviceBuffer.from_array(lib, col_shift) as d_c, \
            tut.DeviceBuffer(lib, m.nbytes) as d_out:
        c_api(lib).matrix_scale_shift(d_m.ptr, d_r.ptr, d_c.ptr, d_out.ptr, height, width,
                                      *block)
        d_out.check_guards()
        return d_out.download(np.float32, m.shape)


def saxpy_grid_stride(lib, a, x, y, blocks, block):
    """a * x + y with a fixed grid of `blocks` x `block` threads, whatever the size."""
    tut.check_array(x, np.float32, "x", ndim=1)
    tut.check_array(y, np.float32, "y", shape=x.shape)
    with tut.DeviceBuffer.from_array(lib, x) as d_x, tut.DeviceBuffer.from_array(lib, y) as d_y:
        c_api(lib).saxpy_grid_stride(a, d_x.ptr, d_y.ptr, x.size, blocks, block)
        d_y.check_guards()
        return d_y.download(np.float32, x.shape)


# ---- references -------------------------------------------------------------------------------
def reference_ids(grid, block):
    """What every thread should write: its threadIdx then blockIdx, in linear-id order."""
    gx, gy, gz = grid
    bx, by, bz = block
    shape = (gz, gy, gx, bz, by, bx)
    idx = np.indices(shape)          # idx[k] = the k-th coordinate of each position
    out = np.stack([idx[5], idx[4], idx[3], idx[2], idx[1], idx[0]], axis=-1)
    return out.astype(np.int32)




# ---- tests --------------------------------------------------------------------------------------
@CH.exercise(1, "linear_thread_id: 1D, 2D and 3D launches number every thread once")
def test_ids(ctx):
    shapes = [((3, 1, 1), (33, 1, 1)), ((2, 3, 1), (5, 7, 1)), ((2, 3, 4), (4, 2, 3)),
              ((1, 1, 1), (1, 1, 1)), ((5, 2, 3), (32, 2, 2)), ((1, 1, 70), (1, 1, 64))]
    if ctx.large:
        shapes.append(((5000, 3, 1), (256, 1, 1)))
    for grid, block in shapes:
        # one row per thread, in linear-id order: (threadIdx.x/y/z, blockIdx.x/y/z)
        tut.assert_equal(record_ids(ctx.lib, grid, block).reshape(-1, 6),
                         reference_ids(grid, block).reshape(-1, 6),
                         name=f"ids of <<<{grid}, {block}>>> (row = linear thread id, columns = "
                              f"threadIdx.x,y,z, blockIdx.x,y,z)")


@CH.exercise(2, "vector_add_kernel: c = a + b with the bounds guard")
def test_vector_add(ctx):
    for n in ctx.sizes(256):
        for block in (256, 96):
            a, b = tut.random_f32(ctx.rng, n), tut.random_f32(ctx.rng, n)
            tut.assert_close(vector_add(ctx.lib, a, b, block),
                             a.astype(np.float64) + b, rtol=1e-6, atol=1e-30,
                             name=f"vector_add n={n} block={block}")
    # Part of the same exercise (one test per exercise): the index must not overflow near
    # INT_MAX. On a GPU the whole launch; on the emulator the blocks where it overflows.
    not_run = vector_add_int_max(ctx)
    if not_run:
        tut.note(f"01.2 at n = INT_MAX not run here: {not_run}")


INT_MAX = 2**31 - 1


def vector_add_int_max(ctx):
    """n = 2^31 - 1 with blocks of 1000: the last 352 threads have blockIdx.x * blockDim.x +
    threadIdx.x >= 2^31, which an `int i` turns negative, and `i < n` lets them through to write
    8 GiB before c. a and b are one buffer x (both are only read).
    GPU: the whole launch on 16 GiB, inputs made and results checked on the device.
    Emulator: only the grid's last two blocks run (cuemuLaunchWindow), on sparse buffers (host
    memory only where written): the threads where the overflow happens, in milliseconds.
    Returns why it did not run, or None when it ran and passed."""
    if tut.under_sanitizer():
        return ("under compute-sanitizer every one of its 2^31 threads' accesses is checked, "
                "which would take hours; the overflow is checked by the tests without it")
    n, block, pattern = INT_MAX, 1000, 0x3F    # every float of x is 0x3F3F3F3F = 0.7470...
    x_word = int.from_bytes(bytes([pattern]) * 4, "little")
    x_val = np.frombuffer(bytes([pattern]) * 4, np.float32)[0]
    c_word = int(np.float32(x_val + x_val).view(np.uint32))   # exact in float32
    nbytes = n * 4
    what = f"vector_add n={n} (INT_MAX) block={block}"
    if ctx.backend == "cpu":
        return _int_max_emulated(ctx, n, block, nbytes, x_word, c_word, what)
    need = 2 * (nbytes + 2 * tut.DeviceBuffer.GUARD) + (256 << 20)
    free, _ = ctx.lib.mem_info()
    if free < need:
        return (f"it needs {need / 2**30:.1f} GiB of free device memory, "
                f"{free / 2**30:.1f} GiB free here")
    with tut.DeviceBuffer(ctx.lib, nbytes) as d_x, tut.DeviceBuffer(ctx.lib, nbytes) as d_c:
        ctx.lib.memset(d_x.ptr, pattern, nbytes)
        c_api(ctx.lib).vector_add(d_x.ptr, d_x.ptr, d_c.ptr, n, block)
        bad, first = ctx.lib.count_ne_u32(d_c.ptr, n, c_word)
        if bad:
            raise AssertionError(f"{what}: {bad} wrong element(s) of c, the first c[{first}] "
                                 f"(an index that overflowed skips the last elements)")
        bad, first = ctx.lib.count_ne_u32(d_x.ptr, n, x_word)
        if bad:
            raise AssertionError(f"{what} wrote into its input a, {bad} word(s) from a[{first}] "
                                 f"on: an index computed in int, which overflowed to a "
                                 f"negative number past 2^31?")
        d_x.check_guards()
        d_c.check_guards()
    return None


def _int_max_emulated(ctx, n, block, nbytes, x_word, c_word, what):
    """The emulator's INT_MAX run: one sparse allocation laid out [pad | x | c], 8 GiB each,
    so that a negative index lands inside it (c[-k] in x, x[-k] in pad) and is seen."""
    cd = ctx.lib.cdll
    if getattr(cd, "cuemuLaunchWindow", None) is None:
        return "this emulator build has no cuemuLaunchWindow (rebuild it: make)"
    cd.cuemuMallocSparse.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cd.cuemuLaunchWindow.argtypes = [ctypes.c_ulonglong, ctypes.c_ulonglong]
    cd.cuemuLaunchWindow.restype = None
    span = (nbytes + 4095) // 4096 * 4096
    base = ctypes.c_void_p()
    if cd.cuemuMallocSparse(ctypes.byref(base), 3 * span + (64 << 10)) != 0:
        return "the emulator could not reserve 24 GiB of address space here"
    x, c = base.value + span, base.value + 2 * span
    grid = -(-n // block)
    first_i = (grid - 2) * block          # the first element of the last two blocks
    tail = n - first_i

    def put(addr, words):
        ctx.lib.htod(ctypes.c_void_p(addr), tut.ptr(words), words.nbytes)

    def get(addr, count):
        out = np.empty(count, np.uint32)
        ctx.lib.dtoh(tut.ptr(out), ctypes.c_void_p(addr), out.nbytes)
        return out

    below = c - 4 * 2**31                 # where c[i] lands for an i that wrapped negative
    sentinel = 0x5A5A5A5A
    try:
        put(x + 4 * first_i, np.full(tail, x_word, np.uint32))
        put(below, np.full(2048, sentinel, np.uint32))
        cd.cuemuLaunchWindow(grid - 2, 2)
        try:
            c_api(ctx.lib).vector_add(ctypes.c_void_p(x), ctypes.c_void_p(x),
                                      ctypes.c_void_p(c), n, block)
        finally:
            cd.cuemuLaunchWindow(0, 0)
        got = get(c + 4 * first_i, tail + 1024)
        wrong = np.flatnonzero(got[:tail] != c_word)
        if wrong.size:
            i = first_i + int(wrong[0])
            raise AssertionError(f"{what}: c[{i}] = {got[wrong[0]]:#010x}, want {c_word:#010x} "
                                 f"({wrong.size} wrong among the last {tail} elements)")
        if (got[tail:] != 0).any():
            raise AssertionError(f"{what} wrote past c[n - 1]: the guard `i < n` is missing?")
        # an int index that overflowed writes there: 8 GiB before c, inside x
        head = get(below, 2048)
        if (head != sentinel).any():
            k = int(np.flatnonzero(head != sentinel)[0])
            raise AssertionError(
                f"{what} wrote 8 GiB before c (c[{k - 2**31}], inside a): the index of thread "
                f"{2**31 + k} computed in int overflowed to a negative number, which `i < n` "
                f"let through. Compute it in 64 bits: (long long)blockIdx.x * blockDim.x + "
                f"threadIdx.x")
    finally:
        ctx.lib.free_raw(base)
    return None


@CH.exercise(3, "blocks_for: the ceiling division, even near INT_MAX")
def test_blocks_for(ctx):
    api = c_api(ctx.lib)
    for n in (0, 1, 31, 32, 33, 255, 256, 257, 999_983, 2**31 - 1024, 2**31 - 1):
        for block in (1, 32, 100, 256, 1024):
            got, want = api.blocks_for(n, block), -(-n // block)
            if got != want:
                raise AssertionError(f"blocks_for({n}, {block}) = {got}, want {want}")


def _global_sectors(lib, kernel, run):
    """The CPU emulator's memory-access profile (counted, not timed) of run(): per source line
    of kernel's global accesses, (where, "read"/"write", requests, 32-byte sectors). None on
    the GPU backend or where the profile is unavailable (an emulator built without clang)."""
    with tut.access_profile(lib) as cd:
        if cd is None:
            return None
        cd.cuemuProfileRow.argtypes = [I, ctypes.c_char_p, I, ctypes.c_char_p, I,
                                       ctypes.POINTER(ctypes.c_longlong)]
        run()
        if cd.cuemuProfileAvailable() != 1:
            tut.note(f"{kernel}'s coalescing is not checked: the emulator's memory-access "
                     f"profile needs its clang build (this one has no load/store hooks)")
            return None
        rows = []
        for i in range(cd.cuemuProfileRows()):
            name, where = ctypes.create_string_buffer(256), ctypes.create_string_buffer(512)
            out = (ctypes.c_longlong * 5)()
            if cd.cuemuProfileRow(i, name, 256, where, 512, out) == 0 and out[1] == 0 and \
                    name.value.decode().startswith(kernel):
                rows.append((where.value.decode(), "write" if out[0] else "read", out[2], out[3]))
        return rows


@CH.exercise(4, "matrix_scale_shift_kernel: a 2D grid on a matrix whose width != height")
def test_matrix(ctx):
    shapes = [(1, 1), (7, 33), (33, 7), (100, 257), (513, 31), (17, 1), (1, 1000)]
    if ctx.large:
        shapes.append((3001, 4099))
    for height, width in shapes:
        for block in ((16, 16), (32, 4), (8, 32)):
            m = tut.random_f32(ctx.rng, height, width)
            r, c = tut.random_f32(ctx.rng, height), tut.random_f32(ctx.rng, width)
            want = m.astype(np.float64) * r[:, None] + c[None, :]
            tut.assert_close(matrix_scale_shift(ctx.lib, m, r, c, block), want,
                             rtol=1e-5, atol=1e-5, name=f"{height}x{width} block={block}")
    # Right answers are not enough: with threadIdx.x on rows instead of columns a warp's 32
    # lanes touch 32 rows, 32 sectors per access instead of 4 (block 32x4, 256 aligned
    # columns). The emulator counts that; on a GPU `--bench` shows what it costs.
    m = tut.random_f32(ctx.rng, 64, 256)
    r, c = tut.random_f32(ctx.rng, 64), tut.random_f32(ctx.rng, 256)
    rows = _global_sectors(ctx.lib, "matrix_scale_shift_kernel",
                           lambda: matrix_scale_shift(ctx.lib, m, r, c, (32, 4)))
    root = str(Path(__file__).resolve().parents[2]) + "/"
    for where, kind, requests, sectors in sorted(rows or (), key=lambda w: -w[3] / max(w[2], 1)):
        where = where[len(root):] if where.startswith(root) else where
        if requests and sectors / requests > 8:
            raise AssertionError(
                f"matrix_scale_shift_kernel gives the right answers but is uncoalesced: its global "
                f"{kind} at {where} takes {sectors / requests:.1f} 32-byte sectors per warp-wide "
                f"request (counted by the CPU emulator's memory-access profile, not timed), where "
                f"a warp of 32 consecutive threadIdx.x on 32 consecutive columns takes 4. Let x "
                f"(threadIdx.x, blockIdx.x) index the columns, the contiguous dimension of a "
                f"row-major matrix, and y the rows.")


@CH.exercise(5, "saxpy_grid_stride_kernel: correct for any grid size")
def test_grid_stride(ctx):
    for n in ctx.sizes(256):
        for blocks, block in ((1, 32), (3, 128), (7, 96), (4096, 256)):
            x, y = tut.random_f32(ctx.rng, n), tut.random_f32(ctx.rng, n)
            a = np.float32(ctx.rng.uniform(0.5, 2.0))
            want = np.float64(a) * x + y
            tut.assert_close(saxpy_grid_stride(ctx.lib, a, x, y, blocks, block), want,
                             rtol=1e-5, atol=1e-6, name=f"saxpy n={n} <<<{blocks}, {block}>>>")


# ---- performance (graded on a GPU) ------------------------------------------------------------
# The scale of 01.5+speed, the instructor's to choose (docs/instructor.md, "Performance
# points"): all its points from 70% of the device-to-device copy measured in the same run, none
# at 20% or below, linear between.
PERF_POINTS, PERF_FULL, PERF_ZERO = 2, 0.70, 0.20
PERF_N = 1 << 27          # 512 MiB per array: 1.5 GiB moved per call, far past any GPU's L2
PERF_GRID = (4096, 256)   # the checker's launch; the grid-stride loop covers n whatever the grid
PERF_SCALES = (0.25, 0.5, 1.0)
# The course's solution is a plain grid-stride loop, which a memory-bound kernel like this runs
# near the copy: vector add, the same loop, reached 86% of it on an H200 (docs/figures/h200.json).


def saxpy_performance(lib, rng, n=PERF_N, saxpy=None, clock=time.perf_counter,
                      flush_bytes=tut.FLUSH_BYTES, min_seconds=0.02):
    """Time saxpy_grid_stride against a device-to-device copy, from this (the checker's) side:
    tut.measure_calls runs the calls with a warm-up, the L2 flushed before each run and the
    median of 7 runs, and the clock stops after the harness's cudaDeviceSynchronize, so a
    call that returns early is still counted whole. The student's code chooses no figure.

    Every timed call adds a*x to y, with a drawn by the checker for each call, and the checker
    then compares y with what that exact sequence of calls gives: a call that was skipped, or
    that did less than all n elements (a kernel run once for several calls, one that returns
    early), is a wrong y, whatever the clock said. x and y hold integers and a is 1/4, 1/2 or 1,
    so every partial sum is exact in float32 (multiples of 1/4 below 2^22), with or without
    fused multiply-adds, in any order: y is compared exactly, whole at the end, and in slices
    drawn by the checker after every run, whose length the checker varies (0 to 2 calls more):
    work put off past the end of a run (one launch for two calls) shows there too.

    saxpy (tests): a stand-in for the library's call; clock: a stand-in for the wall clock.
    Returns {"fraction", "message", "gbps", "ceiling"}; AssertionError for a wrong y or a
    figure faster than the copy allows."""
    saxpy = saxpy or c_api(lib).saxpy_grid_stride
    dtod = lib.bind("tut_memcpy_dtod", [P, P, ctypes.c_size_t])
    x = rng.integers(0, 256, n, dtype=np.uint8).astype(np.float32)
    y = rng.integers(0, 256, n, dtype=np.uint8).astype(np.float32)
    blocks, block = PERF_GRID
    sent, flushes = [], itertools.count(1)
    with tut.DeviceBuffer.from_array(lib, x) as d_x, tut.DeviceBuffer.from_array(lib, y) as d_y, \
            tut.DeviceBuffer(lib, x.nbytes) as d_copy, tut.DeviceBuffer(lib, flush_bytes) as d_l2:
        def run_saxpy():
            a = PERF_SCALES[int(rng.integers(len(PERF_SCALES)))]
            sent.append(a)
            saxpy(a, d_x.ptr, d_y.ptr, n, blocks, block)

        def spot_check(name):
            """After a run, outside the clock: 4 slices of y against the calls made so far."""
            if name != "saxpy":
                return
            k, done = min(1024, n), np.float32(sum(sent))
            for at in rng.integers(0, n - k + 1, 4):
                got = np.empty(k, np.float32)
                lib.dtoh(tut.ptr(got), ctypes.c_void_p(d_y.ptr.value + 4 * int(at)), got.nbytes)
                want = y[at:at + k] + done * x[at:at + k]
                if not np.array_equal(got, want):
                    bad = int(np.flatnonzero(got != want)[0])
                    raise AssertionError(
                        f"y after the {len(sent)} timed calls of saxpy_grid_stride so far (the "
                        f"end of a timed run): y[{int(at) + bad}] = {got[bad]}, want "
                        f"{want[bad]} (each y = a*x + y): the work of some calls is missing "
                        f"when the run ends")

        per_call, reps = tut.measure_calls(
            [("copy", lambda: dtod(d_copy.ptr, d_x.ptr, x.nbytes)), ("saxpy", run_saxpy),
             ("harness call", lib.synchronize)],
            sync=lib.synchronize, flush=lambda: lib.memset(d_l2.ptr, next(flushes) & 0xFF,
                                                           flush_bytes),
            min_seconds=min_seconds, clock=clock, extra=lambda: int(rng.integers(0, 3)),
            after_run=spot_check, too_slow=1.0)   # 1 s a call: 1.6 GB/s, far below any copy
        got = d_y.download(np.float32, n)
        d_y.check_guards()
        d_copy.check_guards()
    want = y + np.float32(sum(sent)) * x   # exact (see above)
    tut.assert_equal(got, want, name=f"y after the {len(sent)} timed calls of saxpy_grid_stride "
                                     f"(each y = a*x + y, a drawn per call)")
    gbps = 3 * x.nbytes / per_call["saxpy"] / 1e9     # x and y read, y written
    ceiling = 2 * x.nbytes / per_call["copy"] / 1e9   # read + written
    fraction, message = tut.performance_points("saxpy_grid_stride", gbps, ceiling, PERF_FULL,
                                               PERF_ZERO)
    overhead = per_call["harness call"]
    message += (f"\n(n = {n}, <<<{blocks}, {block}>>>; median of 7 runs of {reps['saxpy']} to "
                f"{reps['saxpy'] + 2} calls, "
                f"timed by the checker; a call into the library and back costs "
                f"{overhead * 1e6:.1f} us, {overhead / per_call['saxpy']:.1%} of a saxpy call, "
                f"counted in it, not subtracted)")
    return {"fraction": fraction, "message": message, "gbps": gbps, "ceiling": ceiling}


@CH.performance("01.5", "speed", f"saxpy_grid_stride_kernel's speed: all points from "
                f"{PERF_FULL:.0%} of the copy ceiling (GPU)", points=PERF_POINTS,
                full=PERF_FULL, zero=PERF_ZERO)
def test_grid_stride_speed(ctx):
    r = saxpy_performance(ctx.lib, ctx.rng)
    return r["fraction"], r["message"]


@CH.check("float4-alignment", "the float4 vector add is right on pointers not 16-byte aligned")
def test_float4_alignment(ctx):
    """A float4 access needs a 16-byte aligned address; the kernel falls back to scalar loads
    when any pointer is not (a GPU would fault with cudaErrorMisalignedAddress)."""
    n = 1031
    a, b = tut.random_f32(ctx.rng, n + 1), tut.random_f32(ctx.rng, n + 1)
    times = np.zeros(1, np.float32)
    with tut.DeviceBuffer.from_array(ctx.lib, a) as d_a, \
            tut.DeviceBuffer.from_array(ctx.lib, b) as d_b, \
            tut.DeviceBuffer(ctx.lib, a.nbytes) as d_c:
        for shift in (0, 1, 2, 3):   # floats: 4-byte steps off the 256-byte aligned start
            at = [ctypes.c_void_p(buf.ptr.value + 4 * shift) for buf in (d_a, d_b, d_c)]
            c_api(ctx.lib).bench_vector_add(3, *at, n + 1 - shift, 1,
                                            times.ctypes.data_as(tut.c_float_p))
            got = d_c.download(np.float32, n + 1)[shift:]
            tut.assert_close(got, a[shift:].astype(np.float64) + b[shift:], rtol=1e-6,
                             atol=1e-30, name=f"float4 vector add, pointers + {4 * shift} bytes")
        d_c.check_guards()


@CH.check("errors", "launches CUDA refuses, and bad arguments refused before CUDA")
def test_errors(ctx):
    api = c_api(ctx.lib)
    # Measured on an H200 with CUDA 13.0: each of these is cudaErrorInvalidValue (CUDA 12 and
    # older books say cudaErrorInvalidConfiguration: tut.launch_config_errors). The emulator
    # must say what CUDA 13 says.
    for grid, block in (((1, 1, 1), (1025, 1, 1)), ((1, 1, 1), (0, 1, 1)),
                        ((1, 70000, 1), (32, 1, 1)), ((1, 1, 1), (32, 32, 2)),
                        ((1, 1, 1), (1, 1, 65))):
        tut.expect_cuda_error(ctx.lib, tut.launch_config_errors(ctx.lib),
                              lambda: api.launch_empty(*grid, *block), f"<<<{grid}, {block}>>>")
        api.launch_empty(1, 1, 1, 1024, 1, 1)   # not sticky: the next launch works
    a = np.ones(10, np.float32)
    for bad, exc in ((lambda: vector_add(ctx.lib, a.astype(np.float64), a), TypeError),
                     (lambda: vector_add(ctx.lib, a, a[:9]), ValueError),
                     (lambda: vector_add(ctx.lib, np.ones(20, np.float32)[::2], a), ValueError),
                     (lambda: vector_add(ctx.lib, a.tolist(), a), TypeError),
                     (lambda: vector_add(ctx.lib, a, a, block=-1), ValueError)):
        tut.expect_raises(exc, bad, "a bad argument to vector_add")
    empty = np.empty(0, np.float32)
    assert vector_add(ctx.lib, empty, empty).size == 0   # n = 0: no launch, no error
    # Far beyond device memory: cudaErrorMemoryAllocation, not sticky, nothing leaked.
    tut.expect_cuda_error(ctx.lib, "cudaErrorMemoryAllocation",
                          lambda: tut.DeviceBuffer(ctx.lib, 1 << 50), "a 1 PiB cudaMalloc")
    with tut.DeviceBuffer.from_array(ctx.lib, a) as d_a:   # and the next calls work
        api.launch_empty(1, 1, 1, 32, 1, 1)
        tut.assert_equal(d_a.download(np.float32, a.shape), a)


# ---- demo and benchmark -----------------------------------------------------------------------
def demo(lib):
    ids = record_ids(lib, (2, 1, 1), (4, 1, 1)).reshape(-1, 6)
    print("record_ids_kernel<<<2, 4>>>: each thread's (threadIdx.x, blockIdx.x) and global id")
    for gid, row in enumerate(ids):
        print(f"  threadIdx.x={row[0]} blockIdx.x={row[3]} -> "
              f"blockIdx.x * blockDim.x + threadIdx.x = {gid}")
    print("\nA block of 1025 threads is more than any GPU allows (1024):")
    try:
        c_api(lib).launch_empty(1, 1, 1, 1025, 1, 1)
    except tut.CudaError as e:
        print(f"  CudaError {e.name}: raised from {e.where}\n  {e}")
    print("\nNext: make check CH=01 (the tests of your exercises)")


def bench(lib):
    b = tut.Bench(lib, "01 vector add")
    n = (1 << 28) if lib.backend == "gpu" else (1 << 20)
    rng = np.random.default_rng(1)
    a, x = tut.random_f32(rng, n), tut.random_f32(rng, n)
    ceiling = b.d2d_copy_gbps(4 * n if lib.backend == "gpu" else 1 << 22)
    with tut.DeviceBuffer.from_array(lib, a) as d_a, tut.DeviceBuffer.from_array(lib, x) as d_b, \
            tut.DeviceBuffer(lib, a.nbytes) as d_c:
        for version, what in ((1, "one element per thread"), (2, "grid-stride, 8 blocks/SM"),
                              (3, "grid-stride, float4 loads")):
            ms = tut.median_ms(lambda r, t: c_api(lib).bench_vector_add(
                version, d_a.ptr, d_b.ptr, d_c.ptr, n, r, t))
            # correctness before the figure counts: the last timed run's output
            tut.assert_close(d_c.download(np.float32, n), a.astype(np.float64) + x, rtol=1e-6,
                             atol=1e-30, name=f"version {version}")
            b.row(f"vector add v{version}: {what}", 3 * n * 4 / (ms * 1e-3) / 1e9, "GB/s",
                  ceiling)   # 3 arrays x n x 4 bytes
    # 01.5's performance test as make grade BACKEND=gpu runs it (its own copy ceiling, timed
    # from Python around the calls, so a little below the event-timed rows above)
    try:
        r = saxpy_performance(lib, rng, n if lib.backend == "cpu" else PERF_N)
    except AssertionError as e:
        print(f"  01.5+speed: {e}")
    else:
        b.row("saxpy grid-stride (01.5+speed, the checker's clock)", r["gbps"], "GB/s",
              r["ceiling"])
        print("  " + r["message"].replace("\n", "\n  "))


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo))
