/* SPDX-License-Identifier: MIT */
/*
 * errors.c: last error, sticky error, diagnostics, and CUDA's error names and strings.
 *
 * CUDA keeps the last error per host thread (cudaGetLastError reads and clears it), while a
 * fault inside a kernel poisons the whole context: that sticky error is process-wide here.
 */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700      /* recursive mutexes under -std=c11 */
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static pthread_mutex_t rt_mu, rt_mt_mu;
static pthread_once_t rt_mu_once = PTHREAD_ONCE_INIT;

/* Recursive, because a runtime call may reach another (cudaFree -> the pool). */
static void rt_mu_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&rt_mu, &a);
    pthread_mutex_init(&rt_mt_mu, &a);
    pthread_mutexattr_destroy(&a);
}

/* A launch spread over several host threads (CUEMU_THREADS) runs while its launcher holds
   rt_mu (the queue that runs it does): its host threads (cuemu_w->mt, the launcher among them)
   take rt_mt_mu among themselves instead, and every other host thread still waits for rt_mu. */
void rt_lock(void)
{
    pthread_once(&rt_mu_once, rt_mu_init);
    pthread_mutex_lock(cuemu_w->mt ? &rt_mt_mu : &rt_mu);
}
void rt_unlock(void) { pthread_mutex_unlock(cuemu_w->mt ? &rt_mt_mu : &rt_mu); }

/* The runtime is C, but also builds as C++ (a test may compile everything with g++ -x c++). */
#ifdef __cplusplus
#define RT_THREAD_LOCAL thread_local
#else
#define RT_THREAD_LOCAL _Thread_local
#endif
static RT_THREAD_LOCAL int last_error;
static volatile int sticky_error;

int cuemu_set_last_error(int e)
{
    if (e != cudaSuccess) last_error = e;
    return e;
}

cudaError_t rt_err(cudaError_t e) { return (cudaError_t)cuemu_set_last_error((int)e); }

void cuemu_set_sticky_error(int e)
{
    if (e == cudaSuccess) return;
    /* The first fault is the one worth reporting; later ones are its consequences. */
    if (!sticky_error) sticky_error = e;
    last_error = sticky_error;
}

int cuemu_sticky_error(void) { return sticky_error ? sticky_error : rt_config_error(); }

/* cudaDeviceReset's half of the error state. */
void rt_errors_reset(void)
{
    sticky_error = 0;
    last_error = 0;
}

cudaError_t (cudaGetLastError)(void)
{
    int e = last_error;
    /* A sticky error survives reading: the context stays unusable until a reset. */
    if (sticky_error) return (cudaError_t)sticky_error;
    last_error = 0;
    return (cudaError_t)e;
}

cudaError_t (cudaPeekAtLastError)(void)
{
    if (sticky_error) return (cudaError_t)sticky_error;
    return (cudaError_t)last_error;
}

/* ---- diagnostics ------------------------------------------------------------------------ */
/* Bounded: a kernel that faults in a loop must not eat the host's memory. */
#define DIAG_CAP (64 * 1024)
static char diag_buf[DIAG_CAP];
static size_t diag_len;
static int diag_truncated;

static void diag_keep(const char *line, int n);

void cuemu_diag(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    while (n > 0 && line[n - 1] == '\n') line[--n] = '\0';

    const char *quiet = getenv("CUEMU_QUIET");
    if (!quiet || !*quiet || strcmp(quiet, "0") == 0) fprintf(stderr, "cuemu: %s\n", line);
    diag_keep(line, n);
}

void cuemu_diag_device(const char *line)
{
    /* the device's own words, printed as a GPU prints them (no "cuemu: ": the emulator found
       nothing, the program's assert did), and kept for Python like every diagnostic */
    fflush(stdout);
    fprintf(stderr, "%s\n", line);
    size_t n = strlen(line);
    diag_keep(line, n > 2000 ? 2000 : (int)n);
}

static void diag_keep(const char *line, int n)
{
    rt_lock();
    size_t need = (size_t)n + 8;            /* "cuemu: " + '\n' */
    if (diag_len + need + 1 <= DIAG_CAP) {
        memcpy(diag_buf + diag_len, "cuemu: ", 7);
        memcpy(diag_buf + diag_len + 7, line, (size_t)n);
        diag_buf[diag_len + 7 + (size_t)n] = '\n';
        diag_len += need;
        diag_buf[diag_len] = '\0';
    } else if (!diag_truncated) {
        static const char more[] = "cuemu: (further diagnostics dropped)\n";
        if (diag_len + sizeof more <= DIAG_CAP) {
            memcpy(diag_buf + diag_len, more, sizeof more);
            diag_len += sizeof more - 1;
        }
        diag_truncated = 1;
    }
    rt_unlock();
}

const char *cuemuLastDiagnostic(void) { return diag_buf; }

void cuemuClearDiagnostic(void)
{
    rt_lock();
    diag_len = 0;
    diag_buf[0] = '\0';
    diag_truncated = 0;
    rt_unlock();
}

