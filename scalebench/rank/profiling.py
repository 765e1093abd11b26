"""Per-step profiling of an iteration: wall time and peak memory of each named step.

The loop calls ``profiler.step("grad")`` / ``profiler.step("denoise")`` around its steps; the
profiler synchronises the device before reading any clock. Modes (a solver parameter, stored
with the results):

- ``light`` (default): wall clock, CPU time and peak memory only, negligible overhead.
- ``torch``: also records every step under ``torch.profiler`` (CPU and CUDA activity) and writes
  a Chrome trace per run; per-step figures stay those of the light mode.
- ``nvtx``: also opens an NVTX range per step (named ``<step>`` in one process and
  ``<step> rank <r>`` on several), for Nsight Systems timelines.

Communication: given the run's ``TimedContext``, each step also reports the time spent inside
collectives (device synchronised) and the bytes handed to them, and every iteration their
sums over its steps (``comm_time_s``, ``comm_bytes``).

Peak memory of a step: on CUDA the caching allocator's peak (``torch.cuda.max_memory_allocated``
after a reset); always, the process's peak resident set size (Linux ``VmHWM`` after resetting it
through ``/proc/self/clear_refs``). Where ``clear_refs`` is unavailable the process's lifetime
peak (VmHWM never reset; ``ru_maxrss`` without /proc) is reported instead, which bounds the
step's peak from above; ``host_method`` says which one measured (``HOST_METHODS``). Beside
each absolute peak, the step's increase: the peak minus the memory in use just before the step
(resident set size, or CUDA memory allocated), i.e. what the step itself needed.
"""

from __future__ import annotations

import ctypes
import platform
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from scalebench.launch import preloaded
from scalebench.rank.names import (
    HOST_PEAK_LIFETIME,
    HOST_PEAK_SINCE_RESET,
    HOST_PEAK_SINCE_RESET_FORKED,
    PROFILER_MODES,
)
from scalebench.rank.settings import process_settings

