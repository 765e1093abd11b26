"""The tuning's parts in one process: the objective read from rows, the studies a config asks
for, the ranges of a tune: section, the trial configs, and the shared study's bookkeeping
(stale trials of a dead worker failed, ended trials counted) over a real optuna journal."""

from __future__ import annotations

import math
import os
import socket
import time

import pandas as pd
import pytest

from scalebench.errors import ConfigError
from scalebench.loops.algorithms.spaces import space_for
from scalebench.tuning.objective import TIME_TO, Objective, parse_objective, trial_value
from scalebench.tuning.search import Search, searches, tuned_ranges, validation_images
from scalebench.tuning.study import (
    STALE_AFTER_S,
    WORKER_ATTRIBUTE,
    Heartbeat,
    StudyFiles,
    ended_trials,
    fail_stale_trials,
    open_study,
    worker_name,
)
from scalebench.tuning.trials import trial_config, trial_environment


def rows(curves: dict[str, list[float]], times: list[float] | None = None) -> pd.DataFrame:
    """Result rows: one experiment per curve, one row per evaluated iteration."""
    frames = []
    for experiment, curve in curves.items():
        frames.append(pd.DataFrame({
            "experiment_id": experiment, "idx_rep": 0, "stop_val": range(len(curve)),
            "time": times or [0.5 * k for k in range(len(curve))],
            "objective_psnr_db": curve}))
    return pd.concat(frames, ignore_index=True)


def test_the_quality_objective_is_the_mean_over_images_of_each_best():
    frame = rows({"a": [10.0, 20.0, 19.0], "b": [12.0, 13.0, 14.0]})
    assert trial_value(frame, "objective_psnr_db", Objective(), ["a", "b"]) == 17.0


def test_time_to_a_target_is_the_mean_time_of_the_first_row_reaching_it_negated():
    frame = rows({"a": [10.0, 20.0, 21.0], "b": [10.0, 15.0, 20.5]})
    value = trial_value(frame, "objective_psnr_db", Objective(TIME_TO, 20.0), ["a", "b"])
    assert value == pytest.approx(-(0.5 + 1.0) / 2)


def test_an_image_that_diverged_or_never_reaches_the_target_gives_no_value():
    diverged = rows({"a": [10.0, math.nan], "b": [math.nan, math.nan]})
    assert trial_value(diverged, "objective_psnr_db", Objective(), ["a", "b"]) is None
    short = rows({"a": [10.0, 12.0]})
    assert trial_value(short, "objective_psnr_db", Objective(TIME_TO, 30.0), ["a"]) is None


def test_a_missing_image_gives_no_value():
    frame = rows({"a": [10.0, 20.0]})
    assert trial_value(frame, "objective_psnr_db", Objective(), ["a", "b"]) is None


@pytest.mark.parametrize("text, expected", [
    ("quality", Objective()), ("time-to:29.5", Objective(TIME_TO, 29.5)),
    ("TIME-TO:30dB", Objective(TIME_TO, 30.0))])
def test_objectives_parse(text, expected):
    assert parse_objective(text) == expected


@pytest.mark.parametrize("text", ["", "psnr", "time-to:", "time-to:fast"])
def test_an_unknown_objective_is_one_line_naming_the_forms(text):
    with pytest.raises(ConfigError, match="time-to:DB") as error:
        parse_objective(text)
    assert "\n" not in str(error.value)


def test_a_tune_section_narrows_the_space_and_checks_each_range():
    space = space_for("pgd", "tv")
    assert tuned_ranges(space, None) == space.ranges
    (sigma,) = tuned_ranges(space, {"denoiser_sigma": [0.0005, 0.01]})
    assert (sigma.name, sigma.low, sigma.high, sigma.scale) == \
        ("denoiser_sigma", 0.0005, 0.01, "log")
    for bad, match in (({"nonsense": None}, "not tuned"),
                       ({"denoiser_sigma": [0.01, 0.001]}, "empty"),
                       ({"denoiser_sigma": [-1.0, 0.1]}, "bounds|log"),
                       ({"denoiser_sigma": "wide"}, r"\[low, high\]")):
        with pytest.raises(ConfigError, match=match):
            tuned_ranges(space, bad)


def test_a_test_image_is_refused_for_tuning():
    assert validation_images("tomography_2d", None) == \
        ("phantom-101", "phantom-102")
    with pytest.raises(ConfigError, match="not a validation image"):
        validation_images("tomography_2d", ["shepp_logan"])
    with pytest.raises(ConfigError, match="unknown image"):
        validation_images("tomography_2d", ["lena"])


