"""slurm_templates/tune.sh run for real on the test SLURM cluster (tests/support/slurm_cluster.py):
one worker per task on two nodes sharing one study, then the outputs written by the step that
runs no trial (the exact command lines: tests/integration/test_slurm_template_lines.py)."""

from __future__ import annotations

import os

import pandas as pd

from tests.support.cli import write_experiment
from tests.support.paths import REPO
from tests.support.tuning import TINY, trials_of


def test_tune_template_runs_a_worker_per_task_then_writes_the_outputs(slurm_cluster,
                                                                      tmp_path):
    config = write_experiment(tmp_path, TINY, "ct.yml")
    exports = {"SB_CONFIG": str(config), "SB_TRIALS": "4", "SB_REPO": str(REPO),
               "SB_OUTPUTS": str(tmp_path / "out")}
    job = slurm_cluster.sbatch(["--nodes=2", "--ntasks-per-node=1",
                                f"--output={tmp_path}/tune-%j.out",
                                str(REPO / "slurm_templates" / "tune.sh")],
                               env={**os.environ, **slurm_cluster.env, **exports},
                               cwd=str(REPO))
    state = slurm_cluster.wait(job, timeout=300)
    log = (tmp_path / f"tune-{job}.out").read_text()
    assert state == "COMPLETED", log[-3000:]
    assert "with 2 worker(s)" in log
    trials = trials_of(tmp_path / "out" / "ct_tune")
    assert len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]) == 4
    assert len({t.user_attrs["scalebench_worker"] for t in trials}) == 2  # both tasks worked
    rows = pd.read_parquet(tmp_path / "out" / "ct_tune.parquet")
    assert sorted(set(rows["tune_trial"])) == sorted(t.number for t in trials)
    assert set(rows["prov_slurm_job_id"]) == {job}
    assert (tmp_path / "out" / "ct_tune.yml").is_file()
