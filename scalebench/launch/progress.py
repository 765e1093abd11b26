"""Progress of a rank: what its benchopt process reports, and how ``rank_entry`` shows it.

The benchopt process reports the set-up stages as they start and the iterations as they end,
as marker lines on its standard output, only when ``rank_entry`` asks for them (the variable
``SCALEBENCH_PROGRESS``); under a plain ``benchopt run`` these calls do nothing. ``rank_entry``
turns the reports into a status of the form ``experiment k/N: iteration i/max_iter, ...,
ETA ...``: one line updated in place where its output is a terminal (rank 0), and plain
lines in every rank's log and wherever the output is not a terminal (a pipe, a SLURM job
log), at each stage, at the first and last iteration, every tenth of the run and at least
once a minute. Nothing it writes holds terminal colour codes. Standard library only.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

ENABLE_VARIABLE = "SCALEBENCH_PROGRESS"
MARKER = "[scalebench:progress] "
PREFIX = "[scalebench] "
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
REPORT_INTERVAL_S = 0.2  # iteration reports at most this often (the last one always)
PLAIN_FRACTION = 0.1  # plain lines: every tenth of max_iter ...
PLAIN_INTERVAL_S = 60.0  # ... or this long after the previous one


def enabled() -> bool:
    """Whether this process reports its progress (it runs under ``rank_entry``)."""
    return os.environ.get(ENABLE_VARIABLE) == "1"


_reports_made = 0  # by this process: its heartbeat carries the count (launch.liveness)


def _report(event: dict) -> None:
    global _reports_made
    stream = sys.__stdout__
    stream.write(MARKER + json.dumps(event) + "\n")
    stream.flush()
    _reports_made += 1


def reports_made() -> int:
    """How many progress reports this process made: a count that moves while it
    progresses."""
    return _reports_made


def stage(name: str) -> None:
    """A set-up stage starts (``building the operator``, ``operator norm``...)."""
    if enabled():
        _report({"stage": name})


class IterationReports:
    """A run's iteration reports, spaced out in time: at most one each ``interval_s`` (the
    first and the last always), the newest one left out held until ``flush``. One per run,
    made where its loop runs (scalebench.benchopt_glue.base)."""

    def __init__(self, max_iter: int, interval_s: float = REPORT_INTERVAL_S) -> None:
        self.max_iter, self.interval_s = max_iter, interval_s
        self.enabled = enabled()
        self.last_sent = -math.inf
        self.held: dict | None = None

    def iteration(self, done: int) -> None:
        """``done`` of ``max_iter`` iterations are finished."""
        if not self.enabled:
            return
        now = time.monotonic()
        self.held = {"iteration": done, "max_iter": self.max_iter}
        if done in (0, self.max_iter) or now - self.last_sent >= self.interval_s:
            self.last_sent = now
            self.flush()

    def flush(self) -> None:
        """Send the held report: where a run that stops now really was."""
        if self.held is not None:
            _report(self.held)
            self.held = None


def parse(line: str) -> dict | None:
    """The report a marker line carries, else None."""
    if not line.startswith(MARKER):
        return None
    try:
        event = json.loads(line[len(MARKER):])
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def plain(text: str) -> str:
    """``text`` without terminal escape codes and trailing blanks."""
    return ANSI_ESCAPE.sub("", text).rstrip()


def clock_text(seconds: float) -> str:
    """Elapsed or remaining seconds as the ticking line shows them: ``42s``, ``3m05s``,
    ``2h07m`` (a fixed width per range; an estimate's magnitude is
    time_model.duration_text)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Status:
    """Where one rank's experiment stands, from its reports."""

    position: str  # "k/N": the experiment's place in the launch
    started: float = field(default_factory=time.monotonic)
    stage: str | None = None  # the running set-up stage; None once iterating
    stage_started: float = 0.0
    done: int | None = None  # iterations finished
    max_iter: int = 0
    base: tuple[float, int] = (0.0, 0)  # (time, iterations) the rate is measured from

    def update(self, event: dict, now: float) -> None:
        if "stage" in event:
            self.stage, self.stage_started, self.done = str(event["stage"]), now, None
            return
        done, max_iter = int(event["iteration"]), int(event["max_iter"])
        if self.done is None or done < self.done:  # a (new) run starts
            self.base = (now, done)
        self.stage, self.done, self.max_iter = None, done, max_iter

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the rate measured since the run started (None: no rate yet)."""
        start, first = self.base
        if self.done is None or self.done <= first:
            return None
        return (now - start) / (self.done - first) * (self.max_iter - self.done)

    def where(self) -> str:
        """``at iteration i/max_iter``, ``during set-up (stage)`` or ``before set-up``."""
        if self.done is not None:
            return f"at iteration {self.done}/{self.max_iter}"
        return f"during set-up ({self.stage})" if self.stage else "before set-up"

    def text(self, now: float, ticking: bool = False) -> str:
        """The status line; ``ticking`` adds the running stage's elapsed time."""
        head = f"experiment {self.position}: "
        if self.done is None:
            if self.stage is None:  # Python is importing torch and benchopt
                return head + f"starting benchopt ({clock_text(now - self.started)})"
            clock = f" ({clock_text(now - self.stage_started)})" if ticking else ""
            return head + f"set-up: {self.stage}{clock}"
        eta = self.eta_s(now)
        left = "ETA --" if eta is None else f"ETA {clock_text(eta)}"
        if self.done == self.max_iter:  # benchopt evaluates, writes the results and exits
            left = "finishing"
        return head + f"iteration {self.done}/{self.max_iter}, " \
                      f"{clock_text(now - self.started)} elapsed, {left}"


