"""The tuning the tuner's integration tests read: a seconds-long CT problem tuned for eight
trials, run once per session (tests/conftest.py) for test_tuning and test_report_tuned."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cli import run_cli, write_experiment

# One validation image and six iterations keep a trial near ten seconds here.
TINY = {
    "objective": ["imaging_inverse_problem"],
    "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 12, "noise_level": 0.05,
                                   "projector": "torch", "image": ["phantom-101"]}}],
    "solver": [{"pnp": {"algorithm": "pgd", "denoiser": "tv", "max_iter": 6, "device": "cpu",
                        "num_threads": 1}}],
    "timeout": 300,
    "tune": {"denoiser_sigma": [1e-4, 0.3]},
}
# Enough trials that the pruner, past its four start-up trials, stops some: with seed 3, two
# of the trials drawn at random before the sampler models any are in the bottom quarter (with
# seeds 1, 4, 5 and 6 none is: the modelled ones stay near the best).
TRIALS = 8
SEED = 3


def trials_of(folder: Path) -> list:
    """The trials of the one study whose journal lies in ``folder``."""
    import optuna

    from scalebench.rank.trial_report import journal_storage

    (journal,) = folder.glob("*.journal")
    study = optuna.load_study(study_name=journal.stem, storage=journal_storage(journal))
    return study.get_trials()


def run_ct_tuning(folder: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """``scalebench tune`` of TINY for TRIALS trials: its outputs folder and the command."""
    config = write_experiment(folder, TINY, "ct.yml")
    result = run_cli("tune", config, "--trials", str(TRIALS), "--outputs", folder / "out",
                     "--seed", str(SEED))
    return folder / "out", result
