"""How a run ended: the one vocabulary, its readers and their defaults for old files, the rule
the solver marks its rows by, the run status publish records, and what the closing lines,
`scalebench check` and `scalebench compare` say about it (no process started)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from provenance.check import check_results
from provenance.results import read_results
from provenance.schema import RUN_KEY
from provenance.stop_reasons import (
    COMPLETE,
    DIVERGED,
    FAILED,
    ITERATION_COLUMN,
    PRUNED,
    REASON_COLUMN,
    ROW_REASONS,
    STOP_REASONS,
    STOPPED,
    TIME_LIMIT,
    Stop,
    UnknownStopReason,
    checked_reason,
    early_stop_line,
    progress_stop,
    record_stops,
    worst,
)
from scalebench.benchopt_glue.base import mark_stop, run_stop_reason
from scalebench.cli import main
from scalebench.launch.failures import unfinished_stop
from scalebench.results.report.data import load_results
from scalebench.results.report.summary import closing_lines
from scalebench.results.stops import stop_of
from scalebench.results.store import publish, run_status
from tests.support.paths import REPO

OLD_FILE = REPO / "tests" / "fixtures" / "old_parameter_names.parquet"


# --- the vocabulary ----------------------------------------------------------------------

def test_the_vocabulary_names_six_reasons_and_the_four_a_run_keeps_rows_with():
    assert set(STOP_REASONS) == {COMPLETE, TIME_LIMIT, DIVERGED, FAILED, STOPPED, PRUNED}
    assert set(ROW_REASONS) == {COMPLETE, TIME_LIMIT, DIVERGED, PRUNED}
    assert all(STOP_REASONS[reason] for reason in STOP_REASONS)


@pytest.mark.parametrize("value", [None, math.nan, ""])
def test_an_empty_reason_an_old_file_has_reads_as_complete(value):
    assert checked_reason(value) == COMPLETE


def test_a_reason_outside_the_vocabulary_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownStopReason, match="unknown stop reason 'tired'; known: failed"):
        checked_reason("tired")


def test_an_experiment_of_several_runs_takes_the_worst_at_its_earliest_iteration():
    runs = [Stop(COMPLETE, 8, 8), Stop(TIME_LIMIT, 5, 8), Stop(TIME_LIMIT, 3, 8)]
    assert worst(runs) == Stop(TIME_LIMIT, 3, 8)
    assert worst([*runs, Stop(DIVERGED, 6, 8)]).reason == DIVERGED
    assert worst([]) == Stop(COMPLETE)


def test_a_failed_or_stopped_experiment_takes_the_iteration_its_rank_reached():
    assert progress_stop(FAILED, "at iteration 2/4") == Stop(FAILED, 2, 4)
    assert progress_stop(STOPPED, "during set-up (operator norm)") == Stop(STOPPED)
    assert progress_stop(FAILED, "at iteration 2/4").text() == "failed at iteration 2 of 4"


def test_the_launcher_takes_a_failed_or_stopped_experiments_iteration_from_rank_0s_note(
        tmp_path):
    for rank, progress in ((1, "at iteration 3/4"), (0, "at iteration 2/4")):
        (tmp_path / f"rank{rank}.failed").write_text(json.dumps({"rank": rank,
                                                                  "progress": progress}))
    assert unfinished_stop(tmp_path, stopped=False) == Stop(FAILED, 2, 4).to_json()
    assert unfinished_stop(tmp_path / "none", stopped=True) == Stop(STOPPED).to_json()


def test_an_old_run_status_reads_its_experiments_complete_and_its_failures_failed():
    old = {"status": "partial", "experiments": ["a1"], "config": "c.yml",
           "failures": [{"experiment": "b2", "label": "x", "rank": 0, "error": "boom"}]}
    assert record_stops(old) == {"a1": Stop(COMPLETE), "b2": Stop(FAILED)}
    new = {**old, "stops": {"a1": {"reason": TIME_LIMIT, "iteration": 1, "max_iter": 4}}}
    assert record_stops(new) == {"a1": Stop(TIME_LIMIT, 1, 4)}


def test_the_early_stop_line_names_each_cut_experiment_by_reason():
    stops = {"a": Stop(COMPLETE, 4, 4), "b": Stop(TIME_LIMIT, 1, 4), "c": Stop(DIVERGED, 2, 4)}
    line = early_stop_line(stops, {"b": "pnp x ct"})
    assert line == ("stopped early: 1 experiment cut by its time limit: pnp x ct at iteration "
                    "1 of 4 | 1 experiment diverged: c at iteration 2 of 4")
    assert early_stop_line({"a": Stop(COMPLETE)}, {}) == ""
    noted = early_stop_line(stops, {"b": "pnp x ct"}, {"b": "timeout 1 s, 9 s would do"})
    assert noted.startswith("stopped early: 1 experiment cut by its time limit: pnp x ct at "
                            "iteration 1 of 4 (timeout 1 s, 9 s would do) | ")


# --- the solver's rule -------------------------------------------------------------------

@pytest.mark.parametrize(("diverged", "iteration", "reason"), [
    (False, 8, COMPLETE), (False, 3, TIME_LIMIT), (True, 3, DIVERGED), (True, 8, DIVERGED)])
def test_a_run_ends_complete_at_max_iter_diverged_or_at_its_limit(diverged, iteration, reason):
    assert run_stop_reason(diverged, iteration, 8) == reason


def test_every_row_of_a_run_is_marked_with_its_end_and_a_peers_divergence_counts():
    rows = [{"stop_val": 0, "objective_diverged": False},
            {"stop_val": 2, "objective_diverged": False}]
    mark_stop(rows, lambda flag: flag, 4)
    assert [(r[REASON_COLUMN], r[ITERATION_COLUMN]) for r in rows] == [(TIME_LIMIT, 2)] * 2
    mark_stop(rows, lambda flag: True, 4)  # another rank saw a diverged estimate
    assert {r[REASON_COLUMN] for r in rows} == {DIVERGED}
    mark_stop(rows, lambda flag: flag, 4, pruned=True)  # its tuning study stopped it
    assert {r[REASON_COLUMN] for r in rows} == {PRUNED}
    asked = []
    mark_stop([], lambda flag: asked.append(flag) or flag, 4)  # still joins the agreement
    assert asked == [False]


# --- files -------------------------------------------------------------------------------

def test_an_old_results_file_reads_as_complete_at_its_last_iteration():
    rows = read_results(OLD_FILE)
    assert REASON_COLUMN not in rows
    stop = stop_of(rows)
    assert stop.reason == COMPLETE and stop.iteration == int(rows["stop_val"].max())


def _part(path, reason: str | None, iteration: int, max_iter: int = 4):
    count = iteration + 1
    rows = {"solver_name": [f"pnp[{path.stem}]"] * count, "dataset_name": ["ct"] * count,
            "objective_name": ["imaging"] * count, "stop_val": list(range(count)),
            "idx_rep": [0] * count, "p_solver_max_iter": [max_iter] * count,
            "objective_psnr_db": [20.0 + i for i in range(count)]}
    if reason is not None:
        rows[REASON_COLUMN] = [reason] * count
        rows[ITERATION_COLUMN] = [iteration] * count
    pq.write_table(pa.table(rows), path)
    return path


def test_publish_records_each_experiments_end_and_fills_an_old_files_rows(tmp_path):
    final = tmp_path / "run.parquet"
    publish(final, [("old", _part(tmp_path / "old.parquet", None, 4))], "partial", [], "c.yml")
    publish(final, [("cut", _part(tmp_path / "cut.parquet", TIME_LIMIT, 1))], "partial",
            [{"experiment": "lost", "label": "y"}], "c.yml", {"lost": Stop(FAILED, 2, 4)})
    stops = record_stops(run_status(final))
    assert stops == {"old": Stop(COMPLETE, 4, 4), "cut": Stop(TIME_LIMIT, 1, 4),
                     "lost": Stop(FAILED, 2, 4)}
    rows = pd.read_parquet(final)
    assert rows[REASON_COLUMN].notna().all()
    old = rows[rows.experiment_id == "old"]
    assert set(old[REASON_COLUMN]) == {COMPLETE} and set(old[ITERATION_COLUMN]) == {4}
    assert "stopped early: 1 experiment cut by its time limit" in \
        closing_lines(load_results([final]))


def _timed_part(path, iteration: int, max_iter: int = 4, setup_s: float = 2.0,
                per_iteration_s: float = 0.5):
    """A run its time limit cut at ``iteration``: its rows' solver times and set-up."""
    count = iteration + 1
    rows = {"solver_name": ["pnp"] * count, "dataset_name": ["ct"] * count,
            "objective_name": ["imaging"] * count, "stop_val": list(range(count)),
            "idx_rep": [0] * count, "p_solver_max_iter": [max_iter] * count,
            "time": [per_iteration_s * i for i in range(count)],
            "objective_setup_time_s": [setup_s] * count,
            "objective_psnr_db": [20.0 + i for i in range(count)],
            REASON_COLUMN: [TIME_LIMIT] * count, ITERATION_COLUMN: [iteration] * count}
    pq.write_table(pa.table(rows), path)
    return path


