/* SPDX-License-Identifier: MIT */
/*
 * cuemu-rewrite IN.cu OUT.cpp: the only source change the emulator needs.
 *
 * gcc has no CUDA front end, and everything but two constructs can come from a force-included
 * header. Those two are rewritten here, everything else is copied byte for byte:
 *
 *   k<<<g, b, s, st>>>(args)        ->  ::cuemu::launch(::cuemu::cfg(g, b, s, st), "k",
 *                                         __FILE__, __LINE__, <address of k>, <call of k>, args)
 *   extern __shared__ T name[];     ->  T (*const name) = ::cuemu::dsmem("name");
 *
 * and additions: to static shared memory, so the core can poison it before every block; before
 * each kernel declaration, a companion that tells a launch the kernel's parameter types (see
 * kernel_companion); and to a C entry point, the mark of host code:
 *
 *   cfg.gridDim, p->blockDim       ->  cfg.cuemu_gridDim, p->cuemu_blockDim (members: the
 *                                       built-in variables are macros)
 *   __shared__ T name[N];           ->  static thread_local T name[N];
 *                                       static thread_local ::cuemu::shared_reg r(name);
 *   template <..> __global__ void k(P)  ->  template <..> auto cuemu_kfn_k(P) -> void (*)(P);
 *                                           template <..> __global__ void k(P)
 *   extern "C" int f(P)             ->  extern "C" CUEMU_HOST_FN int f(P)   (host code: no
 *                                       load/store hooks, see host_function_at)
 *   #pragma unroll                  ->  (a comment: see pragma_unroll_at)
 *
 * (The header alone cannot do that: a section attribute would gather the variables, but gcc
 * ignores it on statics of template functions and rejects mixing inline and non-inline ones.)
 *
 * And a kernel that waits only with __syncthreads (and _count, _and, _or) called in its own
 * body is split at its barriers (emu/include/cuemu_split.h says how the core runs it):
 *
 *   (P p) { ... return; ... __syncthreads(); ... }
 *     ->  (P p) { CUEMU_CO_BEGIN(P p) ... CUEMU_CO_RETURN; ... CUEMU_CO_SYNCTHREADS(); ...
 *                 CUEMU_CO_END(p) }
 *
 * (a cooperative-groups thread_block's sync() is a __syncthreads too) unless its body waits in
 * any other way: a function of this file (or a macro) that waits and is not a split helper, a
 * warp operation, other cooperative groups, a lambda, inline asm (see plan_split), or it
 * declares a local array (has_local_array). A split helper is a `void` __device__ function of
 * the file (static, inline or a template) that waits the same way and is called only as a
 * statement (plan_helpers):
 *
 *   __device__ void step(P p) { ... __syncthreads(); }  ->  __device__ CUEMU_CO_SUB step(P p)
 *                                                            { ... CUEMU_CO_HSYNC(); }
 *   step(x);   (in a split kernel or helper)            ->  CUEMU_CO_AWAIT_BEGIN step(x)
 *                                                            CUEMU_CO_AWAIT_END;
 *   its __forceinline__, if any                         ->  CUEMU_CO_FORCEINLINE
 *
 * A split kernel whose barriers all stand where every thread reaches them alike runs as thread
 * loops instead (each stretch between two barriers one loop over the block's threads; see
 * tl_plan):
 *
 *   { ...; __syncthreads(); for (k...) { ...; __syncthreads(); } ... }
 *     ->  { CUEMU_TL_BEGIN CUEMU_TL_VAR(...) CUEMU_TL_REGION ... CUEMU_TL_REGION_END
 *           CUEMU_TL_SYNC(); for (k...) { CUEMU_TL_REGION ... } ... CUEMU_TL_END }
 *
 * The output starts with `#line 1 "IN.cu"` and keeps every newline of the input where it was,
 * so a compiler error in the .cpp points at the student's line in the .cu file.
 */
#define _POSIX_C_SOURCE 200809L   /* open_memstream */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *src;      /* the input */
static size_t      n;
static char       *code;     /* code[i]: 1 when src[i] is outside comments and literals */
static FILE       *out;
static const char *in_path;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuemu-rewrite: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int line_of(size_t pos)
{
    int l = 1;
    for (size_t i = 0; i < pos && i < n; i++) l += src[i] == '\n';
    return l;
}

/* Marks comments, string and character literals (raw strings too) as not code. */
static void classify(void)
{
    code = (char *)malloc(n + 1);
    if (!code) die("out of memory");
    size_t i = 0;
    while (i < n) {
        char c = src[i];
        if (c == '/' && i + 1 < n && src[i + 1] == '/') {
            while (i < n && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n') code[i++] = 0;
                code[i++] = 0;
            }
        } else if (c == '/' && i + 1 < n && src[i + 1] == '*') {
            code[i++] = 0;
            code[i++] = 0;
            while (i < n && !(src[i] == '*' && i + 1 < n && src[i + 1] == '/')) code[i++] = 0;
            if (i < n) { code[i++] = 0; code[i++] = 0; }
        } else if (c == 'R' && i + 1 < n && src[i + 1] == '"'
                   && (i == 0 || !(isalnum((unsigned char)src[i - 1]) || src[i - 1] == '_')
                       || src[i - 1] == '8' || src[i - 1] == 'u' || src[i - 1] == 'U'
                       || src[i - 1] == 'L')) {
            /* R"delim( ... )delim" */
            size_t d0 = i + 2, d1 = d0;
            while (d1 < n && src[d1] != '(') d1++;
            size_t dl = d1 - d0;
            size_t j = d1 + 1;
            while (j < n && !(src[j] == ')' && j + 1 + dl < n
                              && strncmp(src + j + 1, src + d0, dl) == 0 && src[j + 1 + dl] == '"'))
                j++;
            j = j < n ? j + dl + 2 : n;
            while (i < j) code[i++] = 0;
        } else if (c == '"') {
            code[i++] = 0;
            while (i < n && src[i] != '"' && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) code[i++] = 0;
                code[i++] = 0;
            }
            if (i < n) code[i++] = 0;
        } else if (c == '\'') {
            /* 1'000'000: a digit separator inside a number, not a character literal */
            size_t k = i;
            while (k > 0 && (isalnum((unsigned char)src[k - 1]) || src[k - 1] == '_'
                             || src[k - 1] == '.' || src[k - 1] == '\''))
                k--;
            if (k < i && isdigit((unsigned char)src[k])) {
                code[i++] = 1;
                continue;
            }
            code[i++] = 0;
            while (i < n && src[i] != '\'' && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) code[i++] = 0;
                code[i++] = 0;
            }
            if (i < n) code[i++] = 0;
        } else {
            code[i++] = 1;
        }
    }
}

static int is_id(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Emits src[a, b) keeping only its newlines (for text that moves or disappears). */
static void emit_newlines(size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (src[i] == '\n') fputc('\n', out);
}

/* Emits the code of src[a, b) on one line: comments dropped, whitespace runs collapsed. */
static void emit_flat(FILE *f, size_t a, size_t b, int for_string)
{
    int space = 0, any = 0;
    for (size_t i = a; i < b; i++) {
        if (!code[i] || isspace((unsigned char)src[i]) || src[i] == '\\') {
            space = 1;
            continue;
        }
        if (space && any) fputc(' ', f);
        space = 0;
        any = 1;
        if (for_string && (src[i] == '"' || src[i] == '\\')) fputc('\\', f);
        fputc(src[i], f);
    }
}

static size_t skip_ws_back(size_t p)   /* p: one past; returns one past the last non-space */
{
    while (p > 0 && (isspace((unsigned char)src[p - 1]) || !code[p - 1])) p--;
    return p;
}

static size_t skip_ws_fwd(size_t p)
{
    while (p < n && (isspace((unsigned char)src[p]) || !code[p])) p++;
    return p;
}

/* The start of the identifier that ends at e (one past its last character); e when none does. */
static size_t id_start(size_t e)
{
    while (e > 0 && is_id(src[e - 1]) && code[e - 1]) e--;
    return e;
}

/* Start of the kernel expression that ends just before `end` (the `<<<`): an id-expression,
   possibly qualified and with template arguments, or a parenthesised expression. */
static size_t kernel_start(size_t end)
{
    size_t p = skip_ws_back(end);
    for (;;) {
        if (p > 0 && src[p - 1] == ')') {
            int depth = 0;
            while (p > 0) {
                p--;
                if (!code[p]) continue;
                if (src[p] == ')') depth++;
                else if (src[p] == '(' && --depth == 0) break;
            }
            return p;
        }
        if (p > 0 && src[p - 1] == '>') {
            int depth = 0;
            while (p > 0) {
                p--;
                if (!code[p]) continue;
                if (src[p] == '>') depth++;
                else if (src[p] == '<' && --depth == 0) break;
            }
            p = skip_ws_back(p);
        }
        size_t q = id_start(p);
        if (q == p) die("%s:%d: cannot find the kernel name before <<<", in_path, line_of(end));
        p = q;
        size_t r = skip_ws_back(p);
        if (r >= 2 && src[r - 1] == ':' && src[r - 2] == ':') {
            p = skip_ws_back(r - 2);
            if (p == 0 || !(is_id(src[p - 1]) || src[p - 1] == '>')) return r - 2;  /* ::k */
            continue;
        }
        /* `template` keyword in ns::template k<T> */
        return p;
    }
}

/* Position of the bracket that closes the one at `open` (any of ( [ {), skipping non-code. */
static size_t match_close(size_t open)
{
    int depth = 0;
    for (size_t i = open; i < n; i++) {
        if (!code[i]) continue;
        char c = src[i];
        if (c == '(' || c == '[' || c == '{') depth++;
        else if ((c == ')' || c == ']' || c == '}') && --depth == 0) return i;
    }
    die("%s:%d: unbalanced bracket", in_path, line_of(open));
    return n;
}

static int has_code(size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (code[i] && !isspace((unsigned char)src[i])) return 1;
    return 0;
}

/* ---- each kernel's companion: what a launch learns the kernel's parameter types from ------
   Before every `__global__` declaration the rewriter declares (never defines) a function with
   the kernel's template header and parameters, named cuemu_kfn_<name>, whose return type is a
   pointer to the kernel's own function type:

     template <class T> __global__ void k(T *o, const T *f)
       -> template <class T> auto cuemu_kfn_k(T *o, const T *f) -> void (*)(T *o, const T *f);

   Called (unevaluated) with a launch's arguments, it deduces and converts exactly as the call
   of k does, and its return type names the specialisation the launch runs: its address (for
   cudaFuncSetAttribute limits) and its parameters' constness and volatility (for the stream
   checks), which the arguments' types do not tell (`int *` for a `const T *`). */
static char **kernel_names;
static size_t nkernel_names;
/* Text to write at src position pending_pos, once the copy reaches it: the registration of a
   kernel's __cluster_dims__, after the kernel's definition (see cluster_registration). */
static char  *pending;
static size_t pending_pos;
static int word_at(size_t i, const char *w);
static int in_directive(size_t i);

static int kernel_known(const char *s, size_t len)
{
    for (size_t i = 0; i < nkernel_names; i++)
        if (strlen(kernel_names[i]) == len && !strncmp(kernel_names[i], s, len)) return 1;
    return 0;
}

/* The parameters [a, b) on one line without their default arguments (not part of a
   function type): each top-level `= ...` is dropped up to the next top-level comma. */
static void emit_params_no_defaults(size_t a, size_t b)
{
    size_t s = a;
    int depth = 0;
    for (size_t i = a; i <= b; i++) {
        int end = i == b;
        if (!end && code[i]) {
            char c = src[i];
            if (c == '(' || c == '[' || c == '{') depth++;
            else if (c == ')' || c == ']' || c == '}') depth--;
        }
        if (end || (code[i] && depth == 0 && (src[i] == ',' || src[i] == '='))) {
            if (s < i) emit_flat(out, s, i, 0);
            if (end) break;
            if (src[i] == '=') {   /* skip the default to the next top-level comma */
                for (; i < b; i++) {
                    if (!code[i]) continue;
                    char c = src[i];
                    if (c == '(' || c == '[' || c == '{') depth++;
                    else if (c == ')' || c == ']' || c == '}') depth--;
                    else if (c == ',' && depth == 0) break;
                }
                if (i == b) break;
            }
            fputs(", ", out);
            s = i + 1;
        }
    }
}

/* __cluster_dims__(x, y, z) among the specifiers [start, name) of a kernel (not a template:
   each specialisation would need its own): after the kernel's definition (or declaration), on
   the same line as its last character,

     static ::cuemu::cluster_reg cuemu_cluster_reg_k_LINE(
         (const void *)static_cast<void (*)(P)>(k), x, y, z);

   registers the shape by the kernel's address, which every launch of it knows. */
static void cluster_registration(size_t start, size_t name, size_t name_end, size_t po, size_t pc)
{
    size_t cd = 0;
    for (size_t i = start; i < name; i++)
        if (src[i] == '_' && word_at(i, "__cluster_dims__")) { cd = i; break; }
    /* or just before the specifiers: `__cluster_dims__(2, 1, 1) __global__ void k(...)` */
    size_t p = skip_ws_back(start);
    if (!cd && p > 0 && src[p - 1] == ')' && code[p - 1]) {
        int depth = 0;
        size_t q = p;
        while (q > 0) {
            q--;
            if (!code[q]) continue;
            if (src[q] == ')') depth++;
            else if (src[q] == '(' && --depth == 0) break;
        }
        q = skip_ws_back(q);
        if (depth == 0 && q >= 16 && word_at(q - 16, "__cluster_dims__")) cd = q - 16;
    }
    if (!cd || pending) return;
    size_t ao = skip_ws_fwd(cd + 16);
    if (ao >= n || src[ao] != '(') return;
    size_t ac = match_close(ao), after = skip_ws_fwd(pc + 1), end;
    if (after >= n) return;
    end = src[after] == '{' ? match_close(after) + 1 : after + 1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len), *saved = out;
    if (!f) die("out of memory");
    out = f;
    fprintf(out, " static ::cuemu::cluster_reg cuemu_cluster_reg_%.*s_%d((const void *)"
            "static_cast<void (*)(", (int)(name_end - name), src + name, line_of(name));
    emit_params_no_defaults(po + 1, pc);
    fprintf(out, ")>(%.*s), ", (int)(name_end - name), src + name);
    emit_flat(out, ao + 1, ac, 0);
    fputs(");", out);
    fclose(f);
    out = saved;
    pending = text;
    pending_pos = end;
}

