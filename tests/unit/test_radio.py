"""Radio interferometry: MeerKAT uv coverage, the visibility operator in every library, the
sky, the dirty image and a PnP reconstruction."""

import math

import numpy as np
import pytest
import torch
import yaml

from scalebench.denoisers.build import make_denoiser
from scalebench.errors import ConfigError
from scalebench.loops.inference_parameters import PNP_PARAMS, pnp_parameters
from scalebench.loops.pnp import PnPLoop, initial_estimate, operator_norm_squared
from scalebench.param_spec import resolved_parameters
from scalebench.physics.backends import resolve_backend
from scalebench.physics.radio import VisibilityOperator
from scalebench.problems import PROBLEMS, build_problem, setup_problem
from scalebench.problems.radio_interferometry import (
    antenna_positions,
    baseline_uvw,
    equatorial_baselines,
    fits_sky,
    observation_uv,
    visibility_weights,
)
from scalebench.rank.metrics import asinh_psnr, quality_metrics
from scalebench.rank.profiling import StepProfiler
from scalebench.repository import REPO
from scalebench.results.report.data import headline_metric

CPU = torch.device("cpu")


SMALL = dict(image_size=64, num_times=8, num_channels=2)


LIBRARIES = ("ducc0", "finufft", "torchkbnufft", "dft")


def _params(**overrides) -> dict:
    return resolved_parameters({**SMALL, **overrides},
                               PROBLEMS["radio_interferometry"].params)


@pytest.fixture(scope="module")
def small_uv() -> tuple[torch.Tensor, torch.Tensor]:
    """A real MeerKAT subset: 3 time steps, 1 channel, cycles per pixel at 3 pixels/beam."""
    uv = observation_uv(_params(num_times=3, num_channels=1)).reshape(-1, 2)
    uv = uv / (3.0 * np.linalg.norm(uv, axis=1).max())
    return torch.from_numpy(uv), torch.full((len(uv),), 1.0 / len(uv), dtype=torch.float64)


@pytest.fixture(scope="module")
def problem():
    return build_problem("radio_interferometry", **SMALL, noise_level=0.01)


def test_meerkat_array_has_its_published_size_and_baseline_lengths():
    enu = antenna_positions()
    assert enu.shape == (64, 3)
    lengths = np.linalg.norm(equatorial_baselines(enu), axis=1)
    assert len(lengths) == 64 * 63 // 2
    # MeerKAT's shortest and longest baselines: 29 m and 7.7 km
    assert lengths.min() == pytest.approx(29.26, abs=0.05)
    assert lengths.max() == pytest.approx(7697.6, abs=0.5)
    # ENU -> equatorial is a rotation: baseline lengths are unchanged
    first, second = np.triu_indices(64, k=1)
    assert np.allclose(lengths, np.linalg.norm(enu[second] - enu[first], axis=1))


def test_uv_count_is_baselines_times_time_steps_times_channels():
    uv = observation_uv(_params(num_times=5, num_channels=3))
    assert uv.shape == (5, 3, 2016, 2)
    problem = setup_problem("radio_interferometry", **SMALL, num_operators=3)
    counts = [problem.make_operator(k).uv.shape[0] for k in range(3)]
    assert counts == [3 * 2 * 2016, 3 * 2 * 2016, 2 * 2 * 2016]  # times 0,3,6 / 1,4,7 / 2,5


def test_uv_tracks_are_the_earth_rotation_ellipses():
    baselines = equatorial_baselines(antenna_positions())
    declination = math.radians(-30.0)
    uvw = baseline_uvw(baselines, np.linspace(-1.0, 1.0, 7), declination)
    x, y, z = baselines.T
    u, v = uvw[..., 0], uvw[..., 1]
    # u^2 + ((v - Z cos d) / sin d)^2 = X^2 + Y^2 at every hour angle
    ellipse = u**2 + ((v - z * math.cos(declination)) / math.sin(declination)) ** 2
    assert np.allclose(ellipse, x**2 + y**2, rtol=1e-9)
    assert np.allclose(np.linalg.norm(uvw, axis=-1), np.linalg.norm(baselines, axis=1))


