#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# PrairieLearn's external grader runs this in its container: grade /grade/student with the
# course's grader and hidden tests, write /grade/results/results.json (score 0..1, tests with
# points and max_points). The image must have what setup.sh installs and builds (run it when
# building the image); without that build it runs setup.sh first, which takes minutes.
set -uo pipefail
root="${GRADE_ROOT:-/grade}"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/config.env"
[ -e "$here/course/build/emu" ] || "$here/setup.sh" >&2
py="$here/course/build/venv/bin/python"
[ -x "$py" ] || py="${PYTHON:-python3}"
hidden=()
[ -n "$(ls -A "$here/hidden" 2>/dev/null)" ] && hidden=(--hidden "$here/hidden")
mkdir -p "$root/results"
cd "$here/course" || exit 1
# --sandbox on: no sandbox (the uid mode, where no namespace can be made), no grade. The late
# policy is PrairieLearn's own (access rules give the credit), so no --submitted here
OPENBLAS_NUM_THREADS=1 "$py" tools/grade.py --submission "$root/student" --name student \
    --out "$root/work" --chapters "$CHAPTERS" "${hidden[@]}" --backend cpu --timeout "$TIMEOUT" \
    --jobs 1 --memory "$MEMORY" --sandbox on --platform "prairielearn=$root/results/results.json"
rc=$?
if [ "$rc" -gt 1 ]; then
    printf '{"gradable": false, "format_errors": ["the autograder failed (exit status %s)"]}\n' "$rc" \
        > "$root/results/results.json"
fi
exit 0
