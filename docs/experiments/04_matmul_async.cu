// SPDX-License-Identifier: MIT
/*
 * Chapter 04 experiment: does an asynchronous global-to-shared copy (cp.async, through the
 * __pipeline_memcpy_async primitives) with warp tiles and a double-buffered tile beat version
 * 3's register prefetch? Measured on an H200 on 2026-12-01 (docs/figures/h200.json, run
 * "2026-12-01 ch04 v5 experiment"): no variant did; see the chapter's README.
 *
 *   nvcc -O3 -arch=sm_90 -std=c++17 -Icommon -o build/matmul_async \
 *        docs/experiments/04_matmul_async.cu common/tut_check.cu -lcublas && build/matmul_async
 *
 * Version 3 (matmul_regtile_kernel) and its load4/store4 come from the lesson itself.
 */
#include "../../solutions/04_shared_memory/shared_memory.cu"
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cublas_v2.h>
#include <cuda_pipeline_primitives.h>

#include "experiment.h"

// ---------------- v5: warp tiles + cp.async double buffer ----------------
// 256 threads = 8 warps as 4 (rows) x 2 (cols); a warp computes 32 x 64 of C; its lanes as
// 4 x 8, each an 8x8 patch made of 2x2 4x4 pieces 16 rows / 32 columns apart.
template <int KT, int MINB, int WARP_ROWS>
__global__ void __launch_bounds__(256, MINB)
v5_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int m, int n, int k)
{
    constexpr int AP = BM + 4;                 // A^T tile pitch
    constexpr int WARP_COLS = 8 / WARP_ROWS;   // warps along n
    constexpr int WM = BM / WARP_ROWS, WN = BN / WARP_COLS;   // warp tile
    constexpr int LN = WN / 8;                // lanes along n (32 / LN along m)
    __shared__ __align__(16) float As[2][KT][AP];
    __shared__ __align__(16) float Bs[2][KT][BN];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wr = (warp / WARP_COLS) * WM, wc = (warp % WARP_COLS) * WN;
    int lr = (lane / LN) * 4, lc = (lane % LN) * 4;
    int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    int ntiles = (k + KT - 1) / KT;

    // each thread's share of the tiles: A column ac, rows ar0 + i * ARS; B row br0 + i * BRS, column bc
    constexpr int ARS = 256 / KT, BRS = 256 / (BN / 4);
    int ac = tid % KT, ar0 = tid / KT;
    int bc = (tid % (BN / 4)) * 4, br0 = tid / (BN / 4);
    bool a_rows_in = bm + BM <= m, b_cols_in = b_vec && bn + BN <= n;
    auto load_tile = [&](int stage, int k0) {
        if (a_rows_in && k0 + KT <= k) {   // the whole tile is inside A: no checks
            const float *src = A + (size_t)(bm + ar0) * k + k0 + ac;
#pragma unroll
            for (int i = 0; i < BM / ARS; i++)
                __pipeline_memcpy_async(&As[stage][ac][ar0 + i * ARS], src + (size_t)i * ARS * k, 4, 0);
        } else {
#pragma unroll
            for (int i = 0; i < BM / ARS; i++) {
                int gr = bm + ar0 + i * ARS, gc = k0 + ac;
                bool in = gr < m && gc < k;
                __pipeline_memcpy_async(&As[stage][ac][ar0 + i * ARS], in ? &A[(size_t)gr * k + gc] : A, 4, in ? 0 : 4);
            }
        }
        if (b_cols_in && k0 + KT <= k) {
            const float *src = B + (size_t)(k0 + br0) * n + bn + bc;
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
                __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc], src + (size_t)i * BRS * n, 16, 0);
        } else {
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int gr = k0 + br0 + i * BRS, gc = bn + bc + j;
                    bool in = gr < k && gc < n;
                    __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc + j], in ? &B[(size_t)gr * n + gc] : B, 4, in ? 0 : 4);
                }
        }
    };

    float acc[8][8] = {};
    load_tile(0, 0);
    __pipeline_commit();
    for (int t = 0; t < ntiles; t++) {
        int s = t & 1;
        if (t + 1 < ntiles)
            load_tile(s ^ 1, (t + 1) * KT);
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            float4 a_lo = *(const float4 *)&As[s][kk][wr + lr];
            float4 a_hi = *(const float4 *)&As[s][kk][wr + WM / 2 + lr];
            float4 b_lo = *(const float4 *)&Bs[s][kk][wc + lc];
            float4 b_hi = *(const float4 *)&Bs[s][kk][wc + WN / 2 + lc];
            float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = bm + wr + (i < 4 ? lr + i : WM / 2 + lr + (i - 4));
        store4(C, m, n, row, bn + wc + lc, c_vec, &acc[i][0]);
        store4(C, m, n, row, bn + wc + WN / 2 + lc, c_vec, &acc[i][4]);
    }
}


