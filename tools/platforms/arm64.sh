#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The course on 64-bit Arm Linux (Debian 12 arm64), from an x86-64 Debian/Ubuntu host, under
# qemu-user: makes the chroot once, mounts this checkout into it, builds the emulator's own
# tests and the solutions of a few chapters for aarch64 (with the host's clang against the
# chroot, or inside it), runs them there, and prints one table row.
#
#   sudo tools/platforms/arm64.sh                   # as root: debootstrap, chroot, binfmt
#   ARM64_ROOT=/srv/arm64 CHAPTERS="01 04" sudo -E tools/platforms/arm64.sh
#
#   ARM64_ROOT    the chroot (default build/platforms/arm64-root; made when missing: about
#                 10 minutes and 1.5 GB, Debian's mirror needed once)
#   ARM64_MIRROR  the Debian mirror debootstrap fetches from (default deb.debian.org/debian)
#   CHAPTERS      the chapters whose solutions are tested (default "01 04 05")
#   EMU_TESTS     0: skip the emulator's tests (default 1)
#   ARM64_BUILD   cross (the host's clang and lld; the default where they are) or native
# Everything runs at nice 10: qemu-user is 5-20 times slower than the host. The logs are in
# build/arm64/logs/ (their tails printed on failure). The row (the last line printed):
#   arm64 | Debian 12, qemu-user | clang 14.0.6 | emu tests 96/96 | 01 pass | 04 pass | 05 pass
# and the exit status is 0 only when every part passed.
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
root="${ARM64_ROOT:-$here/build/platforms/arm64-root}"
mirror="${ARM64_MIRROR:-http://deb.debian.org/debian}"
chapters="${CHAPTERS:-01 04 05}"
log() { echo "arm64: $*" >&2; }
die() { echo "arm64: error: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and binfmt_misc need it)"

# ---- qemu-user and its binfmt handler -----------------------------------------------------
if [ "$(uname -m)" != aarch64 ]; then
    need=()
    command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
    command -v update-binfmts >/dev/null || need+=(binfmt-support)
    command -v debootstrap >/dev/null || need+=(debootstrap)
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" \
            || die "could not install ${need[*]}"
    fi
    # a container may lack the binfmt_misc mount; the 'F' flag (qemu-user-static's default)
    # keeps the interpreter open, so it works inside the chroot without a copy there
    [ -e /proc/sys/fs/binfmt_misc/register ] \
        || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "no binfmt_misc"
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64 \
        || die "could not register qemu-aarch64 with binfmt_misc"
fi

# ---- the chroot ---------------------------------------------------------------------------
# python3-venv: Debian 12's NumPy (1.24) is older than the course's, so make puts NumPy in a
# venv there (pip fetches the aarch64 wheel once)
pkgs=build-essential,clang,cmake,python3,python3-numpy,python3-venv
if [ ! -x "$root/usr/bin/cmake" ] || [ ! -x "$root/usr/bin/clang++" ]; then
    log "making the Debian 12 arm64 chroot in $root (debootstrap, several minutes)"
    mkdir -p "$root"
    nice -n 10 debootstrap --arch=arm64 --include="$pkgs" bookworm "$root" "$mirror" \
        >"$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log"; die "debootstrap failed"; }
fi
# a chroot made before python3-venv was in the list
if ! chroot "$root" dpkg -s python3-venv >/dev/null 2>&1; then
    log "installing python3-venv in the chroot"
    cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
    nice -n 10 chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        DEBIAN_FRONTEND=noninteractive bash -c 'apt-get update -qq &&
        apt-get install -y -qq --no-install-recommends python3-venv' >"$root.apt.log" 2>&1 \
        || { tail -20 "$root.apt.log"; die "could not install python3-venv in the chroot"; }
fi

# /proc (the emulator reads /proc/self/maps; addr2line, popen) and /dev (null, shm)
mounted=()
cleanup() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[i]}" 2>/dev/null; done; }
trap cleanup EXIT
for m in proc dev dev/shm dev/pts; do
    mountpoint -q "$root/$m" && continue
    mkdir -p "$root/$m"
    case $m in
        proc) mount -t proc proc "$root/proc" ;;
        *)    mount --bind "/$m" "$root/$m" ;;
    esac && mounted+=("$root/$m")
done

