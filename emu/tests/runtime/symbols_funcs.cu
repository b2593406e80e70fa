// SPDX-License-Identifier: MIT
/*
 * Runtime test: __device__ and __constant__ variables through cudaMemcpyToSymbol /
 * FromSymbol (sync and async, with offsets), cudaGetSymbolAddress/Size, a kernel reading
 * what the host wrote; and cudaFuncSetAttribute / cudaFuncGetAttributes on a kernel.
 */
#include <cstdio>
#include <cuda_runtime.h>
#ifdef __CUEMU__
#include "cuemu_internal.h"
#endif

#include "rt_test.h"

__constant__ float c_coeffs[8];
__device__ int d_counter;
__device__ float d_table[64];

__global__ void apply_coeffs_kernel(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * c_coeffs[i % 8] + d_table[i % 64];
    if (i == 0) d_counter += 1;
}

__global__ void big_smem_kernel(float *out)
{
    extern __shared__ float buf[];
    buf[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

int main(void)
{
    float coeffs[8], table[64], back[64];
    for (int i = 0; i < 8; i++) coeffs[i] = 0.5f * (float)(i + 1);
    for (int i = 0; i < 64; i++) table[i] = (float)(100 + i);
    OK(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs));
    OK(cudaMemcpyToSymbol(d_table, table, 32 * sizeof(float)));
    OK(cudaMemcpyToSymbol(d_table, table + 32, 32 * sizeof(float), 32 * sizeof(float)));
    int zero = 0;
    OK(cudaMemcpyToSymbolAsync(d_counter, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, 0));
    OK(cudaMemcpyFromSymbol(back, d_table, sizeof back));
    for (int i = 0; i < 64; i++) EXPECT(back[i] == table[i]);
    float two[2] = { 0, 0 };
    OK(cudaMemcpyFromSymbolAsync(two, c_coeffs, sizeof two, 6 * sizeof(float), cudaMemcpyDeviceToHost, 0));
    OK(cudaStreamSynchronize(0));
    EXPECT(two[0] == coeffs[6] && two[1] == coeffs[7]);

    // Past the end of the symbol, or in the wrong direction: refused.
    EXPECT_ERR(cudaMemcpyToSymbol(c_coeffs, coeffs, sizeof coeffs, 4), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpyToSymbol(c_coeffs, coeffs, 4, 0, cudaMemcpyDeviceToHost),
               cudaErrorInvalidMemcpyDirection);
    EXPECT_ERR(cudaMemcpyFromSymbol(back, d_table, 4, 0, cudaMemcpyHostToDevice),
               cudaErrorInvalidMemcpyDirection);
    (void)cudaGetLastError();

    // A symbol's device address and size; the address works like any device pointer.
    float *p_table = NULL;
    size_t sz = 0;
    OK(cudaGetSymbolAddress((void **)&p_table, d_table));
    OK(cudaGetSymbolSize(&sz, d_table));
    EXPECT(p_table != NULL && sz == sizeof table);
    float one = -1.0f;
    OK(cudaMemcpy(&one, p_table + 5, sizeof one, cudaMemcpyDeviceToHost));
    EXPECT(one == table[5]);

    // A kernel sees what the host wrote to the symbols.
    const int n = 300;
    float h_in[n], h_out[n];
    for (int i = 0; i < n; i++) h_in[i] = (float)i;
    float *d_in = NULL, *d_out = NULL;
    OK(cudaMalloc(&d_in, sizeof h_in));
    OK(cudaMalloc(&d_out, sizeof h_out));
    OK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));
    apply_coeffs_kernel<<<(n + 127) / 128, 128>>>(d_in, d_out, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(h_out, d_out, sizeof h_out, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) EXPECT(h_out[i] == h_in[i] * coeffs[i % 8] + table[i % 64]);
    int counter = -1;
    OK(cudaMemcpyFromSymbol(&counter, d_counter, sizeof counter));
    EXPECT(counter == 1);
    // The symbol's address may be handed to a kernel as an argument.
    apply_coeffs_kernel<<<1, 64>>>(d_in, p_table, 64);
    OK(cudaDeviceSynchronize());

    // Dynamic shared memory above 48 KiB needs the opt-in attribute, per kernel.
    struct cudaFuncAttributes fa;
    OK(cudaFuncGetAttributes(&fa, big_smem_kernel));
    EXPECT(fa.maxThreadsPerBlock >= 1024 || fa.maxThreadsPerBlock > 0);
    EXPECT(fa.maxDynamicSharedSizeBytes <= 48 * 1024);
    int optin = 0;
    OK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    const int want = 64 * 1024;
    OK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, want));
    OK(cudaFuncGetAttributes(&fa, big_smem_kernel));
    EXPECT(fa.maxDynamicSharedSizeBytes == want);
    OK(cudaFuncGetAttributes(&fa, (const void *)apply_coeffs_kernel));   // others keep the default
    EXPECT(fa.maxDynamicSharedSizeBytes <= 48 * 1024);
    EXPECT_ERR(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 101),
               cudaErrorInvalidValue);
    OK(cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                            cudaSharedmemCarveoutMaxShared));
    (void)cudaGetLastError();
#ifdef __CUEMU__
    EXPECT(cuemu_func_max_dynamic_smem((const void *)big_smem_kernel) == (size_t)want);
    EXPECT(cuemu_func_max_dynamic_smem((const void *)apply_coeffs_kernel) == 48 * 1024);
#endif
    big_smem_kernel<<<1, 256, want>>>(d_out);
    OK(cudaGetLastError());
    OK(cudaMemcpy(h_out, d_out, 256 * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT(h_out[0] == 255.0f && h_out[255] == 0.0f);

    OK(cudaFree(d_in));
    OK(cudaFree(d_out));
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("symbols_funcs: ok\n");
    return 0;
}
