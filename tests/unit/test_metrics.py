"""Metrics against values computed by hand (and SSIM against scikit-image's reference),
against a whole-image float64 reference at any size, in bounded memory, and at the edges."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from scalebench.errors import ConfigError
from scalebench.problems import PROBLEMS, setup_problem
from scalebench.rank import metrics
from scalebench.rank.profiling import HostPeakMemory


def test_mse_and_psnr_match_hand_computation():
    x = torch.tensor([[[[0.0, 0.5], [1.0, 0.25]]]])
    x_hat = torch.tensor([[[[0.1, 0.5], [0.8, 0.25]]]])
    expected_mse = (0.1**2 + 0.2**2) / 4  # = 0.0125
    assert metrics.mse(x_hat, x) == pytest.approx(expected_mse, rel=1e-6)
    # data range of x is 1.0 - 0.0 = 1.0
    assert metrics.psnr(x_hat, x) == pytest.approx(10 * math.log10(1 / 0.0125), rel=1e-6)


def test_psnr_uses_ground_truth_range_and_is_infinite_for_exact_match():
    x = torch.tensor([[[[2.0, 4.0, 6.0, 10.0]]]])  # range 8
    x_hat = x + torch.tensor([[[[1.0, -1.0, 1.0, -1.0]]]])  # mse 1
    assert metrics.psnr(x_hat, x) == pytest.approx(20 * math.log10(8.0))
    assert metrics.psnr(x, x) == math.inf


def test_asinh_psnr_matches_its_documented_definition():
    x = np.array([0.0, 0.01, 0.1, 1.0, 4.0])
    x_hat = np.array([0.02, 0.0, 0.2, 0.9, 3.0])
    peak = 4.0
    a = 0.01 * peak
    stretch = lambda v: np.arcsinh(v / a) / np.arcsinh(peak / a)  # noqa: E731
    expected = 10 * np.log10(1.0 / np.mean((stretch(x_hat) - stretch(x)) ** 2))
    value = metrics.asinh_psnr(torch.tensor(x_hat)[None, None], torch.tensor(x)[None, None])
    assert value == pytest.approx(expected, rel=1e-12)


def test_asinh_psnr_softening_is_the_peak_over_the_dynamic_range():
    x = np.array([0.0, 1e-4, 1e-3, 0.1, 1.0])
    x_hat = np.array([1e-4, 0.0, 2e-3, 0.1, 0.9])
    a = 1.0 / 1e4
    stretch = lambda v: np.arcsinh(v / a) / np.arcsinh(1.0 / a)  # noqa: E731
    expected = 10 * np.log10(1.0 / np.mean((stretch(x_hat) - stretch(x)) ** 2))
    as_tensor = lambda v: torch.tensor(v)[None, None]  # noqa: E731
    assert metrics.asinh_psnr(as_tensor(x_hat), as_tensor(x), 1e4) == pytest.approx(
        expected, rel=1e-12)
    # faint errors weigh more when the range reaches down to them
    assert metrics.asinh_psnr(as_tensor(x_hat), as_tensor(x), 1e4) < metrics.asinh_psnr(
        as_tensor(x_hat), as_tensor(x), 100.0)


def test_snr_matches_hand_computation_and_is_zero_db_for_a_blank_estimate():
    x = torch.tensor([[[[0.0, 3.0], [4.0, 0.0]]]], dtype=torch.float64)  # ||x||^2 = 25
    x_hat = torch.tensor([[[[0.5, 3.0], [3.0, 0.0]]]], dtype=torch.float64)  # error 1.25
    assert metrics.snr(x_hat, x) == pytest.approx(10 * math.log10(25 / 1.25), rel=1e-12)
    assert metrics.snr(torch.zeros_like(x), x) == 0.0
    assert metrics.snr(x, x) == math.inf
    assert metrics.snr(-x, x) == pytest.approx(10 * math.log10(1 / 4))
    with pytest.raises(ValueError, match="not identically zero"):
        metrics.snr(x, torch.zeros_like(x))


def test_asinh_psnr_rejects_an_all_zero_ground_truth():
    zeros = torch.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="not identically zero"):
        metrics.asinh_psnr(zeros + 1, zeros)


@pytest.mark.parametrize("channels", [1, 3])
def test_ssim_matches_scikit_image_gaussian_ssim(channels):
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(1, channels, 40, 52, generator=generator, dtype=torch.float64)
    x_hat = x + 0.1 * torch.randn(x.shape, generator=generator, dtype=torch.float64)
    reference = structural_similarity(
        x_hat[0].numpy(), x[0].numpy(), channel_axis=0, gaussian_weights=True, sigma=1.5,
        use_sample_covariance=False, data_range=float(x.max() - x.min()))
    assert metrics.ssim(x_hat, x) == pytest.approx(reference, abs=1e-10)


def test_ssim_of_identical_images_is_one_and_works_in_3d():
    x = torch.rand(1, 1, 16, 16, 16, generator=torch.Generator().manual_seed(1))
    assert metrics.ssim(x, x) == pytest.approx(1.0)
    assert metrics.ssim(x.flip(-1), x) < 0.5


def test_quality_metrics_returns_every_column():
    x = torch.rand(1, 1, 24, 24, generator=torch.Generator().manual_seed(2))
    values = metrics.quality_metrics(x * 0.9, x)
    assert set(values) == {"psnr_db", "ssim", "mse", "snr_db", "asinh_psnr_db", "diverged"}
    assert values["diverged"] is False
    assert all(math.isfinite(v) for v in values.values())


def _reference(x_hat, x):
    """Whole-image float64 definitions, written independently of the blocked code."""
    a, b = x_hat.double(), x.double()
    peak = float(b.max() - b.min())
    mse = float(torch.mean((a - b) ** 2))
    offsets = torch.arange(-5, 6, dtype=torch.float64)
    taps = torch.exp(-(offsets**2) / 4.5)
    taps /= taps.sum()

    def blur(v):  # valid separable filtering with conv2d, one channel at a time
        v = v.reshape(-1, 1, *v.shape[2:])
        v = torch.nn.functional.conv2d(v, taps.view(1, 1, 11, 1))
        return torch.nn.functional.conv2d(v, taps.view(1, 1, 1, 11))
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2
    cov = blur(a * b) - mu_a * mu_b
    ssim = torch.mean((2 * mu_a * mu_b + c1) * (2 * cov + c2)
                      / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)))
    m = float(b.abs().max())

    def s(v):
        return torch.asinh(v / (0.01 * m)) / math.asinh(100.0)
    asinh_mse = float(torch.mean((s(a) - s(b)) ** 2))
    energy = float(torch.mean(b**2))
    return {"psnr_db": 10 * math.log10(peak**2 / mse), "ssim": float(ssim), "mse": mse,
            "snr_db": 10 * math.log10(energy / mse),
            "asinh_psnr_db": 10 * math.log10(1 / asinh_mse)}


@pytest.mark.parametrize(("shape", "working_set"), [((1, 1, 97, 131), None),
                                                    ((2, 3, 64, 40), None),
                                                    ((2, 3, 150, 170), 2**16)])
def test_blocked_metrics_equal_the_float64_reference(shape, working_set, monkeypatch):
    if working_set:  # many blocks, as a large image gets: block edges and halos exercised
        monkeypatch.setattr(metrics, "MIN_WORKING_SET", working_set)
    generator = torch.Generator().manual_seed(4)
    x = torch.rand(shape, generator=generator)
    x_hat = x + 0.05 * torch.randn(shape, generator=generator)
    values = metrics.quality_metrics(x_hat, x)
    for key, expected in _reference(x_hat, x).items():
        assert values[key] == pytest.approx(expected, rel=1e-6, abs=0), key


def test_evaluation_needs_no_more_than_the_image_in_extra_memory():
    # 1536^2 float32: 9 MiB. The former whole-image float64 SSIM took about 11 images more.
    generator = torch.Generator().manual_seed(5)
    x = torch.rand(1, 1, 1536, 1536, generator=generator)
    x_hat = x + 0.05 * torch.randn(x.shape, generator=generator)
    image_mib = x.numel() * 4 / 2**20
    host = HostPeakMemory()
    if not host.resettable:
        pytest.skip("this kernel offers no resettable peak (/proc/self/clear_refs)")
    # One-time set-up (thread pools, allocator arenas) on the full size, so that what is
    # measured is a row's evaluation whatever ran before in this process.
    metrics.quality_metrics(x_hat, x)
    host.reset()
    before = host.current_mib()
    metrics.quality_metrics(x_hat, x)
    extra = host.read_mib() - before
    assert extra < 2 * image_mib, f"{extra:.1f} MiB extra for a {image_mib:.0f} MiB image"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_diverging_estimate_gives_nan_metrics_and_diverged(bad):
    x = torch.rand(1, 1, 24, 24, generator=torch.Generator().manual_seed(6))
    x_hat = x.clone()
    x_hat[0, 0, 3, 4] = bad
    values = metrics.quality_metrics(x_hat, x)
    assert values["diverged"] is True
    assert all(math.isnan(values[key])
               for key in ("psnr_db", "ssim", "mse", "snr_db", "asinh_psnr_db"))


def test_constant_ground_truth_has_no_psnr():
    flat = torch.full((1, 1, 16, 16), 0.5)
    with pytest.raises(ValueError, match="ground truth is constant"):
        metrics.psnr(flat * 0.9, flat)


def test_a_dataset_with_a_constant_ground_truth_is_refused_when_built(monkeypatch):
    spec = PROBLEMS["synthetic"]

    def flat_setup(**params):
        setup = spec.setup(**params)
        setup.x_true = torch.zeros_like(setup.x_true)
        return setup
    monkeypatch.setitem(PROBLEMS, "synthetic", dataclasses.replace(spec, setup=flat_setup))
    with pytest.raises(ConfigError) as error:
        setup_problem("synthetic", image_size=32, task="denoising")
    assert str(error.value).startswith("dataset 'synthetic': the ground truth is constant")
    assert "\n" not in str(error.value)
