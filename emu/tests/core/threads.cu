// SPDX-License-Identifier: MIT
/*
 * A launch spread over several host threads (CUEMU_THREADS) gives what one host thread gives:
 * the same results, and byte for byte the same diagnostics and printf output, for bugs planted
 * in two blocks that are not the first (the report names the block a one-thread run meets
 * first). Each case runs with CUEMU_THREADS = 1, 2 and 4 in one process; the first case also
 * checks that 2 and 4 really used several host threads, and that global atomics from all of
 * them lose nothing. Run in every thread order, like every core test.
 */
#include "emu_test.h"

#include <cassert>
#include <cctype>
#include <string>
#ifdef __CUEMU__
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* A sanitizer build (make emu-tests EMU_SANITIZE=address or thread) runs every launch on one
   host thread (threads_for in emu/core/sched.c): nothing there can wait for another one. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ONE_HOST_THREAD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ONE_HOST_THREAD 1
#endif
#endif
#ifndef ONE_HOST_THREAD
#define ONE_HOST_THREAD 0
#endif

constexpr int kBlocks = 64, kThreads = 128, kN = kBlocks * kThreads;   // enough work to spread
constexpr int kBadA = 21, kBadB = 42;                                  // the blocks with the bug

/* Records which host thread ran each block. With wait, the first block to run waits (at most
   10 s) until a block runs on another host thread: a launch spread over several must get
   there however the machine schedules them. */
__global__ void who_kernel(long long *tid, float *fsum, unsigned *count, int wait,
                           unsigned long long *first, volatile int *other)
{
#ifdef __CUEMU__
    if (threadIdx.x == 0) {
        unsigned long long me = (unsigned long long)syscall(SYS_gettid);
        tid[blockIdx.x] = (long long)me;
        atomicCAS(first, 0ull, me);
        if (*(volatile unsigned long long *)first != me) {
            *other = 1;
        } else if (wait) {
            time_t end = time(nullptr) + 10;
            while (!*other && time(nullptr) < end) {
            }
        }
    }
#endif
    __shared__ int s[kThreads];
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    atomicAdd(fsum, 1.0f);
    atomicAdd(count, s[(threadIdx.x + 1) % kThreads] == (int)((threadIdx.x + 1) % kThreads) ? 1u : 1000u);
}

/* Atomics on shared bins (which need no compare-and-swap: each host thread has its own copy of
   a block's shared memory) between atomics on global memory (which do): a histogram, the
   largest value, and the first thread to claim a shared slot, each checked against the host. */
__global__ void hist_kernel(const unsigned char *in, unsigned *bins, unsigned *total, int *max,
                            int *claims, int n)
{
    __shared__ unsigned h[256];
    __shared__ int top, owner;
    h[threadIdx.x] = 0;
    if (threadIdx.x == 0) top = -1, owner = -1;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&h[in[i]], 1u);
        atomicAdd(total, 1u);
        atomicMax(&top, (int)in[i]);
    }
    atomicCAS(&owner, -1, (int)threadIdx.x);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
    if (threadIdx.x == 0) {
        atomicMax(max, top);
        atomicAdd(&claims[owner], 1);
    }
}

__global__ void oob_kernel(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool bad = (blockIdx.x == kBadA || blockIdx.x == kBadB) && threadIdx.x == 5;
    out[bad ? n : i] = 1.0f;                                  // BUG: one past the end
}

__global__ void race_kernel(int *out)
{
    __shared__ int s[kThreads];
    s[threadIdx.x] = (int)threadIdx.x;
    if (blockIdx.x != kBadA && blockIdx.x != kBadB) __syncthreads();   // BUG: two blocks skip it
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % kThreads];
}

