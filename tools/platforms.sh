#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make platforms: builds and tests the course on every platform this machine can reach, and
# prints one table (docs/setup.md shows one run's). Slow (an emulator build per compiler): a
# maintainer's target, not part of make test. (tools/platforms/ is something else: the grading
# platforms' packaging.) Each leg is one row:
#
#   host compilers  every g++/g++-NN/clang++/clang++-NN on the PATH: the emulator and its tests
#                   (ctest -L emu) and chapter 01's and 04's solutions; one older than the minimum must
#                   be refused by make with the minimum named, and that is its pass.
#   Debian 13       the same in a Debian 13 chroot (gcc 13/14, clang 17-19), made with
#                   debootstrap under $CHROOTS when it is missing (root only).
#   nvcc            every chapter compiled (device code through ptxas) for each architecture.
#   CUDA 12         every chapter built with the chroot's CUDA 12 nvcc (Debian 13's non-free
#                   nvidia-cuda-toolkit), when it is there: the solutions' libraries and every
#                   exercise file; and chapter 10's 12.x side (what stands in for CUDA 13.0's
#                   own calls) run on the emulator, built with TUT_HAS_CUDA13=0.
#   hooks           every executable tools/platforms.d/*.sh (the 64-bit Arm leg, say): run with
#                   REPO, OUT, CHROOTS in the environment, it prints rows "platform|compiler|what|result".
#
# Run it with nice if the machine is shared: it keeps every core busy for a long time.
# Environment: ONLY="regex" keeps the legs whose name matches (e.g. ONLY="g\+\+-14|nvcc");
# CHROOTS (default $BUILD/platforms/chroots), MIRROR (the Debian mirror for debootstrap),
# MAKE_CHROOTS=0 (use only chroots already there), APPEND=1 (keep the earlier rows), PYTHON.
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO"
BUILD="${BUILD:-build}"
OUT="$(mkdir -p "$BUILD/platforms" && cd "$BUILD/platforms" && pwd)"
CHROOTS="${CHROOTS:-$OUT/chroots}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MAKE_CHROOTS="${MAKE_CHROOTS:-1}"
ONLY="${ONLY:-.}"
PYTHON="${PYTHON:-python3}"
JOBS="$(nproc 2>/dev/null || echo 2)"
ARCHS="75 80 86 89 90 100 120"
ROWS="$OUT/rows.txt"
# APPEND=1: add to the rows of an earlier run (legs run one ONLY= at a time) instead of starting over
[ "${APPEND:-0}" = 1 ] || : > "$ROWS"

row() {   # platform compiler what result
    printf '%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" | tee -a "$ROWS" | awk -F'|' '{printf "  %-22s %-14s %-44s %s\n", $1, $2, $3, $4}'
}
want() { [[ "$1" =~ $ONLY ]]; }
secs() { echo $(( $(date +%s) - $1 )); }

# One compiler: make's verdict on it, then the emulator and its tests, then chapters 01 and 04.
# $1 platform, $2 compiler, $3 a command prefix that runs inside the platform ("" or "chroot DIR").
compiler_leg() {
    local plat="$1" cxx="$2" wrap="$3" name b log t0 out
    name="$(echo "$plat-$cxx" | tr -c 'A-Za-z0-9.+\n-' '_')"
    b="$OUT/$name"; log="$OUT/$name.log"; t0=$(date +%s)
    mkdir -p "$b"
    # The wrapper runs from the repository (a chroot sees it at the same path: mounted below).
    # CTest gets the leg's CXX too: emu/inlined-hooks asks make how it builds, with this CXX.
    run_in() { $wrap bash -c "cd '$REPO' && $*"; }
    if ! out=$(run_in "make -n --no-print-directory BUILD='$b' CXX='$cxx' PYTHON='$PYTHON' emu-lib" 2>&1 >/dev/null); then
        if grep -q "the emulator needs" <<<"$out"; then
            row "$plat" "$cxx" "too old: make refuses, naming the minimum" "pass ($(sed -n 's/.*\*\*\* \(.*needs[^(]*\).*/\1/p' <<<"$out" | sed 's/ *$//'))"
        else
            row "$plat" "$cxx" "make" "FAIL: $(tail -n1 <<<"$out")"
        fi
        return
    fi
    if ! run_in "make BUILD='$b' CXX='$cxx' PYTHON='$PYTHON' BACKEND=cpu emu-tests cuemu-nvcc python" >"$log" 2>&1; then
        row "$plat" "$cxx" "emulator build" "FAIL (see $log)"; return
    fi
    local py; py="$(run_in "if [ -x '$b/venv/bin/python' ]; then echo '$b/venv/bin/python'; else command -v '$PYTHON'; fi")"
    run_in "cmake -S tests -B '$b/tests/emu' -DMODE=maintainer -DBACKEND=cpu -DPYTHON='$py' -DBUILD_DIR='$b' >/dev/null && CXX='$cxx' ctest --test-dir '$b/tests/emu' -L '^emu$' --parallel $JOBS --output-on-failure" >>"$log" 2>&1
    local rc=$? summary again=""
    summary="$(grep -E 'tests passed|tests failed' "$log" | tail -n1)"
    if [ $rc != 0 ]; then
        # A busy machine times tests out: what failed beside others runs again alone, once.
        again="$(grep -cE '\*\*\*(Failed|Timeout)' "$log")"
        run_in "CXX='$cxx' ctest --test-dir '$b/tests/emu' --rerun-failed --output-on-failure" >>"$log" 2>&1
        rc=$?
        again=", $again run again alone: $(grep -E 'tests passed|tests failed' "$log" | tail -n1)"
    fi
    row "$plat" "$cxx" "emulator tests (ctest -L emu)" "$([ $rc = 0 ] && echo pass || echo FAIL): ${summary:-no summary}$again"
    # 04: kernels split at their barriers (C++20 coroutines, or g++'s -fcoroutines)
    if run_in "for ch in 01 04; do make BUILD='$b' CXX='$cxx' PYTHON='$PYTHON' BACKEND=cpu check-solutions CH=\$ch || exit 1; done" >>"$log" 2>&1; then
        row "$plat" "$cxx" "chapters 01 and 04 solutions" "pass ($(secs "$t0") s in all)"
    else
        row "$plat" "$cxx" "chapters 01 and 04 solutions" "FAIL (see $log)"
    fi
}

