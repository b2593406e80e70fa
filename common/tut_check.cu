// SPDX-License-Identifier: MIT
/*
 * tut_check.cu: the error record behind CUDA_CHECK, and the small device helpers every chapter
 * library exports for Python (device count, memory in use, buffers for tests, the copy ceiling).
 * Linked into every chapter's shared library.
 */
#include "tut_check.h"
#include "tut_timer.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One record per host thread: Python reads it right after the failing call returns. */
static thread_local struct {
    int  code;
    int  line;
    char file[256];
    char expr[256];
    char name[64];
    char message[1024];
} tut_last;

static const char *tut_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

extern "C" int tut_record(int code, const char *expr, const char *file, int line)
{
    const char *name, *text;
    char built[64];
    if (code == TUT_ERR_TODO) {
        name = "ExerciseNotDone";
        text = "this exercise is still a TODO(student)";
    } else if (code == TUT_ERR_ARG) {
        name = "InvalidArgument";
        text = "argument rejected by the C code";
    } else if (code == TUT_ERR_NEWER_CUDA) {
        name = "NeedsNewerCuda";
        /* 13.0 and later here only when TUT_HAS_CUDA13=0 forced the 12.x side (its test) */
        snprintf(built, sizeof built, "needs CUDA 13.0 (built with %d.%d%s)",
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                 CUDART_VERSION >= 13000 ? " and TUT_HAS_CUDA13=0" : "");
        text = built;
    } else {
        name = cudaGetErrorName((cudaError_t)code);
        text = cudaGetErrorString((cudaError_t)code);
        /* The runtime also keeps this error as its "last error" until cudaGetLastError reads
           it, and the next launch check would then blame an innocent kernel for it. It has
           been reported here, so consume it. (A sticky error, after a fault inside a kernel,
           stays: every later call keeps failing until the process ends.) */
        cudaGetLastError();
    }
    tut_last.code = code;
    tut_last.line = line;
    snprintf(tut_last.file, sizeof tut_last.file, "%s", file);
    snprintf(tut_last.expr, sizeof tut_last.expr, "%s", expr);
    snprintf(tut_last.name, sizeof tut_last.name, "%s", name);
    snprintf(tut_last.message, sizeof tut_last.message, "%s:%d: %s -> %s: %s",
             tut_basename(file), line, expr, name, text);
    return code;
}

extern "C" int tut_record_error(int code, const char *name, const char *file, int line,
                                const char *fmt, ...)
{
    char text[768];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    tut_last.code = code;
    tut_last.line = line;
    snprintf(tut_last.file, sizeof tut_last.file, "%s", file);
    snprintf(tut_last.expr, sizeof tut_last.expr, "%s", name);
    snprintf(tut_last.name, sizeof tut_last.name, "%s", name);
    snprintf(tut_last.message, sizeof tut_last.message, "%s:%d: %s: %s",
             tut_basename(file), line, name, text);
    return code;
}

/* ---- what Python reads after a non-zero status ---------------------------------------- */
extern "C" int         tut_last_error_code(void)    { return tut_last.code; }
extern "C" int         tut_last_error_line(void)    { return tut_last.line; }
extern "C" const char *tut_last_error_file(void)    { return tut_last.file; }
extern "C" const char *tut_last_error_expr(void)    { return tut_last.expr; }
extern "C" const char *tut_last_error_name(void)    { return tut_last.name; }
extern "C" const char *tut_last_error_message(void) { return tut_last.message; }

extern "C" const char *tut_error_name(int code)
{
    return cudaGetErrorName((cudaError_t)code);
}

/* The CUDA runtime this library was built with (nvcc links it in): 12040 for 12.4, 13000 for
   13.0. Some answers differ between them (a launch's configuration error, for one). */
extern "C" int tut_runtime_version(void)
{
    return CUDART_VERSION;
}

/* Which backend this library was built for: the emulator compiles with TUT_BACKEND_CPU. */
extern "C" const char *tut_backend(void)
{
#ifdef TUT_BACKEND_CPU
    return "cpu";
#else
    return "gpu";
#endif
}

/* ---- device helpers the Python test harness uses ------------------------------------- */
extern "C" int tut_device_count(int *count)
{
    int status = 0;
    *count = 0;
    CUDA_CHECK(cudaGetDeviceCount(count));
cleanup:
    return status;
}

/* Device memory in use, as the driver sees it: total - free. */
extern "C" int tut_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
cleanup:
    return status;
}

extern "C" int tut_malloc(void **ptr, size_t bytes)
{
    int status = 0;
    *ptr = NULL;
    CUDA_CHECK(cudaMalloc(ptr, bytes));
cleanup:
    return status;
}

/* Managed memory (chapter 05, tut.ManagedArray): one address for host and device. Freed with
   tut_free (cudaFree frees managed memory too). */
