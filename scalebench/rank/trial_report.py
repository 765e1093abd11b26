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
# Trials the median pruner lets finish before it prunes any, and evaluations of a trial's
# first image it lets pass before it judges: a curve's first iterations say little.
PRUNER_STARTUP_TRIALS = 4
PRUNER_WARMUP_STEPS = 5


def study_pruner() -> Any:
    """The rule that stops a trial: below the median of the complete trials at the same
    step. The tuner's workers and every trial's rank 0 judge by this one."""
    import optuna

    return optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS,
                                       n_warmup_steps=PRUNER_WARMUP_STEPS)


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

    def _optuna_trial(self) -> Any:
        if self._trial is None:
            import optuna

            storage = journal_storage(self.journal)
            study = optuna.load_study(study_name=self.study, storage=storage,
                                      pruner=study_pruner())
            trial_id = storage.get_trial_id_from_study_id_trial_number(
                storage.get_study_id_from_name(self.study), self.trial)
            self._trial = optuna.trial.Trial(study, trial_id)
            self._pruned_before = PRUNED_ATTRIBUTE in self._trial.user_attrs
        return self._trial

    def should_stop(self, image: str, iteration: int, max_iter: int, value: float) -> bool:
        """Report the best ``metric`` so far on ``image`` at ``iteration`` and whether the
        pruner stops the trial (also when an earlier image of it was stopped)."""
        trial = self._optuna_trial()
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
