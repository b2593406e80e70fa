// SPDX-License-Identifier: MIT
/*
 * 04 shared_memory: per-block scratch memory on the SM, __syncthreads, and a matrix multiply
 * taken from 10% to almost 90% of cuBLAS by reusing what each block loads.
 *
 * Shared memory belongs to ONE block: every block gets its own copy, on the SM that runs it, for
 * as long as the block lives (one of the seed articles says it is shared by all blocks: it is
 * not; blocks exchange data through global memory, Hopper's thread-block clusters aside).
 * Threads of the block fill it, wait at __syncthreads(), then read what the others wrote: tens
 * of cycles away instead of the hundreds a trip to global memory takes.
 *
 * Build: make                 Run: make run CH=04 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 04.1, 04.2 here; 04.3 .. 04.5 in reduce_transpose.cu
 * Matrices are row-major float32, device pointers owned by Python (tut.DeviceBuffer); every
 * index fits an int (driver.py refuses larger matrices). C = A * B: A is m x k, B is k x n.
 * Versions: 1 = naive, 2 = 32x32 shared-memory tiles, 3 = register tiles, 4 = cuBLAS SGEMM.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <cublas_v2.h>
#include <stdint.h>
#include <stdio.h>

// ---- the basics: dynamic shared memory, and what a barrier is for ---------------------------

/* out[base + i] = in[base + len - 1 - i]: each block reverses one chunk of `chunk` floats.
   The chunk lives in DYNAMIC shared memory: its size is not in the kernel but in the launch's
   third argument, <<<grid, block, chunk * sizeof(float)>>>, so one kernel serves any chunk.
   Thread t reads what thread (len - 1 - t) % blockDim.x stored: without the barrier it may read
   before that thread has written. */
__global__ void reverse_chunks_kernel(const float *in, float *out, int n, int chunk,
                                      int use_barrier)
{
    extern __shared__ float buf[];
    int base = blockIdx.x * chunk;
    int len = min(chunk, n - base);
    for (int i = threadIdx.x; i < len; i += blockDim.x)
        buf[i] = in[base + i];
    if (use_barrier)   /* the same value in every thread: a barrier never sits in divergent code */
        __syncthreads();
    for (int i = threadIdx.x; i < len; i += blockDim.x)
        out[base + i] = buf[len - 1 - i];
}

// ---- matrix multiply, version 1: naive ----------------------------------------------------

/* One thread per element of C. Each thread reads a whole row of A and a whole column of B from
   global memory: every element of A is fetched n times and every element of B m times, and the
   L1/L2 caches absorb only part of it. */
__global__ void matmul_naive_kernel(const float *__restrict__ A, const float *__restrict__ B,
                                    float *__restrict__ C, int m, int n, int k)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n)
        return;
    float acc = 0.0f;
    for (int i = 0; i < k; i++)
        /* With 16x16 blocks a warp is two rows of 16 threads: each half-warp reads 16
           neighbouring floats of B (the same 16 for both halves) and one float of A. */
        acc += A[row * k + i] * B[i * n + col];
    C[row * n + col] = acc;
}

// ---- version 2: 32x32 tiles in shared memory ------------------------------------------------

#define TILE 32

/* A block of 32x32 threads computes a 32x32 tile of C. It walks along k one 32-wide step at a
   time: all 1024 threads copy one element of A's tile and one of B's into shared memory, then
   each thread reads 32 of A's and 32 of B's from there. Every global load now serves 32 FMAs
   instead of one. Outside the matrices the tiles hold 0, which adds nothing to the sums, so any
   m, n, k works. */
