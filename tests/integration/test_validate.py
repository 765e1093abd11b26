"""Bad experiment files are refused in one line, before anything runs."""





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
