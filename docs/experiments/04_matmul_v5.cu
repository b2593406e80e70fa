// SPDX-License-Identifier: MIT
/*
 * Chapter 04 experiment, second round: which of warp tiles, a double-buffered shared tile
 * (one barrier per k step), a deeper k step, a larger thread patch and an asynchronous copy of
 * B's tile (cp.async) close the gap between version 3 and cuBLAS? One kernel template, several
 * shapes, each timed right after cuBLAS in the same process.
 *
 * Measured on an H200 on 2026-12-01 in four runs (docs/experiments/04_matmul_v5.log, recorded
 * as "2026-12-01 ch04 v5 sweep" in docs/figures/h200.json): none reached 0.95 of cuBLAS; the
 * best, a 128 x 256 block with 8 x 16 per thread and unchecked loads inside the matrix, 0.924,
 * then 0.906 and 0.909 (version 3: 0.892, 0.887, 0.891). gemm_kernel (two shared buffers) is
 * the first run's; gemm1_kernel (one buffer, two barriers, as in version 3) the later runs';
 * main() holds the fourth run's list. `matmul_v5 profile` launches cuBLAS, version 3, two
 * template shapes and the best variant once each for a profiler (the Nsight Compute figures in
 * the README, docs/experiments/04_matmul_v5.ncu.csv). See the chapter's README.
 *
 *   nvcc -O3 -arch=sm_90 -std=c++17 -Icommon -o build/matmul_v5 \
 *        docs/experiments/04_matmul_v5.cu common/tut_check.cu -lcublas && build/matmul_v5
 *
 * Version 3 (matmul_regtile_kernel) and its load4/store4 come from the lesson itself.
 */
#include "../../solutions/04_shared_memory/shared_memory.cu"
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cublas_v2.h>
#include <cuda_pipeline_primitives.h>

#include "experiment.h"

/* A block of (TBM/TM) x (TBN/TN) threads computes a TBM x TBN tile of C, TBK along k per step.
   A warp computes a (LR*TM) x (LC*TN) piece; its lanes form an LR x LC grid of 4x4 patches,
   repeated (TM/4) x (TN/4) times, so every fragment read is a float4 that 4 or 8 lanes share.
   Shared tiles are double-buffered: the next step's tile is written while this one is read,
   so one barrier per step suffices. ASYNC: B's tile goes global -> shared by cp.async. */
