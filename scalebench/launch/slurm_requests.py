"""The values of SLURM requests, read as SLURM reads them: time limits, memory amounts and
``--gres`` GPUs. Standard library only (the launcher reads them too)."""

from __future__ import annotations

import re

from scalebench.errors import ConfigError

_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?$", re.IGNORECASE)
_ZERO_MEMORY = re.compile(r"^0*(\.0*)?\s*[KMGT]?(I?B)?$", re.IGNORECASE)
_MEMORY_UNITS = {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def slurm_time_seconds(value: str | int, where: str) -> float:
    """A SLURM time limit in seconds: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    match = _SLURM_TIME.match(str(value).strip())
    if not match:
        raise ConfigError(f"{where}: time limit {value!r} is not a SLURM time (minutes, MM:SS, "
                          f"HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return ((int(days) * 24 + int(first)) * 60 + int(second or 0)) * 60 + int(third or 0)
    if third is not None:  # HH:MM:SS
        return (int(first) * 60 + int(second)) * 60 + int(third)
    return int(first) * 60 + int(second or 0)  # MM or MM:SS


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?$", re.IGNORECASE)
_DURATION_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration_seconds(value: str | int | float, where: str) -> float:
    """A positive duration in seconds: a number with a unit s, m (min), h or d (bare:
    seconds), or a SLURM time with colons (MM:SS, HH:MM:SS, D-HH:MM:SS). The rule of a
    solver's timeout and of ``scalebench capacity --time`` alike."""
    text = str(value).strip()
    match = _DURATION.match(text)
    seconds = None
    if match and not isinstance(value, bool):
        seconds = float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]
    elif ":" in text and _SLURM_TIME.match(text):
        seconds = slurm_time_seconds(text, where)
    if seconds is None or seconds <= 0:
        raise ConfigError(f"{where}: {value!r} is not a positive duration: give a number with "
                          f"a unit s, m, h or d (e.g. 90m, 2h; bare: seconds) or HH:MM:SS")
    return seconds


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
