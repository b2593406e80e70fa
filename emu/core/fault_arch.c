/* SPDX-License-Identifier: MIT */
/*
 * What a signal's context says about the interrupted instruction, per processor: its address,
 * the stack pointer, whether a memory fault was a read or a write, whether it is an atomic
 * read-modify-write; and a one-instruction step, after which the step's SIGTRAP comes. The
 * core's fault reports (sched.c) and the runtime's host-access checks (stream.c) ask here, so
 * that they read the same on x86-64 and on 64-bit Arm:
 *
 *   x86-64   the page fault's error code (REG_ERR bit 1: a write) and the trap flag (EFLAGS
 *            bit 8: one instruction, then SIGTRAP).
 *   aarch64  the fault's syndrome (ESR_EL1, which Linux adds to the signal frame as an
 *            esr_context record: WnR, bit 6, says write) when the frame has it, else the
 *            instruction itself, decoded (qemu-user's frames have no syndrome). There is no
 *            trap flag a process can set: the instruction is copied to a page of this
 *            thread's, followed by a BRK, and run there (as debuggers step out of line); the
 *            BRK's SIGTRAP sends the thread back to the instruction after the original.
 *            An integer division by zero does not trap at all (SDIV and UDIV give 0): the
 *            emulated code is compiled with -fsanitize=integer-divide-by-zero (emu/emu.mk),
 *            and its check calls the handler below, which raises the SIGFPE that x86-64's
 *            DIV would have.
 */
#define _GNU_SOURCE                /* REG_RIP, REG_ERR, REG_EFL */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "core_internal.h"

#if defined(__aarch64__)
/* 1 store, 0 load, -1 not a load or store, for one A64 instruction. A read-modify-write
   (the LSE atomics, CAS, SWP) counts as a store, as x86-64's error code counts a locked one. */
static int a64_store(uint32_t i)
{
    if ((i & 0x0a000000) != 0x08000000) return -1;          /* not in the load/store group */
    if ((i & 0x3f000000) == 0x08000000)                        /* exclusive, acquire/release */
        return (i & (1u << 21)) ? 1 : !(i & (1u << 22));       /* o1: CAS, CASP; else L */
    if ((i & 0x3b000000) == 0x18000000) return 0;              /* LDR (literal)              */
    if ((i & 0x3a000000) == 0x28000000) return !(i & (1u << 22));   /* pairs: L              */
    if ((i & 0xbf800000) == 0x0c000000 || (i & 0xbf800000) == 0x0c800000 ||
        (i & 0xbf800000) == 0x0d000000 || (i & 0xbf800000) == 0x0d800000)
        return !(i & (1u << 22));                              /* SIMD structures (LD1...)  */
    if ((i & 0x3f200c00) == 0x19000000)                        /* LDAPUR, STLUR              */
        return ((i >> 22) & 3) == 0;
    if ((i & 0x3a000000) == 0x38000000) {                      /* one register              */
        if ((i & 0x3f200c00) == 0x38200000)                    /* LDADD..., SWP, LDAPR      */
            return ((i >> 12) & 0xf) == 0xc ? 0 : 1;
        if (i & (1u << 26)) return !(i & (1u << 22));          /* SIMD&FP: opc bit 0 is L   */
        return ((i >> 22) & 3) == 0;                           /* opc 00 store, else loads  */
    }
    return -1;
}

/* 1 for an atomic read-modify-write or an exclusive access (what a host atomic compiles to:
   LSE atomics and CAS, or an LDXR/STXR loop). */
static int a64_atomic(uint32_t i)
{
    if ((i & 0x3f000000) == 0x08000000)
        return (i & (1u << 21)) || !(i & (1u << 23));          /* CAS; LDXR, STXR (o2 = 0)  */
    return (i & 0x3f200c00) == 0x38200000 && ((i >> 12) & 0xf) != 0xc;
}

/* The ESR from the frame's esr_context record, or 0 when there is none. */
static uint64_t a64_esr(const ucontext_t *uc)
{
    const unsigned char *p = (const unsigned char *)uc->uc_mcontext.__reserved;
    const unsigned char *end = p + sizeof uc->uc_mcontext.__reserved;
    while (p + 8 <= end) {
        uint32_t magic, size;
        memcpy(&magic, p, 4);
        memcpy(&size, p + 4, 4);
        if (!magic || size < 8 || p + size > end) break;
        if (magic == 0x45535201 && size >= 16) {              /* ESR_MAGIC */
            uint64_t esr;
            memcpy(&esr, p + 8, 8);
            return esr;
        }
        p += size;
    }
    return 0;
}

/* Where a step out of line runs: this thread's page, the instruction and a BRK after it. */
#define STEP_BRK 0xd420f9c0u          /* brk #0x7ce */
static __thread uint32_t *step_page;
static __thread uintptr_t step_resume;