def _cut_line(final) -> str:
    lines = closing_lines(load_results([final])).splitlines()
    line, = [line for line in lines if line.startswith("stopped early")]
    return line


def test_a_cut_run_names_the_timeout_that_would_do_from_plans_prediction(tmp_path):
    final = tmp_path / "run.parquet"
    limits = {"cut": {"timeout_s": 1.0, "predicted_s": 9.5, "advised_timeout_s": 12,
                      "computes_norm": True, "warning": "..."}}
    publish(final, [("cut", _timed_part(tmp_path / "cut.parquet", 1))], "complete", [],
            "c.yml", time_limits=limits)
    assert run_status(final)["time_limits"] == limits
    assert _cut_line(final) == (
        "stopped early: 1 experiment cut by its time limit: pnp on ct at iteration 1 of 4 "
        "(timeout 1 s, 12 s would do: plan's prediction 9.5 s with a 20% margin)")
    # a resumed launch publishes more experiments: the limits already recorded are kept
    publish(final, [("next", _timed_part(tmp_path / "next.parquet", 4))], "complete", [],
            "c.yml", time_limits={"next": {"timeout_s": 1.0, "predicted_s": None,
                                           "advised_timeout_s": None}})
    assert set(run_status(final)["time_limits"]) == {"cut", "next"}


