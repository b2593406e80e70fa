# SPDX-License-Identifier: MIT
"""Grade exercises, tamper-proof and sandboxed: one copy (make grade) or a class (make grade-all).

Only the student's exercise .cu files are taken from a submission: those of chapters/NN_x/ that
hold a TODO(student) (chapters/NN_x/.stubs.json lists them). They are placed into a copy of this
(the instructor's) tree, so an edited driver.py, test, common/ file or Makefile changes nothing.
Each file is compiled on its own, and each exercise runs in its own process with a time and an
output limit: a file that does not compile, a test that crashes, hangs or prints megabytes scores
0 on the exercises it touches, and grading goes on. Points come from the `[N points]` of each
exercise's `// @solution` marker (1 by default), hidden tests from HIDDEN=dir (see
docs/instructor.md), which add their own points, and performance tests (Chapter.performance),
which earn a fraction of theirs on the gpu backend and count in no maximum on the cpu one.

Every compile and every run of student code happens in a sandbox (tools/sandbox.py: its own
mount, PID and network namespaces, only the submission's workspace and the tools in view,
limits on memory, CPU, files and processes). Where the course's worker/checker split is there
(common/tut_remote.py), the student's library runs in a worker inside the sandbox while the
chapter's driver, the hidden tests and the results file stay outside it (TUT_ISOLATE=1);
otherwise the whole test runs inside the sandbox ("in-process"), and the reports say so.

    python3 tools/grade.py --submission DIR|ARCHIVE --out DIR [--chapters 01] [--hidden DIR]
    python3 tools/grade.py --all SUBMISSIONS_DIR --out DIR [--jobs N] [--only NAMES] [...]
    python3 tools/grade.py --all SUBMISSIONS_DIR --out DIR --slurm N [--sbatch-args ...] [...]

A class is graded whatever its submissions hold: an archive that is corrupt, too big or too slow
to unpack, a name that clashes, a crash of the grader itself: each is that student's row with
the reason, and the gradebook is always written. Late penalties come from the time the platform
or the roster gives, never from file times. Every report is cleaned of control characters, and
no gradebook cell starts as a spreadsheet formula. --slurm N: one Slurm array task per N
submissions (`make grade-slurm`), merged into one gradebook.

Writes, per submission: score.json (points per exercise and test), results.json (Gradescope's
format), junit.xml and feedback.txt (the failure messages `make check` prints); with --all also
gradebook.csv and run.json (what a regrade with --only must match). --platform NAME=FILE
(gradescope, prairielearn, classroom50) writes that platform's result file as well.
Python standard library only (the drivers it runs use NumPy).
"""
import argparse
import ast
import bz2
import concurrent.futures
import contextlib
import csv
import ctypes
import datetime
import fcntl
import gzip
import hashlib
import json
import lzma
import math
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
import zlib
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import reports  # noqa: E402
import sandbox  # noqa: E402

ARCHIVES = (".zip", ".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_SOURCE = 1 << 20        # bytes: a larger "exercise file" in a submission is ignored
BOM = b"\xef\xbb\xbf"
SANDBOX_WORDS = {"isolated": "sandboxed; the student's library in a worker, the verdict "
                             "outside it",
                 "in-process": "sandboxed, but the student's library shares the test's process "
                               "(no worker/checker split here): it could forge its own result",
                 "none": "NOT sandboxed: student code ran with the grader's rights"}


# What of the grader's environment a compile or a test gets (Grader.child_env): the locale, the
# thread counts of NumPy's libraries, and where CUDA and its libraries are. No token, no
# MAKEFLAGS or SUBMISSIONS=, nothing of the instructor's paths.
ENV_KEEP = {"PATH", "LANG", "LANGUAGE", "TZ", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
            "MKL_NUM_THREADS", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
            "CUDA_VISIBLE_DEVICES"}


# a performance test's row on the cpu backend (common/tut/runner.py, perf_skip, says the same)
PERF_CPU = ("performance is timed on a GPU only (the emulator's time says nothing about one): "
            "its points need BACKEND=gpu (make grade BACKEND=gpu)")

# what _check_gpu runs in a sandbox: the driver's own first call, and a context
GPU_CHECK = ("import ctypes, sys\n"
             "cu = ctypes.CDLL('libcuda.so.1')\n"
             "rc = cu.cuInit(0)\n"
             "n = ctypes.c_int(0)\n"
             "rc = rc or cu.cuDeviceGetCount(ctypes.byref(n))\n"
             "print(f'cuInit/cuDeviceGetCount: CUresult {rc}, {n.value} device(s)')\n"
             "sys.exit(0 if rc == 0 and n.value else 1)\n")


def system_submounts():
    """Mount points inside the system's library folders (/usr, /lib...): a container's GPU
    driver libraries are bound there file by file, and a sandbox that binds /usr does not
    bring its submounts along; these are bound on their own (BACKEND=gpu)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    out = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if any(point.startswith(d + "/") for d in sandbox.SYSTEM if d != "/etc") \
                and os.path.exists(point):
            out.add(point)
    return sorted(out)


class GradeError(Exception):
    """A problem with the grader's setup (not with a submission): grading stops."""


# ---- the instructor's tree -----------------------------------------------------------------------
def chapters_to_grade(selection):
    """Chapter directory names, from "01,02" (numbers or names), else every chapter that has
    exercises (a .stubs.json)."""
    all_chapters = sorted(p.parent.name for p in REPO.glob("chapters/[0-9][0-9]_*/.stubs.json"))
    if not selection:
        if not all_chapters:
            raise GradeError("no chapter has exercises (chapters/*/.stubs.json): run "
                             "`make exercises` in the instructor's tree")
        return all_chapters
    out = []
    for want in selection.replace(",", " ").split():
        found = [c for c in all_chapters if c == want or c.startswith(f"{want}_")]
        if len(found) != 1:
            raise GradeError(f"no chapter with exercises matches {want!r} "
                             f"(chapters: {', '.join(c[:2] for c in all_chapters)})")
        out += found
    return out


def manifest(chapter):
    return json.loads((REPO / "chapters" / chapter / ".stubs.json").read_text())


def exercise_files(chapter):
    """The .cu files of a chapter that a student edits (those holding a TODO(student))."""
    return sorted({r["file"] for ex in manifest(chapter)["exercises"].values()
                   for r in ex["regions"]})


def make_vars(backend):
    """Build the shared prerequisites once (emulator, tut_check.o) and read the compile
    commands from the Makefile, so that the grader compiles exactly as `make` does."""
    base = ["make", "-s", "--no-print-directory", "-C", str(REPO), f"BACKEND={backend}"]
    run = subprocess.run(base + ["grade-prereqs"], capture_output=True, text=True)
    if run.returncode:
        raise GradeError(f"could not build the grader's prerequisites:\n{run.stdout}{run.stderr}")
    run = subprocess.run(base + ["grade-vars"], capture_output=True, text=True, check=True)
    out = {}
    for line in run.stdout.splitlines():
        key, _, value = line.partition("=")
        out[key] = value.split()
    return out


def python_with_numpy():
    """The interpreter that runs the drivers: this one if it has NumPy, else the virtual
    environment `make` made."""
    for py in (sys.executable, str(REPO / "build" / "venv" / "bin" / "python")):
        if Path(py).exists() and subprocess.run([py, "-c", "import numpy"],
                                                capture_output=True).returncode == 0:
            return py
    raise GradeError("no Python with NumPy: run `make` first (it makes build/venv)")


# ---- a submission --------------------------------------------------------------------------------
def student_name(path):
    name = path.name
    for ext in ARCHIVES:
        if name.lower().endswith(ext):
            return name[: -len(ext)]
    return name


class Unreadable(Exception):
    """A submission that cannot be read as a whole (a corrupt archive, a bomb): that student's
    row says why, and the class goes on."""


# An archive is read once, eagerly and within these bounds (a 16 KB .tar.bz2 can claim 16 GiB:
# what it unpacks to and how long that takes are what is bounded, not what it says of itself).
ARCHIVE_MAX_BYTES = 64 << 20     # compressed size of the archive itself
ARCHIVE_MAX_UNPACKED = 64 << 20  # bytes decompressed, in all
ARCHIVE_MAX_ENTRIES = 10_000
ARCHIVE_MAX_SECONDS = 20


class _Budget:
    """Bytes and seconds an archive may cost; raises Unreadable past either."""
    def __init__(self, name):
        self.name, self.left = name, ARCHIVE_MAX_UNPACKED
        self.until = time.monotonic() + ARCHIVE_MAX_SECONDS

    def spend(self, n):
        self.left -= n
        if self.left < 0:
            raise Unreadable(f"{self.name} unpacks to more than {ARCHIVE_MAX_UNPACKED >> 20} MiB "
                             f"(an archive bomb?): not graded")
        if time.monotonic() > self.until:
            raise Unreadable(f"{self.name} takes more than {ARCHIVE_MAX_SECONDS} s to unpack: "
                             f"not graded")


class _Metered:
    """A decompressed stream that charges every byte read to a _Budget."""
    def __init__(self, raw, budget):
        self.raw, self.budget = raw, budget

    def read(self, n=-1):
        data = self.raw.read(min(n, 1 << 20) if n is not None and n >= 0 else 1 << 20)
        self.budget.spend(len(data))
        return data


def submission_files(path):
    """{relative posix path: bytes, or None when larger than MAX_SOURCE} for every regular file
    of a folder or an archive, never following links (a link to the instructor's files must
    not be read). Raises Unreadable for an archive that is corrupt, too large or too slow."""
    files = {}
    if path.is_dir():
        for root, dirs, names in os.walk(path, followlinks=False):
            dirs[:] = [d for d in dirs if d not in (".git", "build")]
            for n in names:
                full = Path(root) / n
                if full.is_symlink() or not full.is_file():
                    continue
                files[full.relative_to(path).as_posix()] = _read_capped(full)
        return files
    lower = path.name.lower()
    if not lower.endswith(ARCHIVES):
        raise Unreadable(f"{path.name} is neither a folder nor an archive "
                         f"({', '.join(ARCHIVES)})")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise Unreadable(f"{path.name} could not be read: {e.strerror}")
    if size > ARCHIVE_MAX_BYTES:
        raise Unreadable(f"{path.name} is {size >> 20} MiB, more than the "
                         f"{ARCHIVE_MAX_BYTES >> 20} MiB a submission may be: not graded")
    budget = _Budget(path.name)
    try:
        if lower.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                infos = z.infolist()
                if len(infos) > ARCHIVE_MAX_ENTRIES:
                    raise Unreadable(f"{path.name} has {len(infos)} entries, more than "
                                     f"{ARCHIVE_MAX_ENTRIES}: not graded")
                for info in infos:
                    if info.is_dir():
                        continue
                    if info.file_size > MAX_SOURCE:
                        files[info.filename] = None
                        continue
                    # stops at the size the entry declares, and checks its CRC there
                    data = z.read(info)
                    budget.spend(len(data))
                    files[info.filename] = data
            return files
        # a stream ("r|*"): each member is read once, in order, every byte charged
        with open(path, "rb") as raw:
            stream = _decompressor(raw, lower)
            with tarfile.open(fileobj=_Metered(stream, budget), mode="r|") as t:
                for count, m in enumerate(t, 1):
                    if count > ARCHIVE_MAX_ENTRIES:
                        raise Unreadable(f"{path.name} has more than {ARCHIVE_MAX_ENTRIES} "
                                         f"entries: not graded")
                    if not m.isfile():
                        continue
                    if m.size > MAX_SOURCE:
                        files[m.name] = None
                        continue
                    files[m.name] = t.extractfile(m).read()
                    budget.spend(0)
        return files
    except Unreadable:
        raise
    except (OSError, EOFError, ValueError, tarfile.TarError, zipfile.BadZipFile,
            zipfile.LargeZipFile, NotImplementedError, RuntimeError) as e:
        # bad CRC, truncated, not an archive at all, an encrypted entry, ...
        raise Unreadable(f"{path.name} could not be unpacked ({type(e).__name__}: {e}): "
                         f"not graded; hand in a working archive")


def _decompressor(raw, lower):
    if lower.endswith((".tar.gz", ".tgz")):
        return gzip.GzipFile(fileobj=raw)
    if lower.endswith((".tar.bz2", ".tbz2")):
        return bz2.BZ2File(raw)
    if lower.endswith((".tar.xz", ".txz")):
        return lzma.LZMAFile(raw)
    return raw


def _read_capped(f):
    try:
        if f.stat().st_size > MAX_SOURCE:
            return None
        return f.read_bytes()
    except OSError:
        return None


def find_source(files, chapter, name):
    """The submission's path for chapters/<chapter>/<name>: a whole copy of the course, the
    chapter folder, or the bare file (when there is exactly one of that name)."""
    paths = [p for p in files if not PurePosixPath(p).is_absolute() and ".." not in
             PurePosixPath(p).parts and PurePosixPath(p).name == name]
    for suffix in (f"chapters/{chapter}/{name}", f"{chapter}/{name}"):
        hits = sorted((p for p in paths if p == suffix or p.endswith("/" + suffix)), key=len)
        if hits:
            return hits[0]
    return paths[0] if len(paths) == 1 else None


# ---- running one process with limits -------------------------------------------------------------
def run_limited(cmd, cwd, env, timeout, max_output, log_path, fsize=True):
    """Run cmd with its stdout+stderr in log_path. Returns (returncode or None, why_killed).
    fsize=False: no file size limit (a checker sizes its shared memory with ftruncate, which
    the limit would refuse; its worker has the limit)."""
    def limits():
        # dies with the grader (a grade-all interrupted leaves nothing running)
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # a runaway write to a file dies here rather than filling the disk
        if fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_output * 4, max_output * 4))

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=limits)
        started, why = time.monotonic(), ""
        while proc.poll() is None:
            time.sleep(0.05)
            if time.monotonic() - started > timeout:
                why = f"did not finish within {timeout:g} s (an endless loop, or far too slow)"
            elif os.path.getsize(log_path) > max_output:
                why = f"printed more than {max_output} bytes"
            if why:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        with _quiet():   # whatever it started in the background goes too
            os.killpg(proc.pid, signal.SIGKILL)
    return (None if why else proc.returncode), why


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


