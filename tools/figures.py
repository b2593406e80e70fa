# SPDX-License-Identifier: MIT
"""Figures that cannot drift: every GPU figure a lesson quotes must be in a recorded run.

The record (docs/figures/<device>.json) holds benchmark runs: device, driver, CUDA, date, and
every figure each chapter's Bench printed (tut.Bench records them when TUT_RECORD names a file).

    python3 tools/figures.py check          fail (exit 1) on a quoted figure not in the record
    python3 tools/figures.py record RUN     merge a run written by `make bench RECORD=1`
    python3 tools/figures.py list           every figure of the record, run by run
    python3 tools/figures.py selftest       the matching rules, on made-up lessons

What is checked. In chapters/*/README.md and docs/*.md, a figure is a number with a GPU unit:
GB/s, TB/s, TFLOP/s, GFLOP/s, us, ms, a ratio (8.0x) or a percentage (88%). It is checked when
it stands in measurement context: its paragraph, list item or table row says "H200", or an
earlier block of the same section (since the last heading) does. In the solutions' .cu files,
the drivers and common/, a figure within two lines of "H200" (a comment) is checked too. It matches when some figure of
one recorded run rounds to it at the precision quoted ("4234 GB/s" matches 4234.4; "55.5" needs
55.45 to 55.55):
  - a figure's value, in the same unit;
  - a figure's ratio to its ceiling, as a percentage (Bench.row's "of ceiling").
A ratio of two figures ("12.5x", "91% of two one-way copies") must be recorded as a figure of
its own (Bench.figure(..., "x")): ratios computed here from any two figures would match almost
any number, and the check would catch nothing.
A range quoted over several runs ("7.5x to 9.1x") is two figures, each of which must be in some
recorded run. A number that is not a measurement (a spec sheet value, a computed bound) is
exempted by a marker after it on the same line, with a reason:

    4814 GB/s<!-- not measured: clock x bus width, a bound -->

Every figure before the marker on its line is exempt. A marker without a reason is an error.
"""
import argparse
import datetime
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECORD_DIR = REPO / "docs" / "figures"
CONTEXT = re.compile(r"\bH200\b")
UNITS = {"GB/s": "GB/s", "TB/s": "TB/s", "TFLOP/s": "TFLOP/s", "GFLOP/s": "GFLOP/s",
         "us": "us", "µs": "us", "ms": "ms", "x": "x", "%": "%"}
# a number, then (maybe one space and) a unit; "32x32", "0x7F" and "8x8" are not ratios
FIGURE = re.compile(
    r"(?<![\w.^/-])(\d+(?:\.\d+)?)(?:\s?(GB/s|TB/s|TFLOP/s|GFLOP/s|us|µs|ms)(?![\w/])"
    r"|(x)(?![\w])|\s?(%))")
MARKER = re.compile(r"<!--\s*not measured:(.*?)-->")


# ---- the record ---------------------------------------------------------------------------------
def load_runs(directory=RECORD_DIR):
    runs = []
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        for run in data.get("runs", []):
            run = dict(run)
            run["file"] = path.name
            runs.append(run)
    return runs


def candidates(run):
    """(value, unit, how) for everything a lesson may quote from one run."""
    out = []
    for f in run.get("figures", []):   # a partial record may keep only a figure's ratio
        if f.get("ratio"):
            out.append((100.0 * f["ratio"], "%", f"{f['chapter']}: {f['what']} / ceiling"))
    figs = [f for f in run.get("figures", []) if isinstance(f.get("value"), (int, float))]
    for f in figs:
        unit = UNITS.get(f["unit"], f["unit"])
        out.append((float(f["value"]), unit, f"{f['chapter']}: {f['what']}"))
    return out


