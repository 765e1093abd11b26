"""The tunable spaces beside the pnp algorithms: every declared range is a real pnp parameter
within its bounds, the check refuses what is not, and the step given in units of 1/||A||^2
(step_scale) reaches the solver."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scalebench.denoisers.kinds import bm3d, dncnn, drunet, tv, wavelet
from scalebench.errors import ConfigError
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.algorithms.spaces import (
    NORM_UNIT,
    SPACES,
    Range,
    Space,
    check_range,
    check_space,
    solver_value,
    space_for,
)
from scalebench.loops.algorithms.spec import check_step, run_step
from scalebench.loops.inference_parameters import PNP_PARAMS, pnp_parameters

BUILT_IN_DENOISERS = [spec.name for spec in (tv.SPEC, wavelet.SPEC, bm3d.SPEC, dncnn.SPEC,
                                             drunet.SPEC)]


def test_every_algorithm_with_every_denoiser_kind_has_a_space():
    assert set(SPACES) == {(a, d) for a in ALGORITHMS for d in BUILT_IN_DENOISERS}
    for (algorithm, denoiser), space in SPACES.items():
        assert (space.algorithm, space.denoiser) == (algorithm, denoiser)
        assert space_for(algorithm, denoiser) is space


@pytest.mark.parametrize("key", sorted(SPACES))
def test_every_declared_range_is_a_pnp_parameter_within_its_bounds(key):
    space = SPACES[key]
    check_space(space)
    for declared in space.ranges:
        assert declared.name in PNP_PARAMS
        param = PNP_PARAMS[declared.name]
        assert param.minimum is None or declared.low >= param.minimum
        assert param.maximum is None or declared.high <= param.maximum
        assert declared.low < declared.high and declared.scale in ("log", "linear")


def test_each_algorithm_tunes_the_parameters_it_reads():
    for (algorithm, denoiser), space in SPACES.items():
        names = set(space.names)
        assert ("denoiser_sigma" in names) == (denoiser != "dncnn" or algorithm == "dpir")
        assert ("step_scale" in names) == (algorithm in ("pgd", "fista", "red"))
        assert ("relaxation" in names) == (algorithm in ("pgd", "hqs", "admm", "drs"))
        assert ("red_lambda" in names) == (algorithm == "red")
        assert ({"dpir_sigma_start", "dpir_lambda"} <= names) == (algorithm == "dpir")


def test_a_blind_denoiser_has_no_sigma_to_tune_but_in_dpirs_schedule():
    """DnCNN takes no noise level: sigma changes nothing but dpir's gammas."""
    assert dncnn.SPEC.blind and not any(spec.blind for spec in (tv.SPEC, drunet.SPEC))
    assert "denoiser_sigma" not in space_for("drs", "dncnn").names
    assert "denoiser_sigma" in space_for("dpir", "dncnn").names


def test_fistas_step_range_stays_near_its_stable_step():
    assert space_for("fista", "tv").range("step_scale").high < \
        space_for("pgd", "tv").range("step_scale").high < 2.0


def test_relaxation_says_what_it_means_per_algorithm():
    assert "over-relaxation" in space_for("pgd", "tv").range("relaxation").doc
    assert "over-relaxation" in space_for("hqs", "tv").range("relaxation").doc
    assert "dual step" in space_for("admm", "tv").range("relaxation").doc
    assert "dual step" in space_for("drs", "tv").range("relaxation").doc


def test_sigma_ranges_differ_where_the_algorithms_weigh_the_prior_differently():
    """PGD's TV runs after a step 1/||A||^2, DRS's after a prox of 10/||A||^2: its best
    sigma is about ten times higher (docs/performance.md)."""
    pgd = space_for("pgd", "tv").range("denoiser_sigma")
    drs = space_for("drs", "tv").range("denoiser_sigma")
    assert pgd.low < drs.low and pgd.high < drs.high
    assert pgd.low <= 2.5e-4 and drs.low <= 1e-3 <= 1e-2 <= drs.high


def test_dpir_schedule_ranges_keep_its_levels_decreasing():
    space = space_for("dpir", "drunet")
    assert space.range("denoiser_sigma").high < space.range("dpir_sigma_start").low


def test_a_range_outside_its_parameters_bounds_is_refused_in_one_line():
    space = space_for("drs", "tv")
    with pytest.raises(ConfigError, match=r"0.5..2.5 of 'relaxation' leaves its bounds "
                                          r"\(a number >= 0.0 <= 2.0\)") as caught:
        check_range(space, "relaxation", 0.5, 2.5)
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="leaves its bounds"):
        check_range(space, "step_scale", 0.0, 1.0)  # step_scale > 0
    broken = Space("drs", "tv", (*space.ranges, Range("relaxation", 0.1, 3.0, "linear")))
    with pytest.raises(ConfigError, match="leaves its bounds"):
        check_space(broken)


