#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 30, for the lead (removed once its figures are recorded): the student's loop on a GPU,
# measured the way issue 30 judges it, in one call of the lent machine.
#
#   on the GPU machine, from the repository root:   bash tools/gpu_verify_loop.sh [quick]
#   (about 7 minutes on an H200; `quick`: chapters 02, 03, 04, 06 and 09 only, about 3 minutes)
#
# What it runs, each step under a time limit so that a slow one cannot eat the others:
#   1. the machine (GPU, driver, nvcc, the architecture make picks);
#   2. make all BACKEND=gpu, timed (every GPU object, the first build of the session);
#   3. make loop-bench BACKEND=gpu REPS=3 RECORD=1 (recorded in docs/figures/<device>.json; with
#      `quick` the chapters over the targets at the last run, not recorded);
#   4. tools/check_phases.py 02 03 with a profile of 02.3 and 03.3: where the two slowest
#      chapters' time goes (NumPy, context, each test, a test's host-side profile).
# Everything goes to one file, $OUT/loop-verify.txt (or build/loop-verify.txt), and the record
# is copied beside it: a lent machine returns a few files, not a tree.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR="${OUT:-build}"
mkdir -p "$DIR"
LOG="$DIR/loop-verify.txt"
exec > >(tee "$LOG") 2>&1

echo "== the machine, $(date -u '+%Y-%m-%d %H:%M UTC')"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
nvcc --version | tail -n 2 | head -n 1
nproc
make -s -p -n help 2>/dev/null | grep -E '^(ARCH|B) :?=' | tr '\n' ' '
echo

echo "== make all BACKEND=gpu"
start=$(date +%s.%N)
timeout 300 make -s all BACKEND=gpu > "$DIR/loop-verify-build.log" 2>&1
echo "exit $?, $(python3 -c "import time; print(round(time.time() - $start, 1))") s (log: loop-verify-build.log)"

if [ "${1:-}" = quick ]; then
    for ch in 02 03 04 06 09; do
        echo "== make loop-bench BACKEND=gpu REPS=3 CH=$ch"
        timeout 120 make -s loop-bench BACKEND=gpu REPS=3 CH="$ch" | grep -v '^make check CH=NN'
    done
else
    echo "== make loop-bench BACKEND=gpu REPS=3 RECORD=1"
    timeout 480 make -s loop-bench BACKEND=gpu REPS=3 RECORD=1
    cp docs/figures/*.json "$DIR/" 2>/dev/null
fi

echo "== check_phases.py 02 03 --profile 02.3,03.3"
TUT_BACKEND=gpu timeout 90 python3 tools/check_phases.py 02 03 --profile 02.3,03.3 \
    | grep -v '^\s*$'
echo "== done, $(date -u '+%H:%M UTC')"
