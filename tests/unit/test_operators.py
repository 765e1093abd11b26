"""The problems' operators and data: angle groups, seeded noise, generators at any size, and
inconsistent parameters refused (their adjointness: test_adjointness.py)."""

import pytest
import torch

from scalebench.errors import ConfigError
from scalebench.problems import build_problem
from scalebench.problems.tomography_2d import angle_groups


def test_tomography_angles_are_split_into_interleaved_groups():
    groups = angle_groups(9, 3)
    assert [g.tolist() for g in groups] == [[0.0, 60.0, 120.0], [20.0, 80.0, 140.0],
                                            [40.0, 100.0, 160.0]]
    problem = build_problem("tomography_2d", image_size=32, num_angles=9, num_operators=3)
    assert len(problem.physics.physics_list) == 3
    assert [y.shape[-1] for y in problem.y] == [3, 3, 3]


def test_noise_level_is_relative_to_clean_measurements_and_seeded():
    quiet = build_problem("synthetic", image_size=32, task="denoising", noise_level=0.0)
    noisy = build_problem("synthetic", image_size=32, task="denoising", noise_level=0.1)
    again = build_problem("synthetic", image_size=32, task="denoising", noise_level=0.1)
    rms = float(torch.sqrt(torch.mean(quiet.y[0] ** 2)))
    assert noisy.noise_std == pytest.approx(0.1 * rms, rel=1e-6)
    assert torch.equal(noisy.y[0], again.y[0])
    residual = float(torch.std(noisy.y[0] - quiet.y[0]))
    assert residual == pytest.approx(noisy.noise_std, rel=0.1)


def test_synthetic_generator_scales_to_any_size():
    small = build_problem("synthetic", image_size=48, task="denoising", channels=3)
    large = build_problem("synthetic", image_size=1024, task="denoising", channels=1)
    assert small.x_true.shape == (1, 3, 48, 48)
    assert large.x_true.shape == (1, 1, 1024, 1024)
    assert 0.0 <= float(large.x_true.min()) and float(large.x_true.max()) <= 1.0
    assert float(large.x_true.std()) > 0.05  # a picture, not a constant


@pytest.mark.parametrize(("name", "params", "message"), [
    ("tomography_2d", dict(num_angles=4, num_operators=5), "must not exceed num_angles"),
    ("multiframe_superres", dict(image_size=30, factor=4), "multiple of factor"),
    ("tomography_2d", dict(image_size=8), "image_size' must be an integer >= 16"),
    ("nowhere", dict(), "unknown dataset 'nowhere'"),
])
def test_inconsistent_dataset_parameters_are_refused(name, params, message):
    with pytest.raises(ConfigError, match=message):
        build_problem(name, **params)
