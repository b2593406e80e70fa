// SPDX-License-Identifier: MIT
/*
 * Built-in variables and launches: threadIdx/blockIdx/blockDim/gridDim in 1D, 2D and 3D, dim3,
 * warpSize, grid-stride loops, sizes that are not multiples of the block, __device__ helpers,
 * __forceinline__, __launch_bounds__, __restrict__, __ldg, templates (explicit and deduced,
 * const T* from T*), struct arguments by value, launches with 3 and 4 parameters.
 */
#include "emu_test.h"

struct Params { int n; float scale; };

__device__ __forceinline__ int global_index() { return blockIdx.x * blockDim.x + threadIdx.x; }
__host__ __device__ int twice(int v) { return 2 * v; }

__global__ void __launch_bounds__(256) index_1d_kernel(int *__restrict__ out, int n)
{
    int i = global_index();
    if (i < n) out[i] = twice(i) + (warpSize == 32 ? 0 : 1000000);
}

__global__ void index_3d_kernel(int *out, int nx, int ny, int nz)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 100 * y + 10000 * z;
}

__global__ void dims_kernel(unsigned *out)
{
    if (threadIdx.x + threadIdx.y + threadIdx.z + blockIdx.x + blockIdx.y + blockIdx.z == 0) {
        out[0] = gridDim.x; out[1] = gridDim.y; out[2] = gridDim.z;
        out[3] = blockDim.x; out[4] = blockDim.y; out[5] = blockDim.z;
    }
}

__global__ void grid_stride_kernel(const float *__restrict__ in, float *out, Params p)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += blockDim.x * gridDim.x)
        out[i] = __ldg(&in[i]) * p.scale;
}

template <typename T, int K>
__global__ void add_k_kernel(const T *in, T *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + (T)K;
}

template <typename T>
__global__ void axpy_kernel(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace ns {
__global__ void negate_kernel(float *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = -v[i];
}
}

int main()
{
    const int n = 1009;                       // prime: not a multiple of any block size
    int *d_i = nullptr;
    float *d_a = nullptr, *d_b = nullptr;
    unsigned *d_u = nullptr;
    int *h_i = (int *)std::malloc(64 * 64 * 8 * sizeof(int));
    float *h_a = (float *)std::malloc(n * sizeof(float)), *h_b = (float *)std::malloc(n * sizeof(float));
    unsigned h_u[6];
    CUDA_OK(cudaMalloc(&d_i, 64 * 64 * 8 * sizeof(int)));
    CUDA_OK(cudaMalloc(&d_a, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_b, n * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_u, 6 * sizeof(unsigned)));

    index_1d_kernel<<<(n + 255) / 256, 256>>>(d_i, n);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(h_i, d_i, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT_EQ_INT(h_i[i], 2 * i);

    dim3 block(8, 4, 2), grid((61 + 7) / 8, (37 + 3) / 4, (5 + 1) / 2);
    index_3d_kernel<<<grid, block>>>(d_i, 61, 37, 5);
    CUDA_OK(cudaMemcpy(h_i, d_i, 61 * 37 * 5 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int z = 0; z < 5; z++)
        for (int y = 0; y < 37; y++)
            for (int x = 0; x < 61; x++)
                EXPECT_EQ_INT(h_i[(z * 37 + y) * 61 + x], x + 100 * y + 10000 * z);

    dims_kernel<<<dim3(3, 2, 4), dim3(5, 3, 2), 0, 0>>>(d_u);
    CUDA_OK(cudaMemcpy(h_u, d_u, sizeof h_u, cudaMemcpyDeviceToHost));
    EXPECT(h_u[0] == 3 && h_u[1] == 2 && h_u[2] == 4 && h_u[3] == 5 && h_u[4] == 3 && h_u[5] == 2);

    for (int i = 0; i < n; i++) h_a[i] = (float)i - 500.0f;
    CUDA_OK(cudaMemcpy(d_a, h_a, n * sizeof(float), cudaMemcpyHostToDevice));
    Params p = {n, 0.5f};
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    grid_stride_kernel<<<3, 64, 0, stream>>>(d_a, d_b, p);   // 192 threads for 1009 elements
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(h_b, d_b, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_b[i] == h_a[i] * 0.5f);

    add_k_kernel<float, 3><<<(n + 127) / 128, 128>>>(d_a, d_b, n);
    CUDA_OK(cudaMemcpy(h_b, d_b, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_b[i] == h_a[i] + 3.0f);

    // deduced template: T = float from (float, float *, float *); const T * takes a float *
    axpy_kernel<<<(n + 127) / 128,
                  128>>>(2.0f,          // a
                         d_a,           // x
                         d_b, n);       // y
    CUDA_OK(cudaMemcpy(h_b, d_b, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_b[i] == 3.0f * h_a[i] + 3.0f);

    ns::negate_kernel<<<(n + 31) / 32, 32>>>(d_b, n);
    CUDA_OK(cudaMemcpy(h_a, d_b, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_a[i] == -h_b[i]);

    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamDestroy(stream));
    cudaFree(d_i); cudaFree(d_a); cudaFree(d_b); cudaFree(d_u);
    std::free(h_i); std::free(h_a); std::free(h_b);
    return emu_test_result("indexing");
}
