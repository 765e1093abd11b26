"""The time model of scalebench capacity in-process: each candidate law recovers synthetic
times of a known law, the held-out probe chooses among them, the probes' caps are undone,
a run's seconds are the exact sum of its terms, the time budget's answer and its bad input."""

import itertools
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from scalebench.durations import duration_seconds
from scalebench.errors import ConfigError, ScalebenchError
from scalebench.planning.capacity.command import answer
from scalebench.planning.capacity.configuration import ENVIRONMENT, Configuration
from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel
from scalebench.planning.capacity.probe import step_seconds, tv_scale
from scalebench.planning.capacity.time_answer import check_budgets, run_seconds, time_probes
from scalebench.planning.capacity.time_laws import (
    fit_power,
    fit_term,
    held_out_error,
    piecewise,
)
from scalebench.planning.capacity.time_model import (
    COMMUNICATION_NOT_INCLUDED,
    Counts,
    duration_text,
    evaluations,
    time_model,
)
from scalebench.rank.settings import ProcessSettings

MIB = 2**20
COUNTS = [32**2, 64**2, 96**2, 128**2, 256**2, 512**2]


def law(constant, scale, power):
    return lambda count: constant + scale * count ** power


def test_a_power_law_with_a_constant_is_recovered_and_chosen():
    truth = law(0.01, 2e-7, 1.3)
    fitted = fit_term("grad", [(count, truth(count)) for count in COUNTS])
    assert fitted.kind == "power law + constant"
    assert fitted.parameters == pytest.approx((0.01, 2e-7, 1.3), rel=1e-6)
    # Fitted to 512^2 at most, it predicts 16x the unknowns exactly: the law is the data's.
    assert fitted.predict(2048**2) == pytest.approx(truth(2048**2), rel=1e-6)
    assert fitted.candidates["linear"] > 0.1  # a line misses the curvature held out


def test_linear_times_choose_the_simpler_of_two_exact_laws():
    truth = law(0.05, 3e-6, 1.0)
    fitted = fit_term("denoise", [(count, truth(count)) for count in COUNTS])
    assert fitted.kind == "linear"
    assert fitted.candidates["power law + constant"] == pytest.approx(0.0, abs=1e-9)
    assert fitted.parameters == pytest.approx((0.05, 3e-6, 1.0), rel=1e-6)


def test_a_regime_change_is_followed_by_the_piecewise_law():
    """Times linear up to 128^2 that grow as unknowns^1.6 past it (out of cache): only the
    lines through the nearest probes predict the held-out largest ones."""
    def truth(count):
        return 1e-6 * count if count <= 128**2 else 1e-6 * 128**2 * (count / 128**2) ** 1.6

    fitted = fit_term("grad", [(count, truth(count)) for count in COUNTS])
    assert fitted.kind == "piecewise"
    assert fitted.held_out_error == pytest.approx(0.0, abs=1e-9)
    # Past the largest probe it carries the last segment's slope on.
    assert fitted.predict(1024**2) == pytest.approx(truth(1024**2), rel=1e-9)


def test_the_held_out_error_is_that_of_each_largest_probe_fitted_to_the_others():
    probes = [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 8.0)]
    # linear fitted to (1,1),(2,2),(3,3) predicts 4 at 4 (measured 8): 0.5; fitted to
    # (1,1),(2,2),(4,8) in relative least squares it predicts 3 something at 3.
    error = held_out_error("linear", probes)
    constant, scale, _ = fit_power([1.0, 2.0, 4.0], [1.0, 2.0, 8.0], (1.0,))
    expected = (abs(4.0 / 8.0 - 1) + abs((constant + 3 * scale) / 3.0 - 1)) / 2
    assert error == pytest.approx(expected)
    assert held_out_error("power law + constant", probes[:3]) is None  # 2 left: too few


def test_the_piecewise_law_interpolates_in_log_log_and_never_falls():
    parameters = (100.0, 400.0, 1600.0, 1.0, 4.0, 2.0)
    assert piecewise(parameters, 200.0) == pytest.approx(2.0)  # halfway in logs: 1 -> 4
    assert piecewise(parameters, 3200.0) == pytest.approx(4.0)  # a falling end is held flat
    assert piecewise(parameters, 50.0) == pytest.approx(0.5)  # the first slope below


