"""What the rest of scalebench asks of a denoiser, without building it: the input sizes it
takes, how far its output reaches (the overlap of exact tiles), whether it takes volumes and
has weights, and how to build it. Imports no torch: the checks of a config read every
denoiser's spec before anything runs; each spec's ``build`` imports its heavy parts when
called. The registry (``catalog.DENOISERS``) lists one spec per module of ``kinds/``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class Weights:
    """The weights a denoiser runs with: what ``pretrained`` resolved to."""

    source: str  # "none" (a denoiser without weights), "random", "bundled", "hub" or "file"
    path: Path | None = None  # the file loaded (None for "none" and "random")
    widths: dict | None = None  # architecture keyword arguments; None: deepinv's defaults

    @property
    def label(self) -> str:
        """What rows record in ``prov_weights``: the source, or the path of a user's file."""
        return str(self.path) if self.source == "file" else self.source


@dataclass(frozen=True)
class DenoiserSpec:
    """A denoiser called as ``denoiser(x, sigma)`` on (B, C, *spatial) tensors."""

    name: str
    description: str
    # Input sides (or tile windows) must be multiples of this (a network that downsamples
    # three times by 2 needs 8).
    size_multiple: int
    # Pixels beyond which an input pixel cannot change an output pixel: an overlap at least
    # this large makes tiles exact. None: every input pixel can change every output pixel
    # (BM3D): no overlap makes tiles exact.
    receptive_radius: int | None
    # Whether it takes 3D volumes (B, C, D, H, W) as well as 2D images.
    volumes: bool
    # (channels, weights, device) -> an eval-mode module; imports its library when called.
    build: Callable[[int, Weights, Any], nn.Module]
    # Architecture keyword arguments of the published weights; None: the denoiser has no
    # weights (``pretrained`` is ignored, rows record 'none').
    default_widths: dict | None = None
    # widths -> channels of its full-resolution feature maps (what its memory grows with);
    # None: it keeps none (an iterative denoiser's few image-sized buffers).
    feature_channels: Callable[[dict], int] | None = None
    # Takes no noise level: ``sigma`` is ignored (DnCNN; measured: the same PSNR from sigma
    # 0.001 to 0.1), so a tuner does not search it and training scales its residual instead.
    blind: bool = False

    @property
    def has_weights(self) -> bool:
        return self.default_widths is not None
