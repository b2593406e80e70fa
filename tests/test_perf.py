# SPDX-License-Identifier: MIT
"""Performance points (issue 31), without a GPU: the scale from a figure to points, the refusal
of a figure faster than the copy, the timer's procedure (warm-up, L2 flush before every run,
the clock stopped after the synchronisation, medians), the harness's verdict, grade.py's
arithmetic, and chapter 01's saxpy_performance on the emulator with a planted clock: an honest
kernel earns the fraction its planted speed gives, a library that skips calls or does one
launch for several scores 0 whatever the clock says.

Run: cd tests && TUT_BACKEND=cpu python3 -m unittest -v test_perf  (make test: unit/perf)
"""
import importlib.util
import os
import sys
import unittest
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "common"))
sys.path.insert(0, str(REPO / "tools"))
import numpy as np  # noqa: E402
import tut  # noqa: E402
import grade  # noqa: E402
import reports  # noqa: E402


class Scale(unittest.TestCase):
    def test_points_from_the_fraction_of_the_ceiling(self):
        f = tut.points_fraction
        self.assertEqual(f(0.70, 0.70, 0.20), 1.0)
        self.assertEqual(f(0.95, 0.70, 0.20), 1.0)
        self.assertEqual(f(0.20, 0.70, 0.20), 0.0)
        self.assertEqual(f(0.05, 0.70, 0.20), 0.0)
        self.assertAlmostEqual(f(0.45, 0.70, 0.20), 0.5)
        self.assertAlmostEqual(f(0.30, 0.70, 0.20), 0.2)
        self.assertEqual(f(float("nan"), 0.70, 0.20), 0.0)
        for zero, full in ((0.7, 0.7), (0.8, 0.7), (-0.1, 0.5)):
            with self.assertRaises(ValueError):
                f(0.5, full, zero)

    def test_a_figure_faster_than_the_copy_is_refused(self):
        frac, msg = tut.performance_points("k", 450.0, 1000.0, 0.70, 0.20)
        self.assertAlmostEqual(frac, 0.5)
        self.assertIn("45.0% of the device-to-device copy", msg)
        frac, _ = tut.performance_points("k", 1000.0 * tut.REFUSE_ABOVE, 1000.0, 0.70, 0.20)
        self.assertEqual(frac, 1.0)   # at the margin: still believed
        for gbps in (1000.0 * tut.REFUSE_ABOVE * 1.01, 2000.0, float("inf"), float("nan")):
            with self.assertRaisesRegex(AssertionError, "refused"):
                tut.performance_points("k", gbps, 1000.0, 0.70, 0.20)
        with self.assertRaisesRegex(AssertionError, "copy ceiling"):
            tut.performance_points("k", 10.0, 0.0, 0.70, 0.20)


