"""The local SLURM cluster behaves like a real one: multi-node srun, cancel, exit codes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.slurm_cluster import LocalSlurmCluster

# Each srun task prints one line of KEY=VALUE pairs.
TASK_REPORT = """#!/bin/bash
srun bash -c 'echo "PROCID=$SLURM_PROCID NODEID=$SLURM_NODEID LOCALID=$SLURM_LOCALID \
NTASKS=$SLURM_NTASKS NODELIST=$SLURM_JOB_NODELIST NODENAME=$SLURMD_NODENAME HOST=$(hostname)"'
"""


def submit_script(cluster: LocalSlurmCluster, directory: Path, script: str,
                  *options: str) -> tuple[str, Path]:
    """Submit ``script`` with ``options``; return the job id and its output file."""
    path = directory / "job.sh"
    path.write_text(script)
    output = directory / "job.out"
    job_id = cluster.sbatch([*options, f"--output={output}", f"--chdir={directory}", str(path)])
    return job_id, output


def task_reports(output: Path) -> list[dict[str, str]]:
    lines = [line for line in output.read_text().splitlines() if line.startswith("PROCID=")]
    reports = [dict(field.split("=", 1) for field in line.split()) for line in lines]
    return sorted(reports, key=lambda report: int(report["PROCID"]))


def wait_until_running(cluster: LocalSlurmCluster, job_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while (state := cluster.job_state(job_id)) != "RUNNING":
        assert state == "PENDING", state
        assert time.monotonic() < deadline, f"job {job_id} still pending"
        time.sleep(0.1)


def processes_with(marker: str) -> list[str]:
    """Command lines of live processes that contain ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text)
    return found


def test_nodes_have_loopback_address(slurm_cluster: LocalSlurmCluster):
    assert "NodeAddr=127.0.0.1" in slurm_cluster.scontrol("show", "node", "n1")
    assert slurm_cluster.node_addr("n2") == "127.0.0.1"


def test_two_nodes_one_task_each(slurm_cluster: LocalSlurmCluster, tmp_path: Path):
    job_id, output = submit_script(slurm_cluster, tmp_path, TASK_REPORT,
                                   "-N", "2", "--ntasks-per-node=1")
    assert slurm_cluster.wait(job_id, timeout=30) == "COMPLETED", output.read_text()
    reports = task_reports(output)
    assert [(r["PROCID"], r["NODEID"], r["LOCALID"]) for r in reports] == [
        ("0", "0", "0"), ("1", "1", "0")]
    assert {r["NTASKS"] for r in reports} == {"2"}
    assert {r["NODELIST"] for r in reports} == {"n[1-2]"}
    assert [r["NODENAME"] for r in reports] == ["n1", "n2"]


def test_one_node_two_tasks(slurm_cluster: LocalSlurmCluster, tmp_path: Path):
    job_id, output = submit_script(slurm_cluster, tmp_path, TASK_REPORT,
                                   "-N", "1", "--ntasks-per-node=2")
    assert slurm_cluster.wait(job_id, timeout=30) == "COMPLETED", output.read_text()
    reports = task_reports(output)
    assert [(r["PROCID"], r["LOCALID"]) for r in reports] == [("0", "0"), ("1", "1")]
    assert {r["NODEID"] for r in reports} == {"0"}
    assert len({r["NODENAME"] for r in reports}) == 1


def test_scancel_ends_job_quickly(slurm_cluster: LocalSlurmCluster, tmp_path: Path):
    # An unusual duration marks this job's sleep so that we can check it is really gone.
    job_id, _ = submit_script(slurm_cluster, tmp_path, "#!/bin/bash\nsleep 4321\n", "-N", "1")
    wait_until_running(slurm_cluster, job_id)
    started = time.monotonic()
    slurm_cluster.scancel(job_id)
    # The cluster's KillWait is 5 s; the bound leaves a loaded machine's daemons and client
    # calls the rest, far below the hour the job would otherwise sleep.
    bound_s = 30
    assert slurm_cluster.wait(job_id, timeout=bound_s) == "CANCELLED"
    # SLURM records the cancellation as it signals the step: its processes may take a moment
    # to be reaped. Within the same bound, none may be left.
    while processes_with("sleep 4321") and time.monotonic() - started < bound_s:
        time.sleep(0.1)
    assert processes_with("sleep 4321") == []


def test_failing_script_reports_exit_code(slurm_cluster: LocalSlurmCluster, tmp_path: Path):
    job_id, _ = submit_script(slurm_cluster, tmp_path, "#!/bin/bash\nexit 3\n", "-N", "1")
    assert slurm_cluster.wait(job_id, timeout=30) == "FAILED"
    assert slurm_cluster.job_exit_code(job_id) == 3


def test_jobs_run_the_repo_venv(slurm_cluster: LocalSlurmCluster, tmp_path: Path):
    python = REPO / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv in the repository")
    script = f"#!/bin/bash\n{python} -c 'import scalebench; print(scalebench.__file__)'\n"
    job_id, output = submit_script(slurm_cluster, tmp_path, script, "-N", "1")
    assert slurm_cluster.wait(job_id, timeout=30) == "COMPLETED", output.read_text()
    assert str(REPO) in output.read_text()


def test_submitit_runs_a_function(slurm_cluster: LocalSlurmCluster, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch):
    submitit = pytest.importorskip("submitit")
    # submitit calls sbatch/scontrol with os.environ; drop any SLURM_* of an enclosing job.
    for key in [key for key in os.environ if key.startswith(("SLURM_", "SBATCH_"))]:
        monkeypatch.delenv(key)
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    executor = submitit.AutoExecutor(folder=tmp_path / "submitit")
    assert executor.cluster == "slurm"
    executor.update_parameters(slurm_partition="debug", timeout_min=5)
    # A function from an importable module: the job's python cannot import this test module.
    job = executor.submit(os.getenv, "SLURM_JOB_ID")
    assert job.result() == job.job_id
    assert slurm_cluster.wait(job.job_id, timeout=30) == "COMPLETED"
