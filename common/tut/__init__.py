# SPDX-License-Identifier: MIT
"""tut: the course's Python side, shared by every chapter's driver.py (`import tut`).

One idea per module, each readable alone:
- paths:    where things are (repository, build folder, backend, tree, a chapter's library);
- errors:   CudaError (CUDA's error name and number, the C file:line), ExerciseNotDone,
            LibraryError, NotBuilt, Skip, and the status and exit codes they come from;
- library:  load_chapter() and Library.bind(), which declares one C function once (argtypes,
            restype, errcheck) and turns a non-zero status into one of those exceptions;
- args:     check_array()/check_count() refuse bad arguments before any CUDA call;
- owners:   Owner/Handle, each C resource released exactly once;
- memory:   DeviceBuffer (device memory between poisoned guard zones, so tests catch
            out-of-bounds writes on a real GPU too), ManagedArray (managed memory as a NumPy
            view), device_ballast();
- compare:  assert_close()/assert_equal() against a float64 reference, printing the first
            mismatches; expect_raises()/expect_cuda_error(); inputs that catch bugs;
- emulator: what only the CPU emulator can tell (stream_log);
- bench:    Bench times with CUDA events in C (median of many runs) and prints ratios to a
            ceiling measured in the same run; measure_calls and performance_points time a
            graded exercise from the checker's side and turn its figure into points;
- capture:  each test's output, diagnoses and crash report, kept for its row of the table;
- runner:   Chapter, the test harness: one id per exercise ("01.2"), exit codes 0 pass /
            1 fail / 77 cannot run here, JSON results for `make check` and graders.
"""
import os

from . import _venv  # noqa: F401  (first: NumPy, or the venv's interpreter)

from .library import isolated  # noqa: E402

if isolated():   # grading: NumPy's memory shared with the worker that runs the library, before
    import sys   # any array is made
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import tut_remote  # noqa: E402
    tut_remote.install()

# Lazy module loading makes the first launch of each kernel load code onto the device, which
# shows up as device memory "leaked" by whichever test ran first. Load everything up front.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

from .paths import REPO, backend, build_dir, library_path, tree  # noqa: E402
from .errors import (EXIT_FAIL, EXIT_PASS, EXIT_SKIP, NO_GPU_ERRORS, POISON_BYTE,  # noqa: E402
                     TUT_ERR_ARG, TUT_ERR_LIBRARY, TUT_ERR_NEWER_CUDA, TUT_ERR_TODO, CudaError,
                     ExerciseNotDone, LibraryError, NotBuilt, Skip)
from .library import Library, c_float_p, c_size_t_p, isolated, load_chapter  # noqa: E402
from .args import check_array, check_count, ptr  # noqa: E402
from .owners import Handle, Owner  # noqa: E402
from .memory import (DeviceBuffer, ManagedArray, ballast_budget, check_managed,  # noqa: E402
                     device_ballast)
from .compare import (assert_close, assert_equal, assert_scale_shift,  # noqa: E402
                      expect_cuda_error, expect_raises, launch_config_errors, poisoned, random_f32,
                      ref_scale_shift)
from .emulator import (LOG_ADVICE, LOG_SYNC, access_profile, child_result, run_child,  # noqa: E402
                       stream_log)
from .bench import (FLUSH_BYTES, REFUSE_ABOVE, Bench, measure_calls,  # noqa: E402
                    median_ms, performance_points, plot_gbps, points_fraction)
from .runner import Chapter, Context, note, perf_skip, quick_check, under_sanitizer  # noqa: E402
