"""The fdk baseline: a uniform ball reconstructed from its exact line integrals (analytic
chords, no projector in the data) at two magnifications; the walnut problem split into view
groups, or into ranks' shares, gives the same volume; fdk's one step; against ITK-RTK's own
FDK where installed; benchopt's skip of a dataset it does not apply to."""

import numpy as np
import pytest
import torch
from deepinv.utils import TensorList

from scalebench.loops.fdk import FDKLoop, fdk_reconstruction, view_weights
from scalebench.physics.backends import rtk_available
from scalebench.physics.conebeam import ConeGeometry, TorchConeBeam, circular_vectors
from scalebench.problems import build_problem
from scalebench.problems.base import Problem, stack
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler
from tests.support.walnut_fixture import ellipsoid_chords

SIZE, VOXEL_MM, RADIUS_MM, VIEWS = 32, 0.1, 1.0, 48


def ball_problem(source_mm: float, detector_mm: float, pixel_mm: float, detector: tuple,
                 projector=TorchConeBeam) -> Problem:
    """A unit ball of radius 1 mm at the centre of a 32^3 grid of 0.1 mm voxels, its data the
    exact chord lengths of every ray (VIEWS views over a full orbit)."""
    geometry = ConeGeometry.centred(circular_vectors(VIEWS, source_mm, detector_mm, pixel_mm),
                                    (SIZE,) * 3, VOXEL_MM, detector)
    chords = ellipsoid_chords(geometry.vectors, detector, (0, 0, 0), (RADIUS_MM,) * 3)
    y = torch.from_numpy(chords).float()[None, None]
    axis = (np.arange(SIZE) - (SIZE - 1) / 2) * VOXEL_MM
    z, yy, x = np.meshgrid(axis, axis, axis, indexing="ij")
    truth = torch.from_numpy((x ** 2 + yy ** 2 + z ** 2 <= RADIUS_MM ** 2).astype(np.float32))
    return Problem("ball", stack([projector(geometry)]), truth[None, None], TensorList([y]),
                   0.0, {"name": "walnut_conebeam", "params": {"num_projections": VIEWS}})


def radial_distance() -> np.ndarray:
    axis = (np.arange(SIZE) - (SIZE - 1) / 2) * VOXEL_MM
    z, y, x = np.meshgrid(axis, axis, axis, indexing="ij")
    return np.sqrt(x ** 2 + y ** 2 + z ** 2)


# (source to axis, axis to detector, pixel mm, detector rows x cols): magnifications 3 and
# 1.5, each detector seeing the whole grid's width (a field of view of radius 2 mm).
GEOMETRIES = {"magnification 3": (6.6, 13.3, 0.15, (40, 80)),
              "magnification 1.5": (10.0, 5.0, 0.08, (40, 80))}


def rtk_projector(geometry: ConeGeometry):
    from scalebench.physics.conebeam import RtkConeBeam

    return RtkConeBeam(geometry)


PROJECTORS = {"torch": TorchConeBeam,
              "rtk": pytest.param(rtk_projector, marks=pytest.mark.skipif(
                  not rtk_available(), reason="ITK-RTK is an optional extra (pip install "
                                              "'.[rtk]'), not installed"))}


@pytest.mark.parametrize("projector", PROJECTORS.values(), ids=PROJECTORS)
@pytest.mark.parametrize("name", sorted(GEOMETRIES))
def test_fdk_recovers_the_value_of_a_uniform_ball_from_its_exact_line_integrals(name,
                                                                                projector):
    """FDK's scale comes from the geometry alone: the ball's interior comes back at 1 and
    its outside at 0, whatever the magnification and whichever projector's adjoint
    back-projects (the torch projector's trilinear transpose, RTK's Joseph one)."""
    problem = ball_problem(*GEOMETRIES[name], projector=projector)
    with torch.no_grad():
        volume = fdk_reconstruction(problem, "ram-lak", VIEWS)[0, 0].double().numpy()
    r = radial_distance()
    interior = volume[r <= 0.6 * RADIUS_MM]
    outside = volume[(r >= 1.3 * RADIUS_MM) & (r <= 1.5 * RADIUS_MM)]
    # measured (48 views): interior 0.997 and 0.999, spread 0.003 to 0.007, outside 0.0003
    assert abs(interior.mean() - 1) < 0.01, interior.mean()
    assert interior.std() < 0.02, interior.std()
    assert abs(outside.mean()) < 0.01, outside.mean()


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="the CUDA path (the projector's scatter adjoint) needs a GPU")
def test_fdk_on_cuda_gives_the_cpu_volume():
    problem = ball_problem(*GEOMETRIES["magnification 3"])
    with torch.no_grad():
        cpu = fdk_reconstruction(problem, "hann", VIEWS)
        cuda = fdk_reconstruction(problem.to("cuda"), "hann", VIEWS).cpu()
    assert float(torch.linalg.vector_norm(cuda - cpu) / torch.linalg.vector_norm(cpu)) < 1e-4


def test_the_cosine_weight_and_the_scale_follow_the_geometry():
    """On the axis of a view the weight is 1, and it is D / |p - s| away from it; the scale
    R |du x dv| / (|du| h^3 D) of square pixels is R du / (h^3 D)."""
    vectors = circular_vectors(4, 6.0, 12.0, 0.2)
    cosine, scale = view_weights(vectors, (3, 5), 0.1)
    assert cosine.shape == (4, 3, 5)
    assert np.allclose(cosine[:, 1, 2], 1.0)
    assert np.allclose(cosine[:, 0, 0], 18.0 / np.sqrt(18.0 ** 2 + 0.4 ** 2 + 0.2 ** 2))
    assert np.allclose(scale, 6.0 * 0.2 / (0.1 ** 3 * 18.0))


