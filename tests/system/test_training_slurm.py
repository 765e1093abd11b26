"""The SLURM templates run a training config on a real two-node cluster."""

from __future__ import annotations

import json

import pandas as pd

from tests.support.paths import REPO
from tests.support.training import DATASET, SOLVER


def test_slurm_template_trains_across_two_nodes(slurm_cluster, tmp_path):
    """singlenode/multinode templates with SB_BENCHMARK: a spatial 2-rank training run."""
    config = tmp_path / "spatial.yml"
    config.write_text(json.dumps({
        "objective": ["supervised_training"],
        "dataset": [{"synthetic": DATASET}],
        "solver": [{"unrolled_pgd": {**SOLVER, "distribution": "spatial", "max_iter": 2}}],
        "max-runs": 10, "timeout": 300}))
    exports = {"SB_CONFIG": str(config), "SB_OUTPUT": "job", "SB_HTML": "0",
               "SB_BENCHMARK": str(REPO / "benchmark_training"), "SB_REPO": str(REPO),
               "SB_OUTPUTS": str(tmp_path)}
    job = slurm_cluster.sbatch(["--nodes=2", "--ntasks-per-node=1",
                                f"--output={tmp_path}/job-%j.out",
                                str(REPO / "slurm_templates" / "multinode.sh")],
                               env=exports, cwd=str(REPO))
    state = slurm_cluster.wait(job, timeout=300)
    assert state == "COMPLETED", (tmp_path / f"job-{job}.out").read_text()[-3000:]
    rows = pd.read_parquet(tmp_path / "job.parquet").sort_values("stop_val")
    assert rows.stop_val.tolist() == [0, 1, 2]
    assert set(rows.prov_world_size) == {2} and set(rows.prov_slurm_job_id) == {job}
    assert json.loads(rows.prov_rank_hosts.iloc[0]) == ["n1", "n2"]
    trained = rows[rows.stop_val > 0]
    assert (trained.objective_backward_comm_time_s_max > 0).all()
    assert (trained.objective_forward_comm_bytes > 0).all()