MIB = 1024.0**2
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` so that a clock read afterwards is meaningful."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release_freed_memory(device: torch.device) -> None:
    """Hand back to the system what the allocators keep of memory freed so far: glibc's heap
    (``malloc_trim``) and CUDA's cached blocks. Called when a run's set-up ends, so that the
    iterations' peaks count what the iterations hold rather than where the set-up's garbage
    happened to lie, and a run's peak is the larger of its set-up's and its iterations'
    (scalebench.planning.capacity models each)."""
    if platform.libc_ver()[0] == "glibc":
        ctypes.CDLL(None).malloc_trim(0)
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


class HostPeakMemory:
    """Peak resident set size of this process between ``reset()`` and ``read_mib()``."""

    def __init__(self, resets: bool = True) -> None:
        # Finding out whether the peak can be reset resets it: not done without ``resets``.
        self.resettable = resets and self.reset_peak()
        self.method = HOST_PEAK_LIFETIME if not self.resettable else \
            HOST_PEAK_SINCE_RESET_FORKED if preloaded.forked() else HOST_PEAK_SINCE_RESET

    @staticmethod
    def reset_peak() -> bool:
        """Reset this process's high-water mark (VmHWM) where Linux allows it; whether it
        did."""
        try:
            _CLEAR_REFS.write_text("5")
            return True
        except OSError:
            return False

    def reset(self) -> None:
        if self.resettable:
            _CLEAR_REFS.write_text("5")

    @staticmethod
    def status_mib(field: str) -> float:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024 / MIB
        raise OSError(f"{field} missing from {_STATUS}")

    def current_mib(self) -> float:
        """Resident set size now (0 where /proc is unavailable)."""
        try:
            return self.status_mib("VmRSS:")
        except OSError:
            return 0.0

    def read_mib(self) -> float:
        """The peak since the last reset; without resets, the process's lifetime peak: its
        own high-water mark (VmHWM) where /proc has it, else ``ru_maxrss``, which on Linux
        also carries the high-water mark of the parent that started the process."""
        try:
            return self.status_mib("VmHWM:")
        except OSError:
            if self.resettable:
                raise
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / MIB if sys.platform == "darwin" else peak * 1024 / MIB


class StepProfiler:
    """Measures the named steps of each iteration; ``last`` holds the latest figures.

    Column names: ``<step>_time_s``, ``<step>_cpu_utilization`` (CPU time of every thread of
    the process over the step's wall time: 2.0 is two cores busy), ``<step>_peak_host_rss_mib`` and
    ``<step>_host_rss_increase_mib``, on CUDA ``<step>_peak_cuda_alloc_mib`` and
    ``<step>_cuda_alloc_increase_mib``, and with a context ``<step>_comm_time_s``,
    ``<step>_comm_bytes``, ``comm_time_s`` and ``comm_bytes``. ``host_method`` names how host
    peaks were measured (one of ``HOST_METHODS``).
    """

    def __init__(self, device: torch.device, mode: str = "light",
                 trace_path: Path | None = None, context=None, rank_label: str = "") -> None:
        if mode not in PROFILER_MODES:
            raise ValueError(f"profiler mode must be one of {PROFILER_MODES}, got {mode!r}")
        self.device = torch.device(device)
        self.mode = mode
        self.trace_path = trace_path
        self.last: dict[str, float] = {}
        # Off under a memory probe's settings: the process's own peaks (host VmHWM, CUDA's
        # peak reserved memory) then cover each phase of the run, which the probe reads when
        # the set-up ends and, after resetting them, at the end.
        self.reset_peaks = process_settings().step_peak_resets
        self._host = HostPeakMemory(self.reset_peaks)
        self.host_method = self._host.method
        self._torch_profiler = None
        self.context = context  # a scalebench.rank.context.TimedContext, or None
        self.rank_label = rank_label  # appended to NVTX range names, e.g. " rank 1"

    def __enter__(self) -> StepProfiler:
        if self.mode == "torch":
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._torch_profiler = torch.profiler.profile(activities=activities)
            self._torch_profiler.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._torch_profiler is None:
            return
        self._torch_profiler.__exit__(*exc_info)
        if self.trace_path is not None and exc_info[0] is None:
            self.trace_path.parent.mkdir(parents=True, exist_ok=True)
            self._torch_profiler.export_chrome_trace(str(self.trace_path))
        self._torch_profiler = None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Measure the block as step ``name`` of the current iteration."""
        synchronize(self.device)
        cuda_before = 0
        if self.device.type == "cuda":
            if self.reset_peaks:
                torch.cuda.reset_peak_memory_stats(self.device)
            cuda_before = torch.cuda.memory_allocated(self.device)
        self._host.reset()
        host_before = self._host.current_mib()
        comm_start = self._comm()
        with self._annotation(name):
            start, cpu_start = time.perf_counter(), time.process_time()
            yield
            synchronize(self.device)
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
        self.last[f"{name}_time_s"] = elapsed
        self.last[f"{name}_cpu_utilization"] = cpu / elapsed if elapsed > 0 else 0.0
        if self.context is not None:
            comm_end = self._comm()
            self.last[f"{name}_comm_time_s"] = comm_end[0] - comm_start[0]
            self.last[f"{name}_comm_bytes"] = float(comm_end[1] - comm_start[1])
            for figure in ("comm_time_s", "comm_bytes"):
                self.last[figure] = sum(value for key, value in self.last.items()
                                        if key.endswith(f"_{figure}"))
        host_peak = self._host.read_mib()
        self.last[f"{name}_peak_host_rss_mib"] = host_peak
        self.last[f"{name}_host_rss_increase_mib"] = max(host_peak - host_before, 0.0)
        if self.device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(self.device)
            self.last[f"{name}_peak_cuda_alloc_mib"] = peak / MIB
            self.last[f"{name}_cuda_alloc_increase_mib"] = (peak - cuda_before) / MIB

    def _comm(self) -> tuple[float, int]:
        if self.context is None:
            return 0.0, 0
        return self.context.comm_time_s, self.context.comm_bytes

    @contextmanager
    def _annotation(self, name: str) -> Iterator[None]:
        if self.mode == "torch":
            with torch.profiler.record_function(name):
                yield
        elif self.mode == "nvtx":
            torch.cuda.nvtx.range_push(name + self.rank_label)
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()
        else:
            yield
