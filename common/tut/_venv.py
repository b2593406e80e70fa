# SPDX-License-Identifier: MIT
"""Make sure NumPy can be imported, before any module of the package imports it: a driver run
by hand with an interpreter that lacks NumPy runs again under build/venv."""
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _numpy_minimum():
    """The NumPy version requirements.txt asks for, as (major, minor)."""
    try:
        for line in (REPO / "requirements.txt").read_text().splitlines():
            if line.startswith("numpy>="):
                return tuple(int(x) for x in line[len("numpy>="):].strip().split(".")[:2])
    except (OSError, ValueError):
        pass
    return (2, 1)


def _numpy_or_venv():
    """A driver run by hand (`python3 driver.py`) with an interpreter that lacks NumPy, or has
    one older than requirements.txt asks for, runs again under the virtual environment `make`
    made (build/venv), once; else a clear error."""
    want = _numpy_minimum()
    try:
        import numpy
        have = tuple(int(x) for x in numpy.__version__.split(".")[:2])
        if have >= want:
            return
        why = (f"has NumPy {numpy.__version__}, older than the "
               f"{'.'.join(map(str, want))} the course needs")
    except ImportError:
        why = "has no NumPy"
    venv = Path(os.environ.get("TUT_BUILD", REPO / "build")) / "venv" / "bin" / "python"
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    if venv.exists() and script and not os.environ.get("TUT_VENV_REEXEC"):
        os.environ["TUT_VENV_REEXEC"] = "1"
        os.execv(str(venv), [str(venv)] + sys.argv)
    raise ImportError(f"{sys.executable} {why}: run `make` once from the "
                      f"repository root (it makes build/venv with NumPy, which drivers then "
                      f"use by themselves), or install NumPy for this interpreter")


_numpy_or_venv()
