/* SPDX-License-Identifier: MIT */
/*
 * stub_runtime.h: the handles core_alone.c has on its stub runtime (stub_runtime.c). The core
 * itself sees only what the stub implements of cuemu_internal.h.
 */
#ifndef STUB_RUNTIME_H
#define STUB_RUNTIME_H

#include <stddef.h>

/* The stub's device limits: smaller than an H200's, so a test can tell that the core asked. */
#define STUB_MAX_THREADS  256
#define STUB_MAX_DYN_SMEM 16384

/* A device allocation of `size` bytes whose end abuts an inaccessible page (the first byte
   past it faults), recorded as made at file:line. NULL if the host is out of memory. */
void *stub_alloc(size_t size, const char *file, int line);
/* The same, its data pages starting exactly at `at` (page-aligned); NULL if they are taken. */
void *stub_alloc_at(void *at, size_t size, const char *file, int line);
/* Frees it: its pages become inaccessible and it is remembered as freed (use after free). */
void  stub_free(void *p);

/* Diagnostics since the last clear, one "cuemu: ..." line each. */
const char *stub_diag_text(void);
void        stub_diag_clear(void);

int  stub_last_error(void);          /* the last error recorded, and clears it */
void stub_reset_errors(void);        /* what cudaDeviceReset does to the error state */
int  stub_enqueued(void);            /* launches handed to cuemu_stream_enqueue so far */
int  stub_async_error(void);         /* the error a queued launch ended with (0: none); clears it */

#endif
