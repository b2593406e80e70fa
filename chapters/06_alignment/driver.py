# SPDX-License-Identifier: MIT
"""Chapter 06 alignment: drive the kernels from Python and check them against NumPy.

From the repository's root (make run uses the exercise tree; TUT_TREE=solutions the solutions):
    make run CH=06                the lesson's demo: alignments, a pitched image, a NumPy view,
                                  and last (it ruins the process's CUDA context) a misaligned float4
    make run CH=06 ARGS=--check   the tests (make check runs each exercise on its own)
    make run CH=06 ARGS=--bench   the stride and offset sweeps side by side, the vectorised copy
                                  at every offset 0..15, AoS vs SoA and pitched vs contiguous, each
                                  next to a device-to-device cudaMemcpy measured in the same run
    make run CH=06 ARGS="--bench --svg chapters/06_alignment/sweep.svg"
                                  the same, and the sweeps drawn as an SVG plot (sweep_svg.py)
    build/venv/bin/python chapters/06_alignment/driver.py [--check | --bench]   the same
"""
import ctypes
import functools
import platform
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep_svg  # noqa: E402

CH = tut.Chapter(6, "06_alignment")
I, F, P, LL, SZ = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_size_t
LLP = ctypes.POINTER(ctypes.c_longlong)
IP = ctypes.POINTER(ctypes.c_int)
MAX_OFFSET = 1 << 16            # floats; the alignment pattern repeats every 4 of them anyway
FIELDS = ("x", "y", "z", "vx", "vy", "vz", "mass", "charge")   # struct Particle, in order
H2D, D2H = 1, 2                 # cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost
SVG_PATH = None                 # --bench --svg PATH: where to draw the sweeps


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int body_layout(long long *out)       sizeof, alignof, offsetof pos, offsetof mass
        body_layout=lib.bind("body_layout", [LLP]),
        # int type_facts(long long *out)
        type_facts=lib.bind("type_facts", [LLP]),
        # int body_moment(const void *d_bodies, float *d_out, int n)
        body_moment=lib.bind("body_moment", [P, P, I]),
        # int malloc_addresses(const size_t *sizes, int count, long long *out)
        malloc_addresses=lib.bind("malloc_addresses", [ctypes.POINTER(SZ), I, LLP], out=(2,)),
        # int pitch_for(size_t width_bytes, size_t height, size_t *pitch, int *texture_alignment)
        pitch_for=lib.bind("pitch_for", [SZ, SZ, ctypes.POINTER(SZ), IP]),
        # int strided_copy(const float *d_in, float *d_out, int n, int stride, int offset)
        strided_copy=lib.bind("strided_copy", [P, P, I, I, I]),
        # int copy_any_offset(const float *d_src, float *d_dst, long long n, int max_blocks)
        copy_any_offset=lib.bind("copy_any_offset", [P, P, LL, I]),
        # int float4_load(int offset_floats, float *h_sum)
        float4_load=lib.bind("float4_load", [I, tut.c_float_p]),
        # int scale_rows_pitched(const float *h_in, float *h_out, unsigned char *h_raw,
        #     int width, int height, size_t *pitch)
        scale_rows_pitched=lib.bind("scale_rows_pitched", [P, P, P, I, I, ctypes.POINTER(SZ)],
                                    out=(1, 2, 5)),
        # int view_roundtrip(float *h_view, size_t row_stride, int width, int height,
        #     size_t *pitch)
        view_roundtrip=lib.bind("view_roundtrip", [P, SZ, I, I, ctypes.POINTER(SZ)], out=(0, 4)),
        # int memcpy2d_raw(void *dst, size_t dpitch, const void *src, size_t spitch,
        #     size_t width, size_t height, int kind)
        memcpy2d_raw=lib.bind("memcpy2d_raw", [P, SZ, P, SZ, SZ, SZ, I], out=(0,)),
        # int particles_to_soa_and_drift(const void *d_aos, float *d_soa, int n, float dt)
        particles_to_soa_and_drift=lib.bind("particles_to_soa_and_drift", [P, P, I, F]),
        # int aos_drift(void *d_aos, int n, float dt)
        aos_drift=lib.bind("aos_drift", [P, I, F]),
        # int particles_to_soa_staged(const void *d_aos, float *d_soa, int n)
        particles_to_soa_staged=lib.bind("particles_to_soa_staged", [P, P, I]),
        # int fill_pattern(float *d, long long n)       d[i] = i % 8191 + 0.5
        fill_pattern=lib.bind("fill_pattern", [P, LL], out=(0,)),
        # int bench_kernel(int what, void *d_a, void *d_b, long long n, long long p1,
        #     long long p2, int reps, float *times_ms)
        bench_kernel=lib.bind("bench_kernel", [I, P, P, LL, LL, LL, I, tut.c_float_p]),
    )


def _at(buf, offset_floats):
    """A device address offset_floats floats into a DeviceBuffer."""
    return ctypes.c_void_p(buf.ptr.value + 4 * offset_floats)


# ---- Python entry points: check arguments, own the device buffers, return NumPy arrays ----------
def body_layout(lib):
    """struct Body as compiled: {'size', 'align', 'pos', 'mass'} in bytes."""
    out = (ctypes.c_longlong * 4)()
    c_api(lib).body_layout(out)
    return dict(zip(("size", "align", "pos", "mass"), out))


