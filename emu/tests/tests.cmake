# SPDX-License-Identifier: MIT
# The emulator's own tests, included by tests/CMakeLists.txt with REPO_ROOT, BUILD_DIR and
# PYTHON set. `make emu-tests` builds every executable registered here, under
# ${BUILD_DIR}/emu/tests/<dir>/<name>. Each exits 0 on success, 77 when it cannot run here.
#   emu/core/<name>      device-side features; run in forward, reverse and seeded random order
#   emu/bugs/<name>      planted bugs: each must be caught with its expected message
#   emu/runtime/<name>   the runtime API half (registered by glob), and emu/parity
#   emu/alone/...        the core without the runtime, and the layering between them

set(EMU_TEST_BIN "${BUILD_DIR}/emu/tests")
# The time limits below are for a native run; EMU_TIMEOUT_SCALE multiplies them where the tests
# run slower (tools/platforms/arm64.sh: 5, under qemu-user).
if(NOT EMU_TIMEOUT_SCALE)
  set(EMU_TIMEOUT_SCALE 1)
endif()
math(EXPR EMU_T60 "60 * ${EMU_TIMEOUT_SCALE}")
math(EXPR EMU_T120 "120 * ${EMU_TIMEOUT_SCALE}")

# Core tests: every thread order must give the same, right answers. Kernels that run as
# thread loops are built again to run as coroutines (emu/emu.mk's EMU_CO_TESTS, named
# <test>_coroutines here and among the bugs below): the same answers and reports both ways.
file(GLOB EMU_CORE_TESTS "${REPO_ROOT}/emu/tests/core/*.cu")
list(SORT EMU_CORE_TESTS)
list(APPEND EMU_CORE_TESTS split_coroutines threads_coroutines)
foreach(src ${EMU_CORE_TESTS})
  get_filename_component(name "${src}" NAME_WE)
  foreach(order forward reverse random:7)
    string(REPLACE ":" "" tag "${order}")
    add_test(NAME "emu/core/${name}/${tag}" COMMAND "${EMU_TEST_BIN}/core/${name}"
             WORKING_DIRECTORY "${REPO_ROOT}")
    set_tests_properties("emu/core/${name}/${tag}" PROPERTIES
      TIMEOUT ${EMU_T120} SKIP_RETURN_CODE 77 LABELS "emu"
      ENVIRONMENT "CUEMU_ORDER=${order}")
  endforeach()
endforeach()

# Planted bugs: the program checks the diagnostic itself (and exits 0 only when caught); the
# regular expression proves, independently, that the message reached the output and that the
# program reached its end. CMake's '.' matches newlines, so ".*" spans lines.
set(EMU_BUG_off_by_one
    "out-of-bounds write of global memory in kernel off_by_one_kernel, block \\(4,0,0\\), thread \\(0,0,0\\) at [^ ]*off_by_one.cu:14: .* 4096-byte allocation made at [^ ]*off_by_one.cu:23.*off_by_one: passed")
set(EMU_BUG_missing_guard
    "out-of-bounds read of global memory in kernel scale_kernel.*write past the end of the allocation made at [^ ]*missing_guard.cu.*missing_guard: passed")
set(EMU_BUG_missing_sync
    "caught: missing __syncthreads in the reduction.*caught: missing __syncthreads in the shift.*missing_sync: passed")
set(EMU_BUG_host_pointer
    "argument 0 of kernel fill_kernel \\(launched at [^ ]*host_pointer.cu:[0-9]+\\) is a host pointer.*host_pointer: passed")
set(EMU_BUG_host_deref_device
    "host read of device memory: address 0x[0-9a-f]+ is byte [0-9]+ of the 4000-byte allocation made at [^ ]*host_deref_device.cu:[0-9]+; [^\n]*device memory is reached through cudaMemcpy or a kernel. The host access: (in [a-z_]+ called from )?[^ ]*host_deref_device.cu:[0-9]+.*host write of device memory.*host_deref_device: passed")
set(EMU_BUG_host_memcpy_site
    "host read of device memory: .*allocation made at [^ ]*host_memcpy_site.cu:[0-9]+; [^\n]*The host access: in memcpy called from [^ ]*host_memcpy_site.cu:[0-9]+.*host write of device memory[^\n]*The host access: in memset called from [^ ]*host_memcpy_site.cu:[0-9]+.*host read of pinned host memory[^\n]*The host access: in memcpy called from [^ ]*host_memcpy_site.cu:[0-9]+.*host_memcpy_site: passed")
