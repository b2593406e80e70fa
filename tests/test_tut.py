# SPDX-License-Identifier: MIT
"""Unit tests of the course's own machinery: common/tut.py and tools/exercises.py.
They need no GPU and no chapter library."""
import contextlib
import ctypes
import io
import json
import subprocess
import sys
import tempfile
import os
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "common"))
sys.path.insert(0, str(REPO / "tools"))
import numpy as np  # noqa: E402
import exercises  # noqa: E402
import tut  # noqa: E402


class CheckArray(unittest.TestCase):
    def test_accepts_the_right_array(self):
        a = np.zeros((3, 4), np.float32)
        self.assertIs(tut.check_array(a, np.float32, "a", ndim=2, shape=(3, 4)), a)

    def test_refuses_what_ctypes_would_pass_wrongly(self):
        a = np.zeros((4, 6), np.float32)
        cases = [(a.astype(np.float64), TypeError, "dtype float32"),
                 (a.tolist(), TypeError, "numpy.ndarray"),
                 (np.zeros((4, 12), np.float32)[:, ::2], ValueError, "C-contiguous"),
                 (a.T, ValueError, "shape"),
                 (a.ravel(), ValueError, "dimension")]
        for bad, exc, words in cases:
            with self.assertRaises(exc) as cm:
                tut.check_array(bad, np.float32, "a", ndim=2, shape=(4, 6))
            self.assertIn(words, str(cm.exception))

    def test_counts(self):
        self.assertEqual(tut.check_count(np.int64(5)), 5)
        for bad, exc in ((-1, ValueError), (2**31, ValueError), (1.5, TypeError),
                         (True, TypeError), ("3", TypeError)):
            with self.assertRaises(exc):
                tut.check_count(bad)


class Compare(unittest.TestCase):
    def test_close_passes_within_tolerance(self):
        tut.assert_close(np.float32([1, 2, 3]), [1, 2, 3 + 1e-7], rtol=1e-6)

    def test_reports_index_got_want_and_poison(self):
        got = tut.poisoned(5, np.float32)
        got[:3] = [1, 2, 3]
        got[1] = 7
        with self.assertRaises(AssertionError) as cm:
            tut.assert_close(got, np.arange(1, 6), name="c")
        text = str(cm.exception)
        self.assertIn("3 of 5 elements wrong", text)
        self.assertIn("[1]: got 7.0, want 2.0", text)
        self.assertIn("never written", text)

    def test_scale_shift_by_chunks_is_assert_close_of_the_whole_reference(self):
        x = tut.random_f32(np.random.default_rng(3), 3 * (1 << 16) + 5)   # chunks and a tail
        a, b = np.float32(1.5), np.float32(-0.25)
        got = (x.astype(np.float64) * a + b).astype(np.float32)
        tut.assert_scale_shift(got, x, a, b, name="s")
        for i in (0, 1 << 16, x.size - 1):   # a chunk's first element, the tail's last
            bad = got.copy()
            bad[i] += 1.0
            with self.assertRaises(AssertionError) as cm:
                tut.assert_scale_shift(bad, x, a, b, name="s")
            self.assertIn(f"[{i}]: got", str(cm.exception))
        with self.assertRaises(AssertionError):
            tut.assert_scale_shift(got[:-1], x, a, b)

    def test_nan_is_never_close(self):
        with self.assertRaises(AssertionError):
            tut.assert_close(np.float32([np.nan]), [np.nan])

    def test_shape_mismatch(self):
        with self.assertRaises(AssertionError):
            tut.assert_equal(np.zeros((2, 3)), np.zeros((3, 2)))

    def test_2d_indices(self):
        with self.assertRaises(AssertionError) as cm:
            tut.assert_equal(np.int32([[1, 2], [3, 4]]), [[1, 2], [3, 5]])
        self.assertIn("(1, 1): got 4, want 5", str(cm.exception))


