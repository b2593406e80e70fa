# SPDX-License-Identifier: MIT
"""Print one line per exercise from the JSON results the drivers wrote (never from stdout).

    python3 tools/summary.py build/results/cpu/student     (make check runs this)
"""
import json
import sys
from pathlib import Path

MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip"}


def main(results_dir):
    rows = []
    for f in sorted(Path(results_dir).glob("*.json")):
        for r in json.loads(f.read_text()):
            rows.append((f.stem.rsplit("_", 1)[0] + "/" if "_" in f.stem else "", r))
    if not rows:
        print(f"(no results in {results_dir}: nothing ran)")
        return 0
    print(f"\n{'test':<28} {'result':<7} what")
    for prefix, r in rows:
        first = r["message"].splitlines()[0] if r["message"] else ""
        print(f"{prefix + r['id']:<28} {MARK.get(r['status'], r['status']):<7} {r['title']}"
              + (f"\n{'':<36}{first[:100]}" if r["status"] != "PASS" and first else ""))
    ex = [r for _, r in rows if r["exercise"]]
    done = sum(r["status"] == "PASS" for r in ex)
    print(f"\nexercises passing: {done} of {len(ex)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