host_compilers() {
    local seen="" c p r
    for c in g++ clang++ g++-{9..20} clang++-{9..25}; do
        p="$(command -v "$c" 2>/dev/null)" || continue
        r="$(readlink -f "$p")"
        [[ " $seen " == *" $r "* ]] && continue
        seen="$seen $r"
        echo "$c"
    done
}

# A Debian chroot for the legs that need another release: made once (debootstrap), then only
# mounted (the repository at its own path, /proc, /dev), and unmounted when this script ends.
# Left mounted, the repository would appear again inside its own build/ (a walk of the tree
# would never end) and the host's /dev inside the chroot: an `rm -rf build` (make clean) would
# then delete the course's sources and the host's device nodes through them.
MOUNTED=()
unmount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTED[$i]}" 2>/dev/null || umount -l "${MOUNTED[$i]}" 2>/dev/null \
            || echo "platforms: could not unmount ${MOUNTED[$i]}: unmount it before deleting build/" >&2
    done
    MOUNTED=()
}
trap unmount_all EXIT
mount_once() {   # mount ARGS... TARGET: mounted here, so unmounted at the end
    local target="${*: -1}"
    mountpoint -q "$target" && return 0
    mount "$@" && MOUNTED+=("$target")
}
chroot_ready() {   # $1 suite, $2 dir, $3 packages
    local suite="$1" dir="$2" pkgs="$3"
    if [ ! -x "$dir/usr/bin/apt-get" ]; then
        [ "$MAKE_CHROOTS" = 1 ] && [ "$(id -u)" = 0 ] && command -v debootstrap >/dev/null || return 1
        echo "making a Debian $suite chroot in $dir (once; a few minutes)" >&2
        debootstrap --variant=minbase --components=main,contrib,non-free "$suite" "$dir" "$MIRROR" \
            >"$OUT/debootstrap-$suite.log" 2>&1 || return 1
    fi
    [ "$(id -u)" = 0 ] || return 1
    mount_once -t proc proc "$dir/proc"
    mount_once --bind /dev "$dir/dev"
    mkdir -p "$dir$REPO"
    mount_once --bind "$REPO" "$dir$REPO"
    if [ -n "$pkgs" ]; then
        local missing=""
        for p in $pkgs; do chroot "$dir" dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
        if [ -n "$missing" ]; then
            { chroot "$dir" apt-get update && DEBIAN_FRONTEND=noninteractive chroot "$dir" \
                apt-get install -y --no-install-recommends $missing; } >>"$OUT/apt-$suite.log" 2>&1 || return 1
        fi
    fi
}

echo "platforms: every leg this machine can reach (logs in $OUT)"
echo "  platform               compiler       what                                         result"

# ---- this machine's compilers -----------------------------------------------------------------
# One Python with NumPy for every host leg (a venv made once here if python3 has none).
if want "host" && ! "$PYTHON" -c 'import numpy' >/dev/null 2>&1; then
    make --no-print-directory BUILD="$OUT/python" PYTHON="$PYTHON" python >/dev/null && PYTHON="$OUT/python/venv/bin/python"