def test_channels_scale_uv_by_frequency():
    params = _params(num_times=1, num_channels=2, frequency_mhz=1000.0, bandwidth_mhz=400.0)
    uv = observation_uv(params)[0]  # channels at 900 and 1100 MHz
    assert np.allclose(uv[1] / uv[0], 1100.0 / 900.0)


def test_visibilities_of_a_real_sky_are_hermitian(small_uv):
    uv, weights = small_uv
    x = torch.rand((1, 1, 32, 32), generator=torch.Generator().manual_seed(1))
    for library in ("ducc0", "dft"):
        direct = VisibilityOperator(uv, weights, 32, library).A(x)
        mirrored = VisibilityOperator(-uv, weights, 32, library).A(x)
        assert torch.allclose(mirrored[:, 0], direct[:, 0], atol=1e-6)  # real parts equal
        assert torch.allclose(mirrored[:, 1], -direct[:, 1], atol=1e-6)  # imaginary negated


def test_uniform_weighting_inverts_the_cell_density_conjugates_included():
    uv = np.array([[0.1, 0.1], [0.101, 0.101], [-0.1005, -0.1005], [0.3, -0.2]])
    weights = visibility_weights(uv, 32, "uniform")
    # three points (one as conjugate) share a cell: each weighs a third of the lone one
    assert weights.sum() == pytest.approx(1.0)
    assert np.allclose(weights / weights[3], [1 / 3, 1 / 3, 1 / 3, 1])
    assert np.allclose(visibility_weights(uv, 32, "natural"), 0.25)


@pytest.mark.parametrize(("library", "tolerance"),
                         [("ducc0", 1e-4), ("finufft", 1e-4), ("torchkbnufft", 2e-3)])
def test_operator_matches_the_direct_fourier_sums(library, tolerance, small_uv):
    uv, weights = small_uv
    exact = VisibilityOperator(uv, weights, 32, "dft")
    operator = VisibilityOperator(uv, weights, 32, library)
    generator = torch.Generator().manual_seed(3)
    x = torch.rand((1, 1, 32, 32), generator=generator)
    y = torch.randn((1, 2, len(uv)), generator=generator)

    def relative(a, b):
        return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))

    assert relative(operator.A(x).double(), exact.A(x.double())) < tolerance
    assert relative(operator.A_adjoint(y).double(), exact.A_adjoint(y.double())) < tolerance


def test_direct_sums_follow_the_documented_sign_and_pixel_origin():
    uv = torch.tensor([[0.1, -0.2], [0.25, 0.05]], dtype=torch.float64)
    operator = VisibilityOperator(uv, torch.ones(2, dtype=torch.float64), 32, "dft")
    x = torch.zeros((1, 1, 32, 32), dtype=torch.float64)
    x[0, 0, 16 + 3, 16 - 5] = 1.0  # m = 3 pixels, l = -5 pixels
    y = operator.A(x)[0]
    expected = torch.exp(-2j * math.pi * (uv[:, 0] * -5 + uv[:, 1] * 3))
    assert torch.allclose(torch.complex(y[0], y[1]), expected)


def test_auto_picks_ducc0_on_the_cpu():
    assert resolve_backend("auto", CPU) == "ducc0"
    assert resolve_backend("finufft", CPU) == "finufft"


def test_operator_works_with_autograd(small_uv):
    """The gradient through A is A's adjoint, bit for bit in deterministic mode (where the
    gridding runs on one thread; on several its sums come in a varying order)."""
    uv, weights = small_uv
    operator = VisibilityOperator(uv, weights, 32, "ducc0")
    x = torch.rand((1, 1, 32, 32), requires_grad=True)
    y = torch.randn((1, 2, len(uv)), generator=torch.Generator().manual_seed(4))
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        torch.sum(operator.A(x) * y).backward()
        assert torch.equal(x.grad, operator.A_adjoint(y))
    finally:
        torch.use_deterministic_algorithms(before)


def test_generation_is_deterministic_under_a_seed():
    first = build_problem("radio_interferometry", **SMALL, seed=5)
    again = build_problem("radio_interferometry", **SMALL, seed=5)
    other = build_problem("radio_interferometry", **SMALL, seed=6)
    assert torch.equal(first.x_true, again.x_true)
    assert all(torch.equal(a, b) for a, b in zip(first.y, again.y, strict=True))
    assert first.data_sha256 == again.data_sha256 != other.data_sha256
    assert not torch.equal(first.x_true, other.x_true)


