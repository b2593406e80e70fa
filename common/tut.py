# SPDX-License-Identifier: MIT
"""tut: the course's Python side, shared by every chapter's driver.py.

- load_chapter() finds a chapter's shared library for the chosen backend (gpu: real CUDA,
  cpu: the emulator) and tree (chapters/ = the exercises, solutions/ = the answers);
- Library.bind() declares one C function once (argtypes, restype, errcheck) and turns a non-zero
  status into CudaError (CUDA's error name and number, the C file:line) or ExerciseNotDone;
- check_array()/check_count() refuse bad arguments before any CUDA call;
- DeviceBuffer owns device memory with poisoned guard zones, so tests catch out-of-bounds writes
  on a real GPU too;
- assert_close()/assert_equal() compare against a float64 reference and print the first
  mismatches (index, got, want);
- Chapter is the test harness: one id per exercise ("01.2"), exit codes 0 pass / 1 fail /
  77 cannot run here, JSON results for graders;
- Bench times with CUDA events in C (median of many runs) and prints ratios to a ceiling
  measured in the same run.
"""
import argparse
import contextlib
import ctypes
import hashlib
import importlib.util
import json
import os
import re
import statistics
import sys
import time
import traceback
import weakref
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _numpy_or_venv():
    """A driver run by hand (`python3 driver.py`) with an interpreter that lacks NumPy runs
    again under the virtual environment `make` made (build/venv), once; else a clear error."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    venv = Path(os.environ.get("TUT_BUILD", REPO / "build")) / "venv" / "bin" / "python"
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    if venv.exists() and script and not os.environ.get("TUT_VENV_REEXEC"):
        os.environ["TUT_VENV_REEXEC"] = "1"
        os.execv(str(venv), [str(venv)] + sys.argv)
    raise ImportError(f"NumPy is not installed for {sys.executable}: run `make` once from the "
                      f"repository root (it makes build/venv with NumPy, which drivers then "
                      f"use by themselves), or install NumPy for this interpreter")


_numpy_or_venv()
import numpy as np  # noqa: E402

if os.environ.get("TUT_ISOLATE") == "1":   # issue 26: NumPy's memory shared with the worker,
    sys.path.insert(0, str(Path(__file__).resolve().parent))   # before any array is made
    import tut_remote  # noqa: E402
    tut_remote.install()

TUT_ERR_TODO = -1   # same values as common/tut_check.h
TUT_ERR_ARG = -2
TUT_ERR_LIBRARY = -100   # this and below: a chapter's own errors (LibraryError)
EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77

# Lazy module loading makes the first launch of each kernel load code onto the device, which
# shows up as device memory "leaked" by whichever test ran first. Load everything up front.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

# Errors meaning "there is no usable GPU here" rather than "the code is wrong".
NO_GPU_ERRORS = ("cudaErrorNoDevice", "cudaErrorInsufficientDriver")

# Byte written over every output and guard zone before a test runs. As float32 it reads
# 3.39e38, as int32 2139062143: no correct kernel produces either by accident.
POISON_BYTE = 0x7F


# ---- exceptions ----------------------------------------------------------------------------
class CudaError(RuntimeError):
    """A CUDA call failed. .code is the cudaError_t value, .name its name
    (cudaErrorInvalidValue...), .where the C file:line, .expr the failing expression."""

    def __init__(self, code, name, message, where="", expr="", diagnostic=""):
        text = f"{name} ({code}): {message}"
        if diagnostic:
            text += "\n" + diagnostic.rstrip()
        super().__init__(text)
        self.code, self.name, self.where, self.expr = code, name, where, expr
        self.diagnostic = diagnostic


class ExerciseNotDone(NotImplementedError):
    """The library reached a TODO(student) hole. .where is its file:line."""

    def __init__(self, where):
        super().__init__(f"exercise not done yet: TODO(student) at {where}")
        self.where = where


class LibraryError(RuntimeError):
    """A chapter's own C code refused something (a pool's double free, a foreign pointer...):
    not a CUDA error. .code (<= -100) and .name ("TPOOL_ERR_DOUBLE_FREE") say which, .where the
    C file:line; the message is the C code's sentence."""

    def __init__(self, code, name, message, where=""):
        super().__init__(f"{name} ({code}): {message}")
        self.code, self.name, self.where = code, name, where


class Skip(Exception):
    """This test cannot run here (a capability the device lacks): exit code 77."""


# ---- where things are ----------------------------------------------------------------------
def build_dir():
    return Path(os.environ.get("TUT_BUILD", REPO / "build"))


