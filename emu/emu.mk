# SPDX-License-Identifier: MIT
# The CPU emulator's build, included by the top Makefile (run from the repository root).
#   EMU_REWRITE   cuemu-rewrite IN.cu OUT.cpp (kernel launches, extern __shared__, and a
#                 registration after each static __shared__ so it can be poisoned)
#   EMU_RUNTIME   libcuemu.a: emu/core (kernels) + emu/runtime (CUDA runtime API), all -fPIC
#   EMU_CXXFLAGS  how an emulated .cu (after the rewrite) is compiled
#   EMU_LDLIBS    what it links with, after $(EMU_RUNTIME)
# Opt-in sanitizers: make ... EMU_SANITIZE=address (or thread) builds into $(BUILD)/emu-asan/
# (or emu-tsan/). TSan sees each emulated thread as its own thread and barriers as the only
# synchronisation, so it reports races between barriers: use it on small inputs.

BUILD        ?= build
EMU_SANITIZE ?=
EMU_CC       ?= $(CC)

ifeq ($(EMU_SANITIZE),)
  EMU_BUILD    := $(BUILD)/emu
  EMU_SANFLAGS :=
else
  EMU_BUILD    := $(BUILD)/emu-$(patsubst address,asan,$(patsubst thread,tsan,$(EMU_SANITIZE)))
  EMU_SANFLAGS := -fsanitize=$(EMU_SANITIZE) -fno-omit-frame-pointer
endif

# Emulated .cu files are compiled by clang++ when it is installed: its load/store instrumentation
# (-fsanitize-coverage=trace-loads,trace-stores) feeds the shared-memory race detector and the
# misaligned-access check (emu/core/access.c). EMU_CXX=g++ builds without those two checks;
# vectorisers are off so that every access the compiler emits is one the kernel wrote, and a
# store through a null pointer stays a store (that faults) instead of being optimised away.
comma        := ,
# A CXX the user set (make CXX=clang++-16, or in the environment) is the emulator's compiler too.
ifneq ($(filter command line environment,$(origin CXX)),)
EMU_CXX      ?= $(CXX)
else
EMU_CXX      ?= $(or $(shell command -v clang++ 2>/dev/null),$(CXX))
endif
# expanded once: ?= would run the shell again wherever EMU_CXX is used
EMU_CXX      := $(EMU_CXX)
# A machine with clang alone has no `cc` (clang does not bring one; build-essential does): there
# the C compiler beside EMU_CXX compiles the emulator's C files (EMU_CC) and the Makefile's.
ifeq ($(origin CC),default)
ifeq ($(shell command -v $(CC) 2>/dev/null),)
CC := $(subst g++,gcc,$(subst clang++,clang,$(EMU_CXX)))
endif
endif
# The oldest compilers that build it: gcc 11 (C++17, -fsanitize=alignment) and clang 14
# (-fsanitize-coverage=trace-loads). Asked once per make, from the compiler's own macros; a
# compiler too old stops make at once, before anything is built, when the emulator is needed.
# The same question says whether it compiles for 64-bit Arm (EMU_DIVZERO), and the folder it is
# installed in, where its LLVM tools are (EMU_LTO, EMU_LLVM_LINK): a sub-make (make check builds
# each chapter in one) asks nothing again, which keeps an unchanged `make check` quick.
EMU_CXX_MIN_gcc   := 11
EMU_CXX_MIN_clang  = $(if $(EMU_CXX_ARM),17,14)
# The answer is kept in $(BUILD)/emu-cxx-id with what it was asked of: the command, and the
# path, date and size of each program it names. A make whose compiler has not changed reads it
# there in a few milliseconds instead of running the compiler (50 to 100 ms of every `make
# check`); a make before the build folder exists asks, and writes nothing.
EMU_CXX_ID_FILE := $(BUILD)/emu-cxx-id
emu_cxx_key = $(subst $(eval) ,+,$(EMU_CXX))@$(shell for w in $(EMU_CXX); do p=$$(command -v "$$w" 2>/dev/null) && stat -L -c '%n:%Y:%s' "$$p"; done 2>/dev/null | tr -d ' \n')
emu_cxx_ask_compiler = $(eval \
  export TUT_EMU_CXX_ID := $(shell printf '\043ifdef __clang__\nclang __clang_major__\n\043else\ngcc __GNUC__\n\043endif\n\043ifdef __aarch64__\naarch64\n\043endif\n' | $(EMU_CXX) -x c++ -E -P - 2>/dev/null))$(eval \
  export TUT_EMU_CXX_DIR := $(shell dirname "$$(readlink -f "$$(command -v $(firstword $(EMU_CXX)))")" 2>/dev/null))$(if \
  $(and $(TUT_EMU_CXX_ID),$(TUT_EMU_CXX_DIR),$(wildcard $(BUILD)/.)),$(shell printf '%s %s %s\n' \
  '$(EMU_CXX_KEY)' '$(TUT_EMU_CXX_DIR)' '$(TUT_EMU_CXX_ID)' > '$(EMU_CXX_ID_FILE).'$$$$ && \
  mv -f '$(EMU_CXX_ID_FILE).'$$$$ '$(EMU_CXX_ID_FILE)'))
