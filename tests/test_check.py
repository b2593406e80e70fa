# SPDX-License-Identifier: MIT
"""`make check` never lies: the mistakes students make, planted in a private copy of the course,
and the table and exit code `make check` gives for each (issue: a stale library was tested after
a compile error, a crash dropped out of the count, the emulator's diagnosis stayed on stderr).

    python3 tests/test_check.py -v        (make test runs it as classroom/Check, CPU backend)

The copy (build/check-tests/tree) takes the sources from this tree and the emulator's build from
this tree's build/, so only the planted chapter is compiled.
"""
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
        self.assertRegex(out, rf"chapters/{CH01}/{CU01}:{at}: ")
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
        self.assertRegex(row, r"output: \d+ lines printed; the first 64 KiB kept, \d+ lines "
                              r"dropped")
        self.assertLess(len(out), 20000)
        if BACKEND == "cpu":   # a GPU runs it
            self.assertIn("01.2 at n = INT_MAX not run here", row)   # a note reaches its row

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
        self.assertIn(f"chapters/{CH05}/{CU05}:", row)
        self.assertEqual(out.count("host read of managed memory"), 1, out)   # once

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


if __name__ == "__main__":
    unittest.main()
