// SPDX-License-Identifier: MIT
/*
 * Vector types (sizes and CUDA's alignments), make_*, 16-byte float4 loads, and the math and
 * bit intrinsics the chapters use: __fmaf_rn, fmaf, __expf, rsqrtf, __fdividef, min/max,
 * fminf/fmaxf/sqrtf/expf, __float2int_rn, __popc, __clz, __ffs.
 */
#include "emu_test.h"
#include <cmath>

__global__ void float4_copy_kernel(const float4 *in, float4 *out, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = in[i];
        out[i] = make_float4(v.w, v.z, v.y, v.x);
    }
}

__global__ void math_kernel(float *f, int *k)
{
    f[0] = __fmaf_rn(2.0f, 3.0f, 1.0f);
    f[1] = fmaf(2.0f, 3.0f, -1.0f);
    f[2] = __expf(1.0f);
    f[3] = rsqrtf(16.0f);
    f[4] = __fdividef(1.0f, 8.0f);
    f[5] = fminf(2.0f, -3.0f) + fmaxf(2.0f, -3.0f);
    f[6] = sqrtf(2.0f) * expf(0.0f);
    f[7] = min(1.5f, 2.5f) + max(1.5f, 2.5f);
    k[0] = __float2int_rn(2.5f);              // round half to even: 2
    k[1] = __float2int_rn(-3.7f);
    k[2] = __popc(0xF0F0u);
    k[3] = __clz(1);
    k[4] = __clz(0);
    k[5] = __ffs(0x10);
    k[6] = __ffs(0);
    k[7] = min(3, -4) * 10 + max(3, -4);
}

int main()
{
    EXPECT_EQ_INT(sizeof(float4), 16); EXPECT_EQ_INT(alignof(float4), 16);
    EXPECT_EQ_INT(sizeof(float2), 8);  EXPECT_EQ_INT(alignof(float2), 8);
    EXPECT_EQ_INT(sizeof(float3), 12); EXPECT_EQ_INT(alignof(float3), 4);
    EXPECT_EQ_INT(sizeof(int4), 16);   EXPECT_EQ_INT(alignof(int4), 16);
    EXPECT_EQ_INT(sizeof(uchar4), 4);  EXPECT_EQ_INT(alignof(uchar4), 4);
    EXPECT_EQ_INT(sizeof(char2), 2);   EXPECT_EQ_INT(alignof(short2), 4);
    EXPECT_EQ_INT(sizeof(double2), 16); EXPECT_EQ_INT(alignof(double2), 16);
    EXPECT_EQ_INT(sizeof(longlong2), 16);
    EXPECT_EQ_INT(sizeof(uint3), 12);  EXPECT_EQ_INT(sizeof(dim3), 12);
    int2 a = make_int2(1, 2); uint4 b = make_uint4(1, 2, 3, 4); double3 c = make_double3(1, 2, 3);
    char4 e = make_char4(1, 2, 3, 4); ushort2 s = make_ushort2(7, 8); longlong1 l = make_longlong1(9);
    float1 f1 = make_float1(0.5f); uchar2 u2 = make_uchar2(250, 251); short4 s4 = make_short4(1, 2, 3, 4);
    EXPECT(a.y == 2 && b.w == 4 && c.z == 3.0 && e.w == 4 && s.y == 8 && l.x == 9 && f1.x == 0.5f);
    EXPECT(u2.y == 251 && s4.z == 3);
    dim3 d3(4); EXPECT(d3.x == 4 && d3.y == 1 && d3.z == 1);

    const int n4 = 37;
    float h[n4 * 4], g[n4 * 4];
    for (int i = 0; i < n4 * 4; i++) h[i] = (float)i;
    float4 *din = nullptr, *dout = nullptr;
    CUDA_OK(cudaMalloc(&din, sizeof h));
    CUDA_OK(cudaMalloc(&dout, sizeof h));
    EXPECT(((unsigned long long)din % 256) == 0);
    CUDA_OK(cudaMemcpy(din, h, sizeof h, cudaMemcpyHostToDevice));
    float4_copy_kernel<<<2, 32>>>(din, dout, n4);
    CUDA_OK(cudaMemcpy(g, dout, sizeof g, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n4; i++)
        for (int j = 0; j < 4; j++) EXPECT(g[i * 4 + j] == h[i * 4 + 3 - j]);

    float *df = nullptr, hf[8];
    int *dk = nullptr, hk[8];
    CUDA_OK(cudaMalloc(&df, sizeof hf));
    CUDA_OK(cudaMalloc(&dk, sizeof hk));
    math_kernel<<<1, 1>>>(df, dk);
    CUDA_OK(cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hk, dk, sizeof hk, cudaMemcpyDeviceToHost));
    EXPECT(hf[0] == 7.0f && hf[1] == 5.0f);
    EXPECT(std::fabs(hf[2] - 2.7182817f) < 1e-5f);
    EXPECT(std::fabs(hf[3] - 0.25f) < 1e-6f && hf[4] == 0.125f && hf[5] == -1.0f);
    EXPECT(std::fabs(hf[6] - 1.4142135f) < 1e-6f && hf[7] == 4.0f);
    EXPECT_EQ_INT(hk[0], 2); EXPECT_EQ_INT(hk[1], -4); EXPECT_EQ_INT(hk[2], 8);
    EXPECT_EQ_INT(hk[3], 31); EXPECT_EQ_INT(hk[4], 32); EXPECT_EQ_INT(hk[5], 5);
    EXPECT_EQ_INT(hk[6], 0); EXPECT_EQ_INT(hk[7], -40 + 3);
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(din); cudaFree(dout); cudaFree(df); cudaFree(dk);
    return emu_test_result("vectors_math");
}