/* ---- the barrier split ---------------------------------------------------------------------
   Edits of the source (text replacing src[pos, pos + len)) made as the copy passes them. */
typedef struct { size_t pos, len; const char *text; } edit;
static edit  *edits;
static size_t nedits, next_edit;

static void edit_push(edit **list, size_t *count, size_t pos, size_t len, const char *text)
{
    edit *e = (edit *)realloc(*list, (*count + 1) * sizeof *e);
    if (!e) die("out of memory");
    *list = e;
    e[(*count)++] = (edit){ pos, len, text };
}

/* Kept in position order, after those at the same place: the split helpers' edits are planned
   before the copy starts (plan_helpers), a kernel's when the copy reaches its declaration. */
static void add_edit(size_t pos, size_t len, const char *text)
{
    edit_push(&edits, &nedits, pos, len, text);
    for (size_t k = nedits - 1; k > next_edit && edits[k - 1].pos > pos; k--) {
        edit t = edits[k];
        edits[k] = edits[k - 1];
        edits[k - 1] = t;
    }
}

/* Writes src[copied, e->pos) and the edit's text; returns the new `copied`. */
static size_t apply_edit(const edit *e, size_t copied)
{
    if (e->pos < copied)
        die("%s:%d: internal error: a rewrite overlaps the barrier split "
            "(CUEMU_REWRITE_NO_SPLIT=1 works around it)", in_path, line_of(e->pos));
    fwrite(src + copied, 1, e->pos - copied, out);
    fputs(e->text, out);
    return e->pos + e->len;
}

static const char *const sync_words[] = {
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or" };
static const char *const sync_macros[] = {
    "CUEMU_CO_SYNCTHREADS", "CUEMU_CO_SYNCTHREADS_COUNT", "CUEMU_CO_SYNCTHREADS_AND",
    "CUEMU_CO_SYNCTHREADS_OR" };
/* the same in a split helper, which may run on a fiber too (cuemu_split.h's co_bar_any) */
static const char *const helper_sync_macros[] = {
    "CUEMU_CO_HSYNC", "CUEMU_CO_HSYNC_COUNT", "CUEMU_CO_HSYNC_AND", "CUEMU_CO_HSYNC_OR" };

static int word_is(size_t a, size_t len, const char *w)
{
    return strlen(w) == len && !strncmp(src + a, w, len);
}

/* 1 when the word [a, a + len) is one of list[0, count). */
static int word_in(size_t a, size_t len, const char *const *list, size_t count)
{
    for (size_t k = 0; k < count; k++)
        if (word_is(a, len, list[k])) return 1;
    return 0;
}
#define WORD_IN(a, len, list) word_in((a), (len), (list), sizeof(list) / sizeof *(list))

/* The barrier called at [a, a + len) (an index of sync_words), or -1. */
static int sync_word(size_t a, size_t len)
{
    for (int k = 0; k < 4; k++)
        if (word_is(a, len, sync_words[k])) {
            size_t p = skip_ws_fwd(a + len);
            return p < n && src[p] == '(' ? k : -1;
        }
    return -1;
}

/* An identifier that waits (or may) in a way the split cannot run: warp operations, cooperative
   groups, libcu++'s barriers and pipelines, __nanosleep, inline asm (bar.sync). Names a
   variable may have too (sync, wait) only make a kernel keep its fibers. */
static int other_wait(size_t a, size_t len)
{
    static const char *const prefixes[] = {
        "__shfl", "__ballot", "__any", "__all", "__match", "__reduce_", "__syncwarp",
        "__activemask", "__nanosleep", "__pipeline", "__barrier", "__cluster" };
    static const char *const words[] = {
        "cooperative_groups", "cg", "this_thread_block", "this_grid", "this_cluster",
        "tiled_partition", "coalesced_threads", "barrier", "pipeline", "memcpy_async",
        "arrive", "arrive_and_wait", "arrive_and_drop", "wait", "sync", "cuda", "asm", "__asm",
        "__asm__", "cuemu_syncthreads", "cuemu_syncthreads_op", "cuemu_yield",
        "cuemu_warp_op", "cuemu_activemask", "cuemu_cluster_sync" };
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        size_t l = strlen(prefixes[k]);
        if (len >= l && !strncmp(src + a, prefixes[k], l)) return 1;
    }
    return WORD_IN(a, len, words);
}

/* The next identifier at or after *i in [*i, b) (code only); 0 when there is none. */
static int next_word(size_t *i, size_t b, size_t *w, size_t *len)
{
    for (size_t k = *i; k < b; k++) {
        if (!code[k] || !is_id(src[k]) || (k > 0 && is_id(src[k - 1]) && code[k - 1])) continue;
        size_t e = k;
        while (e < b && is_id(src[e]) && code[e]) e++;
        *i = e;
        if (isdigit((unsigned char)src[k])) { k = e - 1; continue; }
        *w = k;
        *len = e - k;
        return 1;
    }
    *i = b;
    return 0;
}

/* A lambda introducer in [a, b): a `[` that no expression precedes (not a subscript, not an
   attribute's `[[`). */
static int has_lambda(size_t a, size_t b)
{
    for (size_t k = a; k < b; k++) {
        if (!code[k] || src[k] != '[') continue;
        if ((k + 1 < n && src[k + 1] == '[') || (k > 0 && src[k - 1] == '[')) continue;
        size_t p = skip_ws_back(k);
        if (p == 0) return 1;
        char c = src[p - 1];
        if (!(is_id(c) || c == ')' || c == ']' || c == '"' || c == '\'')) return 1;
    }
    return 0;
}

/* A local array declared in [a, b) (`float acc[8][8]`: a type's word, a name, a `[`) that is not
   __shared__: it lives across the barriers, so the split would keep it in the coroutine's
   frame, where each of its elements is a checked memory access instead of a register. Chapter
   04's 8x8 register tile (a 64-float accumulator) became 54,000 instructions, and its file's
   second compile took 9 s instead of 3. */
static int has_local_array(size_t a, size_t b)
{
    static const char *const not_type[] = { "return", "case", "else", "do", "sizeof", "new",
                                            "delete", "throw", "goto", "co_return", "co_yield",
                                            "co_await", "alignof", "typeid" };
    for (size_t k = a; k < b; k++) {
        if (!code[k] || src[k] != '[') continue;
        size_t ne = skip_ws_back(k), nm = ne;
        while (nm > a && is_id(src[nm - 1]) && code[nm - 1]) nm--;
        if (nm == ne || isdigit((unsigned char)src[nm])) continue;
        size_t te = skip_ws_back(nm), tb = te;
        while (tb > a && is_id(src[tb - 1]) && code[tb - 1]) tb--;
        if (tb == te || isdigit((unsigned char)src[tb]) || WORD_IN(tb, te - tb, not_type))
            continue;
        size_t st = tb, i, w, len;   /* the statement's start, for its specifiers */
        while (st > a && !(code[st - 1] && strchr(";{}", src[st - 1]))) st--;
        int shared = 0;
        for (i = st; next_word(&i, te, &w, &len);)
            shared |= word_is(w, len, "__shared__") || word_is(w, len, "extern");
        if (!shared) return 1;
    }
    return 0;
}

/* Functions (and function-like macros) of this file that wait: their names. A call of one from
   a kernel's body keeps the kernel on fibers, unless it is a split helper (plan_helpers). Found as `name ( ... ) ... {` definitions whose
   body waits, directly or through another such name, and #define lines that wait. */
typedef struct {
    size_t name, len, bo, bc;
    size_t po;          /* a function's `(` (0: a macro) */
    int waits;
    int split;          /* a split helper (plan_helpers) */
} fdef;
static fdef  *fdefs;
static size_t nfdefs;
static int    fdefs_done;

static int is_keyword(size_t a, size_t len)
{
    static const char *const kw[] = { "if", "for", "while", "switch", "catch", "return",
                                      "sizeof", "alignof", "decltype", "defined", "__attribute__",
                                      "__launch_bounds__", "__cluster_dims__", "static_assert" };
    return WORD_IN(a, len, kw);
}

/* 1 when the word [w, w + len) names a function or macro of this file known to wait. */
static int names_waiting(size_t w, size_t len)
{
    for (size_t d = 0; d < nfdefs; d++)
        if (fdefs[d].waits && fdefs[d].len == len && !strncmp(src + fdefs[d].name, src + w, len))
            return 1;
    return 0;
}

static int mentions_waiting(size_t a, size_t b, size_t self, size_t selflen)
{
    size_t i = a, w, len;
    while (next_word(&i, b, &w, &len)) {
        if (sync_word(w, len) >= 0 || other_wait(w, len)) return 1;
        if (len == selflen && !strncmp(src + w, src + self, len)) continue;
        if (names_waiting(w, len)) return 1;
    }
    return 0;
}

static void fdef_add(size_t name, size_t len, size_t po, size_t bo, size_t bc)
{
    fdef *f = (fdef *)realloc(fdefs, (nfdefs + 1) * sizeof *f);
    if (!f) die("out of memory");
    fdefs = f;
    fdefs[nfdefs++] = (fdef){ name, len, bo, bc, po, 0, 0 };
}

static void find_waiting_functions(void)
{
    if (fdefs_done) return;
    fdefs_done = 1;
    for (size_t i = 0; i < n; i++) {
        if (!code[i]) continue;
        if (src[i] == '#' && in_directive(i)) {
            /* #define NAME ...: the whole directive, continuations included */
            size_t e = i;
            while (e < n && !(src[e] == '\n' && !(e > 0 && src[e - 1] == '\\'))) e++;
            size_t d = skip_ws_fwd(i + 1);
            if (d + 6 <= e && !strncmp(src + d, "define", 6)) {
                size_t nm = d + 6;
                while (nm < e && (src[nm] == ' ' || src[nm] == '\t')) nm++;
                size_t ne = nm;
                while (ne < e && is_id(src[ne])) ne++;
                if (ne > nm) fdef_add(nm, ne - nm, 0, ne, e);
            }
            i = e;
            continue;
        }
        if (src[i] != '(') continue;
        size_t ne = skip_ws_back(i), nm = id_start(ne);
        if (nm == ne || isdigit((unsigned char)src[nm]) || is_keyword(nm, ne - nm)) continue;
        size_t close = match_close(i), k = close + 1;
        /* const, noexcept, override, a trailing return type: no `(`, `;`, `=` or `,` */
        while (k < n && k < close + 200) {
            if (!code[k] || isspace((unsigned char)src[k]) || is_id(src[k])
                || strchr("&*:<>-", src[k])) { k++; continue; }
            break;
        }
        if (k >= n || src[k] != '{') continue;
        fdef_add(nm, ne - nm, i, k, match_close(k));
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t d = 0; d < nfdefs; d++)
            if (!fdefs[d].waits
                && mentions_waiting(fdefs[d].bo, fdefs[d].bc, fdefs[d].name, fdefs[d].len)) {
                fdefs[d].waits = 1;
                changed = 1;
            }
    }
}