fi
HOST="$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME" | sed 's/ GNU\/Linux//') $(uname -m)"
for c in $(host_compilers); do
    want "host $c" && compiler_leg "$HOST" "$c" ""
done

# ---- Debian 13 ------------------------------------------------------------------------------------
TRIXIE="$CHROOTS/trixie"
TRIXIE_PKGS="gcc g++ g++-13 g++-14 clang-17 clang-18 clang-19 llvm-19 make cmake python3 python3-numpy python3-venv binutils"
TRIXIE_CXX="g++-13 g++-14 clang++-17 clang++-18 clang++-19"
if [ -n "$(for c in $TRIXIE_CXX; do want "trixie $c" && echo y; done)" ]; then
    if chroot_ready trixie "$TRIXIE" "$TRIXIE_PKGS"; then
        for c in $TRIXIE_CXX; do
            want "trixie $c" && PYTHON=python3 compiler_leg "Debian 13 $(uname -m)" "$c" "chroot $TRIXIE"
        done
    else
        row "Debian 13" "-" "chroot" "skipped: needs root and debootstrap (or MAKE_CHROOTS=0 and none in $TRIXIE)"
    fi
fi

# ---- nvcc: every chapter for each architecture -------------------------------------------------
# One nvcc per file for all the architectures (its front end once, ptxas per architecture); a
# file that fails is compiled again per architecture to say which. The solutions, and each
# exercise file that differs from its solution (the stubs: same code with holes, which must
# compile as handed out). Code for one architecture family only (chapter 10's clusters: sm_90
# and later) is guarded in the source (__CUDA_ARCH__) and its tests skip elsewhere.
NVCC="${NVCC:-nvcc}"
if want "nvcc" && command -v "$NVCC" >/dev/null; then
    rel="$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    offered=""; gencode=""
    for a in $ARCHS; do
        if "$NVCC" --list-gpu-arch 2>/dev/null | grep -qx "compute_$a"; then
            offered="$offered $a"; gencode="$gencode -gencode arch=compute_$a,code=sm_$a"
        else
            row "nvcc $rel" "sm_$a" "every chapter compiles" "not offered by this nvcc"
        fi
    done
    t0=$(date +%s); declare -A bad=()
    files="common/tut_check.cu $(ls solutions/*/*.cu)"
    for f in chapters/*/*.cu; do
        cmp -s "$f" "solutions/${f#chapters/}" || files="$files $f"
    done
    for f in $files; do
        "$NVCC" -std=c++17 -Icommon -I"$(dirname "$f")" $gencode --cuda -o /dev/null "$f" \
            >>"$OUT/nvcc.log" 2>&1 && continue
        for a in $offered; do
            "$NVCC" -std=c++17 -Icommon -I"$(dirname "$f")" -arch=sm_$a --cuda -o /dev/null "$f" \
                >>"$OUT/nvcc-sm_$a.log" 2>&1 || bad[$a]="${bad[$a]:-} $f"
        done
    done
    n=$(echo $files | wc -w)
    for a in $offered; do
        row "nvcc $rel" "sm_$a" "all $n .cu files (solutions, exercises) compile, ptxas included" "$([ -z "${bad[$a]:-}" ] && echo "pass ($(secs "$t0") s for all)" || echo "FAIL:${bad[$a]}")"
    done
elif want "nvcc"; then
    row "nvcc" "-" "every chapter compiles" "skipped: no nvcc"
fi

# ---- CUDA 12 (Debian 13's toolkit) ---------------------------------------------------------------
if want "cuda12"; then
    if [ -x "$TRIXIE/usr/bin/nvcc" ] && chroot_ready trixie "$TRIXIE" ""; then
        b="$OUT/cuda12"; rel="$(chroot "$TRIXIE" nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
        # CUDA 12.4 accepts gcc up to 13: Debian's nvcc is set up for its own supported g++.
        # the solutions' libraries (the exercise stubs are the same code with holes), which
        # the drivers can then run on a GPU machine (TUT_BUILD=that build TUT_TREE=solutions)
        libs="$(for d in solutions/[0-9][0-9]_*/; do echo "$b/gpu/solutions/lib$(basename "$d").so"; done)"
        if chroot "$TRIXIE" bash -c "cd '$REPO' && make BUILD='$b' BACKEND=gpu ARCH=sm_90 NVCC='nvcc -ccbin g++-13' $(echo $libs)" >"$OUT/cuda12.log" 2>&1; then
            row "Debian 13 CUDA $rel" "nvcc, g++-13" "every solution's library (sm_90)" "pass ($(ls "$b"/gpu/solutions/lib*.so | wc -l) libraries)"
        else
            row "Debian 13 CUDA $rel" "nvcc, g++-13" "every solution's library (sm_90)" "FAIL (see $OUT/cuda12.log)"
        fi
        # the exercise files as handed out (the solutions with holes, and with their own
        # TUT_HAS_CUDA13 guards) must compile with 12.x too: device code through ptxas
        t0=$(date +%s); stubs=""; bad=""
        for f in chapters/*/*.cu; do cmp -s "$f" "solutions/${f#chapters/}" || stubs="$stubs $f"; done
        for f in $stubs; do
            chroot "$TRIXIE" bash -c "cd '$REPO' && nvcc -ccbin g++-13 -std=c++17 -Icommon -I'$(dirname "$f")' -arch=sm_90 --cuda -o /dev/null '$f'" \
                >>"$OUT/cuda12.log" 2>&1 || bad="$bad $f"
        done
        row "Debian 13 CUDA $rel" "nvcc, g++-13" "every exercise file that differs from its solution (sm_90)" "$([ -z "$bad" ] && echo "pass ($(echo $stubs | wc -w) files, $(secs "$t0") s)" || echo "FAIL:$bad")"
    else
        row "CUDA 12" "-" "every chapter's library" "skipped: no CUDA 12 nvcc in $TRIXIE (apt-get install nvidia-cuda-toolkit there)"
    fi
    # What a 12.x build does in place of CUDA 13.0's own calls (TUT_NEEDS_CUDA13), run here: the
    # emulator (whose API is 13.0's) builds the 12.x side when told TUT_HAS_CUDA13=0. Each test
    # must pass, or skip saying what it needs; a test that fails or errs is a bug of the guards.
    t0=$(date +%s); b="$OUT/cuda12-side"; py="$PYTHON"
    "$py" -c 'import numpy' >/dev/null 2>&1 || { make --no-print-directory BUILD="$OUT/python" PYTHON="$PYTHON" python >/dev/null && py="$OUT/python/venv/bin/python"; }
    if make --no-print-directory BUILD="$b" BACKEND=cpu EMU_FLAGS_10_hopper_memory=-DTUT_HAS_CUDA13=0 \
            "$b/cpu/solutions/lib10_hopper_memory.so" >"$OUT/cuda12-side.log" 2>&1; then
        rm -f "$b/10.json"
        TUT_BUILD="$b" TUT_BACKEND=cpu TUT_TREE=solutions "$py" chapters/10_hopper_memory/driver.py \
            --check --json "$b/10.json" >>"$OUT/cuda12-side.log" 2>&1
        verdict="$("$py" - "$b/10.json" 2>>"$OUT/cuda12-side.log" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
needs = [r["id"] for r in rows if r["status"] == "SKIP" and "needs CUDA 13.0" in r["message"]]
other = [r["id"] for r in rows if r["status"] == "SKIP" and r["id"] not in needs]
bad = [f'{r["id"]} {r["status"]}' for r in rows if r["status"] not in ("PASS", "SKIP")]
print(("pass" if needs and not bad else "FAIL") + f": {', '.join(needs) or 'none'} skip, "
      f"naming the call and 'needs CUDA 13.0'; {sum(r['status'] == 'PASS' for r in rows)} pass"
      + (f"; {', '.join(other)} skip as on any emulator" if other else "")
      + (f"; {', '.join(bad)}" if bad else ""))
PY
)" || verdict="FAIL: no results (see $OUT/cuda12-side.log)"
        row "emulator, as CUDA 12.x" "TUT_HAS_CUDA13=0" "chapter 10's solutions built without 13.0's calls, run" "$verdict ($(secs "$t0") s)"
    else
        row "emulator, as CUDA 12.x" "TUT_HAS_CUDA13=0" "chapter 10's solutions built without 13.0's calls, run" "FAIL: build (see $OUT/cuda12-side.log)"
    fi
fi

# ---- hooks (tools/platforms.d/*.sh): other architectures, other machines ---------------------
for h in tools/platforms.d/*.sh; do
    [ -x "$h" ] || continue
    want "$(basename "$h" .sh)" || continue
    REPO="$REPO" OUT="$OUT" CHROOTS="$CHROOTS" MIRROR="$MIRROR" "$h" | while IFS='|' read -r p c w r; do row "$p" "$c" "$w" "$r"; done
done

# ---- the table ---------------------------------------------------------------------------------
{
    echo "| platform | compiler | what | result |"
    echo "| --- | --- | --- | --- |"
    awk -F'|' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}' "$ROWS"
} > "$OUT/table.md"
echo
echo "$(date -u +%Y-%m-%d), $HOST, $(nproc) cores: $OUT/table.md"
cat "$OUT/table.md"
! grep -q '|FAIL' "$ROWS"
