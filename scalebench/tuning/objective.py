"""What a tuning maximises, read from a trial's result rows: the mean over its images of the
best quality each reached within ``max_iter`` (the problem's headline metric: PSNR, SNR for
radio), or with ``time-to:DB`` the mean solver time to reach DB dB (maximised as its
negative). A trial one of whose images never reaches the target, or diverged, has no value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scalebench.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

QUALITY = "quality"
TIME_TO = "time-to"
_TIME_TO = re.compile(r"^time-to:(-?\d+(?:\.\d+)?)(?:db)?$", re.IGNORECASE)
DEFAULT_TRIALS = 20  # ended trials per study with neither --trials nor --budget
OBJECTIVE_FORMS = "'quality' (the best headline quality within max_iter) or 'time-to:DB' " \
                  "(the solver time to reach DB dB, e.g. time-to:29.5)"


@dataclass(frozen=True)
class Objective:
    """``kind``: QUALITY or TIME_TO; ``target``: the dB a TIME_TO objective must reach."""

    kind: str = QUALITY
    target: float | None = None

    @property
    def label(self) -> str:
        return "best quality" if self.kind == QUALITY else f"time to {self.target:g} dB"


def parse_objective(text: str) -> Objective:
    """``--objective``'s value; a one-line ConfigError naming the accepted forms."""
    if text.strip().lower() == QUALITY:
        return Objective()
    match = _TIME_TO.match(text.strip())
    if not match:
        raise ConfigError(f"--objective: {text!r} is not an objective (give {OBJECTIVE_FORMS})")
    return Objective(TIME_TO, float(match.group(1)))


def image_value(rows: pd.DataFrame, metric: str, objective: Objective) -> float | None:
    """One image's value from its rows (one experiment, one repetition): the best ``metric``
    (a diverged row's NaN counts as nothing reached), or minus the time of the first row at
    or above the target; None where the target is never reached or nothing was measured."""
    import pandas as pd

    values = pd.to_numeric(rows[metric], errors="coerce")
    if objective.kind == QUALITY:
        best = values.max()
        return None if pd.isna(best) else float(best)
    reached = rows.loc[values >= objective.target].sort_values("stop_val")
    return None if reached.empty else -float(reached["time"].iloc[0])


def trial_value(rows: pd.DataFrame, metric: str, objective: Objective,
                images: list[str]) -> float | None:
    """The mean over ``images`` (one experiment each, ``experiment_id``, first repetition) of
    ``image_value``; None where an image has no rows or no value."""
    values = []
    for experiment in images:
        mine = rows[(rows["experiment_id"] == experiment) & (rows["idx_rep"] == 0)]
        value = image_value(mine, metric, objective) if len(mine) else None
        if value is None or not math.isfinite(value):
            return None
        values.append(value)
    return sum(values) / len(values) if values else None
