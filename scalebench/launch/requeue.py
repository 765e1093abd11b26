"""A requeued SLURM job resumes its own result: SLURM starts the batch script again (after a
preemption, a node failure or ``scontrol requeue``) with the same job id, so the same result
name, and ``SLURM_RESTART_COUNT`` set; the launch then runs only the experiments the result
lacks, with or without ``--resume``. Standard library only, as the whole launcher.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from scalebench.errors import ScalebenchError


def slurm_restart() -> int:
    """How many times SLURM has restarted this batch job (requeued it: preemption, a node
    failure, ``scontrol requeue``); 0 outside a requeued job."""
    value = os.environ.get("SLURM_RESTART_COUNT", "").strip()
    return int(value) if value.isdigit() else 0


def finished_before(final: Path, config: Path, restart: int,
                    read_status: Callable[[Path], dict]) -> set[str]:
    """The experiments the job's earlier starts published in ``final`` (none when none did;
    ``read_status``: the file's run status): the interrupted one runs again whole. A result
    of another config is refused."""
    job = os.environ.get("SLURM_JOB_ID", "?")
    if not final.is_file():
        print(f"[scalebench] restart {restart} of job {job}: no experiment was published "
              f"before; running them all", flush=True)
        return set()
    record = read_status(final)
    if record.get("config") and Path(record["config"]).resolve() != config.resolve():
        raise ScalebenchError(f"restart {restart} of job {job}: result {final} holds config "
                              f"{record['config']}, not {config}; give another --output "
                              f"(SB_OUTPUT)")
    done = set(record.get("experiments", []))
    print(f"[scalebench] restart {restart} of job {job}: resuming {final} ({len(done)} "
          f"experiment(s) finished before)", flush=True)
    return done
