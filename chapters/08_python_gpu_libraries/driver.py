# SPDX-License-Identifier: MIT
"""Chapter 08 python_gpu_libraries: one GPU memory, many libraries, no copies.

    python3 driver.py            the lesson's demo: an export and what each library sees of it
    python3 driver.py --check    the tests (make check runs each exercise on its own)
    python3 driver.py --bench    the cost of an exchange, allocation loops, the seed's matmul

CuPy, PyTorch, Numba and cuda.core are used where they are installed and a GPU is there; none is
a requirement. Each check that needs one skips (exit code 77) and names what is missing.
"""
import ctypes
import functools
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402
import numpy as np  # noqa: E402

CH = tut.Chapter(8, "08_python_gpu_libraries")
I, F, P, Z = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t
LL, ULL = ctypes.c_longlong, ctypes.c_ulonglong
MAX_DIMS = 4
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3
KDL_FLOAT = 2
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2
STREAM_LEGACY, STREAM_PER_THREAD = 1, 2      # what both protocols write for the default streams
BP_STATS = ("cuda_mallocs", "cuda_frees", "allocs", "frees", "hits", "in_use", "cached",
            "stream_waits")


# ---- the C structures, field for field ---------------------------------------------------------
class XView(ctypes.Structure):
    """xview in python_gpu_libraries.cu: a strided float32 view, strides in elements."""
    _fields_ = [("data", ULL), ("ndim", I), ("shape", LL * MAX_DIMS),
                ("strides", LL * MAX_DIMS)]

    def dims(self):
        return tuple(self.shape[:self.ndim]), tuple(self.strides[:self.ndim])


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", P), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


DL_DELETER = ctypes.CFUNCTYPE(None, P)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", P), ("deleter", DL_DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


@functools.cache
def c_api(lib):
    """Each C function declared once, next to its prototype."""
    XP = ctypes.POINTER(XView)
    return SimpleNamespace(
        # int xbuf_create(size_t bytes, int on_host, struct xbuf **out)
        xbuf_create=lib.bind("xbuf_create", [Z, I, ctypes.POINTER(P)]),
        # int xbuf_retain(struct xbuf *b)
        xbuf_retain=lib.bind("xbuf_retain", [P]),
        # int xbuf_release(struct xbuf *b)
        xbuf_release=lib.bind("xbuf_release", [P]),
        # int xbuf_info(struct xbuf *b, unsigned long long *ptr, int *refs, int *device)
        xbuf_info=lib.bind("xbuf_info", [P, ctypes.POINTER(ULL), ctypes.POINTER(I),
                                         ctypes.POINTER(I)]),
        # int cai_strides(const xview *v, long long *strides_bytes, int *c_contiguous)
        cai_strides=lib.bind("cai_strides", [XP, ctypes.POINTER(LL), ctypes.POINTER(I)],
                             out=(1, 2)),
        # int dlpack_export(struct xbuf *b, const xview *v, int readonly,
        #     DLManagedTensorVersioned **out)
        dlpack_export=lib.bind("dlpack_export", [P, XP, I, ctypes.POINTER(P)], out=(3,)),
        # int view_from_cai(unsigned long long data, int ndim, const long long *shape,
        #     const long long *strides_bytes, xview *out)
        view_from_cai=lib.bind("view_from_cai", [ULL, I, ctypes.POINTER(LL),
                                                 ctypes.POINTER(LL), XP], out=(4,)),
        # int view_axpy(const xview *x, float a, float *d_y, long long n, cudaStream_t stream)
        view_axpy=lib.bind("view_axpy", [XP, F, P, LL, P], out=(2,)),
        # int slow_fill(float *d, long long n, float value, long long spin, cudaStream_t s)
        slow_fill=lib.bind("slow_fill", [P, LL, F, LL, P], out=(0,)),
        # int stream_from_protocol(long long s, int dlpack, cudaStream_t *out, int *sync)
        stream_from_protocol=lib.bind("stream_from_protocol", [LL, I, ctypes.POINTER(P),
                                                               ctypes.POINTER(I)]),
        # int stream_handoff(cudaStream_t producer, cudaStream_t consumer)
        stream_handoff=lib.bind("stream_handoff", [P, P]),
        # int stream_create(cudaStream_t *out)
        stream_create=lib.bind("stream_create", [ctypes.POINTER(P)]),
        # int stream_destroy(cudaStream_t s)
        stream_destroy=lib.bind("stream_destroy", [P]),
        # int stream_synchronize(cudaStream_t s)
        stream_synchronize=lib.bind("stream_synchronize", [P]),
        # int bpool_alloc(size_t bytes, cudaStream_t stream, void **out)
        bpool_alloc=lib.bind("bpool_alloc", [Z, P, ctypes.POINTER(P)]),
        # int bpool_free(void *ptr, cudaStream_t stream)
        bpool_free=lib.bind("bpool_free", [P, P]),
        # int bpool_empty(void)
        bpool_empty=lib.bind("bpool_empty", []),
        # int bpool_stats(unsigned long long *out)   (8 values, BP_STATS)
        bpool_stats=lib.bind("bpool_stats", [P], out=(0,)),
    )


# ---- PyCapsule, through the interpreter's own C API -----------------------------------------------
# A capsule's destructor runs while the capsule dies: it gets the raw address (c_void_p), never a
# py_object, which would take a new reference to an object being destroyed.
_API = ctypes.pythonapi
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, P)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, P, ctypes.c_char_p, CAPSULE_DESTRUCTOR)(
    ("PyCapsule_New", _API))
_capsule_get = ctypes.PYFUNCTYPE(P, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _API))
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _API))
_capsule_set_name = ctypes.PYFUNCTYPE(I, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _API))
_capsule_valid_raw = ctypes.PYFUNCTYPE(I, P, ctypes.c_char_p)(("PyCapsule_IsValid", _API))
_capsule_get_raw = ctypes.PYFUNCTYPE(P, P, ctypes.c_char_p)(("PyCapsule_GetPointer", _API))
# The names live as long as the module: a capsule keeps a pointer to its name, not a copy.
NAME_VERSIONED, NAME_USED = b"dltensor_versioned", b"used_dltensor_versioned"


@CAPSULE_DESTRUCTOR
def _dlpack_capsule_destructor(capsule):
    """A capsule no consumer took (its name is still "dltensor_versioned") ends the export
    itself; a consumed one ("used_...") belongs to its consumer, who calls the deleter."""
    if _capsule_valid_raw(capsule, NAME_VERSIONED):
        managed = DLManagedTensorVersioned.from_address(_capsule_get_raw(capsule,
                                                                          NAME_VERSIONED))
        if managed.deleter:
            managed.deleter(ctypes.addressof(managed))


# ---- streams ------------------------------------------------------------------------------------
class Stream(tut.Handle):
    """A non-blocking CUDA stream (it does not wait for the legacy default stream)."""
    kind = "Stream"

    def __init__(self, lib):
        self._api = c_api(lib)
        handle = P()
        self._api.stream_create(ctypes.byref(handle))
        self._own_handle(handle.value, self._api.stream_destroy)

    @property
    def protocol(self):
        """The number both protocols use for this stream: its handle's bits."""
        return self._live("be named to a protocol")

    def synchronize(self):
        self._api.stream_synchronize(self._live("synchronize"))

    def close(self):
        if self.alive:
            self.synchronize()
        super().close()


def stream_from_protocol(lib, s, dlpack):
    """(cudaStream_t as an int or None, sync) for a protocol's stream number (08.4)."""
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
        raise TypeError(f"a stream is an int, not {type(s).__name__}")
    out, sync = P(), I()
    c_api(lib).stream_from_protocol(int(s), int(dlpack), ctypes.byref(out), ctypes.byref(sync))
    return out.value, bool(sync.value)


# ---- the producer: memory this course allocated, exported without a copy ---------------------------
def _c_strides(shape):
    out, run = [], 1
    for s in reversed(shape):
        out.append(run)
        run *= s
    return tuple(reversed(out))


