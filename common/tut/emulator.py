# SPDX-License-Identifier: MIT
"""What only the CPU emulator can tell: the operations each stream was given."""
import ctypes


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
