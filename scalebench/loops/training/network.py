"""The unrolled proximal-gradient network, its spatial split across ranks and its
activation checkpointing.

Stage k: ``z = x - gamma_k A^T(A x - y)``, then ``x = D(z, sigma_k)``, with a trainable step
size ``gamma_k`` and denoiser strength ``sigma_k`` per stage and one network shared by every
stage (DRUNet takes ``sigma_k`` as its noise level; DnCNN, which takes none, adds its
residual scaled by ``sigma_k / init_sigma``). The stages are written out here rather than
through deepinv's unfolded ``PGD``, which runs all stages inside one call: checkpointing one
stage at a time and timing the collectives of the backward pass need a hand on each stage.

Spatial split (``distribution: spatial``): the network's input is cut into tiles (deepinv's
``DistributedProcessing`` with ``WindowTiling``), dealt round-robin to the ranks. Everything
else is replicated. At a tile region's entry the input is replicated and its gradient is the
sum of the ranks' partial gradients (an all-reduce in the backward pass); at its exit the
ranks' disjoint tile cores are summed (an all-reduce in the forward pass) and the gradient,
identical on every rank, passes through unchanged. Both all-reduces go through the run's
``TimedContext``, so the backward pass's communication is timed too.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from scalebench.rank.context import TimedContext


class _ReplicatedInput(torch.autograd.Function):
    """Identity forward; backward sums every rank's partial gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, context: TimedContext) -> torch.Tensor:
        ctx.context = context
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.context.all_reduce(grad.contiguous().clone()), None


class _SumOfRanks(torch.autograd.Function):
    """Forward sums the ranks' partial results; the gradient of the (replicated) sum is the
    gradient of each part."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, context: TimedContext) -> torch.Tensor:
        return context.all_reduce(x.detach().contiguous().clone())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def build_network(name: str, channels: int, dims: int, width: int, depth: int,
                  seed: int, device: torch.device) -> nn.Module:
    """A seeded, randomly initialised DnCNN or DRUNet for ``dims``-D inputs (nothing loads)."""
    import deepinv as dinv

    torch.manual_seed(seed)
    if name == "dncnn":
        network = dinv.models.DnCNN(channels, channels, depth=depth, nf=width,
                                    pretrained=None, dim=dims)
    else:
        network = dinv.models.DRUNet(channels, channels, nc=[width * 2**i for i in range(4)],
                                     nb=depth, pretrained=None, dim=dims)
    return network.to(device).train()


class UnrolledPGD(nn.Module):
    """K unrolled PnP proximal-gradient stages; ``forward(y, physics)`` gives x_K."""

    def __init__(self, network: nn.Module, blind: bool, num_stages: int, step_size: float,
                 sigma: float, lipschitz: float) -> None:
        super().__init__()
        self.network = network
        self.blind = blind  # the network takes no noise level (DnCNN)
        self.init_sigma = sigma
        self.lipschitz = lipschitz  # ||A||^2: the initial estimate is A^T y / ||A||^2
        self.step_sizes = nn.Parameter(torch.full((num_stages,), float(step_size)))
        self.sigmas = nn.Parameter(torch.full((num_stages,), float(sigma)))
        self.tiles: nn.Module | None = None  # DistributedProcessing over the network's tiles
        self.context: TimedContext | None = None  # set when the tiles are split across ranks
        self.checkpoint_stages = False

    def split_tiles(self, tiles: nn.Module, context: TimedContext | None) -> None:
        """Run the network tile by tile through ``tiles``; across ranks when ``context``."""
        self.tiles, self.context = tiles, context

    def forward(self, y, physics) -> torch.Tensor:
        x = physics.A_adjoint(y) / self.lipschitz
        for k in range(self.step_sizes.numel()):
            stage = partial(self.stage, k=k, y=y, physics=physics)
            if self.checkpoint_stages and torch.is_grad_enabled():
                x = checkpoint(stage, x, use_reentrant=False)
            else:
                x = stage(x)
        return x

    def stage(self, x: torch.Tensor, k: int, y, physics) -> torch.Tensor:
        z = x - self.step_sizes[k] * physics.A_adjoint(physics.A(x) - y)
        return self.denoise(z, self.sigmas[k])

    def denoise(self, z: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        if self.tiles is None:
            return self.apply_network(z, sigma)
        if self.context is None:
            return self.tiles(z, sigma)
        z = _ReplicatedInput.apply(z, self.context)
        sigma = _ReplicatedInput.apply(sigma, self.context)
        return _SumOfRanks.apply(self.tiles(z, sigma, gather=False), self.context)

    def apply_network(self, z: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        if self.blind:
            return z + (sigma / self.init_sigma) * (self.network(z) - z)
        return self.network(z, sigma)

    def split_parameters(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """(network weights, stage parameters): the spatial split all-reduces the first's
        gradients; the stage parameters' gradients are whole on every rank."""
        return list(self.network.parameters()), [self.step_sizes, self.sigmas]
