"""`scalebench validate` and `plan` through the command line: a GPU config checks on a machine
without a GPU, a bad training config is one line (exit 2), as is a baseline that does not
apply."""

import pytest

from tests.support.cli import run_cli, tiny_experiment


def test_cuda_config_validates_and_plans_without_a_gpu_and_run_refuses_it(write_config,
                                                                           tmp_path,
                                                                           monkeypatch):
    """A login node checks a GPU config; only where the ranks run is the device required.
    No device is visible to the commands, GPU machine or not."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    config = write_config(tiny_experiment(solver=[{"pnp": {"max_iter": 3, "device": "cuda"}}]))
    for command in ("validate", "plan"):
        checked = run_cli(command, config)
        assert checked.returncode == 0, checked.stderr
    done = run_cli("run", config, "--outputs", tmp_path / "out", "--output", "gpu")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "scalebench: error: solver 'pnp': device 'cuda' requested but no CUDA device is "
        "available (allowed here: 'cpu' or 'auto')"]
    assert not (tmp_path / "out" / "gpu.parquet").exists()


def test_command_line_refuses_a_bad_training_config_in_one_line(write_config):
    config = write_config({
        "objective": ["supervised_training"],
        "dataset": [{"synthetic": {"image_size": 32, "task": "denoising"}}],
        "solver": [{"unrolled_pgd": {"num_stages": 2, "denoiser_width": 8, "patch_size": 64,
                                     "device": "cpu"}}]})
    done = run_cli("validate", config)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "patch_size 64 is larger" in done.stderr


BASELINE_REFUSALS = {
    "fbp on a super-resolution dataset": (
        {"synthetic": {"image_size": 32}}, {"fbp": {"device": "cpu"}},
        "solver 'fbp' on dataset 'synthetic': does not apply (it applies to dataset "
        "tomography_2d only)"),
    "fbp with two iterations": (
        {"tomography_2d": {"image_size": 32}}, {"fbp": {"max_iter": 2}},
        "solver 'fbp': parameter 'max_iter' must be an integer >= 1 <= 1, got 2"),
    "fdk on a 2D CT dataset": (
        {"tomography_2d": {"image_size": 32}}, {"fdk": {"device": "cpu"}},
        "solver 'fdk' on dataset 'tomography_2d': does not apply (it applies to dataset "
        "walnut_conebeam only)"),
    "clean on a CT dataset": (
        {"tomography_2d": {"image_size": 32}}, {"clean": {"device": "cpu"}},
        "solver 'clean' on dataset 'tomography_2d': does not apply (it applies to dataset "
        "radio_interferometry only)"),
    "clean with a zero gain": (
        {"radio_interferometry": {"image_size": 32}}, {"clean": {"gain": 0}},
        "solver 'clean': parameter 'gain' must be a number > 0.0 <= 1.0, got 0"),
    "clean with a gain above 1": (
        {"radio_interferometry": {"image_size": 32}}, {"clean": {"gain": 1.5}},
        "solver 'clean': parameter 'gain' must be a number > 0.0 <= 1.0, got 1.5"),
}


@pytest.mark.parametrize("case", sorted(BASELINE_REFUSALS))
def test_a_baseline_that_does_not_apply_is_refused_in_one_line(write_config, tmp_path, case):
    dataset, solver, message = BASELINE_REFUSALS[case]
    config = write_config(tiny_experiment(dataset=[dataset], solver=[solver]))
    done = run_cli("run", config, "--outputs", tmp_path / "out", "--output", "bad")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"scalebench: error: {message}"]
    assert not (tmp_path / "out" / "bad.parquet").exists()