/* The instruction's real address when pc is in the step page (it faulted again there). */
static uintptr_t a64_real_pc(uintptr_t pc)
{
    return step_page && pc == (uintptr_t)step_page && step_resume ? step_resume - 4 : pc;
}
#endif

void *cuemu_sig_pc(const void *ucv)
{
    const ucontext_t *uc = (const ucontext_t *)ucv;
#if defined(__x86_64__)
    return (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (void *)a64_real_pc((uintptr_t)uc->uc_mcontext.pc);
#else
    (void)uc;
    return NULL;
#endif
}

void *cuemu_sig_sp(const void *ucv)
{
    const ucontext_t *uc = (const ucontext_t *)ucv;
#if defined(__x86_64__)
    return (void *)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (void *)uc->uc_mcontext.sp;
#else
    (void)uc;
    return NULL;
#endif
}

int cuemu_sig_write(const void *ucv)
{
    const ucontext_t *uc = (const ucontext_t *)ucv;
#if defined(__x86_64__)
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#elif defined(__aarch64__)
    uint64_t esr = a64_esr(uc);
    unsigned ec = (unsigned)(esr >> 26) & 0x3f;
    if (ec == 0x24 || ec == 0x25) return (esr >> 6) & 1;       /* a data abort: WnR */
    /* an instruction fetch that faulted (a jump to a bad address) has no instruction to read */
    uintptr_t pc = a64_real_pc((uintptr_t)uc->uc_mcontext.pc);
    if (!pc || (pc & 3) || uc->uc_mcontext.fault_address - pc < 4) return -1;
    return a64_store(*(const uint32_t *)pc);
#else
    (void)uc;
    return -1;
#endif
}

int cuemu_insn_atomic(const void *pc)
{
    if (!pc) return 0;
#if defined(__x86_64__)
    /* a lock prefix, or xchg with a memory operand, which the processor always locks */
    const unsigned char *p = (const unsigned char *)pc;
    for (int i = 0; i < 15; i++) {
        unsigned char c = p[i];
        if (c == 0xF0) return 1;
        if (c == 0x66 || c == 0x67 || c == 0xF2 || c == 0xF3 || c == 0x2E || c == 0x3E ||
            c == 0x26 || c == 0x36 || c == 0x64 || c == 0x65 || (c >= 0x40 && c <= 0x4F))
            continue;                                 /* other prefixes, REX */
        return c == 0x86 || c == 0x87;
    }
    return 0;
#elif defined(__aarch64__)
    return a64_atomic(*(const uint32_t *)pc);
#else
    return 0;
#endif
}

int cuemu_step_arm(void *ucv)
{
    ucontext_t *uc = (ucontext_t *)ucv;
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100;
    return 1;
#elif defined(__aarch64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
    if (step_page && pc == (uintptr_t)step_page) return 1;    /* already stepping it */
    uint32_t insn = *(const uint32_t *)pc;
    /* only a load or store other than LDR (literal): nothing else reads the pc, so it runs
       the same at another address */
    if (a64_store(insn) < 0 || (insn & 0x3b000000) == 0x18000000) return 0;
    if (!step_page) {
        void *p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 0;                        /* W^X enforced: no step */
        step_page = (uint32_t *)p;
    }
    step_page[0] = insn;
    step_page[1] = STEP_BRK;
    __builtin___clear_cache((char *)step_page, (char *)(step_page + 2));
    step_resume = pc + 4;
    uc->uc_mcontext.pc = (uintptr_t)step_page;
    return 1;
#else
    (void)uc;
    return 0;
#endif
}

int cuemu_step_done(void *ucv)
{
    ucontext_t *uc = (ucontext_t *)ucv;
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
    return 1;
#elif defined(__aarch64__)
    if (!step_page || uc->uc_mcontext.pc != (uintptr_t)(step_page + 1) || !step_resume) return 0;
    uc->uc_mcontext.pc = step_resume;
    step_resume = 0;
    return 1;
#else
    (void)uc;
    return 0;
#endif
}

/* -fsanitize=integer-divide-by-zero's checks call these (emu/emu.mk adds it where the
   processor does not trap): the SIGFPE goes where x86-64's would, to the kernel's fault report
   (sched.c) or, in host code, to the program's handler or the default action. Weak, as the
   alignment handlers in access.c: a sanitizer runtime has its own. */
__attribute__((weak)) void __ubsan_handle_divrem_overflow(void *data, void *lhs, void *rhs)
{
    (void)data; (void)lhs; (void)rhs;
    raise(SIGFPE);
}
__attribute__((weak)) void __ubsan_handle_divrem_overflow_abort(void *data, void *lhs, void *rhs)
{
    (void)data; (void)lhs; (void)rhs;
    raise(SIGFPE);
}
