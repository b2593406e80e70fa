# SPDX-License-Identifier: MIT
"""Device and managed memory owned from Python: DeviceBuffer (guard zones), ManagedArray (a
NumPy view of cudaMallocManaged memory), and a ballast that fills the device."""
import contextlib
import ctypes
import sys
import weakref

import numpy as np

from .args import check_array, check_count, ptr
from .errors import POISON_BYTE, CudaError, Skip


class DeviceBuffer:
    """Device memory from cudaMalloc, owned by a Python object.

    The usable region sits between two guard zones filled with POISON_BYTE, and so is the region
    itself until something writes it. check_guards() reads the zones back, so a kernel that
    writes past either end fails its test on a real GPU as well as on the emulator.
    Free it with free(), a `with` block, or (as a safety net) the garbage collector."""

    GUARD = 256  # bytes; keeps the usable region at cudaMalloc's 256-byte alignment

    def __init__(self, lib, nbytes, guard=GUARD):
        self.lib, self.nbytes, self.guard = lib, check_count(nbytes, "nbytes", 2**62), guard
        raw = ctypes.c_void_p()
        lib.malloc_raw(ctypes.byref(raw), self.nbytes + 2 * guard)
        self._base = raw.value
        lib.memset(self._base, POISON_BYTE, self.nbytes + 2 * guard)
        self._no_access(1)

    def _no_access(self, on):
        """On the CPU backend the emulator also makes the guard zones no-access to kernels, so
        an out-of-bounds access is reported with its kernel, thread and line."""
        mark = self.lib.emu_no_access
        if mark is None or not self.guard:
            return
        body = self._base + self.guard
        mark(self._base, self.guard, body, self.nbytes, on)
        mark(body + self.nbytes, self.guard, body, self.nbytes, on)

    @classmethod
    def from_array(cls, lib, array, guard=GUARD):
        buf = cls(lib, array.nbytes, guard)
        buf.upload(array)
        return buf

    @property
    def ptr(self):
        if self._base is None:
            raise ValueError("DeviceBuffer used after free()")
        return ctypes.c_void_p(self._base + self.guard)

    def upload(self, array):
        array = np.ascontiguousarray(array)
        if array.nbytes > self.nbytes:
            raise ValueError(f"{array.nbytes} bytes do not fit in a {self.nbytes}-byte buffer")
        self.lib.htod(self.ptr, ptr(array), array.nbytes)

    def download(self, dtype, shape):
        out = np.empty(shape, dtype=dtype)
        if out.nbytes > self.nbytes:
            raise ValueError(f"{out.nbytes} bytes asked of a {self.nbytes}-byte buffer")
        self.lib.dtoh(ptr(out), self.ptr, out.nbytes)
        return out

    def check_guards(self):
        # the two zones only: a test of an 8 GiB buffer must not copy 8 GiB to check 512 bytes
        zones = np.empty(2 * self.guard, dtype=np.uint8)
        self.lib.dtoh(ptr(zones), self._base, self.guard)
        self.lib.dtoh(ptr(zones[self.guard:]), self._base + self.guard + self.nbytes, self.guard)
        before = np.flatnonzero(zones[:self.guard] != POISON_BYTE)
        after = np.flatnonzero(zones[self.guard:] != POISON_BYTE)
        if before.size:
            raise AssertionError(f"a kernel wrote {self.guard - before[0]} byte(s) before the "
                                 f"start of a {self.nbytes}-byte buffer")
        if after.size:
            raise AssertionError(f"a kernel wrote past the end of a {self.nbytes}-byte buffer "
                                 f"(up to byte {self.nbytes + after[-1]} after its start)")

    def free(self):
        if self._base is None:
            raise ValueError("DeviceBuffer freed twice")
        self._no_access(0)
        base, self._base = self._base, None
        self.lib.free_raw(base)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._base is not None:
            self.free()

    def __del__(self):
        if getattr(self, "_base", None) is not None:
            try:
                self.free()
            except Exception:
                pass  # the interpreter may be shutting down; nothing more can be done


# ---- managed memory seen from NumPy (chapter 05) ---------------------------------------------
class _ArrayInterface:
    """Lends a raw address to NumPy. Every array made from it, and every view of those, keeps
    this object alive, so a finaliser attached to it cannot free memory a view still shows."""

    def __init__(self, address, shape, dtype):
        self.__array_interface__ = {"shape": tuple(shape), "typestr": dtype.str,
                                    "descr": dtype.descr, "data": (address, False),
                                    "version": 3}


