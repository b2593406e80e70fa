# SPDX-License-Identifier: MIT
"""make check / make check-solutions: run the chapters' tests, write JUnit, print the table.

    python3 tools/check.py --mode student|solutions [--chapters 01_x,...] [--jobs N]

One Python process for the whole check: NumPy is imported once here, each chapter's process is a
fork of this one (common/tut/warm.py), each test a fork of its chapter's. CTest is not the runner
here (it still is for `make test`): it would start a Python process per test (or per chapter)
and time out per process, where this needs a limit per test inside a chapter's process; and
configuring it asked every chapter's driver for its ids, a Python start each, before any test
ran. The results are the same per-test JSON files, and the JUnit file is written here from them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "common"))
sys.path.insert(0, str(REPO / "tools"))


def escape(text):
    """Text for XML (xml.sax.saxutils' escape, which would import urllib.request: 40 ms of
    every make check)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text):
    """An XML attribute's value, quoted (as xml.sax.saxutils' quoteattr)."""
    text = escape(text).replace('"', "&quot;")
    return '"' + text.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;") + '"'


def junit(rows, path, suite):
    """JUnit XML, one testcase per row: failure for what does not pass, skipped for a skip."""
    bad = {"FAIL", "NOT DONE", "ERROR", "NOT BUILT", "CRASH", "TIMEOUT"}
    cases = []
    for name, r in rows:
        body = ""
        text = escape((r.get("message") or "") + ("\n" + r["diagnostics"]
                                                 if r.get("diagnostics") else ""))
        if r["status"] in bad:
            body = f"<failure message={quoteattr(r['status'])}>{text}</failure>"
        elif r["status"] == "SKIP":
            body = f"<skipped message={quoteattr((r.get('message') or '')[:200])}/>"
        cases.append(f'  <testcase name={quoteattr(name)} classname={quoteattr(suite)} '
                     f'time="{r.get("seconds", 0)}">{body}</testcase>')
    failures = sum(r["status"] in bad for _, r in rows)
    skipped = sum(r["status"] == "SKIP" for _, r in rows)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(
        f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} '
        f'tests="{len(rows)}" failures="{failures}" skipped="{skipped}">\n'
        + "\n".join(cases) + "\n</testsuite>\n")


def _cuda_start():
    """cuInit and device 0's primary context, the one the runtime uses: made here, the
    library's first CUDA call finds them made. Without a driver, nothing: that call says so."""
    import ctypes
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        if cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    except (OSError, AttributeError):
        pass


def first_child_start():
    """gpu: fork the first test process now, before NumPy is imported here, so that its
    imports and CUDA's start (a thread) run beside this process's (common/tut/warm.py,
    FirstChild). Returns (pid, the fd of its orders, the fd of its reports)."""
    import threading
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(cmd_w)
        os.close(rep_r)
        cuda = threading.Thread(target=_cuda_start, daemon=True)
        cuda.start()
        try:
            from tut import warm
            warm.first_child_serve(cmd_r, rep_w, cuda)
        except BaseException:
            import traceback
            traceback.print_exc()
        os._exit(1)
    os.close(cmd_r)
    os.close(rep_w)
    return pid, cmd_w, rep_r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("student", "solutions"), default="student")
    p.add_argument("--chapters", default="", help="comma-separated chapter folders (default: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--only", default="", help="comma-separated test ids (default: all)")
    p.add_argument("--all", action="store_true", help="every row of every chapter")
    p.add_argument("--build", help="the command that builds the chapters' libraries (make "
                   "check's own): run beside this process's start, the tests wait for it")
    args = p.parse_args(argv)
    # `make -n check` runs this line all the same (it starts a make: the recipe's `+`), after
    # printing it, and so do -q and -t: then nothing more (make's single-letter flags lead
    # MAKEFLAGS)
    flags = (os.environ.get("MAKEFLAGS", "").split() or [""])[0]
    if not flags.startswith("-") and set(flags) & set("nqt"):
        return 0
    os.environ["TUT_TREE"] = "chapters" if args.mode == "student" else "solutions"
    # The build of an edited exercise and Python's start (NumPy, the harness: 0.36 s on the
    # H200's machine) side by side: nothing here reads a library before builder.wait(). The
    # make that runs this passes its jobserver down (the recipe's `+`): close_fds=False.
    builder = subprocess.Popen(args.build, shell=True, close_fds=False) if args.build else None
    # the GPU's schedule (TUT_CHECK_IN_TURN=1: on the emulator, as tests do)
    in_turn = (os.environ.get("TUT_BACKEND") == "gpu"
               or os.environ.get("TUT_CHECK_IN_TURN") == "1")
    started = first_child_start() if in_turn else None
    import tut
    from tut import warm
    import summary
    build = tut.build_dir()
    results = build / "results" / tut.backend() / args.mode
    names = [c for c in args.chapters.split(",") if c] or sorted(
        d.name for d in (REPO / "chapters").glob("[0-9][0-9]_*") if d.is_dir())
    if args.mode == "solutions":
        names = [c for c in names if (REPO / "solutions" / c).is_dir()]
    only = set(filter(None, args.only.split(",")))
    if only:   # only the chapters those tests are in
        names = [c for c in names if any(i[:2] == c[:2] for i in only)]
    dirs = [REPO / "chapters" / c for c in names]
    if builder is not None and builder.wait() != 0:
        return builder.returncode   # make's own error (the emulator's runtime...), said above
    shutil.rmtree(results, ignore_errors=True)
    warm.run_chapters(dirs, results, args.jobs, only,
                      first_child=warm.FirstChild(*started) if started else None)
    rows = summary.load(results)
    junit(rows, build / "tests" / args.mode / "junit.xml", f"make check ({args.mode})")
    return summary.main(["--mode", args.mode, str(results)] + (["--all"] if args.all else []))


if __name__ == "__main__":
    sys.exit(main())