def timing(setup, steps, evaluation=0.5, norm=0.0, applications=0, capped=False,
           denoise_scale=1.0, startup=2.0, cut=False):
    return {"setup_s": setup + norm, "steps": {name: [2 * value, value]
                                               for name, value in steps.items()},
            "evaluation_s": evaluation, "norm_s": norm, "norm_applications": applications,
            "norm_capped": capped, "denoise_scale": denoise_scale, "startup_s": startup,
            "chunks_cut": cut}


def timed_points(grad, denoise, setup, norm_per_unknown=0.0, sizes=(32, 64, 96, 128)):
    """Points whose timings follow known linear laws of the unknowns (denoiser: of its
    pixels, here the same)."""
    return [CalibrationPoint(size, size * size, 0, size * size, (MIB, MIB), 0, False,
                             timing(setup(size * size), {"grad": grad(size * size),
                                                         "denoise": denoise(size * size)},
                                    norm=norm_per_unknown * size * size,
                                    applications=6 if norm_per_unknown else 0))
            for size in sizes]


def test_a_run_is_start_up_set_up_norm_iterations_and_evaluations_exactly():
    grad, denoise, setup = law(0.01, 1e-6, 1.0), law(0.02, 2e-6, 1.0), law(0.3, 1e-7, 1.0)
    model = time_model(timed_points(grad, denoise, setup, norm_per_unknown=5e-7))
    counts = Counts(1024**2, 1024**2)
    per_iteration = grad(1024**2) + denoise(1024**2)
    assert model.iteration_seconds(counts) == pytest.approx(per_iteration, rel=1e-6)
    assert model.step_seconds(counts) == pytest.approx(
        {"denoise": denoise(1024**2), "grad": grad(1024**2)}, rel=1e-6)
    setup_s = setup(1024**2) + 5e-7 * 1024**2
    assert model.setup_seconds(counts) == pytest.approx(setup_s, rel=1e-6)
    assert model.run_seconds(counts, 100, 11) == pytest.approx(
        2.0 + setup_s + 100 * per_iteration + 11 * 0.5, rel=1e-6)
    assert model.run_seconds(counts, 100, 11, norm=False) == pytest.approx(
        2.0 + setup(1024**2) + 100 * per_iteration + 11 * 0.5, rel=1e-6)
    assert model.extrapolation(counts) == pytest.approx(1024**2 / 128**2)
    # A rank holding a quarter of the operators applies a quarter of them; its denoiser
    # calls are what its tiles make them.
    split = model.step_seconds(Counts(1024**2, 1024**2 / 4, 0.25))
    assert split["grad"] == pytest.approx(grad(1024**2) / 4, rel=1e-6)
    assert split["denoise"] == pytest.approx(denoise(1024**2 / 4), rel=1e-6)


def test_a_calibration_times_the_steps_its_own_probes_ran_not_its_familys():
    """A prox algorithm borrowing a gradient algorithm's small probes: its model has the
    denoiser fitted to every probe and the prox to its own two, and no gradient step."""
    grad, denoise, setup = law(0.01, 1e-6, 1.0), law(0.02, 2e-6, 1.0), law(0.3, 1e-7, 1.0)
    prox = law(0.05, 4e-6, 1.0)
    borrowed = [replace(point, shared_from="pgd")
                for point in timed_points(grad, denoise, setup, sizes=(32, 64))]
    own = [replace(point, timing=timing(setup(size * size), {"prox": prox(size * size),
                                                             "denoise": denoise(size * size)}))
           for point, size in zip(timed_points(grad, denoise, setup, sizes=(96, 128)),
                                  (96, 128), strict=True)]
    model = time_model([*borrowed, *own])
    assert [fit.name for fit in model.steps] == ["denoise", "prox"]
    counts = Counts(512**2, 512**2)
    assert model.step_seconds(counts) == pytest.approx(
        {"denoise": denoise(512**2), "prox": prox(512**2)}, rel=1e-6)
    assert len(model.steps[0].probes) == 4 and len(model.steps[1].probes) == 2
    # The time panel's measured probes are its own: the borrowed ones timed pgd's steps.
    drawn = time_probes(SimpleNamespace(points=[*borrowed, *own]))
    assert drawn == [[size, prox(size * size) + denoise(size * size), setup(size * size)]
                     for size in (96, 128)]


