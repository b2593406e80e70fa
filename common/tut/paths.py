# SPDX-License-Identifier: MIT
"""Where things are: the repository, the build folder, the backend and tree in use, a library."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_dir():
    return Path(os.environ.get("TUT_BUILD", REPO / "build"))


def backend():
    """gpu or cpu: TUT_BACKEND if set (make sets it), else the backend make last built."""
    chosen = os.environ.get("TUT_BACKEND")
    if not chosen:
        marker = build_dir() / "BACKEND"
        chosen = marker.read_text().strip() if marker.exists() else "gpu"
    if chosen not in ("gpu", "cpu"):
        raise ValueError(f"TUT_BACKEND must be gpu or cpu, not {chosen!r}")
    return chosen


def tree():
    """chapters (the exercises, default) or solutions: TUT_TREE."""
    chosen = os.environ.get("TUT_TREE", "chapters")
    if chosen not in ("chapters", "solutions"):
        raise ValueError(f"TUT_TREE must be chapters or solutions, not {chosen!r}")
    return chosen


def library_path(chapter, which_tree=None, which_backend=None):
    return (build_dir() / (which_backend or backend()) / (which_tree or tree())
            / f"lib{chapter}.so")
