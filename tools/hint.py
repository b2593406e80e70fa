# SPDX-License-Identifier: MIT
"""Print an exercise's hint, from where it is kept: the TODO(student) comment in the chapter's
.cu (what to write, about how many lines) and the lesson's "Stuck?" section (chapters/NN_x/
README.md, the bullet that starts with the exercise id). Nothing is copied anywhere else.

    python3 tools/hint.py 05.1        (make hint ID=05.1)
"""
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def stuck_bullets(readme, ex_id):
    """The lesson's "Stuck?" bullets about ex_id, each with its continuation lines."""
    lines = readme.read_text(errors="replace").splitlines()
    out, inside, taking = [], False, False
    for line in lines:
        if line.startswith("## "):
            inside = line.strip().lower().startswith("## stuck")
            taking = False
            continue
        if not inside:
            continue
        if line.startswith("- "):
            taking = bool(re.match(rf"- (\*\*)?{re.escape(ex_id)}\b", line))
        elif not line.startswith("  "):
            taking = False
        if taking:
            out.append(line)
    return out


def main(argv):
    if len(argv) != 1 or not re.fullmatch(r"\d{1,2}\.\d+", argv[0]):
        print("usage: make hint ID=NN.M   (an exercise id, e.g. ID=05.1; make check lists them)")
        return 2
    number, sub = argv[0].split(".")
    ex_id = f"{int(number):02d}.{sub}"
    chapter = next(iter(sorted(REPO.glob(f"chapters/{ex_id[:2]}_*"))), None)
    if chapter is None:
        print(f"error: there is no chapter {ex_id[:2]}")
        return 1
    todos = []
    for src in sorted(chapter.glob("*.cu")):
        for n, line in enumerate(src.read_text(errors="replace").splitlines(), 1):
            if re.search(rf"TODO\(student\) {re.escape(ex_id)}\b", line):
                todos.append(f"{src.relative_to(REPO)}:{n}: {line.strip().lstrip('/ ')}")
    stuck = stuck_bullets(chapter / "README.md", ex_id) if (chapter / "README.md").exists() else []
    if not todos and not stuck:
        print(f"error: no exercise {ex_id} in {chapter.relative_to(REPO)} (make check CH="
              f"{ex_id[:2]} lists its exercises)")
        return 1
    print(f"{ex_id}, where to write it:" if todos else
          f"{ex_id}: its TODO(student) is gone from the .cu (you have written it):")
    for t in todos:
        print(f"  {t}")
    if stuck:
        print(f"\nfrom the lesson ({(chapter / 'README.md').relative_to(REPO)}, \"Stuck?\"):")
        for line in stuck:
            print(f"  {line}")
    print(f"\nthen: make check CH={ex_id[:2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
