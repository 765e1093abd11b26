"""How many allocations of a given length a campaign needs (``scalebench plan
--allocation-time``): its experiments' predicted times, with ``TIME_MARGIN``, packed in order
into allocations, an experiment never split, as ``scalebench run`` under SLURM starts an
experiment only where its prediction with the margin fits the time its job has left before
the time limit's signal may come (scalebench.launch.requeue) and requeues its job for the
rest: each allocation holds its length less that window
(``durations.before_limit_signal_s``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scalebench.durations import TIME_MARGIN, before_limit_signal_s
from scalebench.planning.capacity.time_model import duration_text
from scalebench.planning.jobs import Job

# A requeued job does not start again at once: SLURM holds a requeued batch job until its
# credentials of the last start have expired (120 s by default), before any wait for nodes.
REQUEUE_DELAY_S = 120.0


@dataclass
class Allocations:
    """The campaign's calibrated experiments packed into allocations of ``allocation_s``."""

    allocation_s: float
    packed: list[list[str]] = field(default_factory=list)  # experiment ids per allocation
    too_long: list[str] = field(default_factory=list)  # lines: longer than one allocation
    uncalibrated: int = 0  # experiments without a prediction, left out of the count
    predicted_s: float = 0.0  # the packed experiments' predicted time with the margin

    @property
    def usable_s(self) -> float:
        """What one allocation holds: its length less the time limit's signal window."""
        return max(before_limit_signal_s(self.allocation_s), 0.0)

    @property
    def count(self) -> int:
        return len(self.packed)

    @property
    def wall_s(self) -> float:
        """Predicted wall time of the campaign: its experiments and a requeue delay before
        every allocation after the first."""
        return self.predicted_s + max(self.count - 1, 0) * REQUEUE_DELAY_S

    def to_json(self) -> dict:
        return {"allocation_s": self.allocation_s, "usable_s": self.usable_s,
                "allocations": self.count,
                "experiments": self.packed, "requeue_delay_s": REQUEUE_DELAY_S,
                "predicted_wall_s": self.wall_s, "uncalibrated": self.uncalibrated,
                "too_long": self.too_long}

    def text(self) -> list[str]:
        """The plan's lines on the allocations."""
        left_out = f"; {self.uncalibrated} uncalibrated experiment(s) not counted" \
            if self.uncalibrated else ""
        return [f"allocations of {duration_text(self.allocation_s)}: {self.count} needed "
                f"(experiments predicted with a {TIME_MARGIN - 1:.0%} margin, packed in "
                f"order, none split, into {duration_text(self.usable_s)} of each: the rest "
                f"is the time limit's signal window; {duration_text(self.wall_s)} wall time with "
                f"{REQUEUE_DELAY_S:.0f} s of requeue delay before each restart{left_out})"]


def pack_allocations(jobs: list[Job], allocation_s: float) -> Allocations:
    """``jobs``' predicted times with ``TIME_MARGIN`` packed in order into allocations of
    ``allocation_s`` (each holding ``Allocations.usable_s``); an experiment longer than that
    takes one of its own and is named in ``too_long`` (it cannot complete: run never starts
    it, and requeues until the restart limit)."""
    allocations, left = Allocations(allocation_s), 0.0
    usable_s = allocations.usable_s
    for job in jobs:
        if job.predicted_s is None:
            allocations.uncalibrated += 1
            continue
        needed = job.predicted_s * TIME_MARGIN
        allocations.predicted_s += needed
        if needed > usable_s:
            allocations.too_long.append(
                f"job {job.id} ({job.label}): predicted {duration_text(job.predicted_s)} "
                f"with a {TIME_MARGIN - 1:.0%} margin is longer than the "
                f"{duration_text(usable_s)} one allocation of {duration_text(allocation_s)} "
                f"holds before its time limit's signal: it cannot complete; ask for a longer "
                f"time limit or shorten the experiment")
        if needed > left or not allocations.packed:
            allocations.packed.append([])
            left = usable_s
        allocations.packed[-1].append(job.id)
        left -= needed
    return allocations
