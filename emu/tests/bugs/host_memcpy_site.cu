// SPDX-License-Identifier: MIT
/*
 * Planted bug: host code copies device memory with the C library's memcpy (and fills it with
 * memset), called through a pointer so that the compiler cannot inline the copy: the fault
 * is inside the C library, on its vector path (a megabyte), where the instruction has no line
 * of the program's. The report must still name the program's line, the call's, and the
 * function it called ("in memcpy called from host_memcpy_site.cu:NN"), not the C library's
 * frame (issue 22: on Ubuntu's glibc the report named memcpy's frame). The same for a host
 * read of pinned memory that a queued copy will still write.
 */
#include <cstring>
#include "../core/emu_test.h"

typedef void *(*copy_fn)(void *, const void *, size_t);
typedef void *(*fill_fn)(void *, int, size_t);

int main()
{
    EMU_ONLY();
    const size_t bytes = (size_t)1 << 20;
    copy_fn volatile copy = std::memcpy;   // volatile: the call is made, not inlined
    fill_fn volatile fill = std::memset;
    char *h = new char[bytes];
    char *d = nullptr, *p = nullptr;
    [[maybe_unused]] const int alloc_line = __LINE__ + 1;
    CUDA_OK(cudaMalloc(&d, bytes));
    CUDA_OK(cudaMemset(d, 1, bytes));
    CUDA_OK(cudaDeviceSynchronize());

    // BUG: a host read of device memory, in memcpy
    [[maybe_unused]] const int read_line = __LINE__ + 1;
    copy(h, d, bytes);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("host read of device memory", here(__FILE__, alloc_line),
                "The host access: in memcpy called from ", here(__FILE__, read_line));
#endif
    cudaDeviceReset();

    // BUG: a host write of device memory, in memset
    CUDA_OK(cudaMalloc(&d, bytes));
    [[maybe_unused]] const int write_line = __LINE__ + 1;
    fill(d, 0, bytes);
    EXPECT_EQ_INT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
#ifdef __CUEMU__
    EXPECT_DIAG("host write of device memory", "The host access: in memset called from ",
                here(__FILE__, write_line));
#endif
    cudaDeviceReset();

    // BUG: a host read of pinned memory before the copy into it ran, in memcpy
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMalloc(&d, bytes));
    CUDA_OK(cudaMallocHost(&p, bytes));
    CUDA_OK(cudaMemcpyAsync(p, d, bytes, cudaMemcpyDeviceToHost, s));
    [[maybe_unused]] const int early_line = __LINE__ + 1;
    copy(h, p, bytes);
    EXPECT_EQ_INT(cudaStreamSynchronize(s), cudaErrorIllegalState);
#ifdef __CUEMU__
    EXPECT_DIAG("host read of pinned host memory", "The host access: in memcpy called from ",
                here(__FILE__, early_line));
#endif
    cudaDeviceReset();
    delete[] h;
    return emu_test_result("host_memcpy_site");
}
