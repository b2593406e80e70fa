# SPDX-License-Identifier: MIT
"""`make check` never lies: the mistakes students make, planted in a private copy of the course,
and the table and exit code `make check` gives for each (issue: a stale library was tested after
a compile error, a crash dropped out of the count, the emulator's diagnosis stayed on stderr).

    python3 tests/test_check.py -v        (make test runs it as classroom/Check, CPU backend)

The copy (build/check-tests/tree) takes the sources from this tree and the emulator's build from
this tree's build/, so only the planted chapter is compiled.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TUT_BUILD", REPO / "build"))
TREE = BUILD / "check-tests" / "tree"
sys.path.insert(0, str(REPO / "tools"))
import scratch_tree  # noqa: E402

# make test runs this on the emulator; on a GPU machine TUT_CHECK_BACKEND=gpu runs it with nvcc
# (what only the emulator can see is skipped there)
BACKEND = os.environ.get("TUT_CHECK_BACKEND", "cpu")
CH01, CU01 = "01_threads_blocks_grids", "threads_blocks_grids.cu"
CH05, CU05 = "05_unified_memory", "unified_memory.cu"


class Check(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        scratch_tree.make_copy(TREE, BUILD)
        cls.python = sys.executable

    def setUp(self):
        for ch, cu in ((CH01, CU01), (CH05, CU05)):
            shutil.copy2(REPO / "chapters" / ch / cu, TREE / "chapters" / ch / cu)

    def plant(self, ch, cu, text):
        f = TREE / "chapters" / ch / cu
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
        return f

    def solution(self, ch, cu):
        return (REPO / "solutions" / ch / cu).read_text()

    def check(self, *args, cwd=None):
        r = subprocess.run(["make", "--no-print-directory", "check", f"BACKEND={BACKEND}",
                            f"PYTHON={self.python}", *args], cwd=cwd or TREE,
                           capture_output=True, text=True, timeout=600,
                           env=scratch_tree.make_env())
        return r.returncode, r.stdout + r.stderr

    def row(self, out, test_id):
        """The row of test_id and the lines under it."""
        lines = out.splitlines()
        for i, line in enumerate(lines):
            if re.match(rf"{re.escape(test_id)}\s", line):
                j = i + 1
                while j < len(lines) and lines[j].startswith(" "):
                    j += 1
                return "\n".join(lines[i:j])
        self.fail(f"no row {test_id} in:\n{out}")

    def test_a_compile_error_is_not_built_never_an_older_library(self):
        self.plant(CH01, CU01, self.solution(CH01, CU01))
        rc, out = self.check("CH=01")
        self.assertEqual(rc, 0, out)
        self.assertIn("exercises: 5 of 5 passing", out)
        # the same file with one line broken: the library that passed must not be tested
        text = self.solution(CH01, CU01).replace(
            "return (int)(((long long)n + block - 1) / block);",
            "return (int)(((long long)n + block - 1) / block)")
        line = text.splitlines().index("    return (int)(((long long)n + block - 1) / block)") + 1
        self.plant(CH01, CU01, text)
        rc, out = self.check("CH=01")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("not built", self.row(out, "01.3"))
        # clang names the line of the missing ';', nvcc where it noticed (the next token's)
        at = str(line) if BACKEND == "cpu" else r"\d+"
        # on the row of the exercise whose lines fail (01.3), not the chapter's first row
        self.assertRegex(self.row(out, "01.3"), rf"chapters/{CH01}/{CU01}:{at}: ")
        self.assertNotRegex(self.row(out, "01.1"), rf"{CU01}:\d+")
        self.assertRegex(out, rf"next: 01.3 at chapters/{CH01}/{CU01}:{at}")
        self.assertNotIn("make: ***", out)   # the table said it; make's own line is noise
        self.assertIn("exercises: 0 of 5 passing", out)
        self.assertNotIn(" pass ", self.row(out, "01.1"))
        self.assertNotIn("clang++", out)   # quiet: no command lines
        self.assertNotIn("nvcc -", out)
        self.assertNotIn("warning", out)

    def test_a_host_crash_is_a_counted_failure_with_its_line(self):
        text = self.solution(CH01, CU01).replace(
            "    return (int)(((long long)n + block - 1) / block);",
            "    if (n % 2 == 1) *(volatile int *)0 = n;   /* the planted crash */\n"
            "    return (int)(((long long)n + block - 1) / block);")
        line = next(i for i, s in enumerate(text.splitlines(), 1) if "planted crash" in s)
        self.plant(CH01, CU01, text)
        rc, out = self.check("CH=01")
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "01.3")
        self.assertIn("CRASH", row)
        self.assertIn("SIGSEGV", row)
        self.assertIn(f"chapters/{CH01}/{CU01}:{line}", row)
        self.assertIn("in test_blocks_for", row)   # the Python stack, from faulthandler
        self.assertIn("exercises: 4 of 5 passing", out)
        self.assertIn("1 crashed", out)
        self.assertIn(f"next: 01.3 at chapters/{CH01}/{CU01}:{line}", out)

    def test_a_printf_flood_is_capped_and_said(self):
        # at most 100,000 lines (about 1.2 MB) from each launch, not one per thread: on a GPU
        # 01.2 launches 2^31 threads, and that many printf calls outlast the test's time limit
        text = self.solution(CH01, CU01).replace(
            "        c[i] = a[i] + b[i];",
            "        c[i] = a[i] + b[i];\n    if (i < 100000) printf(\"thread %lld\\n\", i);", 1)
        text = "#include <cstdio>\n" + text   # nvcc wants it for a kernel's printf
        self.plant(CH01, CU01, text)
        rc, out = self.check("CH=01", "TESTS=01.2")
        self.assertEqual(rc, 0, out)
        row = self.row(out, "01.2")
        self.assertRegex(row, r"output: \d+ lines printed; the first 64 KiB kept in \S+, \d+ "
                              r"lines dropped")
        self.assertLess(len(out), 20000)
        self.assertIn(f"kept in build/results/{BACKEND}/student/01.2.out", row)   # named

    def test_a_missing_synchronisation_shows_the_emulators_diagnosis(self):
        if BACKEND != "cpu":
            self.skipTest("on a GPU the early read is a race with no diagnosis")
        text = self.solution(CH05, CU05).replace(
            "    CUDA_CHECK(cudaStreamSynchronize(stream));\n    // @stub", "    // @stub", 1)
        self.plant(CH05, CU05, text)
        rc, out = self.check("CH=05", "TESTS=05.1")
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "05.1")
        self.assertIn("FAIL", row)
        self.assertIn("host read of managed memory", row)
        # the diagnosis first, before the exception of the call that noticed
        self.assertTrue(row.splitlines()[1].strip().startswith("cuemu: "), row)
        self.assertIn(f"chapters/{CH05}/{CU05}:", row)
        self.assertEqual(out.count("host read of managed memory"), 1, out)   # once

    def test_a_32_bit_index_fails_vector_add_near_int_max(self):
        # blockIdx.x * blockDim.x + threadIdx.x passes 2^31 in the grid's last blocks: in an
        # int it turns negative, and `i < n` lets it through (the emulator runs those blocks)
        text = self.solution(CH01, CU01).replace(
            "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n)",
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n)", 1)
        self.assertIn("int i = blockIdx.x", text)
        self.plant(CH01, CU01, text)
        rc, out = self.check("CH=01", "TESTS=01.2")
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "01.2")
        self.assertIn("FAIL", row)
        if BACKEND == "cpu":
            self.assertIn("8 GiB before c", row)
        self.plant(CH01, CU01, self.solution(CH01, CU01))
        rc, out = self.check("CH=01", "TESTS=01.2")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("not run here", out)   # checked on every run, on both backends

    def test_on_a_gpu_a_failure_after_passes_is_judged_first_in_a_fresh_process(self):
        """The gpu's schedule (common/tut/warm.py, _in_turn; TUT_CHECK_IN_TURN=1 gives it here):
        tests share a process (one CUDA context) while they pass; one that fails or crashes
        after others runs again first in a fresh process, and that verdict is its row; the
        tests after it start a fresh process too."""
        text = self.solution(CH01, CU01).replace(
            "    return (int)(((long long)n + block - 1) / block);",
            "    if (n % 2 == 1) *(volatile int *)0 = n;   /* the planted crash */\n"
            "    return (int)(((long long)n + block - 1) / block);").replace(
            "out[i] = in[i] * row_scale[row] + col_shift[col];",
            "out[i] = in[i] * row_scale[row] - col_shift[col];")
        self.plant(CH01, CU01, text)
        env = dict(scratch_tree.make_env(), TUT_CHECK_IN_TURN="1")
        r = subprocess.run(["make", "--no-print-directory", "check", f"BACKEND={BACKEND}",
                            f"PYTHON={self.python}", "CH=01"], cwd=TREE, capture_output=True,
                           text=True, timeout=600, env=env)
        out = r.stdout + r.stderr
        self.assertNotEqual(r.returncode, 0, out)
        self.assertIn("exercises: 3 of 5 passing", out)
        results = TREE / "build" / "results" / BACKEND / "student"
        rows = {i: json.loads((results / f"{i}.json").read_text())[0]
                for i in ("01.1", "01.2", "01.3", "01.4", "01.5", "01.float4-alignment")}
        where = {i: (r["process"]["pid"], r["process"]["tests_before"]) for i, r in rows.items()}
        self.assertEqual([rows[i]["status"] for i in ("01.1", "01.2", "01.3", "01.4", "01.5")],
                         ["PASS", "PASS", "CRASH", "FAIL", "PASS"], out)
        self.assertEqual(where["01.1"][1:], (0,))
        self.assertEqual(where["01.2"], (where["01.1"][0], 1))        # one process while passing
        self.assertEqual(where["01.3"][1], 0)                          # the crash: judged first...
        self.assertNotEqual(where["01.3"][0], where["01.1"][0])        # ...in a process of its own
        self.assertEqual(where["01.4"][1], 0)                          # after a crash: fresh
        self.assertNotIn(where["01.4"][0], (where["01.1"][0], where["01.3"][0]))
        self.assertEqual(where["01.5"][1], 0)                          # after a failure: fresh
        self.assertEqual(where["01.float4-alignment"][0], where["01.5"][0])   # and on
        self.assertGreater(where["01.float4-alignment"][1], 0)
        self.assertTrue(rows["01.3"]["after_other_tests"].startswith("CRASH"), rows["01.3"])
        self.assertNotIn("after_other_tests", rows["01.4"])   # first in its context already

    def test_an_endless_kernel_is_a_timeout_in_seconds_and_its_warning_shows(self):
        text = self.solution(CH01, CU01)
        loop = "i < (size_t)n; i += stride)\n        y[i] = a * x[i] + y[i];"
        self.assertIn(loop, text)
        text = text.replace(loop, loop.replace("i += stride", "i + stride"), 1)
        line = next(i for i, s in enumerate(text.splitlines(), 1) if "; i + stride)" in s)
        self.plant(CH01, CU01, text)
        rc, out = self.check("CH=01", "TESTS=01.5")
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "01.5")
        self.assertIn("TIMEOUT", row)
        self.assertRegex(row, r"stopped after \d+(\.\d+)? s")
        if BACKEND == "cpu":   # the compiler's warning names the bug; the watchdog the loop
            # (clang: "expression result unused"; g++: "for increment expression has no effect")
            self.assertRegex(row, rf"compiler warning: chapters/{CH01}/{CU01}:{line}: "
                                  rf"(expression result unused|for increment expression has no "
                                  rf"effect)")
            if "cuemu: watchdog" in row:   # (a machine too busy to give it 5 s of CPU time
                # before the wall-clock limit stops the test has no watchdog report)
                self.assertIn(f"{CU01}:{line}", row.split("cuemu: watchdog", 1)[1])
        self.assertIn("1 timed out", out)

    def test_a_declaration_jumped_over_by_cuda_check_is_named_at_its_line(self):
        ch, cu = "02_explicit_allocation", "explicit_allocation.cu"
        text = self.solution(ch, cu)
        old = ("    size_t bytes = n * sizeof(float);\n"
               "    CUDA_CHECK(cudaMalloc(&d_x, bytes));")
        self.assertIn(old, text)
        text = text.replace(old, "    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(float)));\n"
                                 "    size_t bytes = n * sizeof(float);", 1)
        line = next(i for i, s in enumerate(text.splitlines(), 1)
                    if s == "    size_t bytes = n * sizeof(float);")
        try:
            self.plant(ch, cu, text)
            rc, out = self.check("CH=02", "TESTS=02.1")
        finally:
            shutil.copy2(REPO / "chapters" / ch / cu, TREE / "chapters" / ch / cu)
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "02.1")
        self.assertIn("not built", row)
        self.assertIn(f"chapters/{ch}/{cu}:{line}: a declaration with a value after a "
                      f"CUDA_CHECK", row)

    def test_advice_over_elements_not_bytes_says_what_was_advised(self):
        if BACKEND != "cpu":
            self.skipTest("the advice is read back on the emulator only")
        old = "cudaMemAdvise(table, table_n * sizeof(float), cudaMemAdviseSetReadMostly"
        text = self.solution(CH05, CU05)
        self.assertIn(old, text)
        self.plant(CH05, CU05, text.replace(old, old.replace(" * sizeof(float)", ""), 1))
        rc, out = self.check("CH=05", "TESTS=05.2")
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "05.2")
        self.assertRegex(row, r"the table is (\d+) bytes, and only its first \d+ bytes were "
                              r"advised read-mostly")
        self.assertIn("a count of elements where bytes were meant?", row)

    def test_an_overrun_says_which_buffer_and_how_far(self):
        if BACKEND != "cpu":
            self.skipTest("the emulator's own report")
        ch, cu = "02_explicit_allocation", "explicit_allocation.cu"
        text = self.solution(ch, cu)
        old = "    size_t bytes = n * sizeof(float);\n"
        self.assertIn(old, text)
        text = text.replace(old, "    size_t bytes = n;   /* elements, not bytes */\n", 1)
        line = next(i for i, s in enumerate(text.splitlines(), 1)
                    if "CUDA_CHECK(cudaMalloc(&d_y, bytes));" in s)
        try:
            self.plant(ch, cu, text)
            rc, out = self.check("CH=02", "TESTS=02.1")
        finally:
            shutil.copy2(REPO / "chapters" / ch / cu, TREE / "chapters" / ch / cu)
        self.assertNotEqual(rc, 0, out)
        row = self.row(out, "02.1")
        self.assertRegex(row, rf"write past the end of the allocation made at chapters/{ch}/"
                              rf"{cu}:{line} \(a buffer of \d+ bytes? at \S+\): (the byte right "
                              rf"after its last one|a byte \d+ bytes after its last one) was "
                              rf"changed")

    def test_the_driver_by_hand_ends_with_the_next_command(self):
        # what `make run CH=01 ARGS="--check --only 01.3"` runs, without make's `all`
        self.check("CH=01", "TESTS=01.3")   # builds chapter 01 in the copy
        env = dict(scratch_tree.make_env(), TUT_BACKEND=BACKEND, TUT_BUILD=str(TREE / "build"))
        r = subprocess.run([self.python, str(TREE / "chapters" / CH01 / "driver.py"), "--check",
                            "--only", "01.3"], capture_output=True, text=True, env=env,
                           timeout=600)
        last = (r.stdout.rstrip().splitlines() or [""])[-1]
        self.assertTrue(last.startswith("Next: make check CH=01"),
                        f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")

    def test_a_byte_order_mark_and_crlf_pass(self):
        text = "\ufeff" + self.solution(CH01, CU01).replace("\n", "\r\n")
        self.plant(CH01, CU01, text.encode("utf-8"))
        rc, out = self.check("CH=01")
        self.assertEqual(rc, 0, out)
        self.assertIn("exercises: 5 of 5 passing", out)

    def test_from_a_chapter_folder_and_with_a_short_chapter_number(self):
        rc, out = self.check(cwd=TREE / "chapters" / CH01)
        self.assertNotEqual(rc, 0, out)   # the stubs: nothing passes yet
        self.assertIn("exercises: 0 of 5 passing - next: 01.1 at chapters/", out)
        rc, out = self.check("CH=1", "TESTS=01.1")
        self.assertIn("01.1", out)
        rc, out = self.check("CH=threads")
        self.assertNotEqual(rc, 0)
        self.assertIn("did you mean CH=01?", out)


class ReadingOrder(unittest.TestCase):
    """Exercise ids follow the order a student reads each exercise file in (issue 30: 01.3's
    TODO stood above 01.2's, 06.5's opened chapter 06, 07.4's came before 07.3's; ids are never
    renumbered once published, so the code was moved). A pure text check of chapters/*/*.cu."""

    def todos(self):
        """{exercise file: [(chapter, exercise) of each TODO(student) line, top to bottom]}, every
        chapter checked to have some (a check of nothing would pass)."""
        out, chapters = {}, set()
        for cu in sorted((REPO / "chapters").glob("[0-9][0-9]_*/*.cu")):
            ids = [(int(m[1]), int(m[2])) for m in
                   re.finditer(r"TODO\(student\) (\d\d)\.(\d+):", cu.read_text())]
            if ids:
                out[cu.relative_to(REPO)] = ids
                chapters.add(cu.parent.name)
        self.assertEqual(chapters, {d.name for d in (REPO / "chapters").glob("[0-9][0-9]_*")})
        return out

    def test_each_exercise_begins_after_the_one_before(self):
        for cu, ids in self.todos().items():
            first = list(dict.fromkeys(ids))
            with self.subTest(file=str(cu)):
                self.assertTrue(first == sorted(first), f"{cu}: the first TODO(student) of each "
                                f"exercise, top to bottom: {self.names(first)}")

    def test_no_later_exercise_between_two_parts_of_one(self):
        # a student working on NN.1 never has to read past NN.2's TODO to find the rest of NN.1
        for cu, ids in self.todos().items():
            with self.subTest(file=str(cu)):
                self.assertTrue(ids == sorted(ids), f"{cu}: every TODO(student), top to bottom: "
                                f"{self.names(ids)}")

    @staticmethod
    def names(ids):
        return ", ".join(f"{c:02d}.{e}" for c, e in ids)


