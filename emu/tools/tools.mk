# SPDX-License-Identifier: MIT
# cuemu-nvcc, the emulator as an nvcc-like compiler for any .cu program with a main() (see
# docs/no-gpu.md). Included by the top Makefile after emu/emu.mk, whose variables it reuses:
# make writes EMU_CXXFLAGS, EMU_LDLIBS, the rewriter and libcuemu.a into the generated driver,
# so it compiles exactly as the chapters and the emulator's tests do.

CUEMU_NVCC := $(if $(EMU_SANITIZE),$(EMU_BUILD),$(BUILD))/bin/cuemu-nvcc

# The driver runs from any folder: relative -I paths become absolute. sed's special characters
# (& and |) are escaped in what is pasted in.
cuemu_abs_I = $(foreach f,$(1),$(if $(filter -I%,$(f)),-I$(abspath $(f:-I%=%)),$(if $(filter -isystem%,$(f)),-isystem$(abspath $(f:-isystem%=%)),$(f))))
cuemu_sed   = $(subst |,\|,$(subst &,\&,$(1)))
CUEMU_PY    := $(if $(findstring /,$(PYTHON)),$(abspath $(PYTHON)),/usr/bin/env $(PYTHON))

# Regenerated on every make (it is a sed), but replaced only when its text changes, so a change
# of flags in emu/emu.mk (or on the command line) always reaches the driver.
$(CUEMU_NVCC): emu/tools/cuemu_nvcc.py FORCE | $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_PCH)
	@mkdir -p $(@D)
	@sed -e '1s|.*|#!$(call cuemu_sed,$(CUEMU_PY))|' \
	    -e 's|@CXX@|$(call cuemu_sed,$(EMU_CXX))|' \
	    -e 's|@CC@|$(call cuemu_sed,$(EMU_CC))|' \
	    -e 's|@EMU_CXXFLAGS@|$(call cuemu_sed,$(call cuemu_abs_I,$(EMU_CXXFLAGS)))|' \
	    -e 's|@EMU_LDLIBS@|$(call cuemu_sed,$(EMU_LDLIBS))|' \
	    -e 's|@EMU_REWRITE@|$(abspath $(EMU_REWRITE))|' \
	    -e 's|@EMU_RUNTIME@|$(abspath $(EMU_RUNTIME))|' \
	    -e "s|@CUDART_VERSION@|$$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' emu/include/cuda_runtime.h)|" \
	    $< > $@.$$$$ && chmod +x $@.$$$$ && $(call replace_if_changed,$@,$(if $(V), && echo "wrote $@"))

cuemu-nvcc: $(CUEMU_NVCC) $(EMU_REWRITE) $(EMU_RUNTIME) $(EMU_PCH) ## build/bin/cuemu-nvcc: compile any .cu program for the emulator, like nvcc

# make test runs programs through it (tests/CMakeLists.txt includes emu/tests/nvcc/nvcc.cmake).
test: cuemu-nvcc

.PHONY: cuemu-nvcc
