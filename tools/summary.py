# SPDX-License-Identifier: MIT
"""Print one table from the JSON results the drivers wrote (never from their stdout).

    python3 tools/summary.py [--mode student|solutions|maintainer] RESULTS_DIR [JUNIT_XML]

(make check, check-solutions and test run this.) Each row is one test: its result, and under a
result that is not a pass everything that explains it, once: the failure, the emulator's
diagnoses, the notes about what was not checked here, the end of what it printed, and for a
process that died the crash report it left (tut.capture). A test whose process left no JSON at
all (a unit test, a driver that died before its first test) is taken from CTest's JUnit file.

student (make check): every row, then a closing line with the count of exercises passing and
the next one to work on, and exit status 1 unless everything passed. maintainer (make test):
only the rows that are not as they should be (unsolved stubs are meant to fail), then the
counts; the exit status is CTest's.
"""
import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTPUT_LINES = 20   # of a row's output shown under it (the row's file keeps up to 64 KiB)

MARK = {"PASS": "pass", "FAIL": "FAIL", "NOT DONE": "todo", "ERROR": "ERROR", "SKIP": "skip",
        "NOT BUILT": "not built", "CRASH": "CRASH", "TIMEOUT": "TIMEOUT"}
NOT_PASSING = ("FAIL", "NOT DONE", "ERROR", "NOT BUILT", "CRASH", "TIMEOUT")


def load(results_dir):
    rows = []
    # an exercise's row before its hidden and performance tests' ("01.5", then "01.5+speed")
    for f in sorted(Path(results_dir).glob("*.json"), key=lambda f: f.stem.split("+")):
        # the file is named after the CTest test: "01.2", "solution_reverse_01.2", ...
        prefix = f.stem.rsplit("_", 1)[0].replace("_", "/") + "/" if "_" in f.stem else ""
        try:
            results = json.loads(f.read_text())
        except ValueError:
            continue
        rows += [(prefix + r["id"], r) for r in results]
    return rows


def junit_cases(junit):
    try:
        return list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        return []


def timed_out(cases):
    """Names of the tests CTest stopped at their time limit."""
    out = set()
    for case in cases:
        text = (case.findtext("system-out") or "") + "".join(
            (f.get("message") or "") for f in case.findall("failure"))
        if re.search(r"\bTimeout\b|\btimed out\b", text):
            out.add(case.get("name", ""))
    return out


def unreported(cases, names):
    """Failed CTest tests that left no JSON result: (name, row) from the JUnit file."""
    out = []
    for case in cases:
        name = case.get("name", "")
        if case.get("status") in ("run", "disabled", "notrun") or name in names:
            continue
        if case.find("skipped") is not None:
            continue
        failure = case.find("failure")
        why = (failure.get("message") if failure is not None else "") or "failed"
        lines = (case.findtext("system-out") or "").rstrip().splitlines()
        cut = len(lines) > 40
        text = "\n".join((["..."] if cut else []) + lines[-40:])
        out.append((name, {"id": name, "status": "ERROR",
                           "title": f"{why} (no result written; the end of its output:)",
                           "message": text}))
    return out


def crash_report(r):
    """A CRASH row's message: the C report (signal, place) and the Python stack, from the output
    file the test was writing when its process died. Also sets r['todo'] to the place."""
    try:
        text = Path(r.get("output_file", "")).read_text(errors="replace")
    except OSError:
        text = ""
    lines = text.rstrip("\n").splitlines()
    c_report = [line for line in lines if line.startswith(("crash: ", "cuemu: "))]
    start = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")),
                 None)
    stack = [line for line in (lines[start:] if start is not None else [])
             if line.strip() and "/common/tut/" not in line and "/tools/check.py" not in line
             and not line.startswith(("crash: ", "cuemu: ", "Extension modules:"))][:12]
    before = [line for line in (lines[:start] if start is not None else lines)
              if not line.startswith(("crash: ", "cuemu: "))][-5:]
    msg = [line.replace(f"{REPO}/", "") for line in c_report + stack]
    for line in msg:
        m = re.match(r"crash: at (\S+:\d+)", line)
        if m:
            r["todo"] = m.group(1)
    if not msg:
        msg = ["the test's process died and left no report (killed from outside?)"]
    if before:
        msg += ["what it printed last:"] + ["  " + line for line in before]
    return "\n".join(msg)


def first_of_each(lines, kinds=("cuemu: stream race",)):
    """The first report of each kind in full, then a count of the rest: one missing stream
    argument makes a race report for every buffer the two streams share."""
    out, extra = [], {}
    for line in lines:
        kind = next((k for k in kinds if line.startswith(k)), None)
        if kind and any(o.startswith(kind) for o in out):
            extra[kind] = extra.get(kind, 0) + 1
            continue
        out.append(line)
    for kind, n in extra.items():
        words = kind.split(": ", 1)[1]
        out.append(f"cuemu: and {n} more {words} report{'s' if n > 1 else ''} like the first "
                   f"(one missing order shows on every buffer it touches: fix the first)")
    return out