// ---------------- v5b: A and B both by 16-byte cp.async, A not transposed, STAGES-deep ----
// warp tile 32 x 64 (warps 4 x 2); lane (lq = lane / 8, ln = lane % 8): rows wr + lq + 4 i
// (i < 8, interleaved so one LDS.128 reads 4 consecutive rows: no bank conflict), columns
// wc + ln * 4 + {0..3} and wc + 32 + ln * 4 + {0..3}.
template <int KT, int STAGES, int MINB>
__global__ void __launch_bounds__(256, MINB)
v5b_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int m, int n, int k)
{
    constexpr int AP = KT + 4;
    __shared__ __align__(16) float As[STAGES][BM][AP];
    __shared__ __align__(16) float Bs[STAGES][KT][BN];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wr = (warp / 2) * 32, wc = (warp % 2) * 64;
    int lq = lane / 8, ln = (lane % 8) * 4;
    int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    int ntiles = (k + KT - 1) / KT;
    constexpr int AQ = KT / 4, ARS = 256 / AQ;           // float4s per A row; rows per pass
    constexpr int BQ = BN / 4, BRS = 256 / BQ;
    int ac = (tid % AQ) * 4, ar0 = tid / AQ;
    int bc = (tid % BQ) * 4, br0 = tid / BQ;
    bool a_rows_in = a_vec && bm + BM <= m, b_cols_in = b_vec && bn + BN <= n;
    auto load_tile = [&](int stage, int k0) {
        if (a_rows_in && k0 + KT <= k) {
            const float *src = A + (size_t)(bm + ar0) * k + k0 + ac;
#pragma unroll
            for (int i = 0; i < BM / ARS; i++)
                __pipeline_memcpy_async(&As[stage][ar0 + i * ARS][ac], src + (size_t)i * ARS * k, 16, 0);
        } else {
#pragma unroll
            for (int i = 0; i < BM / ARS; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int gr = bm + ar0 + i * ARS, gc = k0 + ac + j;
                    bool in = gr < m && gc < k;
                    __pipeline_memcpy_async(&As[stage][ar0 + i * ARS][ac + j], in ? &A[(size_t)gr * k + gc] : A, 4, in ? 0 : 4);
                }
        }
        if (b_cols_in && k0 + KT <= k) {
            const float *src = B + (size_t)(k0 + br0) * n + bn + bc;
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
                __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc], src + (size_t)i * BRS * n, 16, 0);
        } else {
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int gr = k0 + br0 + i * BRS, gc = bn + bc + j;
                    bool in = gr < k && gc < n;
                    __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc + j], in ? &B[(size_t)gr * n + gc] : B, 4, in ? 0 : 4);
                }
        }
    };
    float acc[8][8] = {};
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ntiles) load_tile(s, s * KT);
        __pipeline_commit();
    }
    for (int t = 0; t < ntiles; t++) {
        int s = t % STAGES;
        __pipeline_wait_prior(STAGES - 2);
        __syncthreads();   // tile t visible to all; everyone done with tile t - 1's stage
        if (t + STAGES - 1 < ntiles) load_tile((t + STAGES - 1) % STAGES, (t + STAGES - 1) * KT);
        __pipeline_commit();
#pragma unroll
        for (int kq = 0; kq < KT; kq += 4) {
            float4 a4[8];
#pragma unroll
            for (int i = 0; i < 8; i++) a4[i] = *(const float4 *)&As[s][wr + lq + 4 * i][kq];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float4 b_lo = *(const float4 *)&Bs[s][kq + q][wc + ln];
                float4 b_hi = *(const float4 *)&Bs[s][kq + q][wc + 32 + ln];
                float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    float a = q == 0 ? a4[i].x : q == 1 ? a4[i].y : q == 2 ? a4[i].z : a4[i].w;
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] += a * b[j];
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = bm + wr + lq + 4 * i;
        store4(C, m, n, row, bn + wc + ln, c_vec, &acc[i][0]);
        store4(C, m, n, row, bn + wc + 32 + ln, c_vec, &acc[i][4]);
    }
}

