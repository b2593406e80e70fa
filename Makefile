# SPDX-License-Identifier: MIT
# The one entry point. `make help` lists every target. Every output goes under build/.

# --- variables you may override (make VAR=value) ---------------------------------------------
# gpu: nvcc and a real GPU; cpu: the emulator in emu/ with the host compiler; auto: gpu when a
# GPU is really usable here, else cpu
BACKEND   ?= auto
NVCC      ?= nvcc
# the GPU architecture; by default the visible GPUs' own (sm_90 on an H200; native where
# they differ), else sm_90 (Hopper)
ARCH      ?=
NVCCFLAGS ?= -O3 -lineinfo
PYTHON    ?= python3
# the chapter for `make run`, e.g. CH=01 or CH=01_threads_blocks_grids
CH        ?= 00
ARGS      ?=
BUILD     ?= build
# extra CTest arguments, e.g. CTEST_ARGS="-R 01.2"
CTEST_ARGS ?=

# --- parallel by default: one job per core, unless -j is given (make -j1: one at a time) ------
# Not with `clean` among the goals: GNU Make 4.3 would run it beside the build. Only the top
# make asks: a sub-make shares its jobs (giving it -j again would print "-jN forced").
NPROC := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS))$(filter clean,$(MAKECMDGOALS)),0)
  MAKEFLAGS += -j$(NPROC)
endif
# --- quiet by default: a build that works prints nothing; V=1 shows every command -------------
V ?=
ifeq ($(V),)
  MAKEFLAGS += --silent
endif

