// SPDX-License-Identifier: MIT
/*
 * 06 alignment: where data sits in memory decides how many bytes the GPU really moves.
 *
 * A warp's loads are served in 32-byte sectors. 32 threads reading 32 consecutive floats touch 4
 * sectors (128 bytes, all used); 32 threads reading every 32nd float touch 32 sectors and use 4
 * bytes of each (and below L2 a miss may fetch more than its sector: cudaLimitMaxL2FetchGranularity,
 * a hint of at most 128 bytes, read 64 on the H200 the chapter was measured on). A 16-byte vector
 * load (float4) moves 4 floats with one instruction, but only from an address that is a multiple
 * of 16. cudaMallocPitch pads each row of a 2D array so that every row starts aligned; a kernel
 * then steps from row to row by the pitch, in bytes.
 *
 * Build: make                 Run: make run CH=06 (lesson demo), ARGS=--check, ARGS=--bench
 * Check: make check           Exercises: 06.1 .. 06.6 (grep -n "TODO(student)" this file)
 * Device buffers passed in are owned by Python (tut.DeviceBuffer); pitched ones are made here.
 */
#include <stddef.h>
#include <stdint.h>
#include "tut_check.h"
#include "tut_timer.h"

// ---- what cudaMalloc gives, and coalescing -----------------------------------------------------

/* out[i] = in[offset + i * stride]. Stride 1: a warp's 32 loads fall in 4 sectors. Stride 8 or
   more: one sector per thread, 32 per request, 7/8 of each sector wasted (and more of each
   piece L2 fetches from memory: see the chapter's README). An offset only shifts the window:
   5 sectors instead of 4 when it is not a multiple of 8 floats. */
__global__ void strided_copy_kernel(const float *__restrict__ in, float *__restrict__ out,
                                    int n, int stride, int offset)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[offset + (size_t)i * stride];
}

/* Where cudaMalloc puts `count` buffers of the given sizes: out[k] = address modulo 4096. */
extern "C" int malloc_addresses(const size_t *sizes, int count, long long *out)
{
    int status = 0;
    void *p[64] = {0};
    TUT_REQUIRE(count >= 0 && count <= 64);
    for (int k = 0; k < count; k++) {
        CUDA_CHECK(cudaMalloc(&p[k], sizes[k]));
        out[k] = (long long)((uintptr_t)p[k] % 4096);
    }
cleanup:
    for (int k = 0; k < count; k++)
        cudaFree(p[k]);
    return status;
}

extern "C" int strided_copy(const float *d_in, float *d_out, int n, int stride, int offset)
{
    int status = 0;
    if (n == 0)
        return 0;
    strided_copy_kernel<<<TUT_DIV_UP(n, 256), 256>>>(d_in, d_out, n, stride, offset);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- pitched 2D arrays (06.1, 06.2) ------------------------------------------------------------

/* img[r][c] = img[r][c] * (r + 1) - c on a height x width float image whose rows are `pitch`
   bytes apart (pitch >= width * 4; the bytes past the width are padding, not pixels). x runs
   along a row so that a warp reads consecutive floats. */
__global__ void scale_rows_pitched_kernel(float *img, size_t pitch, int width, int height)
{
    // @solution 06.1: find row and col, guard both, step to the row by pitch in BYTES, then update the pixel (~6 lines)
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) {
        float *line = (float *)((char *)img + (size_t)row * pitch);
        line[col] = line[col] * (float)(row + 1) - (float)col;
    }
    // @end
}

/* img[r][c] = 2 * img[r][c] + r, on a pitched image: 06.2's device work, given. */
__global__ void double_plus_row_kernel(float *img, size_t pitch, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < height && col < width) {
        float *line = (float *)((char *)img + (size_t)row * pitch);
        line[col] = 2.0f * line[col] + (float)row;
    }
}

/* The pitch cudaMallocPitch picks for rows of width_bytes (one allocation, freed at once), and
   the device's cudaDevAttrTexturePitchAlignment, which is a different thing (see the lesson). */
