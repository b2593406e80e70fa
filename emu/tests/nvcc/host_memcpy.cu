// SPDX-License-Identifier: MIT
/*
 * Planted bug for cuemu-nvcc's test: chapter 03's mutant 03.1, a host memcpy from device memory
 * where cudaMemcpy belongs, in a function a caller without line information (Python, through
 * ctypes) would call. Built with -D_FORTIFY_SOURCE=2 -O2, as Ubuntu's compilers build by
 * default, the call's line is the C library's inline wrapper's (string_fortified.h): the
 * report must still name this file's line.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" __attribute__((noinline)) int roundtrip(void *h_out, const void *h_in, size_t bytes)
{
    void *d_buf = NULL;
    cudaError_t e = cudaMalloc(&d_buf, bytes);
    if (e == cudaSuccess) e = cudaMemcpy(d_buf, h_in, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        memcpy(h_out, d_buf, bytes);   // @host-read BUG: cudaMemcpy(..., cudaMemcpyDeviceToHost)
        e = cudaDeviceSynchronize();
    }
    cudaFree(d_buf);
    return (int)e;
}

int main()
{
    const size_t bytes = (size_t)1 << 20;
    char *in = (char *)calloc(bytes, 1), *out = (char *)calloc(bytes, 1);
    int e = roundtrip(out, in, bytes);
    printf("%s %d\n", cudaGetErrorName((cudaError_t)e), out[5]);
    free(in);
    free(out);
    return e == cudaSuccess ? 0 : 1;
}
