"""Each PnP algorithm of the ``pnp`` solver against deepinv's own implementation (deepinv.optim,
DPIR's schedule) with the same denoiser, parameters and initial estimate, on a small CT and a
small super-resolution problem; the data prox against the exact solve; the algorithms'
registry and their bad input."""

from dataclasses import replace

import pytest
import torch
from deepinv.optim import L2
from deepinv.optim.dpir import get_DPIR_params
from deepinv.optim.optimizers import BaseOptim, create_iterator
from deepinv.optim.prior import RED, PnP
from deepinv.utils import TensorList

from scalebench.errors import ConfigError
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.algorithms.dpir import schedule
from scalebench.loops.inference_parameters import check_pnp, pnp_parameters
from scalebench.loops.pnp import DataProx, PnPLoop, conjugate_gradient
from scalebench.problems import PROBLEMS, build_problem
from scalebench.rank.profiling import StepProfiler

CPU = torch.device("cpu")
ITERATIONS = 3
# Both sides solve the data prox to float32 precision, so only rounding separates them.
EXACT_CG = {"cg_tolerance": 1e-10, "cg_max_iter": 100}
RELATIVE = 1e-5
# Algorithms with a data prox: both sides' CG stop at different points below their tolerance;
# after a few iterations CT differs by about 3e-6 and DPIR's 8 on super-resolution by 3e-5.
PROX_RELATIVE = 5e-5


class Smoothing(torch.nn.Module):
    """A deterministic, sigma-dependent denoiser: a 3x3 blur mixed with its input."""

    def forward(self, x, sigma):
        weight = torch.full((x.shape[1], 1, 3, 3), 1 / 9, dtype=x.dtype)
        blurred = torch.nn.functional.conv2d(x, weight, padding=1, groups=x.shape[1])
        mix = min(float(sigma) * 5, 1.0)
        return mix * blurred + (1 - mix) * x


def _in_double(problem):
    """The problem in float64: both sides' CG then solve far below the compared tolerance
    (in float32 their different stopping points alone differ by about 1e-5 after a few
    iterations)."""
    for operator in problem.physics.physics_list:  # a plain list: .double() misses them
        operator.double()
    return replace(problem, physics=problem.physics.double(),
                   x_true=problem.x_true.double(),
                   y=TensorList([y_k.double() for y_k in problem.y]))


# The CT case uses the torch projector: the algorithms are compared here, not the projectors
# (tests/unit/test_adjointness.py checks each), and ASTRA's CPU projector, called once per
# angle, makes the CG data prox five times as slow.
PROBLEM_CASES = {
    "ct": lambda: _in_double(build_problem("tomography_2d", image_size=32, num_angles=20,
                                           noise_level=0.02, projector="torch")),
    "superres": lambda: _in_double(build_problem("multiframe_superres", image_size=32,
                                                 num_frames=2, factor=2, noise_level=0.02)),
}


@pytest.fixture(scope="module", params=sorted(PROBLEM_CASES))
def problem(request):
    return PROBLEM_CASES[request.param]()


def _ours(problem, algorithm, iterations=ITERATIONS, **values):
    params = pnp_parameters(algorithm=algorithm, denoiser_sigma=0.05, max_iter=iterations,
                            init="adjoint", **{**EXACT_CG, **values})
    loop = PnPLoop(problem, Smoothing(), params, StepProfiler(CPU))
    x0 = loop.x.clone()
    for _ in range(iterations):
        loop.iterate()
    return loop, x0


def _reference_physics(problem, cg_max_iter=100):
    """The physics and data deepinv's optimisers get: a single operator itself (deepinv's
    stacked prox_l2 does not solve a one-operator stack), its CG set to solve to rounding."""
    physics, y = problem.physics, problem.y
    if len(physics.physics_list) == 1:
        physics, y = physics.physics_list[0], y[0]
    physics.max_iter, physics.tol = cg_max_iter, 1e-10
    return physics, y


