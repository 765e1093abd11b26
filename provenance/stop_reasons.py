"""Why an experiment's run ended, in one vocabulary: on each of its rows (``STOP_COLUMNS``)
and per experiment in the run status of a results file (``record_stops``).

A run ends ``complete`` when it reached its ``max_iter``; earlier, by its ``time limit``
(benchopt's ``timeout``), because its estimate ``diverged``, because the tuner ``pruned`` it,
because a rank ``failed`` (or hung, or its node was lost), or because a signal ``stopped`` the
launch. Rows exist only for the first four: a failed or stopped experiment keeps no rows and is
named in the run status alone. Files written before stop reasons read as before: a row or an
experiment without one is ``complete``; an old run status names its failures ``failed``.
Standard library only: the launcher, results and ``scalebench check`` read it.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

COMPLETE = "complete"
TIME_LIMIT = "time limit"
DIVERGED = "diverged"
PRUNED = "pruned"
FAILED = "failed"
STOPPED = "stopped"

# reason -> meaning, the worst first (an experiment of several repetitions takes its worst).
STOP_REASONS: dict[str, str] = {
    FAILED: "a rank failed or hung, or its node was lost; the experiment keeps no rows",
    STOPPED: "a signal (SIGTERM, SIGINT) stopped the launch during the experiment; it keeps "
             "no rows and --resume runs it again",
    DIVERGED: "the estimate diverged (objective_diverged); the run ended at that iteration",
    TIME_LIMIT: "the run reached its time limit (the config's timeout) before max_iter",
    PRUNED: "the tuner stopped the trial early (set by tuning)",
    COMPLETE: "the run reached its max_iter",
}
# How a line says that an experiment ended early, by reason, in the order it names them.
EARLY_WORDING = {TIME_LIMIT: "cut by its time limit", DIVERGED: "diverged", PRUNED: "pruned",
                 FAILED: "failed", STOPPED: "stopped by a signal"}
# Reasons a run can end with and still keep its rows.
ROW_REASONS = (COMPLETE, TIME_LIMIT, DIVERGED, PRUNED)

REASON_COLUMN = "objective_stop_reason"
ITERATION_COLUMN = "objective_stop_iteration"
STOP_COLUMNS = (REASON_COLUMN, ITERATION_COLUMN)
RECORD_KEY = "stops"  # the run status's per-experiment stops
ITERATION_TEXT = re.compile(r"at iteration (\d+)/(\d+)")  # a rank's progress (launch.progress)


class UnknownStopReason(ValueError):
    """A stop reason outside the vocabulary."""


@dataclass(frozen=True)
class Stop:
    """How one experiment (or one run of it) ended: its reason and the iteration it reached
    (None where unknown: a failure before the first iteration, an old file)."""

    reason: str
    iteration: int | None = None
    max_iter: int | None = None

    @property
    def early(self) -> bool:
        """Whether the experiment ended before its max_iter."""
        return self.reason != COMPLETE

    def text(self) -> str:
        """``time limit at iteration 1 of 4`` (what is known of it)."""
        if self.iteration is None:
            return self.reason
        of = f" of {self.max_iter}" if self.max_iter is not None else ""
        return f"{self.reason} at iteration {self.iteration}{of}"

    def to_json(self) -> dict:
        return asdict(self)


def checked_reason(value: object) -> str:
    """A stop reason as read: an empty value (a file written before stop reasons) is
    ``complete``; a value outside the vocabulary is UnknownStopReason."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return COMPLETE
    if value not in STOP_REASONS:
        raise UnknownStopReason(f"unknown stop reason {value!r}; known: "
                                f"{', '.join(STOP_REASONS)}")
    return str(value)


def optional_int(value: object) -> int | None:
    """An iteration as read (None for an empty value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def worst(stops: list[Stop]) -> Stop:
    """The stop of an experiment from those of its runs (repetitions): the worst reason, the
    earliest iteration among the runs that ended with it; complete for no run at all."""
    if not stops:
        return Stop(COMPLETE)
    order = list(STOP_REASONS)
    reason = min((stop.reason for stop in stops), key=order.index)
    same = [stop for stop in stops if stop.reason == reason]
    known = [stop for stop in same if stop.iteration is not None]
    return min(known, key=lambda stop: stop.iteration) if known else same[0]


def progress_stop(reason: str, progress: str) -> Stop:
    """The stop of a failed or stopped experiment from a rank's progress text (``at iteration
    3/10``, ``during set-up (...)``): the iteration where it says one."""
    found = ITERATION_TEXT.search(progress or "")
    return Stop(reason, int(found[1]), int(found[2])) if found else Stop(reason)


def record_stops(record: dict) -> dict[str, Stop]:
    """Per experiment id, how it ended, from a run status (results.store.run_status): its
    recorded stops; in a status written before stop reasons, its finished experiments
    ``complete`` and its failures ``failed``."""
    if RECORD_KEY in record:
        return {key: Stop(checked_reason(value.get("reason")),
                          optional_int(value.get("iteration")),
                          optional_int(value.get("max_iter")))
                for key, value in record[RECORD_KEY].items()}
    stops = {key: Stop(COMPLETE) for key in record.get("experiments", [])}
    for failure in record.get("failures", []):
        stops.setdefault(failure.get("experiment", ""), Stop(FAILED))
    return stops


def early_stop_line(stops: dict[str, Stop], labels: dict[str, str],
                    notes: dict[str, str] | None = None) -> str:
    """One line naming the experiments that ended before their max_iter, by reason:
    ``1 experiment cut by its time limit (x at iteration 1 of 4)``; "" when none did.
    ``labels``: experiment id -> its label (the id where missing); ``notes``: experiment id ->
    what follows its name in brackets (for a cut one, the limit that would do)."""
    notes = notes or {}
    parts = []
    for reason, wording in EARLY_WORDING.items():
        named = [f"{labels.get(key, key)}{_at(stop)}"
                 + (f" ({notes[key]})" if notes.get(key) else "")
                 for key, stop in stops.items() if stop.reason == reason]
        if named:
            count = f"{len(named)} experiment{'s' if len(named) > 1 else ''}"
            parts.append(f"{count} {wording}: {'; '.join(named)}")
    return "stopped early: " + " | ".join(parts) if parts else ""


def _at(stop: Stop) -> str:
    if stop.iteration is None:
        return ""
    return f" at iteration {stop.iteration}" + \
        (f" of {stop.max_iter}" if stop.max_iter is not None else "")
