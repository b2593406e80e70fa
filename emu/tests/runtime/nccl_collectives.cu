// SPDX-License-Identifier: MIT
/*
 * Runtime test: NCCL's collectives over 3 emulated devices (CUEMU_DEVICES=3: a ring of three
 * catches what a power of two hides), or over the GPUs there are (up to 3; one GPU still runs
 * every collective with one rank). Right answers for every collective, type and operation
 * (random-looking inputs that differ per rank, in-place calls), stream order before and after
 * a collective, communicators made three ways, NCCL's error codes, and, on the emulator, the
 * misuse NCCL would hang on reported instead.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <nccl.h>

#include "rt_test.h"

#define EXPECT_NCCL(expr, want)                                                           \
    do {                                                                                  \
        ncclResult_t got_ = (expr);                                                       \
        if (got_ != (want)) {                                                             \
            fprintf(stderr, "%s:%d: %s -> %d (%s), expected %d\n", __FILE__, __LINE__,     \
                    #expr, (int)got_, ncclGetErrorString(got_), (int)(want));             \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define NCCL_OK(expr) EXPECT_NCCL(expr, ncclSuccess)

static const int MAXR = 3;
static const size_t COUNT = 1001;          // not a multiple of the ranks, nor of a warp
static int nr;
static ncclComm_t comm[MAXR];
static cudaStream_t stream[MAXR];

__global__ void fill_kernel(float *p, size_t n, int rank)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] = (float)((i * 7 + rank * 13) % 29) - 14.0f + 0.25f * rank;
}

__global__ void scale_kernel(float *p, size_t n, float k)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] *= k;
}

static float input(size_t i, int rank) { return (float)((i * 7 + rank * 13) % 29) - 14.0f + 0.25f * rank; }
static int iinput(size_t i, int rank) { return (int)((i * 31 + rank * 17) % 23) - 11 + rank; }

// A device buffer per rank, of n elements of T, on that rank's device.
template <class T> struct PerRank {
    T *d[MAXR] = {};
    size_t n = 0;
    explicit PerRank(size_t count) : n(count)
    {
        for (int r = 0; r < nr; r++) {
            OK(cudaSetDevice(r));
            OK(cudaMalloc(&d[r], n * sizeof(T)));
            OK(cudaMemset(d[r], 0xFF, n * sizeof(T)));   // poison: unwritten output shows
        }
    }
    ~PerRank()
    {
        for (int r = 0; r < nr; r++) { cudaSetDevice(r); cudaFree(d[r]); }
    }
    void put(int r, const std::vector<T> &h)
    {
        OK(cudaSetDevice(r));
        OK(cudaMemcpy(d[r], h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> get(int r)
    {
        std::vector<T> h(n);
        OK(cudaSetDevice(r));
        OK(cudaStreamSynchronize(stream[r]));
        OK(cudaMemcpy(h.data(), d[r], n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
};

[[maybe_unused]] static void sync_all()
{
    for (int r = 0; r < nr; r++) {
        OK(cudaSetDevice(r));
        OK(cudaStreamSynchronize(stream[r]));
    }
}

static int close_to(double got, double want, double tol, const char *what, size_t i, int r)
{
    if (std::fabs(got - want) <= tol * (1.0 + std::fabs(want))) return 1;
    fprintf(stderr, "%s: rank %d element %zu is %g, expected %g\n", what, r, i, got, want);
    return 0;
}

// ---- all-reduce in every type and operation --------------------------------------------
static void allreduce_int(ncclRedOp_t op, const char *what)
{
    PerRank<int> s(COUNT), d(COUNT);
    for (int r = 0; r < nr; r++) {
        std::vector<int> h(COUNT);
        for (size_t i = 0; i < COUNT; i++) h[i] = iinput(i, r);
        s.put(r, h);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclAllReduce(s.d[r], d.d[r], COUNT, ncclInt32, op, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<int> h = d.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            long long want = iinput(i, 0);
            for (int k = 1; k < nr; k++) {
                long long x = iinput(i, k);
                want = op == ncclSum || op == ncclAvg ? want + x : op == ncclProd ? want * x
                     : op == ncclMax ? (x > want ? x : want) : (x < want ? x : want);
            }
            if (op == ncclAvg) want /= nr;
            if (h[i] != want) {
                fprintf(stderr, "%s: rank %d element %zu is %d, expected %lld\n", what, r, i, h[i], want);
                failures++;
                break;
            }
        }
    }
}

static void allreduce_float(ncclRedOp_t op, const char *what, int in_place)
{
    PerRank<float> s(COUNT), d(COUNT);
    for (int r = 0; r < nr; r++) {
        std::vector<float> h(COUNT);
        for (size_t i = 0; i < COUNT; i++) h[i] = input(i, r);
        s.put(r, h);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclAllReduce(s.d[r], in_place ? s.d[r] : d.d[r], COUNT, ncclFloat, op, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = in_place ? s.get(r) : d.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            double want = input(i, 0);
            for (int k = 1; k < nr; k++) {
                double x = input(i, k);
                want = op == ncclSum || op == ncclAvg ? want + x : op == ncclProd ? want * x
                     : op == ncclMax ? std::fmax(want, x) : std::fmin(want, x);
            }
            if (op == ncclAvg) want /= nr;
            if (!close_to(h[i], want, 1e-6, what, i, r)) { failures++; break; }
        }
    }
}

static void allreduce_double_half(void)
{
    PerRank<double> s(COUNT), d(COUNT);
    PerRank<__half> hs(COUNT), hd(COUNT);
    for (int r = 0; r < nr; r++) {
        std::vector<double> h(COUNT);
        std::vector<__half> hh(COUNT);
        for (size_t i = 0; i < COUNT; i++) {
            h[i] = input(i, r) / 3.0;
            hh[i] = __float2half((float)iinput(i, r));   // small integers: exact in half
        }
        s.put(r, h);
        hs.put(r, hh);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++) {
        NCCL_OK(ncclAllReduce(s.d[r], d.d[r], COUNT, ncclDouble, ncclSum, comm[r], stream[r]));
        NCCL_OK(ncclAllReduce(hs.d[r], hd.d[r], COUNT, ncclHalf, ncclMax, comm[r], stream[r]));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<double> h = d.get(r);
        std::vector<__half> hh = hd.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            double want = 0;
            int hmax = iinput(i, 0);
            for (int k = 0; k < nr; k++) {
                want += input(i, k) / 3.0;
                if (iinput(i, k) > hmax) hmax = iinput(i, k);
            }
            if (!close_to(h[i], want, 1e-12, "double sum", i, r)) { failures++; break; }
            if (__half2float(hh[i]) != (float)hmax) {
                fprintf(stderr, "half max: rank %d element %zu is %g, expected %d\n", r, i,
                        __half2float(hh[i]), hmax);
                failures++;
                break;
            }
        }
    }
}

// ---- broadcast, reduce, all-gather, reduce-scatter ----------------------------------------
static void other_collectives(void)
{
    int root = nr - 1;
    PerRank<float> s(COUNT * nr), d(COUNT * nr);
    for (int r = 0; r < nr; r++) {
        std::vector<float> h(COUNT * nr);
        for (size_t i = 0; i < COUNT * nr; i++) h[i] = input(i, r);
        s.put(r, h);
    }
    // broadcast of root's first COUNT elements
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclBroadcast(s.d[r], d.d[r], COUNT, ncclFloat, root, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = d.get(r);
        for (size_t i = 0; i < COUNT; i++)
            if (h[i] != input(i, root)) { fprintf(stderr, "broadcast: rank %d element %zu\n", r, i); failures++; break; }
        if (nr > 1) EXPECT(std::isnan(h[COUNT]));   // past the count: not written
    }
    // reduce (max) to rank 0: the others' receive buffers are left alone
    PerRank<float> red(COUNT);
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclReduce(s.d[r], red.d[r], COUNT, ncclFloat, ncclMax, 0, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = red.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            float want = input(i, 0);
            for (int k = 1; k < nr; k++) want = std::fmax(want, input(i, k));
            if (r == 0 ? h[i] != want : !std::isnan(h[i])) {
                fprintf(stderr, "reduce: rank %d element %zu is %g\n", r, i, h[i]);
                failures++;
                break;
            }
        }
    }
    // all-gather, in place: rank r's part already sits at offset r * COUNT
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclAllGather(s.d[r] + r * COUNT, s.d[r], COUNT, ncclFloat, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = s.get(r);
        for (int k = 0; k < nr; k++)
            for (size_t i = 0; i < COUNT; i++)
                if (h[k * COUNT + i] != input(k * COUNT + i, k)) {
                    fprintf(stderr, "allgather: rank %d block %d element %zu\n", r, k, i);
                    failures++;
                    k = nr;
                    break;
                }
    }
    // reduce-scatter (sum): s now holds, on every rank, block k = rank k's original block
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclReduceScatter(s.d[r], d.d[r], COUNT, ncclFloat, ncclSum, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = d.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            double want = nr * (double)input(r * COUNT + i, r);
            if (!close_to(h[i], want, 1e-6, "reducescatter", i, r)) { failures++; break; }
        }
    }
}

// ---- stream order: work before a collective is in it, work after sees its result ---------
static void stream_order(void)
{
    PerRank<float> b(COUNT);
    for (int r = 0; r < nr; r++) {
        OK(cudaSetDevice(r));
        fill_kernel<<<(COUNT + 127) / 128, 128, 0, stream[r]>>>(b.d[r], COUNT, r);
        OK(cudaGetLastError());
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++)
        NCCL_OK(ncclAllReduce(b.d[r], b.d[r], COUNT, ncclFloat, ncclSum, comm[r], stream[r]));
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        OK(cudaSetDevice(r));
        scale_kernel<<<(COUNT + 127) / 128, 128, 0, stream[r]>>>(b.d[r], COUNT, 2.0f);
        OK(cudaGetLastError());
    }
    for (int r = 0; r < nr; r++) {
        std::vector<float> h = b.get(r);
        for (size_t i = 0; i < COUNT; i++) {
            double want = 0;
            for (int k = 0; k < nr; k++) want += input(i, k);
            if (!close_to(h[i], 2 * want, 1e-6, "stream order", i, r)) { failures++; break; }
        }
    }
}

// ---- stream 0 in a group: each rank's call names its own device's default stream --------
static void default_streams(void)
{
    PerRank<int> b(COUNT);
    for (int r = 0; r < nr; r++) {
        std::vector<int> h(COUNT);
        for (size_t i = 0; i < COUNT; i++) h[i] = iinput(i, r);
        b.put(r, h);
    }
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++) {
        OK(cudaSetDevice(r));
        NCCL_OK(ncclAllReduce(b.d[r], b.d[r], COUNT, ncclInt32, ncclMax, comm[r], 0));
    }
    OK(cudaSetDevice(0));      // the group ends with another device current
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < nr; r++) {
        std::vector<int> h(COUNT);
        OK(cudaSetDevice(r));
        OK(cudaMemcpy(h.data(), b.d[r], COUNT * sizeof(int), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < COUNT; i++) {
            int want = iinput(i, 0);
            for (int k = 1; k < nr; k++) want = iinput(i, k) > want ? iinput(i, k) : want;
            if (h[i] != want) { fprintf(stderr, "default streams: rank %d element %zu\n", r, i); failures++; break; }
        }
    }
}

// ---- errors NCCL reports ------------------------------------------------------------------
static void errors(void)
{
    PerRank<float> b(COUNT);
    EXPECT_NCCL(ncclAllReduce(b.d[0], b.d[0], COUNT, (ncclDataType_t)ncclNumTypes, ncclSum, comm[0],
                              stream[0]), ncclInvalidArgument);
    EXPECT_NCCL(ncclAllReduce(b.d[0], b.d[0], COUNT, ncclFloat, (ncclRedOp_t)ncclNumOps, comm[0],
                              stream[0]), ncclInvalidArgument);
    EXPECT_NCCL(ncclAllReduce(NULL, b.d[0], COUNT, ncclFloat, ncclSum, comm[0], stream[0]),
                ncclInvalidArgument);
    EXPECT_NCCL(ncclAllReduce(b.d[0], b.d[0], COUNT, ncclFloat, ncclSum, NULL, stream[0]),
                ncclInvalidArgument);
    EXPECT_NCCL(ncclBroadcast(b.d[0], b.d[0], COUNT, ncclFloat, nr, comm[0], stream[0]),
                ncclInvalidArgument);
    if (nr > 1)   // rank 0's buffer must be on rank 0's device
        EXPECT_NCCL(ncclAllReduce(b.d[1], b.d[1], COUNT, ncclFloat, ncclSum, comm[0], stream[0]),
                    ncclInvalidArgument);
    EXPECT_NCCL(ncclGroupEnd(), ncclInvalidUsage);
    int v = 0;
    EXPECT_NCCL(ncclCommCount(comm[0], NULL), ncclInvalidArgument);
    EXPECT_NCCL(ncclCommCount(NULL, &v), ncclInvalidArgument);
    EXPECT(strcmp(ncclGetErrorString(ncclSuccess), ncclGetErrorString(ncclInvalidUsage)) != 0);
    int dup[2] = { 0, 0 };
    ncclComm_t c2[2];
    if (nr > 1) EXPECT_NCCL(ncclCommInitAll(c2, 2, dup), ncclInvalidUsage);   // one rank per device
    // an error inside a group fails the group's end too, and nothing of it is issued
    NCCL_OK(ncclGroupStart());
    EXPECT_NCCL(ncclAllReduce(NULL, b.d[0], COUNT, ncclFloat, ncclSum, comm[0], stream[0]),
                ncclInvalidArgument);
    EXPECT_NCCL(ncclGroupEnd(), ncclInvalidArgument);
#ifdef __CUEMU__
    cuemuClearDiagnostic();
#endif
}

#ifdef __CUEMU__
// One thread, several ranks, no group: NCCL would hang in the first call.
static void misuse(void)
{
    PerRank<float> b(COUNT);
    NCCL_OK(ncclAllReduce(b.d[0], b.d[0], COUNT, ncclFloat, ncclSum, comm[0], stream[0]));
    EXPECT_NCCL(ncclAllReduce(b.d[1], b.d[1], COUNT, ncclFloat, ncclSum, comm[1], stream[1]),
                ncclInvalidUsage);
    EXPECT(strstr(ncclGetLastError(comm[1]), "ncclGroupStart") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "NCCL would hang there") != NULL);
    cuemuClearDiagnostic();
    sync_all();                // the dropped call left nothing waiting
    allreduce_float(ncclSum, "sum after a refused call", 0);   // the ranks are in step again
    EXPECT(cuemuLastDiagnostic()[0] == '\0');

    // ranks that disagree on a collective (NCCL: a hang or garbage) are refused; the ranks
    // that did call it then wait for ranks that never will: a synchronisation says so
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(b.d[0], b.d[0], COUNT, ncclFloat, ncclSum, comm[0], stream[0]));
    NCCL_OK(ncclAllReduce(b.d[1], b.d[1], COUNT - 1, ncclFloat, ncclSum, comm[1], stream[1]));
    EXPECT_NCCL(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT(strstr(cuemuLastDiagnostic(), "rank 1 is the communicator's collective #") != NULL);
    EXPECT(strstr(cuemuLastDiagnostic(), "but rank 0 called ncclAllReduce(count 1001, ncclFloat32)") != NULL);
    cuemuClearDiagnostic();
}
#endif

int main(void)
{
#ifdef __CUEMU__
    setenv("CUEMU_DEVICES", "3", 0);   // 3 unless set (CUEMU_DEVICES=1 runs the one-rank case)
    setenv("CUEMU_NCCL_WAIT_MS", "300", 1);
#endif
    int ndev = 0, version = 0;
    OK(cudaGetDeviceCount(&ndev));
    if (ndev < 1) { printf("nccl_collectives: no device: skipped\n"); return 77; }
    nr = ndev < MAXR ? ndev : MAXR;
#ifdef __CUEMU__
    EXPECT(nr == (atoi(getenv("CUEMU_DEVICES")) < MAXR ? atoi(getenv("CUEMU_DEVICES")) : MAXR));
#endif
    NCCL_OK(ncclGetVersion(&version));
    EXPECT(version >= NCCL_VERSION(2, 0, 0));

    // ncclCommInitAll: rank r on device r
    NCCL_OK(ncclCommInitAll(comm, nr, NULL));
    for (int r = 0; r < nr; r++) {
        int count = -1, dev = -1, rank = -1;
        NCCL_OK(ncclCommCount(comm[r], &count));
        NCCL_OK(ncclCommCuDevice(comm[r], &dev));
        NCCL_OK(ncclCommUserRank(comm[r], &rank));
        EXPECT(count == nr && dev == r && rank == r);
        OK(cudaSetDevice(r));
        OK(cudaStreamCreate(&stream[r]));
    }

    allreduce_float(ncclSum, "float sum", 0);
    allreduce_float(ncclSum, "float sum in place", 1);
    allreduce_float(ncclProd, "float prod", 0);
    allreduce_float(ncclMax, "float max", 0);
    allreduce_float(ncclMin, "float min", 0);
    allreduce_float(ncclAvg, "float avg", 0);
    allreduce_int(ncclSum, "int sum");
    allreduce_int(ncclProd, "int prod");
    allreduce_int(ncclMax, "int max");
    allreduce_int(ncclMin, "int min");
    allreduce_int(ncclAvg, "int avg");
    allreduce_double_half();
    other_collectives();
    stream_order();
    default_streams();
    errors();
#ifdef __CUEMU__
    if (nr > 1) misuse();
#endif
    for (int r = 0; r < nr; r++) NCCL_OK(ncclCommDestroy(comm[r]));

    // ncclCommInitRank for every rank from one thread, inside a group
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < nr; r++) {
        OK(cudaSetDevice(r));
        NCCL_OK(ncclCommInitRank(&comm[r], nr, id, r));
    }
    NCCL_OK(ncclGroupEnd());
    allreduce_int(ncclSum, "int sum, ncclCommInitRank in a group");
    for (int r = 0; r < nr; r++) NCCL_OK(ncclCommDestroy(comm[r]));

    // one host thread per rank, no groups: each thread's calls meet the others'
    NCCL_OK(ncclGetUniqueId(&id));
    {
        PerRank<float> b(COUNT);
        for (int r = 0; r < nr; r++) {
            OK(cudaSetDevice(r));
            fill_kernel<<<(COUNT + 127) / 128, 128, 0, stream[r]>>>(b.d[r], COUNT, r);
            OK(cudaGetLastError());
        }
        std::vector<std::thread> threads;
        ncclResult_t res[MAXR];
        for (int r = 0; r < nr; r++)
            threads.emplace_back([&, r] {
                cudaSetDevice(r);
                res[r] = ncclCommInitRank(&comm[r], nr, id, r);
                if (res[r] == ncclSuccess)
                    res[r] = ncclAllReduce(b.d[r], b.d[r], COUNT, ncclFloat, ncclMax, comm[r], stream[r]);
            });
        for (auto &t : threads) t.join();
        for (int r = 0; r < nr; r++) EXPECT(res[r] == ncclSuccess);
        for (int r = 0; r < nr; r++) {
            std::vector<float> h = b.get(r);
            for (size_t i = 0; i < COUNT; i++) {
                float want = input(i, 0);
                for (int k = 1; k < nr; k++) want = std::fmax(want, input(i, k));
                if (h[i] != want) { fprintf(stderr, "threads: rank %d element %zu\n", r, i); failures++; break; }
            }
        }
        for (int r = 0; r < nr; r++) NCCL_OK(ncclCommDestroy(comm[r]));
    }

#ifdef __CUEMU__
    EXPECT(cuemuLastDiagnostic()[0] == '\0');
    // ncclCommInitRank for two ranks from one thread without a group: NCCL waits forever in
    // the first; the emulator gives up after CUEMU_NCCL_WAIT_MS and says why
    NCCL_OK(ncclGetUniqueId(&id));
    ncclComm_t lone = NULL;
    if (nr > 1) {
        EXPECT_NCCL(ncclCommInitRank(&lone, nr, id, 0), ncclInvalidUsage);
        EXPECT(lone == NULL);
        EXPECT(strstr(ncclGetLastError(NULL), "between ncclGroupStart() and ncclGroupEnd()") != NULL);
        cuemuClearDiagnostic();
    }

    // a synchronisation that reaches a collective not every rank called: a GPU hangs there
    NCCL_OK(ncclCommInitAll(comm, nr, NULL));
    if (nr > 1) {
        PerRank<float> b(COUNT);
        OK(cudaSetDevice(0));
        NCCL_OK(ncclAllReduce(b.d[0], b.d[0], COUNT, ncclFloat, ncclSum, comm[0], stream[0]));
        EXPECT_ERR(cudaStreamSynchronize(stream[0]), cudaErrorLaunchTimeout);
        EXPECT(strstr(cuemuLastDiagnostic(), nr == 3 ? "was reached by a synchronisation before "
                                             "rank(s) 1, 2 called it" : "before rank(s) 1 called it") != NULL);
        cudaDeviceReset();
    }
    for (int r = 0; r < nr; r++) NCCL_OK(ncclCommDestroy(comm[r]));
#else
    for (int r = 0; r < nr; r++) { cudaSetDevice(r); cudaStreamDestroy(stream[r]); }
#endif
    if (failures) { fprintf(stderr, "%d check(s) failed\n", failures); return 1; }
    printf("nccl_collectives: ok\n");
    return 0;
}
