"""A real Apptainer for the tests where none is installed (test support, not product code).

Debian 12 has no Apptainer package, Debian sid has 1.4.5, and sid's binaries need a newer C
library than the host's, so the harness makes a sid root with mmdebstrap (apptainer and
squashfuse in it), cached between runs on one machine under a folder named by what
determines it, and writes a small ``apptainer`` wrapper that enters that root in a private
mount namespace (unshare + pivot_root: chroot makes apptainer abort) with the host's folders
bound at their own paths. The tests put the wrapper first on PATH; the product only ever
calls whatever ``apptainer`` is on PATH. Where an ``apptainer`` is installed it is used as
it is. Each fix-up below says what it works around.

    python -m tests.support.apptainer_tools     # prepare it; prints the wrapper's folder
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.apt import AptError, apt_install

SUITE = "sid"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("apptainer", "squashfuse", "mount")  # mount: umount after pivot_root
# sid's Release file is past its Valid-Until date on some days.
MMDEBSTRAP = ("mmdebstrap", "--variant=essential",
              "--aptopt=Acquire::Check-Valid-Until \"false\"",
              f"--include={','.join(PACKAGES)}", SUITE)
# Bumped when the fix-ups below change, so that an old cached root is not reused.
HARNESS_VERSION = "1"
CACHE = Path(os.environ.get("SCALEBENCH_TEST_APPTAINER_CACHE",
                            "/var/cache/scalebench-tests/apptainer"))
# Host folders that are the sid root's own: never bound over it.
SYSTEM_FOLDERS = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                  "run", "sbin", "sys", "usr", "var", "tmp", "lost+found", "snap"}
# Host files the root sees at their own paths: name resolution, and the CA bundle that the
# builds mount read-only for pip (never baked into an image).
HOST_FILES = ("/etc/hosts", "/etc/resolv.conf", "/etc/localtime",
              "/etc/ssl/certs/ca-certificates.crt")
CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
                "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
                "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE",
                "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT",
                "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE",
                "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN",
                "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
                "CHECKPOINT_RESTORE")  # in bit order (linux/capability.h)

WRAPPER = """\
#!/bin/bash
# Test support (tests/support/apptainer_tools.py): Debian sid's apptainer, run from ROOT in a
# private mount namespace. Host folders outside the system ones appear at their own paths.
set -eu
ROOT={root}
if [ "${{1:-}}" != --scalebench-inside ]; then
    exec unshare --mount --propagation private -- "$0" --scalebench-inside "$PWD" "$@"
fi
shift
caller=$1
shift
mount --bind "$ROOT" "$ROOT"
mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
mount --rbind /tmp "$ROOT/tmp"
for file in {host_files}; do
    if [ -e "$file" ]; then
        mkdir -p "$(dirname "$ROOT$file")"
        touch "$ROOT$file"
        mount --bind "$file" "$ROOT$file"
    fi
