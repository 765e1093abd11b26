"""Durations: the one reader of a time given as text or a number, for a config's ``timeout``,
``scalebench capacity --time`` and SLURM's ``slurm_time`` alike. Standard library only (the
launcher reads durations too).

Accepted (case-insensitive): a number with a unit, s/sec/second(s), m/min/minute(s),
h/hr/hour(s) or d/day(s), alone or compounded from the largest unit down (``90min``, ``2h30m``,
``1d12h``); ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and ``D-HH:MM:SS``; a bare number
(YAML's, or numeric text) counts seconds. YAML 1.1 reads an unquoted ``1:30:00`` as the
integer 5400 (base 60): that is its number of seconds, so a timeout read that way means what
it says.

SLURM's ``slurm_time`` is the exception: SLURM itself reads it (benchopt hands it to sbatch
through submitit unchanged), so it keeps SLURM's forms, the clock ones above and a bare
number of minutes, and a unit (``2h``), which sbatch refuses, is refused here too.
"""

from __future__ import annotations

import math
import re

from scalebench.errors import ConfigError

# Seconds per unit, each spelling; the order of UNIT_ORDER is the order of a compound.
_UNITS = {**dict.fromkeys(("d", "day", "days"), 86400),
          **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
          **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
          **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1)}
_NUMBER = r"\d+(?:\.\d+)?|\.\d+"
_BARE = re.compile(rf"^(?:{_NUMBER})$")
_PART = re.compile(rf"({_NUMBER})\s*([a-z]+)\s*")
_CLOCK = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+))?(?::(\d+))?|(\d+):(\d+)(?::(\d+))?)$")
# A time limit must leave this much over the time it is predicted or measured to need
# (run-to-run spread on shared cores is 5-20 %, docs/performance.md): plan's warning, run's
# and the closing line's advice after a run its limit cut.
TIME_MARGIN = 1.2
# The time limit's signal: the SLURM templates ask for SIGTERM this long before a job's time
# limit (``#SBATCH --signal=B:TERM@30``, held to this value by a test), and SLURM may send it
# up to LIMIT_SIGNAL_EARLY_S sooner (its event resolution). The launcher's own stop before the
# limit counts to the earliest moment the signal may come, so the signal stays a last resort;
# 30 s covers stopping the experiment in flight and the requeue (publishing is done after
# each experiment).
LIMIT_SIGNAL_LEAD_S = 30
LIMIT_SIGNAL_EARLY_S = 60


def before_limit_signal_s(left_s: float) -> float:
    """Of the ``left_s`` seconds a job has before its time limit, those before its limit's
    signal may come: what an experiment started now may use."""
    return left_s - LIMIT_SIGNAL_LEAD_S - LIMIT_SIGNAL_EARLY_S


DURATION_FORMS = ("a number with a unit s, min, h or d (90min, 2h30m, 1d), MM:SS, HH:MM:SS "
                  "or D-HH:MM:SS")


def duration_seconds(value: str | int | float, where: str) -> float:
    """``value`` as a positive number of seconds (a bare number: seconds); a one-line
    ConfigError naming ``where`` and the accepted forms when it is empty, not positive or
    in an unknown unit."""
    seconds = _seconds(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{where}: {value!r} is not a positive duration (give "
                          f"{DURATION_FORMS}; a bare number counts seconds)")
    return seconds


def slurm_time_seconds(value: str | int, where: str) -> float:
    """A SLURM time limit as positive seconds, read as sbatch reads ``--time``: whole minutes,
    MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (no units)."""
    text = str(value).strip()
    clock = _CLOCK.match(text)
    seconds = None if isinstance(value, bool | float) else \
        int(text) * 60 if text.isdigit() else _clock_seconds(clock.groups()) if clock else None
    if not seconds or seconds <= 0:
        raise ConfigError(f"{where}: {value!r} is not a SLURM time limit (give whole minutes, "
                          f"MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS: SLURM reads no "
                          f"units, and a bare number as minutes)")
    return seconds


def seconds_text(seconds: float) -> str:
    """``seconds`` as text every reader takes as exactly those seconds: this module, and
    pandas' ``to_timedelta`` through which benchopt reads a timeout that is not a bare
    number (benchopt truncates a bare one to whole seconds)."""
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds!r}s"


def _seconds(value: str | int | float) -> float | None:
    """The seconds ``value`` gives, None when it has none of the accepted forms."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if _BARE.match(text):
        return float(text)
    clock = _CLOCK.match(text)
    if clock:
        return _clock_seconds(clock.groups())
    return _compound_seconds(text)


def _clock_seconds(groups: tuple[str | None, ...]) -> float:
    """D-HH[:MM[:SS]] or MM:SS / HH:MM:SS in seconds."""
    days, hours, minutes, seconds, first, second, third = (int(g) if g else None
                                                           for g in groups)
    if days is not None:
        return ((days * 24 + hours) * 60 + (minutes or 0)) * 60 + (seconds or 0)
    if third is not None:  # HH:MM:SS
        return (first * 60 + second) * 60 + third
    return first * 60 + second  # MM:SS


def _compound_seconds(text: str) -> float | None:
    """``2h30m``, ``90 min``: each unit once, the largest first; None otherwise."""
    total, position, last = 0.0, 0, math.inf
    for part in _PART.finditer(text):
        if part.start() != position or part.group(2) not in _UNITS:
            return None
        scale = _UNITS[part.group(2)]
        if scale >= last:
            return None
        total, position, last = total + float(part.group(1)) * scale, part.end(), scale
    return total if position == len(text) and position > 0 else None