class Reporter:
    """Shows a rank's status: plain lines in its log and, for rank 0, on ``terminal``
    (one line updated in place when it is a terminal, plain lines otherwise)."""

    def __init__(self, position: str, rank: int, log: TextIO,
                 terminal: TextIO | None) -> None:
        self.status = Status(position)
        self.label = f"rank {rank} " if rank else ""
        self.log, self.terminal = log, terminal
        self.live = terminal is not None and terminal.isatty() and \
            os.environ.get("TERM") != "dumb"
        self.shown = 0  # length of the line now on the terminal
        self.last_plain: tuple[float, int | None] = (-PLAIN_INTERVAL_S, None)

    def report(self, event: dict, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.status.update(event, now)
        if self._plain_due(now):
            self._plain(PREFIX + self.label + self.status.text(now))
        self.draw(now)

    def notice(self, line: str) -> None:
        """A line the user should see on the terminal too (a warning, a scalebench note)."""
        if self.terminal is None:
            return
        self._clear()
        self.terminal.write(line + "\n")
        self.terminal.flush()
        self.draw()

    def draw(self, now: float | None = None) -> None:
        """Redraw the updating line (a clock tick: the elapsed times move on)."""
        if not self.live:
            return
        now = time.monotonic() if now is None else now
        width = _terminal_width(self.terminal)
        line = self.status.text(now, ticking=True)[:width]
        self.terminal.write("\r" + line.ljust(self.shown))
        self.terminal.flush()
        self.shown = len(line)

    def finish(self, succeeded: bool) -> None:
        """End of the experiment: a last plain line; the terminal line kept on success,
        cleared on failure (the launcher names the failure)."""
        now = time.monotonic()
        outcome = f"done in {clock_text(now - self.status.started)}" if succeeded else \
            f"stopped {self.status.where()}"
        line = PREFIX + self.label + f"experiment {self.status.position}: {outcome}"
        self.log.write(line + "\n")
        if self.terminal is None:
            return
        if self.live:
            self._clear()
            if succeeded:
                self.terminal.write(line.removeprefix(PREFIX) + "\n")
        elif succeeded:
            self.terminal.write(line + "\n")
        self.terminal.flush()

    def _plain_due(self, now: float) -> bool:
        """Stages always; iterations at the first, the last, every tenth, once a minute."""
        status, (then, previous) = self.status, self.last_plain
        due = status.done is None or previous is None or status.done in (0, status.max_iter) \
            or status.done < previous or now - then >= PLAIN_INTERVAL_S \
            or status.done - previous >= max(1.0, PLAIN_FRACTION * status.max_iter)
        if due:
            self.last_plain = (now, status.done)
        return due

    def _plain(self, line: str) -> None:
        self.log.write(line + "\n")
        if self.terminal is not None and not self.live:
            self.terminal.write(line + "\n")
            self.terminal.flush()

    def _clear(self) -> None:
        if self.live and self.shown:
            self.terminal.write("\r" + " " * self.shown + "\r")
            self.shown = 0


def _terminal_width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return max(20, columns - 1) if columns else 99  # a new pseudo-terminal has no size yet