def tail(path, limit=3000):
    """The end of a log, decoded leniently, for a crash's feedback."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode(errors="replace")
    return ("...\n" if len(data) > limit else "") + text.rstrip()


INCLUDE = re.compile(rb'^\s*#\s*(?:include|include_next|import|embed)\s*(.*?)\s*$', re.M)


def forbidden(text, stub):
    """Why a submitted file may not be compiled (it reaches for a file outside the exercise:
    an instructor's solution, say), or "". #include <...> of a header by name and the stub's
    own #includes are fine."""
    def lines(t):   # as the preprocessor sees them: continuations joined, %: is #
        return t.replace(b"\\\r\n", b"").replace(b"\\\n", b"").replace(b"%:", b"#")
    allowed = set(INCLUDE.findall(lines(stub)))
    for m in INCLUDE.finditer(lines(text)):
        target = m.group(1).split(b"//")[0].split(b"/*")[0].strip()
        name = target[1:-1]
        if target in allowed:
            continue
        if not (target.startswith(b"<") and target.endswith(b">")) or b".." in name \
                or name.startswith(b"/"):
            return (f"it includes {target.decode(errors='replace')}, a file the grader does "
                    f"not provide: only the stub's own #includes and standard headers "
                    f"(#include <name>) are accepted")
    if b".incbin" in text or b"__has_include" in text:
        return "it uses .incbin or __has_include, which the grader does not accept"
    return ""


def describe_exit(rc):
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        if name == "SIGXFSZ":
            return "printed more than the output limit (a printf in a loop?)"
        return f"crashed ({name})"
    return f"the test process exited with code {rc} and wrote no result"


def normalise(data):
    """An honest editor's file as the compiler and the harness expect it: no UTF-8 byte order
    mark (the emulator's rewrite would put its #line before it, and the harness's untouched-stub
    check would miss the first line), LF line ends (CRLF, or CR alone)."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def hidden_visibility(hidden, chapter):
    """{test id or key: visibility} from the VISIBILITY = {...} dicts of the chapter's hidden
    test files, read as literals (the grader never runs them: they run only in the checker)."""
    out = {}
    if not hidden:
        return out
    number = chapter[:2]
    root = Path(hidden)
    for f in sorted(root.glob(f"{number}*.py")) + sorted(root.glob(f"{number}*/*.py")):
        try:
            tree = ast.parse(f.read_text())
        except (SyntaxError, ValueError, OSError):
            continue   # the driver reports a broken hidden file itself
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id ==
                                                    "VISIBILITY" for t in node.targets):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    raise GradeError(f"{f}: VISIBILITY must be a literal dict")
                if not isinstance(value, dict):
                    raise GradeError(f"{f}: VISIBILITY must be a dict {{test key: visibility}}")
                for key, vis in value.items():
                    if vis not in reports.VISIBILITIES:
                        raise GradeError(f"{f}: VISIBILITY[{key!r}] = {vis!r}: use one of "
                                         f"{', '.join(reports.VISIBILITIES)}")
                    out[str(key)] = vis
    return out


_FRAME = re.compile(r'^(\s*)File "([^"]*)", line (\d+)(.*)$')


def scrub(message, hidden):
    """A message with nothing of the hidden tests' files in it: a traceback's frames in them
    lose their source lines and their path, and the hidden folder's path is never named."""
    if not hidden or not message:
        return message
    root = str(Path(hidden).resolve())
    out, skipping = [], None
    for line in message.splitlines():
        m = _FRAME.match(line)
        if m:
            indent, path, lineno, rest = m.groups()
            inside = str(Path(path).resolve()).startswith(root) if path else False
            skipping = len(indent) if inside else None
            if inside:
                out.append(f'{indent}File "<hidden test>", line {lineno}{rest}')
                continue
        elif skipping is not None and (len(line) - len(line.lstrip()) > skipping
                                       or not line.strip()):
            continue   # the source line (and ^^^ markers) of a hidden test's frame
        else:
            skipping = None
        out.append(line)
    text = "\n".join(out)
    for spelling in {root, str(Path(hidden)), os.path.abspath(hidden)}:
        text = text.replace(spelling, "<hidden>")
    return text


class Grader:
    def __init__(self, backend, hidden, timeout, max_output, seed, out, keep=False,
                 sandbox_mode="auto", isolate="auto", memory=None, deadline=None):
        self.backend, self.timeout, self.max_output = backend, timeout, max_output
        self.hidden = str(Path(hidden).resolve()) if hidden else ""
        self.seed, self.out, self.keep = seed, Path(out), keep
        # On a GPU the limit is RLIMIT_DATA (CUDA reserves address space far beyond it) and the
        # tests use their large sizes (ctx.large: arrays of 2^24 elements and more, checked in
        # float64 on the host): 1 GiB made NumPy's reference arrays fail (H200, 2026-12-04).
        gpu_mem = 8 << 30 if backend == "gpu" else sandbox.DEFAULTS["mem"]
        self.memory, self.deadline = memory or gpu_mem, deadline
        self.vars = make_vars(backend)
        self.python = python_with_numpy()
        self.mode = self._choose_mode(sandbox_mode, isolate)
        self.view = self._tool_paths() if self.mode != "none" else []
        # objects compiled in this run, by content; no sandbox sees this folder, and it goes
        # when the run ends, so nothing a submission did can reach a later run's build
        self.out.mkdir(parents=True, exist_ok=True)
        self.cache = Path(tempfile.mkdtemp(prefix="cache-", dir=self.out))
        self._lock = threading.Lock()
        self._tests = {}
        try:
            self._check_gpu()
        except GradeError:
            self.close()   # the caller has no grader to close
            raise

    def close(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    # -- how student code runs --
    def _choose_mode(self, sandbox_mode, isolate):
        if sandbox_mode == "none":
            return "none"
        why = sandbox.probe()
        if why:
            if sandbox_mode == "on":
                raise GradeError(f"no sandbox can be made here ({why}): grade as root or "
                                 f"with unprivileged user namespaces, or say SANDBOX=none "
                                 f"to grade without one (the gradebook says so)")
            self.sandbox_missing = why
            return "none"
        has_proxy = (REPO / "common" / "tut_remote.py").exists()
        if isolate == "on" and not has_proxy:
            raise GradeError("ISOLATE=1 but this tree has no common/tut_remote.py (the worker "
                             "that runs a student's library apart from the checker)")
        if isolate == "on" and self.backend != "cpu":
            raise GradeError("ISOLATE=1 needs BACKEND=cpu: the worker/checker split shares host "
                             "memory, and CUDA's pinned and managed memory cannot be shared "
                             "with a second process")
        if isolate == "off" or not has_proxy or self.backend != "cpu":
            return "in-process"
        return "isolated"

    def _tool_paths(self):
        """What a sandbox must see besides the workspace: the compilers and the emulator's
        build (every absolute path in the compile commands), the Python that runs drivers and
        workers, and NumPy."""
        paths = set()
        for value in self.vars.values():
            for tok in value:
                for cand in (tok, tok[2:] if tok.startswith(("-I", "-L")) else ""):
                    if cand.startswith("/") and os.path.exists(cand):
                        paths.add(cand)
        for tool in ("cxx", "nvcc"):
            exe = shutil.which(self.vars.get(tool, [""])[0] or "-")
            if exe:
                # a compiler outside /usr (a CUDA toolkit in /opt, say) brings its whole prefix
                paths.add(str(Path(os.path.realpath(exe)).parent.parent))
        run = subprocess.run([self.python, "-c", "import sys, numpy, os; print(sys.prefix); "
                              "print(sys.base_prefix); "
                              "print(os.path.dirname(os.path.dirname(numpy.__file__)))"],
                             capture_output=True, text=True, check=True)
        paths.update(run.stdout.split())
        paths.add(sys.base_prefix)   # the interpreter that runs tools/sandbox.py
        # never a folder that holds what a submission must not see: this tree (solutions/,
        # the instructor's build, tools/), the grader's output, the hidden tests
        secret = [os.path.realpath(x) for x in (REPO, self.out, self.hidden) if x]
        keep = []
        for p in sorted(paths, key=len):
            real = os.path.realpath(p)
            if any(real == x or x.startswith(real.rstrip("/") + "/") for x in secret):
                continue
            if real in ("/", "/usr") or any(real == k or real.startswith(k.rstrip("/") + "/")
                                            for k in keep + list(sandbox.SYSTEM)):
                continue
            keep.append(real)
        if self.backend == "gpu":
            keep += [m for m in system_submounts() + self._driver_paths() if m not in keep
                     and not any(m == x or m.startswith(x + "/") for x in secret)]
        return keep

    def _driver_paths(self):
        """The GPU driver's libraries as this machine loads them (libcuda and the libnvidia-*
        it maps at cuInit): the files themselves inside the system folders, their folder
        elsewhere (a driver under /opt, found through LD_LIBRARY_PATH)."""
        run = subprocess.run([self.python, "-c", "import ctypes\n"
                              "ctypes.CDLL('libcuda.so.1').cuInit(0)\n"
                              "print(open('/proc/self/maps').read())"],
                             capture_output=True, text=True, env=self.child_env())
        out = set()
        for line in run.stdout.splitlines():
            path = line.split(None, 5)[5] if len(line.split(None, 5)) == 6 else ""
            name = os.path.basename(path)
            if not name.startswith(("libcuda.so", "libnvidia-")) or not os.path.exists(path):
                continue
            inside = any(path.startswith(d + "/") for d in sandbox.SYSTEM)
            out.add(path if inside else os.path.dirname(path))
        return sorted(out)

    def _check_gpu(self):
        """BACKEND=gpu: the sandbox must see a GPU CUDA can use, or every test would score 0
        as skipped; that is the grader's setup, said once, before anyone is graded."""
        if self.backend != "gpu" or self.mode == "none":
            return
        d = Path(tempfile.mkdtemp(prefix="gpu-check-", dir=self.out))
        d.chmod(0o755)   # the sandbox's user starts in it (mkdtemp makes it 0700)
        try:
            log = d.parent / f"{d.name}.log"
            rc, why = run_limited(self.boxed([self.python, "-c", GPU_CHECK], d), d,
                                  self.child_env(), 60, 1 << 16, log)
            out = tail(log, 2000)
            log.unlink()
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if rc != 0:
            raise GradeError(f"BACKEND=gpu, but in the sandbox CUDA finds no usable GPU "
                             f"({why or out or f'exit status {rc}'}); grade with BACKEND=cpu, "
                             f"or tell the course's maintainers what this machine is")

    def boxed(self, cmd, ws, rw=(), ro=(), hidden_env=False, extra_mem=0, uid=None):
        """cmd wrapped in this grader's sandbox: the workspace read-only, rw writable."""
        if self.mode == "none":
            return cmd
        devices = sorted(str(d) for d in Path("/dev").glob("nvidia*")) \
            if self.backend == "gpu" else []
        extra = ["/sys"] if self.backend == "gpu" else []
        return sandbox.prefix(ro=[ws, *self.view, *extra, *ro], rw=rw, cwd=ws, devices=devices,
                              unset=["TUT_WORKER_PREFIX"] + ([] if hidden_env else ["TUT_HIDDEN"]),
                              mem=self.memory + extra_mem, cpu=int(self.timeout) + 5,
                              fsize=self.max_output * 4, uid=uid) + cmd

    def child_env(self):
        """The one environment every compile and test starts from: an allow-list (ENV_KEEP), so
        nothing else of the grader's (a token, MAKEFLAGS, SUBMISSIONS=, the seed, the hidden
        tests' or the gradebook's paths) reaches a sandbox to be printed into feedback. PATH
        keeps only folders outside the instructor's tree and the grader's output. What the
        worker of a student's library then gets is tut_remote's allow-list, a subset."""
        secret = [os.path.realpath(x) for x in (REPO, self.out, self.hidden) if x]
        env = {k: v for k, v in os.environ.items()
               if k in ENV_KEEP or k.startswith(("LC_",)) and k not in ("LC_TERMINAL",)}
        env["PATH"] = os.pathsep.join(
            d for d in os.environ.get("PATH", os.defpath).split(os.pathsep)
            if d and not any(os.path.realpath(d) == x or os.path.realpath(d).startswith(x + "/")
                             for x in secret))
        env.setdefault("LANG", "C.UTF-8")
        return env

    @staticmethod
    def results_dir(ws):
        """Where a submission's test results and logs go: beside its workspace (WORK/tree), in
        WORK/results, so that no later test's sandbox (which sees the workspace) reads an
        earlier one's output. Both names are fixed: no student's name can be another's results
        folder."""
        d = ws.parent / "results"
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        d.chmod(0o700)   # a sandbox without namespaces runs as another user: not readable by it
        return d

    # -- the workspace: a copy of the instructor's chapter with the student's exercise files --
    def workspace(self, chapters, files, ws):
        notes = []
        for old in (ws, ws.parent / "results"):
            if old.exists():
                shutil.rmtree(old)
        shutil.copytree(REPO / "common", ws / "common",
                        ignore=shutil.ignore_patterns("__pycache__"))
        taken, normalised = {}, []
        for ch in chapters:
            shutil.copytree(REPO / "chapters" / ch, ws / "chapters" / ch,
                            ignore=shutil.ignore_patterns("__pycache__"))
            for name in exercise_files(ch):
                src = find_source(files, ch, name) if files is not None else None
                data = files[src] if src else None
                if data is None or len(data) > MAX_SOURCE:
                    notes.append(f"chapters/{ch}/{name} was not found in the submission"
                                 + (" (or is larger than 1 MiB)" if src else "")
                                 + ": its exercises are graded as not done")
                    continue
                clean = normalise(data)
                if clean != data:
                    normalised.append(f"chapters/{ch}/{name}")
                (ws / "chapters" / ch / name).write_bytes(clean)
                taken[f"chapters/{ch}/{name}"] = src
        if normalised:
            notes.append(f"{', '.join(normalised)}: graded without its byte order mark and "
                         f"with LF line ends (as saved, it had a BOM or CRLF/CR line ends)")
        (ws / "build").mkdir(exist_ok=True)
        for lib in self.vars.get("shm", []):   # the checker's shared-memory allocator
            dest = ws / "build" / self.backend / "common" / Path(lib).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lib, dest)
        return taken, notes

    def _run_tool(self, cmd, ws, log):
        rc, why = run_limited(self.boxed(cmd, ws, rw=[ws / "build"]), ws, self.child_env(),
                              300, 1 << 20, log)
        self._sandbox_failed(rc, log)
        return rc == 0, why

    def _sandbox_failed(self, rc, log):
        """A sandbox that could not be made is the grader's problem, said as such (not as a
        file that does not compile): grading stops with the sandbox's own words. Compiles
        only: a test's output is the student's to choose, and could mimic these words."""
        if self.mode == "none" or rc != sandbox.SETUP_FAILED:
            return
        first = tail(log, 2000).lstrip(".\n").splitlines()[:1]
        if first and first[0].startswith("sandbox: "):
            raise GradeError(f"{first[0]}\n(tools/sandbox.py on this machine, for the "
                             f"{self.backend} backend; SANDBOX=none grades without one)")

    def _compile(self, ws, chapter, name):
        """An object for chapters/<chapter>/<name> in the workspace; cached by content."""
        v, src = self.vars, f"chapters/{chapter}/{name}"
        text = (ws / src).read_bytes()
        key = hashlib.sha256(b"\0".join([self.backend.encode(), src.encode(), text,
                                         " ".join(sum(v.values(), [])).encode()])).hexdigest()
        obj = self.cache / f"{key}.o"
        log = ws / "build" / "compile" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if obj.exists():
            return obj, ""
        tmp = ws / "build" / "compile" / f"{name}.o"
        if self.backend == "cpu":
            cpp = ws / "build" / "compile" / f"{name}.cpp"
            cmds = [v["rewrite"] + [src, str(cpp)],
                    v["cxx"] + v["cxxflags"] + ["-DTUT_BACKEND_CPU", "-Icommon",
                                                f"-Ichapters/{chapter}", "-c", "-o", str(tmp),
                                                str(cpp)]]
        else:
            cmds = [v["nvcc"] + v["nvccflags"] + [f"-Ichapters/{chapter}", "-c", "-o",
                                                  str(tmp), src]]
        # one sandbox for the whole compile (its start costs about a tenth of a second)
        ok, why = self._run_tool(["/bin/sh", "-c", " && ".join(shlex.join(c) for c in cmds)],
                                 ws, log)
        if not ok:
            return None, why or tail(log, 4000)
        # the grader copies the object out; nothing in a sandbox can write to the cache
        part = self.cache / f"{key}.{threading.get_ident()}.part"
        shutil.copyfile(tmp, part)
        os.replace(part, obj)   # atomic: another submission may want the same object
        return obj, ""

    def build(self, ws, chapter, taken):
        """Build the chapter's library; a student file that does not compile is replaced by
        its stub, so the other files' exercises still count. Returns {file: error}."""
        broken, objs = {}, []
        for cu in sorted((ws / "chapters" / chapter).glob("*.cu")):
            pristine = REPO / "chapters" / chapter / cu.name
            why = forbidden(cu.read_bytes(), pristine.read_bytes()) \
                if f"chapters/{chapter}/{cu.name}" in taken else ""
            obj, err = (None, "NOT ACCEPTED " + why) if why else self._compile(ws, chapter,
                                                                             cu.name)
            if obj is None and f"chapters/{chapter}/{cu.name}" in taken:
                broken[cu.name] = err
                shutil.copy2(pristine, cu)
                obj, err = self._compile(ws, chapter, cu.name)
            if obj is None:
                raise GradeError(f"the instructor's chapters/{chapter}/{cu.name} does not "
                                 f"compile:\n{err}")
            local = ws / "build" / "objects" / obj.name   # in the sandbox's view, read-only
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(obj, local)
            objs.append(str(local))
        v = self.vars
        lib = ws / "build" / self.backend / "chapters" / f"lib{chapter}.so"
        lib.parent.mkdir(parents=True, exist_ok=True)
        ldlibs = v.get(f"ldlibs_{chapter}", [])
        if self.backend == "cpu":
            cmd = (v["cxx"] + v["cxxflags"] + ["-shared", "-o", str(lib)] + objs + v["tut_check"]
                   + ["-Wl,--whole-archive"] + v["runtime"] + ["-Wl,--no-whole-archive"]
                   + v["ldlibs"])
        else:
            cmd = v["nvcc"] + v["nvccflags"] + ["-shared", "-o", str(lib)] + objs \
                + v["tut_check"] + ldlibs
        ok, why = self._run_tool(cmd, ws, ws / "build" / "compile" / "link.log")
        if not ok:
            return {"": why or tail(ws / "build" / "compile" / "link.log", 4000)}
        return broken

    def test_ids(self, ws, chapter, env):
        key = chapter
        with self._lock:
            if key in self._tests:
                return self._tests[key]
        # the instructor's driver, never the workspace's: its tests are what is graded. It
        # loads no student code to describe them, so it runs outside any sandbox.
        log = self.results_dir(ws) / "describe.log"
        rc, why = run_limited([self.python, str(REPO / "chapters" / chapter / "driver.py"),
                               "--describe"], ws, env, 60, 1 << 20, log)
        try:
            tests = [t for t in json.loads(log.read_text()) if t["exercise"]] if rc == 0 else None
        except ValueError:
            tests = None
        if tests is None:
            raise GradeError(f"`driver.py --describe` of {chapter} failed:\n{why}{tail(log)}")
        vis = hidden_visibility(self.hidden, chapter)
        for t in tests:
            if t.get("perf"):   # the course's own performance test: shown like the others
                t["visibility"] = "visible"
            elif t.get("part_of"):
                key_ = t["id"].split("+", 1)[1]
                t["visibility"] = vis.get(t["id"], vis.get(key_, "after_due_date"))
            else:
                t["visibility"] = "visible"
        with self._lock:
            self._tests[key] = tests
        return tests

    def grade(self, name, files, ws, submitted=None, progress=None):
        """Grade one submission (files: as from submission_files). Returns the score dict."""
        started = time.monotonic()
        chapters = self.chapters
        taken, notes = self.workspace(chapters, files, ws)
        if self.mode != "isolated":
            why = getattr(self, "sandbox_missing", "")
            notes.append(f"graded {SANDBOX_WORDS[self.mode]}"
                         + (f" (no sandbox can be made here: {why})" if why else
                            " (SANDBOX=none)" if self.mode == "none" else
                            " (BACKEND=gpu: the split is the cpu backend's)"
                            if self.backend != "cpu" else ""))
        lease = None
        if self.mode == "isolated" and os.geteuid() == 0:
            # a user id no other sandbox of this machine has while this submission is graded
            # (a grader beside this one, a Slurm task on the same node): the worker runs as it
            # in every test, and the checker (root) stops and kills "every process of that
            # user" at once (tut_remote, TUT_WORKER_UID), which must then be this one's alone
            lease = sandbox.UidLease(zlib.crc32(str(ws).encode()))
        try:
            return self._grade(name, ws, chapters, taken, notes, started, submitted, progress,
                               lease)
        finally:
            if lease:
                lease.release()

    def _grade(self, name, ws, chapters, taken, notes, started, submitted, progress, lease):
        env = self.child_env()
        # TUT_PERF: performance tests are timed (on the gpu backend; a skip on the cpu one)
        env.update(TUT_BACKEND=self.backend, TUT_TREE="chapters", TUT_BUILD=str(ws / "build"),
                   PYTHONDONTWRITEBYTECODE="1", TUT_PERF="1")
        if lease:
            env["TUT_WORKER_UID"] = str(lease.uid)
        if self.hidden:
            env["TUT_HIDDEN"] = self.hidden
        if self.timeout < 40:   # let the emulator's watchdog name the kernel before we kill it
            env["CUEMU_WATCHDOG_S"] = str(max(2, int(self.timeout / 2)))
        tests, shown_at, perf_off = [], {}, []
        for ch in chapters:
            points = {i: ex["points"] for i, ex in manifest(ch)["exercises"].items()}
            broken = self.build(ws, ch, taken)
            regions = manifest(ch)["exercises"]
            shown = set()
            several = len(taken) > 1
            for t in self.test_ids(ws, ch, env):
                test_id, ex_id = t["id"], t.get("part_of") or t["id"]
                entry = {"id": test_id, "exercise": ex_id, "chapter": ch, "title": t["title"],
                         "max": t["points"] if t.get("part_of") else points.get(ex_id, 1),
                         "hidden": bool(t.get("part_of")) and not t.get("perf"),
                         "visibility": t["visibility"],
                         "status": "FAIL", "message": "", "seconds": 0.0}
                if t.get("perf"):
                    entry["perf"] = t["perf"]
                    if self.backend != "gpu":
                        # timed on a GPU only: on the cpu backend its points are not in the
                        # maximum (nobody could earn them), and the notes say so
                        entry["max"] = 0
                        perf_off.append(f"{test_id} ({t['points']})")
                bad = [f for f in broken
                       if not f or any(r["file"] == f for r in regions.get(ex_id, {})
                                       .get("regions", []))]
                if bad:
                    what = (f"chapters/{ch}/{bad[0]} does not compile" if bad[0]
                            else "the chapter's library does not link")
                    err = broken[bad[0]]
                    if err.startswith("NOT ACCEPTED "):
                        what, err = (f"chapters/{ch}/{bad[0]} was not compiled",
                                     err[len("NOT ACCEPTED "):])
                    entry["message"] = reports.clean(f"{what}, so this exercise scores 0" + (
                        f" (the stub was used in its place: the exercises of the other files "
                        f"still count)" if bad[0] and several else "") + (
                        f"; why: see {shown_at[bad[0]]} above"
                        if bad[0] in shown else f":\n{err}"))
                    if bad[0] not in shown:
                        shown.add(bad[0])
                        shown_at[bad[0]] = test_id
                    tests.append(entry)
                    continue
                where = untouched(ws, ch, regions.get(ex_id, {}).get("regions", []), ex_id)
                if entry.get("perf") and self.backend != "gpu":
                    # what the harness would say (tut.perf_skip), without a process: a class
                    # graded on the cpu backend spends no time on it
                    entry.update(status="SKIP", message=PERF_CPU)
                    tests.append(entry)
                elif where:
                    # the harness would say just this without calling the library: no process
                    entry.update(status="NOT DONE",
                                 message=f"exercise not done yet: TODO(student) at {where}")
                    tests.append(entry)
                else:
                    tests.append(self.run_test(ws, ch, test_id, env, entry))
                if progress:
                    progress(entry)
        skipped = sum(t["status"] == "SKIP" and not t.get("perf") for t in tests)
        if skipped:
            notes.append(f"{skipped} test(s) could not run on the {self.backend} backend here "
                         f"(see their messages) and score 0: grade with BACKEND=cpu")
        if perf_off:
            notes.append(f"performance points need BACKEND=gpu (timed on a GPU only): "
                         f"{', '.join(perf_off)} counted neither in this score nor in its "
                         f"maximum")
        score = round(sum(t["score"] for t in tests if "score" in t), 2)
        for t in tests:
            t.setdefault("score", 0)
        now = datetime.datetime.now(datetime.timezone.utc)
        result = {"student": name, "backend": self.backend, "seed": self.seed,
                  "sandbox": self.mode, "chapters": chapters, "score": score,
                  "max_score": sum(t["max"] for t in tests),
                  "graded": now.isoformat(timespec="seconds"),
                  "seconds": round(time.monotonic() - started, 1), "notes": notes,
                  "files": taken, "tests": tests,
                  "past_deadline": bool(self.deadline and now > self.deadline)}
        late(result, submitted, self.deadline, getattr(self, "penalty", 0.0))
        if not self.keep:
            shutil.rmtree(ws.parent, ignore_errors=True)
        return result

    def run_test(self, ws, chapter, test_id, env, entry):
        hidden_test = "+" in test_id
        results = self.results_dir(ws)          # out of every sandbox's view
        scratch = results / test_id            # the only folder a sandboxed test may write
        scratch.mkdir(parents=True, exist_ok=True)
        log = results / f"{test_id}.log"
        env = dict(env)
        if self.mode == "isolated":
            # the checker (the instructor's driver, the hidden tests, the results file) runs
            # here; only the worker that loads the student's library runs in the sandbox
            jpath = results / f"{test_id}.json"
            # the shared host memory is mapped whole in the worker: it counts in the worker's
            # address space, so it is sized from the memory limit and the limit grows by it
            # one user id per submission, its own on this machine (grade() leases it): the
            # checker stops and kills all its processes by that id; the seed stays off the
            # command line
            uid = int(env["TUT_WORKER_UID"]) if env.get("TUT_WORKER_UID") else None
            env.update(TUT_ISOLATE="1", TUT_SHM_GIB=f"{self.memory / (1 << 30):.3f}",
                       TUT_SEED=str(self.seed), TUT_WORKER_CPU=str(self.timeout),
                       TUT_WORKER_MEMORY=str(self.memory),
                       # the worker needs the standard library alone: the system's Python,
                       # which the sandbox's user can run wherever the grader's venv lies
                       TUT_WORKER_PYTHON=shutil.which("python3", path="/usr/bin:/bin")
                       or self.python,
                       TUT_WORKER_PREFIX=shlex.join(self.boxed([], ws, extra_mem=self.memory,
                                                               uid=uid)))
            cmd = [self.python, f"chapters/{chapter}/driver.py", "--check", "--only", test_id,
                   "--json", str(jpath)]
        else:
            # in-process: the whole test in the sandbox; the hidden tests are in its view only
            # when it runs one of them
            jpath = scratch / "result.json"
            if not hidden_test:
                env.pop("TUT_HIDDEN", None)
            cmd = self.boxed([self.python, f"chapters/{chapter}/driver.py", "--check", "--only",
                              test_id, "--seed", str(self.seed), "--json", str(jpath)], ws,
                             rw=[scratch], ro=[self.hidden] if hidden_test and self.hidden
                             else [], hidden_env=hidden_test)
        # the harness sends each test's output to a file: past this size its process dies of
        # SIGXFSZ (a printf flood), reported below as output over the limit
        env = dict(env, TUT_OUTPUT_MAX=str(self.max_output))
        # isolated: the time limit is CPU time of the submission's own processes (the checker
        # sums them), so a neighbour's load cannot eat it; the wall clock is a backstop
        wall = 2 * self.timeout + 10 if self.mode == "isolated" else self.timeout
        with gpu_turn(self.backend):
            started = time.monotonic()   # the wait for the GPU is not the test's time
            rc, why = run_limited(cmd, ws, env, wall, self.max_output, log,
                                  fsize=self.mode != "isolated")
        entry["seconds"] = round(time.monotonic() - started, 3)
        result = None
        if not why and jpath.exists():
            with _quiet():
                result = json.loads(jpath.read_text())[0]
                if result.get("id") != test_id or result.get("status") not in reports.MARK:
                    result = None
                elif result["status"] == "CRASH":   # the row written before the test: it died
                    result = None
        if result is None and hidden_test:
            # what the process printed is the student's to choose: for a hidden test, only
            # the grader's own words
            message = f"{why or describe_exit(rc)}"
        elif result is None:
            message = f"{why or describe_exit(rc)}; the end of its output:\n{tail(log, 1500)}"
        else:
            entry["status"] = result["status"]
            message = str(result.get("message", ""))
            entry["score"] = earned(entry, result)
        entry["message"] = reports.clean(scrub(message, self.hidden) if self.hidden else message)
        return entry


def earned(entry, result):
    """The points of a test from its result row: all of them for a pass; for a performance
    test (entry["perf"]), the fraction of them its row gives (its figure against the copy
    ceiling, tut.performance_points), to 2 decimals. A row of another test that carries a
    fraction earns all or nothing still; a fraction that is not a number earns nothing."""
    if result.get("status") != "PASS":
        return 0
    if not entry.get("perf"):
        return entry["max"]
    fraction = result.get("fraction")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) \
            or not math.isfinite(fraction):
        return 0
    return round(entry["max"] * min(1.0, max(0.0, float(fraction))), 2)


