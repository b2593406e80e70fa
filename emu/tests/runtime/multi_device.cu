// SPDX-License-Identifier: MIT
/*
 * Runtime test: two devices (CUEMU_DEVICES=2 on the emulator; a GPU machine needs two GPUs,
 * else it skips). What is per device (current device per host thread, properties, memory
 * accounting, default streams, pools), peer access and its error codes, peer copies, streams
 * and events owned by the device current at their creation, managed memory advice and prefetch
 * naming device 1, and cudaDeviceSynchronize waiting for the current device only.
 */
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cuda_runtime.h>

#include "rt_test.h"

__global__ void fill_kernel(float *p, int n, float base)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = base + (float)i;
}

// Reads another device's memory when peer access allows it.
__global__ void scale_kernel(const float *in, float *out, int n, float k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = k * in[i];
}

static const int N = 1000;

static int same(const float *h, float base, float k)
{
    for (int i = 0; i < N; i++)
        if (h[i] != k * (base + (float)i)) {
            fprintf(stderr, "element %d is %g, expected %g\n", i, h[i], k * (base + (float)i));
            return 0;
        }
    return 1;
}

int main(void)
{
#ifdef __CUEMU__
    setenv("CUEMU_DEVICES", "2", 1);   // read at the first call that needs it
#endif
    int n = 0;
    OK(cudaGetDeviceCount(&n));
    if (n < 2) {
        printf("multi_device: needs two devices (%d here): skipped\n", n);
        return 77;
    }
#ifdef __CUEMU__
    EXPECT(n == 2);
#endif
    const size_t bytes = N * sizeof(float);
    float h[N];

    // ---- the current device: per host thread, validated ---------------------------------
    int dev = -1;
    OK(cudaGetDevice(&dev));
    EXPECT(dev == 0);
    EXPECT_ERR(cudaSetDevice(n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaSetDevice(-1), cudaErrorInvalidDevice);
    OK(cudaSetDevice(1));
    OK(cudaGetDevice(&dev));
    EXPECT(dev == 1);
    int other = -1;
    std::thread([&other] { cudaGetDevice(&other); }).join();
    EXPECT(other == 0);   // a new host thread starts on device 0
    OK(cudaSetDevice(0));

    // ---- properties: one each, on distinct bus slots ----------------------------------------
    cudaDeviceProp p0, p1;
    OK(cudaGetDeviceProperties(&p0, 0));
    OK(cudaGetDeviceProperties(&p1, 1));
    EXPECT_ERR(cudaGetDeviceProperties(&p1, n), cudaErrorInvalidDevice);
    EXPECT(p0.pciBusID != p1.pciBusID || p0.pciDomainID != p1.pciDomainID);
    EXPECT(memcmp(p0.uuid.bytes, p1.uuid.bytes, sizeof p0.uuid.bytes) != 0);
    int bus1 = -1;
    OK(cudaDeviceGetAttribute(&bus1, cudaDevAttrPciBusId, 1));
    EXPECT(bus1 == p1.pciBusID);
    EXPECT_ERR(cudaDeviceGetAttribute(&bus1, cudaDevAttrPciBusId, n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);  // kept until read
    // the bus id string names each device, and leads back to it
    char busid[2][32];
    OK(cudaDeviceGetPCIBusId(busid[0], sizeof busid[0], 0));
    OK(cudaDeviceGetPCIBusId(busid[1], sizeof busid[1], 1));
    EXPECT(strcmp(busid[0], busid[1]) != 0);
    int back = -1;
    OK(cudaDeviceGetByPCIBusId(&back, busid[1]));
    EXPECT(back == 1);
    // the link: peer access supported both ways, not to itself
    int p2p = -1;
    OK(cudaDeviceGetP2PAttribute(&p2p, cudaDevP2PAttrAccessSupported, 0, 1));
#ifdef __CUEMU__
    EXPECT(p2p == 1);
#endif
    EXPECT_ERR(cudaDeviceGetP2PAttribute(&p2p, cudaDevP2PAttrAccessSupported, 0, 0), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);

    // ---- memory: each device counts its own ------------------------------------------------
    size_t free0 = 0, free1 = 0, total = 0, f = 0;
    OK(cudaMemGetInfo(&free0, &total));
    OK(cudaSetDevice(1));
    OK(cudaMemGetInfo(&free1, &total));
    float *big = NULL;
    OK(cudaMalloc(&big, (size_t)64 << 20));
    OK(cudaMemGetInfo(&f, &total));
    EXPECT(f <= free1 - ((size_t)64 << 20));
    cudaPointerAttributes attr;
    OK(cudaPointerGetAttributes(&attr, big));
    EXPECT(attr.type == cudaMemoryTypeDevice && attr.device == 1);
    OK(cudaSetDevice(0));
    OK(cudaMemGetInfo(&f, &total));
    EXPECT(f == free0);        // device 1's allocation is not device 0's
    OK(cudaSetDevice(1));
    OK(cudaFree(big));
    OK(cudaMemGetInfo(&f, &total));
    EXPECT(f == free1);
    OK(cudaSetDevice(0));

    // ---- peer access: the real error codes -----------------------------------------------------
    int can = -1;
    OK(cudaDeviceCanAccessPeer(&can, 0, 1));
#ifdef __CUEMU__
    EXPECT(can == 1);
#endif
    OK(cudaDeviceCanAccessPeer(&can, 0, 0));
    EXPECT(can == 0);
    EXPECT_ERR(cudaDeviceCanAccessPeer(&can, 0, n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);   // itself, as an H200 answers
    EXPECT_ERR(cudaDeviceEnablePeerAccess(n, 0), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);    // flags must be 0
    EXPECT_ERR(cudaDeviceEnablePeerAccess(0, 1), cudaErrorInvalidValue);    // flags before self
    EXPECT_ERR(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);   // itself
    EXPECT_ERR(cudaDeviceDisablePeerAccess(n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    EXPECT_ERR(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);
    OK(cudaDeviceEnablePeerAccess(1, 0));
    EXPECT_ERR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    EXPECT_ERR(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
    OK(cudaDeviceDisablePeerAccess(1));
    EXPECT_ERR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    EXPECT_ERR(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);  // kept until read

    // ---- peer copies: no peer access needed -------------------------------------------------
    float *a0 = NULL, *b1 = NULL, *c1 = NULL;
    OK(cudaMalloc(&a0, bytes));
    fill_kernel<<<(N + 255) / 256, 256>>>(a0, N, 3.0f);
    OK(cudaGetLastError());
    OK(cudaSetDevice(1));
    OK(cudaMalloc(&b1, bytes));
    OK(cudaMalloc(&c1, bytes));
    OK(cudaMemset(b1, 0, bytes));
    OK(cudaSetDevice(0));
    // serialised with the work of both devices: sees the fill without a synchronisation
    OK(cudaMemcpyPeer(b1, 1, a0, 0, bytes));
    OK(cudaMemcpy(h, b1, bytes, cudaMemcpyDeviceToHost));
    EXPECT(same(h, 3.0f, 1.0f));
    EXPECT_ERR(cudaMemcpyPeer(b1, n, a0, 0, bytes), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaMemcpyPeer(h, 1, a0, 0, bytes), cudaErrorInvalidValue);   // not device memory
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);  // kept until read
#ifdef __CUEMU__
    EXPECT(strstr(cuemuLastDiagnostic(), "device 2 does not exist") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "is host memory not known to CUDA") != NULL);
    cuemuClearDiagnostic();
#endif

    // the async form orders like any work on its stream (here device 1's), and devices wait for
    // each other through events
    cudaStream_t s0, s1;
    cudaEvent_t filled, copied, t0;
    OK(cudaStreamCreate(&s0));
    OK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    OK(cudaEventCreate(&t0));
    fill_kernel<<<(N + 255) / 256, 256, 0, s0>>>(a0, N, 7.0f);
    OK(cudaGetLastError());
    OK(cudaEventRecord(filled, s0));
    OK(cudaSetDevice(1));
    OK(cudaStreamCreate(&s1));
    OK(cudaEventCreate(&copied));
    OK(cudaStreamWaitEvent(s1, filled, 0));   // a stream waits for another device's event
    OK(cudaMemcpyPeerAsync(c1, 1, a0, 0, bytes, s1));
    OK(cudaEventRecord(copied, s1));
    OK(cudaStreamSynchronize(s1));
    OK(cudaMemcpy(h, c1, bytes, cudaMemcpyDeviceToHost));
    EXPECT(same(h, 7.0f, 1.0f));

    // cudaMemcpy with cudaMemcpyDefault between two devices' memory
    OK(cudaMemcpy(b1, a0, bytes, cudaMemcpyDefault));
    OK(cudaMemcpy(h, b1, bytes, cudaMemcpyDeviceToHost));
    EXPECT(same(h, 7.0f, 1.0f));

    // ---- a kernel on device 1 reading device 0's memory, with peer access ------------------
    OK(cudaDeviceEnablePeerAccess(0, 0));     // device 1 (current) may reach device 0
    scale_kernel<<<(N + 255) / 256, 256, 0, s1>>>(a0, c1, N, 2.0f);
    OK(cudaGetLastError());
    OK(cudaMemcpyAsync(h, c1, bytes, cudaMemcpyDeviceToHost, s1));
    OK(cudaStreamSynchronize(s1));
    EXPECT(same(h, 7.0f, 2.0f));
    OK(cudaDeviceDisablePeerAccess(0));

    // ---- streams and events belong to the device current at their creation ---------------
    // device 1 is current: s0 is device 0's
    fill_kernel<<<(N + 255) / 256, 256, 0, s0>>>(a0, N, 1.0f);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaEventRecord(copied, s0), cudaErrorInvalidResourceHandle);
    OK(cudaEventRecord(t0, s0));              // t0 is device 0's, and so is s0
    float ms = 0;
    OK(cudaEventSynchronize(t0));             // any device's event may be waited for
    OK(cudaEventSynchronize(copied));
    EXPECT_ERR(cudaEventElapsedTime(&ms, t0, copied), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);  // kept until read
#ifdef __CUEMU__
    EXPECT(strstr(cuemuLastDiagnostic(), "while device 1 is current") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "the event was made on device 1 and the stream belongs "
                                         "to device 0") != NULL);
    cuemuClearDiagnostic();
#endif

    // ---- cudaDeviceSynchronize waits for the current device only ---------------------------
    fill_kernel<<<(N + 255) / 256, 256, 0, s1>>>(c1, N, 5.0f);
    OK(cudaGetLastError());
    OK(cudaSetDevice(0));
    OK(cudaDeviceSynchronize());
#ifdef __CUEMU__
    // device 1's kernel is still queued: a GPU may or may not have run it by now
    EXPECT_ERR(cudaStreamQuery(s1), cudaErrorNotReady);
#endif
    OK(cudaSetDevice(1));
    OK(cudaDeviceSynchronize());
    OK(cudaStreamQuery(s1));
    OK(cudaMemcpy(h, c1, bytes, cudaMemcpyDeviceToHost));
    EXPECT(same(h, 5.0f, 1.0f));

    // ---- pools: one default pool per device, allocations on the stream's device ------------
    cudaMemPool_t pool0, pool1, cur;
    OK(cudaDeviceGetDefaultMemPool(&pool0, 0));
    OK(cudaDeviceGetDefaultMemPool(&pool1, 1));
    EXPECT(pool0 != pool1);
    OK(cudaDeviceGetMemPool(&cur, 1));
    EXPECT(cur == pool1);
    EXPECT_ERR(cudaDeviceGetDefaultMemPool(&cur, n), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaDeviceSetMemPool(0, pool1), cudaErrorInvalidValue);   // device 1's pool
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);  // kept until read
    float *q1 = NULL;
    OK(cudaMemGetInfo(&free1, &total));
    OK(cudaMallocAsync(&q1, bytes, s1));
    OK(cudaPointerGetAttributes(&attr, q1));
    EXPECT(attr.device == 1);
    OK(cudaMemGetInfo(&f, &total));
    EXPECT(f < free1);
    struct cudaMemLocation loc0 = {};
    loc0.type = cudaMemLocationTypeDevice;
    loc0.id = 0;
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtReadWrite;
    OK(cudaMemPoolGetAccess(&flags, pool1, &loc0));
    EXPECT(flags == cudaMemAccessFlagsProtNone);   // peer access does not cover pools
    cudaMemAccessDesc own = {};                    // the owner's access stays (as an H200 says)
    own.location.type = cudaMemLocationTypeDevice;
    own.location.id = 1;
    own.flags = cudaMemAccessFlagsProtNone;
    EXPECT_ERR(cudaMemPoolSetAccess(pool1, &own, 1), cudaErrorInvalidDevice);
    cudaMemAccessDesc grant = {};
    grant.location = loc0;
    grant.flags = cudaMemAccessFlagsProtReadWrite;
    OK(cudaMemPoolSetAccess(pool1, &grant, 1));
    OK(cudaMemPoolGetAccess(&flags, pool1, &loc0));
    EXPECT(flags == cudaMemAccessFlagsProtReadWrite);
    OK(cudaFreeAsync(q1, s1));
    OK(cudaStreamSynchronize(s1));
    grant.flags = cudaMemAccessFlagsProtNone;
    OK(cudaMemPoolSetAccess(pool1, &grant, 1));

    // ---- managed memory: advice and prefetch naming device 1 -------------------------------
    float *m = NULL;
    const size_t mbytes = (size_t)1 << 20;   // many pages: half of it is a page boundary
    OK(cudaMallocManaged(&m, mbytes));
    struct cudaMemLocation loc1 = {};
    loc1.type = cudaMemLocationTypeDevice;
    loc1.id = 1;
    struct cudaMemLocation bad = loc1;
    bad.id = n;
#ifdef __CUEMU__
    cuemuStreamLogClear();
#endif
    OK(cudaMemAdvise(m, mbytes, cudaMemAdviseSetPreferredLocation, loc1));
    OK(cudaMemAdvise(m, mbytes, cudaMemAdviseSetAccessedBy, loc0));
    OK(cudaMemAdvise(m, mbytes, cudaMemAdviseSetAccessedBy, loc1));
    OK(cudaMemPrefetchAsync(m, mbytes, loc1, 0, s1));
    EXPECT_ERR(cudaMemPrefetchAsync(m, mbytes, bad, 0, s1), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);  // kept until read
    OK(cudaStreamSynchronize(s1));
    int v = -5, by[3] = { -5, -5, -5 };
    OK(cudaMemRangeGetAttribute(&v, sizeof v, cudaMemRangeAttributePreferredLocation, m, mbytes));
    EXPECT(v == 1);
    OK(cudaMemRangeGetAttribute(&v, sizeof v, cudaMemRangeAttributeLastPrefetchLocation, m, mbytes));
    EXPECT(v == 1);
    OK(cudaMemRangeGetAttribute(by, sizeof by, cudaMemRangeAttributeAccessedBy, m, mbytes));
#ifdef __CUEMU__
    EXPECT(by[0] == 0 && by[1] == 1 && by[2] == cudaInvalidDeviceId);
#endif
    // half to device 0, half stays on device 1: the range has no single location
    OK(cudaMemPrefetchAsync(m, mbytes / 2, loc0, 0, s1));
    OK(cudaStreamSynchronize(s1));
    OK(cudaMemRangeGetAttribute(&v, sizeof v, cudaMemRangeAttributeLastPrefetchLocation, m, mbytes));
#ifdef __CUEMU__
    EXPECT(v == cudaInvalidDeviceId);
    // the stream log: the prefetch went to device 1 on device 1's stream
    long long ids[16];
    int kinds[16], details[16], devs[16];
    int logged = cuemuStreamLog(ids, kinds, 16);
    cuemuStreamLogDetail(details, 16);
    cuemuStreamLogDevice(devs, 16);
    int seen = 0;
    for (int i = 0; i < logged && i < 16; i++)
        if (kinds[i] == 9 && details[i] == 1 && devs[i] == 1 && ids[i] > 0) seen++;
    EXPECT(seen == 1);
#endif
    OK(cudaFree(m));

#ifdef __CUEMU__
    // a peer copy on device 1's stream of what device 0's kernel writes, with no event between
    // them: a race a GPU may win or lose. The copy runs without the kernel (nothing orders
    // it after it); once the kernel ran and did write, the next synchronisation says so.
    OK(cudaSetDevice(0));
    fill_kernel<<<(N + 255) / 256, 256, 0, s0>>>(a0, N, 9.0f);
    OK(cudaGetLastError());
    OK(cudaSetDevice(1));
    OK(cudaMemcpyPeerAsync(c1, 1, a0, 0, bytes, s1));
    OK(cudaStreamSynchronize(s1));
    OK(cudaSetDevice(0));
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalState);
    EXPECT(strstr(cuemuLastDiagnostic(), "stream race on device memory") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "on stream 1 (device 0) writes it") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "cudaMemcpyPeerAsync at") != NULL);
    cuemuClearDiagnostic();
    cudaGetLastError();
    OK(cudaSetDevice(1));
#endif
    OK(cudaStreamDestroy(s1));
    OK(cudaEventDestroy(copied));
    OK(cudaFree(b1));
    OK(cudaFree(c1));
    OK(cudaSetDevice(0));
    OK(cudaStreamDestroy(s0));
    OK(cudaEventDestroy(filled));
    OK(cudaEventDestroy(t0));
    OK(cudaFree(a0));
    OK(cudaMemGetInfo(&f, &total));
    EXPECT(f == free0);
#ifdef __CUEMU__
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
    // CUDA IPC builds, and says at run time that one process cannot do it
    cudaIpcMemHandle_t ipc;
    EXPECT(sizeof ipc == 64);
    EXPECT_ERR(cudaIpcGetMemHandle(&ipc, big), cudaErrorNotSupported);
    EXPECT(strstr(cuemuLastDiagnostic(), "not supported here: cudaIpcGetMemHandle") != NULL);
    cudaGetLastError();
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("multi_device: ok\n");
    return 0;
}
