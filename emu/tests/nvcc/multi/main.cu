// SPDX-License-Identifier: MIT
/*
 * A small multi-file CUDA program (main.cu, kernels.cu, host_util.cpp, vecops.h, include/params.h)
 * that `make test` builds with cuemu-nvcc (emu/tests/nvcc/test_nvcc.py), in one step and in
 * separate -c steps, then runs. SCALE comes from -D; cuBLAS from -lcublas.
 */
#include <cmath>
#include <cstdio>
#include <vector>
#include <cublas_v2.h>
#include "params.h"
#include "vecops.h"

#ifndef SCALE
#define SCALE 1
#endif

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main()
{
    const int n = N_ELEMS, blocks = (n + BLOCK - 1) / BLOCK;
    std::vector<float> x(n), y(n), sums(blocks);
    for (int i = 0; i < n; i++) { x[i] = (float)(i % 13) - 6.0f; y[i] = (float)(i % 5); }
    float *dx, *dy, *dsum;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dsum, blocks * sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));

    launch_saxpy((float)SCALE, dx, dy, n);
    CHECK(cudaGetLastError());
    double want = 0.0;
    for (int i = 0; i < n; i++) want += (SCALE * x[i] + y[i]) * (double)(i % 7 + 1);
    double got = device_checksum(dy, n);
    std::printf("saxpy: %d elements, scale %d: %s\n", n, SCALE, got == want ? "ok" : "WRONG");

    block_sum_kernel<<<blocks, BLOCK>>>(dx, dsum, n);
    CHECK(cudaMemcpy(sums.data(), dsum, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    for (int b = 0; b < blocks; b++) {
        float s = 0.0f;
        for (int i = b * BLOCK; i < n && i < (b + 1) * BLOCK; i++) s += x[i];
        ok = ok && std::fabs(sums[b] - s) < 1e-3f;
    }
    std::printf("block sums: %d blocks: %s\n", blocks, ok ? "ok" : "WRONG");

    // C = A * B for 2x2 column-major matrices through the emulator's cuBLAS
    const float ha[4] = {1, 2, 3, 4}, hb[4] = {5, 6, 7, 8};
    float hc[4], alpha = 1.0f, beta = 0.0f, *da, *db, *dc;
    CHECK(cudaMalloc(&da, sizeof ha));
    CHECK(cudaMalloc(&db, sizeof hb));
    CHECK(cudaMalloc(&dc, sizeof hc));
    CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    bool blas_ok = cublasCreate(&h) == CUBLAS_STATUS_SUCCESS
                   && cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, da, 2, db, 2,
                                  &beta, dc, 2) == CUBLAS_STATUS_SUCCESS
                   && cublasDestroy(h) == CUBLAS_STATUS_SUCCESS;
    CHECK(cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost));
    blas_ok = blas_ok && hc[0] == 23 && hc[1] == 34 && hc[2] == 31 && hc[3] == 46;
    std::printf("cublas sgemm 2x2: %s\n", blas_ok ? "ok" : "WRONG");

    CHECK(cudaFree(dx)); CHECK(cudaFree(dy)); CHECK(cudaFree(dsum));
    CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
    return got == want && ok && blas_ok ? 0 : 1;
}
