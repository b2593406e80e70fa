// SPDX-License-Identifier: MIT
/*
 * Runtime test (emulator checks a GPU cannot make): use after free is named with the
 * allocation's file:line, freed memory faults when touched, guard pages follow and precede each
 * allocation, and a small overrun that a GPU would hide (24 floats past a 1000-float buffer,
 * as measured on an H200) is reported at the next synchronisation as a sticky
 * cudaErrorIllegalAddress. Faulting accesses run in a child process.
 */
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#ifdef __CUEMU__
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>
#include "cuemu_internal.h"
#endif

#include "rt_test.h"

__global__ void write_n_kernel(float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}

// One byte written at p[i] (i may be negative), by one device thread.
__global__ void poke_kernel(unsigned char *p, int i, int value) { p[i] = (unsigned char)value; }

#ifdef __CUEMU__
// 1 if touching p (read, or write when `write`) kills a child process with SIGSEGV/SIGBUS.
static int faults(volatile char *p, int write)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        // The default action, so a sanitizer's handler does not turn the fault into an exit.
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        if (write) *p = 1; else (void)*p;
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int diag_has(const char *s) { return strstr(cuemuLastDiagnostic(), s) != NULL; }
#endif

int main(void)
{
#ifdef __CUEMU__
    char site[256];
    cuemuClearDiagnostic();

    // Use after free: the runtime names the allocation; touching the memory faults.
    float *d = NULL;
    const int alloc_line = __LINE__ + 1;
    OK(cudaMalloc(&d, 1000 * sizeof(float)));
    cuemu_alloc_info info;
    EXPECT(cuemu_alloc_lookup(d + 999, &info) == 1);
    EXPECT(info.base == d && info.size == 4000 && info.kind == CUEMU_MEM_DEVICE && info.line == alloc_line);
    EXPECT(cuemu_alloc_lookup(d + 1000, &info) == 0);
    long long off = 0;
    EXPECT(cuemu_alloc_nearest(d + 1010, &info, &off) == 1 && off == 4040);
    EXPECT(cuemu_alloc_nearest((char *)d - 1, &info, &off) == 1 && off == -1);
    OK(cudaFree(d));
    EXPECT(cuemu_alloc_lookup(d, &info) == 0);
    EXPECT(cuemu_alloc_was_freed(d + 10, &info) == 1);
    EXPECT(info.line == alloc_line && info.size == 4000 && strstr(info.file, "use_after_free") != NULL);
    float h[4];
    EXPECT_ERR(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    snprintf(site, sizeof site, "use_after_free.cu:%d", alloc_line);
    EXPECT(diag_has("was freed") && diag_has(site));
    EXPECT(faults((volatile char *)d, 0));
    (void)cudaGetLastError();
    cuemuClearDiagnostic();

    // Guard pages: the page after a page-multiple allocation, and the page before any.
    char *g = NULL;
    OK(cudaMalloc(&g, 8192));
    EXPECT(faults(g + 8192, 1));
    // the front guard page, just before the allocation's first page (g - 4097 was tested
    // here: the page below that guard, whatever mapping lies there, which made it flaky)
    const long pg = sysconf(_SC_PAGESIZE);
    char *first_page = g + 8192 - (8192 + pg - 1) / pg * pg;
    EXPECT(faults(first_page - 1, 0));
    EXPECT(faults(first_page - pg, 0));
    EXPECT(faults(g + 8191, 1));              // host code cannot reach device memory at all
    poke_kernel<<<1, 1>>>((unsigned char *)g, 8191, 1);   // a kernel can
    OK(cudaDeviceSynchronize());
    OK(cudaFree(g));
    // Freed pool memory faults too.
    float *pa = NULL;
    const int async_alloc_line = __LINE__ + 1;
    OK(cudaMallocAsync(&pa, 4096, 0));
    const int async_free_line = __LINE__ + 1;
    OK(cudaFreeAsync(pa, 0));
    OK(cudaStreamSynchronize(0));             // the free is queued: it happens in stream order
    EXPECT(faults((volatile char *)pa, 0));
    EXPECT(cuemu_alloc_was_freed(pa, &info) == 1);
    EXPECT(info.free_line == async_free_line && strstr(info.free_file, "use_after_free") != NULL);
    OK(cudaDeviceSynchronize());
    // A kernel given the block after its cudaFreeAsync ran: both call sites are named.
    write_n_kernel<<<1, 32>>>(pa, 32);
    EXPECT_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
    snprintf(site, sizeof site, "freed earlier (allocated at %s:%d, freed by the cudaFreeAsync "
             "at %s:%d)", __FILE__, async_alloc_line, __FILE__, async_free_line);
    EXPECT(diag_has("argument 0 of kernel write_n_kernel") && diag_has(site));
    OK(cudaDeviceReset());
    cuemuClearDiagnostic();

    // The overrun a GPU hides: a kernel writes 24 floats past a 1000-float buffer. The bytes
    // between the end and the guard page are checked at the end of the launch, which runs
    // (queued) at the next synchronisation, and the report names the kernel and its launch.
    float *small = NULL;
    const int small_line = __LINE__ + 1;
    OK(cudaMalloc(&small, 1000 * sizeof(float)));
    write_n_kernel<<<1, 1024>>>(small, 1024);
    OK(cudaGetLastError());
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    snprintf(site, sizeof site, "write past the end of the allocation made at %s:%d", __FILE__, small_line);
    EXPECT(diag_has(site));
    snprintf(site, sizeof site, "found by the end of kernel write_n_kernel launched at %s:%d", __FILE__,
             small_line + 1);
    EXPECT(diag_has(site));
    // Sticky until reset, like a GPU's dead context.
    EXPECT_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT_ERR(cudaMalloc(&d, 16), cudaErrorIllegalAddress);
    OK(cudaDeviceReset());
    OK(cudaGetLastError());
    cuemuClearDiagnostic();

    // The same at a cudaFree that runs the kernel, and for writes just before the start.
    unsigned char *b = NULL;
    OK(cudaMalloc(&b, 100));
    poke_kernel<<<1, 1>>>(b, 100, 0);
    EXPECT_ERR(cudaFree(b), cudaErrorIllegalAddress);
    EXPECT(diag_has("write past the end") && diag_has("found by the end of kernel poke_kernel"));
    OK(cudaDeviceReset());
    OK(cudaMalloc(&b, 100));
    poke_kernel<<<1, 1>>>(b, -1, 0);
    EXPECT_ERR(cudaMemcpy(h, b, 4, cudaMemcpyDeviceToHost), cudaErrorIllegalAddress);
    EXPECT(diag_has("write before the start"));
    OK(cudaDeviceReset());
    cuemuClearDiagnostic();

    // Writing exactly up to the end is fine.
    OK(cudaMalloc(&b, 100));
    OK(cudaMemset(b, 1, 100));
    poke_kernel<<<1, 1>>>(b, 99, 2);
    OK(cudaDeviceSynchronize());
    OK(cudaFree(b));
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("use_after_free: ok\n");
    return 0;
}