class CompilerErrors(unittest.TestCase):
    """A declaration jumped over by CUDA_CHECK's hidden goto is named at the declaration's line,
    from clang's note and from nvcc's "declared at line N" (with or without a file)."""

    def test_the_declaration_line_is_named(self):
        from tut.library import first_compiler_error
        logs = {
            "clang": ("ch/x.cu:193:5: error: cannot jump from this goto statement to its label\n"
                      "ch/x.cu:194:12: note: jump bypasses variable initialization\n"),
            "nvcc 13": ("ch/x.cu(193): error: transfer of control bypasses initialization of:\n"
                        "            variable \"bytes\" (declared at line 194)\n"),
            "nvcc, another file": ("ch/x.cu(193): error: transfer of control bypasses "
                                   "initialization of:\n            variable \"bytes\" "
                                   "(declared at line 194 of \"ch/x.cu\")\n"),
        }
        for compiler, log in logs.items():
            with self.subTest(compiler):
                msg = first_compiler_error(log)
                self.assertTrue(msg.startswith("ch/x.cu:194: a declaration with a value after a "
                                               "CUDA_CHECK: the CUDA_CHECK at line 193"), msg)
        self.assertEqual(first_compiler_error("ch/x.cu(7): error: expected a \";\"\n"),
                         'ch/x.cu:7: expected a ";"')


class Owners(unittest.TestCase):
    """tut.Owner / tut.Handle: the one release mechanism of chapters 02, 03 and 07."""

    def make(self, cls=tut.Owner):
        released = []

        class Thing(cls):
            kind = "Thing"

        t = Thing()
        if cls is tut.Handle:
            t._own_handle(7, released.append)
        else:
            t._own(released.append, 7)
        return t, released

    def test_released_once_whatever_the_path(self):
        t, released = self.make()
        with t:
            self.assertTrue(t.alive)
        self.assertEqual(released, [7])
        t.close()                                   # quiet when done already
        with self.assertRaisesRegex(ValueError, "Thing freed twice"):
            t._release_once("freed")
        self.assertEqual(released, [7])
        t, released = self.make()
        del t                                       # the garbage collector's turn
        self.assertEqual(released, [7])

    def test_a_dead_handle_never_reaches_c(self):
        h, released = self.make(tut.Handle)
        self.assertEqual(h._live("run"), 7)
        h.close()
        self.assertEqual(released, [7])
        with self.assertRaisesRegex(ValueError, "Thing used after close\\(\\): cannot run"):
            h._live("run")


def missing_dependency(t, name):
    """A GPU solutions library t/gpu/solutions/NAME built against libtutdep.so.12, which is
    then removed: what a library built with another toolkit (CUDA 12's cuBLAS) meets."""
    (t / "dep.c").write_text("int dep_value(void) { return 7; }\n")
    (t / "lib.c").write_text("int dep_value(void);\nint value(void) { return dep_value(); }\n")
    lib = t / "gpu" / "solutions" / name
    lib.parent.mkdir(parents=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(t / "libtutdep.so.12"),
                    "-Wl,-soname,libtutdep.so.12", str(t / "dep.c")], check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(t / "lib.c"),
                    str(t / "libtutdep.so.12")], check=True)
    (t / "libtutdep.so.12").unlink()   # built against it, now missing


