#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run once where the platform builds its grading image (Gradescope: setup.sh, as root, in
# /autograder/source): the compiler, make and Python if missing (Debian/Ubuntu packages),
# then the course's Python and the emulator the grader compiles with. No GPU needed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
missing=()
command -v make >/dev/null 2>&1 || missing+=(make)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
numpy_ok="import numpy, sys; sys.exit([int(x) for x in numpy.__version__.split('.')[:2]] < [int(x) for x in '$(sed -n 's/^numpy>=//p' "$here/course/requirements.txt")'.split('.')[:2]])"
"${PYTHON:-python3}" -c "$numpy_ok" >/dev/null 2>&1 \
    || "${PYTHON:-python3}" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
make -C "$here/course" --no-print-directory PYTHON="${PYTHON:-python3}" BACKEND=cpu python grade-prereqs
echo "setup: ready"
