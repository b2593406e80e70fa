// SPDX-License-Identifier: MIT
/*
 * cuda_pipeline_primitives.h for the emulator: CUDA's asynchronous global-to-shared copies
 * (cp.async on sm_80 and later) as the primitives __pipeline_memcpy_async, __pipeline_commit
 * and __pipeline_wait_prior.
 *
 * On a GPU a copy lands in shared memory at some moment between its issue and the
 * __pipeline_wait_prior that covers its batch. The emulator lands it at the latest moment CUDA
 * allows: at that wait. So a kernel that reads its tile before waiting for it (or without the
 * __syncthreads that makes every thread's copies visible to the others) reads the poison the
 * core fills shared memory with, in every thread order, instead of passing by luck. The source
 * is read, and checked like any global load, when the copy is issued. Copies no wait covered
 * are dropped when the block ends.
 */
#ifndef CUEMU_PIPELINE_PRIMITIVES_H
#define CUEMU_PIPELINE_PRIMITIVES_H

#include "cuda_runtime.h"

#include <cstdint>
#include <vector>

namespace cuemu {

struct pipe_copy {
    volatile unsigned char *dst;
    unsigned char bytes[16];
    unsigned size, fill;           /* size bytes land: size - fill copied, then fill zeros */
    unsigned long batch;
};

struct pipe_state {
    unsigned gen = 0;              /* cuemu_block_gen() when this thread's state was made */
    unsigned long committed = 0;   /* batches committed; copies issued now join batch `committed` */
    std::vector<pipe_copy> pending;
};

/* This thread's pending copies. One block runs at a time on each host thread, so a slot per
   thread of a block, per host thread. */
inline pipe_state &pipe_self()
{
    static thread_local pipe_state states[1024];
    pipe_state &s = states[cuemu_cur->linear];
    unsigned gen = ::cuemu_block_gen();
    if (s.gen != gen) {
        s.gen = gen;
        s.committed = 0;
        s.pending.clear();
    }
    return s;
}

inline void pipeline_memcpy_async(const char *file, int line, void *dst_shared,
                                  const void *src_global, size_t size_and_align,
                                  size_t zfill = 0)
{
    if (cuemu_cur == nullptr) {
        ::cuemu_device_error(cudaErrorInvalidDeviceFunction, file, line,
                             "__pipeline_memcpy_async called outside a kernel");
        return;
    }
    size_t n = size_and_align;
    if ((n != 4 && n != 8 && n != 16) || zfill > n) {
        ::cuemu_device_error(cudaErrorInvalidValue, file, line,
                             "__pipeline_memcpy_async: the size must be 4, 8 or 16 bytes, and "
                             "zfill at most the size");
        return;
    }
    if ((uintptr_t)dst_shared % n != 0 || (uintptr_t)src_global % n != 0) {
        ::cuemu_device_error(cudaErrorMisalignedAddress, file, line,
                             "__pipeline_memcpy_async: both addresses must be aligned to the "
                             "copy's size");
        return;
    }
    pipe_state &s = pipe_self();
    pipe_copy c;
    c.dst = (volatile unsigned char *)dst_shared;
    c.size = (unsigned)n;
    c.fill = (unsigned)zfill;
    c.batch = s.committed;
    const volatile unsigned char *src = (const volatile unsigned char *)src_global;
    for (unsigned i = 0; i < c.size - c.fill; i++)   /* read (and checked) now */
        c.bytes[i] = src[i];
    s.pending.push_back(c);
}

inline void pipeline_commit()
{
    if (cuemu_cur != nullptr)
        pipe_self().committed++;
}

/* Lands every copy of the batches committed before the newest `prior` ones. */
inline void pipeline_wait_prior(size_t prior)
{
    if (cuemu_cur == nullptr)
        return;
    pipe_state &s = pipe_self();
    size_t kept = 0;
    for (size_t i = 0; i < s.pending.size(); i++) {
        pipe_copy &c = s.pending[i];
        if (c.batch + prior < s.committed) {
            for (unsigned b = 0; b < c.size; b++)
                c.dst[b] = b < c.size - c.fill ? c.bytes[b] : 0;
        } else {
            s.pending[kept++] = c;
        }
    }
    s.pending.resize(kept);
}

}  // namespace cuemu

#define __pipeline_memcpy_async(...) ::cuemu::pipeline_memcpy_async(__FILE__, __LINE__, __VA_ARGS__)
#define __pipeline_commit() ::cuemu::pipeline_commit()
#define __pipeline_wait_prior(prior) ::cuemu::pipeline_wait_prior(prior)

#endif
