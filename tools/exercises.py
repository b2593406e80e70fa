# SPDX-License-Identifier: MIT
"""Make the exercise sources in chapters/ from the solutions in solutions/ (the single source).

In a solution, each answer sits between markers:

    // @solution 01.2: compute i, this thread's index in the grid, and guard it with n (~2 lines) [2 points]
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // @stub return 0;          <- optional: in the exercise this line becomes `return 0;`
    // @end

and the exercise gets, at the same indentation:

    // TODO(student) 01.2: compute i, this thread's index in the grid, and guard it with n (~2 lines) [2 points]
    return 0;

Stub lines keep the exercise compiling (a value to return, TUT_TODO() in host code, which Python
raises as ExerciseNotDone). Only *.cu files are generated; README.md and driver.py live in
chapters/ alone. `[N points]` is optional (1 point by default) and is what `make grade` gives the
exercise; an exercise split over several regions declares its points on one of them (or the same
number on each).

Next to the exercises, each chapter gets a manifest, chapters/NN_x/.stubs.json: the SHA-256 of
every file as generated, and of each TODO(student) line with its stub lines, with the points. It
is how this tool knows a file was edited since it generated it (it then refuses to overwrite it:
a student's work is never lost), and how the harness knows an exercise is untouched (it reports
"todo", not a failure). It is committed and handed out with the chapters.

    python3 tools/exercises.py            regenerate chapters/*/*.cu (refuses edited files)
    python3 tools/exercises.py --force    overwrite edited files too, keeping a copy under
                                          build/exercises-backup/ (make exercises FORCE=1)
    python3 tools/exercises.py --check    exit 1 (with a diff) if chapters/ is not up to date
"""
import argparse
import datetime
import difflib
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^(\s*)// @solution (\d\d\.\d+): (.+\(~\d+ lines?\))"
                   r"(?:\s*\[(\d+) points?\])?\s*$")
STUB = re.compile(r"^\s*// @stub ?(.*)$")
END = re.compile(r"^\s*// @end\s*$")
MANIFEST = ".stubs.json"


class MarkerError(Exception):
    pass


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def rel(path):
    try:
        return str(Path(path).relative_to(REPO))
    except ValueError:
        return str(path)


def generate(solution_path, text):
    """The exercise version of one solution file, and its regions in order: dicts with the id,
    the points declared (or None), and the generated TODO line plus stub lines."""
    chapter_number = solution_path.parent.name[:2]
    out, region, regions = [], None, []
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        where = f"{rel(solution_path)}:{lineno}"
        begin = BEGIN.match(line)
        if begin:
            if region:
                raise MarkerError(f"{where}: @solution inside the region opened at "
                                  f"line {region['line']}")
            indent, ex_id, hint, points = begin.groups()
            if not ex_id.startswith(chapter_number + "."):
                raise MarkerError(f"{where}: exercise {ex_id} in chapter {chapter_number}")
            todo = f"{indent}// TODO(student) {ex_id}: {hint}"
            todo += f" [{points} point{'s' if points != '1' else ''}]\n" if points else "\n"
            region = {"indent": indent, "id": ex_id, "line": lineno, "stubs": [],
                      "stub_lines": [], "points": int(points) if points else None,
                      "at": len(out)}
            out.append(todo)
            continue
        if "@solution" in line and not begin:
            raise MarkerError(f"{where}: malformed marker; expected "
                              f"'// @solution NN.M: hint (~K lines)' and optionally ' [N points]'")
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
            regions.append({"id": region["id"], "points": region["points"],
                            "at": region["at"], "end": len(out),
                            "solution_lines": (region["line"], lineno, region["stub_lines"])})
            region = None
    if region:
        raise MarkerError(f"{rel(solution_path)}:{region['line']}: "
                          f"@solution {region['id']} has no @end")
    # What an untouched exercise looks like: the TODO line and its stub lines with one line of
    # context on each side, so that code written under a TODO line left in place counts as work.
    for r in regions:
        first, last = max(r["at"] - 1, 0), min(r["end"] + 1, len(out))
        r["before"], r["text"] = r["at"] - first, "".join(out[first:last])
        del r["at"], r["end"]
    return "".join(out), regions


def exercise_text(solution_path, text):
    """The exercise version of one solution file, and the exercise ids in it."""
    out, regions = generate(solution_path, text)
    return out, {r["id"] for r in regions}


def solution_regions(solution_path, text):
    """The @solution regions of one solution file, in order: dicts with the exercise `id`, the
    1-based line numbers of its `line` (@solution marker) and `end` (@end marker), and
    `stub_lines`, the line numbers of its @stub markers (tools/mutants.py plants bugs between)."""
    return [{"id": r["id"], "line": r["solution_lines"][0], "end": r["solution_lines"][1],
             "stub_lines": r["solution_lines"][2]} for r in generate(solution_path, text)[1]]


def pairs():
    for sol in sorted(REPO.glob("solutions/[0-9][0-9]_*/*.cu")):
        yield sol, REPO / "chapters" / sol.parent.name / sol.name


