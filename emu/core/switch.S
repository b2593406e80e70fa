/* SPDX-License-Identifier: MIT */
/*
 * Fiber context switch. glibc's swapcontext saves the signal mask with a system call
 * (about 1 us); a barrier-heavy kernel switches millions of times, so only the
 * callee-saved registers are saved here (about 10-20 ns).
 *
 *   void cuemu_ctx_switch(void **save_sp, void *load_sp);
 *   cuemu_ctx_start: first "return" address of a new fiber; calls fn(arg) held in
 *   callee-saved registers by the core, and never returns.
 */
#if defined(__x86_64__)
    .text
    .globl  cuemu_ctx_switch
    .hidden cuemu_ctx_switch
    .type   cuemu_ctx_switch, @function
cuemu_ctx_switch:
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    ret
    .size   cuemu_ctx_switch, .-cuemu_ctx_switch

    .globl  cuemu_ctx_start
    .hidden cuemu_ctx_start
    .type   cuemu_ctx_start, @function
cuemu_ctx_start:
    .cfi_startproc
    .cfi_undefined rip
    movq    %r12, %rdi
    callq   *%r13
    ud2
    .cfi_endproc
    .size   cuemu_ctx_start, .-cuemu_ctx_start
#elif defined(__aarch64__)
    .text
    .globl  cuemu_ctx_switch
    .hidden cuemu_ctx_switch
    .type   cuemu_ctx_switch, %function
cuemu_ctx_switch:
    sub     sp, sp, #160
    stp     x19, x20, [sp, #0]
    stp     x21, x22, [sp, #16]
    stp     x23, x24, [sp, #32]
    stp     x25, x26, [sp, #48]
    stp     x27, x28, [sp, #64]
    stp     x29, x30, [sp, #80]
    stp     d8,  d9,  [sp, #96]
    stp     d10, d11, [sp, #112]
    stp     d12, d13, [sp, #128]
    stp     d14, d15, [sp, #144]
    mov     x2, sp
    str     x2, [x0]
    mov     sp, x1
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    ldp     d8,  d9,  [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    add     sp, sp, #160
    ret
    .size   cuemu_ctx_switch, .-cuemu_ctx_switch

    .globl  cuemu_ctx_start
    .hidden cuemu_ctx_start
    .type   cuemu_ctx_start, %function
cuemu_ctx_start:
    mov     x0, x19
    blr     x20
    brk     #0
    .size   cuemu_ctx_start, .-cuemu_ctx_start
#endif
#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
