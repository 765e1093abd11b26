"""Whether the ranks of an experiment are alive: each rank's heartbeat and progress, and the one
rule that calls a rank hung.

A rank's benchopt process runs a daemon thread (``start_heartbeat``) that rewrites
``<folder>/rank<r>.alive`` every ``heartbeat_interval_s`` with a beat counter and the number
of progress reports the process made (``progress.reports_made``); a stopped process (SIGSTOP)
or a frozen node stops it. The launcher (``Watch``, polled by ``processes.RankGroup.wait``)
follows the ranks whose start note (``rank<r>.started``, written by ``rank_entry``) is there
until they report their end (``mark_ended``), and times each change of their files by its own
clock (the nodes' clocks may differ). A rank is hung (``judge``) when its heartbeat is silent
longer than ``silence_s`` or, where the experiment's phases are predicted, when its progress
stalls longer than ``stall_bound_s``.
The collective timeout of an experiment with a prediction follows the stall bound
(``rank_variables``); without one it stays the process group's default.
Standard library only, as the whole launcher.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scalebench.durations import duration_seconds
from scalebench.launch import progress

HEARTBEAT_VARIABLE = "SCALEBENCH_HEARTBEAT"  # the file a rank's benchopt process beats into
SILENCE_VARIABLE = "SCALEBENCH_HEARTBEAT_TIMEOUT_S"  # lowers the silence bound (tests)
COLLECTIVE_TIMEOUT_VARIABLE = "SCALEBENCH_COLLECTIVE_TIMEOUT_S"
# A minute's silence is no pause a live process makes (a full garbage collection, a swap-in,
# a slow shared file system's write take seconds), and it bounds what a hung rank costs.
SILENCE_S = 60.0
# Beats within the silence bound (5 s at 60 s): a few late writes on a loaded file system
# are not silence.
BEATS_PER_SILENCE = 12
# A heartbeat this many beats late defers a stall verdict to the silence rule: a stopped
# rank's peers, waiting for it in a collective, stall too, and only the silent one is hung.
LATE_BEATS = 3
# Progress stalls beyond max(STALL_MINIMUM_S, STALL_FACTOR x the longest predicted phase):
# predictions miss by tens of percent on shared machines, never by five times, and a phase
# shorter than a minute gets the silence bound's minute.
STALL_FACTOR = 5.0
STALL_MINIMUM_S = SILENCE_S
# The collective timeout exceeds the stall bound by this much, so that the launcher's verdict
# (naming the hung rank) comes before a waiting peer's timeout (naming only itself).
COLLECTIVE_MARGIN_S = 30.0
READ_INTERVAL_S = 1.0  # the launcher reads the ranks' files at most this often


def silence_bound_s(env: Mapping[str, str] = os.environ) -> float:
    """The heartbeat silence that makes a rank hung: SILENCE_S, or SILENCE_VARIABLE's
    duration (durations.duration_seconds: a bare number counts seconds); a one-line error
    for a value that is not a positive duration."""
    value = env.get(SILENCE_VARIABLE, "")
    return duration_seconds(value, SILENCE_VARIABLE) if value else SILENCE_S


def heartbeat_interval_s(env: Mapping[str, str] = os.environ) -> float:
    """How often a rank beats: BEATS_PER_SILENCE times within the silence bound."""
    return silence_bound_s(env) / BEATS_PER_SILENCE


def longest_phase_s(experiment: Mapping) -> float | None:
    """The longest predicted phase of an expanded experiment (its ``predicted`` numbers, from
    the expand child: the process start, the set-up, the operator norm, an iteration with
    its evaluation); None for an experiment without a prediction."""
    predicted = experiment.get("predicted")
    return None if not predicted else float(predicted["longest_phase_s"])


def stall_bound_s(longest_s: float | None) -> float | None:
    """The progress stall that makes a rank hung; None (no stall rule) without a
    prediction."""
    return None if longest_s is None else max(STALL_MINIMUM_S, STALL_FACTOR * longest_s)


@dataclass(frozen=True)
class Bounds:
    """What makes a rank of one experiment hung."""

    silence_s: float
    stall_s: float | None  # None: no prediction, the silence rule only

    @classmethod
    def of(cls, experiment: Mapping, env: Mapping[str, str] = os.environ) -> Bounds:
        return cls(silence_bound_s(env), stall_bound_s(longest_phase_s(experiment)))


def rank_variables(bounds: Bounds, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables the ranks of an experiment get: its collective timeout after the stall
    bound, where there is one and the user set none."""
    if bounds.stall_s is None or env.get(COLLECTIVE_TIMEOUT_VARIABLE):
        return {}
    return {COLLECTIVE_TIMEOUT_VARIABLE: f"{bounds.stall_s + COLLECTIVE_MARGIN_S:.0f}"}


