#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make platforms leg: make gradescope's autograder (and make prairielearn's run.sh) in a
# container made as the platform makes one (root, Docker's default capabilities: no
# CAP_SYS_ADMIN; tools/platforms/gradescope/container.py), on two submissions of chapter 01: the solution (every point) and a
# constructor that writes a passing results row and exits (0 points). IMAGE= picks the image
# (default: container.py's, the course's Containerfile built locally).
set -uo pipefail
cd "${REPO:-.}" || exit 1
out="${OUT:-build/platforms}/gradescope-container"
py=python3
[ -x build/venv/bin/python ] && py=build/venv/bin/python
platform="Gradescope-style container (${IMAGE:-localhost/cuda-course:13}, Docker's default capabilities)"
what="its entry point on chapter 01: the solution, a constructor that forges a PASS"
if ! why="$(python3 tools/platforms/gradescope/container.py --probe)"; then
    echo "$platform|-|$what|skipped: $why"
    exit 0
fi
rm -rf "$out/build" "$out/honest" "$out/forger"
mkdir -p "$out/honest" "$out/forger"
if ! make --no-print-directory gradescope prairielearn CH=01 BUILD="$out/build" PYTHON="$py" >"$out/make.log" 2>&1; then
    echo "$platform|-|$what|FAIL: make gradescope prairielearn (see $out/make.log)"
    exit 0
fi
# the same submissions as tests/test_classroom.py's GradescopeContainer
"$py" -c 'import sys; sys.path.insert(0, "tests"); import test_classroom as t
open(sys.argv[1], "w").write(t.solution()); open(sys.argv[2], "w").write(t.touched_stub() + t.FORGE)' \
    "$out/honest/threads_blocks_grids.cu" "$out/forger/threads_blocks_grids.cu"
for leg in "gradescope --zip $out/build/gradescope/autograder.zip" "prairielearn --prairielearn $out/build/prairielearn"; do
    set -- $leg
    name="$1"; shift
    shown="${platform/Gradescope-style/$name}"
    if ! python3 tools/platforms/gradescope/container.py "$@" --work "$out/layers" \
            honest="$out/honest" forger="$out/forger" >"$out/$name.json" 2>"$out/$name.log"; then
        echo "$shown|-|$what|FAIL: $(tail -1 "$out/$name.log")"
        continue
    fi
    python3 - "$out/$name.json" "$shown" "$what" <<'PY'
import json, sys
rows = {r["name"]: r for r in map(json.loads, open(sys.argv[1]))}
h, f = rows.get("honest", {}), rows.get("forger", {})
ok = (h.get("score") == h.get("max") and h.get("max") and f.get("score") == 0
      and h.get("cap_sys_admin") is False and f.get("cap_sys_admin") is False)
caps = f"CapBnd {h.get('cap_bnd', 0):#010x}"
print(f"{sys.argv[2]}|-|{sys.argv[3]}|{'pass' if ok else 'FAIL'}: solution "
      f"{h.get('score')}/{h.get('max')}, forger {f.get('score')}/{f.get('max')}, {caps}, "
      f"no cap_sys_admin inside: {h.get('cap_sys_admin') is False}")
PY
done