__global__ void matmul_tiled_kernel(const float *__restrict__ A, const float *__restrict__ B,
                                    float *__restrict__ C, int m, int n, int k)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TILE) {
        // @solution 04.1: copy A[row][k0 + tx] into As[ty][tx] and B[k0 + ty][col] into Bs[ty][tx] (0.0f outside the matrices), then wait for the whole block (~5 lines)
        As[ty][tx] = (row < m && k0 + tx < k) ? A[row * k + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < k && col < n) ? B[(k0 + ty) * n + col] : 0.0f;
        /* Why: the loop below reads 62 elements that other threads stored; none may read
           before every store of the block is done. */
        __syncthreads();
        // @end
        for (int i = 0; i < TILE; i++)
            acc += As[ty][i] * Bs[i][tx];   /* As: broadcast within a warp; Bs: 32 banks */
        // @solution 04.1: the next iteration overwrites As and Bs: wait until every thread has finished reading them (~1 line)
        /* Why: a fast thread would otherwise store the next tile over values a slow thread
           of the block has not read yet. */
        __syncthreads();
        // @end
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}

// ---- version 3: register tiles --------------------------------------------------------------

/* Tiling alone leaves each FMA waiting on two shared-memory loads. Here each thread computes an
   8x8 patch of C, so 8 + 8 values read from shared memory feed 64 FMAs, held in registers.
   A block of 256 threads computes a 128x128 tile of C, stepping 8 along k per tile.
   Thread (ty, tx) = (tid / 16, tid % 16) owns rows ty*4 + {0..3} and 64 + ty*4 + {0..3}, and
   the same pattern of columns: neighbouring threads then read neighbouring float4s of Bs (no
   bank conflict) and write neighbouring float4s of C (coalesced). */
#define BM 128
#define BN 128
#define BK 8
#define REG_THREADS 256

/* Four consecutive floats of row r of a rows x cols matrix, from column c (a multiple of 4):
   one 16-byte load when the row's start is 16-byte aligned and all four are inside, else four
   guarded loads that give 0 outside the matrix. */
__device__ __forceinline__ float4 load4(const float *P, int rows, int cols, int r, int c,
                                        bool vec)
{
    if (vec && r < rows && c < cols)
        return *(const float4 *)&P[r * cols + c];
    float v[4];
    for (int j = 0; j < 4; j++)
        v[j] = (r < rows && c + j < cols) ? P[r * cols + c + j] : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
}