def matches(text_value, unit, cands):
    """The first candidate that rounds to the quoted number at its precision, or None."""
    decimals = len(text_value.split(".")[1]) if "." in text_value else 0
    q, half = float(text_value), 0.5 * 10.0 ** -decimals
    for value, u, how in cands:
        if u == unit and abs(value - q) <= half * (1 + 1e-9):
            return how
    return None


# ---- the lessons --------------------------------------------------------------------------------
def lesson_files():
    files = sorted(REPO.glob("chapters/*/README.md")) + sorted(REPO.glob("docs/*.md"))
    code = (sorted(REPO.glob("solutions/*/*.cu")) + sorted(REPO.glob("chapters/*/driver.py"))
            + sorted(REPO.glob("common/*.[ch]*")) + sorted(REPO.glob("common/*.py")))
    return [f for f in files if f.parent != RECORD_DIR] + code


def code_figures(text):
    """The same figures in source code: in measurement context when "H200" is on the line or
    within two lines of it (a comment's sentence)."""
    lines = text.splitlines()
    near = set()
    for i, line in enumerate(lines):
        if CONTEXT.search(line):
            near.update(range(i - 2, i + 3))
    found = []
    for i in sorted(n for n in near if 0 <= n < len(lines)):
        line = lines[i]
        marks = list(MARKER.finditer(line))
        for m in FIGURE.finditer(line):
            unit_text = m.group(2) or m.group(3) or m.group(4)
            if unit_text is None:
                continue
            reason = next((k.group(1).strip() for k in marks if k.start() >= m.end()), None)
            found.append((i + 1, m.group(1), UNITS[unit_text], reason))
    return found


def blocks(text):
    """(first line number, lines) of each paragraph, list item or table row; a heading is a
    block ["#heading", line] of its own: it ends the previous measurement context."""
    out, current, start, fenced = [], [], 0, False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        new_block = (not stripped or stripped.startswith("#") or stripped.startswith("|")
                     or re.match(r"^\s{0,3}([-*]|\d+\.)\s", line))
        if new_block and current:
            out.append((start, current))
            current = []
        if not stripped:
            continue
        if stripped.startswith("#"):
            out.append((n, ["#heading", line]))
            continue
        if not current:
            start = n
        current.append(line)
        if stripped.startswith("|"):
            out.append((start, current))
            current = []
    if current:
        out.append((start, current))
    return out


# a bare number followed by "/", "vs", "to"... and a number with a unit takes that unit:
# "55.5 / 6.9 GB/s", "12.2 vs 55.0 GB/s", "60 to 80 us"
SHARED_UNIT = re.compile(
    r"(?<![\w.^/-])(\d+(?:\.\d+)?)(?=\s*(?:/|vs\.?|to|and|or|-)\s*\d+(?:\.\d+)?"
    r"\s?(GB/s|TB/s|TFLOP/s|GFLOP/s|us|µs|ms)(?![\w/]))")


def quoted_figures(text):
    """(line number, number as written, unit, exempt reason or None) for every figure in
    measurement context; a marker without a reason gives unit 'marker'."""
    found, in_context, header, prev_row = [], False, None, -2
    for start, lines in blocks(text):
        if lines[0] == "#heading":   # a heading that names the device opens the context
            in_context = bool(CONTEXT.search(lines[1]))
            continue
        joined = "\n".join(lines)
        cells = _cells(lines[0]) if lines[0].lstrip().startswith("|") else None
        if cells is not None and start != prev_row + 1:
            header = cells   # a table's first row names its columns: "GB/s" is a unit
        if cells is not None:
            prev_row = start
        in_context = in_context or bool(CONTEXT.search(joined))
        if not in_context:
            continue
        for offset, line in enumerate(lines):
            marks = list(MARKER.finditer(line))
            for m in marks:
                if not m.group(1).strip():
                    found.append((start + offset, m.group(0), "marker", None))
            hits = [(m.start(), m.end(), m.group(1), m.group(2) or m.group(3) or m.group(4))
                    for m in FIGURE.finditer(line)]
            hits += [(m.start(), m.end(1), m.group(1), m.group(2))
                     for m in SHARED_UNIT.finditer(line)]
            if cells is not None and header is not None and cells is not header:
                # a bare number under a column headed by a unit ("| GB/s |") has that unit
                col = 0
                for i, cell in enumerate(line.split("|")[1:-1]):
                    bare = cell.strip().strip("*")
                    unit = header[i] if i < len(header) else ""
                    if re.fullmatch(r"\d+(?:\.\d+)?", bare) and unit in UNITS:
                        pos = line.index(cell, col) + cell.index(bare)
                        hits.append((pos, pos + len(bare), bare, unit))
                    col = line.index(cell, col) + len(cell)
            for begin, end, number, unit_text in sorted(set(hits)):
                if unit_text is None or _inside_code(line, begin):
                    continue
                unit = UNITS[unit_text]
                reason = next((k.group(1).strip() for k in marks if k.start() >= end), None)
                found.append((start + offset, number, unit, reason))
    return found


