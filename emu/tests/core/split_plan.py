# SPDX-License-Identifier: MIT
"""Which kernels cuemu-rewrite splits at their barriers (emu/include/cuemu_split.h), and which
of those run as thread loops (loops_*: every barrier a statement that every thread reaches
alike, see tl_plan in emu/rewrite/cuemu_rewrite.c) rather than coroutines (split_*).

usage: split_plan.py CUEMU_REWRITE
A kernel is split only when it waits with __syncthreads (and _count, _and, _or) or a
cooperative-groups thread_block's sync, in its own body or in a split helper it calls (a `void`
__device__ function of the file (static, inline or a template: no other file sees its type),
defined once and called only as a statement, that waits the
same way: it becomes a coroutine the kernel awaits); anything else that waits, in the body or
in a function (not a split helper) or macro of the file it calls (directly or not), keeps it on fibers, where
every wait works; so does a local array (it would live in the coroutine's frame). The
coroutine takes the kernel's parameters as its own, or captures them
when one has no name. A split the core cannot run is refused at run time (emu/tests/core/split.cu),
but a kernel this file's own code makes unsplittable must never get there.

And which functions it marks as host code (CUEMU_HOST_FN, no load/store hooks): an `extern "C"`
function that is neither __global__ nor __device__, and nothing else.

And which `#pragma unroll` it leaves to the host compiler: one with no count, on a line of its
own, and nothing else (a count is the program's choice; a string or a comment is not a pragma).
"""
import os
import re
import subprocess
import sys
import tempfile