__device__ __forceinline__ void store4(float *P, int rows, int cols, int r, int c, bool vec,
                                       const float *v)
{
    if (r >= rows)
        return;
    if (vec && c < cols) {
        *(float4 *)&P[r * cols + c] = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
    for (int j = 0; j < 4; j++)
        if (c + j < cols)
            P[r * cols + c + j] = v[j];
}

__global__ void __launch_bounds__(REG_THREADS, 2)
matmul_regtile_kernel(const float *__restrict__ A, const float *__restrict__ B,
                      float *__restrict__ C, int m, int n, int k)
{
    /* A's tile is stored transposed (As[kk][row]) so that a thread's 4 rows at one kk are one
       float4. __align__(16): float4 reads need 16-byte aligned addresses. The transposing
       stores conflict two ways (threads 2r and 2r+1 write 512 floats apart: the same bank);
       Nsight Compute counts 17 million such conflicts in a 4096 multiply on the H200, but they
       are 4 stores per 512 FMAs: padding the rows removed them with no measurable gain
       (docs/experiments/04_matmul_v5.cu). */
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    /* Each thread loads one float4 of each tile: A's is 128 rows x 8, B's is 8 rows x 128. */
    int a_row = tid / 2, a_col = (tid % 2) * 4;
    int b_row = tid / 32, b_col = (tid % 32) * 4;
    /* 16-byte loads need every row to start 16-byte aligned: k (or n) a multiple of 4. */
    bool a_vec = k % 4 == 0 && (uintptr_t)A % 16 == 0;
    bool b_vec = n % 4 == 0 && (uintptr_t)B % 16 == 0;
    bool c_vec = n % 4 == 0 && (uintptr_t)C % 16 == 0;
    float acc[8][8] = {};

    float4 a_next = load4(A, m, k, bm + a_row, a_col, a_vec);
    float4 b_next = load4(B, k, n, b_row, bn + b_col, b_vec);
    for (int k0 = 0; k0 < k; k0 += BK) {
        As[a_col + 0][a_row] = a_next.x;
        As[a_col + 1][a_row] = a_next.y;
        As[a_col + 2][a_row] = a_next.z;
        As[a_col + 3][a_row] = a_next.w;
        *(float4 *)&Bs[b_row][b_col] = b_next;
        __syncthreads();
        /* Start the next tile's global loads now: they travel while the FMAs below run. */
        if (k0 + BK < k) {
            a_next = load4(A, m, k, bm + a_row, k0 + BK + a_col, a_vec);
            b_next = load4(B, k, n, k0 + BK + b_row, bn + b_col, b_vec);
        }
        // @solution 04.2: for each kk < BK: read this thread's 8 values of A's column kk (As[kk][ty*4..], As[kk][64+ty*4..]) and 8 of B's row kk (Bs[kk][tx*4..], Bs[kk][64+tx*4..]) into registers, then acc[i][j] += a[i] * b[j] (~14 lines)
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 a_lo = *(const float4 *)&As[kk][ty * 4];
            float4 a_hi = *(const float4 *)&As[kk][64 + ty * 4];
            float4 b_lo = *(const float4 *)&Bs[kk][tx * 4];
            float4 b_hi = *(const float4 *)&Bs[kk][64 + tx * 4];
            /* Why registers: 16 floats from shared memory feed 64 FMAs (version 2: 2 per FMA). */
            float a[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] += a[i] * b[j];
        }
        // @end
        __syncthreads();   /* before the next iteration overwrites As and Bs */
    }
    /* acc[i][0..3] and acc[i][4..7] are two float4s of row i, 64 columns apart. */
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        store4(C, m, n, row, bn + tx * 4, c_vec, &acc[i][0]);
        store4(C, m, n, row, bn + 64 + tx * 4, c_vec, &acc[i][4]);
    }
}

// ---- version 4: cuBLAS, the ceiling ---------------------------------------------------------

/* cuBLAS returns cublasStatus_t, not cudaError_t: record it as cudaErrorUnknown with the
   cuBLAS status name in the expression, so Python still raises CudaError naming this line. */
#define CUBLAS_CHECK(expr)                                                          \
    do {                                                                            \
        cublasStatus_t cublas_st_ = (expr);                                         \
        if (cublas_st_ != CUBLAS_STATUS_SUCCESS) {                                  \
            char cublas_what_[256];                                                 \
            snprintf(cublas_what_, sizeof cublas_what_, "%s returned %s", #expr,    \
                     cublasGetStatusName(cublas_st_));                              \
            status = tut_record((int)cudaErrorUnknown, cublas_what_, __FILE__, __LINE__); \
            goto cleanup;                                                           \
        }                                                                           \
    } while (0)

/* cuBLAS is column-major. A row-major m x n matrix read column-major is its n x m transpose,
   so C = A B (row-major) is C^T = B^T A^T (column-major): pass B first, A second, and swap
   m and n. No data moves; only the operands' roles do. */
static int cublas_matmul(cublasHandle_t handle, const float *d_a, const float *d_b, float *d_c,
                         int m, int n, int k)
{
    int status = 0;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d_b, n, d_a, k,
                             &zero, d_c, n));
cleanup:
    return status;
}

/* One handle for the library's life: cublasCreate allocates device memory and loads kernels,
   far too costly per call. Made by the first user (driver.py's warm-up, before any test measures
   device memory), destroyed by cublas_release (driver.py calls it at exit, so that
   compute-sanitizer's leak check finds nothing left). Its device is the one current when it was
   made: the course uses one device per process.
   PEDANTIC: plain FP32 in every phase, whatever the library's defaults or settings. TF32
   tensor cores (CUBLAS_TF32_TENSOR_OP_MATH, about 8x faster on an H200) keep only 10 mantissa
   bits: a different multiply, not the ceiling for our FP32 kernels. */
