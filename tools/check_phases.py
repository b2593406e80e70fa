# SPDX-License-Identifier: MIT
"""Maintainers: where a chapter's `make check` spends its time, phase by phase.

`make loop-bench` says how long a student waits; this says why. For each chapter, in a fresh
Python process of its own (as a chapter's tests run under make check, but all of its tests in
one process and in order): seconds to import NumPy and the harness, to import the driver, to
load the library, to make the CUDA context (the first CUDA call), for the chapter's warm-up,
and for each test, the slowest first. --profile ID adds Python's profile of that test (its
own time per function): what a test spends on the host next to its CUDA calls.

    python3 tools/check_phases.py [--tree solutions] [--profile 02.3] [CHAPTER ...]

The backend is the one built last (TUT_BACKEND), the quick mode as a plain `make check` has it
(TUT_FULL=0) unless --full. Run it on the machine being measured; nothing is recorded.
"""
import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def one_chapter(name, profile):
    """In the child: the phases of one chapter, as one JSON line on stdout."""
    out = {"chapter": name}

    def timed(key, fn):
        t = time.perf_counter()
        value = fn()
        out[key] = round(time.perf_counter() - t, 3)
        return value

    timed("numpy", lambda: __import__("numpy"))
    sys.path.insert(0, str(REPO / "common"))
    tut = timed("harness", lambda: __import__("tut"))
    from tut import warm
    module = timed("driver", lambda: warm.import_driver(REPO / "chapters" / name))
    ch = module.CH
    lib = timed("library", lambda: tut.load_chapter(ch.name))
    timed("context", lib.synchronize)
    warm_up = getattr(module, "warm_up", None)
    timed("warm_up", lambda: warm_up(lib) if warm_up else None)
    out["tests"], out["profiles"] = [], {}
    for test in ch.tests:
        prof = cProfile.Profile() if test["id"] in profile else None
        t = time.perf_counter()
        if prof:
            prof.enable()
        r = ch.run_test(test, lib, 1, run_untouched=True)
        if prof:
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
            out["profiles"][test["id"]] = text.getvalue()
        out["tests"].append([test["id"], round(time.perf_counter() - t, 3), r["status"],
                             (r.get("message") or "").splitlines()[0][:90] if r.get("message")
                             else ""])
    print("PHASES " + json.dumps(out), flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("chapters", nargs="*", help="chapter folders or numbers (default: all)")
    p.add_argument("--tree", choices=("chapters", "solutions"), default="solutions")
    p.add_argument("--profile", default="", help="comma-separated test ids to profile")
    p.add_argument("--full", action="store_true", help="as make check FULL=1")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    profile = set(filter(None, args.profile.split(",")))
    if args.one:
        return one_chapter(args.one, profile)
    all_dirs = sorted(d.name for d in (REPO / "chapters").glob("[0-9][0-9]_*") if d.is_dir())
    names = [d for d in all_dirs if not args.chapters
             or any(d == c or d[:2] == c[:2] for c in args.chapters)]
    env = dict(os.environ, TUT_TREE=args.tree, TUT_FULL="1" if args.full else "0")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")   # as the Makefile's TEST_ENV
    failed = 0
    for name in names:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, __file__, "--one", name,
                            "--profile", args.profile], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        lines = [line for line in r.stdout.splitlines() if line.startswith("PHASES ")]
        if not lines:
            failed += 1
            print(f"{name}: the process failed (exit {r.returncode})\n{r.stderr[-2000:]}")
            continue
        d = json.loads(lines[0][len("PHASES "):])
        tests = sum(s for _, s, _, _ in d["tests"])
        print(f"{name}: {wall:.2f} s in all: numpy {d['numpy']}, harness {d['harness']}, "
              f"driver {d['driver']}, library {d['library']}, context {d['context']}, "
              f"warm-up {d['warm_up']}, tests {tests:.2f}")
        for tid, secs, status, message in sorted(d["tests"], key=lambda x: -x[1])[:5]:
            print(f"    {tid:<24} {secs:7.3f} s  {status}  {message}")
        for tid, text in d["profiles"].items():
            print(f"  profile of {tid}:\n" + "\n".join("    " + line
                                                      for line in text.splitlines()[4:22]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
