# SPDX-License-Identifier: MIT
# Classroom targets, included by the Makefile: a student handout, grading one copy, grading a
# folder of submissions. docs/instructor.md walks through them.
#   make handout [HANDOUT=dir] [HIDDEN=dir] [CHECK=0]
#   make grade [CH=01] [HIDDEN=dir]
#   make grade-all SUBMISSIONS=dir/ [CH=01] [HIDDEN=dir] [JOBS=n] [TIMEOUT=s]
HIDDEN      ?=
SUBMISSIONS ?=
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
TIMEOUT     ?= 60
SEED        ?=
HANDOUT     ?= $(BUILD)/handout
CHECK       ?= 1
# a chapter given on the command line (CH has a default for `make run`)
CH_GIVEN     = $(if $(filter command line,$(origin CH)),$(CH))
GRADE_ARGS   = --backend $(B) $(if $(CH_GIVEN),--chapters $(CH_GIVEN)) \
	$(if $(HIDDEN),--hidden $(HIDDEN)) --timeout $(TIMEOUT) $(if $(SEED),--seed $(SEED))

grade: python ch-present ## grade this copy's exercises as the instructor does: build/grade/ (score.json, results.json, junit.xml)
	@$(TEST_ENV) $(PY) tools/grade.py --submission . --out $(BUILD)/grade $(GRADE_ARGS)

grade-all: python ch-present ## grade every folder/archive in SUBMISSIONS=dir/ in parallel: build/grade-all/gradebook.csv, feedback/
	@test -n "$(SUBMISSIONS)" || { echo "error: say where the submissions are: make grade-all SUBMISSIONS=dir/ (one folder or archive per student)"; exit 1; }
	@$(TEST_ENV) $(PY) tools/grade.py --all $(SUBMISSIONS) --out $(BUILD)/grade-all --jobs $(JOBS) $(GRADE_ARGS)

handout: python ## a student repository in HANDOUT=build/handout: no solutions/, hidden tests or history; then checks it (CHECK=0: not)
	@$(PY) tools/handout.py --out $(HANDOUT) $(if $(HIDDEN),--hidden $(HIDDEN)) \
		$(if $(filter 0,$(CHECK)),,--check $(or $(CH_GIVEN),01)) --python $(PY_ABS)

# What tools/grade.py builds once and then reads, so that it compiles exactly as `make` does.
grade-prereqs: $(if $(filter cpu,$(B)),$(EMU_REWRITE) $(EMU_RUNTIME) $(BUILD)/cpu/common/tut_check.o,$(BUILD)/gpu/common/tut_check.o)
grade-vars:
	@echo 'rewrite=$(abspath $(EMU_REWRITE))'
	@echo 'cxx=$(EMU_CXX)'
	@echo 'cxxflags=$(subst -Iemu/,-I$(CURDIR)/emu/,$(EMU_PCH_CXXFLAGS))'
	@echo 'runtime=$(abspath $(EMU_RUNTIME))'
	@echo 'ldlibs=$(EMU_LDLIBS)'
	@echo 'tut_check=$(abspath $(BUILD)/$(B)/common/tut_check.o)'
	@echo 'nvcc=$(NVCC)'
	@echo 'nvccflags=$(TUT_NVCC) $(NVCCFLAGS)'
	@$(foreach c,$(CHAPTERS),echo 'ldlibs_$(c)=$(LDLIBS_$(c))';)

.PHONY: grade grade-all handout grade-prereqs grade-vars