def untouched(ws, chapter, regions, ex_id):
    """file:line of the exercise's first TODO(student) when every region of it is still the
    stub tools/exercises.py generated (the test of the harness's Chapter.untouched, whose
    verdict is "NOT DONE" without running anything), else None."""
    marker, first, count = f"TODO(student) {ex_id}:", None, 0
    for r in regions:
        try:
            lines = (ws / "chapters" / chapter / r["file"]).read_text().splitlines(keepends=True)
        except (OSError, UnicodeDecodeError):
            return None
        for i, line in enumerate(lines):
            start = i - r["todo_line"]
            if marker in line and start >= 0 and hashlib.sha256(
                    "".join(lines[start:start + r["lines"]]).encode()).hexdigest() == r["sha256"]:
                first = first or f"chapters/{chapter}/{r['file']}:{i + 1}"
                count += 1
                break
    return first if regions and count == len(regions) else None


def late(result, submitted, deadline, penalty):
    """Submission time and late penalty: penalty% of the maximum for each day (or part of one)
    after the deadline, never below 0 points."""
    result["submitted"] = submitted.isoformat(timespec="seconds") if submitted else ""
    result["days_late"], result["penalty"] = 0, 0
    result["final"] = result["score"]
    if deadline and not submitted:
        result["notes"].append("no submission time was given for this submission (the "
                               "platform's, or a ROSTER= with a `submitted` column): no late "
                               "penalty applied; file times are not used, the submitter sets "
                               "them")
    if submitted and deadline and submitted > deadline:
        days = math.ceil((submitted - deadline).total_seconds() / 86400)
        cut = min(result["score"], round(result["max_score"] * penalty / 100 * days, 2))
        cut = int(cut) if float(cut).is_integer() else cut
        final = round(result["score"] - cut, 2)
        result["days_late"], result["penalty"] = days, cut
        result["final"] = int(final) if float(final).is_integer() else final
        if cut:
            result["notes"].append(f"submitted {result['submitted']}, {days} day(s) after the "
                                   f"deadline: {cut:g} point(s) off ({penalty:g}% of the "
                                   f"maximum per day)")


