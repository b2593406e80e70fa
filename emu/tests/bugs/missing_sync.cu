// SPDX-License-Identifier: MIT
/*
 * Planted bugs: a missing __syncthreads between writing shared memory and reading another
 * thread's element. Each is run with threads in forward and in reverse order (CUEMU_ORDER);
 * a GPU hides such bugs most of the time, and each order exposes a different one:
 *   reduction: thread 0 adds s[t + k] before thread t + k stored it       (forward exposes it)
 *   shift:     thread t reads s[t - 1] before thread t - 1 stored it      (reverse exposes it)
 * The test passes when each bug gives a wrong answer in at least one order. The race detector
 * (which finds both in any order: emu/tests/bugs/smem_race.cu) is off here, so that the
 * orders themselves are tested.
 */
#include "../core/emu_test.h"
#include <cmath>

__global__ void reduce_kernel(const float *in, float *out)
{
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 256 + t];
    // BUG: __syncthreads() missing here
    for (int k = 128; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void shift_kernel(const float *in, float *out)
{
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = in[t];
    // BUG: __syncthreads() missing here
    out[t] = t > 0 ? s[t - 1] : 0.0f;
}

static int run(const char *order, float *d_in, float *d_out, const float *h_in, int *red_ok,
               int *shift_ok)
{
#ifdef __CUEMU__
    setenv("CUEMU_ORDER", order, 1);
#endif
    float h_out[256];
    reduce_kernel<<<4, 256>>>(d_in, d_out);
    CUDA_OK(cudaMemcpy(h_out, d_out, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    *red_ok = 1;
    for (int b = 0; b < 4; b++) {
        double want = 0;
        for (int t = 0; t < 256; t++) want += h_in[b * 256 + t];
        if (!(std::fabs(h_out[b] - want) < 1e-3)) *red_ok = 0;
    }
    shift_kernel<<<1, 256>>>(d_in, d_out);
    CUDA_OK(cudaMemcpy(h_out, d_out, 256 * sizeof(float), cudaMemcpyDeviceToHost));
    *shift_ok = h_out[0] == 0.0f;
    for (int t = 1; t < 256; t++) *shift_ok &= h_out[t] == h_in[t - 1];
    std::printf("%-8s order: reduction %s, shift %s\n", order, *red_ok ? "right" : "WRONG",
                *shift_ok ? "right" : "WRONG");
    return 0;
}

int main()
{
    EMU_ONLY();
#ifdef __CUEMU__
    setenv("CUEMU_RACECHECK", "0", 1);
#endif
    float h_in[1024], *d_in = nullptr, *d_out = nullptr;
    for (int i = 0; i < 1024; i++) h_in[i] = (float)((i * 37) % 101) - 50.0f;
    CUDA_OK(cudaMalloc(&d_in, sizeof h_in));
    CUDA_OK(cudaMalloc(&d_out, sizeof h_in));
    CUDA_OK(cudaMemcpy(d_in, h_in, sizeof h_in, cudaMemcpyHostToDevice));
    int rf, sf, rr, sr;
    run("forward", d_in, d_out, h_in, &rf, &sf);
    run("reverse", d_in, d_out, h_in, &rr, &sr);
    EXPECT(!rf || !rr);
    EXPECT(!sf || !sr);
    if (!rf || !rr) std::printf("caught: missing __syncthreads in the reduction\n");
    if (!sf || !sr) std::printf("caught: missing __syncthreads in the shift\n");
    cudaFree(d_in);
    cudaFree(d_out);
    return emu_test_result("missing_sync");
}
