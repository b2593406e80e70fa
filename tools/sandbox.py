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
- its own network namespace (only a loopback interface, down: no network), IPC and UTS ones
  (the host's name kept: nothing says "graded");
- a user id of its own (not root, none of root's capabilities, no_new_privs), and limits on
  private memory (RLIMIT_DATA), CPU time, file size, processes and open files.

Where no namespace can be made (a container without CAP_SYS_ADMIN, as Gradescope and
PrairieLearn run graders), root still has CAP_SETUID: the command then runs as the user id of
its own (--uid) with the same limits, no_new_privs, a seccomp filter (below) and, where the
kernel has it, a Landlock ruleset that lets it read only the system directories and --ro
paths and write only --rw paths and its private /tmp folder ("uid" mode; --probe says which
mode). This process is their child subreaper: every process the command makes stays its
descendant (what a checker stops between calls), and all are killed when the command ends.
What the uid alone keeps out: other users' processes (signals, ptrace, /proc/PID/mem and
environ), files not readable by others; the caller must keep its own files so (tools/grade.py
makes its results 0700).

Both modes: a seccomp filter refuses (EPERM) what no exercise needs and an escape uses: ptrace,
process_vm_readv/writev, keyctl and the key syscalls, bpf, perf_event_open, userfaultfd,
io_uring, mount and the new mount API, unshare, setns, a clone() that makes a namespace (clone3
is refused with ENOSYS, so the C library falls back to clone()), chroot, pivot_root, module and
kexec loading; a system call of another ABI (i386, x32) fails too. The environment is built
from an allow-list (ENV_NAMES, ENV_PREFIXES, --env NAME): nothing else of the caller's reaches
the command.

The command's exit status is passed on: a command killed by a signal kills this script with the
same signal, so a caller sees a crash as a crash. Status 125: the sandbox could not be made.
Needs root, or unprivileged user namespaces (then the user id is the caller's own, mapped).
Python standard library only (ctypes for unshare, mount, pivot_root, seccomp and Landlock).
"""
import argparse
import ctypes
import errno
import fcntl
import os
import platform
import resource
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 1, 38, 36
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203}
SETUP_FAILED = 125

# the system's programs and libraries: read-only, at their usual places
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# a uid no account uses; each sandbox gets its own (RLIMIT_NPROC counts per uid, so one
# submission's fork loop cannot starve another's; a checker stops and kills a submission's
# processes by its uid), below the 32-bit overflow uid; UidLease keeps them apart
UID_BASE, UID_SPAN = 1_000_000, 1_000_000

# what of the caller's environment the command gets (and --env NAME)
ENV_NAMES = ("PATH", "LANG", "LC_ALL", "TERM", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
ENV_PREFIXES = ("TUT_", "CUEMU_")

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


# ---- seccomp: a small BPF program, built here ------------------------------------------------
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
DENY = {  # name: (x86_64, aarch64)
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "bpf": (321, 280),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "mount": (165, 40),
    "umount2": (166, 39), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "unshare": (272, 97), "setns": (308, 268),
    "pivot_root": (155, 41), "chroot": (161, 51), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "open_by_handle_at": (304, 265), "acct": (163, 89),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "syslog": (103, 116),
}
CLONE, CLONE3 = {"x86_64": 56, "aarch64": 220}, 435
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 \
    | 0x40000000 | 0x00000080
EPERM, ENOSYS = 1, 38


def seccomp_program(machine=None):
    """The filter as a list of (code, jt, jf, k) BPF instructions."""
    machine = machine or platform.machine()
    col = ("x86_64", "aarch64").index(machine)
    ld_w, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, errno = 0x7FFF0000, 0x00050000
    deny = sorted({v[col] for v in DENY.values()})
    prog = [(ld_w, 0, 0, 4)]                      # seccomp_data.arch
    # 1: not this ABI (an i386 int 0x80 on x86_64): refused
    prog.append((jeq, 1, 0, AUDIT_ARCH[machine]))
    prog.append((ret, 0, 0, errno | EPERM))
    prog.append((ld_w, 0, 0, 0))                  # seccomp_data.nr
    n_after = len(deny) + 4                       # the checks below, to the EPERM return
    prog.append((jge, n_after, 0, 0x40000000))   # x32's numbers
    for k, nr in enumerate(deny):
        prog.append((jeq, len(deny) - k + 3, 0, nr))
    prog.append((jeq, 2, 0, CLONE3))              # -> ENOSYS
    prog.append((jeq, 3, 0, CLONE[machine]))      # -> look at its flags
    prog.append((ret, 0, 0, allow))
    prog.append((ret, 0, 0, errno | ENOSYS))
    prog.append((ret, 0, 0, errno | EPERM))
    prog.append((ld_w, 0, 0, 16))                 # clone's flags (low word of args[0])
    prog.append((jset, 1, 0, CLONE_NEW_ANY))
    prog.append((ret, 0, 0, allow))
    prog.append((ret, 0, 0, errno | EPERM))
    return prog


def _seccomp():
    if platform.machine() not in AUDIT_ARCH:
        return False
    prog = seccomp_program()
    filt = (ctypes.c_ubyte * (8 * len(prog)))()
    for i, (code, jt, jf, k) in enumerate(prog):
        struct.pack_into("<HBBI", filt, 8 * i, code, jt, jf, k)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(prog), ctypes.addressof(filt))
    _check(_libc.prctl(22, 2, ctypes.byref(fprog), 0, 0), "seccomp")   # PR_SET_SECCOMP, FILTER
    return True


# ---- Landlock: the files a uid-mode command may touch ----------------------------------------
SYS_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
LL_READ = (1 << 0) | (1 << 2) | (1 << 3)            # EXECUTE, READ_FILE, READ_DIR
LL_ALL_V1 = (1 << 13) - 1


def landlock_abi():
    nrs = SYS_LANDLOCK.get(platform.machine())
    if not nrs:
        return 0
    v = _libc.syscall(nrs[0], None, ctypes.c_size_t(0), 1)   # LANDLOCK_CREATE_RULESET_VERSION
    return v if v > 0 else 0


def _landlock(read, write):
    """Only `read` paths readable (and executable), `write` paths writable too: the rest of the
    machine's files cannot be opened at all. False when this kernel has no Landlock."""
    abi = landlock_abi()
    if not abi:
        return False
    create, add, restrict = SYS_LANDLOCK[platform.machine()]
    handled = LL_ALL_V1 | ((1 << 13) if abi >= 2 else 0) | ((1 << 14) if abi >= 3 else 0)
    attr = struct.pack("<Q", handled)
    fd = _libc.syscall(create, attr, ctypes.c_size_t(len(attr)), 0)
    if fd < 0:
        raise SandboxError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for paths, access in ((read, LL_READ), (write, handled)):
            for path in paths:
                try:
                    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    # a file (not a folder) may only be given file rights
                    a = access if os.path.isdir(path) else access & ((1 << 0) | (1 << 1) | (1 << 2)
                                                                   | ((1 << 14) if abi >= 3 else 0))
                    rule = struct.pack("<Qi", a, pfd)   # landlock_path_beneath_attr, packed
                    _check(_libc.syscall(add, fd, 1, rule, 0), f"landlock rule for {path}")
                finally:
                    os.close(pfd)
        _check(_libc.syscall(restrict, fd, 0), "landlock_restrict_self")
    finally:
        os.close(fd)
    return True


def _limits(args):
    # The limit is on data (RLIMIT_DATA: private writable memory, what malloc, NumPy and the
    # emulator's fiber stacks use), not on address space. With a GPU bound, CUDA reserves
    # address space far past any RLIMIT_AS a sandbox would give (cuInit fails with out of
    # memory even at 8 GiB); on the emulator, chapter 01's INT_MAX test reserves 24 GiB of
    # which it writes a few pages. Shared memory, which RLIMIT_DATA leaves out, is what the
    # checker watches (tut_remote: the tree's RssAnon and RssShmem, TUT_WORKER_MEMORY).
    mem = resource.RLIMIT_DATA
    for which, value in ((mem, args.mem), (resource.RLIMIT_CPU, args.cpu),
                         (resource.RLIMIT_FSIZE, args.fsize), (resource.RLIMIT_NPROC, args.nproc),
                         (resource.RLIMIT_NOFILE, args.nofile), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def environment(args, tmp):
    """The command's environment: the allow-list, --env names, less --unset ones."""
    env = {k: v for k, v in os.environ.items()
           if (k in ENV_NAMES or k.startswith(ENV_PREFIXES) or k in args.env)
           and k not in args.unset}
    env.update(HOME=tmp, TMPDIR=tmp)
    env.setdefault("PATH", "/usr/bin:/bin")
    return env


def uid_processes(uid):
    """Every process whose real, effective or saved user id is uid (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if str(uid) in line.split()[1:4]:
                                out.append(int(name))
                            break
            except OSError:
                pass
    return out


def _lease_dir():
    """Root's folder of user-id locks: /run's (one per machine, gone at boot), else the temp
    folder's. Refused if anyone but this user could write it: a lock there must mean a lease."""
    base = "/run" if os.path.isdir("/run") and os.access("/run", os.W_OK) \
        else tempfile.gettempdir()
    d = os.path.join(base, "tut-sandbox-uids")
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SandboxError(errno.EPERM, f"{d} is not a folder of this user's alone: the user "
                           f"ids sandboxes use cannot be kept apart there")
    return d


class UidLease:
    """A user id that no other sandbox on this machine runs as while the lease is held: a
    lock (flock) on a file named by the id, in root's folder (_lease_dir). Two graders of one
    machine (make grade-all's JOBS, Slurm tasks of one node, a compile beside a test) never get
    the same one, so what a checker does to "every process of the submission's user" (stop,
    kill: tut_remote's freeze) reaches that submission alone. A user id that still has
    processes (left by a run that was killed) is passed over. Starts looking at hint."""

    def __init__(self, hint):
        # the folder by an fd: the sandbox's pivot_root changes this process's root too
        self.dir = os.open(_lease_dir(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for k in range(UID_SPAN):
            uid = UID_BASE + (hint + k) % UID_SPAN
            fd = os.open(str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600,
                         dir_fd=self.dir)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # the file may have been removed by the lease it was before (release): a
                # lock on a removed file is nobody's
                try:
                    same = os.stat(str(uid), dir_fd=self.dir).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
            except BlockingIOError:
                same = False
            if not same or uid_processes(uid):
                os.close(fd)
                continue
            self.uid, self.fd = uid, fd
            return
        os.close(self.dir)
        raise SandboxError(errno.EAGAIN, f"no free user id in {UID_BASE}..{UID_BASE + UID_SPAN}")

    def release(self):
        """The file goes with the lock (one left by a sandbox that was killed holds no lock,
        and is taken again like a new one)."""
        if self.fd >= 0:
            try:   # while still locked: whoever opened it meanwhile sees it gone
                os.unlink(str(self.uid), dir_fd=self.dir)
            except OSError:
                pass
            os.close(self.fd)
            os.close(self.dir)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def kill_descendants():
    """SIGKILL every descendant of this process (a child subreaper: every process the command
    made, whoever its parent was, is one) until none is left, reaping them."""
    for _ in range(10000):
        pids = _descendants(os.getpid())
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def _closed_folder(paths):
    """Why a user of the sandbox's own cannot reach these paths, said with the fix: the first
    folder above one of them that this process (already that user) may not enter. A course
    cloned into a folder only its owner may enter (mode 0700, as mktemp -d makes) is one."""
    for path in paths:
        if not path:
            continue
        parts = Path(os.path.abspath(path)).parts
        for i in range(2, len(parts) + 1):
            folder = os.path.join(*parts[:i])
            if os.path.isdir(folder) and not os.access(folder, os.X_OK):
                try:
                    mode = f" (mode {stat.S_IMODE(os.stat(folder).st_mode):04o})"
                except OSError:
                    mode = ""
                return (f"\n  the sandbox's user cannot enter {folder}{mode}, which holds "
                        f"{path}: let other users pass through it (chmod o+x {folder}, and the "
                        f"same for any folder above it that says so), or keep the course and "
                        f"the submissions in a folder other users may enter")
    return ""


def run_as_uid(args, uid):
    """No namespaces here: the command as a user of its own, with limits, seccomp, Landlock."""
    # PR_SET_CHILD_SUBREAPER: a process the command leaves (setsid, a double fork) becomes a
    # child of this one, not of init, so the command's processes are always this process's
    # descendants: what a checker stops between calls and what is killed at the end
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
    tmp = tempfile.mkdtemp(prefix=f"tut-sandbox-{uid}-")
    os.chown(tmp, uid, uid)
    for p in args.rw:
        _chown_tree(os.path.realpath(p), uid, uid)
    status_r, status_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(status_r)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.umask(0o022)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            _limits(args)
            os.chdir(args.cwd or tmp)
            read = [p for p in SYSTEM if os.path.exists(p)] + list(args.ro) + \
                ["/proc", "/sys", "/dev"]
            write = list(args.rw) + [tmp] + ["/dev/" + d for d in DEVICES] + list(args.dev)
            landlocked = _landlock([os.path.realpath(p) for p in read],
                                   [os.path.realpath(p) for p in write])
            os.write(status_w, b"L" if landlocked else b"-")
            os.close(status_w)
            _seccomp()
            os.execvpe(args.command[0], args.command, environment(args, tmp))
        except (OSError, SandboxError) as e:
            print(f"sandbox: cannot run {args.command[0]} as user {uid}: {e}"
                  + (_closed_folder([args.cwd, args.command[0], *args.ro])
                     if isinstance(e, PermissionError) else ""), file=sys.stderr)
            os._exit(SETUP_FAILED)
    os.close(status_w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: (kill_descendants(), os._exit(128 + s)))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    kill_descendants()   # whatever it left running: a setsid() child, a double fork
    shutil.rmtree(tmp, ignore_errors=True)
    if os.environ.get("TUT_SANDBOX_REPORT"):
        mode = os.read(status_r, 1)
        print(f"sandbox: uid mode, landlock {'on' if mode == b'L' else 'off'}", file=sys.stderr)
    return status


def _first_process(args, status_w, as_root, uid):
    """PID 1 of the new namespace: builds the view, starts the command, reaps, reports."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        _build_root(args.root, args.ro, args.rw, args.dev, args.tmp)
        # the host's name stays (its own UTS namespace): a fixed name would tell a library
        # that it is graded
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
            _seccomp()
            os.execvpe(args.command[0], args.command, environment(args, "/tmp"))
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
    lease = None
    if as_root and not args.uid:   # one of its own, held till this process ends
        try:
            lease = UidLease(os.getpid())
        except (OSError, SandboxError) as e:
            print(f"sandbox: no user id to run as: {e}", file=sys.stderr)
            return SETUP_FAILED
    uid = (args.uid or lease.uid) if as_root else os.geteuid()
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
        if as_root and not args.namespaces:   # a container without CAP_SYS_ADMIN
            status = run_as_uid(args, uid)
            if lease:
                lease.release()
            return _pass_on(status)
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
    if lease:
        lease.release()
    return _pass_on(status)


def _pass_on(status):
    """The command's wait status as this process's own end."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):   # those two cannot be caught
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
    p.add_argument("--uid", type=int, help="the user id to run as (root only; default: one "
                   "of its own per sandbox)")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="another environment variable the command gets")
    p.add_argument("--namespaces", action="store_true",
                   help="fail (125) where namespaces cannot be made, instead of uid mode")
    p.add_argument("--unset", action="append", default=[], metavar="NAME",
                   help="an environment variable the command does not get")
    p.add_argument("--root", default=os.path.join(tempfile.gettempdir(), ".tut-sandbox-root"),
                   help=argparse.SUPPRESS)
    for name, value in DEFAULTS.items():
        p.add_argument(f"--{name}", type=int, default=value)
    p.add_argument("--probe", action="store_true")
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def prefix(ro=(), rw=(), cwd=None, devices=(), unset=(), python=None, uid=None, env=(),
           **limits):
    """The argv prefix that runs a command in a sandbox (tools/grade.py uses it)."""
    out = [python or sys.executable, "-S", os.path.abspath(__file__)]
    if uid is not None:
        out += ["--uid", str(int(uid))]
    for name in env:
        out += ["--env", name]
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
    # inside: not root, and (namespaces, or uid mode with Landlock) this very file, not given
    # to it, cannot be read; uid mode without Landlock passes on the first alone (mode() says)
    me = os.path.abspath(__file__)
    run_ = subprocess.run(prefix() + ["/bin/sh", "-c", f'test "$(id -u)" != 0 || exit 1; '
                                      f'cat "{me}" >/dev/null 2>&1 && exit 3; exit 0'],
                          capture_output=True, text=True)
    if run_.returncode == 0 or (run_.returncode == 3 and not landlock_abi()
                                and not _namespaces_possible()):
        return ""
    return (run_.stderr.strip().splitlines() or [f"exit status {run_.returncode}"])[-1]


def _namespaces_possible():
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _libc.unshare(CLONE_NEWNS | (0 if os.geteuid() == 0 else CLONE_NEWUSER))
                 == 0 else 1)
    return os.waitpid(pid, 0)[1] == 0


def mode():
    """How a sandbox is made here: "namespaces", "uid+landlock", "uid", or "" (none)."""
    if probe():
        return ""
    if _namespaces_possible():
        return "namespaces"
    return "uid+landlock" if landlock_abi() else "uid"


def main(argv=None):
    args = parser().parse_args(argv)
    if args.probe:
        why = probe()
        print(why or f"a sandbox can be made here ({mode()})")
        return 1 if why else 0
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print("sandbox: no command given (... -- COMMAND [ARG]...)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