CASES = r'''
namespace cg = cooperative_groups;
#define BARRIER() __syncthreads()
static __device__ void helper(float *s) { s[threadIdx.x] = 0; __syncthreads(); }
template <int N> __device__ void outer(float *s) { helper(s); }
__device__ float plain(float x) { return 2 * x; }
__device__ float warp_sum(float v) { return v + __shfl_down_sync(0xffffffffu, v, 1); }
__device__ void helper_extern(float *s) { __syncthreads(); }
inline __device__ void helper_warp(float *s) { __syncthreads(); s[0] = __shfl_sync(0xffffffffu, s[1], 0); }
inline __device__ float helper_value(float *s) { __syncthreads(); return s[0]; }
inline __device__ void helper_expr(float *s) { __syncthreads(); }
static __device__ void helper_proto(float *s);
static __device__ void helper_proto(float *s) { __syncthreads(); }
inline __host__ __device__ void helper_host(float *s) { __syncthreads(); }
inline __device__ void helper_array(float *s) { float a[2] = {s[0], s[1]}; __syncthreads(); s[2] = a[1]; }

__global__ void loops_direct(float *p) { __shared__ float s[32]; s[threadIdx.x] = plain(p[0]);
    __syncthreads(); if (threadIdx.x) return; p[0] = s[1]; }
__global__ void split_count(int *p) { p[0] = __syncthreads_count(threadIdx.x & 1); }
__global__ void split_cg(int *p) { cg::thread_block b = cg::this_thread_block();
    p[b.thread_rank()] = 1; b.sync(); cg::sync(b); p[0] = b.size(); }
__global__ void split_cg_auto(int *p) { auto blk = cg::this_thread_block(); blk.sync(); }
template <int N> __global__ void loops_template(int *p) { p[N] = 1; __syncthreads(); }
__global__ void split_unnamed(int *p, int) { __syncthreads(); p[0] = 1; }
__global__ void split_helper(float *p) { __shared__ float s[32]; helper(s); }
__global__ void split_outer(float *p) { __shared__ float s[32]; outer<1>(s); __syncthreads(); }
__global__ void split_helper_loop(float *p) { __shared__ float s[32];
    for (int k = 0; k < 4; k++) if (k & 1) helper(s); else { outer<2>(s); } }
__global__ void keep_helper_extern(float *p) { __shared__ float s[32]; helper_extern(s); }
__global__ void keep_helper_warp(float *p) { __shared__ float s[32]; helper_warp(s); }
__global__ void keep_helper_value(float *p) { __shared__ float s[32]; p[0] = helper_value(s); }
__global__ void keep_helper_expr(float *p) { __shared__ float s[32];
    p[0] > 0 ? helper_expr(s) : (void)0; }
__global__ void keep_helper_proto(float *p) { __shared__ float s[32]; helper_proto(s); }
__global__ void keep_helper_host(float *p) { __shared__ float s[32]; helper_host(s); }
__global__ void keep_helper_array(float *p) { __shared__ float s[32]; helper_array(s); }
__global__ void keep_macro(float *p) { BARRIER(); }
__global__ void keep_warp(float *p) { p[0] = warp_sum(p[0]); __syncthreads(); }
__global__ void keep_shfl(float *p) { __syncthreads(); p[0] = __shfl_sync(0xffffffffu, p[0], 0); }
__global__ void keep_lambda(float *p) { auto f = [&]() { p[0] = 1; }; __syncthreads(); f(); }
__global__ void keep_tile(float *p) { auto t = cg::tiled_partition<32>(cg::this_thread_block());
    __syncthreads(); t.sync(); }
__global__ void keep_cg_call(float *p) { cg::this_thread_block().sync(); }
__global__ void keep_asm(float *p) { __syncthreads(); asm volatile("bar.sync 0;"); }
__global__ void keep_sleep(float *p) { __syncthreads(); __nanosleep(100); }
__global__ void keep_no_barrier(float *p) { p[threadIdx.x] = plain(1); }
__global__ void keep_local_array(float *p) { float acc[4] = {0, 0, 0, 0}; __syncthreads();
    for (int i = 0; i < 4; i++) acc[i] += p[i]; __syncthreads(); p[0] = acc[0] + acc[3]; }
__global__ void loops_indexing(float *p) { __shared__ float s[32]; s[threadIdx.x] = p[0];
    __syncthreads(); if (threadIdx.x) p[threadIdx.x] = s[31 - threadIdx.x]; else return; }
#define TILE 16
__global__ void loops_tree(float *out, int n) { __shared__ float s[256];
    unsigned t = threadIdx.x; s[t] = t < n ? 1.0f : 0.0f; __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k];
        __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0]; }
__global__ void loops_tiles(const float *a, float *c, int n) { __shared__ float ta[TILE];
    int tx = threadIdx.x, row = blockIdx.y * TILE + tx; float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) { ta[tx] = a[row * n + t + tx]; __syncthreads();
        for (int k = 0; k < TILE; k++) acc += ta[k]; __syncthreads(); }
    c[row] = acc; }
__global__ void loops_nested(float *p, int n) { __shared__ float s[64];
    for (int i = 0; i < n; i++) { for (int j = 1; j < 4; j *= 2) { s[threadIdx.x] = i + j;
        __syncthreads(); } p[threadIdx.x] += s[63 - threadIdx.x]; __syncthreads(); } }
__global__ void loops_unset(float *p) { __shared__ float s[64]; float v; s[threadIdx.x] = 1;
    __syncthreads(); v = s[63 - threadIdx.x]; __syncthreads(); p[threadIdx.x] = v; }
__global__ void loops_student_tiles(const float *a, float *c, int n) { int tx = threadIdx.x;
    int row = blockIdx.y * TILE + tx; __shared__ float ta[TILE]; int tiles = (n + TILE - 1) / TILE;
    float acc = 0.0f; for (int t = 0; t < tiles; t++) { ta[tx] = a[row * n + t * TILE + tx];
        __syncthreads(); for (int k = 0; k < TILE; k++) acc += ta[k]; __syncthreads(); }
    c[row] = acc; }
__global__ void split_uniform_written(float *p, int n) { int m = n / 2; m += p[0] > 0;
    for (int k = 0; k < m; k++) { p[k] = 1; __syncthreads(); } }
__global__ void split_shared_after_load(float *p) { float v = p[0]; __shared__ float s[4];
    s[0] = v; __syncthreads(); p[1] = s[0]; }
__global__ void loops_early_return(float *p, int n) { if (threadIdx.x >= n) return;
    p[threadIdx.x] = 1; __syncthreads(); p[0] = 2; }
__global__ void split_loop_per_thread(float *p) { for (int k = threadIdx.x; k < 64; k += 32) {
    p[k] = 1; __syncthreads(); } }
__global__ void split_loop_tail(float *p) { for (int k = 0; k < 4; k++) { __syncthreads();
    p[k] = 1; } }
__global__ void split_code_before_loop(float *p) { p[0] = 1;
    for (int k = 0; k < 4; k++) { p[k] = 2; __syncthreads(); } }
__global__ void split_loop_writes_var(float *p) { for (int k = 0; k < 4; k++) { k += p[0] > 0;
    __syncthreads(); } }
__global__ void split_loop_break(float *p) { for (int k = 0; k < 4; k++) { if (p[k] > 0) break;
    __syncthreads(); } }
__global__ void split_if_barrier(float *p) { if (p[0] > 0) __syncthreads(); p[1] = 0; }
__global__ void split_param_written(float *p, int n) { n -= 1; __syncthreads(); p[n] = 0; }
__global__ void split_shared_late(float *p) { p[0] = 1; __shared__ float s[4]; s[0] = 1;
    __syncthreads(); p[1] = s[0]; }
struct pair_t { int a, b; };
__global__ void split_member_written(pair_t q, int *p) { q.a += 1; __syncthreads(); p[0] = q.a; }
__global__ void loops_member_read(pair_t q, int *p) { p[threadIdx.x] = q.a; __syncthreads();
    p[0] += q.b; }
static __device__ void bump(int &v) { v++; }
__global__ void split_param_by_reference(int *p, int n) { bump(n); __syncthreads(); p[n] = 0; }
__global__ void split_unknown_type(int *p) { pair_t q = {1, 2}; __syncthreads(); p[0] = q.a; }
__global__ void split_twice_declared(float *p) { int v = 1; __syncthreads();
    for (int k = 0; k < 2; k++) { int v = k; p[v] = 1; __syncthreads(); } p[0] = v; }
'''

