# SPDX-License-Identifier: MIT
"""How long `make check CH=NN` takes after a one-line edit of an exercise file, per chapter:
the loop a student lives in. Runs in a private copy of the course (tools/scratch_tree.py), with
the chapter's exercise files solved (so every test really runs; --stubs: as handed out) and one
line appended before each timed run; prints the median of REPS runs and the slowest chapter
against the 3 s target.

    python3 tools/check_bench.py [--reps 5] [--chapters 01,05] [--stubs]   (make check-bench)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import scratch_tree  # noqa: E402

TARGET_S = 3.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--chapters", default="")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--stubs", action="store_true",
                   help="leave the exercises as handed out (their tests stop at the TODO) "
                        "instead of solved (every test runs)")
    args = p.parse_args()
    build = Path(os.environ.get("TUT_BUILD", REPO / "build"))
    tree = scratch_tree.make_copy(build / "check-bench" / "tree", build)
    chapters = sorted(d.name for d in (tree / "chapters").glob("[0-9][0-9]_*")
                      if (REPO / "solutions" / d.name).is_dir())
    if args.chapters:
        wanted = {f"{int(c):02d}" for c in args.chapters.split(",")}
        chapters = [c for c in chapters if c[:2] in wanted]
    print(f"make check CH=NN after a one-line edit, median of {args.reps} "
          f"({os.cpu_count()} cores, cpu backend, exercises "
          f"{'as handed out' if args.stubs else 'solved'})")
    worst = 0.0
    for ch in chapters:
        files = sorted((REPO / "solutions" / ch).glob("*.cu"))
        for f in files:   # solved: every test runs, none stops at its TODO
            source = (REPO / "chapters" / ch / f.name) if args.stubs else f
            (tree / "chapters" / ch / f.name).write_text(source.read_text())
        cmd = ["make", "--no-print-directory", "check", f"CH={ch[:2]}", "BACKEND=cpu",
               f"PYTHON={args.python}"]
        subprocess.run(cmd, cwd=tree, capture_output=True, env=scratch_tree.make_env())   # the first build is not timed
        times = []
        for i in range(args.reps):
            edited = tree / "chapters" / ch / files[0].name
            edited.write_text(edited.read_text() + f"// edit {i}\n")
            start = time.perf_counter()
            r = subprocess.run(cmd, cwd=tree, capture_output=True, text=True,
                               env=scratch_tree.make_env())
            times.append(time.perf_counter() - start)
            if r.returncode and (not args.stubs or "exercises:" not in r.stdout):
                print(f"  {ch}: make check failed:\n{r.stdout[-2000:]}")
                return 1
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"  {ch:<28} {med:6.2f} s   (min {min(times):.2f}, max {max(times):.2f})")
    print(f"slowest chapter: {worst:.2f} s, {'within' if worst < TARGET_S else 'OVER'} the "
          f"{TARGET_S:.0f} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
