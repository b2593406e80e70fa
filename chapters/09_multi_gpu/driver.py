# SPDX-License-Identifier: MIT
"""Chapter 09 multi_gpu: devices, peer access, an array split over devices, a ring all-reduce.

    python3 driver.py            the lesson's demo: the devices, their links, a ring all-reduce
    python3 driver.py --check    the tests (make check runs each exercise on its own)
    python3 driver.py --bench    copies between devices with and without peer access, and the
                                 ring against NCCL's all-reduce across message sizes
"""
import contextlib
import ctypes
import functools
import gc
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

# The emulator: three devices, so that every multi-device exercise runs on a laptop and the
# ring is also tried on a number of devices that is not a power of two (where chunking bugs
# show); 64 MiB each keeps the "device full" tests quick. A real GPU ignores both variables.
os.environ.setdefault("CUEMU_DEVICES", "3")
os.environ.setdefault("CUEMU_DEVICE_MEMORY", "64M")
# NCCL's NVLink multicast (NVLS, for NVSwitch machines) stays off: the all-reduce the ring is
# compared with is then NCCL's own ring or tree over the same links, not the switch reducing
# in the network; and on shared machines NVLS can put the GPUs out of service for others.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(9, "09_multi_gpu")
I, F, P, Z = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
IP = ctypes.POINTER(I)
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
TEAM_MAX = 8                                  # TEAM_MAX in the .cu
STREAM_NON_BLOCKING = 1                       # cudaStreamNonBlocking
ADVISE_PREFERRED_LOCATION = 3                 # cudaMemAdviseSetPreferredLocation
KERNEL, COPY, EVENT_RECORD, MALLOC_ASYNC, FREE_ASYNC, WAIT_EVENT, PREFETCH = 1, 2, 4, 6, 7, 8, 9


NCCL_QUEUED = ctypes.CFUNCTYPE(None, ctypes.c_int)   # nccl_rank_allreduce's callback


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    return SimpleNamespace(
        # int get_device(int *dev)
        get_device=lib.bind("get_device", [IP]),
        # int set_device(int dev)
        set_device=lib.bind("set_device", [I]),
        # int device_describe(int dev, char *name, int name_len, int *pci, size_t *free_bytes,
        #     size_t *total_bytes, int *concurrent_managed)
        device_describe=lib.bind("device_describe", [I, ctypes.c_char_p, I, IP, tut.c_size_t_p,
                                                     tut.c_size_t_p, IP], out=(1, 3, 4, 5, 6)),
        # int devices_mem_used(size_t *used, int max, int *count)
        devices_mem_used=lib.bind("devices_mem_used", [tut.c_size_t_p, I, IP]),
        # int topology(int n, int *access, int *perf_rank, int *atomics)
        topology=lib.bind("topology", [I, IP, IP, IP]),
        # int pointer_device(const void *ptr, int *dev)
        pointer_device=lib.bind("pointer_device", [P, IP]),
        # int peer_can_access(int dev, int peer, int *can)
        peer_can_access=lib.bind("peer_can_access", [I, I, IP]),
        # int peer_enable(int dev, int peer)
        peer_enable=lib.bind("peer_enable", [I, I]),
        # int peer_disable(int dev, int peer)
        peer_disable=lib.bind("peer_disable", [I, I]),
        # int peer_scale(int dev, float *d_y, const float *d_x, size_t n, float a)
        peer_scale=lib.bind("peer_scale", [I, P, P, Z, F]),
        # int pool_access_get(int owner, int reader, int *flags)
        pool_access_get=lib.bind("pool_access_get", [I, I, IP]),
        # int pool_access_set(int owner, int reader, int flags)
        pool_access_set=lib.bind("pool_access_set", [I, I, I]),
        # int pool_alloc_on(int dev, size_t bytes, void **out)
        pool_alloc_on=lib.bind("pool_alloc_on", [I, Z, ctypes.POINTER(P)]),
        # int pool_free_on(int dev, void *ptr)
        pool_free_on=lib.bind("pool_free_on", [I, P]),
        # int peer_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t bytes,
        #     int how)
        peer_copy=lib.bind("peer_copy", [P, I, P, I, Z, I], out=(0,)),
        # int ipc_export(void *d_ptr, void *handle)
        ipc_export=lib.bind("ipc_export", [P, P], out=(1,)),
        # int ipc_import_scale(const void *handle, int dev, size_t n, float a)
        ipc_import_scale=lib.bind("ipc_import_scale", [P, I, Z, F]),
        # int peer_enable_all(const int *devs, int n, int *pairs)
        peer_enable_all=lib.bind("peer_enable_all", [IP, I, IP], out=(2,)),
        # int team_create(team **out, const int *devs, int ndev, size_t scratch_elems)
        team_create=lib.bind("team_create", [ctypes.POINTER(P), IP, I, Z], out=(0,)),
        # int team_destroy(team *t)
        team_destroy=lib.bind("team_destroy", [P]),
        # int team_rank(team *t, int r, int *dev, cudaStream_t *stream, cudaEvent_t *event,
        #     float **scratch)
        team_rank=lib.bind("team_rank", [P, I, IP, ctypes.POINTER(P), ctypes.POINTER(P),
                                         ctypes.POINTER(P)]),
        # int team_probe(team *t, int r)
        team_probe=lib.bind("team_probe", [P, I]),
        # int team_fill(team *t, float *const *bufs, size_t n)
        team_fill=lib.bind("team_fill", [P, ctypes.POINTER(P), Z], out=()),
        # int team_shift(team *t, float *const *bufs, float *const *dst, size_t n)
        team_shift=lib.bind("team_shift", [P, ctypes.POINTER(P), ctypes.POINTER(P), Z], out=()),
        # int team_barrier(team *t)
        team_barrier=lib.bind("team_barrier", [P]),
        # int team_synchronize(team *t)
        team_synchronize=lib.bind("team_synchronize", [P]),
        # int stream_flags(cudaStream_t stream, unsigned int *flags)
        stream_flags=lib.bind("stream_flags", [P, ctypes.POINTER(ctypes.c_uint)]),
        # int team_scale_shift(team *t, const float *h_x, float *h_y, size_t n, float a, float b)
        team_scale_shift=lib.bind("team_scale_shift", [P, P, P, Z, F, F], out=(2,)),
        # int managed_where(const void *ptr, size_t bytes, int *preferred, int *prefetched)
        managed_where=lib.bind("managed_where", [P, Z, IP, IP]),
        # int managed_touch(float *m, size_t n, int dev)
        managed_touch=lib.bind("managed_touch", [P, Z, I]),
        # int team_scale_shift_managed(team *t, float *m, size_t n, float a, float b)
        team_scale_shift_managed=lib.bind("team_scale_shift_managed", [P, P, Z, F, F]),
        # int ring_allreduce(team *t, float *const *bufs, size_t n)
        ring_allreduce=lib.bind("ring_allreduce", [P, ctypes.POINTER(P), Z], out=()),
        # int nccl_version(int *version)
        nccl_version=lib.bind("nccl_version", [IP]),
        # int nccl_allreduce(team *t, float *const *bufs, size_t n)
        nccl_allreduce=lib.bind("nccl_allreduce", [P, ctypes.POINTER(P), Z], out=()),
        # int nccl_unique_id(void *id)   (NCCL_UNIQUE_ID_BYTES = 128)
        nccl_unique_id=lib.bind("nccl_unique_id", [P], out=(0,)),
        # int nccl_rank_allreduce(const void *id, int nranks, int rank, int dev, float *h,
        #     size_t n, void (*queued)(int rank))
        nccl_rank_allreduce=lib.bind("nccl_rank_allreduce", [P, I, I, I, P, Z, NCCL_QUEUED], out=(4,)),
        # int bench_peer_read(int dev, int peer, size_t bytes, int by_kernel, int reps,
        #     float *times_ms)
        bench_peer_read=lib.bind("bench_peer_read", [I, I, Z, I, I, tut.c_float_p]),
        # int bench_allreduce(team *t, float *const *bufs, size_t n, int ndev, int which,
        #     int reps, float *times_ms)
        bench_allreduce=lib.bind("bench_allreduce", [P, ctypes.POINTER(P), Z, I, I, I,
                                                     tut.c_float_p], out=(6,)),
    )


# ---- devices ---------------------------------------------------------------------------------
def device_count(lib):
    return lib.device_count()


def need_devices(lib, k):
    """Skip (exit 77) where fewer than k devices are visible, saying how many there are."""
    n = device_count(lib)
    if n < k:
        if lib.backend == "cpu":
            raise tut.Skip(f"needs {k} devices, the emulator has {n} (CUEMU_DEVICES={n}; "
                           f"the driver asks for 3 unless CUEMU_DEVICES is set)")
        raise tut.Skip(f"needs {k} GPUs, this machine has {n}")
    return n


def get_device(lib):
    d = I(-1)
    c_api(lib).get_device(ctypes.byref(d))
    return d.value


@contextlib.contextmanager
def on_device(lib, dev):
    """Make `dev` current for the block, and the previous device again after it."""
    api = c_api(lib)
    prev = get_device(lib)
    api.set_device(dev)
    try:
        yield dev
    finally:
        api.set_device(prev)


