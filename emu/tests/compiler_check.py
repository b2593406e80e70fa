# SPDX-License-Identifier: MIT
"""make's choice and check of the emulator's compiler (emu/emu.mk), with stand-in compilers
that only answer make's question (which compiler, which major version):

  - one older than the minimum (gcc 10, clang 13) stops make before anything is built, with a
    message naming the minimum; the minimum itself (gcc 11, clang 14) and newer ones pass;
  - a CXX the user sets becomes EMU_CXX.

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


def fake(scratch, kind, major):
    """A 'compiler' whose preprocessor says `kind major` (all make asks it)."""
    path = os.path.join(scratch, f"fake-{kind}-{major}")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho '{kind} {major}'\n")
    os.chmod(path, 0o755)
    return path


def make(scratch, *args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAKE", "TUT_EMU_CXX", "CXX", "EMU_CXX")) and k != "MFLAGS"}
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
    rc, out = make(scratch, "BACKEND=gpu", f"CXX={fake(scratch, 'clang', 13)}", "help")
    check(rc == 0, "make help works with any compiler")
    print("\ncompiler-check: " + ("passed" if not failures else f"{len(failures)} FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