template <int TBM, int TBN, int TBK, int TM, int TN, int LR, int MINB, int ASYNC>
__global__ void __launch_bounds__((TBM / TM) * (TBN / TN), MINB)
gemm_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
            int m, int n, int k)
{
    constexpr int T = (TBM / TM) * (TBN / TN);
    constexpr int LC = 32 / LR, WM = LR * TM, WN = LC * TN, WARPS_N = TBN / WN;
    static_assert((TBM / WM) * (TBN / WN) * 32 == T, "warp grid must cover the block tile");
    constexpr int AP = TBM + 4;   // A^T's pitch: the transposing stores of one warp spread over banks
    constexpr int AF = TBM * TBK / 4 / T, BF = TBK * TBN / 4 / T;
    static_assert(AF * T * 4 == TBM * TBK && BF * T * 4 == TBK * TBN, "whole float4s per thread");
    __shared__ __align__(16) float As[2][TBK][AP];
    __shared__ __align__(16) float Bs[2][TBK][TBN];

    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    int lr = lane / LC, lc = lane % LC;
    int bm = blockIdx.y * TBM, bn = blockIdx.x * TBN;
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    int ntiles = (k + TBK - 1) / TBK;

    float4 ra[AF], rb[BF];
    auto load_a = [&](int k0) {
#pragma unroll
        for (int j = 0; j < AF; j++) {
            int f = tid + j * T, r = f / (TBK / 4), c = (f % (TBK / 4)) * 4;
            ra[j] = load4(A, m, k, bm + r, k0 + c, a_vec);
        }
    };
    auto store_a = [&](int buf) {
#pragma unroll
        for (int j = 0; j < AF; j++) {
            int f = tid + j * T, r = f / (TBK / 4), c = (f % (TBK / 4)) * 4;
            As[buf][c + 0][r] = ra[j].x;
            As[buf][c + 1][r] = ra[j].y;
            As[buf][c + 2][r] = ra[j].z;
            As[buf][c + 3][r] = ra[j].w;
        }
    };
    auto load_b = [&](int k0) {
#pragma unroll
        for (int j = 0; j < BF; j++) {
            int f = tid + j * T, r = f / (TBN / 4), c = (f % (TBN / 4)) * 4;
            rb[j] = load4(B, k, n, k0 + r, bn + c, b_vec);
        }
    };
    auto store_b = [&](int buf) {
#pragma unroll
        for (int j = 0; j < BF; j++) {
            int f = tid + j * T, r = f / (TBN / 4), c = (f % (TBN / 4)) * 4;
            *(float4 *)&Bs[buf][r][c] = rb[j];
        }
    };
    /* cp.async where the float4 is whole and inside B; a plain load and store elsewhere (the
       buffer written is not the one being read, so either is safe before the barrier). */
    auto async_b = [&](int buf, int k0) {
#pragma unroll
        for (int j = 0; j < BF; j++) {
            int f = tid + j * T, r = f / (TBN / 4), c = (f % (TBN / 4)) * 4;
            int gr = k0 + r, gc = bn + c;
            if (b_vec && gr < k && gc + 4 <= n)
                __pipeline_memcpy_async(&Bs[buf][r][c], B + (size_t)gr * n + gc, 16);
            else
                *(float4 *)&Bs[buf][r][c] = load4(B, k, n, gr, gc, b_vec);
        }
        __pipeline_commit();
    };

    float acc[TM][TN] = {};
    load_a(0);
    if (ASYNC) async_b(0, 0); else load_b(0);
    store_a(0);
    if (ASYNC) __pipeline_wait_prior(0); else store_b(0);
    __syncthreads();
    for (int t = 0; t < ntiles; t++) {
        int cur = t & 1;
        bool more = t + 1 < ntiles;
        if (more) {
            load_a((t + 1) * TBK);
            if (ASYNC) async_b(cur ^ 1, (t + 1) * TBK); else load_b((t + 1) * TBK);
        }
#pragma unroll
        for (int kk = 0; kk < TBK; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int p = 0; p < TM / 4; p++) {
                float4 v = *(const float4 *)&As[cur][kk][wm0 + p * LR * 4 + lr * 4];
                a[p * 4 + 0] = v.x; a[p * 4 + 1] = v.y; a[p * 4 + 2] = v.z; a[p * 4 + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; q++) {
                float4 v = *(const float4 *)&Bs[cur][kk][wn0 + q * LC * 4 + lc * 4];
                b[q * 4 + 0] = v.x; b[q * 4 + 1] = v.y; b[q * 4 + 2] = v.z; b[q * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += a[i] * b[j];
        }
        if (more) {
            store_a(cur ^ 1);
            if (ASYNC) __pipeline_wait_prior(0); else store_b(cur ^ 1);
        }
        __syncthreads();
    }
#pragma unroll
    for (int p = 0; p < TM / 4; p++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int row = bm + wm0 + p * LR * 4 + lr * 4 + i;
#pragma unroll
            for (int q = 0; q < TN / 4; q++)
                store4(C, m, n, row, bn + wn0 + q * LC * 4 + lc * 4, c_vec, &acc[p * 4 + i][q * 4]);
        }
}


/* The same shapes with version 3's structure: one shared buffer, two barriers per step (the
   first round measured the double buffer slower). FAST: when the block's tiles lie wholly inside
   A and B (and rows are 16-byte aligned), walk two pointers with unguarded float4 loads instead
   of load4's bounds checks. SWZ: blocks run in groups of 8 block-rows, so that neighbours in
   launch order share B's column panels in L2. */
template <int TBM, int TBN, int TBK, int TM, int TN, int LR, int MINB, bool FAST, bool SWZ,
          int SPREAD = 0, int APAD = 4, int UNR = 1>
__global__ void __launch_bounds__((TBM / TM) * (TBN / TN), MINB)
gemm1_kernel(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
             int m, int n, int k)
{
    constexpr int T = (TBM / TM) * (TBN / TN);
    constexpr int LC = 32 / LR, WM = LR * TM, WN = LC * TN, WARPS_N = TBN / WN;
    static_assert((TBM / WM) * (TBN / WN) * 32 == T, "warp grid must cover the block tile");
    constexpr int AF = TBM * TBK / 4 / T, BF = TBK * TBN / 4 / T;
    static_assert(AF * T * 4 == TBM * TBK && BF * T * 4 == TBK * TBN, "whole float4s per thread");
    __shared__ __align__(16) float As[TBK][TBM + APAD];
    __shared__ __align__(16) float Bs[TBK][TBN];

    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
    int lr = lane / LC, lc = lane % LC;
    /* SPREAD: a thread's 4x4 patches lie TBM/(TM/4) rows and TBN/(TN/4) columns apart across the
       whole block (version 3's layout), not LR*4 / LC*4 apart inside its warp's piece. */
    constexpr int PR = SPREAD ? TBM / (TM / 4) : LR * 4, PC = SPREAD ? TBN / (TN / 4) : LC * 4;
    int r0 = SPREAD ? wm0 / (TM / 4) + lr * 4 : wm0 + lr * 4;
    int c0 = SPREAD ? wn0 / (TN / 4) + lc * 4 : wn0 + lc * 4;
    int bx = blockIdx.x, by = blockIdx.y;
    if (SWZ) {
        int bid = by * gridDim.x + bx, per = 8 * gridDim.x, g = bid / per;
        int rows = min(8, (int)gridDim.y - g * 8);
        by = g * 8 + (bid % per) % rows;
        bx = (bid % per) / rows;
    }
    int bm = by * TBM, bn = bx * TBN;
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    bool inside = FAST && a_vec && b_vec && bm + TBM <= m && bn + TBN <= n && k % TBK == 0;

    float4 ra[AF], rb[BF];
    const float *pa[AF], *pb[BF];
#pragma unroll
    for (int j = 0; j < AF; j++) {
        int f = tid + j * T;
        pa[j] = A + (size_t)(bm + f / (TBK / 4)) * k + (f % (TBK / 4)) * 4;
    }
#pragma unroll
    for (int j = 0; j < BF; j++) {
        int f = tid + j * T;
        pb[j] = B + (size_t)(f / (TBN / 4)) * n + bn + (f % (TBN / 4)) * 4;
    }
    auto load = [&](int k0) {
        if (inside) {
#pragma unroll
            for (int j = 0; j < AF; j++) ra[j] = *(const float4 *)(pa[j] + k0);
#pragma unroll
            for (int j = 0; j < BF; j++) rb[j] = *(const float4 *)(pb[j] + (size_t)k0 * n);
            return;
        }
#pragma unroll
        for (int j = 0; j < AF; j++) {
            int f = tid + j * T;
            ra[j] = load4(A, m, k, bm + f / (TBK / 4), k0 + (f % (TBK / 4)) * 4, a_vec);
        }
#pragma unroll
        for (int j = 0; j < BF; j++) {
            int f = tid + j * T;
            rb[j] = load4(B, k, n, k0 + f / (TBN / 4), bn + (f % (TBN / 4)) * 4, b_vec);
        }
    };

    float acc[TM][TN] = {};
    load(0);
#pragma unroll UNR
    for (int k0 = 0; k0 < k; k0 += TBK) {
#pragma unroll
        for (int j = 0; j < AF; j++) {
            int f = tid + j * T, r = f / (TBK / 4), c = (f % (TBK / 4)) * 4;
            As[c + 0][r] = ra[j].x; As[c + 1][r] = ra[j].y;
            As[c + 2][r] = ra[j].z; As[c + 3][r] = ra[j].w;
        }
#pragma unroll
        for (int j = 0; j < BF; j++) {
            int f = tid + j * T;
            *(float4 *)&Bs[f / (TBN / 4)][(f % (TBN / 4)) * 4] = rb[j];
        }
        __syncthreads();
        if (k0 + TBK < k)
            load(k0 + TBK);
#pragma unroll
        for (int kk = 0; kk < TBK; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int p = 0; p < TM / 4; p++) {
                float4 v = *(const float4 *)&As[kk][r0 + p * PR];
                a[p * 4 + 0] = v.x; a[p * 4 + 1] = v.y; a[p * 4 + 2] = v.z; a[p * 4 + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; q++) {
                float4 v = *(const float4 *)&Bs[kk][c0 + q * PC];
                b[q * 4 + 0] = v.x; b[q * 4 + 1] = v.y; b[q * 4 + 2] = v.z; b[q * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int p = 0; p < TM / 4; p++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int row = bm + r0 + p * PR + i;
#pragma unroll
            for (int q = 0; q < TN / 4; q++)
                store4(C, m, n, row, bn + c0 + q * PC, c_vec, &acc[p * 4 + i][q * 4]);
        }
}

// ---------------- timing (median_ms, maxdiff: experiment.h) ----------------
struct Problem {
    int M, N, K;
    float *A, *B, *C, *Cref;
    cublasHandle_t h;
    void cublas() const
    {
        const float one = 1, zero = 0;   // row-major C = A B is column-major C^T = B^T A^T
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, Cref, N);
    }
};

/* The variant's time against cuBLAS timed just before it (clocks drift as the card warms), the
   median of three such pairs, and its largest difference from cuBLAS (0 expected: the inputs
   are multiples of 1/8 and every partial sum is exact in FP32). */
template <class Launch>
void measure(const char *name, const void *fn, const Problem &p, Launch launch, int reps)
{
    cudaFuncAttributes at; CK(cudaFuncGetAttributes(&at, fn));
    std::vector<double> ratio, tms;
    for (int r = 0; r < 3; r++) {
        float cms = median_ms([&] { p.cublas(); }, reps);
        CK(cudaMemset(p.C, 0xff, (size_t)p.M * p.N * 4));
        float ms = median_ms(launch, reps);
        ratio.push_back(cms / ms); tms.push_back(ms);
    }
    std::sort(ratio.begin(), ratio.end()); std::sort(tms.begin(), tms.end());
    double tf = 2.0 * p.M * p.N * p.K / (tms[1] * 1e-3) / 1e12;
    printf("%-34s %5dx%-5dx%-5d %8.3f ms %6.2f TFLOP/s  %.3f of cuBLAS (%.3f-%.3f)  regs %3d spill %3zu  maxdiff %.3g\n",
           name, p.M, p.N, p.K, tms[1], tf, ratio[1], ratio[0], ratio[2], at.numRegs,
           (size_t)at.localSizeBytes, maxdiff(p.C, p.Cref, (size_t)p.M * p.N));
    fflush(stdout);
}

template <int TBM, int TBN, int TBK, int TM, int TN, int LR, int MINB, int ASYNC>
void run(const Problem &p, int reps)
{
    auto kern = gemm_kernel<TBM, TBN, TBK, TM, TN, LR, MINB, ASYNC>;
    dim3 grid((p.N + TBN - 1) / TBN, (p.M + TBM - 1) / TBM);
    constexpr int T = (TBM / TM) * (TBN / TN);
    char name[96];
    snprintf(name, sizeof name, "%dx%dx%d t%dx%d w%dx%d b%d%s", TBM, TBN, TBK, TM, TN, LR * TM,
             (32 / LR) * TN, MINB, ASYNC ? " cp.async" : "");
    measure(name, (const void *)kern, p, [&] { kern<<<grid, T>>>(p.A, p.B, p.C, p.M, p.N, p.K); }, reps);
}


template <int TBM, int TBN, int TBK, int TM, int TN, int LR, int MINB, bool FAST, bool SWZ,
          int SPREAD = 0, int APAD = 4, int UNR = 1>
void run1(const Problem &p, int reps)
{
    auto kern = gemm1_kernel<TBM, TBN, TBK, TM, TN, LR, MINB, FAST, SWZ, SPREAD, APAD, UNR>;
    dim3 grid((p.N + TBN - 1) / TBN, (p.M + TBM - 1) / TBM);
    constexpr int T = (TBM / TM) * (TBN / TN);
    char name[96];
    snprintf(name, sizeof name, "1buf %dx%dx%d t%dx%d w%dx%d b%d%s%s%s pad%d%s", TBM, TBN, TBK,
             TM, TN, LR * TM, (32 / LR) * TN, MINB, FAST ? " fast" : "", SWZ ? " swz" : "",
             SPREAD ? " spread" : "", APAD, UNR > 1 ? " unroll2" : "");
    measure(name, (const void *)kern, p, [&] { kern<<<grid, T>>>(p.A, p.B, p.C, p.M, p.N, p.K); }, reps);
}

/* `matmul_v5 profile`: each kernel of interest once at 4096, untimed, for a profiler. */
static void profile(cublasHandle_t h)
{
    Problem p{4096, 4096, 4096};
    p.h = h;
    CK(cudaMalloc(&p.A, (size_t)p.M * p.K * 4)); CK(cudaMalloc(&p.B, (size_t)p.K * p.N * 4));
    CK(cudaMalloc(&p.C, (size_t)p.M * p.N * 4)); CK(cudaMalloc(&p.Cref, (size_t)p.M * p.N * 4));
    CK(cudaMemset(p.A, 0, (size_t)p.M * p.K * 4)); CK(cudaMemset(p.B, 0, (size_t)p.K * p.N * 4));
    dim3 g128((p.N + 127) / 128, (p.M + 127) / 128), g256((p.N + 255) / 256, (p.M + 127) / 128);
    p.cublas();
    matmul_regtile_kernel<<<g128, REG_THREADS>>>(p.A, p.B, p.C, p.M, p.N, p.K);
    gemm1_kernel<128, 128, 8, 8, 8, 2, 2, false, false, 0, 4><<<g128, 256>>>(p.A, p.B, p.C, p.M, p.N, p.K);
    gemm_kernel<128, 128, 8, 8, 8, 2, 2, 0><<<g128, 256>>>(p.A, p.B, p.C, p.M, p.N, p.K);
    gemm1_kernel<128, 256, 8, 8, 16, 2, 1, true, false><<<g256, 256>>>(p.A, p.B, p.C, p.M, p.N, p.K);
    CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
    int reps = 15;
    cublasHandle_t h; cublasCreate(&h); cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
    if (argc > 1 && !strcmp(argv[1], "profile")) {
        profile(h);
        return 0;
    }
    for (int S : {1000, 4096}) {
        Problem p{S, S + (S == 1000 ? 3 : 0), S + (S == 1000 ? 5 : 0)};
        p.h = h;
        CK(cudaMalloc(&p.A, (size_t)p.M * p.K * 4)); CK(cudaMalloc(&p.B, (size_t)p.K * p.N * 4));
        CK(cudaMalloc(&p.C, (size_t)p.M * p.N * 4)); CK(cudaMalloc(&p.Cref, (size_t)p.M * p.N * 4));
        std::vector<float> ha((size_t)p.M * p.K), hb((size_t)p.K * p.N);
        srand(1);
        for (auto &v : ha) v = (rand() % 17 - 8) / 8.0f;
        for (auto &v : hb) v = (rand() % 17 - 8) / 8.0f;
        CK(cudaMemcpy(p.A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(p.B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
        int r = S == 4096 ? reps : 3;
        dim3 g3((p.N + BN - 1) / BN, (p.M + BM - 1) / BM);
        measure("v3 (the lesson's)", (const void *)matmul_regtile_kernel, p,
                [&] { matmul_regtile_kernel<<<g3, REG_THREADS>>>(p.A, p.B, p.C, p.M, p.N, p.K); }, r);
        run1<128, 256, 8, 8, 16, 2, 1, true, false>(p, r);         // round 2's best
        run1<128, 256, 8, 8, 16, 2, 1, true, false, 0, 4, 2>(p, r);
        run1<128, 128, 8, 8, 8, 8, 2, true, false, 1, 4>(p, r);     // round 3's best
        run1<128, 128, 8, 8, 16, 4, 2, true, false>(p, r);          // 128 threads, 8x16 each
        run1<128, 128, 8, 8, 16, 8, 2, true, false>(p, r);
        run1<128, 128, 8, 8, 16, 4, 2, true, false, 1, 4>(p, r);
        run1<128, 128, 8, 8, 16, 8, 2, true, false, 1, 4>(p, r);
        run1<128, 128, 8, 16, 8, 4, 2, true, false>(p, r);
        run1<128, 128, 8, 16, 8, 2, 2, true, false, 1, 4>(p, r);
        run1<64, 256, 8, 8, 16, 2, 2, true, false>(p, r);
        run1<128, 128, 16, 8, 16, 4, 2, true, false>(p, r);
        cudaFree(p.A); cudaFree(p.B); cudaFree(p.C); cudaFree(p.Cref);
    }
    return 0;
}
