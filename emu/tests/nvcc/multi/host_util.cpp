// SPDX-License-Identifier: MIT
// Plain C++ in the multi-file program: it calls the runtime API, as a .cpp may under nvcc.
#include <cuda_runtime.h>
#include <vector>
#include "vecops.h"

double device_checksum(const float *d_v, int n)
{
    std::vector<float> h(n);
    if (cudaMemcpy(h.data(), d_v, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1.0;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += h[i] * (double)(i % 7 + 1);
    return s;
}
