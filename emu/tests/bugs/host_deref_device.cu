// SPDX-License-Identifier: MIT
/*
 * Planted bug: host code copies to and from a cudaMalloc pointer with memcpy instead of
 * cudaMemcpy. On a GPU machine that address is out of the CPU's reach and the program dies with
 * a segmentation fault; the emulator keeps device memory inaccessible while host code runs, so
 * it faults too, and reports the access (read or write, the allocation and its cudaMalloc line,
 * the host line) as a sticky cudaErrorIllegalAddress. Managed and pinned memory stay
 * host-accessible, and a kernel or cudaMemcpy still reaches device memory.
 */
#include <cstring>
#include "../core/emu_test.h"

__global__ void twice_kernel(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

int main()
{
    EMU_ONLY();
    const int n = 1000;
    float h[n], back[n];
    for (int i = 0; i < n; i++) h[i] = (float)i;
    float *d_in = nullptr, *d_out = nullptr, *m = nullptr, *p = nullptr;

    // What is legal: managed and pinned memory from the host, device memory through the API.
    CUDA_OK(cudaMallocManaged(&m, n * sizeof(float)));
    CUDA_OK(cudaMallocHost(&p, n * sizeof(float)));
    std::memcpy(m, h, sizeof h);
    std::memcpy(p, h, sizeof h);
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    [[maybe_unused]] const int out_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    CUDA_OK(cudaMemcpy(d_in, h, sizeof h, cudaMemcpyHostToDevice));
    twice_kernel<<<(n + 255) / 256, 256>>>(d_in, d_out, n);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(back, d_out, sizeof back, cudaMemcpyDeviceToHost));
    EXPECT(back[n - 1] == 2.0f * (n - 1));
    twice_kernel<<<(n + 255) / 256, 256>>>(m, p, n);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT(p[7] == 14.0f && m[7] == 7.0f);
#ifdef __CUEMU__
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
#endif

    // BUG: memcpy reads the device pointer from host code.
    [[maybe_unused]] const int read_line = __LINE__ + 1;
    std::memcpy(back, d_out, sizeof back);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("host read of device memory", "of the 4000-byte allocation made at",
                here(__FILE__, out_line), "device memory is reached through cudaMemcpy or a kernel",
                here(__FILE__, read_line));
#endif
    cudaDeviceReset();
    [[maybe_unused]] const int in_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&d_in, n * sizeof(float)));
    // BUG: and a host write through it.
    [[maybe_unused]] const int write_line = __LINE__ + 1;
    std::memcpy(d_in, h, sizeof h);
    EXPECT_EQ_INT(cudaMemcpy(back, d_in, sizeof back, cudaMemcpyDeviceToHost), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("host write of device memory", here(__FILE__, in_line),
                here(__FILE__, write_line));
#endif
    cudaDeviceReset();
    return emu_test_result("host_deref_device");
}