def describe(lib, dev):
    api = c_api(lib)
    name = ctypes.create_string_buffer(256)
    pci = (I * 3)()
    free, total, managed = Z(0), Z(0), I(0)
    api.device_describe(dev, name, 256, pci, ctypes.byref(free), ctypes.byref(total),
                        ctypes.byref(managed))
    return SimpleNamespace(name=name.value.decode(), pci=tuple(pci), free=free.value,
                           total=total.value, concurrent_managed=managed.value)


def mem_used_all(lib):
    """Device memory in use on every device (cudaMemGetInfo, device by device)."""
    used = (Z * TEAM_MAX)()
    count = I(0)
    c_api(lib).devices_mem_used(used, TEAM_MAX, ctypes.byref(count))
    return [used[d] for d in range(min(count.value, TEAM_MAX))]


def topology(lib):
    n = device_count(lib)
    access, rank, atomics = ((I * (n * n))() for _ in range(3))
    c_api(lib).topology(n, access, rank, atomics)
    as_matrix = lambda a: np.array(list(a), dtype=np.int32).reshape(n, n)  # noqa: E731
    return as_matrix(access), as_matrix(rank), as_matrix(atomics)


def pointer_device(lib, address):
    d = I(-1)
    c_api(lib).pointer_device(address, ctypes.byref(d))
    return d.value


def can_access(lib, dev, peer):
    c = I(0)
    c_api(lib).peer_can_access(dev, peer, ctypes.byref(c))
    return bool(c.value)


def peer_access_off(lib):
    """Disable peer access between every pair of devices (the state a process starts in): each
    test leaves it as it found it, so that tests run in one process stay independent."""
    api, n = c_api(lib), device_count(lib)
    for d in range(n):
        for p in range(n):
            if d != p:
                try:
                    api.peer_disable(d, p)
                except tut.CudaError as e:
                    if e.name != "cudaErrorPeerAccessNotEnabled":
                        raise
                    lib.clear_last_error()


def peer_enabled(lib, dev, peer):
    """Is peer access from dev to peer enabled? CUDA has no query: a second enable says so
    (cudaErrorPeerAccessAlreadyEnabled), and a first one is undone at once."""
    try:
        c_api(lib).peer_enable(dev, peer)
    except tut.CudaError as e:
        if e.name != "cudaErrorPeerAccessAlreadyEnabled":
            raise
        lib.clear_last_error()
        return True
    c_api(lib).peer_disable(dev, peer)
    return False


def peer_enable_all(lib, devs):
    devs = check_devices(lib, devs)
    pairs = I(-1)
    c_api(lib).peer_enable_all((I * len(devs))(*devs), len(devs), ctypes.byref(pairs))
    return pairs.value


def check_devices(lib, devs):
    devs = [tut.check_count(d, "device", maximum=TEAM_MAX - 1) for d in devs]
    n = device_count(lib)
    if not 1 <= len(devs) <= min(TEAM_MAX, n):
        raise ValueError(f"a team needs 1 to {min(TEAM_MAX, n)} devices, got {len(devs)}")
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices {devs}: each device may appear once")
    if max(devs) >= n:
        raise ValueError(f"device {max(devs)} does not exist: there are {n}")
    return devs


def per_device_balanced(fn):
    """What the harness checks on the current device, on every device: memory back to where it
    was; and the caller's current device, and peer access off, as they were."""
    @functools.wraps(fn)
    def wrapper(ctx):
        lib = ctx.lib
        before, dev = mem_used_all(lib), get_device(lib)
        try:
            fn(ctx)
        finally:
            gc.collect()
            peer_access_off(lib)
        after, now = mem_used_all(lib), get_device(lib)
        if now != dev:
            raise AssertionError(f"the current device was {dev} before the test and is {now} "
                                 f"after it: a function that calls cudaSetDevice must put the "
                                 f"caller's device back, on every path")
        leaks = [(d, a - b) for d, (b, a) in enumerate(zip(before, after)) if a > b]
        if leaks and not tut.under_sanitizer():
            raise AssertionError("device memory leak: " + ", ".join(
                f"{n} bytes on device {d}" for d, n in leaks) + " still in use after the test "
                "(free each device's memory, on error paths too)")
    return wrapper