def test_the_probes_caps_are_undone_and_cut_chunks_left_out():
    """A norm capped at 3 applications (where an uncapped probe ran 6) counts 6; TV cut to 3
    of its 50 inner iterations counts 50; probes with cut chunks are not a run's steps."""
    points = timed_points(law(0.0, 1e-6, 1.0), law(0.0, 1e-6, 1.0), law(0.1, 0.0, 1.0),
                          norm_per_unknown=1e-6)
    capped = CalibrationPoint(256, 256**2, 0, 256**2, (MIB, MIB), 0, False, timing(
        0.1, {"grad": 1e-6 * 256**2, "denoise": 3 / 50 * 1e-6 * 256**2},
        norm=0.5e-6 * 256**2, applications=3, capped=True, denoise_scale=50 / 3))
    cut = replace(points[-1], timing={**points[-1].timing, "steps": {"grad": [9.0, 9.0]},
                                      "chunks_cut": True})
    model = time_model([*points, capped, cut])
    counts = Counts(512**2, 512**2)
    assert model.step_seconds(counts)["denoise"] == pytest.approx(1e-6 * 512**2, rel=1e-6)
    assert model.step_seconds(counts)["grad"] == pytest.approx(1e-6 * 512**2, rel=1e-6)
    assert model.norm.predict(512**2) == pytest.approx(1e-6 * 512**2, rel=1e-6)


def test_probes_made_before_runs_were_timed_give_no_time_model():
    untimed = [CalibrationPoint(size, size * size, 0, size * size, (MIB, MIB))
               for size in (32, 64, 96)]
    assert time_model(untimed) is None
    # A cached point keeps its timings through the memory model's JSON.
    points = timed_points(law(0.0, 1e-6, 1.0), law(0.0, 1e-6, 1.0), law(0.1, 0.0, 1.0))
    model = MemoryModel(((MIB, 0, 0, 0, 0), (MIB, 0, 0, 0, 0)), 0.0, 0.0, tuple(points))
    again = MemoryModel.from_json(model.to_json())
    assert [point.timing for point in again.points] == [point.timing for point in points]


def test_a_probe_keeps_each_steps_time_but_not_its_collectives_and_undoes_tv_cuts():
    figures = {"grad_time_s": 1.0, "grad_comm_time_s": 0.2, "comm_time_s": 0.2,
               "denoise_time_s": 2.0, "denoise_peak_host_rss_mib": 5.0}
    assert step_seconds(figures) == {"grad": 1.0, "denoise": 2.0}
    assert tv_scale(ProcessSettings(tv_iterations=3), "tv") == pytest.approx(50 / 3)
    assert tv_scale(ProcessSettings(tv_iterations=3), "dncnn") == 1.0
    assert tv_scale(ProcessSettings(), "tv") == 1.0


def test_a_run_evaluates_its_first_every_kth_and_last_iteration():
    assert evaluations(100, 10) == 11
    assert evaluations(20, 1) == 21
    assert evaluations(25, 10) == 4  # 0, 10, 20, 25


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200), ("90m", 5400), ("90min", 5400), ("1.5h", 5400), ("3600", 3600),
    ("45s", 45), ("1d", 86400), ("1:30:00", 5400), ("10:00", 600), ("1-00:00:00", 86400)])
def test_durations_parse_with_units_or_colons(text, seconds):
    assert duration_seconds(text, "--time") == seconds