# (line, marked as host code?)
HOST_CASES = [
    ('extern "C" int host_entry(float *p, int n)', True),
    ('extern "C"  __host__ int host_qualified(void)', True),
    ('extern "C" int host_prototype(int);', True),
    ('extern "C" __global__ void c_kernel(float *p) { p[0] = 1; }', False),
    ('extern "C" __host__ __device__ float both(float x) { return x; }', False),
    ('extern "C" __device__ float dev(float x) { return x; }', False),
    ('extern "C" int c_variable;', False),
    ('extern "C" {', False),
    ('extern int plain_extern(int);', False),
    ('#define API extern "C" int', False),
]

# (line, `#pragma unroll` left as written?)
PRAGMA_CASES = [
    ('#pragma unroll', False),
    ('  #pragma   unroll  ', False),
    ('#pragma unroll // 8 iterations', False),
    ('#pragma unroll 4', True),
    ('#pragma unroll(2)', True),
    ('#pragma unrolled', True),
    ('const char *s = "#pragma unroll";', True),
    ('// #pragma unroll', True),
    ('int x = 1; #pragma unroll', True),
]


def rewritten_lines(tool, tmp, name, text):
    """The rewriter's output for text, as lines, without its first (the #line directive)."""
    cu, out = os.path.join(tmp, name + ".cu"), os.path.join(tmp, name + ".cpp")
    with open(cu, "w") as f:
        f.write(text)
    subprocess.run([tool, cu, out], check=True)
    return open(out).read().split("\n")[1:]


def pragma_kept(tool, tmp):
    got = rewritten_lines(tool, tmp, "pragma", "\n".join(l for l, _ in PRAGMA_CASES) + "\n")
    errors = [f"`{line}` {'changed' if keep else 'kept'}, want the opposite: {got[i]}"
              for i, (line, keep) in enumerate(PRAGMA_CASES) if (got[i] == line) != keep]
    if len(got) != len(PRAGMA_CASES) + 1:
        errors.append(f"the lines moved: {len(got) - 1} lines for {len(PRAGMA_CASES)}")
    return errors