def test_generated_sky_spans_several_decades(problem):
    sky = problem.x_true
    assert float(sky.min()) >= 0.0
    assert float(sky.max()) == pytest.approx(1.0, abs=0.01)
    # bright point sources over faint extended emission: peak / median above 10^3
    assert float(sky.max() / sky.median()) > 1e3


def test_dirty_image_is_the_adjoint_with_unit_point_source_response(problem):
    source = torch.zeros_like(problem.x_true)
    source[0, 0, 32, 32] = 1.0
    response = problem.physics.A_adjoint(problem.physics.A(source))
    assert float(response[0, 0, 32, 32]) == pytest.approx(1.0, rel=1e-4)
    dirty = initial_estimate(problem, "dirty", operator_norm_squared(problem))
    assert torch.allclose(dirty, problem.physics.A_adjoint(problem.y), rtol=1e-4, atol=1e-7)


def test_operator_groups_sum_to_the_whole_observation(problem):
    split = build_problem("radio_interferometry", **SMALL, num_operators=4)
    assert torch.allclose(split.physics.A_adjoint(split.physics.A(problem.x_true)),
                          problem.physics.A_adjoint(problem.physics.A(problem.x_true)),
                          atol=1e-5)


def test_pnp_improves_asinh_psnr_over_the_dirty_image(problem):
    params = resolved_parameters({"denoiser_sigma": 0.001, "init": "dirty"}, PNP_PARAMS)
    loop = PnPLoop(problem, make_denoiser(params, (1, 64, 64), CPU),
                   pnp_parameters(denoiser_sigma=params["denoiser_sigma"], init="dirty"),
                   StepProfiler(CPU))
    # The stretch covers the sky's whole dynamic range (1e4): faint emission counts, and
    # natural weighting converges slowly (about +2.7 dB in 20 iterations).
    start = asinh_psnr(loop.x, problem.x_true, problem_dynamic_range())
    for _ in range(20):
        loop.iterate()
    assert asinh_psnr(loop.x, problem.x_true, problem_dynamic_range()) >= start + 2.0


def problem_dynamic_range() -> float:
    return PROBLEMS["radio_interferometry"].params["dynamic_range"].default


@pytest.fixture(scope="module")
def example_sky():
    """The sky of configs/examples/radio_interferometry.yml (its image size, the generator's
    seed and dynamic range), seen through fewer visibilities (8 time steps, 2 channels) with
    the example's uniform weighting, so that the test stays short."""
    example = yaml.safe_load((REPO / "configs/examples/radio_interferometry.yml").read_text())
    (params,) = [entry["radio_interferometry"] for entry in example["dataset"]]
    size = params["image_size"]
    assert "uniform" in params["weighting"]
    return build_problem("radio_interferometry", image_size=size, num_times=8, num_channels=2,
                         weighting="uniform", noise_level=params["noise_level"])


def _headline(estimate: torch.Tensor, problem) -> float:
    column, _ = headline_metric("radio_interferometry")
    return quality_metrics(estimate, problem.x_true,
                           problem_dynamic_range())[column.removeprefix("objective_")]


def test_a_blank_sky_cannot_win_the_radio_headline_metric(example_sky):
    # The headline is the reconstruction SNR: exactly 0 dB for the all-zero image, where
    # PSNR and SSIM give a blank sky nearly the scores of a reconstruction.
    params = resolved_parameters({"denoiser": "tv", "denoiser_sigma": 0.001, "init": "dirty"},
                                 PNP_PARAMS)
    shape = tuple(example_sky.x_true.shape[1:])
    loop = PnPLoop(example_sky, make_denoiser(params, shape, CPU),
                   pnp_parameters(denoiser_sigma=params["denoiser_sigma"], init="dirty"),
                   StepProfiler(CPU))
    zero = _headline(torch.zeros_like(example_sky.x_true), example_sky)
    dirty = _headline(loop.x, example_sky)
    for _ in range(10):
        loop.iterate()
    tv = _headline(loop.x, example_sky)
    assert zero == 0.0
    assert tv > zero + 0.5, (zero, tv)
    # PnP with a working denoiser (TV) scores above the dirty image it starts from.
    assert tv > dirty + 6.0, (dirty, tv)


