# SPDX-License-Identifier: MIT
"""Grade exercises, tamper-proof: one copy (make grade) or a folder of submissions (make grade-all).

Only the student's exercise .cu files are taken from a submission: those of chapters/NN_x/ that
hold a TODO(student) (chapters/NN_x/.stubs.json lists them). They are placed into a copy of this
(the instructor's) tree, so an edited driver.py, test, common/ file or Makefile changes nothing.
Each file is compiled on its own, and each exercise runs in its own process with a time and an
output limit: a file that does not compile, a test that crashes, hangs or prints megabytes scores
0 on the exercises it touches, and grading goes on. Points come from the `[N points]` of each
exercise's `// @solution` marker (1 by default), hidden tests from HIDDEN=dir (see
docs/instructor.md), which add their own points.

    python3 tools/grade.py --submission DIR|ARCHIVE --out DIR [--chapters 01] [--hidden DIR]
    python3 tools/grade.py --all SUBMISSIONS_DIR --out DIR [--jobs N] [...]

Writes, per submission: score.json (points per exercise and test), results.json (the format
autograding platforms read: tests with name, score, max_score, output), junit.xml and
feedback.txt (the failure messages `make check` prints); with --all also gradebook.csv.
Python standard library only (the drivers it runs use NumPy).
"""
import argparse
import concurrent.futures
import csv
import datetime
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_SOURCE = 1 << 20        # bytes: a larger "exercise file" in a submission is ignored


class GradeError(Exception):
    """A problem with the grader's setup (not with a submission): grading stops."""


# ---- the instructor's tree -----------------------------------------------------------------------
def chapters_to_grade(selection):
    """Chapter directory names, from "01,02" (numbers or names), else every chapter that has
    exercises (a .stubs.json)."""
    all_chapters = sorted(p.parent.name for p in REPO.glob("chapters/[0-9][0-9]_*/.stubs.json"))
    if not selection:
        if not all_chapters:
            raise GradeError("no chapter has exercises (chapters/*/.stubs.json): run "
                             "`make exercises` in the instructor's tree")
        return all_chapters
    out = []
    for want in selection.replace(",", " ").split():
        found = [c for c in all_chapters if c == want or c.startswith(f"{want}_")]
        if len(found) != 1:
            raise GradeError(f"no chapter with exercises matches {want!r} "
                             f"(chapters: {', '.join(c[:2] for c in all_chapters)})")
        out += found
    return out


def manifest(chapter):
    return json.loads((REPO / "chapters" / chapter / ".stubs.json").read_text())


def exercise_files(chapter):
    """The .cu files of a chapter that a student edits (those holding a TODO(student))."""
    return sorted({r["file"] for ex in manifest(chapter)["exercises"].values()
                   for r in ex["regions"]})


def make_vars(backend):
    """Build the shared prerequisites once (emulator, tut_check.o) and read the compile
    commands from the Makefile, so that the grader compiles exactly as `make` does."""
    base = ["make", "-s", "--no-print-directory", "-C", str(REPO), f"BACKEND={backend}"]
    run = subprocess.run(base + ["grade-prereqs"], capture_output=True, text=True)
    if run.returncode:
        raise GradeError(f"could not build the grader's prerequisites:\n{run.stdout}{run.stderr}")
    run = subprocess.run(base + ["grade-vars"], capture_output=True, text=True, check=True)
    out = {}
    for line in run.stdout.splitlines():
        key, _, value = line.partition("=")
        out[key] = value.split()
    return out


def python_with_numpy():
    """The interpreter that runs the drivers: this one if it has NumPy, else the virtual
    environment `make` made."""
    for py in (sys.executable, str(REPO / "build" / "venv" / "bin" / "python")):
        if Path(py).exists() and subprocess.run([py, "-c", "import numpy"],
                                                capture_output=True).returncode == 0:
            return py
    raise GradeError("no Python with NumPy: run `make` first (it makes build/venv)")


# ---- a submission --------------------------------------------------------------------------------
def student_name(path):
    name = path.name
    for ext in ARCHIVES:
        if name.lower().endswith(ext):
            return name[: -len(ext)]
    return name


