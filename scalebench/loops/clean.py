"""Högbom CLEAN (Högbom 1974, A&AS 15, 417) for radio interferometry.

The dirty image is A^T y and the dirty beam the response A^T A e of a unit point source e
(the problem's weights sum to one: the beam's peak is 1, the dirty image is in flux per
beam), known at every offset between two pixels of the image, so that a component anywhere
subtracts its whole beam. Each component finds the residual's largest absolute value, adds
``gain`` times it to the model at that pixel and subtracts ``gain`` times it times the beam
centred there (Högbom's minor cycle; the residual is never recomputed from the
visibilities, as Cotton-Schwab's major cycles would). CLEAN stops when the residual's peak
falls below ``threshold`` times the dirty image's peak; iterations past that change nothing.

The estimate of every row is, with ``image`` 'model' (the default), the model's point
components alone; with 'restored' (the image astronomers read), the model convolved with the
clean beam, an elliptical Gaussian of peak 1 fitted by least squares to the logarithm of the
dirty beam's main lobe (its connected pixels above half the peak), plus the residual. The rows
score estimates against the ground truth pixel by pixel, where the restored image's
beam-spread flux counts as error: at 128² it loses to a blank sky while the components of the
same run score well above it (docs/performance.md), hence the default.

Everything after the dirty image and beam is image-space work, repeated identically on every
rank: distributed physics splits the adjoints only.
"""

from __future__ import annotations

import torch

from scalebench.problems.base import Problem
from scalebench.rank.profiling import StepProfiler


def dirty_beam(problem: Problem) -> torch.Tensor:
    """The dirty beam at every offset a component can reach: (2N - 1, 2N - 1), offset 0 at
    (N - 1, N - 1). A^T A is a convolution (a weighted sum of Fourier modes), so a unit
    source in each corner of the image yields the beam over one quadrant of offsets."""
    physics = problem.physics
    size = problem.x_true.shape[-1]
    beam = torch.zeros(2 * size - 1, 2 * size - 1, dtype=problem.x_true.dtype,
                       device=problem.x_true.device)
    last = size - 1
    for row, column in ((0, 0), (0, last), (last, 0), (last, last)):
        source = torch.zeros_like(problem.x_true)
        source[..., row, column] = 1.0
        response = physics.A_adjoint(physics.A(source))[0, 0]
        # pixel (i, j) sees offset (i - row, j - column), stored at (i - row + N - 1, ...)
        beam[last - row:last - row + size, last - column:last - column + size] = response
    return beam


def main_lobe(beam: torch.Tensor) -> torch.Tensor:
    """Mask of the pixels above half the peak connected (4-neighbours) to the centre."""
    from scipy import ndimage

    centre = beam.shape[-1] // 2
    above = (beam >= 0.5 * beam[centre, centre]).cpu().numpy()
    labels, _ = ndimage.label(above)
    return torch.from_numpy(labels == labels[centre, centre]).to(beam.device)


def fit_clean_beam(beam: torch.Tensor) -> torch.Tensor:
    """(a, b, c) of the Gaussian exp(-(a x^2 + 2 b x y + c y^2) / 2), x along columns and y
    along rows from the centre, fitted to log(beam / peak) over the main lobe."""
    centre = beam.shape[-1] // 2
    mask = main_lobe(beam)
    rows, columns = torch.nonzero(mask, as_tuple=True)
    if len(rows) < 3:
        raise ValueError(f"the dirty beam's main lobe covers {len(rows)} pixel(s): a Gaussian "
                         f"needs at least 3 (raise pixels_per_beam)")
    y = (rows - centre).double()
    x = (columns - centre).double()
    peak = beam[centre, centre].double()
    target = -2.0 * torch.log(beam[rows, columns].double() / peak)
    design = torch.stack([x * x, 2 * x * y, y * y], dim=1)
    solution = torch.linalg.lstsq(design, target[:, None]).solution[:, 0]
    a, b, c = (float(v) for v in solution)
    if a <= 0 or c <= 0 or a * c <= b * b:
        raise ValueError("the dirty beam's main lobe is not a Gaussian peak: no clean beam "
                         "fits it")
    return solution


