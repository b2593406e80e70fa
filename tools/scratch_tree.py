# SPDX-License-Identifier: MIT
"""A private copy of the course in which mistakes can be planted (tests/test_check.py) or edits
timed (tools/check_bench.py) without touching the working files: the sources as git knows them,
and this tree's emulator build with its dates kept, so only what is edited is compiled."""
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sources():
    """The tree's files as git knows them (tracked, and new ones not ignored), docs/ left out."""
    r = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"],
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        files = [Path(p) for p in r.stdout.splitlines() if (REPO / p).is_file()]
    else:
        files = [p.relative_to(REPO) for p in REPO.rglob("*") if p.is_file()
                 and not {"build", ".git"} & set(p.relative_to(REPO).parts)]
    return [f for f in files if f.parts[0] != "docs"]


def make_copy(dest, build):
    """Copy the course into dest; its build/ starts with build's emulator and common object."""
    shutil.rmtree(dest, ignore_errors=True)
    for rel in sources():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest / rel)
    for part in ("emu", "cpu/common", "gpu/common"):
        if (build / part).exists():
            shutil.copytree(build / part, dest / "build" / part, symlinks=True)
    return dest


def make_env():
    """The environment for a `make` started from Python: without the MAKEFLAGS of a make that
    may be running this (its jobserver's file descriptors are not passed on, and make would run
    one job at a time, saying so)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
