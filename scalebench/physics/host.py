"""Operators computed by a host library (ASTRA, ITK-RTK) one image at a time."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch


def per_item_on_host(data: torch.Tensor, run: Callable[[np.ndarray], np.ndarray]
                     ) -> torch.Tensor:
    """``run`` on each (batch, channel) item of ``data`` as a contiguous float32 array; the
    results stacked back into (batch, channels, ...) on ``data``'s device and dtype."""
    batch, channels = data.shape[:2]
    flat = data.detach().reshape(batch * channels, *data.shape[2:]).cpu().numpy()
    out = np.stack([run(np.ascontiguousarray(item, dtype=np.float32)) for item in flat])
    result = torch.from_numpy(out).to(device=data.device, dtype=data.dtype)
    return result.reshape(batch, channels, *out.shape[1:])
