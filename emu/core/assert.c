/* SPDX-License-Identifier: MIT */
/*
 * assert.c: assert() in a kernel behaves as on a GPU. glibc's assert macro calls
 * __assert_fail; the program's own definition (this one, linked into it) takes the call. In a
 * kernel it prints the device's own message (file:line: function: block: [x,y,z], thread:
 * [x,y,z] Assertion `expr` failed.) and stops the launch with cudaErrorAssert, sticky, as a
 * GPU does; the program sees the error at its next synchronisation. A failed assert is the
 * program's own check, not something the emulator found, so it is printed without "cuemu: "
 * (Python's harness still reads it with the diagnostics).
 * Outside a kernel it does what glibc does: the message, then abort().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_internal.h"

#define E_ASSERT 710

void __assert_fail(const char *expr, const char *file, unsigned int line, const char *func)
{
    if (cuemu_cur) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.",
                 file, line, func ? func : "?", cuemu_block_idx.x, cuemu_block_idx.y,
                 cuemu_block_idx.z, cuemu_tidx.x, cuemu_tidx.y, cuemu_tidx.z, expr);
        cuemu_core_diag_device(msg);
        cuemu_launch_abort(E_ASSERT, 1, "");
    }
    fprintf(stderr, "%s: %s:%u: %s%sAssertion `%s' failed.\n", program_invocation_short_name,
            file, line, func ? func : "", func ? ": " : "", expr);
    fflush(stderr);
    abort();
}