/* ---- names and strings: CUDA 13.0's own, copied from its runtime ------------------------ */
static const struct { int code; const char *name, *text; } error_table[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {4, "cudaErrorCudartUnloading", "driver shutting down"},
    {5, "cudaErrorProfilerDisabled", "profiler disabled while using external profiling tool"},
    {6, "cudaErrorProfilerNotInitialized", "profiler not initialized: call cudaProfilerInitialize()"},
    {7, "cudaErrorProfilerAlreadyStarted", "profiler already started"},
    {8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {13, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {16, "cudaErrorInvalidHostPointer", "invalid host pointer"},
    {17, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {18, "cudaErrorInvalidTexture", "invalid texture reference"},
    {19, "cudaErrorInvalidTextureBinding", "texture is not bound to a pointer"},
    {20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {22, "cudaErrorAddressOfConstant", "invalid address of constant"},
    {23, "cudaErrorTextureFetchFailed", "fetch from texture failed"},
    {24, "cudaErrorTextureNotBound", "cannot fetch from a texture that is not bound"},
    {25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()"},
    {26, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type"},
    {27, "cudaErrorInvalidNormSetting", "read as normalized float not supported for data type"},
    {28, "cudaErrorMixedDeviceExecution", "device emulation mode and device execution mode cannot be mixed"},
    {31, "cudaErrorNotYetImplemented", "feature not yet implemented"},
    {32, "cudaErrorMemoryValueTooLarge", "memory size or pointer value too large to fit in 32 bit"},
    {34, "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {36, "cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver"},
    {37, "cudaErrorInvalidSurface", "invalid surface reference"},
    {43, "cudaErrorDuplicateVariableName", "duplicate global variable looked up by string name"},
    {44, "cudaErrorDuplicateTextureName", "duplicate texture looked up by string name"},
    {45, "cudaErrorDuplicateSurfaceName", "duplicate surface looked up by string name"},
    {46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {49, "cudaErrorIncompatibleDriverContext", "incompatible driver context"},
    {52, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch"},
    {65, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches"},
    {66, "cudaErrorLaunchFileScopedTex", "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)"},
    {67, "cudaErrorLaunchFileScopedSurf", "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)"},
    {68, "cudaErrorSyncDepthExceeded", "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth"},
    {69, "cudaErrorLaunchPendingCountExceeded", "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license"},
    {103, "cudaErrorSoftwareValidityNotEstablished", "integrity checks failed"},
    {127, "cudaErrorStartupFailure", "startup failure in cuda runtime"},
    {200, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed"},
    {206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed"},
    {207, "cudaErrorArrayIsMapped", "array is mapped"},
    {208, "cudaErrorAlreadyMapped", "resource already mapped"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
    {210, "cudaErrorAlreadyAcquired", "resource already acquired"},
    {211, "cudaErrorNotMapped", "resource not mapped"},
    {212, "cudaErrorNotMappedAsArray", "resource not mapped as array"},
    {213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer"},
    {214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered"},
    {215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {216, "cudaErrorDeviceAlreadyInUse", "exclusive-thread device already in use by a different thread"},
    {217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed"},
    {219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"},
    {220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution"},
    {221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found"},
    {222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain."},
    {223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled"},
    {224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported"},
    {225, "cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
    {226, "cudaErrorContained", "Invalid access of peer GPU memory over nvlink or a hardware error"},
    {300, "cudaErrorInvalidSource", "device kernel image is invalid"},
    {301, "cudaErrorFileNotFound", "file not found"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed"},
    {304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process"},
    {709, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {710, "cudaErrorAssert", "device-side assert triggered"},
    {711, "cudaErrorTooManyPeers", "peer mapping resources exhausted"},
    {712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {714, "cudaErrorHardwareStackError", "hardware stack error"},
    {715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"},
    {716, "cudaErrorMisalignedAddress", "misaligned address"},
    {717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space"},
    {718, "cudaErrorInvalidPc", "invalid program counter"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed"},
    {800, "cudaErrorNotPermitted", "operation not permitted"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {802, "cudaErrorSystemNotReady", "system not yet initialized"},
    {803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination"},
    {804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW"},
    {805, "cudaErrorMpsConnectionFailed", "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed"},
    {807, "cudaErrorMpsServerNotReady", "MPS server is not ready to accept new MPS client requests"},
    {808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted"},
    {809, "cudaErrorMpsMaxConnectionsReached", "the hardware resources required to support device connections have been exhausted"},
    {810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server"},
    {811, "cudaErrorCdpNotSupported", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"},
    {812, "cudaErrorCdpVersionMismatch", "unsupported interaction between different versions of CUDA Dynamic Parallelism"},
    {900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {909, "cudaErrorTimeout", "wait operation timed out"},
    {910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {911, "cudaErrorExternalDevice", "an async error has occured in external entity outside of CUDA"},
    {912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"},
    {913, "cudaErrorFunctionNotLoaded", "the function handle is not loaded when calling an API that requires a loaded function"},
    {914, "cudaErrorInvalidResourceType", "one or more resources passed in are not valid resource types for the operation"},
    {915, "cudaErrorInvalidResourceConfiguration", "one or more resources are insufficient or non-applicable for the operation"},
    {999, "cudaErrorUnknown", "unknown error"},
};

static int error_index(cudaError_t e)
{
    int lo = 0, hi = (int)(sizeof error_table / sizeof error_table[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (error_table[mid].code == (int)e) return mid;
        if (error_table[mid].code < (int)e) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

const char *(cudaGetErrorName)(cudaError_t error)
{
    int i = error_index(error);
    return i < 0 ? "unrecognized error code" : error_table[i].name;
}

const char *(cudaGetErrorString)(cudaError_t error)
{
    int i = error_index(error);
    return i < 0 ? "unrecognized error code" : error_table[i].text;
}
