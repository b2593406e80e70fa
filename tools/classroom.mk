# SPDX-License-Identifier: MIT
# Classroom targets, included by the Makefile: a student handout, grading one copy, grading a
# folder of submissions. docs/instructor.md walks through them.
#   make handout [HANDOUT=dir] [HIDDEN=dir] [CHECK=0]
#   make grade [CH=01] [HIDDEN=dir]
#   make grade-all SUBMISSIONS=dir/ [CH=01] [HIDDEN=dir] [JOBS=n] [TIMEOUT=s] [ONLY=names]
#                  [ROSTER=file.csv] [DEADLINE=iso-time PENALTY=percent-per-day] [SANDBOX=none]
#   make grade-slurm SUBMISSIONS=dir/ [GROUP=10] [SBATCH_ARGS=...] [the variables of grade-all]
#   make gradescope [CH=01] [HIDDEN=dir]       (build/gradescope/autograder.zip)
HIDDEN      ?=
SUBMISSIONS ?=
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
TIMEOUT     ?= 60
SEED        ?=
HANDOUT     ?= $(BUILD)/handout
CHECK       ?= 1
# auto: every compile and test of student code in a sandbox (tools/sandbox.py); none: without
SANDBOX     ?= auto
# auto: the student's library in a worker apart from the checker where the tree has one
ISOLATE     ?= auto
MEMORY      ?=
ONLY        ?=
ROSTER      ?=
DEADLINE    ?=
PENALTY     ?=
# make grade PLATFORM=classroom50=result.json: also that platform's result file
PLATFORM    ?=
# where grade-all and grade-slurm write the gradebook
GRADE_OUT   ?= $(BUILD)/grade-all
# a chapter given on the command line (CH has a default for `make run`)
CH_GIVEN     = $(if $(filter command line,$(origin CH)),$(CH))
# Grading runs on the cpu backend (the emulator) unless told BACKEND=gpu, a GPU host included:
# only there does the worker/checker split hold (docs/instructor.md, "Grading on a GPU")
GRADE_B      = $(if $(filter auto,$(BACKEND)),cpu,$(B))
GRADE_ARGS   = --backend $(GRADE_B) $(if $(CH_GIVEN),--chapters $(CH_GIVEN)) \
	$(if $(HIDDEN),--hidden $(HIDDEN)) --timeout $(TIMEOUT) $(if $(SEED),--seed $(SEED)) \
	$(if $(filter none,$(SANDBOX)),--sandbox none) \
	$(if $(filter 0 off,$(ISOLATE)),--isolate off,$(if $(filter 1 on,$(ISOLATE)),--isolate on)) \
	$(if $(MEMORY),--memory $(MEMORY)) $(if $(DEADLINE),--deadline $(DEADLINE)) \
	$(if $(PENALTY),--penalty $(PENALTY))

grade: python ch-present ## grade this copy's exercises as the instructor does: build/grade/ (score.json, results.json, junit.xml); fails unless every point is earned
	@$(TEST_ENV) $(PY) tools/grade.py --submission . --out $(BUILD)/grade $(GRADE_ARGS) \
		$(foreach p,$(PLATFORM),--platform $(p))

grade-all: python ch-present ## grade every folder/archive in SUBMISSIONS=dir/, each in a sandbox: build/grade-all/gradebook.csv, feedback/ (ONLY=alice: regrade one)
	@test -n "$(SUBMISSIONS)" || { echo "error: say where the submissions are: make grade-all SUBMISSIONS=dir/ (one folder or archive per student)"; exit 1; }
	@$(TEST_ENV) $(PY) tools/grade.py --all $(SUBMISSIONS) --out $(GRADE_OUT) --jobs $(JOBS) $(GRADE_ARGS) \
		$(if $(ONLY),--only $(ONLY)) $(if $(ROSTER),--roster $(ROSTER))

