"""Training on several real processes (gloo): two ranks give the one-rank gradients and
parameters (spatial and data-parallel), checkpointing leaves gradients equal and lowers the
measured memory, a training result replays bit for bit."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from scalebench.launch.processes import free_port
from scalebench.results.report.data import load_results
from scalebench.results.report.views import training
from tests.support.cli import run_cli
from tests.support.paths import REPO
from tests.support.training import DATASET, SOLVER

STEPS = 2


def train_and_dump(runs_json: str, folder: str) -> None:
    """In each rank: train every run of ``runs_json`` for STEPS steps; save the gradients of
    the first step, the parameters after the last and the step figures."""
    from scalebench.benchmarks import TRAINING
    from scalebench.loops.training.parameters import TRAINING_PARAMS
    from scalebench.loops.training.patches import TrainingData
    from scalebench.loops.training.step import Trainer, build_model, set_checkpointing
    from scalebench.param_spec import resolved_parameters
    from scalebench.rank.context import run_context
    from scalebench.rank.determinism import apply_determinism, set_threads
    from scalebench.rank.profiling import StepProfiler

    for name, (dataset, solver) in json.loads(runs_json).items():
        params = resolved_parameters(solver, TRAINING_PARAMS)
        set_threads(params["num_threads"])
        apply_determinism(True, params["seed"])
        context = run_context(torch.device("cpu"))
        setup = TRAINING.setup_problem("synthetic", **dataset)
        data = TrainingData(setup, TRAINING.problems["synthetic"], params["patch_size"],
                            params["seed"], context.device)
        model = build_model(params, data, context)
        set_checkpointing(model, params["checkpointing"])
        training = Trainer(model, data, params, context, StepProfiler(context.device,
                                                                       context=context))
        figures = []
        for step in range(STEPS):
            training.iterate()
            figures.append(training.figures())
            if step == 0:
                grads = {k: p.grad.clone() for k, p in model.named_parameters()}
        params_after = {k: p.detach().clone() for k, p in model.named_parameters()}
        torch.save({"grads": grads, "params": params_after, "figures": figures},
                   Path(folder) / f"{name}.rank{context.rank}.pt")


def launch(runs: dict, folder: Path, ranks: int) -> dict[str, list[dict]]:
    """Run ``train_and_dump`` on ``ranks`` processes; {run name: [rank 0's dump, ...]}."""
    port = free_port()
    code = "import sys; from tests.integration.test_training_distributed import train_and_dump; " \
           "train_and_dump(sys.argv[1], sys.argv[2])"
    processes = []
    for rank in range(ranks):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(ranks),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(ranks),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        if ranks == 1:
            env = {k: v for k, v in env.items() if k not in ("RANK", "WORLD_SIZE")}
        processes.append(subprocess.Popen([sys.executable, "-c", code, json.dumps(runs),
                                           str(folder)], cwd=REPO, env=env,
                                          stderr=subprocess.PIPE, text=True))
    try:
        errors = [process.communicate(timeout=300)[1] for process in processes]
    finally:  # a rank left waiting in a collective must not outlive the test
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert all(p.returncode == 0 for p in processes), errors[0][-3000:] + errors[-1][-3000:]
    return {name: [torch.load(folder / f"{name}.rank{rank}.pt") for rank in range(ranks)]
            for name in runs}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("training")
    single = {mode: (DATASET, {**SOLVER, "checkpointing": mode})
              for mode in ("none", "stage", "tile_batch")}
    double = {mode: (DATASET, {**SOLVER, "distribution": mode})
              for mode in ("spatial", "data")}
    return {**launch(single, folder, 1), **launch(double, folder, 2)}


def relative_difference(a: dict, b: dict) -> float:
    return max(float(torch.linalg.vector_norm(a[k] - b[k]) / torch.linalg.vector_norm(b[k]))
               for k in b)


@pytest.mark.parametrize("distribution", ["spatial", "data"])
def test_two_ranks_give_the_one_rank_gradients_and_parameters(dumps, distribution):
    reference, ranks = dumps["none"][0], dumps[distribution]
    for rank in ranks:
        assert relative_difference(rank["grads"], reference["grads"]) <= 1e-5
        assert relative_difference(rank["params"], reference["params"]) <= 1e-5
    for key, value in ranks[0]["params"].items():  # identical on every rank after each step
        assert torch.equal(value, ranks[1]["params"][key])
    figures = ranks[0]["figures"][-1]
    assert figures["loss"] == pytest.approx(dumps["none"][0]["figures"][-1]["loss"], rel=1e-5)
    assert figures["backward_comm_bytes"] > 0 and figures["backward_comm_time_s"] > 0


def test_spatial_split_times_the_backward_activation_all_reduce(dumps):
    spatial, data = dumps["spatial"][0]["figures"][0], dumps["data"][0]["figures"][0]
    assert spatial["forward_comm_bytes"] > 0  # tile cores summed
    assert data["forward_comm_bytes"] == 0  # each rank has its own patches
    parameters = sum(v.numel() for v in dumps["none"][0]["params"].values())
    # data-parallel: one bucket of every gradient and the loss, float32
    assert data["backward_comm_bytes"] == 4 * (parameters + 1)
    # spatial: the network's gradients plus input gradients of every stage's tile region
    assert spatial["backward_comm_bytes"] > 4 * (parameters - 2 * SOLVER["num_stages"])


@pytest.mark.parametrize("mode", ["stage", "tile_batch"])
def test_checkpointing_leaves_gradients_equal_and_keeps_fewer_activations(dumps, mode):
    reference, checkpointed = dumps["none"][0], dumps[mode][0]
    assert relative_difference(checkpointed["grads"], reference["grads"]) <= 1e-5
    assert relative_difference(checkpointed["params"], reference["params"]) <= 1e-5
    kept, full = (d["figures"][0]["saved_activations_mib"] for d in (checkpointed, reference))
    assert kept < 0.5 * full


def test_checkpointing_lowers_the_measured_peak_memory(tmp_path):
    """Each mode in fresh processes, three of each in alternation: the first step's peak
    resident memory above what the process held before it (VmHWM minus RSS; a fresh
    process's own size varies by several MiB), its median over the three, drops by at least
    half the activations checkpointing does not keep. (With one process of each, a CI run of
    the whole suite measured a drop of 22.5 MiB for 49.7 not kept.)"""
    big = {**SOLVER, "patch_size": 128, "denoiser_width": 32, "denoiser_depth": 4,
           "num_stages": 8, "batch_size": 1, "tile_size": 0, "tiles_per_batch": 0}
    increases: dict[str, list[float]] = {"none": [], "stage": []}
    saved = {}
    for repeat in range(3):
        for mode in ("none", "stage"):
            runs = {mode: ({**DATASET, "image_size": 128}, {**big, "checkpointing": mode})}
            folder = tmp_path / f"{mode}{repeat}"
            folder.mkdir()
            figures = launch(runs, folder, 1)[mode][0]["figures"]
            increases[mode].append(figures[0]["step_peak_increase_host_rss_mib"])
            saved[mode] = figures[0]["saved_activations_mib"]
            assert all(f["step_peak_increase_host_rss_mib"] >= 0 for f in figures)
    not_kept = saved["none"] - saved["stage"]  # about 50 MiB
    drop = statistics.median(increases["none"]) - statistics.median(increases["stage"])
    assert not_kept > 25 and drop > 0.5 * not_kept, (increases, saved)


def test_training_result_checks_replays_bit_for_bit_and_reports(tmp_path):
    """The run finds benchmark_training from the config's objective and replay from the rows
    themselves; the report (rendered by the run) shows the throughput and the checkpointing
    trade-off (peak memory) views."""
    config = tmp_path / "train.yml"
    config.write_text(json.dumps({
        "objective": ["supervised_training"],
        "dataset": [{"synthetic": {"image_size": 32, "task": "denoising"}}],
        "solver": [{"unrolled_pgd": {**SOLVER, "patch_size": 16, "tile_size": 0,
                                     "max_iter": 3, "eval_every": 2,
                                     "checkpointing": "stage"}}],
        "max-runs": 10, "timeout": 300}))
    done = run_cli("run", config, "--outputs", tmp_path, "--output", "trained")
    assert done.returncode == 0, done.stderr[-3000:]
    results = tmp_path / "trained.parquet"
    rows = pd.read_parquet(results).sort_values("stop_val")
    assert rows.stop_val.tolist() == [0, 1, 2, 3]  # a row per step
    # validation every eval_every=2 steps, and after the last
    assert rows.objective_psnr_db.notna().tolist() == [True, False, True, True]
    assert rows.prov_result_sha256.nunique() == 4  # the parameters change at every step
    assert json.loads(rows.prov_config_json.iloc[0])["benchmark"] == "benchmark_training"
    page = results.with_suffix(".html").read_text()
    assert "Training throughput and checkpointing trade-off" in page
    assert "no training results" not in page
    throughput, trade_off = training(load_results([results])).figure.axes
    assert "throughput" in throughput.get_xlabel() and "throughput" in trade_off.get_ylabel()
    assert "peak" in trade_off.get_xlabel()
    checked = run_cli("check", results)
    assert checked.returncode == 0, checked.stdout
    replayed = run_cli("replay", results)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-2000:]
    assert "\nMATCH " in replayed.stdout and "bit for bit" in replayed.stdout