extern "C" int tut_malloc_managed(void **ptr, size_t bytes)
{
    int status = 0;
    *ptr = NULL;
    CUDA_CHECK(cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal));
cleanup:
    return status;
}

extern "C" int tut_free(void *ptr)
{
    int status = 0;
    CUDA_CHECK(cudaFree(ptr));
cleanup:
    return status;
}

extern "C" int tut_memcpy_htod(void *dst, const void *src, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
cleanup:
    return status;
}

extern "C" int tut_memcpy_dtoh(void *dst, const void *src, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
cleanup:
    return status;
}

/* A device-to-device copy, synchronous: the copy ceiling a performance test measures with the
   same clock, in the same run, as the student's kernel (tut.measure_calls). */
extern "C" int tut_memcpy_dtod(void *dst, const void *src, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
cleanup:
    return status;
}

extern "C" int tut_memset(void *dst, int value, size_t bytes)
{
    int status = 0;
    CUDA_CHECK(cudaMemset(dst, value, bytes));
cleanup:
    return status;
}

/* How many of the n 32-bit words at d differ from value (out[0]) and the index of the first
   that does (out[1], ~0 if none): a large buffer checked where it is, not copied to the host
   (chapter 01's INT_MAX test reads 16 GiB this way in milliseconds on a GPU). */
__global__ void tut_count_ne_u32_kernel(const unsigned *d, size_t n, unsigned value,
                                        unsigned long long *out)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (d[i] != value) {
            atomicAdd(&out[0], 1ull);
            atomicMin(&out[1], (unsigned long long)i);
        }
}

extern "C" int tut_count_ne_u32(const void *d, size_t n, unsigned value,
                                unsigned long long *h_out)
{
    int status = 0;
    unsigned long long *d_out = NULL;
    const unsigned long long start[2] = {0, ~0ull};
    CUDA_CHECK(cudaMalloc(&d_out, sizeof start));
    CUDA_CHECK(cudaMemcpy(d_out, start, sizeof start, cudaMemcpyHostToDevice));
    if (n > 0) {
        tut_count_ne_u32_kernel<<<1024, 256>>>((const unsigned *)d, n, value, d_out);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaMemcpy(h_out, d_out, sizeof start, cudaMemcpyDeviceToHost));
cleanup:
    cudaFree(d_out);
    return status;
}

extern "C" int tut_synchronize(void)
{
    int status = 0;
    CUDA_CHECK(cudaDeviceSynchronize());
cleanup:
    return status;
}

/* Returns and clears the runtime's last error (a launch error not yet consumed). */
extern "C" int tut_get_last_error(void)
{
    return (int)cudaGetLastError();
}

/* ---- the memory-bound ceiling -------------------------------------------------------- */
/* Device-to-device cudaMemcpy of `bytes`, timed with events: one warm-up copy, then `reps`
   copies, each timed on its own into times_ms[i]. Bandwidth = 2 * bytes / time (read + write).
   The source is filled with a non-zero pattern: some memory systems compress zeros. */
extern "C" int tut_bench_d2d_copy(size_t bytes, int reps, float *times_ms)
{
    int status = 0;
    void *d_src = NULL, *d_dst = NULL;
    tut_timer t = {0};

    CUDA_CHECK(cudaMalloc(&d_src, bytes));
    CUDA_CHECK(cudaMalloc(&d_dst, bytes));
    CUDA_CHECK(cudaMemset(d_src, 0x3f, bytes));
    CUDA_CHECK(tut_timer_init(&t));
    CUDA_CHECK(cudaMemcpy(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice));
    for (int i = 0; i < reps; i++) {
        CUDA_CHECK(tut_timer_start(&t, 0));
        CUDA_CHECK(cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, 0));
        CUDA_CHECK(tut_timer_stop(&t));
        CUDA_CHECK(tut_timer_elapsed_ms(&t, &times_ms[i]));
    }
cleanup:
    tut_timer_free(&t);
    cudaFree(d_src);
    cudaFree(d_dst);
    return status;
}

/* ---- where host code crashed --------------------------------------------------------- */
/* A signal in the C code kills the Python process that loaded it, and "Segmentation fault" is
   all a student would see. This report names the signal, the address and the first frame in a
   .cu file it can place (addr2line over the library's debug information), then hands the signal
   on to the handler installed before it (Python's faulthandler, which prints the Python stack),
   and so on to the default action: the process still dies, with the same signal. Faults inside
   emulated kernels never get here: the emulator handles those itself, per launch. */
static struct sigaction tut_old_act[32];
static const int tut_crash_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

