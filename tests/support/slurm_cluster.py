"""A real multi-node SLURM cluster on this machine (loopback only), for tests.

Debian's SLURM is built with MULTIPLE_SLURMD, so several ``slurmd -N nK`` daemons on one host act
as separate nodes. Everything (munge key, state, spool, pid files, logs) lives under one base
directory, the munge socket in its own /tmp/slurm-munge-* directory, and the ports are picked
free, so two clusters (or two CI runs) never collide with each other or with a system-wide
munge/slurm. tests/system/test_slurm_cluster.py checks that it behaves like a real cluster
(multi-node srun, scancel, exit codes, submitit).

Usage: tests/system/conftest.py registers ``slurm_cluster_fixture`` (one cluster per pytest
worker, whichever modules take it); a test takes ``slurm_cluster`` as a fixture and merges
``slurm_cluster.env`` into the environment of its clients.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

from scalebench.launch.processes import free_port
from tests.support.apt import AptError, apt_install
from tests.support.ci import skip_unless_ci

SLURM_PACKAGES = ["slurm-wlm", "slurmctld", "slurmd", "slurm-client", "munge"]

# States from which a job never moves on; COMPLETING is not one (processes may still be alive).
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                          "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})

# Variables that a surrounding SLURM job (or a user's shell) would leak into our clients and that
# would silently change what sbatch/srun do against this cluster.
_CLIENT_ENV_PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCANCEL_")

# Pid files of the Debian services: only present if a package install started them.
_SYSTEM_PID_FILES = ("/run/munge/munged.pid", "/run/slurmctld.pid", "/run/slurmd.pid")


class SlurmUnavailable(RuntimeError):
    """SLURM is not installed and cannot be installed on this machine."""


class SlurmClusterError(RuntimeError):
    """The local cluster did not start or a client command failed."""


# --------------------------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------------------------

def ensure_slurm_installed() -> None:
    """Install SLURM and munge with apt if ``slurmctld`` is missing; raise SlurmUnavailable."""
    if _slurm_binaries_present():
        return
    with _services_not_started():
        try:
            apt_install(SLURM_PACKAGES, recommends=False, timeout=600)
        except AptError as error:
            raise SlurmUnavailable(f"slurmctld is not installed: {error}") from error
    _stop_system_services()
    if not _slurm_binaries_present():
        raise SlurmUnavailable("apt-get succeeded but slurmctld/slurmd/munged are not on PATH")


def _slurm_binaries_present() -> bool:
    return all(shutil.which(name) for name in ("slurmctld", "slurmd", "munged", "sbatch"))


@contextlib.contextmanager
def _services_not_started() -> Iterator[None]:
    """Make invoke-rc.d refuse to start services while installing, then restore the policy.

    Containers usually already ship a policy-rc.d that says 101 (deny); on a full system the
    munge package would otherwise start a system munged (and slurm packages their daemons).
    """
    policy = Path("/usr/sbin/policy-rc.d")
    if policy.exists():
        yield
        return
    policy.write_text("#!/bin/sh\n# temporary, written by tests/support/slurm_cluster.py\n"
                      "exit 101\n")
    policy.chmod(0o755)
    try:
        yield
    finally:
        policy.unlink(missing_ok=True)


def _stop_system_services() -> None:
    """Stop daemons that an install started anyway (systemd ignores policy-rc.d).

    Ours would not conflict with them (own socket, ports and pid files), but tests should not
    leave system services running that nobody asked for.
    """
    if shutil.which("systemctl") and Path("/run/systemd/system").is_dir():
        subprocess.run(["systemctl", "disable", "--now", "munge", "slurmctld", "slurmd"],
                       capture_output=True, check=False)
    for pid_file in _SYSTEM_PID_FILES:
        pid = _read_pid(Path(pid_file))
        if pid is not None:
            _terminate(pid)


# --------------------------------------------------------------------------------------------
# Process helpers
# --------------------------------------------------------------------------------------------

def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes; only its parent can reap it.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _terminate(pid: int, grace: float = 10.0, process: subprocess.Popen | None = None) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; reap it if it is our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive_or_unreaped(pid, process):
        time.sleep(0.1)
    if _alive_or_unreaped(pid, process):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def _alive_or_unreaped(pid: int, process: subprocess.Popen | None) -> bool:
    if process is not None:
        return process.poll() is None
    return _alive(pid)


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free right now on every address (slurmctld and slurmd listen
    on all of them), outside the kernel's ephemeral range as the launcher's rendezvous port
    is: no connection opened before the daemons start can take one."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _client_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(_CLIENT_ENV_PREFIXES)}
    env.update(extra or {})
    return env


def _parse_record(line: str) -> dict[str, str]:
    """``scontrol show ... -o`` output as a dict (values with spaces only keep their first word)."""
    return dict(re.findall(r"(?:^|\s)([A-Za-z][\w/:.]*)=(\S*)", line))


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"<{error}>"


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------

class LocalSlurmCluster:
    """munged + slurmctld + one slurmd per node, all under ``base``; a context manager."""

    def __init__(self, base: Path, nodes: int = 2, cpus_per_node: int = 2,
                 real_memory_mb: int = 4000, credential_lifetime_s: int | None = None) -> None:
        """``credential_lifetime_s``: AuthInfo's cred_expire, which a requeued job waits out
        before it starts again (None: SLURM's default, 120 s)."""
        self.base = Path(base).resolve()
        self.credential_lifetime_s = credential_lifetime_s
        self.nodes = [f"n{index}" for index in range(1, nodes + 1)]
        self.cpus_per_node = cpus_per_node
        self.real_memory_mb = real_memory_mb
        self.hostname = socket.gethostname()
        self.conf = self.base / "etc" / "slurm.conf"
        # Set by start(): munged wants every directory above its socket to be world-executable,
        # which pytest's 0700 tmp dirs are not, and socket paths must stay under 108 bytes.
        self.munge_socket = Path("/nonexistent/munge.sock")
        self.log_dir = self.base / "log"
        self.run_dir = self.base / "run"
        self._processes: dict[str, subprocess.Popen] = {}

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> LocalSlurmCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> None:
        """Start munged, slurmctld and the slurmds; return once every node is idle."""
        try:
            self._make_dirs()
            self._start_munge()
            self._write_slurm_conf()
            self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
            for node in self.nodes:
                self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
            self._wait_nodes_idle(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Cancel jobs, then stop every daemon (SIGTERM, wait, SIGKILL); safe to call twice."""
        if "slurmctld" in self._processes and self._processes["slurmctld"].poll() is None:
            self._cancel_all_jobs()
        # Nodes first so that slurmctld does not spend its shutdown marking them down.
        for name in [*(f"slurmd-{node}" for node in self.nodes), "slurmctld", "munged"]:
            process = self._processes.pop(name, None)
            if process is not None:
                _terminate(process.pid, process=process)
            elif (pid := self._daemon_pid_from_file(name)) is not None:
                _terminate(pid)
        self._kill_strays()
        if self.munge_socket.parent.name.startswith("slurm-munge-"):
            shutil.rmtree(self.munge_socket.parent, ignore_errors=True)

    def _daemon_pid_from_file(self, name: str) -> int | None:
        """The pid in ``run/NAME.pid`` if that process is alive and was started for ``base``.

        Covers daemons that this object did not spawn (a crashed start); checking the command
        line guards against a pid that was reused by an unrelated process.
        """
        pid = _read_pid(self.run_dir / f"{name}.pid")
        if pid is None or not _alive(pid):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return None
        return pid if str(self.base) in cmdline else None

    def _make_dirs(self) -> None:
        for sub in ("etc", "state", "spool", "log", "run", "munge"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        # munged refuses a socket directory that group or others can write to: mode 755.
        socket_dir = Path(tempfile.mkdtemp(prefix="slurm-munge-", dir="/tmp"))
        socket_dir.chmod(0o755)
        self.munge_socket = socket_dir / "munge.sock"

    def _start_munge(self) -> None:
        key = self.base / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self._spawn("munged", [
            "munged", "--foreground", f"--socket={self.munge_socket}", f"--key-file={key}",
            f"--pid-file={self.run_dir / 'munged.pid'}",
            f"--log-file={self.log_dir / 'munged.log'}",
            f"--seed-file={self.base / 'munge' / 'munged.seed'}",
        ])
        self._wait_for(lambda: self.munge_socket.exists(), 10.0, "munged to create its socket")

    def _spawn(self, name: str, command: list[str]) -> None:
        """Run a daemon in the foreground as our child: we know its pid and can reap it.

        A new session keeps a Ctrl-C on pytest from killing it before our own shutdown.
        """
        output = (self.log_dir / f"{name}.out").open("ab")
        env = _client_env({"SLURM_CONF": str(self.conf)})
        with output:
            self._processes[name] = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                env=env, cwd=self.base, start_new_session=True)

    # --- configuration ---------------------------------------------------------------------

    def _write_slurm_conf(self) -> None:
        ctld_port, *node_ports = _free_ports(1 + len(self.nodes))
        lines = [
            "ClusterName=scalebench",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={node_ports[0]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}" + (
                f",cred_expire={self.credential_lifetime_s}"
                if self.credential_lifetime_s is not None else ""),
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.base / 'state'}",
            f"SlurmdSpoolDir={self.base / 'spool' / '%n'}",
            f"SlurmctldPidFile={self.run_dir / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.run_dir / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.log_dir / 'slurmctld.log'}",
            f"SlurmdLogFile={self.log_dir / 'slurmd-%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            # No cgroups in containers: track processes by parentage, bind nothing.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            # Trust the node lines below rather than what slurmd detects on this machine.
            "SlurmdParameters=config_overrides",
            "MailProg=/bin/true",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            # Finished jobs stay visible to `scontrol show job` for 20 minutes.
            "MinJobAge=1200",
            # Cancelled or timed-out jobs get SIGKILL 5 s after SIGTERM instead of 30 s.
            "KillWait=5",
            "InactiveLimit=0",
            # Start a submitted job within about 1 s instead of batching submissions for 3 s.
            "SchedulerParameters=batch_sched_delay=0",
            *self._node_lines(node_ports),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _node_lines(self, ports: Sequence[int]) -> list[str]:
        return [f"NodeName={node} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={port} "
                f"CPUs={self.cpus_per_node} RealMemory={self.real_memory_mb} State=UNKNOWN"
                for node, port in zip(self.nodes, ports, strict=True)]

    # --- waiting ---------------------------------------------------------------------------

    def _wait_nodes_idle(self, timeout: float) -> None:
        self._wait_for(self._all_nodes_idle, timeout, f"nodes {','.join(self.nodes)} to be idle")

    def _all_nodes_idle(self) -> bool:
        result = self._run(["sinfo", "-h", "-N", "-o", "%N %T"], check=False)
        states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in self.nodes)

    def _wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            dead = [name for name, process in self._processes.items()
                    if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                reason = f"{', '.join(dead)} exited" if dead else f"timed out after {timeout} s"
                raise SlurmClusterError(f"waiting for {what}: {reason}\n{self.log_tail()}")
            time.sleep(0.1)

    # --- client API ------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Variables a client (sbatch, srun, scontrol, submitit) needs; merge into os.environ.

        The munge socket is named in slurm.conf (AuthInfo), so SLURM_CONF is all it takes.
        """
        return {"SLURM_CONF": str(self.conf)}

    def scontrol(self, *args: str) -> str:
        """Output of ``scontrol ARGS`` against this cluster."""
        return self._run(["scontrol", *args]).stdout

    def sbatch(self, args: list[str], env: dict[str, str] | None = None,
               cwd: str | os.PathLike | None = None) -> str:
        """Submit with ``sbatch --parsable ARGS``; return the job id.

        ``env`` is added to os.environ (less any SLURM_*/SBATCH_* of an enclosing job); the job
        inherits that environment, since sbatch exports everything by default.
        """
        result = self._run(["sbatch", "--parsable", *args], env=env, cwd=cwd)
        # --parsable prints "<id>" or "<id>;<cluster>".
        return result.stdout.strip().split(";")[0]

    def job_record(self, job_id: str) -> dict[str, str]:
        """The fields of ``scontrol show job -o JOB_ID``."""
        return _parse_record(self.scontrol("show", "job", "-o", str(job_id)))

    def job_state(self, job_id: str) -> str:
        """JobState, e.g. PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED."""
        return self.job_record(job_id)["JobState"]

    def wait(self, job_id: str, timeout: float) -> str:
        """Wait until the job is in a final state and return it; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while (state := self.job_state(job_id)) not in FINAL_STATES:
            if time.monotonic() > deadline:
                record = self.scontrol("show", "job", str(job_id))
                raise TimeoutError(f"job {job_id} still {state} after {timeout} s:\n{record}")
            time.sleep(0.2)
        return state

    def scancel(self, job_id: str, signal: str | None = None, batch_only: bool = False) -> None:
        """``scancel`` the job, or send it ``signal`` (only to the batch shell if batch_only)."""
        options = [f"--signal={signal}"] if signal else []
        options += ["--batch"] if batch_only else []
        self._run(["scancel", *options, str(job_id)])

    def job_exit_code(self, job_id: str) -> int:
        """Exit code of the batch script (the part of ExitCode=<code>:<signal> before ':')."""
        return int(self.job_record(job_id)["ExitCode"].split(":")[0])

    def node_addr(self, node: str) -> str:
        """NodeAddr of a node (127.0.0.1 here); templates take MASTER_ADDR from it."""
        return _parse_record(self.scontrol("show", "node", "-o", node))["NodeAddr"]

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL the ``slurmd`` of ``node``, as a node that dies: its job steps'
        ``slurmstepd`` keep running, and slurmctld declares it down only after its
        SlurmdTimeout."""
        process = self._processes[f"slurmd-{node}"]
        process.kill()
        process.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of every daemon log, for error messages."""
        paths = sorted(self.log_dir.glob("*.log")) + sorted(self.log_dir.glob("*.out"))
        return "\n".join(f"==> {path.name} <==\n{_tail(path, lines)}" for path in paths)

    def _run(self, command: list[str], env: Mapping[str, str] | None = None,
             cwd: str | os.PathLike | None = None, check: bool = True,
             timeout: float = 60.0) -> subprocess.CompletedProcess:
        full_env = _client_env({**(env or {}), **self.env})
        result = subprocess.run(command, env=full_env, cwd=cwd, capture_output=True, text=True,
                                timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise SlurmClusterError(f"{' '.join(command)} failed ({result.returncode}): "
                                    f"{result.stderr.strip()}")
        return result

    # --- teardown --------------------------------------------------------------------------

    def _cancel_all_jobs(self) -> None:
        """Cancel leftover jobs and give them a moment: slurmstepd outlives a stopped slurmd."""
        self._run(["scancel", "--partition=debug"], check=False)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            queue = self._run(["squeue", "-h", "-o", "%i"], check=False)
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.2)

    def _kill_strays(self) -> None:
        """Last resort: kill what is left of this cluster's daemons and jobs.

        proctrack/linuxproc follows parent links only, so a job's background process whose
        shell has exited is re-parented to init and survives the job; it still carries our
        SLURM_CONF in its environment. slurmstepd also outlives a killed slurmd.
        """
        for pid in _stray_pids(self.base, self.conf):
            _terminate(pid, grace=2.0)


def _stray_pids(base: Path, conf: Path) -> list[int]:
    """Processes other than ours with cwd or open files under ``base`` or our SLURM_CONF."""
    prefix = str(base) + os.sep
    marker = f"SLURM_CONF={conf}\0".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (proc / "environ").read_bytes():
                found.append(int(proc.name))
                continue
            links = [proc / "cwd", *(proc / "fd").iterdir()]
            if any(_link_target(link).startswith(prefix) for link in links):
                found.append(int(proc.name))
    return found


def _link_target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:  # the fd was closed or the process exited meanwhile
        return ""


# --------------------------------------------------------------------------------------------
# Fixture
# --------------------------------------------------------------------------------------------

# Named by ``name=``: the conftest that imports ``slurm_cluster_fixture`` registers it without
# ruff's F811 on every test argument called ``slurm_cluster``.
@pytest.fixture(scope="session", name="slurm_cluster")
def slurm_cluster_fixture(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurmCluster]:
    """A started 2-node cluster for the whole session; skipped (never in CI) without SLURM."""
    try:
        ensure_slurm_installed()
    except SlurmUnavailable as error:
        skip_unless_ci(f"SLURM cannot be installed here: {error}")
    with LocalSlurmCluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster

