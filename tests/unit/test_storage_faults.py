"""A write refused by a full, over-quota or read-only file system (scalebench.errors,
scalebench.launch.storage, the ranks' exit status, provenance.files): recognised however it is
raised, told in one line with its own exit status, naming what could not be written, what the
published file holds and the command that goes on."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest

from provenance.files import atomic_path
from scalebench.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_STORAGE_FULL,
    CommandFailed,
    StorageFull,
    exit_status,
    is_storage_error,
    reported,
    writing,
)
from scalebench.launch.storage import (
    go_on_command,
    rank_storage_fault,
    stopped_launch,
    stopped_message,
)

PYARROW_ENOSPC = ("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on "
                  "device")
FINAL = Path("/scratch/out/t.parquet")
ARGV = ["run", "configs/x.yml", "--nproc", "2", "--output", "t", "--outputs", "/scratch/out"]


@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_full_over_quota_and_read_only_are_storage_errors(number):
    assert is_storage_error(OSError(number, "refused", "/x"))


def test_pyarrows_write_error_is_a_storage_error_by_its_text():
    assert is_storage_error(OSError(PYARROW_ENOSPC))


@pytest.mark.parametrize("error", [PermissionError(errno.EACCES, "denied"),
                                   FileNotFoundError(errno.ENOENT, "missing"),
                                   ValueError("[errno 28]")])
def test_other_errors_are_not_storage_errors(error):
    assert not is_storage_error(error)


def test_a_storage_fault_has_its_own_exit_status():
    assert exit_status(StorageFull("x")) == EXIT_STORAGE_FULL
    assert EXIT_STORAGE_FULL not in (EXIT_FAILED, EXIT_BAD_INPUT)
    assert exit_status(CommandFailed("x")) == EXIT_FAILED


def test_a_refused_write_is_reported_in_one_line_with_the_storage_exit_status(capsys):
    def full() -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/scratch/out/t.parquet")

    assert reported(full) == EXIT_STORAGE_FULL
    assert capsys.readouterr().err == (
        "scalebench: error: cannot write /scratch/out/t.parquet: No space left on device\n")


def test_any_other_os_error_still_propagates():
    def denied() -> int:
        raise PermissionError(errno.EACCES, "Permission denied", "/x")

    with pytest.raises(PermissionError):
        reported(denied)


def test_writing_names_what_could_not_be_written():
    with pytest.raises(StorageFull, match=r"^cannot write the report /r.html: Disk quota "
                                          r"exceeded$"):
        with writing("the report /r.html"):
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
    with pytest.raises(StorageFull, match="^cannot write the results file /f: No space left on "
                                          "device$"):
        with writing("the results file /f"):
            raise OSError(PYARROW_ENOSPC)
    with pytest.raises(KeyError), writing("anything"):
        raise KeyError("not a write")


def test_an_atomic_write_refused_names_its_file_keeps_the_old_one_and_no_temporary(tmp_path):
    path = tmp_path / "entry.json"
    path.write_text("old")
    with pytest.raises(OSError, match="No space left on device") as raised:
        with atomic_path(path) as temporary:
            temporary.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")  # as a write() raises it
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(path)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def note(folder: Path, rank: int, tail: list[str]) -> None:
    (folder / f"rank{rank}.failed").write_text(json.dumps({
        "rank": rank, "host": "node1", "exit_status": 1, "signalled": False, "failed_at": 1.0,
        "progress": "", "log_tail": tail}))


def test_a_rank_note_with_a_refused_write_is_the_fault_naming_rank_error_and_log(tmp_path):
    note(tmp_path, 1, ["OSError: [Errno 28] No space left on device: '/cache/norms/a.json'"])
    fault = rank_storage_fault(tmp_path, "2/4", "e2", [1, 1], True, FINAL)
    assert str(fault) == ("rank 1 of experiment 2/4 (e2) could not write ([Errno 28] No space "
                          "left on device: '/cache/norms/a.json'; log: "
                          "/scratch/out/t/logs/e2.rank1.log)")


def test_a_rank_that_could_not_write_its_own_files_is_told_by_its_exit_status(tmp_path):
    fault = rank_storage_fault(tmp_path, "2/4", "e2", [0, EXIT_STORAGE_FULL], True, FINAL)
    assert str(fault).startswith("rank 1 of experiment 2/4 (e2) could not write its log or its "
                                 "rows in /scratch/out ")
    srun = rank_storage_fault(tmp_path, "2/4", "e2", [EXIT_STORAGE_FULL], False, FINAL)
    assert str(srun).startswith("a rank of experiment 2/4 (e2) could not write")


def test_an_experiment_that_failed_otherwise_is_no_storage_fault(tmp_path):
    note(tmp_path, 0, ["ValueError: image_size must be > 0"])
    assert rank_storage_fault(tmp_path, "1/1", "e1", [1], True, FINAL) is None
    assert rank_storage_fault(tmp_path / "none", "1/1", "e1", [0, -9], True, FINAL) is None


def test_the_line_says_what_the_partial_file_holds_and_the_command_that_resumes():
    record = {"status": "partial", "experiments": ["e1"], "rows": 16}
    line = stopped_message(StorageFull("cannot write /scratch/out/t.parquet: No space left on "
                                       "device"), FINAL, record, 4, ARGV)
    command = f"{sys.executable} -m scalebench run configs/x.yml --nproc 2 --output t " \
              f"--outputs /scratch/out --resume"
    assert line == ("cannot write /scratch/out/t.parquet: No space left on device; "
                    "/scratch/out/t.parquet holds 1 of 4 experiment(s), 16 rows, partial; "
                    f"free space, then resume with: {command}")
    assert "\n" not in line


def test_without_a_published_file_the_line_says_so_and_runs_again_under_a_free_name(tmp_path):
    final = tmp_path / "t.parquet"
    (tmp_path / "t").mkdir()  # the logs of the launch that published nothing
    (tmp_path / "t_2.parquet").write_bytes(b"another launch's")
    line = stopped_message(StorageFull("x"), final, None, 4, ARGV)
    assert f"no experiment finished, {final} was not written" in line
    assert line.endswith(f"run again with: {sys.executable} -m scalebench run configs/x.yml "
                         f"--nproc 2 --output t_3 --outputs {tmp_path}")


def test_a_complete_file_whose_report_could_not_be_written_says_how_to_write_it():
    record = {"status": "complete", "experiments": ["e1", "e2"], "rows": 6}
    line = stopped_message(StorageFull("cannot write the report /r"), FINAL, record, 2, ARGV)
    assert line.endswith("2 of 2 experiment(s), 6 rows, complete; free space, then write its "
                         "report with: scalebench report /scratch/out/t.parquet")


def test_the_command_that_goes_on_pins_the_result_and_keeps_the_other_options(monkeypatch):
    monkeypatch.setattr(sys, "argv", [".venv/bin/scalebench", *ARGV])
    argv = ["run", "my config.yml", "--output=old", "--resume", "--outputs=/o", "--no-html"]
    assert go_on_command(argv, FINAL, resume=True) == (
        ".venv/bin/scalebench run 'my config.yml' --no-html --output t --outputs /scratch/out "
        "--resume")


def test_a_launch_error_that_is_an_os_error_becomes_the_one_line(tmp_path):
    final = tmp_path / "t.parquet"
    final.write_bytes(b"published")
    fault = stopped_launch(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "l")),
                           final, 3, ARGV, lambda: {"status": "partial", "experiments": ["a"],
                                                    "rows": 3})
    assert str(fault).startswith(f"cannot write {tmp_path / 'l'}: No space left on device; "
                                 f"{final} holds 1 of 3 experiment(s), 3 rows, partial;")


def test_the_status_step_refuses_a_parquet_that_scalebench_run_did_not_write(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scalebench.launch.children import main

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), other)
    assert main(["status", str(other)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (f"scalebench: error: {other} is not a results file of "
                                       f"scalebench run (no run status in its metadata)\n")
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(other.read_bytes()[:40])
    assert main(["status", str(truncated)]) == EXIT_BAD_INPUT
    assert "not a readable parquet file" in capsys.readouterr().err


def test_the_status_step_counts_the_rows_of_a_results_file(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from scalebench.launch.children import main
    from scalebench.results.store import RUN_KEY

    record = {"status": "partial", "experiments": ["e1"], "failures": [], "config": "c"}
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}).replace_schema_metadata(
        {RUN_KEY: json.dumps(record).encode()}), path)
    assert main(["status", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {**record, "rows": 3}
