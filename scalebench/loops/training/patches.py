"""Training patches and the held-out validation image.

A patch is a random crop of the dataset's ground truth (its corner drawn from a generator
seeded by the run seed, the step and the patch's index in the global batch), measured through
the problem's operator rebuilt at the patch size, with Gaussian noise of standard deviation
``noise_level x RMS(A x)`` drawn from the same generator. Every patch depends only on
(seed, step, index), so any split of a batch across ranks sees the same patches.

The validation image is the problem set up at the patch size with the dataset seed + 1: for
generated images (``synthetic``, ``volume_denoising``) another image, for the shipped
pictures the whole picture at the training scale; its measurements come from the problem
itself.
"""

from __future__ import annotations

import hashlib

import torch
from deepinv.utils import TensorList

from provenance import array_digest
from scalebench.loops.pnp import operator_norm_squared
from scalebench.problems.base import Problem, ProblemSetup
from scalebench.problems.spec import ProblemSpec

PATCH_SEED_STRIDE = 1_000_003  # generator of patch i at step s: seed * stride^2 + s * stride + i


class TrainingData:
    """Patches of ``patch_size`` cut from ``setup``'s ground truth, and the validation problem."""

    def __init__(self, setup: ProblemSetup, spec: ProblemSpec, patch_size: int, seed: int,
                 device: torch.device) -> None:
        values = dict(setup.source["params"])
        patch_values = {**values, "image_size": patch_size, "seed": values["seed"] + 1}
        self.validation: Problem = spec.setup(**patch_values).build(device=device)
        self.physics = self.validation.physics  # the operators at the patch size
        self.lipschitz = operator_norm_squared(self.validation)
        self.source = setup.x_true  # on the CPU: crops are drawn there, then moved
        self.noise_level = setup.noise_level
        self.patch_size = patch_size
        self.seed = seed
        self.device = device
        self.data_sha256 = hashlib.sha256(
            (array_digest(self.source) + self.validation.data_sha256).encode()).hexdigest()

    def _generator(self, step: int, index: int) -> torch.Generator:
        stride = PATCH_SEED_STRIDE
        return torch.Generator().manual_seed(self.seed * stride * stride + step * stride + index)

    def batch(self, step: int, indices: range) -> tuple[torch.Tensor, TensorList]:
        """Ground truths (B, C, *patch) and measurements of patches ``indices`` of ``step``."""
        generators = [self._generator(step, i) for i in indices]
        spatial = self.source.shape[2:]
        crops = []
        for generator in generators:
            corner = [int(torch.randint(0, n - self.patch_size + 1, (1,), generator=generator))
                      for n in spatial]
            crops.append(self.source[(0, ..., *(slice(c, c + self.patch_size)
                                                 for c in corner))])
        x = torch.stack(crops).to(self.device)
        with torch.no_grad():
            clean = self.physics.A(x)
        noisy = []
        for y_k in clean:
            noise = [torch.randn(y_k.shape[1:], generator=generator, dtype=y_k.dtype)
                     for generator in generators]
            rms = y_k.flatten(1).double().pow(2).mean(1).sqrt().to(y_k.dtype)
            scale = (self.noise_level * rms).view(-1, *([1] * (y_k.ndim - 1)))
            noisy.append(y_k + scale * torch.stack(noise).to(self.device))
        return x, TensorList(noisy)
