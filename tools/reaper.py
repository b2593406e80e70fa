#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run a command as a child subreaper, and leave nothing of it behind.

    tools/reaper.py COMMAND [ARGS...]

The test suites start processes that outlive their parents on purpose (the isolation and
grading tests' attackers: a child in a session of its own, a chain of processes each forking
its successor) and a test killed at its timeout leaves its children too. Without a subreaper
they go to the machine's init, which in a container or a small VM may reap them slowly or
never: a CI run once ended with thousands of zombies and a leftover fork chain taking the CPU.

Here every orphan of the command comes to this process (PR_SET_CHILD_SUBREAPER), which reaps
it, and when the command exits whatever it left is stopped and killed (tree walk after tree
walk until none is found: a process with SIGSTOP pending cannot finish a fork). The exit
status is the command's. SIGINT and SIGTERM are passed on to the command.
"""
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children(pid):
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return out


def descendants():
    seen, todo = [], children(os.getpid())
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.append(p)
            todo += children(p)
    return seen


def kill_all():
    """Stop everything below this process until a walk finds nothing new, then kill it all."""
    stopped, deadline = set(), time.monotonic() + 10
    while time.monotonic() < deadline:
        new = [p for p in descendants() if p not in stopped]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
            stopped.add(p)
    for p in stopped:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(stopped)


def main(argv):
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:   # not Linux-like: just run it
        os.execvp(argv[0], argv)
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        except OSError as e:
            print(f"reaper: cannot run {argv[0]}: {e}", file=sys.stderr)
            os._exit(127)

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    status = None
    while status is None:
        try:
            p, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if p == pid:
            status = os.waitstatus_to_exitcode(st)
    left = kill_all()
    while True:   # reap what was killed
        try:
            os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    if left:
        print(f"reaper: killed {left} process(es) the command left running", file=sys.stderr)
    if status is None:
        return 1
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