def _cells(line):
    return [c.strip().strip("*") for c in line.strip().strip("|").split("|")]


def _inside_code(line, pos):
    return line[:pos].count("`") % 2 == 1


def check(files=None, runs=None, verbose=False):
    runs = load_runs() if runs is None else runs
    cands = [(c, run) for run in runs for c in candidates(run)]
    flat = [c for c, _ in cands]
    problems, checked = [], 0
    for path in files or lesson_files():
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        scan = quoted_figures if path.suffix == ".md" else code_figures
        for line, number, unit, reason in scan(path.read_text()):
            if unit == "marker":
                problems.append(f"{rel}:{line}: {number}: an opt-out marker needs a reason")
                continue
            if reason:
                continue
            checked += 1
            how = matches(number, unit, flat)
            if how is None:
                problems.append(f"{rel}:{line}: {number} {unit} is in no recorded run")
            elif verbose:
                print(f"{rel}:{line}: {number} {unit} = {how}")
    return checked, problems


# ---- recording ----------------------------------------------------------------------------------
def query(cmd):
    """A command's output, stripped ("" when it is missing or fails): nvidia-smi, nvcc."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def record(run_path, directory=RECORD_DIR, label="make bench", allow_cpu=False):
    """Merge build/figures/run.json (written by the chapters' Bench under TUT_RECORD) into the
    device's record file, replacing an earlier run of the same date and label. allow_cpu: a
    run that names its machine itself (make loop-bench: a student's wait on the emulator)."""
    run = json.loads(Path(run_path).read_text())
    if run.get("backend") != "gpu" and not (allow_cpu and run.get("device")):
        sys.exit("figures: this run is from the emulator: only a GPU run (make bench "
                 "BACKEND=gpu RECORD=1) is recorded")
    smi = query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    name, _, driver = (smi.splitlines() or [","])[0].partition(",")
    nvcc = re.search(r"release (\d+\.\d+)", query(["nvcc", "--version"]))
    run.setdefault("device", name.strip() or "unknown GPU")
    run.setdefault("driver", driver.strip())
    run.setdefault("cuda", nvcc.group(1) if nvcc else "")
    run.setdefault("date", datetime.date.today().isoformat())
    run["id"] = f"{run['date']} {label}"
    slug = re.sub(r"[^a-z0-9]+", "-", run["device"].lower().replace("nvidia", "")).strip("-")
    path = Path(directory) / f"{slug or 'gpu'}.json"
    data = json.loads(path.read_text()) if path.exists() else {"runs": []}
    data["runs"] = [r for r in data["runs"] if r.get("id") != run["id"]] + [run]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"figures: recorded {len(run['figures'])} figures of {run['device']} "
          f"({run['date']}) in {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return path


# ---- self test ----------------------------------------------------------------------------------
def selftest():
    run = {"id": "t", "figures": [
        {"chapter": "01", "what": "copy", "value": 4234.4, "unit": "GB/s", "ratio": None},
        {"chapter": "01", "what": "add", "value": 3419.2, "unit": "GB/s", "ratio": 0.8075},
        {"chapter": "03", "what": "alloc", "value": 63.2, "unit": "us", "ratio": None},
        {"chapter": "03", "what": "ratio", "value": 12.5, "unit": "x", "ratio": None}]}
    cases = [
        ("On an H200 the copy ran at 4234 GB/s.", 0),
        ("On an H200 the copy ran at 4235 GB/s.", 1),         # a changed number fails
        ("On an H200 the copy ran at 4234.4 GB/s, add 3419 GB/s (80.8%).", 0),
        ("On an H200 add reached 81% (80.8%) of the copy, in 12.5x less.", 0),
        ("On an H200 the copy is 1.24x the add.", 1),           # a ratio nobody recorded
        ("On an H200: 63 / 4234 us, and 99 vs 4234 GB/s.", 2),  # the bare numbers count too
        ("The copy ran at 4299 GB/s.", 0),                    # no H200 in context: not checked
        ("## Measured on an H200\n\n| a | 63 us | 12.5x |\n| b | 64 us |", 1),
        ("On an H200: 4814 GB/s<!-- not measured: clock x bus width -->.", 0),
        ("On an H200: 4814 GB/s<!-- not measured: -->.", 2),   # no reason: an error too
        ("On an H200 a 32x32 tile, 0x7F, 2^24 floats and `9999 GB/s` in code.", 0),
        ("H200\n\n## Next\n\n5000 GB/s", 0),                 # a heading ends the context
        ("On an H200:\n\n| what | GB/s |\n| --- | --- |\n| copy | 4234 |\n| add | **3420** |",
         1),                                                # a column headed by a unit
    ]
    tmp = REPO / "build" / "figures-selftest"
    tmp.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, (text, want) in enumerate(cases):
        f = tmp / f"case{i}.md"
        f.write_text(text + "\n")
        _, problems = check([f], [run])
        if len(problems) != want:
            failed += 1
            print(f"selftest case {i}: {len(problems)} problem(s), want {want}: {text!r}\n  "
                  + "\n  ".join(problems))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"figures selftest: {len(cases) - failed} of {len(cases)} cases right")
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="every quoted figure is in the record")
    c.add_argument("-v", "--verbose", action="store_true", help="show what each one matched")
    r = sub.add_parser("record", help="merge a run into docs/figures/")
    r.add_argument("run")
    r.add_argument("--label", default="make bench",
                   help="what made the run (one run per date and label is kept)")
    sub.add_parser("list", help="print the record")
    sub.add_parser("selftest", help="check the matching rules")
    args = p.parse_args(argv)
    if args.cmd == "selftest":
        return selftest()
    if args.cmd == "record":
        record(args.run, label=args.label)
        return 0
    if args.cmd == "list":
        for run in load_runs():
            print(f"== {run['file']}: {run.get('id')} {run.get('device')} driver "
                  f"{run.get('driver')} CUDA {run.get('cuda')}")
            for f in run.get("figures", []):
                ratio = f" ({100 * f['ratio']:.1f}% of ceiling)" if f.get("ratio") else ""
                value = "-" if f.get("value") is None else f["value"]   # a ratio-only record
                print(f"  {f['chapter']} {f['what']:<58} {value:>10} {f['unit']}{ratio}")
        return 0
    checked, problems = check(verbose=args.verbose)
    for line in problems:
        print(line)
    if problems:
        print(f"figures: {len(problems)} quoted GPU figure(s) not in docs/figures/*.json. Quote "
              f"the recorded value (python3 tools/figures.py list), record a new run "
              f"(make bench BACKEND=gpu RECORD=1), or mark a number that is not a measurement "
              f"with <!-- not measured: reason -->.")
        return 1
    print(f"figures: all {checked} quoted GPU figures are in the record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
