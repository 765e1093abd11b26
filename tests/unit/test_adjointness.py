"""The contract every forward operator keeps: it is linear with an exact adjoint,
<A x, y> = <x, A^T y>, checked one way over a list of (dataset, backend) factories, as
deepinv tests its physics. The cases are the problems' own (``ProblemSpec.adjoint_cases``):
every registered problem and every backend its parameters offer (tomography_2d's and
walnut_conebeam's ``projector``, radio_interferometry's ``backend``) has one; a new one
without a case fails ``test_every_dataset_and_backend_has_a_case``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from deepinv.utils import TensorList

from scalebench.benchmarks import registered_problems
from scalebench.physics.backends import astra_available, rtk_available
from scalebench.physics.conebeam import ConeGeometry, TorchConeBeam, circular_vectors
from scalebench.problems import setup_problem
from scalebench.problems.spec import ProblemSpec

# The parameters of a problem that choose the library behind its operator.
BACKEND_PARAMS = ("projector", "backend")
# <A x, y> and <x, A^T y> agree to this fraction of ||A x|| ||y||, per precision.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


@dataclass(frozen=True)
class Operator:
    """A forward operator and the shape and precision of what it is applied to."""

    physics: object  # A and A_adjoint, deepinv's interface
    x_shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32


def problem_operator(spec: ProblemSpec, **params) -> Callable[[], Operator]:
    def make() -> Operator:
        problem = setup_problem(spec.name, problems={spec.name: spec}, **params).build()
        return Operator(problem.physics, tuple(problem.x_true.shape))
    return make


def torch_conebeam_in_double() -> Operator:
    """The torch cone-beam projector on a grid that is not centred, a detector binned
    off-centre and several chunks, in float64 (where its adjoint is exact to rounding)."""
    geometry = ConeGeometry.centred(circular_vectors(4, 6.6, 13.3, 0.15), (12, 16, 14), 0.23,
                                    (20, 24), (0.1, -0.2, 0.05))
    return Operator(TorchConeBeam(geometry, max_samples=40000), (2, 1, 12, 16, 14),
                    torch.float64)


def torch_parallel_beam_in_double() -> Operator:
    """The torch parallel-beam projector in float64 (the precision the algorithm tests
    compare with deepinv in), where it runs wherever ASTRA does not."""
    problem = setup_problem("tomography_2d", image_size=24, num_angles=10,
                            projector="torch").build()
    return Operator(problem.physics, tuple(problem.x_true.shape), torch.float64)


# What an AdjointCase.requires names, and the skip where it is missing.
REQUIRES = {
    "astra": pytest.mark.skipif(not astra_available(), reason="astra-toolbox is an optional "
                                "extra (pip install '.[image]'), not installed"),
    "astra-cuda": pytest.mark.skipif(not astra_available(cuda=True),
                                     reason="ASTRA's cone-beam projector needs CUDA"),
    "rtk": pytest.mark.skipif(not rtk_available(), reason="ITK-RTK is an optional extra "
                              "(pip install '.[rtk]'), not installed"),
}


def backend(spec: ProblemSpec, params: dict) -> str | None:
    """The library a case's operator runs on: its backend parameter's value, None for a
    problem with one operator."""
    return next((params.get(key, spec.params[key].default) for key in BACKEND_PARAMS
                 if key in spec.params), None)


# (dataset, backend or None, the operator's factory, marks): every registered problem's
# spec cases (ProblemSpec.adjoint_cases), and the torch cone-beam projector off-centre in
# double precision.
CASES = [
    *[(name, backend(spec, case.params), problem_operator(spec, **case.params),
       (REQUIRES[case.requires],) if case.requires else ())
      for name, spec in sorted(registered_problems().items()) for case in spec.adjoint_cases],
    ("walnut_conebeam", "torch", torch_conebeam_in_double, ()),
    ("tomography_2d", "torch", torch_parallel_beam_in_double, ()),
]

pytestmark = pytest.mark.usefixtures("in_walnut_cache")  # walnut_conebeam reads it


def parts(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, TensorList) else [value]


def like(value, draw: Callable[[torch.Tensor], torch.Tensor]):
    """``draw`` of each part of ``value``, in its structure (a tensor or a TensorList)."""
    drawn = [draw(part) for part in parts(value)]
    return TensorList(drawn) if isinstance(value, TensorList) else drawn[0]


def inner(a, b) -> float:
    return sum(float(torch.sum(u.double() * v.double()))
               for u, v in zip(parts(a), parts(b), strict=True))


def norm(value) -> float:
    return sum(float(torch.sum(part.double() ** 2)) for part in parts(value)) ** 0.5


@pytest.mark.parametrize("make", [pytest.param(make, marks=marks, id=f"{dataset}-{backend}-{i}")
                                  for i, (dataset, backend, make, marks) in enumerate(CASES)])
def test_the_adjoint_is_exact(make):
    """Scale-free on Gaussian vectors (|<Ax, y> - <x, A^T y>| against ||Ax|| ||y||), and
    relative on positive ones, where nothing cancels."""
    operator = make()
    physics, tolerance = operator.physics, TOLERANCE[operator.dtype]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(operator.x_shape, generator=generator, dtype=operator.dtype)
    ax = physics.A(x)
    y = like(ax, lambda part: torch.randn(part.shape, generator=generator, dtype=part.dtype))
    gap = abs(inner(ax, y) - inner(x, physics.A_adjoint(y)))
    assert gap <= tolerance * norm(ax) * norm(y)
    x = x.abs()
    y = like(ax, lambda part: torch.rand(part.shape, generator=generator, dtype=part.dtype))
    lhs, rhs = inner(physics.A(x), y), inner(x, physics.A_adjoint(y))
    assert abs(lhs - rhs) <= tolerance * lhs


def registered_backends() -> set[tuple[str, str | None]]:
    """(dataset, backend) of every registered problem and every backend its parameters offer
    ('auto' stands for one of the others); (dataset, None) for a dataset with one operator."""
    found = set()
    for name, spec in registered_problems().items():
        choices = [choice for key in BACKEND_PARAMS if key in spec.params
                   for choice in spec.params[key].choices or () if choice != "auto"]
        found.update((name, choice) for choice in choices or [None])
    return found


def test_every_dataset_and_backend_has_a_case():
    assert registered_backends() - {(dataset, backend) for dataset, backend, _, _ in CASES} \
        == set()


def test_the_registry_lists_each_datasets_backends():
    """The guard reads what it guards: the projectors and libraries the parameters offer."""
    backends = registered_backends()
    assert {("tomography_2d", p) for p in ("torch", "astra", "deepinv")} <= backends
    assert {("walnut_conebeam", p) for p in ("torch", "rtk", "astra")} <= backends
    assert ("radio_interferometry", "dft") in backends
    assert ("synthetic", None) in backends and ("tomography_2d", None) not in backends


def module_tensors(physics: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor an operator holds: its parameters and buffers, and the tensors its modules
    keep as plain attributes (which ``Module.to`` would leave behind)."""
    found = {f"{type(physics).__name__}.{name}": t for name, t in physics.named_parameters()}
    found.update({f"{type(physics).__name__}.{name}": t for name, t in physics.named_buffers()})
    for module in physics.modules():
        found.update({f"{type(module).__name__}.{name}": value
                      for name, value in vars(module).items() if isinstance(value, torch.Tensor)})
    return found


SPEC_CASES = [pytest.param(spec, case.params, marks=(REQUIRES[case.requires],)
                           if case.requires else (), id=f"{name}-{i}")
              for name, spec in sorted(registered_problems().items())
              for i, case in enumerate(spec.adjoint_cases)]


@pytest.mark.parametrize(("spec", "params"), SPEC_CASES)
def test_a_moved_problem_has_every_tensor_on_its_device(spec, params):
    """``Problem.to`` reaches each operator of the stack and of the norm's start (the stack
    keeps them in a plain list); 'meta' stands for a GPU here."""
    problem = setup_problem(spec.name, problems={spec.name: spec}, **params).build().to("meta")
    stacks = [problem.physics] + ([problem.norm_start] if problem.norm_start else [])
    elsewhere = {name: str(t.device) for stack in stacks for operator in stack.physics_list
                 for name, t in module_tensors(operator).items() if t.device.type != "meta"}
    assert not elsewhere
    assert problem.x_true.device.type == "meta"
    assert all(y_k.device.type == "meta" for y_k in problem.y)
