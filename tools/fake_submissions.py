# SPDX-License-Identifier: MIT
"""Generate submissions of one chapter to measure and rehearse `make grade-all` with.

    python3 tools/fake_submissions.py --chapter 01 --count 200 --out build/fake-submissions

A quarter are the untouched stubs, a quarter the solutions, half the solutions with one planted
bug in one exercise (a comparison off by one, a line left out, an operator swapped, an exercise
left as its stub), as students make them. Each gets a comment line of its own, so no two are
the same file (the grader's compile cache would otherwise make identical copies free). Every
third one is a .zip, every fifth a .tar.gz, the rest folders. A list of what was planted where
goes to OUT/planted.csv.
"""
import argparse
import csv
import random
import re
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import exercises  # noqa: E402

REGION = re.compile(r"^[ \t]*(// @solution (\d\d\.\d+):[^\n]*\n)(.*?)(\n[ \t]*// @end)",
                    re.S | re.M)
MUTATIONS = [
    ("off by one (< becomes <=)", lambda body: body.replace(" < ", " <= ", 1)),
    ("off by one (>= becomes >)", lambda body: body.replace(" >= ", " > ", 1)),
    ("an operator swapped (+ becomes -)", lambda body: body.replace(" + ", " - ", 1)),
    ("an operator swapped (* becomes +)", lambda body: body.replace(" * ", " + ", 1)),
    ("a line left out", lambda body: "\n".join(body.split("\n")[1:])),
]


def strip_markers(text, chapter, stub_ids=()):
    """A student's finished file: the solution without the markers; the regions of stub_ids
    are left as their stubs (not done)."""
    def region(m):
        if m.group(2) in stub_ids:
            return m.group(0)
        return "\n".join(line for line in m.group(3).split("\n") if "// @stub" not in line)
    text = REGION.sub(region, text)
    if "@solution" in text:   # regions kept as stubs become exercises again
        text = exercises.generate(Path(f"solutions/{chapter}/x.cu"), text)[0]
    return text


def with_bug(text, rng):
    """The solution with one realistic bug in one exercise, and what it was."""
    regions = list(REGION.finditer(text))
    rng.shuffle(regions)
    for m in regions:
        body = m.group(3)
        for what, mutate in rng.sample(MUTATIONS, len(MUTATIONS)):
            new = mutate(body)
            if new != body:
                return text[:m.start(3)] + new + text[m.end(3):], f"{m.group(2)}: {what}"
    m = regions[0]
    return text, f"{m.group(2)}: left as the stub"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapter", required=True)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    chapters = [c for c in (REPO / "solutions").glob(f"{args.chapter}*") if c.is_dir()]
    if len(chapters) != 1:
        raise SystemExit(f"error: no single chapter matches {args.chapter}")
    ch = chapters[0].name
    rng = random.Random(args.seed)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    sols = {s.name: s.read_text() for s in sorted(chapters[0].glob("*.cu"))}
    stubs = {n: (REPO / "chapters" / ch / n).read_text() for n in sols}
    planted = []
    for i in range(args.count):
        name, kind = f"student{i:03d}", ("stub", "solution", "bug", "bug")[i % 4]
        files, what = {}, ""
        bug_file = rng.choice([n for n, t in sols.items() if "@solution" in t])
        for n, text in sols.items():
            if kind == "stub":
                files[n] = stubs[n]
            elif kind == "bug" and n == bug_file:
                text, what = with_bug(text, rng)
                if what.endswith("left as the stub"):
                    files[n] = strip_markers(text, ch, {what.split(":")[0]})
                else:
                    files[n] = strip_markers(text, ch)
            else:
                files[n] = strip_markers(text, ch)
            files[n] += f"// submitted by {name}\n"
        planted.append((name, kind, what))
        root = Path("repo") / "chapters" / ch
        if i % 3 == 0:
            with zipfile.ZipFile(args.out / f"{name}.zip", "w") as z:
                for n, t in files.items():
                    z.writestr(str(root / n), t)
        elif i % 5 == 0:
            d = args.out / ".tmp" / name
            d.mkdir(parents=True)
            with tarfile.open(args.out / f"{name}.tar.gz", "w:gz") as t:
                for n, text in files.items():
                    (d / n).write_text(text)
                    t.add(d / n, arcname=str(root / n))
        else:
            d = args.out / name / "chapters" / ch
            d.mkdir(parents=True)
            for n, t in files.items():
                (d / n).write_text(t)
    shutil.rmtree(args.out / ".tmp", ignore_errors=True)
    with open(args.out.parent / f"{args.out.name}-planted.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "kind", "bug"])
        w.writerows(planted)
    print(f"wrote {args.count} submissions of {ch} to {args.out} (what was planted: "
          f"{args.out.parent / (args.out.name + '-planted.csv')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