def test_an_unknown_non_numeric_or_empty_range_is_refused():
    space = space_for("pgd", "tv")
    with pytest.raises(ConfigError, match="'stepsize' is not a numeric parameter of solver "
                                          "'pnp'"):
        check_range(space, "stepsize", 0.1, 1.0)
    with pytest.raises(ConfigError, match="'algorithm' is not a numeric parameter"):
        check_range(space, "algorithm", 0.1, 1.0)
    with pytest.raises(ConfigError, match="empty"):
        check_range(space, "denoiser_sigma", 0.01, 0.01)
    with pytest.raises(ConfigError, match="empty"):
        check_range(space, "denoiser_sigma", 0.1, 0.01)
    log_from_zero = replace(space, ranges=(Range("denoiser_sigma", 0.0, 0.1, "log"),))
    with pytest.raises(ConfigError, match="log scale"):
        check_space(log_from_zero)


def test_no_space_for_an_unknown_pair_names_the_known_ones():
    with pytest.raises(ConfigError, match="no tunable space for pnp algorithm 'pgd' with "
                                          "denoiser 'scunet'.*denoisers: bm3d, dncnn"):
        space_for("pgd", "scunet")


def test_red_lambda_is_declared_in_units_of_the_operator_norm():
    declared = space_for("red", "tv").range("red_lambda")
    assert declared.unit == NORM_UNIT
    assert solver_value(declared, 0.1, 7416.0) == pytest.approx(741.6)
    sigma = space_for("red", "tv").range("denoiser_sigma")
    assert solver_value(sigma, 0.01, 7416.0) == 0.01


def test_a_norm_scaled_range_needs_a_scale_free_parameter():
    space = Space("pgd", "tv", (Range("relaxation", 0.5, 1.5, "linear", unit=NORM_UNIT),))
    with pytest.raises(ConfigError, match=r"cannot be in units of \|\|A\|\|\^2"):
        check_space(space)


def test_step_scale_is_the_step_in_units_of_one_over_the_operator_norm():
    pgd, drs = ALGORITHMS["pgd"], ALGORITHMS["drs"]
    params = pnp_parameters()
    assert params["step_scale"] is None
    assert run_step(pgd, params, 8.0) == pytest.approx(1.0 / 8.0)
    assert run_step(drs, params, 8.0) == pytest.approx(10.0 / 8.0)
    assert run_step(pgd, pnp_parameters(step_scale=1.5), 8.0) == pytest.approx(1.5 / 8.0)
    assert run_step(pgd, pnp_parameters(step_size=0.3), 8.0) == 0.3


def test_step_given_twice_or_not_positive_is_refused():
    with pytest.raises(ConfigError, match="give step_size .* or step_scale .*, not both"):
        check_step(pnp_parameters(step_size=0.1, step_scale=1.0))
    with pytest.raises(ConfigError, match="parameter 'step_scale' must be a number > 0.0"):
        pnp_parameters(step_scale=0.0)


def test_an_unset_step_scale_leaves_a_runs_record_and_hash_as_before():
    """step_scale came after results were archived: null, it is no part of a run's
    parameters (config, hash, columns), so their hashes still match; set, it is."""
    from scalebench.benchopt_glue.base import LoopSolver, given_parameters
    from scalebench.param_spec import benchopt_parameters, recorded_parameters

    recorded = recorded_parameters(pnp_parameters(), PNP_PARAMS)
    assert "step_scale" not in recorded and "slurm_nodes" not in recorded
    assert recorded_parameters(pnp_parameters(step_scale=1.2), PNP_PARAMS)["step_scale"] == 1.2

    class Solver(LoopSolver):  # benchopt's view of a pnp solver
        name, param_specs = "pnp", PNP_PARAMS
        parameters = benchopt_parameters(PNP_PARAMS)
        build = make_loop = None

    unset = Solver.get_instance()
    assert "step_scale" not in unset.params and unset.params["step_size"] is None
    assert "step_scale" not in given_parameters(unset)  # nor in benchopt's name and columns
    assert Solver.get_instance(step_scale=1.2).params["step_scale"] == 1.2


def test_replay_reads_a_run_archived_before_step_scale_as_todays_default_run():
    """An archived config (no step_scale) and today's (step_scale null, left out) are one
    form, so replay pairs them; a set step_scale is another run."""
    import json

    from scalebench.benchmarks import INFERENCE
    from scalebench.results.replay.checks import current_form

    def config(**solver):
        return {"benchmark": INFERENCE.folder, "objective": {"name": INFERENCE.objective,
                                                              "params": {}},
                "dataset": {"name": "tomography_2d", "params": {"image_size": 64}},
                "solver": {"name": "pnp", "params": {"max_iter": 3, **solver}}}

    archived = current_form(config())
    assert archived == current_form(config(step_scale=None))
    assert "step_scale" not in json.loads(archived)["solver"]["params"]
    assert archived != current_form(config(step_scale=1.5))