class GpuArray(tut.Owner):
    """A float32 array in memory from xbuf: device memory, or pinned host memory (on_host=True).
    It exports itself to any library with no copy, through __cuda_array_interface__ (version 3)
    and __dlpack__ (DLPack 1.0, versioned capsule). Views (.T, .strided()) share the memory and
    hold a reference to it, as every DLPack export does: the memory goes with the last one.

    `stream` is the Stream whose queued work writes this memory (None: nothing pending, or work
    on the legacy default stream that the caller synchronised). Consumers are told to wait for
    it: CAI's "stream" key, DLPack's handoff to the consumer's stream."""
    kind = "GpuArray"

    def __init__(self, lib, shape, on_host=False, readonly=False, stream=None, _base=None,
                 _view=None):
        self.lib, self._api = lib, c_api(lib)
        self.readonly, self.stream = bool(readonly), stream
        if _base is None:
            shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
            if not 1 <= len(shape) <= MAX_DIMS:
                raise ValueError(f"a GpuArray has 1 to {MAX_DIMS} dimensions, not {len(shape)}")
            for s in shape:
                tut.check_count(s, "shape", minimum=1, maximum=2**40)
            handle = P()
            self._api.xbuf_create(int(np.prod(shape)) * 4, int(bool(on_host)),
                                  ctypes.byref(handle))
            self.handle, self.on_host = handle.value, bool(on_host)
            self.offset, self.shape, self.strides = 0, shape, _c_strides(shape)
        else:
            self._api.xbuf_retain(_base.handle)
            self.handle, self.on_host = _base.handle, _base.on_host
            self.offset, self.shape, self.strides = _view
        self._own(self._api.xbuf_release, self.handle)

    # -- what the memory is --
    def info(self):
        ptr, refs, dev = ULL(), I(), I()
        self._api.xbuf_info(self._live(), ctypes.byref(ptr), ctypes.byref(refs),
                            ctypes.byref(dev))
        return ptr.value, refs.value, dev.value

    def _live(self):
        if not self.alive:
            raise ValueError("GpuArray used after free()")
        return self.handle

    @property
    def base_ptr(self):
        return self.info()[0]

    @property
    def ptr(self):
        """The address of element [0, 0, ...]."""
        return self.base_ptr + 4 * self.offset

    @property
    def refs(self):
        return self.info()[1]

    def free(self):
        """Gives up this object's reference; the memory stays while exports or views hold it."""
        self._release_once("freed")

    def xview(self):
        v = XView(self.ptr, len(self.shape))
        for d, (s, st) in enumerate(zip(self.shape, self.strides)):
            v.shape[d], v.strides[d] = s, st
        return v

    # -- views, sharing the memory --
    @property
    def T(self):
        return GpuArray(self.lib, None, readonly=self.readonly, stream=self.stream, _base=self,
                        _view=(self.offset, self.shape[::-1], self.strides[::-1]))

    def strided(self, offset, shape, strides):
        """A view: element [i, j...] at self's element offset + sum(index * stride)."""
        shape, strides = tuple(shape), tuple(strides)
        if len(shape) != len(strides) or not 1 <= len(shape) <= MAX_DIMS:
            raise ValueError("shape and strides need the same length, 1 to 4")
        total = int(np.prod(self.shape)) if self.strides == _c_strides(self.shape) else None
        lo = hi = self.offset + offset
        for s, st in zip(shape, strides):
            tut.check_count(s, "shape", minimum=1, maximum=2**40)
            lo, hi = lo + min(0, (s - 1) * st), hi + max(0, (s - 1) * st)
        if total is not None and (lo < 0 or hi >= total):
            raise ValueError(f"the view reaches elements {lo}..{hi} of a {total}-element array")
        return GpuArray(self.lib, None, readonly=self.readonly, stream=self.stream, _base=self,
                        _view=(self.offset + offset, shape, strides))

    # -- host data in and out (contiguous arrays only: a copy is not this chapter's subject) --
    def upload(self, host):
        tut.check_array(host, np.float32, "host", shape=self.shape)
        if self.strides != _c_strides(self.shape):
            raise ValueError("upload() needs a C-contiguous GpuArray")
        if self.on_host:   # pinned memory is host memory: the CPU writes it itself
            ctypes.memmove(self.ptr, host.ctypes.data, host.nbytes)
        else:
            self.lib.htod(self.ptr, tut.ptr(host), host.nbytes)

    def download_base(self, count):
        out = np.empty(count, np.float32)
        self.lib.dtoh(tut.ptr(out), self.base_ptr, out.nbytes)
        return out

    # -- the CUDA Array Interface, version 3 --
    @property
    def __cuda_array_interface__(self):
        if self.on_host:   # pinned host memory is not device memory: DLPack says kDLCUDAHost
            raise AttributeError("a GpuArray in host memory has no __cuda_array_interface__")
        v = self.xview()
        strides, contiguous = (LL * MAX_DIMS)(), I()
        self._api.cai_strides(ctypes.byref(v), strides, ctypes.byref(contiguous))
        return {"shape": self.shape, "typestr": "<f4", "data": (self.ptr, self.readonly),
                "version": 3,
                "strides": None if contiguous.value else tuple(strides[:len(self.shape)]),
                # None: nothing to wait for. Else the stream the writes are queued on, which
                # the consumer waits for before it reads (never 0: ambiguous, forbidden).
                "stream": None if self.stream is None else self.stream.protocol}

    # -- DLPack --
    def __dlpack_device__(self):
        return (KDL_CUDA_HOST, 0) if self.on_host else (KDL_CUDA, self.info()[2])

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is None or tuple(max_version)[0] < 1:
            raise BufferError("this producer exports DLPack 1.x (versioned capsules) only; "
                              "the consumer asked for the legacy format")
        if copy:
            raise BufferError("this producer never copies (copy=True asked for one)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the memory is on {self.__dlpack_device__()}, not {dl_device}")
        if self.on_host:
            if stream is not None:
                raise BufferError("stream must be None for memory on the host")
        else:
            # DLPack's stream is the CONSUMER's: make it wait for our writes. None means the
            # legacy default stream; -1, no synchronisation (nothing to map, nothing to do).
            if stream != -1:
                target, sync = stream_from_protocol(self.lib, STREAM_LEGACY if stream is None
                                                    else stream, dlpack=True)
                if sync and self.stream is not None:
                    self._api.stream_handoff(self.stream.protocol, target)
        out = P()
        v = self.xview()
        self._api.dlpack_export(self._live(), ctypes.byref(v), int(self.readonly),
                                ctypes.byref(out))
        return _capsule_new(out.value, NAME_VERSIONED, _dlpack_capsule_destructor)


# ---- the strict consumers, written from the two specifications -------------------------------------
class Imported(tut.Owner):
    """What a consumer holds of someone else's memory: the view (XView, strides in elements),
    whether it may be written, and, for DLPack, the export it must end (the deleter, exactly
    once: close(), the end of a `with` block, or the garbage collector)."""
    kind = "Imported"

    def __init__(self, view, readonly, device, stream=None, managed=None, keep=None,
                 strides_given=True):
        self.view, self.readonly, self.device, self.stream = view, readonly, device, stream
        self.strides_given = strides_given   # DLPack: the producer filled in t->strides
        self.keep = keep   # CAI: the producer object, which owns the memory while we look
        if managed is not None and managed.deleter:
            self._own(Imported._end_export, ctypes.addressof(managed), managed.deleter)
        else:
            self._own(lambda: None)

    @staticmethod
    def _end_export(address, deleter):
        deleter(address)

    @property
    def shape(self):
        return self.view.dims()[0]

    @property
    def strides(self):
        return self.view.dims()[1]


def consume_cai(lib, obj):
    """obj's __cuda_array_interface__, checked against the specification (versions 2 and 3),
    turned into a view by view_from_cai (08.3). The producer owns the memory: keep obj alive."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError(f"{type(obj).__name__} has no __cuda_array_interface__") from None
    if not isinstance(cai, dict):
        raise TypeError("__cuda_array_interface__ must be a dict")
    for key in ("shape", "typestr", "data", "version"):
        if key not in cai:
            raise ValueError(f"__cuda_array_interface__ lacks the required key {key!r}")
    if cai["version"] not in (2, 3):
        raise ValueError(f"CUDA Array Interface version {cai['version']}: this consumer "
                         f"reads 2 and 3")
    if cai["typestr"] not in ("<f4", "f4"):
        raise TypeError(f"this consumer takes float32 (typestr '<f4'), not {cai['typestr']!r}")
    if cai.get("mask") is not None:
        raise ValueError("masked arrays are not supported")
    shape = tuple(cai["shape"])
    if not 1 <= len(shape) <= MAX_DIMS or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError(f"shape {shape}: 1 to {MAX_DIMS} non-negative ints")
    data = cai["data"]
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], int)
            and isinstance(data[1], bool)):
        raise ValueError(f"data must be (int pointer, bool read-only), not {data!r}")
    if data[0] == 0 and 0 not in shape:
        raise ValueError("data pointer 0 for a non-empty array")
    strides = cai.get("strides")
    if strides is not None:
        strides = tuple(strides)
        if len(strides) != len(shape) or not all(isinstance(s, int) for s in strides):
            raise ValueError(f"strides {strides} for shape {shape}")
    stream = cai.get("stream") if cai["version"] >= 3 else None
    handle = None
    if stream is not None:   # the producer's stream: our consumer waits for it (08.4)
        handle, _ = stream_from_protocol(lib, stream, dlpack=False)
    v = XView()
    c_shape = (LL * MAX_DIMS)(*shape)
    c_strides = (LL * MAX_DIMS)(*strides) if strides is not None else None
    c_api(lib).view_from_cai(data[0], len(shape), c_shape, c_strides, ctypes.byref(v))
    return Imported(v, data[1], (KDL_CUDA, None), stream=handle, keep=obj)


def consume_dlpack(lib, obj, stream=None):
    """obj's DLPack export (1.x, versioned capsule), checked against the specification. `stream`
    is the consumer's stream number (None for host memory). Returns an Imported that ends the
    export when closed."""
    device = tuple(obj.__dlpack_device__())
    kwargs = {"max_version": (1, 0)}
    if device[0] not in (KDL_CPU, KDL_CUDA_HOST):
        kwargs["stream"] = stream
    elif stream is not None:
        raise ValueError("the stream must be None for memory on the host")
    capsule = obj.__dlpack__(**kwargs)
    name = _capsule_name(capsule)
    if name != NAME_VERSIONED:
        raise ValueError(f"capsule named {name!r}: asked for DLPack 1.0, expected "
                         f"{NAME_VERSIONED!r}")
    m = DLManagedTensorVersioned.from_address(_capsule_get(capsule, NAME_VERSIONED))
    t = m.dl_tensor
    problems = []
    if m.version.major != 1:
        problems.append(f"DLPack major version {m.version.major}, this consumer reads 1")
    if m.flags & ~0x7:
        problems.append(f"unknown flags {m.flags:#x}")
    if (t.device.device_type, t.device.device_id) != device:
        problems.append(f"device ({t.device.device_type}, {t.device.device_id}) but "
                        f"__dlpack_device__ said {device}")
    if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (KDL_FLOAT, 32, 1):
        problems.append(f"dtype (code {t.dtype.code}, {t.dtype.bits} bits, {t.dtype.lanes} "
                        f"lanes), this consumer takes float32 (2, 32, 1)")
    if not 1 <= t.ndim <= MAX_DIMS:
        problems.append(f"ndim {t.ndim}, this consumer takes 1 to {MAX_DIMS}")
    if problems:   # not renamed: the capsule's destructor ends the export
        raise ValueError("a DLPack export this consumer refuses: " + "; ".join(problems))
    shape = tuple(t.shape[d] for d in range(t.ndim))
    strides = (tuple(t.strides[d] for d in range(t.ndim)) if t.strides
               else _c_strides(shape))
    if any(s < 0 for s in shape) or (t.data is None and 0 not in shape):
        raise ValueError(f"shape {shape} with data {t.data}")
    v = XView((t.data or 0) + t.byte_offset, t.ndim)
    for d in range(t.ndim):
        v.shape[d], v.strides[d] = shape[d], strides[d]
    # Ours now: rename the capsule, so that its destructor leaves the export to us.
    _capsule_set_name(capsule, NAME_USED)
    return Imported(v, bool(m.flags & FLAG_READ_ONLY), device, managed=m,
                    strides_given=bool(t.strides))


def axpy(lib, src, a, d_y, n, consumer_stream=None):
    """y = a * x + y on the consumer's stream, x an Imported view: first the handoff from the
    producer's stream (CAI's "stream"), then the kernel."""
    handle = None if consumer_stream is None else consumer_stream.protocol
    if src.stream is not None:
        c_api(lib).stream_handoff(src.stream, handle)
    c_api(lib).view_axpy(ctypes.byref(src.view), a, d_y, n, handle)


# ---- the bridge pool (08.5) ------------------------------------------------------------------------
def bpool_stats(lib):
    out = np.zeros(len(BP_STATS), np.uint64)
    c_api(lib).bpool_stats(tut.ptr(out))
    return dict(zip(BP_STATS, (int(v) for v in out)))


def bpool_alloc(lib, nbytes, stream=None):
    out = P()
    c_api(lib).bpool_alloc(tut.check_count(nbytes, "nbytes", minimum=1, maximum=2**46),
                           None if stream is None else stream.protocol, ctypes.byref(out))
    return out.value


def bpool_free(lib, ptr, stream=None):
    c_api(lib).bpool_free(ptr, None if stream is None else stream.protocol)


# ---- references and test helpers --------------------------------------------------------------------
def reference_view(base, offset, shape, strides):
    """NumPy's own strided view of host data: what a correct consumer reads."""
    return np.lib.stride_tricks.as_strided(base[offset:], shape=shape,
                                           strides=tuple(4 * s for s in strides))


