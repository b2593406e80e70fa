# SPDX-License-Identifier: MIT
"""tut_remote: a chapter's library in a worker process, driven from the checker (issues 26, 31).

With TUT_ISOLATE=1, tut.load_chapter() gives the driver a tut.Library whose `cdll` is a
RemoteCDLL: every C function the driver binds and calls runs in a worker process
(common/tut_worker.py), so the student's code never shares a process with the tests, the seed,
the hidden tests or the results. The drivers run unchanged:

- host memory (issue 31: nothing the checker decides from is memory the student's code can
  write): the checker's NumPy arrays are its own, private memory (common/tut_shm.c, NumPy's
  data allocator through PyDataMem_SetHandler, at addresses the worker keeps free); the worker
  has a memfd mapped at those addresses. A call's pointer arguments into the checker's memory
  (the whole NumPy array each lies in, and arrays a passed structure points to) are copied to
  the worker's copy before the call; after it, once every process of the worker is stopped,
  only the arguments Library.bind(out=...) declares come back (and those of earlier calls whose
  writes may still come: an async copy's destination, until freed or passed as an input); a
  write to any other fails the call, the checker's copy untouched. The emulator's allocations
  in the worker (pinned, managed, device) are the memfd's other half, at the same address in
  both, so a PinnedArray or ManagedArray viewed here is the memory the kernels write there:
  the checker reads it only while the worker is stopped, and computes no reference from it;
- ctypes objects passed by reference (ctypes.byref(c_int()), a c_void_p out-parameter,
  (c_longlong * n)(), a Structure, create_string_buffer) are copied in the same way, and back
  out when declared outputs (Library.bind's default: the POINTER(T) arguments); an address of
  this process's own memory elsewhere is refused (ValueError naming the function and the
  argument);
- the channel: two inherited pipes, JSON messages (tut_worker.py's docstring); nothing the
  worker sends is executed or unpickled, only parsed and checked;
- a worker that dies (a signal, abort(), exit()) or stops answering (TUT_WORKER_TIMEOUT, 300 s
  per call) fails the call with WorkerDied, a CudaError, naming the signal and the end of the
  worker's stderr; the next call starts a fresh worker;
- between calls every process of the worker (every descendant, one in a session of its own
  too: the sandbox or the worker is their child subreaper) is stopped (SIGSTOP), and a last
  look at the tree finds none running, so nothing of the student's runs while the checker
  copies outputs, computes and compares (TUT_WORKER_FREEZE=0: not). Where the worker runs as
  a user id of its own (TUT_WORKER_UID, the grader's sandbox) and this process is root, they
  are stopped all at once: a helper of this process's (_Signaller) sends kill(-1, SIGSTOP) as
  that user, one pass of the kernel's task list that no fork outruns; else by walking the
  tree, which a chain forking its successor every ~2 ms or faster can stay ahead of;
- TUT_WORKER_CPU (seconds) and TUT_WORKER_MEMORY (bytes): limits on the worker's processes
  as a whole (CPU time summed over them, private memory plus the shared region), checked
  every 0.1 s during a call;
- the worker's stdout and stderr are copied to the checker's fds 1 and 2 after each call.

The worker is started as shlex.split(TUT_WORKER_PREFIX) + [python, tut_worker.py, ...]: the
grader puts its sandbox command there (python: TUT_WORKER_PYTHON, else this interpreter). The
worker's environment is built from an allow-list (worker_environment). CPU backend only: CUDA's
pinned and managed memory cannot be mapped into a second process, so on BACKEND=gpu load
refuses with a clear message.
"""
import atexit
import bisect
import ctypes
import json
import os
import select
import shlex
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tut_worker  # noqa: E402  (map_region and the message format, shared with the worker)

MAX_REPLY = 1 << 20
HANDLER_NAME = b"tut_shm: host memory shared with the worker"
_CODES = {ctypes.c_int: "i", ctypes.c_uint: "I", ctypes.c_long: "l", ctypes.c_ulong: "L",
          ctypes.c_longlong: "q", ctypes.c_ulonglong: "Q", ctypes.c_short: "h",
          ctypes.c_ushort: "H", ctypes.c_byte: "b", ctypes.c_ubyte: "B", ctypes.c_bool: "?",
          ctypes.c_float: "f", ctypes.c_double: "d", ctypes.c_void_p: "P",
          ctypes.c_char_p: "z"}
_INTS = set("iIlLqQhHbB?")
_CArg = type(ctypes.byref(ctypes.c_int()))
_CDATA = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array, ctypes._Pointer)
_libc = ctypes.CDLL(None, use_errno=True)


_died_class = None


def _worker_died_class():
    """WorkerDied, a tut.CudaError: made on first use, since tut imports this module."""
    global _died_class, WorkerDied
    if _died_class is None:
        import tut

        class WorkerDied(tut.CudaError):
            """The worker process running the student's library died or stopped answering."""

            def __init__(self, what, detail=""):
                super().__init__(-200, "WorkerDied", what, diagnostic=detail)
        _died_class = WorkerDied
    return _died_class


