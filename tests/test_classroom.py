# SPDX-License-Identifier: MIT
"""Tests of the classroom side (tools/exercises.py, tools/grade.py, tools/handout.py, the harness's
"todo" status, the exit codes of make check). Run by `make test` on the CPU backend, on chapter
01 (small and quick); each class is its own CTest test:

    python3 tests/test_classroom.py Regenerate      (or Todo, ExitCodes, Venv, Handout, Grading)

Uses build/classroom-tests/ for its scratch files.
"""
import bz2
import contextlib
import csv
import datetime
import io
import json
import lzma
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
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


class NoSandbox(unittest.TestCase):
    """Where no sandbox can be made, grade-all refuses unless told SANDBOX=none (and then the
    gradebook's sandbox column says none); make grade goes on and says so."""

    def test_refused_unless_told(self):
        sys.path.insert(0, str(REPO / "tools"))
        import grade
        saved = grade.sandbox.probe
        grade.sandbox.probe = lambda: "unshare: Operation not permitted"
        try:
            g = grade.Grader.__new__(grade.Grader)
            g.backend = "cpu"
            with self.assertRaises(grade.GradeError) as e:
                g._choose_mode("on", "auto")      # grade-all
            self.assertIn("SANDBOX=none", str(e.exception))
            self.assertEqual(g._choose_mode("none", "auto"), "none")
            self.assertEqual(g._choose_mode("auto", "auto"), "none")   # make grade
            self.assertIn("Operation not permitted", g.sandbox_missing)
        finally:
            grade.sandbox.probe = saved

    def test_here_a_sandbox_can_be_made(self):
        # what make test runs on (root in CI): the grading tests above need it
        r = run([sys.executable, str(REPO / "tools" / "sandbox.py"), "--probe"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


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
        for gone in ("solutions", ".git", "build", ".github", "docs/instructor.md",
                     "tools/platforms"):
            self.assertFalse((out / gone).exists(), gone)
        self.assertEqual((out / "chapters" / CH / CU).read_text(),
                         stub(), "the handout's exercise is not the generated stub")
        for f in out.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                self.assertNotIn(token.encode(), data, f)
                # it stands alone: nothing includes or links to what it leaves out
                if f.suffix in (".cu", ".h", ".cuh"):
                    self.assertIsNone(re.search(rb'#\s*include\s*"[^"]*solutions/', data), f)
                if f.suffix == ".md":
                    self.assertIsNone(re.search(rb"\]\([^)]*(instructor\.md|solutions/)", data),
                                      f)


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

# a hidden test with a bug of the instructor's: its traceback must not show its source or path
BROKEN_HIDDEN = '''
VISIBILITY = {"oops": "visible"}


def register(ch, driver):
    @ch.hidden("01.3", "oops", "an instructor's test that raises", points=0)
    def oops(ctx):
        raise KeyError("the instructor's bug")  # SOURCE_TOKEN
'''

# ---- what students try: C++ added to a submitted file --------------------------------------
# A constructor runs when the library is loaded, before any test: in the test's process, or
# (with the worker/checker split) in the worker. Each writes what it managed to a place the
# test then inspects; none of it should happen.
ESCAPE = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
static void tut_try_create(const char *path)
{
    FILE *f = fopen(path, "a");
    if (f) { fputs("# tampered\n", f); fclose(f); }
}
__attribute__((constructor)) static void tut_escape(void)
{
    // what it must not even see: any of these in view, and it crashes (and loses points)
    const char *secret[] = {"@REPO@/solutions/@CH@/@CU@", "@REPO@/tools/grade.py", "@HIDDEN@",
                            "@DIR@/roster.csv", "@REPO@/build/cpu/solutions"};
    for (unsigned k = 0; k < sizeof secret / sizeof *secret; k++)
        if (access(secret[k], F_OK) == 0) { fprintf(stderr, "I see %s\n", secret[k]); abort(); }
    tut_try_create("@REPO@/common/tut_tampered_@T@.py");      // the instructor's tree
    tut_try_create("@HIDDEN@/01_tampered_@T@.py");             // the hidden tests
    tut_try_create("@OUT@/tampered_@T@");                      // the grader's output
    tut_try_create("common/tut.py");                           // this submission's harness
    int s = socket(AF_INET, SOCK_STREAM, 0);                   // the network
    struct sockaddr_in a; memset(&a, 0, sizeof a);
    a.sin_family = AF_INET; a.sin_port = htons(@PORT@); a.sin_addr.s_addr = inet_addr("127.0.0.1");
    if (s >= 0) { connect(s, (struct sockaddr *)&a, sizeof a); close(s); }
    if (fork() == 0) {                                         // something that outlives the test
        setsid();
        prctl(PR_SET_NAME, "tl@T8@", 0, 0, 0);
        sleep(40);
        _exit(0);
    }
}
'''

SPY = r'''
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
__attribute__((constructor)) static void tut_spy(void)
{
    char buf[4096];
    FILE *f = fopen("@HIDDEN@/01_extra.py", "r");              // read the hidden tests
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fprintf(stderr, "%s\n", buf);
        abort();                                               // a crash shows its output
    }
    // ask the interpreter for the source of the hidden tests it has loaded
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    int (*run)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (ensure && run) {
        ensure();
        run("import sys, inspect, os\n"
            "src = [inspect.getsource(m) for n, m in list(sys.modules.items())\n"
            "       if n.startswith('tut_hidden')]\n"
            "if src:\n"
            "    sys.stderr.write(''.join(src)); sys.stderr.flush(); os.abort()\n");
    }
}
'''

# Forge the verdict: write a PASS result to the results file named on the command line, and
# patch the harness through Python's C API so that every test passes.
FORGE = r'''
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <dlfcn.h>
__attribute__((constructor)) static void tut_forge(void)
{
    char buf[16384];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *only = 0, *json = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        if (!strcmp(buf + i, "--only")) only = buf + i + strlen(buf + i) + 1;
        if (!strcmp(buf + i, "--json")) json = buf + i + strlen(buf + i) + 1;
    }
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    int (*run)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (ensure && run) {
        ensure();
        run("import sys\n"
            "for m in list(sys.modules.values()):\n"
            "    C = getattr(m, 'Chapter', None)\n"
            "    if isinstance(C, type) and hasattr(C, 'run_test'):\n"
            "        def passed(self, test, lib, seed, run_untouched=False, _r=C._result):\n"
            "            return _r(self, test, lib, seed, 0.0, 'PASS', '')\n"
            "        C.run_test = passed\n");
    }
    if (json && only) {
        FILE *o = fopen(json, "w");
        if (o) {
            fprintf(o, "[{\"id\": \"%s\", \"title\": \"t\", \"exercise\": true, "
                       "\"status\": \"PASS\", \"message\": \"\"}]", only);
            fclose(o);
            _exit(0);
        }
    }
}
'''


ENV_SPY = r"""    extern char **environ;
    fputs("env-dump\n", stderr);
    for (char **e = environ; *e; ++e)
        if (!strncmp(*e, "GRADER", 6) || !strncmp(*e, "MAKE", 4) || strstr(*e, "SUBMISSIONS")
                || !strncmp(*e, "ROSTER", 6) || strstr(*e, "token"))
            fprintf(stderr, "%s\n", *e);
    abort();
"""


def bomb(compress, claimed):
    """An archive of one tar member that claims `claimed` bytes of zeros, made in a moment: one
    compressed stream of 8 MiB of zeros repeated (bz2, gzip and xz readers go on through
    concatenated streams), so the file is a few kilobytes."""
    info = tarfile.TarInfo(CU)
    info.size = claimed
    chunk = 8 << 20
    head = info.tobuf(format=tarfile.GNU_FORMAT)   # sizes past 8 GiB
    return compress(head + bytes(chunk - len(head))) + compress(bytes(chunk)) * (claimed // chunk)


def region_body(text, ex_id):
    m = re.search(rf"// @solution {re.escape(ex_id)}:[^\n]*\n(.*?)\s*// @stub", text, re.S)
    return m.group(1)


def touched_stub():
    """The stub with a line of 'work' under each TODO: every exercise runs, and fails."""
    return re.sub(r"(// TODO\(student\) 01\.\d[^\n]*\n)", r"\1    (void)0;\n", stub())


def isolated():
    """Whether grade-all runs a student's library in a worker apart from the checker (the tree
    has one, and ISOLATE=0 in the environment does not turn it off)."""
    return ((REPO / "common" / "tut_remote.py").exists()
            and os.environ.get("ISOLATE", "auto") not in ("0", "off"))


class Grading(unittest.TestCase):
    """make grade-all on submissions of chapter 01: tampered, crashing, hanging, flooding, not
    compiling; attacks on the grader, the tree, the hidden tests and the machine; honest files
    with a BOM; hidden tests counted; the gradebook (roster, late policy, a regrade) and the
    reports in their formats."""

    @classmethod
    def setUpClass(cls):
        cls.dir = scratch("grading")
        cls.token = os.urandom(6).hex()
        subs = cls.dir / "submissions"
        subs.mkdir()
        hidden = cls.dir / "hidden"
        hidden.mkdir()
        (hidden / "01_extra.py").write_text(HIDDEN_TEST + f"# hidden-token-{cls.token}\n")
        (hidden / "01_broken.py").write_text(BROKEN_HIDDEN.replace("SOURCE_TOKEN",
                                                                   f"src-{cls.token}"))
        cls.hidden = hidden
        cls.out = cls.dir / "build" / "grade-all"
        # a listener: the sandboxed code must not reach it
        cls.listener = socket.socket()
        cls.listener.bind(("127.0.0.1", 0))
        cls.listener.listen(8)
        cls.listener.settimeout(0.1)
        port = cls.listener.getsockname()[1]
        sol = solution()

        def fill(snippet):
            return (snippet.replace("@REPO@", str(REPO)).replace("@HIDDEN@", str(hidden))
                    .replace("@DIR@", str(cls.dir)).replace("@CH@", CH)
                    .replace("@CU@", CU)
                    .replace("@OUT@", str(cls.out)).replace("@T@", cls.token)
                    .replace("@T8@", cls.token[:8]).replace("@PORT@", str(port)))

        def folder(name, text, extra=None, raw=None):
            d = subs / name / "chapters" / CH
            d.mkdir(parents=True)
            if raw is not None:
                (d / CU).write_bytes(raw)
            else:
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
        # crashes in 01.3 (a host function), after printing escapes and control characters
        # (U+009B, the one-character CSI, written as UTF-8; and a right-to-left override)
        folder("crash", replace_region(sol, "01.3", '    fputs("\\x1b[31mred\\x1b[0m \\x01\\x02 '
                                       'bell\\x07 \\xc2\\x9b" "31mcsi \\xe2\\x80\\xae'
                                       'rlo", stderr);\n    abort();\n'))
        # hangs in 01.3 and loops forever in 01.5's kernel
        spin = "    volatile int spin = 1;\n    while (spin) {}\n"
        d = folder("hang", replace_region(replace_region(sol, "01.3", spin), "01.5", spin))
        with tarfile.open(subs / "hang.tar.gz", "w:gz") as t:
            t.add(d / "chapters" / CH / CU, arcname=CU)   # a bare file is found too
        shutil.rmtree(d)
        folder("flood", replace_region(sol, "01.3", '    for (;;) puts("spam spam spam");\n'))
        # the classic overflow: an int index, right for every n below 2^31 (the INT_MAX test,
        # a 24 GiB sparse reservation on the emulator, must run inside the sandbox too)
        long_index = "(long long)blockIdx.x * blockDim.x + threadIdx.x"
        assert long_index in sol
        folder("int32", sol.replace("long long i = " + long_index,
                                    "int i = blockIdx.x * blockDim.x + threadIdx.x"))
        folder("broken", replace_region(sol, "01.1", "    this is not C++;\n    return 0;\n"))
        # the instructor's answer, reached through the preprocessor (the text filter stops it)
        folder("peek", f'#include "{REPO}/solutions/{CH}/{CU}"\n')
        # honest: an editor that saves a byte order mark and CRLF line ends
        folder("bom", None, raw=b"\xef\xbb\xbf" + sol.replace("\n", "\r\n").encode())
        # the tree, the hidden tests, the grader's output, the network, a lingering process
        folder("escape", sol + fill(ESCAPE))
        # 3 GiB in 01.3, once: bounded by the memory limit, the test crashes instead
        # (kept in a volatile global: the compiler may not drop an allocation that escapes)
        hoard = ("    static int tried;\n    if (!tried) {\n        tried = 1;\n"
                "        size_t big = (size_t)3 << 30;\n        tut_hoard = (char *)malloc(big);\n"
                "        if (!tut_hoard) abort();\n        memset(tut_hoard, 1, big);\n"
                "        free(tut_hoard);\n    }\n")
        folder("greedy", "#include <stdlib.h>\n#include <string.h>\n"
               "char *volatile tut_hoard;\n" + replace_region(
                   sol, "01.3", hoard + region_body(sol, "01.3")))
        # the hidden tests: read them, or ask the interpreter for them, and print them
        folder("spy", sol + fill(SPY))
        # ... or embed them at compile time, spelt to pass the text filter
        folder("embed", sol + fill('asm(".section .rodata\\n.inc" "bin \\"@HIDDEN@/01_extra.py'
                                   '\\"\\n.previous");\n'))
        # forge the verdict: a PASS result file, a patched harness
        folder("forger", touched_stub() + FORGE)
        # every archive problem, a name meant to clash, a formula: each one student's row
        with zipfile.ZipFile(subs / "badcrc.zip", "w") as z:   # stored: the bytes are as is
            z.writestr(f"chapters/{CH}/{CU}", sol)
        data = bytearray((subs / "badcrc.zip").read_bytes())
        data[data.find(b"__global__")] ^= 1
        (subs / "badcrc.zip").write_bytes(data)
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as t:
            t.add(REPO / "solutions" / CH / CU, arcname=CU)
        (subs / "truncated.tar.gz").write_bytes(packed.getvalue()[:len(packed.getvalue()) // 2])
        # 1 GiB of zeros in a few hundred bytes: bounded by what it unpacks to, not what it says
        (subs / "bomb.tar.bz2").write_bytes(bomb(bz2.compress, 1 << 30))
        (subs / "@SUM(1+1).zip").write_bytes(b"not a zip")   # a formula in the gradebook
        folder("good.results", sol)   # the name good's results once had
        # the grader's environment printed into the feedback (a planted token, make's command
        # line, the seed's and the gradebook's paths)
        folder("envspy", "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
               + replace_region(sol, "01.3", ENV_SPY))
        # what the gradebook finds from an earlier run must not mix with this one
        stale = cls.out / "results" / "ghost"
        stale.mkdir(parents=True)
        (stale / "score.json").write_text("{}")
        (cls.out / "feedback").mkdir()
        (cls.out / "feedback" / "ghost.txt").write_text("stale")
        # a roster: LMS ids, one student who handed nothing in, one late submission
        cls.deadline = "2026-11-30T23:59:00+00:00"
        roster = cls.dir / "roster.csv"
        names = ["good", "tampered_solution", "tampered_stub", "crash", "hang", "flood",
                 "broken", "peek", "bom", "escape", "greedy", "spy", "embed", "forger", "absent"]
        with open(roster, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["submission", "student_id", "submitted"])
            for n in names:
                w.writerow([n, f"id-{n}", "2026-12-02T12:00:00+00:00" if n == "crash"
                            else "2026-11-30T10:00:00+00:00"])
            # no time on the roster: its files' times (the submitter's) must not count
            w.writerow(["envspy", "=HYPERLINK(1)", ""])
        late_stamp = datetime.datetime(2026, 12, 20, tzinfo=datetime.timezone.utc).timestamp()
        for f in [subs / "envspy", *(subs / "envspy").rglob("*")]:
            os.utime(f, (late_stamp, late_stamp))
        cls.roster = roster
        # TIMEOUT: the hang spins a core until it runs out (01.3; 01.5 until the watchdog at
        # half of it), so short, yet many times what chapter 01's tests take on a busy machine
        cls.make = ["make", "--no-print-directory", "-C", str(REPO), "grade-all",
                    f"SUBMISSIONS={subs}", "CH=01", f"HIDDEN={hidden}", "TIMEOUT=10", "JOBS=2",
                    "SEED=7", f"BUILD={cls.dir / 'build'}", "BACKEND=cpu",
                    f"PYTHON={sys.executable}", f"ROSTER={roster}",
                    f"DEADLINE={cls.deadline}", "PENALTY=10"]
        cls.proc = run(cls.make, env=dict(os.environ, GRADER_TOKEN=f"grader-token-{cls.token}",
                                          MAKEFLAGS=f"--no-print-directory mk-{cls.token}"))
        cls.connections = 0
        while True:
            try:
                cls.listener.accept()[0].close()
                cls.connections += 1
            except OSError:
                break
        cls.listener.close()
        cls.lingering = [p for p in Path("/proc").glob("[0-9]*")
                         if _comm(p) == f"tl{cls.token[:8]}"]
        cls.book = cls.gradebook() if cls.proc.returncode == 0 else {}
        cls.run_info = json.loads((cls.out / "run.json").read_text()) \
            if cls.proc.returncode == 0 else {}

    @classmethod
    def gradebook(cls):
        with open(cls.out / "gradebook.csv", newline="") as f:
            rows = list(csv.reader(f))
        cls.header = rows[0]
        return {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}

    @classmethod
    def tearDownClass(cls):
        for f in (REPO / "common" / f"tut_tampered_{cls.token}.py",
                  cls.hidden / f"01_tampered_{cls.token}.py", cls.out / f"tampered_{cls.token}"):
            if f.exists():
                f.unlink()

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)

    def feedback(self, name):
        return (self.out / "feedback" / f"{name}.txt").read_text()

    def everything_of(self, name):
        """Every report a student or a platform gets for this submission."""
        d = self.out / "results" / name
        return "".join(f.read_text() for f in sorted(d.iterdir())) + self.feedback(name)

    def test_gradebook(self):
        self.assertEqual(self.header, ["student", "student_id", "01.1", "01.2", "01.3", "01.4",
                                       "01.5", "total", "max", "submitted", "days_late",
                                       "penalty", "final", "sandbox"])
        self.assertEqual(self.book["(max)"]["total"], "10")   # 9 + the hidden test's 1
        self.assertEqual(self.book["good"]["total"], "10")
        self.assertEqual(self.book["good"]["student_id"], "id-good")
        self.assertEqual(self.book["good"]["sandbox"],
                         "isolated" if isolated() else "in-process")
        self.assertEqual(self.book["absent"]["submitted"], "not submitted")
        self.assertEqual(self.book["absent"]["total"], "0")
        # 2 days late at 10% of 10 points a day
        self.assertEqual((self.book["crash"]["days_late"], self.book["crash"]["penalty"],
                          self.book["crash"]["final"]), ("2", "2", "7"))
        self.assertEqual(self.book["good"]["final"], "10")
        self.assertNotIn("ghost", self.book)
        self.assertFalse((self.out / "results" / "ghost").exists())
        self.assertFalse((self.out / "feedback" / "ghost.txt").exists())
        # the compile cache does not outlive the run
        self.assertEqual(list(self.out.glob("cache-*")), [])

    def test_one_bad_submission_never_stops_the_class(self):
        for name, why in (("badcrc", "Bad CRC-32"), ("truncated", "could not be unpacked"),
                          # (whichever bound it meets first: bytes, or time on a busy machine)
                          ("bomb", "unpacks to more than 64 MiB|takes more than 20 s"),
                          ("@SUM_1_1", "could not be unpacked")):
            # (a formula's row starts with an apostrophe: see the next test)
            row = self.book.get(name) or self.book["'" + name]
            self.assertEqual(row["total"], "0", name)
            self.assertRegex(self.feedback(name), why, name)
        # a name like another's results folder is graded as itself, and good is still good
        self.assertEqual(self.book["good.results"]["total"], "10", self.feedback("good.results"))
        self.assertEqual(self.book["good"]["total"], "10", self.feedback("good"))

    def test_an_int_index_fails_01_2_in_the_sandbox(self):
        fb = self.feedback("int32")
        self.assertRegex(fb, r"\n01\.2 +0/2 +FAIL", fb)
        self.assertIn("overflowed to a negative number", fb)
        self.assertEqual(int(self.book["int32"]["total"]), int(self.book["good"]["total"]) - 2)

    def test_late_policy_never_from_file_times(self):
        # envspy's files say 2026-12-20, weeks late; the roster gives no time: no penalty, and
        # the feedback says why
        self.assertEqual((self.book["envspy"]["submitted"], self.book["envspy"]["days_late"],
                          self.book["envspy"]["penalty"]), ("", "0", "0"))
        self.assertIn("file times are not used", self.feedback("envspy"))

    def test_reports_are_clean_of_controls_and_formulas(self):
        text = self.everything_of("crash")
        self.assertIn("csi", text)   # what came around the controls is there...
        for c in ("\x1b", "\x9b", "\x01", "\x07", "\u202e"):   # ...the controls are not
            self.assertNotIn(c, text, repr(c))
        raw = (self.out / "gradebook.csv").read_text()
        self.assertIn("\n'@SUM_1_1,", raw)
        self.assertIn(",'=HYPERLINK(1),", raw)
        for line in raw.splitlines():
            for c in next(csv.reader([line])):
                self.assertFalse(c.startswith(("=", "+", "-", "@", "\t", "\r")), line)

    def test_the_graders_environment_stays_out(self):
        fb = self.feedback("envspy")
        self.assertIn("env-dump", fb)   # the code ran, and printed what it found
        for secret in (f"grader-token-{self.token}", f"mk-{self.token}",
                       str(self.dir / "submissions"), "SUBMISSIONS=", "MAKEFLAGS=",
                       f"ROSTER={self.roster}", "MAKELEVEL="):
            self.assertNotIn(secret, self.everything_of("envspy"), secret)

    def test_tampering_changes_nothing(self):
        self.assertEqual(self.book["tampered_solution"]["total"], "10")
        self.assertEqual(self.book["tampered_stub"]["total"], "0")
        self.assertIn("todo", self.feedback("tampered_stub"))

    def test_crash_hang_flood_score_zero_on_their_exercises_only(self):
        for name, zero in (("crash", {"01.3"}), ("hang", {"01.3", "01.5"}),
                           ("flood", {"01.3"}), ("greedy", {"01.3"})):
            row = self.book[name]
            for ex in ("01.1", "01.2", "01.3", "01.4", "01.5"):
                want = "0" if ex in zero else self.book["good"][ex]
                self.assertEqual(row[ex], want, f"{name} {ex}: {self.feedback(name)}")
        # a crash in the test's process, or in the worker that runs the library
        self.assertRegex(self.feedback("crash"), r"crashed \(SIGABRT\)|killed by SIGABRT")
        # stopped by its time limit: the test's (wall clock) or the submission's CPU time,
        # whichever comes first on this machine; either way the row says the 10 s
        self.assertRegex(self.feedback("hang"),
                         r"did not finish within 10 s|more than 10 s of CPU time")
        # the test's own output is capped; a worker's is held back until its call returns,
        # within its file size limit, and so this endless call runs out of time instead
        self.assertRegex(self.feedback("flood"), r"printed more than|did not finish within 10 s"
                                                 r"|more than 10 s of CPU time")
        # malloc(3 GiB) failed: the memory limit
        self.assertRegex(self.feedback("greedy"), r"crashed \(SIGABRT\)|killed by SIGABRT")

    def test_a_file_may_not_include_the_instructors_files(self):
        self.assertEqual(self.book["peek"]["total"], "0")
        self.assertIn("was not compiled", self.feedback("peek"))
        self.assertIn("a file the grader does not provide", self.feedback("peek"))

    def test_a_file_that_does_not_compile(self):
        self.assertEqual(self.book["broken"]["total"], "0")
        self.assertIn("does not compile", self.feedback("broken"))
        self.assertIn("error", self.feedback("broken"))

    def test_an_honest_file_with_a_bom_and_crlf_scores_full_marks(self):
        self.assertEqual(self.book["bom"]["total"], "10", self.feedback("bom"))
        self.assertIn("byte order mark", self.feedback("bom"))

    def test_nothing_escapes_the_sandbox(self):
        self.assertEqual(self.book["escape"]["total"], "10", self.feedback("escape"))
        for f in (REPO / "common" / f"tut_tampered_{self.token}.py",
                  self.hidden / f"01_tampered_{self.token}.py",
                  self.out / f"tampered_{self.token}"):
            self.assertFalse(f.exists(), f"the submission wrote {f}")
        self.assertEqual(self.connections, 0, "the submission reached the network")
        self.assertEqual(self.lingering, [], "a process of the submission outlived its test")
        # the students graded after it were graded by the untouched harness
        self.assertEqual(self.book["tampered_stub"]["total"], "0")

    def test_hidden_tests_stay_hidden(self):
        secret = f"hidden-token-{self.token}"
        for name in ("spy", "embed", "good", "crash"):
            # in-process, a hidden test's own run has the hidden tests in view, and the
            # student's code shares its process: only the worker/checker split keeps them
            if isolated() or name != "spy":
                self.assertNotIn(secret, self.everything_of(name), name)
        if isolated():   # in-process, it crashes the hidden test it reads (withheld output)
            self.assertEqual(self.book["spy"]["total"], "10", self.feedback("spy"))
        self.assertEqual(self.book["embed"]["total"], "0")   # the file is not in its view
        # the .incbin fails where the assembler runs: at the compile, or, where the emulator's
        # build links with LTO (emu/emu.mk, EMU_LTO), at the link, which is sandboxed too
        self.assertRegex(self.feedback("embed"), "does not compile|does not link")
        # an instructor's hidden test that raises: its traceback shows neither source nor path
        fb = self.feedback("good")
        self.assertIn("01.3+oops", fb)
        self.assertIn("KeyError", fb)
        for everything in (fb, self.everything_of("good")):
            self.assertNotIn(f"src-{self.token}", everything)
            self.assertNotIn(str(self.hidden), everything)

    def test_hidden_output_follows_its_visibility(self):
        res = json.loads((self.out / "results" / "hang" / "results.json").read_text())
        vis = {t["name"].split()[0]: t["visibility"] for t in res["tests"]}
        self.assertEqual(vis["01.2+big-prime"], "after_due_date")
        self.assertEqual(vis["01.3+oops"], "visible")
        self.assertEqual(vis["01.1"], "visible")

    def test_the_verdict_is_out_of_the_students_reach(self):
        if not isolated():
            self.skipTest("no worker/checker split in this tree (common/tut_remote.py)")
        self.assertEqual(self.book["forger"]["total"], "0", self.feedback("forger"))

    def test_regrading_one_student_updates_its_row(self):
        others = {n: dict(r) for n, r in self.book.items() if n != "broken"}
        fixed = self.dir / "submissions" / "broken" / "chapters" / CH / CU
        fixed.write_text(solution())
        r = run(self.make + ["ONLY=broken"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("grading 1 submission(s)", r.stdout)
        book = self.gradebook()
        self.assertEqual(book["broken"]["total"], "10")
        self.assertEqual({n: r for n, r in book.items() if n != "broken"}, others)
        r = run(self.make + ["ONLY=broken", "SEED=8"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("a regrade uses the class's seed", r.stderr)

    def test_reports_have_their_formats(self):
        res = json.loads((self.out / "results" / "good" / "results.json").read_text())
        self.assertEqual(res["score"], 10)
        names = [t["name"] for t in res["tests"]]
        self.assertTrue(any(n.startswith("01.2+big-prime") for n in names), names)
        for t in res["tests"]:
            self.assertLessEqual({"name", "score", "max_score", "output", "visibility"}, set(t))
            self.assertIn(t["visibility"], ("visible", "hidden", "after_due_date",
                                            "after_published"))
        score = json.loads((self.out / "results" / "crash" / "score.json").read_text())
        self.assertEqual(score["score"], 9)
        for name in ("crash", "flood", "good"):
            check_junit(self, (self.out / "results" / name / "junit.xml").read_bytes())

    def test_make_grade_fails_unless_every_point_is_earned(self):
        r = run(["make", "--no-print-directory", "-C", str(REPO), "grade", "CH=01",
                 f"BUILD={self.dir / 'build'}", "BACKEND=cpu", f"PYTHON={sys.executable}"])
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)   # make's code for "failed"
        self.assertIn("0 of 9 points", r.stdout)


def _comm(proc_dir):
    try:
        return (proc_dir / "comm").read_text().strip()
    except OSError:
        return ""


def check_junit(test, data):
    """Well-formed, and what the JUnit schema requires (testsuite name, tests, failures,
    errors, time, timestamp without a zone, hostname; testcase name, classname, time; no
    attribute it lacks, such as points)."""
    import xml.etree.ElementTree as ET
    test.assertNotIn(b"\x1b", data)
    test.assertIsNone(re.search(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", data))
    root = ET.fromstring(data)
    test.assertEqual(root.tag, "testsuite")
    test.assertEqual(set(root.attrib), {"name", "tests", "failures", "errors", "time",
                                        "timestamp", "hostname"})
    test.assertRegex(root.get("timestamp"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
    float(root.get("time"))
    kids = [c.tag for c in root]
    test.assertEqual(kids[0], "properties")
    test.assertEqual(kids[-2:], ["system-out", "system-err"])
    cases = root.findall("testcase")
    test.assertEqual(int(root.get("tests")), len(cases))
    test.assertEqual(int(root.get("failures")), len(root.findall("testcase/failure")))
    test.assertEqual(int(root.get("errors")), len(root.findall("testcase/error")))
    for c in cases:
        test.assertEqual(set(c.attrib), {"name", "classname", "time"})
        float(c.get("time"))
        for f in c:
            test.assertIn(f.tag, ("failure", "error", "skipped"))
            if f.tag == "skipped":   # only a test worth no points here (01.5+speed on a cpu)
                test.assertEqual(set(f.attrib), {"message"})
                test.assertRegex(c.get("name"), r"\+speed ")
                continue
            test.assertLessEqual(set(f.attrib), {"message", "type"})
            test.assertIn("type", f.attrib)
    for p in root.find("properties"):
        test.assertEqual((p.tag, set(p.attrib)), ("property", {"name", "value"}))


class Verdict(unittest.TestCase):
    """The forger of Grading, graded with its library inside the test's process (ISOLATE=0):
    the attack is real, so that Grading's 0 points shows the worker/checker split holding."""

    def test_in_process_the_forgery_works(self):
        if not (REPO / "common" / "tut_remote.py").exists():
            self.skipTest("no worker/checker split in this tree (common/tut_remote.py)")
        d = scratch("verdict")
        sub = d / "submissions" / "forger" / "chapters" / CH
        sub.mkdir(parents=True)
        (sub / CU).write_text(touched_stub() + FORGE)
        r = run(["make", "--no-print-directory", "-C", str(REPO), "grade-all",
                 f"SUBMISSIONS={d / 'submissions'}", "CH=01", "TIMEOUT=20", "JOBS=2", "SEED=7",
                 f"BUILD={d / 'build'}", "BACKEND=cpu", f"PYTHON={sys.executable}",
                 "ISOLATE=0"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(d / "build" / "grade-all" / "gradebook.csv", newline="") as f:
            rows = {row["student"]: row for row in csv.DictReader(f)}
        self.assertEqual(rows["forger"]["total"], "9")
        self.assertEqual(rows["forger"]["sandbox"], "in-process")

class Platforms(unittest.TestCase):
    """make gradescope's autograder, run as Gradescope runs it (a folder laid out as /autograder,
    no GPU), within Gradescope's default 768 MB; PrairieLearn's and Classroom 50's result
    files from the same packaged course."""

    @classmethod
    def setUpClass(cls):
        cls.dir = scratch("platforms")
        hidden = cls.dir / "hidden"
        hidden.mkdir()
        (hidden / "01_extra.py").write_text(HIDDEN_TEST)
        env = dict(os.environ, PYTHON=sys.executable)
        cls.make = run(["make", "--no-print-directory", "-C", str(REPO), "gradescope", "CH=01",
                        f"HIDDEN={hidden}", f"BUILD={cls.dir / 'build'}",
                        f"PYTHON={sys.executable}"])
        cls.zip = cls.dir / "build" / "gradescope" / "autograder.zip"
        if cls.make.returncode:
            return
        root = cls.root = cls.dir / "autograder"
        with zipfile.ZipFile(cls.zip) as z:
            cls.names = z.namelist()
            z.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            (root / "source" / script).chmod(0o755)
        (root / "submission").mkdir()
        (root / "submission" / CU).write_text(solution())   # uploaded as the bare file
        (root / "submission_metadata.json").write_text(json.dumps(
            {"created_at": "2026-12-01T10:00:00.000000-08:00", "assignment": {}}))
        cls.setup = run([str(root / "source" / "setup.sh")], env=env)
        cls.peak = 0
        if cls.setup.returncode == 0:
            cls.graded, cls.peak = run_measured([str(root / "source" / "run_autograder")],
                                                dict(env, AUTOGRADER_ROOT=str(root)))
            print(f"run_autograder: peak resident memory {cls.peak / (1 << 20):.0f} MiB",
                  file=sys.stderr)

    def setUp(self):
        self.assertEqual(self.make.returncode, 0, self.make.stdout + self.make.stderr)
        self.assertEqual(self.setup.returncode, 0, self.setup.stdout + self.setup.stderr)

    def test_the_zip_holds_what_gradescope_runs_and_no_answers(self):
        self.assertIn("setup.sh", self.names)
        self.assertIn("run_autograder", self.names)
        self.assertIn("course/tools/grade.py", self.names)
        self.assertIn("hidden/01_extra.py", self.names)
        self.assertFalse([n for n in self.names if n.startswith("course/solutions/")
                          or n == "course/docs/instructor.md"])

    def test_run_autograder_writes_results_json_within_768_mb(self):
        self.assertEqual(self.graded.returncode, 0, self.graded.stdout + self.graded.stderr)
        res = json.loads((self.root / "results" / "results.json").read_text())
        self.assertEqual(res["score"], 10, res)
        self.assertIsInstance(res["execution_time"], int)
        for t in res["tests"]:
            self.assertLessEqual({"name", "score", "max_score", "status", "output",
                                  "visibility"}, set(t))
        vis = {t["name"].split()[0]: t["visibility"] for t in res["tests"]}
        self.assertEqual(vis["01.2+big-prime"], "after_due_date")
        self.assertLess(self.peak, 768 << 20, f"peak resident memory {self.peak >> 20} MiB")

    def test_without_cap_sys_admin_a_constructor_cheat_scores_0(self):
        """Gradescope and PrairieLearn run graders in Docker as root without CAP_SYS_ADMIN: no
        namespace can be made. Their entry points, run so, must still keep the student's
        library out of the process that writes the verdict: the forger (a constructor that
        writes a PASS row and exits) scores 0, an honest solution every point."""
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv (util-linux), as the platforms run it")
        # without namespaces the sandbox runs student code as another user, straight from
        # this checkout: one in a folder only root may enter (mktemp -d) is closed to it
        from test_isolation import other_user_can_run_the_worker
        if other_user_can_run_the_worker():
            self.skipTest(other_user_can_run_the_worker())
        nocap = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--"]
        probe = run(nocap + ["sh", "-c", "grep CapBnd /proc/self/status"])
        self.assertEqual(probe.returncode, 0, probe.stderr)
        self.assertFalse(int(probe.stdout.split()[1], 16) & (1 << 21), probe.stdout)
        env = dict(os.environ, PYTHON=sys.executable)
        for name, text, want_gs, want_pl in (("forger", touched_stub() + FORGE, 0, 0.0),
                                             ("honest", solution(), 10, 1.0)):
            # Gradescope: /autograder/{source,submission,results} and submission_metadata.json
            gs = self.dir / f"nocap-{name}"
            (gs / "submission").mkdir(parents=True)
            (gs / "source").symlink_to(self.root / "source")
            (gs / "submission" / CU).write_text(text)
            r = run(nocap + [str(gs / "source" / "run_autograder")],
                    env=dict(env, AUTOGRADER_ROOT=str(gs)))
            res = json.loads((gs / "results" / "results.json").read_text())
            self.assertEqual(res["score"], want_gs, f"{name}: {res}\n{r.stdout}{r.stderr}")
            # PrairieLearn: /grade/{student,results}, run.sh beside the course
            pl = self.dir / f"nocap-pl-{name}"
            (pl / "student").mkdir(parents=True)
            (pl / "student" / CU).write_text(text)
            shutil.copy2(REPO / "tools" / "platforms" / "prairielearn" / "run.sh",
                         self.root / "source" / "run.sh")
            r = run(nocap + [str(self.root / "source" / "run.sh")],
                    env=dict(env, GRADE_ROOT=str(pl)))
            res = json.loads((pl / "results" / "results.json").read_text())
            self.assertEqual(res.get("score"), want_pl, f"{name}: {res}\n{r.stdout}{r.stderr}")

    def test_prairielearn_and_classroom50_results(self):
        sub = self.dir / "carol"
        sub.mkdir()
        (sub / CU).write_text(solution().replace("i += stride", "i += stride * 2", 1))
        course = self.root / "source" / "course"
        env = dict(os.environ, CLASSROOM="cuda", ASSIGNMENT="ch01",
                   SUBMISSION_TAG="submit/2026-12-01T10-00-00Z-abc1234",
                   COMMIT_URL="https://example.invalid/c", RELEASE_URL="https://example.invalid/r")
        r = run([sys.executable, str(course / "tools" / "grade.py"), "--submission", str(sub),
                 "--out", str(self.dir / "carol-out"), "--chapters", "01", "--hidden",
                 str(self.root / "source" / "hidden"), "--seed", "3", "--platform",
                 f"prairielearn={self.dir / 'pl.json'}", "--platform",
                 f"classroom50={self.dir / 'result.json'}"], env=env, cwd=course)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)   # not every point
        pl = json.loads((self.dir / "pl.json").read_text())
        self.assertIs(pl["gradable"], True)
        self.assertAlmostEqual(pl["score"], 0.8)
        self.assertEqual(sum(t["points"] for t in pl["tests"]), 8)
        self.assertEqual(sum(t["max_points"] for t in pl["tests"]), 10)
        for t in pl["tests"]:
            self.assertLessEqual({"name", "points", "max_points", "message", "output"}, set(t))
        c50 = json.loads((self.dir / "result.json").read_text())
        # the checks Classroom 50's runner and collector make (validate_result)
        self.assertEqual(c50["schema"], "classroom50/result/v1")
        self.assertEqual((c50["classroom"], c50["assignment"]), ("cuda", "ch01"))
        self.assertTrue(c50["submission"].startswith("submit/"))
        for field in ("commit", "release", "review", "datetime"):
            self.assertIsInstance(c50[field], str)
            self.assertTrue(c50[field])
        self.assertRegex(c50["datetime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual((c50["score"], c50["max-score"]), (8, 10))
        for t in c50["tests"]:
            self.assertEqual(set(t), {"test-name", "passed", "score", "max-score"})
            self.assertIsInstance(t["passed"], bool)
            self.assertTrue(0 <= t["score"] <= t["max-score"])


CONTAINER = REPO / "tools" / "platforms" / "gradescope" / "container.py"


class GradescopeContainer(unittest.TestCase):
    """make gradescope's autograder run as Gradescope runs it, and make prairielearn's run.sh
    as PrairieLearn's external grader does, in a container: root with
    Docker's default capabilities (no CAP_SYS_ADMIN: the grader's sandbox cannot make a
    namespace and runs in its uid mode), the image's filesystem, /autograder/run_autograder
    (tools/platforms/gradescope/container.py). The solution scores every point; a constructor
    that writes a passing row into the results file and exits scores 0. Skipped, with the
    reason, where no container can be made (no podman or no local image, not root): CI."""

    @classmethod
    def setUpClass(cls):
        probe = run([sys.executable, str(CONTAINER), "--probe"])
        if probe.returncode != 0:
            raise unittest.SkipTest(probe.stdout.strip() or probe.stderr.strip())
        cls.dir = scratch("gradescope-container")
        cls.make = run(["make", "--no-print-directory", "-C", str(REPO), "gradescope",
                        "prairielearn", "CH=01", f"BUILD={cls.dir / 'build'}",
                        f"PYTHON={sys.executable}"])
        if cls.make.returncode:
            return
        subs = []
        for name, text in (("honest", solution()), ("forger", touched_stub() + FORGE)):
            (cls.dir / name).mkdir()
            (cls.dir / name / CU).write_text(text)
            subs.append(f"{name}={cls.dir / name}")
        # setup.sh's layer (the emulator built in the image) is kept between runs, by content
        cls.graded, cls.rows = {}, {}
        for platform, package in (("gradescope", ["--zip", "gradescope/autograder.zip"]),
                                  ("prairielearn", ["--prairielearn", "prairielearn"])):
            package[1] = str(cls.dir / "build" / package[1])
            r = cls.graded[platform] = run(
                [sys.executable, str(CONTAINER), *package, "--work",
                 str(SCRATCH / "container-layers")] + subs, timeout=1800)
            for line in r.stdout.splitlines():
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    cls.rows[platform, row["name"]] = row

    def setUp(self):
        self.assertEqual(self.make.returncode, 0, self.make.stdout + self.make.stderr)
        for r in self.graded.values():
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_no_cap_sys_admin_inside(self):
        self.assertEqual(len(self.rows), 4, self.rows)
        for row in self.rows.values():
            self.assertEqual(row["cap_bnd"], 0xa80425fb, row)   # Docker's default set
            self.assertIs(row["cap_sys_admin"], False, row)

    def test_the_solution_scores_every_point_and_the_forger_0(self):
        # Gradescope: points (chapter 01 has 9); PrairieLearn: a fraction
        for platform, name, want, top in (("gradescope", "honest", 9, 9),
                                          ("gradescope", "forger", 0, 9),
                                          ("prairielearn", "honest", 1.0, 1.0),
                                          ("prairielearn", "forger", 0.0, 1.0)):
            row = self.rows.get((platform, name))
            self.assertIsNotNone(row, f"{platform} {name}: no row\n{self.graded[platform]}")
            log = Path(row["log"]).read_text(errors="replace")[-3000:]
            self.assertEqual((row["status"], row["max"]), (0, top), f"{row}\n{log}")
            self.assertEqual(row["score"], want, f"{platform} {name}: {row}\n{log}")


class Unpack(unittest.TestCase):
    """tools/grade.py's reading of archives and tools/reports.py's cleaning, on their own (a
    second, no grading): what Grading checks through a class run, at the edges."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, str(REPO / "tools"))
        import grade
        import reports
        cls.grade, cls.reports = grade, reports
        cls.dir = scratch("unpack")

    def test_a_bomb_is_bounded_by_what_it_unpacks_to(self):
        for ext, compress in ((".tar.xz", lzma.compress), (".tar.bz2", bz2.compress),
                              (".tgz", __import__("gzip").compress)):
            f = self.dir / f"bomb{ext}"
            f.write_bytes(bomb(compress, 16 << 30))
            started = time.monotonic()
            with self.assertRaisesRegex(self.grade.Unreadable,
                                        "more than 64 MiB|more than 20 s"):
                self.grade.submission_files(f)
            # bounded by 64 MiB of decompression, not 16 GiB (no timing assertion: a busy
            # machine; the figure goes to the log)
            print(f"{f.name} ({f.stat().st_size} bytes, claims 16 GiB): refused in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr)

    def test_a_zip_with_many_entries_and_a_lying_size(self):
        many = self.dir / "many.zip"
        with zipfile.ZipFile(many, "w") as z:
            for i in range(10_001):
                z.writestr(f"f{i}", b"")
        with self.assertRaisesRegex(self.grade.Unreadable, "entries"):
            self.grade.submission_files(many)
        lying = self.dir / "lying.zip"
        with zipfile.ZipFile(lying, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(CU, b"x" * 100_000)
        data = bytearray(lying.read_bytes())
        # the central directory's uncompressed size says 10 bytes: reading stops there, and the
        # CRC of those 10 bytes fails
        cd = data.rfind(b"PK\x01\x02")
        data[cd + 24:cd + 28] = (10).to_bytes(4, "little")
        lying.write_bytes(data)
        with self.assertRaises(self.grade.Unreadable):
            self.grade.submission_files(lying)

    def test_clean_and_cell(self):
        clean, cell = self.reports.clean, self.reports.cell
        self.assertEqual(clean("a\x9b31mb\x1b[1mc\x9d0;t\x07d\u202ee\x85f\r\ng\th"),
                         "abcdef\ng\th")
        for formula in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1", "\uff1d1"):
            self.assertTrue(str(cell(formula)).startswith("'"), formula)
        self.assertEqual((cell(-2), cell(1.5), cell("alice")), (-2, 1.5, "alice"))
        self.assertEqual(self.reports.clean_all({"k\x9b": ["\x1b[2Jx", 3]}), {"k": ["x", 3]})


SLURM_CONF = """ClusterName=tut
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=grade Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurm(unittest.TestCase):
    """make grade-slurm on a one-node Slurm cluster started here (munged, slurmctld, slurmd,
    each with its own files in a scratch folder): two array tasks grade three submissions in
    the sandbox, and one gradebook comes back, a broken archive's row included."""

    @classmethod
    def setUpClass(cls):
        cls.why_not = ""
        cls.pids = []
        missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")
                   if not shutil.which(t)]
        if missing:
            cls.why_not = f"no {', '.join(missing)} (Debian: munge slurmctld slurmd slurm-client)"
            return
        if os.geteuid() != 0:
            cls.why_not = "a test cluster's daemons run as root here"
            return
        d = cls.dir = scratch("slurm")
        # short paths: a UNIX socket's path has a 108-byte limit
        cls.run_dir = Path(tempfile.mkdtemp(prefix="tut-slurm-"))
        r = cls.run_dir
        (r / "state").mkdir()
        (r / "spool").mkdir()
        (r / "munge.key").write_bytes(os.urandom(1024))
        (r / "munge.key").chmod(0o600)
        host = socket.gethostname().split(".")[0]
        (r / "slurm.conf").write_text(SLURM_CONF.format(
            host=host, d=r, ctld_port=free_port(), slurmd_port=free_port()))
        cls.env = dict(os.environ, SLURM_CONF=str(r / "slurm.conf"), PYTHON=sys.executable)
        for cmd in (["munged", f"--socket={r}/munge.sock", f"--key-file={r}/munge.key",
                     f"--pid-file={r}/munged.pid", f"--log-file={r}/munged.log",
                     f"--seed-file={r}/munged.seed", "--force"],
                    ["slurmctld", "-i"], ["slurmd"]):
            started = run(cmd, env=cls.env)
            if started.returncode:
                cls.why_not = f"{cmd[0]} could not start: {started.stderr.strip()[-300:]}"
                return
        for _ in range(100):   # the node registers with the controller
            cls.pids = []      # each daemon writes its pid file once it has detached
            for name in ("munged", "slurmctld", "slurmd"):
                with contextlib.suppress(OSError, ValueError):
                    cls.pids.append(int((r / f"{name}.pid").read_text()))
            info = run(["sinfo", "-h", "-o", "%t"], env=cls.env)
            if info.stdout.strip() in ("idle", "mix") and len(cls.pids) == 3:
                break
            time.sleep(0.2)
        else:
            cls.why_not = f"the node did not come up: {info.stdout}{info.stderr}"
            return
        subs = d / "submissions"
        for name, text in (("alice", solution()), ("bob", stub())):
            (subs / name / "chapters" / CH).mkdir(parents=True)
            (subs / name / "chapters" / CH / CU).write_text(text)
        (subs / "carol.zip").write_bytes(b"PK not a zip")
        cls.out = d / "grade-all"
        # the tree's own build (its emulator is built already); only the gradebook goes apart
        cls.proc = run(["make", "--no-print-directory", "-C", str(REPO), "grade-slurm",
                        f"SUBMISSIONS={subs}", "CH=01", "GROUP=2", "TIMEOUT=60", "SEED=7",
                        f"GRADE_OUT={cls.out}", "BACKEND=cpu", f"PYTHON={sys.executable}"]
                       + ([f"BUILD={os.environ['TUT_BUILD']}"] if "TUT_BUILD" in os.environ
                          else []), env=cls.env)

    @classmethod
    def tearDownClass(cls):
        run_dir = getattr(cls, "run_dir", None)
        for name in ("munged", "slurmctld", "slurmd") if run_dir else ():
            with contextlib.suppress(OSError, ValueError):   # (a start that failed half way)
                pid = int((run_dir / f"{name}.pid").read_text())
                if pid not in cls.pids:
                    cls.pids.append(pid)
        for pid in reversed(cls.pids):   # only the daemons this test started
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            # gone before their folder goes (a slurmd whose spool vanished lingers), else killed
            for _ in range(50):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if getattr(cls, "run_dir", None):
            shutil.rmtree(cls.run_dir, ignore_errors=True)

    def setUp(self):
        if self.why_not:
            self.skipTest(self.why_not)
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)

    def test_array_tasks_grade_into_one_gradebook(self):
        with open(self.out / "gradebook.csv", newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        self.assertEqual(rows["alice"]["total"], "9", self.proc.stdout)
        self.assertEqual(rows["bob"]["total"], "0")
        self.assertEqual(rows["carol"]["total"], "0")
        self.assertIn("could not be unpacked", (self.out / "feedback" / "carol.txt").read_text())
        self.assertEqual({r["sandbox"] for r in rows.values() if r["student"] != "(max)"},
                         {"isolated" if isolated() else "in-process"})
        # two tasks (GROUP=2 of 3), each graded its own group, through Slurm
        logs = {p.name: p.read_text() for p in (self.out / "slurm").glob("*.log")}
        self.assertEqual(sorted(logs), ["0.log", "1.log"], self.proc.stdout)
        self.assertIn("slurm task 0 of 2: grading alice, bob", logs["0.log"])
        self.assertIn("slurm task 1 of 2: grading carol", logs["1.log"])
        self.assertEqual(json.loads((self.out / "run.json").read_text())["seed"], 7)


def run_measured(cmd, env):
    """Run cmd; also the peak of the resident memory of it and all its descendants together,
    sampled every 20 ms from /proc."""
    import threading
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            parents = {}
            for p in Path("/proc").glob("[0-9]*"):
                try:
                    stat = (p / "stat").read_text()
                    parents[int(p.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
            tree, grew = {proc.pid}, True
            while grew:
                more = {c for c, pp in parents.items() if pp in tree} - tree
                grew = bool(more)
                tree |= more
            total = 0
            for pid in tree:
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) << 10
                except OSError:
                    pass
            peak[0] = max(peak[0], total)
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    out, err = proc.communicate()
    t.join()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), peak[0]


if __name__ == "__main__":
    unittest.main(verbosity=2)
