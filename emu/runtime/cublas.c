/* SPDX-License-Identifier: MIT */
/*
 * The emulator's cuBLAS subset (see emu/include/cublas_v2.h): handles and SGEMM on the CPU.
 * Argument checks follow cuBLAS: negative sizes or leading dimensions smaller than the rows of
 * the stored matrix are CUBLAS_STATUS_INVALID_VALUE. Accumulates in float, like cuBLAS FP32.
 */
#include <cublas_v2.h>
#include "rt_internal.h"
#include <stdlib.h>

struct cuemu_cublas_context {
    cudaStream_t stream;
    cublasMath_t mode;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;   /* all emulated work is synchronous: recorded, not needed */
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((int)mode < 0 || (int)mode > CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "cuBLAS error";
    }
}

/* Element (row, col) of op(X), where X is column-major with leading dimension ld. */
static float at(const float *X, int ld, cublasOperation_t op, int row, int col)
{
    return op == CUBLAS_OP_N ? X[row + (size_t)col * ld] : X[col + (size_t)row * ld];
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    int a_rows = transa == CUBLAS_OP_N ? m : k;
    int b_rows = transb == CUBLAS_OP_N ? k : n;
    /* computed at the call, so everything queued before it (its inputs) runs first */
    rt_drain_all();
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
        ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1) || !alpha || !beta ||
        (int)transa < 0 || (int)transa > 2 || (int)transb < 0 || (int)transb > 2)
        return CUBLAS_STATUS_INVALID_VALUE;
    rt_dev_enter();   /* device work: A, B and C are device memory */
    for (int col = 0; col < n; col++) {
        for (int row = 0; row < m; row++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += at(A, lda, transa, row, p) * at(B, ldb, transb, p, col);
            float *c = &C[row + (size_t)col * ldc];
            /* beta == 0: C is not read (it may hold NaN), as cuBLAS documents */
            *c = *beta == 0.0f ? *alpha * acc : *alpha * acc + *beta * *c;
        }
    }
    rt_dev_leave();
    return CUBLAS_STATUS_SUCCESS;
}

/* y = alpha * op(A) x + beta * y, A column-major m x n. Negative increments walk the vector
   from its end, as BLAS does. Accumulates in the element type (T float or double). */
#define CUEMU_GEMV(NAME, T)                                                                     \
cublasStatus_t NAME(cublasHandle_t handle, cublasOperation_t trans, int m, int n,              \
                    const T *alpha, const T *A, int lda, const T *x, int incx, const T *beta,  \
                    T *y, int incy)                                                            \
{                                                                                              \
    rt_drain_all();                                                                            \
    if (!handle)                                                                               \
        return CUBLAS_STATUS_NOT_INITIALIZED;                                                  \
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0 || !alpha || !beta || \
        (int)trans < 0 || (int)trans > 2)                                                      \
        return CUBLAS_STATUS_INVALID_VALUE;                                                    \
    int rows = trans == CUBLAS_OP_N ? m : n, cols = trans == CUBLAS_OP_N ? n : m;               \
    if (rows == 0 || cols == 0) return CUBLAS_STATUS_SUCCESS;                                  \
    long kx = incx > 0 ? 0 : (long)(cols - 1) * -incx, ky = incy > 0 ? 0 : (long)(rows - 1) * -incy; \
    for (int r = 0; r < rows; r++) {                                                           \
        T acc = 0;                                                                             \
        for (int c = 0; c < cols; c++) {                                                       \
            T a = trans == CUBLAS_OP_N ? A[r + (size_t)c * lda] : A[c + (size_t)r * lda];      \
            acc += a * x[kx + (long)c * incx];                                                 \
        }                                                                                      \
        T *py = &y[ky + (long)r * incy];                                                       \
        *py = *beta == 0 ? *alpha * acc : *alpha * acc + *beta * *py;                          \
    }                                                                                          \
    return CUBLAS_STATUS_SUCCESS;                                                              \
}
CUEMU_GEMV(cublasSgemv_v2, float)
CUEMU_GEMV(cublasDgemv_v2, double)