class _Region:
    """[base, end): the addresses the two processes agree on. The checker's half
    [base, base + half) is this process's own private memory, NumPy's heap (tut_shm.c); the
    worker has the memfd's first half there, which this process sees at `alias` and fills with
    a call's arguments (stage) and reads its declared outputs from (take). The worker's half
    [base + half, end) (the emulator's pinned, managed and device memory) is the memfd's second
    half, at the same address in both, which a PinnedArray or ManagedArray views."""

    def __init__(self):
        gib = float(os.environ.get("TUT_SHM_GIB", "16"))
        self.size = int(gib * (1 << 30)) // (2 << 20) * (2 << 20)
        if self.size < (64 << 20):
            raise ValueError(f"TUT_SHM_GIB={gib}: the shared region needs at least 64 MiB")
        self.half = self.size // 2
        self.fd = os.memfd_create("tut-shared-host-memory", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        # ftruncate counts against RLIMIT_FSIZE, which a harness may have lowered to cap a
        # test's output (and a child started during a test inherits): lift it for this call
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        if soft != resource.RLIM_INFINITY and soft < self.size:
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        try:
            os.ftruncate(self.fd, self.size)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        import fcntl   # the worker may write the memory, never shrink or grow it under us
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.base = None
        # Far from where Linux puts programs, heaps and mmaps on x86-64 and arm64, in both
        # processes; MAP_FIXED_NOREPLACE makes sure nothing is there.
        errors = []
        for base in (0x2a0000000000, 0x1a0000000000, 0x0a0000000000, 0x3a0000000000):
            try:
                _mmap(base, self.half, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
            except OSError as e:
                errors.append(str(e))
                continue
            try:
                _mmap(base + self.half, self.size - self.half, _MAP_SHARED, self.fd, self.half)
            except OSError as e:
                _libc.munmap(ctypes.c_void_p(base), ctypes.c_size_t(self.half))
                errors.append(str(e))
                continue
            self.base = base
            break
        if self.base is None:
            raise OSError(f"TUT_ISOLATE=1: cannot map the shared host memory: {errors}")
        self.alias = _mmap(None, self.half, _MAP_SHARED, self.fd, 0)
        self.end = self.base + self.size
        so = _shm_library()
        if so.tut_shm_init(ctypes.c_void_p(self.base), ctypes.c_size_t(self.half), self.fd,
                           ctypes.c_longlong(0)) != 0:
            raise MemoryError("tut_shm_init failed")
        self.so = so

    def __contains__(self, address):
        return self.base <= address < self.end

    def mine(self, address):
        """In the checker's private half (what a call must copy)?"""
        return self.base <= address < self.base + self.half

    def block(self, address):
        """(start, size) of the live block holding a private address, else None."""
        start, size = ctypes.c_void_p(), ctypes.c_size_t()
        if not self.so.tut_shm_block(ctypes.c_void_p(address), ctypes.byref(start),
                                     ctypes.byref(size)):
            return None
        return start.value, size.value

    def stage(self, start, size):
        """The checker's bytes to the worker's copy."""
        ctypes.memmove(self.alias + (start - self.base), start, size)

    def take(self, start, size):
        """The worker's copy to the checker's bytes (only when the worker is stopped)."""
        ctypes.memmove(start, self.alias + (start - self.base), size)

    def same(self, start, size):
        return ctypes.string_at(start, size) == ctypes.string_at(self.alias + (start - self.base),
                                                                 size)

    def malloc(self, n):
        p = self.so.tut_shm_malloc(max(n, 1))
        if not p:
            raise MemoryError(f"the shared host memory is full ({n} bytes asked)")
        return p

    def watched(self):
        n = self.so.tut_shm_watched(None, 0)
        out = (ctypes.c_void_p * max(n, 1))()
        n = min(n, self.so.tut_shm_watched(out, n))
        return [out[i] for i in range(n)]


_MAP_SHARED, _MAP_PRIVATE, _MAP_ANONYMOUS = 0x01, 0x02, 0x20
_MAP_NORESERVE, _MAP_FIXED_NOREPLACE = 0x4000, 0x100000


def _mmap(address, size, flags, fd, offset):
    """mmap at exactly `address` (MAP_FIXED_NOREPLACE), or anywhere for None."""
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long]
    if address is not None:
        flags |= _MAP_FIXED_NOREPLACE
    got = _libc.mmap(address, size, 3, flags, fd, offset)
    if got in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"mmap at {address or 0:#x}: {os.strerror(err)}")
    if address is not None and got != address:   # before Linux 4.17: only a hint
        _libc.munmap(ctypes.c_void_p(got), ctypes.c_size_t(size))
        raise OSError(0, f"the kernel placed the mapping at {got:#x}, not at {address:#x}")
    return got


def _shm_library():
    build = Path(os.environ.get("TUT_BUILD", HERE.parent / "build"))
    for backend in ("cpu", "gpu"):
        path = build / backend / "common" / "libtut_shm.so"
        if path.exists():
            break
    else:
        raise FileNotFoundError(f"{build}/cpu/common/libtut_shm.so does not exist: run `make` "
                                f"first (TUT_ISOLATE=1 needs it)")
    so = ctypes.CDLL(str(path))
    so.tut_shm_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                ctypes.c_longlong]
    so.tut_shm_handler.restype = ctypes.c_void_p
    so.tut_shm_malloc.restype, so.tut_shm_malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    so.tut_shm_free.restype, so.tut_shm_free.argtypes = None, [ctypes.c_void_p]
    so.tut_shm_stats.restype = None
    so.tut_shm_stats.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
    so.tut_shm_block.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t)]
    so.tut_shm_watch.argtypes = [ctypes.c_void_p, ctypes.c_int]
    so.tut_shm_watched.restype = ctypes.c_size_t
    so.tut_shm_watched.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return so


_region = None


