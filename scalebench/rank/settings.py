"""What a memory probe changes in how its process runs: one frozen ``ProcessSettings``,
installed for a block by ``installed`` and read through ``process_settings``.

A run takes the defaults. A capacity probe (scalebench.planning.capacity.probe) installs
its own for the length of its run: no profiled step resets the peaks (the probe reads the
process's peaks of each phase itself), the operator norm runs a capped number of
applications and never touches its cache, TV runs fewer inner iterations where more hold
nothing more, and chunked operators may be given a lower chunk limit.

Why one installed object rather than arguments: the four readers sit deep under the
benchmark's own classes (benchopt builds the solver, which builds the loop, the profiler,
the denoiser and the operators), so passing a value down would thread it through benchopt's
Dataset, Objective and Solver and every problem and denoiser in between, for a value only a
probe ever changes. Why not a context variable: the operators also run in worker threads (the
ASTRA projector's pool), which a context variable would leave on the defaults; the settings
are the process's. So the installed value is one module global, assigned only here, by
``installed``, which puts the previous one back when its block ends, whatever happens in
it: nothing a probe sets outlives the probe (install from one thread at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessSettings:
    """How this process measures and computes; the defaults are a run's."""

    # False: no profiled step resets the peaks (host VmHWM, CUDA's peak memory), so the
    # process's own peaks cover each phase of the run (scalebench.rank.profiling).
    step_peak_resets: bool = True
    # Applications of A^T A (and of the start operator's) the operator norm runs at most,
    # neither reading nor writing its cache (scalebench.rank.operator_norm); None: a run's
    # estimate, to its tolerance, cached.
    norm_applications: int | None = None
    # Inner iterations of each TV module built (scalebench.denoisers.kinds.tv); None: TV's
    # own ITERATIONS. The tiling keeps ITERATIONS' radius either way.
    tv_iterations: int | None = None
    # Elements of the largest temporary per chunk of the chunked operators
    # (scalebench.physics.parallel_beam); None: their own CHUNK_ELEMENTS.
    chunk_elements: int | None = None


_installed = ProcessSettings()


def process_settings() -> ProcessSettings:
    """The settings in force: the innermost ``installed`` block's, else the defaults."""
    return _installed


@contextmanager
def installed(settings: ProcessSettings) -> Iterator[ProcessSettings]:
    """``settings`` in force for the block; the previous ones again when it ends."""
    global _installed
    previous, _installed = _installed, settings
    try:
        yield settings
    finally:
        _installed = previous
