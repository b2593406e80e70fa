# SPDX-License-Identifier: MIT
"""The emulator's two halves keep to their interface (see emu/include/cuemu_internal.h).

    python3 layering.py REPO_ROOT OBJ_DIR      (OBJ_DIR: build/emu/obj, with core/ and runtime/)

Includes: emu/core/ includes no runtime header, emu/runtime/ no header of emu/core/, and the
core's public headers (cuemu_core.h, cuemu_internal.h, cuemu_device.h) no runtime header.
Symbols (nm on the built objects): every function the core takes from the runtime is declared
in cuemu_internal.h, every function the runtime takes from the core is declared in
cuemu_core.h, and the runtime defines every function cuemu_internal.h declares.
core_alone proves the first rule by linking; this check also covers the runtime's direction and
says which call broke a rule. Exits 0 when every rule holds, 1 otherwise.
"""
import os
import re
import subprocess
import sys

RUNTIME_HEADERS = {"rt_internal.h", "cuda_runtime.h", "cublas_v2.h"}
CORE_PRIVATE = {"core_internal.h"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def includes(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', strip_comments(f.read()), re.M)


def sources(folder, exts):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(exts))


def declared(path, functions_only):
    """The emulator's names (cuemu...) a header declares: functions, or every name."""
    with open(path, encoding="utf-8") as f:
        text = strip_comments(f.read())
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)       # nor macros
    return set(re.findall(r"\b(cuemu\w*)" + (r"\s*\(" if functions_only else r"\b"), text))


def nm(path, defined):
    """Global symbols an object defines (defined=True) or needs (False)."""
    args = ["nm", "-P", "-g"] + (["--defined-only"] if defined else ["-u"]) + [path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    root, objdir = sys.argv[1], sys.argv[2]
    core, runtime, inc = (os.path.join(root, "emu", d) for d in ("core", "runtime", "include"))
    problems = []

    for path in sources(core, (".c", ".h", ".S")):
        for h in includes(path):
            if h in RUNTIME_HEADERS:
                problems.append(f"{os.path.relpath(path, root)} includes {h}, a runtime header: "
                                "the core reaches the runtime through cuemu_internal.h only")
    for path in sources(runtime, (".c", ".h")):
        for h in includes(path):
            if h in CORE_PRIVATE:
                problems.append(f"{os.path.relpath(path, root)} includes {h}, the core's private "
                                "header: the runtime reaches the core through cuemu_core.h only")
    for name in ("cuemu_core.h", "cuemu_internal.h", "cuemu_device.h"):
        for h in includes(os.path.join(inc, name)):
            if h in RUNTIME_HEADERS:
                problems.append(f"emu/include/{name} includes {h}, a runtime header")

    interface = declared(os.path.join(inc, "cuemu_internal.h"), True)
    core_api = declared(os.path.join(inc, "cuemu_core.h"), False)
    core_objs = sources(os.path.join(objdir, "core"), ".o")
    rt_objs = sources(os.path.join(objdir, "runtime"), ".o")
    if not core_objs or not rt_objs:
        problems.append(f"no objects under {objdir}/core and {objdir}/runtime: run make emu-lib")
    else:
        core_defs = set().union(*(nm(o, True) for o in core_objs))
        rt_defs = set().union(*(nm(o, True) for o in rt_objs))
        for o in core_objs:
            for sym in sorted(nm(o, False) & rt_defs - interface):
                problems.append(f"the core's {os.path.basename(o)} calls the runtime's {sym}, "
                                "which cuemu_internal.h does not declare")
        for o in rt_objs:
            for sym in sorted(nm(o, False) & core_defs - core_api):
                problems.append(f"the runtime's {os.path.basename(o)} uses the core's {sym}, "
                                "which cuemu_core.h does not declare")
        for sym in sorted(interface - rt_defs):
            problems.append(f"cuemu_internal.h declares {sym}, which the runtime does not define")

    for p in problems:
        print("layering: " + p)
    print(f"layering: {'FAILED' if problems else 'passed'} ({len(interface)} functions in the "
          f"core's interface to the runtime)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
