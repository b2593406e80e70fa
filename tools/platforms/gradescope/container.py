# SPDX-License-Identifier: MIT
"""Run make gradescope's autograder in a container made as Gradescope makes one (issue 31).

    python3 tools/platforms/gradescope/container.py --zip build/gradescope/autograder.zip \\
        --work DIR [--image localhost/cuda-course:13] NAME=SUBMISSION_DIR...
    python3 tools/platforms/gradescope/container.py --prairielearn build/prairielearn ...
                                      (the same for PrairieLearn's run.sh: /grade/student in,
                                       /grade/results/results.json out, score 0..1)
    python3 tools/platforms/gradescope/container.py --probe     (exit 0 if it can run here)

Gradescope builds an image from the autograder (setup.sh, as root, in /autograder/source) and
runs /autograder/run_autograder once per submission in a container of that image: as root,
with Docker's default capabilities (no CAP_SYS_ADMIN, so no namespace can be made inside: the
grader's sandbox runs in its uid mode), the student's files in /autograder/submission, the
verdict in /autograder/results/results.json. This does the same with a local image (the
course's Containerfile; no registry needed):

- the image's root filesystem (podman image mount) under an overlay: setup.sh's layer (made
  once per autograder and image, kept in WORK) and one fresh, writable layer per submission;
- a mount and a PID namespace of its own, a fresh /proc, a /dev with only null, zero, full,
  random, urandom, tty and a /dev/shm, /sys read-only, its own /tmp; chroot into it;
- the capability bounding set cut to Docker's default (DOCKER_CAPS: no cap_sys_admin) before
  run_autograder starts, so root in there has those and no more. What Docker adds that this
  does not: its seccomp profile and AppArmor profile (both refuse more, never less, than the
  missing CAP_SYS_ADMIN already does to namespaces and mounts), a network namespace, cgroups.

`podman run` would be the plain way; on machines whose cgroups crun refuses (a v1/v2 hybrid,
as this project's build machine has) it cannot start a container at all, so the container is
made here from the same pieces. Needs root with CAP_SYS_ADMIN outside, podman (for the image),
unshare and setpriv (util-linux). Prints, per submission, NAME, the score and the capability
bounding set seen inside; writes WORK/NAME/results.json.
"""
import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

# Docker's default capabilities (what a container gets unless --cap-add): 0xa80425fb
DOCKER_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid",
               "setpcap", "net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write",
               "setfcap")
CAP_SYS_ADMIN = 21
DEFAULT_IMAGE = "localhost/cuda-course:13"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def probe(image):
    """"" when a container can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root (the container is made with mounts and namespaces)"
    for tool in ("podman", "unshare", "setpriv"):
        if not shutil.which(tool):
            return f"no {tool} here"
    if run(["podman", "image", "exists", image]).returncode != 0:
        return (f"no image {image} here (podman build -t {image.split('/')[-1]} "
                f"--build-arg BASE=debian:13 . from the repository's Containerfile)")
    r = run(["unshare", "--mount", "--pid", "--fork", "true"])
    if r.returncode != 0:
        return f"no namespaces here to make a container with: {r.stderr.strip()}"
    return ""


# What runs in the new namespaces: the root made, then chroot and run_autograder with
# Docker's capabilities. $1 lower dirs, $2 upper, $3 work, $4 root, $5 the command inside.
INSIDE = r"""
set -eu
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"
r="$4"
mount -t proc proc "$r/proc"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/tmp"
mount -t tmpfs -o mode=755,nosuid tmpfs "$r/dev"
for d in null zero full random urandom tty; do
    touch "$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"
done
mkdir -p "$r/dev/shm" "$r/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/dev/shm"
ln -s /proc/self/fd "$r/dev/fd"
mkdir -p "$r/sys"
mount --rbind /sys "$r/sys"
mount -o remount,bind,ro "$r/sys"
exec chroot "$r" /usr/bin/setpriv --bounding-set "-all,$CAPS" --inh-caps -all -- \
    /bin/sh -c "$5"
