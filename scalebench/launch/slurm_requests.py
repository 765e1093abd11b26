"""The values of SLURM requests, read as SLURM reads them: memory amounts and ``--gres`` GPUs
(time limits: scalebench.durations.slurm_time_seconds). Standard library only (the launcher
reads them too)."""

from __future__ import annotations

import re

from scalebench.errors import ConfigError

_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?$", re.IGNORECASE)
_ZERO_MEMORY = re.compile(r"^0*(\.0*)?\s*[KMGT]?(I?B)?$", re.IGNORECASE)
_MEMORY_UNITS = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def memory_bytes(value: str | int | float, where: str, bare_unit: str = "M") -> int:
    """A memory amount in bytes: a positive number with a binary unit, K, M, G or T (also
    written KiB, KB, ..., all 1024-based as SLURM counts them) or B; a bare number counts
    ``bare_unit`` (SLURM's --mem: 'M'; a byte budget: 'B'). The rule of SLURM's memory
    requests and of ``scalebench capacity --memory`` alike."""
    match = _MEMORY.match(str(value).strip())
    if not match or isinstance(value, bool) or float(match.group(1)) <= 0:
        bare = "MiB" if bare_unit == "M" else "bytes"
        raise ConfigError(f"{where}: {value!r} is not a memory size: give a positive number "
                          f"with a unit K, M, G or T (binary, e.g. 80GiB, 512M), or bare "
                          f"{bare}")
    unit = match.group(2).upper() or ("B" if match.group(3) else bare_unit)
    return int(float(match.group(1)) * _MEMORY_UNITS[unit])


def node_memory_bytes(mem: str | int | float | None, where: str) -> int | None:
    """What a node offers a job asking for ``slurm_mem``; None when unknown: no request, or
    SLURM's 0 (the node's whole memory)."""
    if mem is None or _ZERO_MEMORY.match(str(mem).strip()):
        return None
    return memory_bytes(mem, where)


def gres_gpus(gres: str | None) -> int:
    """GPUs per node in a --gres value ('gpu:4', 'gpu:a100:4'); 0 when it names none."""
    for item in (gres or "").split(","):
        parts = item.strip().split(":")
        if parts[0] == "gpu":
            return int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return 0
