"""The clean baseline: Högbom CLEAN recovers the positions and fluxes of point sources from
their visibilities, its restored image beats the dirty image, the clean beam fit recovers a
known Gaussian, the threshold stops it, and by default the rows score its components."""

from dataclasses import replace

import pytest
import torch

from scalebench.loops.clean import CleanLoop, clean_beam_image, fit_clean_beam
from scalebench.loops.inference_parameters import CLEAN_PARAMS
from scalebench.problems import build_problem
from scalebench.rank.metrics import quality_metrics
from scalebench.rank.profiling import StepProfiler

# (row, column) -> flux: sources off centre and near the edges, 5x apart in flux
SOURCES = {(20, 40): 1.0, (40, 18): 0.5, (32, 32): 0.3, (45, 45): 0.2, (5, 58): 0.25}


@pytest.fixture(scope="module")
def point_sky():
    """A 64x64 MeerKAT observation (8 times, 2 channels, two operators) of point sources,
    without noise."""
    problem = build_problem("radio_interferometry", image_size=64, num_times=8,
                            num_channels=2, num_operators=2, noise_level=0.0)
    sky = torch.zeros_like(problem.x_true)
    for (row, column), flux in SOURCES.items():
        sky[0, 0, row, column] = flux
    with torch.no_grad():
        y = problem.physics.A(sky)
    return replace(problem, x_true=sky, y=y)


def _clean(problem, gain=0.1, threshold=0.001, components=50, iterations=10, image="restored"):
    loop = CleanLoop(problem, gain, threshold, components, StepProfiler(torch.device("cpu")),
                     image)
    dirty = loop.x.clone()
    for _ in range(iterations):
        loop.iterate()
    return loop, dirty


def test_clean_recovers_point_sources_and_beats_the_dirty_image(point_sky):
    loop, dirty = _clean(point_sky)
    model = loop.model
    for (row, column), flux in SOURCES.items():
        assert abs(float(model[row, column]) - flux) <= 0.02 * flux, (row, column)
    elsewhere = model.clone()
    for row, column in SOURCES:
        elsewhere[row, column] = 0
    assert float(elsewhere.abs().sum()) <= 1e-3
    truth = point_sky.x_true
    restored_snr = quality_metrics(loop.x, truth, 1e4)["snr_db"]
    dirty_snr = quality_metrics(dirty, truth, 1e4)["snr_db"]
    assert restored_snr > dirty_snr + 3
    assert loop.profiler.last["minor_cycle_time_s"] > 0
    assert loop.profiler.last["clean_components"] == loop.components_found > len(SOURCES)


def test_the_threshold_stops_clean(point_sky):
    loop, _ = _clean(point_sky, gain=0.5, threshold=0.05, components=1000, iterations=1)
    peak = float(point_sky.physics.A_adjoint(point_sky.y).abs().max())
    assert float(loop.residual.abs().max()) < 0.05 * peak
    found, estimate = loop.components_found, loop.x.clone()
    loop.iterate()
    assert loop.components_found == found and torch.equal(loop.x, estimate)


def test_the_clean_beam_fit_recovers_a_known_gaussian():
    coefficients = torch.tensor([0.09, 0.02, 0.05], dtype=torch.float64)
    beam = clean_beam_image((32, 32), coefficients, torch.device("cpu"))
    fitted = fit_clean_beam(beam)
    assert torch.allclose(fitted, coefficients, rtol=1e-9)
    with pytest.raises(ValueError, match="main lobe covers 1 pixel"):
        fit_clean_beam(clean_beam_image((8, 8), torch.tensor([50.0, 0.0, 50.0]),
                                        torch.device("cpu")))


def test_by_default_clean_scores_its_components_and_starts_from_a_blank_sky(point_sky):
    assert CLEAN_PARAMS["image"].default == "model"
    restored, _ = _clean(point_sky)
    loop = CleanLoop(point_sky, 0.1, 0.001, 50, StepProfiler(torch.device("cpu")))
    assert not loop.x.any()  # no component yet
    for _ in range(10):
        loop.iterate()
    # the same CLEAN, another estimate (to float rounding: the adjoint's multithreaded sums
    # differ in their last bits between two runs)
    assert torch.allclose(loop.model, restored.model, rtol=0, atol=1e-6)
    assert torch.equal(loop.x, loop.model[None, None])
    truth = point_sky.x_true
    components = quality_metrics(loop.x, truth, 1e4)["snr_db"]
    assert components > quality_metrics(restored.x, truth, 1e4)["snr_db"] + 10
