/* SPDX-License-Identifier: MIT */
/* vector_types.h for the CPU emulator: what the toolkit's header declares is part of the emulator's
   cuda_runtime.h (which defines this header's include guard too), so a program that includes
   it by name gets the emulator's declarations and never the toolkit's copy. */
#include "cuda_runtime.h"