/* Cooperative groups' block barrier, the one CUDA's samples use: a `cg::thread_block h` (or
   `auto h = cg::this_thread_block()`) whose `h.sync()` or `cg::sync(h)` is a __syncthreads.
   Its other members (thread_rank, size, ...) do not wait. */
#define MAX_HANDLES 8
typedef struct { size_t at[MAX_HANDLES], len[MAX_HANDLES]; int n; } handles;

static int handle_of(const handles *h, size_t w, size_t len)
{
    for (int k = 0; k < h->n; k++)
        if (h->len[k] == len && !strncmp(src + h->at[k], src + w, len)) return 1;
    return 0;
}

static int handle_add(handles *h, size_t w, size_t len)
{
    if (handle_of(h, w, len)) return 1;
    if (h->n == MAX_HANDLES) return 0;
    h->at[h->n] = w;
    h->len[h->n++] = len;
    return 1;
}

/* The declarator [a, b) of a parameter: its name's position and length, or 0 when it has none
   the rewriter can tell (`int`, `const size_t`, a function pointer): only the type's words
   (and cv-qualifiers) before it. *pack: 1 for a parameter pack (`Args... args`). */
static size_t param_name(size_t a, size_t b, size_t *len, int *pack)
{
    static const char *const quals[] = { "const", "volatile", "__restrict__", "__restrict",
                                         "restrict", "__grid_constant__", "struct", "class",
                                         "enum", "typename" };
    static const char *const builtin[] = { "int", "char", "float", "double", "long", "short",
                                           "unsigned", "signed", "bool", "void", "auto" };
    size_t i = a, w, l, last = 0, last_len = 0;
    int words = 0, last_builtin = 0;
    *pack = 0;
    for (size_t k = a; k + 2 < b; k++)
        if (code[k] && src[k] == '.' && src[k + 1] == '.' && src[k + 2] == '.') *pack = 1;
    for (size_t k = a; k < b; k++)
        if (code[k] && (src[k] == '(' || src[k] == '[')) return 0;
    while (next_word(&i, b, &w, &l)) {
        if (WORD_IN(w, l, quals)) continue;
        last_builtin = WORD_IN(w, l, builtin);
        last = w;
        last_len = l;
        words++;
        /* ns::T, T<...>: what stands inside <> or after :: is part of the type */
        size_t nx = skip_ws_fwd(w + l);
        if (nx < b && (src[nx] == ':' || src[nx] == '<')) words--;
    }
    if (words < 2 || last_builtin) return 0;
    *len = last_len;
    return last;
}

/* Wraps the body [bo, bc] of a kernel with parameters (po, pc) in the coroutine lambda and
   makes the planned edits. The lambda takes the kernel's parameters as its own (its frame
   holds each thread's copies, where the compiler knows nothing else writes them), and is
   called with them; when some parameter has no name it can be called with, it captures them
   by copy instead (slower: a capture is read through the lambda, again after every call). */
static void split_wrap(size_t po, size_t pc, size_t bo, size_t bc, const edit *plan, size_t nplan)
{
    char *names = NULL, *begin = NULL, *end = NULL;
    size_t nl = 0, bl = 0, el = 0;
    FILE *fn = open_memstream(&names, &nl);
    if (!fn) die("out of memory");
    int named = 1, any = 0;
    for (size_t a = po + 1; a < pc && named;) {
        size_t e = a;
        int depth = 0;
        for (; e < pc; e++) {
            if (!code[e]) continue;
            char c = src[e];
            if (c == '(' || c == '[' || c == '{' || c == '<') depth++;
            else if (c == ')' || c == ']' || c == '}' || c == '>') depth--;
            else if (c == ',' && depth == 0) break;
            if (depth < 0) named = 0;            /* a `>` the rewriter cannot place */
        }
        size_t d = e;                            /* the declarator, without a default */
        for (size_t k = a; k < e; k++)
            if (code[k] && src[k] == '=') { d = k; break; }
        if (has_code(a, d)) {
            size_t len = 0;
            int pack = 0;
            size_t w = param_name(a, d, &len, &pack);
            if (!w) named = 0;
            else fprintf(fn, "%s%.*s%s", any++ ? ", " : "", (int)len, src + w, pack ? "..." : "");
        }
        a = e + 1;
    }
    fclose(fn);
    FILE *fb = open_memstream(&begin, &bl), *fe = open_memstream(&end, &el), *saved = out;
    if (!fb || !fe) die("out of memory");
    if (!named) {
        fputs(" CUEMU_CO_BEGIN_CAPTURE", fb);
        fputs("CUEMU_CO_END_CAPTURE ", fe);
    } else {
        fputs(" CUEMU_CO_BEGIN(", fb);
        out = fb;
        emit_params_no_defaults(po + 1, pc);
        out = saved;
        fputs(")", fb);
        if (any) fprintf(fe, "CUEMU_CO_END(%s) ", names);
        else fputs("CUEMU_CO_END0 ", fe);
    }
    fclose(fb);
    fclose(fe);
    free(names);
    add_edit(bo + 1, 0, begin);
    for (size_t k = 0; k < nplan; k++) add_edit(plan[k].pos, plan[k].len, plan[k].text);
    add_edit(bc, 0, end);
}

/* The split helper named by the word [w, w + len), if any. */
static int split_helper(size_t w, size_t len)
{
    for (size_t d = 0; d < nfdefs; d++)
        if (fdefs[d].split && fdefs[d].len == len && !strncmp(src + fdefs[d].name, src + w, len))
            return 1;
    return 0;
}

/* One past the `)` of the call whose function's name is the word [w, w + len) (`f(...)`,
   `f<...>(...)`), or 0 when the word is not called there. */
static size_t call_end(size_t w, size_t len)
{
    size_t p = skip_ws_fwd(w + len);
    if (p < n && src[p] == '<') {
        int depth = 0;
        for (; p < n; p++) {
            if (!code[p]) continue;
            if (src[p] == '(' || src[p] == '[') p = match_close(p);
            else if (src[p] == '<') depth++;
            else if (src[p] == '>' && --depth == 0) break;
            else if (src[p] == ';' || src[p] == '{' || src[p] == '}') return 0;
        }
        if (p >= n) return 0;
        p = skip_ws_fwd(p + 1);
    }
    if (p >= n || src[p] != '(') return 0;
    return match_close(p) + 1;
}

/* 1 when a statement (or a block) can start at p: what comes before it ends with a `;`, a
   brace, a `)` (a condition's, a function's parameters), or `else`, `do`, `try`. */
static int statement_start(size_t p)
{
    size_t b = skip_ws_back(p), q = id_start(b);
    if (b == 0) return 0;
    if (strchr(";{})", src[b - 1])) return 1;
    return word_is(q, b - q, "else") || word_is(q, b - q, "do") || word_is(q, b - q, "try");
}

/* 1 when the call of the word [w, w + len) is a whole statement, `f(...);` where a statement
   starts (what `CUEMU_CO_AWAIT_BEGIN f(...) CUEMU_CO_AWAIT_END;` can stand for). */
static int call_statement(size_t w, size_t len)
{
    size_t e = call_end(w, len);
    if (!e || in_directive(w)) return 0;
    size_t a = skip_ws_fwd(e);
    return a < n && src[a] == ';' && statement_start(w);
}

/* The split of a kernel's body or a split helper's: the edits that make the code [from, bc) a
   coroutine's (bo: the body's `{`; from: bo + 1 for a kernel, a helper's parameter list, whose
   thread_block handles its body may sync) into *plan; 1 when it can be split, that is when it
   waits only with __syncthreads & co (or a thread_block's sync) and calls of split helpers, at
   least once. helper: the code is a split helper's (its barriers may run on a fiber too); self:
   the kernel's name, which its body may mention. */
static int plan_split(size_t self, size_t self_len, size_t from, size_t bo, size_t bc,
                      int helper, edit **plan, size_t *nplan)
{
    static const char *const block_members[] = { "thread_rank", "size", "num_threads",
                                                 "group_index", "thread_index", "group_dim",
                                                 "dim_threads" };
    const char *const *syncs = helper ? helper_sync_macros : sync_macros;
    const char *sync_call = helper ? "CUEMU_CO_HSYNC()" : "CUEMU_CO_SYNCTHREADS()";
    size_t i = from, w, len, waits = 0;
    handles h = { .n = 0 };
#define PLAN(p, l, t) edit_push(plan, nplan, (p), (l), (t))
    find_waiting_functions();
    if (has_lambda(bo + 1, bc) || has_local_array(bo + 1, bc)) return 0;
    while (next_word(&i, bc, &w, &len)) {
        int k = sync_word(w, len);
        if (k >= 0) {
            PLAN(w, len, syncs[k]);
            waits++;
            continue;
        }
        if (word_is(w, len, "return")) {
            PLAN(w, len, "CUEMU_CO_RETURN");
            continue;
        }
        if (word_is(w, len, "cg") || word_is(w, len, "cooperative_groups")) {
            size_t p = skip_ws_fwd(w + len), w2, l2;
            if (p + 1 >= bc || src[p] != ':' || src[p + 1] != ':') return 0;
            i = p + 2;
            if (!next_word(&i, bc, &w2, &l2) || w2 != skip_ws_fwd(p + 2)) return 0;
            if (word_is(w2, l2, "thread_block")) {         /* a declaration: the handle */
                size_t w3, l3;
                if (!next_word(&i, bc, &w3, &l3) || !handle_add(&h, w3, l3)) return 0;
            } else if (word_is(w2, l2, "this_thread_block")) {   /* auto h = ... */
                size_t r = skip_ws_back(w), e;
                if (r == 0 || src[r - 1] != '=') continue;
                e = skip_ws_back(r - 1);
                r = e;
                while (r > bo && is_id(src[r - 1])) r--;
                if (r < e && !handle_add(&h, r, e - r)) return 0;
            } else if (word_is(w2, l2, "sync")) {            /* cg::sync(h) */
                size_t po = skip_ws_fwd(i), a, b;
                if (po >= bc || src[po] != '(') return 0;
                size_t pc = match_close(po);
                a = skip_ws_fwd(po + 1);
                b = skip_ws_back(pc);
                if (!handle_of(&h, a, b - a)) return 0;
                PLAN(w, pc + 1 - w, sync_call);
                waits++;
                i = pc + 1;
            } else {
                return 0;
            }
            continue;
        }
        if (handle_of(&h, w, len)) {
            size_t p = skip_ws_fwd(w + len), w2, l2;
            if (p >= bc || src[p] != '.') continue;          /* passed on: see the callee */
            i = p + 1;
            if (!next_word(&i, bc, &w2, &l2)) return 0;
            if (word_is(w2, l2, "sync")) {                   /* h.sync() */
                size_t po = skip_ws_fwd(i);
                if (po >= bc || src[po] != '(' || has_code(po + 1, match_close(po))) return 0;
                PLAN(w, match_close(po) + 1 - w, sync_call);
                waits++;
                i = match_close(po) + 1;
                continue;
            }
            if (!WORD_IN(w2, l2, block_members)) return 0;
            continue;
        }
        if (other_wait(w, len)) return 0;
        if (!helper && len == self_len && !strncmp(src + w, src + self, len)) continue;
        if (split_helper(w, len) && call_statement(w, len)) {
            PLAN(w, 0, "CUEMU_CO_AWAIT_BEGIN ");
            PLAN(call_end(w, len), 0, " CUEMU_CO_AWAIT_END");
            waits++;
            continue;
        }
        if (names_waiting(w, len)) return 0;
    }
#undef PLAN
    return waits > 0;
}

/* The kernel whose name is [name, name_end) and whose body is [bo, bc] (the braces): split at
   its barriers when it can be (plan_split). The edits are made as the copy passes them. */
static void split_plan(size_t name, size_t name_end, size_t po, size_t pc, size_t bo,
                       size_t bc)
{
    edit *plan = NULL;
    size_t nplan = 0;
    if (plan_split(name, name_end - name, bo + 1, bo, bc, 0, &plan, &nplan))
        split_wrap(po, pc, bo, bc, plan, nplan);
    free(plan);
}

static size_t pragma_unroll_at(size_t i);

