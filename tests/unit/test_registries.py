"""Contract tests over the registries of denoisers and solvers: every registered entry keeps
the promises its spec makes, and a test fails when an entry has no contract case."""

import ast
import re

import pytest
import torch

from scalebench.benchmarks import INFERENCE
from scalebench.denoisers.catalog import DENOISERS, resolve_weights
from scalebench.denoisers.networks import load_denoiser
from scalebench.denoisers.tiles import check_denoiser_fits
from scalebench.denoisers.tiling import TiledDenoiser
from scalebench.errors import ConfigError
from scalebench.experiment.benchmark_files import declared_name, register_benchmark_denoisers
from scalebench.loops import SOLVERS

# One contract case per registered denoiser: the image side it is checked on.
# (wavelet's radius is 210 pixels: 256 leaves 45 pixels on each axis to check)
DENOISER_CASES = {"tv": 24, "drunet": 24, "dncnn": 24, "wavelet": 256, "bm3d": 32}


def test_every_registered_denoiser_has_a_contract_case():
    assert set(DENOISER_CASES) == set(DENOISERS)


@pytest.mark.parametrize("name", sorted(DENOISERS))
def test_denoiser_keeps_its_spec(name):
    spec = DENOISERS[name]
    side = DENOISER_CASES[name]
    radius = spec.receptive_radius
    assert side % spec.size_multiple == 0 and (radius is None or radius >= 0)
    model, record = load_denoiser(name, 1, "none", "cpu", seed=0)
    x = torch.rand(1, 1, side, side, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(x, 0.05)
    assert out.shape == x.shape and torch.isfinite(out).all()
    moved = x.clone()
    moved[..., -1, -1] += 1.0
    with torch.no_grad():
        changed = (model(moved, 0.05) - out).abs() > 0
    if radius is None:
        # a global denoiser: the impulse in one corner reaches the opposite one
        assert changed[..., :side // 4, :side // 4].any()
    elif radius < side - 1:
        # an input pixel farther than the receptive radius never changes an output pixel
        assert not changed[..., :side - 1 - radius, :side - 1 - radius].any()
    weights = resolve_weights(name, 1, "none")
    assert (weights.source == "none") == (not spec.has_weights)
    assert (record["weights_sha256"] == "") == (not spec.has_weights)
    volume = (1, 8, 8, 8)
    if spec.volumes:
        check_denoiser_fits({"denoiser": name, "tile_size": 0, "tile_overlap": 0}, volume)
    else:
        with pytest.raises(ConfigError, match="takes 2D images only"):
            check_denoiser_fits({"denoiser": name, "tile_size": 0, "tile_overlap": 0}, volume)


@pytest.mark.parametrize("side", [208, 264])
def test_no_impulse_reaches_beyond_the_wavelet_radius(side):
    """An impulse at each of the 8x8 positions of the decimation grid: the farthest output
    it changes lies within the spec's radius (the analytic bound; measured: 94 pixels at
    side 208, 135 at 264)."""
    spec = DENOISERS["wavelet"]
    model, _ = load_denoiser("wavelet", 1, "none", "cpu")
    centre, grid = side // 2 // 8 * 8, spec.size_multiple
    x = torch.rand(1, 1, side, side, generator=torch.Generator().manual_seed(1))
    reach = 0
    with torch.no_grad():
        base = model(x, 0.1)
        for row in range(grid):
            moved = x.repeat(grid, 1, 1, 1)
            for column in range(grid):
                moved[column, 0, centre + row, centre + column] += 1.0
            changed = (model(moved, 0.1) - base).abs() > 0
            for column in range(grid):
                where = torch.nonzero(changed[column, 0])
                offsets = (where - torch.tensor([centre + row, centre + column])).abs()
                reach = max(reach, int(offsets.max()))
    assert 0 < reach <= spec.receptive_radius


def test_every_registered_solver_has_its_benchmark_file_and_every_file_is_registered():
    files = {declared_name(p): p for p in (INFERENCE.path / "solvers").glob("*.py")}
    assert set(files) == set(SOLVERS)


def test_solver_files_take_their_parameters_from_the_registry():
    for path in (INFERENCE.path / "solvers").glob("*.py"):
        source = path.read_text()
        assert "spec = SOLVERS[name]" in source and "param_specs = spec.params" in source, path
        ast.parse(source)


@pytest.mark.parametrize("name", ["wavelet", "bm3d"])
def test_weightless_priors_denoise_colour_images(name):
    """Colour noise on a smooth colour image: the output keeps the shape and is nearer the
    clean image than the noisy input."""
    model, _ = load_denoiser(name, 3, "none", "cpu")
    ramp = torch.linspace(0, 1, 64)
    clean = torch.stack([ramp[None, :].expand(64, 64), ramp[:, None].expand(64, 64),
                         0.5 * torch.ones(64, 64)])[None]
    noisy = clean + 0.1 * torch.randn(clean.shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(noisy, 0.1)
    assert out.shape == clean.shape
    assert float(((out - clean) ** 2).mean()) < 0.5 * float(((noisy - clean) ** 2).mean())


@pytest.fixture
def registry_restored():
    """DENOISERS as it was before the test (a benchmark's denoiser files add to it)."""
    saved = dict(DENOISERS)
    yield
    DENOISERS.clear()
    DENOISERS.update(saved)


def test_a_benchmark_denoiser_file_joins_the_registry_and_runs(tmp_path, registry_restored):
    (tmp_path / "denoisers").mkdir()
    (tmp_path / "denoisers" / "blur.py").write_text(
        "import torch\n"
        "from scalebench.denoisers.spec import DenoiserSpec\n"
        "class Blur(torch.nn.Module):\n"
        "    def forward(self, x, sigma):\n"
        "        return torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False)\n"
        "SPEC = DenoiserSpec('blur', '3x3 mean', size_multiple=1, receptive_radius=1,\n"
        "                    volumes=False, build=lambda channels, weights, device: Blur())\n")
    assert register_benchmark_denoisers(tmp_path) == ["blur"]
    assert register_benchmark_denoisers(tmp_path) == ["blur"]  # the same file again: kept
    assert DENOISERS["blur"].receptive_radius == 1
    assert resolve_weights("blur", 1, "auto").source == "none"
    model, _ = load_denoiser("blur", 1, "none", "cpu", seed=0)
    x = torch.rand(1, 1, 40, 40, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model(x, 0.05)
        tiled = TiledDenoiser(model, 16, 1, 1, 1)(x, 0.05)
    assert torch.equal(tiled, full)


@pytest.mark.parametrize(("text", "message"), [
    ("X = 1\n", "has no SPEC (a scalebench.denoisers.spec.DenoiserSpec)"),
    ("from scalebench.denoisers.catalog import DENOISERS\nSPEC = DENOISERS['dncnn']\n",
     "the name 'dncnn' is already defined by scalebench; give it another name"),
    ("raise RuntimeError('broken')\n", "cannot be imported: RuntimeError: broken"),
])
def test_a_bad_benchmark_denoiser_file_is_refused_in_one_line(tmp_path, registry_restored,
                                                              text, message):
    (tmp_path / "denoisers").mkdir()
    (tmp_path / "denoisers" / "mine.py").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        register_benchmark_denoisers(tmp_path)
    assert set(DENOISERS) == set(DENOISER_CASES)
