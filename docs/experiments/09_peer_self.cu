// SPDX-License-Identifier: MIT
/*
 * Chapter 09 experiment: what does the runtime answer to peer access requests that one device
 * can make: the device itself, one past the last device, flags other than 0, and a pool's owner
 * giving up its own access? Run on one NVIDIA H200 on 2026-12-04 (09_peer_self.log); chapter
 * 09's lesson, its 09.peer-errors and 09.pool-access tests and the emulator follow the answers.
 *
 *   nvcc -arch=sm_90 -o build/peer_self docs/experiments/09_peer_self.cu && build/peer_self
 *
 * Each call's error is printed and cleared (cudaGetLastError), so the next one starts clean.
 */
#include <cstdio>
#include <cuda_runtime.h>

static void show(const char *what, cudaError_t e)
{
    printf("%-48s -> %d %s\n", what, (int)e, cudaGetErrorName(e));
    (void)cudaGetLastError();
}

int main()
{
    int n = 0, can = -1;
    show("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    printf("devices: %d\n", n);
    if (n < 1)
        return 77;   // no device: nothing to ask
    show("cudaSetDevice(0)", cudaSetDevice(0));
    show("cudaDeviceEnablePeerAccess(0, 0) [self]", cudaDeviceEnablePeerAccess(0, 0));
    show("cudaDeviceEnablePeerAccess(0, 1) [self, flags 1]", cudaDeviceEnablePeerAccess(0, 1));
    show("cudaDeviceDisablePeerAccess(0) [self]", cudaDeviceDisablePeerAccess(0));
    show("cudaDeviceEnablePeerAccess(n, 0) [no such]", cudaDeviceEnablePeerAccess(n, 0));
    show("cudaDeviceDisablePeerAccess(n) [no such]", cudaDeviceDisablePeerAccess(n));
    show("cudaDeviceCanAccessPeer(&can, 0, 0)", cudaDeviceCanAccessPeer(&can, 0, 0));
    printf("can = %d\n", can);

    // the default pool of device 0 and who may use it
    cudaMemPool_t pool;
    show("cudaDeviceGetDefaultMemPool(&pool, 0)", cudaDeviceGetDefaultMemPool(&pool, 0));
    cudaMemAccessDesc d = {};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = 0;
    d.flags = cudaMemAccessFlagsProtNone;
    show("cudaMemPoolSetAccess(own pool, self, none)", cudaMemPoolSetAccess(pool, &d, 1));
    d.flags = cudaMemAccessFlagsProtReadWrite;
    show("cudaMemPoolSetAccess(own pool, self, rw)", cudaMemPoolSetAccess(pool, &d, 1));
    d.location.id = n;
    show("cudaMemPoolSetAccess(own pool, no such, rw)", cudaMemPoolSetAccess(pool, &d, 1));
    return 0;
}
