// SPDX-License-Identifier: MIT
/*
 * Runtime test: cudaMemcpy in every direction, cudaMemcpyDefault, the kind checked against
 * where each pointer lives, overruns, cudaMemset, cudaMallocPitch and cudaMemcpy2D.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "rt_test.h"

int main(void)
{
    const int n = 1009;                              // prime: no size is a round number
    const size_t bytes = n * sizeof(int);
    std::vector<int> h(n), back(n, 0);
    for (int i = 0; i < n; i++) h[i] = i * 7 - 3;

    int *d_a = NULL, *d_b = NULL;
    OK(cudaMalloc(&d_a, bytes));
    OK(cudaMalloc((void **)&d_b, bytes));            // the (void**) cast form works too

    // Round trip through two device buffers, each direction named.
    OK(cudaMemcpy(d_a, h.data(), bytes, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(d_b, d_a, bytes, cudaMemcpyDeviceToDevice));
    OK(cudaMemcpy(back.data(), d_b, bytes, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back.data(), h.data(), bytes) == 0);

    // Host to host, and cudaMemcpyDefault in every direction.
    std::vector<int> h2(n, 0);
    OK(cudaMemcpy(h2.data(), h.data(), bytes, cudaMemcpyHostToHost));
    EXPECT(memcmp(h2.data(), h.data(), bytes) == 0);
    OK(cudaMemset(d_b, 0, bytes));
    OK(cudaMemcpy(d_b + 1, h.data(), bytes - sizeof(int), cudaMemcpyDefault));
    std::fill(back.begin(), back.end(), 0);
    OK(cudaMemcpy(back.data(), d_b, bytes, cudaMemcpyDefault));
    EXPECT(back[0] == 0 && back[1] == h[0] && back[n - 1] == h[n - 2]);

    // Count 0 is a no-op success, even with odd pointers.
    OK(cudaMemcpy(d_a, h.data(), 0, cudaMemcpyHostToDevice));

    // The kind must match where the pointers live: CUDA knows (unified addressing).
    EXPECT_ERR(cudaMemcpy(d_a, d_b, bytes, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(h.data(), h2.data(), bytes, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d_a, h.data(), bytes, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(h.data(), d_a, bytes, cudaMemcpyHostToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d_a, h.data(), bytes, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d_a, h.data(), bytes, (cudaMemcpyKind)5), cudaErrorInvalidMemcpyDirection);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);

    // A copy that runs past the end of a device allocation is refused.
    EXPECT_ERR(cudaMemcpy(d_a + 1, h.data(), bytes, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(back.data(), d_a, bytes + 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(d_a, 0, bytes + 4), cudaErrorInvalidValue);
    // cudaMemset is for device memory.
    EXPECT_ERR(cudaMemset(h.data(), 0, bytes), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    // cudaMemset writes bytes, not ints.
    OK(cudaMemset(d_a, 0x01, bytes));
    OK(cudaMemcpy(back.data(), d_a, bytes, cudaMemcpyDeviceToHost));
    EXPECT(back[0] == 0x01010101 && back[n - 1] == 0x01010101);

    // Async forms, on the default stream and on a created one.
    cudaStream_t s;
    OK(cudaStreamCreate(&s));
    OK(cudaMemsetAsync(d_a, 0, bytes, s));
    OK(cudaMemcpyAsync(d_a, h.data(), bytes / 2, cudaMemcpyHostToDevice, s));
    OK(cudaMemcpyAsync(back.data(), d_a, bytes, cudaMemcpyDeviceToHost));
    OK(cudaStreamSynchronize(s));
    EXPECT(back[0] == h[0] && back[n / 2 - 1] == h[n / 2 - 1] && back[n - 1] == 0);
    OK(cudaStreamDestroy(s));

    // cudaMallocPitch: rows padded to a multiple of 512 bytes; the pointer 256-aligned.
    const size_t width = 37 * sizeof(float), height = 23;
    float *d_img = NULL;
    size_t pitch = 0;
    OK(cudaMallocPitch(&d_img, &pitch, width, height));
    EXPECT(pitch >= width && pitch % 512 == 0);
    EXPECT(((uintptr_t)d_img & 255) == 0);
#ifdef __CUEMU__
    EXPECT(pitch == 512);
#endif
    std::vector<float> img(37 * 23), img_back(37 * 23, 0.0f);
    for (size_t i = 0; i < img.size(); i++) img[i] = (float)i * 0.5f;
    OK(cudaMemcpy2D(d_img, pitch, img.data(), width, width, height, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2D(img_back.data(), width, d_img, pitch, width, height, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(img.data(), img_back.data(), width * height) == 0);
    // Row r of the pitched image starts at byte r * pitch.
    float v = 0.0f;
    OK(cudaMemcpy(&v, (char *)d_img + 5 * pitch + 3 * sizeof(float), sizeof v, cudaMemcpyDeviceToHost));
    EXPECT(v == img[5 * 37 + 3]);
    // A 2D copy of a sub-rectangle, and async on the default stream.
    std::vector<float> sub(4 * 3, -1.0f);
    OK(cudaMemcpy2DAsync(sub.data(), 4 * sizeof(float), (char *)d_img + 2 * pitch + 10 * sizeof(float),
                         pitch, 4 * sizeof(float), 3, cudaMemcpyDeviceToHost, 0));
    OK(cudaDeviceSynchronize());
    EXPECT(sub[0] == img[2 * 37 + 10] && sub[11] == img[4 * 37 + 13]);
    // A pitch narrower than the row is cudaErrorInvalidPitchValue; a span past the end is invalid.
    EXPECT_ERR(cudaMemcpy2D(d_img, width - 1, img.data(), width, width, height, cudaMemcpyHostToDevice),
               cudaErrorInvalidPitchValue);
    EXPECT_ERR(cudaMemcpy2D(d_img, pitch, img.data(), width, width, height + 1, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue);
    OK(cudaMemset2D(d_img, pitch, 0, width, height));
    OK(cudaMemcpy2D(img_back.data(), width, d_img, pitch, width, height, cudaMemcpyDeviceToHost));
    EXPECT(img_back[0] == 0.0f && img_back[img_back.size() - 1] == 0.0f);
    (void)cudaGetLastError();

    OK(cudaFree(d_img));
    OK(cudaFree(d_a));
    OK(cudaFree(d_b));
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("memcpy_kinds: ok\n");
    return 0;
}
