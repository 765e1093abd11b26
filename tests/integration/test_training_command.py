"""Training benchmark in one process: the loss decreases, clipping caps the update, 3D tiles
cover a volume, 'auto' checkpointing follows the budget, bad parameters are refused first."""

from __future__ import annotations

from tests.support.cli import run_cli

TINY = {"num_stages": 2, "denoiser_width": 8, "denoiser_depth": 3, "patch_size": 16,
        "batch_size": 4, "device": "cpu"}


DATASET = {"synthetic": {"image_size": 32, "task": "denoising"}}


def test_command_line_refuses_bad_training_config_in_one_line(write_config):
    config = write_config({"objective": ["supervised_training"], "dataset": [DATASET],
                           "solver": [{"unrolled_pgd": {**TINY, "patch_size": 64}}]})
    done = run_cli("validate", config)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "patch_size 64 is larger" in done.stderr
