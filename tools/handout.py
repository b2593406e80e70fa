# SPDX-License-Identifier: MIT
"""Make the student repository (make handout): this tree without solutions/, hidden tests, the
maintainers' CI, the instructor's notes, the grading platforms' packaging or any git history,
with freshly generated exercise stubs. It stands alone: a link or #include that would reach a
file it leaves out is rewritten (docs/experiments/ build against the student's own chapter
files), and the handout is checked for any that remain.

    python3 tools/handout.py --out build/handout [--hidden DIR] [--check 01] [--python PY]

--check NN then proves the handout works on its own: in it, `make test CH=NN` (a student's copy:
it checks the exercises) must report every exercise of chapter NN as not done; with the
solutions dropped in, `make check CH=NN` must pass and `make grade CH=NN` must give full points.
The stubs are put back and build/ removed afterwards, so what is left is what students get.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import exercises  # noqa: E402

# never handed out: the answers, the maintainers' CI, the instructor's notes and packaging
EXCLUDE_TOP = {"solutions", ".ci", ".git", "build", ".carry", ".whl"}
EXCLUDE_FILES = {"docs/instructor.md"}
EXCLUDE_DIRS = {"tools/platforms"}
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s#]+)(#[^)]*)?\)")
INCLUDE = re.compile(r'^(\s*#\s*include\s*")([^"]+)(")', re.M)


def tracked_files(hidden):
    """The files of this tree to hand out: git's view when there is one (tracked and new, not
    ignored), else every file outside build/."""
    try:
        run = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True)
        names = [n for n in run.stdout.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file()]
    out = []
    for n in sorted(set(names)):
        path = REPO / n
        parts = Path(n).parts
        if parts[0] in EXCLUDE_TOP or n in EXCLUDE_FILES or "__pycache__" in parts \
                or any(n.startswith(d + "/") for d in EXCLUDE_DIRS):
            continue
        if hidden and (path.resolve() == hidden or hidden in path.resolve().parents):
            continue
        if path.is_file() and not path.is_symlink():
            out.append(n)
    return out


def stubs():
    """{chapters/NN_x/f.cu: generated stub text}: the handout gets the stubs as generated from
    solutions/, whatever this working tree's chapters/ holds."""
    out = {}
    for sol, ex in exercises.pairs():
        text, _ = exercises.generate(sol, sol.read_text())
        out[str(ex.relative_to(REPO))] = text
    return out


def build(out, hidden):
    if out.exists():
        marker = out / ".handout"
        if not marker.exists():
            raise SystemExit(f"error: {out} exists and is not a handout made by this tool: "
                             f"choose another HANDOUT=dir")
        shutil.rmtree(out)
    generated = stubs()
    files = tracked_files(hidden)
    kept = set(files) | set(generated)
    for n in files:
        dest = out / n
        dest.parent.mkdir(parents=True, exist_ok=True)
        if n in generated:
            dest.write_text(generated[n])
        elif n.endswith((".md", ".cu", ".h", ".cuh")):
            dest.write_text(standalone(n, (REPO / n).read_text(), kept))
            shutil.copystat(REPO / n, dest)
        else:
            shutil.copy2(REPO / n, dest)
    for n, text in generated.items():   # a new chapter not yet in git
        if not (out / n).exists():
            (out / n).parent.mkdir(parents=True, exist_ok=True)
            (out / n).write_text(text)
    (out / ".handout").write_text("made by `make handout`; students may delete this file\n")
    verify(out, hidden)
    print(f"wrote the handout: {out} ({len(files)} files; no solutions/, no hidden tests, "
          f"no git history)")


def _target(name, ref):
    """The tree path a relative link or include in file `name` points at (None: not a path
    in this tree)."""
    if "://" in ref or ref.startswith(("mailto:", "/")):
        return None
    path = os.path.normpath(os.path.join(os.path.dirname(name), ref))
    return None if path.startswith("..") else path


def standalone(name, text, kept):
    """The file as the handout needs it: an #include of a solution becomes the student's own
    chapter file; a Markdown link to a file the handout leaves out becomes plain text."""
    def include(m):
        target = _target(name, m.group(2))
        if target and target.startswith("solutions/"):
            mine = "chapters/" + target[len("solutions/"):]
            if mine in kept:
                rel = os.path.relpath(mine, os.path.dirname(name))
                return (f"{m.group(1)}{rel}{m.group(3)}  // the handout: your own chapter file "
                        f"(the experiment needs its exercises done)")
        return m.group(0)

    def link(m):
        target = _target(name, m.group(2))
        if target is None or target in kept or (REPO / target).is_dir() and any(
                k.startswith(target + "/") for k in kept):
            return m.group(0)
        return f"{m.group(1)} (in the instructor's copy of the course)"

    if name.endswith(".md"):
        return LINK.sub(link, text)
    return INCLUDE.sub(include, text)