# ---- the checkout: mounted at its own path inside, so that file names read the same -------
mkdir -p "$root$here"
# a mount left by an earlier run whose checkout was since removed (and made again) shows a
# directory that is gone: a fresh mount replaces it
if mountpoint -q "$root$here" && ! [ "$root$here" -ef "$here" ]; then umount -l "$root$here"; fi
mountpoint -q "$root$here" || { mount --bind "$here" "$root$here" && mounted+=("$root$here"); } \
    || die "could not mount $here into $root"
build=build/arm64
logs="$here/$build/logs"
mkdir -p "$logs"
in_root() { nice -n 10 chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                HOME=/root LANG=C.UTF-8 bash -c "cd '$here' && $1"; }
arch="$(in_root 'uname -m')"
[ "$arch" = aarch64 ] || die "the chroot runs as '$arch', not aarch64"

# ---- the build ---------------------------------------------------------------------------
# Compiling under qemu-user is 10-20 times slower than natively: where the host has clang and
# lld, the host's clang compiles for aarch64 against the chroot's headers and libraries, and
# only the tests run under qemu. ARM64_BUILD=native compiles inside the chroot instead, with
# its own compilers (Debian 12's clang is 14: make builds the emulator with g++ there).
solibs=""
for ch in $chapters; do
    d=$(cd "$here" && ls -d solutions/${ch}_* 2>/dev/null | head -1)
    [ -n "$d" ] && solibs="$solibs $build/cpu/solutions/lib$(basename "$d").so"
done
mode="${ARM64_BUILD:-}"
# The host's clang must be 17 or newer: older ones miscompile a shared library's thread-local
# variables for 64-bit Arm (emu/emu.mk says how), and make refuses them for it. The newest
# clang++-NN with its ld.lld-NN and llvm-ar-NN (Debian 12: apt-get install clang-19 lld-19 llvm-19).
sfx=""
for v in $(ls /usr/bin/clang++-[0-9]* 2>/dev/null | sed 's/.*-//' | sort -rn); do
    if [ "$v" -ge 17 ] && command -v "ld.lld-$v" >/dev/null && command -v "llvm-ar-$v" >/dev/null; then
        sfx="-$v"; break
    fi
done
if [ -z "$mode" ]; then
    if [ "$(uname -m)" != aarch64 ] && [ -n "$sfx" ]; then mode=cross; else mode=native; fi
fi
targets="emu-tests $solibs $build/cpu/common/tut_check.o"
same=""
if [ "$mode" = cross ]; then
    x="--target=aarch64-linux-gnu --sysroot=$root -fuse-ld=lld$sfx"
    # make inside the chroot (the tests, check-solutions) takes the cross compiler's identity as
    # its own, asking nothing: it only runs what was built (the chroot's clang is older, and
    # another compiler would rebuild everything)
    same="EMU_CXX='clang++$sfx $x' TUT_EMU_CXX_ASKED='clang++$sfx $x' TUT_EMU_CXX_ID='clang ${sfx#-} aarch64' TUT_EMU_CXX_DIR=/usr/lib/llvm${sfx}/bin"
    cxx="$(clang++$sfx --version | head -1 | sed 's/^Debian //; s/ (.*//; s/ version//') (cross)"
    # the rewriter runs where make runs: on the build machine first, then inside the chroot
    mkdir -p "$here/$build/emu"
    (cd "$here" && cc -std=c99 -O2 -Wall -o "$build/emu/cuemu-rewrite" emu/rewrite/cuemu_rewrite.c &&
        clang$sfx $x -std=c99 -O2 -Wall -o "$build/emu/cuemu-rewrite.aarch64" emu/rewrite/cuemu_rewrite.c &&
        touch -r emu/rewrite/cuemu_rewrite.c "$build/emu/cuemu-rewrite.aarch64") \
        || die "could not build the rewriter"
    log "building the emulator, its tests and chapters $chapters for aarch64 (host clang)"
    (cd "$here" && nice -n 10 make BUILD=$build BACKEND=cpu EMU_CXX="clang++$sfx $x" EMU_CC="clang$sfx $x" \
        CXX="clang++$sfx $x" CC="clang$sfx $x" AR=llvm-ar$sfx EMU_LTO=y -o "$build/emu/cuemu-rewrite" \
        -j"$(nproc)" $targets) >"$logs/build.log" 2>&1
else
    cxx="$(in_root 'clang++ --version | head -1' | sed 's/^Debian //; s/ (.*//; s/ version//')"
    log "building the emulator, its tests and chapters $chapters inside the chroot"
    in_root "make BUILD=$build BACKEND=cpu -j$(nproc) $targets" >"$logs/build.log" 2>&1
