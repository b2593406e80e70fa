# SPDX-License-Identifier: MIT
"""The test harness: Chapter (test registration, the command line, results), Context."""
import argparse
import contextlib
import gc
import hashlib
import importlib.util
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .args import check_count
from . import capture, memory
from .errors import (EXIT_FAIL, EXIT_PASS, EXIT_SKIP, NO_GPU_ERRORS, CudaError, ExerciseNotDone,
                     LibraryError, NotBuilt, Skip)
from .library import load_chapter
from . import paths
from .paths import backend, tree


def under_sanitizer():
    """True under compute-sanitizer (make sanitize sets TUT_SANITIZER). Its tools allocate
    device memory of their own, which cudaMemGetInfo counts, so the harness's leak check would
    blame tests for it; memcheck's --leak-check full judges leaks instead, by allocation."""
    return bool(os.environ.get("TUT_SANITIZER"))



def perf_skip(which_backend):
    """Why a performance test is not timed here ("" when it is): a GPU only (the emulator's
    time says nothing of one), and only when graded or asked for (TUT_PERF=1), since timing
    takes seconds that make check should not spend."""
    if which_backend != "gpu":
        return ("performance is timed on a GPU only (the emulator's time says nothing about "
                "one): its points need BACKEND=gpu (make grade BACKEND=gpu)")
    if os.environ.get("TUT_PERF") != "1":
        return ("timed when graded (make grade BACKEND=gpu) or with --bench, not by make "
                "check: it takes seconds")
    return ""


def quick_check(which_backend):
    """Whether the checks too slow for the student's loop (Chapter.check(full=...)) are left
    out here: in `make check`'s quick run (TUT_FULL=0, which the Makefile sets unless FULL=1)
    on a GPU. make test, grading, and a driver run by hand run everything; on the emulator those
    checks skip quickly by themselves."""
    return which_backend == "gpu" and os.environ.get("TUT_FULL") == "0"


def _first_failure(e):
    """The failure that started it all. After a fault inside a kernel every later CUDA call
    fails too, so the `with` blocks that free buffers on the way out raise again; Python keeps
    the earlier exception as __context__. Report the first one: it names the culprit (and
    carries the emulator's diagnostic)."""
    first = e
    while e.__context__ is not None:
        e = e.__context__
        if isinstance(e, (CudaError, LibraryError, AssertionError, ExerciseNotDone, Skip)):
            first = e
    return first


_notes = None   # the running test's notes (note()); None while no test runs


def note(text):
    """Say what this test did not check here, or another fact a student should see beside its
    result: it goes into the test's row (make check's table), or is printed outside a test."""
    if _notes is None:
        print(f"note: {text}")
    else:
        _notes.append(str(text))


@contextlib.contextmanager
def _test_running():
    """While a test runs: its notes are collected (yielded), and the emulator keeps its
    diagnoses to its buffer, which the row gets (a CudaError carries those of its call, and one
    that a test expected goes with it): no second copy on stderr."""
    global _notes
    quiet = os.environ.get("CUEMU_QUIET")
    os.environ["CUEMU_QUIET"] = "1"
    _notes = []
    try:
        yield _notes
    finally:
        _notes = None
        if quiet is None:
            os.environ.pop("CUEMU_QUIET", None)
        else:
            os.environ["CUEMU_QUIET"] = quiet


def _harness_frame(filename):
    """A frame of the harness itself (this runner, make check's processes): no news to a
    student reading why a test errored."""
    name = filename.replace("\\", "/")
    return name.endswith(("/common/tut/runner.py", "/common/tut/warm.py", "/tools/check.py"))


def _shown_path(path):
    """A path as a student would type it: relative to the repository when it is inside."""
    p = Path(path).resolve()
    return str(p.relative_to(paths.REPO)) if p.is_relative_to(paths.REPO) else str(path)