class Clock:
    """A planted wall clock: time moves only when a planted call says so."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def __call__(self):
        self.log.append("clock")
        return self.now


class Timer(unittest.TestCase):
    def test_warm_up_flush_sync_and_median(self):
        clock = Clock()
        calls = {"a": 0}

        def a():   # 1 ms a call, and one run of 7 slowed by a neighbour: the median ignores it
            calls["a"] += 1
            clock.log.append("a")
            clock.now += 0.001

        def b():
            clock.log.append("b")
            clock.now += 0.004

        def flush():
            clock.log.append("flush")

        def sync():
            clock.log.append("sync")
            # the device finishes late once (the 4th timed run of a): counted in that run
            if calls["a"] == 3 + 2 * 10:
                clock.now += 0.05

        per_call, reps = tut.measure_calls([("a", a), ("b", b)], sync, flush, runs=7,
                                           min_seconds=0.01, clock=clock)
        self.assertEqual(reps, {"a": 10, "b": 3})   # min_seconds / the calibration call
        self.assertAlmostEqual(per_call["a"], 0.001)
        self.assertAlmostEqual(per_call["b"], 0.004)
        # every call made: calibration, the warm-up run (not counted) and 7 timed runs
        self.assertEqual(calls["a"], 1 + 10 * 8)
        # each run: flush, sync, clock, the calls, sync, clock (the clock after the sync)
        log = clock.log[12:]   # after the two calibration calls
        first = ["flush", "sync", "clock"] + ["a"] * 10 + ["sync", "clock"]
        self.assertEqual(log[:len(first)], first)
        self.assertEqual(log.count("flush"), 2 * 8)

    def test_a_call_too_slow_to_time_fails_at_once(self):
        clock, n = Clock(), {"k": 0}

        def k():
            n["k"] += 1
            clock.now += 2.0

        with self.assertRaisesRegex(AssertionError, "one call took 2.00 s"):
            tut.measure_calls([("k", k)], lambda: None, lambda: None, clock=clock,
                              too_slow=1.0)
        self.assertEqual(n["k"], 1)

    def test_fewer_than_five_runs_refused(self):
        with self.assertRaises(ValueError):
            tut.measure_calls([("a", lambda: None)], lambda: None, lambda: None, runs=4)

    def test_the_slow_calibration_call_cannot_lengthen_the_figure(self):
        # a first call 100x slower than the rest only shortens the runs (3 calls at least)
        clock, n = Clock(), {"k": 0}

        def k():
            n["k"] += 1
            clock.now += 1.0 if n["k"] == 1 else 0.001

        per_call, reps = tut.measure_calls([("k", k)], lambda: None, lambda: None,
                                           min_seconds=0.02, clock=clock)
        self.assertEqual(reps["k"], 3)
        self.assertAlmostEqual(per_call["k"], 0.001)


def fake_lib(which_backend):
    return type("Lib", (), {"backend": which_backend, "mem_used": lambda self: 0,
                            "synchronize": lambda self: 0, "diagnostic": lambda self: ""})()


class Harness(unittest.TestCase):
    """Chapter.performance: the row a performance test gives, and when it is not timed."""

    def chapter(self, result):
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "t")(lambda ctx: None)

        @ch.performance("07.1", "speed", "fast", points=2, full=0.7, zero=0.2)
        def speed(ctx):
            if isinstance(result, Exception):
                raise result
            return result
        return ch, ch.tests[-1]

    def run_one(self, result, which_backend="gpu", perf="1"):
        ch, test = self.chapter(result)
        with mock.patch.dict(os.environ, {"TUT_PERF": perf}):
            with mock.patch.object(tut.runner, "tree", lambda: "solutions"):
                return ch.run_test(test, fake_lib(which_backend), seed=1)

    def test_a_fraction_is_a_pass_with_its_fraction(self):
        r = self.run_one((0.5, "saxpy: 45% of the copy"))
        self.assertEqual((r["status"], r["fraction"], r["id"]), ("PASS", 0.5, "07.1+speed"))
        self.assertEqual(r["perf"], {"full": 0.7, "zero": 0.2})
        self.assertIn("45% of the copy", r["message"])
        self.assertIn("saxpy: 45% of the copy", r["notes"])   # make check shows a pass's notes
        self.assertFalse(r["hidden"])
        self.assertEqual(self.run_one((7.0, "x"))["fraction"], 1.0)   # never above all

    def test_nothing_earned_is_a_failure(self):
        for result in ((0.0, "too slow"), AssertionError("refused: faster than the copy")):
            r = self.run_one(result)
            self.assertEqual(r["status"], "FAIL")
            self.assertNotIn("fraction", r)

    def test_skipped_on_the_cpu_and_outside_grading(self):
        r = self.run_one((1.0, "x"), which_backend="cpu")
        self.assertEqual(r["status"], "SKIP")
        self.assertIn("BACKEND=gpu", r["message"])
        r = self.run_one((1.0, "x"), perf="0")
        self.assertEqual(r["status"], "SKIP")
        self.assertIn("make grade BACKEND=gpu", r["message"])

    def test_registration_is_checked(self):
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "t")(lambda ctx: None)
        for kw in ({"full": 0.2, "zero": 0.7}, {"full": 0.7, "zero": 0.2, "points": -1}):
            with self.assertRaises(ValueError):
                ch.performance("07.1", "s", "t", **dict({"points": 1}, **kw))(lambda c: None)
        with self.assertRaises(ValueError):
            ch.performance("07.9", "s", "t", points=1, full=0.7, zero=0.2)


class GradeArithmetic(unittest.TestCase):
    """tools/grade.py: the points of a row, from what the checker wrote."""

    def test_points_of_a_performance_row(self):
        perf = {"max": 2, "perf": {"full": 0.7, "zero": 0.2}}
        self.assertEqual(grade.earned(perf, {"status": "PASS", "fraction": 0.5}), 1.0)
        self.assertEqual(grade.earned(perf, {"status": "PASS", "fraction": 0.333333}), 0.67)
        self.assertEqual(grade.earned(perf, {"status": "PASS", "fraction": 3.0}), 2)
        for bad in ({"status": "PASS"}, {"status": "PASS", "fraction": "1"},
                    {"status": "PASS", "fraction": float("nan")},
                    {"status": "PASS", "fraction": True},
                    {"status": "FAIL", "fraction": 1.0}, {"status": "SKIP", "fraction": 1.0}):
            self.assertEqual(grade.earned(perf, bad), 0, bad)

    def test_a_fraction_on_another_row_changes_nothing(self):
        plain = {"max": 2}
        self.assertEqual(grade.earned(plain, {"status": "PASS", "fraction": 0.1}), 2)
        self.assertEqual(grade.earned(plain, {"status": "FAIL", "fraction": 1.0}), 0)

    def test_feedback_shows_a_performance_rows_figure(self):
        result = {"student": "s", "score": 1.0, "max_score": 2, "chapters": ["01"],
                  "backend": "gpu", "seed": 1, "graded": "now", "notes": [], "seconds": 1,
                  "tests": [{"id": "01.5+speed", "exercise": "01.5", "title": "speed",
                             "score": 1.0, "max": 2, "status": "PASS", "hidden": False,
                             "visibility": "visible", "perf": {"full": 0.7, "zero": 0.2},
                             "message": "saxpy: 45.0% of the copy"}]}
        self.assertIn("45.0% of the copy", reports.feedback(result))
        self.assertIn("45.0% of the copy",
                      reports.gradescope(result)["tests"][0]["output"])


def chapter01():
    spec = importlib.util.spec_from_file_location(
        "driver01", REPO / "chapters" / "01_threads_blocks_grids" / "driver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PlantedLib:
    """Chapter 01's emulator library whose device-to-device copy moves the planted clock."""

    def __init__(self, lib, clock, copy_s):
        self._lib, self._clock, self._copy_s = lib, clock, copy_s

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def bind(self, name, argtypes, **kw):
        fn = self._lib.bind(name, argtypes, **kw)
        if name != "tut_memcpy_dtod":
            return fn

        def copy(*args):
            self._clock.now += self._copy_s
            return fn(*args)
        return copy


