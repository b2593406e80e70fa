// SPDX-License-Identifier: MIT
/*
 * tut_cuda_compat.h: the chapters are written against CUDA 13's runtime API; this header lets
 * the same source build with CUDA 12.4 and newer 12.x too (drivers older than 580 run only
 * those). Included by tut_check.h, so every chapter has it. Where 12 and 13 differ:
 *
 *   - cudaMemPrefetchAsync and cudaMemAdvise take a struct cudaMemLocation in 13; 12.2 added
 *     those forms as cudaMemPrefetchAsync_v2 and cudaMemAdvise_v2 (the old names took an int
 *     device). On 12.x the 13 names are made to mean the _v2 functions.
 *   - cudaDeviceProp lost clockRate, memoryClockRate and other fields in 13: the chapters read
 *     them with cudaDeviceGetAttribute (cudaDevAttrMemoryClockRate, ...), which both have.
 *
 * The emulator's cuda_runtime.h is CUDA 13's API (CUDART_VERSION 13000): nothing here applies.
 */
#ifndef TUT_CUDA_COMPAT_H
#define TUT_CUDA_COMPAT_H

#include <cuda_runtime.h>

#if CUDART_VERSION < 12040
#error "the course needs the CUDA toolkit 12.4 or newer (nvcc --version); or the emulator: make BACKEND=cpu"
#endif

#if CUDART_VERSION < 13000
#define cudaMemPrefetchAsync cudaMemPrefetchAsync_v2
#define cudaMemAdvise cudaMemAdvise_v2
#endif

#endif /* TUT_CUDA_COMPAT_H */
