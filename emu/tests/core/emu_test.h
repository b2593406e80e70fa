// SPDX-License-Identifier: MIT
/*
 * emu_test.h: the few helpers the emulator's own tests share (core and planted bugs).
 *
 * Each test is a main() that returns 0 on success and 1 on failure, printing what failed.
 * Under nvcc (the lead's CI compiles every test with it) the emulator-only checks are left
 * out and EMU_ONLY() makes main() return 77, "skipped": a GPU cannot say what the emulator says.
 */
#ifndef EMU_TEST_H
#define EMU_TEST_H

#include <cstdio>
#include <cstdlib>
#include <cstring>

static int emu_test_failures = 0;

#define EXPECT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
            emu_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define EXPECT_EQ_INT(got, want)                                                         \
    do {                                                                                 \
        long long g_ = (long long)(got), w_ = (long long)(want);                         \
        if (g_ != w_) {                                                                  \
            std::fprintf(stderr, "FAIL %s:%d: %s = %lld, want %lld\n", __FILE__, __LINE__, \
                         #got, g_, w_);                                                  \
            emu_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define CUDA_OK(expr)                                                                    \
    do {                                                                                 \
        cudaError_t e_ = (expr);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "FAIL %s:%d: %s -> %s\n", __FILE__, __LINE__, #expr,     \
                         cudaGetErrorName(e_));                                          \
            emu_test_failures++;                                                         \
        }                                                                                \
    } while (0)

static inline int emu_test_result(const char *name)
{
    std::printf("%s: %s\n", name, emu_test_failures ? "FAILED" : "passed");
    return emu_test_failures ? 1 : 0;
}

#ifdef __CUEMU__
#define EMU_ONLY() ((void)0)
/* 1 when the emulator's diagnostics (since the last clear) contain every needle. */
static inline int diag_has(const char *const *needles, int count)
{
    const char *d = cuemuLastDiagnostic();
    for (int i = 0; i < count; i++) {
        if (!d || !std::strstr(d, needles[i])) {
            std::fprintf(stderr, "FAIL: diagnostic lacks \"%s\"; diagnostics were:\n%s\n",
                         needles[i], d ? d : "(none)");
            return 0;
        }
    }
    return 1;
}
#define EXPECT_DIAG(...)                                                                 \
    do {                                                                                 \
        const char *n_[] = {__VA_ARGS__};                                                \
        if (!diag_has(n_, (int)(sizeof n_ / sizeof n_[0]))) emu_test_failures++;         \
    } while (0)
/* "file.cu:123" for a line of this test, as the emulator prints it */
static inline const char *here(const char *file, int line)
{
    static char buf[8][512];
    static int k = 0;
    char *b = buf[k++ & 7];
    std::snprintf(b, sizeof buf[0], "%s:%d", file, line);
    return b;
}
#else
#define EMU_ONLY() return (std::printf("emulator-only test: skipped on a GPU\n"), 77)
#endif

/* The shared-memory race detector runs on the load and store hooks, which only the clang build
   has (CUEMU_TRACE, emu/emu.mk): EMU_RACE_DETECTOR says whether this build has it, and
   EMU_NEEDS_RACE_DETECTOR("name") makes a test of it return 77, "skipped", where it has not. */
#if defined(__CUEMU__) && defined(CUEMU_TRACE) && defined(__clang__)
#define EMU_RACE_DETECTOR 1
#define EMU_NEEDS_RACE_DETECTOR(name) ((void)0)
#elif defined(__CUEMU__)
#define EMU_RACE_DETECTOR 0
#define EMU_NEEDS_RACE_DETECTOR(name)                                                    \
    return (std::printf("%s: skipped (the race detector needs the clang build of the "      \
                        "emulator)\n", name), 77)
#else
#define EMU_RACE_DETECTOR 0
#define EMU_NEEDS_RACE_DETECTOR(name) ((void)0)   /* EMU_ONLY() has returned on a GPU */
#endif

#endif