def test_the_scaled_back_projection_beats_a_blank_sky_where_the_dirty_image_does_not(
        example_sky):
    # The dirty image is in sky per beam: extended emission is multiplied by the beam's
    # area, so it scores below a blank sky on SNR. The least-squares scale of the same
    # back-projection, A^T y / ||A||^2 (init 'adjoint'), scores above it.
    zero = _headline(torch.zeros_like(example_sky.x_true), example_sky)
    adjoint = initial_estimate(example_sky, "adjoint", operator_norm_squared(example_sky))
    dirty = initial_estimate(example_sky, "dirty", operator_norm_squared(example_sky))
    assert _headline(adjoint, example_sky) > zero > _headline(dirty, example_sky)


def test_fits_sky_is_read_cropped_and_resampled(tmp_path):
    from astropy.io import fits

    data = np.arange(40 * 48, dtype=np.float32).reshape(1, 1, 40, 48)  # Stokes, freq, y, x
    data[0, 0, 5, 10] = np.nan
    path = tmp_path / "sky.fits"
    fits.PrimaryHDU(data).writeto(path)
    same = fits_sky(str(path), 40)
    assert same.shape == (1, 1, 40, 40)
    assert torch.equal(same[0, 0], torch.from_numpy(np.nan_to_num(data[0, 0, :, 4:44])))
    assert fits_sky(str(path), 32).shape == (1, 1, 32, 32)
    built = setup_problem("radio_interferometry", **{**SMALL, "image_size": 32},
                          sky_fits=str(path))
    assert built.x_true.shape == (1, 1, 32, 32) and torch.isfinite(built.x_true).all()


@pytest.mark.parametrize(("params", "message"), [
    (dict(declination_deg=60.0), "below MeerKAT's horizon during the track"),
    (dict(image_size=65), "image_size must be even, got 65"),
    (dict(num_operators=9), "num_operators \\(9\\) must not exceed num_times \\(8\\)"),
    (dict(hour_angle_start=2.0, hour_angle_end=1.0), "must exceed hour_angle_start"),
    (dict(sky_fits="/no/such/sky.fits"), "sky_fits: no such file: /no/such/sky.fits"),
    (dict(backend="nfft"), "'backend' must be one of 'auto', 'ducc0', 'finufft'"),
])
def test_bad_observation_is_refused_in_one_line(params, message):
    with pytest.raises(ConfigError, match=message) as error:
        setup_problem("radio_interferometry", **{**SMALL, **params})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("content", [b"", b"SIMPLE  = not a FITS header" * 40])
def test_a_file_that_is_not_fits_is_refused_in_one_line(tmp_path, content):
    path = tmp_path / "sky.fits"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"sky_fits: {path} is not a readable FITS file") \
            as error:
        setup_problem("radio_interferometry", **SMALL, sky_fits=str(path))
    assert "\n" not in str(error.value)


def test_adjoint_is_bit_reproducible_in_deterministic_mode():
    uv = observation_uv(_params(num_times=8, num_channels=4)).reshape(-1, 2)
    uv = torch.from_numpy(uv / (3.0 * np.linalg.norm(uv, axis=1).max()))
    operator = VisibilityOperator(uv, torch.ones(len(uv), dtype=torch.float64), 128, "ducc0")
    y = torch.randn((1, 2, len(uv)), generator=torch.Generator().manual_seed(7))
    threads, previous = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        torch.set_num_threads(2)
        torch.use_deterministic_algorithms(True, warn_only=True)
        images = [operator.A_adjoint(y) for _ in range(4)]
    finally:
        torch.use_deterministic_algorithms(previous)
        torch.set_num_threads(threads)
    assert all(torch.equal(images[0], image) for image in images[1:])


def test_a_missing_operator_library_is_named(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "finufft" else real(name, *args))
    with pytest.raises(ConfigError, match="backend 'finufft' needs the finufft package"):
        setup_problem("radio_interferometry", **SMALL, backend="finufft")