def view_cases(n_rows=7, n_cols=13):
    """(offset, shape, strides) of views over a base of n_rows * n_cols * 2 floats: contiguous,
    transposed, every other row, reversed, a column, extent-1 dimensions with odd strides."""
    r, c = n_rows, n_cols
    return [(0, (r * c,), (1,)), (0, (r, c), (c, 1)), (0, (c, r), (1, c)),
            (1, (r // 2, c - 1), (2 * c, 1)), (r * c - 1, (r * c,), (-1,)),
            (3, (r,), (c,)), (0, (1, c), (999, 1)), (0, (r, 1, c), (c, 5, 1)),
            (2, (2, 3, 2, 2), (37, 11, 3, 1)), (c - 1, (r, c), (c, -1))]


def device_view(ctx, base_host, case):
    """A GpuArray over a fresh copy of base_host, and its view `case`."""
    base = GpuArray(ctx.lib, base_host.shape)
    base.upload(base_host)
    offset, shape, strides = case
    return base, base.strided(offset, shape, strides)


def run_axpy(ctx, src, n, a=1.5, stream=None):
    """a * x + y for an Imported x, y random: returns (got, y_before)."""
    y0 = tut.random_f32(ctx.rng, max(n, 1))[:n]
    with tut.DeviceBuffer.from_array(ctx.lib, y0) if n else tut.DeviceBuffer(
            ctx.lib, 4) as d_y:
        # cudaMemcpy from pageable memory may return before its copy has landed, and a
        # non-blocking stream does not wait for the legacy default stream: wait here
        ctx.lib.synchronize()
        axpy(ctx.lib, src, a, d_y.ptr, n, stream)
        if stream is not None:
            stream.synchronize()
        ctx.lib.synchronize()
        d_y.check_guards()
        return (d_y.download(np.float32, n) if n else np.empty(0, np.float32)), y0


class Foreign:
    """Any object with a __cuda_array_interface__ dict, as a foreign library would hand one."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def expect_library_error(name, fn, what):
    e = tut.expect_raises(tut.LibraryError, fn, f"{what} (want {name})")
    if e.name != name:
        raise AssertionError(f"{what}: got {e.name}, want {name}") from e
    return e


# ---- tests -------------------------------------------------------------------------------------------
@CH.exercise(1, "cai_strides: __cuda_array_interface__ v3 with strides in bytes, None if contiguous")
def test_cai(ctx):
    base_host = tut.random_f32(ctx.rng, 7 * 13 * 2)
    for case in view_cases():
        base, view = device_view(ctx, base_host, case)
        with base, view:
            cai = view.__cuda_array_interface__
            offset, shape, strides = case
            # NumPy's own array interface of the same layout is the oracle: bytes, and None
            # exactly when the layout is C-contiguous
            want = reference_view(base_host, offset, shape, strides).__array_interface__
            if cai["strides"] != want["strides"]:
                raise AssertionError(f"view {case}: CAI strides {cai['strides']}, NumPy says "
                                     f"{want['strides']} (bytes, None when C-contiguous)")
            if (cai["version"], cai["typestr"], cai["shape"]) != (3, "<f4", shape):
                raise AssertionError(f"view {case}: {cai}")
            if cai["data"] != (base.ptr + 4 * offset, False):
                raise AssertionError(f"view {case}: data {cai['data']}")
    # an empty view is C-contiguous whatever its strides; the stream key names the writer
    with GpuArray(ctx.lib, (4, 4)) as a, Stream(ctx.lib) as s:
        v = XView(a.ptr, 2)
        v.shape[0], v.shape[1], v.strides[0], v.strides[1] = 0, 4, 1, 7
        got, contiguous = (LL * MAX_DIMS)(), I()
        c_api(ctx.lib).cai_strides(ctypes.byref(v), got, ctypes.byref(contiguous))
        if not contiguous.value:
            raise AssertionError("an empty (0 x 4) view is C-contiguous whatever its strides")
        # only the ndim strides it has: nothing written past them (a C caller's array may
        # be exactly ndim long)
        for ndim in (1, 2, 3):
            v = XView(a.ptr, ndim)
            for d in range(ndim):
                v.shape[d], v.strides[d] = 2, 3 ** d
            out = (LL * (MAX_DIMS + 1))(*([-7] * (MAX_DIMS + 1)))
            c_api(ctx.lib).cai_strides(ctypes.byref(v), out, ctypes.byref(contiguous))
            if list(out[ndim:]) != [-7] * (MAX_DIMS + 1 - ndim):
                raise AssertionError(f"cai_strides of a {ndim}-dimensional view wrote "
                                     f"{list(out[ndim:])} past its {ndim} strides")
        a.stream, a.readonly = s, True
        cai = a.__cuda_array_interface__
        if cai["stream"] != s.protocol or cai["data"][1] is not True:
            raise AssertionError(f"stream and read-only flag not exported: {cai}")


@CH.exercise(2, "dlpack_export: a versioned DLPack capsule, strides in elements, the deleter ends it")
def test_dlpack(ctx):
    base_host = tut.random_f32(ctx.rng, 7 * 13 * 2)
    for case in view_cases():
        base, view = device_view(ctx, base_host, case)
        with base, view:
            offset, shape, strides = case
            refs = base.refs
            with consume_dlpack(ctx.lib, view, stream=-1) as imp:
                if imp.shape != shape or imp.strides != strides:
                    raise AssertionError(f"view {case}: DLPack shape {imp.shape} strides "
                                         f"{imp.strides} (elements), want {shape} {strides}")
                if not imp.strides_given:   # DLPack 1.2: never NULL when ndim != 0
                    raise AssertionError(f"view {case}: the export's strides are NULL; "
                                         f"DLPack 1.2 wants them filled in (ndim != 0)")
                if imp.view.data != base.ptr + 4 * offset or imp.readonly:
                    raise AssertionError(f"view {case}: data {imp.view.data:#x}, read-only "
                                         f"{imp.readonly}")
                if base.refs != refs + 1:
                    raise AssertionError(f"an export must hold its own reference to the "
                                         f"memory: {refs} before, {base.refs} during")
            if base.refs != refs:
                raise AssertionError(f"the deleter must drop the export's reference: {refs} "
                                     f"before, {base.refs} after")
    # lifetime: the exporter freed while a consumer still holds the memory
    used = ctx.lib.mem_used()
    a = GpuArray(ctx.lib, (1 << 18,))   # 1 MiB
    host = tut.random_f32(ctx.rng, 1 << 18)
    a.upload(host)
    imp = consume_dlpack(ctx.lib, a, stream=-1)
    a.free()
    got, y0 = run_axpy(ctx, imp, host.size, a=2.0)
    tut.assert_close(got, 2.0 * host.astype(np.float64) + y0, rtol=1e-6, atol=1e-6,
                     name="a consumer reading after the exporter was freed")
    imp.close()
    if ctx.lib.mem_used() > used:
        raise AssertionError("the memory must go with the last reference (the consumer's)")
    # a capsule nobody consumed ends its export when it dies; read-only reaches the flags
    with GpuArray(ctx.lib, 8, readonly=True) as r:
        capsule = r.__dlpack__(stream=-1, max_version=(1, 0))
        m = DLManagedTensorVersioned.from_address(_capsule_get(capsule, NAME_VERSIONED))
        if (m.version.major, m.version.minor) != (1, 0) or not m.flags & FLAG_READ_ONLY:
            raise AssertionError(f"version {m.version.major}.{m.version.minor}, flags "
                                 f"{m.flags:#x}: want 1.0 and the read-only bit")
        if (m.dl_tensor.device.device_type, m.dl_tensor.device.device_id) != \
                r.__dlpack_device__():
            raise AssertionError("the tensor's device is not what __dlpack_device__ says")
        del m, capsule
        if r.refs != 1:
            raise AssertionError(f"an unconsumed capsule must end its export when it dies "
                                 f"(refs {r.refs}, want 1)")
    # host memory: NumPy's own consumer, np.from_dlpack, with no copy
    with GpuArray(ctx.lib, (5, 6), on_host=True) as h:
        host = tut.random_f32(ctx.rng, 5, 6)
        h.upload(host)
        arr = np.from_dlpack(h)
        if arr.ctypes.data != h.ptr or not np.array_equal(arr, host):
            raise AssertionError("np.from_dlpack must view the pinned memory itself")
        t = np.from_dlpack(h.T)
        if t.ctypes.data != h.ptr or not np.array_equal(t, host.T):
            raise AssertionError("np.from_dlpack of the transpose: strides in elements")
        if h.refs != 3:
            raise AssertionError(f"two NumPy views and the exporter: refs {h.refs}, want 3")
        del arr, t
        if h.refs != 1:
            raise AssertionError(f"NumPy's views gone: refs {h.refs}, want 1")
    with GpuArray(ctx.lib, 3, on_host=True, readonly=True) as h:
        if np.from_dlpack(h).flags.writeable:
            raise AssertionError("a read-only export must reach NumPy as read-only")
    with GpuArray(ctx.lib, 3) as d:
        for kwargs in ({"max_version": None}, {"max_version": (0, 8)},
                       {"max_version": (1, 0), "copy": True}):
            tut.expect_raises(BufferError, lambda: d.__dlpack__(stream=-1, **kwargs),
                              f"__dlpack__({kwargs})")


@CH.exercise(3, "view_from_cai + view_axpy_kernel: any strides, bytes turned into elements")
def test_consumer(ctx):
    base_host = tut.random_f32(ctx.rng, 7 * 13 * 2)
    for case in view_cases():
        base, view = device_view(ctx, base_host, case)
        with base, view:
            offset, shape, strides = case
            want_x = reference_view(base_host, offset, shape, strides).astype(np.float64)
            n = int(np.prod(shape))
            for how in ("cai", "elements"):
                # the dict NumPy writes for the same layout (byte strides, None if
                # C-contiguous), pointing at the device copy; or the view as a kernel takes it
                cai = dict(reference_view(base_host, offset, shape, strides).__array_interface__,
                           data=(view.ptr, False), version=3, stream=None)
                src = (consume_cai(ctx.lib, Foreign(cai)) if how == "cai"
                       else Imported(view.xview(), False, (KDL_CUDA, 0)))
                with src:
                    got, y0 = run_axpy(ctx, src, n)
                    tut.assert_close(got, 1.5 * want_x.reshape(-1) + y0, rtol=1e-6, atol=1e-6,
                                     name=f"a * x + y through {how}, x = view {case}")
    # the bytes-against-elements trap, refused: a stride or address that is not a whole float
    with GpuArray(ctx.lib, 64) as a:
        for bad in ({"strides": (6,)}, {"data": (a.ptr + 2, False)}):
            cai = {"shape": (8,), "typestr": "<f4", "data": (a.ptr, False), "version": 3,
                   "strides": None, "stream": None, **bad}
            expect_library_error("XV_ERR_STRIDE", lambda: consume_cai(ctx.lib, Foreign(cai)),
                                 f"a CAI dict with {bad}")
        # the same bytes as a dict with byte strides, as NumPy, CuPy and Numba write them
        host = tut.random_f32(ctx.rng, 64)
        a.upload(host)
        cai = {"shape": (4, 8), "typestr": "<f4", "data": (a.ptr, False), "version": 3,
               "strides": (4, 16), "stream": None}
        with consume_cai(ctx.lib, Foreign(cai)) as src:
            if src.strides != (1, 4):
                raise AssertionError(f"byte strides (4, 16) are element strides (1, 4), not "
                                     f"{src.strides}")
            got, y0 = run_axpy(ctx, src, 32)
            want = np.lib.stride_tricks.as_strided(host, (4, 8), (4, 16)).reshape(-1)
            tut.assert_close(got, 1.5 * want.astype(np.float64) + y0, rtol=1e-6, atol=1e-6,
                             name="a * x + y of a (4, 8) view with byte strides (4, 16)")


# clock ticks the slow producer spins before it writes: the consumer is queued and ready long
# before the data is, so a consumer that does not wait reads the poison
SPIN = 20_000_000


@CH.exercise(4, "the stream contract: stream numbers, and the consumer's stream waits for the producer's")
def test_streams(ctx):
    lib = ctx.lib
    with Stream(lib) as s:
        for dlpack in (0, 1):
            expect_library_error("XV_ERR_STREAM", lambda: stream_from_protocol(lib, 0, dlpack),
                                 f"stream 0 ({'DLPack' if dlpack else 'CAI'})")
            for number, want in ((1, (STREAM_LEGACY, True)), (2, (STREAM_PER_THREAD, True)),
                                 (s.protocol, (s.protocol, True))):
                got = stream_from_protocol(lib, number, dlpack)
                if got != want:
                    raise AssertionError(f"stream {number:#x}: (handle, sync) = {got}, want "
                                         f"{want}")
        if stream_from_protocol(lib, -1, 1) != (None, False):
            raise AssertionError("DLPack stream -1 means: no synchronisation")
        expect_library_error("XV_ERR_STREAM", lambda: stream_from_protocol(lib, -1, 0),
                             "stream -1 in a CUDA Array Interface")
    n = 1 << 20 if ctx.large else 4099
    spin = SPIN if lib.backend == "gpu" and not tut.under_sanitizer() else 0
    with Stream(lib) as producer, Stream(lib) as consumer:
        if lib.emu_stream_log is not None:   # the emulator logs what went to which stream
            with tut.DeviceBuffer(lib, 4096) as d:
                lib.synchronize()   # the buffer's poisoning, on the legacy stream, is done

                def marked_handoff():   # a kernel on each stream first: the log's stream ids
                    c_api(lib).slow_fill(d.ptr, 16, 0.0, 0, producer.protocol)
                    c_api(lib).slow_fill(d.ptr.value + 1024, 16, 0.0, 0, consumer.protocol)
                    c_api(lib).stream_handoff(producer.protocol, consumer.protocol)
                log = tut.stream_log(lib, marked_handoff)
                lib.synchronize()
            pid, cid = log[0][0], log[1][0]
            if log[2:] != [(pid, 4), (cid, 8)]:
                raise AssertionError(f"stream_handoff issued {log[2:]} (stream, kind): want an "
                                     f"event record (4) on the producer's stream {pid}, then "
                                     f"a wait (8) on the consumer's stream {cid}")
            if tut.stream_log(lib, lambda: c_api(lib).stream_handoff(producer.protocol,
                                                                     producer.protocol)):
                raise AssertionError("one and the same stream needs no handoff")
        for how in ("cai", "dlpack"):
            with GpuArray(lib, n, stream=producer) as a:
                # the producer's write is still queued when the consumer starts
                c_api(lib).slow_fill(a.ptr, n, 3.0, spin, producer.protocol)
                if how == "cai":   # the consumer reads "stream" and waits itself
                    src = consume_cai(lib, a)
                else:              # the producer makes the consumer's stream wait
                    src = consume_dlpack(lib, a, stream=consumer.protocol)
                with src:
                    got, y0 = run_axpy(ctx, src, n, a=1.0, stream=consumer)
                producer.synchronize()
                tut.assert_close(got, 3.0 + y0.astype(np.float64), rtol=1e-6, atol=1e-6,
                                 name=f"consumer on its own stream through {how}, data written "
                                      f"on the producer's (a missing wait reads it too early)")


@CH.exercise(5, "bpool: a caching pool with a lock, reuse across streams waits for the free")
def test_bpool(ctx):
    lib = ctx.lib
    before = bpool_stats(lib)
    sizes = [int(s) for s in ctx.rng.integers(1, 300_000, 40)]
    for _ in range(5):   # a loop of temporaries: after the first round, all from the cache
        ptrs = [bpool_alloc(lib, s) for s in sizes]
        if len(set(ptrs)) != len(ptrs):
            raise AssertionError("bpool handed out one block twice")
        for p in reversed(ptrs):
            bpool_free(lib, p)
    st = bpool_stats(lib)
    allocs, mallocs = st["allocs"] - before["allocs"], st["cuda_mallocs"] - before["cuda_mallocs"]
    if allocs != 200 or mallocs > 40 or st["hits"] - before["hits"] != allocs - mallocs:
        raise AssertionError(f"200 allocations took {mallocs} cudaMalloc calls and "
                             f"{st['hits'] - before['hits']} cache hits: a pool reuses what "
                             f"was freed (at most one cudaMalloc per block of the first round)")
    if st["in_use"] != before["in_use"]:
        raise AssertionError(f"in use {st['in_use']} after every block came back")
    expect_library_error("BP_ERR_FOREIGN", lambda: bpool_free(lib, 256), "a foreign pointer")
    # across streams: a block freed on s1 while s1's kernel writes it, then taken on s2
    n, spin = (1 << 18, SPIN) if lib.backend == "gpu" and not tut.under_sanitizer() else (4096, 0)
    with Stream(lib) as s1, Stream(lib) as s2:
        p = bpool_alloc(lib, 4 * n, s1)
        c_api(lib).slow_fill(p, n, 1.0, spin, s1.protocol)
        bpool_free(lib, p, s1)
        waits = bpool_stats(lib)["stream_waits"]
        take = []
        if lib.emu_stream_log is not None:
            log = tut.stream_log(lib, lambda: take.append(bpool_alloc(lib, 4 * n, s2)))
            if [k for _, k in log] != [8]:
                raise AssertionError(f"reusing on s2 a block freed on s1 issued {log} (stream, "
                                     f"kind): want one wait (8) on s2")
        else:
            take.append(bpool_alloc(lib, 4 * n, s2))
        if take[0] != p or bpool_stats(lib)["stream_waits"] != waits + 1:
            raise AssertionError("the block freed on s1 must be reused on s2, after a wait")
        c_api(lib).slow_fill(p, n, 2.0, 0, s2.protocol)
        s2.synchronize()
        s1.synchronize()
        got = np.empty(n, np.float32)
        lib.dtoh(tut.ptr(got), p, got.nbytes)
        if not (got == 2.0).all():
            raise AssertionError(f"{int((got != 2.0).sum())} of {n} floats overwritten by s1's "
                                 f"late write: s2 did not wait for the free")
        bpool_free(lib, p, s2)
        # the same stream needs no wait
        q = bpool_alloc(lib, 4 * n, s2)
        if bpool_stats(lib)["stream_waits"] != waits + 1:
            raise AssertionError("a block reused on the stream that freed it needs no wait")
        bpool_free(lib, q, s2)
    # threads: ctypes lets go of the GIL, so four threads are in the pool at once
    live, guard, errors = set(), threading.Lock(), []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for s in rng.integers(1, 8192, 300):
                p = bpool_alloc(lib, int(s))
                with guard:
                    if p in live:
                        errors.append(f"{p:#x} handed out to two threads")
                    live.add(p)
                with guard:
                    live.discard(p)
                bpool_free(lib, p)
        except Exception as e:   # reported by the test's thread
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(ctx.seed + i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError("; ".join(errors[:3]))
    c_api(lib).bpool_empty()
    st = bpool_stats(lib)
    if st["cached"] != 0 or st["in_use"] != before["in_use"]:
        raise AssertionError(f"after bpool_empty: {st}")


@CH.check("numpy-dlpack", "NumPy's own DLPack export through the strict consumer (host memory)")
def test_numpy_dlpack(ctx):
    host = tut.random_f32(ctx.rng, 6, 9)
    for arr in (host, host.T, host[::2, 1:]):
        refs = sys.getrefcount(host)
        imp = consume_dlpack(ctx.lib, arr)
        if imp.view.data != arr.ctypes.data or imp.device != (KDL_CPU, 0):
            raise AssertionError("NumPy's export: not the array's own memory")
        if imp.strides != tuple(s // 4 for s in arr.strides):
            raise AssertionError(f"NumPy's DLPack strides {imp.strides} (elements) for byte "
                                 f"strides {arr.strides}")
        if sys.getrefcount(host) <= refs - (arr is not host):
            raise AssertionError("an export must keep NumPy's array alive")
        imp.close()
    ro = host.copy()
    ro.flags.writeable = False
    with consume_dlpack(ctx.lib, ro) as imp:
        if not imp.readonly:
            raise AssertionError("NumPy exported a read-only array without the read-only flag")
    # a refused export is never renamed: its capsule's destructor ends it
    tut.expect_raises(ValueError, lambda: consume_dlpack(ctx.lib, host.astype(np.float64)),
                      "float64 into a float32 consumer")


# ---- the libraries, where they are installed (GPU only) ----------------------------------------------
def need_gpu(lib, what):
    if lib.backend != "gpu":
        raise tut.Skip(f"{what} needs a GPU build (BACKEND=gpu): the emulator's memory is "
                       f"not a CUDA device that other libraries can see")


def need(module, what):
    """The module, or Skip naming what is missing."""
    try:
        return __import__(module, fromlist=["_"])
    except Exception as e:   # not installed, or no CUDA runtime it can use
        raise tut.Skip(f"{what} is not usable here ({type(e).__name__}: "
                       f"{str(e).splitlines()[0] if str(e) else ''})") from None


def prerequisites(ctx, ids, what):
    """Skip unless the exercises this check builds on pass: the libraries test your producer
    and consumer, which must be right first."""
    failed = None
    for test in CH.tests:
        if test["id"] in ids and failed is None:
            try:
                test["fn"](ctx)
            except Exception as e:
                failed = f"{test['id']}: {type(e).__name__}"
    if failed:   # raised out here, so that the exercise's failure is not its context
        raise tut.Skip(f"{what} needs {', '.join(sorted(ids))} to pass first ({failed})")


@CH.check("cupy", "CuPy: both protocols both ways, the same pointer; a transposed CuPy array",
          full="it imports CuPy")
def test_cupy(ctx):
    need_gpu(ctx.lib, "the CuPy check")
    cp = need("cupy", "CuPy")
    prerequisites(ctx, {"08.1", "08.2", "08.3", "08.4"}, "the CuPy check")
    host = tut.random_f32(ctx.rng, 33, 65)
    with GpuArray(ctx.lib, host.shape) as a:
        a.upload(host)
        for how, view in (("CAI", cp.asarray(a)), ("DLPack", cp.from_dlpack(a))):
            if view.data.ptr != a.ptr or view.shape != host.shape:
                raise AssertionError(f"cupy via {how}: pointer {view.data.ptr:#x}, ours "
                                     f"{a.ptr:#x}")
            tut.assert_equal(cp.asnumpy(view), host, name=f"CuPy's view via {how}")
        t = cp.asarray(a.T)
        if t.data.ptr != a.ptr or t.strides != (4, 4 * 65):
            raise AssertionError(f"CuPy's view of the transpose: strides {t.strides}")
        del view, t
    x = cp.asarray(host)
    for how, src in (("CAI", lambda v: consume_cai(ctx.lib, v)),
                     ("DLPack", lambda v: consume_dlpack(ctx.lib, v, stream=STREAM_LEGACY))):
        for v, want in ((x, host), (x.T, host.T), (x[::3, 5:], host[::3, 5:])):
            with src(v) as imp:
                if imp.view.data != v.data.ptr:
                    raise AssertionError(f"our view of CuPy's array via {how}: another pointer")
                got, y0 = run_axpy(ctx, imp, v.size)
                tut.assert_close(got, 1.5 * want.astype(np.float64).reshape(-1) + y0,
                                 rtol=1e-6, atol=1e-6,
                                 name=f"a * x + y, x = CuPy {v.shape} strides {v.strides} "
                                      f"via {how}")
    tut.note(f"CuPy {cp.__version__} exports __cuda_array_interface__ version "
             f"{x.__cuda_array_interface__['version']}")
    del x, v, imp
    cp.get_default_memory_pool().free_all_blocks()


def _same_values(ctx, imp, want, what):
    got, y0 = run_axpy(ctx, imp, int(np.prod(want.shape)))
    tut.assert_close(got, 1.5 * want.astype(np.float64).reshape(-1) + y0, rtol=1e-6, atol=1e-6,
                     name=what)


@CH.check("torch", "PyTorch: from_dlpack and as_tensor of ours, ours of its tensors, the same pointer",
          full="it imports PyTorch")
def test_torch(ctx):
    need_gpu(ctx.lib, "the PyTorch check")
    torch = need("torch", "PyTorch")
    if not torch.cuda.is_available():
        raise tut.Skip("PyTorch is installed without a usable CUDA device")
    prerequisites(ctx, {"08.1", "08.2", "08.3", "08.4"}, "the PyTorch check")
    host = tut.random_f32(ctx.rng, 17, 40)
    with GpuArray(ctx.lib, host.shape) as a:
        a.upload(host)
        for how, t in (("DLPack", torch.from_dlpack(a)),
                       ("CAI", torch.as_tensor(a, device="cuda"))):
            if t.data_ptr() != a.ptr or tuple(t.shape) != host.shape:
                raise AssertionError(f"torch via {how}: pointer {t.data_ptr():#x}, ours "
                                     f"{a.ptr:#x}")
            tut.assert_equal(t.cpu().numpy(), host, name=f"PyTorch's view via {how}")
        tt = torch.from_dlpack(a.T)
        if tt.data_ptr() != a.ptr or tt.stride() != (1, 40):
            raise AssertionError(f"PyTorch's view of the transpose: strides {tt.stride()} "
                                 f"(elements), want (1, 40)")
        del t, tt
        torch.cuda.synchronize()
    x = torch.from_numpy(host).cuda()
    torch.cuda.synchronize()
    for how, src in (("CAI", lambda v: consume_cai(ctx.lib, v)),
                     ("DLPack", lambda v: consume_dlpack(ctx.lib, v, stream=STREAM_LEGACY))):
        for v, want in ((x, host), (x.T, host.T), (x[::2, 3:], host[::2, 3:])):
            with src(v) as imp:
                if imp.view.data != v.data_ptr():
                    raise AssertionError(f"our view of a tensor via {how}: another pointer")
                _same_values(ctx, imp, want, f"a * x + y, x = torch {tuple(v.shape)} strides "
                                             f"{v.stride()} via {how}")
    tut.note(f"PyTorch {torch.__version__} exports __cuda_array_interface__ version "
             f"{x.__cuda_array_interface__['version']}")
    del x, v
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


@CH.check("numba", "Numba: as_cuda_array of ours, ours of its device arrays, the same pointer",
          full="it imports Numba")
def test_numba(ctx):
    need_gpu(ctx.lib, "the Numba check")
    numba_cuda = need("numba.cuda", "Numba (numba-cuda)")
    prerequisites(ctx, {"08.1", "08.3", "08.4"}, "the Numba check")
    host = tut.random_f32(ctx.rng, 9, 31)
    with GpuArray(ctx.lib, host.shape) as a:
        a.upload(host)
        for v, want in ((a, host), (a.T, host.T)):
            d = numba_cuda.as_cuda_array(v)
            if d.__cuda_array_interface__["data"][0] != a.ptr or d.strides != want.strides:
                raise AssertionError(f"Numba's view: another pointer, or strides {d.strides}")
            tut.assert_equal(d.copy_to_host(), want, name=f"Numba's view {v.shape}")
        del d
    d = numba_cuda.to_device(host)
    # (Numba's DeviceNDArray.T is not a view: it launches a transpose kernel into a new array)
    for v, want in ((d, host), (d[::2, 4:], host[::2, 4:]), (d[:, ::-3], host[:, ::-3])):
        with consume_cai(ctx.lib, v) as imp:
            _same_values(ctx, imp, want, f"a * x + y, x = Numba {v.shape} strides {v.strides}")
    tut.note(f"Numba exports __cuda_array_interface__ version "
             f"{d.__cuda_array_interface__['version']}")
    del d, v, imp


def _strided_memory_view():
    try:
        from cuda.core.utils import StridedMemoryView
    except ImportError:
        from cuda.core.experimental.utils import StridedMemoryView
    return StridedMemoryView


@CH.check("cuda-core", "cuda.core: StridedMemoryView of ours through DLPack and CAI, the same pointer",
          full="it imports cuda.core")
def test_cuda_core(ctx):
    need_gpu(ctx.lib, "the cuda.core check")
    need("cuda.core", "cuda.core")
    smv = _strided_memory_view()
    prerequisites(ctx, {"08.1", "08.2", "08.4"}, "the cuda.core check")
    with GpuArray(ctx.lib, (6, 10)) as a, Stream(ctx.lib) as s:
        for v, strides in ((a, None), (a.T, (1, 10))):
            for how, make in (("DLPack", getattr(smv, "from_dlpack", None)),
                              ("CAI", getattr(smv, "from_cuda_array_interface", None))):
                view = make(v, stream_ptr=s.protocol) if make else smv(v, stream_ptr=s.protocol)
                got = None if view.strides is None else tuple(view.strides)
                if view.ptr != a.ptr or tuple(view.shape) != v.shape or (
                        got not in (strides, _c_strides(v.shape) if strides is None else ())):
                    raise AssertionError(f"cuda.core via {how}: ptr {view.ptr:#x} (ours "
                                         f"{a.ptr:#x}), shape {view.shape}, strides {got}")
                del view


# ---- chapter 08's pool behind the libraries --------------------------------------------------------
class BpoolBlock(tut.Owner):
    """A bpool block lent to another library: freed back to the pool on the stream it was taken
    for, once that library drops its last reference."""
    kind = "BpoolBlock"

    def __init__(self, lib, ptr, stream_handle):
        self.ptr = ptr
        self._own(c_api(lib).bpool_free, ptr, stream_handle)


def cupy_allocator(lib, cp):
    """For cupy.cuda.set_allocator: every CuPy allocation from bpool, on CuPy's current stream."""
    api = c_api(lib)

    def malloc(size):
        if size == 0:
            return cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(0, 0, None), 0)
        stream = cp.cuda.get_current_stream().ptr or None
        out = P()
        api.bpool_alloc(size, stream, ctypes.byref(out))
        mem = cp.cuda.UnownedMemory(out.value, size, BpoolBlock(lib, out.value, stream))
        return cp.cuda.MemoryPointer(mem, 0)
    return malloc


@CH.check("cupy-pools", "CuPy's MemoryPool and PinnedMemoryPool, and bpool behind CuPy (set_allocator)",
          full="it imports CuPy")
def test_cupy_pools(ctx):
    need_gpu(ctx.lib, "the CuPy pool check")
    cp = need("cupy", "CuPy")
    prerequisites(ctx, {"08.5"}, "the CuPy pool check")
    pool = cp.cuda.MemoryPool()
    cp.cuda.set_allocator(pool.malloc)
    try:
        x = cp.empty(1 << 20, cp.float32)   # 4 MiB
        if pool.used_bytes() < 4 << 20 or pool.total_bytes() < pool.used_bytes():
            raise AssertionError(f"used {pool.used_bytes()}, total {pool.total_bytes()}")
        del x
        if pool.used_bytes() != 0 or pool.total_bytes() < 4 << 20:
            raise AssertionError("a freed CuPy array's block stays in the pool (total), unused")
        pool.free_all_blocks()
        if pool.total_bytes() != 0:
            raise AssertionError("free_all_blocks gives every unused block back")
        before = bpool_stats(ctx.lib)
        cp.cuda.set_allocator(cupy_allocator(ctx.lib, cp))
        host = tut.random_f32(ctx.rng, 1000)
        for _ in range(50):
            y = cp.asarray(host)   # an allocation and a copy each time
            del y
        st = bpool_stats(ctx.lib)
        if st["allocs"] - before["allocs"] < 50 or st["cuda_mallocs"] - before["cuda_mallocs"] > 2:
            raise AssertionError(f"50 CuPy allocations through bpool: {st}")
    finally:
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
        pool.free_all_blocks()
        ctx.lib.synchronize()
        c_api(ctx.lib).bpool_empty()
    pinned = cp.cuda.PinnedMemoryPool()
    cp.cuda.set_pinned_memory_allocator(pinned.malloc)
    try:
        mem = cp.cuda.alloc_pinned_memory(1 << 20)
        del mem
        if pinned.n_free_blocks() < 1:
            raise AssertionError("a freed pinned block stays in the PinnedMemoryPool")
        pinned.free_all_blocks()
        if pinned.n_free_blocks() != 0:
            raise AssertionError("PinnedMemoryPool.free_all_blocks left blocks")
    finally:
        cp.cuda.set_pinned_memory_allocator(cp.get_default_pinned_memory_pool().malloc)


@CH.check("torch-pools", "PyTorch's caching allocator: 20 MiB segments, allocated against reserved, empty_cache",
          full="it imports PyTorch")
def test_torch_pools(ctx):
    need_gpu(ctx.lib, "the PyTorch pool check")
    torch = need("torch", "PyTorch")
    if not torch.cuda.is_available():
        raise tut.Skip("PyTorch is installed without a usable CUDA device")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_stats()
    blocks = [torch.empty(1 << 20, device="cuda") for _ in range(16)]   # 16 x 4 MiB
    # requests of 1 to 10 MiB are carved from 20 MiB segments: 5 blocks per segment, so 16
    # blocks take 4 segments, 80 MiB, the last one with a 16 MiB tail unused
    st = torch.cuda.memory_stats()
    reserved = st["reserved_bytes.all.current"] - base.get("reserved_bytes.all.current", 0)
    segments = st["segment.all.current"] - base.get("segment.all.current", 0)
    if reserved != 80 << 20 or segments != 4:
        raise AssertionError(f"16 tensors of 4 MiB: reserved {reserved >> 20} MiB in {segments} "
                             f"segments, want 80 MiB in 4 segments of 20 MiB")
    del blocks[::2]   # every other one freed: 32 MiB free in 4 MiB holes, and the 16 MiB tail
    st = torch.cuda.memory_stats()
    alloc = st["allocated_bytes.all.current"] - base.get("allocated_bytes.all.current", 0)
    if alloc != 32 << 20:
        raise AssertionError(f"8 live 4 MiB tensors: allocated {alloc}")
    if st["reserved_bytes.all.current"] - base.get("reserved_bytes.all.current", 0) != 80 << 20:
        raise AssertionError("freed tensors keep their segments reserved")
    del blocks
    torch.cuda.synchronize()
    if torch.cuda.memory_reserved() < 80 << 20 or torch.cuda.memory_allocated() != \
            base.get("allocated_bytes.all.current", 0):
        raise AssertionError("freed tensors keep their blocks reserved until empty_cache()")
    torch.cuda.empty_cache()
    if torch.cuda.memory_reserved() != base.get("reserved_bytes.all.current", 0):
        raise AssertionError(f"empty_cache left {torch.cuda.memory_reserved()} bytes reserved")


# ---- streams across libraries (GPU) --------------------------------------------------------------
def _poisoned(lib, n):
    """A GpuArray whose CAI names no stream (nothing to wait for, it says), full of the poison:
    its real write is queued by the caller on a stream the consumer must be told about."""
    a = GpuArray(lib, n)
    a.upload(np.full(n, -1.0, np.float32))
    lib.synchronize()
    return a


@CH.check("library-streams", "our stream in CuPy, PyTorch and Numba (external streams), record_stream, PyTorch's CAI version 2",
          full="it starts a Python process that imports CuPy, PyTorch and Numba")
def test_library_streams(ctx):
    need_gpu(ctx.lib, "the stream check")
    # the libraries read our arrays through the CAI export, whose strides are 08.1's
    prerequisites(ctx, {"08.1"}, "the stream check")
    # in a fresh process: the libraries' streams, pools and modules set up there are not this
    # process's memory, which the harness checks for leaks
    r = run_child(ctx.lib, "library_streams")
    for name, note in r["skipped"].items():
        tut.note(f"{name}: {note}")
    if not r["ran"]:
        raise tut.Skip("none of CuPy, PyTorch, Numba is usable here")
    for name in r["ran"]:
        if r["bad"][name]:
            raise AssertionError(f"{name} on our stream (an external stream): {r['bad'][name]} "
                                 f"of {r['n']} elements are not 2 x what our kernel wrote "
                                 f"there first (the library's work did not run on our stream)")
    if "torch" in r["ran"]:
        reuse = r["reuse"]
        if not reuse["plain"]:
            raise AssertionError("a tensor freed while another stream still reads it: its "
                                 "block was not handed out again at once (PyTorch's pool "
                                 "knows only the stream a block was allocated for)")
        # With record_stream the pool should wait for the reading stream before it reuses the
        # block; on the H200 (2026-12-04) this check saw the block handed out at once all the
        # same, a finding not yet explained, so it is reported, not asserted
        tut.note(f"freed while another stream reads it: reused at once without record_stream "
                 f"({reuse['plain']}), with record_stream ({reuse['recorded']})")
        cai = r["torch_cai"]
        if "stream" in cai["keys"] and cai["version"] < 3:
            raise AssertionError(f"a version-2 interface with a stream key: {cai}")
        tut.note(f"PyTorch {r['torch']}: __cuda_array_interface__ version {cai['version']}, "
                 f"stream key {'present' if 'stream' in cai['keys'] else 'absent'}")
    if r.get("unordered") is not None:
        tut.note(f"the same CuPy read on CuPy's own stream instead: {r['unordered']} of "
                 f"{r['n']} elements read before our kernel wrote them")


def child_library_streams(lib):
    """Work of CuPy, PyTorch and Numba queued on our stream (each one's external stream),
    behind a write of ours that the CAI does not mention; record_stream; PyTorch's CAI."""
    api = c_api(lib)
    spin = 0 if tut.under_sanitizer() else SPIN
    n = 1 << 20
    out = {"n": n, "ran": [], "skipped": {}, "bad": {}}
    mods = {}
    for name in ("cupy", "torch", "numba.cuda"):
        try:
            mods[name] = __import__(name, fromlist=["_"])
        except Exception as e:
            out["skipped"][name] = f"not usable ({type(e).__name__})"
    if "torch" in mods and not mods["torch"].cuda.is_available():
        out["skipped"]["torch"] = "no usable CUDA device"
        del mods["torch"]
    with Stream(lib) as s:
        for name, mod in mods.items():
            with _poisoned(lib, n) as a:
                # our write, still queued on s; the CAI says nothing of it (stream None), so
                # only the library's work running on s orders it after the write
                api.slow_fill(a.ptr, n, 5.0, spin, s.protocol)
                if name == "cupy":
                    with mod.cuda.ExternalStream(s.protocol):
                        got = mod.asnumpy(mod.asarray(a) * 2)   # both queued on s
                elif name == "torch":
                    with mod.cuda.stream(mod.cuda.ExternalStream(s.protocol)):
                        got = (mod.as_tensor(a, device="cuda") * 2).cpu().numpy()
                else:
                    ns = mod.external_stream(s.protocol)
                    got = mod.as_cuda_array(a).copy_to_host(stream=ns) * 2
                    ns.synchronize()
                s.synchronize()
                out["bad"][name] = int((got != 10.0).sum())
                out["ran"].append(name)
        if "cupy" in mods:   # the hazard, measured: the same read on CuPy's own stream
            cp = mods["cupy"]
            with _poisoned(lib, n) as a:
                api.slow_fill(a.ptr, n, 5.0, spin, s.protocol)
                got = cp.asnumpy(cp.asarray(a) * 2)
                s.synchronize()
                out["unordered"] = int((got != 10.0).sum())
    if "torch" in mods:
        torch = mods["torch"]
        out["torch"] = torch.__version__
        side = torch.cuda.Stream()
        busy = torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        out["reuse"] = {}
        for record in (False, True):
            x = torch.ones(1 << 20, device="cuda")   # allocated for the current stream
            torch.cuda.current_stream().synchronize()
            ptr = x.data_ptr()
            with torch.cuda.stream(side):
                api.slow_fill(busy.data_ptr(), 1, 0.0, spin, side.cuda_stream)   # side busy
                y = x * 2                                                         # reads x
            if record:
                x.record_stream(side)
            del x   # back to the pool: reused at once unless it knows that side reads it
            z = torch.empty(1 << 20, device="cuda")
            out["reuse"]["recorded" if record else "plain"] = z.data_ptr() == ptr
            del z, y
            torch.cuda.synchronize()
        cai = torch.ones(4, device="cuda").__cuda_array_interface__
        out["torch_cai"] = {"version": cai["version"], "keys": sorted(cai)}
    return out


def run_child(lib, which, timeout=240):
    """A fresh Python (this driver, --child): an allocator that must be installed before its
    library allocates anything needs a process whose library has not started yet."""
    return run_children(lib, [which], timeout)[which]


def run_children(lib, whiches, timeout=240):
    """run_child for several children at once, side by side: each is a process of its own with
    its own CUDA context (08.allocators' three took 9 s one after another on an H200, most of
    it importing PyTorch and Numba). {which: its result}"""
    env = dict(os.environ, CUDA_MODULE_LOADING="LAZY")
    procs = {w: subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", w],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env) for w in whiches}
    out, failed = {}, []
    deadline = time.monotonic() + timeout
    try:
        for w, p in procs.items():
            stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if p.returncode != 0:
                failed.append(f"the {w} child process failed ({p.returncode}):\n"
                              f"{stderr.strip()[-2000:]}")
            else:
                out[w] = json.loads(stdout.strip().splitlines()[-1])
    finally:
        for p in procs.values():   # a timeout (or any error) leaves none running
            if p.poll() is None:
                p.kill()
                p.wait()
    if failed:
        raise AssertionError("\n".join(failed))
    return out


def _alloc_loop_torch(torch, n, shape=(256, 256)):
    """n temporaries, each allocated, written by a kernel and dropped: us per iteration."""
    for _ in range(50):   # warm-up: the fill kernel's loading, the first blocks
        torch.empty(shape, device="cuda").fill_(1.0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        t = torch.empty(shape, device="cuda")
        t.fill_(1.0)
        del t
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def child_torch_bpool(lib):
    """PyTorch with bpool as its allocator, installed before anything allocates."""
    import torch
    alloc = torch.cuda.memory.CUDAPluggableAllocator(str(lib.path), "bpool_torch_alloc",
                                                     "bpool_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)
    before = bpool_stats(lib)
    x = torch.randn(1000, device="cuda")
    got = (x * 2).sum().item()   # temporaries from bpool; the same sum on the host
    want = 2 * float(x.cpu().double().sum())
    us = _alloc_loop_torch(torch, 2000)
    st = bpool_stats(lib)
    del x
    torch.cuda.synchronize()
    return {"allocs": st["allocs"] - before["allocs"], "mallocs": st["cuda_mallocs"],
            "ok": abs(got - want) <= 1e-3 * (1 + abs(want)), "us_per_iter": us}


def child_torch_late(lib):
    """The same, after PyTorch's own allocator has served one tensor: refused."""
    import torch
    torch.empty(1, device="cuda")
    alloc = torch.cuda.memory.CUDAPluggableAllocator(str(lib.path), "bpool_torch_alloc",
                                                     "bpool_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        return {"refused": True, "message": str(e).splitlines()[0]}
    return {"refused": False, "message": ""}


def child_torch_default(lib):
    import torch
    return {"us_per_iter": _alloc_loop_torch(torch, 2000)}


def child_torch_expandable(lib):
    import os as _os   # set before PyTorch reads it, at its first allocation
    _os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    torch.empty(1, device="cuda")
    return {"us_per_iter": _alloc_loop_torch(torch, 2000),
            "reserved": torch.cuda.memory_reserved()}


def child_torch_async(lib):
    import os as _os   # PyTorch reads PYTORCH_ALLOC_CONF (and the older name) at its start
    _os.environ["PYTORCH_ALLOC_CONF"] = "backend:cudaMallocAsync"
    import torch
    torch.empty(1, device="cuda")
    return {"us_per_iter": _alloc_loop_torch(torch, 2000),
            "backend": torch.cuda.get_allocator_backend()}


def child_torch_rmm(lib):
    import rmm
    import torch
    from rmm.allocators.torch import rmm_torch_allocator
    rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(
        rmm.mr.CudaMemoryResource(), initial_pool_size=256 << 20))
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    return {"us_per_iter": _alloc_loop_torch(torch, 2000)}


def child_numba_bpool(lib):
    """Numba with bpool behind it, through its External Memory Management plugin."""
    from numba import cuda
    from numba.cuda.cudadrv import driver as drv

    class BpoolEMM(cuda.HostOnlyCUDAMemoryManager):
        def initialize(self):
            pass

        def memalloc(self, size):
            ptr = bpool_alloc(lib, max(size, 1))
            pointer = (drv.binding.CUdeviceptr(ptr) if getattr(drv, "USE_NV_BINDING", True)
                       else ctypes.c_uint64(ptr))
            return cuda.MemoryPointer(self.context, pointer, size,
                                      finalizer=lambda: bpool_free(lib, ptr))

        def get_memory_info(self):
            free, total = lib.mem_info()
            return cuda.MemoryInfo(free=free, total=total)

        def get_ipc_handle(self, memory):
            raise NotImplementedError("bpool blocks are not shared between processes")

        def reset(self):
            c_api(lib).bpool_empty()

        @property
        def interface_version(self):
            return 1

    cuda.set_memory_manager(BpoolEMM)
    before = bpool_stats(lib)
    host = np.arange(1000, dtype=np.float32)
    for _ in range(100):
        d = cuda.to_device(host)
        back = d.copy_to_host()
        del d
    st = bpool_stats(lib)
    return {"allocs": st["allocs"] - before["allocs"], "mallocs": st["cuda_mallocs"],
            "ok": bool((back == host).all())}


@CH.check("allocators", "bpool behind PyTorch (CUDAPluggableAllocator, before it initialises) and Numba (EMM)",
          full="it starts Python processes that import PyTorch and Numba")
def test_allocators(ctx):
    need_gpu(ctx.lib, "the allocator check")
    prerequisites(ctx, {"08.5"}, "the allocator check")
    ran = []
    try:
        need("torch", "PyTorch")
        ran.append("torch")
    except tut.Skip as e:
        tut.note(f"{e}")
    try:
        need("numba.cuda", "Numba (numba-cuda)")
        ran.append("numba")
    except tut.Skip as e:
        tut.note(f"{e}")
    if not ran:
        raise tut.Skip("neither PyTorch nor Numba is usable here")
    got = run_children(ctx.lib, (["torch_bpool", "torch_late"] if "torch" in ran else [])
                       + (["numba_bpool"] if "numba" in ran else []))
    if "torch" in ran:
        r = got["torch_bpool"]
        if not r["ok"] or r["allocs"] < 2000 or r["mallocs"] > 20:
            raise AssertionError(f"PyTorch through bpool: {r}")
        late = got["torch_late"]
        if not late["refused"]:
            raise AssertionError("PyTorch accepted a new allocator after its own had allocated")
        tut.note(f"PyTorch after its first allocation: {late['message']}")
    if "numba" in ran:
        r = got["numba_bpool"]
        if not r["ok"] or r["allocs"] < 100 or r["mallocs"] > 5:
            raise AssertionError(f"Numba through bpool: {r}")


# ---- RMM: one pool behind CuPy, Numba and PyTorch (GPU, where the rmm package is installed) ------
def _rmm_counts(mr):
    """A StatisticsResourceAdaptor's counts as a dict (a dataclass in new RMM, a dict before)."""
    c = mr.allocation_counts
    return {k: int(c[k] if isinstance(c, dict) else getattr(c, k))
            for k in ("current_bytes", "current_count", "total_count", "peak_bytes")}


def child_rmm_shared(lib):
    """One RMM pool (256 MiB, taken once) behind CuPy, Numba and PyTorch, with statistics on
    top; each library allocates 4 MiB, and they exchange the arrays without a copy."""
    import rmm
    import cupy as cp
    import torch
    from numba import cuda
    from rmm.allocators.cupy import rmm_cupy_allocator
    from rmm.allocators.numba import RMMNumbaManager
    from rmm.allocators.torch import rmm_torch_allocator
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=256 << 20,
                                     maximum_pool_size=256 << 20)
    mr = rmm.mr.StatisticsResourceAdaptor(pool)
    rmm.mr.set_current_device_resource(mr)
    cp.cuda.set_allocator(rmm_cupy_allocator)          # CuPy's allocations: from mr
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)   # before torch allocates
    cuda.set_memory_manager(RMMNumbaManager)           # before Numba makes its context
    n = 1 << 20

    def one_round(steps):
        a = cp.arange(n, dtype=cp.float32)                        # 4 MiB each
        steps["cupy"] = _rmm_counts(mr)
        t = torch.ones(n, device="cuda")
        steps["torch"] = _rmm_counts(mr)
        d = cuda.device_array(n, dtype=np.float32)
        steps["numba"] = _rmm_counts(mr)
        d.copy_to_device(np.full(n, 3.0, np.float32))
        total = float((torch.as_tensor(a, device="cuda") + t + torch.as_tensor(d, device="cuda"))
                      .double().sum())
        torch.cuda.synchronize()
        return total, (a, t, d)
    one_round({})   # the first: each library's context, modules and streams are set up here
    gc.collect()
    torch.cuda.synchronize()
    free0 = cp.cuda.runtime.memGetInfo()[0]
    steps, before = {}, _rmm_counts(mr)
    total, arrays = one_round(steps)
    free1 = cp.cuda.runtime.memGetInfo()[0]
    grew = [steps[k]["current_bytes"] - p["current_bytes"]
            for k, p in zip(("cupy", "torch", "numba"), (before, steps["cupy"], steps["torch"]))]
    del arrays
    gc.collect()
    torch.cuda.synchronize()
    end = _rmm_counts(mr)
    return {"rmm": rmm.__version__, "grew": grew, "free_moved": int(free0 - free1),
            "total": total, "want": float(n * (n - 1) / 2 + n + 3 * n),
            "end_current": end["current_bytes"] - before["current_bytes"],
            "peak": end["peak_bytes"], "count": end["total_count"] - before["total_count"]}


def child_rmm_fragment(lib):
    """A 64 MiB pool that may not grow: 15 blocks of 4 MiB, every other one freed. 32 MiB are
    free, in 4 MiB pieces: 4 MiB still fit, 8 MiB do not."""
    import rmm
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=64 << 20,
                                     maximum_pool_size=64 << 20)
    mr = rmm.mr.StatisticsResourceAdaptor(pool)
    blocks = [rmm.DeviceBuffer(size=4 << 20, mr=mr) for _ in range(15)]
    del blocks[1::2]
    out = {"in_use": _rmm_counts(mr)["current_bytes"]}
    try:
        big = rmm.DeviceBuffer(size=8 << 20, mr=mr)
        out["eight_mib"] = "fits"
        del big
    except MemoryError as e:
        out["eight_mib"] = f"MemoryError: {str(e).splitlines()[0][:160]}"
    small = rmm.DeviceBuffer(size=4 << 20, mr=mr)
    out["four_mib"] = "fits"
    del small, blocks
    return out


@CH.check("rmm", "RMM: one pool behind CuPy, Numba and PyTorch, its statistics, fragmentation",
          full="it imports RMM, CuPy, Numba and PyTorch")
def test_rmm(ctx):
    need_gpu(ctx.lib, "the RMM check")
    need("rmm", "RMM (the rmm-cu13 package)")
    for m in ("cupy", "torch", "numba.cuda"):
        need(m, m)
    r = run_child(ctx.lib, "rmm_shared")
    if r["grew"] != [4 << 20] * 3:
        raise AssertionError(f"CuPy, PyTorch and Numba each took 4 MiB from the one RMM pool: "
                             f"its statistics grew by {r['grew']}")
    if r["free_moved"] != 0:
        raise AssertionError(f"the pool took its 256 MiB at the start, yet the device's free "
                             f"memory moved by {r['free_moved']} bytes while the libraries "
                             f"allocated")
    if r["total"] != r["want"]:
        raise AssertionError(f"CuPy's arange + PyTorch's ones + Numba's threes, summed in "
                             f"PyTorch: {r['total']}, want {r['want']}")
    if r["end_current"] != 0:
        raise AssertionError(f"{r['end_current']} bytes still allocated from the pool after "
                             f"every array was dropped")
    f = run_child(ctx.lib, "rmm_fragment")
    if f["in_use"] != 32 << 20 or f["eight_mib"] == "fits" or f["four_mib"] != "fits":
        raise AssertionError(f"a 64 MiB pool with 8 blocks of 4 MiB live in 15 places: {f}; "
                             f"want 8 MiB refused, 4 MiB served")
    tut.note(f"RMM {r['rmm']}: {r['count']} allocations from one pool for three libraries; a "
             f"fragmented pool with 32 MiB free refused 8 MiB ({f['eight_mib'][:60]})")



# ---- demo, benchmark, warm-up -----------------------------------------------------------------------
def demo(lib):
    with GpuArray(lib, (3, 4)) as a:
        a.upload(np.arange(12, dtype=np.float32).reshape(3, 4))
        print("Our (3, 4) float32 array and its transpose, as the CUDA Array Interface says "
              "(strides in bytes):")
        print(f"  {a.__cuda_array_interface__}\n  {a.T.__cuda_array_interface__}")
        with consume_dlpack(lib, a.T, stream=-1) as imp:
            print(f"and as DLPack says (strides in elements): shape {imp.shape}, strides "
                  f"{imp.strides}; the memory has {a.refs} references (ours, the export's)")
        print(f"after the consumer's deleter: {a.refs}")
        if lib.backend == "gpu":
            for name, see in (("CuPy", lambda: __import__("cupy").asarray(a).data.ptr),
                              ("PyTorch", lambda: __import__("torch").from_dlpack(a).data_ptr()),
                              ("Numba", lambda: __import__("numba.cuda", fromlist=["_"])
                               .as_cuda_array(a).__cuda_array_interface__["data"][0])):
                try:
                    print(f"  {name:<8} sees {see():#x} (ours: {a.ptr:#x})")
                except Exception as e:
                    print(f"  {name:<8} not usable here: {type(e).__name__}")
    with GpuArray(lib, 4, on_host=True) as h:
        h.upload(np.arange(4, dtype=np.float32))
        arr = np.from_dlpack(h)
        print(f"pinned host memory through np.from_dlpack: {arr}, the same address: "
              f"{arr.ctypes.data == h.ptr}")
        del arr
    print("\nNext: make check CH=08 (the tests of your exercises)")


def _host_us(fn, reps):
    """Median microseconds of fn() by the host clock (the calls are host work only)."""
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:])) * 1e6


