# SPDX-License-Identifier: MIT
"""make check's fast path: one warm process per chapter, a forked child per test.

A fresh Python process per test paid for Python, NumPy and the library again for every one of
a chapter's tests (most of `make check`'s time). Here a chapter's process imports its driver
and loads its library once, then forks the tests, so each still runs in a process of its own:
a test that crashes is a CRASH row (its JSON row is written first, as `driver.py --check --json`
does), one that runs past its time is stopped and is a TIMEOUT row, with the seconds, and the
other tests run all the same. The results are the per-test JSON files tools/summary.py reads,
the same as `driver.py --check --only ID --json FILE` writes (which grading and make mutants
still use, unchanged).

- cpu backend: a child per test, as many at a time as there are cores (shared by all chapters
  through a token pipe, as make's jobserver does). The chapter process makes no CUDA call
  before it forks (it only loads the library), so the emulator may start threads lazily. No
  child runs the chapter's warm-up: it is for a GPU driver's memory (see _child).
- gpu backend: CUDA must not be initialised in a process that forks, and the leak check reads
  cudaMemGetInfo, which is device-wide: one child at a time, which loads the library, makes its
  CUDA context and runs the chapter's warm-up once, then the tests in order while they pass.
  A context per test cost more than most tests (0.25 s for cuInit and the context on an H200,
  2 s more for cuBLAS's warm-up in chapter 04: 37 s for its `make check`, 7 s of it tests,
  2026-12-04). A test that does not pass ends its child, since a kernel's fault is sticky and
  would fail every later test; when other tests ran before it in that context, it runs again
  in a fresh one and that verdict is the row: 03.3 and 05.4 saw device memory "leaked" after
  earlier tests that a fresh context does not show (memory the driver keeps per context). So
  every verdict other than a pass comes from a test that ran first in its own context, as in
  `driver.py --check --only ID`; a TIMEOUT is not run again (it would double the wait).
"""
import importlib.util
import json
import os
import re
import select
import signal
import sys
import time
import traceback
from pathlib import Path

from . import capture, paths
from .errors import CudaError, NotBuilt
from .runner import missing_linked_library

# Seconds of CPU time a test may use (the emulator's watchdog stops a kernel sooner, see
# WATCHDOG_S), and of wall time (a test blocked without using the CPU), before it is stopped.
TEST_CPU_S = float(os.environ.get("TUT_TEST_TIMEOUT", 15))
TEST_WALL_S = max(120.0, 8 * TEST_CPU_S)
# The emulator's watchdog (CPU seconds of one launch) under make check: a kernel that never
# ends is stopped after this, with the lines it loops on, as a TIMEOUT row.
WATCHDOG_S = 5


