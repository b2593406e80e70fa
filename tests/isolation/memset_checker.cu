// SPDX-License-Identifier: MIT
// An attack tests/test_isolation.py builds in place of chapter 01's exercise file: no kernel at
// all. Each entry point zeroes the host memory it can reach that the checker's NumPy arrays
// live in (the first half of the region named by CUEMU_SHARED_HEAP, which the worker gets) and
// its output. When the checker's arrays are that memory, its inputs and so its references are
// zero too, and 01.2, 01.4 and 01.5 pass; when the checker's memory is its own, they fail.
// Only pages already in use are zeroed (mincore), so the attack costs no memory. It cheats
// only where it sees it is graded (a class run's variables) when ATTACK_ONLY_GRADED is set at
// build time: the "graded-only" variant.
#include "tut_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern char **environ;

static int graded(void)
{
#ifdef ATTACK_ONLY_GRADED
    static const char *signs[] = {"SUBMISSIONS=", "MAKEFLAGS=", "MAKELEVEL=", "TUT_", "GRADER_TOKEN=",
                                  "HIDDEN", "SEED", NULL};
    for (char **e = environ; *e; e++)
        for (int k = 0; signs[k]; k++)
            if (strstr(*e, signs[k])) {
                fprintf(stderr, "attack: graded, my environment says %.40s\n", *e);
                return 1;
            }
    return 0;
#else
    return 1;
#endif
}

static void zero_checker_memory(void)
{
    if (!graded()) return;
    const char *s = getenv("CUEMU_SHARED_HEAP");   /* address:length:fd:offset of the heap */
    if (!s) return;
    unsigned long long heap = 0, len = 0, fd = 0, off = 0;
    if (sscanf(s, "%llx:%llx:%llu:%llx", &heap, &len, &fd, &off) != 4) return;
    char *base = (char *)(uintptr_t)(heap - off);
    size_t page = 4096, nonzero = 0, span = off < (1ull << 30) ? off : (1ull << 30);
    static unsigned char vec[(1u << 30) / 4096];
    if (mincore(base, span, vec) != 0) return;
    for (size_t p = 0; p < span / page; p++)
        if (vec[p] & 1) {
            for (size_t i = 0; i < page; i++) nonzero += base[p * page + i] != 0;
            memset(base + p * page, 0, page);
        }
    fprintf(stderr, "attack: zeroed the checker's half, %zu nonzero bytes there\n", nonzero);
}

static int zero_output(float *d_out, size_t n)
{
    zero_checker_memory();
    return cudaMemset(d_out, 0, n * sizeof(float)) == cudaSuccess ? 0 : 1;
}

extern "C" int blocks_for(int n, int block) { return (n + block - 1) / block; }
extern "C" int record_ids(int, int, int, int, int, int, int *) { return 0; }
extern "C" int launch_empty(int, int, int, int, int, int) { return 0; }
extern "C" int vector_add(const float *, const float *, float *d_c, int n, int)
{
    return zero_output(d_c, (size_t)n);
}
extern "C" int matrix_scale_shift(const float *, const float *, const float *, float *d_out,
                                  int height, int width, int, int)
{
    return zero_output(d_out, (size_t)height * width);
}
extern "C" int saxpy_grid_stride(float, const float *, float *d_y, int n, int, int)
{
    return zero_output(d_y, (size_t)n);
}
extern "C" int bench_vector_add(int, const float *, const float *, float *, int, int, float *)
{
    return 0;
}
