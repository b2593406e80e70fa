/* SPDX-License-Identifier: MIT */
/*
 * tensor_map.c: cudaGetDriverEntryPointByVersion and the one driver function it hands out here,
 * an emulated cuTensorMapEncodeTiled (cuemu_tensor_map.h). The encoder makes the checks CUDA
 * 13.0's documentation of cuTensorMapEncodeTiled lists (descriptor 64-byte aligned, rank 1..5,
 * global address 16-byte aligned, sizes 1..2^32, strides multiples of 16 below 2^40, box sizes
 * 1..256 with an inner box of a multiple of 16 bytes, element strides 1..8) and says which rule
 * a refused map broke; what the emulator does not copy (interleaved layouts, swizzles, packed
 * types) is refused as not supported here. The copies themselves are in <cuda/barrier>.
 */
#include <stdint.h>
#include <string.h>
#include "rt_internal.h"
#include "cuda.h"

static unsigned elem_size(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16: case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32: case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32: case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64: case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;   /* the packed 4- and 6-bit types */
    }
}

#define REFUSE(code, ...)                                        \
    do {                                                         \
        cuemu_diag("cuTensorMapEncodeTiled: " __VA_ARGS__);      \
        return (code);                                           \
    } while (0)

static CUresult emu_encode_tiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                 void *addr, const cuuint64_t *dim, const cuuint64_t *strides,
                                 const cuuint32_t *box, const cuuint32_t *step,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    struct cuemu_tensor_map m;
    unsigned elem = elem_size(type);
    memset(&m, 0, sizeof m);
    if (map == NULL || (uintptr_t)map % 64 != 0)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "the descriptor (tensorMap %p) must be 64-byte aligned",
               (void *)map);
    if ((unsigned)type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "tensorDataType %d is no CUtensorMapDataType", (int)type);
    if (elem == 0)
        REFUSE(CUDA_ERROR_NOT_SUPPORTED, "not supported here: the packed data type %d", (int)type);
    if (rank < 1 || rank > 5)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "tensorRank %u: must be 1 to 5", rank);
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        REFUSE(CUDA_ERROR_NOT_SUPPORTED, "not supported here: interleaved layouts (interleave %d)",
               (int)interleave);
    if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE)
        REFUSE(CUDA_ERROR_NOT_SUPPORTED, "not supported here: swizzled shared-memory layouts "
               "(swizzle %d); CU_TENSOR_MAP_SWIZZLE_NONE runs", (int)swizzle);
    if ((unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B || (unsigned)oob > 1)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "l2Promotion %d or oobFill %d out of range", (int)l2,
               (int)oob);
    if (addr == NULL || (uintptr_t)addr % 16 != 0)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "globalAddress %p must be 16-byte aligned", addr);
    if (!dim || !box || !step || (rank > 1 && !strides))
        REFUSE(CUDA_ERROR_INVALID_VALUE, "globalDim, globalStrides (rank > 1), boxDim and "
               "elementStrides must not be NULL");
    m.magic = CUEMU_TENSOR_MAP_MAGIC;
    m.rank = (unsigned char)rank;
    m.elem = (unsigned char)elem;
    m.oob_nan = oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    m.addr = addr;
    m.stride[0] = elem;
    for (unsigned i = 0; i < rank; i++) {
        if (dim[i] == 0 || dim[i] > (1ull << 32))
            REFUSE(CUDA_ERROR_INVALID_VALUE, "globalDim[%u] = %llu: must be 1 to 2^32", i, dim[i]);
        if (box[i] == 0 || box[i] > 256)
            REFUSE(CUDA_ERROR_INVALID_VALUE, "boxDim[%u] = %u: must be 1 to 256", i, box[i]);
        if (step[i] == 0 || step[i] > 8)
            REFUSE(CUDA_ERROR_INVALID_VALUE, "elementStrides[%u] = %u: must be 1 to 8", i, step[i]);
        if (i > 0 && step[i] != 1)
            REFUSE(CUDA_ERROR_NOT_SUPPORTED, "not supported here: elementStrides[%u] = %u (only 1)",
                   i, step[i]);
        if (i + 1 < rank && (strides[i] % 16 != 0 || strides[i] >= (1ull << 40)))
            REFUSE(CUDA_ERROR_INVALID_VALUE, "globalStrides[%u] = %llu bytes: must be a multiple "
                   "of 16 below 2^40", i, strides[i]);
        m.dim[i] = dim[i];
        m.box[i] = (unsigned short)box[i];
        m.step[i] = (unsigned char)step[i];
        if (i > 0)
            m.stride[i] = strides[i - 1];
    }
    if (rank > 1 && strides[0] < dim[0] * elem)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "globalStrides[0] = %llu bytes is less than a row "
               "(globalDim[0] * %u bytes = %llu): rows would overlap", strides[0], elem,
               dim[0] * elem);
    if (box[0] * elem % 16 != 0)
        REFUSE(CUDA_ERROR_INVALID_VALUE, "boxDim[0] * element size = %u bytes: must be a multiple "
               "of 16 (the inner box dimension, without interleave)", box[0] * elem);
    memset(map, 0, sizeof *map);
    memcpy(map->opaque, &m, sizeof m);
    return CUDA_SUCCESS;
}

_Static_assert(sizeof(struct cuemu_tensor_map) <= sizeof(CUtensorMap),
               "the emulated descriptor fits CUtensorMap's 128 bytes");

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (symbol == NULL || funcPtr == NULL || flags > cudaEnablePerThreadDefaultStream)
        return rt_err(cudaErrorInvalidValue);
    *funcPtr = NULL;
    if (strcmp(symbol, "cuTensorMapEncodeTiled") == 0) {
        if (cudaVersion >= 12000) {
            *funcPtr = (void *)emu_encode_tiled;
            found = cudaDriverEntryPointSuccess;
        } else {
            found = cudaDriverEntryPointVersionNotSufficent;   /* CUDA's own spelling */
        }
    } else {
        cuemu_diag("cudaGetDriverEntryPointByVersion(\"%s\"): not supported here (the emulator "
                   "hands out cuTensorMapEncodeTiled only): funcPtr is NULL", symbol);
    }
    if (driverStatus)
        *driverStatus = found;
    return cudaSuccess;
}