@pytest.fixture(scope="module")
def walnut(in_walnut_cache):
    return {k: build_problem("walnut_conebeam", binning=2, num_projections=16,
                             num_operators=k, projector="torch") for k in (1, 2)}


def test_view_groups_give_the_volume_of_all_views_at_once(walnut):
    """Split into two interleaved view groups (as ranks share them under distributed
    physics), each group weighted and filtered alone, the adjoint's sum is the same FDK."""
    with torch.no_grad():
        one, two = (fdk_reconstruction(walnut[k], "hann", 16) for k in (1, 2))
    assert float(torch.linalg.vector_norm(one - two) / torch.linalg.vector_norm(one)) < 1e-5


class OneRankSum:
    """A rank's context whose all-reduce returns its own partial sum (the ranks' shares are
    added by the test)."""

    def all_reduce(self, tensor):
        return tensor


def test_distributed_physics_ranks_shares_add_up_to_the_whole_fdk(walnut):
    """Under distribute_physics each rank holds a RankStack of its operators: the shares its
    weights, filter and adjoint give, added as the all-reduce adds them, are the FDK."""
    from dataclasses import replace

    from scalebench.physics.distributed import RankStack

    problem = walnut[2]
    shares = []
    with torch.no_grad():
        for k in (0, 1):
            rank = replace(problem, physics=RankStack([problem.physics.physics_list[k]],
                                                     OneRankSum()),
                           y=TensorList([problem.y[k]]), operator_indices=(k,))
            shares.append(fdk_reconstruction(rank, "ram-lak", 16))
        whole = fdk_reconstruction(problem, "ram-lak", 16)
    total = shares[0] + shares[1]
    assert float(torch.linalg.vector_norm(total - whole) / torch.linalg.vector_norm(whole)) \
        < 1e-5


def test_fdk_is_one_measured_step_from_the_zero_volume(walnut):
    problem = walnut[1]
    loop = FDKLoop(problem, "shepp-logan", StepProfiler(torch.device("cpu")))
    assert not loop.x.any() and loop.num_views == 16
    loop.iterate()
    with torch.no_grad():
        expected = fdk_reconstruction(problem, "shepp-logan", 16)
    assert torch.equal(loop.x, expected) and loop.profiler.last["backproject_time_s"] > 0
    # 16 views of the miniature walnut: the volume resembles the reference
    assert psnr(loop.x, problem.x_true) > 20


@pytest.mark.skipif(not rtk_available(),
                    reason="ITK-RTK is an optional extra (pip install '.[rtk]'), not installed")
def test_fdk_agrees_with_rtks_fdk_filter():
    """ITK-RTK's FDKConeBeamReconstructionFilter (ramp, no window, no truncation correction)
    on the same exact projections: RTK's circular geometry turns about its y axis, ours
    about z, so RTK's orbit is built from the same distances and angles and its volume's
    axes are swapped back (the ball's projections are the same in every view). RTK
    back-projects voxel by voxel (bilinear on the detector), ours by the projector's
    trilinear transpose, which blurs the ball's edge by about a voxel: measured, interior
    0.9968 (ours) and 0.9976 (RTK), PSNR to the ball 24.0 and 24.8 dB, 29.7 dB to each
    other."""
    import itk
    from itk import RTK as rtk

    source_mm, detector_mm, pixel_mm, (rows, cols) = GEOMETRIES["magnification 3"]
    problem = ball_problem(source_mm, detector_mm, pixel_mm, (rows, cols))
    geometry = rtk.ThreeDCircularProjectionGeometry.New()
    for view in range(VIEWS):
        geometry.AddProjection(source_mm, source_mm + detector_mm, 360.0 * view / VIEWS)

    def image(array, origin, spacing):
        result = itk.image_from_array(np.ascontiguousarray(array, dtype=np.float32))
        result.SetOrigin(origin)
        result.SetSpacing(spacing)
        return result

    image_type = itk.Image[itk.F, 3]
    fdk = rtk.FDKConeBeamReconstructionFilter[image_type].New()
    fdk.SetInput(0, image(np.zeros((SIZE,) * 3), [-(SIZE - 1) / 2 * VOXEL_MM] * 3,
                          [VOXEL_MM] * 3))
    fdk.SetInput(1, image(problem.y[0][0, 0].numpy(),
                          [-(cols - 1) / 2 * pixel_mm, -(rows - 1) / 2 * pixel_mm, 0.0],
                          [pixel_mm, pixel_mm, 1.0]))
    fdk.SetGeometry(geometry)
    fdk.GetRampFilter().SetTruncationCorrection(0.0)
    fdk.GetRampFilter().SetHannCutFrequency(0.0)
    fdk.Update()
    # RTK's array axes (z, y, x) with y the rotation axis -> ours, the axis first
    reference = itk.array_from_image(fdk.GetOutput()).copy().transpose(1, 0, 2)
    with torch.no_grad():
        ours = fdk_reconstruction(problem, "ram-lak", VIEWS)
    interior = radial_distance() <= 0.6 * RADIUS_MM
    assert abs(ours[0, 0].numpy()[interior].mean() - reference[interior].mean()) < 0.005
    reference = torch.from_numpy(reference)[None, None]
    assert abs(psnr(ours, problem.x_true) - psnr(reference, problem.x_true)) <= 1.5
    assert psnr(ours, reference) >= 27
