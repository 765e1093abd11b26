"""The fbp baseline against scikit-image's ``iradon`` on the same sinograms: CT 128^2 over
180 angles, every filter, each projector; the filter family's definitions; fbp's one step."""

import numpy as np
import pytest
import torch
from skimage.transform import iradon

from scalebench.loops.fbp import FILTERS, FBPLoop, filtered_back_projection, frequency_filter
from scalebench.problems import build_problem
from scalebench.rank.profiling import StepProfiler

# scalebench's filter names -> scikit-image's
SKIMAGE_FILTERS = {"ram-lak": "ramp", "shepp-logan": "shepp-logan", "cosine": "cosine",
                   "hamming": "hamming", "hann": "hann"}
SIZE, ANGLES = 128, 180


def fourier_shift(array: np.ndarray, shift: float, axis: int) -> np.ndarray:
    """``array`` moved by ``shift`` samples along ``axis`` (circular, exact for band-limited
    data; the sinogram and the image are zero at their borders)."""
    frequencies = np.fft.fftfreq(array.shape[axis])
    shape = [1] * array.ndim
    shape[axis] = -1
    phase = np.exp(-2j * np.pi * frequencies * shift).reshape(shape)
    return np.real(np.fft.ifft(np.fft.fft(array, axis=axis) * phase, axis=axis))


def skimage_fbp(sinogram: np.ndarray, filter_name: str) -> np.ndarray:
    """iradon on scalebench's geometry. Both share unit pixels and detector cells, angles in
    degrees and the sinogram's (detector, angle) layout (the projections agree with
    ``radon``'s to 0.6 % where the detector count is odd). They differ in the centres: ours
    are (W - 1) / 2 on the detector and (N - 1) / 2 in the image, scikit-image's W // 2 and
    N // 2. With W = 182 and N = 128 both are half a cell further in scikit-image: the
    sinogram is moved by +1/2 cell before, and the image by -1/2 pixel on both axes after."""
    theta = np.arange(ANGLES) * (180.0 / ANGLES)
    image = iradon(fourier_shift(sinogram, 0.5, 0), theta, filter_name=filter_name,
                   circle=False, output_size=SIZE)
    return fourier_shift(fourier_shift(image, -0.5, 0), -0.5, 1)


def psnr(estimate: np.ndarray, reference: np.ndarray) -> float:
    return float(10 * np.log10(reference.max() ** 2 / np.mean((estimate - reference) ** 2)))


@pytest.fixture(scope="module", params=["torch", "astra"])
def ct(request):
    return build_problem("tomography_2d", image_size=SIZE, num_angles=ANGLES,
                         projector=request.param, noise_level=0.01)


@pytest.mark.parametrize("name", FILTERS)
def test_fbp_agrees_with_scikit_image_iradon(ct, name):
    truth = ct.x_true[0, 0].double().numpy()
    with torch.no_grad():
        ours = filtered_back_projection(ct, name, ANGLES)[0, 0].double().numpy()
    reference = skimage_fbp(ct.y[0][0, 0].double().numpy(), SKIMAGE_FILTERS[name])
    assert abs(psnr(ours, truth) - psnr(reference, truth)) <= 0.5
    # the two reconstructions, not only their quality, agree (measured 39-46 dB)
    assert psnr(ours, reference) >= 35


def test_filters_are_the_ramp_times_their_window():
    ramp = frequency_filter("ram-lak", 256)
    frequency = torch.fft.fftfreq(256, dtype=torch.float64)
    # the band-limited ramp: near 0 at DC (its truncated spatial samples sum to almost zero),
    # 2 |f| elsewhere (the factor pairs with the pi / (2 angles) scale)
    assert 0 <= float(ramp[0]) < 0.01 * float(ramp.max())
    assert torch.allclose(ramp[1:], 2 * frequency[1:].abs(), rtol=0.1)
    for name in FILTERS[1:]:
        window = frequency_filter(name, 256)[1:] / ramp[1:]
        assert float(window.max()) <= 1 + 1e-12 and float(window[len(window) // 2]) < 0.7
    with pytest.raises(ValueError, match="unknown filter 'ramp'"):
        frequency_filter("ramp", 256)


def test_fbp_is_one_measured_step_from_the_zero_image():
    problem = build_problem("tomography_2d", image_size=32, num_angles=20, num_operators=2,
                            projector="torch")
    loop = FBPLoop(problem, "hann", StepProfiler(torch.device("cpu")))
    assert not loop.x.any()
    loop.iterate()
    with torch.no_grad():
        expected = filtered_back_projection(problem, "hann", 20)
    assert torch.equal(loop.x, expected) and loop.profiler.last["backproject_time_s"] > 0
    # the two operators' angle groups together: the reconstruction resembles the truth
    assert psnr(loop.x[0, 0].numpy(), problem.x_true[0, 0].numpy()) > 15
