# SPDX-License-Identifier: MIT
"""What only the CPU emulator can tell: the operations each stream was given."""
import ctypes


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