done
for folder in /*/ /var/tmp/; do
    folder=${{folder%/}}
    case "${{folder#/}}" in {system}) continue ;; esac
    [ -d "$folder" ] && [ ! -L "$folder" ] || continue
    mkdir -p "$ROOT$folder"
    mount --rbind "$folder" "$ROOT$folder"
done
cd "$ROOT"
mkdir -p .oldroot
pivot_root . .oldroot
umount -l /.oldroot
cd "$caller" 2>/dev/null || cd /
exec /usr/bin/apptainer "$@"
"""


class HarnessError(RuntimeError):
    """The harness cannot provide an apptainer; the message is one line saying why."""


def root_key() -> str:
    """Names the cached root by everything that determines it."""
    text = "\n".join([*MMDEBSTRAP, MIRROR, HARNESS_VERSION])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def capability_names(bounding: int) -> list[str]:
    """CAP_ names of the bits set in a capability bounding set."""
    return [f"CAP_{name}" for bit, name in enumerate(CAPABILITIES) if bounding >> bit & 1]


def host_bounding_set() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    raise HarnessError("cannot read CapBnd from /proc/self/status")


def _make_root(root: Path) -> None:
    if os.geteuid() != 0:
        raise HarnessError("apptainer harness: making the sid root needs root (mmdebstrap, "
                           "unshare, loop devices)")
    if shutil.which("mmdebstrap") is None:
        try:
            apt_install(["mmdebstrap"])
        except AptError as error:
            raise HarnessError(f"apptainer harness: mmdebstrap is missing: {error}") from error
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    made = subprocess.run([*MMDEBSTRAP, str(partial), f"deb {MIRROR} {SUITE} main"],
                          capture_output=True, text=True, timeout=1200, check=False)
    if made.returncode != 0:
        last = (made.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"apptainer harness: mmdebstrap of Debian {SUITE} from {MIRROR} "
                           f"failed (archive unreachable?): {last}")
    etc = partial / "etc"
    # Root's --fakeroot builds map root to these subordinate ranges.
    for name in ("subuid", "subgid"):
        (etc / name).write_text("root:100000:65536\n")
    # The host's root lacks capabilities apptainer asks for by default (CAP_SYS_RESOURCE
    # here): root gets those listed in capability.json (written per host, see prepare()).
    config = etc / "apptainer/apptainer.conf"
    text = config.read_text()
    setting = "root default capabilities"
    lines = [f"{setting} = file" if line.startswith(setting) else line
             for line in text.splitlines()]
    config.write_text("\n".join(lines) + "\n")
    partial.rename(root)


def _write_capabilities(root: Path) -> None:
    names = capability_names(host_bounding_set())
    text = ('{"users":{"root":[' + ",".join(f'"{n}"' for n in names) + ']},"groups":{}}\n')
    path = root / "etc/apptainer/capability.json"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def prepare(cache: Path = CACHE) -> Path:
    """The folder holding an ``apptainer`` to put first on PATH (made once per machine)."""
    folder = cache / root_key()
    root = folder / "root"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions on one machine make it once
        if not (root / "usr/bin/apptainer").is_file():
            _make_root(root)
        _write_capabilities(root)
        bin_folder = folder / "bin"
        bin_folder.mkdir(exist_ok=True)
        wrapper = bin_folder / "apptainer"
        text = WRAPPER.format(root=root, host_files=" ".join(HOST_FILES),
                              system="|".join(sorted(SYSTEM_FOLDERS)))
        if not wrapper.is_file() or wrapper.read_text() != text:
            wrapper.write_text(text)
            wrapper.chmod(0o755)
    version = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True,
                             check=False, timeout=60)
    if version.returncode != 0:
        last = (version.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"apptainer harness: the wrapper {wrapper} does not start: {last}")
    return bin_folder


def apptainer_on_path() -> str:
    """The folder of the ``apptainer`` the tests use: the installed one, or the harness's
    wrapper. pytest.fail (never skip) with one line when neither can be had, unless
    SCALEBENCH_SKIP_APPTAINER states why this machine skips."""
    installed = shutil.which("apptainer")
    if installed:
        return str(Path(installed).parent)
    reason = os.environ.get("SCALEBENCH_SKIP_APPTAINER")
    if reason:
        pytest.skip(f"apptainer tests skipped on this machine: {reason}")
    try:
        return str(prepare())
    except (HarnessError, subprocess.TimeoutExpired, OSError) as error:
        pytest.fail(str(error).splitlines()[0], pytrace=False)


if __name__ == "__main__":
    try:
        print(prepare())
    except HarnessError as error:
        print(error, file=sys.stderr)
        sys.exit(2)


# Where pip in an Apptainer build finds the test machine's wheels and CA: a folder the
# Ubuntu base has (empty), bound over for the build only.
APPTAINER_BUILD_MOUNT = "/mnt"


def sif_build_options(folder: Path) -> tuple[str, ...]:
    """apptainer build options of the tests: fakeroot (root needs it for %post here), pip's
    build-time settings bound read-only, the self-test left to `apptainer test`."""
    from tests.support.container_tools import pip_settings

    options = ["--fakeroot", "--notest"]
    for source, target in pip_settings(folder, APPTAINER_BUILD_MOUNT):
        options += ["--bind", f"{source}:{target}:ro"]
    return tuple(options)


def build_test_sif(output: Path, base_reference: str, base_archive: Path, weights: Path,
                   options: tuple[str, ...]) -> str:
    """containers/build.py's build_sif from the stand-in base's archive (``base_reference``:
    NAME@sha256:DIGEST); returns the digest."""
    from containers.build import build_sif

    with pytest.MonkeyPatch.context() as patch:  # read by apptainer for %post only
        patch.setenv("APPTAINERENV_PIP_CONFIG_FILE", f"{APPTAINER_BUILD_MOUNT}/pip.conf")
        return build_sif(output, base_reference, weights, list(options), base_archive)
