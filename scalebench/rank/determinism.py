"""Deterministic mode: every switch that bit-for-bit re-runs need, set in one place.

Seeds python, numpy and torch (CPU and CUDA), asks torch for deterministic kernels (ops
without one warn instead of failing, so that e.g. CUDA grid_sample backward still runs; the
switch is recorded with the results), fixes cuDNN, cuBLAS workspace and NCCL reduction order
(NCCL_ALGO=Ring, NCCL_NVLS_ENABLE=0), and pins the thread count.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

DETERMINISTIC_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "NCCL_ALGO": "Ring",
                     "NCCL_NVLS_ENABLE": "0"}


def set_threads(num_threads: int) -> None:
    """Pin torch's intra-op threads; 0 keeps the current count (recorded either way)."""
    if num_threads > 0 and torch.get_num_threads() != num_threads:
        torch.set_num_threads(num_threads)


def apply_determinism(deterministic: bool, seed: int) -> None:
    """Turn deterministic mode on (seeded) or off; the switches are process-wide."""
    if deterministic:
        enable_deterministic_mode(seed)
    else:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


def enable_deterministic_mode(seed: int) -> None:
    for key, value in DETERMINISTIC_ENV.items():
        os.environ[key] = value  # read when CUDA / NCCL initialise
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
