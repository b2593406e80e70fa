// SPDX-License-Identifier: MIT
/*
 * Shared memory: static __shared__ is per block (every block sees only its own), dynamic
 * shared memory (extern __shared__, with alignment attributes, typed per template, carved
 * into two arrays), a tiled matrix multiply, and __syncthreads_count/_and/_or.
 */
#include "emu_test.h"

__global__ void per_block_kernel(int *out)
{
    __shared__ int owner[64];
    owner[threadIdx.x] = blockIdx.x;
    __syncthreads();
    int bad = 0;
    for (int k = 0; k < 64; k++) bad += owner[k] != (int)blockIdx.x;
    out[blockIdx.x * 64 + threadIdx.x] = bad;
}

template <typename T>
__global__ void reverse_kernel(const T *in, T *out, int n)
{
    extern __shared__ __align__(16) unsigned char raw[];
    T *s = reinterpret_cast<T *>(raw);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[threadIdx.x] = in[i];
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (i < n && j < n) out[i] = s[blockDim.x - 1 - threadIdx.x];
}

__global__ void two_arrays_kernel(float *out, int nf)
{
    extern __shared__ float dyn[];
    float *a = dyn, *b = dyn + nf;
    a[threadIdx.x] = (float)threadIdx.x;
    b[threadIdx.x] = 10.0f * threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = a[nf - 1 - threadIdx.x] + b[threadIdx.x];
}

#define T 8
__global__ void matmul_kernel(const float *A, const float *B, float *C, int m, int k, int n)
{
    __shared__ float ta[T][T], tb[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += T) {
        ta[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? A[row * k + t + threadIdx.x] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (t + threadIdx.y < k && col < n) ? B[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int q = 0; q < T; q++) acc += ta[threadIdx.y][q] * tb[q][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) C[row * n + col] = acc;
}

__global__ void votes_kernel(int *out)
{
    int t = threadIdx.x;
    int c = __syncthreads_count(t % 3 == 0);
    int a = __syncthreads_and(t < 1000);
    int a2 = __syncthreads_and(t != 5);
    int o = __syncthreads_or(t == 77);
    int o2 = __syncthreads_or(t > 1000);
    if (t == 0) { out[0] = c; out[1] = a; out[2] = a2; out[3] = o; out[4] = o2; }
}

int main()
{
    int *d_i = nullptr, h_i[8 * 64];
    CUDA_OK(cudaMalloc(&d_i, sizeof h_i));
    per_block_kernel<<<8, 64>>>(d_i);
    CUDA_OK(cudaMemcpy(h_i, d_i, sizeof h_i, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 8 * 64; i++) EXPECT_EQ_INT(h_i[i], 0);

    const int n = 1000;
    double *d_x = nullptr, *d_y = nullptr, h_x[1000], h_y[1000];
    for (int i = 0; i < n; i++) h_x[i] = i * 1.5;
    CUDA_OK(cudaMalloc(&d_x, sizeof h_x));
    CUDA_OK(cudaMalloc(&d_y, sizeof h_y));
    CUDA_OK(cudaMemcpy(d_x, h_x, sizeof h_x, cudaMemcpyHostToDevice));
    reverse_kernel<double><<<n / 100, 100, 100 * sizeof(double)>>>(d_x, d_y, n);
    CUDA_OK(cudaMemcpy(h_y, d_y, sizeof h_y, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_y[i] == h_x[(i / 100) * 100 + 99 - i % 100]);

    float *d_f = nullptr, h_f[96];
    CUDA_OK(cudaMalloc(&d_f, sizeof h_f));
    two_arrays_kernel<<<1, 96, 2 * 96 * sizeof(float)>>>(d_f, 96);
    CUDA_OK(cudaMemcpy(h_f, d_f, sizeof h_f, cudaMemcpyDeviceToHost));
    for (int t = 0; t < 96; t++) EXPECT(h_f[t] == (float)(95 - t) + 10.0f * t);

    const int m = 19, k = 23, nn = 13;        // not multiples of the tile
    float hA[m * k], hB[k * nn], hC[m * nn], *dA, *dB, *dC;
    for (int i = 0; i < m * k; i++) hA[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < k * nn; i++) hB[i] = (float)((i * 5) % 13) - 6.0f;
    CUDA_OK(cudaMalloc(&dA, sizeof hA));
    CUDA_OK(cudaMalloc(&dB, sizeof hB));
    CUDA_OK(cudaMalloc(&dC, sizeof hC));
    CUDA_OK(cudaMemcpy(dA, hA, sizeof hA, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, hB, sizeof hB, cudaMemcpyHostToDevice));
    matmul_kernel<<<dim3((nn + T - 1) / T, (m + T - 1) / T), dim3(T, T)>>>(dA, dB, dC, m, k, nn);
    CUDA_OK(cudaMemcpy(hC, dC, sizeof hC, cudaMemcpyDeviceToHost));
    for (int r = 0; r < m; r++)
        for (int c = 0; c < nn; c++) {
            float want = 0;
            for (int q = 0; q < k; q++) want += hA[r * k + q] * hB[q * nn + c];
            EXPECT(hC[r * nn + c] == want);
        }

    votes_kernel<<<1, 200>>>(d_i);
    CUDA_OK(cudaMemcpy(h_i, d_i, 5 * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ_INT(h_i[0], 67);
    EXPECT_EQ_INT(h_i[1], 1);
    EXPECT_EQ_INT(h_i[2], 0);
    EXPECT_EQ_INT(h_i[3], 1);
    EXPECT_EQ_INT(h_i[4], 0);

    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d_i); cudaFree(d_x); cudaFree(d_y); cudaFree(d_f); cudaFree(dA); cudaFree(dB); cudaFree(dC);
    return emu_test_result("shared_memory");
}