def _bench_exchange(b, lib, gpu):
    sizes = ((1 << 10, "4 KiB"), (1 << 28, "1 GiB")) if gpu else ((1 << 10, "4 KiB"),)
    print("one exchange, producer to consumer, no copy (host clock, median of 200):")
    libs = {}
    for name in ("cupy", "torch", "numba.cuda"):
        try:
            libs[name] = __import__(name, fromlist=["_"]) if gpu else None
        except Exception as e:
            print(f"  {name}: not usable here ({type(e).__name__})")
    for n, label in sizes:
        with GpuArray(lib, n) as a:
            cases = [("our strict consumer, DLPack", lambda: consume_dlpack(lib, a, -1).close()),
                     ("our strict consumer, CAI", lambda: consume_cai(lib, a).close())]
            if libs.get("cupy"):
                cp = libs["cupy"]
                cases += [("cupy.asarray (CAI)", lambda: cp.asarray(a)),
                          ("cupy.from_dlpack", lambda: cp.from_dlpack(a))]
            if libs.get("torch"):
                torch = libs["torch"]
                cases += [("torch.from_dlpack", lambda: torch.from_dlpack(a)),
                          ("torch.as_tensor (CAI)", lambda: torch.as_tensor(a, device="cuda"))]
            if libs.get("numba.cuda"):
                cases.append(("numba.cuda.as_cuda_array (CAI)",
                              lambda: libs["numba.cuda"].as_cuda_array(a)))
            for what, fn in cases:
                b.row(f"{what}, {label}", _host_us(fn, 200), "us")
    if gpu:
        copy_gbps = b.d2d_copy_gbps(4 << 28)
        b.figure("a 1 GiB device-to-device copy, for comparison", 2 * (4 << 28) / copy_gbps / 1e3,
                 "us", digits=0)