@unittest.skipUnless(tut.backend() == "cpu", "the emulator's library (TUT_BACKEND=cpu)")
class Saxpy(unittest.TestCase):
    """Chapter 01's 01.5+speed on the emulator (a small n), its clock planted: the figure is
    the planted one, the verdict on y is the real kernel's."""
    N = 4099

    @classmethod
    def setUpClass(cls):
        cls.driver = chapter01()
        try:
            cls.lib = tut.load_chapter("01_threads_blocks_grids", "solutions")
        except (tut.NotBuilt, FileNotFoundError) as e:
            raise unittest.SkipTest(f"chapter 01's solution library is not built: {e}")

    def measure(self, saxpy_s, make_saxpy=None, copy_s=0.001, lib=None):
        """saxpy_performance with each copy taking copy_s and each saxpy call saxpy_s on the
        planted clock; make_saxpy(real) may put a cheat in the library's place."""
        clock, lib = Clock(), lib or self.lib
        real = self.driver.c_api(lib).saxpy_grid_stride

        def honest(*args):
            clock.now += saxpy_s
            return real(*args)
        saxpy = make_saxpy(real, clock, saxpy_s) if make_saxpy else honest
        rng = np.random.default_rng(7)
        return self.driver.saxpy_performance(PlantedLib(lib, clock, copy_s), rng,
                                             n=self.N, saxpy=saxpy, clock=clock,
                                             flush_bytes=1 << 16)

    def test_the_figure_and_its_points(self):
        # a saxpy call moves 12n bytes, a copy 8n: at 1.5 ms against 1 ms it runs at the copy's
        # rate; at 3.333 ms, 45% of it: half the points
        r = self.measure(0.0015)
        self.assertAlmostEqual(r["gbps"] / r["ceiling"], 1.0)
        self.assertEqual(r["fraction"], 1.0)
        r = self.measure(0.0015 / 0.45)
        self.assertAlmostEqual(r["fraction"], 0.5)
        self.assertIn("45.0% of the device-to-device copy", r["message"])
        self.assertEqual(self.measure(0.0015 / 0.15)["fraction"], 0.0)

    def test_faster_than_the_copy_is_refused(self):
        with self.assertRaisesRegex(AssertionError, "refused"):
            self.measure(0.0015 / 1.5)

    def test_a_library_that_skips_the_kernel_scores_0(self):
        def skip(real, clock, t):
            def call(*args):
                clock.now += t / 100
                return 0
            return call
        with self.assertRaisesRegex(AssertionError, "timed calls of saxpy_grid_stride"):
            self.measure(0.0015, skip)

    def test_one_launch_for_several_calls_scores_0(self):
        # the work of two calls in one launch (a1 + a2 on every second call): y lacks a call's
        # work after every odd count of calls, which the checker's looks at y after each run
        # (whose lengths it varies) and at the end find
        def fold(real, clock, t):
            pending = []

            def call(a, *args):
                clock.now += t / 2
                pending.append(a)
                if len(pending) == 2:
                    real(sum(pending), *args)
                    pending.clear()
                return 0
            return call
        with self.assertRaisesRegex(AssertionError, "timed calls of saxpy_grid_stride"):
            self.measure(0.0015, fold)
        # were y right (the work launched in time from a thread of its own), the clock would
        # show twice a kernel at the copy's rate: refused
        def twice_as_fast(real, clock, t):
            def call(*args):
                clock.now += t / 2
                return real(*args)
            return call
        with self.assertRaisesRegex(AssertionError, "refused"):
            self.measure(0.0015, twice_as_fast)

    def test_work_put_off_to_the_last_call_scores_0(self):
        # a library that knew how many calls the test makes (here: counted in a first, honest
        # measurement with the same seed) and launched one kernel, at the last call, for all of
        # them: y is right at the end; the checker's look at y after each run, outside the
        # clock, finds the work missing
        count = []

        def counting(real, clock, t):
            def call(*args):
                count.append(1)
                clock.now += t
                return real(*args)
            return call
        self.measure(0.0015, counting)

        def at_the_end(real, clock, t):
            pending = []

            def call(a, *args):
                clock.now += t   # (the same calls per run as the honest measurement)
                pending.append(a)
                if len(pending) == len(count):
                    real(sum(pending), *args)
                return 0
            return call
        with self.assertRaisesRegex(AssertionError, "the end of a timed run"):
            self.measure(0.0015, at_the_end)

    def test_the_first_call_only_scores_0(self):
        def once(real, clock, t):
            done = []

            def call(*args):
                clock.now += t
                if not done:
                    done.append(1)
                    return real(*args)
                return 0
            return call
        with self.assertRaisesRegex(AssertionError, "timed calls of saxpy_grid_stride"):
            self.measure(0.0015, once)

    def test_the_stub_fails(self):
        # the unsolved kernel does nothing: y is wrong, whatever the clock
        try:
            stub = tut.load_chapter("01_threads_blocks_grids", "chapters")
        except (tut.NotBuilt, FileNotFoundError) as e:
            self.skipTest(f"chapter 01's stub library is not built: {e}")
        with self.assertRaisesRegex(AssertionError, "timed calls of saxpy_grid_stride"):
            self.measure(0.0015, lib=stub)


if __name__ == "__main__":
    unittest.main()
