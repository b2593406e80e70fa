# SPDX-License-Identifier: MIT
"""The rewriter keeps every line where it was, and compiler errors point at the .cu file.

usage: rewrite_lines.py CUEMU_REWRITE REPO_ROOT
For every .cu in the repository: the output has one more line (the #line directive) and every
input line that is not part of a launch or an extern __shared__ declaration comes out unchanged
on the same line, but for two additions the rewriter makes in place: a kernel's __cluster_dims__
registration after the line that ends its definition, and the members gridDim and blockDim
renamed cuemu_gridDim and cuemu_blockDim (the built-in variables are macros), and the barrier
thread loops' words in a kernel it runs so (CUEMU_TL_BEGIN, its CUEMU_TL_UNIFORMs and its
CUEMU_TL_VARs after the body's `{`, CUEMU_TL_REGION and its CUEMU_TL_LOADs before a stretch, its CUEMU_TL_SAVEs and
CUEMU_TL_REGION_END after it, CUEMU_TL_NOINIT(array, name, declaration) around a declaration
without an initialiser, CUEMU_TL_SYNC() for __syncthreads(), CUEMU_TL_RETURN for `return`,
CUEMU_TL_END before the `}`), the
split's words in a kernel it splits (CUEMU_CO_BEGIN(parameters) after the body's `{`,
CUEMU_CO_END(names) before its `}`, CUEMU_CO_RETURN for `return`, CUEMU_CO_SYNCTHREADS* for __syncthreads*, cg::sync(b) and
b.sync()) and in a helper it splits (CUEMU_CO_SUB for `void`, CUEMU_CO_FORCEINLINE for
`__forceinline__`, CUEMU_CO_HSYNC* for the barriers,
CUEMU_CO_AWAIT_BEGIN and _END around a call of one), CUEMU_HOST_FN after an `extern "C"` that declares a host function, and a comment
for a `#pragma unroll` with no count (left to the host compiler). Then a file with an error after a multi-line launch must be reported by the
compiler at the .cu file's own line.
"""
import os
import re
import subprocess
import sys
import tempfile


def launch_lines(lines):
    """Indices of lines a rewrite may change: from a kernel name to the `>>>` line, the line
    with the closing parenthesis of the argument list, extern __shared__ lines, and the start
    of a __global__ declaration (its template header), where the kernel's companion goes."""
    allowed = set()
    for i, line in enumerate(lines):
        if "<<<" in line or ">>>" in line or "__shared__" in line or "__global__" in line:
            allowed.update({i - 2, i - 1, i, i + 1})
    return allowed


def drop_call(text, head, keep):
    """text with `head...)` (its parentheses balanced) replaced by keep; with nothing kept, the
    space the rewriter wrote after it goes too."""
    k = text.find(head)
    if k < 0:
        return text
    depth, i = 1, k + len(head)
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    rest = text[i:] if keep else text[i:].lstrip(" ")
    return text[:k] + keep + rest


PRAGMA_UNROLL = "/* #pragma unroll: the host compiler's choice here (cuemu-rewrite) */"


