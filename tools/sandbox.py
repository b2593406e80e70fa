# SPDX-License-Identifier: MIT
"""Run one command in a sandbox made from what Linux gives: namespaces, bind mounts, rlimits.

    python3 tools/sandbox.py [--ro PATH]... [--rw PATH]... [--cwd DIR] [--mem BYTES]
                             [--cpu SECONDS] [--fsize BYTES] [--nproc N] -- COMMAND [ARG]...
    python3 tools/sandbox.py --probe     (exit 0 if a sandbox can be made here, else say why)

What the command gets (tools/grade.py runs every compile and every student library in one):
- its own mount namespace whose root is an empty tmpfs: the system directories (/usr, /etc and
  the /bin-style links), the paths given with --ro (read-only) and --rw (writable), a private
  /tmp, a fresh /proc and a /dev with only null, zero, full, random, urandom. Nothing else of
  the machine is there at all: not the instructor's tree beyond what was given, not the hidden
  tests, not the other submissions, not the grader's output;
- its own PID namespace, whose first process is this script's: when the command exits, or this
  script is killed, the kernel kills every process left in it (a setsid() child included);
- its own network namespace (only a loopback interface, down: no network), IPC and UTS ones;
- a user id of its own (not root, none of root's capabilities, no_new_privs), and limits on
  address space, CPU time, file size, processes and open files.

The command's exit status is passed on: a command killed by a signal kills this script with the
same signal, so a caller sees a crash as a crash. Status 125: the sandbox could not be made.
Needs root, or unprivileged user namespaces (then the user id is the caller's own, mapped).
Python standard library only (ctypes for unshare, mount and pivot_root).
"""
import argparse
import ctypes
import os
import platform
import resource
import signal
import struct
import sys
import tempfile

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203}
SETUP_FAILED = 125

# the system's programs and libraries: read-only, at their usual places
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# a uid no account uses; each sandbox gets its own (RLIMIT_NPROC counts per uid, so one
# submission's fork loop cannot starve another's), below the 32-bit overflow uid
UID_BASE, UID_SPAN = 1_000_000, 1_000_000

DEFAULTS = {"mem": 1 << 30, "cpu": 600, "fsize": 64 << 20, "nproc": 128, "nofile": 256,
            "tmp": 64 << 20}

_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(OSError):
    pass


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    _check(_libc.mount(src.encode() if src else None, target.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), f"mount {src or ''} on {target}")


def _locked_flags(path):
    """The flags of the mount holding path that a bind remount must keep (in a user namespace
    the kernel refuses to drop them)."""
    st = os.statvfs(path)
    out = 0
    for st_flag, ms_flag in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV),
                             (os.ST_NOEXEC, MS_NOEXEC), (os.ST_RDONLY, MS_RDONLY)):
        if st.f_flag & st_flag:
            out |= ms_flag
    return out


def _make_target(root, path, like):
    target = root + path
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(like):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        open(target, "w").close()
    return target


def _bind(root, path, writable):
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return
    target = _make_target(root, real, real)
    _mount(real, target, None, MS_BIND)
    flags = _locked_flags(real) | MS_NOSUID | MS_NODEV
    if writable:
        flags &= ~MS_RDONLY
    else:
        flags |= MS_RDONLY
    _mount(None, target, None, MS_BIND | MS_REMOUNT | flags)
    if real != os.path.abspath(path) and not os.path.lexists(root + os.path.abspath(path)):
        # reached through a link (a venv's python, /bin on a merged /usr): keep the link
        os.makedirs(os.path.dirname(root + os.path.abspath(path)), exist_ok=True)
        os.symlink(real, root + os.path.abspath(path))


def _chown_tree(path, uid, gid):
    for dirpath, dirnames, filenames in os.walk(path):
        os.chown(dirpath, uid, gid)
        for n in filenames:
            full = os.path.join(dirpath, n)
            if not os.path.islink(full):
                os.chown(full, uid, gid)


