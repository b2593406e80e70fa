# SPDX-License-Identifier: MIT
"""Comparing results with a float64 reference, expecting errors, and inputs that catch bugs."""
import numpy as np

from .errors import POISON_BYTE, CudaError


def _format_index(flat, shape):
    if len(shape) > 1:
        return str(tuple(int(v) for v in np.unravel_index(flat, shape)))
    return f"[{flat}]"


def _poison_value(dtype):
    return np.frombuffer(bytes([POISON_BYTE]) * np.dtype(dtype).itemsize, dtype=dtype)[0]


def ref_scale_shift(x, a, b):
    """a * x + b in float64: the reference of the scale-and-shift kernel that chapters 02, 03,
    05 and 09 build on. In place after the one copy: one float64 array, not three."""
    out = np.asarray(x).astype(np.float64)
    out *= np.float64(a)
    out += np.float64(b)
    return out


def assert_close(got, want, rtol=1e-5, atol=1e-6, name="result", show=5):
    """got (any float dtype) against a float64 reference: |got - want| <= atol + rtol * |want|."""
    got_arr = np.asarray(got)
    if got_arr.shape != np.shape(want):
        raise AssertionError(f"{name}: shape {got_arr.shape}, expected {np.shape(want)}")
    w = np.asarray(want, dtype=np.float64)
    bad = _far(got_arr, w, rtol, atol)
    if bad is not None:
        _raise_mismatch(name, got_arr, w, bad, f"rtol={rtol}, atol={atol}", show)


# Elements compared at a time: the float64 temporaries stay in the cache. 2^16 made each of
# them 512 KiB, past a core's L2: 18M elements (02.3's array) took 0.12 s, 0.053 s in
# chunks of 2^14 and 0.078 s of 2^12 (the 2-core CI machine, 2026-12-05).
_CHUNK = 1 << 14


def _far(got, want, rtol, atol):
    """None when every |got - want| <= atol + rtol * |want| (in float64), else the mask of
    the elements that are not (NaN counts as not). In chunks, in place: a 2^22-element
    comparison made seven full-size float64 temporaries."""
    g, w = got.reshape(-1), want.reshape(-1)
    diff, limit = np.empty(min(g.size, _CHUNK)), np.empty(min(g.size, _CHUNK))
    bad = None
    for start in range(0, g.size, _CHUNK):
        n = min(_CHUNK, g.size - start)
        d, lim = diff[:n], limit[:n]
        np.subtract(g[start:start + n], w[start:start + n], out=d, dtype=np.float64)
        np.abs(d, out=d)
        np.abs(w[start:start + n], out=lim)
        lim *= rtol
        lim += atol
        ok = d <= lim
        if not ok.all():
            if bad is None:
                bad = np.zeros(g.size, bool)
            bad[start:start + n] = ~ok
    return None if bad is None else bad.reshape(got.shape)


def assert_scale_shift(got, x, a, b, rtol=1e-6, atol=1e-6, name="result"):
    """assert_close(got, ref_scale_shift(x, a, b), ...) with the float64 reference made a chunk
    at a time: for the arrays larger than the device's free memory (chapters 02 and 03), whose
    full-size float64 reference alone took longer than the test's GPU work. The whole reference
    is made only to report a mismatch."""
    g, xs = np.asarray(got).reshape(-1), np.asarray(x).reshape(-1)
    if np.shape(got) != np.shape(x):
        raise AssertionError(f"{name}: shape {np.shape(got)}, expected {np.shape(x)}")
    ref = np.empty(min(xs.size, _CHUNK))
    for start in range(0, xs.size, _CHUNK):
        n = min(_CHUNK, xs.size - start)
        w = ref[:n]
        np.multiply(xs[start:start + n], np.float64(a), out=w)
        w += np.float64(b)
        if _far(g[start:start + n], w, rtol, atol) is not None:
            return assert_close(got, ref_scale_shift(x, a, b), rtol, atol, name)


def assert_equal(got, want, name="result", show=5):
    got_arr = np.asarray(got)
    if got_arr.shape != np.shape(want):
        raise AssertionError(f"{name}: shape {got_arr.shape}, expected {np.shape(want)}")
    bad = got_arr != np.asarray(want)
    if bad.any():
        _raise_mismatch(name, got_arr, np.asarray(want), bad, "exact", show)


def _raise_mismatch(name, got, want, bad, rule, show):
    flat = np.flatnonzero(bad)
    lines = [f"{name}: {flat.size} of {bad.size} elements wrong ({rule}); first ones:"]
    poison = _poison_value(got.dtype) if got.dtype.kind in "fiu" else None
    for i in flat[:show]:
        g, w = got.flat[i], want.flat[i]
        note = "   <- never written (still the poison value)" if (
            poison is not None and np.array_equal(g, poison)) else ""
        lines.append(f"  {_format_index(i, got.shape)}: got {g.item()!r}, want {w.item()!r}{note}")
    raise AssertionError("\n".join(lines))


def expect_raises(exc_type, fn, what):
    """fn() must raise exc_type (a bad argument refused, a use after free...). Returns it."""
    try:
        fn()
    except exc_type as e:
        return e
    raise AssertionError(f"{what}: no {exc_type.__name__} raised")


def expect_cuda_error(lib, name, fn, what, clear=True):
    """fn() must raise CudaError `name` (or one of a tuple of names), the real CUDA error. With
    clear=True the runtime's last error is consumed afterwards, as a program that handled the
    error would do, so no later launch check trips over it; clear=False leaves that to the code
    under test."""
    names = (name,) if isinstance(name, str) else tuple(name)
    want = " or ".join(names)
    e = expect_raises(CudaError, fn, f"{what} (want {want})")
    if e.name not in names:
        raise AssertionError(f"{what}: got {e.name}, want {want}") from e
    if clear:
        lib.clear_last_error()
    return e


def launch_config_errors(lib):
    """What a launch with an impossible configuration (1025 threads per block, a grid y of
    70000...) returns. CUDA 13.0 says cudaErrorInvalidValue (measured on an H200, as the
    emulator does); CUDA 12.4 said cudaErrorInvalidConfiguration for a 1025-thread block (the
    same H200 and driver, 2026-12-04), and a 12.x runtime is allowed either."""
    if lib.runtime_version() >= 13000:
        return ("cudaErrorInvalidValue",)
    return ("cudaErrorInvalidConfiguration", "cudaErrorInvalidValue")


def random_f32(rng, *shape, scale=3.0, offset=0.5):
    """Random float32 inputs, asymmetric and never all zero, so that a kernel that swaps two
    operands or forgets an index gives a visibly wrong answer: uniform in [offset - scale,
    offset + scale). Uniform, not normal: NumPy's normal numbers took 0.15 to 0.56 s of each
    of chapter 02's big tests on an H100 (check_phases.py, 2026-12-05), the largest cost of
    its `make check` there; uniform ones are made about four times faster (16M: 36 ms against
    158 ms on the 2-core CI machine)."""
    out = rng.random(shape, dtype=np.float32)   # in float32: no float64 array
    out *= np.float32(2.0 * scale)
    out += np.float32(offset - scale)
    return out


def poisoned(shape, dtype):
    """A host array filled with the poison pattern, for outputs the C code must overwrite."""
    out = np.empty(shape, dtype=dtype)
    out.view(np.uint8)[...] = POISON_BYTE
    return out
