"""The report's campaigns: real runs whose merged results the report tests read, built once
per session (tests/conftest.py) for the report's integration and browser tests alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from scalebench.results.report import write_report
from tests.support.cli import copy_benchmark, run_cli, tiny_experiment

RANKS = (1, 2, 4)
# The report views a campaign shows (the browser checks them too).
SHOWN = ["quality", "methods", "steps", "memory", "strong_scaling", "weak_scaling"]


IMAGE_SIZES = [32, 64]


def seed_campaign_config() -> dict:
    return {
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"image_size": IMAGE_SIZES, "num_angles": 24,
                                       "num_operators": 4, "noise_level": 0.05}}],
        "solver": [{"pnp": {"denoiser": ["tv", "dncnn"], "pretrained": "none",
                            "denoiser_sigma": 0.002, "max_iter": 2, "device": "cpu",
                            "distribute_physics": True, "num_threads": 1}}],
        "n-repetitions": 1, "max-runs": 100, "timeout": 300,
    }


def run_seed_campaign(folder: Path) -> tuple[list[Path], Path, str]:
    """Three results files of real runs (one per rank count) and their merged report."""
    benchmark = copy_benchmark(folder)
    config = folder / "seed_campaign.yml"
    config.write_text(yaml.safe_dump(seed_campaign_config(), sort_keys=False))
    files = []
    for ranks in RANKS:
        result = run_cli("run", config, "--benchmark", benchmark, "--nproc", ranks,
                         "--no-html", "--output", f"seed_{ranks}ranks",
                         "--outputs", folder / "results")
        assert result.returncode == 0, result.stderr[-2000:]
        files.append(folder / "results" / f"seed_{ranks}ranks.parquet")
    page = folder / "report.html"
    summary = write_report(files, page, folder / "png")
    return files, page, summary


def run_campaign(folder: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """Results of a real tiny campaign: strong and weak series over 1 and 2 ranks."""
    benchmark = copy_benchmark(folder)
    experiment = tiny_experiment(
        dataset=[{"tomography_2d": {"image_size": 32, "num_angles": [12, 24],
                                    "num_operators": 2, "noise_level": 0.05}}],
        solver=[{"pnp": {"max_iter": 2, "device": "cpu", "denoiser_sigma": 0.002,
                         "distribute_physics": True, "save_estimate": True,
                         "slurm_nodes": 1, "slurm_ntasks_per_node": [1, 2]}}])
    config = folder / "campaign.yml"
    config.write_text(yaml.safe_dump(experiment, sort_keys=False))
    result = run_cli("run", config, "--benchmark", benchmark, "--output", "campaign",
                     "--outputs", folder / "results")
    assert result.returncode == 0, result.stderr[-2000:]
    return folder / "results" / "campaign.parquet", result