/* ---- thread loops --------------------------------------------------------------------------
   A split kernel whose barriers all stand as statements where every thread reaches them the
   same number of times runs as thread loops instead of coroutines (cuemu_split.h, CUEMU_TL_*):
   the first thread's call runs the block, each stretch between two barriers as one loop over
   the block's threads, with each thread's variables that outlive a stretch in arrays (one
   element per thread). A resumption of a coroutine costs about 80 instructions, a thread of a
   loop a handful: a tree reduction's idle threads cost next to nothing.

     __shared__ float s[256];            __shared__ float s[256];   (rewritten as before)
     int i = ...; s[t] = in[i];          CUEMU_TL_REGION int i = ...; s[t] = in[i];
                                             CUEMU_TL_REGION_END
     __syncthreads();                    CUEMU_TL_SYNC();
     for (int k = blockDim.x / 2; k > 0; k >>= 1) {       (the loop runs once per block)
         if (t < k) s[t] += s[t + k];        CUEMU_TL_REGION ... CUEMU_TL_REGION_END
         __syncthreads();                    CUEMU_TL_SYNC();
     }
     if (t == 0) out[b] = s[0];          CUEMU_TL_REGION ... CUEMU_TL_REGION_END

   A variable that a later stretch names gets an array (CUEMU_TL_VAR, at the body's start):
   each later stretch reads the thread's value into a variable of the same name
   (CUEMU_TL_LOAD) and every stretch writes it back at its end (CUEMU_TL_SAVE); declared
   without a value, it is the thread's element itself in its own stretch (CUEMU_TL_NOINIT).
   A stretch of the coroutine run (a thread from one barrier to the next) is one region here,
   run by each thread in the block's order, so the race check, the thread orders and the
   reports see what they see split. That holds when:
   - every barrier is a `__syncthreads();` statement of the body, or of the body of a `for`
     loop of the body (loops nest) whose header reads only its own variable, the kernel's
     parameters, blockDim, gridDim, blockIdx, numbers, macros defined as numbers and variables
     of the body computed from those and never written again (declared again at the block's
     level: CUEMU_TL_UNIFORM), so that every thread runs it alike and it runs once per block;
     which its body does not change, and whose body ends with a barrier and holds no break,
     continue or return;
   - what stands between the last barrier and such a loop (or a `__shared__` declaration)
     only declares variables from threadIdx & co, without calls or memory (no one could tell
     the two stretches this makes of it from one);
   - the parameters are never written, nor a member of one, nor handed to a function of this
     file that takes a reference (the block's threads share the first thread's copies), the
     body has no goto, no launch, no lambda, no local array and no preprocessor line but
     `#pragma unroll`, and each declaration of a variable that outlives its region is of a
     built-in type (the rewriter knows no other types' names), a pointer alone.
   A `return` ends the thread's stretch (the region is a lambda then: CUEMU_TL_REGION_R): a
   thread that returned before a barrier others wait at is the deadlock the coroutines report,
   reported the same way (sched.c, cuemu_tl_sync). Anything else stays split as before
   (CUEMU_REWRITE_TRACE=1 says which and why; CUEMU_REWRITE_NO_TL=1: every such kernel). */
static const char *const tl_type_words[] = {
    "int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "size_t",
    "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t", "const", "volatile", "float2", "float3", "float4", "int2", "int3", "int4",
    "uint2", "uint3", "uint4", "double2", "longlong2", "ulonglong2" };
static const char *const tl_builtins[] = { "blockDim", "gridDim", "blockIdx", "warpSize",
                                           "sizeof" };

/* a declarator of a region's declaration statement: the statement's start, the end of its type
   (the declarator's `*`s included), the name, the block it is in, its region's index */
typedef struct {
    size_t st, te, name, len, ia, ib, blk_a, blk_b, region;   /* ia, ib: the initialiser */
    int hoist, noinit, uniform;
} tl_decl;
typedef struct { size_t a, b, blk_a, blk_b; int ret; } tl_region;
typedef struct {
    size_t bo, bc, po, pc;
    tl_decl *d;
    size_t nd;
    tl_region *r;
    size_t nr;
    edit *e;
    size_t ne;
    size_t uvar[16], ulen[16];   /* the loop variables of the loops being planned */
    size_t ul[16];               /* the uniform variables of the body (indices into d) */
    int nul;
    int nu;
    const char *why;            /* why not (CUEMU_REWRITE_TRACE) */
} tl_ctx;

#define TL_FAIL(c, reason) do { (c)->why = (reason); return 0; } while (0)

/* One past the statement that starts at p (code, not space) in [p, b), or 0. */
static size_t tl_stmt_end(size_t p, size_t b)
{
    if (p >= b) return 0;
    if (src[p] == '{') return match_close(p) + 1;
    size_t e = p;
    while (e < b && is_id(src[e]) && code[e]) e++;
    if (word_is(p, e - p, "for") || word_is(p, e - p, "while") || word_is(p, e - p, "switch")
        || word_is(p, e - p, "if")) {
        size_t o = skip_ws_fwd(e);
        if (o >= b || src[o] != '(') return 0;
        size_t end = tl_stmt_end(skip_ws_fwd(match_close(o) + 1), b);
        if (!end || !word_is(p, e - p, "if")) return end;
        size_t q = skip_ws_fwd(end);
        return q + 4 <= b && word_at(q, "else") ? tl_stmt_end(skip_ws_fwd(q + 4), b) : end;
    }
    if (word_is(p, e - p, "do")) {
        size_t end = tl_stmt_end(skip_ws_fwd(e), b), q = end ? skip_ws_fwd(end) : b;
        if (q + 5 > b || !word_at(q, "while")) return 0;
        size_t o = skip_ws_fwd(q + 5);
        if (o >= b || src[o] != '(') return 0;
        q = skip_ws_fwd(match_close(o) + 1);
        return q < b && src[q] == ';' ? q + 1 : 0;
    }
    int depth = 0;
    for (size_t k = p; k < b; k++) {
        if (!code[k]) continue;
        char c = src[k];
        if (c == '(' || c == '[' || c == '{') depth++;
        else if ((c == ')' || c == ']' || c == '}') && --depth < 0) return 0;
        else if (c == ';' && depth == 0) return k + 1;
    }
    return 0;
}

/* 1 when the word [w, w + len) names a macro of this file defined as a number (or a
   parenthesised expression of numbers and such macros): the same in every thread. */
static int tl_number_macro(size_t w, size_t len, int depth)
{
    if (depth > 4) return 0;
    for (size_t k = 0; k + 7 < n; k++) {
        if (src[k] != '#' || !in_directive(k)) continue;
        size_t d = skip_ws_fwd(k + 1);
        if (d + 6 > n || strncmp(src + d, "define", 6) || is_id(src[d + 6])) continue;
        size_t nm = d + 6;
        while (nm < n && (src[nm] == ' ' || src[nm] == '\t')) nm++;
        size_t ne = nm;
        while (ne < n && is_id(src[ne])) ne++;
        if (ne - nm != len || strncmp(src + nm, src + w, len) || src[ne] == '(') continue;
        size_t le = ne;
        while (le < n && src[le] != '\n') le++;
        if (le > ne && src[le - 1] == '\\') return 0;
        int any = 0;
        for (size_t q = ne; q < le; q++) {
            if (!code[q] || isspace((unsigned char)src[q])) continue;
            if (is_id(src[q])) {
                size_t qe = q;
                while (qe < le && is_id(src[qe])) qe++;
                if (!isdigit((unsigned char)src[q]) && !tl_number_macro(q, qe - q, depth + 1))
                    return 0;
                q = qe - 1;
            } else if (!strchr("()+-*/%<>&|^~.", src[q])) {
                return 0;
            }
            any = 1;
        }
        return any;
    }
    return 0;
}

/* 1 when the previous code character before p makes an operator at p unary. */
static int tl_unary_at(size_t p, size_t a)
{
    size_t q = skip_ws_back(p);
    if (q <= a) return 1;
    char c = src[q - 1];
    return !(is_id(c) || c == ')' || c == ']');
}

/* The first comma at the top level of [a, b) (brackets: those of open and close), or b: the
   end of the parameter (angle brackets count) or declarator (they do not: `a < b`) at a. */
static size_t tl_comma_end(size_t a, size_t b, const char *open, const char *close)
{
    int depth = 0;
    for (; a < b; a++) {
        if (!code[a]) continue;
        if (strchr(open, src[a])) depth++;
        else if (strchr(close, src[a])) depth--;
        else if (src[a] == ',' && depth == 0) break;
    }
    return a;
}
#define tl_param_end(a, pc) tl_comma_end((a), (pc), "([{<", ")]}>")

/* The kernel's parameters' names (from its parameter list), for uniformity. */
static int tl_is_param(const tl_ctx *c, size_t w, size_t len)
{
    for (size_t a = c->po + 1; a < c->pc;) {
        size_t e = tl_param_end(a, c->pc);
        size_t l = 0;
        int pack = 0;
        size_t nm = param_name(a, e, &l, &pack);
        if (nm && l == len && !strncmp(src + nm, src + w, len)) return 1;
        a = e + 1;
    }
    return 0;
}

/* 1 when [a, b) is an expression every thread evaluates alike (uniform: 1) or one with no
   memory access and no call (a thread's own value, from threadIdx & co: 0) that it is, else
   0. Numbers, operators, casts to built-in types, members x/y/z, and the names above. */
static int tl_expr_ok(const tl_ctx *c, size_t a, size_t b, int uniform)
{
    for (size_t k = a; k < b; k++) {
        if (!code[k] || isspace((unsigned char)src[k])) continue;
        char ch = src[k];
        if (is_id(ch)) {
            size_t e = k;
            while (e < b && is_id(src[e]) && code[e]) e++;
            size_t w = k, len = e - k, nx = skip_ws_fwd(e), pv = skip_ws_back(k);
            k = e - 1;
            if (isdigit((unsigned char)src[w])) continue;
            int member = pv > a && src[pv - 1] == '.';
            if (member && (word_is(w, len, "x") || word_is(w, len, "y") || word_is(w, len, "z")))
                continue;
            if (member) return 0;
            if (WORD_IN(w, len, tl_type_words)) continue;
            if (nx < b && src[nx] == '(' && !word_is(w, len, "sizeof")) return 0;   /* a call */
            if (WORD_IN(w, len, tl_builtins) || tl_is_param(c, w, len)) continue;
            int loopvar = 0;
            for (int u = 0; u < c->nu; u++)
                loopvar |= c->ulen[u] == len && !strncmp(src + c->uvar[u], src + w, len);
            for (int u = 0; u < c->nul; u++)
                loopvar |= c->d[c->ul[u]].len == len
                            && !strncmp(src + c->d[c->ul[u]].name, src + w, len);
            if (loopvar || tl_number_macro(w, len, 0)) continue;
            if (!uniform && word_is(w, len, "threadIdx")) continue;
            if (!uniform) {                      /* an earlier declaration's own value */
                int known = 0;
                for (size_t d = 0; d < c->nd; d++)
                    known |= c->d[d].len == len && !strncmp(src + c->d[d].name, src + w, len);
                if (known) continue;
            }
            return 0;
        }
        if (ch == '[' || ch == '{' || ch == '"' || ch == '\'' || ch == '#') return 0;
        if (ch == '-' && k + 1 < b && src[k + 1] == '>') return 0;
        if ((ch == '+' || ch == '-') && k + 1 < b && src[k + 1] == ch) return 0;   /* ++ -- */
        if ((ch == '*' || ch == '&') && !(ch == '&' && k + 1 < b && src[k + 1] == '&')
            && tl_unary_at(k, a))
            return 0;                           /* a dereference, an address */
        if (ch == '&' && k + 1 < b && src[k + 1] == '&') k++;
        if (ch == '=' && !(k + 1 < b && src[k + 1] == '=')
            && !(k > a && strchr("=!<>", src[k - 1])))
            return 0;                           /* an assignment */
    }
    return 1;
}

/* 1 when the word at w (length len) is written in [a, b): assigned, incremented, or its
   address taken. */
static int tl_written(size_t w, size_t len, size_t a, size_t b)
{
    size_t i = a, x, l;
    while (next_word(&i, b, &x, &l)) {
        if (l != len || strncmp(src + x, src + w, len)) continue;
        size_t pv = skip_ws_back(x), nx = skip_ws_fwd(x + l);
        if (pv > a && (src[pv - 1] == '.' || (src[pv - 1] == '>' && src[pv - 2] == '-')))
            continue;                           /* a member of that name */
        if (nx < b && (src[nx] == '[' || src[nx] == '.' || (src[nx] == '-' && src[nx + 1] == '>')))
            continue;                           /* an element or a member: not the variable */
        if (pv >= 2 && ((src[pv - 1] == '+' && src[pv - 2] == '+')
                        || (src[pv - 1] == '-' && src[pv - 2] == '-')))
            return 1;
        if (pv > a && src[pv - 1] == '&' && !(pv >= 2 && src[pv - 2] == '&')
            && tl_unary_at(pv - 1, a))
            return 1;                           /* its address (not `a && v`) */
        if (nx + 1 < b && ((src[nx] == '+' && src[nx + 1] == '+')
                           || (src[nx] == '-' && src[nx + 1] == '-')))
            return 1;
        if (nx < b && src[nx] == '=' && !(nx + 1 < b && src[nx + 1] == '=')) return 1;
        if (nx + 1 < b && strchr("+-*/%&|^", src[nx]) && src[nx + 1] == '=') return 1;
        if (nx + 2 < b && (src[nx] == '<' || src[nx] == '>') && src[nx + 1] == src[nx]
            && src[nx + 2] == '=')
            return 1;
    }
    return 0;
}