def _close(ours, reference, relative=RELATIVE):
    error = float((ours - reference).norm() / reference.norm())
    assert error <= relative, f"relative difference {error:.2e}"


def _deepinv(problem, iteration, params, init, prior=None, iterations=ITERATIONS,
             cg_max_iter=100):
    """deepinv's optimiser ``iteration`` ("PGD", "ADMM", ...) from ``init``."""
    prior = prior or PnP(Smoothing())
    optimiser = BaseOptim(create_iterator(iteration, prior=prior), max_iter=iterations,
                          data_fidelity=L2(), prior=prior, early_stop=False,
                          params_algo={"lambda": 1.0, **params})
    physics, y = _reference_physics(problem, cg_max_iter)
    return optimiser(y, physics, init=init)


def gradient_matches_deepinv(problem, algorithm):
    loop, x0 = _ours(problem, algorithm)
    params = {"stepsize": loop.step_size, "g_param": 0.05}
    if algorithm == "fista":
        reference = _deepinv(problem, "FISTA", {**params, "a": 3}, (x0, x0))
    else:
        reference = _deepinv(problem, "PGD", params, x0)
    _close(loop.x, reference)


def test_relaxed_pgd_matches_deepinv(problem):
    loop, x0 = _ours(problem, "pgd", relaxation=0.7)
    reference = _deepinv(problem, "PGD", {"stepsize": loop.step_size, "g_param": 0.05,
                                          "beta": 0.7}, x0)
    _close(loop.x, reference)


def splitting_matches_deepinv(problem, algorithm):
    loop, x0 = _ours(problem, algorithm, step_size=0.5, relaxation=0.9)
    # ADMM's scaled dual starts at 0, DRS's auxiliary variable at x0.
    init = {"hqs": x0, "admm": (x0, torch.zeros_like(x0)), "drs": (x0, x0)}[algorithm]
    reference = _deepinv(problem, algorithm.upper(),
                         {"stepsize": 0.5, "g_param": 0.05, "beta": 0.9}, init)
    _close(loop.x, reference, PROX_RELATIVE)


def dpir_matches_deepinv_schedule_and_iterations(problem, algorithm):
    loop, x0 = _ours(problem, algorithm, iterations=8)
    sigmas, stepsizes, iterations = get_DPIR_params(0.05)
    assert iterations == 8
    ours = schedule(49 / 255, 0.05, 8, 0.23)
    assert torch.allclose(torch.tensor([s for s, _ in ours]), sigmas, rtol=1e-6)
    assert torch.allclose(torch.tensor([g for _, g in ours]), stepsizes, rtol=1e-5)
    # deepinv's schedule assumes ||A|| = 1; ours is relative to ||A||^2
    reference = _deepinv(problem, "HQS", {"stepsize": stepsizes.double() / loop.lipschitz,
                                          "g_param": sigmas.double()}, x0, iterations=8)
    _close(loop.x, reference, PROX_RELATIVE)


def red_matches_deepinv_gradient_descent(problem, algorithm):
    loop, x0 = _ours(problem, algorithm, red_lambda=0.6)
    reference = _deepinv(problem, "GD", {"stepsize": loop.step_size, "g_param": 0.05,
                                         "lambda": 0.6}, x0, prior=RED(Smoothing()))
    _close(loop.x, reference)


# Each registered algorithm's comparison with deepinv's optimiser of the same iteration.
COMPARISONS = {"pgd": gradient_matches_deepinv, "fista": gradient_matches_deepinv,
               "hqs": splitting_matches_deepinv, "admm": splitting_matches_deepinv,
               "drs": splitting_matches_deepinv,
               "dpir": dpir_matches_deepinv_schedule_and_iterations,
               "red": red_matches_deepinv_gradient_descent}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_matches_deepinv(problem, algorithm):
    """Adding an algorithm means adding its comparison to COMPARISONS."""
    assert algorithm in COMPARISONS, f"no deepinv comparison for algorithm '{algorithm}'"
    COMPARISONS[algorithm](problem, algorithm)


