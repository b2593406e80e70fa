// SPDX-License-Identifier: MIT
/*
 * Runtime test (emulator only): CUEMU_DEVICES must be a count from 1 to 8. Anything else is
 * said once, at the first call, and every call that needs a device fails with
 * cudaErrorNoDevice (as on a machine whose CUDA_VISIBLE_DEVICES hides every GPU), instead of
 * running on some other number of devices. On a GPU the test has nothing to check.
 */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
#ifdef __CUEMU__
    setenv("CUEMU_DEVICES", "9", 1);
    int n = -1;
    EXPECT_ERR(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    EXPECT(n == 0);
    EXPECT(strstr(cuemuLastDiagnostic(), "CUEMU_DEVICES=\"9\" is not a number of emulated devices "
                                         "from 1 to 8") != NULL);
    void *p = NULL;
    EXPECT_ERR(cudaMalloc(&p, 16), cudaErrorNoDevice);
    EXPECT_ERR(cudaSetDevice(0), cudaErrorNoDevice);
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorNoDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorNoDevice);
    cudaDeviceReset();
    EXPECT_ERR(cudaMalloc(&p, 16), cudaErrorNoDevice);   // a reset does not make devices
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("devices_env: ok\n");
    return 0;
}
