// SPDX-License-Identifier: MIT
/*
 * Runtime test: cudaMalloc/cudaFree accounting seen through cudaMemGetInfo, alignment,
 * out-of-memory (reported once, not sticky), bad frees, cudaFree(NULL), and memory in use
 * returning to its starting value. Emulator-only rules (2 MiB granule, 0xFF poison) are
 * under __CUEMU__ so the file stays valid CUDA.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "rt_test.h"

static size_t used_now(void)
{
    size_t free_b = 0, total_b = 0;
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(free_b <= total_b);
    return total_b - free_b;
}

int main(void)
{
    size_t start = used_now();
    size_t free_b, total_b;
    OK(cudaMemGetInfo(&free_b, &total_b));

    // Every size lands 256-byte aligned, the guarantee cudaMalloc makes.
    const size_t sizes[] = { 1, 3, 255, 256, 257, 4000, 4096, 4097, 1 << 20, (3u << 20) + 7 };
    void *ptrs[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ptrs[i] = NULL;
        OK(cudaMalloc(&ptrs[i], sizes[i]));
        EXPECT(ptrs[i] != NULL);
        EXPECT(((uintptr_t)ptrs[i] & 255) == 0);
    }
    EXPECT(used_now() > start);
#ifdef __CUEMU__
    // The emulator's rule: each allocation counts its size rounded up to 2 MiB.
    size_t expect_used = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        expect_used += (sizes[i] + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    EXPECT(used_now() - start == expect_used);
    // Fresh device memory is poisoned: 0xFF bytes read as NaN / -1.
    unsigned char probe[4096];
    OK(cudaMemcpy(probe, ptrs[7], sizeof probe, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof probe; i++) EXPECT(probe[i] == 0xFF);
    int m1;
    OK(cudaMemcpy(&m1, ptrs[3], sizeof m1, cudaMemcpyDeviceToHost));
    EXPECT(m1 == -1);
#endif
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) OK(cudaFree(ptrs[i]));
    EXPECT(used_now() == start);

    // cudaMalloc of 0 bytes and cudaFree(NULL) are both fine.
    void *z = (void *)&z;
    OK(cudaMalloc(&z, 0));
    OK(cudaFree(NULL));

    // Out of memory: the error is returned and recorded once, and is not sticky.
    void *huge = NULL;
    EXPECT_ERR(cudaMalloc(&huge, (size_t)1 << 50), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaErrorMemoryAllocation);
    EXPECT_ERR(cudaGetLastError(), cudaSuccess);
    void *after = NULL;
    OK(cudaMalloc(&after, 1000));
    // One byte more than is free fails too.
    OK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT_ERR(cudaMalloc(&huge, free_b + 1), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();

    // Bad frees are cudaErrorInvalidValue, like CUDA.
    EXPECT_ERR(cudaFree((char *)after + 4), cudaErrorInvalidValue);
    int on_stack = 0;
    EXPECT_ERR(cudaFree(&on_stack), cudaErrorInvalidValue);
    OK(cudaFree(after));
#ifdef __CUEMU__
    // A second free of the same pointer is undefined on a GPU; the emulator names it.
    EXPECT_ERR(cudaFree(after), cudaErrorInvalidValue);
    EXPECT(strstr(cuemuLastDiagnostic(), "freed twice") != NULL);
    cuemuClearDiagnostic();
#endif
    (void)cudaGetLastError();
    EXPECT(used_now() == start);

    // cudaMallocPitch memory and managed memory are counted and given back the same way.
    void *pitched = NULL, *managed = NULL;
    size_t pitch = 0;
    OK(cudaMallocPitch(&pitched, &pitch, 1000, 37));
    OK(cudaMallocManaged(&managed, 12345));
    EXPECT(used_now() > start);
    OK(cudaFree(pitched));
    OK(cudaFree(managed));
    EXPECT(used_now() == start);

    // Leaks are visible, and cudaDeviceReset reclaims them.
    void *leak = NULL;
    OK(cudaMalloc(&leak, 5000));
    EXPECT(used_now() > start);
    OK(cudaDeviceReset());
#ifdef __CUEMU__
    EXPECT(used_now() == 0);
#else
    EXPECT(used_now() <= start);
#endif

    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("memory_accounting: ok\n");
    return 0;
}
