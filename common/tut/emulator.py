# SPDX-License-Identifier: MIT
"""What only the CPU emulator can tell: the operations each stream was given."""
import contextlib
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

from .paths import backend, tree


LOG_ADVICE, LOG_SYNC = 10, 11   # stream_log(detail=True) kinds of calls that are not queued


def stream_log(lib, call, detail=False):
    """CPU backend only: call(), then [(stream, kind)] for every operation it issued, as the
    emulator logs them (cuemuStreamLog; stream 0: the legacy default stream, -1: per-thread,
    1, 2, ...: created streams; kind 1 kernel, 2 copy, 3 set, 4 event record, 5 host function,
    6 cudaMallocAsync, 7 cudaFreeAsync, 8 cudaStreamWaitEvent, 9 cudaMemPrefetchAsync).
    detail=True: [(stream, kind, detail)] for those and for the calls that are not queued,
    in program order: 10 (LOG_ADVICE) cudaMemAdvise, 11 (LOG_SYNC) a host synchronisation
    (cudaStreamSynchronize on its stream, cudaEventSynchronize and cudaDeviceSynchronize on 0);
    detail: a prefetch's destination (a device, or -1 for the host), the advice (a
    cudaMemoryAdvise value), the synchronisation (1 stream, 2 event, 3 device), else 0."""
    log = lib.emu_stream_log
    lib.emu_stream_log_clear()
    call()
    count = log(None, None, 0)
    ids = (ctypes.c_longlong * count)()
    kinds = (ctypes.c_int * count)()
    details = (ctypes.c_int * count)()
    log(ids, kinds, count)
    lib.emu_stream_log_detail(details, count)
    if detail:
        return [(ids[i], kinds[i], details[i]) for i in range(count)]
    return [(ids[i], kinds[i]) for i in range(count) if kinds[i] < LOG_ADVICE]


@contextlib.contextmanager
def access_profile(lib):
    """CPU backend: the emulator's memory-access profile (counted, not timed), empty when the
    block starts and as it was again after it. Yields the library's handle, whose
    cuemuProfileAvailable() says after a launch whether the load/store hooks ran (1: the clang
    build; 0: g++), and cuemuProfileRows/cuemuProfileRow the counts; None on the GPU backend."""
    cd = lib.cdll
    if lib.backend != "cpu" or getattr(cd, "cuemuProfileEnable", None) is None:
        yield None
        return
    was = cd.cuemuProfileEnable(1)
    cd.cuemuProfileReset()
    try:
        yield cd
    finally:
        cd.cuemuProfileReset()
        cd.cuemuProfileEnable(was)


def run_child(driver_file, function, *args, timeout=120):
    """Run driver.<function>(*args) in a process of its own (for a bug that breaks the CUDA
    context it happens in) and return (its RESULT dict, what it wrote on stderr). args are
    passed as strings; the function ends with child_result(). The emulator's diagnoses go to
    the child's stderr: the quiet the harness sets while a test runs (the row gets them
    instead) is not passed on."""
    env = {k: v for k, v in os.environ.items() if k != "CUEMU_QUIET"}
    env.update(TUT_TREE=tree(), TUT_BACKEND=backend())
    code = f"import sys, driver; sys.exit(driver.{function}(*sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True,
                          timeout=timeout, cwd=Path(driver_file).resolve().parent, env=env)
    result = next((json.loads(line[7:]) for line in proc.stdout.splitlines()
                   if line.startswith("RESULT ")), None)
    if result is None:
        raise AssertionError(f"the child exited with {proc.returncode}:\n"
                             f"{(proc.stdout + proc.stderr)[-2000:]}")
    return result, proc.stderr


def child_result(result):
    """How a function run by run_child ends: its result as the one line run_child reads, and
    exit status 0."""
    print("RESULT " + json.dumps(result), flush=True)
    return 0