# ---- reports -------------------------------------------------------------------------------------
def by_exercise(result):
    ex = {}
    for t in result["tests"]:
        e = ex.setdefault(t["exercise"], {"score": 0, "max": 0})
        e["score"] += t["score"]
        e["max"] += t["max"]
    return ex


def write_reports(result, out):
    """Every report of one submission, from its result with every string cleaned (no control
    characters or terminal escapes, whichever field the student's text reached)."""
    result = reports.clean_all(result)
    out.mkdir(parents=True, exist_ok=True)
    (out / "score.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "results.json").write_text(json.dumps(reports.gradescope(result), indent=1) + "\n")
    (out / "junit.xml").write_text(reports.junit_xml(result))
    (out / "feedback.txt").write_text(reports.feedback(result))


PLATFORMS = {"gradescope": reports.gradescope, "prairielearn": reports.prairielearn,
             "classroom50": lambda r: reports.classroom50(r, os.environ)}


def write_platform(result, platform, path):
    data = PLATFORMS[platform](reports.clean_all(result))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name).strip("._") or "submission"


def parse_time(text, what):
    """An ISO 8601 time; one without a zone is UTC."""
    try:
        t = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise GradeError(f"{what}={text!r} is not a date and time (2026-12-01T23:59:00+01:00)")
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def read_roster(path):
    """{submission name: {"id": student id, "submitted": time or None}} from a CSV whose header
    has a `submission` column (the folder or archive name, without its extension) and a
    `student_id` column (what the LMS knows the student as); `submitted` is optional."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise GradeError(f"ROSTER={path}: {e}")
    if not rows or not {"submission", "student_id"} <= set(rows[0]):
        raise GradeError(f"ROSTER={path}: a CSV with a header row naming the columns "
                         f"`submission` and `student_id` (and optionally `submitted`)")
    out = {}
    for i, row in enumerate(rows, 2):
        name = safe_name(row["submission"].strip())
        if name in out:
            raise GradeError(f"ROSTER={path}:{i}: {row['submission']} is listed twice")
        when = row.get("submitted") or ""
        out[name] = {"id": row["student_id"].strip(),
                     "submitted": parse_time(when, f"{path}:{i} submitted") if when.strip()
                     else None}
    return out


# ---- main ----------------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--submission", type=Path, help="one submission: a folder or an archive")
    what.add_argument("--all", type=Path, metavar="DIR",
                      help="every folder and archive in DIR is one student's submission")
    p.add_argument("--out", type=Path, required=True, help="where the reports go")
    p.add_argument("--chapters", default="", help="chapters to grade, e.g. 01 (default: all)")
    p.add_argument("--hidden", default="", help="a directory of hidden tests")
    p.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    p.add_argument("--timeout", type=float, default=60, help="seconds per test (default 60)")
    p.add_argument("--max-output", type=int, default=1 << 20,
                   help="bytes a test may print (default 1 MiB)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, help="seed of every test's random inputs")
    p.add_argument("--keep", action="store_true", help="keep each submission's workspace")
    p.add_argument("--name", help="the student's name (--submission; default: its file name)")
    p.add_argument("--sandbox", default="auto", choices=("auto", "on", "none"),
                   help="auto: sandbox where possible (--all: required unless none)")
    p.add_argument("--isolate", default="auto", choices=("auto", "on", "off"),
                   help="the student's library in a worker apart from the checker")
    p.add_argument("--memory", type=int, help="bytes of private memory per sandboxed process (RLIMIT_DATA)")
    p.add_argument("--only", default="", help="--all: regrade only these students (a,b)")
    p.add_argument("--roster", type=Path, help="CSV: submission,student_id[,submitted]")
    p.add_argument("--deadline", help="ISO 8601 time; later submissions lose --penalty")
    p.add_argument("--penalty", type=float, default=0.0,
                   help="percent of the maximum lost per day (or part of one) late")
    p.add_argument("--submitted", help="--submission: when it was handed in (ISO 8601)")
    p.add_argument("--platform", action="append", default=[], metavar="NAME=FILE",
                   help="also write that platform's result file: gradescope=, prairielearn=, "
                        "classroom50= (repeatable)")
    p.add_argument("--slurm", type=int, metavar="N",
                   help="--all: grade on a Slurm cluster, one array task per N submissions, "
                        "then merge the results into one gradebook")
    p.add_argument("--sbatch-args", default="",
                   help="--slurm: more sbatch options (a partition, an account, a time limit)")
    p.add_argument("--part", help=argparse.SUPPRESS)   # K/G: a Slurm task's group of a class
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    if (args.slurm or args.part) and not args.all:
        p.error("--slurm goes with --all")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    grader = None
    try:
        if args.hidden and not Path(args.hidden).is_dir():
            raise GradeError(f"HIDDEN={args.hidden} is not a directory")
        platforms = []
        for item in args.platform:
            name, _, path = item.partition("=")
            if name not in PLATFORMS or not path:
                raise GradeError(f"--platform {item}: say NAME=FILE, NAME one of "
                                 f"{', '.join(PLATFORMS)}")
            platforms.append((name, Path(path).resolve()))
        args.platform = platforms
        deadline = parse_time(args.deadline, "DEADLINE") if args.deadline else None
        if args.penalty and not deadline:
            raise GradeError("PENALTY= needs a DEADLINE=")
        if args.all and args.sandbox == "auto":
            args.sandbox = "on"   # a class is graded in a sandbox, or told SANDBOX=none
        if args.all and args.only:
            seed = regrade_seed(args, seed)
        grader = Grader(args.backend, args.hidden, args.timeout, args.max_output, seed, args.out,
                        args.keep, args.sandbox, args.isolate, args.memory, deadline)
        grader.penalty = args.penalty
        grader.chapters = chapters_to_grade(args.chapters)
        if args.submission:
            return grade_one(grader, args)
        if args.slurm:
            return grade_slurm(grader, args)
        return grade_all(grader, args)
    except GradeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if grader is not None:
            grader.close()


def grade_one(grader, args):
    sub = args.submission.resolve()
    name = args.name or (student_name(sub) if sub != REPO else "this copy")
    submitted = parse_time(args.submitted, "--submitted") if args.submitted else None
    print(f"grading {name}: chapter(s) {', '.join(grader.chapters)}, "
          f"{SANDBOX_WORDS[grader.mode]}", flush=True)

    def progress(t):   # a line per test: grading a chapter takes a while
        print(f"  {t['id']:<14} {reports.MARK.get(t['status'], t['status'])} "
              f"({t['seconds']:.1f} s)", flush=True)
    result = grade_safely(grader, name, sub, args.out / "work", submitted, progress)
    print()
    write_reports(result, args.out)
    for platform, path in args.platform:
        write_platform(result, platform, path)
    print(reports.feedback(reports.clean_all(result)), end="")
    for f in ("score.json", "results.json", "junit.xml", "feedback.txt"):
        print(f"wrote {args.out / f}")
    for platform, path in args.platform:
        print(f"wrote {path} ({platform})")
    # a workflow that runs `make grade` shows red until every point is earned
    return 0 if result["score"] == result["max_score"] and result["max_score"] else 1


RUN_KEYS = ("chapters", "backend", "hidden", "hidden_sha256", "seed", "sandbox", "deadline",
            "penalty")


def hidden_digest(hidden):
    h = hashlib.sha256()
    if hidden:
        for f in sorted(Path(hidden).rglob("*")):
            if f.is_file():
                h.update(str(f.relative_to(hidden)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def regrade_seed(args, seed):
    """A regrade uses the seed of the run it joins (recorded in run.json)."""
    run = args.out / "run.json"
    if not run.exists():
        raise GradeError(f"ONLY= regrades students of an earlier `make grade-all`, and "
                         f"{args.out} has none: grade the whole class first")
    recorded = json.loads(run.read_text())
    if args.seed is not None and args.seed != recorded["seed"]:
        raise GradeError(f"SEED={args.seed}, but the gradebook was graded with seed "
                         f"{recorded['seed']}: a regrade uses the class's seed")
    return recorded["seed"]


def grade_safely(grader, name, path, work, submitted, progress=None):
    """Grade one submission whatever it holds: an archive that cannot be read, or anything in
    it that makes the grader itself fail, becomes this student's result with the reason (and
    no points), never an end of the class's run. GradeError (the grader's own setup) stops."""
    note = ""
    try:
        files = submission_files(path)
    except Unreadable as e:
        files, note = {}, str(e)
    try:
        r = grader.grade(name, files, work / "tree", submitted, progress)
    except GradeError:
        raise
    except Exception as e:   # a bug of the grader's that this submission found: tell, go on
        print(f"grader error on {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        note = (f"the grader failed on this submission ({type(e).__name__}: {e}): graded as "
                f"nothing handed in; your instructor has the details")
        r = grader.grade(name, {}, work / "tree", submitted, progress)
    if note:
        r["notes"].insert(0, note)
    return r


def class_names(subs):
    """{student name: path}: the submission's file name without its extension, made safe for
    a file name. Two that meet (alice/ and alice.zip) keep their extensions (alice.zip), then a
    number: each is still graded, its name in the gradebook says which it was."""
    names = {}
    for s in subs:
        n = safe_name(student_name(s))
        if n in names:
            n = safe_name(s.name)
            i = 2
            while n in names:
                n, i = f"{safe_name(s.name)}~{i}", i + 1
        names[n] = s
    return names


def grade_all(grader, args):
    if not args.all.is_dir():
        raise GradeError(f"SUBMISSIONS={args.all} is not a directory")
    subs = sorted(p for p in args.all.iterdir() if not p.name.startswith(".") and (
        p.is_dir() or p.name.lower().endswith(ARCHIVES)))
    if not subs:
        raise GradeError(f"no submissions (folders or {', '.join(ARCHIVES)}) in {args.all}")
    names = class_names(subs)
    roster = read_roster(args.roster) if args.roster else {}
    if args.part:   # a Slurm task: its group only, into the class's folders; no gradebook
        k, g = (int(x) for x in args.part.split("/"))
        group = part_of(list(names), k, g)
        print(f"slurm task {k} of {g}: grading {', '.join(group)}", flush=True)
        for name in group:
            submitted = (roster.get(name) or {}).get("submitted")
            r = grade_safely(grader, name, names[name], args.out / "work" / name, submitted)
            write_reports(r, args.out / "results" / name)
            print(f"{name}: {r['score']}/{r['max_score']} ({r['seconds']} s)", flush=True)
        return 0
    run = {"chapters": grader.chapters, "backend": grader.backend, "hidden": grader.hidden,
           "hidden_sha256": hidden_digest(grader.hidden), "seed": grader.seed,
           "sandbox": grader.mode,
           "deadline": grader.deadline.isoformat() if grader.deadline else "",
           "penalty": grader.penalty}
    run_file = args.out / "run.json"
    if args.only:
        wanted = [safe_name(n) for n in args.only.replace(",", " ").split()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise GradeError(f"ONLY={args.only}: no submission named {', '.join(unknown)} in "
                             f"{args.all}")
        recorded = json.loads(run_file.read_text())
        differs = [k for k in RUN_KEYS if recorded.get(k) != run[k]]
        if differs:
            raise GradeError(f"ONLY= regrades into the gradebook of an earlier run, but its "
                             f"{', '.join(differs)} differ from this one's: regrade the whole "
                             f"class instead")
        todo = wanted
    else:
        # a new gradebook: nothing of an earlier run stays beside it
        for old in ("results", "feedback", "work", "gradebook.csv", "run.json"):
            target = args.out / old
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        todo = list(names)
    print(f"grading {len(todo)} submission(s) of chapter(s) {', '.join(grader.chapters)} on "
          f"the {grader.backend} backend, {args.jobs} at a time, seed {grader.seed}, "
          f"{SANDBOX_WORDS[grader.mode]}", flush=True)
    if grader.deadline and not roster:
        print("note: DEADLINE without a ROSTER= giving each submission's time: no late penalty "
              "can be applied (file times are the submitter's to set, so they are not used)",
              flush=True)
    started, done = time.monotonic(), 0

    def one(name):
        # the time the platform or the instructor recorded, never a file's (the submitter's)
        submitted = (roster.get(name) or {}).get("submitted")
        r = grade_safely(grader, name, names[name], args.out / "work" / name, submitted)
        if safe_name(student_name(names[name])) != name:
            r["notes"].insert(0, f"another submission has the name "
                                 f"{safe_name(student_name(names[name]))}: this one "
                                 f"({names[name].name}) is graded as {name}")
        write_reports(r, args.out / "results" / name)
        return r

    failure = None
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(one, n): n for n in todo}
        for fut in concurrent.futures.as_completed(futures):
            try:
                r = fut.result()
            except GradeError as e:   # the grader's setup: every later one would fail alike
                failure = failure or e
                for f in futures:
                    f.cancel()
                continue
            except concurrent.futures.CancelledError:
                continue
            except Exception as e:   # even grading it as empty failed: a row that says so
                name = futures[fut]
                print(f"grader error on {name}: {type(e).__name__}: {e}", file=sys.stderr)
                r = failed_result(grader, name, f"not graded: the grader failed on this "
                                                f"submission ({type(e).__name__}); your "
                                                f"instructor has the details")
                write_reports(r, args.out / "results" / name)
            done += 1
            print(f"[{done}/{len(todo)}] {r['student']}: {r['score']}/{r['max_score']} "
                  f"({r['seconds']} s)", flush=True)
    run_file.write_text(json.dumps(run, indent=1) + "\n")
    book = write_gradebook(args.out, roster)   # always, with every row graded so far
    if failure:
        raise GradeError(f"{failure}\n(the gradebook {book} has the {done} submission(s) graded "
                         f"before this)")
    took = time.monotonic() - started
    print(f"graded {len(todo)} submission(s) in {took:.0f} s of wall time ({args.jobs} at a "
          f"time)\nwrote {book}\nwrote {args.out / 'feedback'}/<student>.txt and "
          f"{args.out / 'results'}/<student>/{{score.json,results.json,junit.xml}}")
    return 0


class _CellWriter:
    def __init__(self, writer):
        self.writer = writer

    def writerow(self, row):
        self.writer.writerow([reports.cell(c) for c in row])


def failed_result(grader, name, note):
    """The row of a submission the grader could not grade at all: 0 points, and why."""
    r = {"student": name, "backend": grader.backend, "seed": grader.seed,
         "sandbox": grader.mode, "chapters": grader.chapters, "score": 0, "max_score": 0,
         "seconds": 0.0, "files": {}, "tests": [], "notes": [note],
         "graded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    late(r, None, None, 0)
    return r


def part_of(names, k, groups):
    """The k-th of `groups` contiguous groups of the sorted names (as even as they go)."""
    names = sorted(names)
    size = -(-len(names) // groups)
    return names[k * size:(k + 1) * size]


def grade_slurm(grader, args):
    """make grade-slurm: one Slurm array job, a task per group of args.slurm submissions, each
    task `grade.py --all --part K/G` in the same sandbox as grade-all (--gres=gpu:1 on the gpu
    backend); sbatch --wait returns when every task has ended, and the results, which every
    task writes into the class's results/<student>/ on the shared file system, are merged into
    one gradebook. A task that fails leaves its students' rows saying so."""
    sbatch = shutil.which("sbatch")
    if not sbatch:
        raise GradeError("GROUP= grades on a Slurm cluster, and there is no sbatch here: run it "
                         "on the cluster's login node")
    if not args.all.is_dir():
        raise GradeError(f"SUBMISSIONS={args.all} is not a directory")
    subs = sorted(p for p in args.all.iterdir() if not p.name.startswith(".") and (
        p.is_dir() or p.name.lower().endswith(ARCHIVES)))
    if not subs:
        raise GradeError(f"no submissions (folders or {', '.join(ARCHIVES)}) in {args.all}")
    names = class_names(subs)
    roster = read_roster(args.roster) if args.roster else {}
    for old in ("results", "feedback", "work", "slurm", "gradebook.csv", "run.json"):
        target = args.out / old
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    groups = -(-len(names) // max(1, args.slurm))
    slurm = args.out / "slurm"
    slurm.mkdir(parents=True)
    task = [sys.executable, str(Path(__file__).resolve()), "--all", str(args.all.resolve()),
            "--out", str(args.out), "--seed", str(grader.seed), "--backend", grader.backend,
            "--chapters", ",".join(grader.chapters), "--timeout", f"{args.timeout:g}",
            "--max-output", str(args.max_output), "--sandbox", args.sandbox,
            "--isolate", args.isolate, "--jobs", "1"]
    for flag, value in (("--hidden", grader.hidden), ("--memory", args.memory),
                        ("--roster", args.roster and args.roster.resolve()),
                        ("--deadline", args.deadline), ("--penalty", args.penalty or None)):
        if value:
            task += [flag, str(value)]
    script = slurm / "grade.sbatch"
    script.write_text("#!/bin/sh\n# written by tools/grade.py --slurm: one task per group of "
                      "submissions\nexec " + shlex.join(task) + ' --part "$SLURM_ARRAY_TASK_ID/'
                      + str(groups) + '"\n')
    cmd = [sbatch, "--wait", "--parsable", f"--array=0-{groups - 1}", "--job-name=grade",
           f"--output={slurm}/%a.log", "--cpus-per-task=1", f"--chdir={REPO}"]
    if grader.backend == "gpu":
        cmd.append("--gres=gpu:1")
    cmd += shlex.split(args.sbatch_args) + [str(script)]
    print(f"grading {len(names)} submission(s) of chapter(s) {', '.join(grader.chapters)} on "
          f"Slurm: {groups} array task(s) of up to {args.slurm}, the {grader.backend} backend, "
          f"seed {grader.seed}, {SANDBOX_WORDS[grader.mode]}", flush=True)
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True)
    print(f"sbatch: job {run.stdout.strip() or '?'} ended with exit status {run.returncode}"
          + (f": {run.stderr.strip()}" if run.returncode else ""), flush=True)
    if run.returncode and not (args.out / "results").exists():
        raise GradeError(f"sbatch failed and no task graded anything:\n{run.stderr}"
                         f"(logs in {slurm})")
    for k in range(groups):
        for name in part_of(list(names), k, groups):
            if (args.out / "results" / name / "score.json").exists():
                continue
            write_reports(failed_result(grader, name, (
                f"not graded: its Slurm task ({k} of {groups}) ended before grading it; the "
                f"instructor has the task's log (slurm/{k}.log)")), args.out / "results" / name)
    run_info = {"chapters": grader.chapters, "backend": grader.backend,
                "hidden": grader.hidden, "hidden_sha256": hidden_digest(grader.hidden),
                "seed": grader.seed, "sandbox": grader.mode,
                "deadline": grader.deadline.isoformat() if grader.deadline else "",
                "penalty": grader.penalty}
    (args.out / "run.json").write_text(json.dumps(run_info, indent=1) + "\n")
    book = write_gradebook(args.out, roster)
    print(f"graded {len(names)} submission(s) on Slurm in {time.monotonic() - started:.0f} s "
          f"of wall time\nwrote {book}\nwrote {args.out / 'feedback'}/<student>.txt and "
          f"{args.out / 'results'}/<student>/ (task logs: {slurm}/<task>.log)")
    return 0 if run.returncode == 0 else 1