def submission_files(path):
    """{relative posix path: loader} for every regular file of a folder or an archive, never
    following links (a link to the instructor's files must not be read)."""
    files = {}
    if path.is_dir():
        for root, dirs, names in os.walk(path, followlinks=False):
            dirs[:] = [d for d in dirs if d not in (".git", "build")]
            for n in names:
                full = Path(root) / n
                if full.is_symlink() or not full.is_file():
                    continue
                files[full.relative_to(path).as_posix()] = (lambda f=full: _read_capped(f))
        return files
    lower = path.name.lower()
    if lower.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.is_dir() and info.file_size <= MAX_SOURCE:
                    files[info.filename] = (lambda i=info: _zip_read(path, i))
        return files
    if lower.endswith(ARCHIVES):
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.isfile() and m.size <= MAX_SOURCE:
                    files[m.name] = (lambda name=m.name: _tar_read(path, name))
        return files
    raise ValueError(f"{path.name} is neither a folder nor an archive ({', '.join(ARCHIVES)})")


def _read_capped(f):
    if f.stat().st_size > MAX_SOURCE:
        return None
    return f.read_bytes()


def _zip_read(path, info):
    with zipfile.ZipFile(path) as z:
        return z.read(info)[:MAX_SOURCE + 1]


def _tar_read(path, name):
    with tarfile.open(path) as t:
        return t.extractfile(name).read(MAX_SOURCE + 1)


def find_source(files, chapter, name):
    """The submission's path for chapters/<chapter>/<name>: a whole copy of the course, the
    chapter folder, or the bare file (when there is exactly one of that name)."""
    paths = [p for p in files if not PurePosixPath(p).is_absolute() and ".." not in
             PurePosixPath(p).parts and PurePosixPath(p).name == name]
    for suffix in (f"chapters/{chapter}/{name}", f"{chapter}/{name}"):
        hits = sorted((p for p in paths if p == suffix or p.endswith("/" + suffix)), key=len)
        if hits:
            return hits[0]
    return paths[0] if len(paths) == 1 else None


# ---- running one process with limits -------------------------------------------------------------
def run_limited(cmd, cwd, env, timeout, max_output, log_path):
    """Run cmd with its stdout+stderr in log_path. Returns (returncode or None, why_killed)."""
    def limits():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # a runaway write to a file dies here rather than filling the disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_output * 4, max_output * 4))

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=limits)
        started, why = time.monotonic(), ""
        while proc.poll() is None:
            time.sleep(0.05)
            if time.monotonic() - started > timeout:
                why = f"did not finish within {timeout:g} s (an endless loop, or far too slow)"
            elif os.path.getsize(log_path) > max_output:
                why = f"printed more than {max_output} bytes"
            if why:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        with _quiet():   # whatever it started in the background goes too
            os.killpg(proc.pid, signal.SIGKILL)
    return (None if why else proc.returncode), why


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


