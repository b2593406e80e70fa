#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cuemu-nvcc: compile and link any CUDA C++ program for the course's CPU emulator, like nvcc.

    cuemu-nvcc [nvcc options] file.cu [more.cu more.cpp x.o ...] [-o prog]

This is the template; `make cuemu-nvcc` writes build/bin/cuemu-nvcc from it, filling in the
@...@ values from emu/emu.mk (the same EMU_CXXFLAGS, EMU_LDLIBS, rewriter and libcuemu.a the
chapters are built with), so the driver's flags cannot drift from the Makefile's.
Python standard library only.
"""
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# ---- filled in by make (emu/tools/tools.mk) ------------------------------------------------------
CXX = r"""@CXX@"""
CC = r"""@CC@"""
EMU_CXXFLAGS = shlex.split(r"""@EMU_CXXFLAGS@""")
EMU_LDLIBS = shlex.split(r"""@EMU_LDLIBS@""")
EMU_REWRITE = r"""@EMU_REWRITE@"""
EMU_RUNTIME = r"""@EMU_RUNTIME@"""
CUDART_VERSION = r"""@CUDART_VERSION@"""
# ---------------------------------------------------------------------------------------------

PROG = "cuemu-nvcc"

HELP = """\
usage: cuemu-nvcc [options] <file.cu|file.cpp|file.c|file.o|lib.a ...>

