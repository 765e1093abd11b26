"""The one resume rule of ``--resume`` and of a requeued SLURM job (scalebench.launch.resume):
another config's file refused, a complete file with nothing left to run, a partial file's
finished experiments kept; the run status reader is passed in, so no process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalebench.errors import CommandFailed, ScalebenchError
from scalebench.launch.resume import Resumed, finished_before, resumable

CONFIG = Path("/configs/tomo.yml")


def status(state: str, experiments: list[str], config: str = str(CONFIG)):
    record = {"status": state, "experiments": experiments, "failures": [], "config": config}
    return lambda path: record


@pytest.fixture
def result(tmp_path) -> Path:
    path = tmp_path / "job.parquet"
    path.write_bytes(b"rows")  # the reader is passed in: only its presence matters
    return path


@pytest.fixture(params=[(True, 0), (False, 1), (True, 2)], ids=["resume", "restart",
                                                                  "resume-restart"])
def launch(request, monkeypatch):
    """A launch with --resume, a requeued one, and a requeued one with --resume."""
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    return request.param


def test_a_partial_file_resumes_its_finished_experiments(result, launch, capsys):
    resumed = finished_before(result, CONFIG, status("partial", ["a", "b"]), *launch)
    assert resumed == Resumed(frozenset({"a", "b"}), complete=False)
    assert f"resuming {result} (2 experiment(s) finished before)" in capsys.readouterr().out


def test_a_complete_file_has_nothing_left_to_run(result, launch, capsys):
    resumed = finished_before(result, CONFIG, status("complete", ["a", "b", "c"]), *launch)
    assert resumed.complete and resumed.experiments == {"a", "b", "c"}
    assert f"nothing to resume: {result} is complete (3 experiment(s))" \
        in capsys.readouterr().out


@pytest.mark.parametrize("state", ["partial", "complete"])
def test_another_configs_file_is_refused_naming_both(result, launch, state):
    with pytest.raises(ScalebenchError) as refused:
        finished_before(result, CONFIG, status(state, ["a"], "/configs/other.yml"), *launch)
    line = str(refused.value)
    assert "\n" not in line and "/configs/other.yml" in line and str(CONFIG) in line
    assert "another --output" in line


def test_the_same_config_named_another_way_is_the_same(result, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yml").write_text("")
    resumed = finished_before(result, Path("c.yml"),
                              status("partial", ["a"], str(tmp_path / "c.yml")), True, 0)
    assert resumed.experiments == {"a"}


def test_a_file_without_its_config_resumes_under_any(result):
    assert resumable(result, CONFIG, {"status": "partial", "experiments": ["a"]},
                     "--resume").experiments == {"a"}


def test_an_unknown_status_is_refused(result, launch):
    with pytest.raises(ScalebenchError, match="run status 'running', not 'partial' or"):
        finished_before(result, CONFIG, status("running", []), *launch)


def test_an_unreadable_file_is_one_line_and_left_as_it_is(result, launch):
    def corrupt(path: Path) -> dict:
        raise ScalebenchError(f"{path}: not a readable parquet file (magic bytes)")

    with pytest.raises(ScalebenchError) as refused:
        finished_before(result, CONFIG, corrupt, *launch)
    line = str(refused.value)
    assert "\n" not in line and f"{result}: not a readable parquet file" in line
    assert line.endswith("the file is left as it is")
    assert result.read_bytes() == b"rows"


def test_a_broken_reader_keeps_its_own_error(result):
    def broken(path: Path) -> dict:
        raise CommandFailed("step 'status' failed (1)")

    with pytest.raises(CommandFailed, match=r"^step 'status' failed \(1\)$"):
        finished_before(result, CONFIG, broken, True, 0)


def test_resume_of_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ScalebenchError, match="--resume: no result .* to resume"):
        finished_before(tmp_path / "job.parquet", CONFIG, status("partial", []), True, 0)


def test_a_restart_before_any_publish_runs_everything(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    resumed = finished_before(tmp_path / "job.parquet", CONFIG, status("partial", ["x"]),
                              False, 1)
    assert resumed == Resumed(frozenset())
    assert "restart 1 of job 9: no experiment was published before" in capsys.readouterr().out


@pytest.mark.parametrize("taken", ["job.parquet", "job"])
def test_a_fresh_launch_refuses_an_existing_result(tmp_path, taken):
    (tmp_path / taken).mkdir() if taken == "job" else (tmp_path / taken).write_bytes(b"")
    with pytest.raises(ScalebenchError, match="already exists; choose another --output"):
        finished_before(tmp_path / "job.parquet", CONFIG, status("partial", []), False, 0)


def test_a_fresh_launch_of_a_new_name_reads_nothing(tmp_path):
    def unread(path: Path) -> dict:
        raise AssertionError("a fresh launch reads no status")

    assert finished_before(tmp_path / "job.parquet", CONFIG, unread, False, 0) == Resumed(
        frozenset())