def tail(path, limit=3000):
    """The end of a log, decoded leniently, for a crash's feedback."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode(errors="replace")
    return ("...\n" if len(data) > limit else "") + text.rstrip()


INCLUDE = re.compile(rb'^\s*#\s*(?:include|include_next|import|embed)\s*(.*?)\s*$', re.M)


def forbidden(text, stub):
    """Why a submitted file may not be compiled (it reaches for a file outside the exercise:
    an instructor's solution, say), or "". #include <...> of a header by name and the stub's
    own #includes are fine."""
    def lines(t):   # as the preprocessor sees them: continuations joined, %: is #
        return t.replace(b"\\\r\n", b"").replace(b"\\\n", b"").replace(b"%:", b"#")
    allowed = set(INCLUDE.findall(lines(stub)))
    for m in INCLUDE.finditer(lines(text)):
        target = m.group(1).split(b"//")[0].split(b"/*")[0].strip()
        name = target[1:-1]
        if target in allowed:
            continue
        if not (target.startswith(b"<") and target.endswith(b">")) or b".." in name \
                or name.startswith(b"/"):
            return (f"it includes {target.decode(errors='replace')}, a file the grader does "
                    f"not provide: only the stub's own #includes and standard headers "
                    f"(#include <name>) are accepted")
    if b".incbin" in text or b"__has_include" in text:
        return "it uses .incbin or __has_include, which the grader does not accept"
    return ""


def describe_exit(rc):
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"crashed ({name})"
    return f"the test process exited with code {rc} and wrote no result"


# ---- grading one submission ----------------------------------------------------------------------
class Grader:
    def __init__(self, backend, hidden, timeout, max_output, seed, out, keep=False):
        self.backend, self.timeout, self.max_output = backend, timeout, max_output
        self.hidden = str(Path(hidden).resolve()) if hidden else ""
        self.seed, self.out, self.keep = seed, Path(out), keep
        self.vars = make_vars(backend)
        self.python = python_with_numpy()
        # what a compiled object also depends on: the headers (the cache outlives a run)
        self.headers = hashlib.sha256(b"".join(
            f.read_bytes() for pattern in ("common/*.h", "emu/include/*.h", "chapters/*/*.h",
                                           "chapters/*/*.cuh")
            for f in sorted(REPO.glob(pattern)))).hexdigest().encode()
        self.cache = self.out / "cache"
        self.cache.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._tests = {}

    # -- the workspace: a copy of the instructor's chapter with the student's exercise files --
    def workspace(self, chapters, files, ws):
        notes = []
        if ws.exists():
            shutil.rmtree(ws)
        shutil.copytree(REPO / "common", ws / "common",
                        ignore=shutil.ignore_patterns("__pycache__"))
        taken = {}
        for ch in chapters:
            shutil.copytree(REPO / "chapters" / ch, ws / "chapters" / ch,
                            ignore=shutil.ignore_patterns("__pycache__"))
            for name in exercise_files(ch):
                src = find_source(files, ch, name) if files is not None else None
                data = files[src]() if src else None
                if data is None or len(data) > MAX_SOURCE:
                    notes.append(f"chapters/{ch}/{name} was not found in the submission"
                                 + (" (or is larger than 1 MiB)" if src else "")
                                 + ": its exercises are graded as not done")
                    continue
                (ws / "chapters" / ch / name).write_bytes(data)
                taken[f"chapters/{ch}/{name}"] = src
        return taken, notes

    def _run_tool(self, cmd, cwd, log):
        rc, why = run_limited(cmd, cwd, os.environ.copy(), 300, 1 << 20, log)
        return rc == 0, why

    def _compile(self, ws, chapter, name):
        """An object for chapters/<chapter>/<name> in the workspace; cached by content."""
        v, src = self.vars, f"chapters/{chapter}/{name}"
        text = (ws / src).read_bytes()
        key = hashlib.sha256(b"\0".join([self.backend.encode(), src.encode(), text,
                                         " ".join(sum(v.values(), [])).encode(),
                                         self.headers])).hexdigest()
        obj = self.cache / f"{key}.o"
        log = ws / "build" / "compile" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if obj.exists():
            return obj, ""
        tmp = ws / "build" / "compile" / f"{name}.o"
        if self.backend == "cpu":
            cpp = ws / "build" / "compile" / f"{name}.cpp"
            cmds = [v["rewrite"] + [src, str(cpp)],
                    v["cxx"] + v["cxxflags"] + ["-DTUT_BACKEND_CPU", "-Icommon",
                                                f"-Ichapters/{chapter}", "-c", "-o", str(tmp),
                                                str(cpp)]]
        else:
            cmds = [v["nvcc"] + v["nvccflags"] + [f"-Ichapters/{chapter}", "-c", "-o",
                                                  str(tmp), src]]
        for cmd in cmds:
            ok, why = self._run_tool(cmd, ws, log)
            if not ok:
                return None, why or tail(log, 4000)
        os.replace(tmp, obj)   # atomic: another submission may want the same object
        return obj, ""

    def build(self, ws, chapter, taken):
        """Build the chapter's library; a student file that does not compile is replaced by
        its stub, so the other files' exercises still count. Returns {file: error}."""
        broken, objs = {}, []
        for cu in sorted((ws / "chapters" / chapter).glob("*.cu")):
            pristine = REPO / "chapters" / chapter / cu.name
            why = forbidden(cu.read_bytes(), pristine.read_bytes()) \
                if f"chapters/{chapter}/{cu.name}" in taken else ""
            obj, err = (None, "NOT ACCEPTED " + why) if why else self._compile(ws, chapter,
                                                                             cu.name)
            if obj is None and f"chapters/{chapter}/{cu.name}" in taken:
                broken[cu.name] = err
                shutil.copy2(pristine, cu)
                obj, err = self._compile(ws, chapter, cu.name)
            if obj is None:
                raise GradeError(f"the instructor's chapters/{chapter}/{cu.name} does not "
                                 f"compile:\n{err}")
            objs.append(str(obj))
        v = self.vars
        lib = ws / "build" / self.backend / "chapters" / f"lib{chapter}.so"
        lib.parent.mkdir(parents=True, exist_ok=True)
        ldlibs = v.get(f"ldlibs_{chapter}", [])
        if self.backend == "cpu":
            cmd = (v["cxx"] + v["cxxflags"] + ["-shared", "-o", str(lib)] + objs + v["tut_check"]
                   + ["-Wl,--whole-archive"] + v["runtime"] + ["-Wl,--no-whole-archive"]
                   + v["ldlibs"])
        else:
            cmd = v["nvcc"] + v["nvccflags"] + ["-shared", "-o", str(lib)] + objs \
                + v["tut_check"] + ldlibs
        ok, why = self._run_tool(cmd, ws, ws / "build" / "compile" / "link.log")
        if not ok:
            return {"": why or tail(ws / "build" / "compile" / "link.log", 4000)}
        return broken

    def test_ids(self, ws, chapter, env):
        key = chapter
        with self._lock:
            if key in self._tests:
                return self._tests[key]
        # the instructor's driver, never the workspace's: its tests are what is graded
        log = ws / "build" / "describe.log"
        rc, why = run_limited([self.python, str(REPO / "chapters" / chapter / "driver.py"),
                               "--describe"], ws, env, 60, 1 << 20, log)
        try:
            tests = [t for t in json.loads(log.read_text()) if t["exercise"]] if rc == 0 else None
        except ValueError:
            tests = None
        if tests is None:
            raise GradeError(f"`driver.py --describe` of {chapter} failed:\n{why}{tail(log)}")
        with self._lock:
            self._tests[key] = tests
        return tests

    def grade(self, name, files, ws):
        """Grade one submission (files: as from submission_files). Returns the score dict."""
        started = time.monotonic()
        chapters = self.chapters
        taken, notes = self.workspace(chapters, files, ws)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TUT_", "CUEMU_"))}
        env.update(TUT_BACKEND=self.backend, TUT_TREE="chapters", TUT_BUILD=str(ws / "build"),
                   PYTHONDONTWRITEBYTECODE="1")
        if self.hidden:
            env["TUT_HIDDEN"] = self.hidden
        if self.timeout < 40:   # let the emulator's watchdog name the kernel before we kill it
            env["CUEMU_WATCHDOG_S"] = str(max(2, int(self.timeout / 2)))
        tests, shown_at = [], {}
        for ch in chapters:
            points = {i: ex["points"] for i, ex in manifest(ch)["exercises"].items()}
            broken = self.build(ws, ch, taken)
            regions = manifest(ch)["exercises"]
            shown = set()
            several = len(taken) > 1
            for t in self.test_ids(ws, ch, env):
                test_id, ex_id = t["id"], t.get("part_of") or t["id"]
                entry = {"id": test_id, "exercise": ex_id, "chapter": ch, "title": t["title"],
                         "max": t["points"] if t.get("part_of") else points.get(ex_id, 1),
                         "hidden": bool(t.get("part_of")), "status": "FAIL", "message": ""}
                bad = [f for f in broken
                       if not f or any(r["file"] == f for r in regions.get(ex_id, {})
                                       .get("regions", []))]
                if bad:
                    what = (f"chapters/{ch}/{bad[0]} does not compile" if bad[0]
                            else "the chapter's library does not link")
                    err = broken[bad[0]]
                    if err.startswith("NOT ACCEPTED "):
                        what, err = (f"chapters/{ch}/{bad[0]} was not compiled",
                                     err[len("NOT ACCEPTED "):])
                    entry["message"] = f"{what}, so this exercise scores 0" + (
                        f" (the stub was used in its place: the exercises of the other files "
                        f"still count)" if bad[0] and several else "") + (
                        f"; why: see {shown_at[bad[0]]} above"
                        if bad[0] in shown else f":\n{err}")
                    if bad[0] not in shown:
                        shown.add(bad[0])
                        shown_at[bad[0]] = test_id
                    tests.append(entry)
                    continue
                tests.append(self.run_test(ws, ch, test_id, env, entry))
        skipped = sum(t["status"] == "SKIP" for t in tests)
        if skipped:
            notes.append(f"{skipped} test(s) could not run on the {self.backend} backend here "
                         f"(see their messages) and score 0: grade with BACKEND=cpu")
        score = sum(t["score"] for t in tests if "score" in t)
        for t in tests:
            t.setdefault("score", 0)
        result = {"student": name, "backend": self.backend, "seed": self.seed,
                  "chapters": chapters, "score": score, "max_score": sum(t["max"] for t in tests),
                  "graded": datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec="seconds"),
                  "seconds": round(time.monotonic() - started, 1), "notes": notes,
                  "files": taken, "tests": tests}
        if not self.keep:
            shutil.rmtree(ws, ignore_errors=True)
        return result

    def run_test(self, ws, chapter, test_id, env, entry):
        jpath = ws / "build" / "results" / f"{test_id}.json"
        log = ws / "build" / "results" / f"{test_id}.log"
        jpath.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, f"chapters/{chapter}/driver.py", "--check", "--only", test_id,
               "--seed", str(self.seed), "--json", str(jpath)]
        rc, why = run_limited(cmd, ws, env, self.timeout, self.max_output, log)
        result = None
        if not why and jpath.exists():
            with _quiet():
                result = json.loads(jpath.read_text())[0]
            if result["status"] == "CRASH":   # the row written before the test: it died
                result = None
        if result is None:
            entry["message"] = (f"{why or describe_exit(rc)}; the end of its output:\n"
                                f"{tail(log, 1500)}")
        else:
            entry.update(status=result["status"], message=result["message"])
            if result["status"] == "PASS":
                entry["score"] = entry["max"]
        return entry


