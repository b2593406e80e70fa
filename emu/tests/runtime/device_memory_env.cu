// SPDX-License-Identifier: MIT
/*
 * Runtime test (emulator only): CUEMU_DEVICE_MEMORY sets the emulated device's memory;
 * cudaMalloc past it is cudaErrorMemoryAllocation. On a GPU the test has nothing to check.
 */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
#ifdef __CUEMU__
    // Read once, at the first call that needs it: set it before any CUDA call.
    setenv("CUEMU_DEVICE_MEMORY", "64M", 1);
    size_t free_b = 0, total_b = 0;
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(total_b == (size_t)64 << 20);
    EXPECT(free_b == total_b);
    struct cudaDeviceProp prop;
    OK(cudaGetDeviceProperties(&prop, 0));
    EXPECT(prop.totalGlobalMem == total_b);

    void *a = NULL, *b = NULL, *c = NULL;
    OK(cudaMalloc(&a, 30u << 20));
    OK(cudaMalloc(&b, 30u << 20));
    EXPECT_ERR(cudaMalloc(&c, 30u << 20), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(free_b == (size_t)4 << 20);
    OK(cudaMalloc(&c, 4u << 20));          // exactly what is left fits
    OK(cudaFree(a));
    OK(cudaFree(b));
    OK(cudaFree(c));
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(free_b == total_b);
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("device_memory_env: ok\n");
    return 0;
}
