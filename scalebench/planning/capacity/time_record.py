"""The time model against real runs, kept: a record of a configuration's probes as its
calibration timed them and of whole runs measured at sizes past them (``python -m
tools.time_check --record PATH`` writes it). Refitting the record predicts each run from the
probes alone with the time model as the code fits it now, so a change to the model is checked
against measurements without measuring again (tests/unit/test_time_record.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from scalebench.planning.capacity.model import CalibrationPoint, point_from_json
from scalebench.planning.capacity.time_answer import measured_iteration
from scalebench.planning.capacity.time_model import Counts, time_model

RECORD_VERSION = 1
# The targets a refitted prediction / measurement meets (tools/time_check's).
ITERATION_RANGE, SETUP_RANGE = (0.8, 1.25), (0.7, 1.4)


@dataclass(frozen=True)
class RecordedRun:
    """A whole run measured at ``size``: its counts, seconds per iteration and set-up."""

    size: int
    counts: Counts
    iteration_s: float
    setup_s: float  # with the operator norm, as the run computed it

    @classmethod
    def measured(cls, size: int, counts: Counts, timing: dict) -> RecordedRun:
        """The run of a whole probe's ``timing`` (probe.ProbeResult.timing)."""
        return cls(size, counts, measured_iteration(timing), timing["setup_s"])


@dataclass(frozen=True)
class RecordedCase:
    """One configuration: its calibration's probes and the runs measured past them."""

    name: str
    points: tuple[CalibrationPoint, ...]
    runs: tuple[RecordedRun, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "points": [asdict(point) for point in self.points],
                "runs": [asdict(run) for run in self.runs]}

    @classmethod
    def from_json(cls, data: dict) -> RecordedCase:
        runs = tuple(RecordedRun(run["size"], Counts(**run["counts"]), run["iteration_s"],
                                 run["setup_s"]) for run in data["runs"])
        return cls(data["name"], tuple(map(point_from_json, data["points"])), runs)


@dataclass(frozen=True)
class Refit:
    """A recorded run as the refitted model predicts it (``scale``: every prediction
    multiplied, for a check that must then fail)."""

    case: str
    size: int
    predicted_iteration_s: float
    measured_iteration_s: float
    predicted_setup_s: float
    measured_setup_s: float

    @property
    def iteration_ratio(self) -> float:
        return self.predicted_iteration_s / self.measured_iteration_s

    @property
    def setup_ratio(self) -> float:
        return self.predicted_setup_s / self.measured_setup_s

    def misses(self) -> list[str]:
        """The targets this run misses, a phrase each (none: both met)."""
        checks = (("s per iteration", self.iteration_ratio, ITERATION_RANGE),
                  ("set-up", self.setup_ratio, SETUP_RANGE))
        return [f"{self.case} at {self.size}: {what} predicted / measured {ratio:.3f}, "
                f"outside {low}-{high}" for what, ratio, (low, high) in checks
                if not low <= ratio <= high]


def refit(case: RecordedCase, scale: float = 1.0) -> list[Refit]:
    """Each of ``case``'s runs predicted by the time model fitted to its probes."""
    model = time_model(case.points)
    if model is None:
        raise ValueError(f"{case.name}: the record's probes time fewer than two sizes")
    return [Refit(case.name, run.size, scale * model.iteration_seconds(run.counts),
                  run.iteration_s, scale * model.setup_seconds(run.counts), run.setup_s)
            for run in case.runs]


def write_record(path: Path, cases: list[RecordedCase], measured: dict) -> None:
    """``cases`` with where they were measured (``measured``: commit, load, machine...)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": RECORD_VERSION, "measured": measured,
                                "cases": [case.to_json() for case in cases]}, indent=1) + "\n")


def read_record(path: Path) -> tuple[dict, list[RecordedCase]]:
    """Where the record was measured and its cases; ValueError naming what is wrong."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
        raise ValueError(f"{path}: not a time record of version {RECORD_VERSION}")
    return data["measured"], [RecordedCase.from_json(case) for case in data["cases"]]
