# SPDX-License-Identifier: MIT
"""Loading a chapter's shared library and declaring its C functions once (Library.bind)."""
import ctypes
import os
import re
from pathlib import Path

from .errors import (TUT_ERR_ARG, TUT_ERR_LIBRARY, TUT_ERR_NEWER_CUDA, TUT_ERR_TODO, CudaError,
                     ExerciseNotDone, LibraryError, NotBuilt, Skip)
from .paths import REPO, backend, library_path


c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_float_p = ctypes.POINTER(ctypes.c_float)


class Library:
    """One chapter's shared library, with the common helpers bound once."""

    def __init__(self, path, cdll=None):
        self.path = Path(path)
        # cdll: tut_remote.RemoteCDLL under TUT_ISOLATE=1 (the library runs in a worker process)
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
        # A signal in host C code: a report naming the .cu line, before faulthandler's stack.
        self.cdll.tut_install_crash_report()

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
                                                  ctypes.c_size_t], out=(0,))
        self.memset = self.bind("tut_memset", [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t],
                                out=(0,))
        self.synchronize = self.bind("tut_synchronize", [])
        self._d2d = self.bind("tut_bench_d2d_copy", [ctypes.c_size_t, ctypes.c_int, c_float_p])
        self._count_ne = self.bind("tut_count_ne_u32", [ctypes.c_void_p, ctypes.c_size_t,
                                                        ctypes.c_uint,
                                                        ctypes.POINTER(ctypes.c_ulonglong)])
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
            # int cuemuStreamLogDetail(int *details, int max)
            self.emu_stream_log_detail = self.cdll.cuemuStreamLogDetail
            self.emu_stream_log_detail.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            self.emu_stream_log_detail.restype = ctypes.c_int
        # void cuemuLiveObjects(int *streams, int *events)
        self._emu_live = getattr(self.cdll, "cuemuLiveObjects", None)
        if self._emu_live is not None:
            self._emu_live.argtypes = [ctypes.POINTER(ctypes.c_int)] * 2
            self._emu_live.restype = None

    def bind(self, name, argtypes, restype=ctypes.c_int, status=True, out=None):
        """Declare the C function `name` once. With status=True it returns an int status, and
        one that is not 0 raises CudaError or ExerciseNotDone; status=False returns a value.

        out: the argument positions (from 0) whose host memory the call writes. When the library
        runs in a worker process (TUT_ISOLATE=1, grading) only these come back into the driver's
        arrays, after the call, so a library cannot change an input the driver computes its
        reference from; a write to another argument fails the call. None: the arguments
        declared POINTER(T) (C out-parameters); a c_void_p or an ndpointer is read only."""
        fn = getattr(self.cdll, name)
        fn.argtypes, fn.restype = argtypes, restype
        if out is not None:
            out = tuple(out)
            bad = [i for i in out if not (isinstance(i, int) and 0 <= i < len(argtypes))]
            if bad:
                raise ValueError(f"{name}: out={out} names no argument of {len(argtypes)}")
        fn.out = out
        if status:
            fn.errcheck = self._errcheck
        return fn

    def count_ne_u32(self, ptr, n, word):
        """(how many of the n uint32 words at device address ptr are not word, the index of
        the first): counted on the device, nothing copied to the host (8 GiB in milliseconds
        on a GPU)."""
        out = (ctypes.c_ulonglong * 2)()
        self._count_ne(ctypes.c_void_p(getattr(ptr, "value", ptr)), n, word, out)
        return out[0], out[1]

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
        if status == TUT_ERR_NEWER_CUDA:
            # built with a CUDA 12.x that lacks the call (tut_cuda_compat.h): nothing to test
            return Skip(message)
        if status <= TUT_ERR_LIBRARY:
            return LibraryError(status, name, message, _relative(where))
        return CudaError(status, name, message, _relative(where), expr, self.diagnostic())

    def error_name(self, code):
        return self.cdll.tut_error_name(code).decode()

    def runtime_version(self):
        """CUDART_VERSION of the runtime the library was built with (13000: CUDA 13.0)."""
        return self.cdll.tut_runtime_version()

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

    def live_objects(self):
        """CPU backend only: (streams, events) created and not yet destroyed; None on a GPU,
        where CUDA has no such count."""
        if self._emu_live is None:
            return None
        s, e = ctypes.c_int(0), ctypes.c_int(0)
        self._emu_live(ctypes.byref(s), ctypes.byref(e))
        return s.value, e.value

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