def test_the_run_status_records_the_jobs_own_requeues_and_keeps_them(tmp_path):
    """The launcher's requeues of its job (scalebench.launch.requeue) go into the run status;
    a later publish without them keeps them; a file without them has none."""
    final = tmp_path / "run.parquet"
    publish(final, [("a", _part(tmp_path / "a.parquet", None, 4))], "partial", [], "c.yml")
    assert "requeues" not in run_status(final)
    requeues = {"job": "7", "count": 1, "limit": 3, "exclude": ["n2"], "reasons": ["hung"]}
    publish(final, [("b", _part(tmp_path / "b.parquet", None, 4))], "partial", [], "c.yml",
            requeues=requeues)
    publish(final, [("c", _part(tmp_path / "c.parquet", None, 4))], "complete", [], "c.yml")
    assert run_status(final)["requeues"] == requeues


def test_without_a_prediction_the_measured_iterations_are_extrapolated_to_max_iter(tmp_path):
    final = tmp_path / "run.parquet"
    publish(final, [("cut", _timed_part(tmp_path / "cut.parquet", 2, max_iter=10))],
            "complete", [], "c.yml", time_limits={"cut": {"timeout_s": 3.0,
                                                          "predicted_s": None,
                                                          "advised_timeout_s": None}})
    needed = math.ceil(1.2 * (2.0 + 10 * 0.5))
    assert _cut_line(final).endswith(
        f"at iteration 2 of 10 (timeout 3 s, {needed} s would do: its measured 0.5 s per "
        f"iteration extrapolated to 10 iterations after 2 s of set-up, with a 20% margin, no "
        f"prediction made)")


def test_a_run_cut_before_its_first_iteration_reads_as_cut_and_says_what_it_knows(tmp_path):
    """Its time limit ran out in the set-up (the operator norm): only iteration 0, the
    initial estimate, was evaluated; without a prediction no limit can be named."""
    final = tmp_path / "run.parquet"
    publish(final, [("cut", _timed_part(tmp_path / "cut.parquet", 0, setup_s=86.0))],
            "complete", [], "c.yml")
    assert record_stops(run_status(final)) == {"cut": Stop(TIME_LIMIT, 0, 4)}
    assert _cut_line(final) == (
        "stopped early: 1 experiment cut by its time limit: pnp on ct at iteration 0 of 4 "
        "(no iteration timed: its set-up alone took 86 s, and no prediction was made: "
        "calibrate one with scalebench capacity --time)")