@pytest.mark.parametrize("text", ["0", "-1h", "0:00", "2x", "soon", "", "h"])
def test_a_duration_that_is_not_one_or_not_positive_is_a_one_line_error(text):
    with pytest.raises(ConfigError, match=r"^--time: .* is not a positive duration \(give a "
                                          r"number with a unit s, min, h or d") as error:
        duration_seconds(text, "--time")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("budget", "seconds", "quick", "message"), [
    (None, None, False, "needs a budget: --memory, --time or both"),
    (2**30, 0.0, False, "--time must be a positive duration"),
    (2**30, 3600.0, True, "--time with --quick"),
])
def test_budgets_a_capacity_question_cannot_answer_are_refused(budget, seconds, quick,
                                                               message):
    with pytest.raises(ScalebenchError, match=message):
        check_budgets(budget, seconds, quick)


def test_the_calibration_key_covers_the_machine():
    assert {"cpu_model", "gpu_models"} <= set(ENVIRONMENT)


def denoising(max_iter=100) -> Configuration:
    return Configuration("synthetic", {"task": "denoising"}, "denoiser",
                         {"denoiser": "dncnn", "pretrained": "none", "device": "cpu",
                          "max_iter": max_iter, "eval_every": 10}, "image_size")


def model_for(configuration: Configuration) -> MemoryModel:
    """A memory model of 100 MiB + 64 bytes per unknown with timed probes: 1 us per denoised
    pixel per iteration, 1 s of set-up."""
    points = []
    for size in (32, 64, 96, 128):
        counts = configuration.sizes(size, 1, None)
        peak = 100 * MIB + 64 * counts.unknowns
        points.append(CalibrationPoint(size, counts.unknowns, 0, counts.denoised,
                                       (peak, peak), 0, False, timing(
                                           1.0, {"denoise": 1e-6 * counts.denoised},
                                           evaluation=0.0, startup=0.0)))
    memory = (100 * MIB, 64.0, 0.0, 0.0, 0.0)
    return MemoryModel((memory, memory), 0.0, 0.0, tuple(points))


def test_the_answer_is_the_smaller_of_the_two_budgets_and_says_which_binds():
    configuration = denoising()
    model = model_for(configuration)
    memory_only = answer(configuration, "d", 1, 2**30, model, True, [])
    assert memory_only.binding is None and memory_only.predicted_run_s is not None
    loose = answer(configuration, "d", 1, 2**30, model, True, [], time_budget_s=1e6)
    assert loose.binding == "memory" and loose.largest_size == memory_only.largest_size
    tight = answer(configuration, "d", 1, 2**30, model, True, [], time_budget_s=60.0)
    assert tight.binding == "time" and tight.largest_size < memory_only.largest_size
    assert tight.predicted_run_s <= 60.0
    assert run_seconds(configuration, time_model(model.points), tight.largest_size + 1,
                       1) > 60.0
    # 100 iterations of 1 us per pixel, 1 s of set-up, evaluations free: about 59 s / 1e-4.
    assert tight.largest_size == math.isqrt(int(59.0 / 1e-4)) or \
        abs(tight.largest_size - math.isqrt(int(59.0 / 1e-4))) <= 1
    assert "(time binds)" in tight.text() and "time binds (time budget 60 s)" in tight.text()
    none = answer(configuration, "d", 1, 2**30, model, True, [], time_budget_s=0.5)
    assert none.largest_size is None
    smallest = min(point.size for point in model.points)
    assert none.reason == (
        f"no size runs within the time budget (the smallest probed, image_size {smallest}, is "
        f"predicted at "
        f"{duration_text(run_seconds(configuration, time_model(model.points), smallest, 1))})")


