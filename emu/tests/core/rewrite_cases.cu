// SPDX-License-Identifier: MIT
/*
 * Launch syntax the rewriter must handle (and nvcc accepts): template arguments with commas,
 * nested parentheses and commas in the launch parameters and the arguments, launches spread
 * over lines with comments inside, `<<<` inside comments and strings, a launch inside a macro,
 * qualified names, a kernel through a function pointer, digit separators, raw strings, and
 * extern __shared__ in its various spellings.
 */
#include "emu_test.h"

template <typename T, int A, int B>
__global__ void affine_kernel(T *v, int n, T scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = v[i] * scale + (T)(A * B);
}

namespace outer { namespace inner {
__global__ void set_kernel(int *v, int n, int value)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = value;
}
}}

__global__ void no_args_kernel() { }

__global__ void optional_out_kernel(int *out, int *optional, float scale, long n)
{
    if (threadIdx.x < n) out[threadIdx.x] = optional ? -1 : (int)(scale + 1.0f);
}

template <int N>
__global__ void dyn_kernel(int *out)
{
    extern __shared__ int first[];
    out[threadIdx.x] = first == nullptr ? -1 : N;
}

__global__ void aligned_kernel(float *out)
{
    extern __shared__ __align__(16)
        float4 vec[];                         // spread over two lines
    vec[threadIdx.x] = make_float4(1, 2, 3, (float)threadIdx.x);
    __syncthreads();
    out[threadIdx.x] = vec[threadIdx.x].w + vec[0].x;
}

// static shared memory in a template helper, an inline helper and a kernel, in one file
template <typename T>
__device__ T block_broadcast(T v)
{
    __shared__ T slot;
    if (threadIdx.x == 0) slot = v;
    __syncthreads();
    return slot;
}
__device__ inline int block_count()
{
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    atomicAdd(&count, 1);
    __syncthreads();
    return count;
}
__global__ void two_declarators_kernel(int *out)
{
    __shared__ int written[32], never_written[32];
    written[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = written[31 - threadIdx.x];
    out[32 + threadIdx.x] = never_written[threadIdx.x];   // poison on the emulator
    out[64 + threadIdx.x] = block_broadcast<int>(7 + (int)blockIdx.x) + block_count();
    float f = block_broadcast<float>(0.5f);
    out[96 + threadIdx.x] = (int)(f * 4.0f);
}

static int pick(int a, int b) { return a > b ? a : b; }
#define LAUNCH_SET(v, n, x) outer::inner::set_kernel<<<((n) + 63) / 64, 64>>>((v), (n), (x))

int main()
{
    const int n = 1'000;                      // a digit separator, not a character literal
    const char *s1 = "a<<<b>>>(c)";           // a string: left alone
    const char *s2 = R"raw(k<<<1, 1>>>() ")raw"; // a raw string: left alone
    // a comment: kernel<<<1, 1>>>(x);
    /* another: kernel<<<1,
       1>>>(x); */
    EXPECT(std::strlen(s1) == 11 && s2[0] == 'k');
    int *d = nullptr, h[1000];
    float *df = nullptr, hf[64];
    CUDA_OK(cudaMalloc(&d, n * sizeof(int)));
    CUDA_OK(cudaMalloc(&df, 64 * sizeof(float)));

    outer::inner::set_kernel<<<pick((n + 127) / 128, 1), dim3(128, 1, 1)>>>(d, n, pick(3, 7));
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT_EQ_INT(h[i], 7);

    LAUNCH_SET(d, n, 11);
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT_EQ_INT(h[i], 11);

    float *dv = nullptr, hv[100];
    CUDA_OK(cudaMalloc(&dv, sizeof hv));
    for (int i = 0; i < 100; i++) hv[i] = (float)i;
    CUDA_OK(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));
    affine_kernel<float, 2, 3>
        <<<  1,                               // blocks
             128,                             // threads
             0,                               // shared memory
             0                                // stream
        >>>  (dv,
              100, /* n */
              (float)pick(2, 1));
    CUDA_OK(cudaMemcpy(hv, dv, sizeof hv, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 100; i++) EXPECT(hv[i] == (float)i * 2.0f + 6.0f);

    optional_out_kernel<<<1, 32>>>(d, NULL, 0, 32);          // literal NULL and 0 arguments
    optional_out_kernel<<<1, 32>>>(d + 32, 0, 1.0f, 0);
    CUDA_OK(cudaMemcpy(h, d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) EXPECT_EQ_INT(h[i], 1);
    for (int i = 32; i < 64; i++) EXPECT_EQ_INT(h[i], 11);      // n = 0: nothing written

    no_args_kernel<<<1, 1>>>();
    no_args_kernel<<<1, 1>>>( /* nothing */ );
    CUDA_OK(cudaGetLastError());

    void (*fp)(int *, int, int) = outer::inner::set_kernel;
    fp<<<1, 64>>>(d, 64, 5);
    (outer::inner::set_kernel)<<<1, 64>>>(d + 64, 64, 6);
    CUDA_OK(cudaMemcpy(h, d, 128 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) EXPECT(h[i] == 5 && h[64 + i] == 6);

    dyn_kernel<4><<<1, 32, 32 * sizeof(int)>>>(d);
    CUDA_OK(cudaMemcpy(h, d, 32 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) EXPECT_EQ_INT(h[i], 4);

    aligned_kernel<<<1, 64, 64 * sizeof(float4)>>>(df);
    CUDA_OK(cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) EXPECT(hf[i] == (float)i + 1.0f);

    two_declarators_kernel<<<1, 32>>>(d);
    CUDA_OK(cudaMemcpy(h, d, 128 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) {
        EXPECT_EQ_INT(h[i], 31 - i);
#ifdef __CUEMU__
        EXPECT_EQ_INT(h[32 + i], -1);
#endif
        EXPECT_EQ_INT(h[64 + i], 7 + 32);
        EXPECT_EQ_INT(h[96 + i], 2);
    }

    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d); cudaFree(df); cudaFree(dv);
    return emu_test_result("rewrite_cases");
}
