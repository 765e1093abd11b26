"""The SLURM templates run for real: jobs on a two-node SLURM cluster started by the tests, on
the host's venv and in the session's SIF (the exact command lines are checked in
tests/integration/test_slurm_template_lines.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from scalebench.rank.context import DEFAULT_TIMEOUT_S
from tests.support.cli import copy_benchmark, run_cli
from tests.support.paths import REPO

TEMPLATES = REPO / "slurm_templates"


TASK = TEMPLATES / "task-python.sh"


DATASET = {"tomography_2d": {"image_size": 48, "num_angles": 12, "num_operators": 4,
                             "noise_level": 0.05}}


SOLVER = {"max_iter": 3, "device": "cpu", "denoiser": "dncnn", "denoiser_sigma": 0.05,
          "tile_size": 16, "tile_overlap": 8, "distribute_physics": True,
          "distribute_denoiser": True, "num_threads": 1}


def experiment(*solvers: dict) -> dict:
    return {"objective": ["imaging_inverse_problem"], "dataset": [DATASET],
            "solver": [{"pnp": s} for s in solvers], "max-runs": 100, "timeout": 300}


@dataclass(frozen=True)
class Runtime:
    """Where the jobs' ranks run: the SB_* variables, and what their rows must record."""

    name: str
    env: dict[str, str]
    image_digest: str
    image_labels: dict[str, str]


@pytest.fixture(scope="module", params=["none", "apptainer"])
def runtime(request) -> Runtime:
    """The repository's venv, or the session's SIF (tests/conftest.py builds it once)."""
    if request.param == "none":
        return Runtime("none", {}, "none", {})
    sif = request.getfixturevalue("scalebench_sif")
    inspected = subprocess.run(["apptainer", "inspect", "--json", "--labels", str(sif.path)],
                               capture_output=True, text=True, check=True)
    labels = json.loads(inspected.stdout)["data"]["attributes"]["labels"]
    return Runtime("apptainer", {"SB_RUNTIME": "apptainer", "SB_IMAGE": str(sif.path)},
                   sif.digest, labels)


@pytest.fixture
def workspace(tmp_path):
    copy_benchmark(tmp_path)
    return tmp_path


def submit(cluster, workspace: Path, template: str, config: dict, name: str,
           sbatch: list[str], **env: str) -> str:
    path = workspace / f"{name}.yml"
    path.write_text(json.dumps(config))
    exports = {"SB_CONFIG": str(path), "SB_OUTPUT": name, "SB_HTML": "0",
               "SB_BENCHMARK": str(workspace / "benchmark_inference"), "SB_REPO": str(REPO),
               **env}
    return cluster.sbatch([*sbatch, f"--output={workspace}/{name}-%j.out",
                           str(TEMPLATES / template)],
                          env={**os.environ, **cluster.env, **exports}, cwd=str(REPO))


def results(workspace: Path, name: str) -> pd.DataFrame:
    path = workspace / "benchmark_inference" / "outputs" / f"{name}.parquet"
    return pd.read_parquet(path).sort_values(["solver_name", "stop_val"]).reset_index(drop=True)


def job_log(workspace: Path, name: str, job: str) -> str:
    return (workspace / f"{name}-{job}.out").read_text()


def assert_image(df: pd.DataFrame, runtime: Runtime) -> None:
    """Every row records the image its ranks ran in (none on the host)."""
    assert set(df.prov_image_digest) == {runtime.image_digest}
    assert [json.loads(labels) for labels in set(df.prov_image_labels)] == [
        runtime.image_labels]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, runtime):
    """The experiment on one rank, without SLURM, in the same runtime (``scalebench run
    --runtime``: the launcher's steps and its rank in the SIF)."""
    folder = tmp_path_factory.mktemp("reference")
    copy_benchmark(folder)
    config = folder / "one.yml"
    config.write_text(json.dumps(experiment(SOLVER)))
    inside = ["--runtime", runtime.name, "--image", runtime.env["SB_IMAGE"]] if runtime.env \
        else []
    done = run_cli("run", config, "--benchmark", folder / "benchmark_inference", "--output",
                   "one", "--no-html", *inside)
    assert done.returncode == 0, done.stderr[-3000:]
    df = results(folder, "one")
    assert_image(df, runtime)
    return df