def body_dtype(layout):
    """A NumPy structured dtype with exactly the C struct's offsets and size."""
    return np.dtype({"names": ["pos", "mass"], "formats": [(np.float32, 3), np.float32],
                     "offsets": [layout["pos"], layout["mass"]], "itemsize": layout["size"]})


def body_moment(lib, bodies):
    """mass * |pos|^2 per body, on the GPU; bodies has body_dtype's layout."""
    if not isinstance(bodies, np.ndarray) or bodies.ndim != 1:
        raise TypeError("bodies must be a 1D numpy structured array")
    if bodies.dtype != body_dtype(body_layout(lib)):
        raise TypeError("bodies must have the C struct's layout: use body_dtype(body_layout(lib))")
    n = tut.check_count(bodies.size, "len(bodies)")
    bodies = np.ascontiguousarray(bodies)
    with tut.DeviceBuffer(lib, bodies.nbytes) as d_in, tut.DeviceBuffer(lib, 4 * n) as d_out:
        lib.htod(d_in.ptr, tut.ptr(bodies), bodies.nbytes)
        c_api(lib).body_moment(d_in.ptr, d_out.ptr, n)
        d_out.check_guards()
        return d_out.download(np.float32, n)


def malloc_addresses(lib, sizes):
    """Each size cudaMalloc'd (and freed): the addresses modulo 4096."""
    arr = (SZ * len(sizes))(*sizes)
    out = (ctypes.c_longlong * len(sizes))()
    c_api(lib).malloc_addresses(arr, len(sizes), out)
    return list(out)


def pitch_for(lib, width_bytes, height=2):
    """(pitch cudaMallocPitch picks for rows of width_bytes, cudaDevAttrTexturePitchAlignment)."""
    pitch, tex = SZ(0), ctypes.c_int(0)
    c_api(lib).pitch_for(width_bytes, height, ctypes.byref(pitch), ctypes.byref(tex))
    return pitch.value, tex.value


def strided_copy(lib, a, n, stride, offset=0):
    """out[i] = a[offset + i * stride] for i < n."""
    tut.check_array(a, np.float32, "a", ndim=1)
    n = tut.check_count(n, "n")
    stride = tut.check_count(stride, "stride", maximum=1024, minimum=1)
    offset = tut.check_count(offset, "offset", maximum=MAX_OFFSET)
    if n and offset + (n - 1) * stride >= a.size:
        raise ValueError(f"a has {a.size} floats; stride {stride} and offset {offset} read "
                         f"up to index {offset + (n - 1) * stride}")
    with tut.DeviceBuffer.from_array(lib, a) as d_a, tut.DeviceBuffer(lib, 4 * n) as d_out:
        c_api(lib).strided_copy(d_a.ptr, d_out.ptr, n, stride, offset)
        d_out.check_guards()
        return d_out.download(np.float32, n)


def copy_at_offset(lib, a, offset, dst_offset=None, max_blocks=0):
    """Copy a with copy_vec4_kernel from `offset` floats into one device buffer to `dst_offset`
    (default: the same) floats into another: the addresses a sub-allocation gives. The floats
    before and after the copied ones, in the destination, must stay poisoned. max_blocks: 0 for
    one float4 per thread (the bench's grid), else a grid of at most that many blocks."""
    tut.check_array(a, np.float32, "a", ndim=1)
    dst_offset = offset if dst_offset is None else dst_offset
    offset = tut.check_count(offset, "offset", maximum=MAX_OFFSET)
    dst_offset = tut.check_count(dst_offset, "dst_offset", maximum=MAX_OFFSET)
    if (offset - dst_offset) % 4:
        raise ValueError(f"source offset {offset} and destination offset {dst_offset} differ "
                         f"by a number of floats that is not a multiple of 4: the two addresses "
                         f"can never both be 16-byte aligned, so float4 copies cannot work")
    n = a.size
    total = max(offset, dst_offset) + n + 8
    # Around the source data: a value that is not the poison, so that a copy that runs past
    # either end changes the destination's poison and is seen.
    src_host = np.full(total, -12345.5, np.float32)
    src_host[offset:offset + n] = a
    with tut.DeviceBuffer.from_array(lib, src_host) as d_src, \
            tut.DeviceBuffer(lib, 4 * total) as d_dst:
        c_api(lib).copy_any_offset(_at(d_src, offset), _at(d_dst, dst_offset), n, max_blocks)
        d_dst.check_guards()
        whole = d_dst.download(np.float32, total)
    bits = whole.view(np.uint32)
    poison = tut.poisoned(1, np.uint32)[0]
    outside = np.concatenate([bits[:dst_offset], bits[dst_offset + n:]])
    if (outside != poison).any():
        raise AssertionError(f"copy of {n} floats at offset {dst_offset}: "
                             f"{int((outside != poison).sum())} float(s) outside the destination "
                             f"range were written (the head or the tail went too far)")
    return whole[dst_offset:dst_offset + n]


def float4_load(lib, offset_floats):
    """Sum of the float4 at a 256-aligned buffer + offset_floats (all zeros: 0.0)."""
    out = ctypes.c_float(0)
    c_api(lib).float4_load(offset_floats, ctypes.byref(out))
    return out.value


