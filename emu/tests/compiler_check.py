# SPDX-License-Identifier: MIT
"""make's choice and check of the emulator's compiler (emu/emu.mk), with stand-in compilers
that only answer make's question (which compiler, which major version):

  - one older than the minimum (gcc 10, clang 13) stops make before anything is built, with a
    message naming the minimum; the minimum itself (gcc 11, clang 14) and newer ones pass;
  - a CXX the user sets becomes EMU_CXX;
  - for 64-bit Arm clang must be 17 or newer (emu/emu.mk says why): an older default clang++
    gives way to g++, with a note; an older one the user names is refused.

    python3 compiler_check.py SCRATCH_DIR      (run by CTest: emu/compiler-check)
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def fake(scratch, kind, major, arm=False, name=None):
    """A 'compiler' whose preprocessor says `kind major` (all make asks it), and `aarch64` on
    a line of its own for one that compiles for 64-bit Arm."""
    folder = os.path.join(scratch, f"fake-{kind}-{major}{'-arm' if arm else ''}")
    if os.path.lexists(folder) and not os.path.isdir(folder):
        os.remove(folder)          # a build folder an older version of this test wrote to
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name or "c++")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho '{kind} {major}'\n" + ("echo aarch64\n" if arm else ""))
    os.chmod(path, 0o755)
    return path


def make(scratch, *args, path_first=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAKE", "TUT_EMU_CXX", "CXX", "EMU_CXX")) and k != "MFLAGS"}
    if path_first:
        env["PATH"] = path_first + os.pathsep + env.get("PATH", "")
    p = subprocess.run(["make", "--no-print-directory", "-n", f"BUILD={scratch}/build",
                        "--eval", "print-emu-cxx: ; @echo EMU_CXX=$(EMU_CXX)", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main(scratch):
    os.makedirs(scratch, exist_ok=True)
    for kind, old, ok in (("gcc", 10, 11), ("clang", 13, 14)):
        rc, out = make(scratch, f"CXX={fake(scratch, kind, old)}", "emu-lib")
        check(rc != 0 and f"is {kind} {old}: the emulator needs gcc 11 or clang 14 or newer" in out
              and "emu/core" not in out,
              f"{kind} {old}: refused at once, naming the minimum")
        rc, out = make(scratch, f"CXX={fake(scratch, kind, ok)}", "emu-lib")
        check(rc == 0 and "needs" not in out, f"{kind} {ok}: accepted")
    rc, out = make(scratch, "CXX=/nonexistent/c++", "emu-lib")
    check(rc != 0 and "does not compile C++" in out, "a CXX that does not run: refused, saying so")
    newer = fake(scratch, "clang", 16)
    rc, out = make(scratch, f"CXX={newer}", "print-emu-cxx")
    check(rc == 0 and f"EMU_CXX={newer}" in out, "CXX on the command line becomes EMU_CXX")
    # 64-bit Arm: clang 14 to 16 miscompile a dlopen'ed library's thread-local variables there
    rc, out = make(scratch, f"CXX={fake(scratch, 'clang', 16, arm=True)}", "emu-lib")
    check(rc != 0 and "clang 17 or newer on 64-bit Arm" in out and "emu/core" not in out,
          "clang 16 for 64-bit Arm, named by the user: refused, saying why")
    rc, out = make(scratch, f"CXX={fake(scratch, 'clang', 17, arm=True)}", "emu-lib")
    check(rc == 0 and "needs" not in out, "clang 17 for 64-bit Arm: accepted")
    old_default = os.path.dirname(fake(scratch, "clang", 14, arm=True, name="clang++"))
    gxx = fake(scratch, "gcc", 12, arm=True)
    rc, out = make(scratch, f"CXX={gxx}", "print-emu-cxx", path_first=old_default)
    check(rc == 0 and f"EMU_CXX={gxx}" in out, "CXX named: the user's choice is kept")
    rc, out = make(scratch, "print-emu-cxx", path_first=old_default)
    check(rc == 0 and "miscompiles a shared library's thread-local variables" in out
          and "EMU_CXX=g++" in out,
          "the default clang++ is clang 14 for 64-bit Arm: g++ builds the emulator, with a note")
    rc, out = make(scratch, "BACKEND=gpu", f"CXX={fake(scratch, 'clang', 13)}", "help")
    check(rc == 0, "make help works with any compiler")
    print("\ncompiler-check: " + ("passed" if not failures else f"{len(failures)} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
