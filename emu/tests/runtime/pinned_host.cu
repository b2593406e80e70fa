// SPDX-License-Identifier: MIT
/*
 * Runtime test: pinned host memory (cudaMallocHost, cudaHostAlloc and its flags,
 * cudaFreeHost), cudaHostRegister/Unregister with their own errors, mapped pointers, and
 * cudaPointerGetAttributes for every kind of memory.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
    size_t f0, f1, total;
    OK(cudaMemGetInfo(&f0, &total));

    // Pinned host memory is host memory: usable from the host, not counted as device memory.
    float *h_pin = NULL;
    OK(cudaMallocHost(&h_pin, 1000 * sizeof(float)));
    for (int i = 0; i < 1000; i++) h_pin[i] = (float)i;
    OK(cudaMemGetInfo(&f1, &total));
#ifdef __CUEMU__
    EXPECT(f1 == f0);
#endif
    float *d = NULL;
    OK(cudaMalloc(&d, 1000 * sizeof(float)));
    OK(cudaMemcpy(d, h_pin, 1000 * sizeof(float), cudaMemcpyHostToDevice));
    OK(cudaMemset(h_pin, 0, 1000 * sizeof(float)));   // mapped: CUDA may write it directly
    OK(cudaMemcpy(h_pin, d, 1000 * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT(h_pin[999] == 999.0f);

    // cudaHostAlloc flags, and the C++ overload cudaMallocHost(ptr, size, flags).
    int *h_mapped = NULL, *h_wc = NULL;
    OK(cudaHostAlloc(&h_mapped, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    OK(cudaMallocHost(&h_wc, 4096, cudaHostAllocWriteCombined));
    unsigned int flags = 0;
    OK(cudaHostGetFlags(&flags, h_mapped));
    EXPECT(flags & cudaHostAllocMapped);
    int *d_alias = NULL;
    OK(cudaHostGetDevicePointer(&d_alias, h_mapped, 0));
    EXPECT(d_alias != NULL);
    EXPECT_ERR(cudaHostAlloc(&h_wc, 4096, 0x100), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFreeHost(d), cudaErrorInvalidValue);        // device memory is not host memory
    EXPECT_ERR(cudaFree(h_mapped), cudaErrorInvalidValue);     // nor the other way round
    (void)cudaGetLastError();

    // Registering ordinary host memory pins it in place.
    const size_t reg_bytes = 3 * 4096;
    char *buf = (char *)aligned_alloc(4096, reg_bytes);
    OK(cudaHostRegister(buf, reg_bytes, cudaHostRegisterDefault));
    EXPECT_ERR(cudaHostRegister(buf, reg_bytes, cudaHostRegisterDefault),
               cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
    EXPECT_ERR(cudaHostRegister(buf + 4096, 4096, cudaHostRegisterDefault),
               cudaErrorHostMemoryAlreadyRegistered);      // overlapping is registering twice
    EXPECT_ERR(cudaHostRegister(h_pin, 4096, cudaHostRegisterDefault),
               cudaErrorInvalidValue);      // cudaMallocHost memory: what an H200 says (2026-11-30)
    EXPECT_ERR(cudaHostRegister(NULL, 4096, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaHostRegister(buf, 0, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    memset(buf, 7, reg_bytes);
    OK(cudaMemcpy(d, buf, 1000 * sizeof(float), cudaMemcpyHostToDevice));

    struct cudaPointerAttributes a;
    OK(cudaPointerGetAttributes(&a, buf + 10));
    EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == buf + 10);
    OK(cudaHostUnregister(buf));
    EXPECT_ERR(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
    EXPECT_ERR(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);
    int on_stack[4];
    EXPECT_ERR(cudaHostUnregister(on_stack), cudaErrorHostMemoryNotRegistered);
    (void)cudaGetLastError();
    // Unregistered again: the registration can be made anew.
    OK(cudaHostRegister(buf, reg_bytes, cudaHostRegisterMapped));
    OK(cudaHostUnregister(buf));

    // cudaPointerGetAttributes for every kind of memory.
    OK(cudaPointerGetAttributes(&a, d + 5));
    EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == d + 5 && a.hostPointer == NULL);
    OK(cudaPointerGetAttributes(&a, h_pin));
    EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == h_pin && a.devicePointer != NULL);
    void *m = NULL;
    OK(cudaMallocManaged(&m, 100));
    OK(cudaPointerGetAttributes(&a, m));
    EXPECT(a.type == cudaMemoryTypeManaged && a.hostPointer == m && a.devicePointer == m);
    OK(cudaPointerGetAttributes(&a, buf));
    EXPECT(a.type == cudaMemoryTypeUnregistered && a.devicePointer == NULL);
    EXPECT_ERR(cudaPointerGetAttributes(NULL, d), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    OK(cudaFree(m));
    OK(cudaFree(d));
    OK(cudaFreeHost(h_pin));
    OK(cudaFreeHost(h_mapped));
    OK(cudaFreeHost(h_wc));
    OK(cudaFreeHost(NULL));
    free(buf);
    OK(cudaMemGetInfo(&f1, &total));
    EXPECT(f1 == f0);
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("pinned_host: ok\n");
    return 0;
}
