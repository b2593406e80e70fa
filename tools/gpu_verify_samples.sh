#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 32, for the lead (removed once recorded): on the H200 machine (Ubuntu 24.04, g++ 13, no
# clang, 16 cores, no network), `make test BACKEND=cpu` with NVIDIA's 0_Introduction samples in
# it, which the emulator builds with cuemu-nvcc and g++ 13 there.
#
#   here:   tools/gpu_verify_samples.sh --prepare
#             copies the samples (README.md, Common/, Samples/0_Introduction/: about 0.6 MiB) from
#             $CUDA_SAMPLES (default ../shared/cuda-samples beside the repository) to
#             build/cuda-samples-carry/, which the run carries
#   there:  bash tools/gpu_verify_samples.sh                  make test BACKEND=cpu, all of it
#           bash tools/gpu_verify_samples.sh --samples-only   only the emulator, cuemu-nvcc and
#                                                             the 24 samples' tests (ctest -L samples)
# Prints the machine, then PASS/FAIL with the counts and every test that did not pass; the
# whole output is in $OUT/samples-verify/ (build/samples-verify/ without OUT). It stops itself
# before the run's 10 minutes (LIMIT_S, default 560 s) and then says how far it got.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=build/cuda-samples-carry

if [ "${1:-}" = "--prepare" ]; then
    src="${CUDA_SAMPLES:-../shared/cuda-samples}"
    [ -f "$src/README.md" ] || { echo "no samples at $src (CUDA_SAMPLES=dir names them)"; exit 1; }
    rm -rf "$CARRY" && mkdir -p "$CARRY/Samples"
    cp -r "$src/README.md" "$src/Common" "$CARRY/"
    cp -r "$src/Samples/0_Introduction" "$CARRY/Samples/"
    du -sh "$CARRY"
    exit 0
fi

[ -f "$CARRY/README.md" ] || { echo "FAIL: no $CARRY: run tools/gpu_verify_samples.sh --prepare and carry $CARRY"; exit 1; }
LOG="${OUT:-build}/samples-verify"
mkdir -p "$LOG"
LIMIT_S="${LIMIT_S:-560}"
JOBS="$(nproc)"
export CUDA_SAMPLES="$PWD/$CARRY"

echo "== the machine"
. /etc/os-release && echo "$PRETTY_NAME, $(uname -m), $JOBS cores"
g++ --version | head -n 1
command -v clang++ >/dev/null && clang++ --version | head -n 1 || echo "no clang++ (the emulator builds with g++; the race detector's tests skip)"
cmake --version | head -n 1
command -v nvcc >/dev/null && nvcc --version | tail -n 2 | head -n 1
# make takes python3 when its NumPy is new enough, else makes a venv with pip: no network here
if ! python3 -c 'import sys, numpy; print("Python", sys.version.split()[0], "NumPy", numpy.__version__); sys.exit(tuple(map(int, numpy.__version__.split(".")[:2])) < (2, 1))'; then
    echo "FAIL: python3 needs NumPy 2.1 or newer here (make would make a venv, which needs the network)"
    exit 1
fi
echo "samples: $CUDA_SAMPLES ($(ls "$CUDA_SAMPLES/Samples/0_Introduction" | wc -l) folders)"

t0=$(date +%s)
if [ "${1:-}" = "--samples-only" ]; then
    echo; echo "== the emulator, cuemu-nvcc and the samples' tests (ctest -L samples -j $JOBS)"
    timeout "$LIMIT_S" bash -c "make -j$JOBS --no-print-directory BACKEND=cpu cuemu-nvcc python \
        && cmake -S tests -B build/tests/samples-only -DMODE=maintainer -DBACKEND=cpu -DPYTHON=\$(command -v python3) -DBUILD_DIR=\$PWD/build >/dev/null \
        && ctest --test-dir build/tests/samples-only -L samples -j $JOBS --output-on-failure" >"$LOG/out.txt" 2>&1
else
    echo; echo "== make -j$JOBS test BACKEND=cpu (everything maintainers and CI run, the samples included)"
    timeout "$LIMIT_S" make -j"$JOBS" --no-print-directory test BACKEND=cpu >"$LOG/out.txt" 2>&1
fi
rc=$?
secs=$(( $(date +%s) - t0 ))
python3 - "$LOG/out.txt" "$rc" "$secs" "$LIMIT_S" <<'EOF'
import re, sys
text = open(sys.argv[1], errors="replace").read()
rc, secs, limit = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# ctest's lines: "  12/457 Test  #33: samples/asyncAPI ........   Passed    2.05 sec"
rows = re.findall(r"Test\s+#\d+: (\S+) \.*\s*(\*{0,3}[A-Za-z][^\n]*?)\s+[\d.]+ sec", text)
status = {}
for name, what in rows:
    status[name] = ("pass" if what.startswith("Passed") else
                    "skip" if "Skipped" in what or "Not Run" in what else what.strip("* "))
samples = {k: v for k, v in status.items() if k.startswith("samples/")}
bad = {k: v for k, v in status.items() if v not in ("pass", "skip")}
count = lambda d, s: sum(v == s for v in d.values()) if s != "FAIL" else sum(v not in ("pass", "skip") for v in d.values())
print(f"   {len(status)} tests finished in {secs} s: {count(status, 'pass')} passed, {count(status, 'skip')} skipped, {len(bad)} failed")
print(f"   samples: {count(samples, 'pass')} passed, {count(samples, 'skip')} skipped, "
      f"{count(samples, 'FAIL')} failed, of {len(samples)}")
for k, v in sorted(bad.items()):
    print(f"   FAIL {k}: {v}")
for k, v in sorted(samples.items()):
    if v == "skip":
        print(f"   skip {k}")
if rc == 124:
    print(f"   STOPPED after {limit} s (LIMIT_S): the counts above are what had finished")
if rc not in (0, 124):
    tail = [l for l in text.splitlines() if l.strip()][-15:]
    print("   the end of the output:\n" + "\n".join("     " + l for l in tail))
print(f"VERDICT: {'PASS' if rc == 0 and not bad and samples else 'FAIL'} (exit {rc}, {secs} s)")
EOF
