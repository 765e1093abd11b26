"""What a run asks of its machines, from its solver's ``slurm_*`` parameters: the one rule for
the launcher, ``validate``, ``plan`` and ``capacity``.

An experiment that sets ``slurm_nodes`` or ``slurm_ntasks_per_node`` runs on nodes x tasks per
node ranks (an unset one counts 1); any other runs on the ranks its launch gives it
(``--nproc``, or the tasks of a SLURM allocation). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def names_slurm_resources(solver_params: Mapping[str, Any]) -> bool:
    """Whether the solver sets slurm_nodes or slurm_ntasks_per_node."""
    return solver_params.get("slurm_nodes") is not None or \
        solver_params.get("slurm_ntasks_per_node") is not None


def requested_ranks(solver_params: Mapping[str, Any], default: int) -> int:
    """Ranks of a run: slurm_nodes x slurm_ntasks_per_node where either is set, else
    ``default``."""
    if not names_slurm_resources(solver_params):
        return default
    return (solver_params.get("slurm_nodes") or 1) * \
        (solver_params.get("slurm_ntasks_per_node") or 1)


def srun_resources(solver_params: Mapping[str, Any]) -> list[str]:
    """srun options that give a run its own share of the allocation ([] when it names no
    resources: the whole allocation)."""
    if not names_slurm_resources(solver_params):
        return []
    nodes, per_node = solver_params.get("slurm_nodes") or 1, \
        solver_params.get("slurm_ntasks_per_node") or 1
    return [f"--nodes={nodes}", f"--ntasks={nodes * per_node}",
            f"--ntasks-per-node={per_node}"]


def experiment_solver_params(experiment: Mapping[str, Any]) -> Mapping[str, Any]:
    """The solver parameters of an expanded experiment ({"solver": {name: parameters}})."""
    (params,) = experiment["solver"].values()
    return params


def experiment_ranks(experiment: Mapping[str, Any], default: int) -> int:
    """Ranks of an expanded experiment (``requested_ranks`` of its solver's parameters)."""
    return requested_ranks(experiment_solver_params(experiment), default)


def check_allocation(experiments: list[Mapping[str, Any]], available: int) -> None:
    """Refuse (one line) an experiment that needs more ranks than the allocation's
    ``available`` tasks."""
    from scalebench.errors import ScalebenchError

    for experiment in experiments:
        needed = experiment_ranks(experiment, available)
        if needed > available:
            raise ScalebenchError(f"experiment {experiment['label']} needs {needed} ranks but "
                                  f"the allocation has {available} tasks")
