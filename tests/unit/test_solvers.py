"""The PnP and denoiser loops, the tiling, the denoiser weights and the step profiler."""

import json
import math
import pathlib
import time

import pytest
import torch

from scalebench.data.fetch import accept_file
from scalebench.denoisers.build import make_denoiser
from scalebench.denoisers.catalog import DENOISERS
from scalebench.denoisers.kinds.tv import ITERATIONS as TV_ITERATIONS
from scalebench.denoisers.networks import IndependentTV, build_denoiser
from scalebench.denoisers.tiles import (
    check_denoiser_fits,
    dealt_batch_count,
    dealt_tiles,
    tile_windows,
)
from scalebench.denoisers.tiling import TiledDenoiser
from scalebench.errors import ConfigError, MissingFileError
from scalebench.loops.denoising import DenoisingLoop
from scalebench.loops.inference_parameters import DENOISING_PARAMS, PNP_PARAMS
from scalebench.loops.pnp import PnPLoop, initial_estimate, operator_norm_squared
from scalebench.param_spec import resolved_parameters
from scalebench.problems import build_problem
from scalebench.rank.metrics import psnr
from scalebench.rank.names import HOST_PEAK_LIFETIME, HOST_PEAK_SINCE_RESET
from scalebench.rank.profiling import HostPeakMemory, StepProfiler

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tomography():
    return build_problem("tomography_2d", image_size=64, num_angles=30, noise_level=0.05)


def _pnp(problem, profiler_mode="light", trace_path=None, **overrides):
    params = resolved_parameters({"denoiser_sigma": 0.002, **overrides}, PNP_PARAMS)
    profiler = StepProfiler(CPU, profiler_mode, trace_path)
    loop = PnPLoop(problem, make_denoiser(params, (1, 64, 64), CPU), params, profiler)
    return loop, profiler


def test_pnp_improves_psnr_by_3db_over_its_initial_estimate(tomography):
    loop, _ = _pnp(tomography)
    start = psnr(loop.x, tomography.x_true)
    for _ in range(30):
        loop.iterate()
    assert psnr(loop.x, tomography.x_true) >= start + 3.0


def test_cached_norm_key_holds_for_the_same_code_at_another_path(tomography, tmp_path,
                                                                 monkeypatch):
    """Another checkout or a container image (same sources, other paths) shares the cache;
    an edited operator source does not."""
    import inspect
    import shutil

    from scalebench.rank import operator_norm

    here = operator_norm.code_digest(tomography.physics)
    real = inspect.getsourcefile
    moved = {}

    def elsewhere(item):
        source = real(item)
        if source not in moved:
            moved[source] = tmp_path / f"{len(moved)}_{pathlib.Path(source).name}"
            shutil.copy(source, moved[source])
        return str(moved[source])

    monkeypatch.setattr(inspect, "getsourcefile", elsewhere)
    assert operator_norm.code_digest(tomography.physics) == here
    for copy in moved.values():
        copy.write_text(copy.read_text() + "\n# edited\n")
    assert operator_norm.code_digest(tomography.physics) != here


def test_step_size_defaults_to_inverse_squared_operator_norm(tomography):
    loop, _ = _pnp(tomography)
    lipschitz = operator_norm_squared(tomography)
    assert loop.step_size == pytest.approx(1.0 / lipschitz)
    # power iteration really estimates ||A||^2: ||A x||^2 <= L ||x||^2 for any x
    x = torch.rand(tomography.x_true.shape, generator=torch.Generator().manual_seed(3))
    ax = tomography.physics.A(x)
    assert sum(float(torch.sum(a**2)) for a in ax) <= lipschitz * float(torch.sum(x**2)) * 1.001
    fixed, _ = _pnp(tomography, step_size=1e-4)
    assert fixed.step_size == 1e-4


