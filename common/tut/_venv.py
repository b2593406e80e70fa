# SPDX-License-Identifier: MIT
"""Make sure NumPy can be imported, before any module of the package imports it: a driver run
by hand with an interpreter that lacks NumPy runs again under build/venv."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _numpy_or_venv():
    """A driver run by hand (`python3 driver.py`) with an interpreter that lacks NumPy runs
    again under the virtual environment `make` made (build/venv), once; else a clear error."""
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    venv = Path(os.environ.get("TUT_BUILD", REPO / "build")) / "venv" / "bin" / "python"
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    if venv.exists() and script and not os.environ.get("TUT_VENV_REEXEC"):
        os.environ["TUT_VENV_REEXEC"] = "1"
        os.execv(str(venv), [str(venv)] + sys.argv)
    raise ImportError(f"NumPy is not installed for {sys.executable}: run `make` once from the "
                      f"repository root (it makes build/venv with NumPy, which drivers then "
                      f"use by themselves), or install NumPy for this interpreter")


_numpy_or_venv()