# --- what there is ------------------------------------------------------------------------------
# from chapters/, so a student copy handed out without solutions/ still builds and checks
CHAPTERS  := $(notdir $(wildcard chapters/[0-9][0-9]_*))
SOLVED    := $(notdir $(wildcard solutions/[0-9][0-9]_*))
COMMON_H  := $(wildcard common/*.h)
CU_ALL    := $(wildcard chapters/*/*.cu solutions/*/*.cu)

# Asked once per `make`: a sub-make (make check builds each chapter in one) inherits the answers.
ifneq ($(TUT_NVCC_CHECKED),$(NVCC))
  export TUT_NVCC_CHECKED := $(NVCC)
  export TUT_HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo yes || echo no)
endif
# The GPUs' compute capabilities, from one nvidia-smi call (25 ms on the H200's machine): where
# they are all one, ARCH is that one (sm_90), not `native`, which made nvcc ask the driver again
# on every call (a compile and a link per edit): 0.3 s more for a compile on the H200's machine
# (2026-12-05). A driver without the query (older than 510) is asked for the GPUs' list instead.
ifndef TUT_HAVE_GPU
  TUT_GPU_CAPS := $(sort $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sed -n 's/^ *\([0-9]*\)\.\([0-9]*\) *$$/\1\2/p'))
  export TUT_HAVE_GPU := $(if $(TUT_GPU_CAPS),yes,$(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo yes || echo no))
  export TUT_GPU_ARCH := $(if $(filter 1,$(words $(TUT_GPU_CAPS))),sm_$(TUT_GPU_CAPS),native)
endif
HAVE_NVCC := $(filter yes,$(TUT_HAVE_NVCC))
HAVE_GPU  := $(filter yes,$(TUT_HAVE_GPU))
ifeq ($(BACKEND),auto)
  B := $(if $(and $(HAVE_NVCC),$(HAVE_GPU)),gpu,cpu)
else
  B := $(BACKEND)
endif
ifeq ($(filter $(B),gpu cpu),)
  $(error BACKEND must be gpu, cpu or auto (got '$(BACKEND)'))
endif
ifeq ($(ARCH),)
  ARCH := $(if $(HAVE_GPU),$(or $(TUT_GPU_ARCH),native),sm_90)
endif

# Python with NumPy: $(PYTHON) if it has NumPy as new as requirements.txt asks, else a virtual
# environment made under build/. TUT_PY_NUMPY: yes, no (none), or the older version it has.
NUMPY_MIN := $(shell sed -n 's/^numpy>=\([0-9.]*\).*/\1/p' requirements.txt)
# Once make has made that environment for the default python3, it is used without asking again:
# importing NumPy to ask took 0.1 to 0.15 s of every `make check` (more behind a pyenv shim).
# The answer is kept for sub-makes (exported) with the Python and the build folder it was asked
# for: a sub-make with another BUILD (make platforms' legs, in a chroot too) asks again.
ifneq ($(TUT_PY_CHECKED),$(PYTHON) $(abspath $(BUILD)))
  export TUT_PY_CHECKED := $(PYTHON) $(abspath $(BUILD))
  ifneq ($(and $(filter file,$(origin PYTHON)),$(wildcard $(BUILD)/venv/.ready)),)
    export TUT_PY_NUMPY := venv
  else
    export TUT_PY_NUMPY := $(shell $(PYTHON) -c 'import numpy as n; v = n.__version__; old = [int(x) for x in v.split(".")[:2]] < [int(x) for x in "$(NUMPY_MIN)".split(".")[:2]]; print(v if old else "yes")' 2>/dev/null || echo no)
  endif
endif
PY_HAS_NUMPY := $(filter yes,$(TUT_PY_NUMPY))
PY_WHY_VENV   = $(if $(filter venv,$(TUT_PY_NUMPY)),requirements.txt changed since $(BUILD)/venv was made,$(PYTHON) $(if $(filter no,$(TUT_PY_NUMPY)),has no NumPy,has NumPy $(TUT_PY_NUMPY)$(comma) older than the $(NUMPY_MIN) the course needs))
ifeq ($(PY_HAS_NUMPY),yes)
  PY       := $(PYTHON)
  PY_READY :=
else
  PY       := $(BUILD)/venv/bin/python
  PY_READY := $(BUILD)/venv/.ready
endif

# Required nvcc flags live here, not in NVCCFLAGS, so `make NVCCFLAGS="-G -O0"` cannot drop them.
# -Xcompiler -g: host debug information, so that a crash in host code is placed at its .cu line.
# --threads 0: nvcc runs its host and device steps side by side where it can, on the cores there
# are (a student's edit recompiles one file: chapter 10's bulk_copies.cu 3.8 s -> 3.45 s,
# 04's shared_memory.cu 1.66 -> 1.52 s, nvcc 13.0 on a 2-core machine, 2026-12-05).
TUT_NVCC  = -std=c++17 $(tut_arch) -Icommon -Xcompiler -fPIC -Xcompiler -g --threads 0
# CUDA 12's ptxas (12.4, measured) turns chapter 10's 1D bulk copies (bulk_copies.cu) into code
# that faults on an H200 (cudaErrorIllegalAddress in 6 of 6 runs, driver 580, 2026-12-04), where
# the same PTX compiled by the driver passes (3 of 3), as does nvcc 13's own code. With an nvcc
# older than 13 that file's device code goes in as PTX only, which the driver compiles when the
# library loads. Evaluated only for that file: nvcc --version costs nothing elsewhere.
PTX_BEFORE_CUDA13 := bulk_copies
tut_arch = -arch=$(or $(and $(filter $(PTX_BEFORE_CUDA13),$(basename $(notdir $(filter %.cu %.o,$^)))),$(call nvcc_older_than_13),$(call arch_as_ptx,$(ARCH))),$(ARCH))
nvcc_older_than_13 = $(filter 9 10 11 12,$(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p'))
# sm_90 -> compute_90; native -> the first GPU's compute capability (nvidia-smi)
arch_as_ptx = $(if $(filter native,$(1)),$(addprefix compute_,$(subst .,,$(firstword $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null)))),$(patsubst sm_%,compute_%,$(filter sm_%,$(1))))
# The end of a recipe that wrote $(1).$$$$ (a name of the shell's own: several makes may write at
# once): that text replaces $(1) only when it differs, so that $(1) keeps its date when nothing
# changed and what depends on it is not built again (a record of flags, a rewritten .cpp, the
# cuemu-nvcc driver). $(2): what follows a replacement.
replace_if_changed = if cmp -s $(1).$$$$ $(1); then rm -f $(1).$$$$; else mv -f $(1).$$$$ $(1)$(2); fi
# The emulator's build rules and flags (EMU_REWRITE, EMU_RUNTIME, EMU_CXXFLAGS, EMU_LDLIBS).
include emu/emu.mk
# cuemu-nvcc, the nvcc-like driver for any .cu program (emu/tools/tools.mk).
include emu/tools/tools.mk

LIBS_gpu  = $(CHAPTERS:%=$(BUILD)/gpu/chapters/lib%.so) $(SOLVED:%=$(BUILD)/gpu/solutions/lib%.so)
LIBS_cpu  = $(CHAPTERS:%=$(BUILD)/cpu/chapters/lib%.so) $(SOLVED:%=$(BUILD)/cpu/solutions/lib%.so)
RESULTS   := $(BUILD)/results/$(B)

.DEFAULT_GOAL := all
.SECONDEXPANSION:
.DELETE_ON_ERROR:

# --- building -----------------------------------------------------------------------------------
all: $(LIBS_$(B)) $(BUILD)/$(B)/common/libtut_shm.so $(BUILD)/BACKEND ## build every chapter, exercises and solutions, for BACKEND

# Python reads this to know which backend `make` built when a driver is run by hand. A gpu
# build on a machine with no GPU is not recorded: drivers run by hand would only skip.
$(BUILD)/BACKEND: FORCE
	@mkdir -p $(@D)
	@$(if $(and $(filter gpu,$(B)),$(if $(HAVE_GPU),,no)),true,echo $(B) | cmp -s - $@ || echo $(B) > $@)

# What the GPU objects were compiled with: nvcc (the one on the PATH, so a change of toolkit
# counts), ARCH and NVCCFLAGS. Rewritten only when it changes, and then every GPU object is
# built again: `make ARCH=sm_80` after a build for sm_90 must not keep sm_90's objects.
$(BUILD)/gpu/nvcc.flags: FORCE
	@mkdir -p $(@D)
	@{ echo '$(NVCC) | $(ARCH) | $(NVCCFLAGS)'; command -v $(firstword $(NVCC)); } > $@.$$$$ 2>/dev/null; $(call replace_if_changed,$@)

$(BUILD)/gpu/common/tut_check.o: common/tut_check.cu $(COMMON_H) $(BUILD)/gpu/nvcc.flags | nvcc-present
	@mkdir -p $(@D)
	$(NVCC) $(TUT_NVCC) $(NVCCFLAGS) -c -o $@ $<

# TUT_ISOLATE=1 (a student's library in a worker process): the checker's allocator for the host
# memory both processes map (common/tut_shm.c). Plain C, no Python headers.
$(BUILD)/%/common/libtut_shm.so: common/tut_shm.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -Wall -fPIC -shared -o $@ $< -lpthread

# One shared library per chapter and tree, from the chapter's .cu files and the common helpers.
# ch04 also links cuBLAS: its reference matrix multiply is the ceiling the lesson compares with.
LDLIBS_04_shared_memory := -lcublas
# ch09 also links NCCL where the machine has it: tools/find_nccl.sh says where (NCCL_HOME=... to
# choose one) and its answer, the flags, is kept in nccl.flags, replaced only when it changes (the
# chapter is then rebuilt). Without NCCL the chapter builds all the same, and its NCCL tests skip,
# saying why. On the emulator NCCL is the emulator's own (emu/include/nccl.h), where it has one.
NCCL_HOME ?=
$(BUILD)/gpu/nccl.flags: tools/find_nccl.sh FORCE
	@mkdir -p $(@D)
	@NVCC="$(NVCC)" NCCL_HOME="$(NCCL_HOME)" sh tools/find_nccl.sh > $@.$$$$ && $(call replace_if_changed,$@)
$(BUILD)/gpu/chapters/lib09_multi_gpu.so $(BUILD)/gpu/solutions/lib09_multi_gpu.so \
  $(patsubst %.cu,$(BUILD)/gpu/%.o,$(wildcard chapters/09_multi_gpu/*.cu solutions/09_multi_gpu/*.cu)): $(BUILD)/gpu/nccl.flags
LDLIBS_09_multi_gpu = $(shell cat $(BUILD)/gpu/nccl.flags 2>/dev/null)
EMU_FLAGS_09_multi_gpu := $(if $(wildcard emu/include/nccl.h),-DTUT_HAVE_NCCL=1)
# One object per .cu, as on the cpu backend: an edit recompiles its file alone (nvcc took 10 s
# for chapter 10's four files at once, on the H200's machine), and make -j compiles the others
# side by side. The -D and -I of a chapter's libraries (NCCL's) are for the compile too.
define gpu_lib
$(BUILD)/gpu/$(1)/%.o: $(1)/%.cu $(COMMON_H) $(BUILD)/gpu/nvcc.flags | nvcc-present
	@mkdir -p $$(@D)
	$$(NVCC) $$(TUT_NVCC) $$(NVCCFLAGS) $$(filter -D% -I%,$$(LDLIBS_$$(*D))) -c -o $$@ $$<
$(BUILD)/gpu/$(1)/lib%.so: $$$$(addprefix $(BUILD)/gpu/$(1)/$$$$*/,$$$$(addsuffix .o,$$$$(basename $$$$(notdir $$$$(wildcard $(1)/$$$$*/*.cu))))) $(BUILD)/gpu/common/tut_check.o
	@mkdir -p $$(@D); rm -f $$@
	$$(NVCC) $$(TUT_NVCC) $$(NVCCFLAGS) -shared -o $$@ $$(filter %.o,$$^) $$(LDLIBS_$$*)
	@rm -f $$(@:.so=.failed)
endef
$(foreach t,chapters solutions,$(eval $(call gpu_lib,$(t))))

# The cpu backend: the emulator rewrites each .cu (kernel launches, extern __shared__; #line keeps
# errors on your .cu lines), then the host compiler builds it with the emulator's headers.
$(BUILD)/cpu/common/tut_check.o: common/tut_check.cu $(COMMON_H) $(EMU_REWRITE) $(EMU_HEADERS) $(EMU_HOOKS_BC)
	@mkdir -p $(@D)
	$(EMU_REWRITE) $< $(@D)/tut_check.cpp
	$(EMU_CXX) $(EMU_PCH_CXXFLAGS) -DTUT_BACKEND_CPU -Icommon -c -o $(call emu_compile_to,$@) $(@D)/tut_check.cpp
	$(call emu_inline_hooks,$@)
# One object per .cu, so that a change to one file recompiles only that file (with clang, the
# emulator's hooks are inlined into each object, not at the link: emu/emu.mk, EMU_LLVM_LINK; the
# link then takes a fraction of a second, tut_check.o being machine code already). The rewrite
# runs on every make (it is quick) but replaces its output only when the text changes: an object
# follows its source's content, not its date (make mutants puts an original file back, with its
# old date, after compiling a planted bug in it).
define cpu_lib
$(BUILD)/cpu/$(1)/obj/%.cpp: $(1)/%.cu $$(EMU_REWRITE) FORCE
	@mkdir -p $$(@D)
	@$$(EMU_REWRITE) $$< $$@.$$$$$$$$ && $$(call replace_if_changed,$$@,$(if $(V), && echo "$$(EMU_REWRITE) $$< $$@"))
$(BUILD)/cpu/$(1)/obj/%.o: $(BUILD)/cpu/$(1)/obj/%.cpp $(COMMON_H) $$(EMU_HEADERS) $$(EMU_HOOKS_BC)
	$$(EMU_CXX) $$(EMU_PCH_CXXFLAGS) -DTUT_BACKEND_CPU -Icommon -I$(1)/$$(*D) $$(EMU_FLAGS_$$(*D)) -c -o $$(call emu_compile_to,$$@) $$<
	$$(call emu_inline_hooks,$$@)
$(BUILD)/cpu/$(1)/lib%.so: $$$$(addprefix $(BUILD)/cpu/$(1)/obj/$$$$*/,$$$$(addsuffix .o,$$$$(basename $$$$(notdir $$$$(wildcard $(1)/$$$$*/*.cu))))) $(BUILD)/cpu/common/tut_check.o $$(EMU_RUNTIME)
	@rm -f $$@
	$$(EMU_CXX) $$(EMU_PCH_CXXFLAGS) $$(if $$(filter clang,$$(EMU_CXX_KIND)),-Qunused-arguments) -shared -o $$@ $$(filter $(BUILD)/cpu/$(1)/obj/%,$$^) $(BUILD)/cpu/common/tut_check.o -Wl,--whole-archive $$(EMU_RUNTIME) -Wl,--no-whole-archive $$(EMU_LDLIBS)
	@rm -f $$(@:.so=.failed)
endef
$(foreach t,chapters solutions,$(eval $(call cpu_lib,$(t))))
# kept after the build (make would delete them as intermediate files of the chain .cu -> .so)
.SECONDARY: $(foreach t,chapters solutions,$(foreach f,$(patsubst $(t)/%.cu,$(BUILD)/cpu/$(t)/obj/%,$(wildcard $(t)/*/*.cu)),$(f).cpp $(f).o))
.SECONDARY: $(patsubst %.cu,$(BUILD)/gpu/%.o,$(wildcard chapters/*/*.cu solutions/*/*.cu))

# --- Python -------------------------------------------------------------------------------------
# When $(PYTHON) has a pip that can install into another environment (--python, pip 22.3 and
# newer), that pip fills the venv, which then needs no pip of its own (installing one into it
# costs as much again as NumPy); else the venv gets its own pip (ensurepip, python3-venv).
PIP_FLAGS := --quiet --disable-pip-version-check
$(BUILD)/venv/.ready: requirements.txt
	@echo "Setting up Python (once): $(PY_WHY_VENV), so making $(BUILD)/venv and installing requirements.txt into it with pip (about 30 s)..."
	@if $(PYTHON) -m pip --python "$$(command -v $(PYTHON))" --version >/dev/null 2>&1; then \
	  echo "$(PYTHON) -m venv --clear --without-pip $(BUILD)/venv && $(PYTHON) -m pip --python $(BUILD)/venv/bin/python install $(PIP_FLAGS) -r requirements.txt"; \
	  $(PYTHON) -m venv --clear --without-pip $(BUILD)/venv && \
	  $(PYTHON) -m pip --python $(BUILD)/venv/bin/python install $(PIP_FLAGS) -r requirements.txt; \
	else \
	  $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { echo "error: $(PYTHON) cannot make a virtual environment: install python3-venv (Debian/Ubuntu: apt-get install python3-venv), or a $(PYTHON) that has NumPy"; exit 1; }; \
	  echo "$(PYTHON) -m venv --clear $(BUILD)/venv && $(BUILD)/venv/bin/python -m pip install $(PIP_FLAGS) -r requirements.txt"; \
	  $(PYTHON) -m venv --clear $(BUILD)/venv && \
	  $(BUILD)/venv/bin/python -m pip install $(PIP_FLAGS) -r requirements.txt; \
	fi
	@echo "Python is ready: $(BUILD)/venv (drivers run by hand use it by themselves)"
	@touch $@

python: $(PY_READY) ## make sure Python has NumPy (a venv under build/ if needed)

# --- running and checking -----------------------------------------------------------------------
# CH=5 is chapter 05; CH=05, CH=05_unified_memory and the folder's path name it too.
CH_NAME = $(patsubst chapters/%,%,$(patsubst %/,%,$(CH)))
CH_DIR = $(firstword $(wildcard chapters/$(CH_NAME) chapters/$(CH_NAME)_* chapters/0$(CH_NAME)_*))
# a chapter's number: $(call ch_number,05_unified_memory) is 05
ch_number = $(firstword $(subst _, ,$(1)))
# for a CH= that names no chapter: the one whose name holds it, else the list
CH_LIKE  = $(firstword $(foreach c,$(CHAPTERS),$(if $(findstring $(CH_NAME),$(c)),$(c))))
CH_ERROR = error: no chapter matches CH=$(CH) $(if $(CH_LIKE),(did you mean CH=$(call ch_number,$(CH_LIKE))? $(CH_LIKE)),(chapters: $(foreach c,$(CHAPTERS),$(call ch_number,$(c)))))
run: all python ## run a chapter: make run CH=01 ARGS="--check" (or --bench, --help)
	@test -n "$(CH_DIR)" || { echo "$(CH_ERROR)"; exit 1; }
	TUT_BACKEND=$(B) $(PY) $(CH_DIR)/driver.py $(ARGS)

# RECORD=1 also writes every figure the benches print into docs/figures/ (tools/figures.py).
RECORD    ?=
FIG_RUN    = $(abspath $(BUILD))/figures/run.json
# CH=NN: that chapter only (recorded as a run of its own, beside the day's full run).
BENCH_CH   = $(if $(filter command line,$(origin CH)),$(notdir $(CH_DIR)))
bench: all python ch-present ## every chapter's --bench on the solutions (real numbers need BACKEND=gpu; RECORD=1 records them in docs/figures/; CH=04: one chapter)
	@$(if $(RECORD),rm -f $(FIG_RUN);) for d in $(or $(BENCH_CH),$(SOLVED)); do TUT_BACKEND=$(B) TUT_TREE=solutions $(if $(RECORD),TUT_RECORD=$(FIG_RUN)) $(PY) chapters/$$d/driver.py --bench || exit 1; done
	$(if $(RECORD),$(PY) tools/figures.py record $(FIG_RUN) $(if $(BENCH_CH),--label "make bench CH=$(CH)"))

# CTest runs one process per exercise, each with a timeout, so a kernel that crashes or hangs
# fails only its own exercise, one per core at a time (CTEST_ARGS=-j1: one by one; on the GPU the
# tests take a lock). The summary is read from the JSON results, not from stdout.
# CTest runs from another directory: give it the interpreter's absolute path.
# Tests run one per core already (CTest, make mutants, make grade-all): NumPy's BLAS threads in
# each would only compete for the same cores, and they spin for a while before they sleep, CPU
# time spent in every process that imports NumPy. One thread each, unless set already.
TEST_ENV   = OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1}
PY_ABS     = $(if $(findstring /,$(PY)),$(abspath $(PY)),$(shell command -v $(PY)))
# `make check CH=01` checks one chapter (each chapter's tests carry its name as a CTest label).
CH_LABEL   = $(if $(filter command line,$(origin CH)),-L '^$(notdir $(CH_DIR))$$$$')
# make test: CTest runs everything (tests/CMakeLists.txt), the summary's table is the result.
# Under tools/reaper.py: what a test leaves running (its attackers, a test killed at its timeout)
# is reaped and killed when CTest ends, never left to the machine's init.
ctest_run = export $(TEST_ENV) && cmake -S tests -B $(BUILD)/tests/$(1) -DMODE=$(1) -DBACKEND=$(B) -DPYTHON=$(PY_ABS) -DBUILD_DIR=$(abspath $(BUILD)) -DONLY_CHAPTER=$(if $(CH_LABEL),$(notdir $(CH_DIR))) >/dev/null && \
	rm -rf $(RESULTS)/$(1) && \
	{ $(PY) tools/reaper.py ctest --test-dir $(BUILD)/tests/$(1) --no-tests=error --parallel $(NPROC) --output-junit junit.xml $(CH_LABEL) $(CTEST_ARGS); rc=$$?; \
	  $(PY) tools/summary.py --mode $(1) $(RESULTS)/$(1) $(BUILD)/tests/$(1)/junit.xml || rc=1; exit $$rc; }

# make check and check-solutions: one Python process for the whole check (tools/check.py), a
# forked process per chapter and per test (common/tut/warm.py), each test with its own time
# limit; the same JSON rows, and JUnit in build/tests/<mode>/junit.xml. TESTS=01.2,01.3: only
# those tests. Every exercise is tested on every `make check` (01.2's INT_MAX launch was made
# cheap, not left out). A quick check on a GPU runs each at the sizes the emulator runs, which
# catch every bug `make mutants` plants, and leaves out the large sizes (the closing line names
# the tests) and the few other checks that start Python processes or import libraries, each
# with a skip row saying why (08's PyTorch, CuPy and Numba, 09's NCCL, 04's cuBLAS): FULL=1
# adds them all, and make test and grading always run them.
TESTS     ?=
FULL      ?=
check_run = export $(TEST_ENV) && TUT_BACKEND=$(B) TUT_BUILD=$(abspath $(BUILD)) TUT_FULL=$(if $(FULL),1,0) $(PY) tools/check.py --mode $(1) \
	--jobs $(NPROC) $(if $(CH_LABEL),--chapters $(notdir $(CH_DIR))) $(if $(TESTS),--only $(TESTS)) $(if $(V),--all)

# `make check` builds each chapter on its own, in parallel. One that does not compile leaves
# lib<chapter>.failed (the compiler's output) where its library was: its tests then say "not
# built", with the first error, instead of testing an older build of the student's file.
CHECK_CHAPTERS  = $(if $(filter command line,$(origin CH)),$(notdir $(CH_DIR)),$(CHAPTERS))
CHECK_PREREQS   = $(if $(filter cpu,$(B)),$(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_HEADERS),nvcc-present) $(BUILD)/$(B)/common/tut_check.o
# A build that worked keeps its compiler output as lib<chapter>.warnings when the library was
# rebuilt (make check shows the warnings about the student's own file); an unchanged library
# keeps the warnings of the build that made it.
check-build-%: $(CHECK_PREREQS) FORCE
	@lib=$(BUILD)/$(B)/chapters/lib$*.so; mkdir -p $(BUILD)/$(B)/chapters; \
	 before=$$(stat -c %Y.%y $$lib 2>/dev/null); \
	 if $(MAKE) --no-print-directory $$lib >$$lib.log 2>&1; then rm -f $${lib%.so}.failed; \
	   if [ "$$before" = "$$(stat -c %Y.%y $$lib 2>/dev/null)" ]; then rm -f $$lib.log; \
	   else mv -f $$lib.log $${lib%.so}.warnings; fi; \
	 else rm -f $$lib $${lib%.so}.warnings; mv -f $$lib.log $${lib%.so}.failed; fi
CHECK_TARGETS   = $(CHECK_CHAPTERS:%=check-build-%)
# Under a table that has said what failed, make's own "make: *** [Makefile:N: check] Error 1" is
# noise. A make stopped by SIGPIPE exits without a word (status 141), and shells say nothing of
# SIGPIPE either: the failure stays in the exit status, the line goes. The recipe's shell is a
# child of the make that runs it, so $$PPID is that make.
FAIL_QUIETLY = kill -PIPE $$PPID
# The chapters are built by check.py's first step, beside Python's start (it waits for them before
# any test): after an edit, nvcc and NumPy's import (0.31-0.44 s on the H200's machine) overlap.
check: python ch-present $(CHECK_PREREQS) $(BUILD)/BACKEND ## your exercises: build, test each one, print a summary (CH=01: one chapter; TESTS=01.2: one test)
	+@$(call check_run,student) --build '$(MAKE) --no-print-directory $(CHECK_TARGETS)' || $(FAIL_QUIETLY)

# CH=NN builds only that chapter (of the tree given): its tests are the only ones run.
ch_build = $(if $(filter command line,$(origin CH)),$(if $(CH_DIR),$(BUILD)/$(B)/$(1)/lib$(notdir $(CH_DIR)).so $(BUILD)/BACKEND),all)
watch: python ch-present ## rerun `make check` each time you save an exercise file (CH=05: one chapter; Ctrl-C stops)
	@$(PY) tools/watch.py --make "$(MAKE)" $(if $(filter command line,$(origin CH)),--chapter $(call ch_number,$(notdir $(CH_DIR))))

# Times the student's loop (issue 30's targets); RECORD=1 records it in docs/figures/ (the
# machine's file: the GPU's, or the CPU's for the emulator). CH=NN: one chapter; REPS=n.
REPS ?= 5
loop-bench: all python ## maintainers: median time of make check CH=NN per chapter, solved, unchanged and after a one-line edit (RECORD=1 records it)
	@$(TEST_ENV) TUT_BACKEND=$(B) $(PY) tools/check_bench.py --python $(PY_ABS) --backend $(B) --reps $(REPS) $(if $(filter command line,$(origin CH)),--chapters $(call ch_number,$(notdir $(CH_DIR)))) $(if $(RECORD),--record)

ID ?=
hint: ## an exercise's hint: its TODO(student) and the lesson's "Stuck?" note (make hint ID=05.1)
	@$(PYTHON) tools/hint.py $(ID)

check-solutions: $(call ch_build,solutions) python ch-present ## the same tests on solutions/ (they must all pass)
	@$(call check_run,solutions)

# Everything a maintainer and CI run: generated exercises up to date, every .cu compiles with
# nvcc, unit tests of common/ and emu/, every solution passes (on the cpu backend in both thread
# orders), every exercise stub fails, and a GPU build without a driver raises CudaError.
ifneq ($(SOLVED),)
test: cmake-present exercises-check nvcc-compile all python emu-tests $(if $(HAVE_NVCC),$(BUILD)/gpu/solutions/lib00_device_query.so) ## everything maintainers and CI run
	@$(call ctest_run,maintainer)
else
# A student's copy has no solutions/ to test: `make test` checks the student's exercises.
test: cmake-present python
	@echo "note: this copy has no solutions/ (a student's copy), so \`make test\` checks your exercises, as \`make check\` does."
	@$(MAKE) --no-print-directory check
endif

exercises: python ## regenerate chapters/*/*.cu from solutions/; refuses edited files (FORCE=1: overwrite them, keeping a backup)
	$(PY) tools/exercises.py $(if $(filter-out 0,$(FORCE)),--force)

exercises-check: python ## fail if chapters/ is not what solutions/ generates
	$(PY) tools/exercises.py --check

# Compile (not link) every .cu for a real GPU, so CUDA compile errors cannot hide behind the
# emulator on machines without a GPU. Skipped, with a note, where nvcc is missing.
# Each file once: solutions/00's files through the GPU library that `make test` builds anyway
# (it also compiles common/tut_check.cu), and a chapters/ file identical to its solutions/ twin
# (with no header beside either that could make them differ) only as that twin.
NVCC_VIA_LIB := $(wildcard solutions/00_device_query/*.cu)
NVCC_TWINS    = $(foreach f,$(wildcard chapters/*/*.cu),$(if $(wildcard $(dir $(f))*.h $(dir $(f))*.cuh \
	$(dir $(f:chapters/%=solutions/%))*.h $(dir $(f:chapters/%=solutions/%))*.cuh),,$(shell cmp -s $(f) $(f:chapters/%=solutions/%) && echo $(f))))
# --cuda runs every CUDA-specific stage of -c: the host front end (cudafe++: host code, launches,
# host/device calls, host-only #ifndef __CUDA_ARCH__ code), the device compile (cicc) and ptxas
# (shared memory and other resource limits) for sm_90. It leaves out only the host compiler's
# pass over what cudafe++ generates (code that cudafe++ has already checked), a third of the
# work. The full pipeline, host compile and link included, still runs on the two files above
# (solutions/00 and common/tut_check.cu). The output is not kept: a stamp marks a file done.
# (recursive, and expanded only when the goals are nvcc-compile or test, below: the cmp of every
# twin cost each `make check` about 30 processes; make expands every rule's prerequisites as it
# reads them, secondary expansion included)
NVCC_OBJS  = $(patsubst %.cu,$(BUILD)/nvcc-compile/%.ok,$(filter-out $(NVCC_VIA_LIB) $(NVCC_TWINS),$(CU_ALL)) \
	$(wildcard emu/tests/*.cu emu/tests/*/*.cu emu/bench/*.cu docs/experiments/*.cu))
# the experiments share docs/experiments/experiment.h; chapter 04's include the lesson's kernels
$(patsubst %.cu,$(BUILD)/nvcc-compile/%.ok,$(wildcard docs/experiments/*.cu)): docs/experiments/experiment.h
$(BUILD)/nvcc-compile/docs/experiments/04_matmul_async.ok \
$(BUILD)/nvcc-compile/docs/experiments/04_matmul_v5.ok: solutions/04_shared_memory/shared_memory.cu
nvcc-compile: $(if $(HAVE_NVCC),$(if $(filter nvcc-compile test,$(MAKECMDGOALS)),$(NVCC_OBJS)) $(if $(NVCC_VIA_LIB),$(BUILD)/gpu/solutions/lib00_device_query.so),nvcc-missing-note) ## compile every .cu with nvcc (-arch=sm_90)
$(BUILD)/nvcc-compile/%.ok: %.cu $(COMMON_H)
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 -arch=sm_90 -Icommon --cuda -o /dev/null $<
	@touch $@
nvcc-missing-note:
	@echo "note: $(NVCC) not found: skipping the nvcc compile of every .cu"

# --- mutation testing (maintainers; docs/mutants.md) ----------------------------------------------
# Plants one classic student bug at a time in the solution regions (on private copies, never the
# working files), rebuilds that chapter for the emulator, and runs the exercise's tests in every
# thread order. CH=NN (or CH=NN.M, one exercise) narrows it; `make -j2 mutants` runs two workers;
# MUTANTS_ARGS passes more options to tools/mutants.py (--help lists them).
MUTANTS_ARGS ?=
mutants: python emu-lib $(BUILD)/cpu/common/tut_check.o ## plant classic bugs in solutions/ one at a time: does a test catch each? (CH=NN)
	@$(TEST_ENV) $(PY) tools/mutants.py --build $(BUILD) --no-prepare $(if $(filter command line,$(origin CH)),$(CH)) $(MUTANTS_ARGS)

# Every compiler, distribution, architecture and toolkit this machine reaches, one row each
# (tools/platforms.sh; slow: an emulator build per compiler; chroots need root). ONLY=regex.
platforms: ## maintainers: build and test on every platform this machine reaches (compilers, Debian 13, nvcc archs, CUDA 12, 64-bit Arm under qemu), print a table
	@BUILD=$(BUILD) PYTHON=$(PYTHON) NVCC="$(NVCC)" bash tools/platforms.sh

# Not while something is mounted below it (a chroot of an interrupted make platforms holds the
# repository itself and the host's /dev): rm would delete through the mounts.
clean: ## remove build/
	@if awk -v b="$(abspath $(BUILD))/" 'index($$5, b) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo 2>/dev/null; then \
	    echo "error: something is mounted below $(BUILD) (a chroot of make platforms?): unmount it first; see: grep $(abspath $(BUILD)) /proc/self/mountinfo"; exit 1; fi
	rm -rf $(BUILD)

help: ## this list
	@echo "make [target] [BACKEND=gpu|cpu|auto] [CH=NN] [ARGS=...]   (BACKEND now resolves to $(B))"
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([^:]*):.*## (.*)/  \1\t\2/' | expand -t 20
	@echo "variables: BACKEND ARCH NVCC NVCCFLAGS PYTHON CH ID ARGS BUILD TESTS FULL CTEST_ARGS MUTANTS_ARGS FORCE REPS RECORD V (V=1: show every command and every row); classroom (docs/instructor.md): HIDDEN SUBMISSIONS JOBS TIMEOUT SEED HANDOUT CHECK SANDBOX ISOLATE MEMORY ONLY ROSTER DEADLINE PENALTY PLATFORM COUNT GROUP SBATCH_ARGS"

# --- lessons: figures, pictures, compute-sanitizer ------------------------------------------------
figures: python ## fail if a lesson quotes a GPU figure that no recorded run (docs/figures/) has
	$(PY) tools/figures.py check

pictures: python ## redraw the lessons' SVG pictures (docs/img/) from the scripts and the record
	$(PY) tools/pictures.py

# GPU only: every chapter's solution tests under each compute-sanitizer tool; expected reports
# are declared, with a reason each, in tools/sanitize-expected.txt.
sanitize: all python ## every solution test under compute-sanitizer memcheck/racecheck/synccheck/initcheck (GPU only)
	@test "$(B)" = gpu || { echo "error: make sanitize needs a GPU build (BACKEND=gpu): compute-sanitizer runs real kernels"; exit 1; }
	TUT_BUILD=$(abspath $(BUILD)) $(PY) tools/sanitize.py $(if $(CH_DIR),$(if $(filter command line,$(origin CH)),--chapter $(notdir $(CH_DIR))))

.PHONY: figures pictures sanitize

# --- prerequisites, each with one line saying what to install -------------------------------
# CH=NN given on the command line must name a chapter (else nothing would be tested).
ch-present:
	@$(if $(filter command line,$(origin CH)),test -n "$(CH_DIR)" || { echo "$(CH_ERROR)"; exit 1; })
nvcc-present:
	@command -v $(NVCC) >/dev/null 2>&1 || { echo "error: $(NVCC) not found: install the CUDA toolkit (12.4 or newer), or use the emulator: make BACKEND=cpu"; exit 1; }
cmake-present:
	@command -v cmake >/dev/null 2>&1 && command -v ctest >/dev/null 2>&1 || { echo "error: cmake/ctest not found: install CMake 3.20 or newer (Debian/Ubuntu: apt-get install cmake)"; exit 1; }

include tools/classroom.mk

FORCE:
.PHONY: watch hint loop-bench all python run bench check check-solutions test exercises exercises-check nvcc-compile \
	nvcc-missing-note clean help nvcc-present cmake-present ch-present mutants platforms FORCE
