"""The bundled denoisers: shipped files, their records, what ``pretrained`` resolves to, what
the rows record, and that they denoise and help PnP on images they were never trained on."""

from __future__ import annotations

import json
from dataclasses import asdict

import pandas as pd
import pytest
import torch

from scalebench.data.fetch import BUNDLED_WEIGHTS, accept_file, file_digest
from scalebench.data.manifest import load_manifest
from scalebench.denoisers.bundled import HELD_OUT, RECIPES, load_record, skimage_file
from scalebench.denoisers.catalog import resolve_weights
from scalebench.denoisers.networks import build_denoiser, load_denoiser
from scalebench.errors import ConfigError
from scalebench.loops.denoising import noisy_copy
from scalebench.loops.inference_parameters import pnp_parameters
from scalebench.loops.pnp import PnPLoop
from scalebench.problems import build_problem
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler

CPU = torch.device("cpu")


MAX_BYTES = 4 * 2**20  # each shipped file stays a few MB


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_bundled_file_is_in_the_manifest_with_its_sha256_and_its_recipe(name):
    entry = load_manifest()[f"{name}_bundled"]
    path = BUNDLED_WEIGHTS / entry.file
    assert entry.kind == "bundled" and entry.algorithm == "sha256"
    assert path.stat().st_size == entry.size <= MAX_BYTES
    assert file_digest(path) == entry.checksum
    document = load_record(name)
    assert document["sha256"] == entry.checksum and document["file"] == entry.file
    recipe = asdict(RECIPES[name])
    assert {k: document["recipe"][k] for k in recipe} == json.loads(json.dumps(recipe))
    trained_on = set(document["data"]["files"])
    assert trained_on == set(RECIPES[name].images)
    assert not trained_on & {"astronaut.png", "phantom.png"}
    assert document["data"]["held_out"] == list(HELD_OUT)
    for image, sha256 in document["data"]["files"].items():
        assert file_digest(skimage_file(image)) == sha256


def test_training_pictures_must_be_files_of_the_scikit_image_wheel():
    assert skimage_file("camera.png").is_file()
    with pytest.raises(FileNotFoundError, match="not a file of the installed scikit-image"):
        skimage_file("brain.tif")  # fetched by scikit-image at run time, not in its wheel


def test_auto_is_bundled_without_the_published_file_and_hub_with_it(empty_hub):
    assert resolve_weights("dncnn", 1, "auto").source == "bundled"
    assert resolve_weights("tv", 1, "auto").source == "none"
    assert resolve_weights("dncnn", 1, "none").source == "random"
    empty_hub.mkdir(parents=True)
    published = build_denoiser("dncnn", 1, "none", CPU, seed=2)
    torch.save(published.state_dict(), empty_hub / "dncnn_sigma2_gray.pth")
    accept_file(empty_hub / "dncnn_sigma2_gray.pth")  # no published checksum
    weights = resolve_weights("dncnn", 1, "auto")
    assert weights.source == "hub" and weights.path == empty_hub / "dncnn_sigma2_gray.pth"
    assert resolve_weights("dncnn", 1, "bundled").source == "bundled"
    with pytest.raises(ConfigError, match="bundled weights exist for 1 or 3 channels, not 2"):
        resolve_weights("drunet", 2, "bundled")


def test_weights_record_names_the_file_its_sha256_and_the_architecture(empty_hub):
    model, record = load_denoiser("drunet", 3, "bundled", CPU)
    entry = load_manifest()["drunet_color_bundled"]
    assert record["weights"] == "bundled" and record["weights_sha256"] == entry.checksum
    architecture = json.loads(record["denoiser_architecture"])
    assert architecture["widths"] == load_record("drunet_color")["architecture"]["widths"]
    assert architecture["parameters"] == sum(p.numel() for p in model.parameters())
    _, random = load_denoiser("dncnn", 1, "none", CPU, seed=4)
    _, same = load_denoiser("dncnn", 1, "none", CPU, seed=4)
    _, other = load_denoiser("dncnn", 1, "none", CPU, seed=5)
    assert random["weights"] == "random" and random["weights_sha256"] == same["weights_sha256"]
    assert other["weights_sha256"] != random["weights_sha256"]
    assert json.loads(random["denoiser_architecture"])["widths"] == {"depth": 20, "nf": 64}
    assert load_denoiser("tv", 1, "auto", CPU)[1]["weights"] == "none"


@pytest.mark.parametrize(("name", "channels"), [("drunet", 1), ("drunet", 3), ("dncnn", 1),
                                                 ("dncnn", 3)])
def test_bundled_denoiser_gains_5_db_at_sigma_005_on_a_picture_never_trained_on(name,
                                                                                 channels):
    # The super-resolution example's photograph at its size, which no recipe trains on.
    truth = build_problem("multiframe_superres", image_size=512, num_frames=1).x_true
    truth = truth if channels == 3 else truth.mean(1, keepdim=True)
    noisy = noisy_copy(truth, 0.05, seed=0)
    with torch.no_grad():
        denoised = build_denoiser(name, channels, "bundled", CPU)(noisy, 0.05)
    assert psnr(denoised, truth) > psnr(noisy, truth) + 5.0


PNP_CASES = [
    ("tomography_2d", dict(image_size=64, num_angles=48, projector="torch"), 0.002),
    ("multiframe_superres", dict(image_size=64, num_frames=4), 0.01),
    # noise_level is relative to the image's RMS: about 0.025 absolute, the denoiser's sigma.
    ("synthetic", dict(image_size=128, task="denoising", noise_level=0.05), 0.025),
]


@pytest.mark.parametrize("denoiser", ["drunet", "dncnn"])
@pytest.mark.parametrize(("problem_name", "params", "sigma"), PNP_CASES)
def test_pnp_with_bundled_weights_improves_over_the_initial_estimate(denoiser, problem_name,
                                                                     params, sigma):
    problem = build_problem(problem_name, **params)
    network = build_denoiser(denoiser, problem.x_true.shape[1], "bundled", CPU)
    loop = PnPLoop(problem, network, pnp_parameters(denoiser_sigma=sigma), StepProfiler(CPU))
    start = psnr(loop.x, problem.x_true)
    for _ in range(5):
        loop.iterate()
    assert psnr(loop.x, problem.x_true) > start + 0.5


def test_report_marks_the_quality_curves_of_random_weight_rows():
    from scalebench.results.report.data import RUN, Results
    from scalebench.results.report.views import RANDOM_MARK, quality

    rows = pd.DataFrame({RUN: ["a", "a", "b", "b"], "stop_val": [0, 1, 0, 1],
                         "time": [0.0, 1.0, 0.0, 1.0], "objective_psnr_db": [20.0, 24, 20, 5],
                         "dataset_name": "tomography_2d", "solver_name": "pnp",
                         "idx_rep": 0,
                         "prov_weights": ["bundled", "bundled", "random", "random"]})
    view = quality(Results(rows, labels={"a": "pnp A", "b": "pnp B"}))
    lines = view.figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["pnp A", "pnp B" + RANDOM_MARK]
    # Line styles tell rank counts apart; random weights are drawn with open markers.
    assert [line.get_markerfacecolor() == "none" for line in lines] == [False, True]
    assert "1 run(s) ran a learned denoiser with random weights" in view.note
    unmarked = quality(Results(rows.assign(prov_weights="bundled"), labels={"a": "A", "b": "B"}))
    assert "random weights" not in unmarked.note
