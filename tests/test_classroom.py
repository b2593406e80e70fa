# SPDX-License-Identifier: MIT
"""Tests of the classroom side (tools/exercises.py, tools/grade.py, tools/handout.py, the harness's
"todo" status, the exit codes of make check). Run by `make test` on the CPU backend, on chapter
01 (small and quick); each class is its own CTest test:

    python3 tests/test_classroom.py Regenerate      (or Todo, ExitCodes, Venv, Handout, Grading)

Uses build/classroom-tests/ for its scratch files.
"""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import unittest
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "common"))
import tut  # noqa: E402

CH = "01_threads_blocks_grids"
CU = "threads_blocks_grids.cu"
SCRATCH = Path(os.environ.get("TUT_BUILD", REPO / "build")) / "classroom-tests"


def scratch(name):
    d = SCRATCH / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def solution():
    return (REPO / "solutions" / CH / CU).read_text()


def stub():
    return (REPO / "chapters" / CH / CU).read_text()


def replace_region(text, ex_id, body):
    """The solution text with exercise ex_id's answer replaced by `body`."""
    pattern = re.compile(rf"(// @solution {re.escape(ex_id)}:[^\n]*\n)(.*?)(\s*// @end)", re.S)
    new, n = pattern.subn(lambda m: m.group(1) + body + m.group(3), text)
    assert n == 1, ex_id
    return new