def in_place(a, b):
    """b is line a with only the in-place additions (see the module's docstring)."""
    reg = " static ::cuemu::cluster_reg cuemu_cluster_reg_"
    if b.startswith(a) and b[len(a):].startswith(reg):
        b = a
    for m in ("gridDim", "blockDim"):
        b = b.replace(".cuemu_" + m, "." + m).replace("->cuemu_" + m, "->" + m)
    # thread loops: what each kernel's body, stretch and barrier gained (cuemu_split.h)
    b = re.sub(r" CUEMU_TL_BEGIN(?: CUEMU_TL_UNIFORM\([^;]*;\))*(?: CUEMU_TL_VAR\([^()]*\))* ", "", b)
    b = re.sub(r"(?: CUEMU_TL_SAVE\([^()]*\))* CUEMU_TL_REGION_END(?:_R)?", "", b)
    b = re.sub(r"CUEMU_TL_REGION(?:_R)?(?: CUEMU_TL_LOAD\([^()]*\))* ", "", b)
    b = re.sub(r"CUEMU_TL_NOINIT\(\w+, \w+, ([^;]*;)\)", r"\1", b)
    b = b.replace(" CUEMU_TL_END ", "").replace("CUEMU_TL_SYNC()", "__syncthreads()")
    b = re.sub(r"\bCUEMU_TL_RETURN\b", "return", b)
    b = drop_call(drop_call(b, "{ CUEMU_CO_BEGIN(", "{"), "CUEMU_CO_END(", "")
    b = b.replace("{ CUEMU_CO_BEGIN_CAPTURE", "{").replace("CUEMU_CO_END_CAPTURE }", "}")
    b = b.replace("CUEMU_CO_END0 }", "}").replace('extern "C" CUEMU_HOST_FN ', 'extern "C" ')
    b = b.replace(PRAGMA_UNROLL, "#pragma unroll")
    b = re.sub(r"\bCUEMU_CO_RETURN\b", "return", b)
    b = re.sub(r"\bCUEMU_CO_(?:SYNCTHREADS|HSYNC)(_COUNT|_AND|_OR)?\b",
               lambda m: "__syncthreads" + (m.group(1) or "").lower(), b)
    b = re.sub(r"\bCUEMU_CO_SUB\b", "void", b)
    b = re.sub(r"\bCUEMU_CO_FORCEINLINE\b", "__forceinline__", b)
    b = b.replace("CUEMU_CO_AWAIT_BEGIN ", "").replace(" CUEMU_CO_AWAIT_END", "")
    a = re.sub(r"\b(cg|cooperative_groups)::sync\(\s*\w+\s*\)|\b\w+\.sync\(\s*\)",
               "__syncthreads()", a)
    return a == b


def check_file(tool, path):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.cpp")
        subprocess.run([tool, path, out], check=True)
        src = open(path, encoding="utf-8", errors="replace").read().split("\n")
        got = open(out, encoding="utf-8", errors="replace").read().split("\n")
    errors = []
    if not got[0].startswith('#line 1 "'):
        errors.append(f"{path}: first line is not #line 1")
    got = got[1:]
    if len(got) != len(src):
        return [f"{path}: {len(src)} lines in, {len(got)} out"]
    allowed = launch_lines(src)
    for i, (a, b) in enumerate(zip(src, got)):
        if a != b and i not in allowed and not in_place(a, b):
            # lines inside a multi-line argument list stay verbatim; others must not change
            errors.append(f"{path}:{i + 1}: changed outside a launch:\n  in:  {a}\n  out: {b}")
    return errors


def check_line_directive(tool, cxx, root):
    bad = (
        "__global__ void k(int *p) { p[threadIdx.x] = 1; }\n"
        "int main() {\n"
        "  int *p = 0;\n"
        "  k<<<1,\n"
        "      32>>>(p);\n"
        "  int x = undeclared_name;\n"
        "  return x;\n"
        "}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        cu = os.path.join(tmp, "bad.cu")
        out = os.path.join(tmp, "bad.cpp")
        open(cu, "w").write(bad)
        subprocess.run([tool, cu, out], check=True)
        r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-I" + os.path.join(root, "emu/include"),
                            "-include", "cuda_runtime.h", out], capture_output=True, text=True)
        if r.returncode == 0 or f"{cu}:6:" not in r.stderr:
            return [f"compiler error not reported at bad.cu:6:\n{r.stderr[:2000]}"]
    return []


def cu_files(root):
    """Every .cu of the course: not below a build/ (scratch trees, copies), nor through a mount
    point (make platforms mounts the repository inside its chroot, under build/: a walk into
    it would never end)."""
    found = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "build" and not x.startswith(".")
                         and not os.path.ismount(os.path.join(d, x)))
        found += [os.path.join(d, n) for n in names if n.endswith(".cu")]
    return sorted(found)


def main():
    tool, root = sys.argv[1], sys.argv[2]
    files = cu_files(root)
    errors = []
    for f in files:
        errors += check_file(tool, f)
    errors += check_line_directive(tool, os.environ.get("CXX", "g++"), root)
    for e in errors:
        print(e)
    print(f"rewrite_lines: {len(files)} files, {'FAILED' if errors else 'passed'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
