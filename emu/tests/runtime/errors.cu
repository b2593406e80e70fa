// SPDX-License-Identifier: MIT
/*
 * Runtime test: error names and strings are CUDA's, cudaGetLastError returns and clears,
 * cudaPeekAtLastError does not, and a sticky fault (what a kernel's illegal address leaves)
 * makes every call fail until cudaDeviceReset.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#ifdef __CUEMU__
#include "cuemu_internal.h"
#endif

#include "rt_test.h"

int main(void)
{
    // Numbers and names straight from CUDA 13.0.
    EXPECT(cudaErrorInvalidValue == 1 && cudaErrorMemoryAllocation == 2);
    EXPECT(cudaErrorInvalidConfiguration == 9 && cudaErrorInvalidPitchValue == 12);
    EXPECT(cudaErrorInvalidMemcpyDirection == 21 && cudaErrorInsufficientDriver == 35);
    EXPECT(cudaErrorNoDevice == 100 && cudaErrorInvalidDevice == 101);
    EXPECT(cudaErrorInvalidResourceHandle == 400 && cudaErrorNotReady == 600);
    EXPECT(cudaErrorIllegalAddress == 700 && cudaErrorHostMemoryAlreadyRegistered == 712);
    EXPECT(cudaErrorHostMemoryNotRegistered == 713 && cudaErrorLaunchFailure == 719);
    EXPECT(cudaErrorUnknown == 999);
    EXPECT_STR(cudaGetErrorName(cudaSuccess), "cudaSuccess");
    EXPECT_STR(cudaGetErrorString(cudaSuccess), "no error");
    EXPECT_STR(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    EXPECT_STR(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    EXPECT_STR(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    EXPECT_STR(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress");
    EXPECT_STR(cudaGetErrorString(cudaErrorIllegalAddress), "an illegal memory access was encountered");
    EXPECT_STR(cudaGetErrorString(cudaErrorLaunchFailure), "unspecified launch failure");
    EXPECT_STR(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
    EXPECT_STR(cudaGetErrorString(cudaErrorNoDevice), "no CUDA-capable device is detected");
    EXPECT_STR(cudaGetErrorName((cudaError_t)12345), "unrecognized error code");

    // Last error: every failing call records it; Get clears, Peek does not.
    OK(cudaGetLastError());
    EXPECT_ERR(cudaSetDevice(7), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);
    EXPECT_ERR(cudaPeekAtLastError(), cudaSuccess);

    // A success does not clear an earlier error: the last *error* is kept.
    void *p = NULL;
    EXPECT_ERR(cudaMemcpy(NULL, NULL, 4, (cudaMemcpyKind)42), cudaErrorInvalidMemcpyDirection);
    OK(cudaMalloc(&p, 64));
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
    OK(cudaFree(p));

    int v = 0;
    OK(cudaDriverGetVersion(&v));
    EXPECT(v >= 13000);
    OK(cudaRuntimeGetVersion(&v));
    EXPECT(v == 13000);
    EXPECT_ERR(cudaRuntimeGetVersion(NULL), cudaErrorInvalidValue);
    (void)cudaGetLastError();

#ifdef __CUEMU__
    // A fault inside a kernel: sticky until cudaDeviceReset, and reading it does not clear it.
    OK(cudaMalloc(&p, 64));
    cuemu_set_sticky_error(cudaErrorIllegalAddress);
    EXPECT_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorIllegalAddress);
    void *q = NULL;
    EXPECT_ERR(cudaMalloc(&q, 64), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaMemset(p, 0, 64), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaFree(p), cudaErrorIllegalAddress);
    // Device queries need no context and keep working.
    int n = 0;
    OK(cudaGetDeviceCount(&n));
    EXPECT(n == 1);
    OK(cudaDeviceReset());
    OK(cudaGetLastError());
    OK(cudaMalloc(&q, 64));
    OK(cudaFree(q));
    size_t free_b, total_b;
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(free_b == total_b);      // the allocation made before the fault went with the reset

    // Diagnostics are collected for Python and can be cleared.
    cuemuClearDiagnostic();
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
    cuemu_diag("test message %d", 42);
    EXPECT(strcmp(cuemuLastDiagnostic(), "cuemu: test message 42\n") == 0);
    cuemuClearDiagnostic();
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
#endif

    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("errors: ok\n");
    return 0;
}