class Regenerate(unittest.TestCase):
    """make exercises never overwrites an edited exercise."""

    def setUp(self):
        self.tree = scratch("regenerate")
        for part in ("solutions", "chapters"):
            shutil.copytree(REPO / part / CH, self.tree / part / CH)
        self.ex = self.tree / "chapters" / CH / CU
        self.sol = self.tree / "solutions" / CH / CU

    def tool(self, *args):
        return run([sys.executable, str(REPO / "tools" / "exercises.py"), "--repo",
                    str(self.tree), *args])

    def test_a_solution_change_regenerates_an_untouched_exercise(self):
        self.sol.write_text(self.sol.read_text().replace("(~1 line) [1 point]",
                                                         "(~1 line) [3 points]"))
        self.assertEqual(self.tool("--check").returncode, 1)
        r = self.tool()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(~1 line) [3 points]", self.ex.read_text())
        manifest = json.loads((self.ex.parent / ".stubs.json").read_text())
        self.assertEqual(manifest["exercises"]["01.3"]["points"], 3)
        self.assertEqual(self.tool("--check").returncode, 0)

    def test_an_edited_exercise_is_refused_then_kept_in_a_backup(self):
        work = self.ex.read_text().replace("    return 0;\n}", "    return (n + block - 1) / block;\n}", 1)
        self.ex.write_text(work)
        self.sol.write_text(self.sol.read_text() + "\n")   # a maintainer changed a solution too
        r = self.tool()
        self.assertEqual(r.returncode, 1)
        self.assertIn("nothing was written", r.stderr)
        self.assertIn("Your work is safe", r.stderr)
        self.assertIn("make check", r.stderr)
        self.assertEqual(self.ex.read_text(), work)
        r = self.tool("--check")   # what `make test` runs
        self.assertEqual(r.returncode, 1)
        self.assertIn("Your work is safe", r.stderr)
        self.assertNotIn("run `make exercises`", r.stderr.split("Your work")[0])
        r = self.tool("--force")
        self.assertEqual(r.returncode, 0, r.stderr)
        kept = re.search(r"kept the edited \S+ as (\S+)", r.stdout)
        self.assertTrue(kept, r.stdout)
        self.assertEqual((self.tree / kept.group(1)).read_text(), work)
        self.assertNotEqual(self.ex.read_text(), work)
        self.assertEqual(self.tool("--check").returncode, 0)

    def test_a_students_copy_has_nothing_to_regenerate(self):
        shutil.rmtree(self.tree / "solutions")
        work = self.ex.read_text() + "// my work\n"
        self.ex.write_text(work)
        for args in ((), ("--check",), ("--force",)):
            r = self.tool(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("no solutions/", r.stdout)
        self.assertEqual(self.ex.read_text(), work)


class Todo(unittest.TestCase):
    """An untouched exercise is "todo" with its file:line; touched code is tested."""

    def setUp(self):
        self.tree = scratch("todo")
        shutil.copytree(REPO / "chapters" / CH, self.tree / "chapters" / CH)
        self.saved, tut.paths.REPO = tut.paths.REPO, self.tree
        self.ch = tut.Chapter(1, CH)
        for i in range(1, 6):
            self.ch.exercise(i, f"exercise {i}")(self.failing)
        os.environ["TUT_TREE"] = "chapters"

    def tearDown(self):
        tut.paths.REPO = self.saved

    @staticmethod
    def failing(ctx):
        raise AssertionError("c: 1 of 1 elements wrong")

    def result(self, test_id, **kw):
        lib = type("Lib", (), {"backend": "cpu", "mem_used": lambda self: 0,
                               "synchronize": lambda self: 0})()
        test = next(t for t in self.ch.tests if t["id"] == test_id)
        return self.ch.run_test(test, lib, seed=1, **kw)

    def test_untouched_is_todo_not_a_failure(self):
        r = self.result("01.2")
        self.assertEqual(r["status"], "NOT DONE")
        self.assertRegex(r["todo"], rf"chapters/{CH}/{CU}:\d+$")
        self.assertNotIn("elements wrong", r["message"])
        line = int(r["todo"].rsplit(":", 1)[1])
        self.assertIn("TODO(student) 01.2", stub().splitlines()[line - 1])

    def test_code_under_a_todo_left_in_place_is_tested(self):
        ex = self.tree / "chapters" / CH / CU
        text = ex.read_text()
        todo = next(line for line in text.splitlines(keepends=True) if "TODO(student) 01.2" in line)
        ex.write_text(text.replace(todo, todo + "    int i = threadIdx.x;\n"))
        r = self.result("01.2")
        self.assertEqual(r["status"], "FAIL")
        self.assertIn("elements wrong", r["message"])

    def test_maintainers_still_run_the_stubs(self):
        self.assertEqual(self.result("01.2", run_untouched=True)["status"], "FAIL")

    def test_without_a_manifest_the_old_behaviour(self):
        (self.tree / "chapters" / CH / ".stubs.json").unlink()
        self.assertEqual(self.result("01.2")["status"], "FAIL")


class ExitCodes(unittest.TestCase):
    """make check fails when it checked nothing; a gpu build with no GPU is not remembered."""

    def test_no_such_chapter(self):
        r = run(["make", "--no-print-directory", "-C", str(REPO), "check", "CH=99"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no chapter matches CH=99", r.stdout + r.stderr)

    def summary(self, rows):
        d = scratch("summary")
        for i, row in enumerate(rows):
            (d / f"01.{i}.json").write_text(json.dumps([row]))
        return run([sys.executable, str(REPO / "tools" / "summary.py"), str(d)])

    def test_nothing_ran_or_everything_skipped(self):
        self.assertEqual(self.summary([]).returncode, 1)
        skip = {"id": "01.1", "title": "t", "exercise": True, "status": "SKIP",
                "message": "no usable GPU here", "tree": "chapters"}
        r = self.summary([skip, dict(skip, id="01.2")])
        self.assertEqual(r.returncode, 1)
        self.assertIn("every test was skipped", r.stdout)

    def test_the_whole_diagnosis_once(self):
        long = "AssertionError:" + " a 32-way bank conflict in every row" * 8
        r = self.summary([{"id": "01.1", "title": "t", "exercise": True, "status": "FAIL",
                           "message": long + "\n  second line", "tree": "chapters"}])
        self.assertEqual(r.returncode, 1)   # make check fails while an exercise fails
        self.assertIn(long, r.stdout)
        self.assertEqual(r.stdout.count("second line"), 1)

    def test_a_gpu_build_without_a_gpu_leaves_the_backend(self):
        if run(["nvidia-smi", "-L"]).returncode == 0 if shutil.which("nvidia-smi") else False:
            self.skipTest("this machine has a GPU")
        build = scratch("backend")
        (build / "BACKEND").write_text("cpu\n")
        r = run(["make", "--no-print-directory", "-C", str(REPO), "BACKEND=gpu",
                 f"BUILD={build}", f"{build}/BACKEND"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((build / "BACKEND").read_text(), "cpu\n")


class Venv(unittest.TestCase):
    def test_a_driver_run_by_hand_finds_numpy_in_build_venv(self):
        venv = Path(os.environ.get("TUT_BUILD", REPO / "build")) / "venv" / "bin" / "python"
        if not venv.exists():
            self.skipTest("make used a Python with NumPy: there is no build/venv")
        # -S: no site-packages, so this interpreter has no NumPy; the driver must re-run itself
        r = run([sys.executable, "-S", str(REPO / "chapters" / CH / "driver.py"), "--list"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("01.2", r.stdout)


    def test_every_driver_imports_tut_before_numpy(self):
        # tut is what finds build/venv: a driver that imports NumPy first fails by hand
        for driver in sorted(REPO.glob("chapters/[0-9][0-9]_*/driver.py")):
            text = driver.read_text()
            if "import numpy" in text:
                self.assertLess(text.index("import tut"), text.index("import numpy"),
                                f"{driver.relative_to(REPO)}: import tut before numpy")


class Handout(unittest.TestCase):
    def test_handout_builds_and_checks_on_its_own(self):
        out = SCRATCH / "handout"
        hidden = scratch("hidden-for-handout")
        token = f"secret {os.getpid()} {os.urandom(8).hex()}"   # in no other file
        (hidden / "01_secret.py").write_text(HIDDEN_TEST + f"# {token}\n")
        r = run(["make", "--no-print-directory", "-C", str(REPO), "handout", f"HANDOUT={out}",
                 f"HIDDEN={hidden}", "CH=01", f"PYTHON={sys.executable}"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("make grade CH=01: 9 of 9 points", r.stdout)   # no hidden test there
        self.assertIn("handout checked", r.stdout)
        self.assertFalse((out / "solutions").exists())
        self.assertFalse((out / ".git").exists())
        self.assertFalse((out / "build").exists())
        self.assertTrue((out / ".github" / "workflows" / "autograde.yml").exists())
        self.assertEqual((out / "chapters" / CH / CU).read_text(),
                         stub(), "the handout's exercise is not the generated stub")
        for f in out.rglob("*"):
            if f.is_file():
                self.assertNotIn(token.encode(), f.read_bytes(), f)


HIDDEN_TEST = '''
import numpy as np
import tut


def register(ch, driver):
    @ch.hidden("01.2", "big-prime", "vector_add on 1000003 elements, block 128", points=1)
    def big(ctx):
        a, b = tut.random_f32(ctx.rng, 1000003), tut.random_f32(ctx.rng, 1000003)
        tut.assert_close(driver.vector_add(ctx.lib, a, b, 128), a.astype(np.float64) + b,
                         rtol=1e-6, atol=1e-30, name="hidden vector_add")
'''


class Grading(unittest.TestCase):
    """make grade-all on submissions of chapter 01: tampered, crashing, hanging, flooding,
    not compiling; hidden tests counted; the reports in their formats."""

    @classmethod
    def setUpClass(cls):
        cls.dir = scratch("grading")
        subs = cls.dir / "submissions"
        subs.mkdir()
        sol = solution()

        def folder(name, text, extra=None):
            d = subs / name / "chapters" / CH
            d.mkdir(parents=True)
            (d / CU).write_text(text)
            for rel, content in (extra or {}).items():
                (subs / name / rel).parent.mkdir(parents=True, exist_ok=True)
                (subs / name / rel).write_text(content)
            return subs / name

        folder("good", sol)
        # tampered: a driver, the harness and the manifest that would pass anything
        cheat = {f"chapters/{CH}/driver.py": "import sys\nsys.exit(0)\n",
                 "common/tut.py": "raise SystemExit(0)\n",
                 f"chapters/{CH}/.stubs.json": "{}",
                 "Makefile": "grade:\n\techo 100 points\n"}
        for name, text in (("tampered_solution", sol), ("tampered_stub", stub())):
            d = folder(name, text, cheat)
            with zipfile.ZipFile(subs / f"{name}.zip", "w") as z:
                for f in d.rglob("*"):
                    if f.is_file():
                        z.write(f, Path("repo") / f.relative_to(d))
            shutil.rmtree(d)
        # crashes in 01.3 (a host function), hangs in 01.3 and loops forever in 01.5's kernel
        folder("crash", replace_region(sol, "01.3", "    abort();\n"))
        spin = "    volatile int spin = 1;\n    while (spin) {}\n"
        d = folder("hang", replace_region(replace_region(sol, "01.3", spin), "01.5", spin))
        with tarfile.open(subs / "hang.tar.gz", "w:gz") as t:
            t.add(d / "chapters" / CH / CU, arcname=CU)   # a bare file is found too
        shutil.rmtree(d)
        folder("flood", replace_region(sol, "01.3", '    for (;;) puts("spam spam spam");\n'))
        folder("broken", replace_region(sol, "01.1", "    this is not C++;\n    return 0;\n"))
        # the instructor's answer, reached through the preprocessor
        folder("peek", f'#include "{REPO}/solutions/{CH}/{CU}"\n')
        hidden = cls.dir / "hidden"
        hidden.mkdir()
        (hidden / "01_extra.py").write_text(HIDDEN_TEST)
        # TIMEOUT: the hang spins a core until it runs out (01.3; 01.5 until the watchdog at
        # half of it), so short, yet many times what chapter 01's tests take on a busy machine
        cls.proc = run(["make", "--no-print-directory", "-C", str(REPO), "grade-all",
                       f"SUBMISSIONS={subs}", "CH=01", f"HIDDEN={hidden}", "TIMEOUT=10",
                       "JOBS=2", "SEED=7", f"BUILD={cls.dir / 'build'}", "BACKEND=cpu",
                       f"PYTHON={sys.executable}"])
        cls.out = cls.dir / "build" / "grade-all"
        cls.book = {}
        if cls.proc.returncode == 0:
            with open(cls.out / "gradebook.csv", newline="") as f:
                rows = list(csv.reader(f))
            cls.header = rows[0]
            cls.book = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)

    def feedback(self, name):
        return (self.out / "feedback" / f"{name}.txt").read_text()

    def test_gradebook(self):
        self.assertEqual(self.header, ["student", "01.1", "01.2", "01.3", "01.4", "01.5",
                                       "total", "max"])
        self.assertEqual(self.book["(max)"]["total"], "10")   # 9 + the hidden test's 1
        self.assertEqual(self.book["good"]["total"], "10")

    def test_tampering_changes_nothing(self):
        self.assertEqual(self.book["tampered_solution"]["total"], "10")
        self.assertEqual(self.book["tampered_stub"]["total"], "0")
        self.assertIn("todo", self.feedback("tampered_stub"))

    def test_crash_hang_flood_score_zero_on_their_exercises_only(self):
        for name, zero in (("crash", {"01.3"}), ("hang", {"01.3", "01.5"}),
                           ("flood", {"01.3"})):
            row = self.book[name]
            for ex in ("01.1", "01.2", "01.3", "01.4", "01.5"):
                want = "0" if ex in zero else self.book["good"][ex]
                self.assertEqual(row[ex], want, f"{name} {ex}: {self.feedback(name)}")
        self.assertIn("crashed (SIGABRT)", self.feedback("crash"))
        self.assertIn("did not finish within 10 s", self.feedback("hang"))
        self.assertIn("printed more than", self.feedback("flood"))

    def test_a_file_may_not_include_the_instructors_files(self):
        self.assertEqual(self.book["peek"]["total"], "0")
        self.assertIn("was not compiled", self.feedback("peek"))
        self.assertIn("a file the grader does not provide", self.feedback("peek"))

    def test_a_file_that_does_not_compile(self):
        self.assertEqual(self.book["broken"]["total"], "0")
        self.assertIn("does not compile", self.feedback("broken"))
        self.assertIn("error", self.feedback("broken"))

    def test_hidden_test_counts_and_reports_have_their_formats(self):
        res = json.loads((self.out / "results" / "good" / "results.json").read_text())
        self.assertEqual(res["score"], 10)
        names = [t["name"] for t in res["tests"]]
        self.assertTrue(any(n.startswith("01.2+big-prime") for n in names), names)
        for t in res["tests"]:
            self.assertEqual(set(t) >= {"name", "score", "max_score", "output"}, True)
        score = json.loads((self.out / "results" / "crash" / "score.json").read_text())
        self.assertEqual(score["score"], 9)
        junit = (self.out / "results" / "crash" / "junit.xml").read_text()
        self.assertIn("<testcase", junit)
        self.assertIn("<failure", junit)


if __name__ == "__main__":
    unittest.main(verbosity=2)