def install():
    """Map the shared region and make it NumPy's data allocator (once, at tut's import, before
    the driver makes any array). Also makes this process undumpable: a same-user worker can
    then neither ptrace it nor read its /proc/<pid>/environ, mem or maps."""
    global _region
    if _region is not None:
        return _region
    import numpy as np
    major, minor = (int(v) for v in np.__version__.split(".")[:2])
    if (major, minor) < (1, 22):
        raise RuntimeError(f"TUT_ISOLATE=1 needs NumPy 1.22 or newer (PyDataMem_SetHandler); "
                           f"this is NumPy {np.__version__}")
    _libc.prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE 0
    region = _Region()
    try:
        from numpy._core import _multiarray_umath as mu   # NumPy 2
    except ImportError:
        from numpy.core import _multiarray_umath as mu    # NumPy 1.22-1.26
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = mu._ARRAY_API
    table = ctypes.cast(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)),
                        ctypes.POINTER(ctypes.c_void_p))
    # PyArray_API[211] is PyArray_GetNDArrayCFeatureVersion, [304] PyDataMem_SetHandler, from
    # NumPy 1.22 (C API feature version 0xf) to 2.x (__multiarray_api.h).
    feature = ctypes.CFUNCTYPE(ctypes.c_uint)(table[211])()
    if feature < 0xF:
        raise RuntimeError(f"TUT_ISOLATE=1: NumPy's C API is version {feature:#x}, before "
                           f"PyDataMem_SetHandler (0xf, NumPy 1.22)")
    set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(table[304])
    region.name = ctypes.c_char_p(b"mem_handler")   # the capsule keeps the pointer: keep it alive
    handler = api.PyCapsule_New(region.so.tut_shm_handler(), region.name, None)
    set_handler(handler)
    region.handler = handler
    probe = np.empty(1000)
    if probe.ctypes.data not in region:
        raise RuntimeError("TUT_ISOLATE=1: NumPy did not take the shared allocator "
                           f"(NumPy {np.__version__}); run without TUT_ISOLATE")
    _region = region
    return region


def shm_stats():
    """(bytes in use, most ever) of the checker's half of the shared memory."""
    now, most = ctypes.c_size_t(), ctypes.c_size_t()
    _region.so.tut_shm_stats(ctypes.byref(now), ctypes.byref(most))
    return now.value, most.value


# ---- this process's own memory, for refusing addresses the worker cannot see -------------------
class _Maps:
    def __init__(self):
        self.starts, self.ends, self.when = [], [], 0.0

    def mine(self, address):
        for refresh in (False, True):
            if refresh:
                if time.monotonic() - self.when < 0.5:   # read at most twice a second
                    return False
                self._read()
            k = bisect.bisect_right(self.starts, address) - 1
            if k >= 0 and address < self.ends[k]:
                return True
        return False

    def _read(self):
        spans = []
        with open("/proc/self/maps") as f:
            for line in f:
                lo, hi = (int(v, 16) for v in line.split(None, 1)[0].split("-"))
                if not (_region and lo >= _region.base and hi <= _region.end):
                    spans.append((lo, hi))
        spans.sort()
        self.starts = [lo for lo, _ in spans]
        self.ends = [hi for _, hi in spans]
        self.when = time.monotonic()


_maps = _Maps()