def clean_beam_image(shape: tuple[int, int], coefficients: torch.Tensor,
                     device: torch.device) -> torch.Tensor:
    """The clean beam sampled on a (2N - 1) x (2N - 1) grid centred at (N - 1, N - 1): any
    shift within the image finds its values there."""
    rows, columns = (torch.arange(-(n - 1), n, dtype=torch.float64, device=device)
                     for n in shape)
    y, x = torch.meshgrid(rows, columns, indexing="ij")
    a, b, c = (float(v) for v in coefficients)
    return torch.exp(-(a * x * x + 2 * b * x * y + c * y * y) / 2)


def convolve(image: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Linear (not circular) convolution of an (N, M) image with a (2N - 1, 2M - 1) kernel
    centred at (N - 1, M - 1), cropped to the image: by FFTs zero-padded to the full size."""
    n, m = image.shape
    size = (n + kernel.shape[0] - 1, m + kernel.shape[1] - 1)
    full = torch.fft.irfft2(torch.fft.rfft2(image.double(), s=size) *
                            torch.fft.rfft2(kernel.double(), s=size), s=size)
    return full[n - 1:2 * n - 1, m - 1:2 * m - 1].to(image.dtype)


class CleanLoop:
    """State of a Högbom CLEAN; ``iterate()`` runs ``components`` minor-cycle components
    and restores the image, in the "minor_cycle" step."""

    def __init__(self, problem: Problem, gain: float, threshold: float, components: int,
                 profiler: StepProfiler, image: str = "model") -> None:
        self.gain, self.components, self.profiler = gain, components, profiler
        self.image = image
        physics = problem.physics
        with torch.no_grad():
            self.residual = physics.A_adjoint(problem.y)[0, 0].clone()
            self.beam = dirty_beam(problem)  # (2N - 1)^2: offsets, 0 at the centre
        self.stop_below = threshold * float(self.residual.abs().max())
        # sampled at the same offsets as the dirty beam
        self.clean_beam = clean_beam_image(self.residual.shape, fit_clean_beam(self.beam),
                                           self.residual.device)
        self.model = torch.zeros_like(self.residual)
        self.components_found = 0
        self.setup_figures = {"clean_beam_pixels": float(main_lobe(self.beam).sum())}
        self.x = self.estimate()  # no component yet: the dirty image, or a blank sky

    def restored(self) -> torch.Tensor:
        """Model convolved with the clean beam, plus the residual: (1, 1, N, N)."""
        return (convolve(self.model, self.clean_beam) + self.residual)[None, None]

    def estimate(self) -> torch.Tensor:
        """What the rows score: the restored image or the model (``image``)."""
        return self.restored() if self.image == "restored" else self.model[None, None].clone()

    def subtract_one(self) -> bool:
        """One component; False (and nothing changed) once the peak is below the threshold."""
        flat = int(torch.argmax(self.residual.abs()))
        n, m = self.residual.shape
        row, column = divmod(flat, m)
        peak = float(self.residual[row, column])
        if abs(peak) < self.stop_below or peak == 0.0:
            return False
        flux = self.gain * peak
        self.model[row, column] += flux
        # the beam's offsets from (row, column) to every pixel of the image
        self.residual -= flux * self.beam[n - 1 - row:2 * n - 1 - row,
                                          m - 1 - column:2 * m - 1 - column]
        self.components_found += 1
        return True

    @torch.no_grad()
    def iterate(self) -> None:
        with self.profiler.step("minor_cycle"):
            for _ in range(self.components):
                if not self.subtract_one():
                    break
            self.x = self.estimate()
        self.profiler.last["clean_components"] = float(self.components_found)