def backend():
    """gpu or cpu: TUT_BACKEND if set (make sets it), else the backend make last built."""
    chosen = os.environ.get("TUT_BACKEND")
    if not chosen:
        marker = build_dir() / "BACKEND"
        chosen = marker.read_text().strip() if marker.exists() else "gpu"
    if chosen not in ("gpu", "cpu"):
        raise ValueError(f"TUT_BACKEND must be gpu or cpu, not {chosen!r}")
    return chosen


def tree():
    """chapters (the exercises, default) or solutions: TUT_TREE."""
    chosen = os.environ.get("TUT_TREE", "chapters")
    if chosen not in ("chapters", "solutions"):
        raise ValueError(f"TUT_TREE must be chapters or solutions, not {chosen!r}")
    return chosen


def library_path(chapter, which_tree=None, which_backend=None):
    return (build_dir() / (which_backend or backend()) / (which_tree or tree())
            / f"lib{chapter}.so")


# ---- loading and binding -------------------------------------------------------------------
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_float_p = ctypes.POINTER(ctypes.c_float)


class Library:
    """One chapter's shared library, with the common helpers bound once."""

    def __init__(self, path, cdll=None):
        self.path = Path(path)
        self.cdll = ctypes.CDLL(str(self.path)) if cdll is None else cdll
        for name in ("tut_last_error_message", "tut_last_error_name", "tut_last_error_file",
                     "tut_last_error_expr", "tut_backend", "tut_error_name"):
            getattr(self.cdll, name).restype = ctypes.c_char_p
        self.cdll.tut_error_name.argtypes = [ctypes.c_int]
        for name in ("tut_last_error_code", "tut_last_error_line", "tut_get_last_error"):
            getattr(self.cdll, name).restype = ctypes.c_int
        # The emulator records what it saw (kernel, block, thread, allocation) here.
        self._diag = getattr(self.cdll, "cuemuLastDiagnostic", None)
        self._clear_diag = getattr(self.cdll, "cuemuClearDiagnostic", None)
        if self._diag is not None:
            self._diag.restype = ctypes.c_char_p
        self.backend = self.cdll.tut_backend().decode()

        self.device_count_raw = self.bind("tut_device_count", [ctypes.POINTER(ctypes.c_int)])
        self._mem_info = self.bind("tut_mem_info", [c_size_t_p, c_size_t_p])
        self.malloc_raw = self.bind("tut_malloc", [ctypes.POINTER(ctypes.c_void_p),
                                                   ctypes.c_size_t])
        self.free_raw = self.bind("tut_free", [ctypes.c_void_p])
        self.malloc_managed_raw = self.bind("tut_malloc_managed",
                                            [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t])
        self.htod = self.bind("tut_memcpy_htod", [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_size_t])
        self.dtoh = self.bind("tut_memcpy_dtoh", [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_size_t])
        self.memset = self.bind("tut_memset", [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t])
        self.synchronize = self.bind("tut_synchronize", [])
        self._d2d = self.bind("tut_bench_d2d_copy", [ctypes.c_size_t, ctypes.c_int, c_float_p])
        # The emulator's own functions (CPU backend only; None on a GPU build).
        # int cuemuNoAccess(void *p, size_t n, void *buf, size_t buf_n, int on)
        self.emu_no_access = getattr(self.cdll, "cuemuNoAccess", None)
        if self.emu_no_access is not None:
            self.emu_no_access.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                           ctypes.c_size_t, ctypes.c_int]
            self.emu_no_access.restype = ctypes.c_int
        # int cuemuStreamLog(long long *stream_ids, int *kinds, int max)
        # void cuemuStreamLogClear(void)
        self.emu_stream_log = getattr(self.cdll, "cuemuStreamLog", None)
        if self.emu_stream_log is not None:
            self.emu_stream_log.argtypes = [ctypes.POINTER(ctypes.c_longlong),
                                            ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            self.emu_stream_log.restype = ctypes.c_int
            self.emu_stream_log_clear = self.cdll.cuemuStreamLogClear
            self.emu_stream_log_clear.argtypes, self.emu_stream_log_clear.restype = [], None

    def bind(self, name, argtypes, restype=ctypes.c_int, status=True):
        """Declare the C function `name` once. With status=True it returns an int status, and
        one that is not 0 raises CudaError or ExerciseNotDone; status=False returns a value."""
        fn = getattr(self.cdll, name)
        fn.argtypes, fn.restype = argtypes, restype
        if status:
            fn.errcheck = self._errcheck
        return fn

    def _errcheck(self, status, func, args):
        if status == 0:
            return status
        raise self.error(status)

    def diagnostic(self):
        if self._diag is None:
            return ""
        text = (self._diag() or b"").decode(errors="replace")
        self._clear_diag()
        return text

    def error(self, status):
        """The exception for a non-zero status, from the record the C side left."""
        where = f"{self.cdll.tut_last_error_file().decode()}:{self.cdll.tut_last_error_line()}"
        if status == TUT_ERR_TODO:
            return ExerciseNotDone(_relative(where))
        name = self.cdll.tut_last_error_name().decode()
        message = self.cdll.tut_last_error_message().decode()
        expr = self.cdll.tut_last_error_expr().decode()
        if status == TUT_ERR_ARG:
            return ValueError(f"the C code refused an argument: {message}")
        if status <= TUT_ERR_LIBRARY:
            return LibraryError(status, name, message, _relative(where))
        return CudaError(status, name, message, _relative(where), expr, self.diagnostic())

    def error_name(self, code):
        return self.cdll.tut_error_name(code).decode()

    # -- conveniences over the common helpers --
    def device_count(self):
        n = ctypes.c_int(0)
        self.device_count_raw(ctypes.byref(n))
        return n.value

    def mem_info(self):
        """(free, total) device memory in bytes, from cudaMemGetInfo."""
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        self._mem_info(ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def mem_used(self):
        free, total = self.mem_info()
        return total - free

    def clear_last_error(self):
        """Consume a launch error the C code left in the runtime (returns its code)."""
        return self.cdll.tut_get_last_error()


def _relative(where):
    """file:line relative to the repository (make compiles from its root, so a relative
    __FILE__ is relative to REPO, whatever directory Python runs in)."""
    try:
        path, line = where.rsplit(":", 1)
        full = Path(path) if Path(path).is_absolute() else REPO / path
        return f"{full.resolve().relative_to(REPO)}:{line}"
    except ValueError:
        return where


_loaded = {}


def load_chapter(chapter, which_tree=None, which_backend=None):
    """The chapter's library (loaded once per process). Nothing is loaded at import time."""
    path = library_path(chapter, which_tree, which_backend)
    if path not in _loaded:
        if not path.exists():
            raise FileNotFoundError(
                f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} does not "
                f"exist: run `make BACKEND={backend()}` first (if it did not compile, the "
                f"compiler's errors are above)")
        if os.environ.get("TUT_ISOLATE") == "1":   # issue 26: the library in a worker process
            try:
                _loaded[path] = Library(path, tut_remote.RemoteCDLL(path, which_backend or backend()))
            except CudaError as e:   # its process died as it loaded (a constructor's exit()...)
                raise FileNotFoundError(f"{path} could not be loaded: {e}") from e
        else:
            _loaded[path] = Library(path)
    return _loaded[path]


# ---- argument checks: before any CUDA call -------------------------------------------------
def check_array(x, dtype, name="array", ndim=None, shape=None, writable=False):
    """Refuse what ctypes would pass silently wrong: another dtype, another shape, a strided
    view (a slice or a transpose: its elements are not where C expects them)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, not {type(x).__name__}")
    if x.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype).name}, not {x.dtype.name} "
                        f"(convert with {name}.astype(np.{np.dtype(dtype).name}))")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), not {x.ndim} (shape {x.shape})")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, not {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} is not C-contiguous (a slice or a transpose?): "
                         f"pass np.ascontiguousarray({name})")
    if writable and not x.flags.writeable:
        raise ValueError(f"{name} is read-only, but the C code writes into it")
    return x


def check_count(n, name="n", maximum=2**31 - 1, minimum=0):
    """A size or count: an integer in [minimum, maximum] (C int by default)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {type(n).__name__}")
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    if n > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {n}")
    return int(n)


def ptr(x):
    """The address of a checked NumPy array's data, for a c_void_p argument."""
    return ctypes.c_void_p(x.ctypes.data)


# ---- device memory owned from Python ---------------------------------------------------------
# ---- owners of C resources: each released exactly once ----------------------------------------
class Owner:
    """Base of the Python objects that own one C resource (a handle, a registration, a block).
    It is released exactly once: by the owner's own method (free(), close(), unregister()), at
    the end of a `with` block, or, the safety net rather than the plan, by the garbage
    collector. weakref.finalize, unlike __del__, runs at most once and also at interpreter exit.
    A subclass calls _own() with the release function and its arguments (not a bound method of
    self: that would keep self alive forever)."""
    kind = "object"   # its name in messages

    def _own(self, release, *args):
        self._finalizer = weakref.finalize(self, release, *args)

    @property
    def alive(self):
        return self._finalizer.alive

    def _release_once(self, verb):
        """An explicit release (free(), unregister()): a second one is the caller's bug."""
        if not self._finalizer.alive:
            raise ValueError(f"{self.kind} {verb} twice")
        self._finalizer()

    def close(self):
        """Release now if not done yet; a second close() does nothing."""
        if self._finalizer.alive:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Handle(Owner):
    """An opaque C handle (a stream, a pool...) with a destroy function; a dead handle never
    reaches C: _live(what) refuses it with ValueError."""
    kind = "handle"

    def _own_handle(self, handle, destroy):
        self.handle = handle
        self._own(destroy, handle)

    def _live(self, what):
        if not self._finalizer.alive:
            raise ValueError(f"{self.kind} used after close(): cannot {what}")
        return self.handle


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
        whole = np.empty(self.nbytes + 2 * self.guard, dtype=np.uint8)
        self.lib.dtoh(ptr(whole), self._base, whole.nbytes)
        before = np.flatnonzero(whole[:self.guard] != POISON_BYTE)
        after = np.flatnonzero(whole[self.guard + self.nbytes:] != POISON_BYTE)
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


# ---- comparing results -----------------------------------------------------------------------
def _format_index(flat, shape):
    if len(shape) > 1:
        return str(tuple(int(v) for v in np.unravel_index(flat, shape)))
    return f"[{flat}]"


def _poison_value(dtype):
    return np.frombuffer(bytes([POISON_BYTE]) * np.dtype(dtype).itemsize, dtype=dtype)[0]


def assert_close(got, want, rtol=1e-5, atol=1e-6, name="result", show=5):
    """got (any float dtype) against a float64 reference: |got - want| <= atol + rtol * |want|."""
    got_arr = np.asarray(got)
    if got_arr.shape != np.shape(want):
        raise AssertionError(f"{name}: shape {got_arr.shape}, expected {np.shape(want)}")
    g, w = got_arr.astype(np.float64), np.asarray(want, dtype=np.float64)
    bad = ~(np.abs(g - w) <= atol + rtol * np.abs(w))  # NaN counts as bad
    if bad.any():
        _raise_mismatch(name, got_arr, w, bad, f"rtol={rtol}, atol={atol}", show)


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
    """fn() must raise CudaError `name`, the real CUDA error. With clear=True the runtime's last
    error is consumed afterwards, as a program that handled the error would do, so no later
    launch check trips over it; clear=False leaves that to the code under test."""
    e = expect_raises(CudaError, fn, f"{what} (want {name})")
    if e.name != name:
        raise AssertionError(f"{what}: got {e.name}, want {name}") from e
    if clear:
        lib.clear_last_error()
    return e


@contextlib.contextmanager
def device_ballast(lib, leave_free):
    """Fill the device with one raw allocation (nothing written) so that only about
    `leave_free` bytes stay free: how tests make "more than the device has" happen at a size
    the machine can hold in host memory. Yields the free bytes cudaMemGetInfo then reports;
    raises Skip when the device cannot be filled (another process holds memory)."""
    free, _ = lib.mem_info()
    size, handle = free - leave_free, ctypes.c_void_p()
    while size > 0:
        try:
            lib.malloc_raw(ctypes.byref(handle), size)
            break
        except CudaError as e:   # another process took some meanwhile: ask for less
            if e.name != "cudaErrorMemoryAllocation":
                raise
            lib.clear_last_error()
            size -= 64 << 20
    try:
        now_free, _ = lib.mem_info()
        if now_free > 4 * leave_free:
            raise Skip(f"could not fill the device: {now_free} bytes still free")
        yield now_free
    finally:
        if handle.value:
            lib.free_raw(handle.value)


def stream_log(lib, call):
    """CPU backend only: call(), then [(stream, kind)] for every operation it issued, as the
    emulator logs them (cuemuStreamLog; stream 0: the legacy default stream, -1: per-thread,
    1, 2, ...: created streams; kind 1 kernel, 2 copy, 3 set, 4 event record, 5 host function,
    6 cudaMallocAsync, 7 cudaFreeAsync, 8 cudaStreamWaitEvent, 9 cudaMemPrefetchAsync)."""
    log = lib.emu_stream_log
    lib.emu_stream_log_clear()
    call()
    count = log(None, None, 0)
    ids = (ctypes.c_longlong * count)()
    kinds = (ctypes.c_int * count)()
    log(ids, kinds, count)
    return [(ids[i], kinds[i]) for i in range(count)]


def random_f32(rng, *shape, scale=3.0, offset=0.5):
    """Random float32 inputs, asymmetric and never all zero, so that a kernel that swaps two
    operands or forgets an index gives a visibly wrong answer."""
    return (rng.standard_normal(shape) * scale + offset).astype(np.float32)


def poisoned(shape, dtype):
    """A host array filled with the poison pattern, for outputs the C code must overwrite."""
    out = np.empty(shape, dtype=dtype)
    out.view(np.uint8)[...] = POISON_BYTE
    return out


# ---- benchmarks ------------------------------------------------------------------------------
def plot_gbps(name, sizes, series, xlabel, title, backend):
    """A GB/s-against-size plot, build/plots/<name>.png, where matplotlib is installed (it is
    not a requirement: the table printed beside it is the result). series: {label: [GB/s per
    size]}."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (matplotlib not installed: no plot, the table above is the result)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, values in series.items():
        ax.plot(sizes, values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s")
    ax.set_title(f"{title} ({backend} backend"
                 + (": emulator, not a GPU)" if backend == "cpu" else ")"))
    ax.legend()
    ax.grid(True, alpha=0.3)
    out = build_dir() / "plots" / f"{name}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"  plot: {out}")


def median_ms(timed, reps=20):
    """timed(reps, times_ptr) is a C function that warms up and then times `reps` runs with
    CUDA events, one by one. Returns the median in milliseconds (robust to a noisy neighbour)."""
    times = np.zeros(reps, dtype=np.float32)
    timed(reps, times.ctypes.data_as(c_float_p))
    return float(statistics.median(times.tolist()))


class Bench:
    """Prints one row per measurement: the figure, and its ratio to a ceiling measured in the
    same run on the same device."""

    def __init__(self, lib, title):
        self.lib, self.rows, self.title = lib, [], title
        print(f"== {title} ({_device_words(lib)}) ==")
        if lib.backend == "cpu":
            print("NOTE: this is the CPU emulator: the timings below say nothing about a GPU. "
                  "Run --bench on an NVIDIA GPU for real figures.")

    def d2d_copy_gbps(self, nbytes=1 << 30, reps=20):
        """The memory-bound ceiling: device-to-device cudaMemcpy, bytes read + written."""
        ms = median_ms(lambda r, t: self.lib._d2d(nbytes, r, t), reps)
        gbps = 2 * nbytes / (ms * 1e-3) / 1e9
        self.row("device-to-device cudaMemcpy (ceiling)", gbps, "GB/s")
        return gbps

    def row(self, what, value, unit, ceiling=None):
        ratio = f"{value / ceiling:6.1%} of ceiling" if ceiling else ""
        print(f"  {what:<52} {value:10.2f} {unit:<8} {ratio}")
        self.rows.append({"what": what, "value": value, "unit": unit,
                          "ratio": value / ceiling if ceiling else None})
        self._record(self.rows[-1])

    def figure(self, what, value, unit, digits=2):
        """A figure that is not measured against a ceiling (a ratio of two rows, a time):
        printed on a line of its own, and recorded like a row."""
        print(f"  {what}: {value:.{digits}f}{unit if unit in ('x', '%') else ' ' + unit}")
        self.rows.append({"what": what, "value": value, "unit": unit, "ratio": None})
        self._record(self.rows[-1])

    def add(self, what, value, unit, ratio=None):
        """A figure the caller prints itself (a cell of a table): kept and recorded like a row."""
        self.rows.append({"what": what, "value": value, "unit": unit, "ratio": ratio})
        self._record(self.rows[-1])

    def _record(self, row):
        """With TUT_RECORD=FILE (make bench RECORD=1), append the figure to FILE, a JSON run
        that tools/figures.py merges into the committed record (docs/figures/)."""
        path = os.environ.get("TUT_RECORD")
        if not path:
            return
        path = Path(path)
        run = json.loads(path.read_text()) if path.exists() else {
            "backend": self.lib.backend, "figures": []}
        run["figures"].append({"chapter": self.title[:2], "what": row["what"],
                               "value": round(float(row["value"]), 4), "unit": row["unit"],
                               "ratio": None if row["ratio"] is None
                               else round(float(row["ratio"]), 5)})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run, indent=1))


def _device_words(lib):
    if lib.backend == "cpu":
        return "cpu backend: emulator"
    return f"gpu backend, {lib.device_count()} device(s)"


# ---- the test harness ------------------------------------------------------------------------
def under_sanitizer():
    """True under compute-sanitizer (make sanitize sets TUT_SANITIZER). Its tools allocate
    device memory of their own, which cudaMemGetInfo counts, so the harness's leak check would
    blame tests for it; memcheck's --leak-check full judges leaks instead, by allocation."""
    return bool(os.environ.get("TUT_SANITIZER"))



def _first_failure(e):
    """The failure that started it all. After a fault inside a kernel every later CUDA call
    fails too, so the `with` blocks that free buffers on the way out raise again; Python keeps
    the earlier exception as __context__. Report the first one: it names the culprit (and
    carries the emulator's diagnostic)."""
    first = e
    while e.__context__ is not None:
        e = e.__context__
        if isinstance(e, (CudaError, LibraryError, AssertionError, ExerciseNotDone, Skip)):
            first = e
    return first


class Context:
    """What a test function gets: the library, a seeded generator, and the sizes to try."""

    def __init__(self, lib, seed, chapter):
        self.lib, self.seed, self.chapter = lib, seed, chapter
        self.rng = np.random.default_rng(seed)
        self.backend = lib.backend
        # The large sizes run on a GPU only: the emulator is slow, and so is every kernel
        # under compute-sanitizer, which checks each access (memory errors show at any size;
        # what only a large size finds, an overflowing index, is tested without it).
        self.large = self.backend == "gpu" and not under_sanitizer()

    def sizes(self, block=256, large=1 << 24):
        """Sizes that catch the usual indexing bugs: 1, one warp -1/0/+1, one block + 1,
        a prime near 10^6, and (on a GPU, not under the sanitizer: ctx.large) a large one."""
        out = [1, 31, 32, 33, block + 1, 999_983]
        if self.large:
            out.append(large + 7)
        return out


class Chapter:
    """A chapter's tests. Exercises are numbered ("01.3"); other checks are named ("01.errors")."""

    def __init__(self, number, name):
        self.number, self.name, self.tests = f"{int(number):02d}", name, []

    def exercise(self, num, title):
        return self._register(f"{self.number}.{num}", title, True)

    def check(self, key, title):
        return self._register(f"{self.number}.{key}", title, False)

    def _register(self, test_id, title, is_exercise, **extra):
        def wrap(fn):
            if any(t["id"] == test_id for t in self.tests):
                raise ValueError(f"test id {test_id} registered twice")
            self.tests.append({"id": test_id, "title": title, "fn": fn,
                               "exercise": is_exercise, **extra})
            return fn
        return wrap

    def hidden(self, exercise_id, key, title, points=1):
        """A hidden test (an instructor's, loaded from TUT_HIDDEN): part of exercise
        `exercise_id` ("01.2"), with id "01.2+key", worth `points` in `make grade`."""
        if not any(t["id"] == exercise_id and t["exercise"] for t in self.tests):
            raise ValueError(f"hidden test {key!r}: no exercise {exercise_id} in this chapter")
        if not re.fullmatch(r"[A-Za-z0-9-]+", key):
            raise ValueError(f"hidden test key {key!r}: use letters, digits and '-' only")
        return self._register(f"{exercise_id}+{key}", title, True,
                              part_of=exercise_id, points=check_count(points, "points"))

    def load_hidden(self, directory=None):
        """Register the hidden tests in TUT_HIDDEN (make grade HIDDEN=dir): every NN*.py and
        NN*/*.py there for this chapter NN, each with a function register(chapter, driver)
        that adds tests with chapter.hidden(...); driver is the chapter's driver module."""
        directory = directory or os.environ.get("TUT_HIDDEN")
        if not directory:
            return
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"TUT_HIDDEN={directory} is not a directory")
        driver = sys.modules.get("__main__")
        files = sorted(root.glob(f"{self.number}*.py")) + sorted(root.glob(f"{self.number}*/*.py"))
        for f in files:
            name = "tut_hidden_" + hashlib.sha1(str(f.resolve()).encode()).hexdigest()[:12]
            spec = importlib.util.spec_from_file_location(name, f)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if not hasattr(module, "register"):
                raise ValueError(f"{f}: a hidden test file needs register(chapter, driver)")
            module.register(self, driver)

    # -- running --
    def untouched(self, test):
        """file:line of a TODO(student) of this test's exercise whose stub is still exactly
        what tools/exercises.py generated (chapters/NN_x/.stubs.json), or None; all=True
        when every region of the exercise is untouched. Returns (where, all)."""
        ex_id = test.get("part_of") or test["id"]
        chapter_dir = REPO / "chapters" / self.name
        try:
            regions = json.loads((chapter_dir / ".stubs.json").read_text())["exercises"][
                ex_id]["regions"]
        except (OSError, ValueError, KeyError):
            return None, False
        marker, first, count = f"TODO(student) {ex_id}:", None, 0
        for r in regions:
            try:
                lines = (chapter_dir / r["file"]).read_text().splitlines(keepends=True)
            except OSError:
                continue
            for i, line in enumerate(lines):
                start = i - r["todo_line"]
                if marker in line and start >= 0 and hashlib.sha256(
                        "".join(lines[start:start + r["lines"]]).encode()).hexdigest() == r["sha256"]:
                    first = first or f"chapters/{self.name}/{r['file']}:{i + 1}"
                    count += 1
                    break
        return first, bool(regions) and count == len(regions)

    def todo_location(self, test_id):
        """file:line of `TODO(student) <id>` in the exercise sources, if still there."""
        # "01.2-int-max" is another test of exercise 01.2: its TODO is the exercise's
        pattern = re.compile(rf"TODO\(student\) {re.escape(test_id.split('-')[0])}\b")
        for src in sorted((REPO / "chapters" / self.name).glob("*.cu")):
            for lineno, line in enumerate(src.read_text().splitlines(), 1):
                if pattern.search(line):
                    return f"{src.relative_to(REPO)}:{lineno}"
        return None

    def run_test(self, test, lib, seed, run_untouched=False):
        """One test's result. An exercise whose TODO(student) stubs are all untouched is not
        run: it is "NOT DONE" (shown as todo), with the TODO's file:line, never a FAIL whose
        numbers would look like the student's bug; run_untouched=True (maintainers checking
        that stubs fail) runs it anyway."""
        started = time.perf_counter()
        check_todo = test["exercise"] and tree() == "chapters" and not run_untouched
        where, untouched_all = self.untouched(test) if check_todo else (None, False)
        if untouched_all:
            return self._result(test, lib, seed, started, "NOT DONE",
                                f"exercise not done yet: TODO(student) at {where}", todo=where)
        ctx = Context(lib, seed, self)
        status, message = "PASS", ""
        try:
            used_before = lib.mem_used()
            test["fn"](ctx)
            lib.synchronize()
            leaked = lib.mem_used() - used_before
            if leaked > 0 and not under_sanitizer():
                status, message = "FAIL", (f"device memory leak: {leaked} bytes still in use "
                                           f"after the test (every cudaMalloc needs its cudaFree, "
                                           f"on error paths too)")
        except Exception as e:
            root = _first_failure(e)
            if isinstance(root, ExerciseNotDone):
                status, message = "NOT DONE", str(root)
            elif isinstance(root, Skip):
                status, message = "SKIP", str(root)
            elif isinstance(root, (AssertionError, CudaError, LibraryError)):
                status, message = "FAIL", f"{type(root).__name__}: {root}"
            else:  # a bug in the test or the driver: show everything
                status, message = "ERROR", "".join(traceback.format_exception(e)).rstrip()
        if status in ("FAIL", "ERROR") and where:
            # part of the exercise is still the stub: that, not the numbers, is the news
            return self._result(test, lib, seed, started, "NOT DONE",
                                f"exercise not finished: TODO(student) at {where} is still "
                                f"untouched", todo=where)
        if status == "FAIL" and test["exercise"] and tree() == "chapters":
            ex_id = test.get("part_of") or test["id"]
            where = self.todo_location(ex_id)
            if where:
                message += f"\n  hint: the exercise is at {where} (TODO(student) {ex_id})"
        return self._result(test, lib, seed, started, status, message)

    def _result(self, test, lib, seed, started, status, message, todo=None):
        r = {"id": test["id"], "title": test["title"], "exercise": test["exercise"],
             "status": status, "message": message, "seed": seed,
             "seconds": round(time.perf_counter() - started, 3),
             "backend": lib.backend, "tree": tree(),
             "order": os.environ.get("CUEMU_ORDER", "forward") if lib.backend == "cpu" else ""}
        if todo:
            r["todo"] = todo
        if test.get("part_of"):
            r.update(part_of=test["part_of"], points=test["points"], hidden=True)
        return r

    def main(self, bench=None, demo=None, warm_up=None, argv=None):
        """Parse the command line and run. warm_up(lib), if given, runs once before the tests:
        for what CUDA allocates on the device the first time a process uses it (cuBLAS's
        kernels, a stream's resources), which the leak check would otherwise blame on the first
        test that happens to use it."""
        p = argparse.ArgumentParser(
            description=f"Chapter {self.number} {self.name}: run, check or benchmark.",
            epilog="Backend and tree come from TUT_BACKEND (gpu|cpu) and TUT_TREE "
                   "(chapters|solutions); `make check` sets both.")
        p.add_argument("--check", action="store_true", help="run the tests (default: all)")
        p.add_argument("--only", metavar="ID[,ID]", help="only these test ids, e.g. 01.2")
        p.add_argument("--list", action="store_true", help="print the test ids and exit")
        p.add_argument("--describe", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--bench", action="store_true", help="measure, next to the ceilings")
        p.add_argument("--seed", type=int, help="seed for the random inputs (default: fresh)")
        p.add_argument("--json", metavar="FILE", help="write the results as JSON (graders)")
        p.add_argument("--expect-fail", action="store_true",
                       help="maintainers: pass only if every exercise FAILS (unsolved stubs)")
        args = p.parse_args(argv)
        try:
            self.load_hidden()
        except Exception:   # the instructor's file: show everything
            print("ERROR: could not load the hidden tests:\n" + traceback.format_exc(),
                  file=sys.stderr)
            return EXIT_FAIL
        if args.list:
            for t in self.tests:
                print(t["id"])
            return EXIT_PASS
        if args.describe:   # for tools/grade.py
            print(json.dumps([{"id": t["id"], "title": t["title"], "exercise": t["exercise"],
                               "part_of": t.get("part_of"), "points": t.get("points")}
                              for t in self.tests]))
            return EXIT_PASS
        try:
            lib = load_chapter(self.name)
        except FileNotFoundError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            self._write_unrun(args, "ERROR", str(e), backend())   # graders see why, per test
            return EXIT_FAIL
        skip = self._cannot_run(lib)
        if skip:
            print(f"SKIP: {skip}")
            self._write_unrun(args, "SKIP", skip, lib.backend)
            return EXIT_SKIP
        if warm_up is not None and not args.bench:
            warm_up(lib)
        if args.bench:
            if bench is None:
                print("this chapter has no benchmark")
                return EXIT_PASS
            bench(lib)
            return EXIT_PASS
        if demo is not None and not (args.check or args.only or args.expect_fail):
            demo(lib)
            return EXIT_PASS
        return self._check(lib, args)

    def _cannot_run(self, lib):
        try:
            if lib.device_count() > 0:
                return ""
            return "no CUDA device visible (cudaGetDeviceCount() = 0)"
        except CudaError as e:
            if e.name in NO_GPU_ERRORS:
                return (f"no usable GPU here ({e.name}); the cpu backend runs everything: "
                        f"make check BACKEND=cpu")
            raise

    def _selected(self, args):
        wanted = set(args.only.split(",")) if args.only else None
        return [t for t in self.tests if wanted is None or t["id"] in wanted]

    def _write_unrun(self, args, status, message, which_backend):
        """Results for tests that could not run at all, when --json asks for them."""
        if args.json and not args.bench:
            rows = []
            for t in self._selected(args):
                rows.append({"id": t["id"], "title": t["title"], "exercise": t["exercise"],
                             "status": status, "message": message, "seed": None,
                             "seconds": 0.0, "backend": which_backend, "tree": tree(),
                             "order": ""})
                if t.get("part_of"):
                    rows[-1].update(part_of=t["part_of"], points=t["points"], hidden=True)
            self._write_json(args.json, rows)

    @staticmethod
    def _write_json(path, results):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(results, indent=1))

    def _check(self, lib, args):
        tests = self._selected(args)
        if args.only and len(tests) != len(set(args.only.split(","))):
            known = ", ".join(t["id"] for t in self.tests)
            print(f"ERROR: unknown test id in {args.only} (known: {known})", file=sys.stderr)
            return EXIT_FAIL
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
        print(f"chapter {self.number} {self.name}: backend={lib.backend} tree={tree()} "
              f"seed={seed} (rerun with --seed {seed})")
        results = []
        for t in tests:
            r = self.run_test(t, lib, seed, run_untouched=args.expect_fail)
            results.append(r)
            print(f"[{r['status']:>8}] {r['id']:<10} {r['title']}  ({r['seconds']:.2f} s)")
            if r["message"]:
                print("           " + r["message"].replace("\n", "\n           "))
        if args.expect_fail:   # a stub's exercise is meant to fail: record that for graders
            for r in results:   # (a test that could not run here is not expected to fail)
                r["expected_to_fail"] = r["exercise"] and r["status"] != "SKIP"
        if args.json:
            self._write_json(args.json, results)
        return self._exit_code(results, args.expect_fail)

    @staticmethod
    def _exit_code(results, expect_fail):
        if expect_fail:
            # Unsolved stubs: every exercise must fail cleanly (a test that passes on a stub
            # asserts nothing); every non-exercise check must still pass.
            # A test that cannot run here (SKIP) asserts nothing either way: it is not a pass.
            ok = all((r["status"] in ("FAIL", "NOT DONE", "SKIP")) if r["exercise"]
                     else r["status"] in ("PASS", "SKIP") for r in results)
            print("stubs " + ("fail as they must" if ok else "DO NOT all fail: see above"))
            if ok and results and all(r["status"] == "SKIP" for r in results):
                return EXIT_SKIP
            return EXIT_PASS if ok else EXIT_FAIL
        if results and all(r["status"] == "SKIP" for r in results):
            return EXIT_SKIP
        return EXIT_PASS if all(r["status"] in ("PASS", "SKIP") for r in results) else EXIT_FAIL
