# SPDX-License-Identifier: MIT
"""make loop-bench: how long a student waits for `make check CH=NN`, per chapter, solved.

For each chapter, in a private copy of the course (tools/scratch_tree.py) with the chapter's
exercises solved (so every test runs): the median of the runs of `make check CH=NN` with nothing
changed, and, for each of the chapter's exercise files, the median of REPS runs after a one-line
edit of it (the rebuild included), on the backend in use; the slowest file's is the chapter's
figure (a student waits for the file their exercise is in). Printed next to the targets;
RECORD=1 also records them, with the date, the machine and its load, through tools/figures.py
(docs/figures/).

    python3 tools/check_bench.py [--reps 5] [--chapters 01,05] [--backend cpu|gpu] [--record]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import scratch_tree  # noqa: E402

# seconds: (nothing changed, after a one-line edit), issue 30's targets
TARGETS = {"cpu": (1.5, 2.5), "gpu": (2.0, 4.0)}


def machine(backend):
    """The machine in words: the GPU's name, or the CPU's model and cores."""
    if backend == "gpu":
        try:
            name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=30).stdout
            return name.splitlines()[0].strip()
        except (OSError, subprocess.SubprocessError, IndexError):
            return "unknown GPU"
    model = platform.processor() or "cpu"
    try:
        model = next(line.split(":", 1)[1].strip() for line in
                     Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"cpu {model}, {os.cpu_count()} cores"


def where_time(tree, backend, ch):
    """The tests' own seconds in the last run, and the slowest three: the rest of the wait is
    make, Python, the processes and (on a GPU) CUDA contexts."""
    rows = []
    for f in (tree / "build" / "results" / backend / "student").glob(f"{ch[:2]}.*.json"):
        try:
            rows += json.loads(f.read_text())
        except (OSError, ValueError):
            pass
    rows.sort(key=lambda r: -r.get("seconds", 0))
    spent = sum(r.get("seconds", 0) for r in rows)
    slow = ", ".join(f"{r['id']} {r.get('seconds', 0):.2f} s" for r in rows[:3])
    return f"(the tests themselves: {spent:.2f} s in the last run; slowest: {slow})"


def timed(cmd, cwd):
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=scratch_tree.make_env())
    return time.perf_counter() - start, r


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--chapters", default="", help="NN,NN (default: every solved chapter)")
    p.add_argument("--backend", default=os.environ.get("TUT_BACKEND", "cpu"))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--record", action="store_true", help="record the figures (RECORD=1)")
    args = p.parse_args()
    build = Path(os.environ.get("TUT_BUILD", REPO / "build"))
    tree = scratch_tree.make_copy(build / "loop-bench" / "tree", build)
    chapters = sorted(d.name for d in (tree / "chapters").glob("[0-9][0-9]_*")
                      if (REPO / "solutions" / d.name).is_dir())
    if args.chapters:
        wanted = {f"{int(c):02d}" for c in args.chapters.split(",")}
        chapters = [c for c in chapters if c[:2] in wanted]
    same_t, edit_t = TARGETS[args.backend]
    load = os.getloadavg()
    print(f"make check CH=NN, solved, median of {args.reps}: {machine(args.backend)}, "
          f"{args.backend} backend, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  {'chapter':<28} {'unchanged':>10} {'edited':>10}   (targets {same_t} s, {edit_t} s)")
    figures, over = [], []
    for ch in chapters:
        files = sorted((REPO / "solutions" / ch).glob("*.cu"))
        for f in files:   # solved: every test runs, none stops at its TODO
            (tree / "chapters" / ch / f.name).write_text(f.read_text())
        cmd = ["make", "--no-print-directory", "check", f"CH={ch[:2]}",
               f"BACKEND={args.backend}", f"PYTHON={args.python}"]
        timed(cmd, tree)   # the first build is not timed
        same = []
        # each exercise file (one with a TODO(student)) edited in turn: a student edits the
        # one their exercise is in, and one may take far longer to compile than another
        exercise_files = [f for f in files if "TODO(student)" in
                          (REPO / "chapters" / ch / f.name).read_text(errors="replace")] or files
        edited = {f.name: [] for f in exercise_files}
        for i in range(args.reps):
            for f in exercise_files:
                s, r = timed(cmd, tree)
                same.append(s)
                if r.returncode:
                    print(f"  {ch}: make check failed:\n{(r.stdout + r.stderr)[-3000:]}")
                    return 1
                target = tree / "chapters" / ch / f.name
                target.write_text(target.read_text() + f"// edit {i}\n")
                s, r = timed(cmd, tree)
                edited[f.name].append(s)
        a = statistics.median(same)
        per_file = {name: statistics.median(t) for name, t in edited.items()}
        b = max(per_file.values())
        flag = "" if a <= same_t and b <= edit_t else "   OVER"
        if flag:
            over.append(ch[:2])
        print(f"  {ch:<28} {a:8.2f} s {b:8.2f} s{flag}")
        if len(per_file) > 1:
            print(f"  {'':<28} (after an edit, per file: "
                  + ", ".join(f"{n} {t:.2f} s" for n, t in per_file.items()) + ")")
        print(f"  {'':<28} {where_time(tree, args.backend, ch)}")
        figures += [{"chapter": ch[:2], "what": "make check CH=NN, nothing changed (median)",
                     "value": round(a, 3), "unit": "s", "ratio": None},
                    {"chapter": ch[:2],
                     "what": "make check CH=NN after a one-line edit (median, slowest file)",
                     "value": round(b, 3), "unit": "s", "ratio": None}]
    end = os.getloadavg()
    print(f"{len(chapters) - len(over)} of {len(chapters)} chapters within the targets"
          + (f" (over: {', '.join(over)})" if over else "") + f"; load at the end {end[0]:.1f}")
    if args.record:
        run = {"backend": args.backend, "device": machine(args.backend), "figures": figures,
               "load": [round(x, 2) for x in load + end], "cores": os.cpu_count(),
               "reps": args.reps}
        path = build / "figures" / "loop-bench.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run, indent=1))
        import figures as figs
        figs.record(path, label="make loop-bench", allow_cpu=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
