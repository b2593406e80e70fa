// SPDX-License-Identifier: MIT
/*
 * Every atomic the course uses, from many threads at once: atomicAdd (int, unsigned,
 * unsigned long long, float, double), atomicSub, atomicMin, atomicMax, atomicExch, atomicCAS
 * (a CAS loop), atomicAnd, atomicOr, atomicXor, atomicInc, atomicDec; a histogram.
 */
#include "emu_test.h"

struct Counters {
    int add_i; unsigned add_u; unsigned long long add_ull; float add_f; double add_d;
    int sub_i; unsigned sub_u;
    int min_i; int max_i; unsigned min_u; unsigned max_u; long long min_ll; unsigned long long max_ull;
    int exch_count; int cas_sum; unsigned and_u; unsigned or_u; unsigned xor_u;
    unsigned inc_u; unsigned dec_u; unsigned long long and_ull; float exch_f;
};

__device__ float cas_add(float *addr, float v)
{
    unsigned *a = (unsigned *)addr;
    unsigned old = atomicOr(a, 0u), assumed;      // an atomic read: TSan builds stay quiet
    do {
        assumed = old;
        old = atomicCAS(a, assumed, __float_as_uint(__uint_as_float(assumed) + v));
    } while (assumed != old);
    return __uint_as_float(old);
}

__global__ void atomics_kernel(Counters *c, int *slots, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&c->add_i, 2);
    atomicAdd(&c->add_u, 3u);
    atomicAdd(&c->add_ull, 1000000000ull);
    atomicAdd(&c->add_f, 0.5f);
    atomicAdd(&c->add_d, 0.25);
    atomicSub(&c->sub_i, 1);
    atomicSub(&c->sub_u, 2u);
    atomicMin(&c->min_i, (i * 7919) % 1000 - 500);
    atomicMax(&c->max_i, (i * 7919) % 1000 - 500);
    atomicMin(&c->min_u, (unsigned)(i + 17));
    atomicMax(&c->max_u, (unsigned)(i + 17));
    atomicMin(&c->min_ll, -(long long)i * 1000000000ll);
    atomicMax(&c->max_ull, (unsigned long long)i << 33);
    int prev = atomicExch(&slots[i % 8], i);
    atomicAdd(&c->exch_count, prev >= -1 ? 1 : 0);
    cas_add((float *)&c->cas_sum, 1.0f);
    atomicAnd(&c->and_u, ~(1u << (i % 32)));
    atomicOr(&c->or_u, 1u << (i % 20));
    atomicXor(&c->xor_u, 1u << (i % 3));
    atomicInc(&c->inc_u, 9u);                 // wraps to 0 after 9
    atomicDec(&c->dec_u, 4u);                 // wraps to 4 at 0
    atomicAnd(&c->and_ull, ~(1ull << (40 + i % 8)));
    atomicExch(&c->exch_f, 1.5f);
}

__global__ void histogram_kernel(const unsigned char *in, unsigned *bins, int n)
{
    __shared__ unsigned local[16];
    if (threadIdx.x < 16) local[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[in[i] % 16], 1u);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

int main()
{
    const int n = 1000;
    Counters h, *d = nullptr;
    std::memset(&h, 0, sizeof h);
    h.min_i = 1 << 30; h.max_i = -(1 << 30); h.min_u = ~0u; h.max_u = 0; h.min_ll = 0;
    h.and_u = ~0u; h.and_ull = ~0ull; h.sub_u = 5000;
    int *slots = nullptr, hs[8];
    for (int k = 0; k < 8; k++) hs[k] = -1;
    CUDA_OK(cudaMalloc(&d, sizeof h));
    CUDA_OK(cudaMalloc(&slots, sizeof hs));
    CUDA_OK(cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(slots, hs, sizeof hs, cudaMemcpyHostToDevice));
    atomics_kernel<<<(n + 127) / 128, 128>>>(d, slots, n);
    CUDA_OK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hs, slots, sizeof hs, cudaMemcpyDeviceToHost));
    int mn = 1 << 30, mx = -(1 << 30);
    for (int i = 0; i < n; i++) {
        int v = (i * 7919) % 1000 - 500;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    EXPECT_EQ_INT(h.add_i, 2 * n);
    EXPECT_EQ_INT(h.add_u, 3 * n);
    EXPECT(h.add_ull == 1000000000ull * n);
    EXPECT(h.add_f == 0.5f * n);
    EXPECT(h.add_d == 0.25 * n);
    EXPECT_EQ_INT(h.sub_i, -n);
    EXPECT_EQ_INT(h.sub_u, 5000 - 2 * n);
    EXPECT_EQ_INT(h.min_i, mn);
    EXPECT_EQ_INT(h.max_i, mx);
    EXPECT_EQ_INT(h.min_u, 17);
    EXPECT_EQ_INT(h.max_u, n - 1 + 17);
    EXPECT(h.min_ll == -(long long)(n - 1) * 1000000000ll);
    EXPECT(h.max_ull == (unsigned long long)(n - 1) << 33);
    EXPECT_EQ_INT(h.exch_count, n);
    for (int k = 0; k < 8; k++) EXPECT(hs[k] >= 0 && hs[k] % 8 == k);
    float cas_sum;
    std::memcpy(&cas_sum, &h.cas_sum, sizeof cas_sum);
    EXPECT(cas_sum == (float)n);
    EXPECT_EQ_INT(h.and_u, 0);
    EXPECT_EQ_INT(h.or_u, (1u << 20) - 1);
    unsigned x = 0;
    for (int i = 0; i < n; i++) x ^= 1u << (i % 3);
    EXPECT_EQ_INT(h.xor_u, x);
    EXPECT_EQ_INT(h.inc_u, n % 10);
    unsigned dv = 0;
    for (int i = 0; i < n; i++) dv = (dv == 0 || dv > 4) ? 4 : dv - 1;
    EXPECT_EQ_INT(h.dec_u, dv);
    EXPECT(h.and_ull == (~0ull & ~(0xFFull << 40)));
    EXPECT(h.exch_f == 1.5f);

    const int m = 5003;
    unsigned char *hin = (unsigned char *)std::malloc(m), *din = nullptr;
    unsigned hb[16], want[16] = {0}, *db = nullptr;
    for (int i = 0; i < m; i++) { hin[i] = (unsigned char)((i * 31) % 251); want[hin[i] % 16]++; }
    CUDA_OK(cudaMalloc(&din, m));
    CUDA_OK(cudaMalloc(&db, sizeof hb));
    CUDA_OK(cudaMemcpy(din, hin, m, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(db, 0, sizeof hb));
    histogram_kernel<<<7, 96>>>(din, db, m);
    CUDA_OK(cudaMemcpy(hb, db, sizeof hb, cudaMemcpyDeviceToHost));
    for (int b = 0; b < 16; b++) EXPECT_EQ_INT(hb[b], want[b]);
    CUDA_OK(cudaDeviceSynchronize());
    cudaFree(d); cudaFree(slots); cudaFree(din); cudaFree(db);
    std::free(hin);
    return emu_test_result("atomics");
}