def _check_image(img, name):
    tut.check_array(img, np.float32, name, ndim=2)
    height, width = img.shape
    if width == 0 or height == 0:
        raise ValueError(f"{name} has shape {img.shape}: an image needs at least one row and "
                         f"one column")
    return height, width


def scale_rows_pitched(lib, img):
    """img * (row + 1) - col through a cudaMallocPitch buffer. Returns (result, the whole pitched
    allocation as bytes (height, pitch), pitch)."""
    height, width = _check_image(img, "img")
    tut.check_count(width, "width")
    pitch, _ = pitch_for(lib, 4 * width, height)
    out = tut.poisoned((height, width), np.float32)
    raw = np.zeros((height, pitch), np.uint8)
    got_pitch = SZ(0)
    c_api(lib).scale_rows_pitched(tut.ptr(img), tut.ptr(out), tut.ptr(raw), width, height,
                                  ctypes.byref(got_pitch))
    if got_pitch.value != pitch:
        raise AssertionError(f"cudaMallocPitch gave pitch {got_pitch.value}, then {pitch}")
    return out, raw, pitch


def check_view(view, name="view"):
    """A 2D float32 view cudaMemcpy2D can copy as it is: each row contiguous (column stride 4
    bytes), rows a fixed positive number of bytes apart, at least a row's bytes. Returns
    (height, width, row_stride_bytes)."""
    if not isinstance(view, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, not {type(view).__name__}")
    if view.dtype != np.float32:
        raise TypeError(f"{name} must have dtype float32, not {view.dtype.name}")
    if view.ndim != 2:
        raise ValueError(f"{name} must be 2D (rows x columns), not {view.ndim}D")
    height, width = view.shape
    if height == 0 or width == 0:
        raise ValueError(f"{name} has shape {view.shape}: nothing to copy, and a width of 0 is "
                         f"almost always a bug")
    row_stride, col_stride = view.strides
    if width > 1 and col_stride != 4:
        raise ValueError(f"{name}'s elements within a row are {col_stride} bytes apart, not 4: "
                         f"cudaMemcpy2D copies rows of contiguous bytes (a [:, ::2] slice or a "
                         f"transpose is not one); pass np.ascontiguousarray({name})")
    if height == 1:
        row_stride = 4 * width   # one row: its stride is never used
    if row_stride < 4 * width:
        raise ValueError(f"{name}'s rows are {row_stride} bytes apart but {4 * width} bytes "
                         f"long (overlapping, reversed or broadcast rows): cudaMemcpy2D needs a "
                         f"pitch >= the row")
    if not view.flags.writeable:
        raise ValueError(f"{name} is read-only, but the result is written back into it")
    return height, width, row_stride


def process_view(lib, view):
    """view = 2 * view + row, in place, through the GPU: cudaMemcpy2D straight from the view's
    rows and back, however far apart they are (a column slice of a wider array). Returns the
    pitch of the device buffer."""
    height, width, row_stride = check_view(view)
    pitch = SZ(0)
    c_api(lib).view_roundtrip(ctypes.c_void_p(view.ctypes.data), row_stride, width, height,
                              ctypes.byref(pitch))
    return pitch.value


def _check_particles(aos):
    tut.check_array(aos, np.float32, "particles", ndim=2)
    if aos.shape[1] != len(FIELDS):
        raise ValueError(f"particles must have shape (n, {len(FIELDS)}): one row per particle, "
                         f"columns {', '.join(FIELDS)}; got {aos.shape}")
    return tut.check_count(aos.shape[0], "number of particles")


def particles_soa(lib, aos, dt):
    """AoS (n, 8) in; on the GPU: to SoA, one drift step; returns the SoA as (8, n)."""
    n = _check_particles(aos)
    with tut.DeviceBuffer.from_array(lib, aos) as d_aos, \
            tut.DeviceBuffer(lib, aos.nbytes) as d_soa:
        c_api(lib).particles_to_soa_and_drift(d_aos.ptr, d_soa.ptr, n, dt)
        d_soa.check_guards()
        return d_soa.download(np.float32, (len(FIELDS), n))


def aos_drift(lib, aos, dt):
    """One drift step on the AoS layout; returns the new (n, 8) array."""
    n = _check_particles(aos)
    with tut.DeviceBuffer.from_array(lib, aos) as d_aos:
        c_api(lib).aos_drift(d_aos.ptr, n, dt)
        d_aos.check_guards()
        return d_aos.download(np.float32, aos.shape)


# ---- references ---------------------------------------------------------------------------------
def reference_scale_rows(img):
    h, w = img.shape
    return img.astype(np.float64) * (np.arange(h)[:, None] + 1) - np.arange(w)[None, :]


def reference_drift(aos, dt):
    """SoA (8, n) float64 after one drift step."""
    soa = aos.T.astype(np.float64)
    for p, v in ((0, 3), (1, 4), (2, 5)):
        soa[p] = aos[:, p].astype(np.float64) + aos[:, v].astype(np.float64) * np.float64(dt)
    return soa


def random_bodies(rng, layout, n):
    rec = np.zeros(n, body_dtype(layout))
    rec["pos"] = tut.random_f32(rng, n, 3)
    rec["mass"] = np.abs(tut.random_f32(rng, n)) + 0.1
    return rec


# ---- the misaligned float4, in a child process --------------------------------------------------
def _misaligned_child(offset):
    """Run in a child process by test_misaligned: one float4 load at offset floats,
    reported as JSON. A fault inside a kernel is sticky (every later CUDA call in the process
    fails too, and CUDA's documentation says the process must end), so the tests never let it
    happen in their own process."""
    lib = tut.load_chapter(CH.name)
    result = {"name": "cudaSuccess", "diagnostic": "", "next_call": "cudaSuccess"}
    try:
        float4_load(lib, int(offset))
    except tut.CudaError as e:
        result.update(name=e.name, diagnostic=e.diagnostic, where=e.where)
        try:
            lib.synchronize()
        except tut.CudaError as e2:
            result["next_call"] = e2.name
    return tut.child_result(result)


# ---- tests --------------------------------------------------------------------------------------
IMAGE_SHAPES = [(1, 1), (2, 3), (3, 33), (17, 100), (64, 129), (5, 1000), (100, 257), (31, 7)]


@CH.exercise(1, "scale_rows_pitched_kernel: rows stepped by the pitch in bytes, padding untouched")
def test_pitched(ctx):
    shapes = IMAGE_SHAPES + ([(1000, 3001)] if ctx.large else [])
    padded = 0
    for height, width in shapes:
        img = tut.random_f32(ctx.rng, height, width)
        out, raw, pitch = scale_rows_pitched(ctx.lib, img)
        if pitch < 4 * width or pitch % 4:
            raise AssertionError(f"cudaMallocPitch gave pitch {pitch} for {4 * width}-byte rows")
        padded += height > 1 and pitch != 4 * width
        tut.assert_close(out, reference_scale_rows(img), rtol=1e-6, atol=1e-4,
                         name=f"{height}x{width} image, pitch {pitch} bytes (rows of "
                              f"{4 * width} bytes)")
        pad = raw[:, 4 * width:]
        if (pad != tut.POISON_BYTE).any():
            r, c = np.argwhere(pad != tut.POISON_BYTE)[0]
            raise AssertionError(f"{height}x{width} image: the kernel wrote into the padding "
                                 f"after row {r} (byte {4 * width + c} of a {pitch}-byte row); "
                                 f"guard the column with the width, not the pitch")
    if not padded:   # else a kernel using the width as the pitch could pass
        raise AssertionError("no test image had rows padded by cudaMallocPitch")


@CH.exercise(2, "view_roundtrip: a column slice of a wider array, by cudaMemcpy2D, in place")
def test_view(ctx):
    cases = [(7, 50, 3, 33), (33, 300, 17, 129), (1, 10, 1, 5), (100, 1031, 1, 1000),
             (65, 129, 128, 1), (5, 7, 0, 7)]
    if ctx.large:
        cases.append((2001, 4099, 5, 3001))
    for height, total, col, width in cases:
        wide = tut.random_f32(ctx.rng, height, total)
        before = wide.copy()
        view = wide[:, col:col + width]
        process_view(ctx.lib, view)
        want = before.astype(np.float64)
        want[:, col:col + width] = 2 * want[:, col:col + width] + np.arange(height)[:, None]
        tut.assert_close(wide, want, rtol=1e-6, atol=1e-5,
                         name=f"wide[:, {col}:{col + width}] of a {height}x{total} array "
                              f"(row stride {view.strides[0]} bytes)")
    # Every third row as well: rows 3 * total * 4 bytes apart, still one regular view.
    wide = tut.random_f32(ctx.rng, 30, 77)
    before = wide.copy().astype(np.float64)
    process_view(ctx.lib, wide[::3, 5:40])
    before[::3, 5:40] = 2 * before[::3, 5:40] + np.arange(10)[:, None]
    tut.assert_close(wide, before, rtol=1e-6, atol=1e-5, name="wide[::3, 5:40]")


@CH.exercise(3, "copy_vec4_kernel: float4 body, scalar head and tail, at any offset")
def test_copy(ctx):
    sizes = [1, 2, 3, 4, 5, 7, 31, 33, 257, 4099]
    for offset in range(16):
        for n in sizes + ([999_983] if offset in (0, 1, 2, 3, 7, 13) else []):
            a = tut.random_f32(ctx.rng, n)
            tut.assert_equal(copy_at_offset(ctx.lib, a, offset), a,
                             name=f"copy of n={n} floats at an offset of {offset} floats")
    for offset, dst in ((1, 5), (6, 2), (3, 15)):   # different offsets, same address mod 16
        a = tut.random_f32(ctx.rng, 1001)
        tut.assert_equal(copy_at_offset(ctx.lib, a, offset, dst), a,
                         name=f"copy of 1001 floats from offset {offset} to offset {dst}")
    # A grid smaller than the work: only the grid-stride loop covers it.
    for offset, blocks in ((0, 1), (1, 2), (13, 3)):
        a = tut.random_f32(ctx.rng, 4099)
        tut.assert_equal(copy_at_offset(ctx.lib, a, offset, max_blocks=blocks), a,
                         name=f"copy of 4099 floats at an offset of {offset} floats with a grid "
                              f"of {blocks} block(s) of 256 threads (the grid-stride loop)")
    if ctx.large:
        a = tut.random_f32(ctx.rng, (1 << 22) + 7)
        tut.assert_equal(copy_at_offset(ctx.lib, a, 3), a, name="copy of 2^22+7 floats")


@CH.exercise(4, "aos_to_soa_kernel and soa_drift_kernel: AoS to SoA, then one drift step")
def test_soa(ctx):
    for n in ctx.sizes(256):
        aos = tut.random_f32(ctx.rng, n, len(FIELDS))
        dt = np.float32(ctx.rng.uniform(0.01, 0.5))
        tut.assert_close(particles_soa(ctx.lib, aos, dt), reference_drift(aos, dt), rtol=1e-6,
                         atol=1e-6, name=f"SoA (rows {', '.join(FIELDS)}) after a drift, n={n}")


@CH.exercise(5, "struct Body: 16 bytes, 16-byte aligned, so one load per body")
def test_body(ctx):
    layout = body_layout(ctx.lib)
    if (layout["size"], layout["align"], layout["pos"], layout["mass"]) != (16, 16, 0, 12):
        raise AssertionError(f"struct Body is {layout['size']} bytes with {layout['align']}-byte "
                             f"alignment, pos at offset {layout['pos']} and mass at "
                             f"{layout['mass']}; want 16 bytes, 16-byte alignment, pos at 0, "
                             f"mass at 12: then one thread loads a body with one 16-byte load")
    for n in (1, 33, 1001):
        rec = random_bodies(ctx.rng, layout, n)
        pos = rec["pos"].astype(np.float64)
        want = rec["mass"] * (pos ** 2).sum(axis=1)
        tut.assert_close(body_moment(ctx.lib, rec), want, rtol=1e-5, atol=1e-6,
                         name=f"mass * |pos|^2 of {n} bodies")


@CH.exercise(6, "aos_to_soa_staged_kernel: AoS to SoA through shared memory, rows of 9 words")
def test_staged(ctx):
    """Corner turning: exact for 1 particle, for sizes around the 256-thread block and for
    sizes that are not multiples of it (the last block is partial), nothing written outside."""
    for n in (1, 255, 256, 257, 4099, 65_537) + ((999_983,) if ctx.large else ()):
        aos = tut.random_f32(ctx.rng, n, len(FIELDS))
        with tut.DeviceBuffer.from_array(ctx.lib, aos) as d_aos, \
                tut.DeviceBuffer(ctx.lib, aos.nbytes) as d_soa:
            c_api(ctx.lib).particles_to_soa_staged(d_aos.ptr, d_soa.ptr, n)
            d_soa.check_guards()
            tut.assert_equal(d_soa.download(np.float32, (len(FIELDS), n)), aos.T,
                             name=f"staged AoS to SoA, n={n}")


@CH.check("cudamalloc", "cudaMalloc pointers are 256-byte aligned; cudaMallocPitch pads rows")
def test_cudamalloc(ctx):
    sizes = [1, 3, 255, 257, 4097, 1 << 20, 12345]
    for size, mod in zip(sizes, malloc_addresses(ctx.lib, sizes)):
        if mod % 256:
            raise AssertionError(f"cudaMalloc({size}) returned an address {mod} mod 4096: "
                                 f"not 256-byte aligned")
    for width in (1, 3, 4, 100, 132, 400, 511, 512, 513, 4000, 4004, 40_000):
        pitch, tex = pitch_for(ctx.lib, width)
        if pitch < width or pitch % tex:
            raise AssertionError(f"cudaMallocPitch({width}-byte rows) gave pitch {pitch}: want "
                                 f">= {width} and a multiple of the texture pitch alignment {tex}")


def _arm_clang_emulator(lib):
    """The emulator on 64-bit Arm, built by clang: its load/store hooks ran (the memory-access
    profile says so after an aligned launch)."""
    if platform.machine() not in ("aarch64", "arm64"):
        return False
    with tut.access_profile(lib) as cd:
        if cd is None:
            return False
        float4_load(lib, 0)
        return cd.cuemuProfileAvailable() == 1


@CH.check("misaligned", "a misaligned float4 load is cudaErrorMisalignedAddress (in a child)",
          full="it starts a second Python process with a CUDA context of its own")
def test_misaligned(ctx):
    for offset in (0, 4, 8):   # 16-byte aligned: fine, in this process
        if float4_load(ctx.lib, offset) != 0.0:
            raise AssertionError(f"float4 load at offset {offset}: wrong sum")
    used = ctx.lib.mem_used()
    result, _ = tut.run_child(__file__, "_misaligned_child", 1)
    for _ in range(100):   # the child's context is torn down as it exits: let the driver finish
        if ctx.lib.mem_used() <= used:
            break
        time.sleep(0.05)
    # Under compute-sanitizer's memcheck the tool catches the access first: it reports the
    # misaligned read itself and ends the kernel, and the program sees cudaErrorLaunchFailure
    # (H200, 2026-12-01, make sanitize).
    want = {"cudaErrorMisalignedAddress"} | (
        {"cudaErrorLaunchFailure"} if tut.under_sanitizer() else set())
    if result["name"] == "cudaSuccess" and _arm_clang_emulator(ctx.lib):
        raise tut.Skip("64-bit Arm, the emulator's clang build: a float4 copied whole is one "
                       "16-byte copy, which clang's alignment check does not see and Arm's "
                       "16-byte load does not fault on (docs/no-gpu.md, \"64-bit Arm\"); its "
                       "g++ build, x86-64 and a GPU catch it")
    if result["name"] not in want:
        # No other skip on the emulator: the lesson says it catches a misaligned float4 (and
        # so an 06.3 without its head), and this check keeps that true.
        raise AssertionError(f"float4 load at a 4-byte offset: want cudaErrorMisalignedAddress, "
                             f"got {result['name']}")
    if result["next_call"] != result["name"]:
        raise AssertionError(f"after the fault, the next CUDA call gave {result['next_call']}: "
                             f"the error should be sticky")
    if ctx.backend == "cpu" and "float4_load_kernel" not in result["diagnostic"]:
        raise AssertionError(f"the emulator's diagnostic does not name the kernel:\n"
                             f"{result['diagnostic']}")


@CH.check("errors", "bad arguments: clear exceptions or CUDA errors, nothing leaked")
def test_errors(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    a = tut.random_f32(ctx.rng, 100)
    img = np.ones((4, 10), np.float32)
    for bad, exc, what in (
            (lambda: copy_at_offset(lib, a, -1), ValueError, "a negative offset"),
            (lambda: copy_at_offset(lib, a, 1 << 40), ValueError, "a huge offset"),
            (lambda: copy_at_offset(lib, a, 1, 2), ValueError, "offsets 1 and 2"),
            (lambda: copy_at_offset(lib, a.astype(np.float64), 0), TypeError, "float64"),
            (lambda: strided_copy(lib, a, 50, 3), ValueError, "a stride past the end"),
            (lambda: strided_copy(lib, a, 10, 0), ValueError, "stride 0"),
            (lambda: scale_rows_pitched(lib, np.ones((4, 0), np.float32)), ValueError,
             "width 0"),
            (lambda: scale_rows_pitched(lib, img.T), ValueError, "a transposed image"),
            (lambda: process_view(lib, img[:, ::2]), ValueError, "a [:, ::2] view"),
            (lambda: process_view(lib, img.T), ValueError, "a transposed view"),
            (lambda: process_view(lib, img[::-1]), ValueError, "reversed rows"),
            (lambda: process_view(lib, np.broadcast_to(a[:10], (4, 10))), ValueError,
             "a broadcast view"),
            (lambda: process_view(lib, img[:0]), ValueError, "no rows"),
            (lambda: process_view(lib, np.ones((2, 3, 4), np.float32)), ValueError, "3D"),
            (lambda: process_view(lib, img.astype(np.float64)), TypeError, "float64"),
            (lambda: particles_soa(lib, np.ones((5, 7), np.float32), 0.1), ValueError,
             "7 fields")):
        tut.expect_raises(exc, bad, what)
    # The C side refuses too, when Python is bypassed: pointers 8 bytes apart mod 16.
    with tut.DeviceBuffer(lib, 1024) as d_a, tut.DeviceBuffer(lib, 1024) as d_b:
        tut.expect_raises(ValueError,
                          lambda: api.copy_any_offset(_at(d_a, 1), _at(d_b, 3), 10, 0),
                          "copy_any_offset with addresses unequal mod 16")
        tut.expect_raises(ValueError, lambda: api.copy_any_offset(d_a.ptr, d_b.ptr, 10, -1),
                          "copy_any_offset with a negative max_blocks")
        # A pitch smaller than the row: cudaErrorInvalidPitchValue, from CUDA itself.
        host = np.zeros((4, 10), np.float32)
        tut.expect_cuda_error(lib, "cudaErrorInvalidPitchValue",
                              lambda: api.memcpy2d_raw(d_a.ptr, 36, tut.ptr(host), 40, 40, 4,
                                                       H2D), "cudaMemcpy2D with dpitch < width")
        tut.expect_cuda_error(lib, "cudaErrorInvalidPitchValue",
                              lambda: api.memcpy2d_raw(tut.ptr(host), 40, d_a.ptr, 20, 40, 4,
                                                       D2H), "cudaMemcpy2D with spitch < width")


# ---- demo and benchmark -------------------------------------------------------------------------
def demo(lib):
    facts = (ctypes.c_longlong * 10)()
    c_api(lib).type_facts(facts)
    print("alignof: float", facts[0], " float2", facts[1], " float3", facts[2], " float4",
          facts[3], " double2", facts[4], f" (sizeof float3 = {facts[6]})")
    print(f"struct Particle (8 floats): sizeof {facts[7]}, alignof {facts[5]}")
    print(f"char, float, double, short: sizeof {facts[8]} in that order, {facts[9]} largest first")
    lay = body_layout(lib)
    print(f"struct Body (float3 pos, float mass): sizeof {lay['size']}, alignof {lay['align']}")
    sizes = [1, 100, 4097, 1 << 20]
    mods = malloc_addresses(lib, sizes)
    print("\ncudaMalloc addresses modulo 4096: " +
          ", ".join(f"{s} B -> {m}" for s, m in zip(sizes, mods)) +
          "\n  (at least 256-byte aligned; d_ptr + 1 float is only 4-byte aligned)")
    for width in (4, 4 * 1001, 4 * 3001):
        pitch, tex = pitch_for(lib, width)
        print(f"cudaMallocPitch, rows of {width:>5} bytes -> pitch {pitch} bytes")
    print(f"  (cudaDevAttrTexturePitchAlignment = {tex}: the rule for textures bound to "
          f"pitched memory, not the pitch cudaMallocPitch picks)")
    wide = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    view = wide[:, 2:5]
    pitch = process_view(lib, view)
    print(f"\nwide[:, 2:5] of a 4x8 array: rows {view.strides[0]} bytes apart, 12 bytes each; "
          f"through a {pitch}-byte pitch and back in place (2 * x + row):\n{wide}")
    print("\nLast, a float4 load 4 bytes past a 16-byte boundary (this ends the CUDA context):")
    try:
        float4_load(lib, 1)
        print("  no error: this build does not detect misaligned accesses")
    except tut.CudaError as e:
        print(f"  CudaError {e.name} at {e.where}")
        try:
            lib.synchronize()
            print("  the next call worked")
        except tut.CudaError as e2:
            print(f"  and the next call, cudaDeviceSynchronize, fails too: {e2.name} (sticky; the "
                  f"process must end)")
    print("\nNext: make check CH=06 (the tests of your exercises)")


def _bench_ms(lib, what, d_a, d_b, n, p1=0, p2=0, reps=20):
    return tut.median_ms(lambda r, t: c_api(lib).bench_kernel(what, d_a, d_b, n, p1, p2, r, t),
                         reps)


def bench(lib):
    b = tut.Bench(lib, "06 alignment and coalescing")
    gpu = lib.backend == "gpu"
    api, rng = c_api(lib), np.random.default_rng(6)
    n = (1 << 25) if gpu else (1 << 14)
    ceiling = b.d2d_copy_gbps((1 << 30) if gpu else (1 << 22))
    sweep, copies = {"stride": [], "offset": []}, []   # (k, share of the ceiling), for --svg

    widths = (1, 128, 511, 512, 513, 1000, 4004, 32764)
    pitches = [pitch_for(lib, w) for w in widths]
    print("  cudaMallocPitch, row bytes -> pitch: " +
          ", ".join(f"{w} -> {p}" for w, (p, _) in zip(widths, pitches)) +
          f"; cudaDevAttrTexturePitchAlignment = {pitches[0][1]}")

    # Stride and offset side by side: n floats read (useful bytes only) and n written.
    ks = [0, 1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 31, 32]
    total = n * 32 + 64
    pattern = (np.arange(total, dtype=np.int64) % 8191 + 0.5).astype(np.float32)
    print(f"  {'k':>3} {'stride k (GB/s)':>16} {'share':>7} {'offset k (GB/s)':>16} {'share':>7}"
          f"   (n = {n} floats; bytes = 2 x 4 x n)")
    with tut.DeviceBuffer(lib, 4 * total) as d_in, tut.DeviceBuffer(lib, 4 * n) as d_out:
        api.fill_pattern(d_in.ptr, total)
        for k in ks:
            cells = []
            for stride, offset in ((k, 0), (1, k)):
                if stride == 0:
                    cells.append(f"{'-':>16} {'':>7}")
                    continue
                ms = _bench_ms(lib, 1, d_in.ptr, d_out.ptr, n, stride, offset)
                got = d_out.download(np.float32, n)   # correctness before the figure counts
                tut.assert_equal(got, pattern[offset:offset + n * stride:stride][:n],
                                 name=f"stride {stride} offset {offset}")
                gbps = 8 * n / (ms * 1e-3) / 1e9
                b.add(f"strided copy stride {stride} offset {offset}", gbps, "GB/s",
                      gbps / ceiling)
                sweep["stride" if offset == 0 and stride == k else "offset"].append(
                    (k, gbps / ceiling))
                cells.append(f"{gbps:16.1f} {gbps / ceiling:7.1%}")
            print(f"  {k:>3} {cells[0]} {cells[1]}")
    stride, shift = dict(sweep["stride"]), dict(sweep["offset"])   # shares of one ceiling
    b.figure("stride sweep: stride 32 over stride 1", 100 * stride[32] / stride[1], "%", 1)
    b.figure("offset sweep: slowest offset 1-32 below offset 0",
             100 * (1 - min(shift[k] for k in ks if k) / shift[0]), "%", 1)

    # The vectorised copy at every offset 0..15 floats (source and destination alike), each
    # against a device-to-device cudaMemcpy of the same bytes timed just before it: the machine
    # may be shared, and a ceiling measured minutes earlier can be 10% off.
    m = (1 << 28) if gpu else (1 << 18)
    a = (np.arange(m + 16, dtype=np.int64) % 8191 + 0.5).astype(np.float32)
    print(f"  {'offset':>6} {'copy_vec4 (GB/s)':>17} {'cudaMemcpy (GB/s)':>18} {'ratio':>7}"
          f"   ({m} floats; bytes = 2 x 4 x n; target >= 95%)")
    with tut.DeviceBuffer(lib, a.nbytes) as d_a, tut.DeviceBuffer(lib, a.nbytes) as d_b:
        api.fill_pattern(d_a.ptr, m + 16)
        for offset in range(16):
            ms_memcpy = tut.median_ms(lambda r, t: lib._d2d(4 * m, r, t))
            ms = _bench_ms(lib, 2, d_a.ptr, d_b.ptr, m, offset)
            tut.assert_equal(d_b.download(np.float32, m + 16)[offset:offset + m],
                             a[offset:offset + m], name=f"vectorised copy at offset {offset}")
            gbps, ceil = 8 * m / (ms * 1e-3) / 1e9, 8 * m / (ms_memcpy * 1e-3) / 1e9
            b.add(f"vectorised copy of {m} floats, offset {offset}", gbps, "GB/s", gbps / ceil)
            copies.append((offset, gbps / ceil))
            print(f"  {offset:>6} {gbps:17.1f} {ceil:18.1f} {gbps / ceil:7.1%}")
        worst = min(r for _, r in copies)
        print(f"  worst offset: {worst:.1%} of cudaMemcpy"
              f"{'' if worst >= 0.95 else '  (below the 95% target)'}")

    # AoS against SoA: one drift step reads 6 floats and writes 3 per particle (36 bytes).
    p = (1 << 24) if gpu else (1 << 14)
    aos = tut.random_f32(rng, p, len(FIELDS))
    useful = 36 * p
    with tut.DeviceBuffer.from_array(lib, aos) as d_aos, \
            tut.DeviceBuffer.from_array(lib, np.ascontiguousarray(aos.T)) as d_soa:
        ms_aos = _bench_ms(lib, 3, d_aos.ptr, None, p)
        ms_soa = _bench_ms(lib, 4, d_soa.ptr, None, p)
        b.row(f"AoS drift, {p} particles (36 useful bytes each)", useful / (ms_aos * 1e-3) / 1e9,
              "GB/s", ceiling)
        b.row("SoA drift, same particles", useful / (ms_soa * 1e-3) / 1e9, "GB/s", ceiling)
        b.row("SoA speed-up over AoS", ms_aos / ms_soa, "x")
        # The conversion itself, direct (06.4's kernel) and staged through shared memory:
        # 32 bytes read and 32 written per particle.
        moved = 64 * p
        ms_direct = _bench_ms(lib, 6, d_aos.ptr, d_soa.ptr, p)
        ms_staged = _bench_ms(lib, 7, d_aos.ptr, d_soa.ptr, p)
        b.row(f"AoS to SoA, {p} particles, one thread per particle", moved /
              (ms_direct * 1e-3) / 1e9, "GB/s", ceiling)
        b.row("AoS to SoA, staged through shared memory", moved / (ms_staged * 1e-3) / 1e9,
              "GB/s", ceiling)
        b.figure("AoS to SoA: staged / direct", ms_direct / ms_staged, "x", 2)
    # the timed runs drifted many times: check one step's arithmetic on fresh data instead
    small = tut.random_f32(rng, 1001, len(FIELDS))
    tut.assert_close(aos_drift(lib, small, 0.25).T, reference_drift(small, 0.25), rtol=1e-6,
                     atol=1e-6, name="AoS drift")

    # Pitched 2D against the same kernel on a packed array of the same width.
    h, w = (8192, 8191) if gpu else (64, 255)
    pitch, _ = pitch_for(lib, 4 * w, h)
    img_bytes = 2 * 4 * w * h   # each pixel read and written once
    with tut.DeviceBuffer(lib, pitch * h) as d_pitched, \
            tut.DeviceBuffer(lib, 4 * w * h) as d_packed:
        lib.memset(d_pitched.ptr, 0x3F, pitch * h)   # never time zeros
        lib.memset(d_packed.ptr, 0x3F, 4 * w * h)
        ms_p = _bench_ms(lib, 5, d_pitched.ptr, None, h, pitch, w)
        ms_c = _bench_ms(lib, 5, d_packed.ptr, None, h, 4 * w, w)
        b.row(f"2D kernel {h}x{w}, pitch {pitch} bytes", img_bytes / (ms_p * 1e-3) / 1e9,
              "GB/s", ceiling)
        b.row(f"2D kernel {h}x{w}, packed rows ({4 * w} bytes)", img_bytes / (ms_c * 1e-3) / 1e9,
              "GB/s", ceiling)
        b.row("pitched over packed", ms_c / ms_p, "x")

    if SVG_PATH:
        where = "the GPU" if gpu else "the CPU emulator (its timings mean nothing)"
        day = time.strftime("%Y-%m-%d", time.gmtime())
        sweep_svg.write_svg(SVG_PATH, {
            "title": f"06 alignment, --bench on {where}, {day}",
            "stride": sweep["stride"], "offset": sweep["offset"], "copy": copies})
        print(f"  plot written to {SVG_PATH}")


def _take_svg(argv):
    """Takes `--svg PATH` (the bench's sweeps drawn by sweep_svg.py) out of argv; the other
    arguments go to the harness."""
    global SVG_PATH
    if "--svg" in argv:
        k = argv.index("--svg")
        if k + 1 >= len(argv) or "--bench" not in argv:
            sys.exit("usage: driver.py --bench --svg PATH (the plot is drawn from the bench)")
        SVG_PATH = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
    return argv


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, argv=_take_svg(sys.argv[1:])))