static cublasHandle_t the_handle = NULL;

static int cublas_open(cublasHandle_t *handle)
{
    int status = 0;
    cublasHandle_t fresh = NULL;
    *handle = the_handle;
    if (the_handle != NULL)
        return 0;
    CUBLAS_CHECK(cublasCreate(&fresh));
    CUBLAS_CHECK(cublasSetStream(fresh, 0));
    CUBLAS_CHECK(cublasSetMathMode(fresh, CUBLAS_PEDANTIC_MATH));
    *handle = the_handle = fresh;
    fresh = NULL;
cleanup:
    if (fresh != NULL)   /* half made: not kept */
        cublasDestroy(fresh);
    return status;
}

extern "C" int cublas_release(void)
{
    int status = 0;
    if (the_handle != NULL) {
        cublasHandle_t h = the_handle;
        the_handle = NULL;
        CUBLAS_CHECK(cublasDestroy(h));
    }
cleanup:
    return status;
}

// ---- host entry points (called from driver.py) ------------------------------------------

extern "C" int reverse_chunks(const float *d_in, float *d_out, int n, int chunk, int block,
                              int opt_in, int use_barrier)
{
    int status = 0;
    size_t bytes = (size_t)chunk * sizeof(float);
    TUT_REQUIRE(n >= 0 && chunk >= 1);
    /* Above 48 KiB of shared memory per block a kernel must opt in (up to 227 KiB on an
       H200). Set either way, so that each call starts from a known limit. */
    CUDA_CHECK(cudaFuncSetAttribute(reverse_chunks_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    opt_in ? (int)bytes : 48 * 1024));
    if (n == 0)
        return 0;
    reverse_chunks_kernel<<<TUT_DIV_UP(n, chunk), block, bytes>>>(d_in, d_out, n, chunk,
                                                                  use_barrier);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    /* A refused cudaFuncSetAttribute also leaves its error in the runtime's last-error slot,
       where the next launch check would find it again: consume it here. */
    if (status != 0)
        (void)cudaGetLastError();
    return status;
}