extern "C" int pitch_for(size_t width_bytes, size_t height, size_t *pitch, int *texture_alignment)
{
    int status = 0;
    void *d = NULL;
    CUDA_CHECK(cudaMallocPitch(&d, pitch, width_bytes, height));
    CUDA_CHECK(cudaDeviceGetAttribute(texture_alignment, cudaDevAttrTexturePitchAlignment, 0));
cleanup:
    cudaFree(d);
    return status;
}

/* The lesson's pitched round trip: a height x width host image (rows of width floats, packed)
   into a cudaMallocPitch buffer whose padding is poisoned (0x7F), the 06.1 kernel, and back.
   If h_raw is not NULL, the whole pitched allocation (pitch * height bytes) is copied there too,
   so Python can see that the padding was left alone. *pitch reports the pitch used. */
extern "C" int scale_rows_pitched(const float *h_in, float *h_out, unsigned char *h_raw,
                                  int width, int height, size_t *pitch)
{
    int status = 0;
    float *d_img = NULL;
    size_t row_bytes = (size_t)width * sizeof(float);
    dim3 block(32, 8);
    TUT_REQUIRE(width >= 1 && height >= 1);
    CUDA_CHECK(cudaMallocPitch((void **)&d_img, pitch, row_bytes, height));
    CUDA_CHECK(cudaMemset(d_img, 0x7F, *pitch * height));
    /* Source rows are packed (pitch = row bytes); destination rows are `*pitch` apart. */
    CUDA_CHECK(cudaMemcpy2D(d_img, *pitch, h_in, row_bytes, row_bytes, height,
                            cudaMemcpyHostToDevice));
    scale_rows_pitched_kernel<<<dim3(TUT_DIV_UP(width, 32), TUT_DIV_UP(height, 8)), block>>>(
        d_img, *pitch, width, height);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaMemcpy2D(h_out, row_bytes, d_img, *pitch, row_bytes, height,
                            cudaMemcpyDeviceToHost));
    if (h_raw)
        CUDA_CHECK(cudaMemcpy(h_raw, d_img, *pitch * height, cudaMemcpyDeviceToHost));
cleanup:
    cudaFree(d_img);
    return status;
}

/* A host 2D view, rows `row_stride` bytes apart (a column slice of a wider NumPy array), in
   place: into a pitched device buffer, double_plus_row_kernel, and back into the same view.
   cudaMemcpy2D reads and writes the view's rows where they are: no packed host copy is made. */
extern "C" int view_roundtrip(float *h_view, size_t row_stride, int width, int height,
                              size_t *pitch)
{
    int status = 0;
    float *d_img = NULL;
    size_t row_bytes = (size_t)width * sizeof(float);
    dim3 block(32, 8);
    TUT_REQUIRE(width >= 1 && height >= 1 && row_stride >= row_bytes);
    CUDA_CHECK(cudaMallocPitch((void **)&d_img, pitch, row_bytes, height));
    // @solution 06.2: copy the view's rows (row_stride apart, row_bytes each) into d_img (rows *pitch apart) (~2 lines)
    CUDA_CHECK(cudaMemcpy2D(d_img, *pitch, h_view, row_stride, row_bytes, height,
                            cudaMemcpyHostToDevice));
    // @stub TUT_TODO();
    // @end
    double_plus_row_kernel<<<dim3(TUT_DIV_UP(width, 32), TUT_DIV_UP(height, 8)), block>>>(
        d_img, *pitch, width, height);
    CUDA_CHECK_LAUNCH();
    // @solution 06.2: copy the rows back into the view, where they came from (~2 lines)
    CUDA_CHECK(cudaMemcpy2D(h_view, row_stride, d_img, *pitch, row_bytes, height,
                            cudaMemcpyDeviceToHost));
    // @stub TUT_TODO();
    // @end
cleanup:
    cudaFree(d_img);
    return status;
}

/* cudaMemcpy2D exactly as called, for the lesson's bad-argument demonstrations. */
extern "C" int memcpy2d_raw(void *dst, size_t dpitch, const void *src, size_t spitch,
                            size_t width, size_t height, int kind)
{
    int status = 0;
    CUDA_CHECK(cudaMemcpy2D(dst, dpitch, src, spitch, width, height, (cudaMemcpyKind)kind));
cleanup:
    return status;
}

