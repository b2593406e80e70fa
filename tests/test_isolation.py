# SPDX-License-Identifier: MIT
"""unit/isolation: TUT_ISOLATE=1, a chapter's library in a worker process (issues 26, 31).

- the chapters' solutions still pass and their stubs still fail through the proxy, drivers
  unchanged but for their out= declarations;
- the checker's NumPy memory is its own: a call's host arguments are copied to the worker and
  only declared outputs come back (a write to an input fails the call); an address of the
  checker's own memory elsewhere is refused; ctypes out-parameters come back;
- a library that crashes, exits or hangs fails its call (WorkerDied), never hangs the checker;
  one that leaves a thread, a child in a new session or a chain of short-lived processes
  writing memory the checker views is frozen between calls;
- attacks built into chapter 01's library (tests/isolation/*.cu): each is first shown to
  change the verdict in one process, or to have run (so the test has teeth), then shown not to
  change it with isolation: zeroing the checker's memory, a cheat that looks for signs of a
  class run in its environment, a constructor that reads the hidden tests, patches Python or
  writes PASS rows;
- without namespaces (root without CAP_SYS_ADMIN, as Gradescope and PrairieLearn run graders):
  the sandbox runs the worker as a user of its own with seccomp and Landlock, bounds its
  processes, leaves none behind, and the PASS-writing constructor scores nothing; user ids are
  leased apart; a chain forking its successor with no pause is frozen all at once by user id
  (kill(-1) as that user) and leaves no process behind.
The same attacks through the grader and its sandbox: tests/test_classroom.py.
Run by CTest on the cpu backend, after `make`.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
BUILD = Path(os.environ.get("TUT_BUILD", REPO / "build")).resolve()
PY = sys.executable
CH01 = "01_threads_blocks_grids"
SECRET = "hidden-test-secret-7f3a"
# Per chapter: the exercises (and one check) run through the proxy; all of them where quick.
SUBSET = {"00": None, "01": None, "02": None, "03": None, "04": "04.1,04.2,04.3,04.errors",
          "05": None, "06": None, "07": None}


# The worker as the grader's sandbox runs it at the least: under a user of its own. Root (a
# container's CI) could read any process's memory, so as root the worker becomes nobody; under
# an ordinary user it keeps that user, whom the checker's PR_SET_DUMPABLE 0 keeps out.
OTHER_USER = ("setpriv --reuid=65534 --regid=65534 --clear-groups"
              if os.geteuid() == 0 and shutil.which("setpriv") else "")


def other_user_can_run_the_worker():
    """"" when the worker can run as OTHER_USER from this checkout, else why not: a checkout in
    a folder only root may enter (mktemp -d makes one) keeps the worker's script from nobody."""
    if not OTHER_USER:
        return ""
    worker = REPO / "common" / "tut_worker.py"
    r = subprocess.run(OTHER_USER.split() + [sys.executable, "-I", "-S", "-c",
                       f"open({str(worker)!r}).close()"], capture_output=True, text=True)
    return "" if r.returncode == 0 else (
        f"the worker cannot run as another user from this checkout ({r.stderr.strip()[-200:]})")


def chapter_dir(num):
    return next((REPO / "chapters").glob(f"{num}_*"))


def env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TUT_", "CUEMU_"))}
    e.update(TUT_BACKEND="cpu", TUT_BUILD=str(BUILD))
    e.update({k: str(v) for k, v in kw.items()})
    return e