__global__ void divergent_kernel(int *out)
{
    __shared__ int s[kThreads];
    if ((blockIdx.x == kBadA || blockIdx.x == kBadB) && threadIdx.x >= 64) return;   // BUG
    s[threadIdx.x] = 1;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

__global__ void assert_kernel(int *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
    assert(!((blockIdx.x == kBadA || blockIdx.x == kBadB) && threadIdx.x == 7));   // BUG
}

__global__ void printf_kernel(int *out)
{
    if (threadIdx.x == 0 || (blockIdx.x == kBadA && threadIdx.x == 3))
        printf("[b%u t%u]", blockIdx.x, threadIdx.x);
    out[blockIdx.x * blockDim.x + threadIdx.x] = 2;
}

__global__ void spin_kernel(volatile int *flag)
{
    if (blockIdx.x == 3 && threadIdx.x == 0)
        while (*flag == 0) {                                  // BUG: nothing sets it
        }
}

#ifdef __CUEMU__
struct outcome {
    cudaError_t err;
    std::string diag, out, data;
};

enum which { OOB, RACE, DIVERGENT, ASSERT, PRINTF, SPIN };

static outcome run(which w, int threads)
{
    outcome r;
    char n[16];
    std::snprintf(n, sizeof n, "%d", threads);
    setenv("CUEMU_THREADS", n, 1);
    cuemuClearDiagnostic();
    std::fflush(stdout);
    int saved = dup(1);
    FILE *cap = std::tmpfile();
    dup2(fileno(cap), 1);
    float *f = nullptr;
    int *d = nullptr;
    cudaMalloc(&f, kN * sizeof(float));
    cudaMalloc(&d, kN * sizeof(int));
    cudaMemset(d, 0, kN * sizeof(int));
    switch (w) {
    case OOB: oob_kernel<<<kBlocks, kThreads>>>(f, kN); break;
    case RACE: race_kernel<<<kBlocks, kThreads>>>(d); break;
    case DIVERGENT: divergent_kernel<<<kBlocks, kThreads>>>(d); break;
    case ASSERT: assert_kernel<<<kBlocks, kThreads>>>(d); break;
    case PRINTF: printf_kernel<<<kBlocks, kThreads>>>(d); break;
    case SPIN: spin_kernel<<<kBlocks, kThreads>>>(d); break;
    }
    r.err = cudaDeviceSynchronize();
    if (r.err == cudaSuccess) {
        static int h[kN];
        cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        r.data.assign((const char *)h, sizeof h);
    }
    std::fflush(stdout);
    dup2(saved, 1);
    close(saved);
    std::rewind(cap);
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, cap)) > 0) r.out.append(buf, got);
    std::fclose(cap);
    const char *dg = cuemuLastDiagnostic();
    r.diag = dg ? dg : "";
    cudaDeviceReset();
    return r;
}

/* The diagnostics with addresses left out: an allocation's address changes from one run to
   the next (each run allocates anew), whatever the host threads. */
static std::string no_addresses(const std::string &s)
{
    std::string r;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '0' && i + 1 < s.size() && s[i + 1] == 'x') {
            r += "0x?";
            i += 2;
            while (i < s.size() && std::isxdigit((unsigned char)s[i])) i++;
            i--;
        } else {
            r += s[i];
        }
    }
    return r;
}

static void same_everywhere(which w, const char *kind, cudaError_t want)
{
    outcome one = run(w, 1);
    EXPECT_EQ_INT(one.err, want);
    if (kind && one.diag.find(kind) == std::string::npos)
        std::fprintf(stderr, "FAIL: case %d: no \"%s\" in: %s\n", (int)w, kind, one.diag.c_str()),
            emu_test_failures++;
    const char *order = std::getenv("CUEMU_ORDER");
    if (kind && (!order || !std::strcmp(order, "forward")) && w != PRINTF &&
        one.diag.find("block (21,0,0)") == std::string::npos && w != ASSERT && w != SPIN)
        std::fprintf(stderr, "FAIL: case %d: block 21 not named: %s\n", (int)w, one.diag.c_str()),
            emu_test_failures++;
    for (int t : {2, 4}) {
        if (w == SPIN && t == 4) break;          // a second of CPU per run: 1 and 2 only
        outcome o = run(w, t);
        EXPECT_EQ_INT(o.err, one.err);
        std::string a = no_addresses(one.diag), b = no_addresses(o.diag);
        if (w == SPIN) {   // the watchdog's samples of the loop may differ: up to the thread
            a = a.substr(0, a.find(" was "));
            b = b.substr(0, b.find(" was "));
        }
        if (a != b)
            std::fprintf(stderr, "FAIL: case %d, %d host threads: diagnostics differ\n--- 1:\n%s\n"
                         "--- %d:\n%s\n", (int)w, t, one.diag.c_str(), t, o.diag.c_str()),
                emu_test_failures++;
        if (o.out != one.out)
            std::fprintf(stderr, "FAIL: case %d, %d host threads: output differs\n--- 1:\n%s\n"
                         "--- %d:\n%s\n", (int)w, t, one.out.c_str(), t, o.out.c_str()),
                emu_test_failures++;
        EXPECT(o.data == one.data);
    }
}
#endif

