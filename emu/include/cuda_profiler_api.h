/* SPDX-License-Identifier: MIT */
/* cuda_profiler_api.h for the CPU emulator: cudaProfilerStart/Stop are declared in its
   cuda_runtime.h (cuemu_runtime_ext.h); there is no profiler to start, so both succeed. */
#include "cuda_runtime.h"
#ifndef __CUDA_PROFILER_API_H__
#define __CUDA_PROFILER_API_H__
#endif