@contextlib.contextmanager
def gpu_turn(backend):
    """BACKEND=gpu: one test at a time on this machine's GPU(s). A test's leak check is the
    device memory in use after it against before it (cudaMemGetInfo: the whole device's), so a
    test of another submission allocating or freeing at the same time would be counted as this
    one's leak or hide it: measured on an H200 on 2026-12-04, 8 at a time, 11 of 20 generated
    submissions lost 1 to 8 of their 9 points to "device memory leak" rows of up to 16 GB. CTest runs
    the GPU tests one at a time for the same reason (RESOURCE_LOCK gpu). A file lock, so that
    two grading runs on one machine take turns too; compiling stays parallel (--jobs)."""
    if backend != "gpu":
        yield
        return
    devices = re.sub(r"[^0-9A-Za-z,-]", "_", os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
    path = Path(tempfile.gettempdir()) / f"tut-grade-gpu-{os.getuid()}-{devices}.lock"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_gradebook(out, roster):
    """gradebook.csv from every results/<student>/score.json of this run (a regrade of one
    student replaces only that student's files, so the other rows stay as they were)."""
    results = {}
    for f in sorted((out / "results").glob("*/score.json")):
        r = json.loads(f.read_text())
        results[f.parent.name] = reports.clean_all(r)
    fb_dir = out / "feedback"
    fb_dir.mkdir(parents=True, exist_ok=True)
    columns = []
    for r in results.values():
        for ex in by_exercise(r):
            if ex not in columns:
                columns.append(ex)
    columns.sort(key=lambda e: [int(x) for x in e.split(".")])
    # the maxima from a submission that was graded (a row the grader could not grade has none)
    maxima = by_exercise(max(results.values(), key=lambda r: r["max_score"])) if results else {}
    book = out / "gradebook.csv"
    with_id = bool(roster)
    tmp = book.with_suffix(".csv.part")
    with open(tmp, "w", newline="") as f:
        # every cell as text a spreadsheet will not run (reports.cell)
        w = _CellWriter(csv.writer(f))
        w.writerow(["student"] + (["student_id"] if with_id else []) + columns
                   + ["total", "max", "submitted", "days_late", "penalty", "final", "sandbox"])
        w.writerow(["(max)"] + ([""] if with_id else []) +
                   [maxima.get(c, {}).get("max", "") for c in columns]
                   + [sum(m["max"] for m in maxima.values()), "", "", "", "", "", ""])
        for name in sorted(set(results) | set(roster)):
            sid = [(roster.get(name) or {}).get("id", "")] if with_id else []
            if name not in results:   # on the roster, nothing handed in
                w.writerow([name] + sid + ["0"] * len(columns)
                           + [0, "", "not submitted", "", "", 0, ""])
                continue
            r, ex = results[name], by_exercise(results[name])
            w.writerow([name] + sid + [ex.get(c, {}).get("score", 0) for c in columns]
                       + [r["score"], r["max_score"], r.get("submitted", ""),
                          r.get("days_late", 0), r.get("penalty", 0), r.get("final", r["score"]),
                          r.get("sandbox", "")])
            (fb_dir / f"{name}.txt").write_text(reports.feedback(r))
    os.replace(tmp, book)
    return book


if __name__ == "__main__":
    sys.exit(main())
