"""Lean operators at scale: the parallel-beam projectors, the cached operator norm, the
large-size generators and PnP on every problem (tiny sizes, CPU, no network)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from deepinv.physics import Downsampling, Tomography

from scalebench.denoisers.networks import build_denoiser
from scalebench.denoisers.tiles import check_denoiser_fits
from scalebench.errors import ConfigError
from scalebench.loops.inference_parameters import pnp_parameters
from scalebench.loops.pnp import PnPLoop
from scalebench.physics import parallel_beam
from scalebench.physics.downsampling import BlurDownsampling
from scalebench.physics.parallel_beam import ParallelBeam2D
from scalebench.problems import build_problem, setup_problem
from scalebench.problems import tomography_2d as tomography
from scalebench.rank import operator_norm
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler
from scalebench.rank.settings import ProcessSettings, installed

PROJECTORS = ["torch", "astra"]


def _angles(count: int) -> torch.Tensor:
    return torch.arange(count, dtype=torch.float32) * (180.0 / count)


def _gaussian_bump(size: int) -> torch.Tensor:
    offsets = torch.arange(size, dtype=torch.float32) - size / 2 + 0.5
    yy, xx = torch.meshgrid(offsets, offsets, indexing="ij")
    return torch.exp(-(xx**2 + yy**2) / (2 * (size / 8) ** 2))[None, None]


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def test_torch_adjoint_is_the_transpose_entry_by_entry():
    size, angles = 12, 7
    op = ParallelBeam2D(_angles(angles), size, "torch")
    matrix = op.A(torch.eye(size * size).reshape(-1, 1, size, size)).reshape(size * size, -1)
    cells = matrix.shape[1]
    adjoint = op.A_adjoint(torch.eye(cells).reshape(cells, 1, -1, angles)).reshape(cells, -1)
    assert float((matrix - adjoint.T).abs().max()) <= 1e-5 * float(matrix.abs().max())


def test_torch_and_astra_projectors_compute_the_same_joseph_sums():
    image = build_problem("tomography_2d", image_size=40, num_angles=16,
                          projector="torch").x_true
    ops = [ParallelBeam2D(_angles(16), 40, projector) for projector in PROJECTORS]
    assert _relative(ops[0].A(image), ops[1].A(image)) < 1e-4
    sinogram = ops[0].A(image)
    assert _relative(ops[0].A_adjoint(sinogram), ops[1].A_adjoint(sinogram)) < 1e-4


def test_lean_projector_matches_deepinv_up_to_second_order_discretisation():
    # Same geometry and layout; both integrate the bilinear interpolant along each ray, the
    # lean one row by row (Joseph), deepinv's at unit steps: on a smooth image the gap is
    # under 1e-3 and falls like h^2 (x4 per doubling of the size).
    gaps = {}
    for size in (32, 64):
        lean = ParallelBeam2D(_angles(size), size, "torch")
        reference = Tomography(angles=_angles(size), img_width=size, circle=False,
                               normalize=False)
        assert lean.A(_gaussian_bump(size)).shape == reference.A(_gaussian_bump(size)).shape
        gaps[size] = _relative(lean.A(_gaussian_bump(size)), reference.A(_gaussian_bump(size)))
    assert gaps[64] < 1e-3
    assert gaps[32] / gaps[64] > 3.0
    phantom = build_problem("tomography_2d", image_size=64, num_angles=64, projector="torch")
    reference = Tomography(angles=_angles(64), img_width=64, circle=False, normalize=False)
    assert _relative(phantom.physics.A(phantom.x_true)[0], reference.A(phantom.x_true)) < 1e-2


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the CUDA kernels need a GPU"))])
def test_torch_projector_is_deterministic_and_chunking_changes_only_rounding(monkeypatch,
                                                                            device):
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)  # raises on a kernel without a fixed order
    image = torch.rand(1, 1, 24, 24, generator=torch.Generator().manual_seed(2)).to(device)
    op = ParallelBeam2D(_angles(20), 24, "torch", device=device)
    try:
        sinogram, back = op.A(image), op.A_adjoint(op.A(image))
        assert torch.equal(sinogram, op.A(image)) and torch.equal(back, op.A_adjoint(sinogram))
    finally:
        torch.use_deterministic_algorithms(previous)
    chunked = ParallelBeam2D(_angles(20), 24, "torch", device=device)
    with installed(ProcessSettings(chunk_elements=1)):  # one angle per chunk
        assert torch.equal(chunked.A(image), sinogram)
        assert torch.allclose(chunked.A_adjoint(sinogram), back, rtol=1e-5, atol=1e-5)


@pytest.fixture
def threads():
    """Sets torch's thread count (the operators' count) for the test, restored after it."""
    previous = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(previous)


def test_angle_blocks_cut_every_angle_once_in_order():
    for angles in (1, 5, 31, 32, 33, 2048):
        blocks = parallel_beam.angle_blocks(angles)
        assert len(blocks) == min(angles, parallel_beam.ANGLE_BLOCKS)
        assert [i for block in blocks for i in range(angles)[block]] == list(range(angles))
        sizes = [block.stop - block.start for block in blocks]
        assert max(sizes) - min(sizes) <= 1


def test_astra_projector_gives_the_same_bits_on_any_number_of_threads(threads):
    image = torch.rand(2, 1, 48, 48, generator=torch.Generator().manual_seed(4))
    op = ParallelBeam2D(_angles(70), 48, "astra")
    threads(1)
    sinogram, back = op.A(image), op.A_adjoint(op.A(image))
    for count in (2, 3, 8):
        threads(count)
        assert torch.equal(op.A(image), sinogram), count
        assert torch.equal(op.A_adjoint(sinogram), back), count


def test_astra_angle_blocks_change_only_the_rounding_of_the_back_projection(monkeypatch):
    # Each ray is projected alone: the sinogram of the blocks is the one projector's, bit
    # for bit; the back-projection sums the blocks' volumes (other rounding only).
    image = torch.rand(1, 1, 40, 40, generator=torch.Generator().manual_seed(5))
    blocked = ParallelBeam2D(_angles(64), 40, "astra")
    assert blocked.engine  # built now, with the module's block count
    monkeypatch.setattr(parallel_beam, "ANGLE_BLOCKS", 1)
    whole = ParallelBeam2D(_angles(64), 40, "astra")
    assert len(whole.engine.blocks) == 1 and len(blocked.engine.blocks) == 32
    sinogram = whole.A(image)
    assert torch.equal(blocked.A(image), sinogram)
    assert _relative(blocked.A_adjoint(sinogram), whole.A_adjoint(sinogram)) < 1e-5


def test_lean_projector_stores_nothing_proportional_to_the_image():
    op = ParallelBeam2D(_angles(50), 64, "torch")
    op.A(torch.zeros(1, 1, 64, 64))
    stored = {name: buffer.numel() for name, buffer in op.named_buffers()}
    assert stored["angles"] == 50 and sum(stored.values()) <= 51  # + deepinv's device scalar


def test_projector_choice_is_validated_and_resolved(monkeypatch):
    with monkeypatch.context() as patch:  # installed with the test extra; runs on the CPU
        patch.setattr(tomography, "device_type", lambda name: "cpu")
        assert tomography.resolve_projector("auto") == "astra"
    # On a machine with CUDA, where 'auto' devices run, ASTRA counts only with CUDA.
    with monkeypatch.context() as patch:
        patch.setattr(tomography, "device_type", lambda name: "cuda")
        patch.setattr(tomography, "astra_available", lambda cuda=False: not cuda)
        assert tomography.resolve_projector("auto") == "torch"
        patch.setattr(tomography, "astra_available", lambda cuda=False: True)
        assert tomography.resolve_projector("auto") == "astra"
    monkeypatch.setattr(tomography, "astra_available", lambda cuda=False: False)
    assert tomography.resolve_projector("auto") == "torch"
    with pytest.raises(ConfigError, match="projector 'astra' needs astra-toolbox"):
        setup_problem("tomography_2d", image_size=16, num_angles=4, projector="astra")
    with pytest.raises(ConfigError, match="'projector' must be one of"):
        setup_problem("tomography_2d", projector="fast")


def _problem_with_norm(projector: str = "torch"):
    return build_problem("tomography_2d", image_size=24, num_angles=8, projector=projector)


def test_operator_norm_is_cached_per_configuration_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    first = operator_norm.estimate_operator_norm(_problem_with_norm())
    assert first.source == "computed" and 1 < first.iterations < operator_norm.MAX_ITERATIONS
    again = operator_norm.estimate_operator_norm(_problem_with_norm())
    assert (again.source, again.value, again.iterations) == ("cache", first.value, 0)
    other = operator_norm.estimate_operator_norm(_problem_with_norm("astra"))
    assert other.source == "computed"  # another projector is another configuration
    assert len(list((tmp_path / "operator_norms").glob("*.json"))) == 2
    # the estimate bounds ||A x||^2 / ||x||^2 from above up to the tolerance
    problem = _problem_with_norm()
    x = torch.rand(problem.x_true.shape, generator=torch.Generator().manual_seed(3))
    ratio = float(problem.physics.A(x)[0].norm() ** 2 / x.norm() ** 2)
    assert ratio <= first.value * (1 + 1e-3)


@pytest.mark.parametrize(("name", "params"), [
    ("tomography_2d", {"image_size": 96, "num_angles": 128, "projector": "astra"}),
    ("tomography_2d", {"image_size": 40, "num_angles": 128, "num_operators": 2,
                       "projector": "torch"}),
    ("tomography_2d", {"image_size": 48, "num_angles": 20, "projector": "astra"}),
    ("multiframe_superres", {"image_size": 32}),
    ("synthetic", {"image_size": 32}),
])
def test_lanczos_estimate_is_the_converged_power_iteration_to_1e_3(name, params):
    problem = build_problem(name, **params)
    converged, _ = operator_norm.power_iteration(problem, max_iterations=300, tolerance=1e-8)
    estimate, applications, start = operator_norm.lanczos(problem)
    assert abs(estimate - converged) <= 1e-3 * converged, (estimate, converged)
    assert estimate <= converged * (1 + 1e-5)  # a Ritz value: from below (float32 sums)
    # Where a start operator exists (CT with 64 or more angles per group) it saves the
    # whole-operator applications: 2 against 5 or more from the random start.
    if problem.norm_start is not None:
        assert applications <= 3 and start > 0
        cold, cold_applications, _ = operator_norm.lanczos(replace(problem, norm_start=None))
        assert cold_applications > applications
        assert abs(cold - converged) <= 1e-3 * converged
    else:
        assert start == 0 and applications < operator_norm.MAX_ITERATIONS


def test_ct_start_operator_keeps_every_8th_to_16th_angle_of_groups_of_64_or_more():
    assert tomography.norm_start_stride(2048, 1) == 16
    assert tomography.norm_start_stride(90, 1) == 11  # 90 angles, a start operator of 9
    assert tomography.norm_start_stride(128, 2) == 8
    assert tomography.norm_start_stride(512, 8) == 8
    assert tomography.norm_start_stride(60, 1) == 1
    problem = build_problem("tomography_2d", image_size=32, num_angles=256, num_operators=2)
    starts = problem.norm_start.physics_list
    assert [len(op.angles) for op in starts] == [8, 8]  # 128 angles per group, every 16th
    assert torch.equal(starts[1].angles, problem.physics.physics_list[1].angles[::16])


def test_a_run_notes_its_norm_under_the_torch_free_key_a_prediction_reads(tmp_path,
                                                                          monkeypatch):
    """Computed or read, the entry a run uses is noted under its run key; a prediction then
    knows it is cached, and no longer once the entry is gone."""
    from scalebench.data.norm_lookup import norm_cached, run_key

    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    problem = _problem_with_norm()
    key = run_key("tomography_2d", problem.source["params"], "cpu", 0)
    assert not norm_cached(key)
    computed = operator_norm.estimate_operator_norm(problem, run_key=key)
    assert computed.source == "computed" and norm_cached(key)
    other = {**key, "num_threads": 3}
    assert operator_norm.estimate_operator_norm(problem, run_key=other).source == "cache"
    assert norm_cached(other)
    for entry in (tmp_path / "operator_norms").glob("*.json"):
        entry.unlink()
    assert not norm_cached(key)


@pytest.mark.parametrize("damage", ["garbage", "negative", "other key"])
def test_corrupt_norm_cache_entry_is_recomputed_not_trusted(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    computed = operator_norm.estimate_operator_norm(_problem_with_norm())
    (path,) = (tmp_path / "operator_norms").glob("*.json")
    entry = json.loads(path.read_text())
    if damage == "garbage":
        path.write_text('{"norm_squa')
    elif damage == "negative":
        path.write_text(json.dumps({**entry, "norm_squared": -1.0}))
    else:
        path.write_text(json.dumps({**entry, "key": {**entry["key"], "code": "old"},
                                    "norm_squared": 123.0}))
    again = operator_norm.estimate_operator_norm(_problem_with_norm())
    assert again.source == "computed" and again.value == computed.value
    assert json.loads(path.read_text())["norm_squared"] == computed.value  # rewritten


def test_a_rank_share_of_the_stack_is_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    problem = build_problem("tomography_2d", image_size=24, num_angles=8, num_operators=2,
                            projector="torch")
    assert operator_norm.cache_entry(problem, {}) is not None
    share = replace(problem, operator_indices=(0,))  # rank 0 of 2 under distribute_physics
    assert operator_norm.cache_entry(share, {}) is None


# Each problem at a tiny size: PnP with TV improves the PSNR of the adjoint initial estimate.
PNP_CASES = [
    ("tomography_2d", dict(image_size=32, num_angles=24, projector="torch"), 0.002, 5),
    ("tomography_2d", dict(image_size=32, num_angles=24, projector="astra"), 0.002, 5),
    ("multiframe_superres", dict(image_size=32, num_frames=3), 0.01, 5),
    ("synthetic", dict(image_size=32, task="superres", factor=2), 0.01, 5),
    ("synthetic", dict(image_size=20, ndim=3, task="denoising", noise_level=0.2), 0.05, 3),
]


@pytest.mark.parametrize(("name", "params", "sigma", "iterations"), PNP_CASES)
def test_pnp_improves_psnr_over_the_initial_estimate(name, params, sigma, iterations):
    problem = build_problem(name, **params)
    loop = PnPLoop(problem, build_denoiser("tv", problem.x_true.shape[1]),
                   pnp_parameters(denoiser_sigma=sigma), StepProfiler(torch.device("cpu")))
    start = psnr(loop.x, problem.x_true)
    for _ in range(iterations):
        loop.iterate()
    assert psnr(loop.x, problem.x_true) > start + 0.5


@pytest.mark.parametrize(("name", "params"), [
    ("multiframe_superres", dict(image_size=48, num_frames=2)),
    ("synthetic", dict(image_size=24, ndim=3, task="denoising", channels=3)),
    ("synthetic", dict(image_size=40, task="superres")),
])
def test_generation_is_deterministic_under_a_seed(name, params):
    first, again = build_problem(name, **params), build_problem(name, **params)
    other = build_problem(name, **params, seed=7)
    assert first.data_sha256 == again.data_sha256 != other.data_sha256


def test_synthetic_volume_is_a_3d_picture():
    volume = build_problem("synthetic", image_size=32, ndim=3, task="denoising").x_true
    assert volume.shape == (1, 1, 32, 32, 32)
    assert float(volume.std()) > 0.05 and 0.0 <= float(volume.min()) <= float(volume.max()) <= 1
    with pytest.raises(ConfigError, match="ndim 3 .* supports task 'denoising' only"):
        build_problem("synthetic", ndim=3, task="superres")


@pytest.mark.parametrize("denoiser", ["drunet", "dncnn"])
def test_2d_networks_refuse_volumes_in_one_line(denoiser):
    with pytest.raises(ConfigError, match="takes 2D images only and the data is a 3D") as error:
        check_denoiser_fits({"denoiser": denoiser, "tile_size": 0, "tile_overlap": 0},
                            (1, 16, 16, 16))
    assert "\n" not in str(error.value)
    check_denoiser_fits({"denoiser": "tv", "tile_size": 0, "tile_overlap": 0}, (1, 16, 16, 16))


def test_superres_operators_store_only_their_kernels():
    problem = build_problem("multiframe_superres", image_size=64, num_frames=2)
    sizes = [sum(b.numel() for b in op.buffers()) for op in problem.physics.physics_list]
    assert all(size < 500 for size in sizes)  # an 11x11 kernel, no image-sized transform


@pytest.mark.parametrize(("kernel_shape", "factor"), [((11, 11), 2), ((4, 6), 3)])
def test_lean_downsampling_is_deepinvs_operator(kernel_shape, factor):
    generator = torch.Generator().manual_seed(4)
    kernel = torch.rand(1, 1, *kernel_shape, generator=generator)
    reference = Downsampling(img_size=(3, 24, 24), factor=factor, padding="circular",
                             filter=kernel)
    lean = BlurDownsampling(kernel, factor)
    x = torch.randn(2, 3, 24, 24, generator=generator)
    y = torch.randn(2, 3, 24 // factor, 24 // factor, generator=generator)
    assert torch.equal(lean.A(x), reference.A(x))
    assert torch.allclose(lean.A_adjoint(y), reference.A_adjoint(y), rtol=1e-5, atol=1e-5)


def test_a_memory_probes_operator_norm_is_capped_and_never_cached(tmp_path, monkeypatch):
    """Under a probe's norm_applications (scalebench.planning.capacity.probe), the estimate runs
    at most that many applications of each operator, reads no cached norm (it would skip
    their memory) and writes none (a capped estimate is not the norm)."""
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    full = operator_norm.estimate_operator_norm(_problem_with_norm())
    assert full.source == "computed" and full.iterations > 1
    problem = build_problem("tomography_2d", image_size=32, num_angles=256, projector="torch")
    uncapped = operator_norm.lanczos(problem)
    assert uncapped[2] > 1  # the start operator's power iteration runs more than one
    with installed(ProcessSettings(norm_applications=1)):
        capped = operator_norm.estimate_operator_norm(_problem_with_norm())
        with_start = operator_norm.estimate_operator_norm(problem)
    assert capped.source == "probe" and capped.iterations == 1  # the cached one not read
    assert (with_start.iterations, with_start.start_iterations) == (1, 1)
    # The start vector's seconds apart, within the whole's (the probe scales the rest).
    assert 0 < with_start.start_seconds < with_start.seconds
    assert capped.start_seconds == 0 and full.start_seconds == 0  # no start operator
    assert len(list((tmp_path / "operator_norms").glob("*.json"))) == 1  # the full one only
    assert 0 < capped.value <= full.value * (1 + 1e-5)  # a Ritz value of fewer steps
