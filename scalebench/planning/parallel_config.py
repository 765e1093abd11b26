"""A benchopt submitit parallel config: the SLURM resources a campaign's jobs ask for, its
keys harmonised as benchopt does (``slurm_<name>``) and checked before anything is submitted.
Imports benchopt and submitit when it reads one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalebench.errors import ConfigError
from scalebench.experiment.reading import read_yaml

# Parallel-config keys besides submitit's own: benchopt's backend switch and worker count.
BENCHOPT_PARALLEL_KEYS = ("backend", "n_jobs")


def read_parallel_config(path: Path) -> dict[str, Any]:
    """A benchopt submitit parallel config, keys harmonised as benchopt does (slurm_<name>)."""
    from benchopt.parallel_backends.slurm_executor import harmonize_slurm_config
    from submitit import SlurmExecutor

    raw = read_yaml(path, "parallel config")
    if not isinstance(raw, dict) or raw.get("backend") != "submitit":
        raise ConfigError(f"parallel config {path} must be a mapping with 'backend: submitit' "
                          f"(the only backend that submits jobs with resources)")
    allowed = SlurmExecutor._valid_parameters()
    slurm = {key: value for key, value in raw.items() if key not in BENCHOPT_PARALLEL_KEYS}
    for key in slurm:
        if not key.startswith("slurm_"):
            raise ConfigError(f"parallel config {path}: unknown key '{key}' (allowed: "
                              f"{', '.join(BENCHOPT_PARALLEL_KEYS)} and slurm_<submitit option>)")
    merged = harmonize_slurm_config(slurm)
    unknown = sorted(key for key in merged if key.removeprefix("slurm_") not in allowed)
    if unknown:
        raise ConfigError(f"parallel config {path}: unknown key '{unknown[0]}' (allowed "
                          f"slurm_ options: {', '.join(sorted(allowed))})")
    for key in ("slurm_nodes", "slurm_ntasks_per_node", "slurm_gpus_per_node",
                "slurm_cpus_per_task"):
        value = merged.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ConfigError(f"parallel config {path}: '{key}' must be a positive integer, "
                              f"got {value!r}")
    # An int slurm_time is minutes: benchopt hands it to sbatch so (an unquoted 02:00:00,
    # which YAML reads as the base-60 integer 7200, asks SLURM for 7200 minutes).
    for key, kinds in (("slurm_gres", (str,)), ("slurm_time", (str, int)),
                       ("slurm_mem", (str, int, float))):
        value = merged.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise ConfigError(f"parallel config {path}: '{key}' must be "
                              f"{' or '.join(k.__name__ for k in kinds)}, got {value!r}")
    if "slurm_mem_gb" in slurm:  # submitit's mem_gb counts GB
        merged["slurm_mem"] = f"{slurm['slurm_mem_gb']}G"
    return merged
