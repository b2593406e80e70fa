# SPDX-License-Identifier: MIT
"""make sanitize: every chapter's solution tests under compute-sanitizer, reporting only what
is wrong.

Each test id runs in a process of its own (as under CTest) under each tool:
  memcheck --leak-check full   out-of-bounds and misaligned accesses, API errors, leaks
  racecheck                    shared-memory races (a missing __syncthreads)
  synccheck                    barriers not reached by every thread, bad warp masks
  initcheck                    reads of global memory nothing wrote
The tests provoke some reports on purpose (a launch CUDA must refuse, a demo without its
barrier). tools/sanitize-expected.txt declares each, with the reason: a report that matches
a declaration is expected; anything else is printed and makes the run fail. So does a test that
fails under the sanitizer, and a declaration that matched nothing is listed as stale.

    python3 tools/sanitize.py                  every chapter, every tool
    python3 tools/sanitize.py --chapter 04_shared_memory --tool racecheck
    python3 tools/sanitize.py --keep DIR       keep the raw logs in DIR
    python3 tools/sanitize.py --jobs 1         one run at a time (default: several at once)

Runs go several at a time (--jobs) on the one GPU: the sanitizers spend most of their time on
the CPU. A run that is not clean when others ran beside it (a test that fills the device's
memory on purpose makes its neighbours' allocations fail) is run again alone after the others,
and only that run counts.

The harness's own device-memory leak check steps aside under the sanitizer (TUT_SANITIZER):
the tools allocate device memory of their own, and memcheck judges leaks by allocation.
"""
import argparse
import concurrent.futures
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXPECTED = REPO / "tools" / "sanitize-expected.txt"
TOOLS = {
    "memcheck": ["--tool", "memcheck", "--leak-check", "full"],
    "racecheck": ["--tool", "racecheck"],
    "synccheck": ["--tool", "synccheck"],
    "initcheck": ["--tool", "initcheck"],
}
PREFIX = "========="
# lines of the sanitizer's own that are not reports
NOT_A_REPORT = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|"
                          r"Target application returned|This tool is|Program finished)")


def load_expected(path=EXPECTED):
    """Declarations: `tool | test id glob | regular expression | reason`, one a line."""
    entries = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 4 or not all(parts):
            sys.exit(f"{path.name}:{n}: want `tool | test glob | regex | reason`, got: {line}")
        tool, glob, regex, reason = parts
        if tool not in TOOLS and tool != "*":
            sys.exit(f"{path.name}:{n}: unknown tool {tool!r} (one of {', '.join(TOOLS)}, *)")
        entries.append({"line": n, "tool": tool, "glob": glob, "re": re.compile(regex, re.S),
                        "reason": reason, "used": 0})
    return entries


def reports(log):
    """The sanitizer's reports in a log: each a header line and its indented details."""
    out, current = [], None
    for raw in log.splitlines():
        if not raw.startswith(PREFIX):
            continue
        body = raw[len(PREFIX):]
        if body.startswith(" ") and body[1:2] not in ("", " "):   # a new report
            text = body.strip()
            if NOT_A_REPORT.match(text):
                current = None
                continue
            current = [text]
            out.append(current)
        elif current is not None and body.strip():
            current.append(body.strip())
    return ["\n".join(r) for r in out]


def expected_by(entries, tool, test_id, report):
    """The declaration that expects this report, or None."""
    for e in entries:
        if e["tool"] in (tool, "*") and fnmatch.fnmatchcase(test_id, e["glob"]) \
                and e["re"].search(report):
            return e
    return None


def undeclared(entries, tool, test_id, found):
    """The reports of one run that no declaration expects."""
    return [r for r in found if expected_by(entries, tool, test_id, r) is None]


def report_line(tool, test_id, rc, found, entries, note=""):
    bad = len(undeclared(entries, tool, test_id, found))
    status = "FAIL" if bad or rc not in (0, 77) else "skip" if rc == 77 else "ok"
    print(f"[{status:>4}] {tool:<9} {test_id:<24} {len(found)} report(s), "
          f"{len(found) - bad} expected" + (f" ({note})" if note else ""), flush=True)