def test_data_prox_solves_the_normal_equations(problem):
    prox = DataProx(problem, 1e-6, 500)
    z = torch.rand_like(problem.x_true)
    x = prox(z, 0.3)
    physics = problem.physics
    left = physics.A_adjoint(physics.A(x)) + x / 0.3
    right = physics.A_adjoint(problem.y) + z / 0.3
    assert float((left - right).norm() / right.norm()) < 1e-5
    assert 0 < prox.iterations < 500


def test_warm_started_prox_needs_fewer_iterations_on_a_nearby_system():
    problem = PROBLEM_CASES["ct"]()
    prox = DataProx(problem, 1e-4, 500)
    z = torch.rand_like(problem.x_true)
    prox(z, 0.3)
    cold = prox.iterations
    prox(z + 1e-3 * torch.rand_like(z), 0.3)
    assert prox.iterations < cold


def test_denoising_prox_is_closed_form():
    problem = build_problem("synthetic", image_size=32, task="denoising")
    prox = DataProx(problem, 1e-4, 50)
    z = torch.rand_like(problem.x_true)
    x = prox(z, 0.25)
    assert prox.iterations == 0
    assert torch.allclose(x, (problem.y[0] + 4 * z) / 5)


def test_conjugate_gradient_solves_a_small_system_exactly():
    matrix = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    right = torch.tensor([1.0, 2.0], dtype=torch.float64)
    x, iterations = conjugate_gradient(lambda v: matrix @ v, right, torch.zeros(2,
                                       dtype=torch.float64), 1e-14, 10)
    assert iterations == 2  # CG ends in at most n steps on an n x n system
    assert torch.allclose(x, torch.linalg.solve(matrix, right))


def test_prox_steps_are_measured_with_their_cg_iterations():
    problem = PROBLEM_CASES["ct"]()
    loop, _ = _ours(problem, "admm", iterations=3)
    last = loop.profiler.last
    assert {"grad_time_s", "prox_time_s", "denoise_time_s"} & set(last) == \
        {"prox_time_s", "denoise_time_s"}
    assert last["prox_cg_iterations"] >= 1


def test_every_comparison_is_of_a_registered_algorithm():
    assert set(COMPARISONS) <= set(ALGORITHMS)


def _check(**values):
    params = pnp_parameters(**values)
    spec = PROBLEMS["tomography_2d"]
    check_pnp(spec, {}, (1, 32, 32), params)


def test_dpir_schedule_that_does_not_decrease_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="dpir_sigma_start .* must exceed denoiser_sigma") \
            as error:
        _check(algorithm="dpir", dpir_sigma_start=0.05, denoiser_sigma=0.1)
    assert "\n" not in str(error.value)


def test_a_step_given_twice_is_refused_by_the_config_checks_in_one_line():
    with pytest.raises(ConfigError, match="give step_size .* or step_scale .*, not both") \
            as error:
        _check(step_size=1e-4, step_scale=1.0)
    assert "\n" not in str(error.value)
    _check(step_scale=1.0)


def test_prox_algorithm_on_a_dataset_without_a_prox_is_refused():
    spec = replace(PROBLEMS["tomography_2d"], data_prox=False)
    with pytest.raises(ConfigError, match="algorithm 'admm' needs the data term's proximal "
                                          "operator.*use pgd, fista, red"):
        check_pnp(spec, {}, (1, 32, 32), pnp_parameters(algorithm="admm"))
    check_pnp(spec, {}, (1, 32, 32), pnp_parameters(algorithm="fista"))


@pytest.mark.parametrize("value", [0.0, 0.9, -1.0])
def test_cg_tolerance_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match="parameter 'cg_tolerance' must be a number >= "):
        pnp_parameters(cg_tolerance=value)
