// SPDX-License-Identifier: MIT
// emu_bench's second baseline: the same native loops, compiled with plain -O2 (emu/emu.mk).
#define NATIVE_NS plain
#include "native_loops.h"