/* An assignment operator at p (`=`, `+=`, ..., `<<=`, `>>=`; not `==`, `<=`, `>=`): one past
   it, else 0. */
static size_t tl_assign_op(size_t p, size_t b)
{
    size_t o = p;
    if (o + 1 < b && (src[o] == '<' || src[o] == '>') && src[o + 1] == src[o]) o += 2;
    else if (o < b && strchr("+-*/%&|^", src[o]) && src[o]) o++;
    if (o >= b || src[o] != '=' || (o + 1 < b && src[o + 1] == '=')) return 0;
    if (o == p && p > 0 && strchr("=!<>", src[p - 1])) return 0;
    return o + 1;
}

/* 1 when a loop's increment [a, b) only steps its variable v (length vl) by what every thread
   computes alike: `v++`, `--v`, `v op= uniform`, `v = uniform`. */
static int tl_incr_ok(const tl_ctx *c, size_t a, size_t b, size_t v, size_t vl)
{
    size_t p = skip_ws_fwd(a), e = skip_ws_back(b);
    if (p + 2 <= e && (src[p] == '+' || src[p] == '-') && src[p + 1] == src[p]) {
        size_t q = skip_ws_fwd(p + 2);
        return q + vl == e && !strncmp(src + q, src + v, vl);
    }
    if (p + vl > e || strncmp(src + p, src + v, vl) || is_id(src[p + vl])) return 0;
    size_t q = skip_ws_fwd(p + vl);
    if (q + 2 == e && (src[q] == '+' || src[q] == '-') && src[q + 1] == src[q]) return 1;
    size_t o = tl_assign_op(q, e);
    return o && tl_expr_ok(c, o, b, 1);
}

static int tl_mentions(size_t a, size_t b, size_t w, size_t len);

static void tl_region_add(tl_ctx *c, size_t a, size_t b, size_t blk_a, size_t blk_b, int ret)
{
    tl_region *r = (tl_region *)realloc(c->r, (c->nr + 1) * sizeof *r);
    if (!r) die("out of memory");
    c->r = r;
    c->r[c->nr++] = (tl_region){ a, b, blk_a, blk_b, ret };
}

/* A declaration statement [st, end) of a region: its declarators, for hoisting (0: the
   rewriter cannot tell them). pure: 1 when its initialisers only compute (tl_expr_ok). */
static int tl_declaration(tl_ctx *c, size_t st, size_t end, size_t blk_a, size_t blk_b,
                          int *pure)
{
    size_t semi = end - 1, i = st, w, len, first = 0;
    /* the type's words, then declarators split at top-level commas */
    while (next_word(&i, semi, &w, &len) && WORD_IN(w, len, tl_type_words)) first = i;
    if (!first) return 0;
    size_t a = skip_ws_fwd(first);
    int count = 0;
    while (a < semi) {
        size_t e = tl_comma_end(a, semi, "([{", ")]}");
        size_t p = skip_ws_fwd(a), eq = e;
        while (p < e && (src[p] == '*' || isspace((unsigned char)src[p]) || !code[p])) p++;
        int ptr = p > skip_ws_fwd(a);
        if (ptr && (count > 0 || e < semi)) return 0;   /* `int *a, b`: one pointer alone */
        size_t ne = p;
        while (ne < e && is_id(src[ne]) && code[ne]) ne++;
        if (ne == p || isdigit((unsigned char)src[p])) return 0;
        size_t q = skip_ws_fwd(ne);
        if (q < e && src[q] != '=') return 0;   /* an array, a constructor call, a bit-field */
        if (q < e) eq = q;
        if (eq < e && !tl_expr_ok(c, eq + 1, e, 0)) *pure = 0;
        tl_decl *d = (tl_decl *)realloc(c->d, (c->nd + 1) * sizeof *d);
        if (!d) die("out of memory");
        c->d = d;
        c->d[c->nd++] = (tl_decl){ st, ptr ? p : first, p, ne - p, eq + 1, e, blk_a, blk_b,
                                   c->nr, 0, eq == e, 0 };
        count++;
        a = e + 1;
    }
    if (count > 1)
        for (size_t k = c->nd - count; k < c->nd; k++)
            if (c->d[k].noinit) return 0;       /* `int a = 1, b;`: keep it simple */
    for (size_t k = st; k < first; k++)
        if (src[k] == '\n') return 0;
    return count > 0;
}

/* The statements of the block [a, b) (a body or a loop's body); 1 when they can run as thread
   loops. top: the kernel's body. *ends_sync: its last statement is a barrier. */
static int tl_block(tl_ctx *c, size_t a, size_t b, int top, int *ends_sync)
{
    size_t p = skip_ws_fwd(a), ra = SIZE_MAX, rb = 0;
    int ret = 0, pure_since = 1, last_sync = 0;
    while (p < b) {
        size_t end = tl_stmt_end(p, b);
        if (!end) TL_FAIL(c, "a statement it cannot delimit");
        size_t i = p, w, len, e = p;
        while (e < b && is_id(src[e]) && code[e]) e++;
        int barriers = 0, shared = 0;
        for (i = p; next_word(&i, end, &w, &len);) {
            barriers += sync_word(w, len) >= 0;
            shared |= word_is(w, len, "__shared__");
        }
        if (barriers && sync_word(p, e - p) == 0) {             /* __syncthreads(); */
            size_t o = skip_ws_fwd(e), cl = o < b ? match_close(o) : b;
            if (has_code(o + 1, cl) || skip_ws_fwd(cl + 1) + 1 != end)
                TL_FAIL(c, "a barrier that is not a statement of its own");
            if (ra != SIZE_MAX) tl_region_add(c, ra, rb, a, b, ret);
            ra = SIZE_MAX;
            ret = 0;
            edit_push(&c->e, &c->ne, p, cl + 1 - p, "CUEMU_TL_SYNC()");
            pure_since = 1;
            last_sync = 1;
        } else if (barriers && word_is(p, e - p, "for")) {
            size_t o = skip_ws_fwd(e), oc = match_close(o), bo = skip_ws_fwd(oc + 1);
            if (bo >= b || src[bo] != '{') TL_FAIL(c, "a loop with a barrier and no braces");
            if (!pure_since) TL_FAIL(c, "code before a loop with a barrier, after the last one");
            size_t s1 = o + 1, s2 = s1, s3;
            while (s2 < oc && !(code[s2] && src[s2] == ';')) s2++;
            s3 = s2 + 1;
            while (s3 < oc && !(code[s3] && src[s3] == ';')) s3++;
            if (s3 >= oc) TL_FAIL(c, "a loop header it cannot read");
            /* the header: `T v = uniform; uniform; uniform` */
            size_t j = s1, v = 0, vl = 0, x, xl, last = 0;
            while (next_word(&j, s2, &x, &xl) && WORD_IN(x, xl, tl_type_words)) last = j;
            size_t after_type = last;
            if (!last || !next_word(&last, s2, &v, &vl) || v != skip_ws_fwd(after_type))
                TL_FAIL(c, "a loop with a barrier that does not declare its variable");
            size_t eq = skip_ws_fwd(v + vl);
            if (eq >= s2 || src[eq] != '=' || c->nu >= 16) TL_FAIL(c, "a loop variable");
            c->uvar[c->nu] = v;
            c->ulen[c->nu++] = vl;
            size_t bc = match_close(bo);
            if (!tl_expr_ok(c, eq + 1, s2, 1) || !tl_expr_ok(c, s2 + 1, s3, 1)
                || !tl_incr_ok(c, s3 + 1, oc, v, vl) || tl_written(v, vl, bo, bc))
                TL_FAIL(c, "a loop whose threads may not run it alike");
            for (j = bo; next_word(&j, bc, &x, &xl);)
                if (word_is(x, xl, "break") || word_is(x, xl, "continue")
                    || word_is(x, xl, "return"))
                    TL_FAIL(c, "break, continue or return in a loop with a barrier");
            if (ra != SIZE_MAX) tl_region_add(c, ra, rb, a, b, ret);
            ra = SIZE_MAX;
            ret = 0;
            int inner_ends = 0;
            if (!tl_block(c, bo + 1, bc, 0, &inner_ends)) return 0;
            if (!inner_ends) TL_FAIL(c, "a loop with a barrier that does not end with one");
            c->nu--;
            pure_since = 1;
            last_sync = 1;
        } else if (barriers) {
            TL_FAIL(c, "a barrier inside a statement");
        } else if (shared) {
            /* after declarations that only compute: the stretch so far ends there (nobody
               could tell the two stretches from one), the declaration stays at the body's
               level, where every later stretch sees it */
            if (!top || !pure_since) TL_FAIL(c, "a __shared__ declaration after other code");
            if (ra != SIZE_MAX) tl_region_add(c, ra, rb, a, b, ret);
            ra = SIZE_MAX;
            ret = 0;
        } else {
            if (ra == SIZE_MAX) ra = p;
            rb = end;
            last_sync = 0;
            int decl = WORD_IN(p, e - p, tl_type_words), pure = 1;
            if (decl) {
                size_t first = c->nd;
                if (!tl_declaration(c, p, end, a, b, &pure))
                    TL_FAIL(c, "a declaration it cannot read");
                /* uniform: computed alike by every thread (from the parameters, blockIdx, ...)
                   and never written, named nowhere before: a loop header may read it, from a
                   copy at the body's level (CUEMU_TL_UNIFORM) */
                for (size_t k = first; top && k < c->nd; k++) {
                    tl_decl *d = &c->d[k];
                    if (!d->noinit && c->nul < 16 && tl_expr_ok(c, d->ia, d->ib, 1)
                        && !tl_written(d->name, d->len, d->ib, c->bc)
                        && !tl_mentions(c->bo + 1, d->st, d->name, d->len)) {
                        d->uniform = 1;
                        c->ul[c->nul++] = k;
                    }
                }
            } else if (e > p) {
                /* `T x`, `ns::T x`, `T<...> x`, `T *x =`: a type it does not know */
                size_t q = skip_ws_fwd(e);
                while (q < end && src[q] == '*') q = skip_ws_fwd(q + 1);
                if (q < end && (is_id(src[q]) || (src[q] == ':' && src[q + 1] == ':')
                                || src[q] == '<'))
                    if (!word_is(p, e - p, "return") && !word_is(p, e - p, "else")
                        && !word_is(p, e - p, "if") && !word_is(p, e - p, "for")
                        && !word_is(p, e - p, "while") && !word_is(p, e - p, "do")
                        && !word_is(p, e - p, "switch"))
                        TL_FAIL(c, "a declaration of a type it does not know");
                pure = 0;
            } else {
                pure = 0;
            }
            if (!pure) pure_since = 0;
            for (i = p; next_word(&i, end, &w, &len);)
                if (word_is(w, len, "return")) {
                    if (!top) TL_FAIL(c, "return in a loop with a barrier");
                    edit_push(&c->e, &c->ne, w, len, "CUEMU_TL_RETURN");
                    ret = 1;
                }
        }
        p = skip_ws_fwd(end);
    }
    if (ra != SIZE_MAX) tl_region_add(c, ra, rb, a, b, ret);
    *ends_sync = last_sync;
    return 1;
}

/* 1 when a member of the parameter named by [w, w + len) is written in the body (`p.n = 0`,
   `p.a.b++`, `&p.n`): the parameter itself is. */
static int tl_member_written(size_t w, size_t len, const tl_ctx *c)
{
    size_t i = c->bo + 1, x, l;
    while (next_word(&i, c->bc, &x, &l)) {
        if (l != len || strncmp(src + x, src + w, len)) continue;
        size_t pv = skip_ws_back(x), e = skip_ws_fwd(x + l);
        if ((pv > c->bo && src[pv - 1] == '.') || e >= c->bc || src[e] != '.') continue;
        while (e < c->bc && src[e] == '.') {          /* .member.member */
            size_t m = skip_ws_fwd(e + 1);
            while (m < c->bc && is_id(src[m])) m++;
            e = skip_ws_fwd(m);
        }
        if (pv > c->bo + 1 && src[pv - 1] == '&' && src[pv - 2] != '&' && tl_unary_at(pv - 1, c->bo))
            return 1;
        if (pv >= 2 && (src[pv - 1] == '+' || src[pv - 1] == '-') && src[pv - 2] == src[pv - 1])
            return 1;
        if (e + 1 < c->bc && (src[e] == '+' || src[e] == '-') && src[e + 1] == src[e]) return 1;
        if (tl_assign_op(e, c->bc)) return 1;
    }
    return 0;
}