# ---- reports -------------------------------------------------------------------------------------
MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip"}


def by_exercise(result):
    ex = {}
    for t in result["tests"]:
        e = ex.setdefault(t["exercise"], {"score": 0, "max": 0})
        e["score"] += t["score"]
        e["max"] += t["max"]
    return ex


def feedback(result):
    lines = [f"{result['student']}: {result['score']} of {result['max_score']} points "
             f"(chapters {', '.join(result['chapters'])}; {result['backend']} backend; "
             f"seed {result['seed']}; graded {result['graded']})", ""]
    lines += [f"note: {n}" for n in result["notes"]]
    if result["notes"]:
        lines.append("")
    for t in result["tests"]:
        lines.append(f"{t['id']:<12} {t['score']:>3}/{t['max']:<3} {MARK.get(t['status'], t['status']):<5} "
                     f"{t['title']}{'  (hidden test)' if t['hidden'] else ''}")
        if t["status"] != "PASS" and t.get("message"):
            lines += ["      " + m for m in t["message"].splitlines()]
    return "\n".join(lines) + "\n"


def autograder_json(result):
    """results.json as autograding platforms read it: a total and one entry per test."""
    tests = []
    for t in result["tests"]:
        tests.append({"name": f"{t['id']} {t['title']}".strip(), "score": t["score"],
                      "max_score": t["max"],
                      "status": "passed" if t["status"] == "PASS" else "failed",
                      "output": "" if t["status"] == "PASS" else t.get("message", ""),
                      "visibility": "after_published" if t["hidden"] else "visible"})
    return {"score": result["score"], "execution_time": result["seconds"],
            "output": f"{result['score']} of {result['max_score']} points; " + "; ".join(
                result["notes"]) if result["notes"] else
            f"{result['score']} of {result['max_score']} points",
            "tests": tests}