def _bench_alloc(b, lib):
    print("\na loop of 2000 temporaries (256 x 256 floats, allocated, filled, dropped), "
          "us per iteration (host clock around the loop, synchronised):")
    try:
        import cupy as cp
        rows = [("CuPy MemoryPool (default)", lambda: cp.get_default_memory_pool().malloc),
                ("CuPy without a pool (cudaMalloc)", lambda: None),
                ("CuPy on bpool (set_allocator)", lambda: cupy_allocator(lib, cp)),
                ("CuPy MemoryAsyncPool (cudaMallocAsync)",
                 lambda: cp.cuda.MemoryAsyncPool().malloc)]
        try:
            import rmm
            from rmm.allocators.cupy import rmm_cupy_allocator

            def rmm_with(mr):
                rmm.mr.set_current_device_resource(mr)
                return rmm_cupy_allocator
            rows += [("CuPy on an RMM pool (PoolMemoryResource)", lambda: rmm_with(
                         rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(),
                                                   initial_pool_size=256 << 20))),
                     ("CuPy on RMM's CudaAsyncMemoryResource",
                      lambda: rmm_with(rmm.mr.CudaAsyncMemoryResource()))]
            print(f"  (RMM {rmm.__version__})")
        except ImportError as e:
            print(f"  RMM not usable here ({e})")
        for what, make in rows:
            alloc = make()
            cp.cuda.set_allocator(alloc)
            cp.cuda.Device().synchronize()
            before = bpool_stats(lib)["cuda_mallocs"]
            for _ in range(50):   # warm-up: the fill kernel's loading, the first blocks
                t = cp.empty((256, 256), cp.float32)
                t.fill(1.0)
                del t
            cp.cuda.Device().synchronize()
            start = time.perf_counter()
            for _ in range(2000):
                t = cp.empty((256, 256), cp.float32)
                t.fill(1.0)
                del t
            cp.cuda.Device().synchronize()
            b.row(what, (time.perf_counter() - start) / 2000 * 1e6, "us")
            if "bpool" in what:
                print(f"    bpool: {bpool_stats(lib)['cuda_mallocs'] - before} cudaMalloc calls for "
                      f"2050 allocations, warm-up included")
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
        cp.get_default_memory_pool().free_all_blocks()
        lib.synchronize()
        c_api(lib).bpool_empty()
    except ImportError as e:
        print(f"  CuPy not usable here ({e})")
    for what, child in (("PyTorch caching allocator (default)", "torch_default"),
                        ("PyTorch, expandable_segments:True", "torch_expandable"),
                        ("PyTorch, backend:cudaMallocAsync", "torch_async"),
                        ("PyTorch on bpool (CUDAPluggableAllocator)", "torch_bpool"),
                        ("PyTorch on an RMM pool (rmm_torch_allocator)", "torch_rmm")):
        try:
            r = run_child(lib, child)
            b.row(what, r["us_per_iter"], "us")
        except Exception as e:
            print(f"  {what}: not run ({type(e).__name__}: {str(e).splitlines()[0]})")


