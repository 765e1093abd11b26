"""Metrics against values computed by hand (and SSIM against scikit-image's reference)."""

import math

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from scalebench import metrics


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
    assert set(values) == {"psnr_db", "ssim", "mse", "asinh_psnr_db"}
    assert all(math.isfinite(v) for v in values.values())
