/* SPDX-License-Identifier: MIT */
/*
 * cudaTypedefs.h for the CPU emulator: the function-pointer types of the driver functions that
 * cudaGetDriverEntryPointByVersion hands out here, which is one: cuTensorMapEncodeTiled
 * (emu/runtime/tensor_map.c). The toolkit's header has one for every driver function; the
 * others do not exist here, and a program that names one stops at its build.
 */
#ifndef CUEMU_CUDA_TYPEDEFS_H
#define CUEMU_CUDA_TYPEDEFS_H
#include "cuda.h"

#ifndef CUDAAPI
#define CUDAAPI
#endif

typedef CUresult(CUDAAPI *PFN_cuTensorMapEncodeTiled_v12000)(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const cuuint32_t *boxDim, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill);
#define PFN_cuTensorMapEncodeTiled PFN_cuTensorMapEncodeTiled_v12000

#endif /* CUEMU_CUDA_TYPEDEFS_H */
