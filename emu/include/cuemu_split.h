// SPDX-License-Identifier: MIT
/*
 * cuemu_split.h: kernels split at their barriers (included by cuemu_device.h).
 *
 * A block's threads are fibers: at a __syncthreads each one switches to the next, about 30 ns
 * of a thread's stack and record brought back from memory per thread and barrier, far more
 * than the code between two barriers of a tree reduction. When a kernel calls __syncthreads
 * only in its own body, cuemu-rewrite (emu/rewrite) makes the body a coroutine instead:
 *
 *   __global__ void k(P p, Q q) {         __global__ void k(P p, Q q) { CUEMU_CO_BEGIN(P p, Q q)
 *       if (i >= n) return;         ->        if (i >= n) CUEMU_CO_RETURN;
 *       __syncthreads();                      CUEMU_CO_SYNCTHREADS();
 *   }                                     CUEMU_CO_END(p, q) }
 *
 * Each thread's call runs its body up to its first barrier, where it suspends and returns; the
 * core then runs the rest of the block phase by phase, resuming each thread's coroutine in
 * turn (sched.c, co_run): the code between two barriers becomes a loop over the block's
 * threads, and a thread's state between barriers is its coroutine frame (its live variables
 * only), a few cache lines of one arena. Everything else is as with fibers: the same thread
 * orders, the race detector's barrier epochs, the same deadlock reports.
 *
 * A helper of the same file that waits the same way (a `void` device function called as a
 * statement) becomes a coroutine the kernel awaits (co_sub below). A kernel that waits in any
 * other way (warp operations, other cooperative groups, __nanosleep, a helper that does) is
 * not split; the rewriter leaves it alone, and the core
 * refuses a wait it did not see (a helper in another file) rather than run it wrongly.
 * Coroutines need C++20 (or g++'s -fcoroutines): without them, or with CUEMU_NO_SPLIT (make
 * EMU_SPLIT=0), the macros below give the body back as it was written.
 *
 * A split kernel whose barriers every thread reaches alike (the rewriter's tl_plan says when)
 * needs no coroutine at all: it runs as thread loops (CUEMU_TL_*, at the end of this file),
 * each stretch between two barriers one loop over the block's threads, about 80 instructions
 * less per thread and barrier than a resumption.
 */
#ifndef CUEMU_SPLIT_H
#define CUEMU_SPLIT_H

#if defined(__cpp_impl_coroutine) && !defined(CUEMU_NO_SPLIT)
#define CUEMU_SPLIT 1
#include <coroutine>
#include <new>
#include <type_traits>