/* What the whole body must be for thread loops (see above): waits only with __syncthreads (at
   least once), no goto, no launch, no directive but `#pragma unroll`, no lambda, no local
   array, parameters never written. */
static int tl_check(tl_ctx *c, size_t self, size_t self_len)
{
    size_t i = c->bo + 1, w, len, waits = 0;
    find_waiting_functions();
    if (has_lambda(c->bo + 1, c->bc) || has_local_array(c->bo + 1, c->bc))
        TL_FAIL(c, "a lambda or a local array");
    while (next_word(&i, c->bc, &w, &len)) {
        int k = sync_word(w, len);
        if (k > 0) TL_FAIL(c, "__syncthreads_count, _and or _or");
        if (k == 0) {
            waits++;
            continue;
        }
        if (word_is(w, len, "goto")) TL_FAIL(c, "goto");
        if (len == self_len && !strncmp(src + w, src + self, len)) continue;
        if (other_wait(w, len) || names_waiting(w, len)) TL_FAIL(c, "another wait");
    }
    if (!waits) TL_FAIL(c, "no barrier");
    for (size_t k = c->bo + 1; k + 2 < c->bc; k++) {
        if (!code[k]) continue;
        if (src[k] == '#' && in_directive(k) && !pragma_unroll_at(k)) TL_FAIL(c, "a directive");
        if (src[k] == '<' && src[k + 1] == '<' && src[k + 2] == '<') TL_FAIL(c, "a launch");
    }
    for (size_t a = c->po + 1; a < c->pc;) {
        size_t e = tl_param_end(a, c->pc);
        size_t l = 0, vw = skip_ws_fwd(a);
        int pack = 0, none = !has_code(a, e) || (word_at(vw, "void") && !has_code(vw + 4, e));
        size_t nm = none ? 0 : param_name(a, e, &l, &pack);
        if (!none && (!nm || pack)) TL_FAIL(c, "a parameter without a name");
        if (nm && (tl_written(nm, l, c->bo + 1, c->bc) || tl_member_written(nm, l, c)))
            TL_FAIL(c, "a parameter it writes");
        a = e + 1;
    }
    /* a parameter handed to a function of this file that takes a reference may be written */
    for (i = c->bo + 1; next_word(&i, c->bc, &w, &len);) {
        size_t ce = call_end(w, len);
        if (!ce) continue;
        int by_ref = 0;
        for (size_t d = 0; d < nfdefs; d++) {
            const fdef *f = &fdefs[d];
            if (!f->po || f->len != len || strncmp(src + f->name, src + w, len)) continue;
            for (size_t k = f->po; k < match_close(f->po); k++)
                by_ref |= code[k] && src[k] == '&';
        }
        size_t j = w + len, x, xl;
        while (by_ref && next_word(&j, ce, &x, &xl))
            if (tl_is_param(c, x, xl)) TL_FAIL(c, "a parameter handed on by reference");
    }
    return 1;
}

/* 1 when the word [w, w + len) stands in [a, b). */
static int tl_mentions(size_t a, size_t b, size_t w, size_t len)
{
    size_t i = a, x, l;
    while (next_word(&i, b, &x, &l))
        if (l == len && !strncmp(src + x, src + w, len)) return 1;
    return 0;
}

/* Region r is in declaration d's scope: after it, in its block. */
static int tl_in_scope(const tl_decl *d, const tl_region *r)
{
    return r->a >= d->st && r->b <= d->blk_b;
}

/* Which declarations outlive their region (a later region of their scope names them: a
   thread's value must wait in its array), and the edits that say so. */
static int tl_hoist(tl_ctx *c)
{
    for (size_t k = 0; k < c->nd; k++) {
        tl_decl *d = &c->d[k];
        for (size_t r = 0; r < c->nr; r++)
            if (r != d->region && tl_in_scope(d, &c->r[r])
                && tl_mentions(c->r[r].a, c->r[r].b, d->name, d->len))
                d->hoist = 1;
    }
    /* a statement's declarators go together (`int a = 1, b = 2;` becomes `a = 1, b = 2;`) */
    for (size_t k = 0; k < c->nd; k++)
        for (size_t j = 0; j < c->nd; j++)
            if (c->d[j].st == c->d[k].st && c->d[j].hoist) c->d[k].hoist = 1;
    /* in each region, the names bound to arrays and those it declares for itself: no two
       alike (C++ would see one name declared twice in one scope) */
    for (size_t r = 0; r < c->nr; r++)
        for (size_t k = 0; k < c->nd; k++) {
            const tl_decl *d = &c->d[k];
            int here = d->region == r || (d->hoist && tl_in_scope(d, &c->r[r]));
            for (size_t j = k + 1; here && j < c->nd; j++) {
                const tl_decl *e = &c->d[j];
                int there = e->region == r || (e->hoist && tl_in_scope(e, &c->r[r]));
                if (there && e->len == d->len && !strncmp(src + e->name, src + d->name, d->len))
                    TL_FAIL(c, "a name declared twice");
            }
        }
    char *text = NULL;
    size_t tl = 0;
    FILE *f = open_memstream(&text, &tl);
    if (!f) die("out of memory");
    fputs(" CUEMU_TL_BEGIN", f);
    for (int u = 0; u < c->nul; u++) {
        const tl_decl *d = &c->d[c->ul[u]];
        fputs(" CUEMU_TL_UNIFORM(", f);
        emit_flat(f, d->st, d->te, 0);
        fprintf(f, " %.*s = ", (int)d->len, src + d->name);
        emit_flat(f, d->ia, d->ib, 0);
        fputs(";)", f);
    }
    for (size_t k = 0; k < c->nd; k++) {
        const tl_decl *d = &c->d[k];
        if (!d->hoist) continue;
        fputs(" CUEMU_TL_VAR(", f);
        emit_flat(f, d->st, d->te, 0);
        fprintf(f, ", cuemu_tlv_%.*s_%zu)", (int)d->len, src + d->name, k);
    }
    fputc(' ', f);
    fclose(f);
    edit *ins = NULL, *rep = NULL;
    size_t nins = 0, nrep = 0;
    edit_push(&ins, &nins, c->bo + 1, 0, text);
    for (size_t r = 0; r < c->nr; r++) {
        /* a stretch reads its thread's values into variables of the same names (the
           compiler keeps them in registers) and writes them back at its end; the stretch that
           declares one keeps its declaration and only writes it back */
        char *save = NULL;
        size_t sl = 0;
        FILE *fs = open_memstream(&save, &sl);
        text = NULL;
        f = open_memstream(&text, &tl);
        if (!f || !fs) die("out of memory");
        fputs(c->r[r].ret ? "CUEMU_TL_REGION_R" : "CUEMU_TL_REGION", f);
        for (size_t k = 0; k < c->nd; k++) {
            const tl_decl *d = &c->d[k];
            if (!d->hoist || !(d->region == r || tl_in_scope(d, &c->r[r]))) continue;
            if (d->region != r)
                fprintf(f, " CUEMU_TL_LOAD(cuemu_tlv_%.*s_%zu, %.*s)", (int)d->len,
                        src + d->name, k, (int)d->len, src + d->name);
            if (d->region != r || !d->noinit)
                fprintf(fs, " CUEMU_TL_SAVE(cuemu_tlv_%.*s_%zu, %.*s)", (int)d->len,
                        src + d->name, k, (int)d->len, src + d->name);
        }
        fputc(' ', f);
        fputs(c->r[r].ret ? " CUEMU_TL_REGION_END_R" : " CUEMU_TL_REGION_END", fs);
        fclose(f);
        fclose(fs);
        edit_push(&ins, &nins, c->r[r].a, 0, text);
        edit_push(&ins, &nins, c->r[r].b, 0, save);
    }
    edit_push(&ins, &nins, c->bc, 0, " CUEMU_TL_END ");
    /* a declaration without an initialiser becomes a reference to the thread's element in its
       own stretch (no variable read unset; -Wuninitialized would say so at the stretch's end) */
    for (size_t k = 0; k < c->nd; k++) {
        const tl_decl *d = &c->d[k];
        if (!d->hoist || !d->noinit) continue;
        size_t end = tl_stmt_end(d->st, c->bc);
        for (size_t q = d->st; q < end; q++)
            if (src[q] == '\n') TL_FAIL(c, "a declaration over several lines");
        text = NULL;
        f = open_memstream(&text, &tl);
        if (!f) die("out of memory");
        fprintf(f, "CUEMU_TL_NOINIT(cuemu_tlv_%.*s_%zu, %.*s, ", (int)d->len, src + d->name, k,
                (int)d->len, src + d->name);
        emit_flat(f, d->st, end, 0);
        fputc(')', f);
        fclose(f);
        edit_push(&rep, &nrep, d->st, end - d->st, text);
    }
    /* in the order the copy meets them; at one place the ends, then the starts (both kept
       in the order made), then what replaces text */
    for (size_t k = 0; k < c->ne; k++) edit_push(&rep, &nrep, c->e[k].pos, c->e[k].len, c->e[k].text);
    free(c->e);
    c->e = NULL;
    c->ne = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < nins; k++) {
            int is_end = ins[k].text[0] == ' ' && ins[k].pos != c->bo + 1;
            if ((pass == 0 && is_end) || (pass == 1 && !is_end))
                edit_push(&c->e, &c->ne, ins[k].pos, 0, ins[k].text);
        }
    for (size_t k = 0; k < nrep; k++) edit_push(&c->e, &c->ne, rep[k].pos, rep[k].len, rep[k].text);
    free(ins);
    free(rep);
    return 1;
}

/* Thread loops for the kernel named [name, name_end) with parameters (po, pc) and body
   [bo, bc] when it qualifies (see above): its edits are made as the copy passes them. */
static int tl_plan(size_t name, size_t name_end, size_t po, size_t pc, size_t bo, size_t bc)
{
    if (getenv("CUEMU_REWRITE_NO_TL")) return 0;
    tl_ctx c = { .bo = bo, .bc = bc, .po = po, .pc = pc };
    int ends = 0;
    int ok = tl_check(&c, name, name_end - name) && tl_block(&c, bo + 1, bc, 1, &ends)
             && tl_hoist(&c);
    if (getenv("CUEMU_REWRITE_TRACE"))
        fprintf(stderr, "cuemu-rewrite: %s:%d: %.*s: %s\n", in_path, line_of(name),
                (int)(name_end - name), src + name, ok ? "thread loops" : c.why);
    if (ok) {
        /* stable by position: add_edit keeps the order of those at one place */
        for (size_t k = 1; k < c.ne; k++)
            for (size_t j = k; j > 0 && c.e[j - 1].pos > c.e[j].pos; j--) {
                edit t = c.e[j];
                c.e[j] = c.e[j - 1];
                c.e[j - 1] = t;
            }
        for (size_t k = 0; k < c.ne; k++) add_edit(c.e[k].pos, c.e[k].len, c.e[k].text);
    }
    free(c.d);
    free(c.r);
    free(c.e);
    return ok;
}

/* The `__forceinline__` among a function's specifiers (before its return type, at q), or
   SIZE_MAX: a split helper's becomes CUEMU_CO_FORCEINLINE (cuemu_split.h), since g++ 14 gives
   a coroutine's resumption the attribute too and then refuses to compile the call it cannot
   inline ("inlining failed in call to 'always_inline' ... Frame*", chapter 04's transposes). */
static size_t forceinline_at(size_t q)
{
    size_t p = skip_ws_back(q);
    while (id_start(p) < p) {
        size_t e = p;
        p = id_start(p);
        if (word_is(p, e - p, "__forceinline__")) return p;
        p = skip_ws_back(p);
    }
    return SIZE_MAX;
}

/* Split helpers: functions of this file that wait and can be split like a kernel. Such a
   function is `void` and __device__ (not __host__, not a kernel), static, inline or a
   template (no other file calls it, or sees its type), is defined once, is named
   only in calls that are whole statements, and waits only as a split kernel may (plan_split),
   counting calls of other split helpers. Its return type becomes CUEMU_CO_SUB, so each call
   of it is a coroutine's (cuemu_split.h): a split caller awaits it; code on fibers runs it to
   its end, its barriers the fibers'. A kernel that calls one can then be split too (chapter
   04's transposes, NVIDIA's mergeSort). The edits are planned before the copy starts. */