def host_marks(tool, tmp):
    got = rewritten_lines(tool, tmp, "host", "\n".join(l for l, _ in HOST_CASES) + "\n}\n")
    return [f"{'not ' if want else ''}marked as host code, want the opposite: {got[i]}"
            for i, (_, want) in enumerate(HOST_CASES) if ("CUEMU_HOST_FN" in got[i]) != want]


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        text = "\n".join(rewritten_lines(tool, tmp, "cases", CASES))
        errors = host_marks(tool, tmp) + pragma_kept(tool, tmp)
    for m in re.finditer(r"__global__ void (\w+)\(", CASES):
        name = m.group(1)
        start = text.index(f"__global__ void {name}(")
        end = text.find("cuemu_kfn_", start)      # the next kernel's companion
        body = text[start:end if end >= 0 else len(text)]
        split, loops = "CUEMU_CO_BEGIN" in body, "CUEMU_TL_BEGIN" in body
        got = "loops" if loops else "split" if split else "keep"
        if got != name.split("_")[0] or (split and loops):
            errors.append(f"{name}: {got}, want {name.split('_')[0]}:\n{body}")
        if (split or loops) and re.search(r"\breturn\b|__syncthreads\b|\.sync\(|cg::sync", body):
            errors.append(f"{name}: split, but a return or a barrier was left as it was:\n{body}")
    # split helpers: a coroutine's return type and barriers; the others as written
    for name, split in (("helper", True), ("outer", True), ("helper_extern", False), ("helper_warp", False),
                        ("helper_value", False), ("helper_expr", False), ("helper_proto", False),
                        ("helper_host", False), ("helper_array", False), ("plain", False)):
        line = next(l for l in text.split("\n") if re.search(rf"\b{name}\(float \*s\) {{", l)
                    or re.search(rf"\b{name}\(float x\) {{", l))
        if ("CUEMU_CO_SUB" in line) != split or (split and "__syncthreads" in line):
            errors.append(f"helper {name}: {'not ' if split else ''}split as it should be: {line}")
    if "CUEMU_CO_AWAIT_BEGIN helper(s) CUEMU_CO_AWAIT_END" not in text:
        errors.append("split_helper: the call of a split helper must be awaited")
    if "CUEMU_CO_BEGIN_CAPTURE" not in text[text.index("void split_unnamed("):]:
        errors.append("split_unnamed: a parameter without a name must make the split capture")
    if "CUEMU_CO_BEGIN(float *p)" not in text or "CUEMU_CO_END(p)" not in text:
        errors.append("split_helper: the lambda must take the kernel's parameters")
    # thread loops: the values that outlive a stretch, in arrays; the others stay variables
    tiles = text[text.index("void loops_tiles("):text.index("void loops_nested(")]
    for v, want in (("tx", True), ("row", True), ("acc", True), ("k", False), ("t", False)):
        if (f", cuemu_tlv_{v}_" in tiles) != want:
            errors.append(f"loops_tiles: {v} {'not ' if want else ''}kept per thread:\n{tiles}")
    student = text[text.index("void loops_student_tiles("):text.index("void split_uniform_written(")]
    if "CUEMU_TL_UNIFORM(int tiles = (n + TILE - 1) / TILE;)" not in student:
        errors.append(f"loops_student_tiles: the loop's bound must be declared at the block's level:\n{student}")
    unset = text[text.index("void loops_unset("):text.index("void loops_student_tiles(")]
    if "CUEMU_TL_NOINIT(cuemu_tlv_v_" not in unset or "CUEMU_TL_SAVE(cuemu_tlv_v_" not in unset:
        errors.append(f"loops_unset: a value declared unset must be the thread's element:\n{unset}")
    if "CUEMU_TL_REGION_R" not in text[text.index("void loops_early_return("):]:
        errors.append("loops_early_return: a stretch with a return must be a lambda")
    for e in errors:
        print(e)
    print(f"split_plan: {'FAILED' if errors else 'passed'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
