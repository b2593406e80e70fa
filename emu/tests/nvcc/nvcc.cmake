# SPDX-License-Identifier: MIT
# cuemu-nvcc's tests (emu/tests/nvcc/test_nvcc.py), included by tests/CMakeLists.txt in
# maintainer mode with REPO_ROOT, BUILD_DIR and PYTHON set. `make test` builds the driver first.
# Seven independent tests, so CTest runs them side by side.
foreach(case multi-file separate diagnostics options headers std-headers pch)
  add_test(NAME "emu/nvcc/${case}"
           COMMAND "${PYTHON}" "${REPO_ROOT}/emu/tests/nvcc/test_nvcc.py" ${case}
                   "${BUILD_DIR}/bin/cuemu-nvcc" "${BUILD_DIR}/tests/nvcc"
           WORKING_DIRECTORY "${REPO_ROOT}")
  set_tests_properties("emu/nvcc/${case}" PROPERTIES TIMEOUT 180 LABELS "emu")
endforeach()
