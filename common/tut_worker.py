# SPDX-License-Identifier: MIT
"""tut_worker: the process a student's library runs in when TUT_ISOLATE=1 (issue 26).

The chapter's driver (the checker) keeps the tests, the seed, the hidden tests and the verdict;
this process only loads the library and calls what the checker asks for, over two pipes it
inherits. It imports nothing but the standard library's os, sys, json and ctypes: nothing of
the checker (no tut, no NumPy), so code that patches this interpreter patches nothing that
decides a grade. Started by common/tut_remote.py as

    python -I -S tut_worker.py REQ_FD REP_FD SHM_FD:BASE:SIZE:HEAP_OFFSET LIBRARY

Messages, both ways: a 4-byte little-endian length, then that many bytes of JSON (one object).
    {"op": "sym", "name": s}                         -> {"ok": bool}    the symbol exists
    {"op": "bind", "id": k, "name": s, "args": [codes] or null, "res": code}
                                                     -> {"ok": true} or {"err": text}
    {"op": "call", "id": k, "a": [ints and floats], "chk": [argument indices]}
                                                     -> {"r": value} or {"x": text}
                                                        or {"refuse": index}
    {"op": "exit"}
Codes are ctypes' type letters (i I l L q Q h H b B ? f d; P: any pointer, passed as an address;
z: a char * result; v: no result). "chk" lists pointer arguments the checker could not place:
each must be mapped here, else the call is refused, not made.
"""
import ctypes
import json
import os
import struct
import sys

MAX_MESSAGE = 1 << 24
TYPES = {"i": ctypes.c_int, "I": ctypes.c_uint, "l": ctypes.c_long, "L": ctypes.c_ulong,
         "q": ctypes.c_longlong, "Q": ctypes.c_ulonglong, "h": ctypes.c_short,
         "H": ctypes.c_ushort, "b": ctypes.c_byte, "B": ctypes.c_ubyte, "?": ctypes.c_bool,
         "f": ctypes.c_float, "d": ctypes.c_double, "P": ctypes.c_void_p,
         "z": ctypes.c_char_p, "v": None}
PROT_RW, MAP_SHARED, MAP_FIXED_NOREPLACE = 3, 0x01, 0x100000


def map_region(libc, fd, base, size):
    """Map the memfd at exactly `base`; the address or an OSError."""
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    got = libc.mmap(base, size, PROT_RW, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0)
    if got in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), f"mmap at {base:#x}: {os.strerror(ctypes.get_errno())}")
    if got != base:   # a kernel before 4.17 takes MAP_FIXED_NOREPLACE as a hint
        libc.munmap(ctypes.c_void_p(got), ctypes.c_size_t(size))
        raise OSError(0, f"the kernel placed the region at {got:#x}, not at {base:#x}")
    return got


def _mapped(address):
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                lo, hi = line.split(None, 1)[0].split("-")
                if int(lo, 16) <= address < int(hi, 16):
                    return True
    except OSError:
        return True   # cannot tell: let the call decide
    return False


class Channel:
    def __init__(self, rfd, wfd):
        self.rfd, self.wfd, self.buf = rfd, wfd, b""

    def read(self):
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack("<I", self.buf[:4])[0]:
            if len(self.buf) >= 4 and struct.unpack("<I", self.buf[:4])[0] > MAX_MESSAGE:
                raise ValueError("message too long")
            b = os.read(self.rfd, 1 << 16)
            if not b:
                return None
            self.buf += b
        n = struct.unpack("<I", self.buf[:4])[0]
        body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
        return json.loads(body)

    def send(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode()
        data = struct.pack("<I", len(data)) + data
        while data:
            data = data[os.write(self.wfd, data):]


def main(argv):
    req, rep = int(argv[1]), int(argv[2])
    shm_fd, base, size, heap_off = (int(v, 0) for v in argv[3].split(":"))
    chan = Channel(req, rep)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, 9)   # PR_SET_PDEATHSIG, SIGKILL: never outlive the checker
    # PR_SET_CHILD_SUBREAPER: a child that leaves its parent (a double fork) stays in this
    # process's tree, which the checker stops between calls (a sandbox's own user or PID
    # namespace makes that complete whatever the library undoes)
    libc.prctl(36, 1)
    try:
        map_region(libc, shm_fd, base, size)
        os.environ["CUEMU_SHARED_HEAP"] = f"{base + heap_off:#x}:{size - heap_off:#x}:{shm_fd}:{heap_off:#x}"
        lib = ctypes.CDLL(argv[4])   # the student's constructors run here
    except OSError as e:
        chan.send({"err": f"{type(e).__name__}: {e}"})
        return 3
    chan.send({"ready": True, "pid": os.getpid()})
    fns = {}
    while True:
        msg = chan.read()
        if msg is None:
            return 0
        op = msg.get("op")
        if op == "call":
            fn, res = fns[msg["id"]]
            for i in msg.get("chk", ()):
                if not _mapped(msg["a"][i]):
                    chan.send({"refuse": i})
                    break
            else:
                try:
                    r = fn(*msg["a"])
                except Exception as e:   # ctypes.ArgumentError and the like: the checker's to raise
                    chan.send({"x": f"{type(e).__name__}: {e}"})
                    continue
                if res == "z" and r is not None:
                    r = r.decode("latin-1")
                libc.fflush(None)   # a kernel's printf shows now, beside the checker's lines
                chan.send({"r": r})
        elif op == "sym":
            try:
                lib[msg["name"]]
                chan.send({"ok": True})
            except AttributeError:
                chan.send({"ok": False})
        elif op == "bind":
            try:
                fn = lib[msg["name"]]
                if msg["args"] is not None:
                    fn.argtypes = [TYPES[c] for c in msg["args"]]
                fn.restype = TYPES[msg["res"]]
                fns[msg["id"]] = (fn, msg["res"])
                chan.send({"ok": True})
            except (AttributeError, KeyError) as e:
                chan.send({"err": f"{type(e).__name__}: {e}"})
        elif op == "exit":
            return 0
        else:
            chan.send({"err": f"unknown op {op!r}"})


if __name__ == "__main__":
    sys.exit(main(sys.argv))
