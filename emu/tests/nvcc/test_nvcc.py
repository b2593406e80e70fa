# SPDX-License-Identifier: MIT
"""cuemu-nvcc's tests, run by CTest (emu/tests/nvcc/nvcc.cmake) in make test.

    python3 test_nvcc.py CASE DRIVER SCRATCH_DIR

CASE is one of: multi-file, separate, diagnostics, options, headers, std-headers. Each builds real programs with the
driver the way a student would (from another folder than the sources), runs them, and checks
their output; exit 0 when every check passed.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MULTI = os.path.join(HERE, "multi")
EXPECTED = ["saxpy: 1009 elements, scale 3: ok", "block sums: 8 blocks: ok",
            "cublas sgemm 2x2: ok"]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def sh(cmd, cwd):
    """Runs cmd, returns (exit status, stdout, stderr); prints it for the CTest log."""
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    print("$ " + " ".join(cmd) + f"   -> {p.returncode}")
    for line in (p.stdout + p.stderr).splitlines():
        print("  | " + line)
    return p.returncode, p.stdout, p.stderr


def built_and_ran(rc_build, prog, cwd, what):
    if not check(rc_build == 0 and os.path.exists(prog), f"{what}: builds"):
        return
    rc, out, _ = sh([prog], cwd)
    check(rc == 0 and out.splitlines() == EXPECTED, f"{what}: runs and prints the right results")


def case_multi_file(nvcc, work):
    """Two .cu files, a .cpp and headers in one command, with nvcc's usual flags."""
    prog = os.path.join(work, "multi")
    rc, _, _ = sh([nvcc, "-arch=sm_90", "-gencode", "arch=compute_90,code=sm_90", "-O2", "-g",
                   "-lineinfo", "-std=c++17", "-I", os.path.join(MULTI, "include"),
                   "-DSCALE=3", "-USOMETHING", "-Xcompiler", "-Wall,-Wextra", "-o", prog,
                   os.path.join(MULTI, "main.cu"), os.path.join(MULTI, "kernels.cu"),
                   os.path.join(MULTI, "host_util.cpp"), "-lcublas"], work)
    built_and_ran(rc, prog, work, "one command, three sources")
    # without the -I of include/, params.h is missing: the driver adds no folder but the sources'
    rc, _, err = sh([nvcc, "-DSCALE=3", "-c", "-o", os.path.join(work, "x.o"),
                     os.path.join(MULTI, "main.cu")], work)
    check(rc != 0 and "params.h" in err, "a header only -I names is not found without it")


def case_separate(nvcc, work):
    """-c for each file (relative paths, default and given object names), -x cu, then a link."""
    src = os.path.join(work, "src")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(MULTI, src)
    os.rename(os.path.join(src, "kernels.cu"), os.path.join(src, "kernels.txt"))
    obj = os.path.join(work, "obj")
    os.makedirs(obj, exist_ok=True)
    flags = ["-arch", "sm_90", "-O2", "-D", "SCALE=3", "--include-path=" + src + "/include"]
    rc1, _, _ = sh([nvcc, "-c"] + flags + ["../src/main.cu"], obj)     # -> obj/main.o
    rc2, _, _ = sh([nvcc, "-dc"] + flags + ["-x", "cu", "../src/kernels.txt", "-x", "none",
                                             "-o", "kern.o"], obj)
    rc3, _, _ = sh([nvcc, "-c", "-o", "util.o", "../src/host_util.cpp"], obj)
    ok = check(rc1 == 0 and os.path.exists(os.path.join(obj, "main.o")),
               "-c without -o writes main.o in the current folder")
    ok &= check(rc2 == 0 and rc3 == 0, "-dc -x cu of a .txt source and -c of a .cpp compile")
    if ok:
        prog = os.path.join(work, "linked")
        rc, out, _ = sh([nvcc, "-o", prog, "main.o", "kern.o", "util.o", "-lcublas", "-run"], obj)
        check(rc == 0 and out.splitlines() == EXPECTED,
              "linked from three objects, -run runs it and it prints the right results")
        check(os.access(prog, os.X_OK), "-run keeps the program it linked")


def marker_line(path, marker):
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise SystemExit(f"{path} has no {marker} line")


