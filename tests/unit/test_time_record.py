"""The time model against real runs (scalebench.planning.capacity.time_record): the committed
record (tests/fixtures/time_record.json, written by ``python -m tools.time_check --record``)
refitted with the model as the code fits it now predicts each measured run within the
targets, and the check fails when the predictions are doubled."""

from __future__ import annotations

import json

import pytest

from scalebench.planning.capacity.time_record import (
    RecordedCase,
    read_record,
    refit,
    write_record,
)
from tests.support.paths import REPO

RECORD = REPO / "tests" / "fixtures" / "time_record.json"


@pytest.fixture(scope="module")
def record() -> tuple[dict, list[RecordedCase]]:
    return read_record(RECORD)


def test_the_record_holds_ct_and_super_resolution_runs_past_their_probes(record):
    """Each case's answer lies past its largest probe: the model extrapolates there."""
    measured, cases = record
    assert {case.name for case in cases} >= {"ct_astra", "superres"}
    for case in cases:
        largest_probe = max(point.unknowns for point in case.points)
        assert max(run.counts.unknowns for run in case.runs) > largest_probe
    assert measured["commit"] and measured["load_start"] and measured["machine"]


def test_every_recorded_run_is_predicted_within_the_targets(record):
    _, cases = record
    misses = [miss for case in cases for fit in refit(case) for miss in fit.misses()]
    assert misses == []


def test_doubled_predictions_miss_every_run(record):
    _, cases = record
    fits = [fit for case in cases for fit in refit(case, scale=2.0)]
    assert fits and all(fit.misses() for fit in fits)


def test_a_record_reads_back_as_written(record, tmp_path):
    measured, cases = record
    write_record(tmp_path / "record.json", cases, measured)
    assert read_record(tmp_path / "record.json") == (measured, cases)


def test_a_file_that_is_not_a_record_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"version": 0, "cases": []}))
    with pytest.raises(ValueError, match="not a time record of version 1"):
        read_record(path)