class Summary(unittest.TestCase):
    """The table itself, from made-up rows (no build): what a first run and a solved course
    print."""

    def table(self, rows, *args):
        d = BUILD / "check-tests" / "summary"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for r in rows:
            (d / f"{r['id']}.json").write_text(json.dumps([dict(
                {"title": "t", "exercise": True, "tree": "chapters", "message": ""}, **r)]))
        p = subprocess.run([sys.executable, str(REPO / "tools" / "summary.py"), *args, str(d)],
                           capture_output=True, text=True)
        return p.returncode, p.stdout

    def test_a_first_run_is_a_line_per_chapter_then_the_chapter_in_progress(self):
        chapters = len(list((REPO / "chapters").glob("[0-9][0-9]_*")))
        rows = [{"id": f"{c:02d}.{e}", "status": "NOT DONE", "part": "none",
                 "message": "exercise not done yet: TODO(student) at x.cu:1"}
                for c in range(chapters) for e in range(1, 6)]
        rows += [{"id": f"{c:02d}.gpu-only", "status": "SKIP", "exercise": False,
                  "message": "needs a GPU"} for c in range(chapters)]
        rc, out = self.table(rows)
        self.assertEqual(rc, 1)
        self.assertEqual(len(re.findall(r"^\S* ?\s*\d\d_\w+\s+0 of 5 exercises", out, re.M)),
                         chapters, out)
        self.assertIn("00.1", out)
        self.assertNotIn("01.1 ", out)   # other chapters: their line only
        self.assertLess(len(out.splitlines()), 40, out)

    def test_one_missing_stream_argument_is_one_race_report_and_a_count(self):
        race = ("cuemu: stream race on device memory allocated at x.cu:{0} (4096 bytes): a "
                "kernel on stream 1 writes, and a copy on stream 2 reads, with nothing ordering "
                "them")
        rc, out = self.table([{"id": "07.5", "status": "FAIL", "message": "AssertionError: x",
                               "diagnostics": "\n".join(race.format(n) for n in (10, 11, 12))}])
        self.assertEqual(out.count("stream race on device memory"), 1, out)
        self.assertIn("x.cu:10", out)
        self.assertIn("and 2 more stream race reports like the first", out)

    def test_an_error_row_keeps_the_tests_frames_not_the_harness(self):
        sys.path.insert(0, str(REPO / "common"))
        from tut.runner import Chapter

        def a_test_that_breaks(ctx):
            raise KeyError("no such key")

        class Lib:
            def mem_used(self):
                return 0

            def synchronize(self):
                return 0

        status, message = Chapter._call({"fn": a_test_that_breaks}, None, Lib())
        self.assertEqual(status, "ERROR")
        self.assertIn("a_test_that_breaks", message)
        self.assertNotIn("runner.py", message)

    def test_a_solved_course_fits_one_screen(self):
        rows = [{"id": f"{c:02d}.{e}", "status": "PASS", "notes": ["a note"]}
                for c in range(10) for e in range(1, 7)]
        rows += [{"id": f"{c:02d}.check{k}", "status": "PASS", "exercise": False}
                 for c in range(10) for k in range(8)]
        rc, out = self.table(rows)
        self.assertEqual(rc, 0, out)
        self.assertLessEqual(len(out.splitlines()), 24, out)
        self.assertIn("exercises: 60 of 60 passing", out)


if __name__ == "__main__":
    unittest.main()