// ---------------- v5a: A through registers (transposed), B by cp.async, double buffer ----
template <int KT, int MINB>
__global__ void __launch_bounds__(256, MINB)
v5a_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int m, int n, int k)
{
    __shared__ __align__(16) float As[2][KT][BM];
    __shared__ __align__(16) float Bs[2][KT][BN];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wr = (warp / 2) * 32, wc = (warp % 2) * 64;
    int lr = (lane / 8) * 4, lc = (lane % 8) * 4;
    int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    int ntiles = (k + KT - 1) / KT;
    constexpr int AQ = KT / 4, ARS = 256 / AQ, NA = BM / ARS;
    constexpr int BQ = BN / 4, BRS = 256 / BQ;
    int ac = (tid % AQ) * 4, ar0 = tid / AQ;
    int bc = (tid % BQ) * 4, br0 = tid / BQ;
    bool b_cols_in = b_vec && bn + BN <= n;
    float4 a_next[NA];
    auto load_a = [&](int k0) {
#pragma unroll
        for (int i = 0; i < NA; i++) a_next[i] = load4(A, m, k, bm + ar0 + i * ARS, k0 + ac, a_vec);
    };
    auto store_a = [&](int stage) {
#pragma unroll
        for (int i = 0; i < NA; i++) {
            As[stage][ac + 0][ar0 + i * ARS] = a_next[i].x; As[stage][ac + 1][ar0 + i * ARS] = a_next[i].y;
            As[stage][ac + 2][ar0 + i * ARS] = a_next[i].z; As[stage][ac + 3][ar0 + i * ARS] = a_next[i].w;
        }
    };
    auto load_b = [&](int stage, int k0) {
        if (b_cols_in && k0 + KT <= k) {
            const float *src = B + (size_t)(k0 + br0) * n + bn + bc;
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
                __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc], src + (size_t)i * BRS * n, 16, 0);
        } else {
#pragma unroll
            for (int i = 0; i < KT / BRS; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int gr = k0 + br0 + i * BRS, gc = bn + bc + j;
                    bool in = gr < k && gc < n;
                    __pipeline_memcpy_async(&Bs[stage][br0 + i * BRS][bc + j], in ? &B[(size_t)gr * n + gc] : B, 4, in ? 0 : 4);
                }
        }
        __pipeline_commit();
    };
    float acc[8][8] = {};
    load_a(0);
    load_b(0, 0);
    store_a(0);
    for (int t = 0; t < ntiles; t++) {
        int s = t & 1;
        __pipeline_wait_prior(0);
        __syncthreads();
        if (t + 1 < ntiles) { load_a((t + 1) * KT); load_b(s ^ 1, (t + 1) * KT); }
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            float4 a_lo = *(const float4 *)&As[s][kk][wr + lr];
            float4 a_hi = *(const float4 *)&As[s][kk][wr + 16 + lr];
            float4 b_lo = *(const float4 *)&Bs[s][kk][wc + lc];
            float4 b_hi = *(const float4 *)&Bs[s][kk][wc + 32 + lc];
            float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
        }
        if (t + 1 < ntiles) store_a(s ^ 1);   // the other stage: nobody reads it until the barrier above
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = bm + wr + (i < 4 ? lr + i : 16 + lr + (i - 4));
        store4(C, m, n, row, bn + wc + lc, c_vec, &acc[i][0]);
        store4(C, m, n, row, bn + wc + 32 + lc, c_vec, &acc[i][4]);
    }
}


