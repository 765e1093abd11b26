"""The memory model of scalebench capacity in-process: the fit recovers known terms, the
workspace term of chunked operators, the larger of two phases, phases within their noise,
the largest fitting size, memory amounts."""


import re
from dataclasses import replace

import pytest
import yaml

from scalebench.errors import ConfigError, ScalebenchError
from scalebench.launch.slurm_requests import memory_bytes
from scalebench.planning.capacity.allocator import MMAP_THRESHOLD_MAX
from scalebench.planning.capacity.calibration import (
    REGIME_MARGIN,
    largest_fitting,
    probe_sizes,
    regime_size,
)
from scalebench.planning.capacity.command import answer
from scalebench.planning.capacity.configuration import Configuration, configuration_key
from scalebench.planning.capacity.model import (
    GROWTH_FLOOR_BYTES,
    CalibrationPoint,
    MemoryModel,
    Sizes,
    fit,
)
from scalebench.rank.names import HOST_PEAK_LIFETIME, HOST_PEAK_SINCE_RESET

MIB = 2**20


def iterations_model(coefficients, scale=0.0, exponent=0.0, points=()) -> MemoryModel:
    """A model whose iterations have ``coefficients`` and whose set-up is their baseline."""
    setup = (coefficients[0],) + (0.0,) * (len(coefficients) - 1)
    return MemoryModel((setup, tuple(coefficients)), scale, exponent, tuple(points))


def point_at(configuration, size, setup_peak, iterations_peak, measurements=0):
    counts = configuration.sizes(size, 1, None)
    return CalibrationPoint(size, counts.unknowns, measurements, counts.denoised,
                            (round(setup_peak), round(iterations_peak)))


def superres(**solver) -> Configuration:
    return Configuration("multiframe_superres", {"num_frames": 4, "factor": 4}, "pnp",
                         {"device": "cpu", **solver}, "image_size")


def points_of(coefficients, sizes, exponent=2.0, scale=3.0):
    """Calibration points of a super-resolution configuration under a known model."""
    model = iterations_model(coefficients, scale, exponent)
    configuration, points = superres(), []
    for size in sizes:
        counts = configuration.sizes(size, 1, model)
        peak = round(model.predict(counts))
        points.append(CalibrationPoint(size, counts.unknowns, round(counts.measurements),
                                       counts.denoised, (peak, peak)))
    return points


def test_fit_recovers_the_terms_of_peaks_it_is_given():
    # Super-resolution without tiling: unknowns and denoised pixels are one column twice
    # over, so their coefficients are recovered as a sum.
    points = points_of((400 * MIB, 400.0, 120.0, 0.0, 0.0), [32, 64, 96, 128])
    model = fit(points)
    assert model.measurement_exponent == pytest.approx(2.0, rel=1e-9)
    assert model.measurement_scale == pytest.approx(3.0, rel=1e-6)
    for coefficients in model.phase_coefficients:
        assert coefficients[0] == pytest.approx(400 * MIB, rel=1e-6)
        assert min(coefficients) >= 0
    for point in points:
        assert model.predict(point.sizes) == pytest.approx(point.peak_bytes, rel=1e-9)


def torch_ct() -> Configuration:
    return Configuration("tomography_2d", {"num_angles": 45, "projector": "torch"}, "pnp",
                         {"device": "cpu"}, "image_size")


def test_the_torch_projectors_workspace_grows_to_its_chunk_limit_then_stays():
    from scalebench.physics.parallel_beam import CHUNK_ELEMENTS, workspace_elements

    # Below the limit every angle is in one chunk: the adjoint's 4 elements per pixel.
    assert workspace_elements(64, 45) == 45 * 4 * 64 * 64
    assert torch_ct().workspace(64) == 45 * 4 * 64 * 64
    assert torch_ct().sizes(64, 1, None).workspace == 45 * 4 * 64 * 64
    # Above it, chunks of whole angles stay within the limit; one angle at the least.
    for size in (1024, 2048):
        assert CHUNK_ELEMENTS // 2 < workspace_elements(size, 45) <= CHUNK_ELEMENTS
    assert workspace_elements(4096, 45) == 4 * 4096 * 4096 > CHUNK_ELEMENTS
    assert workspace_elements(256, 45, chunk_elements=2**20) <= 2**20
    # ASTRA's projector and the denoiser solver have no chunk term.
    astra = Configuration("tomography_2d", {"projector": "astra"}, "pnp", {}, "image_size")
    assert astra.workspace(256) == 0
    assert Configuration("tomography_2d", {"projector": "torch"}, "denoiser", {},
                         "image_size").workspace(256) == 0