int main()
{
    EMU_ONLY();
#ifdef __CUEMU__
    // several host threads really run the blocks, and atomics from all of them count
    for (int t : {1, 2, 4}) {
        char n[16];
        std::snprintf(n, sizeof n, "%d", t);
        setenv("CUEMU_THREADS", n, 1);
        long long *tid = nullptr;
        float *fsum = nullptr;
        unsigned *count = nullptr;
        CUDA_OK(cudaMalloc(&tid, kBlocks * sizeof(long long)));
        CUDA_OK(cudaMallocManaged(&fsum, sizeof(float)));
        CUDA_OK(cudaMallocManaged(&count, sizeof(unsigned)));
        unsigned long long *first = nullptr;
        int *other = nullptr;
        CUDA_OK(cudaMalloc(&first, sizeof *first));
        CUDA_OK(cudaMalloc(&other, sizeof *other));
        *fsum = 0.0f;
        *count = 0;
        for (int rep = 0; rep < 4; rep++) {
            CUDA_OK(cudaMemset(first, 0, sizeof *first));
            CUDA_OK(cudaMemset(other, 0, sizeof *other));
            who_kernel<<<kBlocks, kThreads>>>(tid, fsum, count, t > 1 && !ONE_HOST_THREAD, first,
                                              other);
        }
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ_INT(*count, 4 * kN);
        EXPECT(*fsum == 4.0f * kN);
        long long h[kBlocks];
        CUDA_OK(cudaMemcpy(h, tid, sizeof h, cudaMemcpyDeviceToHost));
        int distinct = 0;
        for (int i = 0; i < kBlocks; i++) {
            bool seen = false;
            for (int j = 0; j < i; j++) seen = seen || h[j] == h[i];
            distinct += !seen;
        }
        if (t == 1 || ONE_HOST_THREAD) EXPECT_EQ_INT(distinct, 1);
        else EXPECT(distinct >= 2 && distinct <= t);
        cudaFree(tid);
        cudaFree(fsum);
        cudaFree(count);
        cudaFree(first);
        cudaFree(other);
    }
    // atomics on shared and on global memory, side by side: none lost whatever the host threads
    {
        constexpr int n = 1 << 18;
        static unsigned char in[n];
        unsigned want[256] = {};
        int want_max = 0;
        for (int i = 0; i < n; i++) {
            in[i] = (unsigned char)((i * 2654435761u) >> 24) % 251;
            want[in[i]]++;
            want_max = in[i] > want_max ? in[i] : want_max;
        }
        unsigned char *d_in = nullptr;
        unsigned *bins = nullptr, *total = nullptr;
        int *max = nullptr, *claims = nullptr;
        CUDA_OK(cudaMalloc(&d_in, n));
        CUDA_OK(cudaMemcpy(d_in, in, n, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMallocManaged(&bins, 256 * sizeof(unsigned)));
        CUDA_OK(cudaMallocManaged(&total, sizeof(unsigned)));
        CUDA_OK(cudaMallocManaged(&max, sizeof(int)));
        CUDA_OK(cudaMallocManaged(&claims, 256 * sizeof(int)));
        for (int t : {1, 2, 4}) {
            char nt[16];
            std::snprintf(nt, sizeof nt, "%d", t);
            setenv("CUEMU_THREADS", nt, 1);
            std::memset(bins, 0, 256 * sizeof(unsigned));
            std::memset(claims, 0, 256 * sizeof(int));
            *total = 0;
            *max = -1;
            hist_kernel<<<kBlocks, 256>>>(d_in, bins, total, max, claims, n);
            CUDA_OK(cudaDeviceSynchronize());
            int wrong = 0, claimed = 0;
            for (int b = 0; b < 256; b++) {
                wrong += bins[b] != want[b];
                claimed += claims[b];
            }
            EXPECT_EQ_INT(wrong, 0);
            EXPECT_EQ_INT((long long)*total, n);
            EXPECT_EQ_INT(*max, want_max);
            EXPECT_EQ_INT(claimed, kBlocks);   // one claim per block
        }
        cudaFree(d_in);
        cudaFree(bins);
        cudaFree(total);
        cudaFree(max);
        cudaFree(claims);
    }
    same_everywhere(OOB, "out-of-bounds write of global memory", cudaErrorIllegalAddress);
#if EMU_RACE_DETECTOR
    same_everywhere(RACE, "shared memory race", cudaErrorLaunchFailure);
#else
    same_everywhere(RACE, nullptr, cudaSuccess);   // no race detector without clang's hooks
#endif
    same_everywhere(DIVERGENT, "divergent __syncthreads", cudaErrorLaunchFailure);
    same_everywhere(ASSERT, "Assertion", cudaErrorAssert);
    same_everywhere(PRINTF, nullptr, cudaSuccess);
    const char *order = std::getenv("CUEMU_ORDER");
    if (!order || !std::strcmp(order, "forward")) {   // a second of CPU per run: one order
        setenv("CUEMU_WATCHDOG_S", "1", 1);
        same_everywhere(SPIN, "watchdog", cudaErrorLaunchTimeout);
        unsetenv("CUEMU_WATCHDOG_S");
    }
#endif
    return emu_test_result("threads");
}