@pytest.mark.parametrize(("runtime", "template", "sbatch", "hosts"), [
    ("none", "multinode.sh", ["--nodes=2", "--ntasks-per-node=1"], ["n1", "n2"]),
    ("none", "singlenode.sh", ["--nodes=1", "--ntasks-per-node=2"], ["n1", "n1"]),
    ("apptainer", "multinode.sh", ["--nodes=2", "--ntasks-per-node=1"], ["n1", "n2"]),
], indirect=["runtime"])
def test_template_runs_the_experiment_across_ranks(slurm_cluster, workspace, runtime,
                                                   reference, template, sbatch, hosts):
    """The pre-flight and a 2-rank experiment, in the runtime; rows equal the 1-rank run in
    the same runtime bit for bit and record its image."""
    job = submit(slurm_cluster, workspace, template, experiment(SOLVER), "job", sbatch,
                 **runtime.env)
    state = slurm_cluster.wait(job, timeout=300)
    log = job_log(workspace, "job", job)
    assert state == "COMPLETED", log[-3000:]
    assert "[preflight] 2 rank(s)" in log and "all-reduce 16 MB" in log
    assert f"runtime {runtime.name}" in log
    df = results(workspace, "job")
    assert set(df.prov_world_size) == {2} and set(df.prov_slurm_job_id) == {job}
    assert set(df.prov_slurm_nodelist) == {"n[1-2]" if hosts[1] == "n2" else "n1"}
    assert json.loads(df.prov_rank_hosts.iloc[0]) == hosts
    preflight = json.loads(df.prov_preflight.iloc[0])
    assert preflight["world_size"] == 2 and preflight["all_reduce"]["bus_gb_s"] > 0
    assert_image(df, runtime)
    assert df.prov_result_sha256.tolist() == reference.prov_result_sha256.tolist()
    assert df.objective_psnr_db.tolist() == reference.objective_psnr_db.tolist()
    assert (df[df.stop_val > 0].objective_comm_time_s_max > 0).all()
    # only rank 0 wrote results; no staging folder is left behind
    outputs = workspace / "benchmark_inference" / "outputs"
    assert sorted(p.name for p in outputs.glob("*.parquet")) == ["job.parquet"]
    assert not list(outputs.glob(".staging-*"))


def test_cancelled_job_keeps_finished_experiments_and_resume_completes(slurm_cluster,
                                                                       workspace, runtime):
    config = experiment(*({**SOLVER, "seed": seed, "max_iter": 2} for seed in range(3)))
    sbatch = ["--nodes=2", "--ntasks-per-node=1"]
    job = submit(slurm_cluster, workspace, "multinode.sh", config, "cut", sbatch,
                 **runtime.env)
    result = workspace / "benchmark_inference" / "outputs" / "cut.parquet"
    deadline = time.monotonic() + 240
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    slurm_cluster.scancel(job)
    assert slurm_cluster.wait(job, timeout=60) == "CANCELLED"
    record = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])
    assert record["status"] == "partial" and 1 <= len(record["experiments"]) < 3
    kept = results(workspace, "cut")

    again = submit(slurm_cluster, workspace, "multinode.sh", config, "cut", sbatch,
                   SB_RESUME="1", **runtime.env)
    state = slurm_cluster.wait(again, timeout=300)
    assert state == "COMPLETED", job_log(workspace, "cut", again)[-3000:]
    record = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])
    assert record["status"] == "complete" and len(set(record["experiments"])) == 3
    df = results(workspace, "cut")
    assert sorted(set(df.p_solver_seed)) == [0, 1, 2] and len(df) == 9
    assert set(kept.prov_slurm_job_id) == {job}  # finished rows were kept, not redone
    assert set(df.prov_slurm_job_id) == {job, again}
    assert_image(df, runtime)
    assert not list((workspace / "benchmark_inference" / "outputs").glob(".staging-*"))


# Each rank reports what it sees: its rank and node, a file of SB_DATA, TORCH_HOME and a file
# of it, and the image it runs in.
BIND_PROBE = """#!/bin/bash
export SB_TASK_RANKS=1
srun --export=ALL {task} -c 'import os; e = os.environ; \
print("PROBE", e["RANK"], e["SLURMD_NODENAME"], open("{data}/data.txt").read().strip(), \
e["TORCH_HOME"], open(e["TORCH_HOME"] + "/weights.txt").read().strip(), \
e.get("APPTAINER_CONTAINER", "host"))'
"""


