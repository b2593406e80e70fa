# SPDX-License-Identifier: MIT
"""What a test printed, kept for its row of the table rather than lost on stderr.

While a test runs under `make check`, file descriptors 1 and 2 point at one file beside its JSON
result, so kernel printf, the C code's fprintf, the runtime's messages and Python's own prints
all land there, in order. The row keeps the first OUTPUT_LIMIT bytes and says how many lines it
dropped; a million-line printf flood costs disk, never the table. If the process dies (a signal
in C, an abort), the file still holds everything up to the crash, including the Python stack that
faulthandler writes and the C frame that tut_check.cu's crash report writes: the summary reads
it back.
"""
import contextlib
import ctypes
import faulthandler
import os
import resource
import signal
import sys

OUTPUT_LIMIT = 64 * 1024   # bytes of a test's output kept in its row
# A printf in a loop that never ends would fill the disk before the test's time limit: past this
# size a write fails (EFBIG, with SIGXFSZ ignored) and the test goes on without its output.
FILE_LIMIT = 256 << 20

_libc = ctypes.CDLL(None)
_libc.fflush.argtypes = [ctypes.c_void_p]


def _flush_all():
    """Python's buffers and C's stdio buffers (kernel printf on the emulator is C stdio)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    _libc.fflush(None)


def read_capped(path, limit=OUTPUT_LIMIT):
    """(the whole lines within the first `limit` bytes, lines printed, lines dropped). The rest
    is read in chunks only to count its lines, and the file is cut to what the row keeps."""
    try:
        f = open(path, "r+b")
    except OSError:
        return "", 0, 0
    with f:
        head = f.read(limit)
        last = f.read(1 << 20)
        if not last:   # all of it fits
            text = head.decode("utf-8", errors="replace")
            return text, text.count("\n") + (text != "" and not text.endswith("\n")), 0
        kept = head[:head.rfind(b"\n") + 1]
        printed = head.count(b"\n")
        while last:
            printed += last.count(b"\n")
            end, last = last, f.read(1 << 20)
        printed += not end.endswith(b"\n")   # a last line without its newline
        f.truncate(len(kept))
    text = kept.decode("utf-8", errors="replace")
    return text, printed, printed - text.count("\n")


@contextlib.contextmanager
def output_to(path):
    """Point fds 1 and 2 at `path` for the duration (None: leave them alone)."""
    if path is None:
        yield
        return
    _flush_all()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # A grader (TUT_OUTPUT_MAX=bytes) wants a flood stopped: past it the process dies of
    # SIGXFSZ, which the grader reports as output over its limit. make check goes on instead.
    cap = int(os.environ.get("TUT_OUTPUT_MAX") or 0)
    if not cap:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    cap = cap or FILE_LIMIT
    if soft == resource.RLIM_INFINITY or soft > cap:
        limit = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = os.dup(1), os.dup(2)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        _flush_all()
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def enable_crash_reports():
    """faulthandler writes the Python stack on a fatal signal to fd 2 (the test's output file
    while a test runs). The library's C report (tut_install_crash_report, installed when it is
    loaded, after this) runs first and then hands the signal on to faulthandler."""
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr, all_threads=False)
