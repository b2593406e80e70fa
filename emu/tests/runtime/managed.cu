// SPDX-License-Identifier: MIT
/*
 * Runtime test: cudaMallocManaged, and cudaMemPrefetchAsync / cudaMemAdvise with CUDA 13's
 * signatures (a cudaMemLocation, and prefetch flags) and their argument checks.
 */
#include <cstdio>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
    const int n = 4099;
    float *m = NULL;
    OK(cudaMallocManaged(&m, n * sizeof(float)));                      // flags default (C++)
    double *m2 = NULL;
    OK(cudaMallocManaged(&m2, 64 * sizeof(double), cudaMemAttachHost));
    for (int i = 0; i < n; i++) m[i] = (float)i;                       // the host writes it directly

    struct cudaMemLocation dev = { cudaMemLocationTypeDevice, 0 };
    struct cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
    struct cudaMemLocation bad_dev = { cudaMemLocationTypeDevice, 3 };
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMemPrefetchAsync(m, n * sizeof(float), dev, 0, s));
    OK(cudaMemPrefetchAsync(m + 100, 10 * sizeof(float), host, 0));
    OK(cudaStreamSynchronize(s));
    EXPECT(m[n - 1] == (float)(n - 1));                                 // contents survive migration

    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetReadMostly, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseUnsetReadMostly, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, host));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetAccessedBy, dev));
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseUnsetAccessedBy, dev));

    // What the hints left behind, read back.
    int attr = -7;
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocation, m, n * sizeof(float)));
    // Locations are kept per page: the whole range is mixed (an H200 with CUDA 13.0 answered
    // cudaInvalidDeviceId, -2, here, 2026-11-30), the pages prefetched back are on the host,
    // the others on the device.
    EXPECT(attr == cudaInvalidDeviceId);
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocation, m + 100, 10 * sizeof(float)));
    EXPECT(attr == cudaCpuDeviceId);
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocation, m + 3000, 1000 * sizeof(float)));
    EXPECT(attr == 0);
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocationType, m, n * sizeof(float)));
    EXPECT(attr == cudaMemLocationTypeInvalid);
    OK(cudaMemPrefetchAsync(m, n * sizeof(float), dev, 0, s));
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocation, m, n * sizeof(float)));
    EXPECT(attr == 0);
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributePreferredLocation, m, n * sizeof(float)));
    EXPECT(attr == cudaCpuDeviceId);                                  // the last preference was the host
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeReadMostly, m, n * sizeof(float)));
    EXPECT(attr == 0);
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetReadMostly, dev));
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeReadMostly, m, n * sizeof(float)));
    EXPECT(attr == 1);
    int by[2] = { 7, 7 };
    OK(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetAccessedBy, dev));
    OK(cudaMemRangeGetAttribute(by, sizeof by, cudaMemRangeAttributeAccessedBy, m, n * sizeof(float)));
    EXPECT(by[0] == 0 && by[1] == cudaInvalidDeviceId);
    OK(cudaMemRangeGetAttribute(&attr, sizeof attr, cudaMemRangeAttributeLastPrefetchLocation, m2, 64));
    EXPECT(attr == cudaInvalidDeviceId);   // never prefetched (an H200 answered 0 here)
    EXPECT_ERR(cudaMemRangeGetAttribute(&attr, 2, cudaMemRangeAttributeReadMostly, m, 4), cudaErrorInvalidValue);

    // The checks.
    EXPECT_ERR(cudaMemPrefetchAsync(m, n * sizeof(float), bad_dev, 0, s), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaMemPrefetchAsync(m, n * sizeof(float), dev, 1, s), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemAdvise(m, n * sizeof(float), (cudaMemoryAdvise)99, dev), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemAdvise(m, n * sizeof(float), cudaMemAdviseSetPreferredLocation, bad_dev),
               cudaErrorInvalidValue);                   // what an H200 says (2026-11-30)
    void *m0 = (void *)1;
    OK(cudaMallocManaged(&m0, 0));                        // succeeds on an H200 too
    EXPECT_ERR(cudaMallocManaged(&m2, 64, 0x10), cudaErrorInvalidValue);
#ifdef __CUEMU__
    {
        // The emulator's teaching aid: bytes whose last prefetch went to the device, and their
        // peak. A page is counted for the bytes of the allocation in it.
        size_t now = 1, peak = 1, page = 4096;
        float *p = NULL;
        OK(cudaMallocManaged(&p, 64 * page));
        cuemuManagedDeviceBytes(&now, &peak, 1);
        const size_t base_now = now;
        OK(cudaMemPrefetchAsync(p, 64 * page, dev, 0, 0));
        cuemuManagedDeviceBytes(&now, &peak, 0);
        EXPECT(now == base_now + 64 * page && peak == now);
        OK(cudaMemPrefetchAsync(p, 64 * page, host, 0, 0));
        OK(cudaMemPrefetchAsync(p, 64 * page, host, 0, 0));   // twice to the host: no change
        cuemuManagedDeviceBytes(&now, &peak, 0);
        EXPECT(now == base_now && peak == base_now + 64 * page);
        OK(cudaMemPrefetchAsync((char *)p + 10 * page, 3 * page, dev, 0, 0));
        cuemuManagedDeviceBytes(&now, &peak, 1);
        EXPECT(now >= base_now + 3 * page && now <= base_now + 4 * page && peak == now);
        OK(cudaFree(p));                                          // freeing forgets its pages
        cuemuManagedDeviceBytes(&now, &peak, 0);
        EXPECT(now == base_now);
    }
    // pageableMemoryAccess is 0 on this device: only managed memory can be prefetched, and
    // only within its allocation.
    float *d = NULL;
    OK(cudaMalloc(&d, 64));
    EXPECT_ERR(cudaMemPrefetchAsync(d, 64, dev, 0, s), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPrefetchAsync(m, (n + 1) * sizeof(float), dev, 0, s), cudaErrorInvalidValue);
    OK(cudaFree(d));
#endif
    (void)cudaGetLastError();

    int cma = -1;
    OK(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, 0));
    EXPECT(cma == 0 || cma == 1);

    OK(cudaStreamDestroy(s));
    OK(cudaFree(m));
    OK(cudaFree(m2));
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("managed: ok\n");
    return 0;
}