fi
built=$?
# from here on make and the tests run inside: the aarch64 rewriter takes the host one's place
# (emu/rewrite/lines runs it; make check-solutions rewrites every time)
if [ "$mode" = cross ] && [ $built = 0 ]; then
    cp -p "$here/$build/emu/cuemu-rewrite.aarch64" "$here/$build/emu/cuemu-rewrite"
fi
ok=1
row="arm64 | Debian 12, qemu-user | ${cxx:-?}"
if [ $built != 0 ]; then
    tail -30 "$logs/build.log" >&2
    echo "$row | build FAILED ($logs/build.log)"
    exit 1
fi

# ---- the tests, under qemu --------------------------------------------------------------
# EMU_TIMEOUT_SCALE: the time limits of the emulator tests (tests.cmake), made for a native
# run, times 5 under qemu
# Python with NumPy as new as the course needs (make's venv, made once inside: its NumPy is
# aarch64's); the test list and the drivers run with it
# (where the chroot's pip cannot reach the package index, an aarch64 NumPy wheel for Python 3.11
# put in $build/wheels, e.g. by pip download on the host, is installed from there)
pipenv=""
[ -d "$here/$build/wheels" ] && pipenv="PIP_NO_INDEX=1 PIP_FIND_LINKS='$here/$build/wheels'"
in_root "$pipenv $same make BUILD=$build PYTHON=/usr/bin/python3 python" >"$logs/python.log" 2>&1 \
    || { tail -20 "$logs/python.log" >&2; die "no Python with NumPy in the chroot (see $logs/python.log)"; }
py=/usr/bin/python3
[ -x "$here/$build/venv/bin/python" ] && py="$here/$build/venv/bin/python"
if [ "${EMU_TESTS:-1}" != 0 ]; then
    log "the emulator's tests"
    in_root "$same cmake -S tests -B $build/tests/arm64 -DMODE=maintainer -DBACKEND=cpu \
               -DPYTHON=$py -DBUILD_DIR='$here/$build' -DEMU_TIMEOUT_SCALE=5 >/dev/null &&
             $same ctest --test-dir $build/tests/arm64 -L '^emu\$' -E '^emu/nvcc/' --parallel 2 \
               --output-on-failure" >"$logs/emu-tests.log" 2>&1
    emu_rc=$?
    summary="$(grep -E '^[0-9]+% tests passed' "$logs/emu-tests.log" | tail -1)"
    failed_log="$logs/emu-tests.log"
    again=""
    if [ $emu_rc != 0 ] && [ -n "$summary" ]; then
        # A busy machine (qemu on shared cores) makes timing-sensitive tests fail beside
        # others: what failed runs again alone, once, and the row says how many needed it.
        in_root "$same ctest --test-dir $build/tests/arm64 --rerun-failed --output-on-failure" \
            >"$logs/emu-tests-again.log" 2>&1
        emu_rc=$?
        failed_log="$logs/emu-tests-again.log"
        n_again=$(grep -cE '^\s*[0-9]+ - ' "$logs/emu-tests.log")
        again=" ($n_again failed beside others and were run again alone: $(grep -E '^[0-9]+% tests passed' "$logs/emu-tests-again.log" | tail -1 | sed 's/^[0-9]*% tests passed, //'))"
    fi
    [ $emu_rc = 0 ] || ok=0
    if [[ $summary =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
        total=${BASH_REMATCH[2]}
        nfail=$(grep -cE '^\s*[0-9]+ - ' "$failed_log")
        [ $emu_rc = 0 ] && nfail=0
        row="$row | emu tests $((total - nfail))/$total$again"
    else
        row="$row | emu tests did not run"
        ok=0
        tail -30 "$logs/emu-tests.log" >&2
    fi
    [ $emu_rc = 0 ] || grep -E '^\s*[0-9]+ - ' "$failed_log" >&2 || true
fi

for ch in $chapters; do
    log "chapter $ch: make check-solutions CH=$ch"
    if in_root "$same make check-solutions BUILD=$build BACKEND=cpu CH=$ch PYTHON=$py" \
        >"$logs/check-solutions-$ch.log" 2>&1; then
        row="$row | $ch pass"
    else
        row="$row | $ch FAIL"
        ok=0
        tail -30 "$logs/check-solutions-$ch.log" >&2
    fi
done

echo "$row"
[ $ok = 1 ]