def test_probes_with_cut_chunks_let_the_fit_predict_past_the_chunk_limit():
    """Peaks made by a known model with a workspace term: probes at the default limit alone
    grow the workspace like the unknowns, so the fit may give its bytes to the unknowns and
    overestimate large sizes; with the cut-chunk probes it predicts them."""
    configuration = torch_ct()
    truth = iterations_model((1200 * MIB, 20.0, 8.0, 0.0, 12.0), 0.0, 1.0)

    def point(size, limit=None):
        counts = configuration.sizes(size, 1, None)
        workspace = configuration.workspace(size, limit)
        measurements = 45 * (size * 3 // 2)  # the peaks below do not depend on the law
        peak = truth.predict(Sizes(counts.unknowns, measurements, counts.denoised, workspace))
        return CalibrationPoint(size, counts.unknowns, measurements, counts.denoised,
                                (round(peak), round(peak)), workspace)

    sizes = [64, 128, 192, 256]
    cut = [point(size, configuration.workspace(size) // 4) for size in sizes[-2:]]
    model = fit([point(size) for size in sizes] + cut)
    for size in (1024, 2048):
        expected = point(size).peak_bytes
        counts = configuration.sizes(size, 1, model)
        counts = Sizes(counts.unknowns, 45 * (size * 3 // 2), counts.denoised, counts.workspace)
        assert model.predict(counts) == pytest.approx(expected, rel=1e-3)


def test_fit_needs_three_sizes():
    with pytest.raises(ValueError, match="three sizes"):
        fit(points_of((1.0, 1.0, 1.0, 1.0, 0.0), [32, 64]))


def test_largest_fitting_size_fits_and_the_next_valid_size_does_not():
    configuration = superres()
    model = iterations_model((300 * MIB, 64.0, 16.0, 0.0, 0.0), 0.1875, 2.0)
    budget = 2 * 2**30
    size = largest_fitting(configuration, model, 1, budget)
    assert size % 4 == 0  # super-resolution's images are multiples of the factor
    assert model.predict(configuration.sizes(size, 1, model)) <= budget
    assert model.predict(configuration.sizes(size + 4, 1, model)) > budget
    assert model.dominant(configuration.sizes(size, 1, model)) == "per unknown"
    assert largest_fitting(configuration, model, 1, 200 * MIB) is None


def test_ranks_holding_a_share_of_the_operators_fit_a_larger_size():
    model = iterations_model((100 * MIB, 0.0, 64.0, 0.0, 0.0), 0.1875, 2.0)
    alone = largest_fitting(superres(), model, 1, 2**30)
    split = largest_fitting(superres(distribute_physics=True), model, 4, 2**30)
    assert split > alone
    assert largest_fitting(superres(), model, 4, 2**30) == alone  # every rank holds it all


def test_a_calibration_that_does_not_grow_gives_no_largest_size():
    from scalebench.planning.capacity.command import answer

    points = tuple(CalibrationPoint(size, size * size, 0, size * size, (2**30, 2**30))
                   for size in (32, 64, 96, 128))
    flat = iterations_model((2**30, 0.0, 0.0, 0.0, 0.0), points=points)
    line = answer(superres(), "flat", 1, 4 * 2**30, flat, False)
    assert line.largest_size is None
    assert line.text() == ("flat  1 rank: no answer: the probed peaks do not grow with "
                           "image_size; calibrate at larger sizes (--calibration-size) "
                           "(calibrated at 32, 64, 96, 128; calibration 0 s)")


def test_probe_sizes_are_valid_and_below_the_largest():
    assert probe_sizes(superres(), 128) == [32, 64, 96, 128]
    assert probe_sizes(superres(), 70) == [16, 32, 52, 68]


def denoising(**solver) -> Configuration:
    return Configuration("synthetic", {"task": "denoising"}, "denoiser",
                         {"denoiser": "dncnn", "pretrained": "none", "device": "cpu", **solver},
                         "image_size")


def test_a_network_on_the_cpu_is_probed_where_its_feature_maps_leave_the_heap():
    """DnCNN's 64 float32 maps of 444^2 pixels are 48 MiB, 1.5 times glibc's largest mmap
    threshold; at 443^2 they are below that."""
    configuration = denoising()
    size = regime_size(configuration, [64, 128, 192, 256])
    assert size == 444
    assert configuration.feature_map_bytes(size) == 64 * 444**2 * 4
    assert configuration.feature_map_bytes(size) >= REGIME_MARGIN * MMAP_THRESHOLD_MAX > \
        configuration.feature_map_bytes(size - 1)
    assert regime_size(configuration, [128, 512]) is None  # a probe is there already


def test_the_regime_probe_follows_the_weights_the_denoiser_runs_and_the_size_rules():
    # The bundled DnCNN has 32 feature channels: its maps reach the margin at twice the pixels.
    assert regime_size(denoising(pretrained="bundled"), [64]) == 628
    # DRUNet takes sides that are multiples of 8: the first valid size at or above 444.
    assert regime_size(denoising(denoiser="drunet"), [64]) == 448


@pytest.mark.parametrize("solver", [
    {"denoiser": "tv"},  # no feature maps
    {"tile_size": 128, "tile_overlap": 20, "tiles_per_batch": 1},  # tiles keep maps at 7 MiB
    {"device": "cuda"},  # the caching allocator, not glibc's heap
])
def test_no_regime_probe_where_the_maps_never_leave_the_heap(solver):
    assert regime_size(denoising(**solver), [64, 128]) is None


@pytest.mark.parametrize(("text", "bare_unit", "expected"), [
    ("80GiB", "B", 80 * 2**30), ("512MiB", "B", 512 * MIB), ("1.5G", "B", int(1.5 * 2**30)),
    ("1073741824", "B", 2**30), ("64000", "M", 64000 * MIB), ("64G", "M", 64 * 2**30),
    ("100B", "M", 100)])
def test_memory_amounts_parse_by_one_rule_for_budgets_and_slurm(text, bare_unit, expected):
    assert memory_bytes(text, "--memory", bare_unit) == expected


@pytest.mark.parametrize("text", ["lots", "0G", "-1G", "1.5Q", "G"])
def test_a_memory_amount_that_is_not_one_is_a_one_line_error(text):
    with pytest.raises(ConfigError, match=f"--memory: '{re.escape(text)}' is not a memory "
                                          f"size: give a positive number"):
        memory_bytes(text, "--memory", "B")


def _synthetic_probes(monkeypatch, tmp_path, peak_of_size, setup_peak_of_size=None):
    """Probes whose iterations' peak is ``peak_of_size(size)`` and whose set-up's is
    ``setup_peak_of_size(size)`` (default: the same; the calibration's rules, not the probes,
    are under test here; tests/integration/test_capacity.py runs real ones)."""
    from scalebench.planning.capacity import calibration

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    probed = []

    def probe_point(configuration, size, chunk_elements=None):
        probed.append(size)
        counts = configuration.sizes(size, 1, None)
        setup = (setup_peak_of_size or peak_of_size)(size)
        return CalibrationPoint(size, counts.unknowns, 0, counts.denoised,
                                (setup, peak_of_size(size)))
    monkeypatch.setattr(calibration, "probe_point", probe_point)
    return calibration, probed


def test_a_flat_calibration_is_extended_until_its_peaks_grow(monkeypatch, tmp_path):
    calibration, probed = _synthetic_probes(
        monkeypatch, tmp_path, lambda size: 2**30 + max(size - 200, 0) * 8 * MIB)
    model, cached = calibration.calibrate(superres(), [32, 64, 96, 128])
    assert probed == [32, 64, 96, 128, 256] and not cached
    assert model.grows


def test_extension_stops_at_eight_times_the_side(monkeypatch, tmp_path):
    calibration, probed = _synthetic_probes(monkeypatch, tmp_path, lambda size: 2**30)
    model, _ = calibration.calibrate(superres(), [32, 64, 96, 128])
    assert probed == [32, 64, 96, 128, 256, 512, 1024]
    assert not model.grows


def test_configurations_differing_in_their_algorithm_alone_are_one_family():
    from scalebench.loops.inference_parameters import DENOISER_PARAMS, PNP_PARAMS
    from scalebench.planning.capacity.configuration import ALGORITHM_PARAMS, family_key

    assert set(ALGORITHM_PARAMS) <= set(PNP_PARAMS) - set(DENOISER_PARAMS)
    pgd = family_key(superres(algorithm="pgd"))
    assert family_key(superres(algorithm="fista", step_size=0.5, fista_a=4.0)) == pgd
    assert family_key(superres(algorithm="drs", relaxation=0.5)) == pgd
    for other in (superres(denoiser="dncnn"), superres(cg_max_iter=5), superres(init="zeros"),
                  replace(superres(), dataset_params={"num_frames": 8, "factor": 4})):
        assert family_key(other) != pgd
    assert family_key(denoising()) is None


def test_a_family_calibrated_once_lends_its_small_probes_to_each_other_algorithm(
        monkeypatch, tmp_path):
    """The first algorithm probes every size; each other algorithm of its family probes
    its two largest and borrows the rest from that first one (never from a borrower), and
    says so on its line; another denoiser is another family and probes every size."""
    calibration, probed = _synthetic_probes(
        monkeypatch, tmp_path, lambda size: 2**30 + 600 * size * size)
    sizes = [32, 64, 96, 128]
    calibration.calibrate(superres(algorithm="pgd"), sizes)
    assert probed == sizes
    for algorithm in ("fista", "hqs"):
        probed.clear()
        model, cached = calibration.calibrate(superres(algorithm=algorithm), sizes)
        assert probed == [96, 128] and not cached
        assert [(point.size, point.shared_from) for point in model.points] == \
            [(32, "pgd"), (64, "pgd"), (96, ""), (128, "")]
    probed.clear()
    model, cached = calibration.calibrate(superres(algorithm="fista"), sizes)
    assert cached and probed == []
    line = answer(superres(algorithm="fista"), "fista", 1, 2**31, model, cached)
    assert (line.shared_with, line.shared_probes) == (["pgd"], 2)
    assert "2 of its 4 probes shared with pgd" in line.calibration_text()
    probed.clear()
    calibration.calibrate(superres(algorithm="fista", denoiser="dncnn",
                                   pretrained="none"), sizes)
    assert probed[:4] == sizes


# Radio's phases as measured on the CPU (docs/performance.md): a set-up peak flat within
# +-15 MiB of noise up to 512, iterations growing from below it by about 150 B per unknown.
RADIO_SETUP_NOISE = {64: 1091, 128: 1070, 192: 1102, 256: 1075}


def radio_like_points(sizes):
    configuration = superres()
    return [point_at(configuration, size, RADIO_SETUP_NOISE.get(size, 1090) * MIB,
                     1040 * MIB + 150 * size * size) for size in sizes]


def test_the_peak_is_the_larger_phase_and_the_iterations_take_over_past_the_set_up():
    model = fit(radio_like_points([64, 128, 192, 256]))
    configuration = superres()
    small, large = configuration.sizes(128, 1, model), configuration.sizes(1024, 1, model)
    assert model.dominant_phase(small) == "set-up"
    assert model.predict(small) == pytest.approx(1102 * MIB)  # the set-up's largest peak
    assert model.dominant_phase(large) == "iterations"
    assert model.predict(large) == pytest.approx(1040 * MIB + 150 * 1024**2, rel=1e-6)
    terms = model.terms(large)  # the iterations': unknowns and denoised pixels, one column
    assert terms["process baseline"] == pytest.approx(1040 * MIB, rel=1e-6)
    assert terms["per unknown"] + terms["per denoised pixel"] == \
        pytest.approx(150 * 1024**2, rel=1e-6)
    assert model.baseline_bytes == pytest.approx(1102 * MIB)


def test_a_phase_whose_growth_is_within_its_noise_is_held_at_its_largest_peak():
    """Set-up peaks of 1091, 1070, 1102 and 1110 MiB at 64-256: the line through them grows
    by 29 MiB over the probes, more than the floor, but less than four times their scatter
    about it (10 MiB), so the set-up is held flat instead of carrying the scatter to large
    sizes. The same growth without scatter is a size term."""
    sizes = [64, 128, 192, 256]
    setup = [RADIO_SETUP_NOISE[size] * MIB for size in sizes]
    setup[-1] = 1110 * MIB
    points = [point_at(superres(), size, peak, 1040 * MIB + 150 * size * size)
              for size, peak in zip(sizes, setup, strict=True)]
    model = fit(points)
    assert model.phase_coefficients[0] == (1110 * MIB, 0.0, 0.0, 0.0, 0.0)
    straight = [point_at(superres(), size, 1000 * MIB + 500 * size * size, 1040 * MIB)
                for size in sizes]
    setup_peak = fit(straight).phase_peaks(superres().sizes(512, 1, None))["set-up"]
    assert setup_peak == pytest.approx(1000 * MIB + 500 * 512**2, rel=1e-6)
    assert 500 * (256**2 - 64**2) > GROWTH_FLOOR_BYTES


def test_iterations_growing_below_a_flat_set_up_need_no_extension(monkeypatch, tmp_path):
    calibration, probed = _synthetic_probes(
        monkeypatch, tmp_path, lambda size: 1040 * MIB + 300 * size * size,
        lambda size: RADIO_SETUP_NOISE[size] * MIB)
    model, _ = calibration.calibrate(superres(), [64, 128, 192, 256])
    assert probed == [64, 128, 192, 256]
    assert model.grows
    assert max(point.peak_bytes for point in model.points) == 1102 * MIB  # set-up's all along
    assert calibration.largest_fitting(superres(), model, 1, 2 * 2**30) == \
        4 * int(((2 * 2**30 - 1040 * MIB) / 300) ** 0.5 // 4)


def test_a_size_parameter_that_leaves_the_unknowns_alone_still_grows():
    """Sized by num_angles, every probe has the same unknowns: the growth is the fit's range
    over the probes, not its difference between two probes picked by their unknowns."""
    points = [CalibrationPoint(angles, 256**2, 256 * angles, 256**2,
                               (1000 * MIB, 1000 * MIB + 1000 * 256 * angles))
              for angles in (96, 32, 128, 64)]
    model = fit(points)
    assert model.phase_coefficients[1][2] == pytest.approx(1000, rel=1e-6)
    assert model.phase_coefficients[0] == (1000 * MIB, 0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("resettable", [True, False])
def test_a_probe_says_when_its_iterations_peak_is_the_lifetime_peak(monkeypatch, tmp_path,
                                                                    resettable):
    """The probe's own run, in this process; without /proc/self/clear_refs (macOS, some
    sandboxes) the iterations' host peak is the process's lifetime peak, and the probe says
    so. Its settings end with it: the process runs with a run's again."""
    from scalebench.planning.capacity.probe import run_probe
    from scalebench.rank import profiling
    from scalebench.rank.settings import ProcessSettings, process_settings

    if not resettable:
        monkeypatch.setattr(profiling, "_CLEAR_REFS", tmp_path / "absent" / "clear_refs")
        import torch

        high_water = torch.ones(64 * 2**20)  # 256 MiB above now: no 16x16 run's step gets there
        del high_water
    # Deterministic mode's switches are process-wide: left off here, as this worker has them.
    result = run_probe("tomography_2d", {"image_size": 16, "num_angles": 8}, "pnp",
                       {"denoiser": "tv", "device": "cpu", "deterministic": False},
                       iterations=2)
    setup, iterations = result.host_peaks_bytes
    assert process_settings() == ProcessSettings()
    assert result.host_method == (HOST_PEAK_SINCE_RESET if resettable else HOST_PEAK_LIFETIME)
    assert setup > 0 and iterations > 0
    # Below the process's high-water mark, the iterations' own peak is hidden.
    assert result.iterations_peak_bounded("cpu") is not resettable
    assert not result.iterations_peak_bounded("cuda")


@pytest.mark.parametrize(("mapped", "whole"), [(False, False), (True, False), (True, True)])
def test_a_probe_cuts_its_repeated_steps_only_where_its_image_is_mapped(monkeypatch, mapped,
                                                                        whole):
    """Heap regime: the norm's 10 applications and TV's 50 inner iterations, whose repeats
    fragment the heap; mapped: 3 of each, whose repeats hold nothing more; a verification's
    whole run: the norm to its tolerance and every TV iteration, as a run. No profiled step
    resets the peaks while the probe runs, and every setting ends with it."""
    from scalebench.denoisers import modules
    from scalebench.denoisers.kinds import tv
    from scalebench.planning.capacity import probe
    from scalebench.rank import operator_norm
    from scalebench.rank.settings import ProcessSettings, process_settings

    monkeypatch.setattr(probe, "image_mapped", lambda values, device: mapped)
    seen = []  # (what ran, the settings in force)
    lanczos = operator_norm.lanczos_from

    def recorded_lanczos(*args, **kwargs):
        seen.append(("norm", process_settings()))
        return lanczos(*args, **kwargs)

    class RecordedTV(modules.IndependentTV):
        def __init__(self, iterations: int) -> None:
            super().__init__(iterations)
            seen.append((f"tv {iterations}", process_settings()))

    monkeypatch.setattr(operator_norm, "lanczos_from", recorded_lanczos)
    monkeypatch.setattr(modules, "IndependentTV", RecordedTV)
    probe.run_probe("tomography_2d", {"image_size": 16, "num_angles": 8}, "pnp",
                    {"denoiser": "tv", "device": "cpu", "deterministic": False}, iterations=1,
                    whole=whole)
    cut = mapped and not whole
    applications = probe.MAPPED_REPETITIONS if cut else \
        operator_norm.MAX_ITERATIONS if whole else probe.NORM_APPLICATIONS
    assert sorted(what for what, _ in seen) == \
        ["norm", f"tv {probe.MAPPED_REPETITIONS if cut else tv.ITERATIONS}"]
    assert {settings for _, settings in seen} == {ProcessSettings(
        step_peak_resets=False, norm_applications=applications,
        tv_iterations=probe.MAPPED_REPETITIONS if cut else None)}
    assert process_settings() == ProcessSettings()


def test_an_image_is_mapped_from_its_margin_over_the_threshold_on_the_host_only():
    from scalebench.planning.capacity.allocator import (
        FLOAT32_BYTES,
        IMAGE_MARGIN,
        glibc_host,
        image_mapped,
    )

    if not glibc_host("cpu"):
        pytest.skip("the image's regime is glibc's")
    first = int(IMAGE_MARGIN * MMAP_THRESHOLD_MAX / FLOAT32_BYTES) + 1
    assert image_mapped(first, "cpu") and not image_mapped(first - 2, "cpu")
    assert not image_mapped(100 * first, "cuda")


def test_iterations_peaks_hidden_by_the_set_up_are_left_out_of_the_fit_where_they_can_be():
    from scalebench.planning.capacity.command import answer

    configuration = superres()

    def probes(sizes, setup):
        """Lifetime readings of a run whose iterations take 1 GiB + 4 KiB per pixel and
        whose set-up takes ``setup``: the iterations' own is hidden where it is below."""
        points = []
        for size in sizes:
            own = 2**30 + size * size * 4096
            point = point_at(configuration, size, setup, max(setup, own))
            points.append(CalibrationPoint(**{**point.__dict__,
                                              "iterations_peak_bounded": own <= setup}))
        return points

    exact = fit([point_at(configuration, size, 2**30, 2**30 + size * size * 4096)
                 for size in (32, 64, 96, 128, 160)])
    # The set-up (1.05 GiB) hides the iterations at 32 and 64: the three larger probes decide.
    hidden = fit(probes((32, 64, 96, 128, 160), 2**30 + 64 * 64 * 4096))
    assert not hidden.approximate
    assert hidden.phase_coefficients[1] == pytest.approx(exact.phase_coefficients[1])
    # Hidden at three of five sizes: fitted to all, and said to be approximate.
    rough = fit(probes((32, 64, 96, 128, 160), 2**30 + 96 * 96 * 4096))
    assert rough.approximate
    # Cached entries written before the flag existed read as known peaks.
    entry = rough.to_json()
    for point in entry["points"]:
        del point["iterations_peak_bounded"]
    assert not MemoryModel.from_json(entry).approximate
    assert MemoryModel.from_json(rough.to_json()).approximate
    lines = [answer(configuration, "sr", 1, 4 * 2**30, model, False)
             for model in (hidden, rough)]
    assert [line.approximate for line in lines] == [False, True]
    assert "approximate" not in lines[0].text()
    assert "\n    approximate: this system lets no process reset its peak memory" in \
        lines[1].text()


# Refinement (scalebench.planning.capacity.refine): which sizes it probes next, when it
# stops, and what it caches. The probes are synthetic (``_synthetic_probes``): the rules are
# under test; tests/integration/test_capacity.py runs real ones.

@pytest.fixture(autouse=True)
def image_regime_apart(request, monkeypatch):
    """The refinement tests model the allocator's regimes by synthetic peaks of their own;
    the image's regime (refine.mapped_size) is under test only where a test's name says so."""
    if "image" not in request.node.name:
        from scalebench.planning.capacity import refine

        monkeypatch.setattr(refine, "mapped_size", lambda configuration: None)


def knee_peak(configuration, knee_unknowns, small=800.0, large=200.0):
    """A peak of 1 GiB plus ``small`` bytes per unknown up to ``knee_unknowns`` and ``large``
    beyond: the heap below glibc's mmap threshold, mapped blocks above it."""
    def peak(size):
        count = configuration.sizes(size, 1, None).unknowns
        return round(2**30 + small * min(count, knee_unknowns) +
                     large * max(count - knee_unknowns, 0))
    return peak


def test_a_round_probes_a_quarter_and_half_of_the_answers_unknowns_within_the_budget():
    from scalebench.planning.capacity.calibration import usable_budget
    from scalebench.planning.capacity.refine import next_sizes, unknowns

    configuration = superres()
    model = iterations_model((2**30, 400.0, 0.0, 0.0, 0.0), points=points_of(
        (2**30, 400.0, 0.0, 0.0, 0.0), [32, 64, 96, 128], scale=0.0))
    budget = 4 * 2**30
    answer = largest_fitting(configuration, model, 1, usable_budget(model, budget))
    quarter, half = next_sizes(configuration, model, 1, budget, None)
    for size, fraction in ((quarter, 0.25), (half, 0.5)):
        assert configuration.valid(size)
        # the largest valid size at or below the fraction of the answer's unknowns
        assert unknowns(configuration, size) <= fraction * unknowns(configuration, answer) < \
            unknowns(configuration, size + 4)
    # What this machine can hold caps them: at 1.5 GiB available, a probe may take 1.2 GiB.
    capped = next_sizes(configuration, model, 1, budget, int(1.5 * 2**30))
    assert capped == [largest_fitting(configuration, model, 1, 0.8 * 1.5 * 2**30)]
    # A size within 15 % of a probed size's unknowns is that probe: not taken again.
    probed = replace(model, points=model.points + tuple(points_of(
        (2**30, 400.0, 0.0, 0.0, 0.0), [half + 8], scale=0.0)))
    assert next_sizes(configuration, probed, 1, budget, None) == [quarter]
    # Nothing fits, or a flat model that calls every size fitting: no round.
    assert next_sizes(configuration, model, 1, 2**30, None) == []
    flat = iterations_model((2**30, 0.0, 0.0, 0.0, 0.0), points=model.points)
    assert next_sizes(configuration, flat, 1, budget, None) == []


def test_a_round_probes_at_most_growth_times_the_largest_probes_unknowns():
    """Peaks that barely grow over the probes (CT's first calibration, 32-256) put the answer
    thousands of times past them: the round probes GROWTH times the largest probe's unknowns,
    once, not a quarter of that answer; probed there, the next round reaches the answer."""
    from scalebench.planning.capacity.calibration import usable_budget
    from scalebench.planning.capacity.refine import GROWTH, next_sizes, unknowns

    configuration, budget = superres(), 4 * 2**30
    flat = (2**30, 0.05, 0.0, 0.0, 0.0)
    model = iterations_model(flat, points=points_of(flat, [32, 64, 96, 128], scale=0.0))
    answer = largest_fitting(configuration, model, 1, usable_budget(model, budget))
    assert unknowns(configuration, answer) > 1000 * GROWTH * unknowns(configuration, 128)
    size, = next_sizes(configuration, model, 1, budget, None)
    assert unknowns(configuration, size) <= GROWTH * unknowns(configuration, 128) < \
        unknowns(configuration, size + 4)
    nearer = replace(model, points=model.points + tuple(points_of(flat, [size], scale=0.0)))
    assert next_sizes(configuration, nearer, 1, budget, None)[-1] > size


def test_a_round_skips_its_quarter_where_a_probe_lies_between_it_and_its_half():
    """CT at 3 GiB probed 1523 and 2153, then planned 1800 and 2546: 2153, between the two,
    is the round's second point near the answer, so only the half is probed. A probe below
    the quarter, or at the half itself, leaves the quarter to probe."""
    from scalebench.planning.capacity.calibration import usable_budget
    from scalebench.planning.capacity.refine import DISTINCT, next_sizes, unknowns

    configuration, budget = superres(), 4 * 2**30
    truth = (2**30, 400.0, 0.0, 0.0, 0.0)
    base = points_of(truth, [32, 64, 96, 128], scale=0.0)
    model = iterations_model(truth, points=base)
    quarter, half = next_sizes(configuration, model, 1, budget, None)
    answer = largest_fitting(configuration, model, 1, usable_budget(model, budget))

    def with_probe_at(fraction):
        side = 4 * round((fraction * unknowns(configuration, answer) / 3) ** 0.5 / 4)
        return replace(model, points=tuple(base + points_of(truth, [side], scale=0.0))), side

    between, side = with_probe_at(0.37)
    assert unknowns(configuration, quarter) < unknowns(configuration, side) < \
        (1 - DISTINCT) * unknowns(configuration, half)
    assert next_sizes(configuration, between, 1, budget, None) == [half]
    below, side = with_probe_at(0.15)
    assert unknowns(configuration, side) < (1 - DISTINCT) * unknowns(configuration, quarter)
    assert next_sizes(configuration, below, 1, budget, None) == [quarter, half]
    at_half, _ = with_probe_at(0.5)
    assert next_sizes(configuration, at_half, 1, budget, None) == [quarter]


def test_ranks_sharing_the_operators_refine_by_one_rank_probes_that_fit_the_budget():
    from scalebench.planning.capacity.calibration import usable_budget
    from scalebench.planning.capacity.refine import next_sizes

    # probed up to 512: GROWTH (128x its unknowns) lies past what one rank fits
    model = iterations_model((2**30, 0.0, 400.0, 0.0, 0.0), 0.75, 2.0, points_of(
        (2**30, 0.0, 400.0, 0.0, 0.0), [32, 64, 96, 128, 512], scale=0.75))
    configuration, budget = superres(distribute_physics=True), 4 * 2**30
    one_rank = largest_fitting(configuration, model, 1, usable_budget(model, budget))
    sizes = next_sizes(configuration, model, 4, budget, None)
    # four ranks each hold a quarter of the frames: half their answer's unknowns is more
    # than one rank, holding them all, fits; the probe stops at what it fits
    assert sizes[-1] == one_rank
    assert largest_fitting(configuration, model, 4, usable_budget(model, budget)) > one_rank


def test_refinement_stops_once_a_rounds_largest_probe_was_predicted(monkeypatch, tmp_path):
    """Peaks linear in the unknowns: the first calibration predicts the first round's probes,
    so one round is the last."""
    configuration = superres()
    calibration, probed = _synthetic_probes(
        monkeypatch, tmp_path, lambda size: round(2**30 + 400.0 * 3 * size * size))
    from scalebench.planning.capacity.refine import refined

    done = refined(configuration, [32, 64, 96, 128], 1, 4 * 2**30)
    assert len(done.rounds) == 1 and done.rounds[0].settled and not done.cached
    assert probed[:4] == [32, 64, 96, 128] and probed[4:] == done.rounds[0].sizes
    assert done.rounds[0].ratio == pytest.approx(1.0, abs=1e-3)


def test_refinement_repeats_while_the_model_mispredicts_and_ends_near_the_answer(
        monkeypatch, tmp_path):
    """The heap's regime up to 3 x 260² unknowns, mapped blocks beyond: the first calibration
    (32-128) overestimates the first round's largest probe by more than 10 %, so a second
    round probes near the new answer; the refined answer is then within 15 % of the peak
    at it, where the first calibration's was not."""
    from scalebench.planning.capacity.command import answer
    from scalebench.planning.capacity.refine import TOLERANCE, refined

    configuration, budget = superres(), 3 * 2**30
    peak = knee_peak(configuration, 3 * 260**2)
    calibration, probed = _synthetic_probes(monkeypatch, tmp_path, peak)
    first, _ = calibration.calibrate(configuration, [32, 64, 96, 128])
    quick = answer(configuration, "sr", 1, budget, first, True)
    assert quick.predicted_peak_bytes / peak(quick.largest_size) > 1.4
    done = refined(configuration, [32, 64, 96, 128], 1, budget)
    assert len(done.rounds) >= 2
    assert abs(done.rounds[0].ratio - 1) > TOLERANCE
    assert done.rounds[-1].settled or len(done.rounds) == 4
    line = answer(configuration, "sr", 1, budget, done.model, False, done.rounds)
    assert line.predicted_peak_bytes / peak(line.largest_size) == pytest.approx(1, abs=0.15)
    assert line.largest_size > quick.largest_size
    assert peak(line.largest_size) <= budget
    # every probe of a round fits the budget less the headroom
    assert all(peak(size) <= budget for item in done.rounds for size in item.sizes)
    # the line says it: the rounds, how far the largest probe is, the time the probes took
    assert line.probe_fraction == pytest.approx(
        max(configuration.sizes(size, 1, None).unknowns for size in probed) /
        configuration.sizes(line.largest_size, 1, None).unknowns)
    assert 0.4 < line.probe_fraction <= 0.5
    assert f"refined in {len(done.rounds)} rounds, largest probe at " \
        f"{line.probe_fraction:.2g} of its unknowns; calibration " in line.text()
    assert [probe[3] for probe in line.probes] == [False] * 4 + [True] * (len(probed) - 4)


def test_refinement_rounds_are_bounded(monkeypatch, tmp_path):
    """Peaks whose bytes per unknown fall to 0.6 of the last with every refinement probe:
    each round's model overestimates the next round's largest probe by 1.46-1.88x and the
    answer keeps growing, so only MAX_ROUNDS ends the refinement."""
    from scalebench.planning.capacity.refine import MAX_ROUNDS, refined

    seen = []

    def falling(size):  # called for each phase of a probe: counts the probed sizes
        if size not in seen:
            seen.append(size)
        return round(2**30 + 4000.0 * 3 * size * size *
                     0.6 ** max(seen.index(size) - 3, 0))
    _synthetic_probes(monkeypatch, tmp_path, falling)
    done = refined(superres(), [32, 64, 96, 128], 1, 8 * 2**30)
    assert len(done.rounds) == MAX_ROUNDS
    assert not any(item.settled for item in done.rounds)


def test_the_refined_calibration_is_cached_apart_from_the_quick_one(monkeypatch, tmp_path):
    from scalebench.planning.capacity.calibration_cache import cache_path, cached_model
    from scalebench.planning.capacity.refine import refined, refined_path

    configuration, sizes = superres(), [32, 64, 96, 128]
    calibration, probed = _synthetic_probes(
        monkeypatch, tmp_path, knee_peak(superres(), 3 * 260**2))
    first = refined(configuration, sizes, 1, 3 * 2**30)
    count = len(probed)
    again = refined(configuration, sizes, 1, 3 * 2**30)
    assert again.cached and len(probed) == count  # nothing probed again
    assert again.model == first.model and again.rounds == first.rounds
    assert again.model.seconds == first.model.seconds > 0
    # quick and refined entries are two files; plan's reading takes the one probed furthest
    assert cache_path(configuration, sizes).exists()
    assert refined_path(configuration, sizes, 1, 3 * 2**30) != cache_path(configuration, sizes)
    assert cached_model(configuration, sizes).points == first.model.points[:4]
    assert cached_model(configuration) == first.model
    # another budget or rank count is refined again, from the cached first calibration
    refined(configuration, sizes, 1, 2 * 2**30)
    assert probed[count:count + 4] != sizes and len(probed) > count
    assert refined_path(configuration, sizes, 4, 3 * 2**30) != \
        refined_path(configuration, sizes, 1, 3 * 2**30)


def test_a_weighted_fit_follows_the_largest_probes():
    """Probes in two regimes: the even fit carries the small sizes' bytes per unknown to
    large sizes, the fit weighted by unknowns the large probes'."""
    configuration = superres()
    peak = knee_peak(configuration, 3 * 350**2)
    points = [point_at(configuration, size, peak(size), peak(size))
              for size in (32, 64, 96, 128, 500, 700)]
    far = configuration.sizes(1000, 1, None)
    assert fit(points).predict(far) / peak(1000) > 1.15  # 1.153
    assert fit(points, weighted=True).predict(far) / peak(1000) == \
        pytest.approx(1, abs=0.05)  # 1.048


def test_the_headroom_is_kept_above_the_smallest_probe_when_the_fit_starts_higher():
    """Weighted to the large probes, the fit's intercept lies above the smallest probe's
    peak: the usable budget keeps its 20 % above that measured peak, not above the
    intercept, where the headroom would shrink to nothing as the intercept nears the
    budget."""
    from scalebench.planning.capacity.calibration import HEADROOM, usable_budget

    configuration = superres()
    peak = knee_peak(configuration, 3 * 350**2)
    points = [point_at(configuration, size, peak(size), peak(size))
              for size in (32, 64, 96, 128, 500, 700)]
    model = fit(points, weighted=True)
    smallest = points[0].peak_bytes
    assert model.baseline_bytes > smallest + 10 * MIB
    assert model.floor_bytes == smallest
    budget = model.baseline_bytes + 50 * MIB
    assert usable_budget(model, budget) == pytest.approx(
        smallest + (1 - HEADROOM) * (budget - smallest))
    assert budget - usable_budget(model, budget) > HEADROOM * (budget - smallest) - 1
    # A budget between the measured floor and the intercept is a question, not an error;
    # below the floor it is one.
    between = round((smallest + model.baseline_bytes) / 2)
    assert answer(configuration, "sr", 1, between, model, False, []).budget_bytes == between
    with pytest.raises(ScalebenchError, match="below the process's measured floor"):
        answer(configuration, "sr", 1, smallest - MIB, model, False, [])


def test_the_capacity_panel_marks_refinement_probes_and_the_verified_point():
    """An answer as `scalebench capacity --format json --verify` writes it, and one written
    before refinement (three fields per probe): both draw, the refinement's probes apart."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from scalebench.results.report.capacity import _panel, _row

    answer = {"label": "sr", "ranks": 1, "size_parameter": "image_size", "largest_size": 2000,
              "predicted_peak_bytes": 2.2 * 2**30, "budget_bytes": 4 * 2**30,
              "device": "cpu", "configuration": {}, "calibration_sizes": [32, 64, 500, 1000],
              "probes": [[32, 2**30, False, False], [64, 1.1 * 2**30, False, False],
                         [500, 1.3 * 2**30, False, True], [1000, 1.6 * 2**30, False, True]],
              "curve": [[32, 2**30], [2000, 2.2 * 2**30]], "measured_peak_bytes": 2 * 2**30}
    figure, axis = plt.subplots()
    _panel(axis, answer, pd.DataFrame())
    drawn = {c.get_label(): [list(x) for x in c.get_offsets()] for c in axis.collections}
    assert drawn["refinement probes, near the answer (measured)"] == [[500, 1.3], [1000, 1.6]]
    assert drawn["calibration probes (measured)"] == [[32, 1.0], [64, 1.1]]
    assert drawn["largest size, measured (--verify)"] == [[2000, 2.0]]
    assert _row(answer, pd.DataFrame())[6:8] == ["2", "1.1"]
    plt.close(figure)
    old = {**answer, "probes": [probe[:3] for probe in answer["probes"]]}
    figure, axis = plt.subplots()
    _panel(axis, old, pd.DataFrame())
    assert [c.get_label() for c in axis.collections][0] == "calibration probes (measured)"
    assert len(axis.collections[0].get_offsets()) == 4
    plt.close(figure)


def test_a_predicted_round_ends_refinement_only_near_the_answer():
    """CT at 3 GiB: its round's probe was predicted within 10 %, but the refit's answer had
    2.7x its unknowns (docs/performance.md). A largest probe at 0.37 of the answer's
    unknowns is not near it; at half of them it is."""
    from scalebench.planning.capacity.calibration import usable_budget
    from scalebench.planning.capacity.refine import near_answer, next_sizes, unknowns

    configuration, budget = superres(), 4 * 2**30
    truth = (2**30, 400.0, 0.0, 0.0, 0.0)
    base = points_of(truth, [32, 64, 96, 128], scale=0.0)
    model = iterations_model(truth, points=base)
    answer = largest_fitting(configuration, model, 1, usable_budget(model, budget))
    half = next_sizes(configuration, model, 1, budget, None)[-1]
    far = 4 * round((0.37 * unknowns(configuration, answer) / 3) ** 0.5 / 4)
    assert unknowns(configuration, far) < 0.4 * unknowns(configuration, answer)
    with_far = replace(model, points=tuple(base + points_of(truth, [far], scale=0.0)))
    with_half = replace(model, points=tuple(base + points_of(truth, [half], scale=0.0)))
    assert not near_answer(configuration, with_far, 1, budget)
    assert near_answer(configuration, with_half, 1, budget)
    assert near_answer(configuration, model, 1, 2**30)  # nothing fits: nothing to approach


def test_an_answer_whose_image_is_mapped_is_refined_by_probes_whose_images_are_mapped(
        monkeypatch, tmp_path):
    """CT and radio: their peak per unknown falls where the image's arrays pass glibc's
    mmap threshold, between the probes at half the answer's unknowns and the answer (CT:
    1.980 GiB at 2545, 1.775 GiB at 3489). Synthetic peaks of 800 bytes per unknown below
    mapped_size and 300 from it: the refinement's probes are raised to it, and the answer is
    then within 15 % of its peak; probed below it, as without the rule, 2.3x high."""
    import platform

    from scalebench.planning.capacity.allocator import FLOAT32_BYTES, IMAGE_MARGIN
    from scalebench.planning.capacity.command import answer
    from scalebench.planning.capacity.refine import mapped_size, refined, unknowns

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the image's regime is glibc's")
    configuration, budget = superres(), 12 * 2**30
    mapped = mapped_size(configuration)
    limit = unknowns(configuration, mapped)
    assert limit * FLOAT32_BYTES > IMAGE_MARGIN * MMAP_THRESHOLD_MAX >= \
        unknowns(configuration, mapped - 4) * FLOAT32_BYTES  # the valid size below it

    def peak(size):
        count = unknowns(configuration, size)
        return round(2**30 + (800.0 if count < limit else 300.0) * count)

    _, probed = _synthetic_probes(monkeypatch, tmp_path, peak)
    done = refined(configuration, [32, 64, 96, 128], 1, budget)
    assert all(size >= mapped for size in probed[4:])
    assert probed[4] == mapped  # the first round's quarter and half, raised to it
    line = answer(configuration, "sr", 1, budget, done.model, False, done.rounds)
    assert line.predicted_peak_bytes / peak(line.largest_size) == pytest.approx(1, abs=0.15)
    assert peak(line.largest_size) <= budget
    # The same peaks, the rule off: the refinement probes below the threshold and stops there.
    from scalebench.planning.capacity import refine

    monkeypatch.setattr(refine, "mapped_size", lambda configuration: None)
    _, heap = _synthetic_probes(monkeypatch, tmp_path / "off", peak)
    off = refined(configuration, [32, 64, 96, 128], 1, budget)
    assert all(size < mapped for size in heap[4:])
    far = answer(configuration, "sr", 1, budget, off.model, False, off.rounds)
    assert far.predicted_peak_bytes / peak(far.largest_size) > 1.5


def test_refinement_probes_in_the_heap_count_for_nothing_once_one_is_mapped_image():
    from scalebench.planning.capacity.refine import heap_regime_probes, mapped_size

    configuration = superres()
    mapped = mapped_size(configuration)
    truth = (2**30, 400.0, 0.0, 0.0, 0.0)
    first = points_of(truth, [32, 64, 96, 128], scale=0.0)
    if mapped is None:
        pytest.skip("the image's regime is glibc's")
    half = 4 * (mapped // 8)
    below = points_of(truth, [half, mapped - 4], scale=0.0)
    above = points_of(truth, [mapped + 400], scale=0.0)
    assert heap_regime_probes(configuration, first + below, 4) == frozenset()
    assert heap_regime_probes(configuration, first + below + above, 4) == \
        frozenset({half, mapped - 4})
    # the ignored probes stay in the model, and count for nothing in its fit
    heavy = [replace(point, phase_peaks_bytes=(3 * point.peak_bytes,) * 2) for point in below]
    ignored = fit(first + heavy + above, weighted=True,
                  ignored=frozenset({half, mapped - 4}))
    assert len(ignored.points) == 7
    far = configuration.sizes(2 * mapped, 1, None)
    assert ignored.predict(far) == pytest.approx(
        fit(first + above, weighted=True).predict(far), rel=1e-6)


def test_a_verified_answer_over_its_budget_becomes_a_round_and_is_answered_again(
        monkeypatch, tmp_path):
    """Probes linear in the unknowns, a whole run's peak 1.5x theirs above the baseline: the
    refined answer's run exceeds the budget, joins the refinement as one more round, and the
    answer made again runs within it; the command asked again answers from that corrected,
    cached model. A quick answer is reported as measured, over the budget."""
    from scalebench.planning.capacity import command
    from scalebench.planning.capacity.refine import refined

    configuration, sizes, budget = superres(), [32, 64, 96, 128], 4 * 2**30
    probe_peak = lambda size: round(2**30 + 400.0 * 3 * size * size)  # noqa: E731
    run_peak = lambda size: round(2**30 + 1.5 * 400.0 * 3 * size * size)  # noqa: E731
    _synthetic_probes(monkeypatch, tmp_path, probe_peak)

    def whole_run(configuration, size, whole=False):
        counts = configuration.sizes(size, 1, None)
        return CalibrationPoint(size, counts.unknowns, 0, counts.denoised,
                                (run_peak(size), run_peak(size)))
    monkeypatch.setattr(command, "probe_point", whole_run)
    done = refined(configuration, sizes, 1, budget)
    first = command.answer(configuration, "sr", 1, budget, done.model, False, done.rounds)
    assert run_peak(first.largest_size) > budget
    line = command.verified_within(configuration, first, sizes, done)
    assert line.overrun_rounds == 1 and line.largest_size < first.largest_size
    assert line.measured_peak_bytes == run_peak(line.largest_size) <= budget
    assert [item["sizes"] for item in line.refinement][-1] == [first.largest_size]
    assert "(after 1 answer over the budget, each run then a probe)" in line.text()
    assert "over the budget 4.00 GiB" not in line.text()
    assert [item["overrun"] for item in line.refinement] == [False] * len(done.rounds) + [True]
    again = refined(configuration, sizes, 1, budget)
    assert again.cached and len(again.rounds) == len(done.rounds) + 1
    assert [item.overrun for item in again.rounds][-1]
    cached = command.answer(configuration, "sr", 1, budget, again.model, True, again.rounds)
    assert cached.largest_size == line.largest_size and cached.overrun_rounds == 1
    quick = command.verified_within(configuration, first, sizes, None)
    assert quick.overrun_rounds == 0 and quick.largest_size == first.largest_size
    assert "over the budget 4.00 GiB" in quick.text()


def test_a_grid_is_one_configuration_per_memory_and_run_length(tmp_path):
    """Experiments that differ by the size alone are one line; by their iterations, two (one
    calibration, two run lengths for the time answer)."""
    from scalebench.planning.capacity.experiments import configurations

    config = tmp_path / "grid.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"task": "denoising", "image_size": [64, 128]}}],
        "solver": [{"denoiser": {"denoiser": "tv", "pretrained": "none", "device": "cpu",
                                 "max_iter": [5, 50]}}]}))
    found = configurations(config, 1, "image_size", None)
    assert [(configuration.run_length(), ranks) for configuration, _, ranks in found] == \
        [((5, 6), 1), ((50, 51), 1)]
    assert [re.findall(r"max_iter=\d+", label) for _, label, _ in found] == \
        [["max_iter=5"], ["max_iter=50"]]
    assert configuration_key(found[0][0]) == configuration_key(found[1][0])