def find_sanitizer(given):
    nvcc = shutil.which("nvcc")
    for candidate in (given, "compute-sanitizer",
                      nvcc and str(Path(nvcc).resolve().parent / "compute-sanitizer"),
                      "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def test_ids(driver, env):
    out = subprocess.run([sys.executable, str(driver), "--list"], capture_output=True,
                         text=True, env=env, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chapter", action="append", help="only this chapter (repeatable)")
    p.add_argument("--tool", action="append", choices=sorted(TOOLS), help="only this tool")
    p.add_argument("--only", help="only test ids matching this glob, e.g. '04.*'")
    p.add_argument("--keep", metavar="DIR", help="keep every raw log in DIR")
    p.add_argument("--sanitizer", default=os.environ.get("COMPUTE_SANITIZER"),
                   help="the compute-sanitizer to run (default: PATH, then next to nvcc)")
    p.add_argument("--jobs", "-j", type=int, default=min(8, os.cpu_count() or 1),
                   help="runs at a time (default: the CPU count, at most 8)")
    p.add_argument("--timeout", type=int, default=600,
                   help="seconds one test may take under a tool (default 600)")
    p.add_argument("--backend", default="gpu", choices=("gpu", "cpu"),
                   help="cpu only to test this script itself with a stand-in sanitizer")
    args = p.parse_args(argv)
    args.sanitizer = find_sanitizer(args.sanitizer)
    if args.sanitizer is None:
        print("error: compute-sanitizer not found: it comes with the CUDA toolkit (add its "
              "bin/ to PATH, or set COMPUTE_SANITIZER=/path/to/compute-sanitizer)")
        return 1
    entries = load_expected()
    env = dict(os.environ, TUT_BACKEND=args.backend, TUT_TREE="solutions", TUT_SANITIZER="1")
    chapters = sorted(d for d in (REPO / "chapters").glob("[0-9][0-9]_*") if d.is_dir()
                      and (args.chapter is None or d.name in args.chapter))
    logdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sanitize-"))
    logdir.mkdir(parents=True, exist_ok=True)
    ids = {chapter: test_ids(chapter / "driver.py", env) for chapter in chapters}
    runs = [(tool, chapter / "driver.py", test_id)
            for tool in args.tool or list(TOOLS) for chapter in chapters
            for test_id in ids[chapter]
            if not args.only or fnmatch.fnmatchcase(test_id, args.only)]

    def run(tool, driver, test_id):
        """One test under one tool: (exit status, output tail, the sanitizer's reports)."""
        log = logdir / f"{tool}-{test_id}.log"
        log.unlink(missing_ok=True)
        cmd = [args.sanitizer, *TOOLS[tool], "--print-limit", "1000", "--log-file", str(log),
               sys.executable, str(driver), "--check", "--only", test_id, "--seed", "1"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  timeout=args.timeout)
            rc, tail = proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:]
        except subprocess.TimeoutExpired as e:
            rc = "timeout"
            tail = f"no result after {args.timeout} s under {tool} (--timeout)\n" + \
                (e.stdout or b"")[-2000:].decode(errors="replace")
        found = reports(log.read_text(errors="replace")) if log.exists() else []
        return rc, tail, found

    results, alone = {}, []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run, *r): r for r in runs}
        for f in concurrent.futures.as_completed(futures):
            tool, driver, test_id = futures[f]
            rc, tail, found = results[tool, test_id] = f.result()
            # 77 (cannot run here: too little free memory) may be its neighbours' doing too
            suspect = rc != 0 or undeclared(entries, tool, test_id, found)
            if suspect and args.jobs > 1:
                alone.append(futures[f])
            else:
                report_line(tool, test_id, rc, found, entries)
    for tool, driver, test_id in sorted(alone, key=lambda r: (r[0], r[2])):
        rc, tail, found = results[tool, test_id] = run(tool, driver, test_id)
        report_line(tool, test_id, rc, found, entries, "run again alone")
    unexpected, failed, expected_count, ran = [], [], 0, set()
    for (tool, test_id), (rc, tail, found) in sorted(results.items()):
        ran.add((tool, test_id))
        for r in found:
            e = expected_by(entries, tool, test_id, r)
            if e is not None:
                e["used"] += 1
                expected_count += 1
            else:
                unexpected.append((tool, test_id, r))
        # 77: the test cannot run here (too little memory...): not a sanitizer finding
        if rc not in (0, 77):
            failed.append((tool, test_id, tail))
    for tool, test_id, text in unexpected:
        print(f"\n--- unexpected {tool} report in {test_id}:\n{text}")
    for tool, test_id, text in failed:
        print(f"\n--- {test_id} failed under {tool}:\n{text.strip()}")
    stale = [e for e in entries if e["used"] == 0   # declared for a test that ran, unused
             and any(e["tool"] in (tool, "*") and fnmatch.fnmatchcase(test_id, e["glob"])
                     for tool, test_id in ran)]
    for e in stale:
        print(f"note: {EXPECTED.name}:{e['line']} matched nothing in this run "
              f"({e['tool']} {e['glob']}): still needed?")
    print(f"\nsanitize: {len(results)} runs, {expected_count} expected report(s) filtered, "
          f"{len(unexpected)} unexpected, {len(failed)} test(s) failed"
          + (f"; logs in {logdir}" if args.keep else ""))
    if not args.keep:
        shutil.rmtree(logdir, ignore_errors=True)
    return 1 if unexpected or failed else 0


if __name__ == "__main__":
    sys.exit(main())