@pytest.fixture
def outside_default_binds():
    """Folders outside those Apptainer binds by itself ($HOME, /tmp, /var/tmp, the working
    folder), so that only SB_DATA / SB_WEIGHTS can make them visible to the ranks."""
    parent = Path("/srv")
    parent.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="scalebench-binds-", dir=parent))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_data_and_weights_binds_reach_every_rank(slurm_cluster, runtime, tmp_path,
                                                 outside_default_binds):
    data, weights = outside_default_binds / "data", outside_default_binds / "weights"
    data.mkdir()
    weights.mkdir()
    (data / "data.txt").write_text("data file\n")
    (weights / "weights.txt").write_text("weights file\n")
    script = tmp_path / "probe.sh"
    script.write_text(BIND_PROBE.format(task=TASK, data=data))
    env = {**os.environ, **slurm_cluster.env, **runtime.env, "SB_REPO": str(REPO),
           "SB_DATA": str(data), "SB_WEIGHTS": str(weights)}
    job = slurm_cluster.sbatch(["--nodes=2", "--ntasks-per-node=1", f"--output={tmp_path}/p.out",
                                str(script)], env=env, cwd=str(tmp_path))
    state = slurm_cluster.wait(job, timeout=120)
    log = (tmp_path / "p.out").read_text()
    assert state == "COMPLETED", log[-3000:]
    image = runtime.env.get("SB_IMAGE", "host")
    probes = sorted(line.split() for line in log.splitlines() if line.startswith("PROBE"))
    assert probes == [["PROBE", "0", "n1", "data", "file", str(weights), "weights", "file",
                       image],
                      ["PROBE", "1", "n2", "data", "file", str(weights), "weights", "file",
                       image]]
    if runtime.name == "apptainer":  # and without the binds, the ranks do not see them
        bare = {**env, "SB_DATA": "", "SB_WEIGHTS": ""}
        job = slurm_cluster.sbatch(["--nodes=1", f"--output={tmp_path}/bare.out",
                                    str(script)], env=bare, cwd=str(tmp_path))
        assert slurm_cluster.wait(job, timeout=120) == "FAILED"
        assert "No such file or directory" in (tmp_path / "bare.out").read_text()


def test_a_rank_that_raises_ends_the_job_without_hanging(slurm_cluster, workspace):
    start = time.monotonic()
    job = submit(slurm_cluster, workspace, "multinode.sh", experiment(SOLVER), "boom",
                 ["--nodes=2", "--ntasks-per-node=1"], SCALEBENCH_FAIL_RANK="1")
    # A rank left waiting on its failed peer would block until the collective's own timeout
    # (600 s); srun's --kill-on-bad-exit ends it within KillWait. The bound leaves a loaded
    # machine the job's start, imports and set-up, and stays below that timeout.
    state = slurm_cluster.wait(job, timeout=DEFAULT_TIMEOUT_S - 150)
    assert time.monotonic() - start < DEFAULT_TIMEOUT_S - 150
    log = job_log(workspace, "boom", job)
    assert state == "FAILED" and slurm_cluster.job_exit_code(job) == 1, log[-3000:]
    assert "(rank 1): " in log and "injected failure on rank 1" in log
    assert not (workspace / "benchmark_inference" / "outputs" / "boom.parquet").exists()


def test_benchopt_submitit_backend_with_resources_as_parameters(slurm_cluster, workspace):
    """benchopt's own SLURM path: one job per run, two ranks from per-solver parameters."""
    config = workspace / "submitit.yml"
    solver = {**SOLVER, "slurm_nodes": 1, "slurm_ntasks_per_node": 2}
    config.write_text(json.dumps(experiment(solver)))
    parallel = workspace / "parallel.yml"
    parallel.write_text(json.dumps({"backend": "submitit", "slurm_partition": "debug",
                                    "slurm_time": "00:10:00"}))
    benchmark = workspace / "benchmark_inference"
    done = subprocess.run(
        [sys.executable, "-m", "benchopt", "run", str(benchmark), "--config", str(config),
         "--parallel-config", str(parallel), "--no-plot", "--no-display", "--output", "sub"],
        env={**os.environ, **slurm_cluster.env}, cwd=str(workspace), capture_output=True,
        text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    df = pd.read_parquet(benchmark / "outputs" / "sub.parquet")
    assert set(df.objective_prov_world_size) == {2}
    assert df.objective_prov_slurm_job_id.iloc[0] != ""
    assert (df[df.stop_val > 0].objective_comm_time_s_max > 0).all()
    assert set(df.p_solver_slurm_ntasks_per_node) == {2}
