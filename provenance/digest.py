"""SHA-256 digests of arrays: dtype, shape and the contiguous buffer."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def array_digest(array: Any) -> str:
    """Digest of a numpy array or a torch tensor (moved to host memory first)."""
    if hasattr(array, "detach"):  # a torch tensor: no torch import needed here
        array = array.detach().cpu().contiguous().numpy()
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256()
    digest.update(str(array.dtype).encode())
    digest.update(repr(tuple(array.shape)).encode())
    digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()
