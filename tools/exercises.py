# SPDX-License-Identifier: MIT
"""Make the exercise sources in chapters/ from the solutions in solutions/ (the single source).

In a solution, each answer sits between markers:

    // @solution 01.2: compute i, this thread's index in the grid, and guard it with n (~2 lines)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // @stub return 0;          <- optional: in the exercise this line becomes `return 0;`
    // @end

and the exercise gets, at the same indentation:

    // TODO(student) 01.2: compute i, this thread's index in the grid, and guard it with n (~2 lines)
    return 0;

Stub lines keep the exercise compiling (a value to return, TUT_TODO() in host code, which Python
raises as ExerciseNotDone). Only *.cu files are generated; README.md and driver.py live in
chapters/ alone.

    python3 tools/exercises.py            regenerate chapters/*/*.cu
    python3 tools/exercises.py --check    exit 1 (with a diff) if chapters/ is not up to date
"""
import argparse
import difflib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^(\s*)// @solution (\d\d\.\d+): (.+\(~\d+ lines?\))\s*$")
STUB = re.compile(r"^\s*// @stub ?(.*)$")
END = re.compile(r"^\s*// @end\s*$")


class MarkerError(Exception):
    pass


def exercise_text(solution_path, text):
    """The exercise version of one solution file."""
    out, seen, _ = parse(solution_path, text)
    return out, seen


def solution_regions(solution_path, text):
    """The @solution regions of one solution file, in order: dicts with the exercise `id`, the
    1-based line numbers of its `line` (@solution marker) and `end` (@end marker), and
    `stub_lines`, the line numbers of its @stub markers (tools/mutants.py plants bugs between)."""
    return parse(solution_path, text)[2]


def _shown(path):
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def parse(solution_path, text):
    """(exercise text, exercise ids seen, regions) of one solution file."""
    chapter_number = solution_path.parent.name[:2]
    out, region, seen, regions = [], None, set(), []
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        where = f"{_shown(solution_path)}:{lineno}"
        begin = BEGIN.match(line)
        if begin:
            if region:
                raise MarkerError(f"{where}: @solution inside the region opened at "
                                  f"line {region['line']}")
            indent, ex_id, hint = begin.groups()
            if not ex_id.startswith(chapter_number + "."):
                raise MarkerError(f"{where}: exercise {ex_id} in chapter {chapter_number}")
            region = {"indent": indent, "id": ex_id, "line": lineno, "stubs": [],
                      "stub_lines": []}
            out.append(f"{indent}// TODO(student) {ex_id}: {hint}\n")
            seen.add(ex_id)
            continue
        if "@solution" in line and not begin:
            raise MarkerError(f"{where}: malformed marker; expected "
                              f"'// @solution NN.M: hint (~K lines)'")
        if region is None:
            if END.match(line) or STUB.match(line):
                raise MarkerError(f"{where}: marker outside a @solution region")
            out.append(line)
            continue
        stub = STUB.match(line)
        if stub:
            region["stubs"].append(f"{region['indent']}{stub.group(1)}\n")
            region["stub_lines"].append(lineno)
        elif END.match(line):
            out.extend(region["stubs"])
            region["end"] = lineno
            regions.append(region)
            region = None
    if region:
        raise MarkerError(f"{_shown(solution_path)}:{region['line']}: "
                          f"@solution {region['id']} has no @end")
    return "".join(out), seen, regions


def pairs():
    for sol in sorted(REPO.glob("solutions/[0-9][0-9]_*/*.cu")):
        yield sol, REPO / "chapters" / sol.parent.name / sol.name


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="verify instead of writing")
    args = p.parse_args(argv)
    stale, ids = [], {}
    try:
        for sol, ex in pairs():
            text, seen = exercise_text(sol, sol.read_text())
            for ex_id in seen:
                if ex_id in ids and ids[ex_id] != sol:
                    raise MarkerError(f"exercise {ex_id} appears in {ids[ex_id]} and {sol}")
                ids[ex_id] = sol
            current = ex.read_text() if ex.exists() else None
            if current == text:
                continue
            if args.check:
                stale.append(ex)
                sys.stdout.writelines(difflib.unified_diff(
                    (current or "").splitlines(keepends=True), text.splitlines(keepends=True),
                    str(ex.relative_to(REPO)), "generated from " + str(sol.relative_to(REPO))))
            else:
                ex.parent.mkdir(parents=True, exist_ok=True)
                ex.write_text(text)
                print(f"wrote {ex.relative_to(REPO)}")
    except MarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    # An exercise file with no solution would never be regenerated: refuse it.
    orphans = [ex for ex in REPO.glob("chapters/[0-9][0-9]_*/*.cu")
               if not (REPO / "solutions" / ex.parent.name / ex.name).exists()]
    for ex in orphans:
        print(f"error: {ex.relative_to(REPO)} has no solution file", file=sys.stderr)
    if stale:
        print(f"\n{len(stale)} exercise file(s) out of date: run `make exercises`",
              file=sys.stderr)
    if not args.check:
        print(f"{len(ids)} exercises in {len(list(pairs()))} files")
    return 1 if (stale or orphans) else 0


if __name__ == "__main__":
    sys.exit(main())
