"""3D cone-beam CT: the projector (analytic ball, determinism; its adjointness is in
test_adjointness.py), the Walnut data set's pre-processing and the walnut_conebeam problem, on a
miniature walnut in the data set's file layout made by tests/support/walnut_fixture.py (no
network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalebench.data import walnut
from scalebench.denoisers.build import make_denoiser
from scalebench.errors import ConfigError, MissingFileError
from scalebench.loops.inference_parameters import PNP_PARAMS
from scalebench.loops.pnp import PnPLoop
from scalebench.param_spec import resolved_parameters
from scalebench.physics.backends import astra_available, rtk_available
from scalebench.physics.conebeam import (
    AstraConeBeam,
    ConeGeometry,
    RtkConeBeam,
    TorchConeBeam,
    circular_vectors,
)
from scalebench.problems import build_problem, setup_problem
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler
from tests.support import walnut_fixture

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def cache(in_walnut_cache):
    """SCALEBENCH_CACHE holding the unpacked miniature walnut, for this module."""
    return in_walnut_cache


def ball_geometry(views: int = 8) -> ConeGeometry:
    return ConeGeometry.centred(circular_vectors(views, 6.6, 13.3, 0.15), (32, 32, 32), 0.1,
                                (40, 48))


def voxelised_ball(radius_mm: float, size: int = 32, supersample: int = 4) -> torch.Tensor:
    axis = ((np.arange(size * supersample) + 0.5) / supersample - size / 2) * 0.1
    z, y, x = np.meshgrid(axis, axis, axis, indexing="ij")
    s = supersample
    ball = (x ** 2 + y ** 2 + z ** 2 <= radius_mm ** 2).astype(np.float32)
    ball = ball.reshape(size, s, size, s, size, s).mean(axis=(1, 3, 5))
    return torch.from_numpy(ball)[None, None]


def test_projector_matches_the_analytic_projection_of_a_ball():
    geometry = ball_geometry()
    radius = 1.0
    projected = TorchConeBeam(geometry).A(voxelised_ball(radius))[0, 0].numpy()
    exact = walnut_fixture.ellipsoid_chords(geometry.vectors, geometry.detector_shape,
                                            (0, 0, 0), (radius,) * 3)
    error = np.linalg.norm(projected - exact) / np.linalg.norm(exact)
    assert error < 0.05, error  # the voxelised ball's boundary, interpolated
    centre = exact > 0.95 * 2 * radius  # rays through the middle: long chords, small error
    assert np.abs(projected[centre] - exact[centre]).max() < 0.01 * 2 * radius


def test_the_cuda_paths_scatter_gives_the_gathered_adjoint(cache):
    """The scatter of the same trilinear weights (the CUDA path) is the adjoint the CPU
    gathers, on the walnut's own vectors, a grid that is not centred and several chunks."""
    prepared = walnut.load_prepared(walnut.prepare(cache, 1, 2, 16))
    geometry = ConeGeometry.centred(prepared.vectors, (12, 16, 14), 0.23,
                                    prepared.projections.shape[1:], (0.1, -0.2, 0.05))
    operator = TorchConeBeam(geometry, max_samples=40000)  # several chunks
    generator = torch.Generator().manual_seed(0)
    x = torch.randn((2, 1, 12, 16, 14), generator=generator, dtype=torch.float64)
    y = torch.randn((2, 1, *operator.A(x).shape[2:]), generator=generator, dtype=torch.float64)
    scattered = operator.scatter_adjoint(y)
    assert float(torch.linalg.vector_norm(scattered - operator.A_adjoint(y))
                 / torch.linalg.vector_norm(scattered)) < 1e-5


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the CUDA path (scatter adjoint) needs a GPU"))]


@pytest.mark.parametrize("device", DEVICES)
def test_projector_is_deterministic(device):
    """Two adjoints bitwise equal, with torch's deterministic mode raising on any kernel
    that has no deterministic implementation."""
    operator = TorchConeBeam(ball_geometry(2), max_samples=40000).to(device)
    y = torch.rand((1, 1, 2, 40, 48), generator=torch.Generator().manual_seed(1)).to(device)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.equal(operator.A_adjoint(y), operator.A_adjoint(y))
    finally:
        torch.use_deterministic_algorithms(previous)


