// SPDX-License-Identifier: MIT
/*
 * A template kernel whose template arguments are deduced from the launch is the kernel its
 * parameters say, not the one its arguments' types would make (issue 22):
 *   1. `k(T *o, const T *f)` launched with a non-const `int *f` on two streams only reads f:
 *      no race (the buffer is larger than the emulator compares after the fact, so a wrong
 *      "may write" would be reported at the second launch);
 *   2. cudaFuncSetAttribute on the specialisation the launch deduces applies to it: a launch
 *      with more dynamic shared memory than the default limit runs;
 *   3. the same with an argument that converts (an int for a size_t parameter) and with a
 *      kernel in a namespace, launched by its qualified name.
 */
#include "rt_test.h"

template <class T>
__global__ void copy_first(T *out, const T *in)
{
    out[threadIdx.x] = in[0];
}

template <class T>
__global__ void sum_smem(T *out, const T *in, size_t n)
{
    extern __shared__ unsigned char raw[];
    T *s = reinterpret_cast<T *>(raw);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        T t = 0;
        for (size_t i = 0; i < n; i++) t += s[i];
        *out = t;
    }
}

namespace kernels {
template <typename T, int Scale = 2>
__global__ void scale_first(T *out, const T *in, int count = 1)
{
    if (threadIdx.x < (unsigned)count) out[threadIdx.x] = in[0] * Scale;
}
}  // namespace kernels

int main()
{
    const size_t big = (size_t)4 << 20;   // bytes: above what is compared after the kernels ran
    int *a, *b, *c, hc = 3;
    cudaStream_t s1, s2;
    OK(cudaMalloc(&a, 64 * sizeof(int)));
    OK(cudaMalloc(&b, 64 * sizeof(int)));
    OK(cudaMalloc(&c, big));
    OK(cudaMemcpy(c, &hc, sizeof hc, cudaMemcpyHostToDevice));
    OK(cudaStreamCreate(&s1));
    OK(cudaStreamCreate(&s2));

    // 1. c is only read, through the kernel's const T *: no race between s1 and s2
    copy_first<<<1, 32, 0, s1>>>(a, c);
    OK(cudaGetLastError());
    copy_first<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    kernels::scale_first<<<1, 32, 0, s1>>>(a, c, 32);
    OK(cudaGetLastError());
    kernels::scale_first<<<1, 32, 0, s2>>>(b, c);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    int ha[32], hb[1];
    OK(cudaMemcpy(ha, a, sizeof ha, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(hb, b, sizeof hb, cudaMemcpyDeviceToHost));
    EXPECT(ha[0] == 6 && ha[31] == 6 && hb[0] == 6);

    // 2. and 3. the limit set on sum_smem<float> is the deduced launch's (n: an int for a size_t)
    int optin = 0;
    OK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    const int n = 20000;                      // 80000 bytes: more than the default 48 KiB
    if ((size_t)optin >= n * sizeof(float)) {
        float *hin = new float[n], *din, *dout, hout = 0;
        for (int i = 0; i < n; i++) hin[i] = 1.0f;
        OK(cudaMalloc(&din, n * sizeof(float)));
        OK(cudaMalloc(&dout, sizeof(float)));
        OK(cudaMemcpy(din, hin, n * sizeof(float), cudaMemcpyHostToDevice));
        OK(cudaFuncSetAttribute(sum_smem<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)(n * sizeof(float))));
        sum_smem<<<1, 128, n * sizeof(float)>>>(dout, din, n);
        OK(cudaGetLastError());
        OK(cudaMemcpy(&hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
        EXPECT(hout == (float)n);
        OK(cudaFree(din));
        OK(cudaFree(dout));
        delete[] hin;
    }

#ifdef __CUEMU__
    const char *d = cuemuLastDiagnostic();
    EXPECT(!d || !*d);
    if (d && *d) fprintf(stderr, "reported:\n%s", d);
#endif
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(c));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    printf("template_params: %s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
