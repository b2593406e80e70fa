# SPDX-License-Identifier: MIT
"""Print one line per test from the JSON results the drivers wrote (never from their stdout).

    python3 tools/summary.py build/results/cpu/student     (make check runs this)

Long runs (make test) list only what did not pass, then the counts.
"""
import json
import sys
from pathlib import Path

MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip"}


def load(results_dir):
    rows = []
    for f in sorted(Path(results_dir).glob("*.json")):
        # the file is named after the CTest test: "01.2", "solution_reverse_01.2", ...
        prefix = f.stem.rsplit("_", 1)[0].replace("_", "/") + "/" if "_" in f.stem else ""
        rows += [(prefix + r["id"], r) for r in json.loads(f.read_text())]
    return rows


def as_it_should_be(r):
    """A pass, a skip, or an unsolved stub's exercise failing (make test checks they all do)."""
    if r.get("expected_to_fail"):
        return r["status"] in ("FAIL", "NOT DONE")
    return r["status"] in ("PASS", "SKIP")


def main(results_dir):
    rows = load(results_dir)
    if not rows:
        print(f"(no results in {results_dir}: nothing ran)")
        return 0
    brief = len(rows) > 60
    shown = [(name, r) for name, r in rows if not brief or not as_it_should_be(r)]
    width = max([len(name) for name, _ in shown] + [8])
    if shown:
        print(f"\n{'test':<{width}}  {'result':<6}  what")
    for name, r in shown:
        print(f"{name:<{width}}  {MARK.get(r['status'], r['status']):<6}  {r['title']}")
        if r["status"] in ("FAIL", "NOT DONE", "ERROR") and r["message"]:
            for line in r["message"].splitlines()[:3]:
                print(f"{'':<{width + 10}}{line.strip()[:110]}")
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
    ex = [r for _, r in rows if r["exercise"] and r["tree"] == "chapters"]
    if ex and not brief:
        print(f"exercises passing: {sum(r['status'] == 'PASS' for r in ex)} of {len(ex)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