def test_the_time_panel_draws_probes_model_budget_and_the_verified_point():
    """An answer with a time model as `scalebench capacity --format json --verify` writes it:
    the probes' seconds per iteration, the model's per iteration and per run, the time budget
    and the verified point; an answer without one says so."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from scalebench.results.report.capacity import _row, _time_panel

    configuration = denoising()
    line = answer(configuration, "d", 1, 2**30, model_for(configuration), True, [],
                  time_budget_s=60.0)
    data = {**line.to_json(), "measured_iteration_s": 0.5}
    figure, axis = plt.subplots()
    _time_panel(axis, data)
    drawn = {c.get_label(): [list(x) for x in c.get_offsets()] for c in axis.collections}
    assert [pytest.approx(point) for point in drawn["probes: s per iteration (measured)"]] \
        == [[probe[0], probe[1]] for probe in data["time_probes"]]
    assert drawn["largest size, s per iteration measured (--verify)"] == \
        [[data["largest_size"], 0.5]]
    lines = {item.get_label(): item for item in axis.get_lines()}
    assert list(lines["time model: s per iteration"].get_ydata()) == \
        [point[2] for point in data["time_curve"]]
    assert lines["time budget (--time)"].get_ydata()[0] == 60.0
    assert _row(data, pd.DataFrame())[9:12] == ["time", "denoise linear, set-up linear, "
                                                "evaluation linear",
                                                f"{data['predicted_iteration_s']:.3g}"]
    plt.close(figure)
    figure, axis = plt.subplots()
    _time_panel(axis, {**data, "time_model": None})
    assert axis.get_title() == "no time model (probes not timed)"
    plt.close(figure)


def test_a_noisy_last_segment_extrapolates_no_steeper_than_unknowns_squared():
    parameters = (100.0, 200.0, 1.0, 1000.0)  # a thousandfold for twice the count: a burst
    assert piecewise(parameters, 400.0) == pytest.approx(1000.0 * 4.0)


@pytest.mark.parametrize("solver", ["cgls", "fbp"])
def test_a_solver_without_a_denoiser_is_a_configuration_capacity_can_size(solver):
    """CGLS and FBP (a campaign's baselines) have no denoiser to fit nor pixels to denoise."""
    configuration = Configuration("tomography_2d", {"num_angles": 60}, solver,
                                  {"device": "cpu"}, "image_size")
    assert configuration.valid(64)
    sizes = configuration.sizes(64, 1, None)
    assert (sizes.unknowns, sizes.denoised) == (64 * 64, 0)


def test_a_probe_times_its_set_up_steps_and_evaluation_and_a_one_shot_solver_runs_once():
    """The probe's own run, in this process: FBP (max_iter at most 1) runs its one
    back-projection where a probe asks for two iterations; CGLS's gradient step is timed in
    each of its two."""
    from scalebench.planning.capacity.probe import run_probe

    dataset = {"image_size": 16, "num_angles": 8}
    # Deterministic mode's switches are process-wide: left off here, as this worker has them.
    solver = {"device": "cpu", "deterministic": False}
    fbp = run_probe("tomography_2d", dataset, "fbp", solver, iterations=2).timing
    assert list(fbp["steps"]) == ["backproject"] and len(fbp["steps"]["backproject"]) == 1
    cgls = run_probe("tomography_2d", dataset, "cgls", solver, iterations=2).timing
    assert len(cgls["steps"]["grad"]) == 2 and all(value > 0 for value in cgls["steps"]["grad"])
    assert cgls["setup_s"] > 0 and cgls["evaluation_s"] > 0 and cgls["norm_s"] == 0.0


def test_a_tiled_denoisers_step_is_counted_by_its_whole_pass_not_one_call():
    """Super-resolution with DnCNN on tiles of 128: a call takes one batch of tiles, the same
    above a few hundred pixels a side, while the step denoises every tile; the time counts
    grow with the image (and its halos), the memory counts stay one batch, and on two ranks
    sharing the tiles each rank's pass is about half."""
    from scalebench.denoisers.tiles import count_tiles

    configuration = Configuration("multiframe_superres", {"num_frames": 4}, "pnp",
                                  {"denoiser": "dncnn", "pretrained": "none", "tile_size": 128,
                                   "tiles_per_batch": 4, "device": "cpu"}, "image_size")
    small, large = configuration.time_counts(512, 1), configuration.time_counts(1024, 1)
    assert configuration.sizes(512, 1, None).denoised == \
        configuration.sizes(1024, 1, None).denoised
    assert 3.5 < large.denoised / small.denoised < 4.5
    shape = (3, 1024, 1024)
    solver = configuration.resolved_solver()
    window = (128 + 2 * solver["tile_overlap"]) ** 2
    assert large.denoised == count_tiles(solver, shape) * window >= large.unknowns / 3
    shared = Configuration("multiframe_superres", {"num_frames": 4}, "pnp",
                           {**configuration.solver_params, "distribute_denoiser": True},
                           "image_size").time_counts(1024, 2)
    assert shared.denoised == pytest.approx(large.denoised / 2, rel=0.1)


def test_the_denoising_step_is_fitted_to_each_probes_pass_pixels():
    """Probes whose calls all took one batch of 65536 pixels while their pass grew with the
    image, the step's seconds with the pass: the model predicts a larger pass from its
    pixels; fitted to the calls' pixels it could not tell the probes apart."""
    seconds_per_pixel = 2e-7
    points = []
    for size in (256, 512, 768, 1024):
        pass_pixels = 4 * size * size
        points.append(CalibrationPoint(
            size, size * size, 0, 65536, (MIB, MIB), 0, False,
            {**timing(0.1, {"denoise": seconds_per_pixel * pass_pixels}),
             "pass_pixels": pass_pixels}))
    model = time_model(points)
    at = 4 * 2048**2
    assert model.step_seconds(Counts(2048**2, at))["denoise"] == \
        pytest.approx(seconds_per_pixel * at, rel=1e-6)


def test_a_capped_norm_is_scaled_to_the_applications_a_run_takes_at_its_size():
    """Small probes' Lanczos converged in 4 applications at 32² and 6 at 64² (two more per
    4x the unknowns); larger probes were capped (10, and 3 where the image is mapped). A
    capped probe counts the applications that line gives at its size (12 at 512², 16 at
    2048²), at most the limit a run stops at (30), never fewer than it ran; with no probe
    converged, the limit; a probe timed without the limit, the line alone."""
    from scalebench.planning.capacity.time_model import norm_applications, norm_seconds

    per_application = 1e-7

    def probe(size, ran, capped, limit=30):
        norm = per_application * ran * size * size
        point = CalibrationPoint(size, size * size, 0, size * size, (MIB, MIB), 0, False,
                                 timing(0.1, {"grad": 1e-6 * size * size}, norm=norm,
                                        applications=ran, capped=capped))
        if limit is not None:
            point.timing["norm_limit"] = limit
        return point

    points = [probe(32, 4, False), probe(64, 6, False), probe(512, 10, True),
              probe(2048, 3, True)]
    applications = norm_applications(points)
    assert applications.at(512**2) == pytest.approx(12)
    assert applications.at(2048**2) == pytest.approx(16)
    assert applications.at(2.0**60) == 30
    assert [norm_seconds(point, applications) / (per_application * point.unknowns)
            for point in points] == pytest.approx([4, 6, 12, 16])
    assert norm_seconds(probe(40, 10, True), applications) == \
        pytest.approx(10 * per_application * 40**2)  # the line's 4.6: no fewer than it ran
    model = time_model(points)
    assert [seconds for _, seconds in model.norm.probes] == pytest.approx(
        [count * per_application * size**2 for size, count in
         ((32, 4), (64, 6), (512, 12), (2048, 16))])
    capped = [probe(512, 10, True), probe(1024, 10, True), probe(2048, 3, True)]
    assert norm_applications(capped).at(1.0) == 30
    legacy = [probe(32, 4, False, None), probe(64, 6, False, None), probe(4096, 3, True, None)]
    assert norm_applications(legacy).at(2.0**60) > 30  # no limit recorded, none applied
    assert norm_applications(capped[:0]) is None
    # A start operator's seconds (timed apart) stay as measured: only the whole's scale.
    started = probe(2048, 3, True)
    started.timing.update(norm_s=started.timing["norm_s"] + 0.25, norm_start_s=0.25)
    assert norm_seconds(started, applications) == pytest.approx(
        0.25 + 16 * per_application * 2048**2)


def test_each_allocator_regime_has_its_own_law_split_at_the_mapped_image():
    """A step at 0.5 us per unknown while the image is in the heap and 2.4 from where it is
    mapped, probed at four heap sizes and two mapped ones: one law through all six
    overestimates a heap size between them; the two regimes' laws predict both sides
    exactly, the knee at allocator.mapped_values unknowns. Probes of one regime only keep
    one law."""
    from scalebench.planning.capacity.allocator import mapped_values
    from scalebench.planning.capacity.time_laws import regime_fit

    knee = mapped_values()

    def seconds(count):
        return (0.5e-6 if count < knee else 2.4e-6) * count

    sizes = (64, 128, 256, 512, 3100, 3500)
    probes = [(size * size, seconds(size * size), size * size, size * size >= knee)
              for size in sizes]
    assert [mapped for *_, mapped in probes] == [False] * 4 + [True] * 2
    term = regime_fit("denoise", probes, knee)
    assert term.knee == pytest.approx(knee)
    for size in (780, 1000, 3300, 4764):  # 1000: within HEAP_REACH of 512
        assert term.predict(size * size) == pytest.approx(seconds(size * size), rel=1e-6)
    one = fit_term("denoise", [(count, value) for count, value, _, _ in probes])
    assert one.predict(780**2) / seconds(780**2) > 1.25
    assert term.largest_count == 3500**2 and term.to_json()["above"]["kind"] == "linear"
    assert "from it (image mapped)" in term.describe()
    from scalebench.results.report.capacity import law_kind
    assert law_kind(term.to_json()) == f"linear; linear from {knee:.2g} (image mapped)"
    heap_only = regime_fit("denoise", [(c, s, u, False) for c, s, u, _ in probes], knee)
    assert heap_only.above is None and law_kind(heap_only.to_json()) == heap_only.kind
    # In a count other than the unknowns (pixels of a tiled pass, here twice the
    # unknowns), the knee moves with it.
    doubled = regime_fit("denoise", [(2 * c, s, u, m) for c, s, u, m in probes], knee)
    assert doubled.knee == pytest.approx(2 * knee)


def test_far_past_its_heap_probes_a_term_runs_in_log_log_to_the_mapped_law():
    """Heap probes up to 256² only, mapped ones from 3100²: the heap law holds to
    HEAP_REACH times its largest probe; between there and the knee the seconds follow a
    straight line in log-log to the mapped law at the knee, continuous at both ends."""
    from scalebench.planning.capacity.allocator import mapped_values
    from scalebench.planning.capacity.time_laws import HEAP_REACH, regime_fit

    knee = mapped_values()

    def seconds(count):
        return (1e-6 if count < knee else 2.4e-6) * count

    probes = [(size * size, seconds(size * size), size * size, size * size >= knee)
              for size in (64, 128, 192, 256, 3100, 3500)]
    term = regime_fit("grad", probes, knee)
    reach = HEAP_REACH * 256**2
    assert term.predict(reach) == pytest.approx(seconds(reach), rel=1e-6)
    assert term.predict(reach * 1.0001) == pytest.approx(seconds(reach), rel=1e-3)
    assert term.predict(knee * 0.9999) == pytest.approx(2.4e-6 * knee, rel=1e-3)
    middle = math.sqrt(reach * knee)
    assert term.predict(middle) == pytest.approx(
        math.sqrt(seconds(reach) * 2.4e-6 * knee), rel=1e-6)


def test_two_regimes_predict_a_time_that_never_falls_as_the_count_grows():
    """A heap law steeper than the mapped one (seconds = 1e-10 x^2 up to 65536, 2.4e-7 x from
    the mapped image): extrapolated past its probes it exceeds the mapped law at the knee,
    and the prediction holds that value rather than fall, as a time budget's search needs."""
    from scalebench.planning.capacity.allocator import mapped_values
    from scalebench.planning.capacity.time_laws import regime_fit

    knee = mapped_values()
    heap = [(count, 1e-10 * count**2, count, False) for count in (16384, 32768, 49152, 65536)]
    mapped = [(count, 2.4e-7 * count, count, True) for count in (1.2 * knee, 1.5 * knee)]
    term = regime_fit("denoise", heap + mapped, knee)
    assert term.above is not None
    counts = [1e4 * (3 * knee / 1e4) ** (k / 199) for k in range(200)]
    predicted = [term.predict(count) for count in counts]
    assert all(later >= earlier for earlier, later in itertools.pairwise(predicted))
    assert predicted[0] == pytest.approx(1e-10 * counts[0] ** 2, rel=1e-3)
    assert term.predict(2 * knee) == pytest.approx(term.predict(4 * 65536), rel=1e-9)


def noisy_model_for(configuration: Configuration, noise: float) -> MemoryModel:
    """``model_for`` whose two largest probes' denoiser ran ``noise`` slower than its law:
    the law fitted to the others misses them, a held-out error the answer must keep."""
    model = model_for(configuration)
    largest = sorted(point.size for point in model.points)[-2:]
    points = tuple(replace(point, timing={**point.timing, "steps": {"denoise": [
        value * (1 + noise) for value in point.timing["steps"]["denoise"]]}})
        if point.size in largest else point for point in model.points)
    return replace(model, points=points)


def test_an_answer_to_a_time_budget_keeps_the_models_held_out_error_under_it_and_says_so():
    configuration = denoising()
    exact = answer(configuration, "d", 1, 2**30, model_for(configuration), True, [],
                   time_budget_s=60.0)
    assert exact.time_margin == pytest.approx(0.0, abs=1e-9)
    noisy = noisy_model_for(configuration, 0.3)
    timing = time_model(noisy.points)
    assert timing.held_out_error == max(fit.held_out_error for fit in timing.terms()
                                        if fit.held_out_error is not None) > 0.05
    line = answer(configuration, "d", 1, 2**30, noisy, True, [], time_budget_s=60.0)
    assert line.time_margin == pytest.approx(timing.held_out_error)
    assert line.predicted_run_s * (1 + line.time_margin) <= 60.0
    assert run_seconds(configuration, timing, line.largest_size + 1, 1) * \
        (1 + line.time_margin) > 60.0
    assert run_seconds(configuration, timing, line.largest_size + 1, 1) <= 60.0  # without it
    assert f"time binds (time budget 60 s), a {line.time_margin:.0%} margin kept under it " \
           f"for the model's held-out error" in line.text()
    assert line.to_json()["time_margin"] == line.time_margin


def test_a_term_measured_at_one_count_is_flagged_not_called_a_fit():
    one = fit_term("set-up", [(1024.0, 2.5)])
    assert one.one_probe and one.describe() == "one probe: not a fit (2.5 s at every count)"
    assert one.to_json()["one_probe"] is True and one.to_json()["law"] == one.describe()
    two = fit_term("set-up", [(1024.0, 2.5), (4096.0, 9.0)])
    assert not two.one_probe and "not a fit" not in two.describe()
    configuration = denoising()
    model = model_for(configuration)
    # a step timed at the smallest probe only
    points = tuple(replace(point, timing={**point.timing, "steps": {
        **point.timing["steps"], "prox": [0.02, 0.01]}}) if point.size == 32 else point
        for point in model.points)
    timing = time_model(points)
    assert timing.one_probe_terms() == ["prox"]
    line = answer(configuration, "d", 1, 2**30, replace(model, points=points), True, [])
    assert line.one_probe_terms == ["prox"]
    assert "; one probe: not a fit: prox" in line.text()
    assert line.time_model["terms"][[t["name"] for t in line.time_model["terms"]].index(
        "prox")]["law"] == "one probe: not a fit (0.01 s at every count)"


def test_a_prediction_on_several_ranks_says_communication_is_not_included():
    configuration = denoising()
    model = model_for(configuration)
    assert COMMUNICATION_NOT_INCLUDED not in answer(configuration, "d", 1, 2**30, model,
                                                    True, []).text()
    assert f"; {COMMUNICATION_NOT_INCLUDED}" in answer(configuration, "d", 2, 2**30, model,
                                                       True, []).text()