static void plan_helpers(void)
{
    static const char *const not_split[] = { "__host__", "__global__", "virtual", "constexpr",
                                             "operator" };
    /* a function another file may call (relocatable device code, a header's prototype) must
       keep its type: only static, inline and template functions are split */
    static const char *const file_own[] = { "static", "inline", "__inline__", "__forceinline__" };
    find_waiting_functions();
    for (size_t d = 0; d < nfdefs; d++) {
        fdef *f = &fdefs[d];
        if (!f->po || !f->waits || in_directive(f->name)) continue;
        size_t t = skip_ws_back(f->name), q = id_start(t);
        if (!word_is(q, t - q, "void")) continue;
        int device = 0, refused = 0, own = 0;
        size_t p = skip_ws_back(q);
        while (id_start(p) < p) {
            size_t e = p;
            p = id_start(p);
            device |= word_is(p, e - p, "__device__");
            refused |= WORD_IN(p, e - p, not_split);
            own |= WORD_IN(p, e - p, file_own);
            p = skip_ws_back(p);
        }
        own |= p > 0 && src[p - 1] == '>';     /* a template's header */
        if (!device || refused || !own) continue;
        int alone = 1;
        for (size_t o = 0; o < nfdefs; o++)
            if (o != d && fdefs[o].len == f->len && !strncmp(src + fdefs[o].name, src + f->name, f->len))
                alone = 0;
        size_t i = 0, w, len;
        while (alone && next_word(&i, n, &w, &len))
            if (w != f->name && len == f->len && !strncmp(src + w, src + f->name, len)
                && !call_statement(w, len))
                alone = 0;
        f->split = alone;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t d = 0; d < nfdefs; d++) {
            edit *plan = NULL;
            size_t nplan = 0;
            if (fdefs[d].split && !plan_split(fdefs[d].name, fdefs[d].len, fdefs[d].po + 1,
                                              fdefs[d].bo, fdefs[d].bc, 1, &plan, &nplan)) {
                fdefs[d].split = 0;
                changed = 1;
            }
            free(plan);
        }
    }
    for (size_t d = 0; d < nfdefs; d++) {
        if (!fdefs[d].split) continue;
        edit *plan = NULL;
        size_t nplan = 0, t = skip_ws_back(fdefs[d].name);
        plan_split(fdefs[d].name, fdefs[d].len, fdefs[d].po + 1, fdefs[d].bo, fdefs[d].bc, 1,
                   &plan, &nplan);
        add_edit(t - 4, 4, "CUEMU_CO_SUB");
        size_t fi = forceinline_at(t - 4);
        if (fi != SIZE_MAX) add_edit(fi, strlen("__forceinline__"), "CUEMU_CO_FORCEINLINE");
        for (size_t k = 0; k < nplan; k++) add_edit(plan[k].pos, plan[k].len, plan[k].text);
        free(plan);
    }
}

/* `__global__` at g: writes src[copied, start of the declaration) and the companion, and
   returns the new `copied`; returns `copied` unchanged (nothing written) for a declaration it
   does not recognise (an explicit specialisation, a qualified name, a friend): its launches
   then go on without one. */
static size_t kernel_companion(size_t g, size_t copied)
{
    /* back over the specifiers (static, inline, void, extern "C") to a template header */
    size_t p = skip_ws_back(g), start = g, th = 0, te = 0;
    for (;;) {
        size_t q = p;
        while (q > 0 && code[q - 1] && is_id(src[q - 1])) q--;
        if (q == p || in_directive(q)) break;
        if (word_at(q, "friend") || word_at(q, "typedef")) return copied;
        start = q;
        p = skip_ws_back(q);
    }
    if (p > 0 && src[p - 1] == '>' && !in_directive(p - 1)) {
        int depth = 0;
        size_t q = p;
        while (q > 0) {
            q--;
            if (!code[q]) continue;
            if (src[q] == '>') depth++;
            else if (src[q] == '<' && --depth == 0) break;
        }
        size_t t = skip_ws_back(q);
        if (depth != 0 || t < 8 || !word_at(t - 8, "template")) return copied;
        th = t - 8;
        te = p;
        start = th;
    }
    if (start < copied) return copied;
    /* forward to the name and the parameter list: the `( ... )` followed by `{` or `;` */
    size_t i = g + 10, name = 0, name_end = 0, po = 0, pc = 0;
    while (i < n) {
        if (!code[i]) { i++; continue; }
        char c = src[i];
        if (c == ';' || c == '{' || c == '=' || c == '}') return copied;
        if (c == '(') {
            size_t close = match_close(i), after = skip_ws_fwd(close + 1);
            if (after < n && (src[after] == '{' || src[after] == ';')) {
                name_end = skip_ws_back(i);
                name = name_end;
                while (name > 0 && is_id(src[name - 1])) name--;
                po = i;
                pc = close;
                break;
            }
            i = close + 1;
            continue;
        }
        i++;
    }
    if (!po || name == name_end || isdigit((unsigned char)src[name])) return copied;
    size_t before = skip_ws_back(name);
    if (before >= 1 && (src[before - 1] == ':' || src[before - 1] == '~')) return copied;
    if (!th) cluster_registration(start, name, name_end, po, pc);
    fwrite(src + copied, 1, start - copied, out);
    if (th) {
        emit_flat(out, th, te, 0);
        fputc(' ', out);
    }
    {
        size_t after = skip_ws_fwd(pc + 1);
        if (after < n && src[after] == '{' && getenv("CUEMU_REWRITE_NO_SPLIT") == NULL)
            if (!tl_plan(name, name_end, po, pc, after, match_close(after)))
                split_plan(name, name_end, po, pc, after, match_close(after));
    }
    fprintf(out, "auto cuemu_kfn_%.*s(", (int)(name_end - name), src + name);
    emit_flat(out, po + 1, pc, 0);
    fputs(") -> void (*)(", out);
    emit_params_no_defaults(po + 1, pc);
    fputs("); ", out);
    if (!kernel_known(src + name, name_end - name)) {
        char **k = (char **)realloc(kernel_names, (nkernel_names + 1) * sizeof *k);
        char *s = (char *)malloc(name_end - name + 1);
        if (!k || !s) die("out of memory");
        memcpy(s, src + name, name_end - name);
        s[name_end - name] = 0;
        kernel_names = k;
        kernel_names[nkernel_names++] = s;
    }
    return start;
}

/* The kernel expression [ks, ke) with its last name prefixed by cuemu_kfn_ (`ns::k<T>` ->
   `ns::cuemu_kfn_k<T>`) when it names a kernel whose companion this file declared (emit: 0
   only says whether); 0, nothing written, for anything else (a function pointer, a
   parenthesised expression). */
static int companion_of(size_t ks, size_t ke, int emit)
{
    size_t e = ke;
    if (e > ks && src[e - 1] == '>') {   /* explicit template arguments */
        int depth = 0;
        while (e > ks) {
            e--;
            if (!code[e]) continue;
            if (src[e] == '>') depth++;
            else if (src[e] == '<' && --depth == 0) break;
        }
        e = skip_ws_back(e);
    }
    size_t b = e;
    while (b > ks && is_id(src[b - 1])) b--;
    if (b == e || !kernel_known(src + b, e - b)) return 0;
    for (size_t i = ks; i < b; i++)
        if (code[i] && !(is_id(src[i]) || src[i] == ':' || isspace((unsigned char)src[i])))
            return 0;
    if (emit) {
        emit_flat(out, ks, b, 0);
        fputs("cuemu_kfn_", out);
        emit_flat(out, b, ke, 0);
    }
    return 1;
}
static int companion_named(size_t ks, size_t ke) { return companion_of(ks, ke, 0); }
static void emit_companion_of(size_t ks, size_t ke) { companion_of(ks, ke, 1); }

/* The kernel expression [ks, ke) for the launch's address: the specialisation its companion
   names (`static_cast<decltype(cuemu_kfn_k(args))>(k)`), or as written when it has none. */
static void emit_kernel_typed(size_t ks, size_t ke)
{
    if (!companion_named(ks, ke)) {
        emit_flat(out, ks, ke, 0);
        return;
    }
    fputs("static_cast<decltype(", out);
    emit_companion_of(ks, ke);
    fputs("(cuemu_a_...))>(", out);
    emit_flat(out, ks, ke, 0);
    fputs(")", out);
}

/* Rewrites the launch whose `<<<` is at lt; kernel expression starts at ks. Returns the
   position after the closing parenthesis of the argument list. */
static size_t rewrite_launch(size_t ks, size_t lt)
{
    size_t i = lt + 3, gt = 0;
    int depth = 0;
    for (; i + 2 < n; i++) {
        if (!code[i]) continue;
        char c = src[i];
        if (c == '(' || c == '[' || c == '{') depth++;
        else if (c == ')' || c == ']' || c == '}') depth--;
        else if (depth == 0 && c == '>' && src[i + 1] == '>' && src[i + 2] == '>'
                 && code[i + 1] && code[i + 2]) {
            gt = i;
            break;
        }
    }
    if (!gt) die("%s:%d: <<< without a matching >>>", in_path, line_of(lt));
    size_t po = skip_ws_fwd(gt + 3);
    if (po >= n || src[po] != '(')
        die("%s:%d: expected the kernel's argument list after >>>", in_path, line_of(gt));
    size_t pc = match_close(po);

    fputs("::cuemu::launch(", out);
    emit_newlines(ks, lt);
    fputs("::cuemu::cfg(", out);
    fwrite(src + lt + 3, 1, gt - (lt + 3), out);
    fputs("), \"", out);
    emit_flat(out, ks, skip_ws_back(lt), 1);
    fputs("\", __FILE__, __LINE__, [&](auto &&...cuemu_a_) -> decltype(::cuemu::kaddr("
          "::cuemu::prio<2>{}, ", out);
    emit_kernel_typed(ks, skip_ws_back(lt));
    fputs(", cuemu_a_...)) { return ::cuemu::kaddr(::cuemu::prio<2>{}, ", out);
    emit_kernel_typed(ks, skip_ws_back(lt));
    fputs(", cuemu_a_...); }, [&](auto &&...cuemu_a_) { ", out);
    emit_flat(out, ks, skip_ws_back(lt), 0);
    fputs("(cuemu_a_...); }", out);
    emit_newlines(gt + 3, po + 1);
    if (has_code(po + 1, pc)) fputs(", ", out);
    /* the arguments, verbatim, except that a bare `0` or `NULL` becomes a value that converts
       to any pointer or number: copied into the launch it would otherwise be an int (or long)
       that no longer converts to the kernel's pointer parameter */
    size_t a = po + 1;
    while (a <= pc) {
        size_t e = a;
        depth = 0;
        for (; e < pc; e++) {
            if (!code[e]) continue;
            char c = src[e];
            if (c == '(' || c == '[' || c == '{') depth++;
            else if (c == ')' || c == ']' || c == '}') depth--;
            else if (c == ',' && depth == 0) break;
        }
        size_t tb = skip_ws_fwd(a), te = skip_ws_back(e);
        if (tb < te && ((te - tb == 1 && src[tb] == '0')
                        || (te - tb == 4 && strncmp(src + tb, "NULL", 4) == 0))) {
            fwrite(src + a, 1, tb - a, out);
            fputs("::cuemu::zero_arg()", out);
            fwrite(src + te, 1, e - te, out);
        } else {
            fwrite(src + a, 1, e - a, out);
        }
        if (e < pc) fputc(',', out);
        a = e + 1;
    }
    fputs(")", out);
    return pc + 1;
}

/* The ';' that ends the declaration starting at `from` (brackets nested), or n if none. */
static size_t decl_end(size_t from)
{
    int depth = 0;
    size_t semi = from;
    for (; semi < n; semi++) {
        if (!code[semi]) continue;
        char c = src[semi];
        if (c == '(' || c == '[' || c == '{') depth++;
        else if (c == ')' || c == ']' || c == '}') depth--;
        else if (c == ';' && depth == 0) break;
    }
    return semi;
}

/* A `#pragma unroll` with no count at i (the '#'): the end of the word unroll, else 0. It asks
   nvcc to unroll a loop fully, for a GPU's registers; the emulator leaves the choice to the host
   compiler, which unrolls what pays on a CPU. Forced, chapter 04's 8x8 register tile became
   one unrolled loop nest with a checked access at each of its 32 float4 reads, and its file's
   compile took 1.81 s where it takes 0.71 s now; its tests ran 2.0-2.1 s before and 2.2 s
   after (2026-12-05). A count (`#pragma unroll 4`, `1`) is the program's own choice and
   stays. */
static size_t pragma_unroll_at(size_t i)
{
    size_t b = i;
    while (b > 0 && (src[b - 1] == ' ' || src[b - 1] == '\t')) b--;
    if (b > 0 && src[b - 1] != '\n') return 0;
    size_t p = skip_ws_fwd(i + 1);
    if (!word_at(p, "pragma")) return 0;
    p = skip_ws_fwd(p + 6);
    if (!word_at(p, "unroll")) return 0;
    size_t end = p + 6;
    for (p = end; p < n && src[p] != '\n'; p++)
        if (code[p] && !isspace((unsigned char)src[p])) return 0;
    return end;
}

