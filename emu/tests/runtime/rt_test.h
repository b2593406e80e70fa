// SPDX-License-Identifier: MIT
/*
 * rt_test.h: the checks the runtime tests and the parity test share. Plain CUDA, so every test
 * also compiles with nvcc. Each test counts its `failures` and returns 1 from main() if any.
 */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

static int failures;

#define EXPECT(cond)                                                                      \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);           \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* The call must return `want`, CUDA's error code (names are printed on a mismatch). */
#define EXPECT_ERR(expr, want)                                                            \
    do {                                                                                  \
        cudaError_t got_ = (expr);                                                        \
        if (got_ != (want)) {                                                             \
            fprintf(stderr, "%s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__, #expr,  \
                    cudaGetErrorName(got_), cudaGetErrorName(want));                      \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

#define OK(expr) EXPECT_ERR(expr, cudaSuccess)

#define EXPECT_STR(a, b)                                                                  \
    do {                                                                                  \
        if (strcmp((a), (b)) != 0) {                                                      \
            fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
                    #a, (a), (b));                                                        \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

#endif