def _cpu_seconds(pid):
    """CPU time (user + system) a process has used so far, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _write_json(path, rows):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(rows, indent=1))
    os.replace(tmp, path)


def import_driver(chapter_dir):
    """The chapter's driver.py as a module (its tests registered on module.CH)."""
    name = f"tut_driver_{chapter_dir.name[:2]}"
    spec = importlib.util.spec_from_file_location(name, chapter_dir / "driver.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ChapterRun:
    """One chapter's tests, in this (forked) process and its children."""

    def __init__(self, chapter_dir, results, tokens=None, only=None, first_child=None):
        self.dir, self.results, self.tokens = Path(chapter_dir), Path(results), tokens
        self.only, self.first_child = only, first_child
        self.backend = paths.backend()
        # the gpu's schedule (_in_turn); TUT_CHECK_IN_TURN=1 gives it on the emulator (tests)
        self.in_turn = self.backend == "gpu" or os.environ.get("TUT_CHECK_IN_TURN") == "1"
        self.seed = int.from_bytes(os.urandom(4), "little")

    def json_path(self, test):
        return self.results / f"{test['id']}.json"

    def out_path(self, test):
        return str(self.results / f"{test['id']}.out")

    def load_driver(self):
        """The chapter's driver: its tests (self.ch) and its warm-up, if it has one."""
        module = import_driver(self.dir)
        self.ch, self.warm_up = module.CH, getattr(module, "warm_up", None)

    def run(self):
        """Run every test of the chapter, writing its rows; returns nothing (the rows say it)."""
        try:
            self.load_driver()
        except Exception:
            _write_json(self.results / f"{self.dir.name}.json", [{
                "id": self.dir.name[:2], "title": f"chapter {self.dir.name}: its driver.py",
                "exercise": False, "status": "ERROR", "seconds": 0, "backend": self.backend,
                "message": "the driver could not be imported:\n" + traceback.format_exc()}])
            return
        warned = self._warnings()
        tests = []
        for t in self.ch.tests:
            if self.only and t["id"] not in self.only:
                continue
            if t["exercise"] and paths.tree() == "chapters":
                where, untouched_all = self.ch.untouched(t)
                if untouched_all:   # not run: no fork for an exercise not started
                    _write_json(self.json_path(t), [self.ch._result(
                        t, self.backend, self.seed, time.perf_counter(), "NOT DONE",
                        f"exercise not done yet: TODO(student) at {where}", todo=where,
                        part="none")])
                    continue
            tests.append(t)
        if not tests:
            return
        self.lib = None
        # faulthandler first: the library's C crash report, installed as it loads, runs before
        # it and hands the signal on (as in driver.py's main)
        capture.enable_crash_reports()
        if not self.in_turn:   # loaded once, before the forks (cpu: no CUDA call is made)
            from .library import load_chapter
            try:
                self.lib = load_chapter(self.ch.name)
            except NotBuilt as e:
                return self._unrun(tests, "NOT BUILT", e.error or "the build failed",
                                   build_log=e.log_path, todo=_place(e.error),
                                   blame=self.ch.exercise_at(_place(e.error)))
            except (FileNotFoundError, OSError) as e:
                return self._unrun(tests, "ERROR", str(e))
        self._parallel(tests)
        self._add_warnings(warned)
        for t in tests:   # a child that died before the test started (in the warm-up?)
            if not self.json_path(t).exists():
                _write_json(self.json_path(t), [self.ch._result(
                    t, self.backend, self.seed, time.perf_counter(), "CRASH",
                    "the test process died before this test started (in the chapter's "
                    "warm-up, or loading the library?)",
                    output_file=str(self.results / f"{self.dir.name}.log"))])

    def _warnings(self):
        """{exercise id or None: [warning lines]} from the compiler's output of the build that
        made this library (lib<chapter>.warnings, make check keeps it), the student's own files
        only: clang's -Wunused-value names a grid-stride loop that never advances."""
        path = paths.library_path(self.ch.name).with_suffix(".warnings")
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return {}
        out, mine = {}, f"{paths.tree()}/{self.ch.name}/"
        for line in text.splitlines():
            m = _WARNING.match(line.strip())
            if not m or not m["file"].replace(str(paths.REPO) + "/", "").startswith(mine):
                continue
            where = f"{m['file'].replace(str(paths.REPO) + '/', '')}:{m['line'] or m['pline']}"
            out.setdefault(self.ch.exercise_at(where), []).append(
                f"compiler warning: {where}: {m['msg'].strip()}")
        return out

    def _add_warnings(self, warned):
        """The warnings as notes on the rows of the exercises whose lines they name (those
        outside any exercise on the chapter's first row)."""
        for ex_id, lines in warned.items():
            target = next((t for t in self.ch.tests if t["id"] == ex_id), None) or (
                self.ch.tests[0] if self.ch.tests else None)
            path = self.json_path(target) if target else None
            try:
                rows = json.loads(path.read_text())
            except (OSError, ValueError, AttributeError):
                continue
            rows[0]["notes"] = lines + rows[0].get("notes", [])
            _write_json(path, rows)

    def _unrun(self, tests, status, message, **extra):
        for t in tests:
            _write_json(self.json_path(t), [self.ch._result(
                t, self.backend, None, time.perf_counter(), status, message, **extra)])

    # -- the child ------------------------------------------------------------------------------
    def _child(self, tests, report_fd):
        """In a forked process: run tests in order, telling the parent 'S i' and 'E i' as each
        starts and ends. Never returns."""
        code = 0
        try:
            # what the child prints outside a test (a traceback) goes to the chapter's log
            log = os.open(self.results / f"{self.dir.name}.log",
                          os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            os.setpgid(0, 0)   # so that a timeout stops what the test started too
            os.environ["CUEMU_WATCHDOG_S"] = os.environ.get("CUEMU_WATCHDOG_S", str(WATCHDOG_S))
            lib = self.lib
            if lib is None:   # gpu (in turn): the library, and CUDA, only here
                from .library import load_chapter
                try:
                    lib = load_chapter(self.ch.name)
                except NotBuilt as e:
                    self._unrun([t for _, t in tests], "NOT BUILT", e.error or "the build "
                                "failed", build_log=e.log_path, todo=_place(e.error),
                                blame=self.ch.exercise_at(_place(e.error)))
                    os._exit(0)
                except OSError as e:   # a library it links is missing: skip, as --check does
                    skip = missing_linked_library(e)
                    if skip is None:
                        raise
                    self._unrun([t for _, t in tests], "SKIP", skip)
                    os._exit(0)
            skip = self.ch._cannot_run(lib)
            if skip:
                self._unrun([t for _, t in tests], "SKIP", skip)
                os._exit(0)
            # The warm-up is for a GPU, whose driver keeps memory per process that the leak
            # check would blame on a test; the emulator keeps none (every test of every
            # chapter, each the first in its process, passed the leak check without it,
            # 2026-12-05), and here each child would pay for it: 0.07 s in chapter 09, 16 times.
            if self.warm_up is not None and lib.backend != "cpu":
                self.warm_up(lib)
            for n, (i, t) in enumerate(tests):
                if n and t.get("own_context"):
                    break   # first in a context of its own: the parent forks the next child
                out = self.out_path(t)
                # written first: a process that dies in this test still leaves a row saying so
                where = {"pid": os.getpid(), "tests_before": n}   # in this process
                _write_json(self.json_path(t), [self.ch._result(
                    t, lib.backend, self.seed, time.perf_counter(), "CRASH",
                    "the test process died", output_file=out, process=where)])
                os.write(report_fd, f"S {i}\n".encode())
                r = self.ch.run_test(t, lib, self.seed, output=out)
                _watchdog_is_timeout(r)
                r["process"] = where
                _write_json(self.json_path(t), [r])   # after an R, the fresh run's row replaces it
                good = r["status"] in _GOOD
                # after other tests in this context: judged again, in a fresh one (the parent)
                os.write(report_fd, f"{'E' if good or not n else 'R'} {i}\n".encode())
                if not good:
                    break   # its fault may be sticky: the next test in a fresh context
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            capture._flush_all()
            os._exit(code)

    def _fork(self, tests):
        first, self.first_child = self.first_child, None
        if first is not None:   # started before NumPy, its CUDA context made meanwhile
            try:
                pid, r = first.hand_over(self, tests)
            except OSError:   # it died before its orders (its imports failed): fork as usual
                first.close()
                first = None
        if first is None:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                self._child(tests, w)
            os.close(w)
        return {"pid": pid, "fd": r, "buf": b"", "tests": tests, "current": None,
                "started": None, "done": set(), "forked": time.monotonic(), "ran": 0,
                "retry": None}

    def _read(self, worker):
        data = os.read(worker["fd"], 4096)
        worker["buf"] += data
        *lines, worker["buf"] = worker["buf"].split(b"\n")
        for line in lines:
            kind, i = line.split()
            if kind == b"S":
                worker["current"], worker["started"] = int(i), time.monotonic()
                worker["cpu0"] = _cpu_seconds(worker["pid"])
                worker["ran"] += 1
            elif kind == b"R":   # to run again in a fresh context (gpu)
                worker["retry"], worker["current"] = int(i), None
            else:
                worker["done"].add(int(i))
                worker["current"] = None
                worker["forked"] = time.monotonic()   # between tests: the idle limit anew
        return bool(data)

    def _over_time(self, worker):
        """Seconds the current test has run, if it is past its limits, else None."""
        if worker["current"] is None:
            # stuck before its test (loading the library, the warm-up): stopped all the same;
            # its test's row then says it died before the test started
            if time.monotonic() - worker["forked"] > TEST_WALL_S:
                try:
                    os.killpg(worker["pid"], signal.SIGKILL)
                except ProcessLookupError:   # not yet its own group
                    os.kill(worker["pid"], signal.SIGKILL)
            return None
        wall = time.monotonic() - worker["started"]
        cpu = _cpu_seconds(worker["pid"]) - worker["cpu0"]
        if cpu > TEST_CPU_S or wall > TEST_WALL_S:
            return wall, cpu
        return None

    def _stop(self, worker, spent):
        """Stop a test past its time: its row becomes TIMEOUT, with the seconds."""
        try:
            os.killpg(worker["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(worker["pid"], 0)
        i = worker["current"]
        t = dict(worker["tests"])[i]
        wall, cpu = spent
        try:
            row = json.loads(self.json_path(t).read_text())[0]
        except (OSError, ValueError, IndexError):
            row = self.ch._result(t, self.backend, self.seed, time.perf_counter(), "TIMEOUT", "")
        row.update(status="TIMEOUT", seconds=round(wall, 2), message=(
            f"stopped after {wall:.1f} s ({cpu:.1f} s of CPU time; the limit is "
            f"{TEST_CPU_S:.0f} s, TUT_TEST_TIMEOUT): a loop that never ends (a spin-wait, a "
            f"condition that never changes, a grid-stride loop whose step is 0?)"))
        text, lines, dropped = capture.read_capped(self.out_path(t))
        row.update({k: v for k, v in (("output", text), ("output_lines", lines),
                                      ("output_dropped", dropped)) if v})
        _write_json(self.json_path(t), [row])
        worker["done"].add(i)
        worker["current"] = None

    def _watch(self, workers, on_exit):
        """Wait for the workers, stopping tests past their time; on_exit(worker) as each ends."""
        while workers:
            ready, _, _ = select.select([w["fd"] for w in workers], [], [], 0.1)
            for w in list(workers):
                ended = False
                if w["fd"] in ready:
                    ended = not self._read(w)
                spent = None if ended else self._over_time(w)
                if spent:
                    self._stop(w, spent)
                    ended = True
                elif ended:
                    os.waitpid(w["pid"], 0)
                if ended:
                    os.close(w["fd"])
                    workers.remove(w)
                    on_exit(w)

    def _in_turn(self, tests):
        """gpu: one child at a time, each running the tests left in order until one does not
        pass (see the module's docstring)."""
        queue, first_verdict = list(enumerate(tests)), {}
        while queue:
            w = self._fork(queue)
            self._watch([w], lambda w: None)
            if not w["ran"]:
                break   # it died before any test: the rows say so (run() writes what is missing)
            died_in = w["current"]   # a test it started and never ended: the process died
            if died_in is not None and w["ran"] > 1:
                w["retry"] = died_in  # after other tests: again, first in a context of its own
            elif died_in is not None:
                w["done"].add(died_in)   # first in its context: its CRASH row stands
            for i in w["done"] & first_verdict.keys():   # judged again: say what it was first
                self._annotate(tests[i], first_verdict.pop(i))
            if w["retry"] is not None:
                first_verdict[w["retry"]] = self._verdict(tests[w["retry"]])
            queue = [(i, t) for i, t in queue if i not in w["done"]]

    def _verdict(self, t):
        try:
            row = json.loads(self.json_path(t).read_text())[0]
        except (OSError, ValueError, IndexError):
            return "CRASH"
        first = ((row.get("message") or "").strip().splitlines() or [""])[0]
        return f"{row['status']}: {first}"

    def _annotate(self, t, verdict):
        """A test judged again in a fresh context keeps, for maintainers, what the shared one
        said (in its JSON row, not in the table)."""
        try:
            rows = json.loads(self.json_path(t).read_text())
        except (OSError, ValueError):
            return
        rows[0]["after_other_tests"] = verdict
        _write_json(self.json_path(t), rows)

    def _parallel(self, tests):
        """A child per test: cpu, one per free token (a core); gpu, see _in_turn."""
        if self.in_turn:
            return self._in_turn(tests)
        queue = list(enumerate(tests))
        workers = []

        def release(w):
            if self.tokens:
                os.write(self.tokens[1], b"+")
            start()

        def start():
            while queue and (_take(self.tokens[0], block=not workers) if self.tokens
                             else not workers):
                workers.append(self._fork([queue.pop(0)]))

        start()
        self._watch(workers, release)


# what lets a gpu child go on to the next test in the same context
_GOOD = ("PASS", "SKIP", "NOT DONE")


def _take(fd, block):
    """A token from the pipe (a core to run on); block only when nothing else is running."""
    if not block and not select.select([fd], [], [], 0)[0]:
        return False
    return os.read(fd, 1) == b"+"


# gcc/clang "file:line:col: warning: ...", nvcc "file(line): warning #N-D: ..."
_WARNING = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?::(?P<line>\d+)(?::\d+)?|\((?P<pline>\d+)\))"
                      r":\s*warning\b[^:]*:\s*(?P<msg>.*)$")


def _place(error):
    m = re.match(r"(\S+:\d+):", error or "")
    return m.group(1) if m else None


def _watchdog_is_timeout(r):
    """The emulator's watchdog stopped a kernel that never ended: that is a TIMEOUT, not a
    FAIL (the row keeps the watchdog's report: the kernel and the lines it looped on)."""
    text = (r.get("message") or "") + "\n" + (r.get("diagnostics") or "")
    if r["status"] == "FAIL" and "watchdog: kernel" in text:
        r["status"] = "TIMEOUT"
        secs = os.environ.get("CUEMU_WATCHDOG_S", str(WATCHDOG_S))
        r["message"] = (f"stopped after {secs} s of CPU time in one kernel launch (the "
                        f"emulator's watchdog, CUEMU_WATCHDOG_S): a loop that never ends?\n"
                        + (r.get("message") or ""))


def run_chapters(chapter_dirs, results, jobs, only=None, first_child=None):
    """Run the chapters' tests; each chapter in a forked process of its own, its rows written
    under results/. cpu: the chapters at once, sharing `jobs` cores; gpu: one after another.
    first_child (gpu, a FirstChild): the first chapter's first test process, started before
    this process imported NumPy; that chapter is then run from this process, its parent."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    gpu = paths.backend() == "gpu"
    tokens = None
    if not gpu:
        tokens = os.pipe()
        os.write(tokens[1], b"+" * max(1, jobs))
    pids = {}
    for n, d in enumerate(chapter_dirs):
        sys.stdout.flush()
        if first_child is not None and n == 0:
            try:
                ChapterRun(d, results, None, only, first_child=first_child).run()
            except Exception:
                traceback.print_exc()
            finally:
                first_child.close()
            continue
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ChapterRun(d, results, tokens, only).run()
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                capture._flush_all()
                os._exit(code)
        pids[pid] = d
        if gpu:   # one chapter at a time: the device's memory is the leak check's
            os.waitpid(pid, 0)
            del pids[pid]
    while pids:
        pid, _ = os.wait()
        pids.pop(pid, None)


class FirstChild:
    """gpu: the first test process of `make check`, forked before the checker imports NumPy
    (tools/check.py, first_child_start): while the checker imports NumPy and the harness and
    the build runs, it imports them too, and a thread of it makes CUDA's start (cuInit and the
    device's primary context, which the runtime then finds made: 0.18 s and 0.15-0.2 s on an
    H200). It then waits for the tests to run (hand_over), and runs them as a forked child
    (ChapterRun._child) does. Its parent is the process that runs the chapter (run_chapters)."""

    def __init__(self, pid, cmd_fd, report_fd):
        self.pid, self.cmd_fd, self.report_fd = pid, cmd_fd, report_fd
        self.handed = False

    def hand_over(self, run, tests):
        """Tell it the chapter and its tests; (pid, the fd its reports come on). OSError when
        it is gone (close() then reaps it)."""
        msg = {"dir": str(run.dir), "results": str(run.results), "only": sorted(run.only or ()),
               "seed": run.seed, "tests": [[i, t["id"]] for i, t in tests]}
        fd, self.cmd_fd = self.cmd_fd, None
        try:
            os.write(fd, json.dumps(msg).encode())
        finally:
            os.close(fd)
        self.handed = True
        return self.pid, self.report_fd

    def close(self):
        """Not handed a test (every exercise not started, a driver that did not import, or it
        died first): it reads the end of its orders and exits; reaped here."""
        if self.handed:
            return
        self.handed = True   # once
        if self.cmd_fd is not None:
            os.close(self.cmd_fd)
            self.cmd_fd = None
        os.close(self.report_fd)
        os.waitpid(self.pid, 0)


def first_child_serve(cmd_fd, report_fd, cuda_start):
    """In the first child, once NumPy and the harness are imported: wait for the orders, then
    run the tests. Never returns."""
    chunks = []
    while True:
        data = os.read(cmd_fd, 65536)
        if not data:
            break
        chunks.append(data)
    os.close(cmd_fd)
    if not chunks:
        os._exit(0)
    msg = json.loads(b"".join(chunks))
    run = ChapterRun(msg["dir"], msg["results"], None, set(msg["only"]) or None)
    run.seed, run.lib = msg["seed"], None
    try:
        run.load_driver()
        by_id = {t["id"]: t for t in run.ch.tests}
        tests = [(i, by_id[tid]) for i, tid in msg["tests"]]
        cuda_start.join()   # CUDA's start, done beside the imports, finished before any call
        capture.enable_crash_reports()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    run._child(tests, report_fd)