def drive(num, *args, timeout=600, **kw):
    return subprocess.run([PY, str(chapter_dir(num) / "driver.py"), *args], env=env(**kw),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def rows(path):
    return {r["id"]: r for r in json.loads(Path(path).read_text())}


def grade_vars():
    out = subprocess.run(["make", "-s", "--no-print-directory", "grade-vars", "BACKEND=cpu",
                          f"BUILD={BUILD}"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    v = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        v[key] = shlex.split(value)
    return v


def build_chapter01(build, extra, replace=False, defines=()):
    """Chapter 01's exercises (the stubs) plus tests/isolation/<extra>.cu (in their place with
    replace), compiled as the grader compiles a submission, into build/cpu/solutions/
    (TUT_TREE=solutions: the harness then runs every test instead of calling an untouched stub
    "not done")."""
    v = grade_vars()
    work = build / "obj"
    work.mkdir(parents=True, exist_ok=True)
    objs = []
    sources = [] if replace else sorted(chapter_dir("01").glob("*.cu"))
    for src in sources + [REPO / "tests" / "isolation" / f"{extra}.cu"]:
        cpp, obj = work / f"{src.stem}.cpp", work / f"{src.stem}.o"
        subprocess.run(v["rewrite"] + [str(src), str(cpp)], check=True, cwd=REPO)
        subprocess.run(v["cxx"] + v["cxxflags"] + ["-DTUT_BACKEND_CPU", "-Icommon",
                       f"-I{src.parent}", *defines, "-c", "-o", str(obj), str(cpp)],
                       check=True, cwd=REPO, capture_output=True)
        objs.append(str(obj))
    lib = build / "cpu" / "solutions" / f"lib{CH01}.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(v["cxx"] + v["cxxflags"] + ["-shared", "-o", str(lib)] + objs + v["tut_check"]
                   + ["-Wl,--whole-archive"] + v["runtime"] + ["-Wl,--no-whole-archive"]
                   + v["ldlibs"], check=True, cwd=REPO, capture_output=True)
    (build / "cpu" / "common").mkdir(parents=True, exist_ok=True)
    shutil.copy(BUILD / "cpu" / "common" / "libtut_shm.so", build / "cpu" / "common")
    return build


class ThroughTheProxy(unittest.TestCase):
    def test_solutions_pass(self):
        for num, only in SUBSET.items():
            with self.subTest(chapter=num), tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "r.json"
                args = ["--check", "--json", str(out)] + (["--only", only] if only else [])
                r = drive(num, *args, TUT_ISOLATE=1, TUT_TREE="solutions")
                self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
                bad = {k: v["status"] for k, v in rows(out).items()
                       if v["status"] not in ("PASS", "SKIP")}
                self.assertEqual(bad, {})

    def test_stubs_fail(self):
        for num in ("01", "03", "05", "07"):
            with self.subTest(chapter=num):
                r = drive(num, "--check", "--expect-fail", TUT_ISOLATE=1, TUT_TREE="chapters")
                self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
                self.assertIn("stubs fail as they must", r.stdout)

    def script(self, body, timeout=120, **kw):
        """body runs in a fresh checker with TUT_ISOLATE=1 and chapter 01's solutions loaded
        as `lib`; its stdout is returned."""
        code = textwrap.dedent(f"""
            import ctypes, sys
            sys.path.insert(0, {str(REPO / 'common')!r})
            import tut, tut_remote
            import numpy as np
            lib = tut.load_chapter({CH01!r}, "solutions")
        """) + textwrap.dedent(body)
        e = env(TUT_ISOLATE=1, **kw)
        r = subprocess.run([PY, "-c", code], env=e, capture_output=True, text=True,
                           timeout=timeout, cwd=REPO)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        return r.stdout

    def test_numpy_memory_is_the_region_and_out_parameters_come_back(self):
        out = self.script("""
            r = tut_remote._region
            a = np.arange(1000, dtype=np.float32)
            assert a.ctypes.data in r and np.zeros(3).ctypes.data in r
            with tut.DeviceBuffer(lib, a.nbytes) as d:        # byref out-parameter inside
                assert d.ptr.value in r                        # device memory: the region too
                d.upload(a)
                tut.assert_equal(d.download(np.float32, a.shape), a)
            assert lib.device_count() == 1 and lib.mem_info()[1] > 0
            try:   # CUDA's pinned and managed memory cannot be shared with a second process
                tut_remote.RemoteCDLL("libx.so", "gpu")
            except RuntimeError as e:
                print("gpu:", e)
            print("ok", lib.backend)
        """)
        self.assertIn("ok cpu", out)
        self.assertIn("gpu: TUT_ISOLATE=1 runs the library in a worker process, which needs the "
                      "cpu backend", out)

    def test_an_address_of_the_checkers_own_memory_is_refused(self):
        out = self.script("""
            private = ctypes.create_string_buffer(64)   # ctypes memory: not in the region
            with tut.DeviceBuffer(lib, 64) as d:
                try:
                    lib.htod(d.ptr, ctypes.addressof(private), 64)
                except ValueError as e:
                    print("refused:", e)
                lib.htod(d.ptr, private, 64)   # the object itself: copied through the region
                print("copied")
        """)
        self.assertIn("refused: tut_memcpy_htod: argument 2", out)
        self.assertIn("copied", out)

    def misbehaving(self):
        if not hasattr(type(self), "_misbehave"):
            type(self)._tmp = tempfile.mkdtemp(prefix="tut-isolation-")
            type(self)._misbehave = build_chapter01(Path(self._tmp) / "misbehave", "misbehave")
        return self._misbehave

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "_tmp"):
            shutil.rmtree(cls._tmp, ignore_errors=True)

    def test_a_crash_an_exit_or_a_hang_fails_the_call(self):
        build = self.misbehaving()
        out = self.script("""
            for name in ("misbehave_crash", "misbehave_exit", "misbehave_hang"):
                try:
                    lib.bind(name, [])()
                    print(name, "returned")
                except tut.CudaError as e:
                    print(name, "->", e.name, str(e).splitlines()[0])
            print("after:", lib.device_count())   # a fresh worker answers
            # A printf flood past the output limit (RLIMIT_FSIZE on the test's output file)
            import os, resource, tempfile
            with tempfile.TemporaryFile() as f:
                saved = os.dup(1)
                os.dup2(f.fileno(), 1)
                resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.RLIM_INFINITY))
                try:
                    lib.bind("misbehave_flood", [])()
                    what = "returned"
                except tut.CudaError as e:
                    what = str(e).splitlines()[0]
                resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
                os.dup2(saved, 1)
            print("flood ->", what)
        """, TUT_BUILD=build, TUT_WORKER_TIMEOUT=3)
        self.assertIn("misbehave_crash -> WorkerDied", out)
        self.assertIn("killed by SIGSEGV", out)
        self.assertIn("exited with status 3", out)
        self.assertIn("no answer in 3 s", out)
        self.assertIn("after: 1", out)
        self.assertIn("flood -> WorkerDied (-200): the library's process died during copying its "
                      "output: its output could not be written: [Errno 27] File too large", out)

    def test_the_worker_is_frozen_between_calls(self):
        """A thread, a child in a session of its own, or a chain of short-lived processes
        (each forks its successor and exits) that keeps writing memory the checker views (a
        ManagedArray: the worker's own memory, which the checker reads directly) after the
        call returned: frozen until the next call."""
        build = self.misbehaving()
        for fn in ("misbehave_scribble", "misbehave_scribble_elsewhere",
                   "misbehave_scribble_escaping"):
            # It returns once the writer has written; frozen, the array then stays as it is
            # (0.3 s: 100 or more of its writes), after every call; not frozen, it changes.
            probe = f"""
                import os, time
                m = tut.ManagedArray(lib, 1 << 12, np.uint8)
                lib.bind("{fn}", [ctypes.c_void_p, ctypes.c_size_t])(m.address, 1 << 12)
                a = m.array
                for _ in range(3):   # a pause, a call, a pause...: the chain goes on in between
                    first, deadline = a.copy(), time.monotonic() + 20
                    time.sleep(0.3)
                    while os.environ.get("TUT_WORKER_FREEZE") == "0" and (a == first).all() \\
                            and time.monotonic() < deadline:
                        time.sleep(0.01)
                    print("changed" if (a != first).any() else "still")
                    lib.device_count()
                del a
            """
            with self.subTest(fn):
                self.assertIn("changed", self.script(probe, TUT_BUILD=build, TUT_WORKER_FREEZE=0))
                self.assertNotIn("changed", self.script(probe, TUT_BUILD=build))

    def test_only_declared_outputs_come_back(self):
        """A host array the call writes comes back only where the binding declares it an output
        (Library.bind out=); a write to an input fails the call and leaves the checker's copy."""
        out = self.script("""
            a = np.arange(64, dtype=np.uint8)
            b = np.zeros(64, np.uint8)
            with tut.DeviceBuffer(lib, 64) as d:
                d.upload(a)
                lib.dtoh(tut.ptr(b), d.ptr, 64)                   # declared: out=(0,)
                print("declared", (b == a).all())
                c = np.zeros(64, np.uint8)
                raw = lib.bind("tut_memcpy_dtoh", [ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_size_t], out=())
                try:
                    raw(tut.ptr(c), d.ptr, 64)
                except ValueError as e:
                    print("refused:", str(e)[:60])
                print("kept", (c == 0).all())
        """)
        self.assertIn("declared True", out)
        self.assertIn("refused: tut_memcpy_dtoh() wrote the memory of its argument 1", out)
        self.assertIn("kept True", out)


class Attacks(unittest.TestCase):
    """Each attack: in one process it changes the verdict; isolated, it does not."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="tut-attacks-"))
        cls.tmp.chmod(0o755)   # the worker may run as another user (OTHER_USER)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_both(self, attack, other_user=True, **kw):
        if other_user and other_user_can_run_the_worker():
            self.skipTest(other_user_can_run_the_worker() + "; as root it could read the "
                          "checker's memory, so this attack is checked through make "
                          "grade-all's sandbox instead (tests/test_classroom.py, Grading)")
        build = build_chapter01(self.tmp / attack, attack)
        out = {}
        for isolate in ("0", "1"):
            results = self.tmp / f"{attack}-{isolate}.json"
            if isolate == "1" and other_user:
                kw["TUT_WORKER_PREFIX"] = OTHER_USER
            r = drive("01", "--check", "--json", str(results), TUT_TREE="solutions",
                      TUT_BUILD=build, TUT_ISOLATE=isolate, **kw)
            statuses = {k: v["status"] for k, v in rows(results).items()
                        if k in ("01.1", "01.2", "01.3", "01.4", "01.5")} if results.exists() else {}
            out[isolate] = (r, statuses)
        return out

    def test_a_constructor_writing_pass_results_then_exiting(self):
        out = self.run_both("award_pass", other_user=False)   # it may write the file: and then?
        r, statuses = out["0"]
        self.assertEqual((r.returncode, set(statuses.values())), (0, {"PASS"}),
                         "in one process the attack should have worked: the test has no teeth")
        r, statuses = out["1"]
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(statuses and "PASS" not in statuses.values(), statuses)

    def test_a_constructor_patching_python(self):
        out = self.run_both("patch_python")
        r, statuses = out["0"]
        self.assertEqual(set(statuses.values()), {"PASS"}, r.stderr[-2000:])
        r, statuses = out["1"]
        self.assertIn("attack: harness not in this process", r.stderr)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(statuses and "PASS" not in statuses.values(), statuses)

    def test_a_constructor_reading_the_hidden_tests(self):
        hidden = self.tmp / "hidden"
        hidden.mkdir(exist_ok=True)
        (hidden / "01secret.py").write_text(f"# {SECRET}\ndef register(chapter, driver):\n"
                                            f"    pass\n")
        out = self.run_both("read_hidden", TUT_HIDDEN=hidden)
        r, _ = out["0"]
        self.assertIn(SECRET, r.stderr, "in one process the attack should have read the folder")
        r, _ = out["1"]
        self.assertIn("attack: hidden folder not found", r.stderr)
        self.assertNotIn(SECRET, r.stdout + r.stderr)

    def checked(self, build, only, isolate="1", **kw):
        results = self.tmp / f"{build.name}-{isolate}.json"
        r = drive("01", "--check", "--only", only, "--json", str(results), TUT_TREE="solutions",
                  TUT_BUILD=build, TUT_ISOLATE=isolate, **kw)
        found = rows(results) if results.exists() else {}
        # with --json a test's output goes into its row
        r.stderr += "".join(str(v.get("output", "")) for v in found.values())
        return r, {k: v["status"] for k, v in found.items()}

    def test_zeroing_the_checkers_memory(self):
        """Entry points with no kernel that zero the checker's half of the region and their
        output: with the checker's arrays in that memory, 01.2, 01.4 and 01.5 passed. The
        checker's memory is now its own: the worker zeroes only its copy."""
        build = build_chapter01(self.tmp / "memset", "memset_checker", replace=True)
        r, statuses = self.checked(build, "01.2,01.4,01.5")
        self.assertRegex(r.stderr, r"attack: zeroed the checker's half, [1-9]\d* nonzero bytes",
                         "the attack did not run: the test has no teeth")
        self.assertEqual(statuses, {"01.2": "FAIL", "01.4": "FAIL", "01.5": "FAIL"},
                         r.stdout[-2000:] + r.stderr[-2000:])

    def test_a_library_cannot_tell_it_is_graded(self):
        """The same attack, cheating only where its environment shows a class run: the
        checker's environment has them, the worker's is built from an allow-list."""
        build = build_chapter01(self.tmp / "graded", "memset_checker", replace=True,
                                defines=["-DATTACK_ONLY_GRADED"])
        signs = dict(SUBMISSIONS="submissions/", MAKEFLAGS="-j2", GRADER_TOKEN="tok-123",
                     TUT_SEED="42")
        r, _ = self.checked(build, "01.2", isolate="0", **signs)
        self.assertIn("attack: graded", r.stderr, "in one process it should see them")
        r, statuses = self.checked(build, "01.2", **signs)
        self.assertNotIn("attack: graded", r.stderr)
        self.assertEqual(statuses, {"01.2": "FAIL"})


def uid_mode_unavailable():
    """"" when tools/sandbox.py can be run here as root without CAP_SYS_ADMIN (as Gradescope
    and PrairieLearn run a grader: no namespaces, so the sandbox's uid mode), else why not."""
    if os.geteuid() != 0:
        return "not root: uid mode needs CAP_SETUID"
    if not shutil.which("setpriv"):
        return "no setpriv (util-linux) to drop CAP_SYS_ADMIN"
    # uid mode runs the worker as a user of its own, straight from this checkout (no mounts)
    return other_user_can_run_the_worker()


# as Gradescope and PrairieLearn run a grader: root in a container without CAP_SYS_ADMIN
NO_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
SANDBOX = [PY, "-S", str(REPO / "tools" / "sandbox.py")]
# the worker needs only the standard library: the system's Python, which any user may run (a
# checker's venv may be in a folder only root may enter)
SYSTEM_PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else PY


@unittest.skipIf(uid_mode_unavailable(), uid_mode_unavailable())
class WithoutNamespaces(unittest.TestCase):
    """The split holds with no namespace to be made: the worker as a user of its own."""

    UID = 1_999_000 + os.getpid() % 900

    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="tut-uid-"))
        cls.tmp.chmod(0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def boxed(self, *cmd, **kw):
        return subprocess.run(NO_SYS_ADMIN + SANDBOX + ["--uid", str(self.UID)] + list(cmd),
                              capture_output=True, text=True, timeout=120, **kw)

    def test_the_sandbox_runs_as_another_user_with_seccomp(self):
        probe = textwrap.dedent("""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            print("uid", os.getuid())
            for name, call in (("unshare", lambda: libc.unshare(0x10000000)),
                               ("ptrace", lambda: libc.ptrace(16, os.getppid(), 0, 0)),
                               ("kill", lambda: libc.kill(1, 0))):
                rc = call()
                print(name, rc, os.strerror(ctypes.get_errno()))
            print("env", sorted(k for k in os.environ if "SECRET" in k))
        """)
        r = self.boxed("--", SYSTEM_PY, "-I", "-S", "-c", probe,
                       env=dict(os.environ, GRADER_SECRET="x"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"uid {self.UID}", r.stdout)
        self.assertIn("unshare -1 Operation not permitted", r.stdout)
        self.assertIn("ptrace -1 Operation not permitted", r.stdout)
        self.assertIn("kill -1 Operation not permitted", r.stdout)
        self.assertIn("env []", r.stdout)

    def test_a_folder_the_user_cannot_enter_is_named_with_the_fix(self):
        """A course in a folder only root may enter (mktemp -d makes one): the sandbox says
        which folder its user cannot enter, and the chmod that lets it through."""
        closed = self.tmp / "closed"
        (closed / "course").mkdir(parents=True, exist_ok=True)
        closed.chmod(0o700)
        r = self.boxed("--cwd", str(closed / "course"), "--", SYSTEM_PY, "-I", "-S", "-c", "0")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"the sandbox's user cannot enter {closed} (mode 0700)", r.stderr)
        self.assertIn(f"chmod o+x {closed}", r.stderr)

    def test_processes_are_bounded_and_none_outlives_the_command(self):
        """A fork hog: at most --nproc processes of the submission's user, and none left."""
        hog = ("import os, time\nn = 0\nfor _ in range(200):\n    try:\n"
               "        if os.fork() == 0:\n            os.setsid(); time.sleep(600); os._exit(0)\n"
               "        n += 1\n    except OSError:\n        break\nprint('forked', n)\n")
        r = self.boxed("--nproc", "16", "--", SYSTEM_PY, "-I", "-S", "-c", hog)
        self.assertEqual(r.returncode, 0, r.stderr)
        forked = int(r.stdout.split()[-1])
        self.assertLess(forked, 16, r.stdout)
        import sandbox
        self.assertEqual(sandbox.uid_processes(self.UID), [])

    def test_a_constructor_writing_pass_results_scores_nothing(self):
        """award_pass.cu's constructor finds the results file on the checker's command line
        and writes PASS rows there: run as the checker runs under the grader with no
        namespaces (results in a folder of the grader's own), it cannot."""
        build = build_chapter01(self.tmp / "award", "award_pass")
        results = self.tmp / "results"
        results.mkdir(mode=0o700, exist_ok=True)
        out = results / "r.json"
        worker = SANDBOX + ["--uid", str(self.UID), "--ro", str(REPO / "common"),
                            "--ro", str(build), "--mem", str(3 << 30), "--"]
        r = subprocess.run(NO_SYS_ADMIN + [PY, str(chapter_dir("01") / "driver.py"), "--check",
                           "--only", "01.1,01.3", "--json", str(out)], cwd=REPO,
                           capture_output=True, text=True,
                           timeout=600, env=env(TUT_TREE="solutions", TUT_BUILD=build,
                                                TUT_ISOLATE=1,
                                                TUT_WORKER_PYTHON=SYSTEM_PY, TUT_SHM_GIB=1,
                                                TUT_WORKER_PREFIX=shlex.join(worker)))
        statuses = {k: v["status"] for k, v in rows(out).items()} if out.exists() else {}
        self.assertIn("attack: cannot write", r.stderr, r.stderr[-2000:])
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(statuses, {"01.1": "FAIL", "01.3": "FAIL"})

    def test_user_ids_are_leased_apart(self):
        """Two sandboxes (two graders of one node) asking with the same hint (crc32 of
        their workspaces can collide) get two user ids; a released one is free again."""
        import sandbox
        hint = 777_000 + os.getpid() % 1000
        with sandbox.UidLease(hint) as a, sandbox.UidLease(hint) as b:
            self.assertNotEqual(a.uid, b.uid)
            self.assertEqual(a.uid, sandbox.UID_BASE + hint)
            taken = a.uid
        with sandbox.UidLease(hint) as c:
            self.assertEqual(c.uid, taken)

    def test_a_chain_forking_as_fast_as_it_can_is_frozen(self):
        """misbehave_scribble_racing: a process in a session of its own writes a ManagedArray,
        forks its successor at once and exits, over and over, faster than a walk of the process
        tree. With the worker as a user of its own (TUT_WORKER_UID) and the checker root, the
        checker stops them all with one kill(-1, SIGSTOP) as that user: /proc then shows every
        process of the user stopped, and the array stays as it is while frozen (not frozen, it
        changes). No process of the user is left once the checker is done."""
        import sandbox
        build = build_chapter01(self.tmp / "racing", "misbehave")
        worker = SANDBOX + ["--uid", str(self.UID), "--ro", str(REPO / "common"),
                            "--ro", str(build), "--mem", str(3 << 30), "--"]
        probe = textwrap.dedent(f"""
            import ctypes, os, sys, time
            sys.path.insert(0, {str(REPO / 'common')!r})
            import tut, tut_remote
            import numpy as np
            lib = tut.load_chapter({CH01!r}, "solutions")
            m = tut.ManagedArray(lib, 1 << 12, np.uint8)
            lib.bind("misbehave_scribble_racing", [ctypes.c_void_p, ctypes.c_size_t])(
                m.address, 1 << 12)
            a = m.array
            print("by uid" if lib.cdll._worker.signaller else "by tree walk")
            for _ in range(3):   # a pause, a call, a pause...: the chain goes on in between
                first, deadline = a.copy(), time.monotonic() + 20
                time.sleep(0.3)
                while os.environ.get("TUT_WORKER_FREEZE") == "0" and (a == first).all() \\
                        and time.monotonic() < deadline:
                    time.sleep(0.01)
                procs = tut_remote.uid_processes({self.UID})
                running = sorted(p for p, states in procs.items()
                                 if any(s not in "TtZX" for s in states))
                print("changed" if (a != first).any() else "still", len(procs), running)
                lib.device_count()
            del a
        """)
        for freeze in ("0", "1"):
            with self.subTest(freeze=freeze):
                r = subprocess.run(NO_SYS_ADMIN + [PY, "-c", probe], cwd=REPO,
                                   capture_output=True, text=True, timeout=300,
                                   env=env(TUT_BUILD=build, TUT_ISOLATE=1, TUT_SHM_GIB=1,
                                           TUT_WORKER_PYTHON=SYSTEM_PY,
                                           TUT_WORKER_PREFIX=shlex.join(worker),
                                           TUT_WORKER_UID=self.UID, TUT_WORKER_FREEZE=freeze))
                self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
                mode, *lines = r.stdout.splitlines()
                self.assertEqual(mode, "by uid", r.stdout)
                lines = [line.split(" ", 2) for line in lines]
                self.assertEqual(len(lines), 3, r.stdout)
                if freeze == "0":
                    self.assertIn("changed", [w for w, _, _ in lines],
                                  "not frozen the chain should write: the test has no teeth")
                else:
                    for what, count, running in lines:
                        self.assertEqual(what, "still", r.stdout)
                        self.assertGreaterEqual(int(count), 2, r.stdout)   # worker and chain
                        self.assertEqual(running, "[]", r.stdout)
                # none left (zombies reaped by the sandbox just after it ends)
                deadline = time.monotonic() + 10
                while sandbox.uid_processes(self.UID) and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertEqual(sandbox.uid_processes(self.UID), [])


if __name__ == "__main__":
    unittest.main()