# ---- a team: a stream, an event and a scratch buffer per device -------------------------------
class Team(tut.Handle):
    """Rank r works on device devs[r] with its own stream, event and scratch buffer (09.2)."""
    kind = "Team"

    def __init__(self, lib, devs, scratch_elems=0):
        self.devs = check_devices(lib, devs)
        self.scratch_elems = tut.check_count(scratch_elems, "scratch_elems", maximum=2**60)
        self.lib, self._api = lib, c_api(lib)
        handle = P()
        self._api.team_create(ctypes.byref(handle), (I * len(self.devs))(*self.devs),
                              len(self.devs), self.scratch_elems)
        self._own_handle(handle.value, self._api.team_destroy)

    @property
    def size(self):
        return len(self.devs)

    def rank(self, r):
        dev, stream, event, scratch = I(-1), P(), P(), P()
        self._api.team_rank(self._live("rank"), r, ctypes.byref(dev), ctypes.byref(stream),
                            ctypes.byref(event), ctypes.byref(scratch))
        return SimpleNamespace(dev=dev.value, stream=stream.value, event=event.value,
                               scratch=scratch.value)

    def probe(self, r):
        self._api.team_probe(self._live("probe"), r)

    def synchronize(self):
        self._api.team_synchronize(self._live("synchronize"))

    def barrier(self):
        """09.2: the devices wait for each other; the host does not."""
        self._api.team_barrier(self._live("barrier"))

    def fill(self, bufs):
        """Queue: rank r's buffer := r + 1, on its stream."""
        self._check_bufs(bufs)
        self._api.team_fill(self._live("fill"), bufs.pointers(), bufs.n)

    def shift(self, bufs, dst):
        """Queue: rank r copies rank (r+1) % N's buffer into dst[r], on its stream."""
        self._check_bufs(bufs)
        self._check_bufs(dst)
        if dst.n != bufs.n:
            raise ValueError(f"dst holds {dst.n} floats per rank, bufs {bufs.n}")
        self._api.team_shift(self._live("shift"), bufs.pointers(), dst.pointers(), bufs.n)

    def _check_bufs(self, bufs):
        if not isinstance(bufs, RankBuffers) or bufs.devs != self.devs:
            raise ValueError("bufs must be a RankBuffers on this team's devices, in its order")

    def scale_shift(self, x, a, b):
        """09.3: y = a * x + b, split over the team; a fresh, poisoned output."""
        tut.check_array(x, np.float32, "x", ndim=1)
        out = tut.poisoned(x.size + 64, np.float32)   # a poisoned tail: an overrun shows
        self._api.team_scale_shift(self._live("scale_shift"), tut.ptr(x), tut.ptr(out), x.size,
                                   a, b)
        if (out[x.size:].view(np.uint32) != 0x7F7F7F7F).any():
            raise AssertionError(f"team_scale_shift wrote past the end of the {x.size}-float "
                                 f"output (is the last part too long?)")
        return out[:x.size]

    def scale_shift_managed(self, m, a, b):
        """09.4: m = a * m + b in place, m a tut.ManagedArray of float32."""
        arr = tut.check_managed(m, np.float32, "m", ndim=1)
        self._api.team_scale_shift_managed(self._live("scale_shift_managed"), m.address,
                                           arr.size, a, b)

    def allreduce(self, bufs, nccl=False):
        """09.5 (or NCCL's): sum the ranks' buffers in place; bufs: a RankBuffers."""
        self._check_bufs(bufs)
        if not nccl and self.size > 1 and -(-bufs.n // self.size) > self.scratch_elems:
            raise ValueError(f"a chunk of {-(-bufs.n // self.size)} floats does not fit in the "
                             f"team's scratch of {self.scratch_elems}")
        fn = self._api.nccl_allreduce if nccl else self._api.ring_allreduce
        fn(self._live("allreduce"), bufs.pointers(), bufs.n)


class RankBuffers:
    """One DeviceBuffer of n floats on each device of devs (guard zones around each), each
    allocated and freed with its own device current."""

    def __init__(self, lib, devs, n):
        self.lib, self.devs, self.n = lib, list(devs), tut.check_count(n, "n", minimum=1)
        self.bufs = []
        try:
            for d in self.devs:
                with on_device(lib, d):
                    self.bufs.append(tut.DeviceBuffer(lib, 4 * self.n))
                    # its poison is written by a cudaMemset on the legacy stream, which the
                    # team's non-blocking streams do not wait for: wait here, once
                    lib.synchronize()
        except BaseException:
            self.free()
            raise

    def pointers(self):
        return (P * len(self.bufs))(*[b.ptr.value for b in self.bufs])

    def upload(self, arrays):
        for d, b, a in zip(self.devs, self.bufs, arrays):
            with on_device(self.lib, d):
                b.upload(np.ascontiguousarray(a, np.float32))
                # a cudaMemcpy from pageable memory may return before the data has landed,
                # and the team's non-blocking streams do not wait for the legacy stream
                self.lib.synchronize()

    def download(self):
        out = []
        for d, b in zip(self.devs, self.bufs):
            with on_device(self.lib, d):
                b.check_guards()
                out.append(b.download(np.float32, self.n))
        return out

    def free(self):
        for d, b in zip(self.devs, self.bufs):
            with on_device(self.lib, d):
                b.free()
        self.bufs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bufs:
            self.free()


def nccl_version(lib):
    v = I(0)
    c_api(lib).nccl_version(ctypes.byref(v))
    return v.value


def need_nccl(lib):
    v = nccl_version(lib)
    if v == 0:
        where = ("the emulator of this checkout has no NCCL (emu/include/nccl.h)"
                 if lib.backend == "cpu" else
                 "make found no nccl.h and libnccl (sh tools/find_nccl.sh says where it looked; "
                 "make NCCL_HOME=... names one)")
        raise tut.Skip(f"this library was built without NCCL: {where}")
    return v


def stream_flags(lib, stream):
    f = ctypes.c_uint(0)
    c_api(lib).stream_flags(stream, ctypes.byref(f))
    return f.value


# ---- references ---------------------------------------------------------------------------
def parts(n, k):
    """The parts of 09.3-09.5 in Python: [r*n//k, (r+1)*n//k) for r < k."""
    return [(r * n // k, (r + 1) * n // k - r * n // k) for r in range(k)]


def random_ab(rng):
    return np.float32(rng.uniform(0.5, 2.0)), np.float32(rng.uniform(-3.0, 3.0))


def device_lists(lib):
    """Teams to try: every size up to the devices there are, in more than one order (rank r
    is not device r)."""
    n = device_count(lib)
    out = [[0]]
    if n >= 2:
        out += [[0, 1], [1, 0]]
    if n >= 3:
        out += [[2, 0, 1], list(range(n))]
    if n >= 4:
        out.append(list(range(n))[::-1])
    return out


def rank_streams(lib, team):
    """CPU backend: the emulator's id of each rank's stream (from a probe's kernel launch)."""
    ids = []
    for r in range(team.size):
        ops = tut.stream_log(lib, lambda: team.probe(r))
        ids.append(ops[0][0])
    return ids


def check_stream_use(lib, team, ops, want, what, synced=True):
    """ops: stream_log(detail=True). Every queued operation is on one of the team's streams,
    and rank r's stream got `want(r)` of each kind (a dict kind -> count); every host wait comes
    after the last operation queued (waiting inside the loop makes the devices take turns);
    synced: each rank's stream is waited for after its last operation."""
    ids = rank_streams(lib, team) if not hasattr(team, "_ids") else team._ids
    team._ids = ids
    names = {KERNEL: "kernel", COPY: "copy", MALLOC_ASYNC: "cudaMallocAsync",
             FREE_ASYNC: "cudaFreeAsync", WAIT_EVENT: "cudaStreamWaitEvent",
             PREFETCH: "cudaMemPrefetchAsync", EVENT_RECORD: "event record"}
    queued = [(i, s, k) for i, (s, k, _) in enumerate(ops) if k < tut.LOG_ADVICE]
    strangers = sorted({s for _, s, _ in queued if s not in ids})
    if strangers:
        raise AssertionError(f"{what}: work went to stream(s) {strangers} (0 is the legacy "
                             f"default stream), not to the team's streams {ids}: each rank's "
                             f"work goes to its own stream")
    for r, sid in enumerate(ids):
        for kind, count in want(r).items():
            got = sum(1 for _, s, k in queued if s == sid and k == kind)
            if got != count:
                raise AssertionError(f"{what}: rank {r} (device {team.devs[r]}) got {got} "
                                     f"{names.get(kind, kind)}(s) on its stream, want {count}")
    syncs = [i for i, (_, k, _) in enumerate(ops) if k == tut.LOG_SYNC]
    foreign = sorted({s for s, k, d in ops if k == tut.LOG_SYNC and d == 1 and s not in ids})
    if foreign:
        raise AssertionError(f"{what}: the host waited for stream(s) {foreign} (0 is the legacy "
                             f"default stream), which hold none of the team's work: wait for "
                             f"the team's own streams {ids}")
    if synced:
        for r, sid in enumerate(ids):
            last = max((i for i, s, _k in queued if s == sid), default=None)
            waited = any(k == tut.LOG_SYNC and (s == sid or d == 3)
                         for s, k, d in ops[last + 1:]) if last is not None else True
            if not waited:
                raise AssertionError(f"{what}: rank {r}'s stream is never waited for after its "
                                     f"last operation: the caller may read the result before "
                                     f"it is there (cudaStreamSynchronize every rank's stream)")
    if queued and syncs and syncs[0] < queued[-1][0]:
        raise AssertionError(f"{what}: a host wait came before all the work was queued: queue "
                             f"every device's work first, then wait for each stream (a wait in "
                             f"the loop makes the devices take turns)")


# ---- exercises ----------------------------------------------------------------------------
@CH.exercise(1, "peer_enable_all: every pair both ways, twice is not an error, last error clean")
@per_device_balanced
def test_peer_enable_all(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    n = need_devices(lib, 2)
    peer_access_off(lib)
    groups = [list(range(n)), [1, 0]] + ([[2, 0]] if n >= 3 else [])
    for devs in groups:
        want = sum(can_access(lib, i, j) for i in devs for j in devs if i != j)
        for attempt in ("first", "second"):   # the second finds every pair enabled already
            with on_device(lib, devs[-1]):
                got = peer_enable_all(lib, devs)
                left = lib.clear_last_error()
                if left != 0:
                    raise AssertionError(
                        f"peer_enable_all({devs}), {attempt} call: cudaGetLastError then "
                        f"returned {lib.error_name(left)}: an error handled as \"done already\" "
                        f"must be cleared too, or the next launch check reports it")
            if got != want:
                raise AssertionError(f"peer_enable_all({devs}), {attempt} call: {got} pairs, "
                                     f"want {want} (every ordered pair that "
                                     f"cudaDeviceCanAccessPeer allows)")
            for i in range(n):
                for j in range(n):
                    if i == j or not can_access(lib, i, j):
                        continue
                    if peer_enabled(lib, i, j) != (i in devs and j in devs):
                        state = "enabled" if i not in devs or j not in devs else "not enabled"
                        raise AssertionError(f"after peer_enable_all({devs}): peer access "
                                             f"from {i} to {j} is {state}")
        peer_access_off(lib)
    # One direction enabled by someone else first: the other is still to do.
    if can_access(lib, 0, 1) and can_access(lib, 1, 0):
        api.peer_enable(0, 1)
        if peer_enable_all(lib, [0, 1]) != 2 or not peer_enabled(lib, 1, 0):
            raise AssertionError("with 0 -> 1 enabled already, peer_enable_all([0, 1]) must "
                                 "still enable 1 -> 0: peer access is one direction per call")
        lib.clear_last_error()


@CH.exercise(2, "team_barrier: every device waits for every other, the host for none")
@per_device_balanced
def test_team_barrier(ctx):
    lib = ctx.lib
    n = (1 << 22) + 7 if ctx.large else 100_003
    if device_count(lib) < 2:
        tut.note("only a one-device barrier ran: the waits between devices need 2")
    for devs in device_lists(lib):
        with Team(lib, devs) as team, RankBuffers(lib, devs, n) as bufs, \
                RankBuffers(lib, devs, n) as dst:
            for round_ in range(2):   # the second round: the events are recorded again
                team.fill(bufs)
                team.barrier()
                team.shift(bufs, dst)
                team.synchronize()
                for r, got in enumerate(dst.download()):
                    nxt = (r + 1) % len(devs)
                    bad = np.flatnonzero(got != np.float32(nxt + 1))
                    if bad.size:
                        raise AssertionError(
                            f"devices {devs}, round {round_}: rank {r} copied rank {nxt}'s "
                            f"buffer after team_barrier and got {got[bad[0]]} at [{bad[0]}] "
                            f"({bad.size} of {n} wrong), want {nxt + 1}: the copy ran before "
                            f"rank {nxt}'s kernel was done")
            if ctx.backend != "cpu":
                continue
            team.synchronize()
            ops = tut.stream_log(lib, team.barrier, detail=True)
            N = len(devs)
            check_stream_use(lib, team, ops, lambda r: {EVENT_RECORD: 1, WAIT_EVENT: N - 1},
                             f"team_barrier on devices {devs}", synced=False)
            if any(k == tut.LOG_SYNC for _, k, _ in ops):
                raise AssertionError(f"team_barrier on devices {devs} made the host wait: the "
                                     f"devices wait for each other with cudaStreamWaitEvent, "
                                     f"the host for nothing")
            kinds = [k for _, k, _ in ops if k in (EVENT_RECORD, WAIT_EVENT)]
            if kinds[:N] != [EVENT_RECORD] * N:
                raise AssertionError(f"team_barrier on devices {devs}: record every rank's "
                                     f"event before any stream waits: a wait is for the "
                                     f"event's last record, which would be the previous "
                                     f"barrier's (or none)")


@CH.check("team", "a team: each device's stream, event and memory, made on that device")
@per_device_balanced
def test_team(ctx):
    lib = ctx.lib
    n = device_count(lib)
    scratch = (4 * MiB if ctx.backend == "gpu" else MiB) // 4
    live = getattr(lib, "live_objects", lambda: None)
    for devs in device_lists(lib):
        before = mem_used_all(lib)
        with on_device(lib, n - 1), Team(lib, devs, scratch) as team:
            if get_device(lib) != n - 1:
                raise AssertionError(f"team_create({devs}) left device {get_device(lib)} "
                                     f"current, not the caller's {n - 1}")
            during = mem_used_all(lib)
            for d in range(n):
                grew = during[d] - before[d]
                if d in devs and grew < 4 * scratch:
                    raise AssertionError(f"team {devs}: device {d}'s memory grew by {grew} "
                                         f"bytes, want at least its scratch of {4 * scratch}: "
                                         f"make each rank's device current before cudaMalloc")
                if d not in devs and grew >= 4 * scratch:
                    raise AssertionError(f"team {devs}: device {d}, not in the team, grew by "
                                         f"{grew} bytes")
            for r, d in enumerate(devs):
                rk = team.rank(r)
                if not (rk.stream and rk.event and rk.scratch):
                    raise AssertionError(f"team {devs}: rank {r} has no stream, event or "
                                         f"scratch buffer")
                if pointer_device(lib, rk.scratch) != d:
                    raise AssertionError(f"team {devs}: rank {r}'s scratch is on device "
                                         f"{pointer_device(lib, rk.scratch)}, want {d}")
                if stream_flags(lib, rk.stream) != STREAM_NON_BLOCKING:
                    raise AssertionError(f"team {devs}: rank {r}'s stream is not "
                                         f"cudaStreamNonBlocking (cudaStreamCreateWithFlags)")
                try:   # a launch and an event record that only the stream's own device allows
                    team.probe(r)
                except tut.CudaError as e:
                    raise AssertionError(f"team {devs}: rank {r}'s stream or event does not "
                                         f"belong to device {d} (a kernel on its stream, or "
                                         f"its event recorded there, failed: {e.name}): make "
                                         f"the device current before creating them") from e
    if n < 2:
        tut.note("the failure half way through a team was not tried: it needs 2 devices")
        return
    # Device n-1 is full: the team gets as far as its last rank, then cudaMalloc fails. What
    # the earlier ranks had must be released, on their devices.
    devs = list(range(n))
    big = (64 * MiB if ctx.backend == "gpu" else 8 * MiB)
    with on_device(lib, n - 1), tut.device_ballast(lib, big) as free:
        before, objects = mem_used_all(lib), live()
        tut.expect_cuda_error(lib, "cudaErrorMemoryAllocation",
                              lambda: Team(lib, devs, free // 2),
                              f"a team whose last device has only {free} bytes free")
        gc.collect()
        after = mem_used_all(lib)
        if any(a > b for a, b in zip(after, before)):
            raise AssertionError(f"after the failed team_create, device memory in use went "
                                 f"from {before} to {after}: release what the earlier ranks "
                                 f"made (team_destroy in cleanup does it, if it knows them)")
        if objects is not None and live() != objects:
            raise AssertionError(f"after the failed team_create, (streams, events) alive went "
                                 f"from {objects} to {live()}")


@CH.exercise(3, "team_scale_shift: one part per device, its pool and stream, all at once")
@per_device_balanced
def test_team_scale_shift(ctx):
    lib = ctx.lib
    sizes = [1, 2, 3, 1000, 999_983] + ([(1 << 22) + 7] if ctx.large else [])
    for devs in device_lists(lib):
        with Team(lib, devs) as team:
            for n in sizes:
                x = tut.random_f32(ctx.rng, n)
                a, b = random_ab(ctx.rng)
                tut.assert_close(team.scale_shift(x, a, b), tut.ref_scale_shift(x, a, b),
                                 rtol=1e-6, atol=1e-6, name=f"devices {devs}, n={n}")
            if ctx.backend == "cpu":
                n = 1001
                x = tut.random_f32(ctx.rng, n)
                ops = tut.stream_log(lib, lambda: team.scale_shift(x, 2.0, 1.0), detail=True)
                check_stream_use(lib, team, ops, lambda r: {
                    MALLOC_ASYNC: 1, COPY: 2, KERNEL: 1, FREE_ASYNC: 1}, f"devices {devs}")
                n = team.size - 1   # some parts are empty: they do nothing
                if n >= 1:
                    x = tut.random_f32(ctx.rng, n)
                    ops = tut.stream_log(lib, lambda: team.scale_shift(x, 2.0, 1.0),
                                         detail=True)
                    sizes_r = parts(n, team.size)
                    check_stream_use(lib, team, ops, lambda r: {
                        KERNEL: int(sizes_r[r][1] > 0)}, f"devices {devs}, n={n}")


@CH.exercise(4, "team_scale_shift_managed: advice and prefetch of each part to its device")
@per_device_balanced
def test_team_scale_shift_managed(ctx):
    lib = ctx.lib
    sizes = [1, 3, 1000, 999_983] + ([(1 << 22) + 7] if ctx.large else [])
    if ctx.backend == "cpu":
        tut.note("where each part's pages belong (cudaMemRangeGetAttribute) is checked on a GPU "
                 "only: the emulator keeps advice per allocation, not per page")
    for devs in device_lists(lib):
        with Team(lib, devs) as team:
            for n in sizes:
                a, b = random_ab(ctx.rng)
                with tut.ManagedArray(lib, n) as m:
                    x = tut.random_f32(ctx.rng, n)
                    m.array[:] = x
                    team.scale_shift_managed(m, a, b)
                    tut.assert_close(m.array, tut.ref_scale_shift(x, a, b), rtol=1e-6, atol=1e-6,
                                     name=f"devices {devs}, n={n}")
            if ctx.backend != "cpu":
                check_managed_where(lib, team)
                continue
            n = 4099
            with tut.ManagedArray(lib, n) as m:
                m.array[:] = 1.0
                ops = tut.stream_log(lib, lambda: team.scale_shift_managed(m, 2.0, 1.0),
                                     detail=True)
            check_stream_use(lib, team, ops, lambda r: {PREFETCH: 1, KERNEL: 1},
                             f"devices {devs}")
            ids = team._ids
            for r, d in enumerate(devs):
                mine = [(k, det) for s, k, det in ops if s == ids[r] and k in (KERNEL, PREFETCH)]
                if mine[:1] != [(PREFETCH, d)]:
                    raise AssertionError(f"devices {devs}: rank {r}'s stream got {mine} "
                                         f"(kind 9 = prefetch, with its destination): its part "
                                         f"must be prefetched to device {d}, before its kernel")
            advice = [det for _, k, det in ops if k == tut.LOG_ADVICE]
            if advice.count(ADVISE_PREFERRED_LOCATION) != len(devs):
                raise AssertionError(f"devices {devs}: cudaMemAdvise calls {advice}, want one "
                                     f"cudaMemAdviseSetPreferredLocation ({ADVISE_PREFERRED_LOCATION})"
                                     f" per part")


def check_managed_where(lib, team):
    """Each part's pages advised to, and last prefetched to, its rank's device (the interior of
    each part, whole 2 MiB pages: where a boundary falls inside a page, either rank may own it).
    GPU only: the emulator keeps one preferred location and one prefetch destination per
    allocation, not per page, so it cannot say where each part's pages belong."""
    page = 2 * MiB
    N = team.size
    n = N * (4 * page // 4) + 12_345   # 4 pages and a bit per rank
    with tut.ManagedArray(lib, n) as m:
        m.array[:] = 1.0
        team.scale_shift_managed(m, 2.0, 1.0)
        for r, (first, length) in enumerate(parts(n, N)):
            lo = -(-(m.address + 4 * first) // page) * page
            hi = (m.address + 4 * (first + length)) // page * page
            if hi <= lo:
                continue
            pref, pre = I(0), I(0)
            c_api(lib).managed_where(lo, hi - lo, ctypes.byref(pref), ctypes.byref(pre))
            d = team.devs[r]
            if (pref.value, pre.value) != (d, d):
                raise AssertionError(
                    f"devices {team.devs}, n={n}: the pages of rank {r}'s part have preferred "
                    f"location {pref.value} and were last prefetched to {pre.value} (-2: not "
                    f"all the same, or none), want device {d} for both: advise and prefetch "
                    f"the whole part (its bytes, not its floats) to its own device")
        tut.assert_equal(m.array, np.full(n, 3.0, np.float32), name=f"devices {team.devs}, n={n}")


@CH.exercise(5, "ring_allreduce: reduce-scatter then all-gather over peer copies, 1..N devices")
@per_device_balanced
def test_ring_allreduce(ctx):
    lib = ctx.lib
    sizes = [1, 2, 5, 1000, 100_003] + ([(1 << 22) + 7] if ctx.large else [])
    lists = device_lists(lib)
    if device_count(lib) < 2:
        tut.note(f"only the one-rank ring ran: {device_count(lib)} device here")
    for devs in lists:
        peer_enable_all_reference(lib, devs)
        for n in sizes:
            with Team(lib, devs, -(-n // len(devs))) as team, RankBuffers(lib, devs, n) as bufs:
                for kind in ("integers", "floats"):
                    if kind == "integers":   # exact in float32 in any order: equal, not close
                        inputs = [ctx.rng.integers(-1000, 1000, n).astype(np.float32)
                                  for _ in devs]
                    else:
                        inputs = [tut.random_f32(ctx.rng, n) for _ in devs]
                    bufs.upload(inputs)
                    team.allreduce(bufs)
                    got = bufs.download()
                    want = np.sum(np.stack(inputs).astype(np.float64), axis=0)
                    for r, g in enumerate(got):
                        name = f"devices {devs}, n={n}, rank {r}, {kind}"
                        if kind == "integers":
                            tut.assert_equal(g, want.astype(np.float32), name=name)
                        else:
                            tut.assert_close(g, want, rtol=1e-5, atol=1e-5 * len(devs),
                                             name=name)
                    for r, g in enumerate(got[1:], 1):   # one sum, copied: the same bits
                        if not np.array_equal(g.view(np.uint32), got[0].view(np.uint32)):
                            raise AssertionError(f"devices {devs}, n={n}: rank {r}'s result "
                                                 f"differs from rank 0's in its bits: each "
                                                 f"chunk is summed once and then copied")
                if ctx.backend == "cpu" and n == 1000 and len(devs) > 1:
                    check_ring_log(lib, team, bufs, devs)
        peer_access_off(lib)


def peer_enable_all_reference(lib, devs):
    """Peer access among devs, done here (not by 09.1, which may not be solved yet)."""
    for i in devs:
        for j in devs:
            if i != j and can_access(lib, i, j) and not peer_enabled(lib, i, j):
                c_api(lib).peer_enable(i, j)


def check_ring_log(lib, team, bufs, devs):
    """CPU backend: each rank's work on its own stream: 2(N-1) copies, N-1 additions, a wait
    for its neighbour before every copy, and nothing through the host."""
    N = len(devs)
    ops = tut.stream_log(lib, lambda: team.allreduce(bufs), detail=True)
    check_stream_use(lib, team, ops, lambda r: {COPY: 2 * (N - 1), KERNEL: N - 1},
                     f"ring over devices {devs}")
    for r, sid in enumerate(team._ids):
        mine = [k for s, k, _ in ops if s == sid and k in (COPY, WAIT_EVENT)]
        for i, k in enumerate(mine):
            if k == COPY and (i == 0 or mine[i - 1] != WAIT_EVENT):
                raise AssertionError(f"ring over devices {devs}: rank {r} copied from its "
                                     f"neighbour without waiting for its event first "
                                     f"(cudaStreamWaitEvent): it may read a chunk before the "
                                     f"neighbour has finished adding into it")


# ---- checks of the lesson's other claims -----------------------------------------------------
@CH.check("devices", "each device: its name, PCI address, memory and current-device rules")
@per_device_balanced
def test_devices(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    n = device_count(lib)
    infos = [describe(lib, d) for d in range(n)]
    if len({i.pci for i in infos}) != n:
        raise AssertionError(f"two devices share a PCI address: {[i.pci for i in infos]}")
    for d, info in enumerate(infos):
        assert info.name and info.total > 0 and 0 < info.free <= info.total, info
        with on_device(lib, d):
            assert get_device(lib) == d
    tut.expect_cuda_error(lib, "cudaErrorInvalidDevice", lambda: api.set_device(n),
                          f"cudaSetDevice({n}) with {n} device(s)")
    if n < 2:
        tut.note("memory accounting per device not tried: it needs 2 devices")
        return
    # cudaMalloc takes memory from the current device only, and says where it lives.
    before = mem_used_all(lib)
    with on_device(lib, 1), tut.DeviceBuffer(lib, 8 * MiB) as buf:
        during = mem_used_all(lib)
        if pointer_device(lib, buf.ptr) != 1:
            raise AssertionError(f"a cudaMalloc with device 1 current is on device "
                                 f"{pointer_device(lib, buf.ptr)}")
    if during[1] - before[1] < 8 * MiB or during[0] - before[0] >= 8 * MiB:
        raise AssertionError(f"8 MiB allocated on device 1: used went from {before} to "
                             f"{during}")


@CH.check("topology", "cudaDeviceCanAccessPeer and cudaDeviceGetP2PAttribute, as a matrix")
def test_topology(ctx):
    lib = ctx.lib
    n = device_count(lib)
    access, rank, atomics = topology(lib)
    assert access.shape == (n, n) and not np.diag(access).any()
    for i in range(n):
        for j in range(n):
            if i != j and bool(access[i, j]) != can_access(lib, i, j):
                raise AssertionError(f"topology()[{i}][{j}] = {access[i, j]} but "
                                     f"cudaDeviceCanAccessPeer says {can_access(lib, i, j)}")
    off = ~np.eye(n, dtype=bool)
    if (rank[off] < 0).any() or not set(np.unique(atomics[off]).tolist()) <= {0, 1}:
        raise AssertionError(f"performance ranks {rank.tolist()}, atomics {atomics.tolist()}")


@CH.check("peer-errors", "peer access: already enabled, not enabled, self, no such device")
@per_device_balanced
def test_peer_errors(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    n = device_count(lib)
    peer_access_off(lib)
    # one device is enough for these; as an H200 answered (CUDA 13.0, driver 580, 2026-12-04):
    # the device itself is "peer access unsupported" (217) to enable and "not enabled" (705)
    # to disable, not an invalid device
    tut.expect_cuda_error(lib, "cudaErrorPeerAccessUnsupported", lambda: api.peer_enable(0, 0),
                          "peer access from a device to itself")
    tut.expect_cuda_error(lib, "cudaErrorPeerAccessNotEnabled", lambda: api.peer_disable(0, 0),
                          "disabling peer access from a device to itself")
    tut.expect_cuda_error(lib, "cudaErrorInvalidDevice", lambda: api.peer_enable(0, n),
                          f"peer access to device {n}, which does not exist")
    if lib.clear_last_error() != 0:
        raise AssertionError("cudaGetLastError did not clear")
    if n < 2:
        raise tut.Skip(f"the one-device checks passed (the device itself: 217 to enable, 705 "
                       f"to disable; device {n}: 101); the rest needs 2 devices, there is {n}")
    if not can_access(lib, 0, 1):
        raise tut.Skip("device 0 cannot access device 1 here (cudaDeviceCanAccessPeer = 0)")
    api.peer_enable(0, 1)
    tut.expect_cuda_error(lib, "cudaErrorPeerAccessAlreadyEnabled",
                          lambda: api.peer_enable(0, 1), "enabling 0 -> 1 twice")
    if peer_enabled(lib, 1, 0):
        raise AssertionError("enabling 0 -> 1 also enabled 1 -> 0: it is one direction")
    api.peer_disable(0, 1)
    tut.expect_cuda_error(lib, "cudaErrorPeerAccessNotEnabled",
                          lambda: api.peer_disable(0, 1), "disabling 0 -> 1 twice")
    if lib.clear_last_error() != 0:
        raise AssertionError("cudaGetLastError did not clear")


ACCESS_NONE, ACCESS_RW = 0, 3   # cudaMemAccessFlagsProtNone, cudaMemAccessFlagsProtReadWrite


def pool_access(lib, owner, reader):
    f = I(-1)
    c_api(lib).pool_access_get(owner, reader, ctypes.byref(f))
    return f.value


@CH.check("pool-access", "pool memory across devices: cudaMemPoolSetAccess, not peer access")
@per_device_balanced
def test_pool_access(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    if pool_access(lib, 0, 0) != ACCESS_RW:
        raise AssertionError("a device's own default pool is not read-write for it")
    # the owner's access cannot be taken away: an H200 answered cudaErrorInvalidDevice
    tut.expect_cuda_error(lib, "cudaErrorInvalidDevice",
                          lambda: c_api(lib).pool_access_set(0, 0, ACCESS_NONE),
                          "taking device 0's access to its own pool away")
    lib.clear_last_error()
    if device_count(lib) < 2:
        raise tut.Skip(f"the owner's checks passed; a second device's access to the pool needs "
                       f"2 devices, there is {device_count(lib)}")
    if not can_access(lib, 0, 1):
        raise tut.Skip("device 0 cannot access device 1 here (cudaDeviceCanAccessPeer = 0)")
    n = 100_003
    x = tut.random_f32(ctx.rng, n)
    raw = P()
    api.pool_alloc_on(1, 4 * n, ctypes.byref(raw))   # from device 1's default pool
    try:
        with on_device(lib, 1):
            lib.htod(raw, tut.ptr(x), 4 * n)
            lib.synchronize()
        api.peer_enable(0, 1)
        if pool_access(lib, 1, 0) != ACCESS_NONE:
            raise AssertionError("peer access 0 -> 1 opened device 1's pool to device 0: it "
                                 "covers cudaMalloc memory only")
        if ctx.backend == "cpu":   # on a GPU this is an illegal address: the context is lost
            result, stderr = tut.run_child(__file__, "child_pool_without_access")
            if result.get("error") != "cudaErrorIllegalAddress" or \
                    "cudaMemPoolSetAccess" not in result.get("message", "") + stderr:
                raise AssertionError(f"a kernel on device 0 reading device 1's pool memory with "
                                     f"peer access but no pool access gave {result}, want "
                                     f"cudaErrorIllegalAddress naming cudaMemPoolSetAccess")
        api.pool_access_set(1, 0, ACCESS_RW)
        try:
            if pool_access(lib, 1, 0) != ACCESS_RW:
                raise AssertionError("cudaMemPoolSetAccess(read-write) did not hold")
            with on_device(lib, 0):
                d_y = tut.DeviceBuffer(lib, 4 * n)
            try:
                api.peer_scale(0, d_y.ptr, raw, n, 3.0)
                with on_device(lib, 0):
                    tut.assert_close(d_y.download(np.float32, n), 3.0 * x.astype(np.float64),
                                     rtol=1e-6, atol=1e-6,
                                     name="y on device 0 = 3 * x from device 1's pool")
            finally:
                with on_device(lib, 0):
                    d_y.free()
        finally:
            api.pool_access_set(1, 0, ACCESS_NONE)
        if pool_access(lib, 1, 0) != ACCESS_NONE:
            raise AssertionError("cudaMemPoolSetAccess(none) did not take the access back")
    finally:
        api.pool_free_on(1, raw)


def child_pool_without_access():
    """Device 0 reads device 1's pool memory with peer access on but no pool access (the
    emulator only: on a GPU it is an illegal address). RESULT {error, message}."""
    lib = tut.load_chapter(CH.name)
    api = c_api(lib)
    raw, y = P(), P()
    api.pool_alloc_on(1, 4096, ctypes.byref(raw))
    with on_device(lib, 0):
        lib.malloc_raw(ctypes.byref(y), 4096)
    api.peer_enable(0, 1)
    try:
        api.peer_scale(0, y, raw, 1024, 2.0)
        out = {"error": "none"}
    except tut.CudaError as e:
        out = {"error": e.name, "message": str(e)}
    return tut.child_result(out)


@CH.check("peer-kernel", "a kernel on device 0 reads device 1's memory, with peer access")
@per_device_balanced
def test_peer_kernel(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    need_devices(lib, 2)
    if not can_access(lib, 0, 1):
        raise tut.Skip("device 0 cannot access device 1 here (cudaDeviceCanAccessPeer = 0)")
    n = 100_003
    x = tut.random_f32(ctx.rng, n)
    api.peer_enable(0, 1)
    with on_device(lib, 1):
        d_x = tut.DeviceBuffer.from_array(lib, x)
        lib.synchronize()   # device 0's kernel does not wait for device 1's streams
    with on_device(lib, 0):
        d_y = tut.DeviceBuffer(lib, 4 * n)
    try:
        api.peer_scale(0, d_y.ptr, d_x.ptr, n, 3.0)
        with on_device(lib, 0):
            tut.assert_close(d_y.download(np.float32, n), 3.0 * x.astype(np.float64),
                             rtol=1e-6, atol=1e-6, name="y on device 0 = 3 * x on device 1")
            d_y.check_guards()
    finally:
        with on_device(lib, 0):
            d_y.free()
        with on_device(lib, 1):
            d_x.free()
    if ctx.backend != "cpu":
        tut.note("the same kernel without peer access was not run on the GPU: it is an "
                 "illegal address there, which ends the process's CUDA context")
        return
    result, stderr = tut.run_child(__file__, "child_peer_without_access")
    if result.get("error") != "cudaErrorIllegalAddress":
        raise AssertionError(f"a kernel on device 0 reading device 1's memory without peer "
                             f"access gave {result}, want cudaErrorIllegalAddress")
    if "cudaDeviceEnablePeerAccess" not in result.get("message", "") + stderr:
        raise AssertionError(f"the emulator's report does not name cudaDeviceEnablePeerAccess:"
                             f"\n{result.get('message', '')}\n{stderr[-1500:]}")


def child_peer_without_access():
    """In a process of its own (the fault ends its CUDA context): the kernel of peer-kernel
    with peer access off. Prints RESULT {error, message}."""
    lib = tut.load_chapter(CH.name)
    api = c_api(lib)
    n = 1000
    with on_device(lib, 1):
        d_x = tut.DeviceBuffer.from_array(lib, np.ones(n, np.float32))
        lib.synchronize()
    with on_device(lib, 0):
        d_y = tut.DeviceBuffer(lib, 4 * n)
    try:
        api.peer_scale(0, d_y.ptr, d_x.ptr, n, 3.0)
        out = {"error": "none"}
    except tut.CudaError as e:
        out = {"error": e.name, "message": str(e)}
    return tut.child_result(out)


@CH.check("peer-copy", "cudaMemcpyPeer(Async) and cudaMemcpyDefault, with and without access")
@per_device_balanced
def test_peer_copy(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    need_devices(lib, 2)
    for access in (False, True):
        if access:
            peer_enable_all_reference(lib, [0, 1])
        for nbytes in (1, 4097, 1_000_003):
            src_host = ctx.rng.integers(0, 256, nbytes, dtype=np.uint8)
            with on_device(lib, 1):
                src = tut.DeviceBuffer.from_array(lib, src_host)
                lib.synchronize()   # a stream of device 0 does not wait for device 1's
            with on_device(lib, 0):
                dst = tut.DeviceBuffer(lib, nbytes)
            try:
                for how, name in ((0, "cudaMemcpyPeer"), (1, "cudaMemcpyPeerAsync"),
                                  (2, "cudaMemcpy(cudaMemcpyDefault)")):
                    with on_device(lib, 0):
                        lib.memset(dst.ptr, tut.POISON_BYTE, nbytes)
                        lib.synchronize()   # cudaMemset may run after it returns
                    api.peer_copy(dst.ptr, 0, src.ptr, 1, nbytes, how)
                    with on_device(lib, 0):
                        tut.assert_equal(dst.download(np.uint8, nbytes), src_host,
                                         name=f"{name} of {nbytes} bytes, device 1 -> 0, "
                                              f"peer access {'on' if access else 'off'}")
                        dst.check_guards()
            finally:
                with on_device(lib, 0):
                    dst.free()
                with on_device(lib, 1):
                    src.free()
    tut.expect_raises(ValueError, lambda: api.peer_copy(None, 0, None, 1, 0, 3), "how = 3")


IPC_HANDLE_SIZE = 64                          # CUDA_IPC_HANDLE_SIZE


@CH.check("ipc", "CUDA IPC: another process scales this process's device memory in place",
          full="it starts a second Python process with a CUDA context of its own")
@per_device_balanced
def test_ipc(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    n = 1_000_003
    x = tut.random_f32(ctx.rng, n)
    raw = P()
    lib.malloc_raw(ctypes.byref(raw), 4 * n)   # a whole allocation: what a handle shares
    try:
        lib.htod(raw, tut.ptr(x), 4 * n)
        lib.synchronize()   # landed before another process reads it
        handle = np.zeros(IPC_HANDLE_SIZE, np.uint8)
        supported = True
        try:
            api.ipc_export(raw, tut.ptr(handle))
        except tut.CudaError as e:
            if e.name != "cudaErrorNotSupported":
                raise
            lib.clear_last_error()
            supported = False
        if not supported:   # raised here, not in the except: the skip, not the error, is the news
            raise tut.Skip("CUDA IPC is not supported here (the emulator's devices live in one "
                           "process): it runs on a GPU")
        importers = [0] + ([1] if device_count(lib) >= 2 and can_access(lib, 1, 0) else [])
        want = x.astype(np.float64)
        for dev in importers:
            os.environ["TUT_IPC_CHILD"] = json.dumps({"handle": handle.tobytes().hex(),
                                                      "dev": dev, "n": n})
            try:
                result, stderr = tut.run_child(__file__, "child_ipc")
            finally:
                os.environ.pop("TUT_IPC_CHILD", None)
            if result.get("error") != "none":
                raise AssertionError(f"the importing process (device {dev}) failed: {result}\n"
                                     f"{stderr[-1500:]}")
            want = want * 3.0
        got = np.empty(n, np.float32)
        lib.dtoh(tut.ptr(got), raw, 4 * n)
        tut.assert_close(got, want, rtol=1e-6, atol=1e-6,
                         name=f"scaled by 3 in {len(importers)} other process(es)")
    finally:
        lib.free_raw(raw)


def child_ipc():
    """The importing process of 09.ipc: opens the handle, scales by 3, closes. RESULT {error}."""
    args = json.loads(os.environ["TUT_IPC_CHILD"])
    lib = tut.load_chapter(CH.name)
    handle = np.frombuffer(bytes.fromhex(args["handle"]), np.uint8).copy()
    try:
        c_api(lib).ipc_import_scale(tut.ptr(handle), args["dev"], args["n"], 3.0)
        out = {"error": "none"}
    except tut.CudaError as e:
        out = {"error": e.name, "message": str(e)}
    return tut.child_result(out)


@CH.check("nccl", "NCCL's all-reduce gives the ring's sums, exactly, on 1..N devices",
          full="it sets up NCCL")
@per_device_balanced
def test_nccl(ctx):
    lib = ctx.lib
    need_nccl(lib)
    for devs in device_lists(lib):
        for n in (1, 1000, 100_003):
            with Team(lib, devs) as team, RankBuffers(lib, devs, n) as bufs:
                inputs = [ctx.rng.integers(-1000, 1000, n).astype(np.float32) for _ in devs]
                bufs.upload(inputs)
                team.allreduce(bufs, nccl=True)
                want = np.sum(np.stack(inputs).astype(np.float64), axis=0).astype(np.float32)
                for r, g in enumerate(bufs.download()):
                    tut.assert_equal(g, want, name=f"NCCL, devices {devs}, n={n}, rank {r}")


NCCL_ID_BYTES = 128                           # NCCL_UNIQUE_ID_BYTES


def nccl_unique_id(lib):
    buf = (ctypes.c_ubyte * NCCL_ID_BYTES)()
    c_api(lib).nccl_unique_id(buf)
    return bytes(buf)


def nccl_rank(lib, uid, nranks, rank, dev, x, barrier=None):
    """One rank's all-reduce of x (float32, in place): joins the communicator uid names.
    barrier: a threading.Barrier the ranks of one process pass once their call is queued (the
    emulator needs it, see nccl_rank_allreduce)."""
    buf = (ctypes.c_ubyte * NCCL_ID_BYTES).from_buffer_copy(uid)
    queued = NCCL_QUEUED(lambda r: barrier.wait(timeout=60)) if barrier else NCCL_QUEUED()
    c_api(lib).nccl_rank_allreduce(buf, nranks, rank, dev, tut.ptr(x), x.size, queued)
    return x


def run_ranks(fn, nranks):
    """fn(rank) for every rank at once, each in a thread of its own (a rank's
    ncclCommInitRank returns only once every rank has called it); the first error raised."""
    errors = [None] * nranks

    def one(r):
        try:
            fn(r)
        except BaseException as e:   # re-raised below, in the caller's thread
            errors[r] = e
    threads = [threading.Thread(target=one, args=(r,)) for r in range(nranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e


@CH.check("nccl-ranks", "NCCL one rank per thread and per process: ncclGetUniqueId, ncclCommInitRank",
          full="it sets up NCCL, in threads and in processes")
@per_device_balanced
def test_nccl_ranks(ctx):
    lib = ctx.lib
    need_nccl(lib)
    nranks = min(device_count(lib), TEAM_MAX)
    n = 100_003
    want = np.sum(np.stack([rank_input(r, n) for r in range(nranks)]).astype(np.float64),
                  axis=0).astype(np.float32)
    # one thread per rank in this process: what the emulator can do (its devices live in one
    # process); the unique id is handed to each thread
    uid = nccl_unique_id(lib)
    outs = [rank_input(r, n) for r in range(nranks)]
    barrier = threading.Barrier(nranks)
    run_ranks(lambda r: nccl_rank(lib, uid, nranks, r, r, outs[r], barrier), nranks)
    for r, got in enumerate(outs):
        tut.assert_equal(got, want, name=f"one thread per rank, {nranks} rank(s), rank {r}")
    if ctx.backend == "cpu":
        tut.note("one process per rank runs on a GPU only: the emulator's devices, and its "
                 "NCCL's ranks, live in one process, so a rank in another process would "
                 "never meet the others")
        return
    # one process per GPU, the way training jobs run: the id travels on the command line
    uid = nccl_unique_id(lib)
    results = [None] * nranks

    def rank_process(r):
        results[r], _ = tut.run_child(__file__, "child_nccl_rank", uid.hex(), nranks, r, n)
    run_ranks(rank_process, nranks)
    total = float(want.astype(np.float64).sum())
    for r, res in enumerate(results):
        if res.get("error") != "none":
            raise AssertionError(f"rank {r}'s process failed: {res}")
        tut.assert_equal(np.asarray(res["head"], np.float32), want[:16],
                         name=f"one process per GPU, rank {r} of {nranks}, first 16 sums")
        if res["sum"] != total:
            raise AssertionError(f"rank {r}'s process: its sums add up to {res['sum']}, want "
                                 f"{total}")
    tut.note(f"{nranks} process(es), one per GPU, each ncclCommInitRank with the id made here")


def rank_input(rank, n):
    """What rank r's process sums in: integers, so every order of the sum is exact."""
    return np.random.default_rng(1000 + rank).integers(-1000, 1000, n).astype(np.float32)


def child_nccl_rank(uid_hex, nranks, rank, n):
    """Rank `rank` of `nranks` in a process of its own, on device `rank`. RESULT {error,
    head (the first 16 sums), sum (of every element, as float64)}."""
    lib = tut.load_chapter(CH.name)
    nranks, rank, n = int(nranks), int(rank), int(n)
    x = rank_input(rank, n)
    try:
        nccl_rank(lib, bytes.fromhex(uid_hex), nranks, rank, rank, x)
        out = {"error": "none", "head": x[:16].tolist(), "sum": float(x.astype(np.float64).sum())}
    except (tut.CudaError, tut.LibraryError) as e:
        out = {"error": type(e).__name__, "message": str(e)}
    return tut.child_result(out)


@CH.check("bad-input", "bad devices, teams and buffers: Python errors before CUDA")
@per_device_balanced
def test_bad_input(ctx):
    lib, api = ctx.lib, c_api(ctx.lib)
    n = device_count(lib)
    for bad, exc, what in (
            (lambda: Team(lib, []), ValueError, "no devices"),
            (lambda: Team(lib, [0, 0]), ValueError, "a device twice"),
            (lambda: Team(lib, [n]), ValueError, "a device that does not exist"),
            (lambda: Team(lib, [-1]), ValueError, "device -1"),
            (lambda: Team(lib, [0.5]), TypeError, "a float device"),
            (lambda: RankBuffers(lib, [0], 0), ValueError, "0 floats")):
        tut.expect_raises(exc, bad, what)
    h = P()
    tut.expect_raises(ValueError, lambda: api.team_create(ctypes.byref(h), (I * 2)(0, 0), 2, 0),
                      "C: a device twice")
    assert h.value is None
    with Team(lib, [0], 16) as team, RankBuffers(lib, [0], 100) as bufs:
        tut.expect_raises(TypeError, lambda: team.scale_shift(np.ones(5), 1.0, 0.0),
                          "float64 x")
        tut.expect_raises(TypeError, lambda: team.scale_shift_managed(np.ones(5, np.float32),
                                                                      1.0, 0.0),
                          "a NumPy array for managed memory")
        with RankBuffers(lib, [0], 100) as other:
            other.devs = [n]   # a RankBuffers of another team
            tut.expect_raises(ValueError, lambda: team.allreduce(other), "foreign buffers")
            other.devs = [0]
    tut.expect_raises(ValueError, lambda: team.probe(0), "a team used after close()")
    if n >= 2:
        with Team(lib, [0, 1], 10) as team, RankBuffers(lib, [0, 1], 100) as bufs:
            tut.expect_raises(ValueError, lambda: team.allreduce(bufs), "scratch too small")


# ---- demo and benchmark -----------------------------------------------------------------------
def demo(lib):
    n = device_count(lib)
    print(f"{n} device(s), backend {lib.backend}"
          + (f" (the emulator: CUEMU_DEVICES={os.environ.get('CUEMU_DEVICES')})"
             if lib.backend == "cpu" else ""))
    for d in range(n):
        i = describe(lib, d)
        print(f"  device {d}: {i.name}, PCI {i.pci[0]:04x}:{i.pci[1]:02x}:{i.pci[2]:02x}, "
              f"{i.free / GiB:.2f} of {i.total / GiB:.2f} GiB free")
    access, _, _ = topology(lib)
    print("\ncan access peer (row: from, column: to):")
    print("\n".join("  " + " ".join(str(v) for v in row) for row in access))
    devs = list(range(min(n, TEAM_MAX)))
    m = 10
    with Team(lib, devs, -(-m // len(devs))) as team, RankBuffers(lib, devs, m) as bufs:
        inputs = [np.full(m, r + 1, np.float32) for r in devs]
        bufs.upload(inputs)
        print(f"\nring all-reduce over devices {devs}: rank r starts with {m} x (r + 1)")
        try:
            team.allreduce(bufs)
            print(f"  every rank now holds {bufs.download()[0][:4]}... (the sum "
                  f"{sum(d + 1 for d in devs)})")
        except tut.ExerciseNotDone as e:
            print(f"  {e}")
    print("\nNext: make check CH=09 (the tests of your exercises); make run CH=09 ARGS=--bench")


def _size(nbytes):
    if nbytes >= GiB:
        return f"{nbytes >> 30} GiB"
    return f"{nbytes >> 20} MiB" if nbytes >= MiB else (f"{nbytes >> 10} KiB" if nbytes >= KiB
                                                        else f"{nbytes} B")


def bench(lib):
    b = tut.Bench(lib, "09 multi gpu")
    gpu = lib.backend == "gpu"
    n = device_count(lib)
    for d in range(n):
        i = describe(lib, d)
        print(f"  device {d}: {i.name}, PCI {i.pci[0]:04x}:{i.pci[1]:02x}:{i.pci[2]:02x}")
    access, rank, atomics = topology(lib)
    print("  cudaDeviceCanAccessPeer / P2P performance rank / native atomics, [from][to]:")
    for i in range(n):
        print("   " + "  ".join(f"{access[i, j]}/{rank[i, j]}/{atomics[i, j]}" if i != j
                                else "  -  " for j in range(n)))
    if gpu and shutil.which("nvidia-smi"):
        try:
            topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                                  timeout=30).stdout
            print("  nvidia-smi topo -m:\n" + "\n".join("    " + line
                                                       for line in topo.splitlines()))
        except (OSError, subprocess.SubprocessError) as e:
            print(f"  nvidia-smi topo -m failed: {e}")
    ceiling = b.d2d_copy_gbps(256 * MiB if gpu else 4 * MiB)
    if n >= 2:
        _bench_peer(lib, b, gpu, ceiling)
    else:
        print(f"  copies between devices: not measured, needs 2 GPUs, this machine has {n}")
    _bench_allreduce(lib, b, gpu, n)


def _bench_peer(lib, b, gpu, ceiling):
    api = c_api(lib)
    # A peer copy's GB/s counts the bytes copied, once (read on one device, written on the
    # other); the local copy's ceiling counts bytes read plus written. Held against each
    # other in one convention: the local copy's rate of bytes copied, half its ceiling.
    copied = ceiling / 2
    sizes = [4, 64 * KiB, MiB, 16 * MiB, 256 * MiB] if gpu else [4, 64 * KiB, MiB]
    table = {}
    for access in (False, True):
        peer_access_off(lib)
        if access:
            peer_enable_all_reference(lib, [0, 1])
        for size in sizes:
            for dst, src in ((1, 0), (0, 1)):
                reps = 20 if size <= 16 * MiB else 10
                ms = tut.median_ms(lambda r, t: api.bench_peer_read(dst, src, size, 0, r, t), reps)
                table[(size, src, dst, access)] = ms
    peer_access_off(lib)
    print(f"  {'size':>8}  {'0->1 off':>10}  {'1->0 off':>10}  {'0->1 on':>10}  {'1->0 on':>10}"
          f"   (GB/s; at 4 B: us per copy)")
    for size in sizes:
        cells = []
        for access in (False, True):
            for src, dst in ((0, 1), (1, 0)):
                ms = table[(size, src, dst, access)]
                label = f"peer copy {src}->{dst}, {_size(size)}, peer access " + \
                    ("on" if access else "off")
                if size == 4:
                    cells.append(f"{ms * 1e3:10.1f}")
                    b.add(label, ms * 1e3, "us")
                else:
                    gbps = size / (ms * 1e-3) / 1e9
                    cells.append(f"{gbps:10.2f}")
                    b.add(label, gbps, "GB/s", gbps / copied)
        print(f"  {_size(size):>8}  " + "  ".join(cells))
    top = sizes[-1]
    on = top / (table[(top, 0, 1, True)] * 1e-3) / 1e9
    off = top / (table[(top, 0, 1, False)] * 1e-3) / 1e9
    b.row(f"peer copy 0->1, {_size(top)}, peer access on (ratio: to a local copy)", on, "GB/s",
          copied)
    b.row(f"peer copy 0->1, {_size(top)}, peer access off (ratio: to a local copy)", off,
          "GB/s", copied)
    b.figure(f"peer access on / off, 0->1, {_size(top)}", on / off, "x")
    # A kernel on device 1 loading device 0's memory over the link, against the copy engine.
    peer_enable_all_reference(lib, [0, 1])
    ms = tut.median_ms(lambda r, t: api.bench_peer_read(1, 0, top, 1, r, t), 10)
    peer_access_off(lib)
    pull = top / (ms * 1e-3) / 1e9
    b.row(f"kernel on 1 loading 0's memory, {_size(top)} (ratio: to the copy)", pull, "GB/s",
          on)
    b.figure("peer copy latency, 4 B, 0->1, peer access on", table[(4, 0, 1, True)] * 1e3, "us")


def _bench_allreduce(lib, b, gpu, n):
    api = c_api(lib)
    have_nccl = nccl_version(lib) != 0
    if not have_nccl:
        print("  NCCL: not in this build (see tools/find_nccl.sh): the ring runs alone")
    else:
        v = nccl_version(lib)
        print(f"  NCCL {v // 10000}.{v // 100 % 100}.{v % 100}, NVLS (NVLink SHARP) "
              f"{'off' if os.environ.get('NCCL_NVLS_ENABLE') == '0' else 'as NCCL chooses'}"
              f" (NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', 'unset')})")
    top = GiB if gpu else MiB
    sizes = [4 * KiB << (2 * k) for k in range(10) if (4 * KiB << (2 * k)) <= top]
    for ndev in sorted({1, min(n, TEAM_MAX)}):
        devs = list(range(ndev))
        factor = 2 * (ndev - 1) / ndev
        peer_enable_all_reference(lib, devs)
        print(f"\n  all-reduce of float32, in place, over {ndev} device(s); bus bandwidth = "
              f"algorithm bandwidth x 2(n-1)/n = x {factor:.2f} (as NCCL's tests report it)")
        print(f"  {'size':>8}  {'ring ms':>9}  {'ring busbw':>10}  {'NCCL ms':>9}  "
              f"{'NCCL busbw':>10}  {'ring/NCCL':>9}   (busbw in GB/s)")
        try:
            with Team(lib, devs, -(-(top // 4) // ndev)) as team, \
                    RankBuffers(lib, devs, top // 4) as bufs:
                bufs.upload([np.full(top // 4, r + 1, np.float32) for r in devs])
                for size in sizes:
                    count = size // 4
                    reps = 20 if size <= 16 * MiB else 5
                    row = {}
                    for which, name in ((0, "ring"), (1, "NCCL")):
                        if which == 1 and not have_nccl:
                            continue
                        try:
                            row[name] = tut.median_ms(lambda r, t: api.bench_allreduce(
                                team.handle, bufs.pointers(), count, ndev, which, r, t), reps)
                        except tut.LibraryError as e:   # NCCL's own failure: say it, go on
                            print(f"  {name}: {e}")
                            have_nccl = False
                    cells = []
                    for name in ("ring", "NCCL"):
                        if name not in row:
                            cells += [f"{'-':>9}", f"{'-':>10}"]
                            continue
                        busbw = size / (row[name] * 1e-3) / 1e9 * factor
                        cells += [f"{row[name]:9.3f}",
                                  f"{busbw:10.2f}" if ndev > 1 else f"{'-':>10}"]
                        b.add(f"{name} all-reduce, {ndev} device(s), {_size(size)}", row[name],
                              "ms")
                        if ndev > 1:
                            b.add(f"{name} all-reduce busbw, {ndev} device(s), {_size(size)}",
                                  busbw, "GB/s")
                    ratio = row["NCCL"] / row["ring"] if len(row) == 2 else None
                    cells.append(f"{ratio:9.2f}" if ratio else f"{'-':>9}")
                    if ratio:
                        b.add(f"ring speed / NCCL speed, {ndev} device(s), {_size(size)}",
                              ratio, "x")
                    print(f"  {_size(size):>8}  " + "  ".join(cells))
        except tut.ExerciseNotDone as e:
            print(f"  ring: {e} (solve 09.5, or run on TUT_TREE=solutions)")
        finally:
            peer_access_off(lib)
    if n < 2:
        print(f"  the all-reduce across devices was not measured: needs 2 GPUs, this machine "
              f"has {n}")


def warm_up(lib):
    """What CUDA sets up once per process and device (a context on each device the first time
    it is current, peer mappings, a pool's first block, NCCL's communicators) would show as a
    leak of the first test that did it: do each once, before any test measures. Lesson code
    only, no exercise."""
    n = device_count(lib)
    mem_used_all(lib)   # a context on every device
    devs = list(range(min(n, TEAM_MAX)))
    peer_enable_all_reference(lib, devs)
    peer_access_off(lib)
    for d in devs:
        with tut.ManagedArray(lib, 1 << 20) as m:
            m.array[:] = 1.0
            c_api(lib).managed_touch(m.address, m.array.size, d)
            float(m.array.sum())
    # (a quick make check on a GPU leaves the NCCL checks out: nothing to warm up for them)
    if nccl_version(lib) and not tut.quick_check(lib.backend):
        for group in ([0], devs):
            try:
                with Team(lib, group) as team, RankBuffers(lib, group, 1024) as bufs:
                    team.allreduce(bufs, nccl=True)
            except (tut.CudaError, tut.LibraryError) as e:
                print(f"warm-up: NCCL on devices {group} failed: {e}", file=sys.stderr)
    lib.clear_last_error()   # what the set-up left (a handled error) is no test's failure


if __name__ == "__main__":
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
