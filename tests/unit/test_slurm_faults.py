"""The launcher's rules for SLURM's faults: an srun step whose rank failed is ended when it
does not end by itself (a lost node), and a restarted job is recognised by its restart count."""

from __future__ import annotations

import json
import signal

import pytest

from scalebench.launch import processes
from scalebench.launch.processes import RankGroup
from scalebench.launch.resume import slurm_restart


class Step:
    """An srun step (one process): it ends only when killed, or after ``ends_after`` polls."""

    pid = 4242

    def __init__(self, ends_after: int | None = None) -> None:
        self.returncode: int | None = None
        self.polls, self.ends_after = 0, ends_after

    def poll(self) -> int | None:
        self.polls += 1
        if self.ends_after is not None and self.polls >= self.ends_after:
            self.returncode = 0 if self.returncode is None else self.returncode
        return self.returncode


class Signals:
    """The signals a group sends to its step; SIGKILL ends the step, SIGTERM does not (srun
    waiting on a node that never answers)."""

    def __init__(self) -> None:
        self.step = Step()
        self.sent: list[int] = []

    def killpg(self, _pid: int, signum: int) -> None:
        self.sent.append(signum)
        if signum == signal.SIGKILL:
            self.step.returncode = -signal.SIGKILL


@pytest.fixture
def signals(monkeypatch) -> Signals:
    recorded = Signals()
    monkeypatch.setattr(processes.os, "killpg", recorded.killpg)
    monkeypatch.setattr(processes, "POLL_S", 0.01)
    return recorded


def test_a_rank_failure_note_ends_a_step_that_does_not_end_by_itself(tmp_path, signals):
    (tmp_path / "rank0.failed").write_text(json.dumps({"rank": 0}))
    group = RankGroup([signals.step], grace_s=0.05, notes=tmp_path)
    assert group.wait() == [-signal.SIGKILL]
    # SIGCONT after SIGTERM: a stopped process holds its pending SIGTERM until it runs
    assert signals.sent == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL] and group.forced


def test_a_step_without_failure_notes_is_left_to_end(tmp_path, signals):
    group = RankGroup([Step(ends_after=20)], grace_s=0.01, notes=tmp_path)
    assert group.wait() == [0]
    assert signals.sent == [] and not group.forced


@pytest.mark.parametrize(("value", "restart"), [(None, 0), ("", 0), ("0", 0), ("1", 1),
                                                ("3", 3), ("x", 0)])
def test_the_restart_count_is_slurms_or_zero(monkeypatch, value, restart):
    if value is None:
        monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    else:
        monkeypatch.setenv("SLURM_RESTART_COUNT", value)
    assert slurm_restart() == restart
