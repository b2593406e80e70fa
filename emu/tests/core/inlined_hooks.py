# SPDX-License-Identifier: MIT
"""The clang build inlines the load/store hooks into each emulated object, not at the link
(emu/emu.mk, EMU_LLVM_LINK): a rebuild after an edit compiles the edited file and links in a
fraction of a second, instead of optimising the whole program again at the link.

    python3 inlined_hooks.py BUILD_DIR      (run by CTest: emu/inlined-hooks, after the build)

For every object of the emulator's own tests and of the chapters (the solutions and the
exercises, and tut_check.o): machine code, not LLVM bitcode; no call left to a hook
(__sanitizer_cov_loadN / storeN, cuemu_thread_next, and a thread loop's cuemu_tl_begin and
cuemu_tl_thread), which would cost a call at every access of a kernel or every thread of a loop; and the slow path called from the access itself (cuemu_access_slow_here), where
its reports find the line. Skips (77) where the build inlines nothing per file: objects with no
hooks at all (g++, a sanitizer build), or, as make says, EMU_LTO= or a clang without llvm-link
beside it (the hooks are then called, or inlined at the link). Exits 0 when every object
passes, 1 otherwise.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOOKS = tuple(f"__sanitizer_cov_{k}{n}" for k in ("load", "store") for n in (1, 2, 4, 8, 16)) \
    + ("cuemu_thread_next", "cuemu_tl_begin", "cuemu_tl_thread")


def make_vars(build):
    """How make builds the emulator here: EMU_LTO, EMU_LLVM_LINK and EMU_CXX, with the
    variables given to the make that runs this (make test EMU_LLVM_LINK=, say)."""
    # The compiler's identity (TUT_EMU_CXX_*) is asked again when a make ran this (it set them),
    # and kept when the caller handed it in: the 64-bit Arm leg runs CTest in a chroot that does
    # not have the cross compiler make would have to ask (tools/platforms/arm64.sh).
    ask_again = "MAKELEVEL" in os.environ
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAKE", "TUT_EMU_CXX") if ask_again else "MAKE")
           and k != "MFLAGS"}
    flags = os.environ.get("MAKEFLAGS", "")
    # the command line's variables, as make writes them there: a space inside a value is `\ `
    given = [v.replace("\\ ", " ") for v in re.split(r"(?<!\\) +", flags.split(" -- ", 1)[1])
             if v] if " -- " in flags else []
    p = subprocess.run(["make", "-s", "--no-print-directory", f"BUILD={build}", "BACKEND=cpu",
                        *given, "--eval",
                        "print-hooks: ; @echo '$(EMU_LTO)|$(EMU_LLVM_LINK)|$(EMU_CXX)'",
                        "print-hooks"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    if p.returncode:
        sys.exit(f"make could not say how it builds the emulator:\n{p.stdout}{p.stderr}")
    return p.stdout.strip().splitlines()[-1].split("|")


def llvm_link_beside(cxx):
    """The llvm-link next to the compiler (found as emu/emu.mk finds it), or None."""
    found = subprocess.run(["sh", "-c", f"command -v {cxx.split()[0]}"], capture_output=True,
                           text=True).stdout.strip()
    if not found:
        return None
    path = Path(os.path.realpath(found)).parent / "llvm-link"
    return path if os.access(path, os.X_OK) else None


def objects(build):
    found = sorted((build / "emu" / "tests").rglob("*.o"))
    for tree in ("chapters", "solutions"):
        found += sorted((build / "cpu" / tree / "obj").rglob("*.o"))
    common = build / "cpu" / "common" / "tut_check.o"
    return found + ([common] if common.exists() else [])


def undefined_symbols(objs):
    """{object: the symbols it takes from elsewhere}, from one readelf (nm would load the LLVM
    plugin for each file, a tenth of a second each)."""
    out = subprocess.run(["readelf", "-sW", *map(str, objs)], capture_output=True, text=True,
                         check=True).stdout if objs else ""
    found, cur = {o: set() for o in objs}, objs[0] if len(objs) == 1 else None
    for line in out.splitlines():
        if line.startswith("File: "):
            cur = Path(line[6:].strip())
        else:
            f = line.split()
            if cur is not None and len(f) >= 8 and f[6] == "UND":
                found[cur].add(f[7].split("@")[0])
    return found


def main(build):
    objs = objects(build)
    if len(objs) < 10:
        print(f"FAIL only {len(objs)} emulated objects under {build}: build emu-tests and the"
              " chapters first")
        return 1
    bitcode = [o for o in objs if o.read_bytes()[:4] == b"BC\xc0\xde"]
    undefined = undefined_symbols([o for o in objs if o not in bitcode])
    if not bitcode and not any(u & set(HOOKS + ("cuemu_access_slow_here",))
                               for u in undefined.values()):
        print("skip: these objects have no load/store hooks (a g++ or sanitizer build)")
        return 77
    lto, llvm_link, cxx = make_vars(build)
    if not lto:
        print("skip: this build calls the hooks (EMU_LTO=)")
        return 77
    if not llvm_link and not llvm_link_beside(cxx):
        print(f"skip: no llvm-link beside {cxx}: the hooks are inlined at the link")
        return 77
    failures = []
    if not llvm_link:
        failures.append(f"make found no llvm-link (EMU_LLVM_LINK), though"
                        f" {llvm_link_beside(cxx)} is beside {cxx}")
    failures += [f"{o.relative_to(build)}: LLVM bitcode, which the link would optimise again"
                 for o in bitcode]
    for o, u in undefined.items():
        called = sorted(u & set(HOOKS))
        if called:
            failures.append(f"{o.relative_to(build)}: calls {', '.join(called)} instead of"
                            " inlining them")
    # nearly every object has a kernel, with an access that can need the slow path
    slow = sum("cuemu_access_slow_here" in u for u in undefined.values())
    if slow < len(objs) // 2:
        failures.append(f"only {slow} of {len(objs)} objects call cuemu_access_slow_here")
    for f in failures:
        print("FAIL " + f)
    print(f"inlined-hooks: {len(objs)} objects, {slow} calling the slow path at the access: "
          + ("passed" if not failures else f"{len(failures)} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]).resolve()))
