"""Contract tests over the registries of denoisers and solvers: every registered entry keeps
the promises its spec makes, and a test fails when an entry has no contract case."""

import ast

import deepinv  # noqa: F401 - first import runs a subprocess (h5py): not inside a test
import pytest
import torch

from scalebench.benchmarks import REPO
from scalebench.denoisers.catalog import DENOISERS, resolve_weights
from scalebench.denoisers.networks import load_denoiser
from scalebench.denoisers.tiles import check_denoiser_fits
from scalebench.errors import ConfigError
from scalebench.experiment.benchmark_files import declared_name
from scalebench.loops import SOLVERS

# One contract case per registered denoiser: the image side it is checked on.
DENOISER_CASES = {"tv": 24, "drunet": 24, "dncnn": 24}


def test_every_registered_denoiser_has_a_contract_case():
    assert set(DENOISER_CASES) == set(DENOISERS)


@pytest.mark.parametrize("name", sorted(DENOISERS))
def test_denoiser_keeps_its_spec(name):
    spec = DENOISERS[name]
    side = DENOISER_CASES[name]
    assert side % spec.size_multiple == 0 and spec.receptive_radius >= 0
    model, record = load_denoiser(name, 1, "none", "cpu", seed=0)
    x = torch.rand(1, 1, side, side, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(x, 0.05)
    assert out.shape == x.shape and torch.isfinite(out).all()
    # an input pixel farther than the receptive radius never changes an output pixel
    if spec.receptive_radius < side - 1:
        moved = x.clone()
        moved[..., -1, -1] += 1.0
        with torch.no_grad():
            changed = (model(moved, 0.05) - out).abs() > 0
        far = changed[..., :side - 1 - spec.receptive_radius, :side - 1 - spec.receptive_radius]
        assert not far.any()
    weights = resolve_weights(name, 1, "none")
    assert (weights.source == "none") == (not spec.has_weights)
    assert (record["weights_sha256"] == "") == (not spec.has_weights)
    volume = (1, 8, 8, 8)
    if spec.volumes:
        check_denoiser_fits({"denoiser": name, "tile_size": 0, "tile_overlap": 0}, volume)
    else:
        with pytest.raises(ConfigError, match="takes 2D images only"):
            check_denoiser_fits({"denoiser": name, "tile_size": 0, "tile_overlap": 0}, volume)


def test_every_registered_solver_has_its_benchmark_file_and_every_file_is_registered():
    files = {declared_name(p): p for p in (REPO / "benchmark_inference" / "solvers").glob("*.py")}
    assert set(files) == set(SOLVERS)


def test_solver_files_take_their_parameters_from_the_registry():
    for path in (REPO / "benchmark_inference" / "solvers").glob("*.py"):
        source = path.read_text()
        assert "spec = SOLVERS[name]" in source and "param_specs = spec.params" in source, path
        ast.parse(source)
