"""The process group of a run and its timed collectives.

Ranks come from the launcher's RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT, or,
for tasks started by SLURM without them (benchopt's submitit backend), from SLURM_PROCID /
SLURM_NTASKS / SLURM_LOCALID and the job's first node. One process group serves every run of
the process: gloo for CPU tensors and NCCL for CUDA tensors, with a timeout on every
collective so that a rank that died ends the others instead of hanging them.

``TimedContext`` is deepinv's ``DistributedContext`` (which deepinv's distributed tiling uses)
with every collective timed, device synchronised on both sides, and its payload counted.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from deepinv.distributed import DistributedContext

from scalebench.errors import ConfigError
from scalebench.launch.liveness import COLLECTIVE_TIMEOUT_VARIABLE
from scalebench.launch.rank_env import export_rank_environment
from scalebench.rank.devices import cuda_available, device_type

TIMEOUT_VARIABLE = COLLECTIVE_TIMEOUT_VARIABLE  # the launcher sets it per experiment
DEFAULT_TIMEOUT_S = 600.0


def _init_process_group() -> None:
    export_rank_environment()
    if dist.is_initialized() or "RANK" not in os.environ:
        return
    timeout = timedelta(seconds=float(os.environ.get(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_S)))
    backend = "cpu:gloo,cuda:nccl" if cuda_available() else "gloo"
    dist.init_process_group(backend=backend, timeout=timeout)
    group_exit = _GroupExit(sys.excepthook)
    sys.excepthook = group_exit.remember_failure
    atexit.register(group_exit.leave)


class _GroupExit:
    """How the process leaves its group at exit: whether an uncaught error ended it, noted by
    the interpreter's exception hook (``previous_hook`` still prints it)."""

    def __init__(self, previous_hook) -> None:
        self.previous_hook = previous_hook
        self.failed = False

    def remember_failure(self, *exc_info) -> None:
        self.failed = True
        self.previous_hook(*exc_info)

    def leave(self) -> None:
        """Destroy the group on a normal exit (tearing it down at exit aborts the process).
        After an error, peers may be blocked in a collective: leave at once with status 1."""
        if self.failed:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        if dist.is_initialized():
            dist.destroy_process_group()


class TimedContext(DistributedContext):
    """deepinv's context whose collectives add to ``comm_time_s`` and ``comm_bytes``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device_mode="gpu" if device.type == "cuda" else "cpu")
        self.comm_time_s = 0.0
        self.comm_bytes = 0

    def _timed(self, payload_bytes: int, function, *args, **kwargs) -> Any:
        if not self.use_dist:
            return function(*args, **kwargs)
        self._synchronize()
        start = time.perf_counter()
        result = function(*args, **kwargs)
        self._synchronize()
        self.comm_time_s += time.perf_counter() - start
        self.comm_bytes += payload_bytes
        return result

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _collective(self, fn, fn_functional, x: torch.Tensor, **kwargs) -> torch.Tensor:
        return self._timed(x.numel() * x.element_size(), super()._collective, fn,
                           fn_functional, x, **kwargs)

    def all_gather(self, x: torch.Tensor, group=None) -> torch.Tensor:
        return self._timed(x.numel() * x.element_size(), super().all_gather, x, group)

    def all_gather_object(self, obj_list: list, obj: Any, group=None):
        return self._timed(0, super().all_gather_object, obj_list, obj, group)

    def gather_values(self, values: list) -> list[list]:
        """One list of Python values per rank, in rank order (``[values]`` alone)."""
        if not self.use_dist:
            return [values]
        gathered: list = [None] * self.world_size
        self.all_gather_object(gathered, values)
        return gathered

    def agree(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any rank."""
        if not self.use_dist:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self.device)
        return bool(self.all_reduce(value, op=dist.ReduceOp.MAX).item() > 0)


# The process's context per device type, made on first use (run_context) and kept for every
# later run of the process, as its process group is: only run_context adds to it.
_CONTEXTS: dict[str, TimedContext] = {}


def run_context(device: torch.device) -> TimedContext:
    """The process's context for ``device``'s type; joins the process group on first use."""
    _init_process_group()
    if device.type not in _CONTEXTS:
        _CONTEXTS[device.type] = TimedContext(device).__enter__()
    context = _CONTEXTS[device.type]
    context.comm_time_s, context.comm_bytes = 0.0, 0
    return context


def resolve_device(name: str) -> torch.device:
    """'auto' picks the first CUDA device when there is one; 'cuda' requires one."""
    name = device_type(name)
    if name == "cuda" and not cuda_available():
        raise ConfigError("device 'cuda' requested but no CUDA device is available "
                          "(allowed here: 'cpu' or 'auto')")
    return torch.device(name)
