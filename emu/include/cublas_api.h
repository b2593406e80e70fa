/* SPDX-License-Identifier: MIT */
/* cublas_api.h for the CPU emulator: its small cuBLAS is declared in cublas_v2.h. */
#include "cublas_v2.h"