def _bench_matmul(b, lib):
    """The seed's CuPy matrix multiply, corrected: random inputs (the seed's were tuples), a
    warm-up, CUDA events around the GPU work, NumPy and chapter 04's v3 on the same inputs."""
    try:
        import cupy as cp
    except ImportError as e:
        print(f"\nmatmul: CuPy not usable here ({e})")
        return
    n = 4096
    rng = np.random.default_rng(8)
    a_h, b_h = tut.random_f32(rng, n, n), tut.random_f32(rng, n, n)
    print(f"\n{n} x {n} float32 matrix multiply, the same random inputs (GFLOP/s = "
          f"2 n^3 / time; ceiling: CuPy's, which is cuBLAS):")
    start = time.perf_counter()
    c_np = a_h @ b_h
    np_s = time.perf_counter() - start
    a_d, b_d = cp.asarray(a_h), cp.asarray(b_h)
    c_d = a_d @ b_d                      # warm-up: cuBLAS's handle and kernels load here
    ev0, ev1, times = cp.cuda.Event(), cp.cuda.Event(), []
    for _ in range(10):
        ev0.record()
        c_d = a_d @ b_d
        ev1.record()
        ev1.synchronize()
        times.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e-3)
    cupy_s = float(np.median(times))
    flop = 2.0 * n ** 3
    err = float(np.abs(cp.asnumpy(c_d) - c_np).max() / np.abs(c_np).max())
    ceiling = flop / cupy_s / 1e9
    b.row("CuPy a @ b (cuBLAS), events, median of 10", ceiling, "GFLOP/s", ceiling)
    b.row("NumPy a @ b on the host, one run", flop / np_s / 1e9, "GFLOP/s", ceiling)
    try:
        lib04 = tut.load_chapter("04_shared_memory", "solutions")
        bench = lib04.bind("bench_matmul", [I, P, P, P, I, I, I, I, tut.c_float_p])
        c3 = cp.full_like(c_d, np.nan)   # a block the pool hands out may hold an old product
        ms = tut.median_ms(lambda r, t: bench(3, a_d.data.ptr, b_d.data.ptr, c3.data.ptr,
                                              n, n, n, r, t), 10)
        b.row("chapter 04 v3 on CuPy's arrays (no copy)", flop / (ms * 1e-3) / 1e9, "GFLOP/s",
              ceiling)
        err3 = float(cp.abs(c3 - c_d).max() / cp.abs(c_d).max())
        print(f"    largest difference / largest value: CuPy against NumPy {err:.1e}, "
              f"v3 against CuPy {err3:.1e}")
        del c3
    except Exception as e:
        print(f"  chapter 04 v3: not run ({type(e).__name__}: {e})")
    b.figure("CuPy over NumPy, same inputs", ceiling / (flop / np_s / 1e9), "x", digits=0)
    del a_d, b_d, c_d
    cp.get_default_memory_pool().free_all_blocks()