def _row_details(r):
    """The lines under a result's line when a driver is run by hand."""
    out = []
    for key in ("message", "diagnostics"):
        if r.get(key):
            out += r[key].rstrip().splitlines()
    out += [f"note: {n}" for n in r.get("notes", [])]
    if r.get("output_dropped"):
        out.append(f"output: {r['output_lines']} lines printed, {r['output_dropped']} dropped")
    return out


def missing_linked_library(e):
    """The skip message when loading a chapter library failed (OSError e) because a library
    it links is not on this machine: one built elsewhere (with CUDA 12, say) run where only
    another toolkit's cuBLAS is installed. None for any other OSError."""
    missing = re.search(r"(\S+\.so[.\d]*): cannot open shared object file", str(e))
    if missing is None:
        return None
    return (f"{missing.group(1)}, which this build links, is not on this machine (it belongs "
            f"to the CUDA toolkit the library was built with): install it, or rebuild with "
            f"this machine's toolkit (make clean && make)")


class Context:
    """What a test function gets: the library, a seeded generator, and the sizes to try."""

    def __init__(self, lib, seed, chapter):
        self.lib, self.seed, self.chapter = lib, seed, chapter
        self.rng = np.random.default_rng(seed)
        self.backend = lib.backend
        # The large sizes run on a GPU only: the emulator is slow, and so is every kernel
        # under compute-sanitizer, which checks each access (memory errors show at any size;
        # what only a large size finds, an overflowing index, is tested without it).
        self._large = self.backend == "gpu" and not under_sanitizer()
        self.large_left_out = False

    @property
    def large(self):
        """Whether to add the large sizes. Not in a quick `make check` on a GPU (quick_check):
        there every exercise runs at the sizes the emulator runs, which catch every planted
        bug of `make mutants`, and the large ones (the inputs and the float64 reference made
        on the host: most of a chapter's seconds on the H200, 2026-12-05) wait for
        `make check FULL=1`, make test and grading; the row records that they were left out."""
        if self._large and quick_check(self.backend):
            self.large_left_out = True
            return False
        return self._large

    def sizes(self, block=256, large=1 << 22):
        """Sizes that catch the usual indexing bugs: 1, one warp -1/0/+1, one block + 1,
        a prime near 10^6, and (on a GPU, not under the sanitizer: ctx.large) a large one:
        2^22 + 7, 16,385 blocks of 256 and four turns of a 4096-block grid-stride loop. The
        inputs and the float64 reference are made on the host: 2^24 cost about 1.2 s a case
        on the H200's machine (01.5 took 4.9 s, 06.4 8.2 s; 2026-12-04) and tests no bug that
        2^22 misses (an index overflow needs 2^31: 01.2's and 02's INT_MAX tests)."""
        out = [1, 31, 32, 33, block + 1, 999_983]
        if self.large:
            out.append(large + 7)
        return out