# ---- the worker ------------------------------------------------------------------------------------
def _children(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return out


def _reap():
    """Orphans of workers that came here (this process is a child subreaper) and were
    killed: reaped, so they do not stay zombies. Children started with subprocess are left
    to it."""
    for c in _children(os.getpid()):
        if c not in _Worker.started:
            try:
                os.waitpid(c, os.WNOHANG)
            except ChildProcessError:
                pass


# What of the checker's environment the worker gets: the emulator's settings a test chose
# (CUEMU_*) and the device a GPU run uses, nothing else. Not the harness's TUT_* (hidden tests,
# results, the seed), not make's (MAKEFLAGS, a class run's SUBMISSIONS=...), not a token, not
# the host's name or paths: what a library could read to tell "graded" from "make check" is
# the same in both.
WORKER_ENV_PREFIXES = ("CUEMU_",)
WORKER_ENV_NAMES = ("CUDA_VISIBLE_DEVICES",)
WORKER_ENV_FIXED = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LC_ALL": "C"}


def worker_environment(environ):
    env = {k: v for k, v in environ.items()
           if (k.startswith(WORKER_ENV_PREFIXES) or k in WORKER_ENV_NAMES)
           and k != "CUEMU_SHARED_HEAP"}
    env.update(WORKER_ENV_FIXED)
    return env


class _Signaller:
    """kill(-1, sig) as the worker's user id, from a process of this one's: every process of
    that user, and no other, in one call. The kernel sends it under the task list's lock to
    every process whose real or saved user id is the sender's (kill_something_info), and a
    process in the middle of fork() passes a signal sent to many processes (kill(-1), a process
    group) on to the child it is making (copy_process: the `multiprocess` list), or restarts
    the fork when it came first: nothing of that user's can be made that the signal misses.

    A process of its own (this script, --signal-as UID), started fresh (none of the checker's
    memory in it) as root: it takes that user's id only for the kill() call and goes back to
    root (setresuid(uid, uid, 0): the saved id lets it), so the student's processes cannot
    signal it in between, and it leaves no process of theirs that the call could not reach.
    Asked by one byte (the signal), it answers one byte (0, or the errno)."""

    def __init__(self, uid):
        self.uid = uid
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--signal-as", str(uid)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={}, close_fds=True, bufsize=0)
        _Worker.started.add(self.proc.pid)   # not a process of the worker's: never frozen

    def send(self, sig):
        """0 (sent), an errno (ESRCH: no process of the user is left), or None: the helper is
        gone."""
        try:
            self.proc.stdin.write(bytes([sig]))
            answer = self.proc.stdout.read(1)
        except (OSError, ValueError):
            return None
        return answer[0] if answer else None

    def close(self):
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        _Worker.started.discard(self.proc.pid)


def _signal_as(uid):
    """The _Signaller's process: as root, one signal per byte read from stdin, sent with
    kill(-1) as user `uid`; the answer on stdout. Ends at the end of stdin."""
    if os.geteuid() != 0 or uid <= 0:
        return 2
    while True:
        data = os.read(0, 1)
        if not data:
            return 0
        os.setresuid(uid, uid, 0)   # the effective capabilities go: only that user's processes
        try:
            os.kill(-1, data[0])
            err = 0
        except OSError as e:
            err = e.errno
        finally:
            os.setresuid(0, 0, 0)
        os.write(1, bytes([err]))


def _uid_of(pid):
    """(real, effective, saved user id) and the state letters of each of pid's threads, from
    /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            uids = next(tuple(int(v) for v in line.split()[1:4]) for line in f
                        if line.startswith("Uid:"))
        states = []
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                pass
        return uids, states
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def uid_processes(uid):
    """Every process whose real, effective or saved user id is uid, and its threads' states
    ({pid: [state, ...]}), by a look at the whole of /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _uid_of(int(name))
            if found and uid in found[0]:
                out[int(name)] = found[1]
    return out


def _worker_uid():
    """The user id the worker runs as, when it is its own and this process may act as it
    (root): then the freeze signals by user id (_Signaller). Else 0: the tree walk."""
    try:
        uid = int(os.environ.get("TUT_WORKER_UID") or 0)
    except ValueError:
        raise ValueError(f"TUT_WORKER_UID={os.environ['TUT_WORKER_UID']!r} is not a user id")
    if uid <= 0 or os.geteuid() != 0 or uid == os.getuid():
        return 0
    return uid


class _Worker:
    started = set()   # the pids of the workers this process started (its own children)

    def __init__(self, path):
        self.path = path
        region = install()
        # PR_SET_CHILD_SUBREAPER: a worker's process whose parent exits (a double fork, a
        # worker gone) comes here rather than to init, into a tree this process walks
        _libc.prctl(36, 1, 0, 0, 0)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # Its stdout and stderr: files the checker copies to its own fds 1 and 2 after each
        # call, wherever those point then (a test's output file), in the order it printed.
        self.out = [self._spool("stdout"), self._spool("stderr")]
        self.last, self.failing = b"", False
        # the worker needs the standard library alone: any Python 3 its user may run
        python = os.environ.get("TUT_WORKER_PYTHON") or sys.executable
        uid = _worker_uid()
        self.signaller = _Signaller(uid) if uid else None
        cmd = shlex.split(os.environ.get("TUT_WORKER_PREFIX", "")) + [
            python, "-I", "-S", str(HERE / "tut_worker.py"), str(req_r), str(rep_w),
            f"{region.fd}:{region.base:#x}:{region.size:#x}:{region.half:#x}", str(path)]
        env = worker_environment(os.environ)
        sys.stdout.flush()
        self.proc = subprocess.Popen(cmd, pass_fds=(req_r, rep_w, region.fd), env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.out[0][0],
                                     stderr=self.out[1][0],
                                     start_new_session=True, close_fds=True)
        _Worker.started.add(self.proc.pid)
        os.close(req_r)
        os.close(rep_w)
        self.req, self.rep = req_w, rep_r
        self.buf, self.requests, self.seconds = b"", 0, 0.0
        self.poll = select.poll()
        self.poll.register(rep_r, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.freeze = os.environ.get("TUT_WORKER_FREEZE", "1") != "0"
        self.frozen = False
        # the submission's limits as a whole: every process of the worker's tree
        self.cpu_limit = float(os.environ.get("TUT_WORKER_CPU") or 0)
        self.mem_limit = int(os.environ.get("TUT_WORKER_MEMORY") or 0)
        atexit.register(self._thaw)
        self.timeout = float(os.environ.get("TUT_WORKER_TIMEOUT", "300"))
        self.dead = None
        hello = self._reply(max(self.timeout, 60.0), "starting")
        if not hello.get("ready"):
            self._kill()
            raise self._died(f"the worker could not load {path}: {hello.get('err')!r}")
        self._stop()

    # -- messages --
    def request(self, msg, what):
        if self.dead:
            raise self.dead
        started = time.perf_counter()
        data = json.dumps(msg, separators=(",", ":")).encode()
        data = struct.pack("<I", len(data)) + data
        try:   # the request first, then the thaw: it wakes once, to a message waiting for it
            while len(data) > 1 << 15 and self.frozen:   # more than a pipe holds: thaw first
                self._cont()
            while data:
                data = data[os.write(self.req, data):]
                self._cont()
        except OSError:
            return self._fail(what, "its channel is closed")
        reply = self._reply(self.timeout, what)
        self._stop()
        self._relay()
        self.requests += 1
        self.seconds += time.perf_counter() - started
        return reply

    def _reply(self, timeout, what):
        deadline = time.monotonic() + timeout
        while len(self.buf) < 4:
            self.buf += self._read(deadline, what)
        n = struct.unpack("<I", self.buf[:4])[0]
        if n > MAX_REPLY:
            return self._fail(what, f"it sent a {n}-byte reply")
        while len(self.buf) < 4 + n:
            self.buf += self._read(deadline, what)
        body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
        try:
            reply = json.loads(body)
        except (ValueError, RecursionError):
            return self._fail(what, "it sent a reply that is not JSON")
        if not isinstance(reply, dict):
            return self._fail(what, "it sent a reply that is not a JSON object")
        return reply

    def _read(self, deadline, what):
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                self._kill()
                self._fail(what, f"no answer in {self.timeout:g} s (TUT_WORKER_TIMEOUT); "
                                 f"the worker was killed")
            watching = self.cpu_limit or self.mem_limit
            if self.poll.poll(min(wait, 0.1) * 1000 if watching else wait * 1000):
                break
            if watching:
                self._watch(what)
        b = os.read(self.rep, 1 << 16)
        if not b:
            self._fail(what, None)
        return b

    def _watch(self, what):
        """The submission as one: the CPU time of all its processes (a neighbour's load does
        not count) and their memory (each one's private memory, and the shared
        region's pages), against TUT_WORKER_CPU seconds and TUT_WORKER_MEMORY bytes."""
        ticks, private, shared = 0, 0, 0
        for p in self._processes():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks += sum(int(v) for v in fields[11:15])   # utime stime cutime cstime
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            private += int(line.split()[1]) * 1024
                        elif line.startswith("RssShmem:"):   # memfd, MAP_SHARED anonymous
                            shared += int(line.split()[1]) * 1024
            except (OSError, ValueError, IndexError):
                pass
        cpu = ticks / os.sysconf("SC_CLK_TCK")
        if self.cpu_limit and cpu > self.cpu_limit:
            self._kill()
            self._fail(what, f"its processes used more than {self.cpu_limit:g} s of CPU time "
                             f"(TUT_WORKER_CPU)")
        if self.mem_limit:
            # the region's pages show in the RssShmem of each process that touched them:
            # counted once, as the larger of the two
            used = private + max(shared, os.fstat(_region.fd).st_blocks * 512)
            if used > self.mem_limit:
                self._kill()
                self._fail(what, f"its processes used {used >> 20} MiB of memory, more than "
                                 f"{self.mem_limit >> 20} MiB (TUT_WORKER_MEMORY)")

    def _fail(self, what, why):
        """The worker is gone (or is now killed): raise WorkerDied, and keep raising it."""
        if why is None:   # end of file: it died; say how
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
                rc = self.proc.wait()
            if rc < 0:
                why = f"it was killed by {signal.Signals(-rc).name}"
            elif rc > 128 and rc - 128 in signal.Signals._value2member_map_:
                why = f"it was killed by {signal.Signals(rc - 128).name}"   # a shell, a sandbox
            else:
                why = f"it exited with status {rc}"
        else:
            self._kill()
        self.failing = True
        self._relay()
        self.failing = False
        tail = self._tail()
        self.dead = self._died(f"the library's process died during {what}: {why}",
                               f"its last words (stderr):\n{tail}" if tail else "")
        raise self.dead

    @staticmethod
    def _died(what, detail=""):
        return _worker_died_class()(what, detail)

    # -- freezing between calls --
    def _tree(self):
        """The worker's process and every descendant (a sandbox's, a fork's), by /proc, and
        the trees of this process's children it did not start: orphans of a worker's
        processes, which come here (a child subreaper) when the worker is gone."""
        pids, todo, seen = [], [self.proc.pid], set()
        for c in _children(os.getpid()):
            if c not in _Worker.started:
                todo.append(c)
        while todo:
            p = todo.pop()
            if p in seen:   # read at different moments, a reused pid could make a loop
                continue
            seen.add(p)
            pids.append(p)
            try:
                tids = os.listdir(f"/proc/{p}/task")
            except OSError:
                continue
            for t in tids:
                try:
                    with open(f"/proc/{p}/task/{t}/children") as f:
                        todo += [int(c) for c in f.read().split()]
                except (OSError, ValueError):
                    pass
        return pids

    @staticmethod
    def _stopped(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] in "TtZX"
        except (OSError, IndexError):
            return True   # gone

    def _processes(self):
        """Every process of the submission: the worker's process tree. Nothing leaves it: a
        process whose parent exits goes to the nearest child subreaper above it, the sandbox
        (tools/sandbox.py as another user: a root process the library cannot change) or its
        PID namespace's first process, else the worker itself (which a library could undo)."""
        return self._tree()

    def _stop(self):
        """SIGSTOP every process of the submission, and return once all of them have stopped
        and a fresh look finds none that is not: stopped processes cannot fork, so that look
        ends it. A process that is gone meanwhile is skipped, never the end of the loop."""
        if not self.freeze or self.frozen or self.proc.poll() is not None:
            return
        self.frozen = True
        self.others = set()
        if self.signaller:
            return self._stop_by_uid()
        deadline = time.monotonic() + 20   # a loaded machine may take long to schedule them
        while True:
            running = [p for p in self._processes() if p not in self.others
                       or not self._stopped(p)]
            if not running:
                break
            for p in running:
                try:
                    os.kill(p, signal.SIGSTOP)
                    self.others.add(p)
                except ProcessLookupError:
                    pass
                except PermissionError:   # not ours to stop: the caller said no freezing
                    self.freeze = False
                    return
            while not all(self._stopped(p) for p in running):
                if time.monotonic() > deadline:
                    late = [p for p in running if not self._stopped(p)]
                    self._fail("a pause between calls", f"its processes would not stop "
                                                        f"(pids {late[:5]})")
                time.sleep(0.0002)

    def _stop_by_uid(self):
        """SIGSTOP to every process of the worker's user at once (_Signaller: no fork outruns
        it), then wait until /proc shows each of them, every thread, stopped. Every one of
        them is in the tree (a child subreaper above them all: the sandbox, else this
        process), which the wait reads; the sandbox's own processes are root's, not the
        student's, and not stopped. A user id with no process left is no error: the worker's
        end is seen by the next call."""
        err = self.signaller.send(signal.SIGSTOP)
        if err is None:
            self._fail("a pause between calls", "the process that stops it is gone")
        deadline = time.monotonic() + 20
        uid = self.signaller.uid
        while True:
            late = []
            for p in self._processes():
                found = _uid_of(p)
                if found and uid in found[0] and any(s not in "TtZX" for s in found[1]):
                    late.append(p)
            if not late:
                return
            if time.monotonic() > deadline:
                self._fail("a pause between calls", f"its processes would not stop "
                                                    f"(pids {late[:5]})")
            time.sleep(0.0002)

    def _thaw(self):
        """At exit (after the finalisers atexit runs, registered later): thawed, told to end
        by the end of its channel, then killed with its process group if it does not."""
        if os.environ.get("TUT_REMOTE_STATS"):   # what isolation cost this process
            print(f"tut_remote: {self.requests} requests to the worker, {self.seconds:.3f} s "
                  f"in them (calls, waiting and freezing)", file=sys.stderr)
        self.freeze = False
        self._cont()
        others = self._processes()   # now: once the worker is gone, its orphans are not its
        try:
            req, self.req = self.req, -1
            os.close(req)
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill(others)
        if self.signaller:
            self.signaller.close()
            self.signaller = None

    def _cont(self):
        if self.frozen:
            self.frozen = False
            if self.signaller and self.signaller.send(signal.SIGCONT) is None and self.freeze:
                self._fail("a call", "the process that stops and thaws it is gone")
            for p in getattr(self, "others", ()):
                try:
                    os.kill(p, signal.SIGCONT)
                except (ProcessLookupError, PermissionError):
                    pass

    # -- its stderr: shown as it comes, its end quoted when it dies --
    @staticmethod
    def _spool(name):
        f = tempfile.TemporaryFile(prefix=f"tut-worker-{name}-", buffering=0)
        import fcntl   # appends whatever the offset: the checker reads the same file
        fcntl.fcntl(f.fileno(), fcntl.F_SETFL, fcntl.fcntl(f.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        return [f, 0]

    def _relay(self):
        for fd, spool in ((1, self.out[0]), (2, self.out[1])):
            f = spool[0]
            while True:
                data = os.pread(f.fileno(), 1 << 20, spool[1])
                if not data:
                    break
                spool[1] += len(data)
                if fd == 2:
                    self.last = (self.last + data)[-4000:]
                (sys.stdout if fd == 1 else sys.stderr).flush()
                view = memoryview(data)
                try:
                    while view:
                        view = view[os.write(fd, view):]
                except OSError as e:   # EFBIG: past the output limit (TUT_OUTPUT_MAX)
                    if self.dead or self.failing:
                        return
                    self._fail("copying its output", f"its output could not be written: {e}")
            if spool[1] > 1 << 20:   # copied out: the file need not keep it
                os.ftruncate(f.fileno(), 0)
                spool[1] = 0

    def _tail(self):
        text = self.last.decode(errors="replace").strip()
        return "\n".join(text.splitlines()[-15:])

    def _kill(self, others=()):
        """Every process of the worker killed: stopped first, tree walk after tree walk until
        one finds nothing new (a process with a SIGSTOP pending cannot finish a fork), then
        killed, so a process forking its successor as fast as it can leaves none behind."""
        if self.signaller:
            self._kill_by_uid()
        stopped, deadline = set(), time.monotonic() + 10
        while time.monotonic() < deadline:
            new = [p for p in list(others) + self._processes() if p not in stopped]
            if not new:
                break
            for p in new:
                try:
                    os.kill(p, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
                stopped.add(p)
        for p in stopped:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.frozen = False
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _reap()

    def _kill_by_uid(self):
        """SIGKILL to every process of the worker's user, again until /proc shows none left
        but the dead (zombies its subreaper reaps)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.signaller.send(signal.SIGKILL) is None:
                return   # the helper is gone: the tree walk below does what it can
            left = [p for p, states in uid_processes(self.signaller.uid).items()
                    if any(s not in "ZX" for s in states)]
            if not left:
                return
            time.sleep(0.001)

    def close(self):
        if self.proc.poll() is None:
            self._kill()
        _Worker.started.discard(self.proc.pid)
        for fd in (self.req, self.rep):
            try:
                if fd >= 0:
                    os.close(fd)
            except OSError:
                pass
        self.req = self.rep = -1
        if self.signaller:
            self.signaller.close()
            self.signaller = None


# ---- what the driver sees: a ctypes.CDLL look-alike ---------------------------------------------
class RemoteCDLL:
    """A stand-in for ctypes.CDLL(path) whose functions run in a worker process. Attribute
    access gives a RemoteFunction (AttributeError when the library has no such symbol), with
    argtypes, restype and errcheck as on a ctypes function."""

    def __init__(self, path, backend="cpu"):
        if backend != "cpu":
            raise RuntimeError(
                "TUT_ISOLATE=1 runs the library in a worker process, which needs the cpu "
                "backend: CUDA's pinned and managed memory cannot be shared with a second "
                "process. Run with TUT_BACKEND=cpu, or without TUT_ISOLATE (in one process)")
        self._name = str(path)
        self._worker = None
        self._generation = 0
        self._symbols = {}
        self._funcs = {}
        self._next_id = 0
        self._start()
        # No atexit hook: finalisers (a PinnedArray's) still call the library at exit. The
        # worker ends with this process: end of file on its channel, or PR_SET_PDEATHSIG.

    def _start(self):
        self._worker = _Worker(self._name)
        self._generation += 1

    def _close(self):
        if self._worker is not None:
            self._worker.close()

    def _ensure(self):
        """A fresh worker when the last one died, for what follows. Before a function's id is
        looked up: ids are per worker, and a new one knows none of the old one's."""
        if self._worker.dead:
            self._worker.close()
            self._start()

    def _request(self, msg, what):
        self._ensure()
        return self._worker.request(msg, what)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fn = self._funcs.get(name)
        if fn is None:
            if name not in self._symbols:
                self._symbols[name] = self._request({"op": "sym", "name": name},
                                                    f"a look-up of {name}").get("ok") is True
            if not self._symbols[name]:
                raise AttributeError(f"{self._name}: undefined symbol: {name}")
            fn = self._funcs[name] = RemoteFunction(self, name)
        return fn

    def __getitem__(self, name):
        return RemoteFunction(self, name) if getattr(self, name) else None

    def __repr__(self):
        return f"<RemoteCDLL {self._name!r} in a worker process>"

    @property
    def worker_pid(self):
        return self._worker.proc.pid


def _code(t, name, i):
    if t in _CODES:
        return _CODES[t]
    if isinstance(t, type) and (issubclass(t, ctypes._Pointer) or hasattr(t, "_dtype_")):
        return "P"   # POINTER(x), numpy.ctypeslib.ndpointer: an address
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData) and t._type_ in _CODES.values():
        return t._type_
    where = f"argument {i + 1}" if i is not None else "its result"
    raise TypeError(f"TUT_ISOLATE=1: {name}: {where} has type {t!r}, which the worker "
                    f"process cannot pass (numbers and pointers only)")


class RemoteFunction:
    """One C function of the worker's library, with ctypes' argtypes/restype/errcheck."""

    def __init__(self, cdll, name):
        self._cdll, self.__name__ = cdll, name
        self.argtypes, self.restype, self.errcheck = None, ctypes.c_int, None
        self.out = None    # argument positions whose memory comes back (Library.bind's out)
        self._bound = {}   # (generation, arg codes, result code) -> id in the worker

    def __repr__(self):
        return f"<RemoteFunction {self.__name__}>"

    def _bind(self, codes, res):
        self._cdll._ensure()
        key = (self._cdll._generation, codes, res)
        fid = self._bound.get(key)
        if fid is None:
            cdll = self._cdll
            fid = cdll._next_id
            cdll._next_id += 1
            r = cdll._request({"op": "bind", "id": fid, "name": self.__name__,
                               "args": list(codes), "res": res}, f"binding {self.__name__}")
            if r.get("ok") is not True:
                raise AttributeError(f"{self.__name__}: {r.get('err')}")
            self._bound[(cdll._generation, codes, res)] = fid
        return fid

    def _outputs(self, codes):
        """The argument positions whose memory comes back: Library.bind's `out`, else those
        declared POINTER(T) (a C out-parameter; a c_void_p or an ndpointer is read only)."""
        if self.out is not None:
            return frozenset(self.out)
        if self.argtypes is None:
            return frozenset(i for i, c in enumerate(codes) if c == "P")
        return frozenset(i for i, t in enumerate(self.argtypes)
                         if isinstance(t, type) and issubclass(t, ctypes._Pointer))

    def __call__(self, *args):
        name = self.__name__
        res = "v" if self.restype is None else _code(self.restype, name, None)
        if self.argtypes is not None:
            if len(args) != len(self.argtypes):
                raise TypeError(f"this function takes {len(self.argtypes)} argument(s) "
                                f"({len(args)} given)")
            codes = tuple(_code(t, name, i) for i, t in enumerate(self.argtypes))
        else:
            codes = tuple(_infer(a, name, i) for i, a in enumerate(args))
        outs = self._outputs(codes)
        values, check, copies, scratch = [], [], [], []
        staged = {}   # block start -> (size, argument index, an output?)
        try:
            for i, (code, a) in enumerate(zip(codes, args)):
                if code == "P" or code == "z":
                    before = len(scratch)
                    v = _pointer(a, name, i, copies, scratch)
                    if v and _region.mine(v) and len(scratch) == before:
                        blk = _region.block(v)
                        if blk is None:
                            raise ValueError(f"{name}: argument {i + 1} is {v:#x}, host memory "
                                             f"that was freed (TUT_ISOLATE=1)")
                        old = staged.get(blk[0])
                        staged[blk[0]] = (blk[1], i, i in outs or bool(old and old[2]))
                    elif v and v not in _region and _maps.mine(v):
                        check.append(i)
                    values.append(v)
                else:
                    values.append(_number(code, a, name, i))
            fid = self._bind(tuple("P" if c == "z" else c for c in codes), res)
            # Copy in: everything the call may read, at the address the driver passed. The
            # worker writes only its own copy; only declared outputs come back (below).
            for obj, address, n, _ in copies:
                ctypes.memmove(_region.alias + (address - _region.base), ctypes.addressof(obj), n)
                for start, size in _pointed_blocks(obj, n):   # a pointer inside a structure
                    staged.setdefault(start, (size, None, False))
            for start, (size, _, out) in staged.items():
                _region.stage(start, size)
                _region.so.tut_shm_watch(ctypes.c_void_p(start), 1 if out else 0)
            msg = {"op": "call", "id": fid, "a": values}
            if check:
                msg["chk"] = check
            reply = self._cdll._request(msg, f"the call {name}()")
            if "refuse" in reply:
                i = reply["refuse"]
                raise ValueError(
                    f"{name}: argument {i + 1} is {values[i]:#x}, an address of the checking "
                    f"process's own memory, which the library's process cannot see "
                    f"(TUT_ISOLATE=1): pass a NumPy array, or ctypes.byref() of a ctypes object")
            if "x" in reply:
                raise ctypes.ArgumentError(str(reply["x"]))
            if "r" not in reply:
                raise self._cdll._worker._died(f"{name}: the worker sent {reply!r}")
            # Copy out, now that every process of the worker is stopped: the declared outputs
            # of this call and of earlier ones whose writes may still come (an async copy's
            # destination, until the array is freed or passed as an input).
            _take_outputs()
            for obj, address, n, i in copies:
                if i in outs:
                    ctypes.memmove(ctypes.addressof(obj),
                                   _region.alias + (address - _region.base), n)
            for start, (size, i, out) in staged.items():
                if not out and i is not None and not _region.same(start, size):
                    raise ValueError(
                        f"{name}() wrote the memory of its argument {i + 1}, which the driver "
                        f"passes as an input (Library.bind(..., out=...) does not name it): "
                        f"the write is not taken (TUT_ISOLATE=1)")
        finally:
            for p in scratch:
                _region.so.tut_shm_free(p)
        result = _result(res, reply["r"], name)
        if self.errcheck is not None:
            return self.errcheck(result, self, args)
        return result


def _take_outputs():
    for start in _region.watched():
        blk = _region.block(start)
        if blk is not None and blk[0] == start:
            _region.take(*blk)


def _pointed_blocks(obj, n):
    """Blocks of the checker's heap that the words of a ctypes object point into (an array of
    host pointers, a structure holding one): the call may read them."""
    if n > 1 << 16 or n < 8:
        return []
    words = (ctypes.c_uint64 * (n // 8)).from_address(ctypes.addressof(obj))
    out = []
    for w in words:
        if _region.mine(w):
            blk = _region.block(w)
            if blk is not None:
                out.append(blk)
    return out


def _infer(a, name, i):
    """Argument codes as ctypes infers them when argtypes is not set."""
    if a is None or isinstance(a, (bytes, _CArg, ctypes.Array, ctypes.Structure, ctypes._Pointer)):
        return "P"
    if isinstance(a, bool) or not isinstance(a, int):
        if isinstance(a, ctypes._SimpleCData) and a._type_ in _CODES.values():
            return "P" if a._type_ == "z" else a._type_
        raise ctypes.ArgumentError(f"argument {i + 1}: TypeError: Don't know how to convert "
                                   f"parameter {i + 1}")
    return "i"


def _number(code, a, name, i):
    """What ctypes would pass for a number argument (it wraps and truncates the same way)."""
    if isinstance(a, ctypes._SimpleCData):
        a = a.value
    t = tut_worker.TYPES[code]
    try:
        return t(a).value if code not in "fd" else float(t(a).value)
    except TypeError as e:
        raise ctypes.ArgumentError(f"argument {i + 1}: TypeError: {e}") from None


def _pointer(a, name, i, copies, scratch):
    """The address to pass for a pointer argument; objects passed by reference are copied
    through the region (recorded in copies, freed with scratch)."""
    while hasattr(a, "_as_parameter_") and not isinstance(a, (_CDATA, int)):
        a = a._as_parameter_
    if a is None:
        return 0
    if isinstance(a, bool):
        raise ctypes.ArgumentError(f"argument {i + 1}: TypeError: wrong type")
    if isinstance(a, int):
        return a
    if type(a).__module__ == "numpy" or hasattr(a, "__array_interface__"):
        import numpy as np
        if isinstance(a, np.integer):
            return int(a)
        if isinstance(a, np.ndarray):
            return a.ctypes.data
    if isinstance(a, ctypes.c_void_p):
        return a.value or 0
    if isinstance(a, ctypes.c_char_p):
        a = a.value
    if isinstance(a, bytes):
        a = ctypes.create_string_buffer(a)   # copied in below, never back
    obj = a
    if isinstance(a, _CArg):
        obj = a._obj
        if f"({ctypes.addressof(obj):#x})" not in repr(a):
            raise ValueError(f"{name}: argument {i + 1}: ctypes.byref() with an offset cannot "
                             f"cross to the library's process (TUT_ISOLATE=1)")
    elif isinstance(a, ctypes._Pointer):
        address = ctypes.cast(a, ctypes.c_void_p).value or 0
        if not address or address in _region:
            return address
        raise ValueError(f"{name}: argument {i + 1}: a ctypes pointer to {address:#x}, memory of "
                         f"the checking process the library's process cannot see "
                         f"(TUT_ISOLATE=1): pass ctypes.byref(obj) or a NumPy array's address")
    if isinstance(obj, _CDATA):
        address = ctypes.addressof(obj)
        if address in _region:
            return address
        n = ctypes.sizeof(obj)
        p = _region.malloc(n)
        scratch.append(p)
        copies.append((obj, p, n, i))
        return p
    raise ctypes.ArgumentError(f"argument {i + 1}: TypeError: wrong type "
                               f"({type(a).__name__})")


def _result(res, r, name):
    """The worker's value, checked against the declared result type (never trusted further)."""
    if res == "v":
        return None
    if res in _INTS:
        if type(r) is not int and not (res == "?" and type(r) is bool):
            raise _worker_died_class()(f"{name}: the worker sent {r!r} for an integer result")
        return bool(r) if res == "?" else r
    if res in "fd":
        if type(r) not in (int, float):
            raise _worker_died_class()(f"{name}: the worker sent {r!r} for a float result")
        return float(r)
    if res == "P":
        if r is not None and type(r) is not int:
            raise _worker_died_class()(f"{name}: the worker sent {r!r} for a pointer result")
        return r or None
    if res == "z":
        if r is not None and type(r) is not str:
            raise _worker_died_class()(f"{name}: the worker sent {r!r} for a char * result")
        return None if r is None else r.encode("latin-1")
    raise AssertionError(res)


if __name__ == "__main__":   # the _Signaller's process: tut_remote.py --signal-as UID
    if len(sys.argv) == 3 and sys.argv[1] == "--signal-as":
        sys.exit(_signal_as(int(sys.argv[2])))
    sys.exit("usage: tut_remote.py --signal-as UID (the checker starts it)")
