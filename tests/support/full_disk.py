"""A small file system filled at a chosen moment of a launch (or another fault done then):
the full-disk tests and ``tools.fault_table`` alike.

No root is needed: the tmpfs is mounted in a user and mount namespace of its own (``unshare
--user --map-root-user --mount``, held by a waiting shell), where the commands of the fault
run (``SmallDisk.command``) and see it at its folder, while this process fills, frees and reads
it through that shell's ``/proc/PID/root``. The namespace, and the tmpfs with it, ends with the
last process in it. Where user namespaces are disabled it cannot be mounted (NotMountable)."""

from __future__ import annotations

import errno
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FILLER = ".filler"
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]
# Run by the holder in the new namespaces ($0 the folder, $1 the size): it mounts, says so,
# then waits for its stdin to close (at the end, or when this process dies).
HOLD = 'mount -t tmpfs -o "size=$1" tmpfs "$0" && echo mounted && read -r _'
MOUNTED = "mounted"
# The kernel settings that disable user namespaces, and the value that does.
USERNS_SWITCHES = {"/proc/sys/user/max_user_namespaces": "0",
                   "/proc/sys/kernel/unprivileged_userns_clone": "0",
                   "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"}


class NotMountable(RuntimeError):
    """User namespaces are disabled here: no tmpfs can be mounted without root."""


@dataclass(frozen=True)
class SmallDisk:
    """A tmpfs at ``folder`` in the mount namespace of process ``holder``."""

    folder: Path
    holder: int

    @property
    def here(self) -> Path:
        """The tmpfs as this process reaches it (outside the namespace ``folder`` is empty)."""
        return self.reach(self.folder)

    def reach(self, path: Path) -> Path:
        """``path``, as the commands in the namespace see it, as this process reaches it."""
        if not path.is_relative_to(self.folder):
            return path
        return Path(f"/proc/{self.holder}/root") / path.relative_to("/")

    def command(self, argv: list[str], cwd: Path) -> list[str]:
        """``argv`` run in the namespace, in ``cwd`` (entering a mount namespace moves to its
        root, so the folder is changed to in it)."""
        return ["nsenter", f"--target={self.holder}", "--user", "--mount",
                "--preserve-credentials", "--", "env", f"--chdir={cwd}", *argv]

    def fill(self) -> None:
        """Write zeros into the tmpfs until it is full."""
        with (self.here / FILLER).open("ab", buffering=0) as filler:
            try:
                while True:
                    filler.write(bytes(1 << 20))
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise

    def free(self) -> None:
        (self.here / FILLER).unlink()


@contextmanager
def small_tmpfs(folder: Path, size: str = "24m") -> Iterator[SmallDisk]:
    """``folder`` as a tmpfs of ``size`` in a namespace of its own, gone at the end whatever
    happens. NotMountable where user namespaces are disabled."""
    folder.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([*UNSHARE, "sh", "-c", HOLD, str(folder), size],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != MOUNTED:
            raise not_mountable(holder.communicate(timeout=60)[1])
        yield SmallDisk(folder, holder.pid)
    finally:
        end(holder)


def end(holder: subprocess.Popen) -> None:
    """Close the holder's stdin so that it ends; killed if it does not."""
    try:
        holder.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.communicate()


def not_mountable(stderr: str) -> Exception:
    """The error of a holder that did not mount: NotMountable where the user namespace could
    not be made (``unshare`` failed), with the kernel setting that disables it if one does;
    any other failure is a fault of its own (RuntimeError), not a reason to skip."""
    said = " ".join(stderr.split()) or "no message"
    if not said.startswith("unshare:"):
        return RuntimeError(f"mounting a tmpfs in a user namespace failed: {said}")
    return NotMountable(userns_disabled(said, switches_read()))


def userns_disabled(said: str, switches: dict[str, str]) -> str:
    """The reason to give: what ``unshare`` said and the settings that disable namespaces."""
    off = [f"{path} is {value}" for path, value in switches.items()
           if value == USERNS_SWITCHES[path]]
    why = "; ".join(off) if off else "no /proc/sys setting says why"
    return (f"user namespaces are disabled here ({why}), so the tmpfs to fill cannot be "
            f"mounted without root: `{' '.join(UNSHARE)}` failed: {said}")


def switches_read() -> dict[str, str]:
    """The settings of USERNS_SWITCHES this kernel has, as they read."""
    read = {}
    for path in USERNS_SWITCHES:
        try:
            read[path] = Path(path).read_text().strip()
        except OSError:  # this kernel has no such setting
            continue
    return read


def run_filling(command: list[str], disk: SmallDisk, fill_when: Callable[[], bool], cwd: Path,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` in ``disk``'s namespace, filling it the moment ``fill_when()`` holds."""
    return run_acting(disk.command(command, cwd), fill_when, lambda _: disk.fill(), cwd, env)


def run_acting(command: list[str], when: Callable[[], bool],
               action: Callable[[subprocess.Popen], None], cwd: Path,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``command``, doing ``action(process)`` the moment ``when()`` holds (polled every
    10 ms on a thread); RuntimeError when the command ended before that moment came."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    acted = threading.Event()

    def watch() -> None:
        while process.poll() is None:
            if when():
                action(process)
                acted.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout, stderr = process.communicate(timeout=600)
    watcher.join()
    if not acted.is_set():
        raise RuntimeError(f"the command ended before the moment came: {stderr[-3000:]}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


# The moments of a launch publishing NAME.parquet into the folder ``disk`` (as this process
# reaches it: SmallDisk.here), its first experiment done.

def after_first_publish(disk: Path, name: str) -> Callable[[], bool]:
    return lambda: (disk / f"{name}.parquet").exists()


def during_second_run(disk: Path, name: str) -> Callable[[], bool]:
    """Experiment 2's rank 0 is running: its log in the staging folder has its first lines."""
    return lambda: (disk / f"{name}.parquet").exists() and any(
        _size(log) > 0 for log in disk.glob(f".staging-{name}-*/*/rank0.log"))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # moved away since it was listed
        return 0


def before_second_publish(disk: Path, name: str) -> Callable[[], bool]:
    """Experiment 2 ended and its log was kept: the launcher is publishing it."""
    return lambda: len(list((disk / name / "logs").glob("*.rank0.log"))) >= 2


MOMENTS = {"after the first publish": after_first_publish,
           "during a rank's run": during_second_run,
           "during the publish": before_second_publish}