emu_cxx_ask = $(eval export TUT_EMU_CXX_ASKED := $(EMU_CXX))$(eval EMU_CXX_KEY := $(emu_cxx_key))$(eval \
  EMU_CXX_SAVED := $(if $(wildcard $(EMU_CXX_ID_FILE)),$(file < $(EMU_CXX_ID_FILE))))$(if \
  $(and $(word 3,$(EMU_CXX_SAVED)),$(if $(subst $(EMU_CXX_KEY),,$(firstword $(EMU_CXX_SAVED))),,y)),$(eval \
  export TUT_EMU_CXX_DIR := $(word 2,$(EMU_CXX_SAVED)))$(eval \
  export TUT_EMU_CXX_ID := $(wordlist 3,9,$(EMU_CXX_SAVED))),$(emu_cxx_ask_compiler))
ifneq ($(TUT_EMU_CXX_ASKED) $(origin TUT_EMU_CXX_DIR),$(EMU_CXX) environment)
  $(call emu_cxx_ask)
endif
# 64-bit Arm: clang 14 to 16 compile an access to a thread-local variable of a shared library
# (the emulator's state in a chapter's library, which Python loads with dlopen) as a call that
# they assume keeps the condition flags; glibc's resolver for such a library's variables does
# not keep them, so a comparison made before the access decides a branch after it with garbage.
# Measured 2026-12-04 (Debian 12 arm64, clang 14): ncclGroupEnd returned at once, with success,
# and no collective ran (09.nccl got the inputs back). LLVM fixed it in 17. Where the default
# clang++ is older, the emulator is built by g++ (which marks the flags as clobbered), and says
# so; a clang that old named by the user is refused.
EMU_CXX_ARM = $(filter aarch64,$(word 3,$(TUT_EMU_CXX_ID)))
EMU_CXX_ARM_OLD_CLANG = $(and $(EMU_CXX_ARM),$(filter clang,$(word 1,$(TUT_EMU_CXX_ID))),$(shell test "$(word 2,$(TUT_EMU_CXX_ID))" -ge $(EMU_CXX_MIN_clang) 2>/dev/null || echo old))
ifneq ($(and $(EMU_CXX_ARM_OLD_CLANG),$(if $(filter command line environment,$(origin CXX) $(origin EMU_CXX)),,y)),)
  $(info note: $(EMU_CXX) is clang $(word 2,$(TUT_EMU_CXX_ID)), which miscompiles a shared library's thread-local variables on 64-bit Arm (fixed in clang $(EMU_CXX_MIN_clang)): the emulator is built by $(CXX) (without the race detector; install clang $(EMU_CXX_MIN_clang) or newer for it))
  EMU_CXX := $(CXX)
  export EMU_CXX
  $(call emu_cxx_ask)
endif
EMU_CXX_KIND := $(word 1,$(TUT_EMU_CXX_ID))
EMU_CXX_MAJOR := $(word 2,$(TUT_EMU_CXX_ID))
EMU_CXX_BAD  := $(strip $(if $(TUT_EMU_CXX_ID),$(if $(shell test "$(EMU_CXX_MAJOR)" -ge "$(EMU_CXX_MIN_$(EMU_CXX_KIND))" 2>/dev/null || echo old),\
  $(EMU_CXX) is $(EMU_CXX_KIND) $(EMU_CXX_MAJOR): the emulator needs gcc $(EMU_CXX_MIN_gcc) or clang $(EMU_CXX_MIN_clang) or newer$(if $(EMU_CXX_ARM),$(if $(filter clang,$(EMU_CXX_KIND)), on 64-bit Arm (older clang miscompiles a shared library's thread-local variables there)),) (make CXX=g++-12$(comma) say)),\
  $(EMU_CXX) does not compile C++: the emulator needs gcc $(EMU_CXX_MIN_gcc) or clang $(EMU_CXX_MIN_clang) or newer (Debian/Ubuntu: apt-get install g++)))
EMU_GOALS    := emu-lib emu-tests emu-bench cuemu-nvcc test mutants grade grade-all
ifneq ($(EMU_CXX_BAD),)
ifneq ($(or $(filter cpu,$(B)),$(filter $(EMU_GOALS),$(MAKECMDGOALS))),)
ifeq ($(filter help clean hint,$(MAKECMDGOALS)),)
$(error $(EMU_CXX_BAD))
endif
endif
endif
# -simplifycfg-*-common=false: the optimiser must not merge identical accesses from the two
# arms of an `if` into one instruction, which has no source line: a race or fault report on it
# would name "an unknown location" instead of the student's line.
# -fno-builtin-memset, -disable-loop-idiom-memcpy: the optimiser must not turn a thread's loop
# of stores or copies (or a run of equal stores) into memset or memcpy, whose accesses no hook
# sees (the instrumentation runs after it; a constant one becomes 16-byte moves): a thread
# zero-filling its row of a shared tile raced with another reading it, unreported (chapter 10's
# tile read without its bar.wait, emu/bugs/fill_loop). memcpy stays a builtin: the headers and
# programs pun types with it (threadIdx is read that way), and as a call to the C library
# each one made NVIDIA's simpleStreams 56 s instead of 20. An explicit memset or memcpy call is
# one either way.
EMU_TRACE    := $(if $(and $(filter clang,$(EMU_CXX_KIND)),$(if $(EMU_SANITIZE),,y)),-fsanitize-coverage=edge$(comma)trace-loads$(comma)trace-stores -DCUEMU_TRACE=1 -fno-vectorize -fno-slp-vectorize -fno-delete-null-pointer-checks -mllvm -simplifycfg-sink-common=false -mllvm -simplifycfg-hoist-common=false -fno-builtin-memset -mllvm -disable-loop-idiom-memcpy)

# Link-time optimisation in the hooks' build: emu/core/hooks.c is compiled to bitcode like the
# kernels, so that the load/store hooks' fast path (a few compares) and the step from one thread
# to the next are inlined into each kernel instead of called (emu/core/hooks.c). It needs clang's
# gold plugin, which Debian's clang depends on; without it (EMU_LTO= also turns it off) the hooks
# are called, with the same checks. Full LTO, not thin: the hooks must be inlined everywhere
# (their slow path takes the access's address from its caller), which one module guarantees.
# The link repeats the compile's -mllvm options and its -fno-vectorize (the plugin sees neither,
# and vectorised a loop compiled with -fno-vectorize). Its -O2 pipeline runs again over code
# the compile optimised already: GVN without memory dependences (the compile's GVN removed the
# loads that matter; early-cse and LICM take those of the inlined hooks) took cuemu-nvcc's link
# of NVIDIA's mergeSort from 1.25 s to 1.03 s with the program as fast (2026-12-05), and, with
# line tables only, spilled variables are not tracked (below, EMU_LDLIBS), as in the second step.
ifeq ($(origin EMU_LTO),undefined)
EMU_LTO      := $(if $(EMU_TRACE),$(if $(and $(TUT_EMU_CXX_DIR),$(wildcard $(TUT_EMU_CXX_DIR)/../lib/LLVMgold.so)),y))
endif
EMU_LTOFLAGS := $(if $(EMU_LTO),-flto)
EMU_LTOLINK  := $(if $(EMU_LTO),-flto $(foreach o,simplifycfg-sink-common simplifycfg-hoist-common vectorize-loops vectorize-slp enable-gvn-memdep,-Wl$(comma)-plugin-opt=-$(o)=false))

# The hooks inlined one file at a time, where llvm-link sits beside clang (Debian's llvm-N,
# which clang recommends; EMU_LLVM_LINK= turns it off): each emulated file's bitcode is linked
# with the hooks' (only the functions it calls, made internal to it), then compiled to machine
# code with the same optimisation and -mllvm options, as in the link-time build above. The
# program's link then optimises only hooks.c, not every file again: after an edit, one file
# is compiled and the link takes a fraction of a second (a chapter's full-LTO link took 2.5 to
# 6 s on 2 cores), and under make -j the files compile in parallel. The instrumentation runs at
# the end of the first step's optimisation, so the hooks can only be inlined in a second one.
# What links such objects links them as before, with EMU_LDLIBS: native objects need no plugin,
# and the hooks.c of libcuemu.a is the one bitcode left.
# EMU_NATIVEFLAGS: the second step's options, those of EMU_TRACE that act on optimisation and
# code generation (the rest is in the bitcode already); emu_compile_to: where the compile writes
# (the bitcode, when there is a second step); emu_inline_hooks: the second step, a recipe line
# of its own (nothing without llvm-link).
ifeq ($(origin EMU_LLVM_LINK),undefined)
EMU_LLVM_LINK := $(if $(and $(EMU_LTO),$(TUT_EMU_CXX_DIR)),$(wildcard $(TUT_EMU_CXX_DIR)/llvm-link))
endif
EMU_HOOKS_BC := $(if $(and $(EMU_LTO),$(EMU_LLVM_LINK)),$(EMU_BUILD)/obj/core/hooks.c.o)
EMU_NATIVEFLAGS := -O2 -fPIC -fno-vectorize -fno-slp-vectorize -mllvm -simplifycfg-sink-common=false -mllvm -simplifycfg-hoist-common=false -Qunused-arguments
emu_compile_to   = $(if $(EMU_HOOKS_BC),$(1).bc,$(1))
# The second step does only what the hooks need: inline them (always-inline), fold and clean up
# what that leaves (instcombine, simplifycfg), drop repeated loads of the hooks' state
# (early-cse) and hoist the invariant ones out of loops (licm), with llvm-link's opt beside it;
# then clang generates code from that (-disable-llvm-optzns: no second -O2 pipeline over code
# the first step optimised already). The full -O2 again (EMU_STEP2=o2, or where opt is missing)
# spent 1.1 s of chapter 04's shared_memory.cu (solved) in the inliner's and GVN's passes:
# 2.81 s against 1.69 s, with `make emu-bench` and chapter 04's tests as fast as before
# (2026-12-05). EMU_NO_SPILL_TRACKING: with line tables only there is no variable whose location
# follows a spill, and tracking the spills of a big unrolled kernel took 0.2 s; said to LLVM
# here (-mllvm) and at cuemu-nvcc's link (the LTO plugin's -plugin-opt, EMU_LDLIBS).
EMU_NO_SPILL_TRACKING = $(if $(filter -gline-tables-only,$(EMU_DEBUG)),-livedebugvalues-max-stack-slots=0)
EMU_OPT   ?= $(if $(EMU_LLVM_LINK),$(wildcard $(dir $(EMU_LLVM_LINK))opt))
EMU_STEP2 ?= light
# From LLVM 18 on, opt checks that instcombine reached a fixpoint in one run, and stops the
# compile when it did not ("LLVM ERROR: Instruction Combining did not reach a fixpoint", clang
# 19, 2026-12-05); -O2's own pipeline does not ask for that, nor does this one. (LLVM 14 to 17
# know no such parameter.) Should opt fail all the same, the file gets the old second step.
EMU_IC = instcombine$(if $(filter 14 15 16 17,$(word 2,$(TUT_EMU_CXX_ID))),,<no-verify-fixpoint>)
EMU_STEP2_PASSES = always-inline,function($(EMU_IC),simplifycfg,early-cse<memssa>,loop-mssa(licm),$(EMU_IC),simplifycfg)
EMU_STEP2_CG  = $(EMU_NATIVEFLAGS) -Xclang -disable-llvm-optzns $(addprefix -mllvm ,$(EMU_NO_SPILL_TRACKING))
emu_step2_o2 = $(EMU_CXX) $(EMU_NATIVEFLAGS) -c -o $(1) $(1).hooks.bc
emu_step2 = $(if $(and $(EMU_OPT),$(filter light,$(EMU_STEP2))),if $(EMU_OPT) -passes='$(EMU_STEP2_PASSES)' \
	-simplifycfg-sink-common=false -simplifycfg-hoist-common=false $(1).hooks.bc -o $(1).opt.bc 2>/dev/null; \
	then $(EMU_CXX) $(EMU_STEP2_CG) -c -o $(1) $(1).opt.bc; else $(call emu_step2_o2,$(1)); fi && \
	rm -f $(1).opt.bc,$(call emu_step2_o2,$(1)))
emu_inline_hooks = $(if $(EMU_HOOKS_BC),$(EMU_LLVM_LINK) $(1).bc --internalize --only-needed $(EMU_HOOKS_BC) -o $(1).hooks.bc && \
	$(call emu_step2,$(1)) && rm -f $(1).bc $(1).hooks.bc)

EMU_REWRITE  := $(BUILD)/emu/cuemu-rewrite
EMU_RUNTIME  := $(EMU_BUILD)/libcuemu.a
# What every emulated object is compiled with: the compiler (its command, kind, major version
# and folder), the C compiler, the flags and the second step's tools. Rewritten only when that
# changes, and then everything that depends on the headers is built again, as the GPU's
# objects are after nvcc.flags changes: a build by g++ followed by `make` with clang++ (or
# after llvm-link was installed, or with EMU_STEP2=o2) must not link the objects of the first.
# Built paths are left out (the gcc PCH's -I), so that a copy of the build agrees with it. Several
# makes may share this folder (make mutants' workers, which are also told not to remake it):
# replace_if_changed (Makefile) writes through a name of the shell's own.
EMU_FLAGS_FILE := $(EMU_BUILD)/emu.flags
$(EMU_FLAGS_FILE): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' '$(EMU_CXX) | $(TUT_EMU_CXX_ID) | $(TUT_EMU_CXX_DIR)' '$(EMU_CC)' '$(EMU_CXXFLAGS_BASE)' \
	    '$(EMU_CFLAGS)' '$(EMU_LDLIBS)' '$(EMU_LLVM_LINK) $(EMU_OPT) $(EMU_STEP2)' > $@.$$$$; \
	    $(call replace_if_changed,$@)
EMU_HEADERS  := $(wildcard emu/include/*.h emu/include/*.hpp emu/include/cuda/*) $(EMU_FLAGS_FILE)
# -g: fault reports find the file:line with addr2line; DWARF 4 because addr2line (binutils
# 2.40) names the .cpp instead of the #line file in DWARF 5 line tables. clang: line tables and
# inlined calls only (-gline-tables-only, after -gdwarf-4, which would otherwise mean full -g),
# all addr2line -i reads; the variables' locations took a quarter of the second compile of a
# file of big unrolled kernels (chapter 04's shared_memory.cu: 3.28 s to 2.86 s). EMU_DEBUG=
# "-g -gdwarf-4" gives a debugger the variables back.
# -fsanitize=alignment: misaligned accesses reach the emulator's handler (emu/core/access.c)
# -fsanitize=array-bounds (gcc: bounds): an index past the end of an array whose size the
# compiler knows (a thread's local array, a __shared__ array) reaches the emulator's handler
# (emu/core/access.c) instead of reading or overwriting what lies beyond it, which a test saw
# or not depending on the generated code (chapter 04's register tile, `i <= 8`); not
# recoverable, so that the check costs a compare and a branch (see the handler)
# -fsanitize=integer-divide-by-zero, where an integer division by zero does not trap (64-bit
# Arm: SDIV gives 0): its check raises the SIGFPE that x86-64's DIV does (emu/core/fault_arch.c)
EMU_DIVZERO  := $(if $(EMU_CXX_ARM),-fsanitize=integer-divide-by-zero)
EMU_BOUNDS   := $(if $(filter clang,$(EMU_CXX_KIND)),-fsanitize=array-bounds -fno-sanitize-recover=array-bounds,-fsanitize=bounds -fno-sanitize-recover=bounds)
EMU_ALIGN    := $(if $(EMU_SANITIZE),,-fsanitize=alignment $(EMU_BOUNDS) $(EMU_DIVZERO) $(if $(filter clang,$(EMU_CXX_KIND)),-fno-sanitize-link-runtime))
# -isystem emu/include/unsupported: one-line "not supported here" stand-ins for toolkit headers
# the emulator does not offer (mma.h, curand.h, ...), searched after the program's own -I dirs
# and before the system's, where a toolkit installed in /usr/local/include would be found.
# -Wno-psabi (gcc): a kernel taking a CUtensorMap (64-byte aligned) by value draws gcc's note that
# such parameters changed ABI in gcc 4.6, which concerns no code built here. -Wunused-value
# (gcc): on by default in clang, it names a loop that never advances (`i + stride`), and a
# student's warnings are shown on the rows of make check.
# Kernels split at their barriers (emu/include/cuemu_split.h) are C++20 coroutines: clang needs
# -std=c++20 for them (from clang 17 on, nothing else gives coroutines), g++ takes -fcoroutines
# in C++17, nvcc's default. EMU_SPLIT=0 leaves every kernel on fibers (as before the split).
EMU_SPLIT    ?= 1
EMU_STD      := $(if $(filter clang,$(EMU_CXX_KIND)),-std=c++20,-std=c++17 -fcoroutines) $(if $(filter 0,$(EMU_SPLIT)),-DCUEMU_NO_SPLIT)
EMU_DEBUG    ?= $(if $(filter clang,$(EMU_CXX_KIND)),-gdwarf-4 -gline-tables-only,-g -gdwarf-4)
EMU_CXXFLAGS := $(EMU_STD) -O2 -fPIC $(EMU_DEBUG) -Iemu/include -isystememu/include/unsupported -include cuda_runtime.h $(EMU_TRACE) $(EMU_LTOFLAGS) $(EMU_ALIGN) $(EMU_SANFLAGS) $(if $(filter gcc,$(EMU_CXX_KIND)),-Wno-psabi -Wunused-value)
# The runtime built as Ubuntu's gcc builds it by default (_FORTIFY_SOURCE, whose longjmp check
# once aborted failed kernels there, emu/core/sched.c): every distribution tests the same code.
EMU_FORTIFY  := $(if $(EMU_SANITIZE),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
EMU_CFLAGS   := -std=gnu11 -O2 -fPIC -g -Wall -Iemu/include $(EMU_FORTIFY) $(EMU_SANFLAGS)
EMU_LDLIBS   := -lpthread -lm -ldl -lrt $(EMU_LTOLINK) $(EMU_SANFLAGS) \
	$(if $(EMU_LTO),$(addprefix -Wl$(comma)-plugin-opt=,$(EMU_NO_SPILL_TRACKING)))
EMU_CXXFLAGS_BASE := $(EMU_CXXFLAGS)

EMU_LIB_SRC  := $(wildcard emu/core/*.c emu/core/*.cpp emu/core/*.S \
                           emu/runtime/*.c emu/runtime/*.cpp)
EMU_LIB_OBJ  := $(EMU_LIB_SRC:emu/%=$(EMU_BUILD)/obj/%.o)
EMU_PRIV_H   := $(wildcard emu/core/*.h emu/runtime/*.h)

$(EMU_REWRITE): emu/rewrite/cuemu_rewrite.c
	@mkdir -p $(@D)
	$(EMU_CC) -std=c99 -O2 -Wall -o $@ $<

# Under TSan the core itself is not instrumented: its bookkeeping is shared by fibers that
# never run at the same time; it tells TSan about barriers and switches instead (CUEMU_TSAN).
$(EMU_BUILD)/obj/%.c.o: emu/%.c $(EMU_HEADERS) $(EMU_PRIV_H)
	@mkdir -p $(@D)
	$(EMU_CC) $(if $(and $(filter thread,$(EMU_SANITIZE)),$(filter core/%,$*)),$(filter-out -fsanitize=thread,$(EMU_CFLAGS)) -DCUEMU_TSAN=1,$(EMU_CFLAGS)) -c -o $@ $<
# The hooks, in bitcode when they are inlined into kernels at the link (EMU_LTO); no debug
# information, so the inlined instructions keep the kernel's source line.
ifneq ($(EMU_LTO),)
$(EMU_BUILD)/obj/core/hooks.c.o: emu/core/hooks.c $(EMU_HEADERS) $(EMU_PRIV_H)
	@mkdir -p $(@D)
	$(EMU_CXX) -x c -std=gnu11 -O2 -fPIC -g0 -Wall -Iemu/include -flto -DCUEMU_HOOKS_LTO=1 -c -o $@ $<
endif
$(EMU_BUILD)/obj/%.cpp.o: emu/%.cpp $(EMU_HEADERS) $(EMU_PRIV_H)
	@mkdir -p $(@D)
	$(CXX) $(EMU_CXXFLAGS) -c -o $@ $<
$(EMU_BUILD)/obj/%.S.o: emu/%.S
	@mkdir -p $(@D)
	$(EMU_CC) -fPIC -c -o $@ $<

$(EMU_RUNTIME): $(EMU_LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# ---- a precompiled cuda_runtime.h ------------------------------------------------------------
# Every emulated .cu force-includes it, and parsing it is about half of each compile. gcc reads
# $(EMU_PCH_DIR)/cuda_runtime.h.gch instead of the header when the compile's flags match those it
# was made with, and the header otherwise (cuemu-nvcc with -O3, say): never a different result.
# gcc does not check the headers' dates, so everything that compiles with EMU_CXXFLAGS depends
# on it through EMU_HEADERS, and it is rebuilt first when a header changes.
# clang (the race detector's build) refuses, instead of ignoring, a PCH made with other flags:
# only what compiles with EMU_CXXFLAGS exactly (the rules here and in the Makefile, and the
# grader through `make grade-vars`) names it (EMU_PCH_CXXFLAGS: -include-pch for -include);
# EMU_CXXFLAGS itself, which cuemu-nvcc adds a user's flags to, keeps the header. The machine
# code is the same either way: the PCH holds only the parsed header, and each compile generates
# code from it with its own flags; only the emulator headers' own file names, where an object
# records them, are absolute paths.
ifeq ($(filter clang,$(EMU_CXX_KIND)),)
EMU_PCH_DIR  := $(EMU_BUILD)/pch
EMU_PCH      := $(EMU_PCH_DIR)/cuda_runtime.h.gch
# The link beside it: a later #include <cuda_runtime.h> finds the .gch first, cannot use it
# again, and then needs the header in the same folder (where its include guard stops it).
$(EMU_PCH): $(EMU_HEADERS) emu/emu.mk
	@mkdir -p $(@D)
	ln -sfr emu/include/cuda_runtime.h $(@D)/cuda_runtime.h
	$(EMU_CXX) $(filter-out -include cuda_runtime.h,$(EMU_CXXFLAGS)) -x c++-header -o $@.tmp emu/include/cuda_runtime.h
	mv -f $@.tmp $@
EMU_CXXFLAGS := -I$(EMU_PCH_DIR) $(EMU_CXXFLAGS)
EMU_PCH_CXXFLAGS := $(EMU_CXXFLAGS)
else
# -fpch-instantiate-templates: the header's templates that its own code uses are instantiated
# once, in the PCH, instead of at the end of every file (0.08 s of a chapter file's 0.63 s).
EMU_PCH_DIR  := $(EMU_BUILD)/pch
EMU_PCH      := $(EMU_PCH_DIR)/cuda_runtime.h.pch
$(EMU_PCH): $(EMU_HEADERS) emu/emu.mk
	@mkdir -p $(@D)
	$(EMU_CXX) $(filter-out -include cuda_runtime.h,$(EMU_CXXFLAGS)) -fpch-instantiate-templates -x c++-header -o $@.tmp emu/include/cuda_runtime.h
	mv -f $@.tmp $@
EMU_PCH_CXXFLAGS := $(subst -include cuda_runtime.h,-include-pch $(abspath $(EMU_PCH)),$(EMU_CXXFLAGS))
endif
EMU_HEADERS  := $(EMU_HEADERS) $(EMU_PCH)

# ---- tests: every .cu under emu/tests becomes an emulated executable --------------------------
EMU_TEST_SRC := $(wildcard emu/tests/core/*.cu emu/tests/bugs/*.cu emu/tests/runtime/*.cu \
                           emu/tests/parity.cu)
EMU_TEST_BIN := $(EMU_TEST_SRC:emu/tests/%.cu=$(EMU_BUILD)/tests/%)
# Tests whose kernels run as thread loops, built again with the rewriter's coroutines only
# (CUEMU_REWRITE_NO_TL): both ways a split kernel can run keep their own tests (tests.cmake)
EMU_CO_TESTS := core/split core/threads bugs/divergent_barrier bugs/smem_race bugs/uninit_shared
EMU_TEST_BIN += $(EMU_CO_TESTS:%=$(EMU_BUILD)/tests/%_coroutines)

$(EMU_BUILD)/tests/%_coroutines: emu/tests/%.cu $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_HEADERS) $(EMU_HOOKS_BC)
	@mkdir -p $(@D)
	CUEMU_REWRITE_NO_TL=1 $(EMU_REWRITE) $< $@.cpp
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) -I$(<D) -c -o $(call emu_compile_to,$@.o) $@.cpp
	$(call emu_inline_hooks,$@.o)
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) $(if $(filter clang,$(EMU_CXX_KIND)),-Qunused-arguments) -o $@ $@.o -Wl,--whole-archive $(EMU_RUNTIME) -Wl,--no-whole-archive $(EMU_LDLIBS)

$(EMU_BUILD)/tests/%: emu/tests/%.cu $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_HEADERS) $(EMU_HOOKS_BC)
	@mkdir -p $(@D)
	$(EMU_REWRITE) $< $@.cpp
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) -I$(<D) -c -o $(call emu_compile_to,$@.o) $@.cpp
	$(call emu_inline_hooks,$@.o)
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) $(if $(filter clang,$(EMU_CXX_KIND)),-Qunused-arguments) -o $@ $@.o -Wl,--whole-archive $(EMU_RUNTIME) -Wl,--no-whole-archive $(EMU_LDLIBS)

# The core alone: emu/core's objects linked with a stub runtime (emu/tests/alone/) that implements
# cuemu_internal.h and nothing else, so the link fails if the core calls the runtime any other
# way. The test's kernels are compiled like an emulated .cu's (clang's load/store hooks when
# EMU_CXX is clang++), so the race detector runs there too.
EMU_CORE_OBJ  := $(filter $(EMU_BUILD)/obj/core/%,$(EMU_LIB_OBJ))
EMU_ALONE_BIN := $(EMU_BUILD)/tests/alone/core_alone
$(EMU_ALONE_BIN): emu/tests/alone/core_alone.c emu/tests/alone/stub_runtime.c \
                  emu/tests/alone/stub_runtime.h $(EMU_CORE_OBJ) $(wildcard emu/include/*.h)
	@mkdir -p $(@D)
	$(EMU_CC) $(EMU_CFLAGS) -c -o $@-stub.o emu/tests/alone/stub_runtime.c
	$(EMU_CXX) -x c -std=gnu11 -O2 -fPIC -g -Wall -Iemu/include $(if $(EMU_TRACE),-DCORE_ALONE_TRACE $(EMU_TRACE)) $(EMU_LTOFLAGS) $(EMU_SANFLAGS) -c -o $(call emu_compile_to,$@.o) emu/tests/alone/core_alone.c
	$(call emu_inline_hooks,$@.o)
	$(if $(EMU_LTO),$(EMU_CXX),$(EMU_CC)) -o $@ $@.o $@-stub.o $(EMU_CORE_OBJ) $(EMU_LDLIBS)

# with the precompiled header: make mutants builds emu-lib once in the main BUILD, and its
# workers, whose trees reach the headers through links, must find nothing of it to remake
emu-lib: $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_PCH)
emu-tests: $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_TEST_BIN) $(EMU_ALONE_BIN) ## build the emulator's own tests

# ---- benchmark ---------------------------------------------------------------------------------
# The plain -O2 baseline is compiled apart (native_plain.cpp), without the emulator's flags.
$(EMU_BUILD)/bench/native_plain.o: emu/bench/native_plain.cpp emu/bench/native_loops.h
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -c -o $@ $<
$(EMU_BUILD)/bench/emu_bench: emu/bench/emu_bench.cu emu/bench/native_loops.h $(EMU_BUILD)/bench/native_plain.o $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_HEADERS) $(EMU_HOOKS_BC)
	@mkdir -p $(@D)
	$(EMU_REWRITE) $< $@.cpp
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) -I$(<D) -c -o $(call emu_compile_to,$@.o) $@.cpp
	$(call emu_inline_hooks,$@.o)
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) $(if $(filter clang,$(EMU_CXX_KIND)),-Qunused-arguments) -o $@ $@.o $(EMU_BUILD)/bench/native_plain.o -Wl,--whole-archive $(EMU_RUNTIME) -Wl,--no-whole-archive $(EMU_LDLIBS)

emu-bench: $(EMU_BUILD)/bench/emu_bench ## emulator speed: kernels beside the same loops compiled natively
	$(EMU_BUILD)/bench/emu_bench

.PHONY: emu-lib emu-tests emu-bench