// ---- 16-byte vector loads (06.3) ---------------------------------------------------------------

/* Copies n floats with 16-byte loads wherever it may. src and dst must have the same address
   modulo 16 (the host function checks), but that address may be anything a sub-allocation
   gives: a few scalar copies (the head) reach a boundary, float4 copies do the body, and scalar
   copies do the tail. A 16-byte boundary is all float4 needs; the head runs on to the next
   128-byte one so that a warp's 512 bytes are 4 whole 128-byte lines, for src and, when it sits
   at the same offset modulo 128, for dst (worth a little on the H200: the lesson's table). A
   grid-stride loop: any grid covers any n. */
__global__ void copy_vec4_kernel(const float *__restrict__ src, float *__restrict__ dst,
                                 long long n)
{
    // @solution 06.3: head = floats before src's next 128-byte boundary (at most n); copy the head, then the body as float4 with a grid-stride loop, then the tail (~14 lines)
    long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long head = (long long)(((128 - ((uintptr_t)src & 127)) & 127) / sizeof(float));
    if (head > n)
        head = n;
    long long n4 = (n - head) / 4;
    long long tail = head + 4 * n4;
    const float4 *src4 = (const float4 *)(src + head);
    float4 *dst4 = (float4 *)(dst + head);
    if (first < head)
        dst[first] = src[first];
    for (long long i = first; i < n4; i += stride)
        dst4[i] = src4[i];
    if (tail + first < n)
        dst[tail + first] = src[tail + first];
    // @end
}

/* A float4 load from p + offset_floats: legal only when that address is a multiple of 16. */
__global__ void float4_load_kernel(const float *p, int offset_floats, float4 *out)
{
    /* The whole vector is stored: the 16-byte access stays one instruction the test can see
       fault, with nothing else in the kernel. */
    *out = *(const float4 *)(p + offset_floats);
}

/* max_blocks = 0: one float4 per thread, a block for every 256 float4s and one more for the
   head and tail. The kernel's loop would cover n with fewer blocks too, but on the H200 a grid
   of 8 blocks per SM looping over the array reached 83-92% of cudaMemcpy where this grid
   reached 96-98% (the lesson's table). The tests also pass a small max_blocks, so that a kernel
   without its grid-stride loop fails. */
static cudaError_t launch_copy_vec4(const float *d_src, float *d_dst, long long n, int max_blocks)
{
    long long need = (n / 4 + 255) / 256 + 1;
    long long cap = max_blocks > 0 ? max_blocks : 0x7fffffff;
    copy_vec4_kernel<<<(int)(need < cap ? need : cap), 256>>>(d_src, d_dst, n);
    return cudaGetLastError();
}

/* n floats from d_src to d_dst; both must be 4-byte aligned and equal modulo 16. max_blocks:
   0 for the bench's grid (one float4 per thread), else at most that many blocks. */
extern "C" int copy_any_offset(const float *d_src, float *d_dst, long long n, int max_blocks)
{
    int status = 0;
    TUT_REQUIRE(n >= 0 && max_blocks >= 0);
    TUT_REQUIRE((uintptr_t)d_src % 4 == 0 && (uintptr_t)d_dst % 4 == 0);
    TUT_REQUIRE(((uintptr_t)d_src - (uintptr_t)d_dst) % 16 == 0);
    if (n == 0)
        return 0;
    CUDA_CHECK(launch_copy_vec4(d_src, d_dst, n, max_blocks));
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* One float4 load at a 256-aligned buffer + offset_floats. A misaligned one is a fault inside
   the kernel: cudaErrorMisalignedAddress, reported at the synchronisation, and sticky (every
   later CUDA call in this process fails too). driver.py runs it in a child process. */
extern "C" int float4_load(int offset_floats, float *h_sum)
{
    int status = 0;
    float *d = NULL, v[4];
    TUT_REQUIRE(offset_floats >= 0 && offset_floats <= 60);
    CUDA_CHECK(cudaMalloc(&d, 64 * sizeof(float)));
    CUDA_CHECK(cudaMemset(d, 0, 64 * sizeof(float)));
    float4_load_kernel<<<1, 1>>>(d, offset_floats, (float4 *)(d + 60));
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(v, d + 60, sizeof v, cudaMemcpyDeviceToHost));
    *h_sum = v[0] + v[1] + v[2] + v[3];
cleanup:
    cudaFree(d);
    return status;
}

