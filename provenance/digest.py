"""SHA-256 digests of arrays: dtype, shape and the contiguous buffer.

numpy is imported on first use: the launcher, ``verify-image`` and the error hints import
``provenance`` on hosts whose Python has the standard library only."""

from __future__ import annotations

import hashlib
from typing import Any


def array_digest(array: Any) -> str:
    """Digest of a numpy array or a torch tensor (moved to host memory first)."""
    import numpy as np

    if hasattr(array, "detach"):  # a torch tensor: no torch import needed here
        array = array.detach().cpu().contiguous().numpy()
    elif not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.data.cast("B") if array.ndim else array.tobytes())
    return digest.hexdigest()
