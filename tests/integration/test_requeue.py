"""A requeued SLURM job (SLURM_RESTART_COUNT > 0) resumes its own result without --resume:
the launcher's rule, on local ranks (tests/system/test_slurm_faults.py runs it on SLURM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pyarrow.parquet as pq

from tests.support.cli import copy_benchmark, tiny_experiment
from tests.support.paths import REPO


def launch(config, benchmark, *extra: str, env: dict[str, str] | None = None
           ) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scalebench", "run", str(config),
                             "--benchmark", str(benchmark), "--output", "job", "--no-html",
                             *extra], cwd=REPO, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_restarted_job_resumes_its_own_result_and_its_rows_say_so(tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)
    config = write_config(tiny_experiment())  # two experiments
    job = {"SLURM_JOB_ID": "77"}
    first = launch(config, benchmark, env=job)
    result = benchmark / "outputs" / "job.parquet"
    deadline = time.monotonic() + 240
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)  # as SLURM does when it requeues the job
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    kept = pd.read_parquet(result)
    finished = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])["experiments"]
    assert len(finished) == 1

    restarted = launch(config, benchmark, env={**job, "SLURM_RESTART_COUNT": "1"})
    stdout, stderr = restarted.communicate(timeout=600)
    assert restarted.returncode == 0, stderr[-3000:]
    assert f"restart 1 of job 77: resuming {result} (1 experiment(s) finished before)" \
        in stdout
    record = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])
    assert record["status"] == "complete" and len(set(record["experiments"])) == 2
    df = pd.read_parquet(result)
    assert not df.duplicated(["experiment_id", "stop_val"]).any()
    again = df[df.experiment_id == finished[0]].reset_index(drop=True)
    assert again.prov_result_sha256.tolist() == kept.prov_result_sha256.tolist()  # not redone
    restarts = df.groupby("experiment_id").prov_slurm_restart_count.agg(set).to_dict()
    assert restarts == {identifier: {""} if identifier == finished[0] else {"1"}
                        for identifier in record["experiments"]}


def test_a_restart_refuses_a_result_of_another_config_and_leaves_it(tmp_path, write_config):
    """The result name of a restarted job holds another config's rows: one line, exit 2,
    the file untouched; a restart of its own complete result has nothing to run: exit 0,
    the file untouched too."""
    benchmark = copy_benchmark(tmp_path)
    solo = tiny_experiment(solver=[{"denoiser": {"max_iter": 2, "device": "cpu"}}])
    other = write_config(solo, "other.yml")
    done = launch(other, benchmark)
    assert done.wait(timeout=300) == 0, done.stderr.read()[-3000:]
    result = benchmark / "outputs" / "job.parquet"
    before = result.read_bytes()
    restarted = launch(write_config(tiny_experiment()), benchmark,
                       env={"SLURM_JOB_ID": "78", "SLURM_RESTART_COUNT": "2"})
    _, stderr = restarted.communicate(timeout=300)
    assert restarted.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "restart 2 of job 78" in lines[0] and "other.yml" in lines[0] \
        and "another --output" in lines[0], lines
    assert result.read_bytes() == before

    again = launch(other, benchmark, env={"SLURM_JOB_ID": "78", "SLURM_RESTART_COUNT": "3"})
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert f"restart 3 of job 78: nothing to resume: {result} is complete (1 experiment(s))" \
        in stdout
    assert result.read_bytes() == before
