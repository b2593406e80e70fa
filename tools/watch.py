# SPDX-License-Identifier: MIT
"""Run `make check` again each time an exercise file is saved, and show its table.

    python3 tools/watch.py [--chapter NN]      (make watch [CH=NN]; Ctrl-C stops)

It polls the files' modification times twice a second (no new dependency, and it works on every
file system, network and container mounts included).
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def watched(chapter):
    pattern = f"chapters/{chapter}_*/*.cu" if chapter else "chapters/[0-9][0-9]_*/*.cu"
    return sorted(REPO.glob(pattern))


def stamps(files):
    out = {}
    for f in files:
        try:
            out[f] = f.stat().st_mtime_ns
        except OSError:
            pass
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapter", help="only this chapter (NN)")
    p.add_argument("--make", default=os.environ.get("MAKE", "make"))
    args = p.parse_args()
    chapter = f"{int(args.chapter):02d}" if args.chapter and args.chapter.isdigit() else args.chapter
    files = watched(chapter)
    if not files:
        print(f"error: no exercise files to watch ({'chapter ' + chapter if chapter else 'chapters/'})")
        return 1
    cmd = [args.make, "--no-print-directory", "-C", str(REPO), "check"] + (
        [f"CH={chapter}"] if chapter else [])
    seen = None
    try:
        while True:
            now = stamps(watched(chapter))
            if now != seen:
                if seen is not None:
                    changed = [f.relative_to(REPO) for f in now if now.get(f) != seen.get(f)]
                    print(f"\n--- {', '.join(map(str, changed))} saved: checking again ---")
                seen = now
                # without the MAKEFLAGS of the make running this: its jobserver's descriptors
                # are not passed on, and the make below would warn so on every rerun
                subprocess.run(cmd, env={k: v for k, v in os.environ.items()
                                         if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")})
                print(f"\nwatching {len(now)} file(s) for changes (Ctrl-C stops)...", flush=True)
            time.sleep(0.5)
    except KeyboardInterrupt:
        print()
        return 0


if __name__ == "__main__":
    sys.exit(main())
