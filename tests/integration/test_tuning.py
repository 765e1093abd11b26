"""``scalebench tune`` as a user runs it, on a seconds-long CT problem: trials run through the
launcher into results files, a hopeless trial is stopped inside its loop (pruned) with its rows
kept, the tuned config runs the test images and refuses a validation one, a tuning killed half
way resumes without redoing an ended trial, and bad input is one line, exit 2, nothing
written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.support.cli import run_cli, write_experiment
from tests.support.paths import REPO
from tests.support.tuning import TINY, TRIALS, trials_of


def test_a_tuning_prunes_keeps_every_trials_rows_and_writes_a_tuned_config(ct_tuning,
                                                                         tmp_path):
    out, result = ct_tuning
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"trial {TRIALS} of {TRIALS}" in result.stdout
    trials = trials_of(out / "ct_tune")
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") + states.count("PRUNED") == TRIALS
    assert "FAIL" not in states
    rows = pd.read_parquet(out / "ct_tune.parquet")
    assert sorted(set(rows["tune_trial"])) == [t.number for t in trials]
    for trial in trials:  # each trial's rows say how the search saw it, and how it stopped
        mine = rows[rows["tune_trial"] == trial.number]
        assert set(mine["tune_state"]) == {trial.state.name.lower()}
        expected = "pruned" if trial.state.name == "PRUNED" else "complete"
        assert set(mine["objective_stop_reason"]) == {expected}
        if trial.state.name == "COMPLETE":
            assert mine["objective_psnr_db"].max() == pytest.approx(trial.value)
    pruned = rows[rows["tune_state"] == "pruned"]  # stopped inside the loop, rows kept
    assert not pruned.empty, result.stdout[-2000:]
    assert (pruned.groupby("tune_trial")["stop_val"].max() < 6).all()
    tuned = yaml.safe_load((out / "ct_tune.yml").read_text())
    best = max((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value)
    (solver,) = tuned["solver"]
    assert solver["pnp"]["denoiser_sigma"] == best.params["denoiser_sigma"]
    assert tuned["dataset"][0]["tomography_2d"]["image"] == \
        ["shepp_logan", "phantom-1", "phantom-2", "phantom-3"]
    check = run_cli("check", out / "ct_tune.parquet")
    assert check.returncode == 0, check.stdout + check.stderr
    tuned["dataset"][0]["tomography_2d"]["image"] = ["phantom-101"]
    refused = run_cli("validate", write_experiment(tmp_path, tuned, "on_validation.yml"))
    assert refused.returncode == 2 and "is a validation image" in refused.stderr


def test_a_killed_tuning_resumes_and_redoes_no_ended_trial(tmp_path):
    config = write_experiment(tmp_path, TINY, "ct.yml")
    command = [sys.executable, "-m", "scalebench", "tune", str(config), "--trials", "2",
               "--outputs", str(tmp_path / "out")]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    second = False
    for line in process.stdout:  # kill it while its second trial runs (a second long)
        second = second or "trial 1 of 2" in line
        if second and "set-up: loading the problem" in line:
            break
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    folder = tmp_path / "out" / "ct_tune"
    before = [t for t in trials_of(folder) if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(before) == 1
    again = run_cli("tune", config, "--trials", "2", "--outputs", tmp_path / "out")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming" in again.stdout
    trials = trials_of(folder)
    ended = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(ended) == 2
    assert [t.state.name for t in trials].count("FAIL") == 1  # the killed one, not redone
    assert ended[0].number == before[0].number and ended[0].params == before[0].params


def test_two_local_workers_share_one_study_and_write_the_outputs(tmp_path):
    config = write_experiment(tmp_path, TINY, "ct.yml")
    result = run_cli("tune", config, "--workers", "2", "--trials", "2", "--outputs",
                     tmp_path / "out")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = trials_of(tmp_path / "out" / "ct_tune")
    assert len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]) == 2
    workers = {t.user_attrs["scalebench_worker"] for t in trials}
    assert len(workers) == 2, workers  # both processes ran trials of the one study
    rows = pd.read_parquet(tmp_path / "out" / "ct_tune.parquet")
    assert sorted(set(rows["tune_trial"])) == sorted(t.number for t in trials)
    assert (tmp_path / "out" / "ct_tune.yml").is_file()


@pytest.mark.parametrize("change, args, message", [
    ({"tune": {"step_size_typo": None}}, (), "not tuned"),
    ({"tune": {"denoiser_sigma": [0.1, 0.01]}}, (), "empty"),
    ({"tune": {"relaxation": [0.5, 5.0]}}, (), "leaves its bounds"),
    ({"dataset": [{"tomography_2d": {"image_size": 32, "image": ["shepp_logan"]}}]}, (),
     "not a validation image"),
    ({"dataset": [{"tomography_2d": {"image_size": 32, "image": ["lena"]}}]}, (),
     "unknown image"),
    ({}, ("--trials", "0"), "positive integer"),
    ({}, ("--budget", "soon"), "not a positive duration"),
    ({}, ("--objective", "fast"), "time-to:DB"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, change, args, message):
    config = write_experiment(tmp_path, {**TINY, **change}, "ct.yml")
    result = run_cli("tune", config, "--outputs", tmp_path / "out", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    # one error line (argparse's own refusals print the usage above theirs)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
