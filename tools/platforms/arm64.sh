#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The course on 64-bit Arm Linux (Debian 12 arm64), from an x86-64 Debian/Ubuntu host, under
# qemu-user: makes the chroot once, copies this checkout into it, builds and runs the
# emulator's own tests and the solutions of a few chapters there, and prints one table row.
#
#   sudo tools/platforms/arm64.sh                   # as root: debootstrap, chroot, binfmt
#   ARM64_ROOT=/srv/arm64 CHAPTERS="01 04" sudo -E tools/platforms/arm64.sh
#
#   ARM64_ROOT    the chroot (default build/platforms/arm64-root; made when missing: about
#                 10 minutes and 1.5 GB, Debian's mirror needed once)
#   ARM64_MIRROR  the Debian mirror debootstrap fetches from (default deb.debian.org/debian)
#   CHAPTERS      the chapters whose solutions are tested (default "01 04 05")
#   EMU_TESTS     0: skip the emulator's tests (default 1)
#   EMU_CXX       the compiler for emulated code in the chroot (default: the Makefile's, clang++)
# Everything runs at nice 10: qemu-user is 5-20 times slower than the host. The logs are in
# ARM64_ROOT/src/build/platforms/ (printed on failure). The row (the last line printed):
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
pkgs=build-essential,clang,cmake,python3,python3-numpy,rsync,ca-certificates
if [ ! -x "$root/usr/bin/cmake" ] || [ ! -x "$root/usr/bin/clang++" ]; then
    log "making the Debian 12 arm64 chroot in $root (debootstrap, several minutes)"
    mkdir -p "$root"
    nice -n 10 debootstrap --arch=arm64 --include="$pkgs" bookworm "$root" "$mirror" \
        >"$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log"; die "debootstrap failed"; }
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

# ---- the checkout: what git tracks, plus what is not ignored ------------------------------
mkdir -p "$root/src"
(cd "$here" && git ls-files -co --exclude-standard -z) \
    | rsync -a --from0 --files-from=- --delete-missing-args "$here/" "$root/src/" \
    || die "could not copy the checkout into $root/src"

# ---- build and test inside ----------------------------------------------------------------
in_root() { nice -n 10 chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                HOME=/root LANG=C.UTF-8 ${EMU_CXX:+EMU_CXX=$EMU_CXX} bash -c "cd /src && $1"; }
logs="$root/src/build/platforms"
mkdir -p "$logs"
arch="$(in_root 'uname -m')"
[ "$arch" = aarch64 ] || die "the chroot runs as '$arch', not aarch64"
# the compiler emulated code is built with (emu/emu.mk: clang++ when installed)
cxx="$(in_root '${EMU_CXX:-$(command -v clang++ || command -v g++)} --version | head -1' \
       2>/dev/null | sed 's/^Debian //; s/ (.*//; s/ version//; s/ (Debian.*//')"
ok=1
row="arm64 | Debian 12, qemu-user | ${cxx:-?}"

if [ "${EMU_TESTS:-1}" != 0 ]; then
    log "building the emulator and its tests"
    if in_root 'make emu-tests cuemu-nvcc BACKEND=cpu -j2' >"$logs/emu-build.log" 2>&1 &&
       in_root 'cmake -S tests -B build/tests/arm64 -DMODE=maintainer -DBACKEND=cpu \
                  -DPYTHON=/usr/bin/python3 -DBUILD_DIR=/src/build >/dev/null &&
                ctest --test-dir build/tests/arm64 -L "^emu$" --parallel 2 \
                  --output-on-failure' >"$logs/emu-tests.log" 2>&1; then
        :
    else
        ok=0
    fi
    summary="$(grep -E '^[0-9]+% tests passed' "$logs/emu-tests.log" | tail -1)"
    if [[ $summary =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
        row="$row | emu tests $((BASH_REMATCH[2] - BASH_REMATCH[1]))/${BASH_REMATCH[2]}"
    else
        row="$row | emu tests not built"
        tail -30 "$logs/emu-build.log" >&2
    fi
    grep -E '^\s*[0-9]+ - ' "$logs/emu-tests.log" >&2 || true
fi

for ch in $chapters; do
    log "chapter $ch: make check-solutions CH=$ch"
    if in_root "make check-solutions BACKEND=cpu CH=$ch PYTHON=/usr/bin/python3" \
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
