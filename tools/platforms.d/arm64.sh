#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make platforms' 64-bit Arm leg: tools/platforms/arm64.sh (Debian 12 arm64 under qemu-user: the
# emulator's tests and chapters 01, 04, 05) in the chroot $ARM64_ROOT (default
# $CHROOTS/arm64, made there when missing), its one summary line turned into table rows.
# Slow: an hour or more under qemu-user on two cores.
set -uo pipefail
cd "$REPO"
plat="Debian 12 arm64 (qemu-user)"
if [ "$(id -u)" != 0 ]; then
    echo "$plat|-|emulator tests, chapters 01 04 05|skipped: needs root (debootstrap, chroot, binfmt_misc)"
    exit 0
fi
log="$OUT/arm64.log"
ARM64_ROOT="${ARM64_ROOT:-$CHROOTS/arm64}" ARM64_MIRROR="$MIRROR" tools/platforms/arm64.sh >"$log" 2>&1
last="$(grep '^arm64 | ' "$log" | tail -n1)"
if [ -z "$last" ]; then
    echo "$plat|-|emulator tests, chapters 01 04 05|FAIL: $(grep 'arm64: error' "$log" | tail -n1 || echo "no summary") (see $log)"
    exit 0
fi
IFS='|' read -r -a f <<<"$last"
cxx="$(echo "${f[2]}" | sed 's/^ *//; s/ *$//')"
for part in "${f[@]:3}"; do
    part="$(echo "$part" | sed 's/^ *//; s/ *$//')"
    case "$part" in
        "emu tests "[0-9]*)
            n="${part#emu tests }"
            [[ $n =~ ^([0-9]+)/([0-9]+) ]]
            # the tests that still fail (arm64.sh prints them on stderr, after the run again)
            failed="$(sed -n 's/^ *[0-9]* - \(emu\/[^ ]*\) .*/\1/p' "$log" | sort -u | tr '\n' ' ' | sed 's/ $//')"
            if [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
                echo "$plat|$cxx|emulator tests (ctest -L emu, nvcc ones apart)|pass: $n"
            else
                echo "$plat|$cxx|emulator tests (ctest -L emu, nvcc ones apart)|FAIL: $n passed; failing: $failed (see $log)"
            fi ;;
        "emu tests"*) echo "$plat|$cxx|emulator tests|FAIL: $part (see $log)" ;;
        "build"*) echo "$plat|$cxx|emulator and chapters build|FAIL: $part" ;;
        [0-9][0-9]" pass") echo "$plat|$cxx|chapter ${part%% *} solutions (make check-solutions)|pass" ;;
        [0-9][0-9]" FAIL") echo "$plat|$cxx|chapter ${part%% *} solutions (make check-solutions)|FAIL (see $log)" ;;
    esac
done