# A class on a Slurm cluster: one array task per GROUP submissions (--gres=gpu:1 with
# BACKEND=gpu), each graded in the same sandbox, merged into build/grade-all/gradebook.csv.
# Run on the login node; the tree, BUILD and SUBMISSIONS on a file system the nodes share.
GROUP       ?= 10
SBATCH_ARGS ?=
grade-slurm: python ch-present ## grade SUBMISSIONS=dir/ on a Slurm cluster: one array task per GROUP=10 submissions (SBATCH_ARGS=--partition=...), one gradebook
	@test -n "$(SUBMISSIONS)" || { echo "error: say where the submissions are: make grade-slurm SUBMISSIONS=dir/ (one folder or archive per student)"; exit 1; }
	@$(TEST_ENV) $(PY) tools/grade.py --all $(SUBMISSIONS) --out $(GRADE_OUT) --slurm $(GROUP) $(GRADE_ARGS) \
		$(if $(ROSTER),--roster $(ROSTER)) $(if $(SBATCH_ARGS),--sbatch-args "$(SBATCH_ARGS)")

gradescope: python ## build/gradescope/autograder.zip for Gradescope (setup.sh, run_autograder, the course without solutions/, HIDDEN= tests)
	@$(PY) tools/platforms/package.py gradescope --out $(BUILD)/gradescope $(if $(HIDDEN),--hidden $(HIDDEN)) \
		--chapters $(or $(CH_GIVEN),01) --timeout $(TIMEOUT)

prairielearn: python ## build/prairielearn/: the course, HIDDEN= tests and run.sh, for a PrairieLearn external grader
	@$(PY) tools/platforms/package.py prairielearn --out $(BUILD)/prairielearn $(if $(HIDDEN),--hidden $(HIDDEN)) \
		--chapters $(or $(CH_GIVEN),01) --timeout $(TIMEOUT)

# The benchmark of grading a class: COUNT generated submissions of one chapter (stubs, solutions,
# solutions with one planted bug each), graded as grade-all grades them, sandbox on.
COUNT       ?= 200
grade-bench: python ## time grade-all on COUNT=200 generated submissions of CH=01, JOBS at a time, each in a sandbox
	@$(PY) tools/fake_submissions.py --chapter $(or $(CH_GIVEN),01) --count $(COUNT) --out $(BUILD)/grade-bench/submissions
	@$(TEST_ENV) $(PY) tools/grade.py --all $(BUILD)/grade-bench/submissions --out $(BUILD)/grade-bench/out \
		--jobs $(JOBS) $(GRADE_ARGS) | tail -4

handout: python ## a student repository in HANDOUT=build/handout: no solutions/, hidden tests or history; then checks it (CHECK=0: not)
	@$(PY) tools/handout.py --out $(HANDOUT) $(if $(HIDDEN),--hidden $(HIDDEN)) \
		$(if $(filter 0,$(CHECK)),,--check $(or $(CH_GIVEN),01)) --python $(PY_ABS)

# What tools/grade.py builds once and then reads, so that it compiles exactly as `make` does.
# libtut_shm.so: the checker's allocator for the memory it shares with a worker (TUT_ISOLATE=1).
GRADE_SHM    = $(if $(wildcard common/tut_shm.c),$(BUILD)/$(B)/common/libtut_shm.so)
grade-prereqs: $(if $(filter cpu,$(B)),$(EMU_REWRITE) $(EMU_RUNTIME) $(BUILD)/cpu/common/tut_check.o,$(BUILD)/gpu/common/tut_check.o) $(GRADE_SHM)
grade-vars:
	@echo 'rewrite=$(abspath $(EMU_REWRITE))'
	@echo 'cxx=$(EMU_CXX)'
	@echo 'cxxflags=$(subst -Iemu/,-I$(CURDIR)/emu/,$(EMU_PCH_CXXFLAGS))'
	@echo 'runtime=$(abspath $(EMU_RUNTIME))'
	@echo 'ldlibs=$(EMU_LDLIBS)'
	@echo 'tut_check=$(abspath $(BUILD)/$(B)/common/tut_check.o)'
	@echo 'shm=$(if $(GRADE_SHM),$(abspath $(GRADE_SHM)))'
	@echo 'nvcc=$(NVCC)'
	@echo 'nvccflags=$(TUT_NVCC) $(NVCCFLAGS)'
	@$(foreach c,$(CHAPTERS),echo 'ldlibs_$(c)=$(LDLIBS_$(c))';)

.PHONY: grade grade-all grade-slurm grade-bench gradescope prairielearn handout grade-prereqs grade-vars
