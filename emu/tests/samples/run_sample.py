#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build and run one of NVIDIA's cuda-samples with cuemu-nvcc, exactly as the samples folder's
README.md says a user does (`cuemu-nvcc -I ../../../Common SOURCES FLAGS -o sample && ./sample
ARGS`, from the sample's folder), and judge it: exit 0, the README's pass line where it names
one, and no emulator report (a `cuemu:` line) on stderr.

    run_sample.py CUEMU_NVCC SAMPLES_DIR SCRATCH NAME     one sample (a CTest test)
    run_sample.py CUEMU_NVCC SAMPLES_DIR SCRATCH --all    every sample: a Markdown table
    run_sample.py --list SAMPLES_DIR                      the README's sample names
    ... NAME --skip REASON                                 a sample known not to run here: exit 77

The samples folder is read-only and not part of this repository: the sample is built from a
scratch folder whose Samples/0_Introduction/NAME links to the original, so its relative -I
path and its "quoted" includes resolve as in the README, and the program's output lands in
the scratch folder. Exit 77 (skipped) when the samples folder is absent, as in a user's clone.
"""
import os
import re
import shlex
import subprocess
import sys
import time

SKIP = 77
SUBDIR = os.path.join("Samples", "0_Introduction")


def table(samples_dir):
    """{name: (sources, flags, args, pass line or None)} from the README's table."""
    rows = {}
    with open(os.path.join(samples_dir, "README.md"), encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 5 or cells[0] in ("sample", "") or set(cells[0]) <= set("- "):
                continue
            name, srcs, flags, args, passline = [("" if c == "-" else c) for c in cells]
            rows[name] = (srcs.split(), shlex.split(flags), shlex.split(args), passline or None)
    return rows


def first_error(text):
    for line in text.splitlines():
        if "error" in line or "not supported here" in line:
            return line.strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[0].strip() if lines else "(no output)"


def run_one(nvcc, samples_dir, scratch, name, row, timeout=900):
    """(verdict, detail, seconds): verdict is 'passed', 'failed' or 'not built'."""
    srcs, flags, args, passline = row
    top = os.path.join(scratch, name)
    where = os.path.join(top, SUBDIR)
    os.makedirs(where, exist_ok=True)
    link = os.path.join(top, "Common")
    if not os.path.islink(link):
        os.symlink(os.path.join(os.path.abspath(samples_dir), "Common"), link)
    # the sample's own folder, holding its sources and (here) its output
    work = os.path.join(where, name)
    os.makedirs(work, exist_ok=True)
    orig = os.path.join(os.path.abspath(samples_dir), SUBDIR, name)
    for f in os.listdir(orig):
        dst = os.path.join(work, f)
        if not os.path.lexists(dst):
            os.symlink(os.path.join(orig, f), dst)
    t0 = time.time()
    cmd = [nvcc, "-I", "../../../Common"] + srcs + flags + ["-o", "sample"]
    b = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if b.returncode != 0:
        return "not built", first_error(b.stderr + b.stdout), time.time() - t0, b.stderr + b.stdout
    try:
        r = subprocess.run(["./sample"] + args, cwd=work, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return "failed", f"timed out after {timeout} s", time.time() - t0, out
    out = r.stdout + r.stderr
    reports = [l for l in r.stderr.splitlines() if l.startswith("cuemu:")]
    if reports:
        return "failed", "emulator report: " + reports[0], time.time() - t0, out
    if r.returncode != 0:
        return "failed", f"exit status {r.returncode}: {first_error(out)}", time.time() - t0, out
    if passline and passline not in r.stdout:
        return "failed", f"no pass line '{passline}'", time.time() - t0, out
    return "passed", "", time.time() - t0, out


def main(argv):
    if argv[:1] == ["--list"]:
        if os.path.isfile(os.path.join(argv[1], "README.md")):
            print("\n".join(table(argv[1])))
        return 0
    skip = None
    if len(argv) == 6 and argv[4] == "--skip":
        skip, argv = argv[5], argv[:4]
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    nvcc, samples_dir, scratch, name = argv
    nvcc = os.path.abspath(nvcc)
    if not os.path.isfile(os.path.join(samples_dir, "README.md")):
        print(f"skipped: no cuda-samples at {samples_dir} (a user's clone has none; "
              "CI puts a copy of shared/ beside the repository)")
        return SKIP
    if skip:
        print(f"skipped: {name}: {skip}")
        return SKIP
    rows = table(samples_dir)
    names = list(rows) if name == "--all" else [name]
    if name != "--all" and name not in rows:
        print(f"{name}: not in {samples_dir}/README.md", file=sys.stderr)
        return 2
    verdicts = []
    for n in names:
        v, detail, secs, out = run_one(nvcc, samples_dir, scratch, n, rows[n])
        verdicts.append(v)
        if name == "--all":
            print(f"| {n} | {v} | {detail.replace('|', '/')} | {secs:.1f} |", flush=True)
        else:
            print(out[-6000:])
            print(f"{n}: {v}{': ' + detail if detail else ''} ({secs:.1f} s)")
    if name == "--all":
        print(f"{verdicts.count('passed')} of {len(names)} passed, "
              f"{len(names) - verdicts.count('not built')} built")
    return 0 if all(v == "passed" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
