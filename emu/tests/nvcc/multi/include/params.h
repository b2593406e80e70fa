// SPDX-License-Identifier: MIT
// In its own folder: the multi-file program finds it only through -I.
#pragma once
#define N_ELEMS 1009   // prime: never a multiple of the block size