Compiles CUDA C++ for the course's CPU emulator with the host compiler and links it with the
emulator's runtime: the program runs every kernel on the CPU and reports out-of-bounds
accesses, host pointers, divergent barriers, ... with the thread, the source line and the
allocation site. Takes nvcc's options:

  -o <file>                 output file (default a.out, or <name>.o with -c)
  -c, -dc                   compile only, to an object file
  -I<dir> -D<m>[=v] -U<m> -isystem <dir> -include <file>
  -L<dir> -l<lib>           -lcublas and -lcudart are built in (the emulator's small cuBLAS)
  -O<n>, -std=<c++17|c++20>, -shared, -w
  -g, -G, -lineinfo         accepted: line information is always on (fault reports need it)
  -arch, -code, -gencode, --gpu-architecture, -rdc, -maxrregcount, -Xptxas, --use_fast_math,
  --expt-relaxed-constexpr, --extended-lambda, ...   accepted and ignored (no GPU code is made)
  -x <cu|c++|c>             the language of the input files that follow (-x none: by suffix)
  -Xcompiler <a,b>          options for the host compiler; -Xlinker <a,b> for the linker
  -ccbin <compiler>         the host C++ compiler (default {cxx})
  -run [--run-args <a,b>]   run the program after linking
  -keep                     keep the rewritten .cpp files (in the current directory)
  -v, -dryrun               print each command (and, with -dryrun, run none)
  --version, --help

Headers: the emulator's cuda_runtime.h (the runtime API), cooperative_groups.h (block and tile
level), cuda_fp16.h and cublas_v2.h stand in for the toolkit's. The folder of each source file is searched for its
"quoted" includes, as with nvcc; those of its "quoted" headers (below its folder) that launch
kernels or declare __shared__ variables are rewritten like the .cu itself. Toolkit headers the
emulator does not offer (mma.h, curand.h, cuda.h's driver API...) stop the build with "not
supported here". See docs/no-gpu.md, "Your own programs".
"""

# What nvcc defines: __NVCC__ always; __CUDACC__ (and its version) only for CUDA sources, where
# headers test it to choose between their host and device versions (helper_math.h's fminf).
# A host source sees the runtime API and vector types but none of the device side.
_V = int(CUDART_VERSION) if CUDART_VERSION.isdigit() else 0
CU_DEFINES = ["-D__NVCC__", "-D__CUDACC__", f"-D__CUDACC_VER_MAJOR__={_V // 1000}",
              f"-D__CUDACC_VER_MINOR__={_V % 1000 // 10}", "-D__CUDACC_VER_BUILD__=0"]
HOST_DEFINES = ["-D__NVCC__", "-DCUEMU_HOST_SOURCE=1"]

# Options that change nothing for the emulator: with a value (separate or after '=').
IGNORED_WITH_VALUE = {
    "-arch", "--gpu-architecture", "-code", "--gpu-code", "-gencode", "--generate-code",
    "-rdc", "--relocatable-device-code", "-maxrregcount", "--maxrregcount",
    "-Xptxas", "--ptxas-options", "-Xnvlink", "--nvlink-options", "-Xcudafe",
    "-ftz", "-prec-div", "-prec-sqrt", "-fmad", "--ftz", "--prec-div", "--prec-sqrt", "--fmad",
    "-t", "--threads", "-diag-suppress", "--diag-suppress", "-split-compile", "--split-compile",
    "-default-stream", "--default-stream", "-m", "--machine",
}
IGNORED_FLAGS = {
    "-g", "--debug", "-G", "--device-debug", "-lineinfo", "--generate-line-info",
    "-use_fast_math", "--use_fast_math", "-expt-relaxed-constexpr", "--expt-relaxed-constexpr",
    "-expt-extended-lambda", "--expt-extended-lambda", "-extended-lambda", "--extended-lambda",
    "-m64", "-Wno-deprecated-gpu-targets", "--Wno-deprecated-gpu-targets", "-res-usage",
    "--resource-usage", "-lto", "-dlto", "--dlto", "-link", "--link",
    "-cudart=static", "--cudart=static", "-cudart=shared", "--cudart=shared",
}
# What each refused option would need, for the one-line message.
UNSUPPORTED = {
    "-ptx": "it makes GPU assembly, and the emulator makes no GPU code",
    "--ptx": "it makes GPU assembly, and the emulator makes no GPU code",
    "-cubin": "it makes GPU code, and the emulator makes none",
    "--cubin": "it makes GPU code, and the emulator makes none",
    "-fatbin": "it makes GPU code, and the emulator makes none",
    "--fatbin": "it makes GPU code, and the emulator makes none",
    "-E": "preprocessing alone is not offered; run the host compiler on the source instead",
    "--preprocess": "preprocessing alone is not offered; run the host compiler on the source instead",
    "-M": "dependency files are not made; list the headers in your Makefile by hand",
    "-MM": "dependency files are not made; list the headers in your Makefile by hand",
    "-MD": "dependency files are not made; list the headers in your Makefile by hand",
    "-MMD": "dependency files are not made; list the headers in your Makefile by hand",
    "-lib": "static libraries are not made by the driver; compile with -c and use ar",
    "--lib": "static libraries are not made by the driver; compile with -c and use ar",
    "-dlink": "there is no device code to link",
    "--device-link": "there is no device code to link",
}
# Libraries the emulator provides itself (in libcuemu.a) or that have no meaning without a GPU.
BUILTIN_LIBS = {"cudart", "cudart_static", "cublas", "cublas_static", "cublasLt", "cudadevrt",
                "nccl", "nccl_static"}
MISSING_LIBS = {"cuda", "curand", "curand_static", "cufft", "cufft_static", "cusparse",
                "cusolver", "nvrtc", "nvToolsExt", "nvtx3", "cudnn", "nvjpeg", "npp"}

SUFFIX_LANG = {".cu": "cu", ".cpp": "c++", ".cc": "c++", ".cxx": "c++", ".c++": "c++",
               ".C": "c++", ".c": "c"}
LINK_SUFFIXES = (".o", ".a", ".so", ".obj")


class Fail(Exception):
    """A user error: printed as one line, exit status 1."""


def split_value(arg, names):
    """For an option taking a value: (name, value or None) if arg is one of names, else None.
    Accepts '-o x' (value None: take the next argument), '-o=x' and, for short names, '-ox'."""
    for name in names:
        if arg == name:
            return name, None
        if arg.startswith(name + "="):
            return name, arg[len(name) + 1:]
    return None


class Options:
    def __init__(self):
        self.output = None
        self.compile_only = False
        self.shared = False
        self.cxx = CXX
        self.cflags = []      # to every compile: -I -D -U -O -std -w ...
        self.xcompiler = []   # -Xcompiler: to every compile and to the link, as with nvcc
        self.ldflags = []     # to the link: -L -l -Xlinker ...
        self.inputs = []      # (path, language or "link")
        self.run = False
        self.run_args = []
        self.keep = False
        self.verbose = False
        self.dryrun = False


def parse(argv):
    o = Options()
    lang = None
    args = list(argv)
    i = 0

    def value(name, attached):
        nonlocal i
        if attached is not None:
            return attached
        i += 1
        if i >= len(args):
            raise Fail(f"option '{name}' needs a value")
        return args[i]

    while i < len(args):
        a = args[i]
        if a in ("--help", "-h", "-help"):
            print(HELP.format(cxx=CXX), end="")
            sys.exit(0)
        if a in ("--version", "-V", "-version"):
            v = int(CUDART_VERSION) if CUDART_VERSION.isdigit() else 0
            print(f"{PROG}: nvcc-like driver for the course's CPU emulator\n"
                  f"Cuda compilation tools, release {v // 1000}.{v % 1000 // 10} "
                  f"(emulated runtime API; host compiler {CXX})")
            sys.exit(0)
        if not a.startswith("-") or a == "-":
            if a == "-":
                raise Fail("reading the source from standard input is not supported; "
                           "give a file name")
            o.inputs.append((a, lang))
        elif a in IGNORED_FLAGS:
            pass
        elif a in UNSUPPORTED:
            raise Fail(f"option '{a}' is not supported: {UNSUPPORTED[a]}")
        elif (m := split_value(a, IGNORED_WITH_VALUE)):
            value(*m)
        elif (m := split_value(a, ("-o", "--output-file"))):
            o.output = value(*m)
        elif a in ("-c", "--compile", "-dc", "--device-c", "-dw", "--device-w"):
            o.compile_only = True
        elif a in ("-shared", "--shared"):
            o.shared = True
        elif a in ("-w", "--disable-warnings"):
            o.cflags.append("-w")
        elif a in ("-run", "--run"):
            o.run = True
        elif (m := split_value(a, ("-run-args", "--run-args"))):
            o.run_args += value(*m).split(",")
        elif a in ("-keep", "--keep"):
            o.keep = True
        elif a in ("-v", "--verbose"):
            o.verbose = True
        elif a in ("-dryrun", "--dryrun"):
            o.dryrun = o.verbose = True
        elif (m := split_value(a, ("-x", "--x"))):
            v = value(*m)
            if v not in ("cu", "c++", "c", "none"):
                raise Fail(f"-x {v} is not supported (use cu, c++, c or none)")
            lang = None if v == "none" else v
        elif (m := split_value(a, ("-ccbin", "--compiler-bindir"))):
            v = value(*m)
            o.cxx = os.path.join(v, "g++") if os.path.isdir(v) else v
        elif (m := split_value(a, ("-Xcompiler", "--compiler-options"))):
            o.xcompiler += [f for f in value(*m).split(",") if f]
        elif (m := split_value(a, ("-Xlinker", "--linker-options"))):
            o.ldflags += ["-Wl," + f for f in value(*m).split(",") if f]
        elif (m := split_value(a, ("-std", "--std"))):
            v = value(*m)
            if v in ("c++03", "c++11", "c++14"):
                raise Fail(f"-std={v} is not supported: the emulator's headers need C++17 "
                           "(nvcc's default); use -std=c++17 or newer")
            o.cflags.append("-std=" + v)
        elif (m := split_value(a, ("-isystem", "--system-include"))):
            o.cflags += ["-isystem", value(*m)]
        elif (m := split_value(a, ("-include", "--pre-include"))):
            o.cflags += ["-include", value(*m)]
        elif (m := split_value(a, ("--include-path", "--define-macro", "--undefine-macro",
                                   "--library-path", "--library", "--optimize"))):
            short = {"--include-path": "-I", "--define-macro": "-D", "--undefine-macro": "-U",
                     "--library-path": "-L", "--library": "-l", "--optimize": "-O"}[m[0]]
            args[i] = short + value(*m)
            continue
        elif a[:2] in ("-I", "-D", "-U", "-L", "-l"):
            v = a[2:] if len(a) > 2 else value(a, None)
            if a[:2] == "-l":
                add_library(o, v)
            elif a[:2] == "-L":
                o.ldflags.append("-L" + v)
            else:
                o.cflags.append(a[:2] + v)
        elif a.startswith("-O"):
            o.cflags.append(a)
        elif a.startswith("-Wno-"):
            pass  # nvcc's own warning switches (-Wno-deprecated-gpu-targets, ...)
        else:
            raise Fail(f"unknown option '{a}' (host compiler options go through "
                       "-Xcompiler, as with nvcc; see cuemu-nvcc --help)")
        i += 1
    if not o.inputs:
        raise Fail("no input files (try cuemu-nvcc --help)")
    o.inputs = [(p, classify(p, l)) for p, l in o.inputs]
    if o.compile_only and o.output and len(o.inputs) > 1:
        raise Fail("-c with -o takes a single input file (as with nvcc)")
    if o.compile_only and any(l == "link" for _, l in o.inputs):
        raise Fail("-c was given an object or library file; only sources compile")
    return o


def add_library(o, name):
    if name in BUILTIN_LIBS:
        return  # in libcuemu.a
    if name in MISSING_LIBS:
        raise Fail(f"-l{name} is not supported: the emulator provides the CUDA runtime API and "
                   "a small cuBLAS (-lcublas) and NCCL (-lnccl) only")
    o.ldflags.append("-l" + name)


def classify(path, lang):
    if lang:
        return lang
    base, ext = os.path.splitext(path)
    if ext in SUFFIX_LANG:
        return SUFFIX_LANG[ext]
    if ext in LINK_SUFFIXES or ".so." in os.path.basename(path):
        return "link"
    raise Fail(f"'{path}': unknown kind of input file (use -x cu for CUDA sources "
               "with another suffix)")


class Failed(Exception):
    """A command of a compile run beside others failed: its exit status."""
    def __init__(self, rc):
        super().__init__(rc)
        self.rc = rc


def echo(cmd, o):
    """-v and -dryrun: the command, as nvcc shows its steps."""
    if o.verbose:
        print("#$ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)


def call(cmd, out=None):
    """cmd's exit status; out: a list that takes its output instead of the terminal."""
    try:
        if out is None:
            return subprocess.call(cmd)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out.append(p.stdout.decode("utf-8", "replace"))
        return p.returncode
    except FileNotFoundError:
        raise Fail(f"cannot run '{cmd[0]}': is it installed and on the PATH?")


def stop_if_failed(rc, out):
    """A failed command ends the compile with its status: the run's (out None), or the one of
    a compile beside others (Failed, reported after its output)."""
    if rc != 0:
        if out is not None:
            raise Failed(rc if rc > 0 else 1)
        raise SystemExit(rc if rc > 0 else 1)


def run(cmd, o, out=None):
    """Runs cmd; out: a list that takes its output instead of the terminal (a compile run
    beside others, whose output is shown afterwards in the order of the inputs)."""
    echo(cmd, o)
    if not o.dryrun:
        stop_if_failed(call(cmd, out), out)


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compile_all(o, jobs, work):
    """Compiles jobs [(src, lang, obj)]: one at a time as nvcc does when there is one, or -v or
    -dryrun shows the commands; else on every core this process may use, each compile's output
    (warnings, errors) shown afterwards in the order of the inputs, and the first failure's
    status returned as nvcc's would be (mergeSort's five files: 3.5 s one after another)."""
    if len(jobs) < 2 or o.verbose or o.dryrun or cores() < 2:
        for src, lang, obj in jobs:
            compile_one(o, src, lang, obj, work)
        return
    import concurrent.futures

    def one(job):
        out = []
        try:
            compile_one(o, *job, work, out)
            return 0, out
        except Failed as e:
            return e.rc, out
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(cores(), len(jobs))) as pool:
        results = list(pool.map(one, jobs))
    failed = 0
    for rc, out in results:
        sys.stderr.write("".join(out))
        failed = failed or rc
    sys.stderr.flush()
    if failed:
        raise SystemExit(failed)


QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def rewrite_headers(o, path, srcdir, hdrdir, seen, out=None):
    """The "quoted" headers a .cu includes (and theirs), below its folder, that declare
    __shared__ variables or launch kernels: rewritten like the .cu into the same place under
    hdrdir, which is searched first. `extern __shared__ T s[];` in a header (a common
    SharedMemory<T> helper) compiles only rewritten."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return
    for name in QUOTED_INCLUDE.findall(text):
        inc = os.path.normpath(os.path.join(os.path.dirname(path), name))
        rel = os.path.relpath(inc, srcdir)
        if inc in seen or rel.startswith("..") or not os.path.isfile(inc):
            continue
        seen.add(inc)
        with open(inc, encoding="utf-8", errors="replace") as f:
            body = f.read()
        if "__shared__" in body or "<<<" in body:
            dest = os.path.join(hdrdir, rel)
            if not o.dryrun:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
            run([EMU_REWRITE, inc, dest], o, out)
        rewrite_headers(o, inc, srcdir, hdrdir, seen, out)


def pch_flags(o, flags, defines):
    """The compile's flags with cuda_runtime.h read from a precompiled header (clang) instead of
    parsed again: about half of each small compile. clang refuses a PCH made with any other
    flags, so there is one per set of them (the emulator's, the source kind's macros, the
    user's -I -D -std -O -Xcompiler ..., the compiler and the headers' dates in its name),
    made by the first compile that needs it, under build/emu/pch/nvcc/. Unchanged flags where
    no PCH can be made (g++, whose .gch drop_stale_pch handles; a folder that cannot be
    written; CUEMU_NVCC_PCH=0): the header is parsed as before, with the same result."""
    if ("clang" not in os.path.basename(o.cxx) or "-include" not in flags
            or os.environ.get("CUEMU_NVCC_PCH") == "0"):
        return flags
    k = flags.index("-include")
    if flags[k + 1] != "cuda_runtime.h":
        return flags
    base = flags[:k] + flags[k + 2:]
    # -I paths as absolute, real ones: the same folder from two samples is one PCH
    user = []
    for f in o.cflags + o.xcompiler:
        if f.startswith("-I") and len(f) > 2:
            f = "-I" + os.path.realpath(f[2:])
        user.append(f)
    pch_args = base + defines + user
    try:
        inc = next(f[2:] for f in base if f.startswith("-I")
                   and os.path.isfile(os.path.join(f[2:], "cuda_runtime.h")))
        newest = max(os.path.getmtime(os.path.join(d, n))
                     for d, _, names in os.walk(inc) for n in names)
        cxx = shutil.which(o.cxx) or o.cxx
        key = "\0".join([o.cxx, str(os.path.getmtime(os.path.realpath(cxx))), str(newest)]
                        + pch_args)
        d = os.path.join(os.path.dirname(os.path.abspath(EMU_RUNTIME)), "pch", "nvcc")
        pch = os.path.join(d, hashlib.sha1(key.encode()).hexdigest()[:16] + ".pch")
        if not os.path.isfile(pch):
            os.makedirs(d, exist_ok=True)
            tmp = f"{pch}.{os.getpid()}.tmp"
            cmd = ([o.cxx] + pch_args + ["-fpch-instantiate-templates", "-x", "c++-header",
                                         "-o", tmp, os.path.join(inc, "cuda_runtime.h")])
            echo(cmd, o)
            if o.dryrun:
                return base[:k] + ["-include-pch", pch] + base[k:]
            # made once, beside other compiles perhaps (the last rename wins; each is whole)
            if subprocess.run(cmd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode != 0:
                if os.path.exists(tmp):
                    os.remove(tmp)
                return flags
            os.replace(tmp, pch)
            # the 16 used last are kept (7 to 10 MB each), none used in the last hour
            old = sorted((os.path.getmtime(os.path.join(d, n)), n) for n in os.listdir(d)
                         if n.endswith(".pch"))
            for t, n in old[:-16]:
                if t < time.time() - 3600:
                    os.remove(os.path.join(d, n))
        else:
            os.utime(pch)
    except (OSError, StopIteration, ValueError):
        return flags
    return base[:k] + ["-include-pch", pch] + base[k:]


def compile_pch(o, rest, defines, out):
    """Compiles with the emulator's flags, then rest, cuda_runtime.h from its PCH where there
    is one. Should clang refuse the PCH all the same (a system header changed since it was
    made, say), it is removed and the compile runs again without it; only that compile's
    messages are shown."""
    flags = pch_flags(o, EMU_CXXFLAGS, defines)
    if flags is EMU_CXXFLAGS or o.dryrun:
        run([o.cxx] + flags + rest, o, out)
        return
    echo([o.cxx] + flags + rest, o)
    text = []
    rc = call([o.cxx] + flags + rest, text)
    if rc != 0 and any(w in text[0] for w in ("precompiled header", "PCH file", "AST file")):
        try:
            os.remove(flags[flags.index("-include-pch") + 1])
        except OSError:
            pass
        run([o.cxx] + EMU_CXXFLAGS + rest, o, out)
        return
    if out is not None:
        out += text
    else:
        sys.stderr.write(text[0])
    stop_if_failed(rc, out)


def compile_one(o, src, lang, obj, work, out=None):
    """Rewrites a .cu like `make` does, then compiles it (or a .cpp/.c) to obj (out: see run)."""
    if not os.path.isfile(src):
        raise Fail(f"'{src}': no such file")
    srcdir = os.path.dirname(os.path.abspath(src))
    # The rewritten .cpp lives elsewhere: search the source's own folder for "quoted"
    # includes first, as the compiler would for the .cu itself.
    quote = ["-iquote", srcdir]
    if lang == "cu":
        hdrdir = os.path.join(work, os.path.basename(obj) + ".h")
        rewrite_headers(o, os.path.abspath(src), srcdir, hdrdir, set(), out)
        if os.path.isdir(hdrdir):
            quote = ["-iquote", hdrdir] + quote
        stem = os.path.splitext(os.path.basename(src))[0]
        cpp = (stem + ".cuemu.cpp" if o.keep
               else os.path.join(work, os.path.basename(obj) + ".cpp"))
        run([EMU_REWRITE, src, cpp], o, out)
        compile_pch(o, CU_DEFINES + quote + o.cflags + o.xcompiler + ["-c", "-o", obj, cpp],
                    CU_DEFINES, out)
    elif lang == "c++":
        compile_pch(o, HOST_DEFINES + quote + o.cflags + o.xcompiler + ["-c", "-o", obj, src],
                    HOST_DEFINES, out)
    else:  # C: the same debug, optimisation and include flags, without the C++ ones
        cflags = [f for f in EMU_CXXFLAGS if not f.startswith("-std=")]
        if "-include" in cflags:
            k = cflags.index("-include")
            del cflags[k:k + 2]
        cflags = [f for f in cflags + o.cflags if not f.startswith("-std=c++")] + o.xcompiler
        run([CC] + cflags + HOST_DEFINES + quote + ["-c", "-o", obj, src], o, out)


def drop_stale_pch(flags):
    """make builds a precompiled cuda_runtime.h (emu/emu.mk); gcc would use it even after an
    emulator header changed, so it is left out until make has rebuilt it."""
    dirs = [f[2:] for f in flags if f.startswith("-I")]
    pch = [d for d in dirs if os.path.exists(os.path.join(d, "cuda_runtime.h.gch"))]
    hdr = [d for d in dirs if os.path.exists(os.path.join(d, "cuda_runtime.h"))]
    if not pch or not hdr:
        return flags
    made = os.path.getmtime(os.path.join(pch[0], "cuda_runtime.h.gch"))
    newest = max(os.path.getmtime(os.path.join(hdr[0], h)) for h in os.listdir(hdr[0]))
    return flags if newest < made else [f for f in flags if f != "-I" + pch[0]]


def main(argv):
    global EMU_CXXFLAGS
    o = parse(argv)
    EMU_CXXFLAGS = drop_stale_pch(EMU_CXXFLAGS)
    if not (os.access(EMU_REWRITE, os.X_OK) and os.path.isfile(EMU_RUNTIME)):
        raise Fail(f"the emulator is not built ({EMU_REWRITE} or {EMU_RUNTIME} is missing): "
                   "run make cuemu-nvcc in the course's folder")
    work = tempfile.mkdtemp(prefix="cuemu-nvcc.")
    try:
        objs, jobs = [], []
        for k, (src, lang) in enumerate(o.inputs):
            if lang == "link":
                objs.append(src)
                continue
            stem = os.path.splitext(os.path.basename(src))[0]
            if o.compile_only:
                obj = o.output or stem + ".o"
            else:
                obj = os.path.join(work, f"{k}_{stem}.o")
            jobs.append((src, lang, obj))
            objs.append(obj)
        compile_all(o, jobs, work)
        if o.compile_only:
            return 0
        out = o.output or "a.out"
        # --whole-archive, as emu/emu.mk links: the exports ctypes finds by name
        # (cuemuLastDiagnostic, cuemuNoAccess...) are referenced by nothing in the program
        run([o.cxx] + (["-shared"] if o.shared else []) + o.xcompiler + ["-o", out] + objs
            + o.ldflags
            + ["-Wl,--whole-archive", EMU_RUNTIME, "-Wl,--no-whole-archive"] + EMU_LDLIBS, o)
        if o.run and not o.dryrun:
            prog = out if os.path.dirname(out) else os.path.join(".", out)
            return subprocess.call([prog] + o.run_args)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
