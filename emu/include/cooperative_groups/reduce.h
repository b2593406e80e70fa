/* SPDX-License-Identifier: MIT */
/* cooperative_groups/reduce.h for the CPU emulator: reduce() and its operators are part of
   the emulator's cooperative_groups.h. */
#include "../cooperative_groups.h"
