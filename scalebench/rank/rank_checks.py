"""What ranks check and report together: identical inputs, per-rank figures, host names."""

from __future__ import annotations

import hashlib
import os
import socket

from torch import nn

from provenance import array_digest
from scalebench.errors import ScalebenchError
from scalebench.rank.context import TimedContext


def check_same_on_every_rank(context: TimedContext, denoiser: nn.Module,
                             data_sha256: str) -> None:
    """Raise when ranks differ in their data or their denoiser's weights (seeding gone wrong)."""
    if context.world_size <= 1:
        return
    weights = hashlib.sha256()
    for name, tensor in sorted(denoiser.state_dict().items()):
        weights.update(name.encode())
        weights.update(array_digest(tensor).encode())
    mine = (data_sha256, weights.hexdigest())
    every = [tuple(values) for values in context.gather_values(list(mine))]
    differing = [rank for rank, theirs in enumerate(every) if theirs != every[0]]
    if differing:
        what = "data" if every[differing[0]][0] != every[0][0] else "denoiser weights"
        raise ScalebenchError(f"rank {differing[0]} has other {what} than rank 0: ranks must "
                              f"start from identical inputs")


def rank_statistics(context: TimedContext, figures: dict[str, float]) -> dict[str, float]:
    """This rank's figures plus ``<figure>_max`` and ``<figure>_mean`` over every rank."""
    keys = sorted(figures)
    every = context.gather_values([figures[key] for key in keys])
    result = dict(figures)
    for index, key in enumerate(keys):
        values = [float(values_of_rank[index]) for values_of_rank in every]
        result[f"{key}_max"] = max(values)
        result[f"{key}_mean"] = sum(values) / len(values)
    return result


def rank_hosts(context: TimedContext) -> list[str]:
    """Where every rank ran, in rank order: its SLURM node name (host names can repeat
    across nodes, e.g. in containers), else its host name."""
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    return [values[0] for values in context.gather_values([host])]