def _build_root(root, ro, rw, devices, tmp_size):
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    os.makedirs(root + "/dev", exist_ok=True)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    # a private /tmp first: the paths given may lie under the machine's /tmp
    for d in ("/tmp", "/dev/shm"):
        os.makedirs(root + d, exist_ok=True)
        _mount("tmpfs", root + d, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={tmp_size}")
    for p in SYSTEM:
        if os.path.islink(p):
            os.symlink(os.readlink(p), root + p)
        elif os.path.isdir(p):
            _bind(root, p, False)
    # parents before children: a --rw folder inside a --ro one is mounted over it
    for path, writable in sorted([(p, False) for p in ro] + [(p, True) for p in rw],
                                 key=lambda x: os.path.realpath(x[0]).count("/")):
        _bind(root, path, writable)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for d in DEVICES + tuple(devices):
        src = d if d.startswith("/") else "/dev/" + d
        if os.path.exists(src):
            dst = root + "/dev/" + os.path.basename(src)
            if os.path.isdir(src):   # a folder of nodes (a GPU's /dev/nvidia-caps)
                os.makedirs(dst, exist_ok=True)
                _mount(src, dst, None, MS_BIND | MS_REC)
            else:                    # a node of any type: a file is what a bind needs
                open(dst, "w").close()
                _mount(src, dst, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    # pivot_root, then drop the old root: the machine's own tree is no longer reachable
    os.chdir(root)
    os.mkdir(".oldroot")
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SandboxError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    _check(_libc.syscall(number, b".", b".oldroot"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount the old root")
    os.rmdir("/.oldroot")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _limits(args):
    # With a GPU bound, CUDA reserves address space far past any RLIMIT_AS a sandbox would
    # give (cuInit fails with out of memory even at 8 GiB): the limit is then on data
    # (RLIMIT_DATA: private writable memory, what malloc and NumPy use), which CUDA's
    # reservations and its mappings of the device do not count against.
    mem = resource.RLIMIT_DATA if any("nvidia" in d for d in args.dev) else resource.RLIMIT_AS
    for which, value in ((mem, args.mem), (resource.RLIMIT_CPU, args.cpu),
                         (resource.RLIMIT_FSIZE, args.fsize), (resource.RLIMIT_NPROC, args.nproc),
                         (resource.RLIMIT_NOFILE, args.nofile), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def _first_process(args, status_w, as_root, uid):
    """PID 1 of the new namespace: builds the view, starts the command, reaps, reports."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        _build_root(args.root, args.ro, args.rw, args.dev, args.tmp)
        _libc.sethostname(b"sandbox", 7)
        if as_root:
            for p in args.rw:
                _chown_tree(os.path.realpath(p), uid, uid)
    except (OSError, SandboxError) as e:
        print(f"sandbox: could not make the sandbox: {e}", file=sys.stderr)
        os._exit(SETUP_FAILED)
    child = os.fork()
    if child == 0:
        try:
            os.umask(0o022)
            if as_root:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            _limits(args)
            os.chdir(args.cwd or "/tmp")
            env = {k: v for k, v in os.environ.items() if k not in args.unset}
            env.update(HOME="/tmp", TMPDIR="/tmp")
            os.execvpe(args.command[0], args.command, env)
        except OSError as e:
            print(f"sandbox: cannot run {args.command[0]}: {e}", file=sys.stderr)
            os._exit(127)
    while True:   # reap whatever the command orphans, until the command itself ends
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        except InterruptedError:
            continue
        if pid == child:
            os.write(status_w, struct.pack("i", status))
            os._exit(0)   # the kernel now kills whatever is left in the namespace


def run(args):
    # This process dies with whoever started it (a checker that exits, a grader that is killed),
    # and the namespace with it: SIGKILL reaches it even if a caller stopped it (SIGSTOP).
    parent = os.getppid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return SETUP_FAILED
    as_root = os.geteuid() == 0
    uid = UID_BASE + os.getpid() % UID_SPAN if as_root else os.geteuid()
    gid = os.getegid()
    os.makedirs(args.root, exist_ok=True)
    status_r, status_w = os.pipe()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    if not as_root:
        flags |= CLONE_NEWUSER
    try:
        _check(_libc.unshare(flags), "unshare")
        if not as_root:   # root inside the namespace = the caller outside, nobody else
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"{uid} {uid} 1\n")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"{gid} {gid} 1\n")
    except (OSError, SandboxError) as e:
        print(f"sandbox: cannot make namespaces here: {e} (run as root, or enable "
              f"unprivileged user namespaces)", file=sys.stderr)
        return SETUP_FAILED
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        _first_process(args, status_w, as_root, uid)
    os.close(status_w)
    # a signal meant for the command (a timeout's SIGTERM) goes to its namespace's first process
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: os.kill(pid, signal.SIGKILL))
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    data = os.read(status_r, 4)
    if len(data) != 4:
        return SETUP_FAILED
    (status,) = struct.unpack("i", data)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


def parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ro", action="append", default=[], metavar="PATH")
    p.add_argument("--rw", action="append", default=[], metavar="PATH")
    p.add_argument("--dev", action="append", default=[], metavar="NAME",
                   help="another device node to bind (a GPU's /dev/nvidia0, ...)")
    p.add_argument("--cwd")
    p.add_argument("--unset", action="append", default=[], metavar="NAME",
                   help="an environment variable the command does not get")
    p.add_argument("--root", default=os.path.join(tempfile.gettempdir(), ".tut-sandbox-root"),
                   help=argparse.SUPPRESS)
    for name, value in DEFAULTS.items():
        p.add_argument(f"--{name}", type=int, default=value)
    p.add_argument("--probe", action="store_true")
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def prefix(ro=(), rw=(), cwd=None, devices=(), unset=(), python=None, **limits):
    """The argv prefix that runs a command in a sandbox (tools/grade.py uses it)."""
    out = [python or sys.executable, "-S", os.path.abspath(__file__)]
    for p in ro:
        out += ["--ro", str(p)]
    for p in rw:
        out += ["--rw", str(p)]
    for d in devices:
        out += ["--dev", str(d)]
    for name in unset:
        out += ["--unset", name]
    if cwd:
        out += ["--cwd", str(cwd)]
    for name, value in limits.items():
        if value is not None:
            out += [f"--{name}", str(int(value))]
    return out + ["--"]


def probe():
    """"" if a sandbox can be made here, else why not."""
    import subprocess
    # inside: not root, and this very file (not given to it) out of sight
    run_ = subprocess.run(prefix() + ["/bin/sh", "-c", f'test "$(id -u)" != 0 && '
                                      f'test ! -e "{os.path.abspath(__file__)}"'],
                          capture_output=True, text=True)
    if run_.returncode == 0:
        return ""
    return (run_.stderr.strip().splitlines() or [f"exit status {run_.returncode}"])[-1]


def main(argv=None):
    args = parser().parse_args(argv)
    if args.probe:
        why = probe()
        print(why or "a sandbox can be made here")
        return 1 if why else 0
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print("sandbox: no command given (... -- COMMAND [ARG]...)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