"""


def in_container(lowers, upper, image_root, command, log):
    work = upper.parent / (upper.name + ".work")
    root = upper.parent / (upper.name + ".root")
    for d in (upper, work, root):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(CAPS=",".join("+" + c for c in DOCKER_CAPS),
               PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               LANG="C.UTF-8", HOME="/root")
    with open(log, "w") as f:
        r = subprocess.run(["unshare", "--mount", "--pid", "--fork", "sh", "-c", INSIDE, "sh",
                            ":".join(str(p) for p in lowers + [image_root]), str(upper),
                            str(work), str(root), command],
                           stdout=f, stderr=subprocess.STDOUT, env=env)
    shutil.rmtree(work, ignore_errors=True)
    return r.returncode


# Where each platform puts the grader's files, the student's, and the verdict
LAYOUT = {
    "gradescope": dict(home="/autograder/source", student="/autograder/submission",
                       run="/autograder/run_autograder",
                       results="/autograder/results/results.json"),
    # PrairieLearn's external grader: the course's serverFilesCourse/ under /grade, the
    # question's entry point (run.sh of make prairielearn's folder, copied there)
    "prairielearn": dict(home="/grade/serverFilesCourse/cuda", student="/grade/student",
                         run="/grade/serverFilesCourse/cuda/run.sh",
                         results="/grade/results/results.json"),
}


def _digest(package):
    """The package's contents (a zip's entries, a folder's files), not its files' times."""
    h = hashlib.sha256()
    if package.is_file():
        with zipfile.ZipFile(package) as z:
            for i in sorted(z.infolist(), key=lambda i: i.filename):
                h.update(f"{i.filename} {i.CRC} {i.file_size}\n".encode())
    else:
        for f in sorted(p for p in package.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(package)} {f.stat().st_mode & 0o111}\n".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def image_layer(image, mounted, package, work, platform="gradescope"):
    """setup.sh run once in the image with the grader's files (as Gradescope builds its
    image; a PrairieLearn course's image is built with it): an overlay layer kept in WORK, by
    the package's and the image's contents."""
    image_id = run(["podman", "image", "inspect", "--format", "{{.Id}}", image]).stdout.strip()
    key = hashlib.sha256((_digest(package) + platform + image_id).encode()).hexdigest()[:16]
    layer = work / f"setup-{key}"
    if (layer / ".done").exists():
        return layer / "upper"
    for old in work.glob("setup-*"):   # another autograder's or image's: not needed again
        shutil.rmtree(old, ignore_errors=True)
    home = LAYOUT[platform]["home"]
    source = layer / "upper" / home.lstrip("/")
    if platform == "gradescope":
        source.mkdir(parents=True)
        with zipfile.ZipFile(package) as z:
            z.extractall(source)
        for script in ("setup.sh", "run_autograder"):
            (source / script).chmod(0o755)
        # Gradescope puts a copy of run_autograder at /autograder/run_autograder
        shutil.copy2(source / "run_autograder", source.parent / "run_autograder")
    else:
        shutil.copytree(package, source, symlinks=True)
    rc = in_container([], layer / "upper", mounted, f"cd {home} && ./setup.sh",
                      layer / "setup.log")
    if rc != 0:
        raise SystemExit(f"container: setup.sh failed in {image} (status {rc}); see "
                         f"{layer / 'setup.log'}")
    (layer / ".done").touch()
    return layer / "upper"


def image_root(image):
    r = run(["podman", "image", "mount", image])
    if r.returncode != 0:
        raise SystemExit(f"container: podman image mount {image}: {r.stderr.strip()}")
    return Path(r.stdout.strip())


def grade(mounted, setup, work, name, submission, platform="gradescope"):
    """The platform's entry point on one submission, in a fresh layer over the image and
    setup.sh's."""
    where = LAYOUT[platform]
    base = work / name
    shutil.rmtree(base, ignore_errors=True)
    upper = base / "upper"
    (upper / where["results"].lstrip("/")).parent.mkdir(parents=True)
    shutil.copytree(submission, upper / where["student"].lstrip("/"))
    if platform == "gradescope":
        (upper / "autograder" / "submission_metadata.json").write_text(json.dumps(
            {"created_at": "2026-12-01T10:00:00.000000-08:00", "assignment": {}}))
    # what the autograder sees of itself first: its capabilities (capsh's words, where the
    # image has capsh; the bounding set in hex always)
    command = ("grep -E '^Cap(Eff|Bnd)' /proc/self/status; "
               "command -v capsh >/dev/null && capsh --print | grep -i bounding; "
               + where["run"])
    rc = in_container([setup], upper, mounted, command, base / "log.txt")
    log = (base / "log.txt").read_text(errors="replace")
    bnd = next((int(line.split()[1], 16) for line in log.splitlines()
                if line.startswith("CapBnd:")), None)
    results = upper / where["results"].lstrip("/")
    res = json.loads(results.read_text()) if results.exists() else None
    if res is not None:
        shutil.copy2(results, base / "results.json")
    # Gradescope: points and their sum; PrairieLearn: a fraction, of 1
    top = None if res is None else sum(t.get("max_score", 0) for t in res.get("tests", [])) \
        if platform == "gradescope" else 1.0
    return {"name": name, "platform": platform, "status": rc, "cap_bnd": bnd,
            "cap_sys_admin": None if bnd is None else bool(bnd >> CAP_SYS_ADMIN & 1),
            "score": None if res is None else res.get("score"), "max": top,
            "log": str(base / "log.txt")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zip", type=Path, help="make gradescope's autograder.zip")
    p.add_argument("--prairielearn", type=Path, metavar="DIR",
                   help="make prairielearn's folder (run.sh, course/, ...) instead")
    p.add_argument("--work", type=Path)
    p.add_argument("--image", default=os.environ.get("IMAGE", DEFAULT_IMAGE))
    p.add_argument("--probe", action="store_true")
    p.add_argument("submissions", nargs="*", metavar="NAME=DIR")
    args = p.parse_args(argv)
    why = probe(args.image)
    if args.probe:
        print(why or f"a container can be made here from {args.image}")
        return 1 if why else 0
    if why:
        print(f"container: {why}", file=sys.stderr)
        return 2
    if not (args.zip or args.prairielearn) or not args.work or not args.submissions:
        p.error("--zip (or --prairielearn), --work and at least one NAME=DIR")
    platform = "prairielearn" if args.prairielearn else "gradescope"
    package = (args.prairielearn or args.zip).resolve()
    work = args.work.resolve() / platform
    work.mkdir(parents=True, exist_ok=True)
    mounted = image_root(args.image)
    try:
        setup = image_layer(args.image, mounted, package, work, platform)
        for item in args.submissions:
            name, _, path = item.partition("=")
            out = grade(mounted, setup, work, name, Path(path), platform)
            print(json.dumps(out), flush=True)
    finally:
        run(["podman", "image", "unmount", args.image])
    return 0


if __name__ == "__main__":
    sys.exit(main())