class ManagedArray:
    """A NumPy array in memory from cudaMallocManaged: the same address is valid on the host
    and on the device, so .array is a NumPy view of it, made without a copy, and .address
    goes to the C code as it is.

    The memory is freed exactly once, when nothing shows it any more: free() (refused, with
    ValueError, while a NumPy view of it is alive), the end of a `with` block, or the garbage
    collector once this object and every view are gone. Using it after free() raises
    ValueError. Reading or writing .array while a kernel that uses it may still run is a bug
    (the C code must synchronise before it returns): the host would see, or overwrite, data the
    kernel has not finished with."""

    def __init__(self, lib, shape, dtype=np.float32):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        for s in shape:
            check_count(s, "shape", maximum=2**62)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject:
            raise TypeError(f"dtype {self.dtype} holds Python objects, which cannot live in "
                            f"GPU memory: use a numeric or structured dtype")
        self.shape = shape
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * self.dtype.itemsize
        if self.nbytes == 0:
            raise ValueError("a ManagedArray needs at least one element")
        raw = ctypes.c_void_p()
        lib.malloc_managed_raw(ctypes.byref(raw), self.nbytes)
        self._address = raw.value
        holder = _ArrayInterface(self._address, shape, self.dtype)
        self._array = np.asarray(holder)   # a view of the managed memory: no copy
        if self._array.ctypes.data != self._address:
            raise AssertionError("NumPy copied the managed memory instead of viewing it")
        # On the holder, not on self: the memory goes when neither this object nor any view of
        # its array is left (NumPy arrays are invisible to the cycle collector, so a cycle
        # through one would never be freed).
        self._free_raw = lib.free_raw
        self._finalizer = weakref.finalize(holder, ManagedArray._quiet_free, lib.free_raw,
                                           self._address)

    @staticmethod
    def _quiet_free(free_raw, address):
        # From the garbage collector or the end of a `with` block: after a fault in a kernel
        # every CUDA call fails, cudaFree too, and the fault was reported already.
        try:
            free_raw(address)
        except Exception:
            pass

    @property
    def array(self):
        if self._array is None:
            raise ValueError("ManagedArray used after free()")
        return self._array

    @property
    def address(self):
        """The managed pointer, for a c_void_p argument."""
        if self._array is None:
            raise ValueError("ManagedArray used after free()")
        return self._address

    @property
    def alive(self):
        return self._array is not None

    def view(self, dtype, shape=None):
        """The same bytes as another dtype and shape (no copy); they must cover it exactly."""
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise TypeError(f"dtype {dtype} holds Python objects: it cannot view GPU memory")
        if shape is None:
            if self.nbytes % dtype.itemsize:
                raise ValueError(f"{self.nbytes} bytes are not a whole number of "
                                 f"{dtype.itemsize}-byte {dtype} elements")
            shape = (self.nbytes // dtype.itemsize,)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if need != self.nbytes:
            raise ValueError(f"shape {shape} of {dtype} covers {need} bytes, but the "
                             f"ManagedArray holds {self.nbytes}")
        return self.array.reshape(-1).view(np.uint8).view(dtype).reshape(shape)

    def __array__(self, dtype=None, copy=None):
        a = self.array
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError(f"a {a.dtype} ManagedArray cannot be seen as {np.dtype(dtype)} "
                                 f"without a copy")
            return a.astype(dtype)
        return a.copy() if copy else a

    def views_alive(self):
        """NumPy views of the memory other than this object's own array."""
        return 0 if self._array is None else sys.getrefcount(self._array) - 2

    def free(self):
        if self._array is None:
            raise ValueError("ManagedArray freed twice")
        views = self.views_alive()
        if views > 0:
            raise ValueError(f"ManagedArray still in use: {views} NumPy view(s) of it are "
                             f"alive (del them first, or copy what you need)")
        self._finalizer.detach()   # first: dropping the array below would run it
        self._array = None
        self._free_raw(self._address)   # an explicit free() reports a failing cudaFree

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # Let go of it; the memory itself goes with the last view (at once if there is none).
        self._array = None

    def __repr__(self):
        state = f"at {self._address:#x}" if self._array is not None else "freed"
        return f"ManagedArray(shape={self.shape}, dtype={self.dtype}, {state})"


def check_managed(m, dtype, name="array", ndim=None, shape=None):
    """m must be a live ManagedArray of this dtype (and shape): the C code hands its address
    to kernels, which cannot reach an ordinary NumPy array. Returns its NumPy array."""
    if isinstance(m, np.ndarray):
        raise TypeError(f"{name} must be a tut.ManagedArray, not a numpy.ndarray: a NumPy "
                        f"array lives in pageable host memory that a kernel cannot use")
    if not isinstance(m, ManagedArray):
        raise TypeError(f"{name} must be a tut.ManagedArray, not {type(m).__name__}")
    if not m.alive:
        raise ValueError(f"{name}: ManagedArray used after free()")
    return check_array(m.array, dtype, name, ndim=ndim, shape=shape)



def ballast_budget(backend):
    """The free device memory a test leaves beside device_ballast: large enough that the
    allocation granularity (2 MiB, on a GPU and on the emulator) cannot decide whether two
    buffers of 40% of it fit, small enough that the arrays of 2.5x of it are quick to make and
    check on the host. On a GPU a little more: the driver's own allocations come and go there.
    96 MiB on a GPU made chapter 02's tests 3.1 s of its 4.2 s `make check` on the H200
    (2026-12-05)."""
    return (48 if backend == "gpu" else 20) << 20


# A GPU's ballast outlives its `with` block when the harness says the next test wants one too
# (a test registered with ballast=True, see runner.py): a device-filling cudaMalloc made soon
# after the last one's cudaFree waited for the driver to take that memory back: 0.22-0.24 s
# on an H100 80GB, where the first in a process took 0.002 s (a probe, 2026-12-05), and on an
# H200 0.36 s of chapter 02.2's 0.59 s (check_phases.py). Never on the emulator, whose ballast
# costs nothing.
_kept = {"lib": None, "handle": None, "held": 0, "keep": False}


def kept_ballast_bytes():
    """Device memory (as cudaMemGetInfo counts it) held by a ballast kept for the next test:
    the harness's leak check leaves it out."""
    return _kept["held"] if _kept["handle"] else 0


def ballast_between_tests(this_wants, next_wants):
    """The harness, as a test starts: a kept ballast is freed unless this test wants one
    (registered with ballast=True), and this test's is kept only if the next test wants one."""
    if not this_wants:
        _release_kept()
    _kept["keep"] = bool(next_wants)


def _release_kept():
    if _kept["handle"]:
        handle, _kept["handle"], _kept["held"] = _kept["handle"], None, 0
        _kept["lib"].free_raw(handle)


@contextlib.contextmanager
def device_ballast(lib, leave_free):
    """Fill the device with one raw allocation (nothing written) so that only about
    `leave_free` bytes stay free: how tests make "more than the device has" happen at a size
    the machine can hold in host memory. Yields the free bytes cudaMemGetInfo then reports;
    raises Skip when the device cannot be filled (another process holds memory)."""
    free, _ = lib.mem_info()
    moved = not leave_free // 2 <= free <= 4 * leave_free
    if _kept["handle"] and (_kept["lib"] is not lib or moved):
        _release_kept()   # another library's, or the memory around it moved: a fresh one
        free, _ = lib.mem_info()
    size, handle = free - leave_free, ctypes.c_void_p(_kept["handle"])
    # the emulator's: counted as device memory, not poisoned, so no host memory is written
    ballast = getattr(lib.cdll, "cuemuMallocBallast", None)
    if ballast is not None:
        ballast.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]

    def taken(n):
        if ballast is not None:
            return ballast(ctypes.byref(handle), n) == 0
        try:
            lib.malloc_raw(ctypes.byref(handle), n)
            return True
        except CudaError as e:
            if e.name != "cudaErrorMemoryAllocation":
                raise
            lib.clear_last_error()
            return False

    held = _kept["held"]
    if not handle.value:
        used = lib.mem_used()
        while size > 0 and not taken(size):   # another process took some meanwhile: ask for less
            size -= 64 << 20
        held = lib.mem_used() - used
    _kept.update(handle=None, held=0)   # the test's own until its end
    try:
        now_free, _ = lib.mem_info()
        if now_free > 4 * leave_free:
            raise Skip(f"could not fill the device: {now_free} bytes still free")
        yield now_free
    finally:
        if handle.value:
            if _kept["keep"] and ballast is None:
                _kept.update(lib=lib, handle=handle.value, held=held)
            else:
                lib.free_raw(handle.value)
