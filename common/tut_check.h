// SPDX-License-Identifier: MIT
/*
 * tut_check.h: error checking that returns instead of exiting.
 *
 * Every exported chapter function runs inside the Python process, so nothing here may call
 * exit() or abort(). A failing call records what failed (expression, file, line, CUDA error
 * name and message) and jumps to the function's single `cleanup:` label with `status` set.
 * Python fetches the record through tut_last_error_*() and raises CudaError.
 *
 * Use in a function that declares `int status = 0;` and ends with `cleanup:`:
 *     CUDA_CHECK(cudaMalloc(&d_a, bytes));
 *     kernel<<<grid, block>>>(d_a, n);
 *     CUDA_CHECK_LAUNCH();
 */
#ifndef TUT_CHECK_H
#define TUT_CHECK_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "tut_cuda_compat.h"   /* CUDA 12.4+ as well as 13 */

/* Status values beyond cudaError_t (all CUDA error codes are >= 0). */
#define TUT_ERR_TODO    (-1)   /* the student's TODO(student) hole was reached */
#define TUT_ERR_ARG     (-2)   /* bad argument caught in C (Python should have caught it first) */
#define TUT_ERR_NEWER_CUDA (-3) /* a call the CUDA toolkit it was built with lacks: Python skips */
/* This value and below: a chapter's own errors (a pool's "double free"...), recorded with
   tut_record_error, which names them; Python raises tut.LibraryError. */
#define TUT_ERR_LIBRARY (-100)

/* Make TUT_SYNC_AFTER_LAUNCH=1 (make NVCCFLAGS+=-DTUT_SYNC_AFTER_LAUNCH=1) to synchronise after
   every launch, so a fault inside a kernel is blamed on that kernel and not on a later call. */
#ifndef TUT_SYNC_AFTER_LAUNCH
#define TUT_SYNC_AFTER_LAUNCH 0
#endif

#ifdef __cplusplus
extern "C" {
#endif
/* Records a failure; `code` is a cudaError_t or a TUT_ERR_* value. Returns code. */
int tut_record(int code, const char *expr, const char *file, int line);
/* Records a chapter's own error (code <= TUT_ERR_LIBRARY): `name` is its short name
   ("TPOOL_ERR_DOUBLE_FREE"), the rest a printf-style sentence saying what went wrong. */
int tut_record_error(int code, const char *name, const char *file, int line,
                     const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 5, 6)))
#endif
    ;
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(expr)                                                      \
    do {                                                                      \
        cudaError_t tut_err_ = (expr);                                        \
        if (tut_err_ != cudaSuccess) {                                        \
            status = tut_record((int)tut_err_, #expr, __FILE__, __LINE__);    \
            goto cleanup;                                                     \
        }                                                                     \
    } while (0)

/* A launch reports configuration errors (too many threads, too much shared memory) only
   through cudaGetLastError; faults inside the kernel show up at the next synchronisation. */
#define CUDA_CHECK_LAUNCH()                                                   \
    do {                                                                      \
        CUDA_CHECK(cudaGetLastError());                                       \
        if (TUT_SYNC_AFTER_LAUNCH) CUDA_CHECK(cudaDeviceSynchronize());       \
    } while (0)

/* A host-code hole the student fills in: Python raises ExerciseNotDone naming this line. */
#define TUT_TODO()                                                            \
    do {                                                                      \
        status = tut_record(TUT_ERR_TODO, "TODO(student)", __FILE__, __LINE__); \
        goto cleanup;                                                         \
    } while (0)

/* An argument C must refuse (Python validates first; this is the second line of defence). */
#define TUT_REQUIRE(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            status = tut_record(TUT_ERR_ARG, #cond, __FILE__, __LINE__);      \
            goto cleanup;                                                     \
        }                                                                     \
    } while (0)

/* Ceiling division: the number of blocks of `block` threads that cover n elements (n >= 0).
   Computed in 64 bits: for an int n near INT_MAX, n + block - 1 would overflow. */
#define TUT_DIV_UP(n, block) ((int)(((long long)(n) + (block) - 1) / (block)))

#endif
