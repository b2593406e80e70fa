// SPDX-License-Identifier: MIT
/*
 * The memory-access profile (emu/core/profile.c): warp-wide requests, 32-byte sectors per
 * global request and bank wavefronts per shared request, against counts worked out by hand
 * below. Run in forward, reverse and random thread order: the counts must not depend on it.
 * Needs the clang build (load/store hooks); under g++ the profile says it is unavailable and
 * this test is skipped (77).
 */
#include "emu_test.h"

__global__ void coalesced_kernel(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

__global__ void strided_kernel(const float *in, float *out, int n, int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(size_t)i * stride];
}

__global__ void offset_kernel(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i + 1];
}

__global__ void broadcast_kernel(const float *in, float *out, int n)
{
    __shared__ float word[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) word[0] = in[0];
    __syncthreads();
    if (i < n) out[i] = word[0] + in[0];
}

__global__ void tile32_kernel(const float *in, float *out)
{
    __shared__ float tile[32][32];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

__global__ void tile33_kernel(const float *in, float *out)
{
    __shared__ float tile[32][33];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 32 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

__global__ void loop_kernel(float *out, int n, int reps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < reps; k++)
        if (i < n) out[(size_t)k * n + i] = (float)k;
}

#ifdef __CUEMU__
struct counts {
    long long requests, units, lanes;
};

/* The sum of the rows of one kernel's global or shared reads or writes. */
static counts get(const char *kernel, int shared, int write)
{
    counts c = {0, 0, 0};
    int rows = cuemuProfileRows();
    for (int i = 0; i < rows; i++) {
        char k[256], where[512];
        long long out[5];
        if (cuemuProfileRow(i, k, sizeof k, where, sizeof where, out)) continue;
        if (std::strcmp(k, kernel) || out[0] != write || out[1] != shared) continue;
        c.requests += out[2];
        c.units += out[3];
        c.lanes += out[4];
    }
    return c;
}

#define EXPECT_COUNTS(kernel, shared, write, want_req, want_units)                                  \
    do {                                                                                  \
        counts c_ = get(kernel, shared, write);                                           \
        if (c_.requests != (want_req) || c_.units != (want_units)) {                                \
            std::fprintf(stderr, "FAIL %s:%d: %s %s %s: %lld requests, %lld %s; want %lld, " \
                         "%lld\n", __FILE__, __LINE__, kernel, shared ? "shared" : "global",  \
                         write ? "write" : "read", c_.requests, c_.units,                 \
                         shared ? "wavefronts" : "sectors", (long long)(want_req),             \
                         (long long)(want_units));                                             \
            emu_test_failures++;                                                          \
        }                                                                                 \
    } while (0)
#endif

int main()
{
    EMU_ONLY();
#ifdef __CUEMU__
    const int n = 256;
    float *in, *out;
    CUDA_OK(cudaMalloc(&in, 64 * n * sizeof(float)));       /* 256-byte aligned */
    CUDA_OK(cudaMemset(in, 0, 64 * n * sizeof(float)));
    CUDA_OK(cudaMalloc(&out, 4 * n * sizeof(float)));
    cuemuProfileEnable(1);
    cuemuProfileReset();

    /* 256 threads in 2 blocks of 128: 8 warps, each request 32 floats = 128 bytes */
    coalesced_kernel<<<2, 128>>>(in, out, n);
    CUDA_OK(cudaDeviceSynchronize());
    if (cuemuProfileAvailable() == 0) {
        std::printf("profile: skipped (the memory-access profile needs the clang build of the "
                    "emulator: this one has no load/store hooks)\n");
        cuemuProfileEnable(0);
        return 77;
    }
    EXPECT_EQ_INT(cuemuProfileAvailable(), 1);
    EXPECT_COUNTS("coalesced_kernel", 0, 0, 8, 8 * 4);     /* 128 aligned bytes: 4 sectors */
    EXPECT_COUNTS("coalesced_kernel", 0, 1, 8, 8 * 4);

    /* stride 2: a warp spans 256 bytes, 8 sectors; stride 32: every lane its own sector */
    strided_kernel<<<2, 128>>>(in, out, n, 2);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("strided_kernel", 0, 0, 8, 8 * 8);
    EXPECT_COUNTS("strided_kernel", 0, 1, 8, 8 * 4);
    cuemuProfileReset();
    strided_kernel<<<2, 128>>>(in, out, n, 32);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("strided_kernel", 0, 0, 8, 8 * 32);

    /* in + 1: each warp's 128 bytes start 4 bytes into a sector, so they touch 5 */
    offset_kernel<<<2, 128>>>(in, out, n);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("offset_kernel", 0, 0, 8, 8 * 5);
    EXPECT_COUNTS("offset_kernel", 0, 1, 8, 8 * 4);

    /* a partial warp: n = 40 in one block of 64. Warp 0: 32 lanes, 4 sectors; warp 1: the 8
       lanes that pass the guard, 32 bytes at byte 128, 1 sector (counted when the block ends) */
    cuemuProfileReset();
    coalesced_kernel<<<1, 64>>>(in, out, 40);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("coalesced_kernel", 0, 0, 2, 4 + 1);
    {
        counts c = get("coalesced_kernel", 0, 0);
        EXPECT_EQ_INT(c.lanes, 40);
    }

    /* broadcast: every lane reads the same word. Global: 1 sector per request; shared: one
       wavefront (no conflict). Thread 0's write of word[0]: 1 request per block (warp 0),
       1 wavefront; 2 blocks of 128 -> 8 read requests of each kind */
    broadcast_kernel<<<2, 128>>>(in, out, n);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("broadcast_kernel", 0, 0, 2 + 8, 2 * 1 + 8 * 1);
    EXPECT_COUNTS("broadcast_kernel", 1, 0, 8, 8 * 1);
    EXPECT_COUNTS("broadcast_kernel", 1, 1, 2, 2 * 1);

    /* transpose tile, one 32x32 block = 32 warps (warp = threadIdx.y). Writes by row: words
       y*P + x, 32 banks, 1 wavefront. Reads by column tile[x][y]: words x*P + y. P = 32: all
       in bank y, 32 distinct words, 32 wavefronts (31 conflicts); P = 33: bank (x + y) % 32,
       all different, 1 wavefront. */
    tile32_kernel<<<1, dim3(32, 32)>>>(in, out);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("tile32_kernel", 1, 1, 32, 32 * 1);
    EXPECT_COUNTS("tile32_kernel", 1, 0, 32, 32 * 32);
    EXPECT_COUNTS("tile32_kernel", 0, 0, 32, 32 * 4);
    tile33_kernel<<<1, dim3(32, 32)>>>(in, out);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("tile33_kernel", 1, 1, 32, 32 * 1);
    EXPECT_COUNTS("tile33_kernel", 1, 0, 32, 32 * 1);

    /* a loop: the k-th iteration of each lane is one request; 3 iterations x 8 warps */
    loop_kernel<<<2, 128>>>(out, n, 3);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_COUNTS("loop_kernel", 0, 1, 3 * 8, 3 * 8 * 4);

    const char *report = cuemuProfileReport();
    EXPECT(std::strstr(report, "not timed") != nullptr);
    EXPECT(std::strstr(report, "tile32_kernel") != nullptr);
    EXPECT(std::strstr(report, "31.00 bank conflicts (32.00-way)") != nullptr);
    if (emu_test_failures) std::fputs(report, stderr);

    /* off: nothing more is counted */
    cuemuProfileEnable(0);
    cuemuProfileReset();
    coalesced_kernel<<<2, 128>>>(in, out, n);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ_INT(cuemuProfileRows(), 0);
    CUDA_OK(cudaFree(in));
    CUDA_OK(cudaFree(out));
#endif
    return emu_test_result("profile");
}
