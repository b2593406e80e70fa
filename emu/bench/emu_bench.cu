// SPDX-License-Identifier: MIT
/*
 * emu_bench: how fast the CPU emulator runs the course's typical kernels (issue 3, "Speed").
 *
 * Build and run: make emu-bench
 * Each figure is the median of several runs, checked for correctness first, printed next to
 * its target. These are emulator figures: they say nothing about a GPU. The emulator runs a
 * launch to completion before returning, so a host clock around the launch is honest here.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

// ---- kernels --------------------------------------------------------------------------------
__global__ void vector_add_kernel(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
__global__ void matmul_tiled_kernel(const float *a, const float *b, float *c, int n)
{
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

__global__ void reduce_kernel(const float *in, float *out, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// ---- timing ---------------------------------------------------------------------------------
template <class F> static double median_s(int reps, F f)
{
    std::vector<double> t;
    for (int r = 0; r < reps; r++) {
        auto a = std::chrono::steady_clock::now();
        f();
        auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static int fail(const char *what)
{
    std::fprintf(stderr, "emu_bench: %s\n", what);
    return 1;
}

int main()
{
    int status = 0;
    const int n = 1 << 20, mn = 256, rb = 256, rblocks = (n + rb - 1) / rb;
    std::vector<float> ha(n), hb(n), hc(n), hm(mn * mn), hr(rblocks);
    float *a = nullptr, *b = nullptr, *c = nullptr, *ma = nullptr, *mb = nullptr, *mc = nullptr,
          *part = nullptr;
    for (int i = 0; i < n; i++) { ha[i] = (float)(i % 1000) * 0.5f; hb[i] = (float)(i % 7); }
    for (int i = 0; i < mn * mn; i++) hm[i] = (float)((i * 7) % 13) - 6.0f;
    if (cudaMalloc(&a, n * sizeof(float)) || cudaMalloc(&b, n * sizeof(float))
        || cudaMalloc(&c, n * sizeof(float)) || cudaMalloc(&ma, mn * mn * sizeof(float))
        || cudaMalloc(&mb, mn * mn * sizeof(float)) || cudaMalloc(&mc, mn * mn * sizeof(float))
        || cudaMalloc(&part, rblocks * sizeof(float)))
        return fail("cudaMalloc failed");
    cudaMemcpy(a, ha.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(ma, hm.data(), mn * mn * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(mb, hm.data(), mn * mn * sizeof(float), cudaMemcpyHostToDevice);

#ifdef __CUEMU__
    double sw = cuemu_bench_switch_ns(2000000);
    std::printf("context switch              %8.1f ns   (target <= 50 ns)\n", sw);
#endif

    double tv = median_s(7, [&] { vector_add_kernel<<<(n + 255) / 256, 256>>>(a, b, c, n); });
    cudaMemcpy(hc.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++)
        if (hc[i] != ha[i] + hb[i]) { status = fail("vector add: wrong result"); break; }
    std::printf("vector add, 1M elements     %8.2f ms   (target < 20 ms)\n", tv * 1e3);

    double tm = median_s(3, [&] {
        matmul_tiled_kernel<<<dim3(mn / TILE, mn / TILE), dim3(TILE, TILE)>>>(ma, mb, mc, mn);
    });
    cudaMemcpy(hc.data(), mc, mn * mn * sizeof(float), cudaMemcpyDeviceToHost);
    for (int r = 0; r < mn; r += 37)
        for (int col = 0; col < mn; col += 41) {
            double want = 0;
            for (int k = 0; k < mn; k++) want += (double)hm[r * mn + k] * hm[k * mn + col];
            if (hc[r * mn + col] != (float)want) status = fail("matmul: wrong result");
        }
    std::printf("tiled matmul 256x256x256    %8.3f s    (target < 0.2 s)\n", tm);

    double tr = median_s(3, [&] { reduce_kernel<<<rblocks, rb>>>(a, part, n); });
    cudaMemcpy(hr.data(), part, rblocks * sizeof(float), cudaMemcpyDeviceToHost);
    double got = 0, want = 0;
    for (int i = 0; i < rblocks; i++) got += hr[i];
    for (int i = 0; i < n; i++) want += ha[i];
    if (got != want) status = fail("reduction: wrong result");
    std::printf("shared reduction, 1M        %8.3f s    (target < 0.5 s)\n", tr);
    std::printf("(emulator timings: they say nothing about a GPU)\n");

    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ma); cudaFree(mb); cudaFree(mc);
    cudaFree(part);
    if (cudaDeviceSynchronize() != cudaSuccess) status = fail("a launch failed");
    return status;
}