def bench(lib):
    b = tut.Bench(lib, "08 python gpu libraries")
    gpu = lib.backend == "gpu"
    _bench_exchange(b, lib, gpu)
    if not gpu:
        print("the allocation loops and the matmul need CuPy or PyTorch on a GPU: not run")
        return
    _bench_alloc(b, lib)
    _bench_matmul(b, lib)


def warm_up(lib):
    """What the first use of a stream, an event, a kernel and each library sets up on the device
    (contexts of their own runtimes, module code, allocator state) is not a leak of the test
    that happens to come first: do it once here."""
    if lib.backend != "gpu":
        return
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    with Stream(lib) as s, Stream(lib) as s2, tut.DeviceBuffer(lib, 4096) as d:
        for stream in (s, s2):
            c_api(lib).slow_fill(d.ptr, 1024, 1.0, 0, stream.protocol)
            v = XView(d.ptr.value, 1)
            v.shape[0], v.strides[0] = 1024, 1
            c_api(lib).view_axpy(ctypes.byref(v), 1.0, d.ptr, 1024, stream.protocol)
            stream.synchronize()
        try:   # its event is made before the exercise's lines: warmed up on a stub too
            c_api(lib).stream_handoff(s.protocol, s2.protocol)
        except tut.ExerciseNotDone:
            pass
        s.synchronize()
        s2.synchronize()
    if tut.quick_check(lib.backend):   # the checks that use the libraries are left out
        lib.synchronize()
        return
    host = np.ones(64, np.float32)
    if not only or "cupy" in only:
        try:
            import cupy as cp
            x = cp.asarray(host)
            cp.asnumpy(x)
            x.fill(1.0)
            del x
            cp.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass
    if not only or "torch" in only:
        try:
            import torch
            t = torch.from_numpy(host).cuda()
            t.cpu()
            del t
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
    if not only or "numba" in only:
        try:
            from numba import cuda
            cuda.to_device(host).copy_to_host()
        except Exception:
            pass
    if not only or "cuda-core" in only:
        try:   # a first view with a stream sets up cuda.core's own device state (2 MiB seen)
            smv = _strided_memory_view()
            with GpuArray(lib, (2, 2)) as a, Stream(lib) as s:
                for name in ("from_cuda_array_interface", "from_dlpack"):
                    make = getattr(smv, name, None)
                    view = make(a, stream_ptr=s.protocol) if make else smv(a, stream_ptr=s.protocol)
                    del view
        except Exception:
            pass
    lib.synchronize()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":   # run_child's fresh process
        print(json.dumps(globals()["child_" + sys.argv[2]](tut.load_chapter(CH.name))))
        sys.exit(0)
    sys.exit(CH.main(bench=bench, demo=demo, warm_up=warm_up))