def manifest_text(chapter, generated):
    """chapters/NN_x/.stubs.json for one chapter. generated: {file name: (text, regions)}."""
    files, exercises = {}, {}
    for name in sorted(generated):
        text, regions = generated[name]
        files[name] = sha256(text)
        for r in regions:
            ex = exercises.setdefault(r["id"], {"points": None, "regions": []})
            if r["points"] is not None:
                if ex["points"] not in (None, r["points"]):
                    raise MarkerError(f"exercise {r['id']} declares {ex['points']} and "
                                      f"{r['points']} points: declare them once")
                ex["points"] = r["points"]
            ex["regions"].append({"file": name, "lines": r["text"].count("\n"),
                                  "todo_line": r["before"], "sha256": sha256(r["text"])})
    for ex in exercises.values():
        if ex["points"] is None:
            ex["points"] = 1
    return json.dumps({"about": f"written by tools/exercises.py from solutions/{chapter}: "
                                "what it generated, so that it never overwrites an edited "
                                "exercise and the harness knows an untouched one; do not edit",
                       "files": files, "exercises": dict(sorted(exercises.items()))},
                      indent=1) + "\n"


def read_manifest(chapter_dir):
    try:
        return json.loads((chapter_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


EDITED_HELP = """\
These files are not what tools/exercises.py generated from solutions/: they have been edited.
  - Working on the exercises? Your work is safe: nothing was overwritten. Test it with
    `make check` (or `make check CH=01`); `make test` is the maintainers' check, which needs
    the untouched stubs, so it stops here.
  - A maintainer? Make your change in solutions/ (the single source) and run `make exercises`;
    `make exercises FORCE=1` overwrites edited exercise files, keeping a copy of each under
    build/exercises-backup/."""


def student_copy_note():
    print("This copy has no solutions/ (a student's copy): there is nothing to regenerate the "
          "exercises from, and nothing was changed. Test your work with `make check`.")
    return 0


def main(argv=None):
    global REPO
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="verify instead of writing")
    p.add_argument("--force", action="store_true",
                   help="overwrite edited exercise files too, keeping a backup of each")
    p.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    REPO = args.repo.resolve()
    if not (REPO / "solutions").is_dir():
        return student_copy_note()
    ids, by_chapter = {}, {}
    try:
        for sol, ex in pairs():
            text, regions = generate(sol, sol.read_text())
            for r in regions:
                if ids.setdefault(r["id"], sol) != sol:
                    raise MarkerError(f"exercise {r['id']} appears in {rel(ids[r['id']])} "
                                      f"and {rel(sol)}")
            by_chapter.setdefault(sol.parent.name, {})[sol.name] = (text, regions)
        manifests = {ch: manifest_text(ch, gen) for ch, gen in by_chapter.items()}
    except MarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    stale, edited, writes = [], [], []
    for chapter, generated in sorted(by_chapter.items()):
        ch_dir = REPO / "chapters" / chapter
        known = read_manifest(ch_dir).get("files", {})
        for name, (text, _) in sorted(generated.items()):
            ex = ch_dir / name
            current = ex.read_text() if ex.exists() else None
            if current == text:
                continue
            if current is not None and sha256(current) != known.get(name):
                edited.append(ex)          # not what this tool wrote last: someone's work
            else:
                stale.append(ex)           # what this tool wrote, from an older solution
            if args.check and ex not in edited:   # a diff of a student's work is only noise
                sys.stdout.writelines(difflib.unified_diff(
                    (current or "").splitlines(keepends=True), text.splitlines(keepends=True),
                    rel(ex), "generated from " + rel(REPO / "solutions" / chapter / name)))
            writes.append((ex, text))
        mf = ch_dir / MANIFEST
        if not mf.exists() or mf.read_text() != manifests[chapter]:
            writes.append((mf, manifests[chapter]))
            if args.check:
                stale.append(mf)

    # An exercise file with no solution would never be regenerated: refuse it.
    orphans = [ex for ex in REPO.glob("chapters/[0-9][0-9]_*/*.cu")
               if not (REPO / "solutions" / ex.parent.name / ex.name).exists()]
    for ex in orphans:
        print(f"error: {rel(ex)} has no solution file", file=sys.stderr)

    if args.check:
        if edited:
            print("\n" + "\n".join(f"  {rel(e)}" for e in edited), file=sys.stderr)
            print(EDITED_HELP, file=sys.stderr)
        if stale:
            print("\n" + "\n".join(f"  {rel(e)}" for e in stale), file=sys.stderr)
            print(f"{len(stale)} generated file(s) out of date after a change in solutions/: "
                  f"run `make exercises` (it overwrites only files it generated itself)",
                  file=sys.stderr)
        return 1 if (stale or edited or orphans) else 0

    if edited and not args.force:
        print("error: nothing was written.\n" + "\n".join(f"  {rel(e)}" for e in edited),
              file=sys.stderr)
        print(EDITED_HELP, file=sys.stderr)
        return 1
    backup = None
    if edited:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        backup = REPO / "build" / "exercises-backup" / stamp
        for ex in edited:
            dest = backup / ex.relative_to(REPO)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ex, dest)
            print(f"kept the edited {rel(ex)} as {rel(dest)}")
    for path, text in writes:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {rel(path)}")
    print(f"{len(ids)} exercises in {len(list(pairs()))} files")
    return 1 if orphans else 0


if __name__ == "__main__":
    sys.exit(main())
