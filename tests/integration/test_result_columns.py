"""Every column real runs write is documented (scalebench.results.columns, from which
docs/results.md is generated), and every documented column is one a run writes."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from scalebench.results.columns import OBJECTIVE_COLUMNS, RUN_COLUMNS, column_pattern
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def columns(tmp_path_factory) -> set[str]:
    """The columns of real inference runs (CT with an algorithm that has a data prox, and
    radio) and of a real training run."""
    folder = tmp_path_factory.mktemp("columns")
    ct = tiny_experiment()
    ct["solver"].append({"pnp": {"algorithm": "admm", "max_iter": 2, "device": "cpu"}})
    training = {"objective": ["supervised_training"],
                "dataset": [{"synthetic": {"image_size": 32, "task": "superres"}}],
                "solver": [{"unrolled_pgd": {"num_stages": 2, "denoiser_width": 4,
                                             "denoiser_depth": 2, "patch_size": 16,
                                             "batch_size": 2, "max_iter": 2, "device": "cpu",
                                             "checkpointing": "auto",
                                             "memory_budget_mib": 100}}]}
    # clean's figures: a radio run (clean applies to radio interferometry only)
    radio = tiny_experiment(
        dataset=[{"radio_interferometry": {"image_size": 32, "num_times": 4,
                                           "num_channels": 1}}],
        solver=[{"clean": {"max_iter": 2, "components_per_iter": 5, "device": "cpu"}}])
    inference_benchmark = copy_benchmark(folder)
    found = set()
    for name, experiment, benchmark in (
            ("inference", ct, inference_benchmark),
            ("radio", radio, inference_benchmark),
            ("training", training,
             copy_benchmark(folder, REPO / "benchmark_training"))):
        config = folder / f"{name}.yml"
        config.write_text(yaml.safe_dump(experiment))
        done = run_cli("run", config, "--benchmark", benchmark, "--no-html", "--output", name,
                       "--outputs", folder)
        assert done.returncode == 0, done.stderr[-2000:]
        found |= set(pq.read_schema(folder / f"{name}.parquet").names)
    return found


def test_every_column_a_run_writes_is_documented(columns):
    assert sorted(c for c in columns if column_pattern(c) is None) == []


def test_every_documented_column_is_written_except_those_of_cuda(columns):
    written = {column_pattern(c) for c in columns}
    cuda_only = {pattern for pattern, meaning in OBJECTIVE_COLUMNS.items()
                 if meaning.startswith("on CUDA")}
    assert sorted(set(RUN_COLUMNS) | set(OBJECTIVE_COLUMNS)) == sorted(written | cuda_only)
