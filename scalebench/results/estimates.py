"""Keeping a run's images next to its results (solver parameter ``save_estimate``).

Under ``<run artefacts>/estimates/`` (``outputs/<result name>/estimates/`` for ``scalebench
run``), each image is an ``.npy`` array (float32, (C, *spatial)) with a ``.png`` preview:

- ``<result digest>.npy``: the estimate of the row whose ``prov_result_sha256`` is that
  digest, for the initial estimate (iteration 0) and the final one;
- ``ground_truth_<data digest>.npy``: the ground truth of the rows whose
  ``prov_data_sha256`` is that digest.

Previews share the ground truth's grey levels (or colours), clipped to its range, so the
three images of a run compare by eye. ``scalebench report`` shows them side by side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from provenance import array_digest

ESTIMATES_FOLDER = "estimates"
GROUND_TRUTH_PREFIX = "ground_truth_"


def preview_pixels(image: np.ndarray, low: float, high: float) -> np.ndarray:
    """(C, H, W) as an (H, W) grey or (H, W, 3) colour array in [0, 1] (2D images only)."""
    scaled = np.clip((image - low) / (high - low if high > low else 1.0), 0.0, 1.0)
    return scaled[0] if scaled.shape[0] == 1 else np.moveaxis(scaled[:3], 0, -1)


def _write(folder: Path, name: str, image: np.ndarray, low: float, high: float) -> None:
    import matplotlib.image

    np.save(folder / f"{name}.npy", image)
    if image.ndim == 3:  # (C, H, W): a 2D image; volumes keep only their array
        matplotlib.image.imsave(folder / f"{name}.png", preview_pixels(image, low, high),
                                cmap="gray", vmin=0.0, vmax=1.0)


def save_estimates(enabled: bool, rank: int, base: Path, ground_truth, initial, final,
                   data_sha256: str) -> None:
    """Write the run's ground truth, initial and final estimates (rank 0, when enabled).

    ``initial`` and ``final`` are the estimates the first and last rows were computed from,
    so their digests are those rows' ``prov_result_sha256``.
    """
    if not enabled or rank != 0:
        return
    folder = Path(base) / ESTIMATES_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    truth = ground_truth.detach().cpu().float().numpy()[0]
    low, high = float(truth.min()), float(truth.max())
    _write(folder, GROUND_TRUTH_PREFIX + data_sha256, truth, low, high)
    for estimate in (initial, final):
        _write(folder, array_digest(estimate), estimate.detach().cpu().float().numpy()[0],
               low, high)