// ---- AoS against SoA (06.4) --------------------------------------------------------------------

/* One particle as an array of structures (AoS): 8 floats, 32 bytes. The drift below reads 6 of
   them and writes 3; mass and charge ride along in every sector it loads. */
struct Particle {
    float x, y, z;
    float vx, vy, vz;
    float mass, charge;
};

/* The same particles as a structure of arrays (SoA): one array per field, so a warp reading x
   reads 32 consecutive floats and no sector carries a field nobody asked for. */
struct ParticlesSoA {
    float *x, *y, *z, *vx, *vy, *vz, *mass, *charge;
};

/* Drift: position += velocity * dt. AoS: thread i's x and thread i+1's x are 32 bytes apart, so
   each load instruction of a warp touches 32 sectors; the other fields come from cache, but
   every byte of mass and charge is fetched from DRAM too. */
__global__ void aos_drift_kernel(Particle *p, float dt, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i].x += p[i].vx * dt;
        p[i].y += p[i].vy * dt;
        p[i].z += p[i].vz * dt;
    }
}

/* Field f of particle i goes to soa.<f>[i]: reads are strided (AoS), writes coalesced. */
__global__ void aos_to_soa_kernel(const Particle *__restrict__ aos, ParticlesSoA soa, int n)
{
    // @solution 06.4: one thread per particle: guard i, then copy each of the 8 fields into its own array (~10 lines)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Particle p = aos[i];
        soa.x[i] = p.x;   soa.y[i] = p.y;   soa.z[i] = p.z;
        soa.vx[i] = p.vx; soa.vy[i] = p.vy; soa.vz[i] = p.vz;
        soa.mass[i] = p.mass;
        soa.charge[i] = p.charge;
    }
    // @end
}

/* The same drift on SoA: every load and store of a warp is 32 consecutive floats, and mass and
   charge are never read. */
__global__ void soa_drift_kernel(ParticlesSoA p, float dt, int n)
{
    // @solution 06.4: guard i, then x += vx * dt, y += vy * dt, z += vz * dt (~5 lines)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p.x[i] += p.vx[i] * dt;
        p.y[i] += p.vy[i] * dt;
        p.z[i] += p.vz[i] * dt;
    }
    // @end
}

/* The 8 field arrays of n floats each, one after another in one buffer. */
static ParticlesSoA soa_views(float *base, int n)
{
    ParticlesSoA s;
    float **f[8] = {&s.x, &s.y, &s.z, &s.vx, &s.vy, &s.vz, &s.mass, &s.charge};
    for (int k = 0; k < 8; k++)
        *f[k] = base + (size_t)k * n;
    return s;
}