def details(r, everything):
    """Lines under a row: for a row that is not a pass everything that explains it; for a pass,
    what must still reach the student (diagnoses, notes, output dropped)."""
    out = []
    # The emulator's diagnosis first: it names the student's line, where the exception's own
    # first line is often the harness's call that noticed, or the CUDA call after the fault.
    if r.get("diagnostics"):
        out += r["diagnostics"].rstrip().splitlines()
    if everything and r.get("message"):
        lines = r["message"].rstrip().splitlines()
        # a CudaError carries the emulator's diagnoses of its call: those first too (after a
        # TIMEOUT's own first line, which says what stopped it)
        keep = lines[:1] if r["status"] == "TIMEOUT" else []
        cuemu = [line for line in lines[len(keep):] if line.startswith("cuemu: ")]
        out += keep + cuemu + [line for line in lines[len(keep):] if line not in cuemu]
    elif r["status"] == "SKIP" and r.get("message"):
        out.append(r["message"].splitlines()[0])
    out += [f"note: {n}" for n in r.get("notes", [])]
    out = first_of_each(out)
    lines, dropped = r.get("output_lines", 0), r.get("output_dropped", 0)
    shown = [line for line in r.get("output", "").rstrip("\n").splitlines()
             if not line.startswith("cuemu: ")]
    if everything and shown:
        tail = shown[-OUTPUT_LINES:]
        out.append(f"output ({len(tail)} of {lines} lines):" if lines > len(tail) else "output:")
        out += ["  " + line for line in tail]
    kept = f" in {r['output_file']}" if r.get("output_file") else ""
    if dropped:
        out.append(f"output: {lines} lines printed; the first 64 KiB kept{kept}, {dropped} "
                   f"lines dropped (a printf in a kernel runs once per thread)")
    elif lines and not everything:
        out.append(f"output: {lines} lines printed (kept{kept or ' in its file'})")
    return out


def counted_exercise(r):
    """A row that counts as an exercise in "N of M exercises": not an instructor's hidden test,
    nor a performance test (its exercise's own row counts already)."""
    return bool(r.get("exercise")) and not r.get("hidden") and not r.get("perf")


def next_step(ex):
    """(exercise id, place) of the first exercise that does not pass, in id order (one whose
    lines do not compile first: nothing of its chapter runs until they do)."""
    for r in ex:
        if r["status"] == "NOT BUILT" and r.get("blame") == r["id"]:
            return r["id"], r.get("todo", "")
    for r in sorted(ex, key=lambda r: [int(p) if p.isdigit() else p
                                       for p in re.split(r"[.+-]", r["id"])]):
        if r["status"] in NOT_PASSING:
            return r["id"], r.get("todo", "")
    return None, ""


def closing_line(rows):
    ex = [r for _, r in rows if counted_exercise(r)]
    checks = [r for _, r in rows if not r.get("exercise")]
    parts = []
    if ex:
        passing = sum(r["status"] == "PASS" for r in ex)
        text = f"exercises: {passing} of {len(ex)} passing"
        ex_id, where = next_step(ex)
        if ex_id:
            chapter = ex_id[:2]
            mine = [r for r in ex if r["id"][:2] == chapter]
            if len({r["id"][:2] for r in ex}) > 1:
                text += (f" ({chapter}: {sum(r['status'] == 'PASS' for r in mine)} of "
                         f"{len(mine)})")
            text += f" - next: {ex_id}" + (f" at {where}" if where else "")
        parts.append(text)
        states = {"not started": sum(r["status"] == "NOT DONE" and r.get("part") == "none"
                                     for r in ex),
                  "partly done": sum(r["status"] == "NOT DONE" and r.get("part") != "none"
                                     for r in ex),
                  "failing": sum(r["status"] in ("FAIL", "ERROR") for r in ex),
                  "not built": sum(r["status"] == "NOT BUILT" for r in ex),
                  "crashed": sum(r["status"] == "CRASH" for r in ex),
                  "timed out": sum(r["status"] == "TIMEOUT" for r in ex),
                  "skipped here": sum(r["status"] == "SKIP" for r in ex)}
        rest = ", ".join(f"{n} {s}" for s, n in states.items() if n)
        if rest:
            parts.append(f"  ({rest})")
    if checks:
        ok = sum(r["status"] in ("PASS", "SKIP") for r in checks)
        parts.append(f"other checks: {ok} of {len(checks)} passing")
    quick = sorted(r["id"] for _, r in rows if r.get("left_out"))
    if quick:
        shown = ", ".join(quick[:6]) + (f" and {len(quick) - 6} more" if len(quick) > 6 else "")
        parts.append(f"quick check on a GPU: {shown} ran without the large sizes "
                     f"(make check FULL=1 adds them; make test and grading always do)")
    return parts


