#!/bin/sh
# SPDX-License-Identifier: MIT
# Where is NCCL? Prints the nvcc flags that compile and link chapter 09 with it
# (-DTUT_HAVE_NCCL=1 -I... -L... -l...), or nothing when there is none: the chapter then builds
# without it and its NCCL tests skip, saying so. The Makefile runs it for a GPU build.
#   NCCL_HOME=/opt/nccl sh tools/find_nccl.sh     that installation only
#   NVCC=/path/to/nvcc sh tools/find_nccl.sh       nvcc's toolkit is one place searched
# Looked in, in order: $NCCL_HOME; the CUDA toolkit of $NVCC (some toolkits ship NCCL);
# /usr/include and /usr/local/include with the linker's own directories (Debian's libnccl-dev);
# the NVIDIA wheels of python3 (nvidia-nccl-cu*: a header and libnccl.so.2, no libnccl.so).
# Diagnostics go to stderr.
NVCC=${NVCC:-nvcc}

# lib_flags DIR: the link flags for a libnccl in DIR (the versioned name if the plain one is
# missing), with DIR on the run-time search path unless the loader knows it already.
lib_flags() {
    if [ -e "$1/libnccl.so" ]; then lib=-lnccl
    elif [ -e "$1/libnccl.so.2" ]; then lib=-l:libnccl.so.2
    else return 1; fi
    case "$1" in
        /usr/lib|/usr/lib64|/usr/lib/*-linux-gnu) printf '%s' "$lib" ;;
        *) printf '%s' "-L$1 $lib -Xlinker -rpath=$1" ;;
    esac
}

# found INCDIR LIBDIR...: print the flags for the first LIBDIR with a libnccl, and stop.
found() {
    inc=$1; shift
    [ -f "$inc/nccl.h" ] || return 1
    for d in "$@"; do
        if flags=$(lib_flags "$d"); then
            echo "-DTUT_HAVE_NCCL=1 -I$inc $flags"
            exit 0
        fi
    done
    return 1
}

if [ -n "$NCCL_HOME" ]; then
    found "$NCCL_HOME/include" "$NCCL_HOME/lib" "$NCCL_HOME/lib64" "$NCCL_HOME/lib/x86_64-linux-gnu"
    echo "find_nccl: NCCL_HOME=$NCCL_HOME has no include/nccl.h with a lib/libnccl.so beside it" >&2
    exit 0
fi

# directories of a libnccl the loader knows: the header may be elsewhere (the toolkit)
system_libs=$(ldconfig -p 2>/dev/null | sed -n 's|.*libnccl\.so[.0-9]* .*=> \(.*\)/libnccl\.so.*|\1|p' | sort -u)
nvcc_path=$(command -v "$NVCC" 2>/dev/null)
if [ -n "$nvcc_path" ]; then
    cuda=$(cd "$(dirname "$nvcc_path")/.." 2>/dev/null && pwd -P)
    # shellcheck disable=SC2086
    [ -n "$cuda" ] && found "$cuda/include" "$cuda/lib64" "$cuda/lib" \
        "$cuda/targets/x86_64-linux/lib" "$cuda/targets/sbsa-linux/lib" $system_libs
fi

for inc in /usr/include /usr/local/include; do
    # shellcheck disable=SC2086
    found "$inc" $system_libs /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/local/lib
done

for py in python3 python; do
    roots=$("$py" -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null) || continue
    for root in $roots; do
        header=$(find "$root" -name nccl.h -path '*include*' 2>/dev/null | head -n 1)
        [ -n "$header" ] || continue
        inc=$(dirname "$header")
        libdir=$(dirname "$(find "$root" -name 'libnccl.so*' 2>/dev/null | head -n 1)")
        found "$inc" "$libdir" "$(dirname "$inc")/lib"
    done
done

echo "find_nccl: no NCCL found (nccl.h and libnccl): chapter 09 builds without it; set NCCL_HOME to use one" >&2
exit 0
