// SPDX-License-Identifier: MIT
/*
 * Planted bug: a kernel on device 0 reads device 1's memory without peer access. On a GPU the
 * kernel stops with an illegal address; the emulator (CUEMU_DEVICES=2) reports both devices,
 * the kernel and its launch line, the allocation and its cudaMalloc line, and the call that was
 * missing, and the launch fails with cudaErrorIllegalAddress. With cudaDeviceEnablePeerAccess
 * the same kernel works. Pool memory (cudaMallocAsync) is not covered by peer access: it needs
 * cudaMemPoolSetAccess, and the report says so.
 */
#include <cstdlib>
#include <cuda_runtime.h>
#include "../core/emu_test.h"

__global__ void scale_kernel(const float *in, float *out, int n, float k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = k * in[i];
}

#ifdef __CUEMU__
static const int N = 777;
static int launch_line;

// in: device 1's memory, filled with i; out: device 0's. Launched with device 0 current.
static void run(const float *in, float *out)
{
    launch_line = __LINE__ + 1;
    scale_kernel<<<(N + 127) / 128, 128>>>(in, out, N, 3.0f);
}

static int result_ok(const float *out)
{
    float h[N];
    if (cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    for (int i = 0; i < N; i++)
        if (h[i] != 3.0f * (float)i) return 0;
    return 1;
}

static float *device1_input(int *line)
{
    float h[N], *p = NULL;
    for (int i = 0; i < N; i++) h[i] = (float)i;
    CUDA_OK(cudaSetDevice(1));
    *line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&p, sizeof h));
    CUDA_OK(cudaMemcpy(p, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaSetDevice(0));
    return p;
}
#endif

int main()
{
    EMU_ONLY();
#ifdef __CUEMU__
    setenv("CUEMU_DEVICES", "2", 1);
    int alloc_line = 0;
    float *in = device1_input(&alloc_line), *out = NULL;
    CUDA_OK(cudaMalloc(&out, N * sizeof(float)));

    // BUG: device 0 never enabled peer access to device 1.
    run(in, out);
    CUDA_OK(cudaGetLastError());                 // the launch itself is queued fine
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("kernel scale_kernel launched at", here(__FILE__, launch_line),
                "runs on device 0 and touched memory of device 1 without peer access",
                here(__FILE__, alloc_line), "on device 1", "cudaErrorIllegalAddress",
                "cudaDeviceEnablePeerAccess(1, 0) with device 0 current");
    EXPECT_EQ_INT(cudaMemcpy(out, in, 4, cudaMemcpyDeviceToDevice), cudaErrorIllegalAddress);

    // Fixed: enable it first; the same kernel works and nothing is reported.
    cudaDeviceReset();
    cuemuClearDiagnostic();
    in = device1_input(&alloc_line);
    CUDA_OK(cudaMalloc(&out, N * sizeof(float)));
    CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    run(in, out);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT(result_ok(out));
    EXPECT(cuemuLastDiagnostic()[0] == '\0');

    // Peer access is one way: device 1 reading device 0's memory still needs its own enable.
    CUDA_OK(cudaSetDevice(1));
    scale_kernel<<<(N + 127) / 128, 128>>>(out, in, N, 1.0f);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("runs on device 1 and touched memory of device 0 without peer access",
                "cudaDeviceEnablePeerAccess(0, 0) with device 1 current");

    // BUG: pool memory of device 1, with peer access enabled but no cudaMemPoolSetAccess.
    cudaDeviceReset();
    cuemuClearDiagnostic();
    CUDA_OK(cudaSetDevice(1));
    float *q = NULL, h[N];
    for (int i = 0; i < N; i++) h[i] = (float)i;
    [[maybe_unused]] const int pool_line = __LINE__ + 1;
    CUDA_OK(cudaMallocAsync(&q, sizeof h, 0));
    CUDA_OK(cudaMemcpy(q, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMalloc(&out, N * sizeof(float)));
    CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
    run(q, out);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT_DIAG("cudaMallocAsync allocation made at", here(__FILE__, pool_line),
                "from device 1's memory pool", "cudaMemPoolSetAccess",
                "cudaDeviceEnablePeerAccess does not cover memory pools");

    // Fixed: the pool grants device 0 access.
    cudaDeviceReset();
    cuemuClearDiagnostic();
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMallocAsync(&q, sizeof h, 0));
    CUDA_OK(cudaMemcpy(q, h, sizeof h, cudaMemcpyHostToDevice));
    cudaMemPool_t pool;
    CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, 1));
    cudaMemAccessDesc grant = {};
    grant.location.type = cudaMemLocationTypeDevice;
    grant.location.id = 0;
    grant.flags = cudaMemAccessFlagsProtReadWrite;
    CUDA_OK(cudaMemPoolSetAccess(pool, &grant, 1));
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMalloc(&out, sizeof h));
    run(q, out);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT(result_ok(out));
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
    cudaDeviceReset();
#endif
    return emu_test_result("peer_access_missing");
}