def experiment(image: str | None, **solver) -> dict:
    dataset = {"image_size": 32} | ({"image": image} if image else {})
    return {"dataset": {"tomography_2d": dataset},
            "solver": {"pnp": {"algorithm": "pgd", "denoiser": "tv", **solver}}}


def test_experiments_differing_by_image_and_tuned_parameters_are_one_study():
    found = searches([experiment("phantom-101", denoiser_sigma=0.01),
                      experiment("phantom-102", denoiser_sigma=0.02),
                      experiment("phantom-101", algorithm="drs"),
                      {"dataset": {"tomography_2d": {}}, "solver": {"fbp": {}}}],
                     {"denoiser_sigma": None})
    assert [(s.solver, s.images) for s in found] == [
        (("pnp", {"algorithm": "pgd", "denoiser": "tv"}), ("phantom-101", "phantom-102")),
        (("pnp", {"algorithm": "drs", "denoiser": "tv"}), ("phantom-101",))]
    assert found[0].key != found[1].key
    assert found[0].key == searches([experiment("phantom-101"), experiment("phantom-102")],
                                    {"denoiser_sigma": None})[0].key


def test_a_trial_config_runs_the_setting_on_every_image_once():
    search = Search(("tomography_2d", {"image_size": 32}),
                    ("pnp", {"algorithm": "pgd", "max_iter": 5}),
                    space_for("pgd", "tv").ranges, ("phantom-101", "phantom-102"))
    config = trial_config(search, {"denoiser_sigma": 0.003}, {"timeout": "100s",
                                                              "n-repetitions": 3})
    assert config == {
        "timeout": "100s", "n-repetitions": 1,
        "dataset": [{"tomography_2d": {"image_size": 32,
                                       "image": ["phantom-101", "phantom-102"]}}],
        "solver": [{"pnp": {"algorithm": "pgd", "max_iter": 5, "denoiser_sigma": 0.003}}]}


def dead_pid() -> int:
    """A process id no process has: above the kernel's largest."""
    with open("/proc/sys/kernel/pid_max") as limit:
        return int(limit.read()) + 1


def test_a_dead_workers_running_trial_is_failed_and_ended_trials_are_counted(tmp_path):
    from optuna.trial import TrialState

    files = StudyFiles(tmp_path, "study")
    study = open_study(files, seed=0, worker=0)
    done = study.ask()
    study.tell(done.number, 1.0)
    pruned = study.ask()
    study.tell(pruned.number, state=TrialState.PRUNED)
    live, dead, fresh = study.ask(), study.ask(), study.ask()
    heartbeat = Heartbeat(files)
    try:
        live.set_user_attr(WORKER_ATTRIBUTE, heartbeat.name)
        dead.set_user_attr(WORKER_ATTRIBUTE, "elsewhere-1")  # no heartbeat file: dead
        assert fail_stale_trials(study, files) == 1
        states = {t.number: t.state for t in study.get_trials()}
        assert states[dead.number] == TrialState.FAIL
        assert states[live.number] == states[fresh.number] == TrialState.RUNNING
        assert ended_trials(study) == 2  # complete and pruned; failed ones do not count
        old = time.time() - STALE_AFTER_S - 1
        os.utime(heartbeat.path, (old, old))  # a stopped worker: its heartbeat ages
        assert fail_stale_trials(study, files, now=time.time()) == 1
        assert fail_stale_trials(study, files, now=time.time() + STALE_AFTER_S + 1) == 1
        gone = study.ask()  # a worker of this host whose process has ended
        gone.set_user_attr(WORKER_ATTRIBUTE, worker_name(dead_pid()))
        (files.heartbeats / worker_name(dead_pid())).write_text("{}")
        assert fail_stale_trials(study, files) == 1
        # the same pid in another PID namespace (another container on this node): its
        # heartbeat decides, not a process of this namespace
        other = study.ask()
        name = f"{socket.gethostname()}-1-{dead_pid()}"
        other.set_user_attr(WORKER_ATTRIBUTE, name)
        (files.heartbeats / name).write_text("{}")
        assert fail_stale_trials(study, files) == 0
        assert heartbeat.name == worker_name(os.getpid())
    finally:
        heartbeat.close()
    assert not heartbeat.path.exists()


def test_workers_of_one_study_share_it_through_the_journal(tmp_path):
    files = StudyFiles(tmp_path, "shared")
    first, second = open_study(files, 0, 0), open_study(files, 0, 1)
    trial = first.ask()
    first.tell(trial.number, 2.0)
    assert ended_trials(second) == 1
    assert second.best_value == 2.0


