// SPDX-License-Identifier: MIT
/*
 * emu_bench: how fast the CPU emulator runs the course's typical kernels, as a ratio to the same
 * loop compiled natively (issues 3 and 13, "Speed").
 *
 * Build and run: make emu-bench
 * Each kernel and its native loop are timed alternately in the same run and their medians
 * compared, so both see the same machine; every result is checked. These are emulator figures: they say nothing about a GPU. The emulator runs a launch
 * to completion before returning, so a host clock around the launch is honest here.
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

// ---- the same loops, compiled natively: with these flags here, with plain -O2 elsewhere ------
#define NATIVE_NS inst
#include "native_loops.h"
#undef NATIVE_NS
namespace plain {
void vector_add_native(const float *a, const float *b, float *c, int n);
void matmul_native(const float *a, const float *b, float *c, int n);
void reduce_native(const float *in, float *out, int n, int rb);
}  // namespace plain

// ---- timing ---------------------------------------------------------------------------------
template <class F> static double seconds(F &f)
{
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(b - a).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/*
 * Times the emulated kernel and the native loop alternately, reps times each after one warm-up
 * of each, so both see the same load on a shared machine; prints both medians and their ratio.
 */
template <class E, class N, class P>
static double compare(const char *what, int reps, double target, double plain_target, E emu,
                      N native, P plain_o2)
{
    std::vector<double> te, tn, tp;
    emu();
    native();
    plain_o2();
    for (int r = 0; r < reps; r++) {
        te.push_back(seconds(emu));
        tn.push_back(seconds(native));
        tp.push_back(seconds(plain_o2));
    }
    double me = median(te), mn = median(tn), mp = median(tp), ratio = me / mn, rp = me / mp;
    std::printf("%s\n  emulated %9.3f ms\n  native loop, the emulator's flags %9.3f ms: ratio %6.1fx",
                what, me * 1e3, mn * 1e3, ratio);
    if (target > 0)
        std::printf("   (target <= %gx: %s)\n", target, ratio <= target ? "met" : "MISSED");
    else
        std::printf("   (no target)\n");
    std::printf("  native loop, plain -O2           %9.3f ms: ratio %6.1fx", mp * 1e3, rp);
    if (plain_target > 0)
        std::printf("   (target <= %gx: %s)\n", plain_target, rp <= plain_target ? "met" : "MISSED");
    else
        std::printf("   (no target)\n");
    return ratio;
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
    std::vector<float> ha(n), hb(n), hc(n), hm(mn * mn), hr(rblocks), nc(n), nm(mn * mn),
        nr(rblocks);
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

    std::printf("emu_bench: each kernel on the emulator beside the same loop compiled natively,\n"
                "twice: by the same compiler with the emulator's flags (its instrumentation, no\n"
                "vectoriser), and with plain -O2 (what native code means to a user); one core\n"
                "each, medians, measured alternately in this run. Other work on the machine still\n"
                "weighs more on the emulated side: compare ratios from an idle machine.\n");
#ifdef __CUEMU__
    double sw = cuemu_bench_switch_ns(2000000);
    std::printf("%-28s %.1f ns   (target <= 50 ns)\n", "context switch", sw);
#endif

    compare("vector add, 1M elements", 15, 10.0, 20.0,
            [&] {
                vector_add_kernel<<<(n + 255) / 256, 256>>>(a, b, c, n);
                cudaDeviceSynchronize();   // a launch is queued: the kernel runs here
            },
            [&] { inst::vector_add_native(ha.data(), hb.data(), nc.data(), n); },
            [&] { plain::vector_add_native(ha.data(), hb.data(), nc.data(), n); });
    cudaMemcpy(hc.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++)
        if (hc[i] != ha[i] + hb[i] || nc[i] != hc[i]) {
            status = fail("vector add: wrong result");
            break;
        }

    compare("tiled matmul 256x256x256", 7, 6.0, 0.0,
            [&] {
                matmul_tiled_kernel<<<dim3(mn / TILE, mn / TILE), dim3(TILE, TILE)>>>(ma, mb, mc,
                                                                                      mn);
                cudaDeviceSynchronize();
            },
            [&] { inst::matmul_native(hm.data(), hm.data(), nm.data(), mn); },
            [&] { plain::matmul_native(hm.data(), hm.data(), nm.data(), mn); });
    cudaMemcpy(hc.data(), mc, mn * mn * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < mn * mn; i++)
        if (hc[i] != nm[i]) { status = fail("matmul: emulated and native results differ"); break; }
    for (int r = 0; r < mn; r += 37)
        for (int col = 0; col < mn; col += 41) {
            double want = 0;
            for (int k = 0; k < mn; k++) want += (double)hm[r * mn + k] * hm[k * mn + col];
            if (hc[r * mn + col] != (float)want) status = fail("matmul: wrong result");
        }

    compare("shared reduction, 1M", 5, 0.0, 0.0,
            [&] {
                reduce_kernel<<<rblocks, rb>>>(a, part, n);
                cudaDeviceSynchronize();
            },
            [&] { inst::reduce_native(ha.data(), nr.data(), n, rb); },
            [&] { plain::reduce_native(ha.data(), nr.data(), n, rb); });
    cudaMemcpy(hr.data(), part, rblocks * sizeof(float), cudaMemcpyDeviceToHost);
    double got = 0, gotn = 0, want = 0;
    for (int i = 0; i < rblocks; i++) { got += hr[i]; gotn += nr[i]; }
    for (int i = 0; i < n; i++) want += ha[i];
    if (got != want || gotn != want) status = fail("reduction: wrong result");
    std::printf("(emulator figures: they say nothing about a GPU)\n");

    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ma); cudaFree(mb); cudaFree(mc);
    cudaFree(part);
    if (cudaDeviceSynchronize() != cudaSuccess) status = fail("a launch failed");
    return status;
}