def chapter_lines(rows, current):
    """One line per chapter: its exercises passing, what the others are, its other checks."""
    names = {d.name[:2]: d.name for d in (REPO / "chapters").glob("[0-9][0-9]_*")}
    out = []
    for ch in sorted({r["id"][:2] for _, r in rows}):
        mine = [r for _, r in rows if r["id"][:2] == ch]
        ex = [r for r in mine if counted_exercise(r)]
        checks = [r for r in mine if not r.get("exercise")]
        counts = {}
        for r in ex + checks:
            if r["status"] not in ("PASS",):
                word = {"NOT DONE": "todo", "SKIP": "skipped here"}.get(
                    r["status"], MARK.get(r["status"], r["status"]).lower())
                counts[word] = counts.get(word, 0) + 1
        rest = ", ".join(f"{n} {w}" for w, n in counts.items())
        passing = sum(r["status"] == "PASS" for r in ex)
        ok = sum(r["status"] in ("PASS", "SKIP") for r in checks)
        mark = "->" if ch == current else "  "
        out.append(f"{mark} {names.get(ch, ch):<26} {passing} of {len(ex)} exercises, "
                   f"{ok} of {len(checks)} checks" + (f"  ({rest})" if rest else ""))
    if current:
        out.append(f"(the rows of chapter {current}, the one in progress, follow; "
                   f"make check CH=NN shows a chapter's, V=1 every row)")
    return out


def as_it_should_be(r):
    """A pass, a skip, or an unsolved stub's exercise failing (make test checks they all do)."""
    if r.get("expected_to_fail"):
        return r["status"] in ("FAIL", "NOT DONE")
    return r["status"] in ("PASS", "SKIP")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("student", "solutions", "maintainer"), default="student")
    p.add_argument("results")
    p.add_argument("junit", nargs="?")
    p.add_argument("--all", action="store_true", help="every row, whatever the chapters")
    args = p.parse_args(argv)
    rows = load(args.results)
    cases = junit_cases(args.junit) if args.junit else []
    killed = timed_out(cases)
    for name, r in rows:
        if r["status"] == "CRASH":
            if name in killed:
                r["status"] = "TIMEOUT"
                r["message"] = ("stopped at its time limit: a kernel or a loop that never ends "
                                "(a spin-wait, a condition that never changes, a grid-stride loop "
                                "whose step is 0?)")
            else:
                r["message"] = crash_report(r)
    rows += unreported(cases, {name for name, _ in rows})
    if not rows:
        print(f"error: no test ran (no results in {args.results})")
        return 1
    brief = args.mode == "maintainer"
    shown = [(name, r) for name, r in rows if not brief or not as_it_should_be(r)]
    chapters = sorted({r["id"][:2] for _, r in rows if r.get("id", "")[:2].isdigit()})
    if not brief and len(chapters) > 1 and not args.all:
        # several chapters: a line each, then the rows of the chapter in progress only
        ex = [r for _, r in rows if counted_exercise(r)]
        current = (next_step(ex)[0] or "")[:2]
        print()
        for line in chapter_lines(rows, current):
            print(line)
        shown = [(name, r) for name, r in shown if r["id"][:2] == current]
    width = max([len(name) for name, _ in shown] + [8])
    mark_w = max([len(MARK.get(r["status"], r["status"])) for _, r in shown] + [6])
    if shown:
        print(f"\n{'test':<{width}}  {'result':<{mark_w}}  what")
    said = set()   # a chapter that did not build: its compiler error once, not on every row
    # ... on the row of the exercise whose lines fail to compile, where the TODOs tell
    blamed = {r.get("blame") for _, r in shown if r["status"] == "NOT BUILT"} & {
        r["id"] for _, r in shown}
    for name, r in shown:
        print(f"{name:<{width}}  {MARK.get(r['status'], r['status']):<{mark_w}}  {r['title']}")
        if r["status"] == "NOT BUILT":
            if r["message"] in said or (r.get("blame") in blamed and r["id"] != r["blame"]):
                continue
            said.add(r["message"])
            whole = f": {r['build_log']}" if r.get("build_log") else ""
            r = dict(r, message=r["message"] + "\n(no test of this chapter runs until it "
                                               "compiles; the compiler's whole output" + whole + ")")
        for line in details(r, r["status"] in NOT_PASSING):
            print(f"{'':<{width + mark_w + 4}}{line.rstrip()}")
    if brief:
        stubs = [r for _, r in rows if r.get("expected_to_fail")]
        wrong = sum(not as_it_should_be(r) for _, r in rows)
        passed = sum(r["status"] == "PASS" for _, r in rows)
        failing = sum(r["status"] in ("FAIL", "NOT DONE") for r in stubs)
        skipped = sum(r["status"] == "SKIP" for _, r in rows)
        print(f"\n{passed} pass, {failing} of {len(stubs)} unsolved stubs fail as they must, "
              f"{skipped} skip, {wrong} wrong")
        return 0
    print()
    for line in closing_line(rows):
        print(line)
    if all(r["status"] == "SKIP" for _, r in rows):
        print("error: every test was skipped, so nothing was checked (see the reasons above)")
        return 1
    return 0 if all(r["status"] in ("PASS", "SKIP") for _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