// v3t: v3 with KT and tile width as parameters; WIDE = 2: block tile 128 x 256, thread 8 x 16
template <int KT, int WIDE, int MINB>
__global__ void __launch_bounds__(256, MINB)
v3t_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C, int m, int n, int k)
{
    constexpr int TBN = BN * WIDE, TN = 8 * WIDE;
    __shared__ __align__(16) float As[KT][BM];
    __shared__ __align__(16) float Bs[KT][TBN];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int bm = blockIdx.y * BM, bn = blockIdx.x * TBN;
    constexpr int AQ = KT / 4, ARS = 256 / AQ, NA = BM / ARS;
    constexpr int BQ = TBN / 4, BRS = 256 / BQ, NB = KT / BRS;
    int a_col = (tid % AQ) * 4, a_row = tid / AQ;
    int b_col = (tid % BQ) * 4, b_row = tid / BQ;
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    float acc[8][TN] = {};
    float4 a_next[NA], b_next[NB];
#pragma unroll
    for (int i = 0; i < NA; i++) a_next[i] = load4(A, m, k, bm + a_row + i * ARS, a_col, a_vec);
#pragma unroll
    for (int i = 0; i < NB; i++) b_next[i] = load4(B, k, n, b_row + i * BRS, bn + b_col, b_vec);
    for (int k0 = 0; k0 < k; k0 += KT) {
#pragma unroll
        for (int i = 0; i < NA; i++) {
            As[a_col + 0][a_row + i * ARS] = a_next[i].x; As[a_col + 1][a_row + i * ARS] = a_next[i].y;
            As[a_col + 2][a_row + i * ARS] = a_next[i].z; As[a_col + 3][a_row + i * ARS] = a_next[i].w;
        }
#pragma unroll
        for (int i = 0; i < NB; i++) *(float4 *)&Bs[b_row + i * BRS][b_col] = b_next[i];
        __syncthreads();
        if (k0 + KT < k) {
#pragma unroll
            for (int i = 0; i < NA; i++) a_next[i] = load4(A, m, k, bm + a_row + i * ARS, k0 + KT + a_col, a_vec);
#pragma unroll
            for (int i = 0; i < NB; i++) b_next[i] = load4(B, k, n, k0 + KT + b_row + i * BRS, bn + b_col, b_vec);
        }
#pragma unroll
        for (int kk = 0; kk < KT; kk++) {
            float4 a_lo = *(const float4 *)&As[kk][ty * 4];
            float4 a_hi = *(const float4 *)&As[kk][64 + ty * 4];
            float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b[TN];
#pragma unroll
            for (int q = 0; q < 2 * WIDE; q++) {
                float4 bq = *(const float4 *)&Bs[kk][q * 64 + tx * 4];
                b[q * 4 + 0] = bq.x; b[q * 4 + 1] = bq.y; b[q * 4 + 2] = bq.z; b[q * 4 + 3] = bq.w;
            }
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
#pragma unroll
        for (int q = 0; q < 2 * WIDE; q++) store4(C, m, n, row, bn + q * 64 + tx * 4, c_vec, &acc[i][q * 4]);
    }
}

// ---------------- timing (median_ms, maxdiff: experiment.h) ----------------
template <class K>
void run_k(const char *name, K kern, const float *A, const float *B, float *C, const float *Cref, int M, int N, int K_, double cublas_ms, int reps, int bn = BN)
{
    dim3 grid((N + bn - 1) / bn, (M + BM - 1) / BM);
    CK(cudaMemset(C, 0, (size_t)M * N * 4));
    auto f = [&] { kern<<<grid, 256>>>(A, B, C, M, N, K_); };
    float ms = median_ms(f, reps);
    double tf = 2.0 * M * N * K_ / (ms * 1e-3) / 1e12;
    printf("%-28s %8.3f ms %6.2f TFLOP/s  %.3f of cuBLAS  maxdiff %.3g\n", name, ms, tf, cublas_ms / ms, maxdiff(C, Cref, (size_t)M * N));
}
template <int KT, int MINB, int WR>
void run_v5(const char *name, const float *A, const float *B, float *C, const float *Cref, int M, int N, int K, double cublas_ms, int reps)
{
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    CK(cudaMemset(C, 0, (size_t)M * N * 4));
    auto f = [&] { v5_kernel<KT, MINB, WR><<<grid, 256>>>(A, B, C, M, N, K); };
    float ms = median_ms(f, reps);
    double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
    printf("%-28s %dx%dx%d %8.3f ms %6.2f TFLOP/s  %.3f of cuBLAS  maxdiff %.3g\n", name, M, N, K, ms, tf, cublas_ms / ms, maxdiff(C, Cref, (size_t)M * N));
}

int main()
{
    cublasHandle_t h; cublasCreate(&h); cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
    int reps = 20;
    for (int S : {4096}) {
        int M = S, N = S + (S == 1000 ? 3 : 0), K = S + (S == 1000 ? 5 : 0);
        float *A, *B, *C, *Cref;
        CK(cudaMalloc(&A, (size_t)M * K * 4)); CK(cudaMalloc(&B, (size_t)K * N * 4));
        CK(cudaMalloc(&C, (size_t)M * N * 4)); CK(cudaMalloc(&Cref, (size_t)M * N * 4));
        std::vector<float> ha((size_t)M * K), hb((size_t)K * N);
        srand(1);
        for (auto &v : ha) v = (rand() % 17 - 8) / 8.0f;
        for (auto &v : hb) v = (rand() % 17 - 8) / 8.0f;
        CK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
        const float one = 1, zero = 0;
        auto cub = [&] { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, Cref, N); };
        float cms = median_ms(cub, reps);
        printf("cuBLAS %dx%dx%d %8.3f ms %6.2f TFLOP/s\n", M, N, K, cms, 2.0 * M * N * K / (cms * 1e-3) / 1e12);
        dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
        CK(cudaMemset(C, 0, (size_t)M * N * 4));
        float v3ms = median_ms([&] { matmul_regtile_kernel<<<grid, 256>>>(A, B, C, M, N, K); }, reps);
        printf("%-28s %8.3f ms %6.2f TFLOP/s  %.3f of cuBLAS  maxdiff %.3g\n", "v3", v3ms, 2.0 * M * N * K / (v3ms * 1e-3) / 1e12, cms / v3ms, maxdiff(C, Cref, (size_t)M * N));
        run_v5<16, 2, 4>("v5 bk16 minb2 wr4", A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5a bk8 minb2", v5a_kernel<8, 2>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5a bk16 minb2", v5a_kernel<16, 2>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5a bk16 minb1", v5a_kernel<16, 1>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5b bk8 st2 minb2", v5b_kernel<8, 2, 2>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5b bk8 st3 minb2", v5b_kernel<8, 3, 2>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v5b bk16 st2 minb1", v5b_kernel<16, 2, 1>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v3t bk16 w1 minb2", v3t_kernel<16, 1, 2>, A, B, C, Cref, M, N, K, cms, reps);
        run_k("v3t bk8 w2 minb1", v3t_kernel<8, 2, 1>, A, B, C, Cref, M, N, K, cms, reps, 256);
        // v3 again, for drift
        float v3b = median_ms([&] { matmul_regtile_kernel<<<grid, 256>>>(A, B, C, M, N, K); }, reps);
        float cms2 = median_ms(cub, reps);
        printf("v3 again %.3f of cuBLAS (cuBLAS again %.3f ms)\n", cms2 / v3b, cms2);
        cudaFree(A); cudaFree(B); cudaFree(C); cudaFree(Cref);
    }
    return 0;
}