def case_diagnostics(nvcc, work):
    """A planted bug gets the chapters' report; a compile error points at the .cu's line."""
    prog = os.path.join(work, "oob")
    rc, _, _ = sh([nvcc, "-o", prog, "oob.cu"], HERE)
    if check(rc == 0, "the planted out-of-bounds program builds"):
        src = os.path.join(HERE, "oob.cu")
        rc, out, err = sh([prog], work)
        want = (r"cuemu: out-of-bounds write of global memory in kernel scale_kernel, "
                r"block \(4096,0,0\), thread \(0,0,0\) at \S*oob\.cu:%d: .* 0 bytes past the end "
                r"of a 4194304-byte allocation made at \S*oob\.cu:%d"
                % (marker_line(src, "@oob-write"), marker_line(src, "@oob-alloc")))
        check(re.search(want, err) is not None,
              "the report names kernel, block, thread, the write's line and the cudaMalloc's")
        check(rc == 1 and "cudaErrorIllegalAddress" in out,
              "the program carries on and gets cudaErrorIllegalAddress, as on a GPU")
    # a host memcpy from device memory, built as Ubuntu's compilers build (issue 22)
    prog = os.path.join(work, "host_memcpy")
    rc, _, _ = sh([nvcc, "-O2", "-D_FORTIFY_SOURCE=2", "-o", prog, "host_memcpy.cu"], HERE)
    if check(rc == 0, "the planted host memcpy program builds with -D_FORTIFY_SOURCE=2"):
        rc, out, err = sh([prog], work)
        want = (r"cuemu: host read of device memory: .* The host access: in memcpy called from "
                r"\S*host_memcpy\.cu:%d" % marker_line(os.path.join(HERE, "host_memcpy.cu"),
                                                      "@host-read"))
        check(rc == 1 and re.search(want, err) is not None,
              "the report names the memcpy's line, not the C library's inline wrapper's")
    bad = os.path.join(work, "bad.cu")
    with open(bad, "w") as f:
        f.write("__global__ void k(float *p)\n{\n    p[threadIdx.x] = undeclared;\n}\n"
                "int main() { k<<<1, 1>>>(nullptr); return 0; }\n")
    rc, _, err = sh([nvcc, "-o", os.path.join(work, "bad"), "bad.cu"], work)
    check(rc != 0 and re.search(r"bad\.cu:3:\d+: error: .*undeclared", err) is not None,
          "a compile error names the line of the .cu file")
    # several sources, compiled at once: each one's messages whole and in the order given, the
    # failure's status, no program
    warn = os.path.join(work, "warn.cu")
    with open(warn, "w") as f:
        f.write("__device__ int twice(int x) { x + 1; return 2 * x; }\n")
    prog = os.path.join(work, "two")
    rc, _, err = sh([nvcc, "-o", prog, "warn.cu", "bad.cu"], work)
    w, e = err.find("warn.cu:1:"), err.find("bad.cu:3:")
    check(rc != 0 and 0 <= w < e and not os.path.exists(prog),
          "two sources, one failing: both files' messages, in order, and no program")


def case_options(nvcc, work):
    """What needs no compile: --version, --help, and one clear line for what is refused."""
    rc, out, _ = sh([nvcc, "--version"], work)
    check(rc == 0 and re.search(r"release \d+\.\d", out) is not None, "--version says the release")
    rc, out, _ = sh([nvcc, "--help"], work)
    check(rc == 0 and "-o <file>" in out and "-lcublas" in out, "--help lists the options")
    for args, words in ((["-ptx", "a.cu"], "'-ptx' is not supported"),
                        (["--frobnicate", "a.cu"], "unknown option '--frobnicate'"),
                        (["-fopenmp", "a.cu"], "-Xcompiler"),
                        (["a.cu", "-lcurand"], "-lcurand is not supported"),
                        (["-std=c++11", "a.cu"], "need C++17"),
                        (["-c", "-o", "x.o", "a.cu", "b.cu"], "single input file"),
                        (["notes.md"], "unknown kind of input file"),
                        ([], "no input files"),
                        (["-o"], "needs a value"),
                        (["missing.cu"], "'missing.cu': no such file")):
        rc, out, err = sh([nvcc] + args, work)
        lines = err.strip().splitlines()
        check(rc == 1 and out == "" and len(lines) == 1 and lines[0].startswith("cuemu-nvcc: ")
              and words in lines[0], f"{' '.join(args) or '(nothing)'}: one line saying {words!r}")
    rc, out, err = sh([nvcc, "-dryrun", "-o", "never", os.path.join(HERE, "oob.cu")], work)
    check(rc == 0 and "cuemu-rewrite" in err and "--whole-archive" in err
          and not os.path.exists(os.path.join(work, "never")),
          "-dryrun prints the rewrite, compile and link commands and runs none")


