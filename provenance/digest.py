"""SHA-256 digests of arrays: dtype, shape and the contiguous buffer."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def array_digest(array: Any) -> str:
    """Digest of a numpy array or a torch tensor (moved to host memory first)."""
    if hasattr(array, "detach"):  # a torch tensor: no torch import needed here
        array = array.detach().cpu().contiguous().numpy()
    elif not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.data.cast("B") if array.ndim else array.tobytes())
    return digest.hexdigest()