def test_the_report_says_where_a_tuned_setting_came_from():
    from scalebench.results.report.summary import tuned_lines

    record = {"pgd-1": {"method": "tomography_2d x pnp[algorithm=pgd,denoiser=tv]",
                        "setting": {"denoiser_sigma": 0.00123456}, "trial": 7, "trials": 12,
                        "validation": ["phantom-101", "phantom-102"], "value": 25.0,
                        "results": "t.parquet"}}
    (line,) = tuned_lines([{"path": "a.parquet", "tuned": record}, {"path": "b.parquet"}])
    assert line == ("tomography_2d x pnp[algorithm=pgd,denoiser=tv] runs "
                    "denoiser_sigma=0.00123, the setting scalebench tune chose on validation "
                    "images phantom-101, phantom-102 (study pgd-1, trial 7 of 12), not on the "
                    "images scored here")


def test_a_trial_launched_from_a_slurm_task_sees_no_task_variables(monkeypatch):
    """A worker that is task 1 of 2 runs one-rank trials: their rank would otherwise read
    SLURM_PROCID / SLURM_NTASKS as its rank among two."""
    from scalebench.launch.rank_env import export_rank_environment

    for name, value in {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
                        "SLURM_JOB_ID": "7"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RANK", raising=False)
    with trial_environment({"trial": 3}):
        inside = dict(os.environ)
        export_rank_environment(inside)
        assert "RANK" not in inside and inside["SLURM_JOB_ID"] == "7"
        assert '"trial": 3' in os.environ["SCALEBENCH_TRIAL"]
    assert os.environ["SLURM_PROCID"] == "1" and "SCALEBENCH_TRIAL" not in os.environ


def test_a_tuning_folder_resumes_its_own_config_and_refuses_another(tmp_path, capsys):
    """The result files' rule (launch.resume.same_config): the same config, even under
    another name, resumes; another config is refused and the folder left as it is."""
    from scalebench.errors import ScalebenchError
    from scalebench.tuning.command import RECORD, TuneRequest, claim_folder

    config, other = tmp_path / "ct.yml", tmp_path / "other.yml"
    config.write_text("{}")
    other.write_text("{}")
    folder = tmp_path / "tunings" / "ct"
    request = TuneRequest(config, 4, None, 1, Objective(), folder)
    claim_folder(request)
    record = (folder / RECORD).read_text()
    claim_folder(TuneRequest(tmp_path / "tunings" / ".." / "ct.yml", 4, None, 1, Objective(),
                             folder))
    assert capsys.readouterr().out == f"[scalebench] tune: resuming {folder}\n"
    with pytest.raises(ScalebenchError, match=f"tuning {folder} holds config "
                                              f"{config.resolve()}, not {other}"):
        claim_folder(TuneRequest(other, 4, None, 1, Objective(), folder))
    assert (folder / RECORD).read_text() == record


def test_the_pruner_waits_half_the_first_images_iterations():
    from scalebench.rank.trial_report import PRUNER_WARMUP_STEPS, warmup_steps

    assert warmup_steps(40) == 20 and warmup_steps(21) == 11
    assert warmup_steps(6) == warmup_steps(None) == PRUNER_WARMUP_STEPS


def judged_study(values: list[float]):
    """An in-memory study with one complete trial per value, reported at steps 0-20."""
    import optuna

    from scalebench.rank.trial_report import study_pruner

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=study_pruner(20))
    for value in values:
        trial = study.ask()
        for step in range(21):
            trial.report(value, step)
        study.tell(trial, value)
    return study


def test_the_pruner_stops_the_bottom_quarter_only_and_not_during_its_warmup():
    study = judged_study([30.0, 31.0, 32.0, 33.0])  # their 25th percentile: 30.75

    def stopped(value: float, step: int) -> bool:
        trial = study.ask()
        trial.report(value, step)
        return trial.should_prune()

    assert stopped(30.5, 12)
    assert not stopped(31.0, 12)  # below the median: the median rule would stop it
    assert not stopped(0.0, 9)  # within the warm-up (10 of 20 iterations)


def test_the_sampler_models_a_pruned_trial_as_the_worst_complete_one():
    import optuna

    from scalebench.tuning.sampler import modelled_trials

    study = judged_study([30.0, 31.0])
    sigma = optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)
    pruned = study.ask({"denoiser_sigma": sigma})
    study.tell(pruned, state=optuna.trial.TrialState.PRUNED)
    complete = judged_study([])  # no complete trial: nothing to model a pruned one by
    assert modelled_trials(complete, {"denoiser_sigma": sigma}) == []
    modelled = modelled_trials(study, {"denoiser_sigma": sigma})
    assert [t.value for t in modelled] == [30.0, 31.0, 30.0]
    assert modelled[-1].params == pruned.params