/* AoS in (d_aos, n particles), SoA out (d_soa: 8 arrays of n floats), then one SoA drift. */
extern "C" int particles_to_soa_and_drift(const void *d_aos, float *d_soa, int n, float dt)
{
    int status = 0;
    ParticlesSoA soa = soa_views(d_soa, n);
    if (n == 0)
        return 0;
    aos_to_soa_kernel<<<TUT_DIV_UP(n, 256), 256>>>((const Particle *)d_aos, soa, n);
    CUDA_CHECK_LAUNCH();
    soa_drift_kernel<<<TUT_DIV_UP(n, 256), 256>>>(soa, dt, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

extern "C" int aos_drift(void *d_aos, int n, float dt)
{
    int status = 0;
    if (n == 0)
        return 0;
    aos_drift_kernel<<<TUT_DIV_UP(n, 256), 256>>>((Particle *)d_aos, dt, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- alignment of types (06.5) -----------------------------------------------------------------

/* Field order decides padding: each field sits at a multiple of its own alignment, and the size
   is rounded up to the largest one. tag, 3 bytes of padding, value, weight at 8, id at 16, then
   6 bytes of tail padding: 24 bytes. Largest first packs the same fields into 16. */
struct SampleAsDeclared { char tag; float value; double weight; short id; };
struct SampleLargestFirst { double weight; float value; short id; char tag; };

/* A body read whole by one thread: a position and a mass, 16 bytes of floats. Aligned to 4 bytes
   (what its fields need) the compiler must load it as 4 separate floats; aligned to 16 it may,
   and does, load it with one 16-byte instruction (ld.global.v4.f32 in the PTX, LDG.E.128 in
   the sm_90 machine code). */
// @solution 06.5: declare struct Body: float3 pos, then float mass, aligned to 16 bytes with __align__(16) (~4 lines)
struct __align__(16) Body {
    float3 pos;
    float mass;
};
// @stub struct Body {
// @stub     float3 pos;
// @stub     float mass;
// @stub };
// @end

/* out[i] = mass * |pos|^2 (a moment of inertia about the origin), one body per thread. */
__global__ void body_moment_kernel(const Body *__restrict__ in, float *__restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Body b = in[i];
        out[i] = b.mass * (b.pos.x * b.pos.x + b.pos.y * b.pos.y + b.pos.z * b.pos.z);
    }
}

/* What the compiler decided, for the lesson and the tests: sizeof, alignof, offsetof pos and
   offsetof mass in Body. */
extern "C" int body_layout(long long *out)
{
    out[0] = sizeof(Body);
    out[1] = alignof(Body);
    out[2] = offsetof(Body, pos);
    out[3] = offsetof(Body, mass);
    return 0;
}

/* alignof float, float2, float3, float4, double2, Particle; sizeof float3, Particle, and the two
   orders of the same four fields. */
extern "C" int type_facts(long long *out)
{
    out[0] = alignof(float);  out[1] = alignof(float2); out[2] = alignof(float3);
    out[3] = alignof(float4); out[4] = alignof(double2); out[5] = alignof(Particle);
    out[6] = sizeof(float3);  out[7] = sizeof(Particle);
    out[8] = sizeof(SampleAsDeclared); out[9] = sizeof(SampleLargestFirst);
    return 0;
}

extern "C" int body_moment(const void *d_bodies, float *d_out, int n)
{
    int status = 0;
    if (n == 0)
        return 0;
    body_moment_kernel<<<TUT_DIV_UP(n, 256), 256>>>((const Body *)d_bodies, d_out, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- staging through shared memory (06.6) ------------------------------------------------------

/* 06.6 AoS to SoA staged through shared memory ("corner turning", the lesson's Concepts), for
   blocks of STAGE_THREADS threads, one block per STAGE_THREADS particles. The block's particles
   (8 floats each) are read as consecutive words: thread t loads words t, t + 256, ... of the
   block's slice, so that every warp reads whole sectors, into row (w / 8), column (w % 8) of s.
   After the barrier, each thread takes its own particle's 8 fields out of its row of s and
   writes field f to plane f (planes + f * n), coalesced. A row of s is 9 words, not 8: thread t
   reads word 9 t + f, and 9 is odd, so the 32 threads of a warp hit 32 different banks (with 8
   they would hit 4 banks, 8 threads each). The last block may have fewer than 256 particles.
   --bench sets it against aos_to_soa_kernel (the lesson says what that measured). */
#define STAGE_THREADS 256
__global__ void aos_to_soa_staged_kernel(const float *__restrict__ aos, float *__restrict__ planes,
                                         int n)
{
    __shared__ float s[STAGE_THREADS * 9];
    long long first = (long long)blockIdx.x * STAGE_THREADS;   /* the block's first particle */
    // @solution 06.6: count = particles in this block (at most STAGE_THREADS); copy its count * 8 words into s with row stride 9 (a block-stride loop), __syncthreads, then thread t < count writes its 8 fields to planes[f * n + first + t] (~9 lines)
    int count = n - first < STAGE_THREADS ? (int)(n - first) : STAGE_THREADS;
    const float *src = aos + first * 8;
    for (int w = threadIdx.x; w < count * 8; w += STAGE_THREADS)
        s[(w / 8) * 9 + w % 8] = src[w];
    __syncthreads();
    if (threadIdx.x < count)
        for (int f = 0; f < 8; f++)
            planes[(size_t)f * n + first + threadIdx.x] = s[threadIdx.x * 9 + f];
    // @end
}

/* AoS in (d_aos, n particles), SoA out (d_soa: 8 arrays of n floats), by the staged kernel:
   the lesson's check that it converts exactly what aos_to_soa_kernel does. */
extern "C" int particles_to_soa_staged(const void *d_aos, float *d_soa, int n)
{
    int status = 0;
    if (n == 0)
        return 0;
    aos_to_soa_staged_kernel<<<TUT_DIV_UP(n, STAGE_THREADS), STAGE_THREADS>>>(
        (const float *)d_aos, d_soa, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

// ---- benchmarks (driver.py --bench) ------------------------------------------------------------

/* d[i] = i % 8191 + 0.5: non-zero inputs for the benchmark, made on the device (gigabytes of
   random numbers would take the host longer than the whole measurement). */
__global__ void fill_pattern_kernel(float *d, long long n)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        d[i] = (float)(i % 8191) + 0.5f;
}

extern "C" int fill_pattern(float *d, long long n)
{
    int status = 0;
    if (n == 0)
        return 0;
    fill_pattern_kernel<<<1024, 256>>>(d, n);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* Times `reps` runs of one kernel, each between its own pair of events, after a warm-up.
   what: 1 strided copy (a = in, b = out, n, p1 = stride, p2 = offset)
         2 vectorised copy (a + p1 floats -> b + p1 floats, n floats)
         3 AoS drift (a = particles, n)      4 SoA drift (a = 8 arrays of n floats)
         5 pitched kernel (a = image, n = height, p1 = pitch in bytes, p2 = width)
         6 AoS to SoA, aos_to_soa_kernel (a = particles, b = 8 arrays of n floats)
         7 AoS to SoA, staged through shared memory (the same arguments) */
extern "C" int bench_kernel(int what, void *d_a, void *d_b, long long n, long long p1,
                            long long p2, int reps, float *times_ms)
{
    int status = 0;
    tut_timer t = {0};
    int grid = (int)TUT_DIV_UP(n, 256);
    TUT_REQUIRE(what >= 1 && what <= 7 && n > 0 && n < (1LL << 31));
    CUDA_CHECK(tut_timer_init(&t));
    for (int i = -1; i < reps; i++) {   /* i = -1: the warm-up, not timed */
        CUDA_CHECK(tut_timer_start(&t, 0));
        if (what == 1) {
            strided_copy_kernel<<<grid, 256>>>((const float *)d_a, (float *)d_b, (int)n,
                                               (int)p1, (int)p2);
        } else if (what == 2) {
            CUDA_CHECK(launch_copy_vec4((const float *)d_a + p1, (float *)d_b + p1, n, 0));
        } else if (what == 3) {
            aos_drift_kernel<<<grid, 256>>>((Particle *)d_a, 1e-3f, (int)n);
        } else if (what == 4) {
            soa_drift_kernel<<<grid, 256>>>(soa_views((float *)d_a, (int)n), 1e-3f, (int)n);
        } else if (what == 6) {
            aos_to_soa_kernel<<<grid, 256>>>((const Particle *)d_a,
                                             soa_views((float *)d_b, (int)n), (int)n);
        } else if (what == 7) {
            aos_to_soa_staged_kernel<<<(int)TUT_DIV_UP(n, STAGE_THREADS), STAGE_THREADS>>>(
                (const float *)d_a, (float *)d_b, (int)n);
        } else {
            scale_rows_pitched_kernel<<<dim3(TUT_DIV_UP(p2, 32), TUT_DIV_UP(n, 8)),
                                        dim3(32, 8)>>>((float *)d_a, (size_t)p1, (int)p2,
                                                       (int)n);
        }
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(tut_timer_lap(&t, i, times_ms));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    tut_timer_free(&t);
    return status;
}
