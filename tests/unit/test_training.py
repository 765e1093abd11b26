"""Training benchmark in one process: the loss decreases, clipping caps the update, 3D tiles
cover a volume, 'auto' checkpointing follows the budget, bad parameters are refused first."""

from __future__ import annotations

import math

import pytest
import torch

from scalebench.benchmarks import TRAINING
from scalebench.errors import ConfigError
from scalebench.experiment.config import load_config
from scalebench.loops.training.network import build_network
from scalebench.loops.training.parameters import TRAINING_PARAMS
from scalebench.loops.training.patches import TrainingData
from scalebench.loops.training.step import Trainer, build_model, choose_checkpointing
from scalebench.param_spec import resolved_parameters
from scalebench.rank.context import run_context
from scalebench.rank.profiling import StepProfiler
from tests.support.paths import REPO

TINY = {"num_stages": 2, "denoiser_width": 8, "denoiser_depth": 3, "patch_size": 16,
        "batch_size": 4, "device": "cpu"}


def trainer(dataset: str = "synthetic", dataset_params: dict | None = None,
            **overrides) -> Trainer:
    torch.manual_seed(0)
    params = resolved_parameters({**TINY, **overrides}, TRAINING_PARAMS)
    setup = TRAINING.setup_problem(dataset, **(dataset_params or {
        "image_size": 32, "task": "denoising", "noise_level": 0.1}))
    context = run_context(torch.device("cpu"))
    data = TrainingData(setup, TRAINING.problems[dataset], params["patch_size"],
                        params["seed"], context.device)
    model = build_model(params, data, context)
    return Trainer(model, data, params, context, StepProfiler(context.device,
                                                               context=context))


def test_loss_decreases_over_twenty_steps():
    training = trainer()
    losses = []
    for _ in range(20):
        training.iterate()
        losses.append(training.loss)
    assert sum(losses[-5:]) < 0.2 * sum(losses[:5]), losses
    assert losses[-1] < 0.1 * losses[0], losses


def _update_norm(clip: float) -> tuple[float, float]:
    """(norm of the parameter change of one SGD step with lr 1, gradient norm)."""
    training = trainer(optimizer="sgd", lr=1.0, lr_stage=1.0, clip_grad_norm=clip)
    before = training.parameters_vector().clone()
    training.iterate()
    return float(torch.linalg.vector_norm(training.parameters_vector() - before)), \
        training.grad_norm


def test_clipping_caps_the_update_when_the_norm_exceeds_it():
    free_update, gradient_norm = _update_norm(0.0)
    assert free_update == pytest.approx(gradient_norm, rel=1e-4)  # SGD, lr 1: update = g
    limit = gradient_norm / 10
    clipped_update, reported_norm = _update_norm(limit)
    assert reported_norm == pytest.approx(gradient_norm, rel=1e-6)  # norm before clipping
    assert clipped_update == pytest.approx(limit, rel=1e-4)
    unaffected_update, _ = _update_norm(gradient_norm * 10)
    assert unaffected_update == pytest.approx(free_update, rel=1e-6)


def test_volume_tiles_give_the_untiled_network_output():
    """3D windows with an overlap covering the receptive radius reproduce the whole volume."""
    untiled = trainer("volume_denoising", {"image_size": 16}, denoiser_depth=2,
                      num_stages=1, batch_size=1)
    tiled = trainer("volume_denoising", {"image_size": 16}, denoiser_depth=2, num_stages=1,
                    batch_size=1, tile_size=8, tile_overlap=2, tiles_per_batch=3)
    assert tiled.model.tiles is not None and tiled.model.tiles.strategy.get_num_patches() == 8
    x, y = untiled.data.batch(0, range(1))
    assert x.shape == (1, 1, 16, 16, 16)
    with torch.no_grad():
        whole = untiled.model(y, untiled.data.physics)
        pieces = tiled.model(y, tiled.data.physics)
    torch.testing.assert_close(pieces, whole, rtol=1e-5, atol=1e-6)


def test_auto_checkpointing_follows_the_memory_budget():
    picks = {}
    for budget in (1e6, 1e-3):
        training = trainer(tile_size=8, tile_overlap=2, tiles_per_batch=1,
                           checkpointing="auto", memory_budget_mib=budget)
        picks[budget], estimates = choose_checkpointing(training.model, training.data,
                                                        training.params, training.indices)
        assert estimates["stage"] < estimates["none"]
        assert estimates["tile_batch"] < estimates["none"]
    assert picks[1e6] == "none"  # everything fits: no recomputation
    assert picks[1e-3] == min(estimates, key=estimates.get)  # nothing fits: the leanest


def test_networks_are_seeded():
    first, second = (build_network("drunet", 1, 2, 4, 1, 3, torch.device("cpu"))
                     for _ in range(2))
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


DATASET = {"synthetic": {"image_size": 32, "task": "denoising"}}


BAD = [
    ({"patch_size": 48}, 1, "patch_size 48 is larger than the image"),
    ({"num_stages": 0}, 1, "parameter 'num_stages' must be an integer >= 1"),
    ({"checkpointing": "sometimes"}, 1, "parameter 'checkpointing' must be one of"),
    ({"distribution": "data", "batch_size": 3}, 2, "batch_size 3 is not divisible by 2"),
    ({"distribution": "spatial"}, 2, "1 tile(s) in 1 batch(es) of tiles_per_batch 0 for 2"),
    ({"distribution": "spatial", "tile_size": 8, "tile_overlap": 2, "tiles_per_batch": 4}, 2,
     "4 tile(s) in 1 batch(es) of tiles_per_batch 4 for 2 ranks"),
    ({}, 2, "distribution is 'none'"),
    ({"checkpointing": "tile_batch"}, 1, "checkpointing 'tile_batch' needs tiles"),
    ({"checkpointing": "auto"}, 1, "needs memory_budget_mib > 0"),
    ({"denoiser": "drunet", "patch_size": 20}, 1, "divisible by 8"),
    ({"max_iter": 100, "eval_every": 5}, 1, "max_iter=100 records 101 rows but max-runs is 100"),
]


@pytest.mark.parametrize(("solver", "ranks", "message"), BAD)
def test_bad_parameters_are_refused_before_anything_runs(write_config, solver, ranks,
                                                         message):
    config = write_config({"objective": ["supervised_training"], "dataset": [DATASET],
                           "solver": [{"unrolled_pgd": {**TINY, **solver}}]})
    with pytest.raises(ConfigError) as error:
        load_config(config, ranks)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("config", sorted((REPO / "configs" / "training").glob("*.yml")),
                         ids=lambda path: path.stem)
def test_shipped_training_configs_are_valid(config):
    loaded = load_config(config)
    assert loaded.solvers and all(s.name == "unrolled_pgd" for s in loaded.solvers)


@pytest.mark.parametrize(("dataset", "dataset_params"), [
    ("tomography_2d", {"image_size": 32, "num_angles": 16, "num_operators": 2}),
    ("multiframe_superres", {"image_size": 32, "num_frames": 2}),
    ("volume_denoising", {"image_size": 24}),
])
def test_every_training_problem_trains_with_drunet(dataset, dataset_params):
    training = trainer(dataset, dataset_params, batch_size=2, denoiser="drunet",
                       denoiser_width=4, denoiser_depth=1)
    before = training.parameters_vector().clone()
    training.iterate()
    figures = training.figures()
    assert not torch.equal(training.parameters_vector(), before)  # the step trained it
    assert figures["loss"] > 0 and figures["grad_norm"] > 0
    assert math.isfinite(figures["saved_activations_mib"])
    assert figures["throughput_pixels_per_s"] > 0