@pytest.mark.parametrize("algorithm", ["pgd", "drs"])
def test_rows_record_the_operator_norm_and_the_step_the_run_used(tomography, algorithm):
    """A run whose step_size is null records default_step_scale / ||A||^2 (its figures are
    every row's objective_* columns); a given step_size or step_scale is recorded as run."""
    from scalebench.loops.algorithms import ALGORITHMS
    from scalebench.results.columns import column_pattern

    lipschitz = operator_norm_squared(tomography)
    default, _ = _pnp(tomography, algorithm=algorithm)
    default.iterate()
    figures = default.setup_figures
    assert figures["operator_norm_sq"] == lipschitz
    assert figures["step_size"] == pytest.approx(
        ALGORITHMS[algorithm].default_step_scale / lipschitz)
    assert figures["step_size"] == default.step_size
    given, _ = _pnp(tomography, algorithm=algorithm, step_size=3e-4)
    assert given.setup_figures["step_size"] == 3e-4
    scaled, _ = _pnp(tomography, algorithm=algorithm, step_scale=1.5)
    assert scaled.setup_figures["step_size"] == pytest.approx(1.5 / lipschitz)
    for name in ("operator_norm_sq", "step_size"):
        assert column_pattern(f"objective_{name}") == f"objective_{name}"


def test_dpir_records_no_single_step(tomography):
    loop, _ = _pnp(tomography, algorithm="dpir", max_iter=2)
    assert math.isnan(loop.setup_figures["step_size"])
    assert loop.setup_figures["operator_norm_sq"] == loop.lipschitz


def test_initial_estimates(tomography):
    lipschitz = operator_norm_squared(tomography)
    zeros = initial_estimate(tomography, "zeros", lipschitz)
    adjoint = initial_estimate(tomography, "adjoint", lipschitz)
    pinv = initial_estimate(tomography, "pseudo_inverse", lipschitz)
    assert torch.count_nonzero(zeros) == 0
    assert torch.allclose(adjoint, tomography.physics.A_adjoint(tomography.y) / lipschitz)
    # the least-squares solution fits the data far better than the scaled adjoint

    def residual(x):
        return sum(float(torch.sum((a - y) ** 2))
                   for a, y in zip(tomography.physics.A(x), tomography.y, strict=True))
    assert residual(pinv) < 0.1 * residual(adjoint)


def test_profiler_records_time_cpu_share_and_host_peak_memory_of_each_step(tomography):
    loop, profiler = _pnp(tomography)
    loop.iterate()
    stats = profiler.last
    assert set(stats) == {f"{step}_{figure}" for step in ("grad", "denoise")
                          for figure in ("time_s", "cpu_utilization", "peak_host_rss_mib",
                                         "host_rss_increase_mib")}
    assert profiler.host_method == HOST_PEAK_SINCE_RESET
    assert stats["grad_time_s"] > 0 and stats["denoise_time_s"] > 0
    assert stats["grad_peak_host_rss_mib"] > 10  # the process's own RSS: never a silent 0


def test_cpu_utilization_is_cpu_time_over_wall_time_of_the_step():
    # Bounds from the test's own clocks around each step, which hold however loaded the
    # machine is: a busy thread gets less of a core, so its share is bounded by what it burnt.
    profiler = StepProfiler(CPU)
    cpu_start = time.process_time()
    with profiler.step("grad"):
        time.sleep(0.3)  # waits: next to no CPU time
    waiting_cpu = time.process_time() - cpu_start
    wall_start = time.perf_counter()
    with profiler.step("denoise"):
        end = time.process_time() + 0.2
        while time.process_time() < end:  # one thread burns 0.2 s of CPU, however long it takes
            pass
    busy_wall = time.perf_counter() - wall_start
    assert profiler.last["grad_cpu_utilization"] <= waiting_cpu / 0.3 < 0.2, profiler.last
    assert 0.2 / busy_wall <= profiler.last["denoise_cpu_utilization"] <= 1.05, profiler.last