class Harness(unittest.TestCase):
    def results(self, statuses):
        return [{"exercise": ex, "status": s} for ex, s in statuses]

    def test_exit_codes(self):
        code = tut.Chapter._exit_code
        self.assertEqual(code(self.results([(True, "PASS"), (False, "PASS")]), False), 0)
        self.assertEqual(code(self.results([(True, "NOT DONE")]), False), 1)
        self.assertEqual(code(self.results([(True, "SKIP")]), False), 77)

    def test_expect_fail_needs_every_exercise_failing(self):
        code = tut.Chapter._exit_code
        self.assertEqual(code(self.results([(True, "FAIL"), (True, "NOT DONE"),
                                            (False, "PASS")]), True), 0)
        self.assertEqual(code(self.results([(True, "FAIL"), (True, "PASS")]), True), 1)
        self.assertEqual(code(self.results([(True, "ERROR")]), True), 1)
        self.assertEqual(code(self.results([(True, "FAIL"), (False, "FAIL")]), True), 1)

    def test_the_first_failure_is_reported(self):
        def test(ctx):
            try:
                raise tut.CudaError(700, "cudaErrorIllegalAddress", "in the kernel")
            finally:   # cleanup that fails again, as every call does after a kernel fault
                raise tut.CudaError(700, "cudaErrorIllegalAddress", "in cudaFree")
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "t")(test)
        lib = type("Lib", (), {"backend": "cpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0,
                               "diagnostic": lambda self: ""})()
        r = ch.run_test(ch.tests[0], lib, seed=1)
        self.assertEqual(r["status"], "FAIL")
        self.assertIn("in the kernel", r["message"])
        self.assertNotIn("in cudaFree", r["message"])

    def test_a_check_too_slow_for_the_loop_is_a_skip_that_says_so_only_when_quick(self):
        ran = []
        ch = tut.Chapter(8, "08_x")
        ch.check("lib", "a library", full="it imports a library")(lambda ctx: ran.append(1))
        gpu = type("Lib", (), {"backend": "gpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0, "diagnostic": lambda self: ""})()
        cpu = type("Lib", (), {"backend": "cpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0, "diagnostic": lambda self: ""})()
        saved = os.environ.get("TUT_FULL")
        try:
            os.environ["TUT_FULL"] = "0"    # make check
            r = ch.run_test(ch.tests[0], gpu, seed=1)
            self.assertEqual((r["status"], ran), ("SKIP", []))
            self.assertIn("it imports a library", r["message"])
            self.assertIn("make check FULL=1", r["message"])
            self.assertEqual(ch.run_test(ch.tests[0], cpu, seed=1)["status"], "PASS")
            for full in ("1", None):        # make check FULL=1; make test, grading, by hand
                ran.clear()
                if full is None:
                    del os.environ["TUT_FULL"]
                else:
                    os.environ["TUT_FULL"] = full
                self.assertEqual((ch.run_test(ch.tests[0], gpu, seed=1)["status"], ran),
                                 ("PASS", [1]))
        finally:
            if saved is None:
                os.environ.pop("TUT_FULL", None)
            else:
                os.environ["TUT_FULL"] = saved

    def test_a_quick_check_on_a_gpu_leaves_the_large_sizes_out_and_says_so(self):
        seen = []
        ch = tut.Chapter(1, "01_x")
        ch.exercise(1, "t")(lambda ctx: seen.append((ctx.large, ctx.sizes()[-1])))
        ch.exercise(2, "u")(lambda ctx: None)   # never asks: nothing left out
        libs = {b: type("Lib", (), {"backend": b, "mem_used": lambda self: 0,
                                    "synchronize": lambda self: 0,
                                    "diagnostic": lambda self: ""})() for b in ("gpu", "cpu")}
        saved = os.environ.get("TUT_FULL")
        try:
            os.environ["TUT_FULL"] = "0"    # make check
            quick = ch.run_test(ch.tests[0], libs["gpu"], seed=1)
            self.assertEqual((quick["status"], quick.get("left_out")), ("PASS", "large sizes"))
            self.assertNotIn("left_out", ch.run_test(ch.tests[1], libs["gpu"], seed=1))
            cpu = ch.run_test(ch.tests[0], libs["cpu"], seed=1)   # never large there
            self.assertNotIn("left_out", cpu)
            os.environ["TUT_FULL"] = "1"    # make check FULL=1
            self.assertNotIn("left_out", ch.run_test(ch.tests[0], libs["gpu"], seed=1))
            self.assertEqual(seen, [(False, 999_983), (False, 999_983), (True, (1 << 22) + 7)])
        finally:
            if saved is None:
                os.environ.pop("TUT_FULL", None)
            else:
                os.environ["TUT_FULL"] = saved
        import summary
        text = "\n".join(summary.closing_line([("01.1", quick)]))
        self.assertIn("quick check on a GPU: 01.1 ran without the large sizes", text)
        self.assertIn("make check FULL=1", text)

    def test_check_phases_times_each_phase_and_test(self):
        build = Path(os.environ.get("TUT_BUILD", REPO / "build"))
        lib = build / "cpu" / "solutions" / "lib00_device_query.so"
        if not lib.exists():
            self.skipTest(f"{lib} is not built")
        r = subprocess.run([sys.executable, str(REPO / "tools" / "check_phases.py"), "00",
                            "--profile", "00.1"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TUT_BACKEND="cpu",
                                    TUT_BUILD=str(build)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"00_device_query: [\d.]+ s in all: numpy [\d.]+, ")
        self.assertRegex(r.stdout, r"00\.1 +[\d.]+ s  PASS")
        self.assertIn("profile of 00.1:", r.stdout)

    def test_a_chapters_own_error_is_a_failure(self):
        def test(ctx):
            raise tut.LibraryError(-103, "TPOOL_ERR_DOUBLE_FREE", "already free", "x.cu:9")
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "t")(test)
        lib = type("Lib", (), {"backend": "cpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0,
                               "diagnostic": lambda self: ""})()
        r = ch.run_test(ch.tests[0], lib, seed=1)
        self.assertEqual(r["status"], "FAIL")
        self.assertIn("TPOOL_ERR_DOUBLE_FREE", r["message"])

    def test_streams_and_events_left_alive_fail_the_test(self):
        live = {"objects": (2, 5)}   # what the emulator counts: (streams, events)

        def leaky(ctx):
            live["objects"] = (2, 6)   # an event created, never destroyed
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "t")(leaky)
        ch.exercise(2, "u")(lambda ctx: None)
        lib = type("Lib", (), {"backend": "cpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0,
                               "live_objects": lambda self: live["objects"]})()
        r = ch.run_test(ch.tests[0], lib, seed=1)
        self.assertEqual(r["status"], "FAIL")
        self.assertIn("0 stream(s) and 1 event(s) more alive", r["message"])
        self.assertEqual(ch.run_test(ch.tests[1], lib, seed=1)["status"], "PASS")
        gpu = type("Lib", (), {"backend": "gpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0, "live_objects": lambda self: None})()
        self.assertEqual(ch.run_test(ch.tests[0], gpu, seed=1)["status"], "PASS")

    def test_statuses_below_library_base_raise_library_error(self):
        fake = type("CDLL", (), {
            "tut_last_error_file": lambda self: b"chapters/x/x.cu",
            "tut_last_error_line": lambda self: 12,
            "tut_last_error_name": lambda self: b"TPOOL_ERR_FOREIGN",
            "tut_last_error_message": lambda self: b"x.cu:12: TPOOL_ERR_FOREIGN: not ours.",
            "tut_last_error_expr": lambda self: b"TPOOL_ERR_FOREIGN"})()
        lib = tut.Library.__new__(tut.Library)
        lib.cdll = fake
        e = lib.error(-104)
        self.assertIsInstance(e, tut.LibraryError)
        self.assertEqual((e.code, e.name, e.where),
                         (-104, "TPOOL_ERR_FOREIGN", "chapters/x/x.cu:12"))
        self.assertIsInstance(lib.error(-2), ValueError)

    def test_a_call_the_toolkit_lacks_skips_naming_it(self):
        """Chapter 10 built with CUDA 12.x: TUT_NEEDS_CUDA13 (tut_cuda_compat.h) is a skip with
        the call and the versions, neither a pass nor a failure."""
        text = (b"hopper_memory.cu:269: cudaMemPrefetchBatchAsync -> NeedsNewerCuda: "
                b"needs CUDA 13.0 (built with 12.4)")
        fake = type("CDLL", (), {
            "tut_last_error_file": lambda self: b"solutions/10_x/x.cu",
            "tut_last_error_line": lambda self: 269,
            "tut_last_error_name": lambda self: b"NeedsNewerCuda",
            "tut_last_error_message": lambda self: text,
            "tut_last_error_expr": lambda self: b"cudaMemPrefetchBatchAsync"})()
        lib = tut.Library.__new__(tut.Library)
        lib.cdll = fake
        e = lib.error(tut.TUT_ERR_NEWER_CUDA)
        self.assertIsInstance(e, tut.Skip)
        self.assertNotIsInstance(e, (tut.CudaError, tut.LibraryError))
        self.assertIn("cudaMemPrefetchBatchAsync", str(e))
        self.assertIn("needs CUDA 13.0 (built with 12.4)", str(e))

    def test_a_missing_linked_library_skips_naming_it(self):
        """A chapter library built elsewhere (CUDA 12's cuBLAS) on a machine that lacks one of
        the libraries it links: every test skips, naming the library, and nothing crashes."""
        import os
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            missing_dependency(t, "lib07_x.so")
            ch = tut.Chapter(7, "07_x")
            ch.exercise(1, "t")(lambda ctx: None)
            saved = {k: os.environ.get(k) for k in ("TUT_BUILD", "TUT_BACKEND", "TUT_TREE")}
            os.environ.update(TUT_BUILD=tmp, TUT_BACKEND="gpu", TUT_TREE="solutions")
            out = t / "out.json"
            try:
                with contextlib.redirect_stdout(io.StringIO()) as printed:
                    rc = ch.main(argv=["--check", "--json", str(out)])
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            self.assertEqual(rc, 77)
            self.assertIn("SKIP: libtutdep.so.12, which this build links, is not on this machine",
                          printed.getvalue())
            self.assertEqual([r["status"] for r in json.loads(out.read_text())], ["SKIP"])

    def test_make_check_skips_too_when_a_linked_library_is_missing(self):
        """The same through make check's runner (tools/check.py: a process per test on a GPU),
        which reported every test as a crash with the loader's traceback."""
        import os
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            missing_dependency(t, "lib00_device_query.so")
            env = dict(os.environ, TUT_BUILD=tmp, TUT_BACKEND="gpu")
            subprocess.run([sys.executable, str(REPO / "tools" / "check.py"), "--mode",
                            "solutions", "--chapters", "00_device_query"], env=env,
                           capture_output=True, text=True, timeout=120)
            rows = [json.loads(f.read_text())[0]
                    for f in sorted((t / "results" / "gpu" / "solutions").glob("*.json"))]
            self.assertTrue(rows)
            self.assertEqual({r["status"] for r in rows}, {"SKIP"}, rows)
            self.assertIn("libtutdep.so.12, which this build links", rows[0]["message"])

    def test_ids_are_unique(self):
        ch = tut.Chapter(7, "07_x")
        ch.exercise(1, "a")(lambda ctx: None)
        with self.assertRaises(ValueError):
            ch.exercise(1, "b")(lambda ctx: None)


class FakeGpu:
    """A device for device_ballast as a GPU's driver behaves: 2 MiB pages, cudaMemGetInfo,
    cudaErrorMemoryAllocation when it is full; it counts the allocations the size of a ballast."""
    PAGE, TOTAL = 2 << 20, 1 << 30
    backend = "gpu"

    def __init__(self):
        self.cdll, self.allocs, self.next, self.big = object(), {}, 1 << 32, 0

    def mem_used(self):
        return sum(-(-n // self.PAGE) * self.PAGE for n in self.allocs.values()) + (64 << 20)

    def mem_info(self):
        return self.TOTAL - self.mem_used(), self.TOTAL

    def malloc_raw(self, pp, n):
        if -(-n // self.PAGE) * self.PAGE > self.mem_info()[0]:
            raise tut.CudaError(2, "cudaErrorMemoryAllocation", "out of memory")
        self.next += 1 << 31
        self.allocs[self.next], pp._obj.value = n, self.next
        self.big += n > self.TOTAL // 2

    def free_raw(self, p):
        del self.allocs[p]

    def synchronize(self):
        return 0

    def clear_last_error(self):
        pass


class Ballast(unittest.TestCase):
    """A GPU's ballast is kept from one test that fills the device to the next that does (a
    device-filling cudaMalloc after another's cudaFree waits for the driver), and from no test
    to any other: the leak check still sees every test's own memory."""

    def chapter(self, leak_in=None):
        ch, seen = tut.Chapter(2, "02_x"), {}

        def filling(name):
            def test(ctx):
                with tut.device_ballast(ctx.lib, 20 << 20) as free:
                    seen[name] = free
                    if name == leak_in:
                        ctx.lib.malloc_raw(ctypes.byref(ctypes.c_void_p()), 1 << 20)
            return test

        def plain(ctx):
            seen["plain"] = ctx.lib.mem_info()[0]
        ch.exercise(1, "fills", ballast=True)(filling("1"))
        ch.exercise(2, "fills too", ballast=True)(filling("2"))
        ch.exercise(3, "needs the memory")(plain)
        ch.exercise(4, "fills again", ballast=True)(filling("4"))
        return ch, seen

    def run_all(self, ch, lib):
        return [ch.run_test(t, lib, seed=1) for t in ch.tests]

    def test_kept_between_tests_that_fill_and_freed_before_one_that_does_not(self):
        ch, seen = self.chapter()
        lib = FakeGpu()
        self.assertEqual([r["status"] for r in self.run_all(ch, lib)], ["PASS"] * 4)
        self.assertEqual(lib.big, 2)   # tests 1 and 2 share one; 4 makes its own
        self.assertTrue(all(18 << 20 <= seen[k] <= 22 << 20 for k in "124"), seen)
        self.assertGreater(seen["plain"], FakeGpu.TOTAL // 2)   # test 3 had the device back
        tut.memory.ballast_between_tests(False, False)   # as the harness's loop ends
        self.assertEqual(lib.allocs, {})

    def test_a_leak_beside_a_kept_ballast_is_still_a_leak(self):
        ch, seen = self.chapter(leak_in="2")
        lib = FakeGpu()
        results = self.run_all(ch, lib)
        self.assertEqual([r["status"] for r in results], ["PASS", "FAIL", "PASS", "PASS"])
        # the 1 MiB it kept, as cudaMemGetInfo counts it: one 2 MiB page
        self.assertIn("leak: 2097152 bytes still in use", results[1]["message"])
        tut.memory.ballast_between_tests(False, False)

    def test_never_kept_outside_the_harness(self):
        lib = FakeGpu()
        with tut.device_ballast(lib, 20 << 20):
            pass
        self.assertEqual(lib.allocs, {})


class FirstChild(unittest.TestCase):
    """make check's first test process (common/tut/warm.py), gone before its orders (its
    imports failed): handing it the tests raises, and it is reaped once, not left a zombie."""

    def test_gone_before_its_orders(self):
        from tut import warm
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        os.close(cmd_r)
        os.close(rep_w)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)   # exited, every file released
        first = warm.FirstChild(pid, cmd_w, rep_r)
        run = type("Run", (), {"dir": "x", "results": "y", "only": None, "seed": 1})()
        with self.assertRaises(OSError):
            first.hand_over(run, [])
        first.close()
        first.close()
        with self.assertRaises(ChildProcessError):
            os.waitpid(pid, 0)


class Generator(unittest.TestCase):
    SOLUTION = (
        "int f(void)\n{\n"
        "    int status = 0;\n"
        "    // @solution 07.1: return the answer (~1 line)\n"
        "    return 42;\n"
        "    // @stub TUT_TODO();\n"
        "    // @end\n"
        "cleanup:\n    return status;\n}\n")

    def generate(self, text, chapter="07_x"):
        path = REPO / "solutions" / chapter / "x.cu"   # only the name is used
        return exercises.exercise_text(path, text)

    def test_region_becomes_todo_and_stub(self):
        text, ids = self.generate(self.SOLUTION)
        self.assertEqual(ids, {"07.1"})
        self.assertIn("    // TODO(student) 07.1: return the answer (~1 line)\n    TUT_TODO();\n",
                      text)
        self.assertNotIn("42", text)
        self.assertNotIn("@", text)

    def test_marker_errors(self):
        bad = [self.SOLUTION.replace("    // @end\n", ""),                 # unclosed
               self.SOLUTION.replace("07.1", "08.1"),                      # wrong chapter
               self.SOLUTION.replace(" (~1 line)", ""),                    # no size hint
               "// @end\n"]                                                # stray end
        for text in bad:
            with self.assertRaises(exercises.MarkerError):
                self.generate(text)

    def test_repository_is_up_to_date(self):
        run = subprocess.run([sys.executable, str(REPO / "tools" / "exercises.py"), "--check"],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)

    def test_every_chapter_has_exercises_and_every_stub_a_todo(self):
        for chapter in REPO.glob("solutions/[0-9][0-9]_*"):
            found = set()
            for sol in chapter.glob("*.cu"):   # a chapter may have a file with no exercise
                text, ids = self.generate(sol.read_text(), chapter.name)
                found |= ids
                for ex_id in ids:
                    self.assertIn(f"TODO(student) {ex_id}:", text)
            self.assertTrue(found, f"{chapter.name} has no @solution region")


class Summary(unittest.TestCase):
    def test_reads_json_not_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "01.2.json").write_text(json.dumps([{
                "id": "01.2", "title": "vector add", "exercise": True, "status": "FAIL",
                "message": "AssertionError: wrong", "tree": "chapters"}]))
            run = subprocess.run([sys.executable, str(REPO / "tools" / "summary.py"), d],
                                 capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("01.2", run.stdout)
        self.assertIn("exercises: 0 of 1 passing - next: 01.2", run.stdout)


if __name__ == "__main__":
    unittest.main()
