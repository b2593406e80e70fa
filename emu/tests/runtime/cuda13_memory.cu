// SPDX-License-Identifier: MIT
/*
 * Runtime test: CUDA 13.0's batched memory calls and pools by location (emu/runtime/batch.c,
 * pool.c). Each batch refuses what CUDA 13.0's documentation says it refuses (location or
 * attribute indices that do not start at 0 and grow, more entries than items, flags, the legacy
 * default stream, memory its single form refuses) and otherwise does what a loop of its single
 * form would; a discarded range reads as indeterminate (0xFF here) until written; a copy whose
 * source is read "during the API call" is done reading it when the call returns. A pinned host
 * pool hands out host memory, counted against no device, and a managed pool managed memory.
 * The 0xFF of a discarded range is the emulator's choice (a GPU's is indeterminate): this test
 * runs on the emulator only, as every runtime test does.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "rt_test.h"

__global__ void touch_kernel(char *p) { p[threadIdx.x] = 1; }

int main(void)
{
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    const size_t each = 64 << 10;
    char *m = NULL;
    OK(cudaMallocManaged(&m, 4 * each));
    void *ptrs[4] = { m, m + each, m + 2 * each, m + 3 * each };
    size_t sizes[4] = { each, each, each, each };
    cudaMemLocation dev = {}, host = {};
    dev.type = cudaMemLocationTypeDevice;
    dev.id = 0;
    host.type = cudaMemLocationTypeHost;
    cudaMemLocation locs[2] = { dev, host };

    // ---- cudaMemPrefetchBatchAsync: the location table's rules ----
    size_t ok_idx[2] = { 0, 2 }, not_zero[2] = { 1, 2 }, not_growing[2] = { 0, 0 },
           past_end[2] = { 0, 4 };
    OK(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, ok_idx, 2, 0, s));
    OK(cudaStreamSynchronize(s));
    int where = 7;
    OK(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributeLastPrefetchLocation,
                                ptrs[1], each));
    EXPECT(where == 0);
    OK(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributeLastPrefetchLocation,
                                ptrs[3], each));
    EXPECT(where == cudaCpuDeviceId);
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, not_zero, 2, 0, s),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, not_growing, 2, 0, s),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, past_end, 2, 0, s),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 1, locs, ok_idx, 2, 0, s),
               cudaErrorInvalidValue);   /* more locations than items */
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, ok_idx, 2, 1, s),
               cudaErrorInvalidValue);   /* flags are reserved: 0 */
    EXPECT_ERR(cudaMemPrefetchBatchAsync(ptrs, sizes, 4, locs, ok_idx, 2, 0, 0),
               cudaErrorInvalidValue);   /* not the legacy default stream */
    char *d = NULL;
    OK(cudaMalloc(&d, each));
    void *mixed[2] = { m, d };
    EXPECT_ERR(cudaMemPrefetchBatchAsync(mixed, sizes, 2, locs, ok_idx, 1, 0, s),
               cudaErrorInvalidValue);   /* cudaMalloc memory: as cudaMemPrefetchAsync says */
    cudaGetLastError();

    // ---- a discard: indeterminate (0xFF bytes here) until written ----
    memset(m, 0x11, 4 * each);
    OK(cudaMemDiscardBatchAsync(ptrs + 1, sizes, 1, 0, s));
    OK(cudaStreamSynchronize(s));
    EXPECT((unsigned char)m[0] == 0x11 && (unsigned char)m[each] == 0xFF &&
           (unsigned char)m[2 * each - 1] == 0xFF && (unsigned char)m[2 * each] == 0x11);
    size_t first = 0;
    OK(cudaMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 4, &dev, &first, 1, 0, s));
    OK(cudaStreamSynchronize(s));
    OK(cudaMemRangeGetAttribute(&where, sizeof where, cudaMemRangeAttributeLastPrefetchLocation,
                                m, 4 * each));
    EXPECT(where == 0);
    EXPECT_ERR(cudaMemDiscardBatchAsync(mixed, sizes, 2, 0, s), cudaErrorInvalidValue);
    cudaGetLastError();

    // ---- cudaMemcpyBatchAsync ----
    char *h = NULL;
    OK(cudaMallocHost(&h, 3 * 256));
    for (int i = 0; i < 3 * 256; i++) h[i] = (char)i;
    void *dsts[3] = { d + 512, d, d + 1024 };
    const void *srcs[3] = { h, h + 256, h + 512 };
    size_t csz[3] = { 256, 256, 256 };
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    OK(cudaMemcpyBatchAsync(dsts, srcs, csz, 3, &attr, &first, 1, s));
    char back[1280];   /* copy 1 at 0, copy 0 at 512, copy 2 at 1024 */
    OK(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s));
    OK(cudaStreamSynchronize(s));
    EXPECT(back[0] == (char)256 && back[255] == (char)511 && back[512] == (char)0 &&
           back[767] == (char)255 && back[1024] == (char)512 && back[1279] == (char)767);
    cudaMemcpyAttributes none = {};   /* srcAccessOrder Invalid: every copy needs one */
    EXPECT_ERR(cudaMemcpyBatchAsync(dsts, srcs, csz, 3, &none, &first, 1, s),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpyBatchAsync(dsts, srcs, csz, 3, &attr, &first, 1, 0),
               cudaErrorInvalidValue);
    // DuringApiCall: the (stack) source may change as soon as the call returns
    {
        int local[64];
        for (int i = 0; i < 64; i++) local[i] = 1000 + i;
        void *dl[1] = { d };
        const void *sl[1] = { local };
        size_t szl[1] = { sizeof local };
        cudaMemcpyAttributes during = {};
        during.srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
        OK(cudaMemcpyBatchAsync(dl, sl, szl, 1, &during, &first, 1, s));
        for (int i = 0; i < 64; i++) local[i] = -1;
        int got[64];
        OK(cudaMemcpyAsync(got, d, sizeof got, cudaMemcpyDeviceToHost, s));
        OK(cudaStreamSynchronize(s));
        EXPECT(got[0] == 1000 && got[63] == 1063);
    }
    cudaGetLastError();

    // ---- pools by location and type ----
    size_t free0, total, free1;
    OK(cudaMemGetInfo(&free0, &total));
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeHost;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    cudaMemPool_t hp = NULL;
    EXPECT_ERR(cudaMemPoolCreate(&hp, &props), cudaErrorInvalidValue);   /* no IPC for host */
    props.handleTypes = cudaMemHandleTypeNone;
    OK(cudaMemPoolCreate(&hp, &props));
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtReadWrite;
    OK(cudaMemPoolGetAccess(&flags, hp, &dev));
    EXPECT(flags == cudaMemAccessFlagsProtNone);   /* the host's alone until granted */
    void *p = NULL;
    OK(cudaMallocFromPoolAsync(&p, 1 << 20, hp, s));
    OK(cudaStreamSynchronize(s));
    cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, p));
    EXPECT(pa.type == cudaMemoryTypeHost);
    memset(p, 3, 1 << 20);   /* the host writes it directly */
    OK(cudaMemGetInfo(&free1, &total));
    EXPECT(free1 == free0);   /* pinned host memory: no device's */
    OK(cudaFreeAsync(p, s));
    OK(cudaStreamSynchronize(s));
    OK(cudaMemPoolDestroy(hp));

    cudaMemPool_t mp = NULL, mp2 = NULL, hostdef = NULL, devdef = NULL, devdef2 = NULL;
    cudaMemLocation nowhere = {};
    nowhere.type = cudaMemLocationTypeNone;
    OK(cudaMemGetDefaultMemPool(&mp, &nowhere, cudaMemAllocationTypeManaged));
    OK(cudaMemGetDefaultMemPool(&mp2, &nowhere, cudaMemAllocationTypeManaged));
    EXPECT(mp != NULL && mp == mp2);
    OK(cudaMemGetDefaultMemPool(&hostdef, &host, cudaMemAllocationTypePinned));
    OK(cudaMemGetDefaultMemPool(&devdef, &dev, cudaMemAllocationTypePinned));
    OK(cudaDeviceGetDefaultMemPool(&devdef2, 0));
    EXPECT(devdef == devdef2 && hostdef != devdef && hostdef != mp);
    EXPECT_ERR(cudaMemGetDefaultMemPool(&mp2, &nowhere, cudaMemAllocationTypePinned),
               cudaErrorInvalidValue);
    OK(cudaMallocFromPoolAsync(&p, 4096, mp, s));
    OK(cudaPointerGetAttributes(&pa, p));
    EXPECT(pa.type == cudaMemoryTypeManaged);
    OK(cudaFreeAsync(p, s));
    OK(cudaStreamSynchronize(s));

    OK(cudaFreeHost(h));
    OK(cudaFree(d));
    OK(cudaFree(m));

    // Last, as it ends the context: a kernel given host pool memory its device may not use
    // faults on a GPU; here the launch is refused and the fault made the sticky error.
    OK(cudaMemPoolCreate(&hp, &props));
    OK(cudaMallocFromPoolAsync(&p, 4096, hp, s));
    OK(cudaStreamSynchronize(s));
    touch_kernel<<<1, 32, 0, s>>>((char *)p);
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
    OK(cudaDeviceReset());
    if (failures) fprintf(stderr, "cuda13_memory: %d failure(s)\n", failures);
    else printf("cuda13_memory: passed\n");
    return failures ? 1 : 0;
}
