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
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

#define RADIUS 3
__global__ void stencil_kernel(const float *in, float *out, int n)
{
    __shared__ float s[256 + 2 * RADIUS];
    int g = blockIdx.x * blockDim.x + threadIdx.x, l = threadIdx.x + RADIUS;
    s[l] = g < n ? in[g] : 0.0f;
    if (threadIdx.x < RADIUS) {
        s[l - RADIUS] = g - RADIUS >= 0 ? in[g - RADIUS] : 0.0f;
        int h = g + (int)blockDim.x;
        s[l + blockDim.x] = h < n ? in[h] : 0.0f;
    }
    __syncthreads();
    if (g < n) {
        float acc = 0.0f;
        for (int k = -RADIUS; k <= RADIUS; k++) acc += s[l + k];
        out[g] = acc;
    }
}

// Grid-stride: each block counts a share of the input into its own shared bins, then adds them.
__global__ void histogram_kernel(const unsigned char *in, unsigned *bins, int n)
{
    __shared__ unsigned h[256];
    h[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[in[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
}

// ---- the same loops, compiled natively: with these flags here, with plain -O2 elsewhere ------
#define NATIVE_NS inst
#include "native_loops.h"
#undef NATIVE_NS
namespace plain {
void vector_add_native(const float *a, const float *b, float *c, int n);
void matmul_native(const float *a, const float *b, float *c, int n);
void reduce_native(const float *in, float *out, int n, int rb);
void stencil_native(const float *in, float *out, int n, int r);
void histogram_native(const unsigned char *in, unsigned *bins, int n);
}  // namespace plain

// ---- timing ---------------------------------------------------------------------------------
// EMU_BENCH_CLOCK=cpu: the process's CPU time instead of the wall clock, for comparing two
// builds on a machine busy with other work (it cannot show a launch spread over several cores).
static clockid_t g_clock = CLOCK_MONOTONIC;
template <class F> static double seconds(F &f)
{
    struct timespec a, b;
    clock_gettime(g_clock, &a);
    f();
    clock_gettime(g_clock, &b);
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
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
/* CUEMU_THREADS as the bench was started with (unset: the emulator's default, the cores). */
static const char *g_threads;
static void threads_env(const char *v)
{
    if (v) setenv("CUEMU_THREADS", v, 1);
    else unsetenv("CUEMU_THREADS");
}

// The end of a ratio's line: its target (0: none) and whether the ratio meets it.
static void verdict(double ratio, double target)
{
    if (target > 0)
        std::printf("   (target <= %gx: %s)\n", target, ratio <= target ? "met" : "MISSED");
    else
        std::printf("   (no target)\n");
}

template <class E, class N, class P>
static double compare(const char *what, int reps, double target, double plain_target, E emu,
                      N native, P plain_o2)
{
    std::vector<double> te, tn, tp, tm;
    threads_env("1");
    emu();
    threads_env(g_threads);
    emu();
    native();
    plain_o2();
    for (int r = 0; r < reps; r++) {
        threads_env("1");
        te.push_back(seconds(emu));
        threads_env(g_threads);
        tm.push_back(seconds(emu));
        tn.push_back(seconds(native));
        tp.push_back(seconds(plain_o2));
    }
    double me = median(te), mn = median(tn), mp = median(tp), ratio = me / mn, rp = me / mp;
    double mm = median(tm);
    std::printf("%s\n  emulated, one host thread %9.3f ms\n  native loop, the emulator's flags %9.3f ms: ratio %6.1fx",
                what, me * 1e3, mn * 1e3, ratio);
    verdict(ratio, target);
    std::printf("  native loop, plain -O2           %9.3f ms: ratio %6.1fx", mp * 1e3, rp);
    verdict(rp, plain_target);
    // the same target for the emulator as a student runs it (its default uses every core)
    std::printf("  emulated, CUEMU_THREADS=%s %9.3f ms: %.2fx the speed of one host thread; "
                "ratio to plain -O2 %6.1fx", g_threads ? g_threads : "(default)", mm * 1e3,
                me / mm, mm / mp);
    verdict(mm / mp, plain_target);
    return ratio;
}

static int g_argc;
static char **g_argv;
// With arguments, only the kernels whose names contain one of them run (emu_bench reduction).
static bool want(const char *name)
{
    if (g_argc < 2) return true;
    for (int i = 1; i < g_argc; i++)
        if (std::strstr(name, g_argv[i])) return true;
    return false;
}

static int fail(const char *what)
{
    std::fprintf(stderr, "emu_bench: %s\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    g_argc = argc;
    g_argv = argv;
    g_threads = std::getenv("CUEMU_THREADS");
    if (const char *c = std::getenv("EMU_BENCH_CLOCK"))
        if (!std::strcmp(c, "cpu")) g_clock = CLOCK_PROCESS_CPUTIME_ID;
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
                "weighs more on the emulated side: compare ratios from an idle machine. Then the\n"
                "emulated kernel with CUEMU_THREADS as given (unset: every core this process may\n"
                "use), its blocks spread over that many host threads.\n");
    if (FILE *la = std::fopen("/proc/loadavg", "r")) {
        char buf[128] = "";
        if (std::fgets(buf, sizeof buf, la)) std::printf("load average at the start: %s", buf);
        std::fclose(la);
    }
#ifdef __CUEMU__
    double sw = cuemu_bench_switch_ns(2000000);
    std::printf("%-28s %.1f ns   (target <= 50 ns)\n", "context switch", sw);
#endif

    if (want("vector add")) {
    compare("vector add, 1M elements", 15, 0.0, 10.0,
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
    }

    if (want("tiled matmul")) {
    compare("tiled matmul 256x256x256", 7, 0.0, 5.0,
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
    }

    if (want("shared reduction")) {
    compare("shared reduction, 1M", 5, 0.0, 30.0,
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
    }

    if (want("stencil")) {
        compare("one-barrier stencil (radius 3), 1M", 9, 0.0, 15.0,
                [&] {
                    stencil_kernel<<<(n + 255) / 256, 256>>>(a, c, n);
                    cudaDeviceSynchronize();
                },
                [&] { inst::stencil_native(ha.data(), nc.data(), n, RADIUS); },
                [&] { plain::stencil_native(ha.data(), nc.data(), n, RADIUS); });
        cudaMemcpy(hc.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int i = 0; i < n; i++)
            if (hc[i] != nc[i]) { status = fail("stencil: wrong result"); break; }
    }

    if (want("histogram")) {
        const int hn = 4 << 20;
        std::vector<unsigned char> hin(hn);
        std::vector<unsigned> hbins(256), nbins(256);
        unsigned long long x = 88172645463325252ull;
        for (int i = 0; i < hn; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            hin[i] = (unsigned char)(x >> 56);
        }
        unsigned char *din = nullptr;
        unsigned *dbins = nullptr;
        if (cudaMalloc(&din, hn) || cudaMalloc(&dbins, 256 * sizeof(unsigned)))
            return fail("cudaMalloc failed");
        cudaMemcpy(din, hin.data(), hn, cudaMemcpyHostToDevice);
        compare("shared histogram with atomics, 4M bytes", 9, 0.0, 10.0,
                [&] {
                    cudaMemset(dbins, 0, 256 * sizeof(unsigned));
                    histogram_kernel<<<64, 256>>>(din, dbins, hn);
                    cudaDeviceSynchronize();
                },
                [&] { inst::histogram_native(hin.data(), nbins.data(), hn); },
                [&] { plain::histogram_native(hin.data(), nbins.data(), hn); });
        cudaMemcpy(hbins.data(), dbins, 256 * sizeof(unsigned), cudaMemcpyDeviceToHost);
        for (int i = 0; i < 256; i++)
            if (hbins[i] != nbins[i]) { status = fail("histogram: wrong result"); break; }
        cudaFree(din);
        cudaFree(dbins);
    }
    std::printf("(emulator figures: they say nothing about a GPU)\n");

    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ma); cudaFree(mb); cudaFree(mc);
    cudaFree(part);
    if (cudaDeviceSynchronize() != cudaSuccess) status = fail("a launch failed");
    return status;
}