set(EMU_BUG_divergent_barrier
    "deadlock in kernel early_return_kernel.*divergent __syncthreads.*100 threads wait at __syncthreads [^ ]*divergent_barrier.cu:[0-9]+.*28 threads exited.*deadlock in kernel two_sites_kernel.*divergent_barrier: passed")
set(EMU_BUG_uninit_shared
    "caught: 128 reads of uninitialised shared memory gave NaN.*caught: block 1 read poison.*uninit_shared: passed")
set(EMU_BUG_smem_overflow
    "dynamic shared memory overflow in kernel fill_tile_kernel.*extern __shared__ 'tile'.*dynamic shared memory overflow in kernel bytes_kernel.*'buf'.*smem_overflow: passed")
set(EMU_BUG_smem_race
    "shared memory race \\([a-z ]+\\) in kernel reduce_barrier_outside_kernel \\(launched at [^ ]*smem_race.cu:[0-9]+\\), block \\([0-9,]+\\), on __shared__ 'partial' byte [0-9]+ \\(of 1024\\): thread \\([0-9,]+\\) [a-z]+ it at [^ ]*smem_race.cu:[0-9]+, and thread \\([0-9,]+\\) [a-z]+ it at [^ ]*smem_race.cu:[0-9]+.*caught in forward order.*caught in reverse order.*caught in random:3 order.*smem_race: passed")
set(EMU_BUG_misaligned
    "(misaligned (16-byte read|access of global memory 'const struct float4') in kernel shifted_float4_kernel, block \\(0,0,0\\), thread \\(0,0,0\\) at [^ ]*misaligned.cu:[0-9]+: [^\n]*not a multiple of 16 -> cudaErrorMisalignedAddress|float4 part skipped on 64-bit Arm with clang: [^\n]*does not fault).*misaligned write of shared memory 'int' in kernel odd_shared_kernel.*misaligned: passed")
set(EMU_BUG_peer_access_missing
    "kernel scale_kernel launched at [^ ]*peer_access_missing.cu:[0-9]+ runs on device 0 and touched memory of device 1 without peer access \\(address 0x[0-9a-f]+, byte [0-9]+ of the 3108-byte allocation made by the cudaMalloc at [^ ]*peer_access_missing.cu:[0-9]+ on device 1\\): on a GPU this is an illegal address \\(cudaErrorIllegalAddress\\). Call cudaDeviceEnablePeerAccess\\(1, 0\\) with device 0 current.*cudaMemPoolSetAccess.*peer_access_missing: passed")
set(EMU_BUG_array_index
    "out-of-bounds index 8 of an array 'float\\[8\\]' in kernel tile_kernel, block \\(0,0,0\\), thread \\([0-9,]+\\) at [^ ]*array_index.cu:[0-9]+: its indices are 0 to 7.*out-of-bounds index 64 of an array 'float\\[64\\]' in kernel stage_kernel, block \\(0,0,0\\), thread \\(64,0,0\\) at [^ ]*array_index.cu:[0-9]+: its indices are 0 to 63.*array_index: passed")
set(EMU_BUG_fill_loop
    "shared memory race \\([a-z ]+\\) in kernel fill_kernel .*on __shared__ 'tile' byte [0-9]+.*fill_loop.cu:[0-9]+.*shared memory race \\([a-z ]+\\) in kernel fill_kernel .*fill_loop: passed")
set(EMU_BUG_cluster_dsmem
    "distributed shared memory [a-z]+ in kernel neighbour_kernel, block \\([0-9,]+\\), thread \\([0-9,]+\\) at [^ ]*cluster_dsmem.cu:[0-9]+: byte [0-9]+ of extern __shared__ 'part' of block \\([0-9,]+\\) \\(rank [0-9] of the cluster\\), which has not started yet.*which has already exited.*out-of-bounds write of distributed shared memory in kernel past_end_kernel.*the cluster has 4 blocks \\(ranks 0 to 3\\).*deadlock in kernel early_exit_kernel.*exited without reaching it.*cluster_dsmem: passed")

