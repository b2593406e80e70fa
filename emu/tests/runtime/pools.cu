// SPDX-License-Identifier: MIT
/*
 * Runtime test: cudaMallocAsync/cudaFreeAsync and memory pools. The statistics must move like
 * a GPU's: freed blocks stay reserved until a synchronisation releases the reserve down to the
 * release threshold; trimming releases unused reserve; used memory returns to zero.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "rt_test.h"

static unsigned long long pool_stat(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
    unsigned long long v = ~0ull;
    OK(cudaMemPoolGetAttribute(pool, attr, &v));
    return v;
}

int main(void)
{
    int supported = 0;
    OK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
    EXPECT(supported == 1);
    size_t free0, total;
    OK(cudaMemGetInfo(&free0, &total));

    cudaMemPool_t def = NULL, cur = NULL;
    OK(cudaDeviceGetDefaultMemPool(&def, 0));
    OK(cudaDeviceGetMemPool(&cur, 0));
    EXPECT(def != NULL && def == cur);
    EXPECT(pool_stat(def, cudaMemPoolAttrReleaseThreshold) == 0);

    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // Threshold 0 (the default): freed memory is reserved until the next synchronisation.
    const size_t bytes = 3u << 20;
    float *a = NULL;
    OK(cudaMallocAsync(&a, bytes, s));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemCurrent) >= bytes);
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) >= pool_stat(def, cudaMemPoolAttrUsedMemCurrent));
    OK(cudaMemsetAsync(a, 0, bytes, s));
    OK(cudaFreeAsync(a, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemCurrent) == 0);
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) == 0);
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemHigh) >= bytes);
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemHigh) >= bytes);

    // A high threshold keeps the reserve across synchronisations, and it is reused.
    unsigned long long keep = ~0ull;
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep));
    EXPECT(pool_stat(def, cudaMemPoolAttrReleaseThreshold) == keep);
    OK(cudaMallocAsync(&a, bytes, s));
    unsigned long long reserved = pool_stat(def, cudaMemPoolAttrReservedMemCurrent);
    OK(cudaFreeAsync(a, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemCurrent) == 0);
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) == reserved);
    size_t free1;
    OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 < free0);                     // the reserve is device memory in use
    for (int i = 0; i < 10; i++) {             // steady state: no growth
        OK(cudaMallocAsync(&a, bytes, s));
        OK(cudaFreeAsync(a, s));
    }
    OK(cudaDeviceSynchronize());
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) == reserved);

    // Resetting the high watermarks is allowed only to 0.
    unsigned long long zero = 0, one = 1;
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &zero));
    EXPECT(pool_stat(def, cudaMemPoolAttrUsedMemHigh) == 0);
    EXPECT_ERR(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemHigh, &one), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPoolSetAttribute(def, cudaMemPoolAttrUsedMemCurrent, &zero), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // Trim releases unused reserve, down to what it is asked to keep.
    OK(cudaMemPoolTrimTo(def, 0));
    EXPECT(pool_stat(def, cudaMemPoolAttrReservedMemCurrent) == 0);
    OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 == free0);

    // A pool of our own, used directly and as the device's current pool.
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = NULL;
    OK(cudaMemPoolCreate(&pool, &props));
    int *b = NULL, *c = NULL;
    OK(cudaMallocFromPoolAsync(&b, 1000, pool, s));
    OK(cudaMallocAsync(&c, 1000, pool, s));             // the C++ overload taking a pool
    EXPECT(pool_stat(pool, cudaMemPoolAttrUsedMemCurrent) >= 2000);
    OK(cudaDeviceSetMemPool(0, pool));
    OK(cudaDeviceGetMemPool(&cur, 0));
    EXPECT(cur == pool);
    int *d = NULL;
    OK(cudaMallocAsync(&d, 1000, s));
    EXPECT(pool_stat(pool, cudaMemPoolAttrUsedMemCurrent) >= 3000);
    OK(cudaFreeAsync(b, s));
    OK(cudaFreeAsync(c, s));
    OK(cudaFree(d));                                    // cudaFree works on pool memory too
    OK(cudaStreamSynchronize(s));
    // (An H200 with CUDA 13.0 still counted the block given to cudaFree in UsedMemCurrent,
    // 1000 bytes, with ReservedMemCurrent 0, 2026-11-30: the emulator counts it freed.)
    EXPECT(pool_stat(pool, cudaMemPoolAttrUsedMemCurrent) == 0);
    EXPECT(pool_stat(pool, cudaMemPoolAttrReservedMemCurrent) == 0);
    OK(cudaDeviceSetMemPool(0, def));

    // Access: the owning device has read-write access.
    struct cudaMemAccessDesc desc;
    desc.location = props.location;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    OK(cudaMemPoolSetAccess(pool, &desc, 1));
    cudaMemAccessFlags fl = cudaMemAccessFlagsProtNone;
    struct cudaMemLocation loc = props.location;
    OK(cudaMemPoolGetAccess(&fl, pool, &loc));
    EXPECT(fl == cudaMemAccessFlagsProtReadWrite);

    // Errors: the default pool cannot be destroyed; bad properties; bad device.
    EXPECT_ERR(cudaMemPoolDestroy(def), cudaErrorInvalidValue);
    OK(cudaMemPoolDestroy(pool));
    props.location.id = 5;
    EXPECT_ERR(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);   // as on an H200
    EXPECT_ERR(cudaDeviceGetDefaultMemPool(&cur, 3), cudaErrorInvalidDevice);
    (void)cudaGetLastError();

#ifdef __CUEMU__
    // A second cudaFreeAsync of a pointer whose first has not run yet is refused at that call,
    // and the diagnostic names both calls (not a later call the queued free would fail).
    {
        void *x = NULL;
        OK(cudaMallocAsync(&x, 1000, s));
        const int first_line = __LINE__ + 1;
        OK(cudaFreeAsync(x, s));
        cuemuClearDiagnostic();
        const int second_line = __LINE__ + 1;
        EXPECT_ERR(cudaFreeAsync(x, s), cudaErrorInvalidValue);
        char want[400];
        snprintf(want, sizeof want, "at %s:%d: freed twice: the cudaFreeAsync at %s:%d frees it",
                 __FILE__, second_line, __FILE__, first_line);
        EXPECT(strstr(cuemuLastDiagnostic(), want) != NULL);
        (void)cudaGetLastError();
        OK(cudaStreamSynchronize(s));
        OK(cudaGetLastError());
    }
#endif

    // Reserve counts toward cudaMemGetInfo and comes back: memory in use returns to start.
    unsigned long long thr0 = 0;
    OK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr0));
    OK(cudaDeviceSynchronize());
    OK(cudaStreamDestroy(s));
    OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 == free0);
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("pools: ok\n");
    return 0;
}
