#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Chapter 10's bulk asynchronous copies (10.7, 10.8) on an sm_90 GPU: build chapter 10 with nvcc
# for sm_90 (solutions and exercises), run the solutions' tests of 10.7, 10.8 and the loads-fed
# baseline, check that the unsolved stubs fail, then print the blur bench rows (GB/s against
# the device-to-device copy ceiling, and the loads/TMA time ratios). A maintainer's one-off
# check for the lead, removed once its figures are in the lesson. Prints PASS/FAIL lines;
# exit status 0 only when every check passed. Run from the repository root:
#     bash tools/gpu_verify_tma.sh            (about a minute on an H200)
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
fail=0
say() { printf '%s\n' "$*"; }
date -u; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader; uptime

say "== build chapter 10 for sm_90 (solutions and exercises)"
if make -s BACKEND=gpu ARCH=sm_90 build/gpu/solutions/lib10_hopper_memory.so \
        build/gpu/chapters/lib10_hopper_memory.so > /tmp/tma-build.log 2>&1; then
    say "PASS build"
else
    say "FAIL build (tail of /tmp/tma-build.log below)"; tail -30 /tmp/tma-build.log; exit 1
fi

export TUT_BACKEND=gpu
say "== solutions: 10.7, 10.8 and the loads-fed blur"
if TUT_TREE=solutions $PY chapters/10_hopper_memory/driver.py --check \
        --only 10.7,10.8,10.blur-loads --seed 1; then
    say "PASS solutions 10.7 10.8 10.blur-loads"
else
    say "FAIL solutions"; fail=1
fi

say "== stubs: 10.7 and 10.8 must fail"
if TUT_TREE=chapters $PY chapters/10_hopper_memory/driver.py --expect-fail --only 10.7,10.8 \
        --seed 1; then
    say "PASS stubs fail"
else
    say "FAIL a stub passed or crashed"; fail=1
fi

say "== bench: the blur three ways (median of 10 runs each)"
if TUT_TREE=solutions $PY - <<'EOF'
import runpy, sys
sys.argv = ["driver.py"]
d = runpy.run_path("chapters/10_hopper_memory/driver.py", run_name="tma_verify")
tut = d["tut"]
lib = tut.load_chapter("10_hopper_memory")
b = tut.Bench(lib, "10 hopper memory: TMA")
ceiling = b.d2d_copy_gbps(1 << 30)
d["_bench_blur"](lib, b, True, 10, ceiling)
EOF
then
    say "PASS bench"
else
    say "FAIL bench"; fail=1
fi
date -u
[ $fail -eq 0 ] && say "ALL PASS" || say "SOME FAILED"
exit $fail