class Chapter:
    """A chapter's tests. Exercises are numbered ("01.3"); other checks are named ("01.errors")."""

    def __init__(self, number, name):
        self.number, self.name, self.tests = f"{int(number):02d}", name, []

    def exercise(self, num, title, own_context=False, ballast=False):
        """own_context: under `make check` on a GPU, run first in a CUDA context of its own
        (passing tests otherwise share one: common/tut/warm.py). ballast: the test fills the
        device (tut.device_ballast), so a GPU's ballast is kept for it from the test before
        (common/tut/memory.py says why)."""
        return self._register(f"{self.number}.{num}", title, True, own_context=own_context,
                              ballast=ballast)

    def check(self, key, title, own_context=False, full=None):
        """full: on a GPU, what makes this check too slow for the student's loop (a phrase:
        "imports PyTorch"). A quick `make check` (quick_check) then gives it a skip row that
        says so and names `make check FULL=1`; make test, grading and a driver run by hand run
        it. Never for an exercise: every exercise is checked on every run."""
        if full is None:
            return self._register(f"{self.number}.{key}", title, False, own_context=own_context)

        def wrap(fn):
            def gated(ctx):
                if quick_check(ctx.backend):
                    raise Skip(f"not in a quick make check on a GPU ({full}): make check FULL=1 "
                               f"runs it, and make test and grading always do")
                return fn(ctx)
            gated.__name__ = getattr(fn, "__name__", "check")
            self._register(f"{self.number}.{key}", title, False, own_context=own_context,
                           full=full)(gated)
            return fn
        return wrap

    def _register(self, test_id, title, is_exercise, **extra):
        def wrap(fn):
            if any(t["id"] == test_id for t in self.tests):
                raise ValueError(f"test id {test_id} registered twice")
            self.tests.append({"id": test_id, "title": title, "fn": fn,
                               "exercise": is_exercise, **extra})
            return fn
        return wrap

    def hidden(self, exercise_id, key, title, points=1):
        """A hidden test (an instructor's, loaded from TUT_HIDDEN): part of exercise
        `exercise_id` ("01.2"), with id "01.2+key", worth `points` in `make grade`."""
        return self._register(self._part_id(exercise_id, key, "hidden test"), title, True,
                              part_of=exercise_id, points=check_count(points, "points"))

    def _part_id(self, exercise_id, key, kind):
        """The id "NN.M+key" of a test that is part of exercise NN.M (a hidden or performance
        test), once the exercise is known here and the key is one a file name can hold."""
        if not any(t["id"] == exercise_id and t["exercise"] for t in self.tests):
            raise ValueError(f"{kind} {key!r}: no exercise {exercise_id} in this chapter")
        if not re.fullmatch(r"[A-Za-z0-9-]+", key):
            raise ValueError(f"{kind} key {key!r}: use letters, digits and '-' only")
        return f"{exercise_id}+{key}"

    def performance(self, exercise_id, key, title, points, full, zero):
        """A performance test of exercise `exercise_id`, id "NN.M+key", worth up to `points` in
        `make grade BACKEND=gpu`: its function returns (fraction, message) from
        tut.performance_points, and earns that fraction of the points (all from `full` of the
        copy ceiling, none at `zero` or below, linear between). It is timed only on a GPU and
        only when graded (TUT_PERF=1: make grade, make grade-all) or asked for (--bench), so
        that make check stays fast; elsewhere it is a skip that says so."""
        test_id = self._part_id(exercise_id, key, "performance test")
        if not 0 <= zero < full:
            raise ValueError(f"performance test {key!r}: needs 0 <= zero < full")
        fn_perf = {"full": float(full), "zero": float(zero)}

        def wrap(fn):
            def timed(ctx):
                why = perf_skip(ctx.backend)
                if why:
                    raise Skip(why)
                return fn(ctx)
            timed.__name__ = getattr(fn, "__name__", "performance")
            self._register(test_id, title, True, part_of=exercise_id,
                           points=check_count(points, "points"), perf=fn_perf)(timed)
            return fn
        return wrap

    def load_hidden(self, directory=None):
        """Register the hidden tests in TUT_HIDDEN (make grade HIDDEN=dir): every NN*.py and
        NN*/*.py there for this chapter NN, each with a function register(chapter, driver)
        that adds tests with chapter.hidden(...); driver is the chapter's driver module."""
        directory = directory or os.environ.get("TUT_HIDDEN")
        if not directory:
            return
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"TUT_HIDDEN={directory} is not a directory")
        driver = sys.modules.get("__main__")
        files = sorted(root.glob(f"{self.number}*.py")) + sorted(root.glob(f"{self.number}*/*.py"))
        for f in files:
            name = "tut_hidden_" + hashlib.sha1(str(f.resolve()).encode()).hexdigest()[:12]
            spec = importlib.util.spec_from_file_location(name, f)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if not hasattr(module, "register"):
                raise ValueError(f"{f}: a hidden test file needs register(chapter, driver)")
            module.register(self, driver)

    # -- running --
    def untouched(self, test):
        """file:line of a TODO(student) of this test's exercise whose stub is still exactly
        what tools/exercises.py generated (chapters/NN_x/.stubs.json), or None; all=True
        when every region of the exercise is untouched. Returns (where, all)."""
        ex_id = test.get("part_of") or test["id"]
        chapter_dir = paths.REPO / "chapters" / self.name
        try:
            regions = json.loads((chapter_dir / ".stubs.json").read_text())["exercises"][
                ex_id]["regions"]
        except (OSError, ValueError, KeyError):
            return None, False
        marker, first, count = f"TODO(student) {ex_id}:", None, 0
        for r in regions:
            try:
                lines = (chapter_dir / r["file"]).read_text().splitlines(keepends=True)
            except OSError:
                continue
            for i, line in enumerate(lines):
                start = i - r["todo_line"]
                if marker in line and start >= 0 and hashlib.sha256(
                        "".join(lines[start:start + r["lines"]]).encode()).hexdigest() == r["sha256"]:
                    first = first or f"chapters/{self.name}/{r['file']}:{i + 1}"
                    count += 1
                    break
        return first, bool(regions) and count == len(regions)

    def exercise_at(self, place):
        """The exercise whose code holds place ("chapters/NN_x/f.cu:LINE", a compile error's):
        the id of the last `TODO(student) NN.M` at or above that line of that file, or None."""
        m = re.match(r"(.+):(\d+)$", place or "")
        if not m:
            return None
        try:
            text = (paths.REPO / m.group(1)).read_text(errors="replace").splitlines()
        except OSError:
            return None
        found = None
        for line in text[:int(m.group(2))]:
            t = re.search(rf"(?:TODO\(student\)|@solution) ({re.escape(self.number)}\.\d+)\b",
                          line)
            if t:
                found = t.group(1)
        return found

    def todo_location(self, test_id):
        """file:line of `TODO(student) <id>` in the exercise sources, if still there."""
        # "01.2-int-max" is another test of exercise 01.2: its TODO is the exercise's
        pattern = re.compile(rf"TODO\(student\) {re.escape(test_id.split('-')[0])}\b")
        for src in sorted((paths.REPO / "chapters" / self.name).glob("*.cu")):
            for lineno, line in enumerate(src.read_text().splitlines(), 1):
                if pattern.search(line):
                    return f"{src.relative_to(paths.REPO)}:{lineno}"
        return None

    def run_test(self, test, lib, seed, run_untouched=False, output=None):
        """One test's result. An exercise whose TODO(student) stubs are all untouched is not
        run: it is "NOT DONE" (shown as todo), with the TODO's file:line, never a FAIL whose
        numbers would look like the student's bug; run_untouched=True (maintainers checking
        that stubs fail) runs it anyway. With output=PATH, what the test prints (kernel printf,
        the runtime's messages) goes to PATH and its start into the row; the emulator's
        diagnoses and the test's notes go into the row too, whole and once."""
        started = time.perf_counter()
        check_todo = test["exercise"] and tree() == "chapters" and not run_untouched
        where, untouched_all = self.untouched(test) if check_todo else (None, False)
        if untouched_all:
            return self._result(test, lib.backend, seed, started, "NOT DONE",
                                f"exercise not done yet: TODO(student) at {where}", todo=where,
                                part="none")
        ctx = Context(lib, seed, self)
        at = next((i for i, t in enumerate(self.tests) if t is test), len(self.tests))
        following = self.tests[at + 1] if at + 1 < len(self.tests) else {}
        memory.ballast_between_tests(test.get("ballast"), following.get("ballast"))
        diagnostic = getattr(lib, "diagnostic", lambda: "")
        diagnostic()   # what an earlier test left is not this one's
        with _test_running() as notes, capture.output_to(output):
            status, message = self._call(test, ctx, lib)
            fraction = getattr(ctx, "perf_fraction", None)
            try:
                diagnostics = diagnostic()
            except Exception as e:   # a library whose process died: the row says so
                diagnostics = f"(the emulator's diagnoses could not be read: {e})"
        extra = {"diagnostics": diagnostics.rstrip(), "notes": notes,
                 "left_out": "large sizes" if ctx.large_left_out else None}
        if test.get("perf") and status == "PASS":
            extra["fraction"] = fraction
        if output is not None:
            text, lines, dropped = capture.read_capped(output)
            extra.update(output=text, output_lines=lines, output_dropped=dropped,
                         output_file=_shown_path(output))
        if status in ("FAIL", "ERROR") and where:
            # part of the exercise is still the stub: that, not the numbers, is the news
            return self._result(test, lib.backend, seed, started, "NOT DONE",
                                f"exercise not finished: TODO(student) at {where} is still "
                                f"untouched\n(what the finished part gave: {message.splitlines()[0] if message else status})",
                                todo=where, part="some", **extra)
        if status == "FAIL" and test["exercise"] and tree() == "chapters":
            ex_id = test.get("part_of") or test["id"]
            where = self.todo_location(ex_id)
            if where:
                message += f"\n  hint: the exercise is at {where} (TODO(student) {ex_id})"
                extra["todo"] = where
        return self._result(test, lib.backend, seed, started, status, message, **extra)

    @staticmethod
    def _call(test, ctx, lib):
        """(status, message) of running the test function, with the leak check after it."""
        try:
            used_before = lib.mem_used() - memory.kept_ballast_bytes()
            # streams and events alive (CPU backend; None on a GPU: CUDA cannot count them)
            live = getattr(lib, "live_objects", lambda: None)
            live_before = live()
            value = test["fn"](ctx)
            # Memory still held by garbage (a cycle through an owner, a consumer's capsule
            # another library keeps in one) is not the test's leak: collect it first.
            gc.collect()
            lib.synchronize()
            leaked = lib.mem_used() - memory.kept_ballast_bytes() - used_before
            live_after = live()
            if leaked > 0 and not under_sanitizer():
                return "FAIL", (f"device memory leak: {leaked} bytes still in use after the "
                                f"test (every cudaMalloc needs its cudaFree, on error paths too)")
            if live_before is not None and (live_after[0] > live_before[0]
                                            or live_after[1] > live_before[1]):
                (s0, e0), (s1, e1) = live_before, live_after
                return "FAIL", (f"streams and events leak: {s1 - s0} stream(s) and {e1 - e0} "
                                f"event(s) more alive after the test than before (every "
                                f"cudaStreamCreate needs its cudaStreamDestroy, every "
                                f"cudaEventCreate its cudaEventDestroy, on error paths too)")
            if test.get("perf"):
                # (fraction of the points, why): a figure at or below the scale's zero fails
                fraction, message = value
                ctx.perf_fraction = min(1.0, max(0.0, float(fraction)))
                note(message)   # make check's table shows a passing row's notes, not its message
                return ("PASS" if ctx.perf_fraction > 0 else "FAIL"), message
            return "PASS", ""
        except Exception as e:
            root = _first_failure(e)
            if isinstance(root, ExerciseNotDone):
                return "NOT DONE", str(root)
            if isinstance(root, Skip):
                return "SKIP", str(root)
            if isinstance(root, (AssertionError, CudaError, LibraryError)):
                return "FAIL", f"{type(root).__name__}: {root}"
            # a bug in the test or the driver, or a Python exception the C code caused: its
            # stack without the harness's own frames (the runner's, make check's)
            tb = traceback.TracebackException.from_exception(e)
            tb.stack = traceback.StackSummary.from_list(
                [f for f in tb.stack if not _harness_frame(f.filename)])
            return "ERROR", "".join(tb.format()).rstrip()

    def _result(self, test, which_backend, seed, started, status, message, todo=None, **extra):
        r = {"id": test["id"], "title": test["title"], "exercise": test["exercise"],
             "status": status, "message": message, "seed": seed,
             "seconds": round(time.perf_counter() - started, 3),
             "backend": which_backend, "tree": tree(),
             "order": os.environ.get("CUEMU_ORDER", "forward") if which_backend == "cpu" else ""}
        if todo:
            r["todo"] = todo
        r.update({k: v for k, v in extra.items() if v not in (None, "", [], 0)})
        if test.get("part_of"):
            r.update(part_of=test["part_of"], points=test["points"], hidden=True)
        if test.get("perf"):   # the course's own test, shown to the student: not a hidden one
            r.update(hidden=False, perf=test["perf"])
        return r

    def main(self, bench=None, demo=None, warm_up=None, argv=None):
        """Parse the command line and run. warm_up(lib), if given, runs once before the tests:
        for what CUDA allocates on the device the first time a process uses it (cuBLAS's
        kernels, a stream's resources), which the leak check would otherwise blame on the first
        test that happens to use it."""
        p = argparse.ArgumentParser(
            description=f"Chapter {self.number} {self.name}: run, check or benchmark.",
            epilog="Backend and tree come from TUT_BACKEND (gpu|cpu) and TUT_TREE "
                   "(chapters|solutions); `make check` sets both.")
        p.add_argument("--check", action="store_true", help="run the tests (default: all)")
        p.add_argument("--only", metavar="ID[,ID]", help="only these test ids, e.g. 01.2")
        p.add_argument("--list", action="store_true", help="print the test ids and exit")
        p.add_argument("--describe", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--bench", action="store_true", help="measure, next to the ceilings")
        # TUT_SEED: a grader's seed, kept off the command line (which every user can read)
        p.add_argument("--seed", type=int, default=os.environ.get("TUT_SEED") or None,
                       help="seed for the random inputs (default: fresh)")
        p.add_argument("--json", metavar="FILE", help="write the results as JSON (graders)")
        p.add_argument("--expect-fail", action="store_true",
                       help="maintainers: pass only if every exercise FAILS (unsolved stubs)")
        args = p.parse_args(argv)
        capture.enable_crash_reports()
        try:
            self.load_hidden()
        except Exception:   # the instructor's file: show everything
            print("ERROR: could not load the hidden tests:\n" + traceback.format_exc(),
                  file=sys.stderr)
            return EXIT_FAIL
        if args.list:
            for t in self.tests:
                print(t["id"])
            return EXIT_PASS
        if args.describe:   # for tools/grade.py
            print(json.dumps([{"id": t["id"], "title": t["title"], "exercise": t["exercise"],
                               "part_of": t.get("part_of"), "points": t.get("points"),
                               "perf": t.get("perf")}
                              for t in self.tests]))
            return EXIT_PASS
        try:
            lib = load_chapter(self.name)
        except NotBuilt as e:   # never an older library in its place
            print(f"NOT BUILT: {e.error}\n(the compiler's whole output: {e.log_path})",
                  file=sys.stderr)
            where = re.match(r"(\S+:\d+):", e.error or "")
            where = where.group(1) if where else None
            self._write_unrun(args, "NOT BUILT", e.error or "the build failed", backend(),
                              todo=where, build_log=e.log_path, blame=self.exercise_at(where))
            return EXIT_FAIL
        except FileNotFoundError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            self._write_unrun(args, "ERROR", str(e), backend())   # graders see why, per test
            return EXIT_FAIL
        except OSError as e:
            skip = missing_linked_library(e)
            if skip is None:
                raise
            print(f"SKIP: {skip}")
            self._write_unrun(args, "SKIP", skip, backend())
            return EXIT_SKIP
        skip = self._cannot_run(lib)
        if skip:
            print(f"SKIP: {skip}")
            self._write_unrun(args, "SKIP", skip, lib.backend)
            return EXIT_SKIP
        if warm_up is not None and not args.bench:
            warm_up(lib)
        if args.bench:
            if bench is None:
                print("this chapter has no benchmark")
                return EXIT_PASS
            bench(lib)
            print(f"\nNext: make check CH={self.number} (the tests of your exercises)")
            return EXIT_PASS
        if demo is not None and not (args.check or args.only or args.expect_fail):
            demo(lib)
            return EXIT_PASS
        code = self._check(lib, args)
        if not args.json:   # by hand (make run ARGS=--check): what to do next
            print(f"\nNext: " + (f"make check CH={self.number} (every exercise, in a table)"
                                  if code == EXIT_PASS else
                                  f"make check CH={self.number} shows each failure in full; "
                                  f"make hint ID={self.number}.N for an exercise's hint"))
        return code

    def _cannot_run(self, lib):
        try:
            if lib.device_count() > 0:
                return ""
            return "no CUDA device visible (cudaGetDeviceCount() = 0)"
        except CudaError as e:
            if e.name in NO_GPU_ERRORS:
                return (f"no usable GPU here ({e.name}); the cpu backend runs everything: "
                        f"make check BACKEND=cpu")
            raise

    def _selected(self, args):
        wanted = set(args.only.split(",")) if args.only else None
        return [t for t in self.tests if wanted is None or t["id"] in wanted]

    def _write_unrun(self, args, status, message, which_backend, **extra):
        """Results for tests that could not run at all, when --json asks for them."""
        if args.json and not args.bench:
            self._write_json(args.json, [
                self._result(t, which_backend, None, time.perf_counter(), status, message, **extra)
                for t in self._selected(args)])

    @staticmethod
    def _write_json(path, results):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(results, indent=1))

    def _check(self, lib, args):
        tests = self._selected(args)
        if args.only and len(tests) != len(set(args.only.split(","))):
            known = ", ".join(t["id"] for t in self.tests)
            print(f"ERROR: unknown test id in {args.only} (known: {known})", file=sys.stderr)
            return EXIT_FAIL
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
        print(f"chapter {self.number} {self.name}: backend={lib.backend} tree={tree()} "
              f"seed={seed} (rerun with --seed {seed})")
        results = []
        for t in tests:
            output = None
            if args.json:
                stem = Path(args.json).stem   # one test per process under make check
                output = str(Path(args.json).with_name(
                    (stem if stem.endswith(t["id"]) else f"{stem}.{t['id']}") + ".out"))
                # Written first, so that a process that dies in this test (a signal in C, an
                # abort) still leaves a row saying so; the summary adds the crash report.
                crashed = self._result(t, lib.backend, seed, time.perf_counter(), "CRASH",
                                       "the test process died", output_file=output)
                self._write_json(args.json, results + [crashed])
            r = self.run_test(t, lib, seed, run_untouched=args.expect_fail, output=output)
            results.append(r)
            print(f"[{r['status']:>8}] {r['id']:<10} {r['title']}  ({r['seconds']:.2f} s)")
            for line in _row_details(r):
                print("           " + line)
        memory.ballast_between_tests(False, False)
        if args.expect_fail:   # a stub's exercise is meant to fail: record that for graders
            for r in results:   # (a test that could not run here is not expected to fail)
                r["expected_to_fail"] = r["exercise"] and r["status"] != "SKIP"
        if args.json:
            self._write_json(args.json, results)
        return self._exit_code(results, args.expect_fail)

    @staticmethod
    def _exit_code(results, expect_fail):
        if expect_fail:
            # Unsolved stubs: every exercise must fail cleanly (a test that passes on a stub
            # asserts nothing); every non-exercise check must still pass.
            # A test that cannot run here (SKIP) asserts nothing either way: it is not a pass.
            ok = all((r["status"] in ("FAIL", "NOT DONE", "SKIP")) if r["exercise"]
                     else r["status"] in ("PASS", "SKIP") for r in results)
            print("stubs " + ("fail as they must" if ok else "DO NOT all fail: see above"))
            if ok and results and all(r["status"] == "SKIP" for r in results):
                return EXIT_SKIP
            return EXIT_PASS if ok else EXIT_FAIL
        if results and all(r["status"] == "SKIP" for r in results):
            return EXIT_SKIP
        return EXIT_PASS if all(r["status"] in ("PASS", "SKIP") for r in results) else EXIT_FAIL
