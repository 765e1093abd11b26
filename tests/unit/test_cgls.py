"""The cgls baseline against exact least squares computed by numpy from the dense matrix of
the operator: each iterate is the least-squares solution over its Krylov subspace, and the
iterations reach numpy's least-squares solution."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from deepinv.utils import TensorList

from scalebench.loops import SOLVERS
from scalebench.loops.cgls import CGLSLoop
from scalebench.problems import build_problem
from scalebench.rank.profiling import StepProfiler

# Float64 rounding only separates the two sides (a wrong step is off by O(1)).
TOLERANCE = 1e-8
# Iterations after which CG has reached the fit of this rank-deficient system to rounding
# (1e-12 relative after 150, measured).
ITERATIONS = 200


def _in_double(problem):
    for operator in problem.physics.physics_list:  # a plain list: .double() misses them
        operator.double()
    return replace(problem, physics=problem.physics.double(), x_true=problem.x_true.double(),
                   y=TensorList([y_k.double() for y_k in problem.y]))


@pytest.fixture(scope="module")
def superres():
    """16x16 colour super-resolution from 3 blurred frames at half resolution (a stack of 3
    operators, 576 measurements for 768 unknowns), in float64 (whose convolutions are exact
    transposes, unlike the CT projectors' float32 kernels), with its dense matrix (one column
    per unit image, applied as one batch) and stacked measurements."""
    problem = _in_double(build_problem("multiframe_superres", image_size=16, num_frames=3,
                                       factor=2, noise_level=0.05))
    count = problem.num_unknowns
    basis = torch.eye(count, dtype=torch.float64).reshape(count, *problem.x_true.shape[1:])
    with torch.no_grad():
        images = problem.physics.A(basis)
    matrix = torch.cat([part.reshape(count, -1) for part in images], dim=1).T.numpy()
    y = torch.cat([part.flatten() for part in problem.y]).numpy()
    return problem, matrix, y


def _run(problem, iterations):
    loop = CGLSLoop(problem, StepProfiler(torch.device("cpu")))
    estimates = [loop.x.flatten().numpy().copy()]
    for _ in range(iterations):
        loop.iterate()
        estimates.append(loop.x.flatten().numpy().copy())
    return loop, estimates


def test_each_iterate_is_the_least_squares_solution_over_its_krylov_subspace(superres):
    problem, matrix, y = superres
    _, estimates = _run(problem, 6)
    assert not estimates[0].any()  # the first row is the zero image
    gram, right = matrix.T @ matrix, matrix.T @ y
    vectors = [right]
    for k in range(1, 7):
        # an orthonormal basis of span{b, Mb, ..., M^(k-1) b}, then numpy's least squares in it
        basis, _ = np.linalg.qr(np.stack(vectors, axis=1))
        coefficients, *_ = np.linalg.lstsq(matrix @ basis, y, rcond=None)
        expected = basis @ coefficients
        assert np.linalg.norm(estimates[k] - expected) <= TOLERANCE * np.linalg.norm(expected), k
        vectors.append(gram @ vectors[-1])


def test_the_iterations_reach_the_least_squares_fit(superres):
    """The blurred system is rank-deficient (condition number 2e16): its solution is not
    unique, but its fit is: CG reaches the residual ||A x - y|| of numpy's least squares,
    decreasing at every iteration."""
    problem, matrix, y = superres
    expected, *_ = np.linalg.lstsq(matrix, y, rcond=None)
    best = np.linalg.norm(matrix @ expected - y)
    loop, estimates = _run(problem, ITERATIONS)
    reached = [np.linalg.norm(matrix @ x - y) for x in estimates]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(reached, reached[1:], strict=False))
    assert reached[-1] <= best * (1 + 1e-9) and reached[0] > 2 * best
    # every iteration was measured as one "grad" step
    assert loop.profiler.last["grad_time_s"] > 0


def test_cgls_is_registered_without_a_denoiser():
    spec = SOLVERS["cgls"]
    assert spec.uses_operator and not spec.uses_denoiser
    assert "denoiser" not in spec.params and "distribute_physics" in spec.params