def test_host_peak_memory_sees_a_large_temporary_allocation():
    profiler = StepProfiler(CPU)
    with profiler.step("small"):
        torch.ones(1000).sum()
    with profiler.step("big"):
        block = torch.ones(200 * 2**20 // 4)  # 200 MiB, written so that it is resident
        del block
    grown = profiler.last["big_peak_host_rss_mib"] - profiler.last["small_peak_host_rss_mib"]
    assert grown > 150
    # The increase is what the step itself needed, next to the process's absolute peak.
    assert 190 < profiler.last["big_host_rss_increase_mib"] < 230
    assert profiler.last["small_host_rss_increase_mib"] < 10
    assert profiler.last["big_peak_host_rss_mib"] > profiler.last["big_host_rss_increase_mib"]


def test_host_memory_method_falls_back_to_the_lifetime_peak(monkeypatch, tmp_path):
    monkeypatch.setattr("scalebench.rank.profiling._CLEAR_REFS",
                        tmp_path / "absent" / "clear_refs")
    profiler = StepProfiler(CPU)
    with profiler.step("any"):
        torch.ones(10).sum()
    assert profiler.host_method == HOST_PEAK_LIFETIME
    # The process's own high-water mark, not ru_maxrss, which also carries its parent's.
    lifetime = HostPeakMemory.status_mib("VmHWM:")
    assert profiler.last["any_peak_host_rss_mib"] == pytest.approx(lifetime, abs=1.0)


def test_torch_profiler_mode_writes_a_chrome_trace_with_the_steps(tomography, tmp_path):
    trace = tmp_path / "trace.json"
    loop, profiler = _pnp(tomography, profiler_mode="torch", trace_path=trace)
    with profiler:
        loop.iterate()
    events = json.loads(trace.read_text())["traceEvents"]
    names = {event.get("name") for event in events}
    assert {"grad", "denoise"} <= names
    assert profiler.last["denoise_time_s"] > 0


def test_nvtx_profiler_mode_runs_on_cpu(tomography):
    loop, profiler = _pnp(tomography, profiler_mode="nvtx")
    with profiler:
        loop.iterate()
    assert profiler.last["grad_time_s"] > 0


def test_unknown_profiler_mode_is_refused():
    with pytest.raises(ValueError, match="profiler mode must be one of"):
        StepProfiler(CPU, "perf")


def test_denoising_loop_denoises_the_seeded_noisy_image():
    problem = build_problem("synthetic", image_size=64, task="denoising")
    params = resolved_parameters({"denoiser_sigma": 0.1}, DENOISING_PARAMS)
    profiler = StepProfiler(CPU)
    denoiser = make_denoiser(params, (1, 64, 64), CPU)
    loop = DenoisingLoop(problem.x_true, denoiser, 0.1, 0, profiler)
    noisy_psnr = psnr(loop.noisy, problem.x_true)
    loop.iterate()
    assert psnr(loop.x, problem.x_true) > noisy_psnr + 3
    assert set(profiler.last) == {"denoise_time_s", "denoise_cpu_utilization",
                                  "denoise_peak_host_rss_mib", "denoise_host_rss_increase_mib"}


def test_tile_windows_partition_the_axis_with_equal_windows():
    window, tiles = tile_windows(100, 32, 20)
    assert window == 72
    assert tiles == [(0, 0, 32), (12, 32, 64), (28, 64, 96), (28, 96, 100)]
    covered = [i for _, start, end in tiles for i in range(start, end)]
    assert covered == list(range(100))


def test_tile_windows_start_on_the_networks_grid_and_cover_the_overlap():
    window, tiles = tile_windows(200, 36, 46, multiple=8)
    assert window % 8 == 0
    for first, start, end in tiles:
        assert first % 8 == 0 and 0 <= first and first + window <= 200
        assert first <= max(start - 46, 0) and first + window >= min(end + 46, 200)


def _small_drunet():
    """deepinv's DRUNet with narrow layers and one block per scale (receptive radius < 64)."""
    import deepinv as dinv

    torch.manual_seed(0)
    return dinv.models.DRUNet(in_channels=1, out_channels=1, nc=[8, 16, 32, 64], nb=1,
                              pretrained=None).eval()


@pytest.mark.parametrize(("name", "shape", "patch", "overlap", "multiple"), [
    ("drunet", (1, 1, 200, 184), 36, 64, 8),    # 200 and 184: not multiples of 36
    ("dncnn", (1, 1, 70, 58), 32, DENOISERS["dncnn"].receptive_radius, 1),  # 3 x 2 tiles
    ("tv", (1, 1, 170, 165), 60, DENOISERS["tv"].receptive_radius, 1),
    # wavelet: tiles along the width only (its 210-pixel radius makes 2D tiles large)
    ("wavelet", (1, 1, 64, 1000), 128, DENOISERS["wavelet"].receptive_radius, 8),
])
def test_tiled_denoiser_equals_untiled_when_overlap_covers_the_receptive_field(
        name, shape, patch, overlap, multiple):
    net = _small_drunet() if name == "drunet" else build_denoiser(name, shape[1], "none", CPU)
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = net(x, 0.05)
        # one window per call, as the whole image: a batch of several may run other
        # convolution kernels, whose last bits differ (test_one_window_gives_the_same_bits...)
        tiled = TiledDenoiser(net, patch, overlap, 1, multiple)(x, 0.05)
        narrow = TiledDenoiser(net, patch, 4, 1, multiple)(x, 0.05)
        batched = TiledDenoiser(net, patch, overlap, 3, multiple)(x, 0.05)
    assert torch.equal(tiled, full)
    assert (batched - tiled).abs().max() <= 1e-3 * full.abs().max()  # rounding, not seams
    assert not torch.equal(narrow, full)  # too little overlap: seams differ
    if name == "drunet":  # windows starting off its 8-pixel grid (at 26, 62, ...) differ
        with torch.no_grad():
            off_grid = TiledDenoiser(net, 36, 46, 1, multiple=1)(x, 0.05)
        assert not torch.equal(off_grid, full)


@pytest.mark.parametrize(("tiles", "batch", "ranks"), [(9, 2, 3), (9, 4, 2), (5, 8, 1),
                                                     (16, 2, 8)])
def test_ranks_are_dealt_whole_batches_so_each_tile_meets_the_same_batch(tiles, batch, ranks):
    shares = [dealt_tiles(tiles, batch, rank, ranks) for rank in range(ranks)]
    assert sorted(sum(shares, [])) == list(range(tiles))  # every tile exactly once
    one_process = [list(range(tiles))[i:i + batch] for i in range(0, tiles, batch)]
    for share in shares:  # a rank's consecutive chunks are batches of the one-process run
        assert all(share[i:i + batch] in one_process for i in range(0, len(share), batch))
    assert dealt_batch_count(tiles, batch) == len(one_process)


def test_batch_size_zero_deals_single_tiles_round_robin():
    """Each rank then runs its whole share at once: a batch whose size depends on the number
    of ranks, so no bit-for-bit promise across rank counts (docs/clusters.md)."""
    assert [dealt_tiles(7, 0, rank, 3) for rank in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    assert dealt_batch_count(7, 0) == 7


def test_one_window_gives_the_same_bits_in_every_batch_of_two_or_more():
    """What dealing whole batches relies on: a window's output depends on its batch only
    through the batch's size (here: one against several); partners do not change it."""
    net = build_denoiser("dncnn", 1, "none", CPU)
    windows = torch.rand(4, 1, 32, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        pair, other_pair = net(windows[:2], 0.05), net(windows[[0, 3]], 0.05)
        four = net(windows, 0.05)
    assert torch.equal(pair[0], other_pair[0]) and torch.equal(pair[0], four[0])


def test_tv_calls_are_independent_and_run_every_iteration(monkeypatch):
    tv = build_denoiser("tv", 1, "none", CPU)
    assert isinstance(tv, IndependentTV)
    generator = torch.Generator().manual_seed(2)
    a, b = (torch.rand(1, 1, 48, 48, generator=generator) for _ in range(2))
    with torch.no_grad():
        fresh = build_denoiser("tv", 1, "none", CPU)(b, 0.1)
        tv(a, 0.1)
        after_another = tv(b, 0.1)
        again = tv(b, 0.1)
    assert torch.equal(after_another, fresh) and torch.equal(again, fresh)
    calls = []
    nabla = type(tv.tv).nabla
    monkeypatch.setattr(type(tv.tv), "nabla", staticmethod(lambda x: calls.append(1) or nabla(x)))
    with torch.no_grad():
        tv(torch.full((1, 1, 32, 32), 0.5), 0.1)  # converges at once: no early stop allowed
    assert len(calls) == TV_ITERATIONS


def test_pretrained_weights_load_from_a_local_file(tmp_path):
    reference = build_denoiser("dncnn", 1, "none", CPU, seed=7)
    path = tmp_path / "weights.pth"
    torch.save(reference.state_dict(), path)
    loaded = build_denoiser("dncnn", 1, str(path), CPU, seed=0)
    for a, b in zip(reference.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_hub_weights_load_from_the_torch_hub_cache(tmp_path, monkeypatch):
    # DnCNN: the same path as DRUNet's, for a file of 3 MB instead of 130
    reference = build_denoiser("dncnn", 1, "none", CPU, seed=5)
    checkpoints = tmp_path / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    torch.save(reference.state_dict(), checkpoints / "dncnn_sigma2_gray.pth")
    accept_file(checkpoints / "dncnn_sigma2_gray.pth")  # not the published file's checksum
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    loaded = build_denoiser("dncnn", 1, "hub", CPU)
    first = next(iter(loaded.state_dict()))
    assert torch.equal(loaded.state_dict()[first], reference.state_dict()[first])


def test_published_weights_exist_for_grey_and_colour_only():
    with pytest.raises(ConfigError, match="published weights exist for 1 or 3 channels, not 2"):
        build_denoiser("dncnn", 2, "hub", CPU)


def test_missing_weights_name_the_file(tmp_path):
    missing = tmp_path / "nowhere.pth"
    with pytest.raises(MissingFileError, match="weights file not found: .*nowhere.pth"):
        build_denoiser("drunet", 3, str(missing), CPU)


def test_random_init_is_seeded():
    a = build_denoiser("dncnn", 1, "none", CPU, seed=1).state_dict()
    b = build_denoiser("dncnn", 1, "none", CPU, seed=1).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(("tile_size", "tile_overlap", "shape", "ok"), [
    (0, 0, (1, 64, 64), True),
    (0, 0, (1, 60, 60), False),     # DRUNet needs multiples of 8
    (32, 8, (1, 100, 100), True),   # windows of 48
    (32, 5, (1, 100, 100), True),   # 42 rounded up to windows of 48
    (48, 8, (1, 52, 52), False),    # a window would be the whole side, 52
])
def test_drunet_size_check(tile_size, tile_overlap, shape, ok):
    params = {"denoiser": "drunet", "tile_size": tile_size, "tile_overlap": tile_overlap}
    if ok:
        check_denoiser_fits(params, shape)
    else:
        with pytest.raises(ConfigError, match="divisible by 8"):
            check_denoiser_fits(params, shape)


def test_full_drunet_runs_on_a_tile(tomography):
    net = build_denoiser("drunet", 1, "none", CPU)
    with torch.no_grad():
        out = TiledDenoiser(net, 32, 8, 2)(tomography.x_true, 0.05)
    assert out.shape == tomography.x_true.shape and math.isfinite(float(out.sum()))
