"""One duration reader (scalebench.durations): its forms, its refusals, and the same seconds at
every place that reads a duration: the config checks, plan, capacity's --time, the SLURM
requests and what expand hands benchopt (read back by benchopt's own `run`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scalebench.durations import duration_seconds, seconds_text, slurm_time_seconds
from scalebench.errors import ConfigError
from scalebench.experiment.config import load_config
from scalebench.experiment.expand import expand
from scalebench.experiment.reading import read_yaml
from tests.support.plans import config_file, parallel_file, plan_of

# The forms a user writes, with their seconds (issue 50's measure).
FORMS = {"90min": 5400, "2h30m": 9000, "1d": 86400, "01:30:00": 5400, "1-12:00:00": 129600}


@pytest.mark.parametrize(("value", "seconds"), [
    *FORMS.items(), ("90m", 5400), ("90 MIN", 5400), ("1h 30m", 5400), ("1.5h", 5400),
    ("2 hours", 7200), ("1hr", 3600), ("45sec", 45), ("10 seconds", 10), ("3 days", 259200),
    ("1d12h", 129600), ("1:30:00", 5400), ("10:00", 600), ("1-12", 129600),
    ("1-12:30", 131400), ("3600", 3600), (" 2.5 ", 2.5), (3600, 3600), (0.5, 0.5)])
def test_every_form_reads_as_its_seconds(value, seconds):
    assert duration_seconds(value, "timeout") == seconds


@pytest.mark.parametrize(("value", "seconds"), [
    (90, 5400), ("90", 5400), ("01:30:00", 5400), ("1:30:00", 5400), ("10:00", 600),
    ("1-12", 129600), ("1-12:30", 131400), ("1-12:00:00", 129600)])
def test_a_slurm_time_reads_as_sbatch_reads_it_a_bare_number_minutes(value, seconds):
    assert slurm_time_seconds(value, "slurm_time") == seconds


@pytest.mark.parametrize("value", ["90min", "2h", "1d", "1.5", 1.5, "0", 0, "-5", "", True])
def test_a_slurm_time_refuses_units_sbatch_would_refuse(value):
    with pytest.raises(ConfigError) as error:
        slurm_time_seconds(value, "slurm_time")
    assert str(error.value) == (
        f"slurm_time: {value!r} is not a SLURM time limit (give whole minutes, MM:SS, "
        f"HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS: SLURM reads no units, and a bare number "
        f"as minutes)")


@pytest.mark.parametrize("value", ["", "  ", "-5m", "-5", -5, "0", 0, "0:00", "3 fortnights",
                                   "30m2h", "1h1h", "h", "2x", "1:2:3:4", "nan", float("nan"),
                                   float("inf"), True, None, [60]])
def test_an_empty_negative_zero_or_unknown_duration_is_a_one_line_error(value):
    with pytest.raises(ConfigError) as error:
        duration_seconds(value, "run option 'timeout'")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"run option 'timeout': {value!r} is not a positive duration")
    assert "90min, 2h30m, 1d" in message and "D-HH:MM:SS" in message


@pytest.mark.parametrize("text", ["timeout: 01:30:00", "timeout: 1:30:00", "timeout: 90:00"])
def test_yaml_clock_times_mean_their_seconds(tmp_path, text):
    """YAML 1.1 reads an unquoted 1:30:00 as the base-60 integer 5400 (and 01:30:00 as
    text): either way the timeout is 5400 s."""
    path = tmp_path / "c.yml"
    path.write_text(text + "\n")
    assert duration_seconds(read_yaml(path, "config")["timeout"], "timeout") == 5400


@pytest.mark.parametrize("seconds", [5400, 0.25, 129600.5, 1e-3])
def test_seconds_text_reads_back_as_the_same_seconds(seconds):
    assert duration_seconds(seconds_text(seconds), "timeout") == seconds


def benchopt_timeout(config: Path, monkeypatch) -> float:
    """The timeout benchopt's own `benchopt run --config` reads from ``config`` (its command
    run in this process up to where it hands the timeout to its runner, which is captured)."""
    import benchopt.cli.main as benchopt_main
    import benchopt.runner

    class Benchmark:  # what `run` asks of a benchmark before it starts the runner
        min_version = None

        def __init__(self, *args, **kwargs):
            pass

        def get_benchmark_objective(self):
            class Objective:
                def is_installed(self, raise_on_not_installed=False):
                    return True
            return Objective()

        def check_dataset_patterns(self, names):
            return []

        check_objective_filters = check_solver_patterns = check_dataset_patterns

    seen = {}

    def runner(*args, timeout=None, **kwargs):
        seen["timeout"] = timeout
        return 0, None

    monkeypatch.setattr(benchopt_main, "Benchmark", Benchmark)
    monkeypatch.setattr(benchopt.runner, "_run_benchmark", runner)
    benchopt_main.run.main([str(config.parent), "--config", str(config)],
                           standalone_mode=False)
    return seen["timeout"]


@pytest.mark.parametrize(("form", "seconds"), [*FORMS.items(), (300, 300)])
def test_every_reader_gets_the_same_seconds(tmp_path, monkeypatch, form, seconds):
    """Config checks, plan (a local job's limit is timeout x repetitions), the SLURM request
    reader, plan's SLURM limit, and the experiment config benchopt reads."""
    config = config_file(tmp_path, timeout=form, **{"n-repetitions": 2})
    assert load_config(config).option("timeout") == seconds
    assert plan_of(config).jobs[0].time_limit_s == 2 * seconds
    if ":" in str(form):  # the forms SLURM reads too (no units; bare: minutes)
        assert slurm_time_seconds(form, "slurm_time") == seconds
        slurm = plan_of(config, parallel_file(tmp_path, slurm_time=form))
        assert slurm.jobs[0].time_limit_s == seconds
    experiment = expand(config, 1, tmp_path / "experiments")[0]
    written = yaml.safe_load(Path(experiment["config"]).read_text())
    assert written["timeout"] == f"{seconds}s"
    assert benchopt_timeout(Path(experiment["config"]), monkeypatch) == seconds


@pytest.mark.parametrize(("form", "seconds"), FORMS.items())
def test_capacity_reads_its_time_budget_as_the_same_seconds(tmp_path, monkeypatch, form,
                                                            seconds):
    from scalebench import cli
    from scalebench.planning.capacity import command

    seen = {}

    def capacity(*args):
        seen["time_budget_s"] = args[-1]
        return []

    monkeypatch.setattr(command, "capacity", capacity)
    assert cli.main(["capacity", str(config_file(tmp_path)), "--time", form]) == 0
    assert seen["time_budget_s"] == seconds


@pytest.mark.parametrize(("line", "seconds"), [
    ("slurm_time: 90", 5400), ("slurm_time: '2:00:00'", 7200), ("slurm_time: 02:00:00", 7200),
    ("slurm_time: 2:00:00", 7200 * 60)])
def test_a_parallel_config_time_plans_as_slurm_gets_it(tmp_path, line, seconds):
    """benchopt hands an integer to sbatch as minutes: an unquoted 2:00:00, which YAML reads
    as 7200, asks SLURM for 7200 minutes, and the plan says so."""
    parallel = tmp_path / "parallel.yml"
    parallel.write_text(f"backend: submitit\n{line}\n")
    assert plan_of(config_file(tmp_path), parallel).jobs[0].time_limit_s == seconds
