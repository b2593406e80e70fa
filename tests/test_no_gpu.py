# SPDX-License-Identifier: MIT
"""A library built with nvcc, called where no GPU or driver is usable, must raise CudaError naming
the real CUDA error (not crash, not hang). Skipped (77) where a GPU is usable."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "common"))
import tut  # noqa: E402


class GpuBuildWithoutGpu(unittest.TestCase):
    def test_raises_the_real_error(self):
        lib = tut.load_chapter("00_device_query", "solutions", "gpu")
        try:
            n = lib.device_count()
        except tut.CudaError as e:
            self.assertIn(e.name, tut.NO_GPU_ERRORS)
            self.assertEqual(e.name, lib.error_name(e.code))   # the runtime's own name
            self.assertIn("tut_check.cu", e.where)              # the C file:line of the call
            self.assertIn("cudaGetDeviceCount", e.expr)
            # and again: the failure is reported every time, nothing crashed in between
            with self.assertRaises(tut.CudaError):
                lib.mem_info()
            return
        if n > 0:
            raise unittest.SkipTest("a GPU is usable here")
        self.fail("cudaGetDeviceCount succeeded with 0 devices: expected a CUDA error")


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    skipped = result.skipped and not (result.failures or result.errors)
    sys.exit(77 if skipped else (0 if result.wasSuccessful() else 1))
