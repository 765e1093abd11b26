"""A tuning trial seen from inside its run: rank 0 reports each evaluated quality to the
trial's study (``scalebench tune`` names it in ``TRIAL_VARIABLE``) and asks whether the trial
should stop, so that a setting that cannot catch up is stopped inside its loop, as a time limit
stops a run, with the stop reason ``pruned``.

A trial runs one experiment per validation image, one after the other: image ``i``'s iteration
``k`` is the study's step ``i * (max_iter + 1) + k``, so the pruner compares trials on the
same image at the same iteration; once one image is pruned, the trial's later images stop at
their first evaluation.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

# JSON: {"journal": path, "study": name, "trial": number, "images": [name, ...],
#        "metric": result column}
TRIAL_VARIABLE = "SCALEBENCH_TRIAL"
# The user attribute a pruned trial carries: the step it was pruned at.
PRUNED_ATTRIBUTE = "scalebench_pruned_at"
# Trials the median pruner lets finish before it prunes any, and iterations of a trial's
# first image it lets pass before it judges (at least PRUNER_WARMUP_STEPS, at least
# PRUNER_WARMUP_SHARE of them): a curve's first iterations say little, and curves cross. A
# larger denoiser strength starts slower and ends higher: on super-resolution (TV, 20
# iterations), a trial at sigma 0.021 was below the median at iteration 7 whose setting's
# neighbour on the grid ends best (tools/tuning_check.py, docs/performance.md).
PRUNER_STARTUP_TRIALS = 4
# Below this percentile of the complete trials at the same step, a trial stops: the bottom
# quarter, not the bottom half. A trial's first image may tell its settings apart less than
# the mean over its images does: on super-resolution, five complete trials ended their first
# image within 0.7 dB of each other (30.73-31.45) and their second within 1.4 dB, and the
# median pruned a setting at 31.42 on the first image that the grid ranks best.
PRUNER_PERCENTILE = 75.0  # optuna's: the share of trials kept above the cut, maximising
PRUNER_WARMUP_STEPS = 5
PRUNER_WARMUP_SHARE = 0.5


def warmup_steps(max_iter: int | None) -> int:
    """The iterations of a trial's first image the pruner does not judge."""
    if max_iter is None:
        return PRUNER_WARMUP_STEPS
    return max(PRUNER_WARMUP_STEPS, math.ceil(PRUNER_WARMUP_SHARE * max_iter))


def study_pruner(max_iter: int | None = None) -> Any:
    """The rule that stops a trial: below the median of the complete trials at the same
    step, past the warm-up of a run of ``max_iter`` iterations. The tuner's workers and
    every trial's rank 0 judge by this one."""
    import optuna

    return optuna.pruners.PercentilePruner(PRUNER_PERCENTILE,
                                           n_startup_trials=PRUNER_STARTUP_TRIALS,
                                           n_warmup_steps=warmup_steps(max_iter))


@dataclass
class TrialReport:
    """The trial a run belongs to, and where its values go."""

    journal: str
    study: str
    trial: int
    images: list[str]
    metric: str
    _trial: Any = None
    _pruned_before: bool = False
    best: float = -math.inf

    def step(self, image: str, iteration: int, max_iter: int) -> int:
        return self.images.index(image) * (max_iter + 1) + iteration

    def _optuna_trial(self, max_iter: int) -> Any:
        if self._trial is None:
            import optuna

            storage = journal_storage(self.journal)
            study = optuna.load_study(study_name=self.study, storage=storage,
                                      pruner=study_pruner(max_iter))
            trial_id = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(self.study), self.trial)
            self._trial = optuna.trial.Trial(study, trial_id)
            self._pruned_before = PRUNED_ATTRIBUTE in self._trial.user_attrs
        return self._trial

    def should_stop(self, image: str, iteration: int, max_iter: int, value: float) -> bool:
        """Report the best ``metric`` so far on ``image`` at ``iteration`` and whether the
        pruner stops the trial (also when an earlier image of it was stopped)."""
        trial = self._optuna_trial(max_iter)
        if self._pruned_before:
            return True
        if not math.isnan(value):
            self.best = max(self.best, value)
        step = self.step(image, iteration, max_iter)
        if math.isfinite(self.best):
            trial.report(self.best, step)
        if trial.should_prune():
            trial.set_user_attr(PRUNED_ATTRIBUTE, step)
            return True
        return False


def journal_storage(path: str | os.PathLike) -> Any:
    """optuna's journal storage over one file, appended to under a lock file (on a shared
    file system too): the study every worker of a tuning and every trial's rank 0 share."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(path)))


def trial_report(environ: dict[str, str] | None = None) -> TrialReport | None:
    """The trial this run belongs to (None outside a tuning)."""
    text = (os.environ if environ is None else environ).get(TRIAL_VARIABLE)
    if not text:
        return None
    spec = json.loads(text)
    return TrialReport(spec["journal"], spec["study"], int(spec["trial"]),
                       list(spec["images"]), spec["metric"])