def test_prepared_walnut_agrees_with_the_projection_of_its_reference(cache):
    """Orientation, view order, flat/dark correction, -log and binning, checked together:
    the reference volume projected through the prepared geometry gives the prepared data."""
    for binning in (1, 2):
        prepared = walnut.load_prepared(walnut.prepare(cache, 2, binning, 16))
        assert prepared.projections.shape == (16, 32 // binning, 32 // binning)
        assert prepared.volume.shape == (32 // binning,) * 3
        geometry = ConeGeometry.centred(prepared.vectors, prepared.volume.shape,
                                        prepared.voxel_size, prepared.projections.shape[1:],
                                        prepared.shift)
        projected = TorchConeBeam(geometry).A(torch.from_numpy(prepared.volume)[None, None])
        error = np.linalg.norm(projected[0, 0].numpy() - prepared.projections) \
            / np.linalg.norm(prepared.projections)
        assert error < 0.06, (binning, error)
    # Reading back the same order of the other views would not agree: the check has teeth.
    wrong = prepared.projections[::-1]
    assert np.linalg.norm(projected[0, 0].numpy() - wrong) / np.linalg.norm(wrong) > 0.1


def test_prepared_arrays_are_cached_and_reused(cache):
    folder = walnut.prepare(cache, 3, 2, 8)
    stamp = (folder / "projections.npy").stat().st_mtime_ns
    assert walnut.prepare(cache, 3, 2, 8) == folder
    assert (folder / "projections.npy").stat().st_mtime_ns == stamp
    assert walnut.load_prepared(folder).projections.shape == (8, 16, 16)


def test_problem_stacks_view_groups_of_measured_data(cache):
    problem = build_problem("walnut_conebeam", binning=2, num_projections=16, num_operators=3,
                            projector="torch")
    prepared = walnut.load_prepared(walnut.prepare(cache, 2, 2, 16))
    assert problem.x_true.shape == (1, 1, 16, 16, 16)
    assert [y.shape[2] for y in problem.y] == [6, 5, 5]
    assert torch.equal(problem.y[1][0, 0], torch.from_numpy(prepared.projections[1::3]))
    again = build_problem("walnut_conebeam", binning=2, num_projections=16, num_operators=3,
                          projector="torch")
    assert again.data_sha256 == problem.data_sha256


def test_simulated_data_are_seeded(cache):
    def simulated(seed):
        return build_problem("walnut_conebeam", binning=2, num_projections=8, data="simulated",
                             noise_level=0.05, seed=seed, projector="torch")

    a, b, c = simulated(3), simulated(3), simulated(4)
    assert a.data_sha256 == b.data_sha256 != c.data_sha256


def test_pnp_improves_psnr_over_its_initial_estimate(cache):
    problem = build_problem("walnut_conebeam", binning=2, num_projections=8, num_operators=2,
                            projector="torch")
    params = resolved_parameters({"denoiser_sigma": 0.01, "init": "adjoint"}, PNP_PARAMS)
    loop = PnPLoop(problem, make_denoiser(params, (1, 16, 16, 16), CPU),
                   params, StepProfiler(CPU, "light", None))
    start = psnr(loop.x, problem.x_true)
    for _ in range(8):
        loop.iterate()
    assert psnr(loop.x, problem.x_true) >= start + 3.0


def test_missing_walnut_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match=r"scalebench fetch --data walnut"):
        setup_problem("walnut_conebeam")


@pytest.mark.parametrize(("name", "content"), [
    ("projections.npy", b"not an array"), ("projections.npy", b""),
    ("info.json", b'{"orbit": 1}')])
def test_corrupt_prepared_arrays_name_the_fix(cache, name, content):
    folder = walnut.prepare(cache, 1, 4, 4)
    original = (folder / name).read_bytes()
    (folder / name).write_bytes(content)
    try:
        with pytest.raises(MissingFileError, match=r"unreadable .*delete that folder"):
            setup_problem("walnut_conebeam", orbit=1, binning=4, num_projections=4,
                          projector="torch")
    finally:
        (folder / name).write_bytes(original)


def test_dead_detector_pixels_leave_the_measurements_finite(tmp_path):
    """A pixel whose flat field equals its dark field has no transmission (0/0)."""
    import tifffile

    cache = walnut_fixture.walnut_cache(tmp_path)
    orbit = walnut.walnut_folder(cache) / "Projections" / "tubeV1"
    dark = tifffile.imread(orbit / "di000000.tif")
    for name in ("io000000.tif", "io000001.tif"):
        flat = tifffile.imread(orbit / name)
        flat[3, 5] = dark[3, 5]
        tifffile.imwrite(orbit / name, flat)
    prepared = walnut.load_prepared(walnut.prepare(cache, 1, 2, 4))
    assert np.isfinite(prepared.projections).all()


def test_too_many_views_is_a_config_error(cache):
    with pytest.raises(ConfigError, match="num_projections .* exceeds the 16 views"):
        setup_problem("walnut_conebeam", binning=2, num_projections=17, projector="torch")


@pytest.mark.skipif(not rtk_available(),
                    reason="ITK-RTK is an optional extra (pip install '.[rtk]'), not installed")
def test_rtk_projector_matches_the_ball_and_the_torch_projector(cache):
    geometry = ball_geometry()
    projected = RtkConeBeam(geometry).A(voxelised_ball(1.0))[0, 0].numpy()
    exact = walnut_fixture.ellipsoid_chords(geometry.vectors, geometry.detector_shape,
                                            (0, 0, 0), (1.0,) * 3)
    assert np.linalg.norm(projected - exact) / np.linalg.norm(exact) < 0.05
    prepared = walnut.load_prepared(walnut.prepare(cache, 1, 2, 16))
    walnut_geometry = ConeGeometry.centred(prepared.vectors, prepared.volume.shape,
                                           prepared.voxel_size, prepared.projections.shape[1:],
                                           prepared.shift)
    operator = RtkConeBeam(walnut_geometry)
    volume = torch.from_numpy(prepared.volume)[None, None]
    ours = TorchConeBeam(walnut_geometry).A(volume)
    assert float(torch.linalg.vector_norm(operator.A(volume) - ours)
                 / torch.linalg.vector_norm(ours)) < 0.03
    y = torch.rand(ours.shape, generator=torch.Generator().manual_seed(5))
    assert torch.equal(operator.A_adjoint(y), operator.A_adjoint(y))  # deterministic
    problem = build_problem("walnut_conebeam", binning=2, num_projections=8)
    # auto picks ASTRA where it can use CUDA, else RTK
    expected = AstraConeBeam if astra_available(cuda=True) else RtkConeBeam
    assert isinstance(problem.physics.physics_list[0], expected)


@pytest.mark.skipif(not astra_available(cuda=True), reason="ASTRA's cone-beam projector needs CUDA")
def test_astra_and_torch_projectors_agree(cache):
    prepared = walnut.load_prepared(walnut.prepare(cache, 2, 1, 16))
    geometry = ConeGeometry.centred(prepared.vectors, prepared.volume.shape,
                                    prepared.voxel_size, prepared.projections.shape[1:],
                                    prepared.shift)
    volume = torch.from_numpy(prepared.volume)[None, None]
    ours = TorchConeBeam(geometry).A(volume)
    theirs = AstraConeBeam(geometry).A(volume)
    assert float(torch.linalg.vector_norm(ours - theirs) / torch.linalg.vector_norm(theirs)) \
        < 0.02


def test_orbit_views_count_the_rows_the_geometry_reader_reads(tmp_path):
    """validate/plan count views without numpy; preparation reads the file with numpy: a
    comment or a blank line must not make them disagree."""
    import numpy as np

    from scalebench.data.walnut import orbit_views

    geometry = tmp_path / "Projections" / "tubeV2" / "scan_geom_corrected.geom"
    geometry.parent.mkdir(parents=True)
    rows = [" ".join(["1.0"] * 12)] * 4
    geometry.write_text("# source, detector, u, v\n" + "\n".join(rows[:2]) + "\n\n"
                        + "\n".join(rows[2:]) + "  # last: the first angle again\n")
    assert orbit_views(tmp_path, 2) == len(np.loadtxt(geometry, ndmin=2)) - 1 == 3