namespace cuemu {
// The coroutine type of a split body. Its frame comes from the block's arena and is never
// freed one by one; the handle is not kept (the barrier's awaiter hands the frame to the
// core), so a thread that finished simply never waits again.
struct co_task {
    struct promise_type {
        co_task get_return_object() noexcept { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { __builtin_trap(); }
        static void *operator new(size_t n) { return ::cuemu_co_alloc(n); }
        static void operator delete(void *, size_t) noexcept {}
    };
};

// __syncthreads(): the thread's coroutine waits; the core resumes it in the next phase.
struct co_bar {
    const char *file;
    int line;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const noexcept
    { ::cuemu_co_wait(h.address(), 0, file, line); }
    void await_resume() const noexcept {}
};
// __syncthreads_count, _and, _or (op 0, 1, 2): the same, and the block's answer.
struct co_bar_op {
    int op, pred;
    const char *file;
    int line;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const noexcept
    { ::cuemu_co_wait(h.address(), pred, file, line); }
    int await_resume() const noexcept { return ::cuemu_co_result(op); }
};

// A device function of the kernel's file that waits (a helper, `void` and called as a
// statement) is split as well: its body is a coroutine of this type, which a split caller
// awaits (CUEMU_CO_AWAIT_BEGIN f(...) CUEMU_CO_AWAIT_END). The call runs it at once, up to its
// first barrier; the frame left waiting there is the helper's, the one the core resumes, and
// its end resumes the caller. Called from code on fibers (a kernel that waits in some other
// way too), its barriers are the fibers' (co_bar_any), and it has ended when the call returns,
// as a function's would. Its frame is freed when the call ends (cuemu_co_sub_free).
struct co_sub {
    struct promise_type {
        std::coroutine_handle<> cont;   // the caller waiting for its end, if any
        co_sub get_return_object() noexcept
        { return co_sub{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        struct to_caller {
            bool await_ready() const noexcept { return false; }
            std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) const noexcept
            {
                std::coroutine_handle<> c = h.promise().cont;
                return c ? c : std::noop_coroutine();
            }
            void await_resume() const noexcept {}
        };
        to_caller final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { __builtin_trap(); }
        static void *operator new(size_t n) { return ::cuemu_co_sub_alloc(n); }
        static void operator delete(void *p, size_t n) noexcept { ::cuemu_co_sub_free(p, n); }
    };
    std::coroutine_handle<promise_type> h;
    explicit co_sub(std::coroutine_handle<promise_type> c) noexcept : h(c) {}
    co_sub(co_sub &&o) noexcept : h(o.h) { o.h = {}; }
    co_sub(const co_sub &) = delete;
    ~co_sub() { if (h) h.destroy(); }   // its call ended: at its final suspension
    bool await_ready() const noexcept { return h.done(); }
    void await_suspend(std::coroutine_handle<> c) const noexcept { h.promise().cont = c; }
    void await_resume() const noexcept {}
};

// A helper's __syncthreads: in split code the frame waits, as a kernel's (co_bar); on a fiber,
// the fibers' barrier, after which the helper goes on at once. (A kernel's own barriers keep
// co_bar: a split kernel always runs split, and its barriers ask nothing.)
struct co_bar_any : co_bar {
    bool await_ready() const noexcept
    {
        if (::cuemu_co_is_active()) return false;
        ::cuemu_syncthreads(file, line);
        return true;
    }
};
struct co_bar_op_any : co_bar_op {
    mutable int fiber_result = -1;
    bool await_ready() const noexcept
    {
        if (::cuemu_co_is_active()) return false;
        fiber_result = ::cuemu_syncthreads_op(op, pred, file, line);
        return true;
    }
    int await_resume() const noexcept
    { return fiber_result >= 0 ? fiber_result : co_bar_op::await_resume(); }
};

// The kernel's body as a coroutine lambda, run by the calling thread up to its first barrier.
// It takes the kernel's parameters as its own: the coroutine's frame holds each thread's copies
// (each thread may change its own), where the compiler knows that nothing else writes them.
template <class F, class... A>
static inline void co_kernel(F body, A... args)
{
    ::cuemu_co_active(1);
    body(args...);
    ::cuemu_co_active(0);
}
// A kernel with a parameter the rewriter cannot name: the lambda captures them by copy. It
// lives in the arena beside the frame, which refers to it.
template <class F>
static inline void co_kernel_capture(F &&f)
{
    using L = typename std::decay<F>::type;
    L *body = new (::cuemu_co_alloc(sizeof(L))) L(static_cast<F &&>(f));
    ::cuemu_co_active(1);
    (*body)();
    ::cuemu_co_active(0);
}
}  // namespace cuemu

#define CUEMU_CO_BEGIN(...) ::cuemu::co_kernel([](__VA_ARGS__) -> ::cuemu::co_task {
#define CUEMU_CO_END(...) }, __VA_ARGS__);
#define CUEMU_CO_END0 });
#define CUEMU_CO_BEGIN_CAPTURE ::cuemu::co_kernel_capture([=]() mutable -> ::cuemu::co_task {
#define CUEMU_CO_END_CAPTURE });
#define CUEMU_CO_RETURN co_return
#define CUEMU_CO_SYNCTHREADS() (co_await ::cuemu::co_bar{__FILE__, __LINE__})
#define CUEMU_CO_SYNCTHREADS_COUNT(p) \
    (co_await ::cuemu::co_bar_op{0, (p) ? 1 : 0, __FILE__, __LINE__})
#define CUEMU_CO_SYNCTHREADS_AND(p) \
    (co_await ::cuemu::co_bar_op{1, (p) ? 1 : 0, __FILE__, __LINE__})
#define CUEMU_CO_SYNCTHREADS_OR(p) \
    (co_await ::cuemu::co_bar_op{2, (p) ? 1 : 0, __FILE__, __LINE__})
#define CUEMU_CO_SUB ::cuemu::co_sub
// a split helper's __forceinline__ (the rewriter's cuemu_rewrite.c, forceinline_at): g++ 14
// gives the coroutine's resumption always_inline too, then fails to compile its call
#ifdef __clang__
#define CUEMU_CO_FORCEINLINE __forceinline__
#else
#define CUEMU_CO_FORCEINLINE inline
#endif
#define CUEMU_CO_AWAIT_BEGIN (co_await
#define CUEMU_CO_AWAIT_END )
#define CUEMU_CO_HSYNC() (co_await ::cuemu::co_bar_any{{__FILE__, __LINE__}})
#define CUEMU_CO_HSYNC_COUNT(p) \
    (co_await ::cuemu::co_bar_op_any{{0, (p) ? 1 : 0, __FILE__, __LINE__}})
#define CUEMU_CO_HSYNC_AND(p) \
    (co_await ::cuemu::co_bar_op_any{{1, (p) ? 1 : 0, __FILE__, __LINE__}})
#define CUEMU_CO_HSYNC_OR(p) \
    (co_await ::cuemu::co_bar_op_any{{2, (p) ? 1 : 0, __FILE__, __LINE__}})
#else
#define CUEMU_SPLIT 0
#define CUEMU_CO_BEGIN(...)
#define CUEMU_CO_END(...)
#define CUEMU_CO_END0
#define CUEMU_CO_BEGIN_CAPTURE
#define CUEMU_CO_END_CAPTURE
#define CUEMU_CO_RETURN return
#define CUEMU_CO_SYNCTHREADS __syncthreads
#define CUEMU_CO_SYNCTHREADS_COUNT __syncthreads_count
#define CUEMU_CO_SYNCTHREADS_AND __syncthreads_and
#define CUEMU_CO_SYNCTHREADS_OR __syncthreads_or
#define CUEMU_CO_SUB void
#define CUEMU_CO_FORCEINLINE __forceinline__
#define CUEMU_CO_AWAIT_BEGIN (
#define CUEMU_CO_AWAIT_END )
#define CUEMU_CO_HSYNC __syncthreads
#define CUEMU_CO_HSYNC_COUNT __syncthreads_count
#define CUEMU_CO_HSYNC_AND __syncthreads_and
#define CUEMU_CO_HSYNC_OR __syncthreads_or
#endif

/*
 * Thread loops (cuemu-rewrite's tl_plan says which kernels): the first thread's call runs the
 * block, each stretch between two barriers as a loop over its threads in the block's order
 * (CUEMU_TL_REGION ... CUEMU_TL_REGION_END), each thread's variables that outlive a stretch in
 * an array of the block's arena (CUEMU_TL_VAR): a later stretch reads a thread's value into a
 * variable of the same name (CUEMU_TL_LOAD, a register for the compiler), and each stretch
 * writes it back at its end (CUEMU_TL_SAVE). A stretch with a `return` is a lambda
 * (CUEMU_TL_REGION_R): the thread returned, and the next barrier says what that means.
 * Without the split (CUEMU_NO_SPLIT) the kernel is the one written.
 */
#if !defined(CUEMU_NO_SPLIT)
#include <type_traits>
namespace cuemu {
template <class T> static inline T *tl_alloc(int n)
{
    return static_cast<T *>(::cuemu_co_alloc(sizeof(T) * (size_t)n));
}
}  // namespace cuemu
#define CUEMU_TL_BEGIN \
    int cuemu_tl_n = ::cuemu_tl_begin(); \
    if (!cuemu_tl_n) return; \
    int cuemu_tl_exited = 0; \
    (void)cuemu_tl_exited;
#define CUEMU_TL_VAR(T, v) std::remove_cv_t<T> *v = ::cuemu::tl_alloc<std::remove_cv_t<T>>(cuemu_tl_n);
/* a variable every thread computes alike, declared again at the block's level for the loops'
   headers (its own stretch declares it too, as written) */
#define CUEMU_TL_UNIFORM(...) [[maybe_unused]] __VA_ARGS__
#define CUEMU_TL_REGION \
    for (int cuemu_p = 0; cuemu_p < cuemu_tl_n; cuemu_p++) { ::cuemu_tl_thread(cuemu_p);
#define CUEMU_TL_LOAD(v, name) auto name = v[cuemu_p];
#define CUEMU_TL_SAVE(v, name) v[cuemu_p] = name;
/* a declaration without an initialiser, in its own stretch: the thread's element itself (its
   value is whatever it is, as the variable's would be, and nothing reads a variable unset) */
#define CUEMU_TL_NOINIT(v, name, ...) [[maybe_unused]] auto &name = v[cuemu_p];
#define CUEMU_TL_REGION_END }
#define CUEMU_TL_REGION_R CUEMU_TL_REGION if ([&]() -> bool {
#define CUEMU_TL_REGION_END_R \
    return false; }()) { ::cuemu_tl_exit(cuemu_p); cuemu_tl_exited++; } }
#define CUEMU_TL_SYNC() \
    if (::cuemu_tl_sync(__FILE__, __LINE__, cuemu_tl_exited)) { ::cuemu_tl_end(); return; }
#define CUEMU_TL_END ::cuemu_tl_end();
#define CUEMU_TL_RETURN return true
#else
#define CUEMU_TL_BEGIN
#define CUEMU_TL_VAR(T, v)
#define CUEMU_TL_UNIFORM(...)
#define CUEMU_TL_REGION
#define CUEMU_TL_LOAD(v, name)
#define CUEMU_TL_SAVE(v, name)
#define CUEMU_TL_NOINIT(v, name, ...) __VA_ARGS__
#define CUEMU_TL_REGION_END
#define CUEMU_TL_REGION_R
#define CUEMU_TL_REGION_END_R
#define CUEMU_TL_SYNC() __syncthreads()
#define CUEMU_TL_END
#define CUEMU_TL_RETURN return
#endif

#endif