def verify(out, hidden):
    """Nothing secret went out: no solution marker in a .cu, no file equal to a solution or a
    hidden test, no git history."""
    secret = {}
    for sol in REPO.glob("solutions/*/*.cu"):
        if "// @solution" in sol.read_text():
            secret[sol.read_bytes()] = f"{sol.relative_to(REPO)}"
    if hidden:
        for h in hidden.rglob("*"):
            if h.is_file():
                secret[h.read_bytes()] = f"hidden test {h}"
    problems = []
    for f in out.rglob("*"):
        rel = str(f.relative_to(out))
        if f.is_file() and f.suffix in (".md", ".cu", ".h", ".cuh"):
            text = f.read_text(errors="replace")
            refs = [m.group(2) for m in LINK.finditer(text)] if f.suffix == ".md" else \
                [m.group(2) for m in INCLUDE.finditer(text)]
            for ref in refs:
                target = _target(rel, ref)
                # a Markdown link must land; an #include only must not reach what is left out
                # (the others resolve through the compiler's -I folders)
                missing = target and not (out / target).exists() and (
                    f.suffix == ".md" or Path(target).parts[0] in EXCLUDE_TOP
                    or target in EXCLUDE_FILES)
                if missing:
                    problems.append(f"{rel} refers to {ref}, which the handout does not have")
        if f.is_dir() or f.is_symlink():
            if f.name == ".git" or f.name == "solutions":
                problems.append(f"{f.relative_to(out)} is in the handout")
            continue
        data = f.read_bytes()
        if data in secret:
            problems.append(f"{f.relative_to(out)} is {secret[data]}")
        if f.suffix == ".cu" and b"// @solution" in data:
            problems.append(f"{f.relative_to(out)} holds a solution marker")
    if problems:
        raise SystemExit("error: the handout would give away answers:\n  " + "\n  ".join(problems))


def make(out, python, *args, expect):
    cmd = ["make", "--no-print-directory", "-C", str(out), f"PYTHON={python}", "BACKEND=cpu",
           *args]
    print(f"handout check: make {' '.join(args)} (in {out})", flush=True)
    # on its own: nothing from the make that runs this (HIDDEN=, BUILD=...) nor from the harness
    # (make exports its command line's variables to the environment too)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "HIDDEN", "CH",
                        "BUILD", "BACKEND", "SUBMISSIONS", "JOBS", "TIMEOUT", "SEED", "HANDOUT",
                        "CHECK", "FORCE", "ARGS", "CTEST_ARGS", "PYTHON")
           and not k.startswith(("TUT_", "CUEMU_"))}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    text = run.stdout + run.stderr
    if (run.returncode == 0) != expect:
        print(text[-6000:])
        raise SystemExit(f"error: the handout check failed: `make {' '.join(args)}` exited "
                         f"with {run.returncode}, want {'0' if expect else 'non-zero'}")
    return text


def check(out, chapter_sel, python):
    matches = sorted(p.name for p in (out / "chapters").glob(f"{chapter_sel}*")
                     if p.is_dir() and (p / ".stubs.json").exists())
    if len(matches) != 1:
        raise SystemExit(f"error: --check {chapter_sel}: no single chapter with exercises")
    ch = matches[0]
    ids = json.loads((out / "chapters" / ch / ".stubs.json").read_text())["exercises"]
    text = make(out, python, "-j2", "test", f"CH={ch[:2]}", expect=False)
    want = f"exercises: 0 of {len(ids)} passing"
    if "a student's copy" not in text or want not in text:
        print(text[-6000:])
        raise SystemExit(f"error: the handout check failed: `make test` should say it checks a "
                         f"student's copy and report '{want}'")
    print(f"  the stubs: {want}")
    sol_files = sorted((REPO / "solutions" / ch).glob("*.cu"))
    for sol in sol_files:
        shutil.copy(sol, out / "chapters" / ch / sol.name)   # a new mtime: make rebuilds
    try:
        make(out, python, "check", f"CH={ch[:2]}", expect=True)
        print(f"  with the solutions dropped in: make check CH={ch[:2]} passes")
        text = make(out, python, "grade", f"CH={ch[:2]}", expect=True)
        score = json.loads((out / "build" / "grade" / "score.json").read_text())
        if score["score"] != score["max_score"] or score["max_score"] == 0:
            print(text[-6000:])
            raise SystemExit("error: the handout check failed: the solutions do not get full "
                             "points from `make grade`")
        print(f"  make grade CH={ch[:2]}: {score['score']} of {score['max_score']} points")
    finally:
        generated = stubs()
        for sol in sol_files:
            rel = f"chapters/{ch}/{sol.name}"
            (out / rel).write_text(generated[rel])
        shutil.rmtree(out / "build", ignore_errors=True)
    verify(out, None)
    print("handout checked: stubs not done, solutions pass and grade in full, on its own")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hidden", type=Path, help="the hidden tests' directory (kept out)")
    p.add_argument("--check", metavar="NN", help="build and check the handout on chapter NN")
    p.add_argument("--python", default=sys.executable,
                   help="a Python with NumPy for the check (saves the handout a venv)")
    args = p.parse_args(argv)
    if not (REPO / "solutions").is_dir():
        raise SystemExit("error: this copy has no solutions/: a handout is made from the "
                         "instructor's tree")
    out = args.out.resolve()
    if out == REPO or REPO in out.parents and not (REPO / "build") in out.parents:
        raise SystemExit("error: put the handout outside this tree or under build/")
    build(out, args.hidden.resolve() if args.hidden else None)
    if args.check:
        check(out, args.check, args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
