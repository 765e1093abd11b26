"""Supervised training of unrolled PnP networks: one benchopt iteration = one training step.

- ``problems``: the problems a training run can draw patches from (those of
  ``scalebench.problems`` and 3D denoising volumes);
- ``params``: the training solver's parameters and the checks made before anything runs;
- ``data``: seeded random training patches and the held-out validation image;
- ``model``: the unrolled proximal-gradient network, its spatial split across ranks and its
  activation checkpointing;
- ``step``: one measured training step (forward, loss, backward, gradient all-reduce,
  clipping, optimizer);
- ``solver``: the benchopt glue used by ``benchmark_training/``.
"""

from scalebench.benchmarks import TRAINING_BENCHMARK as BENCHMARK_NAME
from scalebench.benchmarks import TRAINING_OBJECTIVE as OBJECTIVE_NAME

__all__ = ["BENCHMARK_NAME", "OBJECTIVE_NAME"]