def start_heartbeat(env: Mapping[str, str] = os.environ,
                    stop: threading.Event | None = None) -> threading.Thread | None:
    """In a rank's benchopt process: beat into the file HEARTBEAT_VARIABLE names (none when
    unset: a plain ``benchopt run``) from a daemon thread, until ``stop`` is set or the
    process ends."""
    path = env.get(HEARTBEAT_VARIABLE)
    if not path:
        return None
    thread = threading.Thread(target=_beat, name="scalebench-heartbeat", daemon=True,
                              args=(Path(path), heartbeat_interval_s(env),
                                    stop or threading.Event()))
    thread.start()
    return thread


def heartbeat_path(folder: Path, rank: int) -> Path:
    """Where rank ``rank`` of the experiment in ``folder`` beats."""
    return folder / f"rank{rank}.alive"


def mark_ended(path: Path) -> None:
    """A rank reported its end (``rank_entry``, once its benchopt process ended): said in its
    heartbeat file too, which a shared file system shows at once where a listing of the
    folder may still hold the removed start note."""
    try:
        path.write_text(json.dumps({"ended": True}))
    except OSError:
        pass  # a full disk: the removed start note says it alone


def _beat(path: Path, interval_s: float, stop: threading.Event) -> None:
    beat = 0
    while True:
        try:  # rewritten in place: a shared file system shows a renamed file late
            path.write_text(json.dumps({"beat": beat, "progress": progress.reports_made()}))
        except OSError:
            pass  # a full disk: the rank's own writes fail and name it
        beat += 1
        if stop.wait(interval_s):
            return


@dataclass
class RankLife:
    """What the launcher saw of one rank: when (its clock) its heartbeat file last changed
    and when its progress count last moved."""

    rank: int
    host: str
    beat_at: float
    progress_at: float
    content: bytes = b""
    progress: int | None = None

    def saw(self, content: bytes, now: float) -> bool:
        """Note the heartbeat file's ``content`` read at ``now``; whether the rank ended."""
        if content == self.content:
            return False
        self.content, self.beat_at = content, now
        try:
            beat = json.loads(content)
            count = beat.get("progress")
        except (ValueError, AttributeError):
            return False  # read while being rewritten: alive, its progress unknown
        if count != self.progress:
            self.progress, self.progress_at = count, now
        return bool(beat.get("ended"))


@dataclass(frozen=True)
class Hung:
    """A rank found hung, and why."""

    rank: int
    host: str
    why: str

    def text(self) -> str:
        return f"rank {self.rank} on {self.host} is hung: {self.why}"


def judge(ranks: Iterable[RankLife], bounds: Bounds, now: float) -> Hung | None:
    """The hung rank among ``ranks``, if any: the one silent the longest beyond the silence
    bound; else, where there is a stall bound and every heartbeat is on time, the one whose
    progress stalled the longest beyond it."""
    ranks = list(ranks)
    silent = [r for r in ranks if now - r.beat_at > bounds.silence_s]
    if silent:
        life = min(silent, key=lambda r: (r.beat_at, r.rank))
        return Hung(life.rank, life.host, f"no heartbeat for {now - life.beat_at:.0f} s "
                                          f"(stopped, or its node frozen)")
    late = LATE_BEATS * bounds.silence_s / BEATS_PER_SILENCE
    if bounds.stall_s is None or any(now - r.beat_at > late for r in ranks):
        return None
    stalled = [r for r in ranks if now - r.progress_at > bounds.stall_s]
    if not stalled:
        return None
    life = min(stalled, key=lambda r: (r.progress_at, r.rank))
    return Hung(life.rank, life.host, f"no progress for {now - life.progress_at:.0f} s "
                                      f"(bound {bounds.stall_s:.0f} s: {STALL_FACTOR:g} x its "
                                      f"longest predicted phase)")


class Watch:
    """The launcher's view of the ranks of one experiment in ``folder``."""

    def __init__(self, folder: Path, bounds: Bounds) -> None:
        self.folder, self.bounds = folder, bounds
        self.ranks: dict[int, RankLife] = {}
        self.ended: set[int] = set()
        self.next_read = 0.0

    def verdict(self, now: float) -> Hung | None:
        """The hung rank, reading the ranks' files at most every READ_INTERVAL_S."""
        if now < self.next_read:
            return None
        self.next_read = now + READ_INTERVAL_S
        self._read(now)
        return judge(self.ranks.values(), self.bounds, now)

    def _read(self, now: float) -> None:
        running = set()
        for path in self.folder.glob("rank*.started"):
            rank = int(path.name.removeprefix("rank").removesuffix(".started"))
            running.add(rank)
            if rank not in self.ranks and rank not in self.ended:
                try:
                    host = str(json.loads(path.read_text())["host"])
                except (OSError, ValueError, KeyError):
                    continue  # ended meanwhile, or read while written: next time
                self.ranks[rank] = RankLife(rank, host, now, now)
        for rank in set(self.ranks) - running:  # ended: it reported its end
            del self.ranks[rank]
        for rank, life in list(self.ranks.items()):
            try:
                content = heartbeat_path(self.folder, rank).read_bytes()
            except OSError:
                continue  # not beating yet: silent since its start note was seen
            if life.saw(content, now):
                self.ended.add(rank)
                del self.ranks[rank]
