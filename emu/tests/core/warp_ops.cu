// SPDX-License-Identifier: MIT
/*
 * Warp operations honour their masks: __shfl_sync/_up/_down/_xor (with width), __ballot_sync,
 * __any_sync/__all_sync, __activemask, __syncwarp, a warp-shuffle reduction, partial masks and
 * a block whose last warp is partial (40 threads).
 */
#include "emu_test.h"

__global__ void shuffles_kernel(int *out)
{
    int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    int v = 100 * w + lane;
    int *o = out + threadIdx.x * 8;
    o[0] = __shfl_sync(0xffffffff, v, 3);                // lane 3 of this warp
    o[1] = __shfl_up_sync(0xffffffff, v, 2);             // lane - 2, own value below 2
    o[2] = __shfl_down_sync(0xffffffff, v, 5);           // lane + 5, own value at the top
    o[3] = __shfl_xor_sync(0xffffffff, v, 1);            // neighbour swap
    o[4] = __shfl_sync(0xffffffff, v, lane + 1, 8);      // rotate within groups of 8
    o[5] = __shfl_down_sync(0xffffffff, v, 1, 16);       // no crossing into the next 16
    o[6] = (int)__ballot_sync(0xffffffff, lane % 4 == 0);
    o[7] = __any_sync(0xffffffff, lane == 31) * 2 + __all_sync(0xffffffff, lane < 32);
}

__global__ void warp_reduce_kernel(const float *in, float *out)
{
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    if (threadIdx.x % 32 == 0) atomicAdd(out, v);
}

__global__ void partial_mask_kernel(int *out)
{
    int lane = threadIdx.x % 32;
    if (lane < 16) {
        unsigned m = 0x0000ffffu;
        int v = __shfl_xor_sync(m, lane * 10, 2);
        unsigned b = __ballot_sync(m, lane & 1);
        __syncwarp(m);
        out[threadIdx.x] = v + (int)(b == 0xaaaau) * 1000;
    } else {
        unsigned m = 0xffff0000u;
        double d = __shfl_sync(m, (double)lane * 0.5, 31);
        __syncwarp(m);
        out[threadIdx.x] = (int)(d * 2.0);
    }
}

__global__ void short_warp_kernel(int *out)
{
    // 40 threads: the second warp has 8 lanes, and a full mask names only those that exist
    unsigned act = __activemask();
    int s = __shfl_down_sync(0xffffffff, (int)threadIdx.x, 4);
    unsigned b = __ballot_sync(0xffffffff, 1);
    __syncwarp();
    out[threadIdx.x * 3] = (int)act;
    out[threadIdx.x * 3 + 1] = s;
    out[threadIdx.x * 3 + 2] = (int)b;
}

__global__ void early_exit_kernel(int *out, int n)
{
    int lane = threadIdx.x;
    if (lane >= n) return;                     // lanes past n leave before the shuffle
    int v = lane;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    if (lane == 0) out[0] = v;
}

int main()
{
    int *d = nullptr, h[64 * 8];
    CUDA_OK(cudaMalloc(&d, sizeof h));
    shuffles_kernel<<<1, 64>>>(d);
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int t = 0; t < 64; t++) {
        int lane = t % 32, base = 100 * (t / 32);
        int *o = h + t * 8;
        EXPECT_EQ_INT(o[0], base + 3);
        EXPECT_EQ_INT(o[1], base + (lane >= 2 ? lane - 2 : lane));
        EXPECT_EQ_INT(o[2], base + (lane + 5 < 32 ? lane + 5 : lane));
        EXPECT_EQ_INT(o[3], base + (lane ^ 1));
        EXPECT_EQ_INT(o[4], base + (lane & ~7) + ((lane + 1) & 7));
        EXPECT_EQ_INT(o[5], base + ((lane & 15) + 1 < 16 ? lane + 1 : lane));
        EXPECT_EQ_INT((unsigned)o[6], 0x11111111u);
        EXPECT_EQ_INT(o[7], 3);
    }

    float hin[256], *din = nullptr, *dout = nullptr, sum = 0, want = 0;
    for (int i = 0; i < 256; i++) { hin[i] = (float)(i % 17); want += hin[i]; }
    CUDA_OK(cudaMalloc(&din, sizeof hin));
    CUDA_OK(cudaMalloc(&dout, sizeof(float)));
    CUDA_OK(cudaMemcpy(din, hin, sizeof hin, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0, sizeof(float)));
    warp_reduce_kernel<<<2, 128>>>(din, dout);
    CUDA_OK(cudaMemcpy(&sum, dout, sizeof sum, cudaMemcpyDeviceToHost));
    EXPECT(sum == want);

    partial_mask_kernel<<<1, 32>>>(d);
    CUDA_OK(cudaMemcpy(h, d, 32 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int l = 0; l < 16; l++) EXPECT_EQ_INT(h[l], (l ^ 2) * 10 + 1000);
    for (int l = 16; l < 32; l++) EXPECT_EQ_INT(h[l], 31);

    short_warp_kernel<<<1, 40>>>(d);
    CUDA_OK(cudaMemcpy(h, d, 40 * 3 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int t = 0; t < 40; t++) {
        int warp_lanes = t < 32 ? 32 : 8, lane = t % 32;
        unsigned full = t < 32 ? 0xffffffffu : 0xffu;
        EXPECT_EQ_INT((unsigned)h[t * 3], full);
        if (lane + 4 < warp_lanes) EXPECT_EQ_INT(h[t * 3 + 1], t + 4);   // else undefined
        EXPECT_EQ_INT((unsigned)h[t * 3 + 2], full);
    }
#ifdef __CUEMU__
    // undefined on a GPU (the mask names lanes that exited); the emulator leaves those lanes
    // out, sums what is there, and says so
    early_exit_kernel<<<1, 32>>>(d, 32);
    CUDA_OK(cudaMemcpy(h, d, sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ_INT(h[0], 31 * 32 / 2);
    EXPECT(cuemuLastDiagnostic() == nullptr || std::strstr(cuemuLastDiagnostic(), "exited") == nullptr);
    early_exit_kernel<<<1, 32>>>(d, 20);
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_DIAG("warning: kernel early_exit_kernel: __shfl_down_sync at", "names lanes that exited");
    cuemuClearDiagnostic();
#endif
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d); cudaFree(din); cudaFree(dout);
    return emu_test_result("warp_ops");
}