static const char *tut_signal_words(int sig, int code)
{
    switch (sig) {
    case SIGSEGV: return code == SEGV_ACCERR ? "a write or read the memory's protection forbids"
                                             : "an access to an address nothing is mapped at";
    case SIGBUS:  return "a misaligned or truncated memory access";
    case SIGFPE:  return "an arithmetic fault (an integer division by zero?)";
    case SIGILL:  return "an illegal instruction";
    case SIGABRT: return "abort() (a failed assert, or a C++ exception nothing caught)";
    }
    return "a fatal signal";
}

/* "file:line" of pc from addr2line, or "" when it cannot tell (no debug information). */
static void tut_place(void *pc, int is_return, char *out, size_t n)
{
    Dl_info di;
    out[0] = 0;
    if (!pc || !dladdr(pc, &di) || !di.dli_fname) return;
    uintptr_t off = (uintptr_t)pc - (uintptr_t)di.dli_fbase - (is_return ? 1 : 0);
    char cmd[1400], line[1024] = "";
    snprintf(cmd, sizeof cmd, "addr2line -e '%s' 0x%lx 2>/dev/null", di.dli_fname,
             (unsigned long)off);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(line, sizeof line, p)) line[0] = 0;
    pclose(p);
    line[strcspn(line, "\r\n")] = 0;
    char *disc = strstr(line, " (discriminator");
    if (disc) *disc = 0;
    if (!line[0] || line[0] == '?' || strstr(line, ":?") || strstr(line, ":0")) return;
    /* relative to the working directory (make runs from the repository's root) */
    char cwd[1024];
    const char *shown = line;
    if (getcwd(cwd, sizeof cwd)) {
        size_t cl = strlen(cwd);
        if (strncmp(line, cwd, cl) == 0 && line[cl] == '/') shown = line + cl + 1;
    }
    snprintf(out, n, "%s", shown);
}

static int tut_is_course_source(const char *place)
{
    return strstr(place, "chapters/") || strstr(place, "solutions/") || strstr(place, ".cu:");
}

static void tut_on_crash(int sig, siginfo_t *si, void *ucv)
{
    char buf[2048], place[1024] = "";
    void *frames[48];
    int n = backtrace(frames, 48);
    void *pc = NULL;
#if defined(__x86_64__)
    pc = (void *)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    pc = (void *)((ucontext_t *)ucv)->uc_mcontext.pc;
#else
    (void)ucv;
#endif
    /* the faulting instruction first (not a return address), then the callers */
    if (pc) tut_place(pc, 0, place, sizeof place);
    for (int i = 0; i < n && !tut_is_course_source(place); i++)
        if (frames[i] != pc) tut_place(frames[i], 1, place, sizeof place);
    if (!tut_is_course_source(place)) place[0] = 0;
    Dl_info di;
    int known = pc && dladdr(pc, &di);
    const char *lib = known && di.dli_fname ? di.dli_fname : "?";
    const char *sym = known && di.dli_sname ? di.dli_sname : "?";
    int len = snprintf(buf, sizeof buf,
                       "crash: %s in host code: %s\n"
                       "crash: at %s (in %s, %s); the Python stack follows\n",
                       sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE
                           ? "SIGFPE" : sig == SIGILL ? "SIGILL" : "SIGABRT",
                       tut_signal_words(sig, si ? si->si_code : 0),
                       place[0] ? place : "an unknown place (no debug information)", lib, sym);
    if (len > 0) {
        if (write(2, buf, (size_t)len) < 0) { /* nothing more to do */ }
    }
    if ((sig == SIGSEGV || sig == SIGBUS) && si) {
        len = si->si_addr ? snprintf(buf, sizeof buf, "crash: the address was %p\n", si->si_addr)
                          : snprintf(buf, sizeof buf, "crash: the address was 0: a NULL pointer\n");
        if (len > 0 && write(2, buf, (size_t)len) < 0) { /* nothing more to do */ }
    }
    /* what the emulator had diagnosed before the crash (its own stderr copy is off in tests) */
    const char *(*diag)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "cuemuLastDiagnostic");
    if (diag) {
        const char *d = diag();
        if (d && *d && write(2, d, strlen(d)) < 0) { /* nothing more to do */ }
    }
    for (size_t i = 0; i < sizeof tut_crash_sigs / sizeof *tut_crash_sigs; i++)
        if (tut_crash_sigs[i] == sig) sigaction(sig, &tut_old_act[i], NULL);
    /* A fault repeats when its instruction runs again; a signal that was sent (raise, kill:
       si_code <= 0) or an abort is sent again. */
    if ((sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE) || !si
        || si->si_code <= 0)
        raise(sig);
}

extern "C" int tut_install_crash_report(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = tut_on_crash;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof tut_crash_sigs / sizeof *tut_crash_sigs; i++)
        sigaction(tut_crash_sigs[i], &sa, &tut_old_act[i]);
    return 0;
}
