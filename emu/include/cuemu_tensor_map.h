/* SPDX-License-Identifier: MIT */
/*
 * cuemu_tensor_map.h: tensor maps (sm_90's TMA descriptors) as far as the CPU emulator goes,
 * included by cuda_runtime.h. CUDA 13.0's names and numbers (cuda.h, driver_types.h):
 * CUtensorMap and its enums, and the runtime's cudaGetDriverEntryPointByVersion, which hands
 * out the driver's cuTensorMapEncodeTiled without linking the driver API. Here it hands out an
 * emulated encoder (emu/runtime/tensor_map.c) that checks the arguments as CUDA 13.0's
 * documentation of cuTensorMapEncodeTiled lists them and writes a cuemu_tensor_map into the
 * opaque descriptor; <cuda/barrier>'s cp_async_bulk_tensor_*_global_to_shared reads it back.
 * Tiled, non-interleaved, unswizzled maps only: the rest is refused as not supported here.
 */
#ifndef CUEMU_TENSOR_MAP_H
#define CUEMU_TENSOR_MAP_H

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned int cuuint32_t;
typedef unsigned long long cuuint64_t;

#define CU_TENSOR_MAP_NUM_QWORDS 16
typedef struct CUtensorMap_st {
#if defined(__cplusplus)
    alignas(64)
#else
    _Alignas(64)
#endif
    cuuint64_t opaque[CU_TENSOR_MAP_NUM_QWORDS];
} CUtensorMap;

typedef enum CUtensorMapDataType_enum {
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
    CU_TENSOR_MAP_DATA_TYPE_UINT16,
    CU_TENSOR_MAP_DATA_TYPE_UINT32,
    CU_TENSOR_MAP_DATA_TYPE_INT32,
    CU_TENSOR_MAP_DATA_TYPE_UINT64,
    CU_TENSOR_MAP_DATA_TYPE_INT64,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
    CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B,
    CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B
} CUtensorMapDataType;

typedef enum CUtensorMapInterleave_enum {
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    CU_TENSOR_MAP_INTERLEAVE_16B,
    CU_TENSOR_MAP_INTERLEAVE_32B
} CUtensorMapInterleave;

typedef enum CUtensorMapSwizzle_enum {
    CU_TENSOR_MAP_SWIZZLE_NONE = 0,
    CU_TENSOR_MAP_SWIZZLE_32B,
    CU_TENSOR_MAP_SWIZZLE_64B,
    CU_TENSOR_MAP_SWIZZLE_128B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
    CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B
} CUtensorMapSwizzle;

typedef enum CUtensorMapL2promotion_enum {
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;

typedef enum CUtensorMapFloatOOBfill_enum {
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
} CUtensorMapFloatOOBfill;

enum cudaGetDriverEntryPointFlags {
    cudaEnableDefault = 0x0,
    cudaEnableLegacyStream = 0x1,
    cudaEnablePerThreadDefaultStream = 0x2
};

enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2
};
typedef enum cudaDriverEntryPointQueryResult cudaDriverEntryPointQueryResult;

/* The driver functions the emulator offers through it: cuTensorMapEncodeTiled (from CUDA
   12.0). Any other symbol is "not found" (funcPtr NULL, cudaSuccess), as CUDA answers for a
   symbol its driver lacks, with a diagnostic line naming it. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus
#ifdef __cplusplus
                                             = 0
#endif
);

/* What the emulated encoder writes into CUtensorMap::opaque (at most its 128 bytes). */
#define CUEMU_TENSOR_MAP_MAGIC 0x544D4150u   /* "TMAP" */
struct cuemu_tensor_map {
    unsigned magic;
    unsigned char rank, elem, oob_nan, pad;
    const void *addr;
    unsigned long long dim[5];          /* elements, innermost first */
    unsigned long long stride[5];       /* bytes: stride[0] = elem, stride[i] = globalStrides[i-1] */
    unsigned short box[5];
    unsigned char step[5];              /* elementStrides */
};

#ifdef __cplusplus
}
#endif
#endif /* CUEMU_TENSOR_MAP_H */
