"""How a study picks its next setting: optuna's Gaussian-process Bayesian optimisation
(``GPSampler``), after STARTUP_TRIALS settings drawn at random.

On PGD-TV (tools/tuning_check.py's problems, 2026-12-08), TPE with 10 trials ended 0.42 and
0.46 dB below an exhaustive grid's best validation mean on CT and on super-resolution, whose
best step lies on the range's upper bound, which TPE's samples seldom reach; this sampler
with 12 trials ended 0.04 and 0.06 dB above it (docs/performance.md). optuna's Gaussian
process models the complete trials only: a pruned trial would tell it nothing, and it would
propose the same setting again, to be pruned again (it did, three times in a row).
``PrunedAwareSampler`` hands it each pruned trial as complete at the worst complete trial's
value: a setting stopped for being hopeless is modelled as bad. Imported only where a study
is opened: bad input is refused before optuna is imported.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, GPSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState

STARTUP_TRIALS = 5  # random settings before the model (optuna's default 10 is a whole tuning)


def modelled_trials(study: optuna.Study,
                    search_space: dict[str, BaseDistribution]) -> list[FrozenTrial]:
    """The complete trials, and each pruned one as complete at the worst complete value."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return []
    worst = min(trial.value for trial in complete)
    pruned = [optuna.trial.create_trial(params=trial.params, distributions=trial.distributions,
                                        value=worst)
              for trial in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
              if trial.params.keys() == search_space.keys()]
    return complete + pruned


class PrunedAwareSampler(BaseSampler):
    """``GPSampler`` modelling pruned trials as the worst complete one (the module says
    why); settings at random before STARTUP_TRIALS trials are complete."""

    def __init__(self, seed: int) -> None:
        self.random = RandomSampler(seed=seed)
        with warnings.catch_warnings():  # optuna calls the option experimental: known, pinned
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.model = GPSampler(seed=seed, independent_sampler=self.random,
                                   n_startup_trials=STARTUP_TRIALS,
                                   deterministic_objective=True,
                                   warn_independent_sampling=False)

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.model.infer_relative_search_space(study, trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if not search_space or len(complete) < STARTUP_TRIALS:
            return {}  # each parameter then comes from sample_independent: at random
        running = [other for other in study.get_trials(deepcopy=False,
                                                       states=(TrialState.RUNNING,))
                   if other.number != trial.number and search_space.keys() <= other.params.keys()]
        import torch

        with torch.device("cpu"):  # as GPSampler.sample_relative (a CUDA default device)
            # optuna's own step after its bookkeeping, pinned with optuna (constraints.txt)
            return self.model._sample_relative_impl(study, modelled_trials(study, search_space),
                                                    running, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.random.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.model.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Any) -> None:
        self.model.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.model.reseed_rng()
