# SPDX-License-Identifier: MIT
"""Unit tests of tools/sanitize.py (make sanitize) without a GPU: the report parser, the
declarations, and one end-to-end run through a stand-in compute-sanitizer that writes a
declared report for one test and an undeclared one for another, so that the first passes and
the second fails, is run again alone, and is printed in full."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import sanitize  # noqa: E402

LOG = """\
========= COMPUTE-SANITIZER
========= Program hit cudaErrorInvalidValue (error 1) due to "invalid argument" on CUDA API call to cudaMemcpy.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: apply_twice [0xaddd] in lib02_explicit_allocation.so
=========
========= Invalid __global__ read of size 4 bytes
=========     at matmul_tiled_kernel(const float *, const float *, float *, int, int, int)+0x260 in shared_memory.cu:87
=========     by thread (29,10,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""

# Writes its log like compute-sanitizer: a declared race for 04.missing-barrier under
# racecheck, an undeclared read for 04.errors under memcheck; runs the program either way.
FAKE = textwrap.dedent('''\
    import subprocess, sys
    a = sys.argv[1:]
    tool, log = a[a.index("--tool") + 1], a[a.index("--log-file") + 1]
    prog = a[a.index("--log-file") + 2:]
    rc = subprocess.run(prog).returncode
    test = prog[prog.index("--only") + 1]
    with open(log, "w") as f:
        f.write("========= COMPUTE-SANITIZER\\n")
        if tool == "racecheck" and test == "04.missing-barrier":
            f.write("========= Error: Race reported between Write access at "
                    "reverse_chunks_kernel(...)+0x10 in shared_memory.cu:39\\n")
        if tool == "memcheck" and test == "04.errors":
            f.write("========= Invalid __global__ write of size 4 bytes\\n"
                    "=========     at made_up_kernel()+0x10 in x.cu:1\\n")
        f.write("========= ERROR SUMMARY: 0 errors\\n")
    sys.exit(rc)
''')


class Parsing(unittest.TestCase):
    def test_reports_split_with_their_details(self):
        found = sanitize.reports(LOG)
        self.assertEqual(len(found), 2)
        self.assertIn("cudaMemcpy", found[0])
        self.assertIn("apply_twice", found[0])   # details stay with their report
        self.assertTrue(found[1].startswith("Invalid __global__ read"))
        self.assertIn("thread (29,10,0)", found[1])

    def test_declarations_match_tool_test_and_text(self):
        entries = sanitize.load_expected()
        api_error, bad_read = sanitize.reports(LOG)
        self.assertIsNotNone(sanitize.expected_by(entries, "memcheck", "02.2", api_error))
        # the same report in a test that does not provoke it, or under another tool: a finding
        self.assertIsNone(sanitize.expected_by(entries, "memcheck", "01.2", api_error))
        self.assertIsNone(sanitize.expected_by(entries, "racecheck", "02.2", api_error))
        # an out-of-bounds read is never declared
        for test_id in ("04.1", "04.errors", "02.2"):
            self.assertIsNone(sanitize.expected_by(entries, "memcheck", test_id, bad_read))

    def test_every_declaration_has_a_reason(self):
        for e in sanitize.load_expected():
            self.assertGreater(len(e["reason"].split()), 4, f"line {e['line']}: say why")


class EndToEnd(unittest.TestCase):
    def test_declared_passes_undeclared_fails(self):
        build = Path(os.environ.get("TUT_BUILD", REPO / "build"))
        if not (build / "cpu" / "solutions" / "lib04_shared_memory.so").exists():
            self.skipTest("chapter 04's solutions are not built for the emulator")
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "compute-sanitizer"
            fake.write_text(f"#!{sys.executable}\n" + FAKE)
            fake.chmod(0o755)

            def run(only, tool):
                return subprocess.run(
                    [sys.executable, str(REPO / "tools" / "sanitize.py"), "--backend", "cpu",
                     "--sanitizer", str(fake), "--chapter", "04_shared_memory", "--tool", tool,
                     "--only", only, "--jobs", "2"],
                    capture_output=True, text=True, timeout=300,
                    env=dict(os.environ, TUT_BUILD=str(build)))

            ok = run("04.missing-barrier", "racecheck")
            self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
            self.assertIn("1 expected report(s) filtered, 0 unexpected", ok.stdout)
            bad = run("04.errors", "memcheck")
            self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
            self.assertIn("(run again alone)", bad.stdout)
            self.assertIn("unexpected memcheck report in 04.errors", bad.stdout)
            self.assertIn("made_up_kernel", bad.stdout)


if __name__ == "__main__":
    unittest.main()