/* `extern "C"` starting at `ext`, declaring a function that is neither __global__ nor
   __device__: host code (a library's entry points, which ctypes calls). Returns the position
   after the "C", where CUEMU_HOST_FN goes (cuemu_device.h: no load/store hooks there), or 0. */
static size_t host_function_at(size_t ext)
{
    size_t j = ext + 6;
    while (j < n && isspace((unsigned char)src[j])) j++;
    if (j + 3 > n || strncmp(src + j, "\"C\"", 3) != 0) return 0;
    for (size_t k = j + 3; k < n; k++) {
        if (!code[k]) continue;
        char c = src[k];
        if (c == ';' || c == '{' || c == '}' || c == '=' || c == '#') return 0;
        if (c == '_' && (word_at(k, "__global__") || word_at(k, "__device__"))) return 0;
        if (c == '(') {
            size_t p = skip_ws_back(k);
            return p > j + 3 && is_id(src[p - 1]) ? j + 3 : 0;
        }
    }
    return 0;
}

/* `extern __shared__ DECL;` starting at `ext` (the `extern`); sh = the `__shared__`. */
static size_t rewrite_extern_shared(size_t ext, size_t sh)
{
    size_t semi = decl_end(sh + 10);
    int depth = 0;
    if (semi >= n) die("%s:%d: extern __shared__ without ';'", in_path, line_of(ext));
    /* the declarator: the identifier before the first top-level '[' */
    size_t br = 0;
    for (size_t i = sh + 10; i < semi; i++) {
        if (!code[i]) continue;
        char c = src[i];
        if (c == '(') depth++;
        else if (c == ')') depth--;
        else if (c == '[' && depth == 0) { br = i; break; }
    }
    if (!br) return 0;   /* not an array: leave it to the compiler */
    size_t ne = skip_ws_back(br), nb = ne;
    while (nb > 0 && is_id(src[nb - 1])) nb--;
    if (nb == ne) die("%s:%d: cannot find the name in extern __shared__", in_path, line_of(ext));
    size_t bc = match_close(br);

    emit_newlines(ext, sh + 10);
    /* what stood between `extern` and `__shared__` (`extern float __shared__ s[]` is legal:
       the specifiers come in any order), its line breaks already emitted */
    for (size_t i = ext + 6; i < sh; i++) fputc(!code[i] || src[i] == '\n' ? ' ' : src[i], out);
    fwrite(src + sh + 10, 1, nb - (sh + 10), out);   /* type and attributes */
    fputs("(*const ", out);
    fwrite(src + nb, 1, ne - nb, out);
    fputs(")", out);
    emit_newlines(ne, bc + 1);
    fwrite(src + bc + 1, 1, semi - (bc + 1), out);   /* further dimensions: [32] */
    fputs(" = ::cuemu::dsmem(\"", out);
    fwrite(src + nb, 1, ne - nb, out);
    fputs("\");", out);
    return semi + 1;
}

static int word_at(size_t i, const char *w);

/* 1 when position i lies on a preprocessor directive line (continuations included). */
static int in_directive(size_t i)
{
    size_t b = i;
    for (;;) {
        while (b > 0 && src[b - 1] != '\n') b--;
        if (b >= 2 && src[b - 2] == '\\') { b -= 2; continue; }
        break;
    }
    while (b < i && (src[b] == ' ' || src[b] == '\t')) b++;
    return src[b] == '#';
}

/* 1 when position p is in a function's body (a block), not at namespace or class scope: its
   innermost enclosing `{` stands where a statement starts (statement_start: after a function's
   `)`, a brace, ...). A body this does not recognise (after `const`, `noexcept`, a lambda's
   `mutable`) counts as no block: the registration that works at every scope is used there. */
static int in_block(size_t p)
{
    int depth = 0;
    for (size_t k = p; k-- > 0;) {
        if (!code[k]) continue;
        if (src[k] == '}') depth++;
        else if (src[k] == '{' && depth-- == 0) return statement_start(k);
    }
    return 0;
}

/* `__shared__` (not extern) at sh: becomes `static` (unless the declaration says it already),
   and each declared name is registered for poisoning. In a block the registration is a
   statement that tests a flag of its own (cuemu::shared_once), not a guarded static, whose
   guard lies between the shared variables and made each thread that passed the declaration
   take the hooks' slow path (NVIDIA's mergeSort: 100 million times). Returns the position
   after the ';'. */
static size_t rewrite_static_shared(size_t sh)
{
    size_t semi = decl_end(sh + 10), b = sh;
    int depth = 0, has_static = 0, block = in_block(sh);
    while (b > 0 && !(code[b - 1] && (src[b - 1] == ';' || src[b - 1] == '{'
                                      || src[b - 1] == '}' || src[b - 1] == ')')))
        b--;
    for (size_t k = b; k < sh; k++)
        if (word_at(k, "static")) has_static = 1;
    if (semi >= n) die("%s:%d: __shared__ declaration without ';'", in_path, line_of(sh));
    /* thread_local: each host thread running blocks of a launch has its own copy */
    fputs(has_static ? "thread_local" : "static thread_local", out);
    fwrite(src + sh + 10, 1, semi + 1 - (sh + 10), out);
    /* the declarators: split at top-level commas; each name is the last identifier before
       its first top-level '[', '=' or '{' (or before the end) */
    size_t start = sh + 10;
    while (start < semi) {
        size_t end = start, stop = 0;
        depth = 0;
        for (; end < semi; end++) {
            if (!code[end]) continue;
            char c = src[end];
            if (c == '(' || c == '[' || c == '{') {
                if (depth == 0 && !stop && c != '(') stop = end;
                depth++;
            } else if (c == ')' || c == ']' || c == '}') {
                depth--;
            } else if (c == '=' && depth == 0 && !stop) {
                stop = end;
            } else if (c == ',' && depth == 0) {
                break;
            }
        }
        size_t ne = skip_ws_back(stop ? stop : end), nb = ne;
        while (nb > start && is_id(src[nb - 1])) nb--;
        if (nb < ne && block) {
            int l = (int)(ne - nb);
            const char *v = src + nb;
            fprintf(out, " static thread_local unsigned char cuemu_shared_once_%.*s_%d; "
                    "::cuemu::shared_once(cuemu_shared_once_%.*s_%d, __builtin_addressof(%.*s), "
                    "sizeof(%.*s), \"%.*s\");", l, v, line_of(sh), l, v, line_of(sh), l, v, l, v,
                    l, v);
        } else if (nb < ne) {
            fprintf(out, " static thread_local ::cuemu::shared_reg cuemu_shared_reg_%.*s_%d("
                    "__builtin_addressof(%.*s), sizeof(%.*s), \"%.*s\");", (int)(ne - nb), src + nb,
                    line_of(sh), (int)(ne - nb), src + nb, (int)(ne - nb), src + nb,
                    (int)(ne - nb), src + nb);
        }
        start = end + 1;
    }
    return semi + 1;
}

static int word_at(size_t i, const char *w)
{
    size_t l = strlen(w);
    if (i + l > n || strncmp(src + i, w, l) != 0) return 0;
    if (i > 0 && is_id(src[i - 1])) return 0;
    if (i + l < n && is_id(src[i + l])) return 0;
    for (size_t k = 0; k < l; k++)
        if (!code[i + k]) return 0;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cuemu-rewrite IN.cu OUT.cpp\n");
        return 2;
    }
    in_path = argv[1];
    FILE *f = fopen(argv[1], "rb");
    if (!f) die("cannot read %s", argv[1]);
    size_t cap = 1 << 16;
    char *buf = (char *)malloc(cap);
    n = 0;
    for (;;) {
        if (!buf) die("out of memory");
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        cap *= 2;
        buf = (char *)realloc(buf, cap);
    }
    fclose(f);
    /* A UTF-8 byte order mark (some Windows editors write one) is not C++: the compiler accepts
       it only as a file's very first bytes, and the #line below would come before it. */
    if (n >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB
        && (unsigned char)buf[2] == 0xBF) {
        memmove(buf, buf + 3, n - 3);
        n -= 3;
    }
    src = buf;
    classify();
    if (getenv("CUEMU_REWRITE_NO_SPLIT") == NULL) plan_helpers();

    /* written to a temporary and renamed: make never sees a half-written output */
    size_t ol = strlen(argv[2]);
    char *tmp = (char *)malloc(ol + 8);
    if (!tmp) die("out of memory");
    snprintf(tmp, ol + 8, "%s.tmp", argv[2]);
    out = fopen(tmp, "wb");
    if (!out) die("cannot write %s", tmp);

    fputs("#line 1 \"", out);
    for (const char *p = argv[1]; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', out);
        fputc(*p, out);
    }
    fputs("\"\n", out);

    size_t copied = 0;
    for (size_t i = 0; i + 2 < n; i++) {
        if (next_edit < nedits && edits[next_edit].pos <= i) {
            const edit *e = &edits[next_edit++];
            copied = apply_edit(e, copied);
            if (e->len) {
                i = copied - 1;
                continue;
            }
        }
        if (pending && i >= pending_pos && copied <= pending_pos) {
            fwrite(src + copied, 1, pending_pos - copied, out);
            fputs(pending, out);
            free(pending);
            pending = NULL;
            copied = pending_pos;
        }
        if (!code[i]) continue;
        size_t pu;
        if (src[i] == '#' && (pu = pragma_unroll_at(i))) {
            fwrite(src + copied, 1, i - copied, out);
            fputs("/* #pragma unroll: the host compiler's choice here (cuemu-rewrite) */", out);
            copied = pu;
            i = copied - 1;
        } else if (src[i] == '<' && src[i + 1] == '<' && src[i + 2] == '<' && code[i + 1] && code[i + 2]) {
            size_t ks = kernel_start(i);
            if (ks < copied) die("%s:%d: overlapping launches", in_path, line_of(i));
            fwrite(src + copied, 1, ks - copied, out);
            copied = rewrite_launch(ks, i);
            i = copied - 1;
        } else if (src[i] == '_' && word_at(i, "__global__") && !in_directive(i)) {
            copied = kernel_companion(i, copied);
        } else if ((src[i] == 'g' && word_at(i, "gridDim")) || (src[i] == 'b' && word_at(i, "blockDim"))) {
            /* a member named gridDim or blockDim (cudaLaunchConfig_t's): the header's macros for
               the built-in variables would take it, so it is cuemu_gridDim there */
            size_t p = skip_ws_back(i);
            if (p > 0 && (src[p - 1] == '.' || (src[p - 1] == '>' && p > 1 && src[p - 2] == '-'))
                && code[p - 1]) {
                fwrite(src + copied, 1, i - copied, out);
                fputs("cuemu_", out);
                copied = i;
            }
        } else if (src[i] == '_' && word_at(i, "__shared__") && !in_directive(i)) {
            fwrite(src + copied, 1, i - copied, out);
            copied = rewrite_static_shared(i);
            i = copied - 1;
        } else if (src[i] == 'e' && word_at(i, "extern")) {
            /* the `__shared__` among the declaration's specifiers, if any: stop at what no
               specifier holds (`extern "C"`, a body, an initialiser, the end) */
            size_t j = skip_ws_fwd(i + 6);
            for (size_t k = j; k < n && k < i + 400; k++) {
                if (!code[k]) continue;
                char c = src[k];
                if (c == ';' || c == '{' || c == '"' || c == '=' || c == '[') break;
                if (c == '_' && word_at(k, "__shared__")) { j = k; break; }
            }
            size_t h;
            if (word_at(j, "__shared__")) {
                fwrite(src + copied, 1, i - copied, out);
                size_t next = rewrite_extern_shared(i, j);
                if (next) {
                    copied = next;
                    i = copied - 1;
                } else {
                    copied = i;
                }
            } else if (!in_directive(i) && (h = host_function_at(i))) {
                fwrite(src + copied, 1, h - copied, out);
                fputs(" CUEMU_HOST_FN", out);
                copied = h;
            }
        }
    }
    for (; next_edit < nedits; next_edit++) copied = apply_edit(&edits[next_edit], copied);
    if (pending && copied <= pending_pos) {
        fwrite(src + copied, 1, pending_pos - copied, out);
        fputs(pending, out);
        copied = pending_pos;
    }
    free(pending);
    fwrite(src + copied, 1, n - copied, out);
    if (fclose(out) != 0) die("cannot write %s", tmp);
    if (rename(tmp, argv[2]) != 0) die("cannot rename %s to %s", tmp, argv[2]);
    free(tmp);
    free(code);
    free(buf);
    return 0;
}