HEADERS_CU = r"""#include <cuda_runtime_api.h>
#include <driver_types.h>
#if !defined(__DRIVER_TYPES_H__) || !defined(__CUDA_RUNTIME_H__) || !defined(__CUDACC__)
#error "the toolkit's include guards, or __CUDACC__, are missing"
#endif
#include <cstdio>
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include "shared_helper.cuh"
namespace cg = cooperative_groups;

__global__ void tile_sums(const int *in, int *out)
{
    cg::thread_block b = cg::this_thread_block();
    cg::thread_block_tile<16> t = cg::tiled_partition<16>(b);
    int *s = shared_ints();
    s[b.thread_rank()] = in[b.thread_rank()];
    b.sync();
    int v = cg::reduce(t, s[b.thread_rank()], cg::plus<int>());
    if (t.thread_rank() == 0) out[t.meta_group_rank()] = v + (int)(float)__hadd(__half(1.0f), __half(0.5f));
}

unsigned host_umin(unsigned a, unsigned b);
int main()
{
    int h[64], r[4], *d, *o;
    for (int i = 0; i < 64; i++) h[i] = i;
    cudaMalloc(&d, sizeof h);
    cudaMalloc(&o, sizeof r);
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
    cudaProfilerStart();
    tile_sums<<<1, 64, 64 * sizeof(int)>>>(d, o);
    cudaProfilerStop();
    cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
    int ok = r[0] == 121 && r[3] == 889 && host_umin(3, umin(5u, 4u)) == 3;
    printf("headers: %s\n", ok ? "ok" : "wrong");
    return !ok;
}
"""
HEADERS_CUH = """// a helper header, as NVIDIA's samples have: its extern __shared__ is rewritten too
__device__ inline int *shared_ints()
{
    extern int __shared__ s_ints[];
    return s_ints;
}
"""
HEADERS_CPP = """// a host file may define what is device-only in CUDA, as with nvcc
static unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
unsigned host_umin(unsigned a, unsigned b) { return umin(a, b); }
"""


def case_headers(nvcc, work):
    """The emulator's stand-ins for the toolkit's headers: guards, cooperative groups, fp16,
    the profiler, a helper header's extern __shared__, a .cpp with its own umin; and the
    headers and calls it does not offer refused at their line."""
    for name, text in (("main.cu", HEADERS_CU), ("shared_helper.cuh", HEADERS_CUH),
                       ("host.cpp", HEADERS_CPP),
                       ("wmma.cu", "#include <mma.h>\nint main() { return 0; }\n"),
                       ("drv.cu", "#include <cuda.h>\nint main() { return cuInit(0); }\n")):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    prog = os.path.join(work, "headers")
    rc, _, _ = sh([nvcc, "-o", prog, "main.cu", "host.cpp"], work)
    if check(rc == 0 and os.path.exists(prog), "runtime-API headers, cooperative groups, fp16: builds"):
        rc, out, err = sh([prog], work)
        check(rc == 0 and out.splitlines() == ["headers: ok"] and "cuemu:" not in err,
              "tile sums, half and umin are right, and nothing is reported")
    rc, _, err = sh([nvcc, "-o", "wmma", "wmma.cu"], work)
    check(rc != 0 and "wmma.cu:1" in err and "not supported here" in err and "mma.h" in err,
          "#include <mma.h>: not supported here, at its line")
    rc, _, err = sh([nvcc, "-o", "drv", "drv.cu"], work)
    check(rc != 0 and "drv.cu:2" in err and "not supported here: the CUDA driver API" in err,
          "a driver-API call: not supported here, at its line")


def other_compilers(used):
    """The C++ compilers installed besides the driver's own (g++, g++-NN, clang++,
    clang++-NN on the PATH), one per real file, as (name, path)."""
    seen, found = {os.path.realpath(shutil.which(used) or used)}, []
    names = ["g++", "clang++"] + [f"g++-{v}" for v in range(9, 30)] + [f"clang++-{v}" for v in range(9, 30)]
    for name in names:
        path = shutil.which(name)
        if path and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            found.append((name, path))
    return found