def isolated():
    """True when the library runs in a worker process (TUT_ISOLATE=1, grading): what the
    emulator sees by page protection in the library's own process (a host read of managed
    memory a kernel will write) it cannot see of the checker's reads."""
    return os.environ.get("TUT_ISOLATE") == "1"


# gcc/clang "file:line:col: error: ...", nvcc "file(line): error: ..."
_COMPILER_ERROR = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?::(?P<line>\d+)(?::\d+)?|\((?P<pline>\d+)\))"
                             r":\s*(?:fatal\s+)?error\b:?\s*(?P<msg>.*)$")


# a goto (CUDA_CHECK's) that jumps over a declaration: clang and gcc name it in a note, nvcc in
# the error's own text
_BYPASSED = re.compile(r"^(?P<file>[^\s:()][^:()]*?):(?P<line>\d+)(?::\d+)?:\s*note:\s*"
                       r"(?:jump bypasses variable initialization|crosses initialization)"
                       r"|declared at line (?P<nline>\d+)(?: of \"(?P<nfile>[^\"]+)\")?")


def first_compiler_error(log):
    """'file:line: message' of the first error in a compiler's output, else its first line.
    A goto that jumps over a declaration is named by the declaration's line (the student's
    mistake), not by the CUDA_CHECK whose hidden goto the compiler complains of."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        m = _COMPILER_ERROR.match(line.strip())
        if m:
            where = _relative(f"{m['file']}:{m['line'] or m['pline']}")
            for later in lines[i + 1:i + 40]:
                if _COMPILER_ERROR.match(later.strip()):
                    break   # the next error: no note for this one
                b = _BYPASSED.search(later.strip())
                if b:
                    # nvcc 13 names the file only when it is another one than the error's
                    decl = _relative(f"{b['file'] or b['nfile'] or m['file']}:"
                                     f"{b['line'] or b['nline']}")
                    return (f"{decl}: a declaration with a value after a CUDA_CHECK: the "
                            f"CUDA_CHECK at line {where.rsplit(':', 1)[-1]} "
                            f"can `goto cleanup`, which would jump over it. Declare it before "
                            f"the function's first CUDA_CHECK (and assign it here), as the "
                            f"lesson's \"one cleanup path\" says ({m['msg'].strip()})")
            return f"{where}: {m['msg'].strip()}"
    lines = [line for line in log.splitlines() if line.strip()]
    return lines[0].strip() if lines else ""




def load_chapter(chapter, which_tree=None, which_backend=None):
    """The chapter's library (loaded once per process). Nothing is loaded at import time.
    Raises NotBuilt when its last build failed, FileNotFoundError when it was never built."""
    path = library_path(chapter, which_tree, which_backend)
    if path not in _loaded:
        # make writes the compiler's output of a failed build beside the library
        # (lib<chapter>.failed) and removes the library: never an older build than the file
        failed = path.with_suffix(".failed")
        if failed.exists():
            log_path = failed.relative_to(REPO) if failed.is_relative_to(REPO) else failed
            raise NotBuilt(path.name, first_compiler_error(failed.read_text(errors="replace")),
                           str(log_path))
        if not path.exists():
            raise FileNotFoundError(
                f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path} does not "
                f"exist: run `make BACKEND={backend()}` first (if it did not compile, the "
                f"compiler's errors are above)")
        if isolated():   # grading: the library in a worker process
            import tut_remote
            try:
                _loaded[path] = Library(path, tut_remote.RemoteCDLL(path, which_backend or backend()))
            except CudaError as e:   # its process died as it loaded (a constructor's exit()...)
                raise FileNotFoundError(f"{path} could not be loaded: {e}") from e
        else:
            _loaded[path] = Library(path)
    return _loaded[path]
