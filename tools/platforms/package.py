# SPDX-License-Identifier: MIT
"""Package the course as a grading platform's autograder: the course without solutions/ (as
`make handout` makes it), the hidden tests, and the platform's entry scripts.

    python3 tools/platforms/package.py gradescope   --out build/gradescope   [--hidden DIR] [--chapters 01]
    python3 tools/platforms/package.py prairielearn --out build/prairielearn [--hidden DIR] [--chapters 01]

gradescope: build/gradescope/autograder.zip, with setup.sh and run_autograder at its root (what
Gradescope runs: setup.sh once when it builds the image, run_autograder per submission), the
course under course/ and the hidden tests under hidden/. prairielearn: the same folder, not
zipped, with run.sh (the external grader's entry point) instead.
Python standard library only.
"""
import argparse
import shutil
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tools"))
import handout  # noqa: E402

SCRIPTS = {"gradescope": ["run_autograder"], "prairielearn": ["run.sh"]}


def stage(platform, out, hidden, chapters, timeout):
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    handout.build(out / "course", hidden)
    (out / "course" / ".handout").unlink()
    (out / "hidden").mkdir()
    if hidden:
        shutil.copytree(hidden, out / "hidden", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(HERE / "setup.sh", out / "setup.sh")   # both platforms' images need it
    for script in SCRIPTS[platform]:
        shutil.copy2(HERE / platform / script, out / script)
        (out / script).chmod(0o755)
    (out / "config.env").write_text(f"CHAPTERS={chapters}\nTIMEOUT={timeout:g}\n"
                                    f"MEMORY={512 << 20}\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("platform", choices=sorted(SCRIPTS))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hidden", type=Path)
    p.add_argument("--chapters", default="01")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args(argv)
    if not (REPO / "solutions").is_dir():
        raise SystemExit("error: package the autograder from the instructor's tree")
    if args.hidden and not args.hidden.is_dir():
        raise SystemExit(f"error: HIDDEN={args.hidden} is not a directory")
    out = args.out.resolve()
    hidden = args.hidden.resolve() if args.hidden else None
    if args.platform == "prairielearn":
        stage("prairielearn", out, hidden, args.chapters, args.timeout)
        print(f"wrote {out}: copy it into serverFilesCourse/ and name run.sh as the "
              f"question's external grading entry point (docs/instructor.md)")
        return 0
    staging = out / "autograder"
    stage("gradescope", staging, hidden, args.chapters, args.timeout)
    zip_path = out / "autograder.zip"
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(staging.rglob("*")):
            if f.is_file():
                info = zipfile.ZipInfo.from_file(f, f.relative_to(staging).as_posix())
                with open(f, "rb") as data:
                    z.writestr(info, data.read(), zipfile.ZIP_DEFLATED)
    shutil.rmtree(staging)
    print(f"wrote {zip_path} (chapters {args.chapters}; "
          f"{'hidden tests from ' + str(hidden) if hidden else 'no hidden tests'}): upload it "
          f"as the assignment's autograder (docs/instructor.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