def case_std_headers(nvcc, work):
    """Every C++17 standard header after the emulator's headers (libstdc++ 13 and newer write
    __attribute__((__noinline__)), which a __noinline__ macro must not break): the program
    built and run with the driver, and its rewritten text compiled (syntax only) by every
    other installed compiler, so a student's g++ or clang++ of any supported version is
    covered on a machine that has it."""
    src = os.path.join(HERE, "std_headers.cu")
    prog = os.path.join(work, "std_headers")
    rc, _, _ = sh([nvcc, "-o", prog, src], work)
    if check(rc == 0 and os.path.exists(prog), "every C++17 header through the driver: builds"):
        rc, out, _ = sh([prog], work)
        check(rc == 0 and out.splitlines() == ["std headers: ok"], "and runs")
    with open(nvcc) as f:
        text = f.read()
    rewrite = re.search(r'^EMU_REWRITE = r"""(.*)"""', text, re.M).group(1)
    used = re.search(r'^CXX = r"""(.*)"""', text, re.M).group(1)
    cpp = os.path.join(work, "std_headers.cpp")
    rc, _, _ = sh([rewrite, src, cpp], work)
    if not check(rc == 0, "the rewriter writes std_headers.cpp"):
        return
    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    for name, path in other_compilers(used):
        rc, _, err = sh([path, "-std=c++17", "-fsyntax-only", "-I" + os.path.join(root, "emu", "include"),
                         "-isystem", os.path.join(root, "emu", "include", "unsupported"),
                         "-include", "cuda_runtime.h", cpp], work)
        check(rc == 0 and "error" not in err, f"every C++17 header with {name}: compiles")


PCH_CU = r"""#include <cstdio>
#ifndef VALUE
#define VALUE 1
#endif
__global__ void put(int *out) { *out = VALUE; }
int main()
{
    int *d, h = 0;
    cudaMalloc(&d, sizeof h);
    put<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("value %d\n", h);
    return 0;
}
"""


def case_pch(nvcc, work):
    """cuda_runtime.h from a precompiled header (clang): one per set of flags, so a user's
    macro reaches the program whatever PCH was made before; CUEMU_NVCC_PCH=0 parses it."""
    with open(os.path.join(work, "pch.cu"), "w") as f:
        f.write(PCH_CU)
    with open(nvcc) as f:
        clang = "clang" in os.path.basename(re.search(r'^CXX = r"""(.*)"""', f.read(), re.M).group(1))
    for env, defs, want in (({}, ["-DVALUE=7"], 7), ({}, ["-DVALUE=9"], 9), ({}, [], 1),
                            ({"CUEMU_NVCC_PCH": "0"}, ["-DVALUE=5"], 5)):
        prog = os.path.join(work, "pch")
        p = subprocess.run([nvcc, "-v"] + defs + ["pch.cu", "-o", prog], cwd=work,
                           capture_output=True, text=True, env=dict(os.environ, **env))
        used = "-include-pch" in p.stderr
        what = " ".join(defs) or "no -D"
        if not check(p.returncode == 0, f"{what}{' (CUEMU_NVCC_PCH=0)' if env else ''}: builds"):
            continue
        check(used == (clang and not env), f"{what}: the PCH is {'used' if used else 'not used'}"
              f"{' (clang)' if clang else ' (not clang)'}")
        rc, out, _ = sh([prog], work)
        check(rc == 0 and f"value {want}" in out, f"{what}: the program sees VALUE = {want}")


CASES = {"multi-file": case_multi_file, "separate": case_separate,
         "diagnostics": case_diagnostics, "options": case_options, "headers": case_headers,
         "std-headers": case_std_headers, "pch": case_pch}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in CASES:
        raise SystemExit(f"usage: test_nvcc.py {{{'|'.join(CASES)}}} DRIVER SCRATCH_DIR")
    case, driver, scratch = sys.argv[1:]
    if not os.access(driver, os.X_OK):
        raise SystemExit(f"{driver} is missing: run make cuemu-nvcc")
    work = os.path.join(os.path.abspath(scratch), case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    CASES[case](os.path.abspath(driver), work)
    print(f"\n{case}: " + ("passed" if not failures else f"{len(failures)} check(s) FAILED"))
    sys.exit(1 if failures else 0)