/* Shared memory per block: the default limit and the most a kernel may opt in to. */
extern "C" int shared_memory_limits(int *per_block, int *opt_in_max)
{
    int status = 0;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));   /* the device launches go to, not always device 0 */
    CUDA_CHECK(cudaDeviceGetAttribute(per_block, cudaDevAttrMaxSharedMemoryPerBlock, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(opt_in_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
cleanup:
    return status;
}

/* cuBLAS loads its kernels onto the GPU the first time a process uses it, and they stay there
   until the process ends; the handle (cublas_open) lives as long. driver.py calls this once
   before any test measures device memory, so that this one-time cost is not reported as a leak
   of whichever test used cuBLAS first. */
extern "C" int cublas_warm_up(void)
{
    int status = 0;
    float *d_abc = NULL;
    cublasHandle_t handle = NULL;
    CUDA_CHECK(cudaMalloc(&d_abc, 3 * sizeof(float)));
    CUDA_CHECK(cudaMemset(d_abc, 0, 3 * sizeof(float)));
    if ((status = cublas_open(&handle)) != 0)
        goto cleanup;
    if ((status = cublas_matmul(handle, d_abc, d_abc + 1, d_abc + 2, 1, 1, 1)) != 0)
        goto cleanup;
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    cudaFree(d_abc);
    return status;
}

/* Queues one multiply (no synchronisation): the timed loops below reuse it. */
static int launch_matmul(int version, cublasHandle_t handle, const float *d_a, const float *d_b,
                         float *d_c, int m, int n, int k)
{
    int status = 0;
    if (version == 1) {
        dim3 block(16, 16);
        matmul_naive_kernel<<<dim3(TUT_DIV_UP(n, 16), TUT_DIV_UP(m, 16)), block>>>(
            d_a, d_b, d_c, m, n, k);
    } else if (version == 2) {
        matmul_tiled_kernel<<<dim3(TUT_DIV_UP(n, TILE), TUT_DIV_UP(m, TILE)), dim3(TILE, TILE)>>>(
            d_a, d_b, d_c, m, n, k);
    } else if (version == 3) {
        matmul_regtile_kernel<<<dim3(TUT_DIV_UP(n, BN), TUT_DIV_UP(m, BM)), REG_THREADS>>>(
            d_a, d_b, d_c, m, n, k);
    } else {
        status = cublas_matmul(handle, d_a, d_b, d_c, m, n, k);
        goto cleanup;
    }
    CUDA_CHECK_LAUNCH();
cleanup:
    return status;
}

/* C = A B with one version. k = 0 is the empty sum: C is all zeros (cuBLAS is not asked). */
extern "C" int matmul(int version, const float *d_a, const float *d_b, float *d_c,
                      int m, int n, int k)
{
    int status = 0;
    cublasHandle_t handle = NULL;
    TUT_REQUIRE(version >= 1 && version <= 4);
    TUT_REQUIRE(m >= 0 && n >= 0 && k >= 0);
    if (m == 0 || n == 0)
        return 0;
    if (k == 0) {
        CUDA_CHECK(cudaMemset(d_c, 0, (size_t)m * n * sizeof(float)));
        return 0;
    }
    if (version == 4)
        status = cublas_open(&handle);
    if (status == 0)
        status = launch_matmul(version, handle, d_a, d_b, d_c, m, n, k);
    if (status == 0)
        CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* One warm-up, then `reps` multiplies, each between its own pair of events: kernel time only,
   the matrices already on the device. */
extern "C" int bench_matmul(int version, const float *d_a, const float *d_b, float *d_c,
                            int m, int n, int k, int reps, float *times_ms)
{
    int status = 0;
    cublasHandle_t handle = NULL;
    tut_timer t = {0};
    TUT_REQUIRE(version >= 1 && version <= 4 && m > 0 && n > 0 && k > 0);
    if (version == 4 && (status = cublas_open(&handle)) != 0)
        goto cleanup;
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        if ((status = launch_matmul(version, handle, d_a, d_b, d_c, m, n, k)) != 0)
            goto cleanup;
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    return status;
}

/* What a NumPy user waits for: copy A and B from (pageable) host memory, multiply, copy C
   back, all between one pair of events. Device allocation is done once, outside the timing. */
extern "C" int bench_matmul_with_transfers(int version, const float *h_a, const float *h_b,
                                           float *h_c, int m, int n, int k, int reps,
                                           float *times_ms)
{
    int status = 0;
    float *d_a = NULL, *d_b = NULL, *d_c = NULL;
    size_t a_bytes = (size_t)m * k * sizeof(float), b_bytes = (size_t)k * n * sizeof(float);
    size_t c_bytes = (size_t)m * n * sizeof(float);
    cublasHandle_t handle = NULL;
    tut_timer t = {0};
    TUT_REQUIRE(version >= 1 && version <= 4 && m > 0 && n > 0 && k > 0);
    CUDA_CHECK(cudaMalloc(&d_a, a_bytes));
    CUDA_CHECK(cudaMalloc(&d_b, b_bytes));
    CUDA_CHECK(cudaMalloc(&d_c, c_bytes));
    if (version == 4 && (status = cublas_open(&handle)) != 0)
        goto cleanup;
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaMemcpy(d_a, h_a, a_bytes, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_b, h_b, b_bytes, cudaMemcpyHostToDevice));
        if ((status = launch_matmul(version, handle, d_a, d_b, d_c, m, n, k)) != 0)
            goto cleanup;
        CUDA_CHECK(cudaMemcpy(h_c, d_c, c_bytes, cudaMemcpyDeviceToHost));
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
cleanup:
    tut_timer_free(&t);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    return status;
}