def test_the_reports_quality_table_shows_a_cut_run_as_cut(tmp_path):
    from scalebench.results.report.views import iterations_text

    cut = pd.read_parquet(_timed_part(tmp_path / "cut.parquet", 1))
    assert iterations_text(cut) == "1 of 4, cut by its time limit"
    complete = cut.assign(**{REASON_COLUMN: COMPLETE})
    assert iterations_text(complete) == "1"


def _stop_findings(path) -> list[str]:
    return [f for f in check_results(path)[1] if "stop" in f]


def test_check_requires_the_stop_reason_on_every_row_of_a_file_that_records_it(tmp_path):
    assert _stop_findings(OLD_FILE) == []  # written before stop reasons: fine
    final = tmp_path / "run.parquet"
    publish(final, [("cut", _part(tmp_path / "cut.parquet", TIME_LIMIT, 2))], "partial", [],
            "c.yml")
    assert _stop_findings(final) == []
    table = pq.read_table(final)
    reasons = table.column(REASON_COLUMN).to_pylist()
    for name, values in (("lost", [None] + reasons[1:]), ("bad", ["tired"] + reasons[1:])):
        edited = table.set_column(table.column_names.index(REASON_COLUMN), REASON_COLUMN,
                                  pa.array(values, pa.string()))
        pq.write_table(edited, tmp_path / f"{name}.parquet")
    assert _stop_findings(tmp_path / "lost.parquet") == ["no stop reason or stop iteration on "
                                                         "row 0"]
    assert "must hold one of complete, time limit" in _stop_findings(tmp_path / "bad.parquet")[0]
    dropped = table.drop_columns([REASON_COLUMN])
    pq.write_table(dropped, tmp_path / "dropped.parquet")  # its run status still records stops
    assert _stop_findings(tmp_path / "dropped.parquet") == \
        [f"column '{REASON_COLUMN}' is missing"]


def _compared_file(path, reason: str, iteration: int, failed: bool = False) -> str:
    rows = []
    for rep in range(3):
        for step in range(iteration + 1):
            rows.append({"solver_name": "pnp[denoiser=tv]", "dataset_name": "tomography_2d",
                         "objective_name": "imaging", "stop_val": step, "idx_rep": rep,
                         "time": step * 1.5, "objective_psnr_db": 20.0 + step,
                         "objective_grad_time_s": 1.0, "p_solver_max_iter": 4,
                         "prov_config_hash": "c0ffee", "prov_world_size": 1,
                         REASON_COLUMN: reason, ITERATION_COLUMN: iteration})
    table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    record = {"status": "partial", "experiments": ["e1"], "config": "c.yml",
              "failures": [{"experiment": "e2", "label": "pnp x walnut"}] if failed else [],
              "stops": {"e1": {"reason": reason, "iteration": iteration, "max_iter": 4},
                        **({"e2": {"reason": FAILED, "iteration": 2, "max_iter": 4}}
                           if failed else {})}}
    pq.write_table(table.replace_schema_metadata({RUN_KEY: json.dumps(record).encode()}), path)
    return str(path)


def test_compare_shows_each_sides_end_and_names_a_sides_failed_experiments(tmp_path, capsys):
    base = _compared_file(tmp_path / "base.parquet", COMPLETE, 4)
    cut = _compared_file(tmp_path / "cut.parquet", TIME_LIMIT, 2, failed=True)
    main(["compare", base, cut, "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    experiment, = found["experiments"]
    assert experiment["stops"] == {
        "base": {"reason": COMPLETE, "iteration": 4, "max_iter": 4},
        "candidate": {"reason": TIME_LIMIT, "iteration": 2, "max_iter": 4}}
    assert found["unfinished"] == {"base": [],
                                   "candidate": ["pnp x walnut: failed at iteration 2 of 4"]}
    main(["compare", base, cut])
    text = capsys.readouterr().out
    assert "stopped early: base complete at iteration 4 of 4; candidate time limit at " \
           "iteration 2 of 4" in text
    assert "not run to its end in candidate: pnp x walnut: failed at iteration 2 of 4" in text
