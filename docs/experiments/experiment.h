// SPDX-License-Identifier: MIT
/*
 * What the experiments in this folder share: a check that stops at the first CUDA error, the
 * median of event-timed runs after one warm-up, and the largest difference between two device
 * arrays. Host code only: nothing here is inside a timed kernel.
 */
#ifndef EXPERIMENT_H
#define EXPERIMENT_H

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

/* f() once to warm up, then the median of `reps` runs of f() timed by events on stream 0. */
template <class F> float median_ms(F f, int reps)
{
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    std::vector<float> t;
    f(); CK(cudaDeviceSynchronize());
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* The largest |d[i] - ref[i]| over `count` floats of device memory. */
static inline float maxdiff(const float *d, const float *ref, size_t count)
{
    std::vector<float> x(count), y(count);
    CK(cudaMemcpy(x.data(), d, count * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), ref, count * 4, cudaMemcpyDeviceToHost));
    float md = 0; for (size_t i = 0; i < count; i++) md = std::max(md, std::fabs(x[i] - y[i]));
    return md;
}

#endif
