// SPDX-License-Identifier: MIT
/*
 * Chapter 06 experiment: why the strided copy keeps slowing down past a stride of 8 floats,
 * when every thread already uses one 32-byte sector of its own. Below L2, memory is read in
 * pieces of the L2 fetch granularity (cudaLimitMaxL2FetchGranularity, a hint of 0 to 128
 * bytes). This times the chapter's strided copy (out[i] = in[i * stride], 2^25 floats) at the
 * device's default granularity, then at 32 and at 128 bytes.
 *
 *   nvcc -O3 -arch=sm_90 -o build/l2_fetch docs/experiments/06_l2_fetch_granularity.cu \
 *        && build/l2_fetch
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment.h"

__global__ void strided_copy(const float *__restrict__ in, float *__restrict__ out, int n,
                             int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[(size_t)i * stride];
}

int main()
{
    const int n = 1 << 25, strides[] = {1, 8, 16, 32};
    float *in, *out;
    CK(cudaMalloc(&in, (size_t)n * 32 * sizeof(float)));
    CK(cudaMalloc(&out, (size_t)n * sizeof(float)));
    CK(cudaMemset(in, 0, (size_t)n * 32 * sizeof(float)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    size_t dflt;
    CK(cudaDeviceGetLimit(&dflt, cudaLimitMaxL2FetchGranularity));
    printf("default L2 fetch granularity: %zu bytes\n", dflt);
    for (size_t g : {dflt, (size_t)32, (size_t)128}) {
        CK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, g));
        size_t now;
        CK(cudaDeviceGetLimit(&now, cudaLimitMaxL2FetchGranularity));
        printf("granularity %3zu bytes (asked %3zu):", now, g);
        for (int s : strides) {
            std::vector<float> ms;
            for (int r = 0; r < 11; r++) {
                CK(cudaEventRecord(a));
                strided_copy<<<(n + 255) / 256, 256>>>(in, out, n, s);
                CK(cudaEventRecord(b));
                CK(cudaEventSynchronize(b));
                float t;
                CK(cudaEventElapsedTime(&t, a, b));
                ms.push_back(t);
            }
            CK(cudaGetLastError());
            std::sort(ms.begin(), ms.end());
            /* the chapter's measure: 4 bytes read and 4 written per element, over the median */
            printf("  stride %2d %5.0f GB/s", s, 8.0 * n / (ms[ms.size() / 2] * 1e-3) / 1e9);
        }
        printf("\n");
    }
    CK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, dflt));
    return 0;
}
