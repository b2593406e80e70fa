# SPDX-License-Identifier: MIT
# NVIDIA's introductory cuda-samples built with cuemu-nvcc exactly as their folder's README.md
# says, one CTest test per sample (emu/tests/samples/run_sample.py builds, runs and judges
# one). Included by tests/CMakeLists.txt in maintainer mode with REPO_ROOT, BUILD_DIR and
# PYTHON set. The samples are not part of the repository: they are looked for in
# ../shared/cuda-samples beside it (CI's layout), or where CUDA_SAMPLES says (make test
# CUDA_SAMPLES=dir, or in the environment; a relative path is from the repository's root). A
# clone without them gets one test that is skipped, saying why.
set(CUDA_SAMPLES "${REPO_ROOT}/../shared/cuda-samples" CACHE PATH "NVIDIA's cuda-samples (README.md, Samples/, Common/)")
if(DEFINED ENV{CUDA_SAMPLES} AND NOT "$ENV{CUDA_SAMPLES}" STREQUAL "")
  set(CUDA_SAMPLES "$ENV{CUDA_SAMPLES}" CACHE PATH "NVIDIA's cuda-samples (README.md, Samples/, Common/)" FORCE)
endif()
get_filename_component(CUDA_SAMPLES "${CUDA_SAMPLES}" ABSOLUTE BASE_DIR "${REPO_ROOT}")
set(SAMPLE_RUNNER "${REPO_ROOT}/emu/tests/samples/run_sample.py")
set(SAMPLE_SCRATCH "${BUILD_DIR}/tests/cuda-samples")

# What stops a sample here, with the reason its test prints as it is skipped (docs/no-gpu.md
# has the table). Nothing else is exempt.
set(SAMPLE_SKIP_simpleAttributes
    "too slow for a CPU: 65535 blocks each loop 720,895 times on one shared counter (4.7e10 iterations)")

if(EXISTS "${CUDA_SAMPLES}/README.md")
  execute_process(COMMAND "${PYTHON}" "${SAMPLE_RUNNER}" --list "${CUDA_SAMPLES}"
                  OUTPUT_VARIABLE samples RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SAMPLE_RUNNER} --list failed:\n${err}")
  endif()
  string(REPLACE "\n" ";" samples "${samples}")
  foreach(s ${samples})
    if(s STREQUAL "")
      continue()
    endif()
    set(skip "")
    if(DEFINED SAMPLE_SKIP_${s})
      set(skip --skip "${SAMPLE_SKIP_${s}}")
    endif()
    add_test(NAME "samples/${s}"
             COMMAND "${PYTHON}" "${SAMPLE_RUNNER}" "${BUILD_DIR}/bin/cuemu-nvcc"
                     "${CUDA_SAMPLES}" "${SAMPLE_SCRATCH}" "${s}" ${skip}
             WORKING_DIRECTORY "${REPO_ROOT}")
    set_tests_properties("samples/${s}" PROPERTIES TIMEOUT 1200 SKIP_RETURN_CODE 77
                         LABELS "samples")
  endforeach()
else()
  add_test(NAME "samples/cuda-samples"
           COMMAND "${PYTHON}" "${SAMPLE_RUNNER}" "${BUILD_DIR}/bin/cuemu-nvcc"
                   "${CUDA_SAMPLES}" "${SAMPLE_SCRATCH}" "--all")
  set_tests_properties("samples/cuda-samples" PROPERTIES SKIP_RETURN_CODE 77 LABELS "samples")
endif()
