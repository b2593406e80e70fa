# SPDX-License-Identifier: MIT
"""Print one line per test from the JSON results the drivers wrote (never from their stdout),
each failure with its whole diagnosis, once.

    python3 tools/summary.py build/results/cpu/student [build/tests/student/junit.xml]

(make check runs this.) A test that wrote no JSON (a unit test, a driver that crashed or timed
out) is taken from CTest's JUnit file, with the end of its output. Long runs (make test) list
only what did not pass, then the counts. Exit status 1 when nothing ran or every test was
skipped (nothing was checked), else 0: CTest's own status says whether tests failed.
"""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OUTPUT_LINES = 40   # of a test with no JSON result: the end of what it printed

MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip"}


def load(results_dir):
    rows = []
    for f in sorted(Path(results_dir).glob("*.json")):
        # the file is named after the CTest test: "01.2", "solution_reverse_01.2", ...
        prefix = f.stem.rsplit("_", 1)[0].replace("_", "/") + "/" if "_" in f.stem else ""
        rows += [(prefix + r["id"], r) for r in json.loads(f.read_text())]
    return rows


def unreported(junit, names):
    """Failed CTest tests that left no JSON result: (name, title, message) from the JUnit file."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        if case.get("status") in ("run", "disabled", "notrun") or name in names:
            continue
        if case.find("skipped") is not None:
            continue
        failure = case.find("failure")
        why = (failure.get("message") if failure is not None else "") or "failed"
        lines = (case.findtext("system-out") or "").rstrip().splitlines()
        cut = len(lines) > OUTPUT_LINES
        text = "\n".join((["..."] if cut else []) + lines[-OUTPUT_LINES:])
        out.append((name, {"status": "ERROR", "title": f"{why} (no result written; the end "
                                                        f"of its output:)", "message": text}))
    return out


def as_it_should_be(r):
    """A pass, a skip, or an unsolved stub's exercise failing (make test checks they all do)."""
    if r.get("expected_to_fail"):
        return r["status"] in ("FAIL", "NOT DONE")
    return r["status"] in ("PASS", "SKIP")


def main(results_dir, junit=None):
    rows = load(results_dir)
    if junit:
        rows += unreported(junit, {name for name, _ in rows})
    if not rows:
        print(f"error: no test ran (no results in {results_dir})")
        return 1
    brief = len(rows) > 60
    shown = [(name, r) for name, r in rows if not brief or not as_it_should_be(r)]
    width = max([len(name) for name, _ in shown] + [8])
    if shown:
        print(f"\n{'test':<{width}}  {'result':<6}  what")
    for name, r in shown:
        print(f"{name:<{width}}  {MARK.get(r['status'], r['status']):<6}  {r['title']}")
        if r["status"] in ("FAIL", "NOT DONE", "ERROR") and r["message"]:
            for line in r["message"].rstrip().splitlines():
                print(f"{'':<{width + 10}}{line.rstrip()}")
    skips = sorted({r["message"] for _, r in rows if r["status"] == "SKIP"})
    for reason in skips:
        print(f"skipped: {reason}")
    stubs = [r for _, r in rows if r.get("expected_to_fail")]
    if stubs:   # make test: unsolved stubs are meant to fail
        wrong = sum(not as_it_should_be(r) for _, r in rows)
        passed = sum(r["status"] == "PASS" for _, r in rows)
        failing = sum(r["status"] in ("FAIL", "NOT DONE") for r in stubs)
        skipped = sum(r["status"] == "SKIP" for _, r in rows)
        print(f"\n{passed} pass, {failing} of {len(stubs)} unsolved stubs fail as they must, "
              f"{skipped} skip, {wrong} wrong")
    else:
        counts = {}
        for _, r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print("\n" + ", ".join(f"{n} {MARK.get(s, s)}" for s, n in sorted(counts.items())))
    ex = [r for _, r in rows if r.get("exercise") and r.get("tree") == "chapters"]
    if ex and not brief:
        todo = sum(r["status"] == "NOT DONE" for r in ex)
        print(f"exercises passing: {sum(r['status'] == 'PASS' for r in ex)} of {len(ex)}"
              + (f" ({todo} not started: todo)" if todo else ""))
    if all(r["status"] == "SKIP" for _, r in rows):
        print("error: every test was skipped, so nothing was checked (see the reason above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