file(GLOB EMU_BUG_TESTS "${REPO_ROOT}/emu/tests/bugs/*.cu")
list(SORT EMU_BUG_TESTS)
list(APPEND EMU_BUG_TESTS divergent_barrier_coroutines smem_race_coroutines uninit_shared_coroutines)
foreach(src ${EMU_BUG_TESTS})
  get_filename_component(name "${src}" NAME_WE)
  string(REGEX REPLACE "_coroutines$" "" bug "${name}")   # the same expected message
  if(NOT DEFINED EMU_BUG_${bug})
    message(FATAL_ERROR "emu/tests/bugs/${bug}.cu has no expected message in tests.cmake")
  endif()
  add_test(NAME "emu/bugs/${name}" COMMAND "${EMU_TEST_BIN}/bugs/${name}"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/bugs/${name}" PROPERTIES
    TIMEOUT ${EMU_T60} SKIP_RETURN_CODE 77 LABELS "emu"
    PASS_REGULAR_EXPRESSION "${EMU_BUG_${bug}}")
endforeach()

# The runtime half: every emu/tests/runtime/*.cu and emu/tests/parity.cu must exit 0.
file(GLOB EMU_RUNTIME_TESTS "${REPO_ROOT}/emu/tests/runtime/*.cu")
list(SORT EMU_RUNTIME_TESTS)
foreach(src ${EMU_RUNTIME_TESTS})
  get_filename_component(name "${src}" NAME_WE)
  add_test(NAME "emu/runtime/${name}" COMMAND "${EMU_TEST_BIN}/runtime/${name}"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/runtime/${name}" PROPERTIES
    TIMEOUT ${EMU_T60} SKIP_RETURN_CODE 77 LABELS "emu")
endforeach()
if(EXISTS "${REPO_ROOT}/emu/tests/parity.cu")
  add_test(NAME "emu/parity" COMMAND "${EMU_TEST_BIN}/parity" WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/parity" PROPERTIES TIMEOUT ${EMU_T60} SKIP_RETURN_CODE 77 LABELS "emu")
endif()

# The rewriter on its own: its output must keep every line of the input on the same line.
if(EXISTS "${REPO_ROOT}/emu/tests/core/rewrite_lines.py")
  add_test(NAME "emu/rewrite/lines"
           COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/core/rewrite_lines.py"
                   "${BUILD_DIR}/emu/cuemu-rewrite" "${REPO_ROOT}"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/rewrite/lines" PROPERTIES TIMEOUT ${EMU_T60} LABELS "emu")
endif()
add_test(NAME "emu/rewrite/split-plan"
         COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/core/split_plan.py" "${BUILD_DIR}/emu/cuemu-rewrite"
         WORKING_DIRECTORY "${REPO_ROOT}")
set_tests_properties("emu/rewrite/split-plan" PROPERTIES TIMEOUT ${EMU_T60} LABELS "emu")

# The clang build's hooks inlined into each object (emu/emu.mk, EMU_LLVM_LINK): every emulated
# object is machine code and calls no hook; skips where the build inlines none per file.
if(EXISTS "${REPO_ROOT}/emu/tests/core/inlined_hooks.py")
  add_test(NAME "emu/inlined-hooks"
           COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/core/inlined_hooks.py" "${BUILD_DIR}"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/inlined-hooks" PROPERTIES TIMEOUT ${EMU_T60} SKIP_RETURN_CODE 77
                       LABELS "emu")
endif()

# The two halves apart (emu/tests/alone/): emu/core's objects, linked with a stub runtime that
# implements only cuemu_internal.h, run kernels with barriers, warp shuffles, faults and races,
# in every thread order; layering.py checks both directions by includes and by symbols.
foreach(order forward reverse random:7)
  string(REPLACE ":" "" tag "${order}")
  add_test(NAME "emu/alone/core/${tag}" COMMAND "${EMU_TEST_BIN}/alone/core_alone"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/alone/core/${tag}" PROPERTIES
    TIMEOUT ${EMU_T60} LABELS "emu" ENVIRONMENT "CUEMU_ORDER=${order}")
endforeach()
add_test(NAME "emu/alone/layering"
         COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/alone/layering.py" "${REPO_ROOT}"
                 "${BUILD_DIR}/emu/obj"
         WORKING_DIRECTORY "${REPO_ROOT}")
set_tests_properties("emu/alone/layering" PROPERTIES TIMEOUT ${EMU_T60} LABELS "emu")

# make's choice of the emulator's compiler: too old a gcc or clang refused at once, naming the
# minimum; a CXX the user sets followed (stand-in compilers, make -n: a few seconds).
add_test(NAME "emu/compiler-check"
         COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/compiler_check.py" "${BUILD_DIR}/tests/compiler-check"
         WORKING_DIRECTORY "${REPO_ROOT}")
set_tests_properties("emu/compiler-check" PROPERTIES TIMEOUT ${EMU_T120} LABELS "emu")
