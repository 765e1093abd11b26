"""Durations and scalebench's own config keys through the command line: `scalebench plan` and
`run` take every duration form, a scalebench key runs through benchopt unseen, and a bad
value is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import copy_benchmark, run_cli, tiny_experiment, write_experiment

# A config of one short experiment (a denoiser of 2 iterations on 32x32 tomography).
ONE_RUN = {"solver": [{"denoiser": {"max_iter": 2, "device": "cpu"}}]}


@pytest.mark.parametrize(("form", "seconds"), [
    ("90min", 5400), ("2h30m", 9000), ("1d", 86400), ("01:30:00", 5400),
    ("1-12:00:00", 129600), (300, 300)])
def test_plan_takes_every_duration_form(tmp_path, form, seconds):
    """A local job's time limit is the timeout x n-repetitions (one here)."""
    config = write_experiment(tmp_path, tiny_experiment(timeout=form, **ONE_RUN))
    result = run_cli("plan", config, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert [job["time_limit_s"] for job in json.loads(result.stdout)["jobs"]] == [seconds]


def test_run_takes_a_compound_timeout_and_a_scalebench_key(tmp_path):
    """benchopt runs the experiment of a config holding `restart-limit` (which expand kept
    from it) with the timeout handed as seconds."""
    benchmark = copy_benchmark(tmp_path)
    config = write_experiment(tmp_path, tiny_experiment(timeout="2h30m", **ONE_RUN,
                                                        **{"restart-limit": 2}))
    result = run_cli("run", config, "--benchmark", benchmark, "--outputs", tmp_path / "out",
                     "--output", "ran", "--no-html")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "out" / "ran.parquet").is_file()


@pytest.mark.parametrize(("keys", "message"), [
    ({"timeout": ""}, "run option 'timeout': '' is not a positive duration (give a number "
                      "with a unit s, min, h or d (90min, 2h30m, 1d), MM:SS, HH:MM:SS or "
                      "D-HH:MM:SS; a bare number counts seconds)"),
    ({"timeout": "-5m"}, "run option 'timeout': '-5m' is not a positive duration"),
    ({"timeout": 0}, "run option 'timeout': 0 is not a positive duration"),
    ({"timeout": "3 fortnights"}, "run option 'timeout': '3 fortnights' is not a positive "
                                  "duration"),
    ({"restart-limit": -1}, "config: parameter 'restart-limit' must be an integer >= 0, "
                            "got -1"),
])
def test_a_bad_duration_or_key_is_one_line_and_nothing_is_written(tmp_path, keys, message):
    config = write_experiment(tmp_path, tiny_experiment(**keys, **ONE_RUN))
    for command in (["plan", config], ["run", config, "--outputs", tmp_path / "out"]):
        result = run_cli(*command)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"scalebench: error: {message}"), lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("limit", ["-1", "two"])
def test_a_bad_restart_limit_option_is_one_line_and_nothing_is_written(tmp_path, limit):
    config = write_experiment(tmp_path, tiny_experiment(**ONE_RUN))
    result = run_cli("run", config, "--outputs", tmp_path / "out", "--restart-limit", limit)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"scalebench: error: --restart-limit: {limit!r} is not a restart limit (give a whole "
        f"number of at least 0: how many times a launch may requeue itself)"]
    assert not (tmp_path / "out").exists()
