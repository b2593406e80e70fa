/* SPDX-License-Identifier: MIT */
/*
 * cuda.h for the CPU emulator. The CUDA driver API (cuInit, cuModuleLoad, cuLaunchKernel, ...)
 * loads GPU binaries (cubin, PTX) that the emulator cannot run: it is not offered. This header
 * exists so that the toolkit's cuda.h is never found instead; it gives the version macro and
 * the basic handle types (that headers which only mention them compile), and a program that
 * calls a driver-API function stops at its build with "not supported here: the CUDA driver
 * API", naming the line of the call.
 */
#ifndef __cuda_cuda_h__
#define __cuda_cuda_h__
#include "cuda_runtime.h"

#define CUDA_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef cudaStream_t CUstream;
typedef cudaEvent_t CUevent;
typedef enum cudaError_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

/* Every driver-API entry point a program names is refused where it is named. gcc before 12
   ignores `unavailable` (the call would fail only at the link, naming no line): there the
   refusal is gcc's `error` attribute, which names the line of each call. */
#define CUEMU_DRIVER_API_WHY \
    "not supported here: the CUDA driver API (cu* functions); the emulator runs the runtime API only"
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 12
#define CUEMU_DRIVER_API __attribute__((error(CUEMU_DRIVER_API_WHY)))
#else
#define CUEMU_DRIVER_API __attribute__((unavailable(CUEMU_DRIVER_API_WHY)))
#endif
CUEMU_DRIVER_API CUresult cuInit(unsigned int Flags);
CUEMU_DRIVER_API CUresult cuDriverGetVersion(int *driverVersion);
CUEMU_DRIVER_API CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUEMU_DRIVER_API CUresult cuDeviceGetCount(int *count);
CUEMU_DRIVER_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUEMU_DRIVER_API CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUEMU_DRIVER_API CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev);
CUEMU_DRIVER_API CUresult cuCtxCreate(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev);
CUEMU_DRIVER_API CUresult cuCtxDestroy(CUcontext ctx);
CUEMU_DRIVER_API CUresult cuCtxGetCurrent(CUcontext *pctx);
CUEMU_DRIVER_API CUresult cuCtxSetCurrent(CUcontext ctx);
CUEMU_DRIVER_API CUresult cuCtxSynchronize(void);
CUEMU_DRIVER_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUEMU_DRIVER_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUEMU_DRIVER_API CUresult cuModuleLoad(CUmodule *module, const char *fname);
CUEMU_DRIVER_API CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUEMU_DRIVER_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                             void *options, void **optionValues);
CUEMU_DRIVER_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUEMU_DRIVER_API CUresult cuModuleUnload(CUmodule hmod);
CUEMU_DRIVER_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                         unsigned int gz, unsigned int bx, unsigned int by,
                                         unsigned int bz, unsigned int sharedMemBytes,
                                         CUstream hStream, void **kernelParams, void **extra);
CUEMU_DRIVER_API CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUEMU_DRIVER_API CUresult cuMemFree(CUdeviceptr dptr);
CUEMU_DRIVER_API CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n);
CUEMU_DRIVER_API CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n);
CUEMU_DRIVER_API CUresult cuGetErrorName(CUresult error, const char **pStr);
CUEMU_DRIVER_API CUresult cuGetErrorString(CUresult error, const char **pStr);
CUEMU_DRIVER_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                           unsigned long long flags, void *symbolStatus);
/* called directly, the encoder is the driver API too; cudaGetDriverEntryPointByVersion hands
   out the emulator's (cuemu_tensor_map.h) */
CUEMU_DRIVER_API CUresult cuTensorMapEncodeTiled(
    CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void *globalAddress, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const cuuint32_t *boxDim, const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill);
#undef CUEMU_DRIVER_API
#undef CUEMU_DRIVER_API_WHY
#ifdef __cplusplus
}
#endif
#endif /* __cuda_cuda_h__ */