def junit_xml(result):
    suite = ET.Element("testsuite", name=f"grade {result['student']}",
                       tests=str(len(result["tests"])),
                       failures=str(sum(t["status"] != "PASS" for t in result["tests"])))
    for t in result["tests"]:
        case = ET.SubElement(suite, "testcase", classname=t["chapter"],
                             name=f"{t['id']} {t['title']}".strip())
        case.set("points", f"{t['score']}/{t['max']}")
        if t["status"] != "PASS":
            msg = t.get("message", "")
            fail = ET.SubElement(case, "failure", message=(msg.splitlines() or [t["status"]])[0],
                                 type=t["status"])
            fail.text = msg
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_reports(result, out):
    out.mkdir(parents=True, exist_ok=True)
    (out / "score.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "results.json").write_text(json.dumps(autograder_json(result), indent=1) + "\n")
    (out / "junit.xml").write_text(junit_xml(result))
    (out / "feedback.txt").write_text(feedback(result))


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name).strip("._") or "submission"


# ---- main ----------------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--submission", type=Path, help="one submission: a folder or an archive")
    what.add_argument("--all", type=Path, metavar="DIR",
                      help="every folder and archive in DIR is one student's submission")
    p.add_argument("--out", type=Path, required=True, help="where the reports go")
    p.add_argument("--chapters", default="", help="chapters to grade, e.g. 01 (default: all)")
    p.add_argument("--hidden", default="", help="a directory of hidden tests")
    p.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--timeout", type=float, default=60, help="seconds per test (default 60)")
    p.add_argument("--max-output", type=int, default=1 << 20,
                   help="bytes a test may print (default 1 MiB)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, help="seed of every test's random inputs")
    p.add_argument("--keep", action="store_true", help="keep each submission's workspace")
    p.add_argument("--name", help="the student's name (--submission; default: its file name)")
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    try:
        if args.hidden and not Path(args.hidden).is_dir():
            raise GradeError(f"HIDDEN={args.hidden} is not a directory")
        grader = Grader(args.backend, args.hidden, args.timeout, args.max_output, seed, args.out,
                        args.keep)
        grader.chapters = chapters_to_grade(args.chapters)
        if args.submission:
            return grade_one(grader, args)
        return grade_all(grader, args)
    except GradeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def grade_one(grader, args):
    sub = args.submission.resolve()
    name = args.name or (student_name(sub) if sub != REPO else "this copy")
    result = grader.grade(name, submission_files(sub), args.out / "work")
    write_reports(result, args.out)
    print(feedback(result), end="")
    for f in ("score.json", "results.json", "junit.xml", "feedback.txt"):
        print(f"wrote {args.out / f}")
    return 0


def grade_all(grader, args):
    if not args.all.is_dir():
        raise GradeError(f"SUBMISSIONS={args.all} is not a directory")
    subs = sorted(p for p in args.all.iterdir() if not p.name.startswith(".") and (
        p.is_dir() or p.name.lower().endswith(ARCHIVES)))
    if not subs:
        raise GradeError(f"no submissions (folders or {', '.join(ARCHIVES)}) in {args.all}")
    names = {}
    for s in subs:
        n = safe_name(student_name(s))
        if n in names:
            raise GradeError(f"{s.name} and {names[n].name} are the same student ({n})")
        names[n] = s
    print(f"grading {len(subs)} submissions of chapter(s) {', '.join(grader.chapters)} on the "
          f"{grader.backend} backend, {args.jobs} at a time, seed {grader.seed}", flush=True)
    started, done, results = time.monotonic(), 0, {}

    def one(name):
        try:
            files = submission_files(names[name])
        except (ValueError, OSError, tarfile.TarError, zipfile.BadZipFile) as e:
            files = {}
            note = f"the submission could not be read: {e}"
        else:
            note = ""
        r = grader.grade(name, files, args.out / "work" / name)
        if note:
            r["notes"].insert(0, note)
        write_reports(r, args.out / "results" / name)
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(one, n): n for n in names}
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            results[futures[fut]] = r
            done += 1
            print(f"[{done}/{len(names)}] {r['student']}: {r['score']}/{r['max_score']} "
                  f"({r['seconds']} s)", flush=True)
    fb_dir = args.out / "feedback"
    fb_dir.mkdir(parents=True, exist_ok=True)
    columns = []
    for r in results.values():
        for ex in by_exercise(r):
            if ex not in columns:
                columns.append(ex)
    columns.sort(key=lambda e: [int(x) for x in e.split(".")])
    book = args.out / "gradebook.csv"
    with open(book, "w", newline="") as f:
        w = csv.writer(f)
        maxima = by_exercise(next(iter(results.values())))
        w.writerow(["student"] + columns + ["total", "max"])
        w.writerow(["(max)"] + [maxima.get(c, {}).get("max", "") for c in columns]
                   + [sum(m["max"] for m in maxima.values()), ""])
        for name in sorted(results):
            r, ex = results[name], by_exercise(results[name])
            w.writerow([name] + [ex.get(c, {}).get("score", 0) for c in columns]
                       + [r["score"], r["max_score"]])
            (fb_dir / f"{name}.txt").write_text(feedback(r))
    took = time.monotonic() - started
    print(f"graded {len(results)} submissions in {took:.0f} s of wall time ({args.jobs} at a "
          f"time)\nwrote {book}\nwrote {fb_dir}/<student>.txt "
          f"({len(results)} files) and {args.out / 'results'}/<student>/"
          f"{{score.json,results.json,junit.xml}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
