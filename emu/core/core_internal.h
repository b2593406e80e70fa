/* SPDX-License-Identifier: MIT */
/*
 * core_internal.h: what the core's own files share (sched.c, access.c, profile.c). Not seen by
 * student code or the runtime: the runtime reaches the core through cuemu_core.h only, and the
 * core reaches the runtime through cuemu_internal.h only.
 */
#ifndef CUEMU_CORE_INTERNAL_H
#define CUEMU_CORE_INTERNAL_H

#include <stddef.h>
#include "cuemu_core.h"
#include "cuemu_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the access hooks (access.c; see its header comment), told by the scheduler ----------- */
void cuemu_access_launch(const struct cuemu_launch_desc *d, void *dyn, size_t dyn_size,
                         const char *dyn_name);
void cuemu_access_dyn_name(const char *name);
void cuemu_access_block(void);
void cuemu_access_barrier(void);
void cuemu_access_warp_sync(unsigned warp);
void cuemu_access_shared_var(void *p, size_t n, const char *name);
/* For the profile: 1 if p lies in the dynamic shared area or a __shared__ variable. */
int  cuemu_access_in_shared(const void *p);
/* Called for every access a kernel thread makes, once the checks passed (NULL: nobody). */
extern void (*cuemu_access_observer)(const void *addr, unsigned size, int write, void *pc);

/* ---- the memory-access profile (profile.c), told of launches and blocks by access.c -------- */
void cuemu_profile_launch(const struct cuemu_launch_desc *d);
void cuemu_profile_block(void);

/* ---- the scheduler (sched.c) ---------------------------------------------------------------- */
/* Stops the running launch with err (the message, unless "", is reported as the launch's diagnostic;
   sticky: until cudaDeviceReset, else the launch's own error, returned once by the
   synchronisation that ran it). */
void cuemu_launch_abort(int err, int sticky, const char *msg) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif
#endif
